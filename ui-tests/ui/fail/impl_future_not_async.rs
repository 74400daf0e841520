use std::future::Future;

use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

#[bulkhead(name = "orders")]
fn guarded() -> impl Future<Output = Result<u32, CallError>> {
    async { Ok(1) }
}

fn main() {
    let _ = guarded();
}
