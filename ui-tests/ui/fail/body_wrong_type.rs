// The body is checked against the function's own return type: a tail or a `return` of
// another type is reported at that expression, not at the attribute.
use resilience_runtime::{bulkhead, Rejected};
use resilience_ui_tests::CallError;

fn on_rejected(_id: u32, _rejected: Rejected) -> u32 {
    0
}

#[bulkhead(name = "orders")]
fn tail(id: u32) -> Result<u32, CallError> {
    id + 1
}

#[bulkhead(name = "orders", fallback = on_rejected)]
fn early_return(id: u32) -> u32 {
    if id == 0 {
        return "none";
    }
    id
}

fn main() {
    let _ = tail(1);
    let _ = early_return(1);
}
