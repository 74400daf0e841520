use resilience_runtime::{bulkhead, Rejected};

struct Orders;

#[bulkhead(name = "orders", fallback = on_rejected)]
impl Orders {
    fn on_rejected(&self, _rejected: Rejected) -> u32 {
        0
    }

    fn count(&self) -> u32 {
        1
    }
}

fn main() {
    let _ = Orders.count();
}
