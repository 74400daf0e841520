use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

struct Orders;

#[bulkhead(name = "orders")]
impl Orders {
    fn list(&self) -> Result<u32, CallError> {
        Ok(1)
    }

    #[bulkhead(name = "orders-create")]
    fn create(&self) -> Result<u32, CallError> {
        Ok(2)
    }
}

fn main() {
    let _ = Orders.list();
    let _ = Orders.create();
}
