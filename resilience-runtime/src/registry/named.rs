//! The registry's methods named for one kind each (`bulkhead`, `configure_bulkhead`, ...): one
//! line over the generic methods, documented there.

use std::sync::Arc;

use super::Registry;
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerConfig};
use crate::error::ConfigError;
use crate::fault::{FaultConfig, FaultInjector};
use crate::hedge::{Hedge, HedgeConfig};
use crate::name::Name;
use crate::rate_limiter::{RateLimiter, RateLimiterConfig};
use crate::retry::{Retry, RetryConfig};
use crate::time_limiter::{TimeLimiter, TimeLimiterConfig};

impl Registry {
    // ----- bulkheads -----

    /// [`instance`](Self::instance) for a bulkhead: the bulkhead `name`, made on first use.
    pub fn bulkhead(&self, name: &str) -> Arc<Bulkhead> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a bulkhead.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_bulkhead(
        &self,
        name: impl Into<Name>,
        config: BulkheadConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<Bulkhead>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a bulkhead.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_bulkhead(&self, config: BulkheadConfig) -> Result<(), ConfigError> {
        self.configure_default::<Bulkhead>(config)
    }

    /// [`instances`](Self::instances) for bulkheads: every one made so far, sorted by name.
    pub fn bulkheads(&self) -> Vec<Arc<Bulkhead>> {
        self.instances()
    }

    /// [`config`](Self::config) for a bulkhead: the effective configuration of `name`.
    pub fn bulkhead_config(&self, name: &str) -> BulkheadConfig {
        self.config::<Bulkhead>(name)
    }

    // ----- rate limiters -----

    /// [`instance`](Self::instance) for a rate limiter: the rate limiter `name`, made on first use.
    pub fn rate_limiter(&self, name: &str) -> Arc<RateLimiter> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a rate limiter.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_rate_limiter(
        &self,
        name: impl Into<Name>,
        config: RateLimiterConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<RateLimiter>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a rate limiter.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_rate_limiter(
        &self,
        config: RateLimiterConfig,
    ) -> Result<(), ConfigError> {
        self.configure_default::<RateLimiter>(config)
    }

    /// [`instances`](Self::instances) for rate limiters: every one made so far, sorted by name.
    pub fn rate_limiters(&self) -> Vec<Arc<RateLimiter>> {
        self.instances()
    }

    /// [`config`](Self::config) for a rate limiter: the effective configuration of `name`.
    pub fn rate_limiter_config(&self, name: &str) -> RateLimiterConfig {
        self.config::<RateLimiter>(name)
    }

    // ----- retries -----

    /// [`instance`](Self::instance) for a retry: the retry `name`, made on first use.
    pub fn retry(&self, name: &str) -> Arc<Retry> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a retry.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_retry(
        &self,
        name: impl Into<Name>,
        config: RetryConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<Retry>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a retry.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_retry(&self, config: RetryConfig) -> Result<(), ConfigError> {
        self.configure_default::<Retry>(config)
    }

    /// [`instances`](Self::instances) for retries: every one made so far, sorted by name.
    pub fn retries(&self) -> Vec<Arc<Retry>> {
        self.instances()
    }

    /// [`config`](Self::config) for a retry: the effective configuration of `name`.
    pub fn retry_config(&self, name: &str) -> RetryConfig {
        self.config::<Retry>(name)
    }

    // ----- time limiters -----

    /// [`instance`](Self::instance) for a time limiter: the time limiter `name`, made on first use.
    pub fn time_limiter(&self, name: &str) -> Arc<TimeLimiter> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a time limiter.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_time_limiter(
        &self,
        name: impl Into<Name>,
        config: TimeLimiterConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<TimeLimiter>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a time limiter.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_time_limiter(
        &self,
        config: TimeLimiterConfig,
    ) -> Result<(), ConfigError> {
        self.configure_default::<TimeLimiter>(config)
    }

    /// [`instances`](Self::instances) for time limiters: every one made so far, sorted by name.
    pub fn time_limiters(&self) -> Vec<Arc<TimeLimiter>> {
        self.instances()
    }

    /// [`config`](Self::config) for a time limiter: the effective configuration of `name`.
    pub fn time_limiter_config(&self, name: &str) -> TimeLimiterConfig {
        self.config::<TimeLimiter>(name)
    }

    // ----- hedges -----

    /// [`instance`](Self::instance) for a hedge: the hedge `name`, made on first use.
    pub fn hedge(&self, name: &str) -> Arc<Hedge> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a hedge.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_hedge(
        &self,
        name: impl Into<Name>,
        config: HedgeConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<Hedge>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a hedge.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_hedge(&self, config: HedgeConfig) -> Result<(), ConfigError> {
        self.configure_default::<Hedge>(config)
    }

    /// [`instances`](Self::instances) for hedges: every one made so far, sorted by name.
    pub fn hedges(&self) -> Vec<Arc<Hedge>> {
        self.instances()
    }

    /// [`config`](Self::config) for a hedge: the effective configuration of `name`.
    pub fn hedge_config(&self, name: &str) -> HedgeConfig {
        self.config::<Hedge>(name)
    }

    // ----- fault injectors -----

    /// [`instance`](Self::instance) for a fault injector: the faults of `name`, made on first use.
    pub fn fault(&self, name: &str) -> Arc<FaultInjector> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a fault injector.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_fault(
        &self,
        name: impl Into<Name>,
        config: FaultConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<FaultInjector>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a fault injector.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_fault(&self, config: FaultConfig) -> Result<(), ConfigError> {
        self.configure_default::<FaultInjector>(config)
    }

    /// [`instances`](Self::instances) for fault injectors: every one made so far, sorted by name.
    pub fn fault_injectors(&self) -> Vec<Arc<FaultInjector>> {
        self.instances()
    }

    /// [`config`](Self::config) for a fault injector: the effective configuration of `name`.
    pub fn fault_config(&self, name: &str) -> FaultConfig {
        self.config::<FaultInjector>(name)
    }

    // ----- circuit breakers -----

    /// [`instance`](Self::instance) for a circuit breaker: the circuit breaker `name`, made on first use.
    pub fn circuit_breaker(&self, name: &str) -> Arc<CircuitBreaker> {
        self.instance(name)
    }

    /// [`configure`](Self::configure) for a circuit breaker.
    ///
    /// # Errors
    ///
    /// As [`configure`](Self::configure).
    pub fn configure_circuit_breaker(
        &self,
        name: impl Into<Name>,
        config: CircuitBreakerConfig,
    ) -> Result<(), ConfigError> {
        self.configure::<CircuitBreaker>(name, config)
    }

    /// [`configure_default`](Self::configure_default) for a circuit breaker.
    ///
    /// # Errors
    ///
    /// As [`configure_default`](Self::configure_default).
    pub fn configure_default_circuit_breaker(
        &self,
        config: CircuitBreakerConfig,
    ) -> Result<(), ConfigError> {
        self.configure_default::<CircuitBreaker>(config)
    }

    /// [`instances`](Self::instances) for circuit breakers: every one made so far, sorted by name.
    pub fn circuit_breakers(&self) -> Vec<Arc<CircuitBreaker>> {
        self.instances()
    }

    /// [`config`](Self::config) for a circuit breaker: the effective configuration of `name`.
    pub fn circuit_breaker_config(&self, name: &str) -> CircuitBreakerConfig {
        self.config::<CircuitBreaker>(name)
    }
}
