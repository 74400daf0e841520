use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

static BILLING: &str = "billing";

#[bulkhead(name = "orders", registry = BILLING)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
