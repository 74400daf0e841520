use resilience_runtime::retry;
use resilience_ui_tests::CallError;

fn server_retry_after(_: &CallError) -> Option<u64> {
    None
}

#[retry(name = "payments", retry_after = server_retry_after)]
fn pay(cents: u32) -> Result<u32, CallError> {
    Ok(cents)
}

fn main() {
    let _ = pay(1);
}
