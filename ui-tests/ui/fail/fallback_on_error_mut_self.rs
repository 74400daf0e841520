use resilience_runtime::circuit_breaker;
use resilience_ui_tests::CallError;

struct Cart {
    items: u32,
}

impl Cart {
    fn on_error(&mut self, _error: CallError) -> Result<u32, CallError> {
        Ok(self.items)
    }

    #[circuit_breaker(name = "cart", fallback = on_error, fallback_on_error = true)]
    fn add(&mut self) -> Result<u32, CallError> {
        self.items += 1;
        Ok(self.items)
    }
}

fn main() {
    let mut cart = Cart { items: 0 };
    let _ = cart.add();
}
