//! The slow-tail drill (`overload-drill --slow-tail`): a dependency whose attempts are mostly
//! quick but a few percent ten times slower, called with and without `#[hedge]`, on tokio's
//! paused clock (virtual time: a run of seconds takes a fraction of one, and the same seed
//! gives the same figures).
//!
//! Calls arrive open-loop, at a fixed rate whatever the calls' latency. The dependency's own
//! latency is written here (jitter seeded by the call and the attempt's number); its slow tail
//! is the registry's [fault injection](resilience_runtime::FaultConfig), a latency injected
//! into the attempts through the real guards, so a hedge's second attempt draws again, as a
//! request sent to another replica does. Two tails are run: the usual one, where hedging cuts
//! the p99 of successes, and an incident's, where a third of the attempts are slow and the
//! hedge's budget keeps the extra attempts under its ratio.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::{
    Clock, FaultConfig, Guard, HedgeConfig, Plan, Registry, Rejected, RetryBudget,
};

use super::rng::SplitMix64;

/// The hedge's instance name.
pub const LOOKUP: &str = "lookup";

/// What one slow-tail run does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowTailConfig {
    /// Calls offered.
    pub calls: u32,
    /// Calls offered per second (open loop).
    pub rate: u32,
    /// An attempt's usual latency (each draws 0.75 to 1.25 times it).
    pub latency: Duration,
    /// How many times slower a slow attempt is: the latency injected into it is this many
    /// times `latency`, less one.
    pub slow_factor: u32,
    /// The hedge's delay.
    pub delay: Duration,
    /// The hedge budget's ratio: extra attempts per call.
    pub budget_ratio: f64,
    /// The seed of every draw.
    pub seed: u64,
}

impl Default for SlowTailConfig {
    /// 20 000 calls at 1 000 a second, 10 ms attempts, slow ones 10 times slower, a hedge after
    /// 20 ms with a budget of one extra attempt per ten calls.
    fn default() -> Self {
        SlowTailConfig {
            calls: 20_000,
            rate: 1_000,
            latency: Duration::from_millis(10),
            slow_factor: 10,
            delay: Duration::from_millis(20),
            budget_ratio: 0.1,
            seed: 42,
        }
    }
}

/// How one layout did on one tail.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowTailRun {
    /// `"no hedge"` or `"hedge"`.
    pub layout: &'static str,
    /// The share of attempts that are slow.
    pub tail: f64,
    /// Calls that succeeded (every call does: the dependency does not fail).
    pub succeeded: u64,
    /// Latencies of the successes, in virtual time.
    pub p50: Duration,
    /// See `p50`.
    pub p99: Duration,
    /// See `p50`.
    pub p999: Duration,
    /// Attempts made (each drew its fault once), the dependency's load.
    pub attempts: u64,
    /// Extra attempts the budget refused.
    pub over_budget: u64,
}

impl SlowTailRun {
    /// Extra attempts per call.
    pub fn extra_load(&self) -> f64 {
        (self.attempts as f64 - self.succeeded as f64) / self.succeeded.max(1) as f64
    }
}

/// An error of the lookup: only a guard's refusal (the dependency never fails here).
#[derive(Clone, Debug, PartialEq)]
pub struct LookupError(pub Rejected);

impl From<Rejected> for LookupError {
    fn from(rejected: Rejected) -> Self {
        LookupError(rejected)
    }
}

/// One call's draws: cloned per attempt by the hedge, each attempt numbered by `attempts`.
#[derive(Clone)]
struct Lookup {
    id: u64,
    attempts: Arc<AtomicU32>,
    config: SlowTailConfig,
}

impl Lookup {
    /// One attempt at the dependency, once the faults let it run: its usual latency, with a
    /// jitter drawn from the call and the attempt's number.
    async fn attempt(&self) -> Result<u64, LookupError> {
        let number = self.attempts.fetch_add(1, Ordering::Relaxed);
        let mut rng = SplitMix64::for_stream(self.config.seed, (self.id << 8) | u64::from(number));
        let jitter = rng.uniform(0.75, 1.25);
        tokio::time::sleep(self.config.latency.mul_f64(jitter)).await;
        Ok(self.id)
    }
}

/// Runs both layouts on the usual tail (3 % of attempts slow) and on an incident's (30 %).
pub fn run(config: &SlowTailConfig) -> Vec<SlowTailRun> {
    let mut runs = Vec::new();
    for tail in [0.03, 0.30] {
        for layout in ["no hedge", "hedge"] {
            runs.push(run_one(config, layout, tail));
        }
    }
    runs
}

/// The registry of one run, its clock taken where this is called, and the plan of `layout`.
fn lookup(config: &SlowTailConfig, layout: &'static str, tail: f64) -> (Registry, Arc<Plan>) {
    let registry = Registry::with_clock(Clock::precise());
    registry.allow_fault_injection();
    registry
        .configure_fault(
            LOOKUP,
            FaultConfig::builder()
                .latency(tail, config.latency * config.slow_factor.saturating_sub(1))
                .seed(config.seed)
                .build()
                .expect("valid faults"),
        )
        .expect("the faults are configured");
    registry
        .configure_hedge(
            LOOKUP,
            HedgeConfig::builder()
                .delay(config.delay)
                .max_hedged_attempts(1)
                .budget(RetryBudget::ratio(config.budget_ratio).min_retries_per_second(0))
                .build()
                .expect("a valid hedge"),
        )
        .expect("the hedge is configured");
    let guard = if layout == "hedge" {
        Guard::hedge(LOOKUP)
    } else {
        Guard::fault(LOOKUP)
    };
    let plan = Arc::new(registry.plan(&[guard]).expect("a plan of the lookup"));
    (registry, plan)
}

/// One layout on one tail, on a registry of its own whose clock paused time drives entirely
/// ([`Clock::precise`], created inside the paused runtime): the hedge budget counts seconds of
/// virtual time, as it counts real ones in a service. The calls are plans of that registry
/// (`#[hedge(name = "lookup", registry = ..)]` on the handler is the same call); the plan
/// without the hedge names the faults alone.
fn run_one(config: &SlowTailConfig, layout: &'static str, tail: f64) -> SlowTailRun {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let (registry, plan) = runtime.block_on(async { lookup(config, layout, tail) });
    let mut latencies = runtime.block_on(async {
        let start = tokio::time::Instant::now();
        let gap = Duration::from_secs(1) / config.rate;
        let mut calls = Vec::with_capacity(config.calls as usize);
        for id in 0..u64::from(config.calls) {
            tokio::time::sleep_until(start + gap * u32::try_from(id).unwrap_or(u32::MAX)).await;
            let call = Lookup {
                id,
                attempts: Arc::new(AtomicU32::new(0)),
                config: *config,
            };
            let plan = Arc::clone(&plan);
            calls.push(tokio::spawn(async move {
                let began = tokio::time::Instant::now();
                let answer = plan
                    .call_async(|| {
                        let call = call.clone();
                        async move { call.attempt().await }
                    })
                    .await;
                answer.ok().map(|_| began.elapsed())
            }));
        }
        let mut latencies = Vec::with_capacity(calls.len());
        for call in calls {
            if let Some(latency) = call.await.expect("a call does not panic") {
                latencies.push(latency);
            }
        }
        latencies
    });
    latencies.sort_unstable();
    let at = |q: f64| {
        let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(i).copied().unwrap_or_default()
    };
    let hedge = registry.hedge(LOOKUP).metrics();
    SlowTailRun {
        layout,
        tail,
        succeeded: latencies.len() as u64,
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
        attempts: registry.fault(LOOKUP).metrics().number_of_draws(),
        over_budget: hedge.number_of_hedges_over_budget(),
    }
}

/// The runs as a table, one line per layout and tail.
pub struct Table<'r>(pub &'r [SlowTailRun]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<10} {:>5} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
            "layout", "slow", "succeeded", "p50", "p99", "p99.9", "extra load", "over budget"
        )?;
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
        for run in self.0 {
            writeln!(
                f,
                "{:<10} {:>4.0}% {:>9} {:>9} {:>9} {:>9} {:>10.1}% {:>11}",
                run.layout,
                run.tail * 100.0,
                run.succeeded,
                ms(run.p50),
                ms(run.p99),
                ms(run.p999),
                run.extra_load() * 100.0,
                run.over_budget
            )?;
        }
        Ok(())
    }
}
