//! What a replay measured: [`ReplayRun`] per layout, [`ReplayReport`] for the replay, with its
//! tables, findings in words, JSON and picture.

use std::time::Duration;

use resilience_runtime::{Aspect, SlidingWindow};
use serde_json::{json, Value};

use super::{Load, Profile};
use crate::drill::plot::{draw, Panel};
use crate::drill::report::{
    format_ms, format_table, ms, Counts, Latencies, LatencySummary, Sample,
};

/// What the breaker's window held when it first opened.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Opening {
    /// When, from the start of the replay.
    pub at: Duration,
    /// The failure rate it opened at, in percent, where that was the reason.
    pub failure_rate: Option<f32>,
    /// The slow call rate it opened at, in percent, where that was the reason.
    pub slow_call_rate: Option<f32>,
    /// The calls in its window (the last `n` it recorded, or those of the last `n` seconds).
    pub window_calls: u64,
    /// Of those, the bulkhead's refusals it recorded as failures (a bulkhead inside a breaker
    /// that records rejections).
    pub bulkhead_refusals: u64,
    /// The rate limiter's refusals, likewise.
    pub rate_limiter_refusals: u64,
    /// The time limiter's cut-offs (a time limiter inside the breaker).
    pub time_outs: u64,
    /// The dependency's own errors.
    pub dependency_failures: u64,
}

impl Opening {
    /// The failures in the window, of every kind.
    pub fn failures(&self) -> u64 {
        self.bulkhead_refusals
            + self.rate_limiter_refusals
            + self.time_outs
            + self.dependency_failures
    }
}

/// What the breaker did in one layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerReplay {
    /// When it first opened, from the start of the replay.
    pub first_open: Option<Duration>,
    /// Times it opened.
    pub openings: u32,
    /// Time spent open.
    pub open_time: Duration,
    /// What it had recorded when it first opened.
    pub opening: Option<Opening>,
    /// Whether it recorded other guards' refusals as failures.
    pub records_rejections: bool,
    /// Its sliding window.
    pub window: SlidingWindow,
}

/// The work the dependency did and the retries that made it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Work {
    pub(crate) served: u64,
    pub(crate) failed: u64,
    pub(crate) retries: u64,
    pub(crate) bulkhead_rejections: Option<u64>,
}

/// What one layout did with the replayed profile.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayRun {
    /// The calls the profile offers (its integral, rounded), open-loop; `None` closed-loop.
    pub expected: Option<u64>,
    /// The layout: the file's stem, and the variant's (`incident/adaptive`).
    pub name: String,
    /// Its guards and their order.
    pub description: String,
    /// The handler's guards, outermost first.
    pub guards: Vec<Aspect>,
    /// How the offered calls ended.
    pub counts: Counts,
    /// Latencies of the successes, as the callers saw them.
    pub succeeded_latency: Option<LatencySummary>,
    /// Latencies of the refusals by the bulkhead or the breaker.
    pub rejected_latency: Option<LatencySummary>,
    /// The breaker, if the handler has one.
    pub breaker: Option<BreakerReplay>,
    /// Requests the dependency began serving (attempts that got a worker).
    pub dependency_served: u64,
    /// Requests the dependency failed.
    pub dependency_failed: u64,
    /// Retries made (each one more attempt).
    pub retries: u64,
    /// The bulkhead's own count of its refusals, if the handler has one.
    pub bulkhead_rejections: Option<u64>,
    /// An adaptive limit: its start, lowest, highest and last.
    pub limit: Option<(u32, u32, u32, u32)>,
    /// How long the profile offered load.
    pub duration: Duration,
    /// Virtual time until the last call ended.
    pub elapsed: Duration,
    /// The wall-clock time the replay of this layout took.
    pub wall: Duration,
    /// Readings over the replay, for the picture.
    pub timeline: Vec<Sample>,
    /// The requests the dependency had answered and failed, at each reading.
    pub(crate) answers: Vec<(Duration, u64, u64)>,
}

impl ReplayRun {
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site, every argument named there"
    )]
    pub(crate) fn new(
        expected: Option<u64>,
        name: String,
        description: String,
        guards: Vec<Aspect>,
        counts: Counts,
        latencies: Latencies,
        breaker: Option<BreakerReplay>,
        work: Work,
        limit: Option<(u32, u32, u32, u32)>,
        duration: Duration,
        elapsed: Duration,
        timeline: Vec<Sample>,
        answers: Vec<(Duration, u64, u64)>,
    ) -> ReplayRun {
        let (succeeded_latency, rejected_latency) = latencies.summaries();
        ReplayRun {
            expected,
            name,
            description,
            guards,
            counts,
            succeeded_latency,
            rejected_latency,
            breaker,
            dependency_served: work.served,
            dependency_failed: work.failed,
            retries: work.retries,
            bulkhead_rejections: work.bulkhead_rejections,
            limit,
            duration,
            elapsed,
            wall: Duration::ZERO,
            timeline,
            answers,
        }
    }

    /// Whether every offered call ended in exactly one outcome, open-loop the profile offered
    /// them all, and, where the bulkhead is entered once per call, its own count of refusals
    /// agrees with the callers'.
    pub fn reconciles(&self) -> bool {
        let c = &self.counts;
        // Entered once per call unless a retry or a hedge outside it makes it again.
        let at = |aspect| self.guards.iter().position(|a| *a == aspect);
        let once = [Aspect::Retry, Aspect::Hedge]
            .into_iter()
            .all(|wrapper| at(wrapper).is_none() || at(Aspect::Bulkhead) < at(wrapper));
        c.offered == c.ended()
            && self.expected.is_none_or(|n| n == c.offered)
            && (!once
                || self
                    .bulkhead_rejections
                    .is_none_or(|n| n == c.rejected_bulkhead))
    }

    /// Attempts the dependency began serving per offered call.
    pub fn attempts_per_call(&self) -> f64 {
        self.dependency_served as f64 / self.counts.offered.max(1) as f64
    }

    /// Successes per second of the profile.
    pub fn throughput(&self) -> f64 {
        self.counts.succeeded as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    /// The share of the requests the dependency answered in `window` before `at` that it
    /// failed.
    fn failure_share_before(&self, at: Duration, window: Duration) -> Option<f64> {
        let before = |t: Duration| {
            self.answers
                .iter()
                .rev()
                .find(|a| a.0 <= t)
                .map_or((0, 0), |a| (a.1, a.2))
        };
        let (from, to) = (before(at.saturating_sub(window)), before(at));
        let answered = to.0 - from.0;
        (answered > 0).then(|| (to.1 - from.1) as f64 / answered as f64)
    }

    fn json(&self, profile: &Profile) -> Value {
        let c = &self.counts;
        let breaker = self.breaker.map(|b| {
            json!({
                "first_open_s": b.first_open.map(|d| d.as_secs_f64()),
                "first_open_at": b.first_open.map(|d| profile.clock_time(d)),
                "openings": b.openings,
                "open_s": b.open_time.as_secs_f64(),
                "records_rejections": b.records_rejections,
                "opening": b.opening.map(|o| json!({
                    "failure_rate": o.failure_rate,
                    "slow_call_rate": o.slow_call_rate,
                    "window_calls": o.window_calls,
                    "failures": o.failures(),
                    "bulkhead_refusals": o.bulkhead_refusals,
                    "rate_limiter_refusals": o.rate_limiter_refusals,
                    "time_outs": o.time_outs,
                    "dependency_failures": o.dependency_failures,
                })),
            })
        });
        json!({
            "name": self.name,
            "description": self.description,
            "guards": self.guards.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
            "offered": c.offered,
            "succeeded": c.succeeded,
            "failed": c.failed,
            "rejected_bulkhead": c.rejected_bulkhead,
            "not_permitted": c.not_permitted,
            "rate_limited": c.rate_limited,
            "timed_out": c.timed_out,
            "other_rejected": c.other_rejected,
            "dependency_served": self.dependency_served,
            "dependency_failed": self.dependency_failed,
            "retries": self.retries,
            "attempts_per_call": self.attempts_per_call(),
            "breaker": breaker,
            "limit": self.limit.map(|(start, low, high, end)| json!({
                "start": start, "lowest": low, "highest": high, "end": end,
            })),
            "succeeded_latency": LatencySummary::json(self.succeeded_latency),
            "rejected_latency": LatencySummary::json(self.rejected_latency),
            "expected": self.expected,
            "reconciles": self.reconciles(),
            "virtual_seconds": self.elapsed.as_secs_f64(),
            "wall_ms": ms(self.wall),
        })
    }
}

impl Panel for ReplayRun {
    fn title(&self) -> String {
        self.name.clone()
    }
    fn caption(&self) -> String {
        format!("{:.0} ok/s · {}", self.throughput(), self.description)
    }
    fn timeline(&self) -> &[Sample] {
        &self.timeline
    }
    fn load_ends(&self) -> Duration {
        self.duration
    }
    fn elapsed(&self) -> Duration {
        self.elapsed
    }
    fn draws_limit(&self) -> bool {
        self.limit.is_some()
    }
}

/// What a replay measured: the profile, how calls arrived, and one [`ReplayRun`] per layout.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    /// The profile replayed.
    pub profile: Profile,
    /// How calls arrived.
    pub load: Load,
    /// The seed.
    pub seed: u64,
    /// The variants left out and why, and what makes a layout's replay differ between runs.
    pub notes: Vec<String>,
    /// One run per layout, in the order they ran.
    pub runs: Vec<ReplayRun>,
}

impl ReplayReport {
    /// Whether every run reconciles ([`ReplayRun::reconciles`]).
    pub fn reconciles(&self) -> bool {
        self.runs.iter().all(ReplayRun::reconciles)
    }

    /// Two tables of one row per layout: how the offered calls ended (succeeded, failed at
    /// the dependency, refused by the bulkhead, the breaker, the rate limiter, cut off by the
    /// time limiter), then the attempts that reached the dependency per call, when the breaker
    /// first opened and how long it was open in all, and the latencies.
    pub fn table(&self) -> String {
        let has = |r: &ReplayRun, a: Aspect, n: u64| {
            if r.guards.contains(&a) {
                n.to_string()
            } else {
                "-".to_owned()
            }
        };
        let outcomes: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                let c = &r.counts;
                vec![
                    r.name.clone(),
                    c.offered.to_string(),
                    c.succeeded.to_string(),
                    c.failed.to_string(),
                    has(r, Aspect::Bulkhead, c.rejected_bulkhead),
                    has(r, Aspect::CircuitBreaker, c.not_permitted),
                    has(r, Aspect::RateLimiter, c.rate_limited),
                    has(r, Aspect::TimeLimiter, c.timed_out),
                ]
            })
            .collect();
        let lat = |s: Option<LatencySummary>, p99: bool| {
            s.map_or_else(
                || "-".to_owned(),
                |s| format_ms(if p99 { s.p99 } else { s.p50 }),
            )
        };
        let behaviour: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                let opened = r.breaker.map_or_else(
                    || "-".to_owned(),
                    |b| {
                        b.first_open
                            .map_or_else(|| "never".to_owned(), |d| self.profile.clock_time(d))
                    },
                );
                let open_for = r
                    .breaker
                    .map_or_else(|| "-".to_owned(), |b| duration_words(b.open_time));
                vec![
                    r.name.clone(),
                    format!("{:.2}", r.attempts_per_call()),
                    opened,
                    open_for,
                    lat(r.succeeded_latency, false),
                    lat(r.succeeded_latency, true),
                    lat(r.rejected_latency, true),
                    format!("{:.0}", r.throughput()),
                ]
            })
            .collect();
        format!(
            "{}\n{}",
            format_table(
                &[
                    "layout",
                    "offered",
                    "succeeded",
                    "failed",
                    "bulkhead",
                    "breaker",
                    "throttled",
                    "timed out"
                ],
                &outcomes
            ),
            format_table(
                &[
                    "layout",
                    "attempts",
                    "opened",
                    "open for",
                    "ok p50",
                    "ok p99",
                    "rejected p99",
                    "ok/s"
                ],
                &behaviour
            )
        )
    }

    /// What each layout did, in words, then which layout served the most without the breaker
    /// opening.
    pub fn findings(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let first = self.runs.first();
        for run in &self.runs {
            let mut text = format!("{}: ", run.name);
            let c = &run.counts;
            match run.breaker {
                None => text.push_str("no breaker. "),
                Some(b) => match (b.first_open, b.opening) {
                    (Some(at), Some(o)) => {
                        text.push_str(&self.opening_words(run, b.window, at, &o));
                        text.push_str(&format!(
                            " It was open {} in all ({} opening{}) and refused {} calls. ",
                            duration_words(b.open_time),
                            b.openings,
                            if b.openings == 1 { "" } else { "s" },
                            c.not_permitted
                        ));
                    }
                    _ => text.push_str("the breaker never opened. "),
                },
            }
            let percent = |n: u64| 100.0 * n as f64 / c.offered.max(1) as f64;
            text.push_str(&format!(
                "{} of {} calls succeeded ({:.1} %)",
                c.succeeded,
                c.offered,
                percent(c.succeeded)
            ));
            let mut refused = Vec::new();
            if c.rejected_bulkhead > 0 {
                refused.push(format!("{} shed by the bulkhead", c.rejected_bulkhead));
            }
            if c.rate_limited > 0 {
                refused.push(format!("{} by the rate limiter", c.rate_limited));
            }
            if c.timed_out > 0 {
                refused.push(format!("{} cut off by the time limiter", c.timed_out));
            }
            if c.failed > 0 {
                refused.push(format!("{} failed at the dependency", c.failed));
            }
            if !refused.is_empty() {
                text.push_str(&format!("; {}", refused.join(", ")));
            }
            text.push('.');
            if let Some(first) = first.filter(|f| f.name != run.name && f.counts.succeeded > 0) {
                text.push_str(&format!(
                    " {:.2}x the successes of {}",
                    c.succeeded as f64 / first.counts.succeeded as f64,
                    first.name
                ));
                if let (Some(a), Some(b)) = (run.succeeded_latency, first.succeeded_latency) {
                    text.push_str(&format!(
                        ", their p99 {} against {}",
                        format_ms(a.p99),
                        format_ms(b.p99)
                    ));
                }
                text.push('.');
            }
            if run.retries > 0 {
                text.push_str(&format!(
                    " The retry made {} retries ({:.2} a call); {:.2} attempts a call reached the \
                     dependency.",
                    run.retries,
                    run.retries as f64 / c.offered.max(1) as f64,
                    run.attempts_per_call()
                ));
            }
            if let Some((start, low, high, end)) = run.limit {
                text.push_str(&format!(
                    " Its limit went from {start} to {end} (between {low} and {high})."
                ));
            }
            lines.push(text);
        }
        let closed: Vec<&ReplayRun> = self
            .runs
            .iter()
            .filter(|r| r.breaker.is_none_or(|b| b.first_open.is_none()))
            .collect();
        match closed.iter().map(|r| r.counts.succeeded).max() {
            Some(most) => {
                let best: Vec<&str> = closed
                    .iter()
                    .filter(|r| r.counts.succeeded == most)
                    .map(|r| r.name.as_str())
                    .collect();
                lines.push(format!(
                    "Most successes without the breaker opening: {} ({most} calls{}, {:.0} ok/s).",
                    best.join(" and "),
                    if best.len() > 1 { " each" } else { "" },
                    most as f64 / self.profile.duration().as_secs_f64().max(1e-9)
                ));
            }
            None => lines.push("The breaker opened in every layout.".to_owned()),
        }
        lines
    }

    /// Why the breaker of `run` first opened, at `at`, from what its window held.
    fn opening_words(
        &self,
        run: &ReplayRun,
        window: SlidingWindow,
        at: Duration,
        o: &Opening,
    ) -> String {
        let when = match self.profile.start() {
            Some(_) => format!(
                "at {} ({} into the replay)",
                self.profile.clock_time(at),
                duration_words(at)
            ),
            None => format!("after {}", duration_words(at)),
        };
        let window = match window {
            SlidingWindow::CountBased(_) => {
                format!("of the last {} calls it recorded", o.window_calls)
            }
            SlidingWindow::TimeBased(seconds) => format!(
                "of the {} calls it recorded in the last {seconds} s",
                o.window_calls
            ),
        };
        let minute = run
            .failure_share_before(at, Duration::from_secs(60))
            .map_or_else(String::new, |share| {
                format!(
                    "; in the minute before, the dependency failed {:.1} % of the calls it answered",
                    100.0 * share
                )
            });
        let refusals = o.bulkhead_refusals + o.rate_limiter_refusals;
        let mut parts = Vec::new();
        for (n, what) in [
            (o.bulkhead_refusals, "the bulkhead's refusals"),
            (o.rate_limiter_refusals, "the rate limiter's refusals"),
            (o.time_outs, "time-outs"),
            (o.dependency_failures, "the dependency's errors"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        let failures = o.failures();
        let made_of = if parts.is_empty() {
            String::new()
        } else {
            format!(": {}", parts.join(", "))
        };
        let cause = if o.failure_rate.is_none() && o.slow_call_rate.is_some() {
            "on slow calls"
        } else if refusals * 2 > failures {
            "on rejections, not on failures"
        } else if o.time_outs * 2 > failures {
            "on time-outs"
        } else {
            "on the dependency's failures"
        };
        let waiting = if o.time_outs > 0
            && run.guards.iter().position(|a| *a == Aspect::TimeLimiter)
                < run.guards.iter().position(|a| *a == Aspect::Bulkhead)
        {
            " (the time limiter wraps the bulkhead: it cut off calls still waiting for a permit)"
        } else {
            ""
        };
        format!("the breaker opened {when} {cause}: {window}, {failures} were failures{made_of}{waiting}{minute}.")
    }

    /// The report as JSON: the profile's outline, the load, and one object per layout.
    pub fn json(&self) -> Value {
        json!({
            "profile": {
                "steps": self.profile.steps().len(),
                "duration_s": self.profile.duration().as_secs_f64(),
                "offered": self.profile.offered(),
                "start_unix": self.profile.start(),
            },
            "load": match self.load {
                Load::Open => json!({"kind": "open"}),
                Load::Closed { callers } => json!({"kind": "closed", "callers": callers}),
            },
            "seed": self.seed,
            "notes": self.notes,
            "runs": self.runs.iter().map(|r| r.json(&self.profile)).collect::<Vec<_>>(),
        })
    }

    /// The replay as an SVG image, one panel per layout (as the drill's picture).
    pub fn svg(&self) -> String {
        let panels: Vec<&dyn Panel> = self.runs.iter().map(|r| r as &dyn Panel).collect();
        let load = match self.load {
            Load::Open => "open loop".to_owned(),
            Load::Closed { callers } => format!("closed loop, {callers} callers"),
        };
        draw(
            &format!(
                "replay: {} of profile ({load}, seed {}) against each layout",
                duration_words(self.profile.duration()),
                self.seed
            ),
            &panels,
        )
    }
}

/// `47 s`, `3 min 20 s`, `1 h 5 min`.
fn duration_words(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        // Whole seconds cut, as a time of day is (`Profile::clock_time`).
        let whole = s.floor() as u64;
        format!("{} min {} s", whole / 60, whole % 60)
    } else {
        let minutes = (s / 60.0).round() as u64;
        format!("{} h {} min", minutes / 60, minutes % 60)
    }
}
