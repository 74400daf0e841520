//! [`RetryEvent`]: what a retry tells its subscribers.

use std::fmt;
use std::time::Duration;

use crate::name::Name;

/// Something a retry did, delivered to the callbacks registered with
/// [`Retry::subscribe`](super::Retry::subscribe) (Resilience4j's `RetryOnRetryEvent`,
/// `RetryOnSuccessEvent`, `RetryOnErrorEvent` and `RetryOnIgnoredErrorEvent`). A call that
/// succeeds at its first attempt emits nothing.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use resilience_runtime::{Guard, Registry, Rejected, RetryConfig, RetryEvent};
///
/// #[derive(Debug)]
/// enum InvError { Busy, Rejected(Rejected) }
/// impl From<Rejected> for InvError { fn from(r: Rejected) -> Self { InvError::Rejected(r) } }
///
/// let registry = Registry::new();
/// registry.configure_retry("inventory", RetryConfig::builder()
///     .max_attempts(3).wait_duration(Duration::ZERO).build()?)?;
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = Arc::clone(&seen);
/// registry.retry("inventory").subscribe(move |event: &RetryEvent| {
///     sink.lock().unwrap().push(event.to_string())
/// });
///
/// let plan = registry.plan(&[Guard::retry("inventory")])?;
/// let mut busy = 1;
/// let reserved: Result<u32, InvError> = plan.call(|| {
///     if busy > 0 { busy -= 1; Err(InvError::Busy) } else { Ok(7) }
/// });
/// assert_eq!(reserved.unwrap(), 7);
/// assert_eq!(*seen.lock().unwrap(), [
///     "retry `inventory`: attempt 1 failed, retrying in 0ns",
///     "retry `inventory`: succeeded at attempt 2",
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryEvent {
    /// An attempt failed in a way the retry retries; the next one starts after `wait`.
    #[non_exhaustive]
    Retry {
        /// The retry.
        name: Name,
        /// The number of the attempt that failed (1 for the first call).
        attempt: u32,
        /// The wait before the next attempt.
        wait: Duration,
    },
    /// The call succeeded after at least one retry.
    #[non_exhaustive]
    Success {
        /// The retry.
        name: Name,
        /// The attempts made, the successful one included.
        attempts: u32,
    },
    /// Every attempt failed: the call ends with the last attempt's failure.
    #[non_exhaustive]
    Error {
        /// The retry.
        name: Name,
        /// The attempts made.
        attempts: u32,
    },
    /// An attempt failed in a way the retry retries, but the instance's
    /// [`RetryBudget`](super::RetryBudget) has no retry left: the call ends with that failure.
    #[non_exhaustive]
    OverBudget {
        /// The retry.
        name: Name,
        /// The attempts made.
        attempts: u32,
    },
    /// An attempt failed in a way the retry does not retry (an error `retry_on` refuses, a
    /// refusal by a guard inside the retry): the call ends with it.
    #[non_exhaustive]
    IgnoredError {
        /// The retry.
        name: Name,
        /// The attempts made, the last one included.
        attempts: u32,
    },
}

impl RetryEvent {
    /// The retry the event comes from.
    pub fn name(&self) -> &Name {
        match self {
            RetryEvent::Retry { name, .. }
            | RetryEvent::Success { name, .. }
            | RetryEvent::Error { name, .. }
            | RetryEvent::OverBudget { name, .. }
            | RetryEvent::IgnoredError { name, .. } => name,
        }
    }
}

impl fmt::Display for RetryEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryEvent::Retry {
                name,
                attempt,
                wait,
            } => write!(
                f,
                "retry `{name}`: attempt {attempt} failed, retrying in {wait:?}"
            ),
            RetryEvent::Success { name, attempts } => {
                write!(f, "retry `{name}`: succeeded at attempt {attempts}")
            }
            RetryEvent::Error { name, attempts } => {
                write!(f, "retry `{name}`: gave up after {attempts} attempts")
            }
            RetryEvent::OverBudget { name, attempts } => write!(
                f,
                "retry `{name}`: attempt {attempts} failed, and the retry budget has no retry left"
            ),
            RetryEvent::IgnoredError { name, attempts } => write!(
                f,
                "retry `{name}`: attempt {attempts} failed in a way that is not retried"
            ),
        }
    }
}
