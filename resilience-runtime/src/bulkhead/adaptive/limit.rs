//! [`AdaptiveLimit`] and [`LimitAlgorithm`]: how an adaptive bulkhead limit is configured,
//! checked and read back ([`AdaptiveSettings`]).

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;

/// The algorithm an [`AdaptiveLimit`] finds the limit with: this library's knee, and the three
/// of Netflix's concurrency-limits library with its published defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitAlgorithm {
    /// Compares each call's latency with a long-term average of latencies: grows the limit
    /// by a small queue allowance while they agree, shrinks it (by at most half) as latency
    /// climbs above the average by more than the tolerance. It follows a latency that
    /// climbs slowly, and lets the queue grow with it.
    Gradient2,
    /// TCP Vegas: estimates the queue in front of the dependency from the lowest latency seen
    /// (re-probed from time to time) and grows the limit while that queue is short, shrinks
    /// it when it is long or a call is dropped.
    Vegas,
    /// Additive increase, multiplicative decrease: one more while calls use at least half the
    /// limit, times `backoff_ratio` on a drop (a time-out, a call given up, or a call slower
    /// than `timeout`). Ignores latency otherwise.
    Aimd,
    /// This library's: finds the most calls the dependency holds before they queue (the
    /// knee of its latency curve) by running a lower and a higher limit in turn, a few round
    /// trips apart, and comparing their latencies. A dependency that slows down raises both
    /// alike and moves nothing; a queue raises the higher one's. Costs a seventh of the time
    /// at about 0.87 and 1.15 times the knee once found. Drops back it off by a tenth.
    Knee,
}

impl LimitAlgorithm {
    /// The name of the algorithm in a configuration file: `knee`, `gradient2`, `vegas`, `aimd`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitAlgorithm::Gradient2 => "gradient2",
            LimitAlgorithm::Vegas => "vegas",
            LimitAlgorithm::Aimd => "aimd",
            LimitAlgorithm::Knee => "knee",
        }
    }
}

impl fmt::Display for LimitAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An adaptive limit for a bulkhead ([`BulkheadConfigBuilder::adaptive`](crate::BulkheadConfigBuilder::adaptive)):
/// instead of a fixed `max_concurrent_calls`, the bulkhead finds the number of calls the
/// dependency serves without queueing, from the durations of the calls it admits.
///
/// [`knee`](Self::knee) is the algorithm to start with: it holds the limit where the calls
/// start to queue while the dependency's latency moves, and needs no tuning (the drill's
/// comparison, docs/overload-drill.md). Netflix's three are here, with their published
/// defaults, for their users and for comparison.
///
/// Every field not set takes the algorithm's default (Netflix's concurrency-limits' for its
/// algorithms; the knee takes the bounds alone):
///
/// | field | applies to | default |
/// |---|---|---|
/// | `min_limit` | all | 20 (Vegas: 1) |
/// | `max_limit` | all | 200 (Vegas: 1000) |
/// | `initial_limit` | all | 20, within the bounds |
/// | `smoothing` | Gradient2, Vegas | 0.2 (Vegas: 1.0): how far each sample moves the limit toward its target |
/// | `rtt_tolerance` | Gradient2 | 1.5: latency up to this multiple of the long-term average is not queueing |
/// | `queue_size` | Gradient2 | 4: the calls allowed to queue, the limit's growth step |
/// | `long_window` | Gradient2 | 600: the samples of the long-term average |
/// | `probe_multiplier` | Vegas | 30: the lowest latency is probed again every 15–30 × limit samples |
/// | `backoff_ratio` | AIMD | 0.9: the limit is multiplied by it on a drop |
/// | `timeout` | AIMD | 5 s: a call slower than this counts as a drop |
///
/// A sample is an admitted call's duration from its admission to its end. A call that timed
/// out (a time limiter inside the bulkhead cut it off), was given up (its future dropped) or
/// was shed by the dependency ([`CallOutcome::Overloaded`](crate::CallOutcome::Overloaded))
/// is a drop; a call refused by a guard further in, a panic and an error the call's
/// classification ignores are no sample.
///
/// ```
/// use resilience_runtime::{AdaptiveLimit, BulkheadConfig};
///
/// let config = BulkheadConfig::builder()
///     .adaptive(AdaptiveLimit::knee().min_limit(10).max_limit(400))
///     .build()?;
/// let settings = config.adaptive().unwrap().settings();
/// assert_eq!((settings.min_limit, settings.initial_limit, settings.max_limit), (10, 20, 400));
/// // The bulkhead starts at the initial limit.
/// assert_eq!(config.max_concurrent_calls(), 20);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct AdaptiveLimit {
    algorithm: LimitAlgorithm,
    min_limit: Option<u32>,
    max_limit: Option<u32>,
    initial_limit: Option<u32>,
    smoothing: Option<f64>,
    rtt_tolerance: Option<f64>,
    queue_size: Option<u32>,
    long_window: Option<u32>,
    probe_multiplier: Option<u32>,
    backoff_ratio: Option<f64>,
    timeout: Option<Duration>,
}

impl AdaptiveLimit {
    /// An adaptive limit found by `algorithm`, with its defaults.
    pub fn new(algorithm: LimitAlgorithm) -> Self {
        AdaptiveLimit {
            algorithm,
            min_limit: None,
            max_limit: None,
            initial_limit: None,
            smoothing: None,
            rtt_tolerance: None,
            queue_size: None,
            long_window: None,
            probe_multiplier: None,
            backoff_ratio: None,
            timeout: None,
        }
    }

    /// Gradient2 (see [`LimitAlgorithm::Gradient2`]).
    pub fn gradient2() -> Self {
        Self::new(LimitAlgorithm::Gradient2)
    }

    /// Vegas (see [`LimitAlgorithm::Vegas`]).
    pub fn vegas() -> Self {
        Self::new(LimitAlgorithm::Vegas)
    }

    /// AIMD (see [`LimitAlgorithm::Aimd`]).
    pub fn aimd() -> Self {
        Self::new(LimitAlgorithm::Aimd)
    }

    /// The knee (see [`LimitAlgorithm::Knee`]), the algorithm to start with (a file's
    /// `adaptive` table without `algorithm`).
    pub fn knee() -> Self {
        Self::new(LimitAlgorithm::Knee)
    }

    /// The lowest the limit goes (at least 1).
    pub fn min_limit(mut self, limit: u32) -> Self {
        self.min_limit = Some(limit);
        self
    }

    /// The highest the limit goes.
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.max_limit = Some(limit);
        self
    }

    /// The limit the bulkhead starts with (and starts over with when reconfigured), within
    /// the bounds.
    pub fn initial_limit(mut self, limit: u32) -> Self {
        self.initial_limit = Some(limit);
        self
    }

    /// How far each sample moves the limit toward the algorithm's target, in (0, 1]
    /// (Gradient2 and Vegas).
    pub fn smoothing(mut self, smoothing: f64) -> Self {
        self.smoothing = Some(smoothing);
        self
    }

    /// Latency up to this multiple (at least 1) of the long-term average is not taken for
    /// queueing (Gradient2).
    pub fn rtt_tolerance(mut self, tolerance: f64) -> Self {
        self.rtt_tolerance = Some(tolerance);
        self
    }

    /// The calls allowed to queue in front of the dependency: what the limit grows by while
    /// latency holds (Gradient2).
    pub fn queue_size(mut self, calls: u32) -> Self {
        self.queue_size = Some(calls);
        self
    }

    /// The number of samples the long-term latency average spans (Gradient2, at least 1).
    pub fn long_window(mut self, samples: u32) -> Self {
        self.long_window = Some(samples);
        self
    }

    /// The lowest latency is measured again every `multiplier` × limit samples, jittered
    /// (Vegas, at least 1).
    pub fn probe_multiplier(mut self, multiplier: u32) -> Self {
        self.probe_multiplier = Some(multiplier);
        self
    }

    /// What a drop multiplies the limit by, in [0.5, 1) (AIMD).
    pub fn backoff_ratio(mut self, ratio: f64) -> Self {
        self.backoff_ratio = Some(ratio);
        self
    }

    /// A call slower than this counts as a drop (AIMD).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The algorithm.
    pub fn algorithm(&self) -> LimitAlgorithm {
        self.algorithm
    }

    /// Every setting in force: those set, and the algorithm's defaults for the others.
    pub fn settings(&self) -> AdaptiveSettings {
        use LimitAlgorithm::{Aimd, Gradient2, Knee, Vegas};
        let algorithm = self.algorithm;
        let (min, max) = match algorithm {
            Gradient2 | Aimd | Knee => (20, 200),
            Vegas => (1, 1000),
        };
        // A bound set alone moves the other's default out of its way (`max_limit(10)` alone
        // lowers the minimum to 10), and the start into the bounds, so that no setting the
        // user did not write is refused.
        let min_limit = self
            .min_limit
            .unwrap_or(min.min(self.max_limit.unwrap_or(u32::MAX)));
        let max_limit = self.max_limit.unwrap_or(max.max(min_limit));
        let initial_limit = self
            .initial_limit
            .unwrap_or(20)
            .clamp(min_limit.min(max_limit), max_limit);
        let only = |on: bool, value: f64| on.then_some(value);
        let g2 = algorithm == Gradient2;
        AdaptiveSettings {
            algorithm,
            min_limit,
            max_limit,
            initial_limit,
            smoothing: match algorithm {
                Gradient2 => Some(self.smoothing.unwrap_or(0.2)),
                Vegas => Some(self.smoothing.unwrap_or(1.0)),
                Aimd | Knee => None,
            },
            rtt_tolerance: only(g2, self.rtt_tolerance.unwrap_or(1.5)),
            queue_size: g2.then(|| self.queue_size.unwrap_or(4)),
            long_window: g2.then(|| self.long_window.unwrap_or(600)),
            probe_multiplier: (algorithm == Vegas).then(|| self.probe_multiplier.unwrap_or(30)),
            backoff_ratio: only(algorithm == Aimd, self.backoff_ratio.unwrap_or(0.9)),
            timeout: (algorithm == Aimd).then(|| self.timeout.unwrap_or(Duration::from_secs(5))),
        }
    }

    /// Checks the settings, naming the field (`adaptive.<field>`) of the first that is wrong.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        use LimitAlgorithm::{Aimd, Gradient2, Vegas};
        let algorithm = self.algorithm;
        let error = |field: &'static str, reason: String| Err(ConfigError::new(field, reason));
        // A setting of another algorithm is a mistake, not something to ignore.
        let foreign = [
            (
                "adaptive.smoothing",
                self.smoothing.is_some(),
                &[Gradient2, Vegas][..],
            ),
            (
                "adaptive.rtt_tolerance",
                self.rtt_tolerance.is_some(),
                &[Gradient2],
            ),
            (
                "adaptive.queue_size",
                self.queue_size.is_some(),
                &[Gradient2],
            ),
            (
                "adaptive.long_window",
                self.long_window.is_some(),
                &[Gradient2],
            ),
            (
                "adaptive.probe_multiplier",
                self.probe_multiplier.is_some(),
                &[Vegas],
            ),
            (
                "adaptive.backoff_ratio",
                self.backoff_ratio.is_some(),
                &[Aimd],
            ),
            ("adaptive.timeout", self.timeout.is_some(), &[Aimd]),
        ];
        for (field, set, algorithms) in foreign {
            if set && !algorithms.contains(&algorithm) {
                let names: Vec<&str> = algorithms.iter().map(|a| a.as_str()).collect();
                return error(
                    field,
                    format!(
                        "applies to {} only, not to {algorithm}",
                        names.join(" and ")
                    ),
                );
            }
        }
        let s = self.settings();
        if self.max_limit == Some(0) {
            return error("adaptive.max_limit", "must be at least 1, got 0".into());
        }
        if s.min_limit == 0 {
            return error("adaptive.min_limit", "must be at least 1, got 0".into());
        }
        if s.min_limit > s.max_limit {
            return error(
                "adaptive.min_limit",
                format!(
                    "must be at most max_limit ({}), got {}",
                    s.max_limit, s.min_limit
                ),
            );
        }
        if let Some(initial) = self.initial_limit {
            if !(s.min_limit..=s.max_limit).contains(&initial) {
                return error(
                    "adaptive.initial_limit",
                    format!(
                        "must be within min_limit and max_limit ({}..={}), got {initial}",
                        s.min_limit, s.max_limit
                    ),
                );
            }
        }
        if let Some(smoothing) = s.smoothing {
            if !(smoothing > 0.0 && smoothing <= 1.0) {
                return error(
                    "adaptive.smoothing",
                    format!("must be above 0 and at most 1, got {smoothing}"),
                );
            }
        }
        if let Some(tolerance) = s.rtt_tolerance {
            if !(tolerance >= 1.0 && tolerance.is_finite()) {
                return error(
                    "adaptive.rtt_tolerance",
                    format!("must be at least 1 (and finite), got {tolerance}"),
                );
            }
        }
        if s.long_window == Some(0) {
            return error(
                "adaptive.long_window",
                "must be at least 1 sample, got 0".into(),
            );
        }
        if s.probe_multiplier == Some(0) {
            return error(
                "adaptive.probe_multiplier",
                "must be at least 1, got 0".into(),
            );
        }
        if let Some(ratio) = s.backoff_ratio {
            if !(0.5..1.0).contains(&ratio) {
                return error(
                    "adaptive.backoff_ratio",
                    format!("must be at least 0.5 and below 1, got {ratio}"),
                );
            }
        }
        if s.timeout == Some(Duration::ZERO) {
            return error("adaptive.timeout", "must be above zero".into());
        }
        Ok(())
    }
}

impl fmt::Debug for AdaptiveLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The settings in force, as the configurations show theirs.
        fmt::Debug::fmt(&self.settings(), f)
    }
}

/// The settings of an [`AdaptiveLimit`] in force ([`AdaptiveLimit::settings`]): those set, and
/// the algorithm's defaults for the others. A setting another algorithm uses is `None`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveSettings {
    /// The algorithm.
    pub algorithm: LimitAlgorithm,
    /// The lowest limit.
    pub min_limit: u32,
    /// The highest limit.
    pub max_limit: u32,
    /// The limit at the start.
    pub initial_limit: u32,
    /// How far each sample moves the limit toward its target (Gradient2, Vegas).
    pub smoothing: Option<f64>,
    /// Latency up to this multiple of the long-term average is not queueing (Gradient2).
    pub rtt_tolerance: Option<f64>,
    /// The calls allowed to queue: the growth step (Gradient2).
    pub queue_size: Option<u32>,
    /// The samples of the long-term average (Gradient2).
    pub long_window: Option<u32>,
    /// The lowest latency is probed again every this many × limit samples (Vegas).
    pub probe_multiplier: Option<u32>,
    /// What a drop multiplies the limit by (AIMD).
    pub backoff_ratio: Option<f64>,
    /// A call slower than this is a drop (AIMD).
    pub timeout: Option<Duration>,
}
