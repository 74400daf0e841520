#![deny(warnings)]
// A renamed dependency: `crate = "path"` tells the generated code where the runtime is.
extern crate resilience_runtime as renamed;

use resilience_ui_tests::CallError;

#[renamed::bulkhead(name = "ui-renamed", crate = "renamed")]
#[renamed::circuit_breaker(name = "ui-renamed")]
fn guarded(id: u32) -> Result<u32, CallError> {
    Ok(id)
}

fn on_rejected(_rejected: renamed::Rejected) -> u32 {
    0
}

#[renamed::circuit_breaker(name = "ui-renamed-fallback", fallback = on_rejected, crate = renamed)]
fn with_fallback() -> u32 {
    1
}

fn main() {
    assert_eq!(guarded(3), Ok(3));
    assert_eq!(with_fallback(), 1);
}
