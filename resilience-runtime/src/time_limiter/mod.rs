//! The time limiter: a wrapper that bounds how long a call may take (Resilience4j's
//! `TimeLimiter`), for async calls.
//!
//! [`TimeLimiter`] is the instance, [`TimeLimiterConfig`] its configuration,
//! [`TimeLimiterMetrics`] a snapshot of its counters and [`TimeLimiterEvent`] what it tells
//! subscribers. It wraps the rest of a plan (the guards after it in precedence order, then the
//! call): when `timeout_duration` passes first, the rest is dropped (every guard inside it
//! released, the call's future dropped with its guards still on the call chain) and the call
//! ends with [`Rejected::TimedOut`]. A circuit breaker outside the time limiter (the default
//! precedence puts it there) records that as a failure; a retry outside it retries it.
//!
//! A thread cannot be cancelled: a sync call passes through a time limiter, counted but not
//! bounded (`#[time_limiter]` on a sync function is a compile error that says so). Bound a
//! sync call with a bulkhead's `max_wait_duration` and a timeout inside the body.

mod config;
mod events;

#[cfg(test)]
mod tests;

pub use config::{TimeLimiterConfig, TimeLimiterConfigBuilder};
pub use events::TimeLimiterEvent;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clock::{deadline_after, Clock, Reading};
use crate::error::Rejected;
use crate::name::Name;
use crate::retry::Next;
use crate::subscribers::{Subscribers, SubscriptionId};
use crate::wrapper::{Ended, Wrap, WrapCall};

/// A time limiter: cuts off an async call that takes longer than
/// [`timeout_duration`](TimeLimiterConfig::timeout_duration) with [`Rejected::TimedOut`].
///
/// It runs as part of a [`Plan`](crate::Plan) (or an `async fn` annotated `#[time_limiter]`):
/// get it from a [`Registry`](crate::Registry) with
/// [`time_limiter`](crate::Registry::time_limiter), configure it with
/// [`configure_time_limiter`](crate::Registry::configure_time_limiter).
///
/// Time is counted from the call's first suspension: a call that completes without waiting
/// for anything (its first poll is ready) never reads the clock or starts a timer, and the
/// work before a call first waits cannot be cut short anyway (a future is cancelled only
/// where it waits). The timer of a call that waits is allocated then, on the registry's
/// clock: tokio's timer inside a runtime (paused test time applies), a
/// [`ManualClock`](crate::ManualClock) in tests.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Guard, Registry, Rejected, TimeLimiterConfig};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = Registry::new();
/// registry.configure_time_limiter("inventory", TimeLimiterConfig::builder()
///     .timeout_duration(Duration::from_millis(100))
///     .build()?)?;
/// let plan = registry.plan(&[Guard::time_limiter("inventory")])?;
///
/// let slow: Result<(), Rejected> = plan
///     .call_async(|| async {
///         tokio::time::sleep(Duration::from_secs(5)).await;
///         Ok(())
///     })
///     .await;
/// assert!(matches!(slow, Err(Rejected::TimedOut { .. })));
/// assert_eq!(registry.time_limiter("inventory").metrics().number_of_timed_out_calls(), 1);
/// # Ok(())
/// # }
/// ```
pub struct TimeLimiter {
    name: Name,
    id: u64,
    config: ArcSwap<TimeLimiterConfig>,
    clock: Clock,
    subscribers: Subscribers<TimeLimiterEvent>,
    successful: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
}

impl TimeLimiter {
    /// A time limiter named `name`, configured by `config`, on the system clock.
    pub fn new(name: impl Into<Name>, config: TimeLimiterConfig) -> Self {
        Self::with_clock(name, config, Clock::system())
    }

    /// A time limiter whose timeouts follow `clock`, such as a
    /// [`ManualClock`](crate::ManualClock).
    pub fn with_clock(name: impl Into<Name>, config: TimeLimiterConfig, clock: Clock) -> Self {
        TimeLimiter {
            name: name.into(),
            id: crate::next_instance_id(),
            config: ArcSwap::from_pointee(config),
            clock,
            subscribers: Subscribers::new(),
            successful: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
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
    pub fn config(&self) -> TimeLimiterConfig {
        TimeLimiterConfig::clone(&self.config.load())
    }

    /// Changes the configuration in place: the instance, its subscribers and its counters
    /// stay. A call already waiting keeps the timeout it started its timer with.
    pub fn reconfigure(&self, config: TimeLimiterConfig) {
        self.config.store(Arc::new(config));
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> TimeLimiterMetrics {
        TimeLimiterMetrics {
            successful: self.successful.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
        }
    }

    /// Calls `callback` with every event of this time limiter, on the thread of the call. A
    /// callback that panics does not keep the event from the others; the panic is then resumed
    /// on that thread (unless it is already panicking).
    pub fn subscribe(
        &self,
        callback: impl Fn(&TimeLimiterEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add(Arc::new(callback))
    }

    /// Like [`subscribe`](Self::subscribe), for the events of `interest`.
    pub(crate) fn subscribe_with(
        &self,
        interest: crate::subscribers::Interest,
        callback: impl Fn(&TimeLimiterEvent) + Send + Sync + 'static,
    ) -> SubscriptionId {
        self.subscribers.add_with(interest, Arc::new(callback))
    }

    /// Removes a callback added by [`subscribe`](Self::subscribe); `false` if it was not
    /// subscribed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.subscribers.remove(id)
    }

    /// A call ended in time (or, sync, ran through): counted as a success or a failure.
    #[inline]
    pub(crate) fn completed(&self, succeeded: bool) {
        let counter = if succeeded {
            &self.successful
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if self.subscribers.per_call() {
            let name = self.name.clone();
            self.subscribers.deliver([if succeeded {
                TimeLimiterEvent::Success { name }
            } else {
                TimeLimiterEvent::Error { name }
            }]);
        }
    }

    #[cold]
    fn overran(&self, timeout: Duration) {
        self.timed_out.fetch_add(1, Ordering::Relaxed);
        if self.subscribers.any() {
            self.subscribers.deliver([TimeLimiterEvent::Timeout {
                name: self.name.clone(),
                timeout,
            }]);
        }
    }

    /// Bounds `call`, whose output `succeeded` judges when it completes in time.
    pub(crate) fn limit<R, F, S>(&self, call: F, succeeded: S) -> Limit<'_, F, S>
    where
        F: Future<Output = Result<R, Rejected>>,
        S: FnOnce(&Result<R, Rejected>) -> bool,
    {
        Limit {
            limiter: self,
            call: Some(call),
            succeeded: Some(succeeded),
            deadline: None,
            overran: false,
        }
    }

    /// Starts the timer of a call that has just suspended for the first time: the timeout in
    /// force now is the call's.
    #[cold]
    pub(crate) fn start(&self) -> Deadline<'_> {
        let config = self.config.load();
        let timeout = config.timeout_duration();
        let deadline = deadline_after(self.clock.read(Reading::Precise), timeout);
        Deadline {
            limiter: self,
            // Past the end of the clock: never cut off, and no timer to keep.
            timer: (deadline != u64::MAX)
                .then(|| Box::pin(self.clock.sleep_until(Reading::Precise, deadline)) as Timer<'_>),
            timeout,
            cancel: config.cancel_running_future(),
        }
    }
}

impl fmt::Debug for TimeLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeLimiter")
            .field("name", &self.name)
            .field("config", &*self.config.load())
            .finish()
    }
}

/// A snapshot of a time limiter's counters, from [`TimeLimiter::metrics`]. Each call that
/// ends counts once, in one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeLimiterMetrics {
    successful: u64,
    failed: u64,
    timed_out: u64,
}

impl TimeLimiterMetrics {
    /// Calls that completed in time and succeeded.
    pub fn number_of_successful_calls(&self) -> u64 {
        self.successful
    }

    /// Calls that completed in time and failed, or that a guard inside refused.
    pub fn number_of_failed_calls(&self) -> u64 {
        self.failed
    }

    /// Calls that took longer than the timeout (cut off, or only reported).
    pub fn number_of_timed_out_calls(&self) -> u64 {
        self.timed_out
    }
}

/// The timer of a call that waits: boxed, so that a call that never waits carries none.
type Timer<'t> = Pin<Box<dyn Future<Output = ()> + Send + 't>>;

/// The timer of one call, started at its first suspension ([`TimeLimiter::start`]).
pub(crate) struct Deadline<'t> {
    limiter: &'t TimeLimiter,
    /// `None` once it fired, or for a call never cut off.
    timer: Option<Timer<'t>>,
    timeout: Duration,
    cancel: bool,
}

/// What a call's timer says when it fires.
pub(crate) enum Expired {
    /// Cut the call off: drop it, and end it with this rejection.
    CutOff(Rejected),
    /// Let it go on (`cancel_running_future(false)`): it was counted as timed out, and its
    /// completion is not counted again.
    Overran,
}

impl Deadline<'_> {
    /// Polls the timer: `Pending` until it fires (forever after it fired, or for a call never
    /// cut off); once it fires, counts the call as timed out and says what to do with it.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Expired> {
        let Some(timer) = self.timer.as_mut() else {
            return Poll::Pending;
        };
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.timer = None;
        let limiter = self.limiter;
        limiter.overran(self.timeout);
        Poll::Ready(if self.cancel {
            Expired::CutOff(Rejected::TimedOut {
                name: limiter.name.clone(),
                timeout: self.timeout,
            })
        } else {
            Expired::Overran
        })
    }
}

pin_project_lite::pin_project! {
    /// The future of [`TimeLimiter::limit`]: polls the call, starts the timer at the call's
    /// first suspension, and cuts the call off (drops it) when the timer fires first.
    pub(crate) struct Limit<'t, F, S> {
        limiter: &'t TimeLimiter,
        #[pin]
        call: Option<F>,
        succeeded: Option<S>,
        // Started at the call's first suspension.
        deadline: Option<Deadline<'t>>,
        // Reported as timed out, and let go on (`cancel_running_future(false)`).
        overran: bool,
    }
}

impl<R, F, S> Future for Limit<'_, F, S>
where
    F: Future<Output = Result<R, Rejected>>,
    S: FnOnce(&Result<R, Rejected>) -> bool,
{
    type Output = Result<R, Rejected>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let limiter: &TimeLimiter = this.limiter;
        let Some(call) = this.call.as_mut().as_pin_mut() else {
            panic!("a time-limited call's future was polled after it completed");
        };
        if let Poll::Ready(output) = call.poll(cx) {
            this.call.set(None);
            if let Some(succeeded) = this.succeeded.take() {
                if !*this.overran {
                    limiter.completed(succeeded(&output));
                }
            }
            return Poll::Ready(output);
        }
        let deadline = this.deadline.get_or_insert_with(|| limiter.start());
        match deadline.poll_expired(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Expired::Overran) => {
                *this.overran = true;
                Poll::Pending
            }
            Poll::Ready(Expired::CutOff(rejected)) => {
                // Cut off: the rest of the plan is dropped here, which releases its guards.
                this.call.set(None);
                this.succeeded.take();
                Poll::Ready(Err(rejected))
            }
        }
    }
}

// ----- the wrapper seam -----

/// One call through a time limiter: its timer, started at the rest's first suspension, and
/// whether it fired (then the call was counted as timed out, and its end is not counted again).
pub(crate) struct Limiting<'t> {
    limiter: &'t TimeLimiter,
    deadline: Option<Deadline<'t>>,
    expired: bool,
}

impl Wrap for TimeLimiter {
    type Call<'w> = Limiting<'w>;

    /// A sync call cannot be cut off: it is only counted as it ends.
    #[inline]
    fn begin(&self, _blocking: bool) -> Limiting<'_> {
        Limiting {
            limiter: self,
            deadline: None,
            expired: false,
        }
    }
}

impl<'t> WrapCall<'t> for Limiting<'t> {
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Expired> {
        if self.expired {
            return Poll::Pending;
        }
        let limiter = self.limiter;
        let deadline = self.deadline.get_or_insert_with(|| limiter.start());
        let expired = std::task::ready!(deadline.poll_expired(cx));
        self.expired = true;
        Poll::Ready(expired)
    }

    #[inline]
    fn after(&mut self, ended: Ended, _repeatable: bool) -> Next {
        if !self.expired {
            self.limiter.completed(!ended.failed);
        }
        Next::Stop
    }
}
