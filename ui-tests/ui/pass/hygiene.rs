#![deny(warnings)]
// The generated code cannot clash with user names: locals named like the generated ones, and
// a local `mod core` at module level.
#![allow(non_snake_case)]

use resilience_runtime::{bulkhead, circuit_breaker, Rejected};
use resilience_ui_tests::CallError;

#[allow(dead_code)]
mod core {}

#[bulkhead(name = "ui-hygiene")]
#[circuit_breaker(name = "ui-hygiene")]
fn arguments(
    __plan: u32,
    __entered: u32,
    __rejected: u32,
    __output: u32,
    __result: u32,
    __error: u32,
    __admission: u32,
    __call: u32,
) -> Result<u32, CallError> {
    Ok(__plan + __entered + __rejected + __output + __result + __error + __admission + __call)
}

#[bulkhead(name = "ui-hygiene-locals")]
async fn locals() -> Result<u32, CallError> {
    let __plan = 1u32;
    let __entered = 2u32;
    let __rejected = 3u32;
    let __output = 4u32;
    let __result = 5u32;
    let __resilience_return_type = 6u32;
    Ok(__plan + __entered + __rejected + __output + __result + __resilience_return_type)
}

fn on_rejected(__plan: u32, __rejected: Rejected) -> u32 {
    drop(__rejected);
    __plan
}

#[circuit_breaker(name = "ui-hygiene-fallback", fallback = on_rejected)]
fn fallback(__plan: u32) -> u32 {
    __plan + 1
}

// A lone sync gate with a fallback: the body and the fallback are one closure, whose
// argument is the generated `__admission`.
#[circuit_breaker(name = "ui-hygiene-lone", fallback = on_rejected)]
fn lone(__plan: u32) -> u32 {
    let __admission = 1u32;
    let __call = 2u32;
    __plan + __admission + __call
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(arguments(1, 2, 3, 4, 5, 6, 7, 8), Ok(36));
    assert_eq!(locals().await, Ok(21));
    assert_eq!(fallback(1), 2);
    assert_eq!(lone(1), 4);
}
