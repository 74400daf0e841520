#![deny(warnings)]
// Methods with `&self`: guarded one by one, and every method of an impl block at once.
use resilience_runtime::{bulkhead, circuit_breaker, Rejected};
use resilience_ui_tests::CallError;

struct Orders {
    base: u32,
}

impl Orders {
    #[bulkhead(name = "ui-method")]
    fn create(&self, id: u32) -> Result<u32, CallError> {
        Ok(self.base + id)
    }

    async fn on_rejected(&self, _id: u32, _rejected: Rejected) -> u32 {
        0
    }

    #[circuit_breaker(name = "ui-method", fallback = on_rejected)]
    async fn count(&self, id: u32) -> u32 {
        self.base + id
    }
}

struct Payments {
    base: u32,
}

#[bulkhead(name = "ui-payments")]
impl Payments {
    fn pay(&self, amount: u32) -> Result<u32, CallError> {
        Ok(self.base + amount)
    }

    #[circuit_breaker(name = "ui-payments")]
    async fn refund(&self, amount: u32) -> Result<u32, CallError> {
        Ok(self.base - amount)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let orders = Orders { base: 10 };
    assert_eq!(orders.create(1), Ok(11));
    assert_eq!(orders.count(2).await, 12);
    let payments = Payments { base: 10 };
    assert_eq!(payments.pay(1), Ok(11));
    assert_eq!(payments.refund(1).await, Ok(9));
}
