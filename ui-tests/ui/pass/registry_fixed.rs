//! A fixed registry for one function (`registry = path`), on sync and async functions and
//! methods, stacked.
use std::sync::LazyLock;

use resilience_runtime::{bulkhead, circuit_breaker, retry, Registry};
use resilience_ui_tests::CallError;

static BILLING: LazyLock<Registry> = LazyLock::new(Registry::new);

mod registries {
    pub static AUDIT: std::sync::LazyLock<resilience_runtime::Registry> =
        std::sync::LazyLock::new(resilience_runtime::Registry::new);
}

#[bulkhead(name = "orders", registry = BILLING)]
#[circuit_breaker(name = "orders")]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

#[retry(name = "audit", registry = registries::AUDIT)]
async fn audited() -> Result<u32, CallError> {
    Ok(2)
}

struct Ledger;

#[bulkhead(name = "ledger", registry = BILLING)]
impl Ledger {
    fn post(&self) -> Result<u32, CallError> {
        Ok(3)
    }
}

fn main() {
    assert_eq!(guarded(), Ok(1));
    assert_eq!(BILLING.bulkhead("orders").metrics().permitted_calls(), 1);
    assert_eq!(BILLING.circuit_breaker("orders").metrics().number_of_successful_calls(), 1);
    let audited = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(audited());
    assert_eq!(audited, Ok(2));
    assert_eq!(registries::AUDIT.retries().len(), 1);
    assert_eq!(Ledger.post(), Ok(3));
    assert!(Registry::global().bulkheads().is_empty());
}
