use resilience_runtime::circuit_breaker;
use resilience_ui_tests::CallError;

fn is_overloaded(_: &CallError) -> bool {
    false
}

#[circuit_breaker(name = "orders", overload = is_overloaded)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
