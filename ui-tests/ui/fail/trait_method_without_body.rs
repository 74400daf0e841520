use resilience_runtime::bulkhead;
use resilience_ui_tests::CallError;

trait Orders {
    #[bulkhead(name = "orders")]
    fn create(&self) -> Result<u32, CallError>;
}

struct Service;

impl Orders for Service {
    fn create(&self) -> Result<u32, CallError> {
        Ok(1)
    }
}

fn main() {
    let _ = Service.create();
}
