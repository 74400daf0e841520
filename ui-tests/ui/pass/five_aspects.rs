use resilience_runtime::{bulkhead, circuit_breaker, rate_limiter, retry, time_limiter};
use resilience_ui_tests::CallError;

fn is_transient(e: &CallError) -> bool {
    matches!(e, CallError::Downstream(_))
}

#[time_limiter(name = "inventory")]
#[retry(name = "inventory", retry_on = is_transient)]
#[circuit_breaker(name = "inventory")]
#[rate_limiter(name = "inventory")]
#[bulkhead(name = "inventory")]
async fn reserve(sku: String, quantity: &u32) -> Result<String, CallError> {
    Ok(format!("{sku}x{quantity}"))
}

#[retry(name = "inventory")]
fn reserve_sync(sku: String, log: &mut Vec<String>) -> Result<(), CallError> {
    log.push(sku);
    Ok(())
}

fn main() {
    let _ = reserve(String::new(), &1);
    let _ = reserve_sync(String::new(), &mut Vec::new());
}
