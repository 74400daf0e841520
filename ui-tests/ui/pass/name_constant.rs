//! Instance names as constants, as a service defines them once for its configuration and its
//! annotations.
use resilience_runtime::{bulkhead, circuit_breaker, Registry};
use resilience_ui_tests::CallError;

mod names {
    pub const ORDERS: &str = "orders";
}
const PAYMENTS: &str = "payments";

#[bulkhead(name = names::ORDERS)]
#[circuit_breaker(name = PAYMENTS)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    assert_eq!(guarded(), Ok(1));
    assert_eq!(Registry::global().bulkhead(names::ORDERS).metrics().permitted_calls(), 1);
    assert_eq!(
        Registry::global()
            .circuit_breaker(PAYMENTS)
            .metrics()
            .number_of_successful_calls(),
        1
    );
}
