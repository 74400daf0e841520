//! What a drill measured: [`RunReport`] per layout, [`DrillReport`] for the whole drill, and
//! their table, reconciliation lines, reading and JSON.

use std::fmt::Write as _;
use std::time::Duration;

use resilience_runtime::CircuitState;
use serde_json::{json, Value};

use super::{DrillConfig, Layout};

/// How one offered call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    Failed,
    RejectedByBulkhead,
    NotPermitted,
    RateLimited,
    TimedOut,
    /// A rejection of another kind (re-entrancy); never expected in the drill, but counted so
    /// that the reconciliation stays exact.
    OtherRejection,
}

/// How many offered calls ended in each outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls placed.
    pub offered: u64,
    /// The handler ran and the order was created.
    pub succeeded: u64,
    /// The handler ran and the downstream failed.
    pub failed: u64,
    /// Refused by the bulkhead (`Rejected::BulkheadFull`).
    pub rejected_bulkhead: u64,
    /// Refused by the circuit breaker (`Rejected::CallNotPermitted`).
    pub not_permitted: u64,
    /// Refused by the rate limiter (`Rejected::RequestNotPermitted`).
    pub rate_limited: u64,
    /// Cut off by the time limiter (`Rejected::TimedOut`).
    pub timed_out: u64,
    /// Refused for another reason (never expected in the drill).
    pub other_rejected: u64,
}

impl Counts {
    /// The calls that ended, in any outcome.
    pub fn ended(&self) -> u64 {
        self.succeeded
            + self.failed
            + self.rejected_bulkhead
            + self.not_permitted
            + self.rate_limited
            + self.timed_out
            + self.other_rejected
    }

    /// Calls refused by a guard, of any kind (a time-out included).
    pub fn rejected(&self) -> u64 {
        self.rejected_bulkhead
            + self.not_permitted
            + self.rate_limited
            + self.timed_out
            + self.other_rejected
    }

    pub(crate) fn add(&mut self, other: &Counts) {
        self.offered += other.offered;
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.rejected_bulkhead += other.rejected_bulkhead;
        self.not_permitted += other.not_permitted;
        self.rate_limited += other.rate_limited;
        self.timed_out += other.timed_out;
        self.other_rejected += other.other_rejected;
    }
}

/// Latency samples per outcome, in microseconds.
#[derive(Debug, Default)]
pub(crate) struct Latencies {
    succeeded: Vec<u32>,
    failed: Vec<u32>,
    rejected_bulkhead: Vec<u32>,
    not_permitted: Vec<u32>,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl Latencies {
    pub(crate) fn record(&mut self, outcome: Outcome, latency: Duration) {
        let samples = match outcome {
            Outcome::Succeeded => &mut self.succeeded,
            Outcome::Failed => &mut self.failed,
            Outcome::RejectedByBulkhead => &mut self.rejected_bulkhead,
            Outcome::NotPermitted => &mut self.not_permitted,
            Outcome::RateLimited | Outcome::TimedOut | Outcome::OtherRejection => return,
        };
        samples.push(micros(latency));
    }

    /// The summaries of the successes and of the refusals (by the bulkhead or the breaker).
    pub(crate) fn summaries(mut self) -> (Option<LatencySummary>, Option<LatencySummary>) {
        let mut rejected: Vec<u32> = self
            .rejected_bulkhead
            .iter()
            .chain(&self.not_permitted)
            .copied()
            .collect();
        (
            LatencySummary::of(&mut self.succeeded),
            LatencySummary::of(&mut rejected),
        )
    }

    pub(crate) fn merge(&mut self, other: Latencies) {
        self.succeeded.extend(other.succeeded);
        self.failed.extend(other.failed);
        self.rejected_bulkhead.extend(other.rejected_bulkhead);
        self.not_permitted.extend(other.not_permitted);
    }
}

/// Percentiles of one outcome's latencies, as the caller saw them (guards included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Slowest.
    pub max: Duration,
}

impl LatencySummary {
    /// The summary of `samples` (microseconds, sorted in place); `None` if there are none.
    fn of(samples: &mut [u32]) -> Option<LatencySummary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        // Nearest rank: the smallest sample with at least p of the samples at or below it.
        let rank = |p: f64| {
            let index = (p * samples.len() as f64).ceil() as usize;
            Duration::from_micros(u64::from(samples[index.clamp(1, samples.len()) - 1]))
        };
        Some(LatencySummary {
            count: samples.len() as u64,
            p50: rank(0.50),
            p99: rank(0.99),
            max: Duration::from_micros(u64::from(samples[samples.len() - 1])),
        })
    }

    pub(crate) fn json(summary: Option<LatencySummary>) -> Value {
        match summary {
            None => Value::Null,
            Some(s) => json!({
                "count": s.count,
                "p50_ms": ms(s.p50),
                "p99_ms": ms(s.p99),
                "max_ms": ms(s.max),
            }),
        }
    }
}

/// Milliseconds with a tenth of a millisecond's precision.
pub(crate) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

/// What the breaker did during a run, from its events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BreakerSummary {
    pub(crate) first_open: Option<Duration>,
    pub(crate) openings: u32,
    pub(crate) open_time: Duration,
}

/// How often the calls of a run were attempted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attempts {
    /// Attempts a retry made beyond each call's first (its retry events).
    pub retries: u64,
    /// Times the handler's body ran (an attempt refused inside the retry runs none).
    pub handler_runs: u64,
    /// Attempts the time limiter cut off (those a retry then retried included).
    pub cut_off: u64,
}

/// What one layout measured.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The layout.
    pub layout: Layout,
    /// The outcomes.
    pub counts: Counts,
    /// When the breaker first opened, from the start of the layout; `None` if it never did.
    pub breaker_first_open: Option<Duration>,
    /// How many times the breaker opened (including re-openings after half-open).
    pub breaker_openings: u32,
    /// How long the breaker was open in all, until the last call ended.
    pub breaker_open_time: Duration,
    /// From the start of the load until the last call in flight ended.
    pub elapsed: Duration,
    /// How long load was offered.
    pub duration: Duration,
    /// Latencies of succeeded calls.
    pub succeeded_latency: Option<LatencySummary>,
    /// Latencies of failed calls.
    pub failed_latency: Option<LatencySummary>,
    /// Latencies of calls refused by a guard (bulkhead or breaker).
    pub rejected_latency: Option<LatencySummary>,
    /// Latencies of calls refused by the bulkhead.
    pub rejected_bulkhead_latency: Option<LatencySummary>,
    /// Latencies of calls refused by the breaker.
    pub not_permitted_latency: Option<LatencySummary>,
    /// The rejections the bulkhead itself counted (its metrics), to cross-check the callers'.
    pub bulkhead_counted_rejections: u64,
    /// How often the calls were attempted.
    pub attempts: Attempts,
    /// The outcomes so far and the breaker's state, about every 100 ms from the start: the
    /// run over time, for a plot (`DrillReport::svg`).
    pub timeline: Vec<Sample>,
}

/// A reading of a run as it went: the outcomes so far, the breaker's state, the calls in
/// flight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Time since the layout started.
    pub elapsed: Duration,
    /// The outcomes of the calls ended so far.
    pub counts: Counts,
    /// The breaker's state then.
    pub breaker: CircuitState,
    /// The calls at the downstream then (queued for a worker or being served).
    pub in_flight: u64,
    /// The bulkhead's limit then (an adaptive limit moves).
    pub limit: u32,
}

impl RunReport {
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site, every argument named there"
    )]
    pub(crate) fn new(
        layout: Layout,
        counts: Counts,
        mut latencies: Latencies,
        breaker: BreakerSummary,
        elapsed: Duration,
        duration: Duration,
        bulkhead_counted_rejections: u64,
        attempts: Attempts,
    ) -> Self {
        let mut rejected: Vec<u32> = latencies
            .rejected_bulkhead
            .iter()
            .chain(&latencies.not_permitted)
            .copied()
            .collect();
        RunReport {
            layout,
            counts,
            breaker_first_open: breaker.first_open,
            breaker_openings: breaker.openings,
            breaker_open_time: breaker.open_time,
            elapsed,
            duration,
            succeeded_latency: LatencySummary::of(&mut latencies.succeeded),
            failed_latency: LatencySummary::of(&mut latencies.failed),
            rejected_latency: LatencySummary::of(&mut rejected),
            rejected_bulkhead_latency: LatencySummary::of(&mut latencies.rejected_bulkhead),
            not_permitted_latency: LatencySummary::of(&mut latencies.not_permitted),
            bulkhead_counted_rejections,
            attempts,
            timeline: Vec::new(),
        }
    }

    /// The layout's name.
    pub fn name(&self) -> String {
        self.layout.name()
    }

    /// Whether every offered call ended in exactly one outcome, and the bulkhead counted as
    /// many rejections as the callers saw (where it is entered once per call: a retry outside
    /// it asks it again per attempt).
    pub fn reconciles(&self) -> bool {
        self.counts.offered == self.counts.ended() && self.bulkhead_agrees()
    }

    fn bulkhead_agrees(&self) -> bool {
        !self.layout.bulkhead_once_per_call()
            || self.bulkhead_counted_rejections == self.counts.rejected_bulkhead
    }

    /// Attempts per offered call: 1, plus the retries per call (each passes through the guards
    /// inside the retry again, adding load to them).
    pub fn attempts_per_call(&self) -> f64 {
        if self.counts.offered == 0 {
            return 0.0;
        }
        (self.counts.offered + self.attempts.retries) as f64 / self.counts.offered as f64
    }

    /// Succeeded calls per second of offered load.
    pub fn throughput(&self) -> f64 {
        self.counts.succeeded as f64 / self.duration.as_secs_f64()
    }

    /// The share of the calls the downstream ran that it failed, in percent.
    pub fn downstream_failure_rate(&self) -> f64 {
        let ran = self.counts.succeeded + self.counts.failed;
        if ran == 0 {
            return 0.0;
        }
        100.0 * self.counts.failed as f64 / ran as f64
    }

    /// The reconciliation line: offered = the sum of the outcomes.
    pub fn reconciliation(&self) -> String {
        let c = &self.counts;
        let mut line = format!(
            "{}: {} offered = {} succeeded + {} failed + {} rejected by the bulkhead + {} not permitted by the breaker",
            self.name(),
            c.offered,
            c.succeeded,
            c.failed,
            c.rejected_bulkhead,
            c.not_permitted
        );
        if self.layout.all_five() {
            let _ = write!(
                line,
                " + {} refused by the rate limiter + {} cut off by the time limiter",
                c.rate_limited, c.timed_out
            );
        }
        if c.other_rejected > 0 {
            let _ = write!(line, " + {} rejected otherwise", c.other_rejected);
        }
        if c.offered == c.ended() {
            line.push_str(" (= ");
            let _ = write!(line, "{}, exact)", c.ended());
        } else {
            let _ = write!(line, " (= {}, MISMATCH)", c.ended());
        }
        if !self.bulkhead_agrees() {
            let _ = write!(
                line,
                "; the bulkhead counted {} rejections (MISMATCH)",
                self.bulkhead_counted_rejections
            );
        }
        line
    }

    /// This run as JSON, with the keys `name`, `offered`, `succeeded`, `failed`,
    /// `rejected_bulkhead`, `not_permitted`, `breaker_first_open_ms` (null if the breaker never
    /// opened) and more.
    pub fn json(&self) -> Value {
        let c = &self.counts;
        json!({
            "name": self.name(),
            "offered": c.offered,
            "succeeded": c.succeeded,
            "failed": c.failed,
            "rejected_bulkhead": c.rejected_bulkhead,
            "not_permitted": c.not_permitted,
            "rate_limited": c.rate_limited,
            "timed_out": c.timed_out,
            "other_rejected": c.other_rejected,
            "retries": self.attempts.retries,
            "handler_runs": self.attempts.handler_runs,
            "attempts_cut_off": self.attempts.cut_off,
            "attempts_per_call": (self.attempts_per_call() * 1000.0).round() / 1000.0,
            "breaker_first_open_ms": self.breaker_first_open.map(|d| d.as_millis() as u64),
            "breaker_openings": self.breaker_openings,
            "breaker_open_ms": self.breaker_open_time.as_millis() as u64,
            "reconciles": self.reconciles(),
            "bulkhead_counted_rejections": self.bulkhead_counted_rejections,
            "duration_ms": self.duration.as_millis() as u64,
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "throughput_per_s": (self.throughput() * 10.0).round() / 10.0,
            "downstream_failure_rate_percent": (self.downstream_failure_rate() * 100.0).round() / 100.0,
            "breaker_outside_bulkhead": self.layout.breaker_precedence() < bulkhead_precedence(self.layout),
            "all_five_aspects": self.layout.all_five(),
            "record_rejections": self.layout.records_rejections(),
            "fair_call_handling": self.layout.fair_call_handling(),
            "timeline": self.timeline.iter().map(|s| json!({
                "t_ms": s.elapsed.as_millis() as u64,
                "succeeded": s.counts.succeeded,
                "failed": s.counts.failed,
                "rejected_bulkhead": s.counts.rejected_bulkhead,
                "not_permitted": s.counts.not_permitted,
                "rate_limited": s.counts.rate_limited,
                "timed_out": s.counts.timed_out,
                "breaker": s.breaker.as_str(),
                "in_flight": s.in_flight,
                "limit": s.limit,
            })).collect::<Vec<_>>(),
            "latency": {
                "succeeded": LatencySummary::json(self.succeeded_latency),
                "failed": LatencySummary::json(self.failed_latency),
                "rejected": LatencySummary::json(self.rejected_latency),
                "rejected_bulkhead": LatencySummary::json(self.rejected_bulkhead_latency),
                "not_permitted": LatencySummary::json(self.not_permitted_latency),
            },
        })
    }
}

/// The bulkhead's precedence in `layout`.
fn bulkhead_precedence(layout: Layout) -> i32 {
    layout
        .precedence()
        .into_iter()
        .find(|(aspect, _)| *aspect == resilience_runtime::Aspect::Bulkhead)
        .map_or(
            resilience_runtime::Aspect::Bulkhead.default_precedence(),
            |(_, p)| p,
        )
}

/// What a whole drill measured: its configuration and one [`RunReport`] per layout, in the
/// order they ran.
#[derive(Clone, Debug, PartialEq)]
pub struct DrillReport {
    /// The configuration the drill ran with.
    pub config: DrillConfig,
    /// One report per layout.
    pub runs: Vec<RunReport>,
}

impl DrillReport {
    /// The report of `layout`, if it ran.
    pub fn run(&self, layout: Layout) -> Option<&RunReport> {
        self.runs.iter().find(|r| r.layout == layout)
    }

    /// Whether every run reconciles.
    pub fn reconciles(&self) -> bool {
        self.runs.iter().all(RunReport::reconciles)
    }

    /// The summary: two tables of one row per layout, columns aligned, each within
    /// [`WIDTH`] columns: how the offered calls ended, then the breaker, the attempts and the
    /// latencies.
    pub fn table(&self) -> String {
        let outcomes = [
            "layout",
            "offered",
            "succeeded",
            "failed",
            "bulkhead full",
            "breaker open",
            "throttled",
            "timed out",
        ];
        let behaviour = [
            "layout",
            "attempts",
            "breaker opened",
            "ok p50",
            "ok p99",
            "rejected p50",
            "rejected p99",
            "ok/s",
        ];
        let lat = |s: Option<LatencySummary>, p99: bool| match s {
            None => "-".to_owned(),
            Some(s) => format_ms(if p99 { s.p99 } else { s.p50 }),
        };
        let left: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                let c = &r.counts;
                vec![
                    r.name().to_owned(),
                    c.offered.to_string(),
                    c.succeeded.to_string(),
                    c.failed.to_string(),
                    c.rejected_bulkhead.to_string(),
                    c.not_permitted.to_string(),
                    dash_unless(r.layout.all_five(), c.rate_limited),
                    dash_unless(r.layout.all_five(), c.timed_out),
                ]
            })
            .collect();
        let right: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                vec![
                    r.name().to_owned(),
                    format!("{:.2}", r.attempts_per_call()),
                    r.breaker_first_open.map_or_else(
                        || "never".to_owned(),
                        |d| format!("{:.1} s", d.as_secs_f64()),
                    ),
                    lat(r.succeeded_latency, false),
                    lat(r.succeeded_latency, true),
                    lat(r.rejected_latency, false),
                    lat(r.rejected_latency, true),
                    format!("{:.0}", r.throughput()),
                ]
            })
            .collect();
        format!(
            "{}\n{}",
            format_table(&outcomes, &left),
            format_table(&behaviour, &right)
        )
    }

    /// One or two sentences reading the result.
    pub fn reading(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(best) = self.best_fixed() {
            lines.push(format!(
                "best fixed limit for this load: {} ({:.0} orders/s succeeded)",
                best.name(),
                best.throughput()
            ));
            lines.extend(self.adaptive_verdicts().iter().map(AdaptiveVerdict::line));
            return lines;
        }
        let incident = self.run(Layout::Incident);
        for run in &self.runs {
            let c = &run.counts;
            let line = match run.breaker_first_open {
                Some(at) => {
                    // What the breaker counted besides the downstream's own failures: the
                    // guards' refusals it records, and the time-outs of a time limiter inside it.
                    let mut counted = Vec::new();
                    if run.layout.records_rejections() && run.bulkhead_counted_rejections > 0 {
                        counted.push(format!(
                            "the bulkhead's {} rejections",
                            run.bulkhead_counted_rejections
                        ));
                    }
                    if run.attempts.cut_off > 0 {
                        counted.push(format!("{} time-outs", run.attempts.cut_off));
                    }
                    let cause = if counted.is_empty() {
                        format!(
                            "with the downstream failing {:.1} % of the calls it ran",
                            run.downstream_failure_rate()
                        )
                    } else {
                        format!(
                            "although the downstream failed only {:.1} % of the calls it ran: \
                             it counted {} as failures",
                            run.downstream_failure_rate(),
                            counted.join(" and ")
                        )
                    };
                    format!(
                        "{}: the breaker opened after {:.1} s {cause}; it was open {:.1} s of {:.1} s ({} opening{}) and refused {} calls; {:.0} orders/s succeeded.",
                        run.name(),
                        at.as_secs_f64(),
                        run.breaker_open_time.as_secs_f64(),
                        run.elapsed.as_secs_f64(),
                        run.breaker_openings,
                        if run.breaker_openings == 1 { "" } else { "s" },
                        c.not_permitted,
                        run.throughput()
                    )
                }
                None => {
                    let shed = if c.rejected_bulkhead == 0 {
                        "the load never overflowed the bulkhead".to_owned()
                    } else {
                        format!("the bulkhead shed {} calls", c.rejected_bulkhead)
                    };
                    let mut line = format!(
                        "{}: the breaker never opened (the downstream failed {:.1} % of the calls it ran); {shed} and {:.0} orders/s succeeded",
                        run.name(),
                        run.downstream_failure_rate(),
                        run.throughput()
                    );
                    if let Some(incident) =
                        incident.filter(|i| i.layout != run.layout && i.throughput() > 0.0)
                    {
                        let _ = write!(
                            line,
                            ", {:.1}x as many as the {}",
                            run.throughput() / incident.throughput(),
                            incident.name()
                        );
                    }
                    line.push('.');
                    line
                }
            };
            let mut line = line;
            if run.layout.all_five() {
                let _ = write!(
                    line,
                    " {:.2} attempts per offered call; the time limiter cut off {} attempts ({} calls ended so) and the rate limiter refused {} calls.",
                    run.attempts_per_call(),
                    run.attempts.cut_off,
                    c.timed_out,
                    c.rate_limited
                );
            }
            lines.push(line);
        }
        lines
    }

    /// The best fixed-limit run, if the drill ran any: what an adaptive limit is measured
    /// against. Of the runs within 1 % of the most successful orders per second (a larger
    /// limit only queues more calls at the downstream once it is saturated), the one with the
    /// lowest p99 of successes.
    pub fn best_fixed(&self) -> Option<&RunReport> {
        let fixed = || {
            self.runs
                .iter()
                .filter(|r| matches!(r.layout, Layout::Fixed(_)))
        };
        let most = fixed().map(RunReport::throughput).fold(0.0, f64::max);
        let p99 = |r: &RunReport| r.succeeded_latency.map_or(Duration::MAX, |l| l.p99);
        fixed()
            .filter(|r| r.throughput() >= 0.99 * most)
            .min_by_key(|r| p99(r))
    }

    /// Each adaptive run against the best fixed limit: its share of the best fixed limit's
    /// successful orders per second, its p99 of successes over that one's, whether the breaker
    /// opened, and when its limit first came within 20 % of the best fixed limit.
    pub fn adaptive_verdicts(&self) -> Vec<AdaptiveVerdict> {
        let Some(best) = self.best_fixed() else {
            return Vec::new();
        };
        let Layout::Fixed(best_limit) = best.layout else {
            return Vec::new();
        };
        let p99 = |r: &RunReport| r.succeeded_latency.map(|l| l.p99);
        self.runs
            .iter()
            .filter(|r| r.layout.is_adaptive())
            .map(|r| {
                let near = f64::from(best_limit) * 0.2;
                AdaptiveVerdict {
                    layout: r.layout,
                    best_fixed: best.layout,
                    throughput_share: if best.throughput() > 0.0 {
                        r.throughput() / best.throughput()
                    } else {
                        0.0
                    },
                    p99_ratio: match (p99(r), p99(best)) {
                        (Some(ours), Some(theirs)) if !theirs.is_zero() => {
                            ours.as_secs_f64() / theirs.as_secs_f64()
                        }
                        _ => f64::NAN,
                    },
                    breaker_opened: r.breaker_first_open.is_some(),
                    within_20_percent: r
                        .timeline
                        .iter()
                        .find(|s| (f64::from(s.limit) - f64::from(best_limit)).abs() <= near)
                        .map(|s| s.elapsed),
                    final_limit: r.timeline.last().map_or(0, |s| s.limit),
                }
            })
            .collect()
    }

    /// The drill as JSON: `{"runs": [..], "config": {..}}`, each run as [`RunReport::json`].
    pub fn json(&self) -> Value {
        let c = &self.config;
        json!({
            "runs": self.runs.iter().map(RunReport::json).collect::<Vec<_>>(),
            "config": {
                "callers": c.callers,
                "duration_ms": c.duration.as_millis() as u64,
                "seed": c.seed,
                "ramp": c.ramp,
                "think_time_ms": [c.think_time.0.as_millis() as u64, c.think_time.1.as_millis() as u64],
                "downstream_workers": c.downstream_workers,
                "service_time_start_ms": c.service_time_start.as_millis() as u64,
                "service_time_peak_ms": c.service_time_peak.as_millis() as u64,
                "degradation": c.degradation,
                "recovery": c.recovery,
                "failure_probability": c.failure_probability,
                "bulkhead_max_concurrent_calls": c.bulkhead_max_concurrent_calls,
                "bulkhead_max_wait_ms": c.bulkhead_max_wait.as_millis() as u64,
                "breaker_failure_rate_threshold": c.breaker_failure_rate_threshold,
                "breaker_window": c.breaker_window,
                "breaker_minimum_calls": c.breaker_minimum_calls,
                "breaker_open_wait_ms": c.breaker_open_wait.as_millis() as u64,
                "breaker_half_open_calls": c.breaker_half_open_calls,
                "rate_limit_per_second": c.rate_limit_per_second,
                "retry_max_attempts": c.retry_max_attempts,
                "retry_wait_ms": c.retry_wait.as_millis() as u64,
                "time_limiter_timeout_ms": c.time_limiter_timeout.as_millis() as u64,
            },
        })
    }
}

/// An adaptive run measured against the best fixed limit of the same drill
/// ([`DrillReport::adaptive_verdicts`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveVerdict {
    /// The adaptive layout.
    pub layout: Layout,
    /// The best fixed layout ([`DrillReport::best_fixed`]).
    pub best_fixed: Layout,
    /// Successful orders per second, as a share of the best fixed limit's.
    pub throughput_share: f64,
    /// The p99 latency of successes over the best fixed limit's.
    pub p99_ratio: f64,
    /// Whether the breaker opened.
    pub breaker_opened: bool,
    /// When the limit first came within 20 % of the best fixed limit, if it did.
    pub within_20_percent: Option<Duration>,
    /// The limit at the end of the run.
    pub final_limit: u32,
}

impl AdaptiveVerdict {
    /// Whether it meets the target: at least 95 % of the best fixed limit's successful orders
    /// per second, a p99 of successes at most 1.1 times its, the breaker never opened.
    pub fn meets_target(&self) -> bool {
        self.throughput_share >= 0.95 && self.p99_ratio <= 1.1 && !self.breaker_opened
    }

    /// The verdict in words.
    pub fn line(&self) -> String {
        format!(
            "{}: {:.0} % of {}'s successful orders/s, p99 of successes {:.2}x its, breaker {}; \
             limit within 20 % of {} {}, {} at the end{}",
            self.layout,
            100.0 * self.throughput_share,
            self.best_fixed,
            self.p99_ratio,
            if self.breaker_opened {
                "opened"
            } else {
                "never opened"
            },
            match self.best_fixed {
                Layout::Fixed(limit) => limit,
                _ => 0,
            },
            self.within_20_percent.map_or_else(
                || "never".to_owned(),
                |at| format!("after {:.1} s", at.as_secs_f64())
            ),
            self.final_limit,
            if self.meets_target() {
                " (meets the target)"
            } else {
                ""
            },
        )
    }
}

/// `n`, or `-` where the layout has no such guard.
fn dash_unless(present: bool, n: u64) -> String {
    if present {
        n.to_string()
    } else {
        "-".to_owned()
    }
}

/// `12 ms`, `0.4 ms`, `1.2 s`.
pub(crate) fn format_ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// Left-aligns the first column, right-aligns the others, with a rule under the header.
/// The width the drill's output keeps within.
pub const WIDTH: usize = 100;

/// `text` wrapped at word boundaries within [`WIDTH`] columns: the first line starts with
/// `first`, the others with `rest` (a hanging indent). A word longer than a line stays whole.
pub fn wrap(first: &str, rest: &str, text: &str) -> String {
    let mut out = String::from(first);
    let mut column = first.chars().count();
    let mut empty = true;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if !empty && column + 1 + len > WIDTH {
            out.push('\n');
            out.push_str(rest);
            column = rest.chars().count();
            empty = true;
        }
        if !empty {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += len;
        empty = false;
    }
    out
}

pub(crate) fn format_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(text, "{cell:<w$}");
            } else {
                let _ = write!(text, "  {cell:>w$}");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut rule.iter().map(String::as_str));
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<u32> = (1..=100).rev().collect();
        let s = LatencySummary::of(&mut samples).unwrap();
        assert_eq!(s.p50, Duration::from_micros(50));
        assert_eq!(s.p99, Duration::from_micros(99));
        assert_eq!(s.max, Duration::from_micros(100));
        assert_eq!(
            LatencySummary::of(&mut [7]).unwrap().p99,
            Duration::from_micros(7)
        );
        assert!(LatencySummary::of(&mut []).is_none());
    }

    #[test]
    fn the_table_aligns_its_columns() {
        let table = format_table(
            &["layout", "n"],
            &[
                vec!["a".into(), "1".into()],
                vec!["long-name".into(), "123".into()],
            ],
        );
        assert_eq!(
            table,
            "layout       n\n---------  ---\na            1\nlong-name  123\n"
        );
    }

    #[test]
    fn a_run_reconciles_only_when_the_outcomes_add_up() {
        let counts = Counts {
            offered: 10,
            succeeded: 5,
            failed: 1,
            rejected_bulkhead: 3,
            not_permitted: 1,
            rate_limited: 0,
            timed_out: 0,
            other_rejected: 0,
        };
        let run = |counts, bulkhead| {
            RunReport::new(
                Layout::BulkheadFirst,
                counts,
                Latencies::default(),
                BreakerSummary::default(),
                Duration::from_secs(1),
                Duration::from_secs(1),
                bulkhead,
                Attempts::default(),
            )
        };
        assert!(run(counts, 3).reconciles());
        assert!(run(counts, 3).reconciliation().ends_with("(= 10, exact)"));
        assert!(!run(counts, 2).reconciles());
        let short = Counts {
            offered: 11,
            ..counts
        };
        assert!(!run(short, 3).reconciles());
        assert!(run(short, 3).reconciliation().contains("MISMATCH"));
    }
}
