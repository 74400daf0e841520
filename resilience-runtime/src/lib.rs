#![doc = include_str!("../../README.md")]
#![forbid(unsafe_code)]

mod aspect;
pub mod bulkhead;
mod chain;
pub mod circuit_breaker;
mod clock;
mod error;
mod name;
mod registry;
mod sync;

pub use aspect::Aspect;
pub use bulkhead::{Bulkhead, BulkheadConfig, BulkheadPermit};
pub use chain::{CallOutcome, Guard, Plan, PlanCache, ReentrancyPolicy};
pub use circuit_breaker::{
    CircuitBreaker, CircuitBreakerConfig, CircuitPermit, CircuitState, SlidingWindow,
};
pub use clock::{Clock, ManualClock};
pub use error::{ConfigError, Rejected};
pub use name::Name;
pub use registry::Registry;

/// A process-wide unique id for a guard instance, used to recognise re-entry.
pub(crate) fn next_instance_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
