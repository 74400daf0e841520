use resilience_runtime::{bulkhead, rate_limiter};
use resilience_ui_tests::CallError;

#[rate_limiter(name = "payments")]
#[bulkhead(name = "payments")]
#[rate_limiter(name = "payments-burst")]
fn pay() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = pay();
}
