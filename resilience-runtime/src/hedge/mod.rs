//! The hedge: a wrapper that, when a call is slow to answer, starts another attempt beside it
//! and ends with whichever answers first (Polly's hedging, Resilience4j's `Hedge`, tower's
//! `hedge`), for async calls.
//!
//! [`Hedge`] is the instance, [`HedgeConfig`] its configuration, [`HedgeMetrics`] a snapshot
//! of its counters and [`HedgeEvent`] what it tells subscribers. It wraps the rest of a plan
//! (the guards after it in precedence order, then the call): with the default precedence each
//! attempt enters the circuit breaker and runs under the time limiter on its own, while the
//! bulkhead and the rate limiter outside admitted the call once. The attempts overlap: each
//! runs in a lane of its own (its own permits of the guards inside the hedge, its own future),
//! and the first acceptable outcome (a success, or a failure the hedge does not hedge on) ends
//! the call; the others are dropped, their permits released recording nothing, their futures
//! cancelled at their next await.
//!
//! A thread cannot run two attempts at once: a sync call passes through a hedge, counted as a
//! primary outcome (`#[hedge]` on a sync function is a compile error that says so).

mod config;
mod events;
mod latencies;

#[cfg(test)]
mod tests;

pub use config::{HedgeConfig, HedgeConfigBuilder};
pub use events::HedgeEvent;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::{deadline_after, Clock, Reading};
use crate::name::Name;
use crate::retry::budget::Budgeted;
use crate::subscribers::{Subscribers, SubscriptionId};
use crate::wrapper::{Attempted, Ended, Next, Run, Settle, Wrap, WrapCall};
use latencies::Latencies;

/// A hedge: after [`delay`](HedgeConfig::delay) without an answer, starts another attempt of
/// the call beside the running ones, up to [`max_hedged_attempts`](HedgeConfig::max_hedged_attempts)
/// more, and ends with the first acceptable outcome.
///
/// A hedge runs as part of a [`Plan`](crate::Plan) (or a function annotated `#[hedge]`): get
/// it from a [`Registry`](crate::Registry) with [`hedge`](crate::Registry::hedge), configure it
/// with [`configure_hedge`](crate::Registry::configure_hedge).
///
/// Which outcomes start the next attempt at once rather than end the call: a failure (for the
/// macros, an `Err` that `hedge_on` accepts, every `Err` without it) and a time-out of a time
/// limiter inside the hedge. A refusal by a guard inside it (an open breaker) ends the call
/// only when no other attempt is running, and is then counted as the call's failure (the
/// hedge's four outcomes have no other place for it; a breaker outside still does not record
/// it). When every attempt fails, the call ends with the last one's outcome.
///
/// A budget counts every entry into the hedge as a call: each attempt of a retry outside it
/// is one. A sync call, which cannot hedge, counts nothing.
///
/// Cost: a call whose first attempt answers at its first poll takes no lock and allocates
/// nothing; it counts itself (one atomic add), and, with a budget, reads the clock once to
/// count itself against it. A call that waits arms one timer (boxed).
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Guard, HedgeConfig, Registry, Rejected};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?.block_on(async {
/// let registry = Registry::new();
/// registry.configure_hedge("search", HedgeConfig::builder()
///     .delay(Duration::from_millis(50))
///     .build()?)?;
/// let plan = registry.plan(&[Guard::hedge("search")])?;
///
/// let attempts = std::sync::atomic::AtomicU32::new(0);
/// let hits: Result<&str, Rejected> = plan.run_async(|| async {
///     // The first attempt is stuck; the second, started 50 ms later, answers.
///     if attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
///         tokio::time::sleep(Duration::from_secs(10)).await;
///     }
///     "hits"
/// }, |_| resilience_runtime::CallOutcome::Success).await;
/// assert_eq!(hits, Ok("hits"));
/// assert_eq!(registry.hedge("search").metrics().secondary_success_count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Hedge {
    name: Name,
    id: u64,
    config: ArcSwap<HedgeConfig>,
    clock: Clock,
    subscribers: Subscribers<HedgeEvent>,
    primary_success: AtomicU64,
    secondary_success: AtomicU64,
    primary_failure: AtomicU64,
    secondary_failure: AtomicU64,
    hedged: AtomicU64,
    over_budget: AtomicU64,
    budget: Budgeted,
    /// The recent latencies of winning attempts, for a percentile delay.
    latencies: Latencies,
}

impl Hedge {
    /// A hedge named `name`, configured by `config`, on the system clock.
    pub fn new(name: impl Into<Name>, config: HedgeConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A hedge whose delays follow `clock`, such as a [`ManualClock`](crate::ManualClock).
    pub fn with_clock(name: impl Into<Name>, config: HedgeConfig, clock: Clock) -> Self {
        Hedge {
            name: name.into(),
            id: crate::next_instance_id(),
            budget: Budgeted::new(config.budget(), &clock),
            latencies: Latencies::new(Duration::from_secs(10)),
            config: ArcSwap::from_pointee(config),
            clock,
            subscribers: Subscribers::new(),
            primary_success: AtomicU64::new(0),
            secondary_success: AtomicU64::new(0),
            primary_failure: AtomicU64::new(0),
            secondary_failure: AtomicU64::new(0),
            hedged: AtomicU64::new(0),
            over_budget: AtomicU64::new(0),
        }
    }

    /// The instance name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The process-wide unique id of this instance.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The configuration in force (a copy: [`reconfigure`](Self::reconfigure) may change it).
    pub fn config(&self) -> HedgeConfig {
        HedgeConfig::clone(&self.config.load())
    }

    /// Changes the configuration in place: the instance, its subscribers and its counters
    /// stay. A call in progress keeps the number of attempts it read when it first waited or
    /// failed, and reads the delay each time it arms its next attempt. A budget keeps what its
    /// window has seen while the window stays the same.
    pub fn reconfigure(&self, config: HedgeConfig) {
        self.budget.reconfigure(config.budget());
        self.config.store(Arc::new(config));
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> HedgeMetrics {
        HedgeMetrics {
            primary_success: self.primary_success.load(Ordering::Relaxed),
            secondary_success: self.secondary_success.load(Ordering::Relaxed),
            primary_failure: self.primary_failure.load(Ordering::Relaxed),
            secondary_failure: self.secondary_failure.load(Ordering::Relaxed),
            hedged: self.hedged.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
            delay: self.delay(),
        }
    }

    /// Calls `callback` with every event of this hedge, on the thread of the call. A callback
    /// that panics does not keep the event from the others; the panic is then resumed on that
    /// thread (unless it is already panicking).
    pub fn subscribe(
        &self,
        callback: impl Fn(&HedgeEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: crate::subscribers::Interest,
        callback: impl Fn(&HedgeEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.subscribers.remove(id)
    }

    /// The delay before the next attempt: the percentile of recent latencies the configuration
    /// asks for, once there are enough of them; its fixed delay otherwise.
    fn delay(&self) -> Duration {
        let config = self.config.load();
        config
            .delay_percentile()
            .and_then(|p| {
                let now = self.clock.read(Reading::Precise);
                self.latencies
                    .percentile(now, p, HedgeConfig::MIN_LATENCIES)
            })
            .unwrap_or_else(|| config.delay())
    }

    /// Counts the latency of a winning attempt that started at reading `started`.
    #[cold]
    fn learn(&self, started: u64) {
        let now = self.clock.read(Reading::Precise);
        self.latencies.record(now, now.saturating_sub(started));
    }

    fn emit(&self, event: impl FnOnce() -> HedgeEvent) {
        if self.subscribers.any() {
            self.subscribers.deliver([event()]);
        }
    }

    /// The call ended with attempt `attempt`'s outcome.
    fn ended(&self, failed: bool, attempt: u32) {
        let name = || self.name.clone();
        match (failed, attempt) {
            (false, 1) => {
                self.primary_success.fetch_add(1, Ordering::Relaxed);
                if self.subscribers.per_call() {
                    self.subscribers
                        .deliver([HedgeEvent::PrimarySuccess { name: name() }]);
                }
            }
            (true, 1) => {
                self.primary_failure.fetch_add(1, Ordering::Relaxed);
                self.emit(|| HedgeEvent::PrimaryFailure { name: name() });
            }
            (false, attempt) => {
                self.secondary_success.fetch_add(1, Ordering::Relaxed);
                self.emit(|| HedgeEvent::SecondarySuccess {
                    name: name(),
                    attempt,
                });
            }
            (true, attempt) => {
                self.secondary_failure.fetch_add(1, Ordering::Relaxed);
                self.emit(|| HedgeEvent::SecondaryFailure {
                    name: name(),
                    attempt,
                });
            }
        }
    }
}

impl fmt::Debug for Hedge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("name", &self.name)
            .field("config", &*self.config.load())
            .finish()
    }
}

/// A snapshot of a hedge's counters, from [`Hedge::metrics`]: Resilience4j's four outcomes
/// (each call that ends through the hedge counts once, in one of them), the extra attempts
/// made, and those the budget refused. They count since the hedge was created; reconfiguring
/// it does not reset them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HedgeMetrics {
    primary_success: u64,
    secondary_success: u64,
    primary_failure: u64,
    secondary_failure: u64,
    hedged: u64,
    over_budget: u64,
    delay: Duration,
}

impl HedgeMetrics {
    /// Calls that ended with their first attempt's success.
    pub fn primary_success_count(&self) -> u64 {
        self.primary_success
    }

    /// Calls that ended with the success of an extra attempt.
    pub fn secondary_success_count(&self) -> u64 {
        self.secondary_success
    }

    /// Calls that ended with their first attempt's failure.
    pub fn primary_failure_count(&self) -> u64 {
        self.primary_failure
    }

    /// Calls that ended with the failure of an extra attempt.
    pub fn secondary_failure_count(&self) -> u64 {
        self.secondary_failure
    }

    /// Extra attempts started.
    pub fn number_of_hedged_attempts(&self) -> u64 {
        self.hedged
    }

    /// Extra attempts that were due but not made, the budget having none left.
    pub fn number_of_hedges_over_budget(&self) -> u64 {
        self.over_budget
    }

    /// The delay in force before an extra attempt (the percentile of recent latencies, with a
    /// percentile delay that has enough of them).
    pub fn current_hedge_delay(&self) -> Duration {
        self.delay
    }
}

type Timer<'t> = Pin<Box<dyn Future<Output = ()> + Send + 't>>;

// ----- the wrapper seam -----

/// One call through a hedge: how many attempts it started, and the timer of the next.
pub(crate) struct Hedging<'h> {
    hedge: &'h Hedge,
    /// The attempts started (1: the first alone).
    started: u32,
    /// The most attempts the call may start, read when it first waits.
    most: u32,
    timer: Option<Timer<'h>>,
    phase: Phase,
    blocking: bool,
    /// The reading of the first attempt's first wait, with a percentile delay.
    first_wait: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No attempt has waited yet: no timer armed.
    Idle,
    /// The timer of the next attempt is armed.
    Armed,
    /// No more attempts start (all made, or over budget).
    Done,
}

impl Wrap for Hedge {
    type Call<'w> = Hedging<'w>;

    /// A sync call (`blocking`) makes one attempt: a thread cannot run two at once, and it
    /// counts nothing against the budget (it can spend none of it).
    #[inline]
    fn begin(&self, blocking: bool) -> Hedging<'_> {
        if !blocking && self.budget.present() {
            self.budget.deposit();
        }
        Hedging {
            hedge: self,
            started: 1,
            most: 1,
            timer: None,
            phase: Phase::Idle,
            blocking,
            first_wait: None,
        }
    }

    fn overlaps(&self) -> bool {
        true
    }
}

impl Hedging<'_> {
    /// Whether one more attempt may start, as far as the call's own count goes: the most it
    /// may make is read once, when it first asks. Once `Done`, it stays done.
    fn may_start(&mut self) -> bool {
        match self.phase {
            Phase::Done => return false,
            Phase::Idle => self.most = 1 + self.hedge.config.load().max_hedged_attempts(),
            Phase::Armed => {}
        }
        if self.blocking || self.started >= self.most {
            self.phase = Phase::Done;
            self.timer = None;
            return false;
        }
        true
    }

    /// Arms the timer of the next attempt, `delay` from now, if one may start.
    #[cold]
    fn arm(&mut self) {
        if !self.may_start() {
            return;
        }
        let hedge = self.hedge;
        let delay = hedge.delay();
        let deadline = deadline_after(hedge.clock.read(Reading::Precise), delay);
        self.timer = (deadline != u64::MAX)
            .then(|| Box::pin(hedge.clock.sleep_until(Reading::Precise, deadline)) as Timer<'_>);
        self.phase = Phase::Armed;
    }

    /// Starts one more attempt if the call may: within its number and the budget. A call
    /// the budget refused once asks it no more.
    #[cold]
    fn try_start(&mut self) -> bool {
        if !self.may_start() {
            return false;
        }
        let hedge = self.hedge;
        let attempt = self.started + 1;
        if !hedge.budget.try_spend() {
            self.phase = Phase::Done;
            self.timer = None;
            hedge.over_budget.fetch_add(1, Ordering::Relaxed);
            hedge.emit(|| HedgeEvent::OverBudget {
                name: hedge.name.clone(),
                attempt,
            });
            return false;
        }
        self.started = attempt;
        hedge.hedged.fetch_add(1, Ordering::Relaxed);
        hedge.emit(|| HedgeEvent::Hedged {
            name: hedge.name.clone(),
            attempt,
        });
        self.arm();
        true
    }

    #[cold]
    fn settle_slow(&mut self, ended: Ended, run: Run, others: usize, repeatable: bool) -> Settle {
        let attempt = run.attempt;
        let (acceptable, hedged_on) = match ended.attempted {
            Attempted::Succeeded => (true, false),
            Attempted::Failed | Attempted::NotRetried => (!ended.hedge_on, ended.hedge_on),
            Attempted::Refused { failure: true } => (false, true),
            Attempted::Refused { failure: false } => (false, false),
        };
        if !acceptable {
            if hedged_on && repeatable && self.try_start() {
                return Settle::Another;
            }
            if others > 0 {
                return Settle::Wait;
            }
        }
        if !ended.failed {
            if let Some(started) = run.started {
                self.hedge.learn(started);
            }
        }
        self.hedge.ended(ended.failed, attempt);
        Settle::Ends
    }
}

impl<'h> WrapCall<'h> for Hedging<'h> {
    /// A run that ended alone (the first attempt at its first poll, or a sync call's): a
    /// success ends the call, a failure it hedges on starts the next attempt at once.
    #[inline]
    fn after(&mut self, ended: Ended, repeatable: bool) -> Next {
        let run = Run {
            attempt: self.started,
            started: self.first_wait,
        };
        match self.settle(ended, run, 0, repeatable) {
            Settle::Another => Next::RetryAfter(Duration::ZERO),
            Settle::Ends | Settle::Wait => Next::Stop,
        }
    }

    #[inline]
    fn settle(&mut self, ended: Ended, run: Run, others: usize, repeatable: bool) -> Settle {
        if ended.attempted == Attempted::Succeeded
            && run
                == (Run {
                    attempt: 1,
                    started: None,
                })
            && !self.hedge.subscribers.per_call()
        {
            self.hedge.primary_success.fetch_add(1, Ordering::Relaxed);
            return Settle::Ends;
        }
        self.settle_slow(ended, run, others, repeatable)
    }

    /// The reading a run starts at, when the delay is a percentile of the runs' latencies.
    fn run_starts(&self) -> Option<u64> {
        let hedge = self.hedge;
        hedge
            .config
            .load()
            .delay_percentile()
            .map(|_| hedge.clock.read(Reading::Precise))
    }

    fn first_wait(&self) -> Option<u64> {
        self.first_wait
    }

    fn poll_another(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.phase == Phase::Idle {
            self.first_wait = self.run_starts();
            self.arm();
        }
        if self.phase != Phase::Armed {
            return Poll::Pending;
        }
        let Some(timer) = self.timer.as_mut() else {
            return Poll::Pending;
        };
        std::task::ready!(timer.as_mut().poll(cx));
        self.timer = None;
        if self.try_start() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
