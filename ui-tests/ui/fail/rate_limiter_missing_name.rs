use resilience_runtime::rate_limiter;
use resilience_ui_tests::CallError;

#[rate_limiter]
fn pay() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = pay();
}
