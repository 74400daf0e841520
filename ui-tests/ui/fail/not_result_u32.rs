use resilience_runtime::bulkhead;

#[bulkhead(name = "orders")]
fn guarded() -> u32 {
    1
}

fn main() {
    let _ = guarded();
}
