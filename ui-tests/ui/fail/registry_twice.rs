use std::sync::LazyLock;

use resilience_runtime::{bulkhead, circuit_breaker, Registry};
use resilience_ui_tests::CallError;

static BILLING: LazyLock<Registry> = LazyLock::new(Registry::new);

#[bulkhead(name = "orders", registry = BILLING)]
#[circuit_breaker(name = "orders", registry = BILLING)]
fn guarded() -> Result<u32, CallError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
