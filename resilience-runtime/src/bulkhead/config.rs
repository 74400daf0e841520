//! [`BulkheadConfig`] and its builder.

use std::time::Duration;

use super::adaptive::AdaptiveLimit;
use crate::error::ConfigError;
use crate::fleet::Backend;
use crate::name::Name;

/// The largest `max_concurrent_calls` a bulkhead accepts.
pub const MAX_CONCURRENT_CALLS_LIMIT: u32 = (1 << 24) - 1;

/// How a bulkhead admits calls. Built with [`BulkheadConfig::builder`], validated by
/// [`BulkheadConfigBuilder::build`].
///
/// A configuration records which fields were set explicitly: a configuration built on a
/// [`base`](BulkheadConfigBuilder::base) takes every field it does not set from that base
/// when the registry installs it (Resilience4j's `baseConfig`).
///
/// | field | default |
/// |---|---|
/// | `max_concurrent_calls` | 25 |
/// | `adaptive` | none (the limit is `max_concurrent_calls`) |
/// | `max_wait_duration` | 0 (reject at once when full) |
/// | `fair_call_handling` | `true` (strict FIFO among waiters) |
/// | `backend` | local (the limit is this process's) |
///
/// The limit is either fixed (`max_concurrent_calls`) or [`adaptive`](BulkheadConfigBuilder::adaptive):
/// a configuration sets one or the other, and one built on a base that sets either takes the
/// base's limit only if it sets neither.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::BulkheadConfig;
///
/// let config = BulkheadConfig::builder()
///     .max_concurrent_calls(80)
///     .max_wait_duration(Duration::from_millis(500))
///     .build()?;
/// assert_eq!(config.max_concurrent_calls(), 80);
/// assert!(config.fair_call_handling());
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct BulkheadConfig {
    base: Option<Name>,
    max_concurrent_calls: Option<u32>,
    adaptive: Option<AdaptiveLimit>,
    max_wait_duration: Option<Duration>,
    fair_call_handling: Option<bool>,
    backend: Option<Backend>,
}

crate::config_debug::debug_effective!(BulkheadConfig {
    max_concurrent_calls = |c: &BulkheadConfig| {
        c.max_concurrent_calls.is_some() || c.adaptive.is_some()
    },
    adaptive,
    max_wait_duration,
    fair_call_handling,
    backend,
});

impl BulkheadConfig {
    /// Default `max_concurrent_calls`.
    pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 25;
    /// Default `max_wait_duration`.
    pub const DEFAULT_MAX_WAIT_DURATION: Duration = Duration::ZERO;
    /// Default `fair_call_handling`.
    pub const DEFAULT_FAIR_CALL_HANDLING: bool = true;

    /// A builder starting from the defaults.
    pub fn builder() -> BulkheadConfigBuilder {
        BulkheadConfigBuilder::default()
    }

    /// A builder starting from this configuration (one read from a file, say): change a
    /// setting and build again.
    pub fn to_builder(&self) -> BulkheadConfigBuilder {
        BulkheadConfigBuilder {
            config: self.clone(),
        }
    }

    /// The number of calls the bulkhead admits at once; with an [`adaptive`](Self::adaptive)
    /// limit, the limit it starts with (its `initial_limit`), which
    /// [`Bulkhead::max_allowed_concurrent_calls`](super::Bulkhead::max_allowed_concurrent_calls)
    /// then follows.
    pub fn max_concurrent_calls(&self) -> u32 {
        match &self.adaptive {
            Some(adaptive) => adaptive.settings().initial_limit,
            None => self
                .max_concurrent_calls
                .unwrap_or(Self::DEFAULT_MAX_CONCURRENT_CALLS),
        }
    }

    /// The adaptive limit, if the limit is not fixed.
    pub fn adaptive(&self) -> Option<&AdaptiveLimit> {
        self.adaptive.as_ref()
    }

    /// How long a caller waits for a permit before it is rejected; zero rejects at once.
    pub fn max_wait_duration(&self) -> Duration {
        self.max_wait_duration
            .unwrap_or(Self::DEFAULT_MAX_WAIT_DURATION)
    }

    /// `true`: waiters get freed permits in arrival order. `false`: a caller arriving when a
    /// permit is freed may take it ahead of the waiters (more throughput, no ordering).
    pub fn fair_call_handling(&self) -> bool {
        self.fair_call_handling
            .unwrap_or(Self::DEFAULT_FAIR_CALL_HANDLING)
    }

    /// Where the permits are: this process (the default), or leases in Redis, shared by the
    /// fleet ([`crate::fleet`]).
    pub fn backend(&self) -> Backend {
        self.backend.clone().unwrap_or_default()
    }

    /// The backend as set, for the registry to give a Redis one its connection.
    pub(crate) fn backend_field(&mut self) -> Option<&mut Backend> {
        self.backend.as_mut()
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(&self, base: &BulkheadConfig) -> Result<BulkheadConfig, ConfigError> {
        // The limit, fixed or adaptive, is one setting: this configuration's if it sets it.
        let (max_concurrent_calls, adaptive) =
            if self.max_concurrent_calls.is_some() || self.adaptive.is_some() {
                (self.max_concurrent_calls, self.adaptive)
            } else {
                (base.max_concurrent_calls, base.adaptive)
            };
        let merged = BulkheadConfig {
            base: None,
            max_concurrent_calls,
            adaptive,
            max_wait_duration: self.max_wait_duration.or(base.max_wait_duration),
            fair_call_handling: self.fair_call_handling.or(base.fair_call_handling),
            backend: self.backend.clone().or_else(|| base.backend.clone()),
        };
        merged.validate()?;
        Ok(merged)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let backend = self.backend();
        if !backend.is_local() && self.adaptive.is_some() {
            return Err(ConfigError::new(
                "backend",
                "a fleet bulkhead's limit is fixed: replicas cannot each adapt one shared limit; \
                 set `max_concurrent_calls`, or keep the adaptive limit local",
            ));
        }
        if backend.batch_size().is_some_and(|batch| batch != 1) {
            return Err(ConfigError::new(
                "backend",
                "a batch is a rate limiter's: a fleet bulkhead takes one lease per call; remove \
                 `batch`",
            ));
        }
        if let Some(adaptive) = &self.adaptive {
            if self.max_concurrent_calls.is_some() {
                return Err(ConfigError::new(
                    "adaptive",
                    "a bulkhead's limit is fixed (max_concurrent_calls) or adaptive, not both: \
                     remove one",
                ));
            }
            adaptive.validate()?;
            let max = adaptive.settings().max_limit;
            if max > MAX_CONCURRENT_CALLS_LIMIT {
                return Err(ConfigError::new(
                    "adaptive.max_limit",
                    format!("must be at most {MAX_CONCURRENT_CALLS_LIMIT}, got {max}"),
                ));
            }
            return Ok(());
        }
        let max = self.max_concurrent_calls();
        if max == 0 {
            return Err(ConfigError::new(
                "max_concurrent_calls",
                "must be at least 1, got 0 (a bulkhead of 0 calls rejects everything)",
            ));
        }
        if max > MAX_CONCURRENT_CALLS_LIMIT {
            return Err(ConfigError::new(
                "max_concurrent_calls",
                format!("must be at most {MAX_CONCURRENT_CALLS_LIMIT}, got {max}"),
            ));
        }
        Ok(())
    }
}

/// Builds a [`BulkheadConfig`]; see there for the fields and their defaults.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct BulkheadConfigBuilder {
    config: BulkheadConfig,
}

impl BulkheadConfigBuilder {
    /// The number of calls the bulkhead admits at once (at least 1).
    pub fn max_concurrent_calls(mut self, calls: u32) -> Self {
        self.config.max_concurrent_calls = Some(calls);
        self
    }

    /// An adaptive limit instead of a fixed one: the bulkhead finds the number of calls the
    /// dependency serves without queueing from the durations of the calls it admits (see
    /// [`AdaptiveLimit`]). Refusals are [`Rejected::BulkheadFull`](crate::Rejected::BulkheadFull)
    /// as with a fixed limit; `max_wait_duration` and `fair_call_handling` keep their meaning.
    ///
    /// ```
    /// use resilience_runtime::{AdaptiveLimit, Bulkhead, BulkheadConfig};
    ///
    /// let config = BulkheadConfig::builder()
    ///     .adaptive(AdaptiveLimit::knee().min_limit(10).max_limit(400))
    ///     .build()?;
    /// let bulkhead = Bulkhead::new("orders", config);
    /// assert_eq!(bulkhead.max_allowed_concurrent_calls(), 20); // the initial limit, for now
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn adaptive(mut self, limit: AdaptiveLimit) -> Self {
        self.config.adaptive = Some(limit);
        self
    }

    /// How long a caller waits for a permit before it is rejected; zero rejects at once.
    pub fn max_wait_duration(mut self, wait: Duration) -> Self {
        self.config.max_wait_duration = Some(wait);
        self
    }

    /// Strict FIFO among waiters (`true`, the default), or let a caller take a freed permit
    /// ahead of the waiters (`false`).
    pub fn fair_call_handling(mut self, fair: bool) -> Self {
        self.config.fair_call_handling = Some(fair);
        self
    }

    /// Where the permits are: [`Backend::local`] (the default), or Redis with
    /// `Backend::redis()` (feature `redis`): a permit is a lease of a limit shared by every
    /// replica that names this instance; see [`crate::fleet`]. A fleet limit is fixed (not
    /// [`adaptive`](Self::adaptive)).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.config.backend = Some(backend);
        self
    }

    /// Takes every field not set on this builder from the named configuration `base` when the
    /// registry installs this configuration.
    pub fn base(mut self, base: impl Into<Name>) -> Self {
        self.config.base = Some(base.into());
        self
    }

    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field: `max_concurrent_calls` of 0 or above
    /// 16 777 215; both `max_concurrent_calls` and `adaptive`; an `adaptive.*` setting out of
    /// its range or of another algorithm; on `backend`, a Redis backend with an adaptive limit
    /// or a batch.
    pub fn build(self) -> Result<BulkheadConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_resilience4j() {
        let config = BulkheadConfig::builder().build().unwrap();
        assert_eq!(config.max_concurrent_calls(), 25);
        assert_eq!(config.max_wait_duration(), Duration::ZERO);
        assert!(config.fair_call_handling());
        assert_eq!(config.base(), None);
    }

    #[test]
    fn zero_or_huge_permits_are_refused_with_the_field_name() {
        for calls in [0, MAX_CONCURRENT_CALLS_LIMIT + 1] {
            let err = BulkheadConfig::builder()
                .max_concurrent_calls(calls)
                .build()
                .unwrap_err();
            assert_eq!(err.field(), "max_concurrent_calls");
        }
    }

    #[test]
    fn inherit_takes_only_unset_fields_from_the_base() {
        let base = BulkheadConfig::builder()
            .max_concurrent_calls(5)
            .max_wait_duration(Duration::from_millis(20))
            .fair_call_handling(false)
            .build()
            .unwrap();
        let derived = BulkheadConfig::builder()
            .base("shared")
            .max_concurrent_calls(9)
            .build()
            .unwrap();
        let merged = derived.inherit(&base).unwrap();
        assert_eq!(merged.max_concurrent_calls(), 9);
        assert_eq!(merged.max_wait_duration(), Duration::from_millis(20));
        assert!(!merged.fair_call_handling());
        assert_eq!(merged.base(), None);
    }
}
