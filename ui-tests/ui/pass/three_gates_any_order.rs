use resilience_runtime::{bulkhead, circuit_breaker, rate_limiter, Rejected};
use resilience_ui_tests::CallError;

#[circuit_breaker(name = "three")]
#[bulkhead(name = "three")]
#[rate_limiter(name = "three")]
async fn breaker_written_first(x: u32) -> Result<u32, CallError> {
    Ok(x)
}

struct Payments;

#[rate_limiter(name = "payments")]
impl Payments {
    #[bulkhead(name = "payments", fallback = on_rejected)]
    fn pay(&self, cents: u64) -> Result<u64, CallError> {
        Ok(cents)
    }

    fn on_rejected(&self, _cents: u64, _rejected: Rejected) -> Result<u64, CallError> {
        Ok(0)
    }
}

fn main() {
    let _ = breaker_written_first(1);
    let _ = Payments.pay(5);
}
