use resilience_runtime::{bulkhead, circuit_breaker, Rejected};

fn on_rejected(_rejected: Rejected) -> u32 {
    0
}

#[bulkhead(name = "orders", fallback = on_rejected)]
#[circuit_breaker(name = "orders", fallback = on_rejected)]
fn guarded() -> u32 {
    1
}

fn main() {
    let _ = guarded();
}
