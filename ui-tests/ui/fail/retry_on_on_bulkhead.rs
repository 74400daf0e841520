use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

fn is_transient(_: &CallError) -> bool {
    true
}

#[bulkhead(name = "inventory", retry_on = is_transient)]
fn lookup(sku: u32) -> Result<u32, CallError> {
    Ok(sku)
}

fn main() {
    let _ = lookup(1);
}
