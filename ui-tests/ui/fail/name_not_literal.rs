use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

const ORDERS: u32 = 7;

#[bulkhead(name = ORDERS)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
