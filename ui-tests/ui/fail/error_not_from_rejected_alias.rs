use resilience_runtime::bulkhead;

#[derive(Debug)]
struct OrderError;

type Result<T> = std::result::Result<T, OrderError>;

#[bulkhead(name = "orders")]
fn guarded() -> Result<u32> {
    Ok(1)
}

fn main() {
    let _ = guarded();
}
