use resilience_runtime::{bulkhead, Rejected};

fn on_rejected(_id: u32, _rejected: Rejected) -> u32 {
    0
}

#[bulkhead(name = "orders", fallback = on_rejected)]
async fn guarded(id: u32) -> u32 {
    id + 1
}

fn main() {
    let _ = guarded(1);
}
