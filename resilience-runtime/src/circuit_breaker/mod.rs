//! The circuit breaker.
//!
//! SKELETON: signatures agreed between the registry/chain and the breaker implementation.

use std::fmt;

use crate::clock::Clock;
use crate::error::{ConfigError, Rejected};
use crate::name::Name;

/// The states of a circuit breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CircuitState {
    /// Calls pass and are recorded.
    Closed,
    /// Calls are refused.
    Open,
    /// A bounded number of probe calls pass.
    HalfOpen,
    /// Calls pass, nothing recorded.
    Disabled,
    /// Calls are refused until a manual transition.
    ForcedOpen,
    /// Calls pass and are recorded; the state never changes by itself.
    MetricsOnly,
}

impl fmt::Display for CircuitState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Sliding window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlidingWindow {
    /// The last N calls.
    CountBased(u32),
    /// The calls of the last N seconds.
    TimeBased(u32),
}

/// Breaker config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CircuitBreakerConfig {
    base: Option<Name>,
}

impl CircuitBreakerConfig {
    /// Builder.
    pub fn builder() -> CircuitBreakerConfigBuilder {
        CircuitBreakerConfigBuilder::default()
    }
    /// Base.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }
    /// Whether rejections by other aspects count as failures.
    pub fn record_rejections(&self) -> bool {
        false
    }
    pub(crate) fn inherit(&self, _base: &Self) -> Result<Self, ConfigError> {
        todo!()
    }
}

/// Builder.
#[derive(Clone, Debug, Default)]
pub struct CircuitBreakerConfigBuilder {
    config: CircuitBreakerConfig,
}

impl CircuitBreakerConfigBuilder {
    /// Threshold.
    pub fn failure_rate_threshold(self, _percent: f32) -> Self {
        self
    }
    /// Base.
    pub fn base(mut self, base: impl Into<Name>) -> Self {
        self.config.base = Some(base.into());
        self
    }
    /// Build.
    pub fn build(self) -> Result<CircuitBreakerConfig, ConfigError> {
        todo!()
    }
}

/// A circuit breaker.
#[derive(Debug)]
pub struct CircuitBreaker {
    name: Name,
    id: u64,
    config: CircuitBreakerConfig,
    #[allow(dead_code)]
    clock: Clock,
}

impl CircuitBreaker {
    /// New on the system clock.
    pub fn new(name: impl Into<Name>, config: CircuitBreakerConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }
    /// New on `clock`.
    pub fn with_clock(name: impl Into<Name>, config: CircuitBreakerConfig, clock: Clock) -> Self {
        CircuitBreaker {
            name: name.into(),
            id: crate::next_instance_id(),
            config,
            clock,
        }
    }
    /// Name.
    pub fn name(&self) -> &Name {
        &self.name
    }
    /// Config.
    pub fn config(&self) -> &CircuitBreakerConfig {
        &self.config
    }
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
    /// State.
    pub fn state(&self) -> CircuitState {
        todo!()
    }
    /// Permission.
    pub fn try_acquire(&self) -> Result<CircuitPermit<'_>, Rejected> {
        todo!()
    }
}

/// Permission to make one call.
#[derive(Debug)]
pub struct CircuitPermit<'a> {
    #[allow(dead_code)]
    breaker: &'a CircuitBreaker,
}

impl CircuitPermit<'_> {
    /// Success.
    pub fn record_success(self) {}
    /// Failure.
    pub fn record_failure(self) {}
    /// Neither.
    pub fn record_ignored(self) {}
    /// Rejected further in by another aspect.
    pub fn record_rejected(self, _rejection: &Rejected) {}
}
