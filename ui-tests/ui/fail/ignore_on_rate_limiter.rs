use resilience_runtime::rate_limiter;
use resilience_ui_tests::CallError;

fn is_client_error(_: &CallError) -> bool {
    false
}

#[rate_limiter(name = "payments", ignore = is_client_error)]
fn pay() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = pay();
}
