//! [`FaultConfig`] and its builder.

use std::fmt;
use std::time::Duration;

use crate::error::{ConfigError, InjectedError};
use crate::name::Name;

/// Which faults are injected into the calls through an instance name, and how often. Built
/// with [`FaultConfig::builder`], validated by [`FaultConfigBuilder::build`].
///
/// | field | default |
/// |---|---|
/// | `latency_rate`, `latency` | 0, 0 s |
/// | `error_rate` | 0 |
/// | `refusal_rate` | 0 |
/// | `seed` | 0 |
///
/// Each call (each attempt, under a retry or a hedge) draws once, from a sequence the seed
/// fixes: with the probability `refusal_rate` it is refused
/// ([`Rejected::Injected`](crate::Rejected::Injected), a refusal as a full bulkhead's: not a
/// failure); else with `error_rate` it fails with the error [`error`](FaultConfigBuilder::error)
/// makes (a failure, as a time-out is: a breaker records it, a retry retries it); and,
/// independently, with `latency_rate` it waits `latency` first. Faults apply only in a
/// registry that [allows them](crate::Registry::allow_fault_injection).
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::FaultConfig;
///
/// let config = FaultConfig::builder()
///     .latency(0.05, Duration::from_millis(500))
///     .error(0.1, || "injected: the dependency failed".into())
///     .seed(42)
///     .build()?;
/// assert_eq!(config.error_rate(), 0.1);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct FaultConfig {
    base: Option<Name>,
    latency_rate: Option<f64>,
    latency: Option<Duration>,
    error_rate: Option<f64>,
    error: Option<InjectedError>,
    refusal_rate: Option<f64>,
    seed: Option<u64>,
}

crate::config_debug::debug_effective!(FaultConfig {
    latency_rate,
    latency,
    error_rate,
    refusal_rate,
    seed,
});

impl FaultConfig {
    /// A builder starting from the defaults (no fault).
    pub fn builder() -> FaultConfigBuilder {
        FaultConfigBuilder::default()
    }

    /// The probability that a call waits [`latency`](Self::latency) first.
    pub fn latency_rate(&self) -> f64 {
        self.latency_rate.unwrap_or(0.0)
    }

    /// The latency added to the calls it is injected into.
    pub fn latency(&self) -> Duration {
        self.latency.unwrap_or(Duration::ZERO)
    }

    /// The probability that a call fails with the injected error.
    pub fn error_rate(&self) -> f64 {
        self.error_rate.unwrap_or(0.0)
    }

    /// The probability that a call is refused.
    pub fn refusal_rate(&self) -> f64 {
        self.refusal_rate.unwrap_or(0.0)
    }

    /// The seed of the draws.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or(0)
    }

    /// Whether any fault can be drawn: an instance whose configuration injects nothing is left
    /// out of the plans, and costs nothing.
    pub fn injects(&self) -> bool {
        self.injects_latency() || self.error_rate() > 0.0 || self.refusal_rate() > 0.0
    }

    /// Whether a latency can be drawn.
    pub(crate) fn injects_latency(&self) -> bool {
        self.latency_rate() > 0.0 && !self.latency().is_zero()
    }

    /// The injected error, if made by the user's function.
    pub(crate) fn injected_error(&self) -> Option<InjectedError> {
        self.error
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(&self, base: &FaultConfig) -> Result<FaultConfig, ConfigError> {
        let merged = FaultConfig {
            base: None,
            latency_rate: self.latency_rate.or(base.latency_rate),
            latency: self.latency.or(base.latency),
            error_rate: self.error_rate.or(base.error_rate),
            error: self.error.or(base.error),
            refusal_rate: self.refusal_rate.or(base.refusal_rate),
            seed: self.seed.or(base.seed),
        };
        merged.validate()?;
        Ok(merged)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        for (field, rate) in [
            ("latency_rate", self.latency_rate()),
            ("error_rate", self.error_rate()),
            ("refusal_rate", self.refusal_rate()),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(ConfigError::new(
                    field,
                    format!("must be a probability from 0 to 1, got {rate}"),
                ));
            }
        }
        if self.error_rate() + self.refusal_rate() > 1.0 {
            return Err(ConfigError::new(
                "error_rate",
                format!(
                    "with `refusal_rate` must add up to at most 1 (one draw picks one of them), \
                     got {} + {}",
                    self.error_rate(),
                    self.refusal_rate()
                ),
            ));
        }
        if self.latency() > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "latency",
                format!("must be at most 1 h, got {:?}", self.latency()),
            ));
        }
        Ok(())
    }
}

/// Builds a [`FaultConfig`]; see there for the fields and their defaults.
#[derive(Clone, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct FaultConfigBuilder {
    config: FaultConfig,
}

impl fmt::Debug for FaultConfigBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultConfigBuilder")
            .field("config", &self.config)
            .finish()
    }
}

impl FaultConfigBuilder {
    /// With probability `rate` (0 to 1), a call waits `latency` (at most 1 h) before it runs,
    /// inside every guard: a bulkhead holds its permit meanwhile, a time limiter counts it.
    pub fn latency(mut self, rate: f64, latency: Duration) -> Self {
        self.config.latency_rate = Some(rate);
        self.config.latency = Some(latency);
        self
    }

    /// With probability `rate`, a call fails with the error `make` makes, without running:
    /// [`Rejected::Injected`](crate::Rejected::Injected) carrying it, which reaches the caller
    /// through its `From<Rejected>` (where
    /// [`injected_error`](crate::Rejected::injected_error) gives it back) and which the guards
    /// around count as a failure of the call. `make` is called once, here, and its error kept
    /// for the life of the process (each call of this method keeps one: build configurations
    /// with errors at startup, not per request), shared by every call it fails. Set in code
    /// only.
    pub fn error(
        mut self,
        rate: f64,
        make: impl FnOnce() -> Box<dyn std::error::Error + Send + Sync>,
    ) -> Self {
        self.config.error_rate = Some(rate);
        self.config.error = Some(InjectedError::new(make()));
        self
    }

    /// With probability `rate`, a call fails with an injected error of this library's own
    /// ([`error`](Self::error) without a function of yours; the rate a file can set).
    pub fn error_rate(mut self, rate: f64) -> Self {
        self.config.error_rate = Some(rate);
        self
    }

    /// With probability `rate`, a call is refused: [`Rejected::Injected`](crate::Rejected::Injected)
    /// without an error, a refusal as a full bulkhead's (a fallback answers it; no breaker
    /// records it).
    pub fn refusal(mut self, rate: f64) -> Self {
        self.config.refusal_rate = Some(rate);
        self
    }

    /// The seed of the draws: the same seed and the same calls, the same faults.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
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
    /// A [`ConfigError`] naming the field: a rate outside 0 to 1, an error and a refusal rate
    /// adding up to more than 1, a latency above 1 h.
    ///
    /// ```
    /// use resilience_runtime::FaultConfig;
    ///
    /// let err = FaultConfig::builder().refusal(1.5).build().unwrap_err();
    /// assert_eq!(err.field(), "refusal_rate");
    /// ```
    pub fn build(self) -> Result<FaultConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
