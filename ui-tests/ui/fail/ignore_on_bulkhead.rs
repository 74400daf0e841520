use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

fn is_client_error(_: &CallError) -> bool {
    false
}

#[bulkhead(name = "orders", ignore = is_client_error)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
