//! The overload drill: the incident this project exists to prevent, replayed in process.
//!
//! An [`OrderService`] whose handler carries `#[bulkhead(name = "orders")]` and
//! `#[circuit_breaker(name = "orders")]` calls a [`Downstream`] that slows down while a few
//! hundred callers ramp up, until demand exceeds what the service can serve. The same seeded
//! load is offered to each [`Layout`] in turn:
//!
//! - [`Layout::Incident`]: the breaker outside the bulkhead and recording the bulkhead's
//!   rejections as failures (Resilience4j's defaults). Overload alone opens the breaker, which
//!   then refuses almost everything: the service plays dead.
//! - [`Layout::BulkheadFirst`]: this project's default. The bulkhead sheds the overload; the
//!   breaker sees only calls the downstream ran, so it stays closed while the downstream works.
//! - [`Layout::BulkheadFirstUnfair`]: the default with `fair_call_handling(false)`.
//!
//! Every offered call ends in exactly one outcome (succeeded, failed, rejected by the bulkhead,
//! not permitted by the breaker), and a [`RunReport`] checks that they add up.
//!
//! ```no_run
//! use resilience_examples::drill::{self, DrillConfig};
//!
//! let report = drill::run(&DrillConfig::quick(), &())?;
//! print!("{}", report.table());
//! for run in &report.runs {
//!     assert!(run.reconciles(), "{}", run.reconciliation());
//! }
//! # Ok::<(), drill::DrillError>(())
//! ```
//!
//! [`replay`] is the same question asked of your own incident: your configuration file's
//! guards, your traffic and your dependency's latency from a profile, open-loop, in virtual
//! time.
//!
//! The drill uses [`Registry::global`](resilience_runtime::Registry::global), as the macros
//! do: each layout reconfigures the `orders` bulkhead and breaker (fresh instances) and sets the
//! breaker's precedence; [`run`] restores the default precedence afterwards and runs one drill
//! at a time in a process.

mod config;
mod downstream;
mod load;
mod peer;
mod plot;
pub mod replay;
mod report;
mod rng;
mod service;
pub mod slow_tail;

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use resilience_runtime::{Aspect, CircuitState, LimitAlgorithm, Registry};

pub use config::{DrillConfig, DrillConfigError};
pub use downstream::{Downstream, DownstreamError, Work};
pub use report::{
    wrap, AdaptiveVerdict, Attempts, Counts, DrillReport, LatencySummary, RunReport, Sample, WIDTH,
};
pub use rng::SplitMix64;
pub use service::{Order, OrderError, OrderId, OrderService, ORDERS};

/// How the order service's guards are laid out for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// The breaker declared outside the bulkhead (precedence reversed) and recording the
    /// bulkhead's rejections as failures: what Resilience4j does by default, and what the
    /// incident ran.
    Incident,
    /// This project's default: the bulkhead first (fair), rejections never recorded.
    BulkheadFirst,
    /// The default with `fair_call_handling(false)`: a newcomer may take a freed permit ahead
    /// of the callers already waiting.
    BulkheadFirstUnfair,
    /// All five aspects at the default precedence: bulkhead → rate limiter → retry → breaker →
    /// time limiter. A retry runs inside admission control and never retries a refusal; each
    /// attempt is bounded by the time limiter inside the breaker, so a time-out is a failure.
    FullStack,
    /// All five in Resilience4j's Spring order, Retry(CircuitBreaker(RateLimiter(
    /// TimeLimiter(Bulkhead(fn))))), with rejections recorded as failures and retried (the
    /// Spring defaults): every retry goes through admission control again.
    SpringDefault,
    /// Bulkhead first, as the default, with a fixed limit of this many calls: the sweep the
    /// adaptive limits are measured against (`fixed-60`).
    Fixed(u32),
    /// Bulkhead first, as the default, with an adaptive limit found by this algorithm and
    /// started at this limit (`gradient2-from-10`), between 1 and 500 calls.
    Adaptive(LimitAlgorithm, u32),
    /// The peer: no guard of this library, the handler behind `tower-acc`'s Gradient2
    /// concurrency limit started at this limit, between 1 and 500 calls, with the same wait
    /// for admission as the bulkhead's (`tower-acc-gradient2-from-10`).
    TowerAcc(u32),
    /// The second peer: the handler behind `tower-resilience-adaptive`'s Vegas limiter, as
    /// [`TowerAcc`](Layout::TowerAcc) (`tower-resilience-vegas-from-10`).
    TowerResilience(u32),
}

impl Layout {
    /// Every layout, in the order the drill runs them.
    pub const ALL: [Layout; 5] = [
        Layout::Incident,
        Layout::BulkheadFirst,
        Layout::BulkheadFirstUnfair,
        Layout::FullStack,
        Layout::SpringDefault,
    ];

    /// The adaptive comparison (`overload-drill --adaptive`): a sweep of fixed limits, the
    /// incident's 50 and its hand-tuned 80 among them, beside each algorithm started far too
    /// low (10) and far too high (400), and the peers (`tower-acc`'s Gradient2,
    /// `tower-resilience-adaptive`'s Vegas) from the same starts.
    pub const ADAPTIVE: [Layout; 19] = [
        Layout::Fixed(20),
        Layout::Fixed(40),
        Layout::Fixed(50),
        Layout::Fixed(60),
        Layout::Fixed(80),
        Layout::Fixed(120),
        Layout::Fixed(200),
        Layout::Adaptive(LimitAlgorithm::Knee, 10),
        Layout::Adaptive(LimitAlgorithm::Knee, 400),
        Layout::Adaptive(LimitAlgorithm::Gradient2, 10),
        Layout::Adaptive(LimitAlgorithm::Gradient2, 400),
        Layout::Adaptive(LimitAlgorithm::Vegas, 10),
        Layout::Adaptive(LimitAlgorithm::Vegas, 400),
        Layout::Adaptive(LimitAlgorithm::Aimd, 10),
        Layout::Adaptive(LimitAlgorithm::Aimd, 400),
        Layout::TowerAcc(10),
        Layout::TowerAcc(400),
        Layout::TowerResilience(10),
        Layout::TowerResilience(400),
    ];

    /// The highest an adaptive layout's limit goes.
    pub const ADAPTIVE_MAX_LIMIT: u32 = 500;

    /// The name in tables and JSON (`incident-layout`, `bulkhead-first`,
    /// `bulkhead-first-unfair`, `full-stack`, `spring-default`, `fixed-60`,
    /// `gradient2-from-10`).
    pub fn name(self) -> String {
        match self {
            Layout::Incident => "incident-layout".into(),
            Layout::BulkheadFirst => "bulkhead-first".into(),
            Layout::BulkheadFirstUnfair => "bulkhead-first-unfair".into(),
            Layout::FullStack => "full-stack".into(),
            Layout::SpringDefault => "spring-default".into(),
            Layout::Fixed(calls) => format!("fixed-{calls}"),
            Layout::Adaptive(algorithm, initial) => format!("{algorithm}-from-{initial}"),
            Layout::TowerAcc(initial) => format!("tower-acc-gradient2-from-{initial}"),
            Layout::TowerResilience(initial) => format!("tower-resilience-vegas-from-{initial}"),
        }
    }

    /// The layout called `name`: one of [`ALL`](Self::ALL), `fixed-N`, or
    /// `ALGORITHM-from-N` (`knee`, `gradient2`, `vegas`, `aimd`).
    pub fn from_name(name: &str) -> Option<Layout> {
        if let Some(layout) = Layout::ALL.into_iter().find(|l| l.name() == name) {
            return Some(layout);
        }
        let number = |text: &str| text.parse::<u32>().ok().filter(|n| *n > 0);
        if let Some(calls) = name.strip_prefix("fixed-") {
            return number(calls).map(Layout::Fixed);
        }
        for (prefix, peer) in [
            (
                "tower-acc-gradient2-from-",
                Layout::TowerAcc as fn(u32) -> Layout,
            ),
            ("tower-resilience-vegas-from-", Layout::TowerResilience),
        ] {
            if let Some(initial) = name.strip_prefix(prefix) {
                return number(initial)
                    .filter(|n| *n <= Self::ADAPTIVE_MAX_LIMIT)
                    .map(peer);
            }
        }
        let (algorithm, initial) = name.split_once("-from-")?;
        let algorithm = [
            LimitAlgorithm::Gradient2,
            LimitAlgorithm::Vegas,
            LimitAlgorithm::Aimd,
            LimitAlgorithm::Knee,
        ]
        .into_iter()
        .find(|a| a.as_str() == algorithm)?;
        number(initial)
            .filter(|n| *n <= Self::ADAPTIVE_MAX_LIMIT)
            .map(|n| Layout::Adaptive(algorithm, n))
    }

    /// Whether the limit is adaptive (this library's, or the peer's).
    pub const fn is_adaptive(self) -> bool {
        matches!(
            self,
            Layout::Adaptive(..) | Layout::TowerAcc(_) | Layout::TowerResilience(_)
        )
    }

    /// The precedence table of the layout, outermost first: the defaults, but for the
    /// incident's breaker moved outside the bulkhead (50, below its 100) and Spring's order
    /// (numbers above every default, so that setting them one by one never ties).
    pub fn precedence(self) -> [(Aspect, i32); 7] {
        let default = |aspect: Aspect| (aspect, aspect.default_precedence());
        match self {
            Layout::Incident => [
                (Aspect::CircuitBreaker, 50),
                default(Aspect::Bulkhead),
                default(Aspect::RateLimiter),
                default(Aspect::Retry),
                default(Aspect::Hedge),
                default(Aspect::TimeLimiter),
                default(Aspect::Fault),
            ],
            Layout::BulkheadFirst
            | Layout::BulkheadFirstUnfair
            | Layout::FullStack
            | Layout::Fixed(_)
            | Layout::Adaptive(..)
            | Layout::TowerAcc(_)
            | Layout::TowerResilience(_) => Aspect::ALL.map(default),
            Layout::SpringDefault => [
                (Aspect::Retry, 1010),
                (Aspect::CircuitBreaker, 1020),
                (Aspect::RateLimiter, 1030),
                (Aspect::TimeLimiter, 1040),
                (Aspect::Bulkhead, 1050),
                // Spring has no hedge: innermost, around the call alone; faults inside it.
                (Aspect::Hedge, 1060),
                (Aspect::Fault, 1070),
            ],
        }
    }

    /// The circuit breaker's precedence in this layout.
    pub fn breaker_precedence(self) -> i32 {
        self.precedence()
            .into_iter()
            .find(|(aspect, _)| *aspect == Aspect::CircuitBreaker)
            .map_or(Aspect::CircuitBreaker.default_precedence(), |(_, p)| p)
    }

    /// Whether the order service's handler carries all five aspects (else the bulkhead and the
    /// breaker only).
    pub const fn all_five(self) -> bool {
        matches!(self, Layout::FullStack | Layout::SpringDefault)
    }

    /// Whether the breaker records a rejection by another guard as a failure.
    pub const fn records_rejections(self) -> bool {
        matches!(self, Layout::Incident | Layout::SpringDefault)
    }

    /// Whether the retry retries a refusal by a guard inside it.
    pub const fn retries_rejections(self) -> bool {
        matches!(self, Layout::SpringDefault)
    }

    /// Whether the bulkhead is entered once per offered call (it sits outside the retry, or
    /// there is no retry), so that its own count of rejections matches the callers'.
    pub const fn bulkhead_once_per_call(self) -> bool {
        // The peer uses no bulkhead: its limiter's refusals are counted by the callers alone.
        !matches!(
            self,
            Layout::SpringDefault | Layout::TowerAcc(_) | Layout::TowerResilience(_)
        )
    }

    /// The bulkhead's `fair_call_handling`.
    pub const fn fair_call_handling(self) -> bool {
        !matches!(self, Layout::BulkheadFirstUnfair)
    }

    /// A one-line description of the guards.
    pub fn describe(self) -> String {
        match self {
            Layout::Fixed(calls) => format!("bulkhead first, a fixed limit of {calls} calls"),
            Layout::Adaptive(algorithm, initial) => {
                format!(
                    "bulkhead first, an adaptive limit ({algorithm}) started at {initial} calls"
                )
            }
            Layout::TowerAcc(initial) => format!(
                "no guard of this library: tower-acc's Gradient2 concurrency limit started at \
                 {initial} calls, the same wait for admission"
            ),
            Layout::TowerResilience(initial) => format!(
                "no guard of this library: tower-resilience-adaptive's Vegas limiter started at \
                 {initial} calls, the same wait for admission"
            ),
            other => other.describe_five().into(),
        }
    }

    const fn describe_five(self) -> &'static str {
        match self {
            Layout::Incident => {
                "breaker outside the bulkhead, rejections recorded as failures (Resilience4j's default)"
            }
            Layout::BulkheadFirst => "bulkhead first, fair; rejections not recorded (the default)",
            Layout::BulkheadFirstUnfair => "bulkhead first, fair_call_handling(false)",
            Layout::FullStack => {
                "all five at the default precedence: retry inside admission control, time limiter inside the breaker"
            }
            Layout::SpringDefault => {
                "Retry(CircuitBreaker(RateLimiter(TimeLimiter(Bulkhead)))), rejections recorded and retried (Spring's defaults)"
            }
            Layout::Fixed(_)
            | Layout::Adaptive(..)
            | Layout::TowerAcc(_)
            | Layout::TowerResilience(_) => "",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A reading taken while a layout runs, for progress displays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Time since the layout started.
    pub elapsed: Duration,
    /// How long the layout offers load.
    pub duration: Duration,
    /// The outcomes so far.
    pub counts: Counts,
    /// The breaker's state now.
    pub breaker: CircuitState,
}

/// Watches a drill as it runs; every method does nothing by default, and `()` watches nothing.
pub trait Observer {
    /// `layout` starts offering load for `duration`.
    fn layout_started(&self, layout: Layout, duration: Duration) {
        let _ = (layout, duration);
    }

    /// A reading of `layout`, about ten times a second.
    fn progress(&self, layout: Layout, progress: &Progress) {
        let _ = (layout, progress);
    }

    /// `layout` finished: every call in flight has ended.
    fn layout_finished(&self, layout: Layout, report: &RunReport) {
        let _ = (layout, report);
    }
}

impl Observer for () {}

/// Why a drill could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum DrillError {
    /// The configuration is out of range, or the registry refused it.
    Config(DrillConfigError),
    /// The tokio runtime could not start.
    Runtime(std::io::Error),
}

impl From<DrillConfigError> for DrillError {
    fn from(e: DrillConfigError) -> Self {
        DrillError::Config(e)
    }
}

impl From<resilience_runtime::ConfigError> for DrillError {
    fn from(e: resilience_runtime::ConfigError) -> Self {
        DrillError::Config(DrillConfigError::Guard(e))
    }
}

impl fmt::Display for DrillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DrillError::Config(e) => write!(f, "{e}"),
            DrillError::Runtime(e) => write!(f, "cannot start the tokio runtime: {e}"),
        }
    }
}

impl std::error::Error for DrillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DrillError::Config(e) => Some(e),
            DrillError::Runtime(e) => Some(e),
        }
    }
}

/// Puts every aspect back at its default precedence. The defaults are distinct from every
/// layout's numbers but the ones they share, so no step ties.
fn restore_default_precedence(registry: &Registry) -> Result<(), resilience_runtime::ConfigError> {
    for aspect in Aspect::ALL {
        registry.set_precedence(aspect, aspect.default_precedence())?;
    }
    Ok(())
}

/// Runs the drill: each layout of `config` in turn, under the same seeded load, on a
/// multi-threaded tokio runtime of its own; `observer` sees the progress.
///
/// Uses the `orders` instances of the global registry and its precedence table, restoring the
/// default precedence afterwards; a second drill in the same process
/// waits for the first to finish.
///
/// # Errors
///
/// [`DrillError`] if the configuration is invalid or the runtime cannot start; nothing has run
/// then.
pub fn run(config: &DrillConfig, observer: &dyn Observer) -> Result<DrillReport, DrillError> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _running = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());

    config.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads())
        .enable_all()
        .build()
        .map_err(DrillError::Runtime)?;

    let registry = Registry::global();
    let mut runs = Vec::with_capacity(config.layouts.len());
    for &layout in &config.layouts {
        let run = runtime.block_on(load::run_layout(registry, config, layout, observer));
        let restored = restore_default_precedence(registry);
        let run = run?;
        observer.layout_finished(layout, &run);
        runs.push(run);
        restored?;
    }
    Ok(DrillReport {
        config: config.clone(),
        runs,
    })
}
