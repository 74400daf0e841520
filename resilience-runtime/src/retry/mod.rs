//! The retry: a wrapper that makes a failed call again (Resilience4j's `Retry`).
//!
//! [`Retry`] is the instance, [`RetryConfig`] its configuration, [`RetryMetrics`] a snapshot
//! of its counters and [`RetryEvent`] what it tells subscribers. A retry is not a gate: it
//! holds nothing while the call runs. It wraps the rest of a plan (the guards after it in
//! precedence order, then the call), and runs that again after a failure: with the default
//! precedence each attempt enters the circuit breaker again and is bounded by the time
//! limiter, while the bulkhead and the rate limiter admitted the call once, outside the
//! retry, so a retry never adds to the load they shed.
//!
//! Waits between attempts read the retry's clock: a sync call sleeps its thread, an async
//! call sleeps on the timer (tokio's inside a runtime, so paused test time applies), and a
//! [`ManualClock`](crate::ManualClock) drives both in tests. Dropping an async call while it
//! waits ends it: nothing more is counted.

pub(crate) mod budget;
mod config;
mod events;
mod metrics;

#[cfg(test)]
mod tests;

pub use budget::RetryBudget;
pub use config::{RetryConfig, RetryConfigBuilder};
pub use events::RetryEvent;
pub use metrics::RetryMetrics;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::blocking::Blocking;
use crate::clock::{deadline_after, Clock, Reading};
use crate::name::Name;
use crate::subscribers::{Subscribers, SubscriptionId};
use crate::wrapper::{Attempted, Ended, Next, Sleep, Wrap, WrapCall};

/// A retry: makes a call again, up to [`max_attempts`](RetryConfig::max_attempts) times in
/// all, after a failure it retries, waiting between attempts as its [`RetryConfig`] says.
///
/// A retry runs as part of a [`Plan`](crate::Plan) (or a function annotated `#[retry]`):
/// get it from a [`Registry`](crate::Registry) with
/// [`retry`](crate::Registry::retry), configure it with
/// [`configure_retry`](crate::Registry::configure_retry).
///
/// Cost: a call whose first attempt succeeds reads no clock, takes no lock, allocates
/// nothing; it counts itself (one atomic add). The configuration is read only after a failure.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Guard, Registry, Rejected, RetryConfig};
///
/// #[derive(Debug, PartialEq)]
/// enum InvError { Busy, Rejected(Rejected) }
/// impl From<Rejected> for InvError { fn from(r: Rejected) -> Self { InvError::Rejected(r) } }
///
/// let registry = Registry::new();
/// registry.configure_retry("inventory", RetryConfig::builder()
///     .max_attempts(3)
///     .wait_duration(Duration::from_millis(1))
///     .build()?)?;
/// let plan = registry.plan(&[Guard::retry("inventory")])?;
///
/// let mut attempts = 0;
/// let held: Result<&str, InvError> = plan.call(|| {
///     attempts += 1;
///     if attempts < 3 { Err(InvError::Busy) } else { Ok("hold-1") }
/// });
/// assert_eq!(held, Ok("hold-1"));
/// assert_eq!(attempts, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Retry {
    name: Name,
    id: u64,
    config: ArcSwap<RetryConfig>,
    clock: Clock,
    subscribers: Subscribers<RetryEvent>,
    successful_without_retry: AtomicU64,
    successful_with_retry: AtomicU64,
    failed_without_retry: AtomicU64,
    failed_with_retry: AtomicU64,
    over_budget: AtomicU64,
    budget: budget::Budgeted,
}

impl Retry {
    /// A retry named `name`, configured by `config`, on the system clock.
    pub fn new(name: impl Into<Name>, config: RetryConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A retry whose waits follow `clock`, such as a [`ManualClock`](crate::ManualClock).
    pub fn with_clock(name: impl Into<Name>, config: RetryConfig, clock: Clock) -> Self {
        Retry {
            budget: budget::Budgeted::new(config.budget(), &clock),
            over_budget: AtomicU64::new(0),
            name: name.into(),
            id: crate::next_instance_id(),
            config: ArcSwap::from_pointee(config),
            clock,
            subscribers: Subscribers::new(),
            successful_without_retry: AtomicU64::new(0),
            successful_with_retry: AtomicU64::new(0),
            failed_without_retry: AtomicU64::new(0),
            failed_with_retry: AtomicU64::new(0),
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
    pub fn config(&self) -> RetryConfig {
        RetryConfig::clone(&self.config.load())
    }

    /// Changes the configuration in place: the instance, its subscribers and its counters
    /// stay. A call in progress reads the configuration in force at each failure (whether to
    /// go on, and the wait before its next attempt), so it follows the new one from then on.
    ///
    /// A budget keeps what its window has seen while the window stays the same (a new ratio
    /// or floor applies to the counts so far); a new window starts empty.
    pub fn reconfigure(&self, config: RetryConfig) {
        self.budget.reconfigure(config.budget());
        self.config.store(Arc::new(config));
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> RetryMetrics {
        RetryMetrics {
            successful_without_retry: self.successful_without_retry.load(Ordering::Relaxed),
            successful_with_retry: self.successful_with_retry.load(Ordering::Relaxed),
            failed_without_retry: self.failed_without_retry.load(Ordering::Relaxed),
            failed_with_retry: self.failed_with_retry.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
        }
    }

    /// Calls `callback` with every event of this retry, on the thread of the call. A callback
    /// that panics does not keep the event from the others; the panic is then resumed on that
    /// thread (unless it is already panicking).
    pub fn subscribe(
        &self,
        callback: impl Fn(&RetryEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: crate::subscribers::Interest,
        callback: impl Fn(&RetryEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.subscribers.remove(id)
    }

    /// Blocks the thread for `wait` on this retry's clock (through `block_in_place` on a
    /// multi-thread tokio runtime).
    pub(crate) fn sleep_blocking(&self, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        let deadline = deadline_after(self.clock.read(Reading::Precise), wait);
        Blocking::here().run(|| self.clock.sleep_until_blocking(Reading::Precise, deadline));
    }

    /// Waits `wait` on this retry's clock, asynchronously.
    ///
    /// The sleep is boxed, as the time limiter's timer is: its state (224 bytes unboxed, a
    /// tokio `Sleep` or a manual clock's among them) would otherwise be laid out in the future
    /// of every call through a retry, and moved with it, where only a retried call waits.
    pub(crate) fn sleep(&self, wait: Duration) -> Sleep<'_> {
        if wait.is_zero() {
            return Sleep(None);
        }
        let deadline = deadline_after(self.clock.read(Reading::Precise), wait);
        Sleep(Some(Box::pin(
            self.clock.sleep_until(Reading::Precise, deadline),
        )))
    }

    fn emit(&self, event: impl FnOnce() -> RetryEvent) {
        if self.subscribers.any() {
            self.subscribers.deliver([event()]);
        }
    }
}

impl fmt::Debug for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("name", &self.name)
            .field("config", &*self.config.load())
            .finish()
    }
}

/// The attempts of one call through a [`Retry`]: which one is running, and what to do after
/// it (counted in the retry's metrics when the call ends).
pub(crate) struct Attempts<'r> {
    retry: &'r Retry,
    /// The number of the attempt running (1 for the first call).
    attempt: u32,
    /// Whether the waits between attempts block the thread.
    blocking: bool,
}

impl Attempts<'_> {
    /// [`WrapCall::after`] past a first attempt that succeeded.
    #[cold]
    fn after_slow(&mut self, ended: Ended, repeatable: bool) -> Next {
        let attempted = ended.attempted;
        let retry = self.retry;
        let attempts = self.attempt;
        let retried = attempts > 1;
        let config = retry.config.load();
        let retryable = match attempted {
            Attempted::Succeeded => {
                retry.successful_with_retry.fetch_add(1, Ordering::Relaxed);
                retry.emit(|| RetryEvent::Success {
                    name: retry.name.clone(),
                    attempts,
                });
                return Next::Stop;
            }
            Attempted::Failed | Attempted::Refused { failure: true } => true,
            Attempted::Refused { failure: false } => config.retry_on_rejection(),
            Attempted::NotRetried => false,
        };
        // A failure that asks for a wait longer than `max_retry_after` is not retried.
        let asked = ended
            .retry_after
            .filter(|least| *least <= config.max_retry_after());
        let retryable = retryable && asked.is_some() == ended.retry_after.is_some();
        let wait = (retryable && repeatable && attempts < config.max_attempts())
            .then(|| config.jittered_wait(attempts, fastrand::f64()))
            // A failure that says how long to wait (a server's `Retry-After`) is waited for at
            // least that long.
            .map(|wait| asked.map_or(wait, |least| wait.max(least)))
            // A sync call on a current-thread runtime does not block it to wait: it ends here.
            .filter(|wait| {
                !self.blocking || wait.is_zero() || Blocking::here() != Blocking::Refused
            });
        // Spent last: a retry the other rules refuse costs the budget nothing.
        let over_budget = wait.is_some() && !retry.budget.try_spend();
        let wait = wait.filter(|_| !over_budget);
        if let Some(wait) = wait {
            retry.emit(|| RetryEvent::Retry {
                name: retry.name.clone(),
                attempt: attempts,
                wait,
            });
            self.attempt += 1;
            return Next::RetryAfter(wait);
        }
        let failed = if retried {
            &retry.failed_with_retry
        } else {
            &retry.failed_without_retry
        };
        failed.fetch_add(1, Ordering::Relaxed);
        if over_budget {
            retry.over_budget.fetch_add(1, Ordering::Relaxed);
        }
        retry.emit(|| {
            let name = retry.name.clone();
            if over_budget {
                RetryEvent::OverBudget { name, attempts }
            } else if retryable {
                RetryEvent::Error { name, attempts }
            } else {
                RetryEvent::IgnoredError { name, attempts }
            }
        });
        Next::Stop
    }
}

// ----- the wrapper seam -----

impl Wrap for Retry {
    type Call<'w> = Attempts<'w>;

    /// A sync call (`blocking`) waits between attempts by blocking its thread, and so does
    /// not retry after a wait where blocking is refused (see [`crate::blocking`]).
    #[inline]
    fn begin(&self, blocking: bool) -> Attempts<'_> {
        if self.budget.present() {
            self.budget.deposit();
        }
        Attempts {
            retry: self,
            attempt: 1,
            blocking,
        }
    }

    fn quiet_success(&self) -> bool {
        true
    }
}

impl<'r> WrapCall<'r> for Attempts<'r> {
    /// Counts the call if it ends here; `repeatable` says whether the call can be made again
    /// at all (a one-shot call cannot).
    #[inline]
    fn after(&mut self, ended: Ended, repeatable: bool) -> Next {
        if ended.attempted == Attempted::Succeeded && self.attempt == 1 {
            self.retry
                .successful_without_retry
                .fetch_add(1, Ordering::Relaxed);
            return Next::Stop;
        }
        self.after_slow(ended, repeatable)
    }

    fn sleep(&self, wait: Duration) -> Sleep<'r> {
        self.retry.sleep(wait)
    }

    fn sleep_blocking(&self, wait: Duration) {
        self.retry.sleep_blocking(wait);
    }
}
