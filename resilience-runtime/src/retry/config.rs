//! [`RetryConfig`] and its builder.

use std::time::Duration;

use super::budget::RetryBudget;
use crate::error::ConfigError;
use crate::name::Name;

/// How a retry re-runs a call. Built with [`RetryConfig::builder`], validated by
/// [`RetryConfigBuilder::build`].
///
/// A call is made at most `max_attempts` times (the first call included). Between two attempts
/// the retry waits: `wait_duration` before the first retry; with
/// [`exponential_backoff`](RetryConfigBuilder::exponential_backoff) each later wait is the one
/// before times the multiplier, up to its `max_wait`; with a
/// [`randomized_wait_factor`](RetryConfigBuilder::randomized_wait_factor) `f`, each wait is
/// drawn uniformly from `wait × [1 − f, 1 + f]` (jitter, so that callers that failed together
/// do not retry together), and never above `max_wait`.
///
/// Which outcomes are retried is said where the call is guarded (every `Err` by default, or
/// `retry_on = path` on `#[retry]`). A refusal by a guard *inside* the retry (an open breaker,
/// a full bulkhead) ends the call unless [`retry_on_rejection`](Self::retry_on_rejection) is
/// set: an open breaker says "stop calling", and retrying it only adds load. A time limiter's
/// [`TimedOut`](crate::Rejected::TimedOut) is a failure of the attempt and is retried.
///
/// A failure may ask for a longer wait itself (Resilience4j's `intervalBiFunction`): with
/// `retry_after = path` on `#[retry]` (a `fn(&E) -> Option<Duration>`, such as a server's
/// `Retry-After` carried in the error), the wait before the next attempt is at least what
/// it returns, up to [`max_retry_after`](Self::max_retry_after), past which the failure is
/// not retried; the reqwest middleware reads a `429`'s or a `503`'s `Retry-After` so.
///
/// A configuration records which fields were set explicitly: one built on a
/// [`base`](RetryConfigBuilder::base) takes every field it does not set from that base when
/// the registry installs it (Resilience4j's `baseConfig`).
///
/// | field | default |
/// |---|---|
/// | `max_attempts` | 3 (the first call and two retries) |
/// | `wait_duration` | 500 ms |
/// | `exponential_backoff` | none (every wait is `wait_duration`) |
/// | `randomized_wait_factor` | 0 (no jitter) |
/// | `retry_on_rejection` | false |
/// | `max_retry_after` | 30 s (the longest wait a failure may ask for) |
///
/// The first two are Resilience4j's defaults.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::RetryConfig;
///
/// let config = RetryConfig::builder()
///     .max_attempts(4)
///     .wait_duration(Duration::from_millis(100))
///     .exponential_backoff(2.0, Duration::from_millis(300))
///     .build()?;
/// // Waits before the second, third and fourth attempts.
/// assert_eq!(config.wait_before_retry(1), Duration::from_millis(100));
/// assert_eq!(config.wait_before_retry(2), Duration::from_millis(200));
/// assert_eq!(config.wait_before_retry(3), Duration::from_millis(300)); // capped
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct RetryConfig {
    base: Option<Name>,
    max_attempts: Option<u32>,
    wait_duration: Option<Duration>,
    exponential_backoff: Option<(f64, Duration)>,
    randomized_wait_factor: Option<f64>,
    retry_on_rejection: Option<bool>,
    max_retry_after: Option<Duration>,
    budget: Option<RetryBudget>,
}

crate::config_debug::debug_effective!(RetryConfig {
    max_attempts,
    wait_duration,
    exponential_backoff,
    randomized_wait_factor,
    retry_on_rejection,
    max_retry_after,
    budget,
});

impl RetryConfig {
    /// Default `max_attempts` (Resilience4j's).
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
    /// Default `wait_duration` (Resilience4j's).
    pub const DEFAULT_WAIT_DURATION: Duration = Duration::from_millis(500);
    /// Default `max_retry_after`.
    pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

    /// The retry budget every call of the instance shares, if any (none by default: each call
    /// retries up to `max_attempts` whatever the others do).
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.budget.as_ref()
    }

    /// A builder starting from the defaults.
    pub fn builder() -> RetryConfigBuilder {
        RetryConfigBuilder::default()
    }

    /// A builder starting from this configuration (one read from a file, say): change a
    /// setting and build again.
    pub fn to_builder(&self) -> RetryConfigBuilder {
        RetryConfigBuilder {
            config: self.clone(),
        }
    }

    /// The most times a call is made, the first one included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(Self::DEFAULT_MAX_ATTEMPTS)
    }

    /// The wait before the first retry.
    pub fn wait_duration(&self) -> Duration {
        self.wait_duration.unwrap_or(Self::DEFAULT_WAIT_DURATION)
    }

    /// The multiplier of each later wait and the longest wait, if the waits grow.
    pub fn exponential_backoff(&self) -> Option<(f64, Duration)> {
        self.exponential_backoff
    }

    /// The jitter: each wait is drawn from `wait × [1 − f, 1 + f]`; 0 for none.
    pub fn randomized_wait_factor(&self) -> f64 {
        self.randomized_wait_factor.unwrap_or(0.0)
    }

    /// Whether a refusal by a guard inside the retry is retried.
    pub fn retry_on_rejection(&self) -> bool {
        self.retry_on_rejection.unwrap_or(false)
    }

    /// The longest wait a failure may ask for (`retry_after = path` on `#[retry]`, a server's
    /// `Retry-After`): a failure asking for longer ends the retries.
    pub fn max_retry_after(&self) -> Duration {
        self.max_retry_after
            .unwrap_or(Self::DEFAULT_MAX_RETRY_AFTER)
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// The wait before retry number `retry` (1 before the second attempt), before jitter:
    /// `wait_duration`, grown by the exponential backoff if there is one and capped at its
    /// `max_wait`.
    pub fn wait_before_retry(&self, retry: u32) -> Duration {
        let wait = self.wait_duration();
        match self.exponential_backoff {
            None => wait,
            Some((multiplier, max_wait)) => {
                let exponent = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
                // In f64 seconds: the growth saturates at `max_wait`, never overflows.
                let grown = wait.as_secs_f64() * multiplier.powi(exponent);
                if grown.is_finite() && grown < max_wait.as_secs_f64() {
                    Duration::from_secs_f64(grown)
                } else {
                    max_wait
                }
            }
        }
    }

    /// [`wait_before_retry`](Self::wait_before_retry) with the jitter applied, `unit` a draw
    /// from `[0, 1)`.
    pub(super) fn jittered_wait(&self, retry: u32, unit: f64) -> Duration {
        let wait = self.wait_before_retry(retry);
        let factor = self.randomized_wait_factor();
        if factor == 0.0 {
            return wait;
        }
        let scaled = wait.as_secs_f64() * (1.0 - factor + 2.0 * factor * unit);
        let cap = self
            .exponential_backoff
            .map_or(Duration::MAX, |(_, max)| max);
        Duration::try_from_secs_f64(scaled).map_or(cap, |jittered| jittered.min(cap))
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(&self, base: &RetryConfig) -> Result<RetryConfig, ConfigError> {
        let merged = RetryConfig {
            base: None,
            max_attempts: self.max_attempts.or(base.max_attempts),
            wait_duration: self.wait_duration.or(base.wait_duration),
            exponential_backoff: self.exponential_backoff.or(base.exponential_backoff),
            randomized_wait_factor: self.randomized_wait_factor.or(base.randomized_wait_factor),
            retry_on_rejection: self.retry_on_rejection.or(base.retry_on_rejection),
            max_retry_after: self.max_retry_after.or(base.max_retry_after),
            budget: self.budget.or(base.budget),
        };
        merged.validate(true)?;
        Ok(merged)
    }

    /// Checks every field; with `whole`, also how fields bear on each other (`max_wait` at least
    /// `wait_duration`), which a configuration on a base can only be checked for once the
    /// registry merges it with its base.
    fn validate(&self, whole: bool) -> Result<(), ConfigError> {
        if let Some(budget) = &self.budget {
            budget.validate()?;
        }
        if self.max_attempts() == 0 {
            return Err(ConfigError::new(
                "max_attempts",
                "must be at least 1 (it counts the first call), got 0",
            ));
        }
        if let Some((multiplier, max_wait)) = self.exponential_backoff {
            if !multiplier.is_finite() || multiplier < 1.0 {
                return Err(ConfigError::new(
                    "exponential_backoff",
                    format!(
                        "the multiplier must be a finite number of at least 1.0 (waits never \
                         shrink), got {multiplier}"
                    ),
                ));
            }
            let wait = self.wait_duration();
            if whole && max_wait < wait {
                return Err(ConfigError::new(
                    "exponential_backoff",
                    format!(
                        "the max_wait ({max_wait:?}) must be at least the wait_duration \
                         ({wait:?}), the first wait"
                    ),
                ));
            }
        }
        let factor = self.randomized_wait_factor();
        if !(0.0..1.0).contains(&factor) {
            return Err(ConfigError::new(
                "randomized_wait_factor",
                format!(
                    "must be at least 0 and below 1 (a wait is drawn from wait × [1 − f, 1 + f]), \
                     got {factor}"
                ),
            ));
        }
        Ok(())
    }
}

/// Builds a [`RetryConfig`]; see there for the fields and their defaults.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct RetryConfigBuilder {
    config: RetryConfig,
}

impl RetryConfigBuilder {
    /// The most times a call is made, the first one included (at least 1; 1 never retries).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.config.max_attempts = Some(attempts);
        self
    }

    /// The wait before the first retry (zero retries at once).
    pub fn wait_duration(mut self, wait: Duration) -> Self {
        self.config.wait_duration = Some(wait);
        self
    }

    /// Grows each wait after the first by `multiplier` (at least 1.0), up to `max_wait` (at
    /// least `wait_duration`).
    pub fn exponential_backoff(mut self, multiplier: f64, max_wait: Duration) -> Self {
        self.config.exponential_backoff = Some((multiplier, max_wait));
        self
    }

    /// Jitter: each wait is drawn uniformly from `wait × [1 − factor, 1 + factor]`
    /// (`factor` at least 0 and below 1).
    pub fn randomized_wait_factor(mut self, factor: f64) -> Self {
        self.config.randomized_wait_factor = Some(factor);
        self
    }

    /// Whether a refusal by a guard inside the retry (an open breaker, a full bulkhead) is
    /// retried; by default it ends the call.
    pub fn retry_on_rejection(mut self, retry: bool) -> Self {
        self.config.retry_on_rejection = Some(retry);
        self
    }

    /// The longest wait before the next attempt that a failure may ask for (`retry_after =
    /// path` on `#[retry]`, a server's `Retry-After` through the reqwest middleware): a
    /// failure that asks for longer is not retried, and the caller gets it, hint included,
    /// rather than a call parked that long holding the guards outside the retry. Default 30 s.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.config.max_retry_after = Some(wait);
        self
    }

    /// A budget shared by every call of the instance: retries at most a ratio of its first
    /// attempts over a window, plus a floor per second ([`RetryBudget`]). A retry over budget
    /// is not made; the call ends with its last attempt's error, and the refusal is counted
    /// ([`RetryMetrics::number_of_retries_over_budget`](super::RetryMetrics::number_of_retries_over_budget))
    /// and told ([`RetryEvent::OverBudget`](super::RetryEvent::OverBudget)).
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.config.budget = Some(budget);
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
    /// A [`ConfigError`] naming the field: a `max_attempts` of 0, an `exponential_backoff`
    /// whose multiplier is below 1 or not finite or whose `max_wait` is below `wait_duration`,
    /// a `randomized_wait_factor` outside `[0, 1)`, or a `budget` whose ratio is not from 0 to
    /// 1000 (`budget.ratio`) or whose window is not whole seconds from 1 s to 1 h
    /// (`budget.window`).
    ///
    /// ```
    /// use resilience_runtime::RetryConfig;
    ///
    /// let err = RetryConfig::builder().randomized_wait_factor(1.5).build().unwrap_err();
    /// assert_eq!(err.field(), "randomized_wait_factor");
    /// ```
    pub fn build(self) -> Result<RetryConfig, ConfigError> {
        // On a base, `wait_duration` may come from the base: checked when the registry merges.
        let whole = self.config.base.is_none();
        self.config.validate(whole)?;
        Ok(self.config)
    }
}
