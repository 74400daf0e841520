//! [`DrillConfig`]: the load, the downstream and the guards of one drill.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use resilience_runtime::{
    AdaptiveLimit, BulkheadConfig, CircuitBreakerConfig, ConfigError, RateLimiterConfig, Registry,
    RetryConfig, SlidingWindow, TimeLimiterConfig,
};

use super::{Layout, ORDERS};

/// Everything a drill run depends on. [`Default`] follows the incident (about 500 callers, a
/// bulkhead of 80 calls with a 500 ms wait, a breaker at 50 % over a count window of 100) with
/// time compressed to 15 s per layout; [`DrillConfig::quick`] is the same story in 4 s.
///
/// The load of one layout, as a schedule scaled to [`duration`](Self::duration):
///
/// - callers start one after another over the first [`ramp`](Self::ramp) of the run, so
///   demand rises;
/// - each caller loops: think for a random time in [`think_time`](Self::think_time), place an
///   order, wait for its outcome; it stops offering at the deadline, and its call in flight
///   finishes and is counted;
/// - in the layouts with all five aspects, a rate limiter grants
///   [`rate_limit_per_second`](Self::rate_limit_per_second), a retry makes up to
///   [`retry_max_attempts`](Self::retry_max_attempts) attempts, and a time limiter cuts off an
///   attempt after [`time_limiter_timeout`](Self::time_limiter_timeout);
/// - the downstream runs at most [`downstream_workers`](Self::downstream_workers) requests at
///   once (the others queue for a worker), and its service time climbs from
///   [`service_time_start`](Self::service_time_start) to
///   [`service_time_peak`](Self::service_time_peak) over the first
///   [`degradation`](Self::degradation) of the run (a dependency slowing down under the
///   incident), each request drawing a jitter of ±25 % and a failure with probability
///   [`failure_probability`](Self::failure_probability).
///
/// Every random draw comes from a per-caller generator derived from [`seed`](Self::seed) and
/// the caller's index, and a caller draws the same numbers for its n-th order whatever
/// happened to its earlier ones, so every layout is offered the same load.
///
/// ```
/// use std::time::Duration;
/// use resilience_examples::drill::DrillConfig;
///
/// let config = DrillConfig { callers: 40, duration: Duration::from_secs(2), ..DrillConfig::quick() };
/// assert!(config.validate().is_ok());
/// assert_eq!(DrillConfig::default().bulkhead_max_concurrent_calls, 80);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DrillConfig {
    /// Concurrent callers (simulated clients of the order service).
    pub callers: u32,
    /// How long each layout offers load (in-flight calls then finish).
    pub duration: Duration,
    /// The seed of every random draw.
    pub seed: u64,
    /// The layouts to run, in order.
    pub layouts: Vec<Layout>,
    /// The share of `duration` over which callers start, in `(0, 1]`.
    pub ramp: f64,
    /// The range a caller's pause between two orders is drawn from.
    pub think_time: (Duration, Duration),
    /// Requests the downstream serves at once; the others queue (first come, first served).
    pub downstream_workers: u32,
    /// The downstream's mean service time at the start of the run.
    pub service_time_start: Duration,
    /// The downstream's mean service time once it has degraded.
    pub service_time_peak: Duration,
    /// The share of `duration` over which the service time climbs to its peak, in `(0, 1]`.
    pub degradation: f64,
    /// The share of `duration` after which the downstream recovers (its service time falls
    /// back to `service_time_start` at once), in `(degradation, 1]`; `None`: it never does.
    pub recovery: Option<f64>,
    /// The probability that a request the downstream serves fails, in `[0, 1)`.
    pub failure_probability: f64,
    /// The bulkhead's `max_concurrent_calls`.
    pub bulkhead_max_concurrent_calls: u32,
    /// The bulkhead's `max_wait_duration`.
    pub bulkhead_max_wait: Duration,
    /// The breaker's `failure_rate_threshold`, in percent.
    pub breaker_failure_rate_threshold: f32,
    /// The breaker's count-based window size.
    pub breaker_window: u32,
    /// The breaker's `minimum_number_of_calls`.
    pub breaker_minimum_calls: u32,
    /// The breaker's `wait_duration_in_open_state` (compressed like the rest of the run).
    pub breaker_open_wait: Duration,
    /// The breaker's `permitted_calls_in_half_open_state`.
    pub breaker_half_open_calls: u32,
    /// The rate limiter's permissions per second (the layouts with all five aspects; it
    /// refuses at once when they are spent).
    pub rate_limit_per_second: u32,
    /// The retry's `max_attempts` (the layouts with all five aspects).
    pub retry_max_attempts: u32,
    /// The retry's `wait_duration` before its first retry (it doubles after, up to 4 times).
    pub retry_wait: Duration,
    /// The time limiter's `timeout_duration` (the layouts with all five aspects).
    pub time_limiter_timeout: Duration,
    /// Worker threads of the drill's runtime; `0` means one per available core.
    pub worker_threads: usize,
}

impl Default for DrillConfig {
    fn default() -> Self {
        DrillConfig {
            callers: 500,
            duration: Duration::from_secs(15),
            seed: 42,
            layouts: Layout::ALL.to_vec(),
            ramp: 0.3,
            think_time: (Duration::from_millis(20), Duration::from_millis(80)),
            downstream_workers: 60,
            service_time_start: Duration::from_millis(20),
            service_time_peak: Duration::from_millis(200),
            degradation: 0.5,
            recovery: None,
            failure_probability: 0.03,
            bulkhead_max_concurrent_calls: 80,
            bulkhead_max_wait: Duration::from_millis(500),
            breaker_failure_rate_threshold: 50.0,
            breaker_window: 100,
            breaker_minimum_calls: 20,
            breaker_open_wait: Duration::from_secs(2),
            breaker_half_open_calls: 5,
            rate_limit_per_second: 1500,
            retry_max_attempts: 3,
            retry_wait: Duration::from_millis(50),
            time_limiter_timeout: Duration::from_millis(300),
            worker_threads: 0,
        }
    }
}

impl DrillConfig {
    /// The default drill compressed to 4 s per layout (about 21 s for the five layouts).
    pub fn quick() -> Self {
        DrillConfig {
            duration: Duration::from_secs(4),
            breaker_open_wait: Duration::from_secs(1),
            ..DrillConfig::default()
        }
    }

    /// The adaptive comparison ([`Layout::ADAPTIVE`]) on the default load, with a downstream
    /// that degrades over the first 40 % of the run and recovers at 75 %: the limit must come
    /// down as the downstream slows and rise again after.
    pub fn adaptive() -> Self {
        DrillConfig {
            layouts: Layout::ADAPTIVE.to_vec(),
            degradation: 0.4,
            recovery: Some(0.75),
            ..DrillConfig::default()
        }
    }

    /// Checks the numbers a run cannot work with.
    ///
    /// # Errors
    ///
    /// A [`DrillConfigError`] naming the first field out of range, or a guard configuration
    /// the runtime refuses.
    pub fn validate(&self) -> Result<(), DrillConfigError> {
        let bad = |field: &'static str, reason: &str| {
            Err(DrillConfigError::Field {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.callers == 0 {
            return bad("callers", "at least one caller is needed");
        }
        if self.duration.is_zero() {
            return bad("duration", "must be longer than zero");
        }
        if self.layouts.is_empty() {
            return bad("layouts", "at least one layout is needed");
        }
        if !(self.ramp > 0.0 && self.ramp <= 1.0) {
            return bad("ramp", "must be in (0, 1]");
        }
        if !(self.degradation > 0.0 && self.degradation <= 1.0) {
            return bad("degradation", "must be in (0, 1]");
        }
        if let Some(recovery) = self.recovery {
            if !(recovery > self.degradation && recovery <= 1.0) {
                return bad(
                    "recovery",
                    "must be after the degradation, in (degradation, 1]",
                );
            }
        }
        if self.think_time.0 > self.think_time.1 {
            return bad("think_time", "the low end is above the high end");
        }
        if self.downstream_workers == 0 {
            return bad("downstream_workers", "at least one worker is needed");
        }
        if !(0.0..1.0).contains(&self.failure_probability) {
            return bad("failure_probability", "must be in [0, 1)");
        }
        for layout in &self.layouts {
            self.bulkhead_for(*layout)?;
            self.circuit_breaker_for(*layout)?;
            self.retry_for(*layout)?;
        }
        self.rate_limiter()?;
        self.time_limiter()?;
        Ok(())
    }

    /// The bulkhead configuration of `layout`.
    pub(crate) fn bulkhead_for(&self, layout: Layout) -> Result<BulkheadConfig, ConfigError> {
        let builder = BulkheadConfig::builder()
            .max_wait_duration(self.bulkhead_max_wait)
            .fair_call_handling(layout.fair_call_handling());
        match layout {
            Layout::Fixed(calls) => builder.max_concurrent_calls(calls),
            // Netflix's settings but the bounds, wide enough for both starts.
            Layout::Adaptive(algorithm, initial) => builder.adaptive(
                AdaptiveLimit::new(algorithm)
                    .min_limit(1)
                    .max_limit(Layout::ADAPTIVE_MAX_LIMIT)
                    .initial_limit(initial),
            ),
            _ => builder.max_concurrent_calls(self.bulkhead_max_concurrent_calls),
        }
        .build()
    }

    /// The circuit breaker configuration of `layout`.
    pub(crate) fn circuit_breaker_for(
        &self,
        layout: Layout,
    ) -> Result<CircuitBreakerConfig, ConfigError> {
        CircuitBreakerConfig::builder()
            .failure_rate_threshold(self.breaker_failure_rate_threshold)
            .sliding_window(SlidingWindow::CountBased(self.breaker_window))
            .minimum_number_of_calls(self.breaker_minimum_calls)
            .wait_duration_in_open_state(self.breaker_open_wait)
            .permitted_calls_in_half_open_state(self.breaker_half_open_calls)
            .record_rejections(layout.records_rejections())
            .build()
    }

    /// The rate limiter configuration: `rate_limit_per_second` in cycles of 100 ms.
    pub(crate) fn rate_limiter(&self) -> Result<RateLimiterConfig, ConfigError> {
        RateLimiterConfig::builder()
            .limit_for_period(self.rate_limit_per_second.div_ceil(10))
            .limit_refresh_period(Duration::from_millis(100))
            .timeout_duration(Duration::ZERO)
            .build()
    }

    /// The retry configuration of `layout`: it retries refusals only in Spring's layout.
    pub(crate) fn retry_for(&self, layout: Layout) -> Result<RetryConfig, ConfigError> {
        RetryConfig::builder()
            .max_attempts(self.retry_max_attempts)
            .wait_duration(self.retry_wait)
            .exponential_backoff(2.0, self.retry_wait.saturating_mul(4))
            // No jitter: its draws are not seeded, and the layouts must see the same load.
            .retry_on_rejection(layout.retries_rejections())
            .build()
    }

    /// The time limiter configuration.
    pub(crate) fn time_limiter(&self) -> Result<TimeLimiterConfig, ConfigError> {
        TimeLimiterConfig::builder()
            .timeout_duration(self.time_limiter_timeout)
            .build()
    }

    /// Takes the numbers of the guards from the `orders` instances of a configuration file
    /// (such as `examples/config/incident.toml`), as [`Registry::load_file`] reads it: the
    /// bulkhead's size and wait, the breaker's threshold, count window, minimum calls, open
    /// wait and probes, the rate limiter's rate, the retry's attempts and first wait, the time
    /// limiter's timeout. What the layouts compare (precedence, `fair_call_handling`,
    /// `record_rejections`, `retry_on_rejection`) stays the layouts' to set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_examples::drill::DrillConfig;
    ///
    /// let mut config = DrillConfig::quick();
    /// config.take_guards_from_file("config/incident.toml")?;
    /// assert_eq!(config.bulkhead_max_concurrent_calls, 80);
    /// assert_eq!(config.time_limiter_timeout, Duration::from_millis(300));
    /// # Ok::<(), resilience_examples::drill::DrillConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`DrillConfigError::Document`] if the file is refused (its message says where and why),
    /// or its breaker's window is time-based (the drill's is count-based).
    pub fn take_guards_from_file(
        &mut self,
        path: impl AsRef<Path>,
    ) -> Result<(), DrillConfigError> {
        let document = |e: &dyn fmt::Display| DrillConfigError::Document(e.to_string());
        let registry = Registry::new();
        registry.load_file(path).map_err(|e| document(&e))?;
        let bulkhead = registry.bulkhead_config(ORDERS);
        self.bulkhead_max_concurrent_calls = bulkhead.max_concurrent_calls();
        self.bulkhead_max_wait = bulkhead.max_wait_duration();
        let breaker = registry.circuit_breaker_config(ORDERS);
        self.breaker_failure_rate_threshold = breaker.failure_rate_threshold();
        self.breaker_window = match breaker.sliding_window() {
            SlidingWindow::CountBased(calls) => calls,
            SlidingWindow::TimeBased(_) => {
                return Err(document(&"the drill's breaker window is count-based: set `sliding_window_type = \"count_based\"` for `circuit_breaker.instances.orders`"));
            }
        };
        self.breaker_minimum_calls = breaker.minimum_number_of_calls();
        self.breaker_open_wait = breaker.wait_duration_in_open_state();
        self.breaker_half_open_calls = breaker.permitted_calls_in_half_open_state();
        let limiter = registry.rate_limiter_config(ORDERS);
        let per_second =
            f64::from(limiter.limit_for_period()) / limiter.limit_refresh_period().as_secs_f64();
        self.rate_limit_per_second = per_second.round().clamp(1.0, f64::from(u32::MAX)) as u32;
        let retry = registry.retry_config(ORDERS);
        self.retry_max_attempts = retry.max_attempts();
        self.retry_wait = retry.wait_duration();
        self.time_limiter_timeout = registry.time_limiter_config(ORDERS).timeout_duration();
        Ok(())
    }

    /// The worker threads to start.
    pub(crate) fn threads(&self) -> usize {
        if self.worker_threads > 0 {
            return self.worker_threads;
        }
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }
}

/// Why a [`DrillConfig`] cannot run.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum DrillConfigError {
    /// A field of the drill is out of range.
    Field {
        /// The field.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// The runtime refused a guard configuration built from the drill's numbers.
    Guard(ConfigError),
    /// A configuration file was refused (see [`DrillConfig::take_guards_from_file`]): the
    /// message says where and why.
    Document(String),
}

impl From<ConfigError> for DrillConfigError {
    fn from(e: ConfigError) -> Self {
        DrillConfigError::Guard(e)
    }
}

impl fmt::Display for DrillConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DrillConfigError::Field { field, reason } => write!(f, "invalid `{field}`: {reason}"),
            DrillConfigError::Guard(e) => write!(f, "guard configuration refused: {e}"),
            DrillConfigError::Document(e) => write!(f, "configuration file refused: {e}"),
        }
    }
}

impl std::error::Error for DrillConfigError {}
