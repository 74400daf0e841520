#![deny(warnings)]
// The canonical stack, bulkhead written first: sync and async, with and without a fallback.
use resilience_runtime::{bulkhead, circuit_breaker, Rejected};
use resilience_ui_tests::CallError;

#[bulkhead(name = "ui-orders")]
#[circuit_breaker(name = "ui-orders")]
fn create_order(id: u32) -> Result<u32, CallError> {
    Ok(id + 1)
}

#[bulkhead(name = "ui-orders-async")]
#[circuit_breaker(name = "ui-orders-async")]
async fn create_order_async(id: u32) -> Result<u32, CallError> {
    tokio::task::yield_now().await;
    Ok(id + 1)
}

fn on_rejected(_id: u32, _rejected: Rejected) -> u32 {
    0
}

#[bulkhead(name = "ui-count", fallback = on_rejected)]
#[circuit_breaker(name = "ui-count")]
fn count(id: u32) -> u32 {
    id
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(create_order(1), Ok(2));
    assert_eq!(create_order_async(1).await, Ok(2));
    assert_eq!(count(7), 7);
}
