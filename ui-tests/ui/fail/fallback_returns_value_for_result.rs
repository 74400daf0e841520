use resilience_runtime::{bulkhead, Rejected};
use resilience_ui_tests::CallError;

// The fallback returns the `u32` inside the function's `Result`: the error states the
// signature the fallback must have, not `Ok(on_rejected)` written into the attribute.
fn on_rejected(qty: u32, _rejected: Rejected) -> u32 {
    qty
}

#[bulkhead(name = "orders", fallback = on_rejected)]
fn reserve(qty: u32) -> Result<u32, CallError> {
    Ok(qty)
}

fn main() {
    let _ = reserve(1);
}
