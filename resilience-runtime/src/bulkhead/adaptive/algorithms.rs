//! The limit algorithms: this library's knee (`knee.rs`), and Netflix's three as its
//! concurrency-limits writes them
//! (`concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/limit/`:
//! `Gradient2Limit`, `VegasLimit`, `AIMDLimit`), one sample at a time. Plain state, no
//! synchronisation: `controller.rs` gives one sample at a time to it.
//!
//! A sample is a call's end (when, on the bulkhead's clock), its duration in nanoseconds
//! (`rtt`), the calls in flight when it ended (itself included), and whether it was dropped
//! (timed out, given up, or shed by the dependency). Netflix's limiter
//! passes the calls in flight when the call was admitted; the count at its end is the one the
//! release has at hand (one atomic word), and the algorithms use it only to ask whether the
//! calls use the limit, which admissions and releases of other calls move either way.

use super::knee::Knee;
use super::limit::{AdaptiveSettings, LimitAlgorithm};
use super::sample::{Estimates, Sample};

/// An algorithm's state.
#[derive(Clone, Debug)]
pub(super) enum Algorithm {
    Gradient2(Gradient2),
    Vegas(Vegas),
    Aimd(Aimd),
    // Boxed: its phases make it several times the others' size.
    Knee(Box<Knee>),
}

impl Algorithm {
    /// The algorithm of `settings`, at its initial limit; `seed` seeds Vegas's probe jitter.
    pub(super) fn new(settings: &AdaptiveSettings, seed: u64) -> Self {
        let limit = f64::from(settings.initial_limit);
        let bounds = (f64::from(settings.min_limit), f64::from(settings.max_limit));
        match settings.algorithm {
            LimitAlgorithm::Gradient2 => Algorithm::Gradient2(Gradient2 {
                limit,
                bounds,
                smoothing: own(settings.smoothing),
                tolerance: own(settings.rtt_tolerance),
                queue_size: f64::from(own(settings.queue_size)),
                long_rtt: ExpAvg::new(own(settings.long_window), 10),
                last_rtt: 0.0,
            }),
            LimitAlgorithm::Vegas => {
                let mut vegas = Vegas {
                    limit,
                    bounds,
                    smoothing: own(settings.smoothing),
                    probe_multiplier: f64::from(own(settings.probe_multiplier)),
                    probe_count: 0,
                    probe_jitter: 0.0,
                    rtt_noload: 0,
                    last_rtt: 0,
                    // Xorshift needs a state other than zero.
                    rng: seed | 1,
                };
                vegas.reset_probe_jitter();
                Algorithm::Vegas(vegas)
            }
            LimitAlgorithm::Aimd => Algorithm::Aimd(Aimd {
                limit,
                bounds,
                backoff_ratio: own(settings.backoff_ratio),
                // At most 2⁶⁴ - 1 ns: the cast cannot truncate.
                timeout: own(settings.timeout).as_nanos().min(u128::from(u64::MAX)) as u64,
                last_rtt: 0,
            }),
            LimitAlgorithm::Knee => Algorithm::Knee(Box::new(Knee::new(limit, bounds))),
        }
    }

    /// Takes one sample; returns the limit after it.
    pub(super) fn sample(&mut self, sample: &Sample) -> u32 {
        // A call measured at zero (a manual clock not moved) is as fast as can be measured.
        let rtt = sample.rtt.max(1);
        let (inflight, dropped) = (sample.inflight, sample.dropped);
        let limit = match self {
            Algorithm::Gradient2(g) => g.sample(rtt, inflight),
            Algorithm::Vegas(v) => v.sample(rtt, inflight, dropped),
            Algorithm::Aimd(a) => a.sample(rtt, inflight, dropped),
            Algorithm::Knee(k) => k.sample(&Sample { rtt, ..*sample }),
        };
        as_limit(limit)
    }

    /// The limit now.
    pub(super) fn limit(&self) -> u32 {
        as_limit(match self {
            Algorithm::Gradient2(g) => g.limit,
            Algorithm::Vegas(v) => v.limit,
            Algorithm::Aimd(a) => a.limit,
            Algorithm::Knee(k) => k.limit(),
        })
    }

    pub(super) fn estimates(&self) -> Estimates {
        match self {
            Algorithm::Gradient2(g) => Estimates {
                baseline_rtt: g.long_rtt.value,
                sample_rtt: g.last_rtt,
            },
            Algorithm::Vegas(v) => Estimates {
                baseline_rtt: v.rtt_noload as f64,
                sample_rtt: v.last_rtt as f64,
            },
            Algorithm::Aimd(a) => Estimates {
                baseline_rtt: 0.0,
                sample_rtt: a.last_rtt as f64,
            },
            Algorithm::Knee(k) => k.estimates(),
        }
    }
}

/// A setting of the algorithm being built: [`AdaptiveLimit::settings`](super::AdaptiveLimit::settings)
/// fills in every setting of its own algorithm (the defaults live there alone).
fn own<T>(setting: Option<T>) -> T {
    setting.expect("the settings of an algorithm are filled in for it")
}

/// The whole calls of an estimated limit, as Netflix's `(int) estimatedLimit`; the bounds
/// keep it within 1..=MAX_CONCURRENT_CALLS_LIMIT.
fn as_limit(limit: f64) -> u32 {
    // Within the validated bounds: the cast neither saturates nor wraps.
    limit as u32
}

/// `Gradient2Limit`: the limit follows the ratio of a long-term average latency to the
/// latest one.
///
/// ```text
/// long  = exponential average of the samples over `long_window` (a plain mean of the first 10)
/// if long / rtt > 2: long *= 0.95                   (latency fell back after a long overload)
/// if inflight < limit / 2: no change                (the calls do not use the limit)
/// gradient = clamp(tolerance * long / rtt, 0.5, 1.0)
/// target   = limit * gradient + queue_size
/// limit    = clamp(limit * (1 - smoothing) + target * smoothing, min_limit, max_limit)
/// ```
///
/// Drops are not used: a dropped call's duration is its sample like any other.
#[derive(Clone, Debug)]
pub(super) struct Gradient2 {
    limit: f64,
    bounds: (f64, f64),
    smoothing: f64,
    tolerance: f64,
    queue_size: f64,
    long_rtt: ExpAvg,
    last_rtt: f64,
}

impl Gradient2 {
    fn sample(&mut self, rtt: u64, inflight: u32) -> f64 {
        let short = rtt as f64;
        self.last_rtt = short;
        let long = self.long_rtt.add(short);
        if long / short > 2.0 {
            self.long_rtt.value *= 0.95;
        }
        if f64::from(inflight) < self.limit / 2.0 {
            return self.limit;
        }
        let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
        let target = self.limit * gradient + self.queue_size;
        let limit = self.limit * (1.0 - self.smoothing) + target * self.smoothing;
        self.limit = limit.clamp(self.bounds.0, self.bounds.1);
        self.limit
    }
}

/// Netflix's `ExpAvgMeasurement(window, warmup)`: the mean of the first `warmup` samples,
/// then an exponential average with the factor `2 / (window + 1)`.
#[derive(Clone, Debug)]
struct ExpAvg {
    factor: f64,
    warmup: u32,
    count: u32,
    sum: f64,
    value: f64,
}

impl ExpAvg {
    fn new(window: u32, warmup: u32) -> Self {
        ExpAvg {
            factor: 2.0 / (f64::from(window) + 1.0),
            warmup,
            count: 0,
            sum: 0.0,
            value: 0.0,
        }
    }

    fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + sample * self.factor;
        }
        self.value
    }
}

/// `VegasLimit`: the queue in front of the dependency is estimated from the lowest latency
/// seen (`rtt_noload`), and the limit moves by steps of log10 of itself.
///
/// ```text
/// every probe_multiplier * limit * jitter samples (jitter in [0.5, 1)): rtt_noload = rtt
/// if rtt < rtt_noload: rtt_noload = rtt, no change
/// queue = ceil(limit * (1 - rtt_noload / rtt))
/// log = max(1, floor(log10(limit)));  alpha = 3 log;  beta = 6 log
/// dropped                  → target = limit - log
/// inflight * 2 < limit     → no change
/// queue <= log             → target = limit + beta
/// queue < alpha            → target = limit + log
/// queue > beta             → target = limit - log
/// otherwise                → no change
/// limit = limit * (1 - smoothing) + clamp(target, min_limit, max_limit) * smoothing
/// ```
#[derive(Clone, Debug)]
pub(super) struct Vegas {
    limit: f64,
    bounds: (f64, f64),
    smoothing: f64,
    probe_multiplier: f64,
    probe_count: u64,
    probe_jitter: f64,
    rtt_noload: u64,
    last_rtt: u64,
    rng: u64,
}

impl Vegas {
    fn sample(&mut self, rtt: u64, inflight: u32, dropped: bool) -> f64 {
        self.last_rtt = rtt;
        self.probe_count += 1;
        if self.probe_jitter * self.probe_multiplier * self.limit <= self.probe_count as f64 {
            self.reset_probe_jitter();
            self.probe_count = 0;
            self.rtt_noload = rtt;
            return self.limit;
        }
        if self.rtt_noload == 0 || rtt < self.rtt_noload {
            self.rtt_noload = rtt;
            return self.limit;
        }
        let limit = self.limit;
        let queue = (limit * (1.0 - self.rtt_noload as f64 / rtt as f64)).ceil();
        let log = f64::from(log10_root(as_limit(limit)));
        let target = if dropped {
            limit - log
        } else if f64::from(inflight) * 2.0 < limit {
            return limit;
        } else if queue <= log {
            limit + 6.0 * log
        } else if queue < 3.0 * log {
            limit + log
        } else if queue > 6.0 * log {
            limit - log
        } else {
            return limit;
        };
        let target = target.clamp(self.bounds.0, self.bounds.1);
        self.limit = (1.0 - self.smoothing) * limit + self.smoothing * target;
        self.limit
    }

    /// A new jitter in [0.5, 1), from a xorshift64 generator (Netflix draws it from
    /// `ThreadLocalRandom`; a seeded one keeps tests repeatable).
    fn reset_probe_jitter(&mut self) {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        // The top 53 bits as a fraction in [0, 1).
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
        self.probe_jitter = 0.5 + unit / 2.0;
    }
}

/// Netflix's `Log10RootIntFunction`: `max(1, floor(log10(n)))`.
fn log10_root(n: u32) -> u32 {
    n.checked_ilog10().unwrap_or(0).max(1)
}

/// `AIMDLimit`: one more call while the calls use at least half the limit, times
/// `backoff_ratio` (rounded down) on a drop or a call slower than `timeout`.
///
/// ```text
/// dropped or rtt > timeout   → limit = floor(limit * backoff_ratio)
/// inflight * 2 >= limit      → limit = limit + 1
/// limit = clamp(limit, min_limit, max_limit)
/// ```
#[derive(Clone, Debug)]
pub(super) struct Aimd {
    limit: f64,
    bounds: (f64, f64),
    backoff_ratio: f64,
    timeout: u64,
    last_rtt: u64,
}

impl Aimd {
    fn sample(&mut self, rtt: u64, inflight: u32, dropped: bool) -> f64 {
        self.last_rtt = rtt;
        let limit = self.limit;
        let limit = if dropped || rtt > self.timeout {
            (limit * self.backoff_ratio).floor()
        } else if f64::from(inflight) * 2.0 >= limit {
            limit + 1.0
        } else {
            limit
        };
        self.limit = limit.clamp(self.bounds.0, self.bounds.1);
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulkhead::AdaptiveLimit;

    const MS: u64 = 1_000_000;

    fn at(now: u64, rtt: u64, inflight: u32, dropped: bool) -> Sample {
        Sample {
            now,
            rtt,
            inflight,
            dropped,
        }
    }

    fn algorithm(limit: AdaptiveLimit) -> Algorithm {
        limit.validate().expect("valid test settings");
        Algorithm::new(&limit.settings(), 7)
    }

    /// `n` samples of `rtt`, each with the calls using the whole limit.
    fn busy(a: &mut Algorithm, n: usize, rtt: u64) -> u32 {
        let mut limit = a.limit();
        for _ in 0..n {
            limit = a.sample(&at(0, rtt, limit, false));
        }
        limit
    }

    #[test]
    fn gradient2_grows_while_latency_holds_and_shrinks_when_it_climbs() {
        let mut g = algorithm(
            AdaptiveLimit::gradient2()
                .min_limit(5)
                .max_limit(400)
                .initial_limit(10),
        );
        // Steady 10 ms: each sample moves the limit toward limit + queue_size (0.8 a sample).
        assert_eq!(busy(&mut g, 1, 10 * MS), 10);
        let grown = busy(&mut g, 100, 10 * MS);
        assert!(grown >= 85, "grows about 0.8 a sample, got {grown}");
        // Latency doubles and stays: the gradient (1.5 × long / short) falls below 1 as the
        // long-term average lags, and the limit shrinks.
        let before = g.limit();
        let shrunk = busy(&mut g, 30, 40 * MS);
        assert!(shrunk < before, "{shrunk} < {before}");
        // Latency back to normal: the long average (pulled up) is above the samples, the
        // gradient is 1, and the limit grows again.
        let low = g.limit();
        assert!(busy(&mut g, 200, 10 * MS) > low);
    }

    #[test]
    fn gradient2_does_not_grow_a_limit_the_calls_do_not_use() {
        let mut g = algorithm(AdaptiveLimit::gradient2().initial_limit(40).max_limit(100));
        for _ in 0..100 {
            assert_eq!(
                g.sample(&at(0, 10 * MS, 19, false)),
                40,
                "19 in flight: below half of 40"
            );
        }
        assert_eq!(
            g.sample(&at(0, 10 * MS, 20, false)),
            40,
            "0.8 more: still 40 whole calls"
        );
        assert_eq!(
            g.sample(&at(0, 10 * MS, 20, false)),
            40,
            "20 is below half of 40.8"
        );
        assert_eq!(g.sample(&at(0, 10 * MS, 21, false)), 41);
    }

    #[test]
    fn gradient2_follows_netflix_formula_to_the_digit() {
        // One sample by hand: limit 20, long average (warm-up mean) 10 ms, sample 10 ms:
        // gradient min(1, 1.5) = 1, target 24, limit 20 * 0.8 + 24 * 0.2 = 20.8.
        let mut g = algorithm(AdaptiveLimit::gradient2().min_limit(1));
        assert_eq!(g.sample(&at(0, 10 * MS, 20, false)), 20);
        let Algorithm::Gradient2(state) = &g else {
            unreachable!()
        };
        assert!((state.limit - 20.8).abs() < 1e-9, "{}", state.limit);
        // Then 30 ms: long = mean(10, 30) = 20; gradient max(0.5, 1.5 * 20 / 30) = 1.0;
        // then 60 ms: long = mean(10, 30, 60) = 33.3; gradient 1.5 * 33.3 / 60 = 0.833.
        g.sample(&at(0, 30 * MS, 20, false));
        g.sample(&at(0, 60 * MS, 20, false));
        let Algorithm::Gradient2(state) = &g else {
            unreachable!()
        };
        let after_30 = 20.8 * 0.8 + (20.8 + 4.0) * 0.2;
        let gradient = 1.5 * (100.0 / 3.0) / 60.0;
        let expected = after_30 * 0.8 + (after_30 * gradient + 4.0) * 0.2;
        assert!(
            (state.limit - expected).abs() < 1e-9,
            "{} vs {expected}",
            state.limit
        );
    }

    #[test]
    fn vegas_grows_fast_with_no_queue_and_backs_off_on_drops() {
        let mut v = algorithm(AdaptiveLimit::vegas().initial_limit(20).max_limit(500));
        // The first sample sets the no-load latency.
        assert_eq!(v.sample(&at(0, 10 * MS, 20, false)), 20);
        // No queue (the same latency): limit + beta = 20 + 6 * 1 each time.
        assert_eq!(v.sample(&at(0, 10 * MS, 20, false)), 26);
        assert_eq!(v.sample(&at(0, 10 * MS, 26, false)), 32);
        // A drop: limit - log10 (1).
        assert_eq!(v.sample(&at(0, 10 * MS, 32, true)), 31);
        // Latency doubled: queue = ceil(31 * 0.5) = 16 > beta (6): limit - 1.
        assert_eq!(v.sample(&at(0, 20 * MS, 31, false)), 30);
        // Below half the limit in flight: no change.
        assert_eq!(v.sample(&at(0, 10 * MS, 10, false)), 30);
    }

    #[test]
    fn vegas_probes_the_no_load_latency_again() {
        let mut v = algorithm(
            AdaptiveLimit::vegas()
                .initial_limit(10)
                .max_limit(10)
                .probe_multiplier(2),
        );
        v.sample(&at(0, 10 * MS, 10, false));
        // Latency rises for good; within 2 * 10 samples a probe takes it as the new floor.
        for _ in 0..20 {
            v.sample(&at(0, 50 * MS, 10, false));
        }
        let Algorithm::Vegas(state) = &v else {
            unreachable!()
        };
        assert_eq!(state.rtt_noload, 50 * MS);
    }

    #[test]
    fn aimd_adds_one_and_multiplies_on_drops_and_slow_calls() {
        let mut a = algorithm(
            AdaptiveLimit::aimd()
                .min_limit(10)
                .max_limit(30)
                .initial_limit(20),
        );
        assert_eq!(
            a.sample(&at(0, MS, 10, false)),
            21,
            "half the limit in flight: one more"
        );
        assert_eq!(a.sample(&at(0, MS, 10, false)), 21, "below half: no change");
        assert_eq!(a.sample(&at(0, MS, 21, true)), 18, "floor(21 * 0.9)");
        assert_eq!(
            a.sample(&at(0, 6_000 * MS, 18, false)),
            16,
            "slower than 5 s: a drop"
        );
        for _ in 0..20 {
            a.sample(&at(0, MS, 30, true));
        }
        assert_eq!(a.limit(), 10, "never below min_limit");
        for _ in 0..50 {
            a.sample(&at(0, MS, 30, false));
        }
        assert_eq!(a.limit(), 30, "never above max_limit");
    }

    #[test]
    fn log10_root_is_netflix_table() {
        for (n, log) in [
            (0, 1),
            (1, 1),
            (9, 1),
            (10, 1),
            (99, 1),
            (100, 2),
            (999, 2),
            (1000, 3),
        ] {
            assert_eq!(log10_root(n), log, "{n}");
        }
    }
}
