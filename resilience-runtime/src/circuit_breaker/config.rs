//! [`CircuitBreakerConfig`], its builder, and the [`SlidingWindow`] and [`OpenStateBackoff`]
//! settings it holds.

use std::fmt;
use std::time::Duration;

use super::CircuitState;
use crate::error::ConfigError;
use crate::name::Name;

/// Which calls the failure and slow-call rates of the closed state are computed over.
///
/// ```
/// use resilience_runtime::SlidingWindow;
///
/// // The last 100 calls, or the calls of the last 60 seconds.
/// let by_count = SlidingWindow::CountBased(100);
/// let by_time = SlidingWindow::TimeBased(60);
/// assert_eq!(by_count.size(), 100);
/// assert_eq!(by_time.to_string(), "the calls of the last 60 s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlidingWindow {
    /// The last N calls (1 to [`SlidingWindow::MAX_CALLS`]).
    CountBased(u32),
    /// The calls of the last N seconds (1 to [`SlidingWindow::MAX_SECONDS`]), kept in
    /// one bucket per second: a call leaves the window once its whole second is N seconds old.
    TimeBased(u32),
}

impl SlidingWindow {
    /// The largest count-based window (one byte per call is kept).
    pub const MAX_CALLS: u32 = 1 << 20;
    /// The largest time-based window: one day (one small bucket per second is kept).
    pub const MAX_SECONDS: u32 = 86_400;

    /// The number of calls (count-based) or seconds (time-based) of the window.
    pub fn size(self) -> u32 {
        match self {
            SlidingWindow::CountBased(n) | SlidingWindow::TimeBased(n) => n,
        }
    }

    fn validate(self) -> Result<(), ConfigError> {
        let (size, max, unit) = match self {
            SlidingWindow::CountBased(n) => (n, Self::MAX_CALLS, "calls"),
            SlidingWindow::TimeBased(n) => (n, Self::MAX_SECONDS, "seconds"),
        };
        if size == 0 || size > max {
            return Err(ConfigError::new(
                "sliding_window",
                format!("the window size must be 1 to {max} {unit}, got {size}"),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for SlidingWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlidingWindow::CountBased(n) => write!(f, "the last {n} calls"),
            SlidingWindow::TimeBased(n) => write!(f, "the calls of the last {n} s"),
        }
    }
}

/// The kind of a [`SlidingWindow`] without its size: Resilience4j's `slidingWindowType`, a
/// setting of its own so that a configuration file can set the kind and the size apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WindowType {
    CountBased,
    TimeBased,
}

/// An exponential backoff of the wait in the open state: the n-th consecutive opening since
/// the breaker was last closed waits `wait_duration_in_open_state × multiplierⁿ⁻¹`, at most
/// `max_wait`. Set with [`CircuitBreakerConfigBuilder::open_state_backoff`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpenStateBackoff {
    multiplier: f64,
    max_wait: Duration,
}

impl OpenStateBackoff {
    /// The factor applied to the wait at each further opening (at least 1.0).
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The longest wait in the open state.
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }
}

/// How a circuit breaker decides. Built with [`CircuitBreakerConfig::builder`], validated by
/// [`CircuitBreakerConfigBuilder::build`].
///
/// A configuration records which fields were set explicitly: a configuration built on a
/// [`base`](CircuitBreakerConfigBuilder::base) takes every field it does not set from that
/// base when the registry installs it (Resilience4j's `baseConfig`).
///
/// The defaults are Resilience4j's, except that rejections by other guards are not failures:
///
/// | field | default |
/// |---|---|
/// | `failure_rate_threshold` | 50 % |
/// | `slow_call_rate_threshold` | 100 % |
/// | `slow_call_duration_threshold` | 60 s (`Duration::MAX`: slow-call detection off) |
/// | `sliding_window` | `CountBased(100)` |
/// | `minimum_number_of_calls` | 100 |
/// | `wait_duration_in_open_state` | 60 s |
/// | `open_state_backoff` | none (the same wait at every opening) |
/// | `automatic_transition_from_open_to_half_open` | `false` |
/// | `permitted_calls_in_half_open_state` | 10 |
/// | `max_wait_duration_in_half_open_state` | 0 (stay half-open until the probes are done) |
/// | `record_rejections` | `false` |
/// | `record_call_durations` | `false` |
/// | `initial_state` | closed |
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{CircuitBreakerConfig, SlidingWindow};
///
/// let config = CircuitBreakerConfig::builder()
///     .failure_rate_threshold(50.0)
///     .sliding_window(SlidingWindow::CountBased(100))
///     .minimum_number_of_calls(20)
///     .wait_duration_in_open_state(Duration::from_secs(10))
///     .permitted_calls_in_half_open_state(5)
///     .build()?;
/// assert_eq!(config.minimum_number_of_calls(), 20);
/// assert_eq!(config.slow_call_rate_threshold(), 100.0);
/// assert!(!config.record_rejections());
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct CircuitBreakerConfig {
    base: Option<Name>,
    failure_rate_threshold: Option<f32>,
    slow_call_rate_threshold: Option<f32>,
    slow_call_duration_threshold: Option<Duration>,
    // The window's kind and size are inherited one by one (a configuration on a time-based
    // base that sets only a size stays time-based), as Resilience4j's two settings are.
    sliding_window_type: Option<WindowType>,
    sliding_window_size: Option<u32>,
    minimum_number_of_calls: Option<u32>,
    wait_duration_in_open_state: Option<Duration>,
    open_state_backoff: Option<OpenStateBackoff>,
    automatic_transition_from_open_to_half_open: Option<bool>,
    permitted_calls_in_half_open_state: Option<u32>,
    max_wait_duration_in_half_open_state: Option<Duration>,
    record_rejections: Option<bool>,
    record_call_durations: Option<bool>,
    initial_state: Option<CircuitState>,
}

crate::config_debug::debug_effective!(CircuitBreakerConfig {
    failure_rate_threshold,
    slow_call_rate_threshold,
    slow_call_duration_threshold,
    sliding_window = |c: &CircuitBreakerConfig| {
        c.sliding_window_type.is_some() || c.sliding_window_size.is_some()
    },
    minimum_number_of_calls,
    wait_duration_in_open_state,
    open_state_backoff,
    automatic_transition_from_open_to_half_open,
    permitted_calls_in_half_open_state,
    max_wait_duration_in_half_open_state,
    record_rejections,
    record_call_durations,
    initial_state,
});

impl CircuitBreakerConfig {
    /// Default `failure_rate_threshold`, in percent.
    pub const DEFAULT_FAILURE_RATE_THRESHOLD: f32 = 50.0;
    /// Default `slow_call_rate_threshold`, in percent.
    pub const DEFAULT_SLOW_CALL_RATE_THRESHOLD: f32 = 100.0;
    /// Default `slow_call_duration_threshold`.
    pub const DEFAULT_SLOW_CALL_DURATION_THRESHOLD: Duration = Duration::from_secs(60);
    /// Default `sliding_window`.
    pub const DEFAULT_SLIDING_WINDOW: SlidingWindow = SlidingWindow::CountBased(100);
    /// Default `minimum_number_of_calls`.
    pub const DEFAULT_MINIMUM_NUMBER_OF_CALLS: u32 = 100;
    /// Default `wait_duration_in_open_state`.
    pub const DEFAULT_WAIT_DURATION_IN_OPEN_STATE: Duration = Duration::from_secs(60);
    /// Default `automatic_transition_from_open_to_half_open`.
    pub const DEFAULT_AUTOMATIC_TRANSITION_FROM_OPEN_TO_HALF_OPEN: bool = false;
    /// Default `permitted_calls_in_half_open_state`.
    pub const DEFAULT_PERMITTED_CALLS_IN_HALF_OPEN_STATE: u32 = 10;
    /// Default `max_wait_duration_in_half_open_state` (zero: no limit).
    pub const DEFAULT_MAX_WAIT_DURATION_IN_HALF_OPEN_STATE: Duration = Duration::ZERO;
    /// Default `record_rejections`.
    pub const DEFAULT_RECORD_REJECTIONS: bool = false;
    /// Default `record_call_durations`.
    pub const DEFAULT_RECORD_CALL_DURATIONS: bool = false;
    /// Default `initial_state`.
    pub const DEFAULT_INITIAL_STATE: CircuitState = CircuitState::Closed;

    /// A builder starting from the defaults.
    pub fn builder() -> CircuitBreakerConfigBuilder {
        CircuitBreakerConfigBuilder::default()
    }

    /// A builder starting from this configuration (one read from a file, say): change a
    /// setting and build again.
    pub fn to_builder(&self) -> CircuitBreakerConfigBuilder {
        CircuitBreakerConfigBuilder {
            config: self.clone(),
        }
    }

    /// The failure rate, in percent of the calls in the window, at or above which the breaker
    /// opens.
    pub fn failure_rate_threshold(&self) -> f32 {
        self.failure_rate_threshold
            .unwrap_or(Self::DEFAULT_FAILURE_RATE_THRESHOLD)
    }

    /// The rate of slow calls, in percent of the calls in the window, at or above which the
    /// breaker opens.
    pub fn slow_call_rate_threshold(&self) -> f32 {
        self.slow_call_rate_threshold
            .unwrap_or(Self::DEFAULT_SLOW_CALL_RATE_THRESHOLD)
    }

    /// A call that takes longer than this is slow (whether it succeeds or fails); one that
    /// takes exactly this long is not, as in Resilience4j.
    /// [`Duration::MAX`] (or anything from 2⁶⁴ ns, about 584 years, up) turns slow-call
    /// detection off: no call is ever slow.
    pub fn slow_call_duration_threshold(&self) -> Duration {
        self.slow_call_duration_threshold
            .unwrap_or(Self::DEFAULT_SLOW_CALL_DURATION_THRESHOLD)
    }

    /// The calls the rates of the closed state are computed over.
    pub fn sliding_window(&self) -> SlidingWindow {
        let size = self
            .sliding_window_size
            .unwrap_or(Self::DEFAULT_SLIDING_WINDOW.size());
        match self.sliding_window_type.unwrap_or(WindowType::CountBased) {
            WindowType::CountBased => SlidingWindow::CountBased(size),
            WindowType::TimeBased => SlidingWindow::TimeBased(size),
        }
    }

    /// The number of calls the window must hold before the rates are computed (for a
    /// count-based window, at most its size is required).
    pub fn minimum_number_of_calls(&self) -> u32 {
        self.minimum_number_of_calls
            .unwrap_or(Self::DEFAULT_MINIMUM_NUMBER_OF_CALLS)
    }

    /// How long the breaker stays open before it lets probe calls through (the first opening;
    /// see [`open_state_backoff`](Self::open_state_backoff) for the later ones).
    pub fn wait_duration_in_open_state(&self) -> Duration {
        self.wait_duration_in_open_state
            .unwrap_or(Self::DEFAULT_WAIT_DURATION_IN_OPEN_STATE)
    }

    /// The backoff of the wait in the open state over consecutive openings, if any.
    pub fn open_state_backoff(&self) -> Option<OpenStateBackoff> {
        self.open_state_backoff
    }

    /// Whether the breaker moves from open to half-open as soon as the wait is over, without
    /// waiting for a call.
    pub fn automatic_transition_from_open_to_half_open(&self) -> bool {
        self.automatic_transition_from_open_to_half_open
            .unwrap_or(Self::DEFAULT_AUTOMATIC_TRANSITION_FROM_OPEN_TO_HALF_OPEN)
    }

    /// The number of probe calls the half-open state lets through, and records before it
    /// decides to close or to open again.
    pub fn permitted_calls_in_half_open_state(&self) -> u32 {
        self.permitted_calls_in_half_open_state
            .unwrap_or(Self::DEFAULT_PERMITTED_CALLS_IN_HALF_OPEN_STATE)
    }

    /// How long the breaker may stay half-open before it opens again; zero waits until the
    /// probes are recorded, however long that takes.
    pub fn max_wait_duration_in_half_open_state(&self) -> Duration {
        self.max_wait_duration_in_half_open_state
            .unwrap_or(Self::DEFAULT_MAX_WAIT_DURATION_IN_HALF_OPEN_STATE)
    }

    /// Whether a call rejected further in by another guard (a bulkhead inside the breaker)
    /// counts as a failure of this breaker.
    pub fn record_rejections(&self) -> bool {
        self.record_rejections
            .unwrap_or(Self::DEFAULT_RECORD_REJECTIONS)
    }

    /// Whether the breaker keeps a histogram of how long its recorded calls took, by outcome,
    /// for the `…_calls_seconds_sum` and `…_calls_seconds_bucket` of
    /// [`Registry::record_metrics`](crate::Registry::record_metrics) (the latency panels of a
    /// Resilience4j dashboard).
    pub fn record_call_durations(&self) -> bool {
        self.record_call_durations
            .unwrap_or(Self::DEFAULT_RECORD_CALL_DURATIONS)
    }

    /// The state a breaker starts in, and starts over in when it is
    /// [reconfigured](super::CircuitBreaker::reconfigure): closed, open (its first opening:
    /// it waits `wait_duration_in_open_state`, then lets probes through) or metrics-only.
    pub fn initial_state(&self) -> CircuitState {
        self.initial_state.unwrap_or(Self::DEFAULT_INITIAL_STATE)
    }

    /// The named configuration this one inherits unset fields from, if any.
    pub fn base(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// The wait in the open state at the `opening`-th consecutive opening since the breaker
    /// was last closed (1 for the first).
    pub(crate) fn wait_in_open_state(&self, opening: u32) -> Duration {
        let base = self.wait_duration_in_open_state();
        let Some(backoff) = self.open_state_backoff else {
            return base;
        };
        let exponent = i32::try_from(opening.saturating_sub(1)).unwrap_or(i32::MAX);
        let seconds = base.as_secs_f64() * backoff.multiplier.powi(exponent);
        match Duration::try_from_secs_f64(seconds) {
            Ok(wait) => wait.min(backoff.max_wait),
            Err(_) => backoff.max_wait,
        }
    }

    /// This configuration with every field it does not set taken from `base`, which must
    /// already be resolved. The result has no base.
    pub(crate) fn inherit(&self, base: &Self) -> Result<Self, ConfigError> {
        let merged = CircuitBreakerConfig {
            base: None,
            failure_rate_threshold: self.failure_rate_threshold.or(base.failure_rate_threshold),
            slow_call_rate_threshold: self
                .slow_call_rate_threshold
                .or(base.slow_call_rate_threshold),
            slow_call_duration_threshold: self
                .slow_call_duration_threshold
                .or(base.slow_call_duration_threshold),
            sliding_window_type: self.sliding_window_type.or(base.sliding_window_type),
            sliding_window_size: self.sliding_window_size.or(base.sliding_window_size),
            minimum_number_of_calls: self
                .minimum_number_of_calls
                .or(base.minimum_number_of_calls),
            wait_duration_in_open_state: self
                .wait_duration_in_open_state
                .or(base.wait_duration_in_open_state),
            open_state_backoff: self.open_state_backoff.or(base.open_state_backoff),
            automatic_transition_from_open_to_half_open: self
                .automatic_transition_from_open_to_half_open
                .or(base.automatic_transition_from_open_to_half_open),
            permitted_calls_in_half_open_state: self
                .permitted_calls_in_half_open_state
                .or(base.permitted_calls_in_half_open_state),
            max_wait_duration_in_half_open_state: self
                .max_wait_duration_in_half_open_state
                .or(base.max_wait_duration_in_half_open_state),
            record_rejections: self.record_rejections.or(base.record_rejections),
            record_call_durations: self.record_call_durations.or(base.record_call_durations),
            initial_state: self.initial_state.or(base.initial_state),
        };
        merged.validate()?;
        Ok(merged)
    }

    /// Checks a configuration whose every field is known: its own, else the defaults.
    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_own()?;
        self.validate_across(self.wait_duration_in_open_state())
    }

    /// Checks what a configuration built on a base can know before the registry resolves the
    /// base: each field it sets, and a rule across fields only where it sets every field of
    /// the rule. The registry checks the merged configuration in full ([`inherit`](Self::inherit)),
    /// so a rule that depends on an inherited field is checked then, against the base's value
    /// and not the default's.
    fn validate_derived(&self) -> Result<(), ConfigError> {
        self.validate_own()?;
        match self.wait_duration_in_open_state {
            Some(wait) => self.validate_across(wait),
            None => Ok(()),
        }
    }

    /// The rules across fields: the backoff's maximum against the open state's `wait`.
    fn validate_across(&self, wait: Duration) -> Result<(), ConfigError> {
        if let Some(backoff) = self.open_state_backoff {
            if backoff.max_wait < wait {
                return Err(ConfigError::new(
                    "open_state_backoff",
                    format!(
                        "the maximum wait must be at least `wait_duration_in_open_state` ({wait:?}), got {:?}",
                        backoff.max_wait
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The rules of one field each (an unset field has its default, which is valid).
    fn validate_own(&self) -> Result<(), ConfigError> {
        validate_rate("failure_rate_threshold", self.failure_rate_threshold())?;
        validate_rate("slow_call_rate_threshold", self.slow_call_rate_threshold())?;
        if self.slow_call_duration_threshold().is_zero() {
            return Err(ConfigError::new(
                "slow_call_duration_threshold",
                "must be greater than zero, got 0 (every call would be slow)",
            ));
        }
        self.sliding_window().validate()?;
        if self.minimum_number_of_calls() == 0 {
            return Err(ConfigError::new(
                "minimum_number_of_calls",
                "must be at least 1, got 0",
            ));
        }
        let wait = self.wait_duration_in_open_state();
        if wait < Duration::from_millis(1) {
            return Err(ConfigError::new(
                "wait_duration_in_open_state",
                format!("must be at least 1 ms, got {wait:?}"),
            ));
        }
        if let Some(backoff) = self.open_state_backoff {
            let multiplier = backoff.multiplier;
            if !multiplier.is_finite() || multiplier < 1.0 {
                return Err(ConfigError::new(
                    "open_state_backoff",
                    format!(
                        "the multiplier must be a finite number of at least 1.0, got {multiplier}"
                    ),
                ));
            }
        }
        if self.permitted_calls_in_half_open_state() == 0 {
            return Err(ConfigError::new(
                "permitted_calls_in_half_open_state",
                "must be at least 1, got 0 (the half-open state could never decide)",
            ));
        }
        match self.initial_state() {
            CircuitState::Closed | CircuitState::Open | CircuitState::MetricsOnly => {}
            other
            @ (CircuitState::HalfOpen | CircuitState::Disabled | CircuitState::ForcedOpen) => {
                return Err(ConfigError::new(
                    "initial_state",
                    format!(
                        "a breaker can start closed, open or metrics only, got {other}; \
                         start it closed and call `transition_to_{}_state()`",
                        match other {
                            CircuitState::HalfOpen => "half_open",
                            CircuitState::Disabled => "disabled",
                            _ => "forced_open",
                        }
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn validate_rate(field: &'static str, percent: f32) -> Result<(), ConfigError> {
    // Written so that NaN fails too.
    if !(percent > 0.0 && percent <= 100.0) {
        return Err(ConfigError::new(
            field,
            format!("must be a percentage above 0 and at most 100, got {percent}"),
        ));
    }
    Ok(())
}

/// Builds a [`CircuitBreakerConfig`]; see there for the fields and their defaults.
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `build()` is called"]
pub struct CircuitBreakerConfigBuilder {
    config: CircuitBreakerConfig,
}

impl CircuitBreakerConfigBuilder {
    /// The failure rate, in percent, at or above which the breaker opens (above 0, at most
    /// 100).
    pub fn failure_rate_threshold(mut self, percent: f32) -> Self {
        self.config.failure_rate_threshold = Some(percent);
        self
    }

    /// The rate of slow calls, in percent, at or above which the breaker opens (above 0, at
    /// most 100).
    pub fn slow_call_rate_threshold(mut self, percent: f32) -> Self {
        self.config.slow_call_rate_threshold = Some(percent);
        self
    }

    /// A call that takes longer than this is slow (greater than zero; a call of exactly
    /// this duration is not slow, as in Resilience4j).
    ///
    /// [`Duration::MAX`] turns slow-call detection off: no call is ever slow, and a breaker
    /// with a count-based window then reads no clock at all on its closed path (unless someone
    /// subscribed to its events). Any other threshold times every call: on the system clock on
    /// Linux with the cheap coarse clock when its resolution is at most 1 % of the threshold
    /// (the default 60 s qualifies), else with the precise clock (see the
    /// [circuit breaker's docs](mod@crate::circuit_breaker)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{CircuitBreakerConfig, SlidingWindow};
    ///
    /// // Failures only, over the last 100 calls: no clock on the closed path.
    /// let config = CircuitBreakerConfig::builder()
    ///     .sliding_window(SlidingWindow::CountBased(100))
    ///     .slow_call_duration_threshold(Duration::MAX)
    ///     .build()?;
    /// assert_eq!(config.slow_call_duration_threshold(), Duration::MAX);
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn slow_call_duration_threshold(mut self, threshold: Duration) -> Self {
        self.config.slow_call_duration_threshold = Some(threshold);
        self
    }

    /// The calls the rates of the closed state are computed over.
    pub fn sliding_window(mut self, window: SlidingWindow) -> Self {
        let kind = match window {
            SlidingWindow::CountBased(_) => WindowType::CountBased,
            SlidingWindow::TimeBased(_) => WindowType::TimeBased,
        };
        self.config.sliding_window_type = Some(kind);
        self.config.sliding_window_size = Some(window.size());
        self
    }

    /// The window's kind alone, its size inherited (a configuration file's
    /// `sliding_window_type`).
    #[cfg(feature = "serde")]
    pub(crate) fn sliding_window_type(mut self, kind: WindowType) -> Self {
        self.config.sliding_window_type = Some(kind);
        self
    }

    /// The window's size alone, its kind inherited (a configuration file's
    /// `sliding_window_size`).
    #[cfg(feature = "serde")]
    pub(crate) fn sliding_window_size(mut self, size: u32) -> Self {
        self.config.sliding_window_size = Some(size);
        self
    }

    /// The number of calls the window must hold before the rates are computed (at least 1).
    pub fn minimum_number_of_calls(mut self, calls: u32) -> Self {
        self.config.minimum_number_of_calls = Some(calls);
        self
    }

    /// How long the breaker stays open before it lets probe calls through (at least 1 ms).
    pub fn wait_duration_in_open_state(mut self, wait: Duration) -> Self {
        self.config.wait_duration_in_open_state = Some(wait);
        self
    }

    /// Grows the wait in the open state by `multiplier` (at least 1.0) at each consecutive
    /// opening since the breaker was last closed, up to `max_wait` (at least
    /// `wait_duration_in_open_state`).
    pub fn open_state_backoff(mut self, multiplier: f64, max_wait: Duration) -> Self {
        self.config.open_state_backoff = Some(OpenStateBackoff {
            multiplier,
            max_wait,
        });
        self
    }

    /// Moves from open to half-open as soon as the wait is over, without waiting for a call.
    pub fn automatic_transition_from_open_to_half_open(mut self, enabled: bool) -> Self {
        self.config.automatic_transition_from_open_to_half_open = Some(enabled);
        self
    }

    /// The number of probe calls of the half-open state (at least 1).
    pub fn permitted_calls_in_half_open_state(mut self, calls: u32) -> Self {
        self.config.permitted_calls_in_half_open_state = Some(calls);
        self
    }

    /// Opens again if the breaker stays half-open this long; zero waits indefinitely.
    pub fn max_wait_duration_in_half_open_state(mut self, wait: Duration) -> Self {
        self.config.max_wait_duration_in_half_open_state = Some(wait);
        self
    }

    /// Counts a call rejected further in by another guard as a failure of this breaker
    /// (default `false`: such a call is not recorded at all).
    pub fn record_rejections(mut self, record: bool) -> Self {
        self.config.record_rejections = Some(record);
        self
    }

    /// Keeps a histogram of how long the recorded calls took, by outcome (`successful`,
    /// `failed`, `ignored`), which [`Registry::record_metrics`](crate::Registry::record_metrics)
    /// exports as the `_sum` and `_bucket` of Resilience4j's `…_calls_seconds` timer, so the
    /// latency panels of its dashboard fill. It is off by default because, on, every call is
    /// timed with the precise clock: two readings that with the histogram's update cost about
    /// 50 ns a call (BENCHMARKS.md has the CPU and the side-by-side run). The counts are kept
    /// either way.
    ///
    /// The buckets are fixed: 1, 2.5, 5, 10, 25, 50, 100, 250 and 500 ms, 1, 2.5, 5 and
    /// 10 s. A call is timed from its permit to its record, and only calls the breaker records
    /// (and counts in `…_calls_seconds_count`) are timed. Turned on by reconfiguration, the
    /// histogram starts with the calls that follow, while `_count` counts from the breaker's
    /// creation: `increase(_sum) / increase(_count)` over a range after the change is exact,
    /// and the `le="+Inf"` bucket counts the timed calls only.
    ///
    /// ```
    /// use resilience_runtime::CircuitBreakerConfig;
    ///
    /// let config = CircuitBreakerConfig::builder()
    ///     .record_call_durations(true)
    ///     .build()?;
    /// assert!(config.record_call_durations());
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn record_call_durations(mut self, record: bool) -> Self {
        self.config.record_call_durations = Some(record);
        self
    }

    /// The state a breaker of this configuration starts in: closed (the default), open or
    /// metrics-only (see [`CircuitBreakerConfig::initial_state`]).
    ///
    /// ```
    /// use resilience_runtime::{CircuitBreaker, CircuitBreakerConfig, CircuitState};
    ///
    /// // A dependency known to be down at startup: refuse calls until the first probe.
    /// let config = CircuitBreakerConfig::builder()
    ///     .initial_state(CircuitState::Open)
    ///     .build()?;
    /// let breaker = CircuitBreaker::new("ledger", config);
    /// assert_eq!(breaker.state(), CircuitState::Open);
    /// assert!(breaker.try_acquire().is_err());
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn initial_state(mut self, state: CircuitState) -> Self {
        self.config.initial_state = Some(state);
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
    /// A [`ConfigError`] naming the field: a rate threshold not above 0 and at most 100 (or
    /// NaN), a zero `slow_call_duration_threshold`, a window of 0 or more than
    /// [`SlidingWindow::MAX_CALLS`] calls or [`SlidingWindow::MAX_SECONDS`] seconds, a zero
    /// `minimum_number_of_calls` or `permitted_calls_in_half_open_state`, a
    /// `wait_duration_in_open_state` under 1 ms, a backoff multiplier under 1.0 or not finite,
    /// a backoff maximum under `wait_duration_in_open_state`, or an `initial_state` other than
    /// closed, open or metrics-only.
    ///
    /// A configuration with a [`base`](Self::base) is checked here only in what it sets
    /// itself: a backoff maximum is compared with `wait_duration_in_open_state` only if this
    /// builder sets both. The registry checks the merged configuration, with the base's values,
    /// when it installs it ([`Registry::configure_circuit_breaker`](crate::Registry::configure_circuit_breaker)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{CircuitBreakerConfig, Registry};
    ///
    /// let registry = Registry::new();
    /// registry.configure_circuit_breaker("fast", CircuitBreakerConfig::builder()
    ///     .wait_duration_in_open_state(Duration::from_millis(10))
    ///     .build()?)?;
    /// // Valid against the base's 10 ms wait (the default's 60 s would refuse it).
    /// let derived = CircuitBreakerConfig::builder()
    ///     .base("fast")
    ///     .open_state_backoff(2.0, Duration::from_millis(50))
    ///     .build()?;
    /// registry.configure_circuit_breaker("search", derived)?;
    /// assert_eq!(
    ///     registry.circuit_breaker("search").config().wait_duration_in_open_state(),
    ///     Duration::from_millis(10),
    /// );
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn build(self) -> Result<CircuitBreakerConfig, ConfigError> {
        if self.config.base.is_some() {
            self.config.validate_derived()?;
        } else {
            self.config.validate()?;
        }
        Ok(self.config)
    }
}
