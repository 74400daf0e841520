//! [`RetryMetrics`]: a snapshot of a retry's counters.

/// A snapshot of a retry's counters, from [`Retry::metrics`](super::Retry::metrics)
/// (Resilience4j's four). Each call that ends counts once, in one of them; the counters count
/// since the retry was created, and reconfiguring it does not reset them.
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
///     .max_attempts(3).wait_duration(Duration::ZERO).build()?)?;
/// let plan = registry.plan(&[Guard::retry("inventory")])?;
///
/// let mut attempts = 0;
/// let reserved: Result<u32, InvError> = plan.call(|| {
///     attempts += 1;
///     if attempts < 2 { Err(InvError::Busy) } else { Ok(7) }
/// });
/// assert_eq!(reserved, Ok(7));
///
/// let metrics = registry.retry("inventory").metrics();
/// assert_eq!(metrics.number_of_successful_calls_with_retry_attempt(), 1);
/// assert_eq!(metrics.number_of_successful_calls_without_retry_attempt(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryMetrics {
    pub(super) successful_without_retry: u64,
    pub(super) successful_with_retry: u64,
    pub(super) failed_without_retry: u64,
    pub(super) failed_with_retry: u64,
    pub(super) over_budget: u64,
}

impl RetryMetrics {
    /// Calls that succeeded at their first attempt.
    pub fn number_of_successful_calls_without_retry_attempt(&self) -> u64 {
        self.successful_without_retry
    }

    /// Calls that succeeded after at least one retry.
    pub fn number_of_successful_calls_with_retry_attempt(&self) -> u64 {
        self.successful_with_retry
    }

    /// Calls that failed at their first attempt and were not retried (the failure is not one
    /// the retry retries, or `max_attempts` is 1).
    pub fn number_of_failed_calls_without_retry_attempt(&self) -> u64 {
        self.failed_without_retry
    }

    /// Calls that failed after at least one retry.
    pub fn number_of_failed_calls_with_retry_attempt(&self) -> u64 {
        self.failed_with_retry
    }

    /// Retries not made because the instance's [`RetryBudget`](super::RetryBudget) was spent
    /// (each such call also counts as failed, with or without a retry attempt).
    pub fn number_of_retries_over_budget(&self) -> u64 {
        self.over_budget
    }
}
