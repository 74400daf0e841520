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
use crate::subscribers::{Subscribers, SubscriptionId};
use crate::wrapper::{Ended, Expired, Next, Wrap, WrapCall};

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

// ----- the wrapper seam -----

/// One call through a time limiter: its timer, started at the rest's first suspension (the
/// timeout in force then is the call's), and whether it fired (then the call was counted as
/// timed out, and its end is not counted again).
pub(crate) struct Limiting<'t> {
    limiter: &'t TimeLimiter,
    /// `None` before the rest suspends, once the timer fired, or for a call never cut off.
    timer: Option<Timer<'t>>,
    timeout: Duration,
    phase: Phase,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The rest has not suspended yet.
    Idle,
    /// The timer runs; `cancel` says what to do with the rest when it fires.
    Timing { cancel: bool },
    /// The timer fired.
    Fired,
}

impl Wrap for TimeLimiter {
    type Call<'w> = Limiting<'w>;

    fn bounds(&self) -> bool {
        true
    }

    /// A sync call cannot be cut off: it is only counted as it ends.
    #[inline]
    fn begin(&self, _blocking: bool) -> Limiting<'_> {
        Limiting {
            limiter: self,
            timer: None,
            timeout: Duration::ZERO,
            phase: Phase::Idle,
        }
    }
}

impl Limiting<'_> {
    /// Starts the timer, at the rest's first suspension.
    #[cold]
    fn start(&mut self) {
        let limiter = self.limiter;
        let config = limiter.config.load();
        self.timeout = config.timeout_duration();
        let deadline = deadline_after(limiter.clock.read(Reading::Precise), self.timeout);
        // Past the end of the clock: never cut off, and no timer to keep.
        self.timer = (deadline != u64::MAX)
            .then(|| Box::pin(limiter.clock.sleep_until(Reading::Precise, deadline)) as Timer<'_>);
        self.phase = Phase::Timing {
            cancel: config.cancel_running_future(),
        };
    }
}

impl<'t> WrapCall<'t> for Limiting<'t> {
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Expired> {
        if self.phase == Phase::Idle {
            self.start();
        }
        let Phase::Timing { cancel } = self.phase else {
            return Poll::Pending;
        };
        let Some(timer) = self.timer.as_mut() else {
            return Poll::Pending;
        };
        std::task::ready!(timer.as_mut().poll(cx));
        self.timer = None;
        self.phase = Phase::Fired;
        let limiter = self.limiter;
        limiter.overran(self.timeout);
        Poll::Ready(if cancel {
            Expired::CutOff(Rejected::TimedOut {
                name: limiter.name.clone(),
                timeout: self.timeout,
            })
        } else {
            Expired::Overran
        })
    }

    #[inline]
    fn after(&mut self, ended: Ended, _repeatable: bool) -> Next {
        if self.phase != Phase::Fired {
            self.limiter.completed(!ended.failed);
        }
        Next::Stop
    }
}
