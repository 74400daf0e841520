//! [`HedgeConfig`] and its builder.

use std::time::Duration;

use crate::error::ConfigError;
use crate::name::Name;
use crate::retry::RetryBudget;

/// How a hedge makes its extra attempts. Built with [`HedgeConfig::builder`], validated by
/// [`HedgeConfigBuilder::build`].
///
/// | field | default |
/// |---|---|
/// | `delay` | 2 s |
/// | `delay_percentile` | none |
/// | `max_hedged_attempts` | 1 |
/// | `budget` | none |
///
/// The defaults are Polly's (Resilience4j's hedge has no annotation, and a delay it must be
/// given). After `delay` without an answer from the attempts running, another starts beside
/// them, up to `max_hedged_attempts` beyond the first; the first acceptable outcome ends the
/// call and the others are dropped. With a `budget`, the extra attempts of all the calls
/// through the instance are at most its ratio of the calls (plus its floor per second), as a
/// retry's are: a dependency that slows down is not sent twice its load.
///
/// A configuration records which fields were set explicitly: one built on a
/// [`base`](HedgeConfigBuilder::base) takes every field it does not set from that base when
/// the registry installs it.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{HedgeConfig, RetryBudget};
///
/// let config = HedgeConfig::builder()
///     .delay(Duration::from_millis(50))
///     .max_hedged_attempts(1)
///     .budget(RetryBudget::ratio(0.1).min_retries_per_second(5))
///     .build()?;
/// assert_eq!(config.delay(), Duration::from_millis(50));
/// assert_eq!(config.max_hedged_attempts(), 1);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct HedgeConfig {
    base: Option<Name>,
    delay: Option<Duration>,
    delay_percentile: Option<f64>,
    max_hedged_attempts: Option<u32>,
    budget: Option<RetryBudget>,
}

crate::config_debug::debug_effective!(HedgeConfig {
    delay,
    delay_percentile,
    max_hedged_attempts,
    budget,
});

impl HedgeConfig {
    /// Default `delay` (Polly's).
    pub const DEFAULT_DELAY: Duration = Duration::from_secs(2);
    /// Default `max_hedged_attempts` (Polly's).
    pub const DEFAULT_MAX_HEDGED_ATTEMPTS: u32 = 1;
    /// The most extra attempts a call may make.
    pub const MAX_HEDGED_ATTEMPTS: u32 = 10;
    /// The latencies a percentile delay needs before it is used.
    pub const MIN_LATENCIES: u64 = 20;

    /// A builder starting from the defaults.
    pub fn builder() -> HedgeConfigBuilder {
        HedgeConfigBuilder::default()
    }

    /// A builder starting from this configuration (one read from a file, say): change a
    /// setting and build again.
    pub fn to_builder(&self) -> HedgeConfigBuilder {
        HedgeConfigBuilder {
            config: self.clone(),
        }
    }

    /// How long the attempts running go without an answer before another starts.
    pub fn delay(&self) -> Duration {
        self.delay.unwrap_or(Self::DEFAULT_DELAY)
    }

    /// The percentile of recent latencies taken as the delay, if any (see
    /// [`HedgeConfigBuilder::delay_percentile`]).
    pub fn delay_percentile(&self) -> Option<f64> {
        self.delay_percentile
    }

    /// The most attempts a call makes beyond its first.
    pub fn max_hedged_attempts(&self) -> u32 {
        self.max_hedged_attempts
            .unwrap_or(Self::DEFAULT_MAX_HEDGED_ATTEMPTS)
    }

    /// The budget the extra attempts spend, if any.
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.budget.as_ref()
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(&self, base: &HedgeConfig) -> Result<HedgeConfig, ConfigError> {
        let merged = HedgeConfig {
            base: None,
            delay: self.delay.or(base.delay),
            delay_percentile: self.delay_percentile.or(base.delay_percentile),
            max_hedged_attempts: self.max_hedged_attempts.or(base.max_hedged_attempts),
            budget: self.budget.or(base.budget),
        };
        merged.validate()?;
        Ok(merged)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let attempts = self.max_hedged_attempts();
        if attempts == 0 || attempts > Self::MAX_HEDGED_ATTEMPTS {
            return Err(ConfigError::new(
                "max_hedged_attempts",
                format!(
                    "must be from 1 to {}, got {attempts} (to turn hedging off, remove the \
                     hedge from the function or the plan)",
                    Self::MAX_HEDGED_ATTEMPTS
                ),
            ));
        }
        if self.delay() > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "delay",
                format!("must be at most 1 h, got {:?}", self.delay()),
            ));
        }
        if let Some(p) = self.delay_percentile {
            if !(p > 0.0 && p < 100.0) {
                return Err(ConfigError::new(
                    "delay_percentile",
                    format!("must be a percentile above 0 and below 100, got {p}"),
                ));
            }
        }
        if let Some(budget) = self.budget() {
            budget.validate()?;
        }
        Ok(())
    }
}

/// Builds a [`HedgeConfig`]; see there for the fields and their defaults.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct HedgeConfigBuilder {
    config: HedgeConfig,
}

impl HedgeConfigBuilder {
    /// How long the attempts running go without an answer before another starts (at most
    /// 1 h). Zero starts every attempt at once.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.config.delay = Some(delay);
        self
    }

    /// Takes the delay from the latencies of the attempts that waited, over the last 10 to
    /// 20 s: their `percentile` (above 0, below 100; `95.0` for p95, as tower's `hedge` does),
    /// once at least [`MIN_LATENCIES`](HedgeConfig::MIN_LATENCIES) of them were seen;
    /// [`delay`](Self::delay) until then. An attempt's latency is counted when it wins, from
    /// its first wait (one that answers at once is not counted). Losers are not counted, so
    /// the percentile leans low: at p90 more than one call in ten is hedged (the
    /// [`budget`](Self::budget) caps the extra load).
    pub fn delay_percentile(mut self, percentile: f64) -> Self {
        self.config.delay_percentile = Some(percentile);
        self
    }

    /// The most attempts a call makes beyond its first, from 1 to
    /// [`MAX_HEDGED_ATTEMPTS`](HedgeConfig::MAX_HEDGED_ATTEMPTS).
    pub fn max_hedged_attempts(mut self, attempts: u32) -> Self {
        self.config.max_hedged_attempts = Some(attempts);
        self
    }

    /// The budget the extra attempts of every call through the instance spend: at most its
    /// ratio of the calls over its window, plus its floor per second. An extra attempt over
    /// budget is not made (and counted, [`HedgeEvent::OverBudget`](crate::HedgeEvent)).
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
    /// A [`ConfigError`] naming the field: `max_hedged_attempts` of 0 or above
    /// [`MAX_HEDGED_ATTEMPTS`](HedgeConfig::MAX_HEDGED_ATTEMPTS), a `delay` above 1 h, a
    /// budget out of range.
    ///
    /// ```
    /// use resilience_runtime::HedgeConfig;
    ///
    /// let err = HedgeConfig::builder().max_hedged_attempts(0).build().unwrap_err();
    /// assert_eq!(err.field(), "max_hedged_attempts");
    /// ```
    pub fn build(self) -> Result<HedgeConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
