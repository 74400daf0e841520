use resilience_runtime::circuit_breaker;

#[circuit_breaker(name = "orders")]
fn guarded() {}

fn main() {
    guarded();
}
