use resilience_runtime::{bulkhead, Rejected};

fn on_rejected(_pair: (u32, u32), _rejected: Rejected) -> u32 {
    0
}

#[bulkhead(name = "orders", fallback = on_rejected)]
fn guarded((a, _): (u32, u32)) -> u32 {
    a
}

fn main() {
    let _ = guarded((1, 2));
}
