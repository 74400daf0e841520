//! [`TimeLimiterEvent`]: what a time limiter tells its subscribers.

use std::fmt;
use std::time::Duration;

use crate::name::Name;

/// Something a time limiter saw, delivered to the callbacks registered with
/// [`TimeLimiter::subscribe`](super::TimeLimiter::subscribe) (Resilience4j's
/// `TimeLimiterOnSuccessEvent`, `TimeLimiterOnErrorEvent` and `TimeLimiterOnTimeoutEvent`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeLimiterEvent {
    /// The call completed in time and succeeded.
    #[non_exhaustive]
    Success {
        /// The time limiter.
        name: Name,
    },
    /// The call completed in time and failed (or a guard inside the time limiter refused it).
    #[non_exhaustive]
    Error {
        /// The time limiter.
        name: Name,
    },
    /// The call took longer than `timeout`: it was cut off, or (with
    /// `cancel_running_future(false)`) it is reported and goes on.
    #[non_exhaustive]
    Timeout {
        /// The time limiter.
        name: Name,
        /// The timeout that passed.
        timeout: Duration,
    },
}

impl TimeLimiterEvent {
    /// The time limiter the event comes from.
    pub fn name(&self) -> &Name {
        match self {
            TimeLimiterEvent::Success { name }
            | TimeLimiterEvent::Error { name }
            | TimeLimiterEvent::Timeout { name, .. } => name,
        }
    }
}

impl fmt::Display for TimeLimiterEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeLimiterEvent::Success { name } => {
                write!(f, "time limiter `{name}`: the call succeeded in time")
            }
            TimeLimiterEvent::Error { name } => {
                write!(f, "time limiter `{name}`: the call failed in time")
            }
            TimeLimiterEvent::Timeout { name, timeout } => write!(
                f,
                "time limiter `{name}`: the call took longer than {timeout:?}"
            ),
        }
    }
}
