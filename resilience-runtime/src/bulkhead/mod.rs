//! The semaphore bulkhead: at most `max_concurrent_calls` calls at once.
//!
//! SKELETON: signatures agreed between the registry/chain and the bulkhead implementation.

mod config;

pub use config::{BulkheadConfig, BulkheadConfigBuilder, MAX_CONCURRENT_CALLS_LIMIT};

use crate::clock::Clock;
use crate::error::Rejected;
use crate::name::Name;

/// A semaphore bulkhead.
#[derive(Debug)]
pub struct Bulkhead {
    name: Name,
    id: u64,
    config: BulkheadConfig,
    #[allow(dead_code)]
    clock: Clock,
}

impl Bulkhead {
    /// A bulkhead on the system clock.
    pub fn new(name: impl Into<Name>, config: BulkheadConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A bulkhead reading `clock` (for the time a rejected caller waited).
    pub fn with_clock(name: impl Into<Name>, config: BulkheadConfig, clock: Clock) -> Self {
        Bulkhead {
            name: name.into(),
            id: crate::next_instance_id(),
            config,
            clock,
        }
    }

    /// The instance name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The configuration in force.
    pub fn config(&self) -> &BulkheadConfig {
        &self.config
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Free permits now.
    pub fn available_concurrent_calls(&self) -> u32 {
        todo!()
    }

    /// `max_concurrent_calls` of the configuration.
    pub fn max_allowed_concurrent_calls(&self) -> u32 {
        self.config.max_concurrent_calls()
    }

    /// Counters.
    pub fn metrics(&self) -> BulkheadMetrics {
        todo!()
    }

    /// Takes a free permit without waiting.
    pub fn try_acquire(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        todo!()
    }

    /// Waits by blocking the thread.
    pub fn acquire_blocking(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        todo!()
    }

    /// Waits asynchronously.
    pub async fn acquire(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        todo!()
    }
}

/// Counters of a bulkhead.
#[derive(Clone, Copy, Debug)]
pub struct BulkheadMetrics {}

/// A held permit, released on drop.
#[derive(Debug)]
pub struct BulkheadPermit<'a> {
    #[allow(dead_code)]
    bulkhead: &'a Bulkhead,
}
