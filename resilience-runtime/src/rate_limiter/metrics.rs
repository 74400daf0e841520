//! [`RateLimiterMetrics`]: a snapshot of a rate limiter's state and counters.

/// A snapshot of a rate limiter, from [`RateLimiter::metrics`](super::RateLimiter::metrics).
///
/// The counters count since the limiter was created; [`reconfigure`](super::RateLimiter::reconfigure)
/// does not reset them. While acquisitions run on other threads, `permitted_calls` may lag by
/// the ones in flight; it never decreases.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig};
///
/// let config = RateLimiterConfig::builder()
///     .limit_for_period(2)
///     .limit_refresh_period(Duration::from_secs(1))
///     .build()?;
/// let limiter = RateLimiter::with_clock("payments", config, Clock::from(ManualClock::new()));
/// limiter.try_acquire()?;
/// limiter.try_acquire()?;
/// assert!(limiter.try_acquire().is_err());
///
/// let metrics = limiter.metrics();
/// assert_eq!(metrics.available_permissions(), 0);
/// assert_eq!(metrics.permitted_calls(), 2);
/// assert_eq!(metrics.rejected_calls(), 1);
/// assert_eq!(metrics.number_of_waiting_threads(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimiterMetrics {
    pub(super) available_permissions: i64,
    pub(super) number_of_waiting_threads: u64,
    pub(super) permitted_calls: u64,
    pub(super) rejected_calls: u64,
    pub(super) fleet_fallback_calls: u64,
}

impl RateLimiterMetrics {
    /// Permissions left in the current cycle when the snapshot was taken; negative when
    /// waiters have reserved permissions of later cycles.
    pub fn available_permissions(&self) -> i64 {
        self.available_permissions
    }

    /// Callers waiting for a permission of a later cycle (threads and tasks).
    pub fn number_of_waiting_threads(&self) -> u64 {
        self.number_of_waiting_threads
    }

    /// Callers that got a permission, at once or after waiting.
    pub fn permitted_calls(&self) -> u64 {
        self.permitted_calls
    }

    /// Callers refused with [`Rejected::RequestNotPermitted`](crate::Rejected).
    pub fn rejected_calls(&self) -> u64 {
        self.rejected_calls
    }

    /// Calls a fleet limiter decided by its fallback while Redis did not answer (0 for a local
    /// limiter).
    pub fn fleet_fallback_calls(&self) -> u64 {
        self.fleet_fallback_calls
    }
}
