use resilience_runtime::circuit_breaker;

#[derive(Debug)]
struct OrderError;

#[circuit_breaker(name = "orders")]
async fn guarded() -> Result<u32, OrderError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
