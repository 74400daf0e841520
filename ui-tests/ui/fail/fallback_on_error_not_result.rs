use resilience_runtime::{circuit_breaker, Rejected};

fn on_error(_rejected: Rejected) -> u32 {
    0
}

#[circuit_breaker(name = "orders", fallback = on_error, fallback_on_error = true)]
fn guarded() -> u32 {
    1
}

fn main() {
    let _ = guarded();
}
