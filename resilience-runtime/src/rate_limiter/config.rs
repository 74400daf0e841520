//! [`RateLimiterConfig`] and its builder.

use std::time::Duration;

use crate::error::ConfigError;
use crate::fleet::Backend;
use crate::name::Name;

/// The highest rate a rate limiter accepts: one permission per nanosecond of
/// `limit_refresh_period` (10⁹ permissions per second).
///
/// Why a bound: a limiter numbers its permissions on a 64-bit timeline (cycle `k` holds the
/// positions `k * limit .. (k + 1) * limit`), which moves forward by `limit` positions every
/// period. At one position per nanosecond it lasts 2⁶⁴ ns, some 584 years of uptime; a faster
/// rate could overflow it within a realistic one.
pub const MAX_PERMISSIONS_PER_NANOSECOND: u32 = 1;

/// How a rate limiter admits calls. Built with [`RateLimiterConfig::builder`], validated by
/// [`RateLimiterConfigBuilder::build`].
///
/// Time is cut into cycles of `limit_refresh_period`; at the start of every cycle the limiter
/// has `limit_for_period` permissions again (unused ones do not carry over). A caller that
/// finds none left waits for a permission of a later cycle if that cycle starts within
/// `timeout_duration`, and is refused at once otherwise.
///
/// A configuration records which fields were set explicitly: one built on a
/// [`base`](RateLimiterConfigBuilder::base) takes every field it does not set from that base
/// when the registry installs it (Resilience4j's `baseConfig`).
///
/// | field | default |
/// |---|---|
/// | `limit_for_period` | 50 |
/// | `limit_refresh_period` | 500 ns |
/// | `timeout_duration` | 0 (refuse at once when no permission is left) |
///
/// The first two are Resilience4j's defaults. Its `timeoutDuration` defaults to 5 s; this
/// project's is zero, because a caller that waits seconds behind a limit that is already
/// exceeded is queued overload, and shedding overload before it piles up is what the guards
/// are for. Ask for a wait explicitly where callers can afford it.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::RateLimiterConfig;
///
/// let config = RateLimiterConfig::builder()
///     .limit_for_period(100)
///     .limit_refresh_period(Duration::from_secs(1))
///     .timeout_duration(Duration::from_millis(50))
///     .build()?;
/// assert_eq!(config.limit_for_period(), 100);
/// assert_eq!(RateLimiterConfig::default().timeout_duration(), Duration::ZERO);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RateLimiterConfig {
    base: Option<Name>,
    limit_for_period: Option<u32>,
    limit_refresh_period: Option<Duration>,
    timeout_duration: Option<Duration>,
    backend: Option<Backend>,
}

crate::config_debug::debug_effective!(RateLimiterConfig {
    limit_for_period,
    limit_refresh_period,
    timeout_duration,
    backend,
});

impl RateLimiterConfig {
    /// Default `limit_for_period` (Resilience4j's).
    pub const DEFAULT_LIMIT_FOR_PERIOD: u32 = 50;
    /// Default `limit_refresh_period` (Resilience4j's).
    pub const DEFAULT_LIMIT_REFRESH_PERIOD: Duration = Duration::from_nanos(500);
    /// Default `timeout_duration`: zero, refuse at once (Resilience4j waits 5 s; see above).
    pub const DEFAULT_TIMEOUT_DURATION: Duration = Duration::ZERO;

    /// A builder starting from the defaults.
    pub fn builder() -> RateLimiterConfigBuilder {
        RateLimiterConfigBuilder::default()
    }

    /// A builder starting from this configuration (one read from a file, say): change a
    /// setting and build again.
    pub fn to_builder(&self) -> RateLimiterConfigBuilder {
        RateLimiterConfigBuilder {
            config: self.clone(),
        }
    }

    /// The permissions of one cycle.
    pub fn limit_for_period(&self) -> u32 {
        self.limit_for_period
            .unwrap_or(Self::DEFAULT_LIMIT_FOR_PERIOD)
    }

    /// The length of a cycle: permissions refresh at the start of every one.
    pub fn limit_refresh_period(&self) -> Duration {
        self.limit_refresh_period
            .unwrap_or(Self::DEFAULT_LIMIT_REFRESH_PERIOD)
    }

    /// How long a caller may wait for a permission of a later cycle; zero refuses at once.
    pub fn timeout_duration(&self) -> Duration {
        self.timeout_duration
            .unwrap_or(Self::DEFAULT_TIMEOUT_DURATION)
    }

    /// Where the limiter's state lives: this process (the default) or Redis, shared by the
    /// fleet ([`crate::fleet`]).
    pub fn backend(&self) -> Backend {
        self.backend.clone().unwrap_or_default()
    }

    /// The backend as set, for the registry to give a Redis one its connection.
    pub(crate) fn backend_field(&mut self) -> Option<&mut Backend> {
        self.backend.as_mut()
    }

    /// This configuration, local, with the limit divided among `replicas` (at least one
    /// permission each): a fleet limiter's share while Redis does not answer.
    #[cfg(feature = "redis")]
    pub(crate) fn local_share(&self, replicas: u32) -> RateLimiterConfig {
        RateLimiterConfig {
            limit_for_period: Some((self.limit_for_period() / replicas.max(1)).max(1)),
            backend: None,
            ..self.clone()
        }
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(
        &self,
        base: &RateLimiterConfig,
    ) -> Result<RateLimiterConfig, ConfigError> {
        let merged = RateLimiterConfig {
            base: None,
            limit_for_period: self.limit_for_period.or(base.limit_for_period),
            limit_refresh_period: self.limit_refresh_period.or(base.limit_refresh_period),
            timeout_duration: self.timeout_duration.or(base.timeout_duration),
            backend: self.backend.clone().or_else(|| base.backend.clone()),
        };
        merged.validate()?;
        Ok(merged)
    }

    /// The period in nanoseconds (validated to fit).
    pub(super) fn period_nanos(&self) -> u64 {
        u64::try_from(self.limit_refresh_period().as_nanos()).unwrap_or(u64::MAX)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let limit = self.limit_for_period();
        if limit == 0 {
            return Err(ConfigError::new(
                "limit_for_period",
                "must be at least 1, got 0 (a rate limiter of 0 permissions refuses everything)",
            ));
        }
        let period = self.limit_refresh_period();
        if period.is_zero() {
            return Err(ConfigError::new(
                "limit_refresh_period",
                "must be at least 1 ns, got 0",
            ));
        }
        let Ok(period_nanos) = u64::try_from(period.as_nanos()) else {
            return Err(ConfigError::new(
                "limit_refresh_period",
                format!(
                    "must be at most {} ns (584 years), got {period:?}",
                    u64::MAX
                ),
            ));
        };
        if self.backend().batch_size() == Some(0) {
            return Err(ConfigError::new(
                "backend",
                "a Redis backend's batch must be at least 1 permission, got 0",
            ));
        }
        if !self.backend().is_local() && period < Duration::from_millis(1) {
            let got = match self.limit_refresh_period {
                Some(_) => format!("{period:?}"),
                None => format!("the default {period:?}; set `limit_refresh_period`"),
            };
            return Err(ConfigError::new(
                "limit_refresh_period",
                format!(
                    "must be at least 1ms with a Redis backend, got {got} (a cycle shorter than a \
                     few round trips to Redis cannot be shared by a fleet)"
                ),
            ));
        }
        // `limit / period <= 1` permission per nanosecond, so the timeline lasts 584 years.
        if u64::from(limit) > period_nanos * u64::from(MAX_PERMISSIONS_PER_NANOSECOND) {
            return Err(ConfigError::new(
                "limit_for_period",
                format!(
                    "must be at most one permission per nanosecond of `limit_refresh_period` \
                     (10^9 per second), got {limit} per {period:?} (a faster rate could overflow \
                     the limiter's 64-bit permission timeline within its uptime)"
                ),
            ));
        }
        Ok(())
    }
}

/// Builds a [`RateLimiterConfig`]; see there for the fields and their defaults.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct RateLimiterConfigBuilder {
    config: RateLimiterConfig,
}

impl RateLimiterConfigBuilder {
    /// The permissions of one cycle (at least 1, at most one per nanosecond of the period).
    pub fn limit_for_period(mut self, limit: u32) -> Self {
        self.config.limit_for_period = Some(limit);
        self
    }

    /// The length of a cycle (at least 1 ns).
    pub fn limit_refresh_period(mut self, period: Duration) -> Self {
        self.config.limit_refresh_period = Some(period);
        self
    }

    /// How long a caller may wait for a permission of a later cycle; zero (the default)
    /// refuses at once. A wait of 2⁶⁴ ns or more (such as `Duration::MAX`) never refuses.
    pub fn timeout_duration(mut self, timeout: Duration) -> Self {
        self.config.timeout_duration = Some(timeout);
        self
    }

    /// Takes every field not set on this builder from the named configuration `base` when the
    /// registry installs this configuration.
    pub fn base(mut self, base: impl Into<Name>) -> Self {
        self.config.base = Some(base.into());
        self
    }

    /// Where the limiter's state lives: [`Backend::local`] (the default), or Redis with
    /// `Backend::redis()` (feature `redis`): one limit shared by every replica that names this
    /// instance; see [`crate::fleet`]. With Redis, `limit_refresh_period` must be at least 1 ms.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.config.backend = Some(backend);
        self
    }

    /// Validates the configuration.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field: a `limit_for_period` of 0, a `limit_refresh_period`
    /// of 0 or of 2⁶⁴ ns or more, or a `limit_for_period` above one permission per nanosecond
    /// of the period (10⁹ per second: see [`MAX_PERMISSIONS_PER_NANOSECOND`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::RateLimiterConfig;
    ///
    /// let err = RateLimiterConfig::builder()
    ///     .limit_for_period(1_000)
    ///     .limit_refresh_period(Duration::from_nanos(10))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "limit_for_period");
    /// ```
    pub fn build(self) -> Result<RateLimiterConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
