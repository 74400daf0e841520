use resilience_runtime::{bulkhead, circuit_breaker};
use resilience_ui_tests::CallError;

#[bulkhead(name = "orders")]
#[circuit_breaker]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
