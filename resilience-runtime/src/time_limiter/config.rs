//! [`TimeLimiterConfig`] and its builder.

use std::time::Duration;

use crate::error::ConfigError;
use crate::name::Name;

/// How a time limiter bounds a call. Built with [`TimeLimiterConfig::builder`], validated by
/// [`TimeLimiterConfigBuilder::build`].
///
/// | field | default |
/// |---|---|
/// | `timeout_duration` | 1 s |
/// | `cancel_running_future` | true |
///
/// Both are Resilience4j's defaults. With `cancel_running_future(false)`, a call that overruns
/// is not cut off: Rust cannot leave a future running once its caller stops waiting for it
/// without spawning it (which a call that borrows its arguments cannot be), so the time
/// limiter then observes instead. It counts and reports the overrun
/// ([`TimeLimiterEvent::Timeout`](crate::TimeLimiterEvent::Timeout)) and lets the call
/// finish with its own result: a way to learn what a timeout would cut before enforcing it.
///
/// A configuration records which fields were set explicitly: one built on a
/// [`base`](TimeLimiterConfigBuilder::base) takes every field it does not set from that base
/// when the registry installs it.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::TimeLimiterConfig;
///
/// let config = TimeLimiterConfig::builder()
///     .timeout_duration(Duration::from_millis(250))
///     .build()?;
/// assert_eq!(config.timeout_duration(), Duration::from_millis(250));
/// assert!(config.cancel_running_future());
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TimeLimiterConfig {
    base: Option<Name>,
    timeout_duration: Option<Duration>,
    cancel_running_future: Option<bool>,
}

crate::config_debug::debug_effective!(TimeLimiterConfig {
    timeout_duration,
    cancel_running_future,
});

impl TimeLimiterConfig {
    /// Default `timeout_duration` (Resilience4j's).
    pub const DEFAULT_TIMEOUT_DURATION: Duration = Duration::from_secs(1);

    /// A builder starting from the defaults.
    pub fn builder() -> TimeLimiterConfigBuilder {
        TimeLimiterConfigBuilder::default()
    }

    /// A builder starting from this configuration (one read from a file, say): change a
    /// setting and build again.
    pub fn to_builder(&self) -> TimeLimiterConfigBuilder {
        TimeLimiterConfigBuilder {
            config: self.clone(),
        }
    }

    /// How long a call may take.
    pub fn timeout_duration(&self) -> Duration {
        self.timeout_duration
            .unwrap_or(Self::DEFAULT_TIMEOUT_DURATION)
    }

    /// Whether a call that takes longer is cut off (its future dropped), or only reported.
    pub fn cancel_running_future(&self) -> bool {
        self.cancel_running_future.unwrap_or(true)
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(
        &self,
        base: &TimeLimiterConfig,
    ) -> Result<TimeLimiterConfig, ConfigError> {
        let merged = TimeLimiterConfig {
            base: None,
            timeout_duration: self.timeout_duration.or(base.timeout_duration),
            cancel_running_future: self.cancel_running_future.or(base.cancel_running_future),
        };
        merged.validate()?;
        Ok(merged)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.timeout_duration().is_zero() {
            return Err(ConfigError::new(
                "timeout_duration",
                "must be above zero, got 0 (it would cut off every call that waits for anything)",
            ));
        }
        Ok(())
    }
}

/// Builds a [`TimeLimiterConfig`]; see there for the fields and their defaults.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct TimeLimiterConfigBuilder {
    config: TimeLimiterConfig,
}

impl TimeLimiterConfigBuilder {
    /// How long a call may take (above zero). `Duration::MAX` never cuts one off.
    pub fn timeout_duration(mut self, timeout: Duration) -> Self {
        self.config.timeout_duration = Some(timeout);
        self
    }

    /// Whether a call that takes longer is cut off (true, the default) or only reported
    /// (see [`TimeLimiterConfig`]).
    pub fn cancel_running_future(mut self, cancel: bool) -> Self {
        self.config.cancel_running_future = Some(cancel);
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
    /// A [`ConfigError`] naming the field: a `timeout_duration` of zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::TimeLimiterConfig;
    ///
    /// let err = TimeLimiterConfig::builder().timeout_duration(Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err.field(), "timeout_duration");
    /// ```
    pub fn build(self) -> Result<TimeLimiterConfig, ConfigError> {
        self.config.validate()?;
        Ok(self.config)
    }
}
