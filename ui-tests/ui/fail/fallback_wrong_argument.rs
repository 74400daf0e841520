use resilience_runtime::{bulkhead, Rejected};
use resilience_ui_tests::CallError;

// The fallback takes a `u64` where the function takes a `u32`: the error states the
// signature the fallback must have, not a conversion to write into the function's signature.
fn on_rejected(qty: u64, _rejected: Rejected) -> Result<u32, CallError> {
    Ok(qty as u32)
}

#[bulkhead(name = "orders", fallback = on_rejected)]
fn reserve(qty: u32) -> Result<u32, CallError> {
    Ok(qty)
}

fn main() {
    let _ = reserve(1);
}
