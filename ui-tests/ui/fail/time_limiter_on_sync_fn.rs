use resilience_runtime::time_limiter;
use resilience_ui_tests::CallError;

#[time_limiter(name = "inventory")]
fn lookup(sku: u32) -> Result<u32, CallError> {
    Ok(sku)
}

fn main() {
    let _ = lookup(1);
}
