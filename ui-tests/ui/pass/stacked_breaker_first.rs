#![deny(warnings)]
// The canonical stack, circuit breaker written first: the order written does not matter, the
// registry's precedence does.
use resilience_runtime::{bulkhead, circuit_breaker, Rejected};
use resilience_ui_tests::CallError;

#[circuit_breaker(name = "ui-orders")]
#[bulkhead(name = "ui-orders")]
fn create_order(id: u32) -> Result<u32, CallError> {
    Ok(id + 1)
}

#[circuit_breaker(name = "ui-orders-async")]
#[bulkhead(name = "ui-orders-async")]
async fn create_order_async(id: u32) -> Result<u32, CallError> {
    tokio::task::yield_now().await;
    Ok(id + 1)
}

async fn on_rejected(_id: u32, _rejected: Rejected) -> u32 {
    0
}

#[circuit_breaker(name = "ui-count", fallback = on_rejected)]
#[bulkhead(name = "ui-count")]
async fn count(id: u32) -> u32 {
    id
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(create_order(1), Ok(2));
    assert_eq!(create_order_async(1).await, Ok(2));
    assert_eq!(count(7).await, 7);
}
