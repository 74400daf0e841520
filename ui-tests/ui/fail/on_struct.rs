use resilience_runtime::bulkhead;

#[bulkhead(name = "orders")]
struct Orders {
    count: u32,
}

fn main() {
    let orders = Orders { count: 1 };
    let _ = orders.count;
}
