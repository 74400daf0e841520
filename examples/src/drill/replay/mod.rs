//! The replay (`overload-drill --config your.toml --profile incident.csv`): what the guards of
//! your configuration file would have done with the traffic and the dependency of your incident,
//! beside the same guards in other layouts.
//!
//! The load and the dependency come from a [`Profile`], one row per time step: the requests
//! offered per second, the dependency's latency (its median and 99th percentile), its error
//! rate and, optionally, its workers. The guards come from one or more configuration files, as
//! [`Registry::load_toml`] reads them: the handler carries each guard the file configures for
//! the instance replayed (`orders` in the shipped files). Each file is replayed as written;
//! the first is also replayed with this project's default order, with an adaptive bulkhead,
//! and in Resilience4j's Spring order ([`Variant`]).
//!
//! Calls arrive open-loop by default ([`Load::Open`]): at the profile's rate, however slowly
//! the service answers, as real traffic does (a closed loop of callers, [`Load::Closed`],
//! waits for each answer, and so offers less the more the service struggles: it hides
//! overload). The replay runs on tokio's paused clock, guards included ([`Clock::precise`](resilience_runtime::Clock::precise)):
//! a 15-minute profile takes seconds, and the same seed and profile give the same report
//! (apart from the wall time it took, and a retry's jitter, which is not seeded: the report
//! notes it).
//!
//! ```
//! use resilience_examples::drill::replay::{self, GuardFile, Profile, ReplayConfig};
//!
//! let profile = Profile::from_csv(
//!     "time,requests_per_second,p50_ms,p99_ms,error_rate\n0,200,20,60,0.01\n5,400,40,150,0.01\n",
//! )?;
//! let guards = GuardFile::from_toml(
//!     "mine",
//!     r#"
//!     [bulkhead.instances.orders]
//!     max_concurrent_calls = 10
//!     max_wait_duration = "100ms"
//!     [circuit_breaker.instances.orders]
//!     failure_rate_threshold = 50
//!     "#,
//! );
//! let report = replay::run(&ReplayConfig::new(vec![guards], profile), &mut |_| {})?;
//! for run in &report.runs {
//!     assert!(run.reconciles(), "every arrival ends in exactly one outcome");
//! }
//! print!("{}", report.table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod dependency;
mod layout;
pub mod profile;
mod report;
mod watch;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use resilience_runtime::{
    Aspect, BulkheadEvent, CircuitBreakerEvent, CircuitState, ConfigError, DocumentError, Plan,
    RateLimiterEvent, Rejected, RetryEvent, TimeLimiterEvent,
};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use dependency::Dependency;
use layout::{prepare, prepare_all, Prepared};
use watch::{Recorded, Watch};

use super::report::{Counts, Latencies, Outcome, Sample};
use super::rng::SplitMix64;

pub use profile::{Arrivals, Column, Profile, ProfileError, ProfileStep, LOOKBACK};
pub use report::{BreakerReplay, Opening, ReplayReport, ReplayRun};

/// A configuration file of guards to replay: its name in the report and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardFile {
    /// The layout's name in the report: the file's stem.
    pub name: String,
    /// Where it was read from, if from a file.
    pub path: Option<PathBuf>,
    /// The TOML text.
    pub text: String,
}

impl GuardFile {
    /// Reads `path`; its stem names the layout.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Read`] if the file cannot be read.
    pub fn read(path: impl AsRef<Path>) -> Result<GuardFile, ReplayError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| ReplayError::Read {
            path: path.to_owned(),
            error,
        })?;
        Ok(GuardFile {
            name: path
                .file_stem()
                .map_or_else(|| "guards".into(), |s| s.to_string_lossy().into_owned()),
            path: Some(path.to_owned()),
            text,
        })
    }

    /// A layout named `name` from TOML `text`.
    pub fn from_toml(name: impl Into<String>, text: impl Into<String>) -> GuardFile {
        GuardFile {
            name: name.into(),
            path: None,
            text: text.into(),
        }
    }
}

/// How the first file's guards are laid out besides as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// This project's default precedence (the bulkhead outermost); replayed only where the
    /// file's order of the handler's guards differs from it.
    DefaultOrder,
    /// The default precedence with the bulkhead's limit adaptive (the knee algorithm), started
    /// at the file's `max_concurrent_calls`, between 1 and ten times it; replayed only where
    /// the handler has a bulkhead.
    Adaptive,
    /// Resilience4j's Spring order, Retry(CircuitBreaker(RateLimiter(TimeLimiter(Bulkhead)))),
    /// with the breaker recording rejections as failures and the retry retrying them, as
    /// Resilience4j does by default.
    SpringOrder,
}

impl Variant {
    /// Every variant, in the order they are replayed.
    pub const ALL: [Variant; 3] = [
        Variant::DefaultOrder,
        Variant::Adaptive,
        Variant::SpringOrder,
    ];

    /// The suffix of the layout's name.
    pub const fn name(self) -> &'static str {
        match self {
            Variant::DefaultOrder => "default-order",
            Variant::Adaptive => "adaptive",
            Variant::SpringOrder => "spring-order",
        }
    }
}

/// How calls arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// At the profile's rate whatever happens to them (each step's rounded count, at uniformly
    /// random times within it): what real traffic does.
    Open,
    /// `callers` callers, each waiting for its call's answer, then pausing `callers / rate`
    /// (±50 %, seeded) before its next: with instant answers they offer the profile's rate, and
    /// less as answers slow down.
    Closed {
        /// The callers.
        callers: u32,
    },
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Load::Open => f.write_str("open loop (arrivals at the profile's rate)"),
            Load::Closed { callers } => write!(
                f,
                "closed loop ({callers} callers, each waiting for its answer: it offers less \
                 when the service is slow)"
            ),
        }
    }
}

/// What a replay runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayConfig {
    /// The configuration files, each replayed as written; the first also in each of
    /// `variants`.
    pub files: Vec<GuardFile>,
    /// The instance the handler's guards are named (`orders`); `None`: the one name each file
    /// configures (fault injection aside).
    pub instance: Option<String>,
    /// The traffic and the dependency.
    pub profile: Profile,
    /// How calls arrive.
    pub load: Load,
    /// The seed of every draw (arrivals, service times, errors).
    pub seed: u64,
    /// The layouts of the first file besides as written.
    pub variants: Vec<Variant>,
}

impl ReplayConfig {
    /// `files` against `profile`: open loop, seed 42, every variant.
    pub fn new(files: Vec<GuardFile>, profile: Profile) -> ReplayConfig {
        ReplayConfig {
            files,
            instance: None,
            profile,
            load: Load::Open,
            seed: 42,
            variants: Variant::ALL.to_vec(),
        }
    }
}

/// Why a replay could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayError {
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The profile was refused.
    Profile(ProfileError),
    /// A configuration file was refused.
    Config {
        /// The layout's name (the file's stem).
        file: String,
        /// Where and why.
        error: DocumentError,
    },
    /// The instance to replay is not clear.
    Instance {
        /// The layout's name (the file's stem).
        file: String,
        /// Why, and what to pass.
        reason: String,
    },
    /// A layout's configuration was refused.
    Guard(ConfigError),
    /// The tokio runtime could not start.
    Runtime(std::io::Error),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Read { path, error } => {
                write!(f, "cannot read {}: {error}", path.display())
            }
            ReplayError::Profile(e) => write!(f, "profile refused: {e}"),
            ReplayError::Config { file, error } => write!(f, "`{file}` refused: {error}"),
            ReplayError::Instance { file, reason } => write!(f, "`{file}`: {reason}"),
            ReplayError::Guard(e) => write!(f, "guard configuration refused: {e}"),
            ReplayError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
        }
    }
}

impl std::error::Error for ReplayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReplayError::Read { error, .. } | ReplayError::Runtime(error) => Some(error),
            ReplayError::Profile(e) => Some(e),
            ReplayError::Config { error, .. } => Some(error),
            ReplayError::Guard(e) => Some(e),
            ReplayError::Instance { .. } => None,
        }
    }
}

impl From<ProfileError> for ReplayError {
    fn from(e: ProfileError) -> Self {
        ReplayError::Profile(e)
    }
}

impl From<ConfigError> for ReplayError {
    fn from(e: ConfigError) -> Self {
        ReplayError::Guard(e)
    }
}

/// Replays `config`'s profile against each layout in turn, calling `finished` after each.
///
/// # Errors
///
/// A [`ReplayError`] if a file, its instance or a layout's configuration is refused (before
/// anything runs), or the runtime cannot start.
pub fn run(
    config: &ReplayConfig,
    finished: &mut dyn FnMut(&ReplayRun),
) -> Result<ReplayReport, ReplayError> {
    let (layouts, notes) = prepare_all(config)?;
    let mut runs = Vec::with_capacity(layouts.len());
    for layout in &layouts {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .map_err(ReplayError::Runtime)?;
        let wall = std::time::Instant::now();
        // Prepared again inside the paused runtime: the registry's clock takes its origin
        // from the runtime's start, so its readings (and the guards' decisions on them) are
        // the same from run to run.
        let file = &config.files[layout.file];
        let layout = runtime.block_on(async {
            prepare(
                file,
                layout.file,
                config.instance.as_deref(),
                layout.variant,
            )
        })?;
        let mut run = runtime.block_on(replay_layout(&layout, config));
        run.wall = wall.elapsed();
        finished(&run);
        runs.push(run);
    }
    Ok(ReplayReport {
        profile: config.profile.clone(),
        load: config.load,
        seed: config.seed,
        notes,
        runs,
    })
}

/// A call's error: a guard refused it, or the dependency failed it.
#[derive(Clone, Debug, PartialEq)]
enum CallError {
    Rejected(Rejected),
    Dependency,
}

impl From<Rejected> for CallError {
    fn from(rejected: Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}

fn outcome_of(result: &Result<(), CallError>) -> Outcome {
    match result {
        Ok(()) => Outcome::Succeeded,
        Err(CallError::Dependency) => Outcome::Failed,
        Err(CallError::Rejected(Rejected::BulkheadFull { .. })) => Outcome::RejectedByBulkhead,
        Err(CallError::Rejected(Rejected::CallNotPermitted { .. })) => Outcome::NotPermitted,
        Err(CallError::Rejected(Rejected::RequestNotPermitted { .. })) => Outcome::RateLimited,
        Err(CallError::Rejected(Rejected::TimedOut { .. })) => Outcome::TimedOut,
        Err(CallError::Rejected(_)) => Outcome::OtherRejection,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the calls ended in, as they end.
#[derive(Default)]
struct Recorder {
    offered: AtomicU64,
    ended: AtomicU64,
    counts: [AtomicU64; 7],
    latencies: Mutex<Latencies>,
    all_ended: Notify,
}

impl Recorder {
    fn record(&self, outcome: Outcome, latency: Duration) {
        self.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
        lock(&self.latencies).record(outcome, latency);
        self.ended.fetch_add(1, Ordering::Relaxed);
        self.all_ended.notify_one();
    }

    fn snapshot(&self) -> Counts {
        let n = |o: Outcome| self.counts[o as usize].load(Ordering::Relaxed);
        Counts {
            offered: self.offered.load(Ordering::Relaxed),
            succeeded: n(Outcome::Succeeded),
            failed: n(Outcome::Failed),
            rejected_bulkhead: n(Outcome::RejectedByBulkhead),
            not_permitted: n(Outcome::NotPermitted),
            rate_limited: n(Outcome::RateLimited),
            timed_out: n(Outcome::TimedOut),
            other_rejected: n(Outcome::OtherRejection),
        }
    }
}

/// Everything one call needs, shared by the calls of a layout.
struct Shared {
    plan: Arc<Plan>,
    dependency: Arc<Dependency>,
    recorder: Recorder,
}

impl Shared {
    /// Counts a call offered: by the load, before the call's task runs, so that waiting for
    /// every offered call to end cannot miss one not yet started.
    fn offer(&self) {
        self.recorder.offered.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes request `id`, [offered](Self::offer) already, and records how it ended.
    async fn call(&self, id: u64) {
        let sent = Instant::now();
        let attempts = AtomicU32::new(0);
        let result = self
            .plan
            .call_async(|| {
                let attempt = attempts.fetch_add(1, Ordering::Relaxed);
                self.dependency.serve(id, attempt)
            })
            .await;
        self.recorder.record(outcome_of(&result), sent.elapsed());
    }
}

async fn replay_layout(layout: &Prepared, config: &ReplayConfig) -> ReplayRun {
    let profile = &config.profile;
    let started = Instant::now();
    let workers = profile.steps()[0]
        .workers
        .map(|w| Arc::new(Semaphore::new(w as usize)));
    let dependency = Arc::new(Dependency {
        profile: profile.clone(),
        seed: config.seed,
        started,
        workers,
        in_flight: AtomicU64::new(0),
        served: AtomicU64::new(0),
        answered: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    });
    let follow = tokio::spawn(Arc::clone(&dependency).follow_workers());
    let shared = Arc::new(Shared {
        plan: Arc::clone(&layout.plan),
        dependency: Arc::clone(&dependency),
        recorder: Recorder::default(),
    });
    let registry = &layout.registry;
    let name = layout.instance.as_str();

    // The breaker's openings, and at the first, what its window held.
    let breaker = layout
        .has(Aspect::CircuitBreaker)
        .then(|| registry.circuit_breaker(name));
    let breaker_config = registry.circuit_breaker_config(name);
    let records_rejections = breaker.is_some() && breaker_config.record_rejections();
    let watch = Arc::new(Mutex::new(Watch::new(breaker_config.sliding_window())));
    let bulkhead = layout
        .has(Aspect::Bulkhead)
        .then(|| registry.bulkhead(name));
    let mut subscriptions: Vec<Box<dyn FnOnce() -> bool>> = Vec::new();
    if let Some(breaker) = &breaker {
        let counted = |inner: Aspect| layout.inside(inner, Aspect::CircuitBreaker);
        if let Some(bulkhead) = bulkhead
            .as_ref()
            .filter(|_| records_rejections && counted(Aspect::Bulkhead))
        {
            let watch = Arc::clone(&watch);
            let id = bulkhead.subscribe(move |event| {
                if let BulkheadEvent::CallRejected { .. } = event {
                    lock(&watch).refused(started.elapsed(), Recorded::Bulkhead);
                }
            });
            let bulkhead = Arc::clone(bulkhead);
            subscriptions.push(Box::new(move || bulkhead.unsubscribe(id)));
        }
        if records_rejections && counted(Aspect::RateLimiter) {
            let limiter = registry.rate_limiter(name);
            let watch = Arc::clone(&watch);
            let id = limiter.subscribe(move |event| {
                if let RateLimiterEvent::FailedAcquire { .. } = event {
                    lock(&watch).refused(started.elapsed(), Recorded::RateLimiter);
                }
            });
            subscriptions.push(Box::new(move || limiter.unsubscribe(id)));
        }
        if counted(Aspect::TimeLimiter) {
            let time_limiter = registry.time_limiter(name);
            let watch = Arc::clone(&watch);
            let id = time_limiter.subscribe(move |event| {
                if let TimeLimiterEvent::Timeout { .. } = event {
                    lock(&watch).refused(started.elapsed(), Recorded::TimeOut);
                }
            });
            subscriptions.push(Box::new(move || time_limiter.unsubscribe(id)));
        }
        let watch = Arc::clone(&watch);
        let id = breaker.subscribe(move |event| {
            let now = started.elapsed();
            let mut w = lock(&watch);
            match event {
                CircuitBreakerEvent::Success { .. } => w.recorded(now, false),
                CircuitBreakerEvent::Error { .. } => w.recorded(now, true),
                CircuitBreakerEvent::FailureRateExceeded { rate, .. } => {
                    w.failure_rate = Some(*rate)
                }
                CircuitBreakerEvent::SlowCallRateExceeded { rate, .. } => {
                    w.slow_call_rate = Some(*rate);
                }
                CircuitBreakerEvent::StateTransition { from, to, .. } => {
                    w.transition(now, *from, *to)
                }
                _ => {}
            }
        });
        let breaker = Arc::clone(breaker);
        subscriptions.push(Box::new(move || breaker.unsubscribe(id)));
    }
    let retries = Arc::new(AtomicU64::new(0));
    let retry = layout.has(Aspect::Retry).then(|| registry.retry(name));
    let retry_subscription = retry.as_ref().map(|retry| {
        let retries = Arc::clone(&retries);
        retry.subscribe(move |event| {
            if let RetryEvent::Retry { .. } = event {
                retries.fetch_add(1, Ordering::Relaxed);
            }
        })
    });

    // The timeline, about 600 samples of the profile (at most ten a second).
    let every = (profile.duration() / 600).max(Duration::from_millis(100));
    let timeline = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let limit_of = |bulkhead: &Option<Arc<resilience_runtime::Bulkhead>>| {
        bulkhead
            .as_ref()
            .map_or(0, |b| b.max_allowed_concurrent_calls())
    };
    let sample = {
        let shared = Arc::clone(&shared);
        let breaker = breaker.clone();
        let bulkhead = bulkhead.clone();
        move || {
            let dependency = &shared.dependency;
            let elapsed = started.elapsed();
            (
                Sample {
                    elapsed,
                    counts: shared.recorder.snapshot(),
                    breaker: breaker.as_ref().map_or(CircuitState::Closed, |b| b.state()),
                    in_flight: dependency.in_flight.load(Ordering::Relaxed),
                    limit: limit_of(&bulkhead),
                },
                (
                    elapsed,
                    dependency.answered.load(Ordering::Relaxed),
                    dependency.failed.load(Ordering::Relaxed),
                ),
            )
        }
    };
    let sampler = {
        let timeline = Arc::clone(&timeline);
        let sample = sample.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                let (reading, answers) = sample();
                let mut timeline = lock(&timeline);
                timeline.0.push(reading);
                timeline.1.push(answers);
            }
        })
    };
    let limit_start = limit_of(&bulkhead);

    match config.load {
        Load::Open => {
            for (id, at) in profile.arrivals(config.seed).enumerate() {
                tokio::time::sleep_until(started + at).await;
                shared.offer();
                let shared = Arc::clone(&shared);
                tokio::spawn(async move { shared.call(id as u64).await });
            }
        }
        Load::Closed { callers } => {
            let mut tasks = Vec::with_capacity(callers as usize);
            for caller in 0..callers {
                let shared = Arc::clone(&shared);
                let profile = profile.clone();
                let seed = config.seed;
                tasks.push(tokio::spawn(async move {
                    // The callers' draws apart from the requests' (`(id << 8) | attempt`).
                    let mut rng = SplitMix64::for_stream(seed, (1 << 63) | u64::from(caller));
                    let mut seq = 0u64;
                    loop {
                        let now = started.elapsed();
                        if now >= profile.duration() {
                            break;
                        }
                        let rate = profile.step_at(now).rate;
                        let next_step = profile
                            .steps()
                            .iter()
                            .find(|s| s.at > now)
                            .map_or(profile.duration(), |s| s.at);
                        // A pause ends at the next step at the latest, where it is drawn again
                        // at that step's rate: a low rate must not hide a surge after it.
                        let pause = if rate > 0.0 {
                            Duration::try_from_secs_f64(
                                f64::from(callers) / rate * rng.uniform(0.5, 1.5),
                            )
                            .unwrap_or(Duration::MAX)
                        } else {
                            Duration::MAX
                        };
                        let until = (now.saturating_add(pause)).min(next_step);
                        tokio::time::sleep_until(started + until).await;
                        if until < now.saturating_add(pause) {
                            continue;
                        }
                        if started.elapsed() >= profile.duration() {
                            break;
                        }
                        shared.offer();
                        shared.call((u64::from(caller) << 32) | seq).await;
                        seq += 1;
                    }
                }));
            }
            for task in tasks {
                task.await.expect("a caller does not panic");
            }
        }
    }
    // Every call offered ends: wait for the last.
    loop {
        let notified = shared.recorder.all_ended.notified();
        if shared.recorder.ended.load(Ordering::Relaxed)
            >= shared.recorder.offered.load(Ordering::Relaxed)
        {
            break;
        }
        notified.await;
    }
    let elapsed = started.elapsed();
    sampler.abort();
    follow.abort();
    for unsubscribe in subscriptions {
        let _ = unsubscribe();
    }
    if let (Some(retry), Some(id)) = (&retry, retry_subscription) {
        retry.unsubscribe(id);
    }
    let (mut timeline, mut answers) = std::mem::take(&mut *lock(&timeline));
    let (reading, answered) = sample();
    timeline.push(reading);
    answers.push(answered);
    let mut watch = lock(&watch);
    if let Some(since) = watch.open_since.take() {
        watch.open_time += elapsed.saturating_sub(since);
    }
    let latencies = std::mem::take(&mut *lock(&shared.recorder.latencies));
    let limits = bulkhead
        .as_ref()
        // An adaptive limit, the variant's or the file's own.
        .filter(|_| registry.bulkhead_config(name).adaptive().is_some())
        .map(|_| {
            let limits: Vec<u32> = timeline.iter().map(|s| s.limit).collect();
            (
                limit_start,
                limits.iter().copied().min().unwrap_or(limit_start),
                limits.iter().copied().max().unwrap_or(limit_start),
                limits.last().copied().unwrap_or(limit_start),
            )
        });
    let expected = match config.load {
        Load::Open => Some(profile.offered().round() as u64),
        Load::Closed { .. } => None,
    };
    ReplayRun::new(
        expected,
        layout.name.clone(),
        layout.description.clone(),
        layout.aspects.clone(),
        shared.recorder.snapshot(),
        latencies,
        breaker.as_ref().map(|_| BreakerReplay {
            first_open: watch.first_open,
            openings: watch.openings,
            open_time: watch.open_time,
            opening: watch.opening,
            records_rejections,
            window: breaker_config.sliding_window(),
        }),
        report::Work {
            served: dependency.served.load(Ordering::Relaxed),
            failed: dependency.failed.load(Ordering::Relaxed),
            retries: retries.load(Ordering::Relaxed),
            bulkhead_rejections: bulkhead.as_ref().map(|b| b.metrics().rejected_calls()),
        },
        limits,
        profile.duration(),
        elapsed,
        timeline,
        answers,
    )
}

#[cfg(test)]
mod tests;
