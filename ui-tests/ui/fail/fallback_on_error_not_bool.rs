use resilience_runtime::circuit_breaker;
use resilience_ui_tests::CallError;

fn on_error(_error: CallError) -> Result<u32, CallError> {
    Ok(0)
}

#[circuit_breaker(name = "orders", fallback = on_error, fallback_on_error = "yes")]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
