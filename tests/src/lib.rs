//! Helpers shared by the workspace-level tests.

use resilience_runtime::{BulkheadConfig, CircuitBreakerConfig, Registry, Rejected, SlidingWindow};

/// The error type of the guarded functions in the tests: a rejection, or a failure of the
/// (simulated) dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// A guard refused the call.
    Rejected(Rejected),
    /// The dependency failed.
    Downstream(&'static str),
}

impl From<Rejected> for CallError {
    fn from(rejected: Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}

impl CallError {
    /// The rejection, if this is one.
    pub fn rejection(&self) -> Option<&Rejected> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Downstream(_) => None,
        }
    }
}

/// A registry of its own with the bulkhead and the breaker `orders`: `bulkhead_calls`
/// concurrent calls (rejected at once when full); a count window of 10, at least 4 calls, 50 %
/// failure rate, rejections recorded as failures if `record_rejections`.
pub fn orders_registry(bulkhead_calls: u32, record_rejections: bool) -> Registry {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "orders",
            BulkheadConfig::builder()
                .max_concurrent_calls(bulkhead_calls)
                .build()
                .expect("a valid bulkhead config"),
        )
        .expect("configured");
    registry
        .configure_circuit_breaker(
            "orders",
            CircuitBreakerConfig::builder()
                .failure_rate_threshold(50.0)
                .sliding_window(SlidingWindow::CountBased(10))
                .minimum_number_of_calls(4)
                .record_rejections(record_rejections)
                .build()
                .expect("a valid breaker config"),
        )
        .expect("configured");
    registry
}

/// A tiny deterministic generator (xorshift64*), so that a randomized test replays with its
/// seed.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Keeps the panics a test injects (`panic!("injected panic")`) out of the output, and every
/// other panic in it.
pub fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"injected panic") {
                default(info);
            }
        }));
    });
}
