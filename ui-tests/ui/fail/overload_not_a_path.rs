use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

#[bulkhead(name = "orders", overload = "is_overloaded")]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
