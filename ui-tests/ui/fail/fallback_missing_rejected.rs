use resilience_runtime::bulkhead;

fn on_rejected(id: u32) -> u32 {
    id
}

#[bulkhead(name = "orders", fallback = on_rejected)]
fn guarded(id: u32) -> u32 {
    id + 1
}

fn main() {
    let _ = guarded(1);
}
