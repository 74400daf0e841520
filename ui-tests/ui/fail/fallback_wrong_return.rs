use resilience_runtime::{bulkhead, Rejected};

fn on_rejected(_id: u32, _rejected: Rejected) -> String {
    String::new()
}

#[bulkhead(name = "orders", fallback = on_rejected)]
fn guarded(id: u32) -> u32 {
    id + 1
}

fn main() {
    let _ = guarded(1);
}
