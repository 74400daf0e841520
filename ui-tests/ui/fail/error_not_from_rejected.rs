use resilience_runtime::bulkhead;

#[derive(Debug)]
struct OrderError;

#[bulkhead(name = "orders")]
fn guarded() -> Result<u32, OrderError> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
