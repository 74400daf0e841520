//! [`RateLimiterEvent`]: what a rate limiter tells its subscribers.

use std::fmt;
use std::time::Duration;

use crate::fleet::FleetFallback;
use crate::name::Name;

/// Something a rate limiter did, delivered to the callbacks registered with
/// [`RateLimiter::subscribe`](super::RateLimiter::subscribe) (Resilience4j's
/// `RateLimiterOnSuccessEvent` / `RateLimiterOnFailureEvent`).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig, RateLimiterEvent};
///
/// let config = RateLimiterConfig::builder()
///     .limit_for_period(1)
///     .limit_refresh_period(Duration::from_secs(1))
///     .build()?;
/// let limiter = RateLimiter::with_clock("payments", config, Clock::from(ManualClock::new()));
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = Arc::clone(&seen);
/// limiter.subscribe(move |event: &RateLimiterEvent| sink.lock().unwrap().push(event.to_string()));
///
/// limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err());
/// assert_eq!(*seen.lock().unwrap(), [
///     "rate limiter `payments` granted a permission (waited 0ns)",
///     "rate limiter `payments` refused a permission (one is free in 1s)",
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RateLimiterEvent {
    /// A caller got a permission, at once (`waited` zero) or after waiting for its cycle.
    #[non_exhaustive]
    SuccessfulAcquire {
        /// The rate limiter.
        name: Name,
        /// How long the caller waited for its permission.
        waited: Duration,
    },
    /// A caller was refused with [`Rejected::RequestNotPermitted`](crate::Rejected).
    #[non_exhaustive]
    FailedAcquire {
        /// The rate limiter.
        name: Name,
        /// How long until the earliest permission not reserved becomes available.
        retry_after: Duration,
    },
    /// A fleet limiter's Redis did not answer: calls go by `fallback` until it does again.
    #[non_exhaustive]
    FleetUnavailable {
        /// The rate limiter.
        name: Name,
        /// What decides the calls meanwhile.
        fallback: FleetFallback,
        /// What went wrong, in a line.
        reason: String,
    },
    /// A fleet limiter's Redis answers again: calls go by the fleet limit.
    #[non_exhaustive]
    FleetRestored {
        /// The rate limiter.
        name: Name,
    },
}

impl RateLimiterEvent {
    /// The rate limiter the event comes from.
    pub fn name(&self) -> &Name {
        match self {
            RateLimiterEvent::SuccessfulAcquire { name, .. }
            | RateLimiterEvent::FailedAcquire { name, .. }
            | RateLimiterEvent::FleetUnavailable { name, .. }
            | RateLimiterEvent::FleetRestored { name } => name,
        }
    }
}

impl fmt::Display for RateLimiterEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimiterEvent::SuccessfulAcquire { name, waited } => write!(
                f,
                "rate limiter `{name}` granted a permission (waited {waited:?})"
            ),
            RateLimiterEvent::FailedAcquire { name, retry_after } => write!(
                f,
                "rate limiter `{name}` refused a permission (one is free in {retry_after:?})"
            ),
            RateLimiterEvent::FleetUnavailable {
                name,
                fallback,
                reason,
            } => crate::fleet::write_unavailable(f, "rate limiter", name, *fallback, reason),
            RateLimiterEvent::FleetRestored { name } => {
                crate::fleet::write_restored(f, "rate limiter", name)
            }
        }
    }
}
