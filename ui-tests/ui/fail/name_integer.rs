use resilience_runtime::circuit_breaker;
use resilience_ui_tests::CallError;

#[circuit_breaker(name = 42)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
