//! [`CircuitBreakerMetrics`]: a snapshot of what a breaker has recorded.

use super::window::Totals;

/// A snapshot of the calls a circuit breaker has recorded in its current state, taken by
/// [`CircuitBreaker::metrics`](super::CircuitBreaker::metrics).
///
/// In the closed and metrics-only states the counts are those of the sliding window; in the
/// half-open state, those of the probe calls; in the open state, those that made the breaker
/// open. Every other transition starts from empty counts (Resilience4j's behaviour).
///
/// ```
/// use resilience_runtime::{CircuitBreaker, CircuitBreakerConfig};
///
/// let breaker = CircuitBreaker::new("orders", CircuitBreakerConfig::builder()
///     .minimum_number_of_calls(4)
///     .build()?);
/// breaker.try_acquire()?.record_success();
/// breaker.try_acquire()?.record_failure();
/// let metrics = breaker.metrics();
/// assert_eq!(metrics.number_of_buffered_calls(), 2);
/// assert_eq!(metrics.number_of_failed_calls(), 1);
/// assert_eq!(metrics.failure_rate(), -1.0); // fewer than 4 calls: no rate yet
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CircuitBreakerMetrics {
    failure_rate: f32,
    slow_call_rate: f32,
    buffered: u32,
    failed: u32,
    slow: u32,
    slow_failed: u32,
    not_permitted: u64,
    totals: CallTotals,
}

/// The calls of a breaker since it was created, by outcome: counters that only grow (a
/// transition, a reset or a reconfiguration keeps counting), as metrics exporters want them.
/// Read from [`CircuitBreakerMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallTotals {
    pub(crate) successful: u64,
    pub(crate) failed: u64,
    pub(crate) ignored: u64,
    pub(crate) not_permitted: u64,
}

impl CircuitBreakerMetrics {
    pub(crate) fn new(
        totals: Totals,
        minimum_calls: u64,
        not_permitted: u64,
        ever: CallTotals,
    ) -> Self {
        let (failure_rate, slow_call_rate) = if totals.calls >= minimum_calls && totals.calls > 0 {
            (totals.failure_rate(), totals.slow_call_rate())
        } else {
            (-1.0, -1.0)
        };
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        CircuitBreakerMetrics {
            failure_rate,
            slow_call_rate,
            buffered: clamp(totals.calls),
            failed: clamp(totals.failed),
            slow: clamp(totals.slow),
            slow_failed: clamp(totals.slow_failed),
            not_permitted,
            totals: ever,
        }
    }

    /// The failed calls in percent of the recorded calls, or -1.0 while fewer than
    /// `minimum_number_of_calls` are recorded (in the half-open state: fewer than
    /// `permitted_calls_in_half_open_state`).
    pub fn failure_rate(&self) -> f32 {
        self.failure_rate
    }

    /// The slow calls in percent of the recorded calls, or -1.0 under the same condition as
    /// [`failure_rate`](Self::failure_rate).
    pub fn slow_call_rate(&self) -> f32 {
        self.slow_call_rate
    }

    /// The recorded calls that succeeded (slow or not).
    pub fn number_of_successful_calls(&self) -> u32 {
        self.buffered - self.failed
    }

    /// The recorded calls that failed (slow or not).
    pub fn number_of_failed_calls(&self) -> u32 {
        self.failed
    }

    /// The recorded calls that took longer than `slow_call_duration_threshold`.
    pub fn number_of_slow_calls(&self) -> u32 {
        self.slow
    }

    /// The slow calls that succeeded.
    pub fn number_of_slow_successful_calls(&self) -> u32 {
        self.slow - self.slow_failed
    }

    /// The slow calls that failed.
    pub fn number_of_slow_failed_calls(&self) -> u32 {
        self.slow_failed
    }

    /// The calls refused with `CallNotPermitted` since the current metrics started.
    pub fn number_of_not_permitted_calls(&self) -> u64 {
        self.not_permitted
    }

    /// The recorded calls (successful and failed).
    pub fn number_of_buffered_calls(&self) -> u32 {
        self.buffered
    }

    /// This snapshot without its totals since creation: what a fresh breaker would show.
    #[cfg(test)]
    pub(crate) fn window_only(mut self) -> Self {
        self.totals = CallTotals::default();
        self
    }

    /// The calls recorded as successes since the breaker was created. Unlike the counts above,
    /// which are those of the current window, this one only grows: a transition, a reset or a
    /// reconfiguration keeps counting (a metrics counter, `…_circuitbreaker_calls_total{kind="successful"}`).
    pub fn total_successful_calls(&self) -> u64 {
        self.totals.successful
    }

    /// The calls recorded as failures since the breaker was created (see
    /// [`total_successful_calls`](Self::total_successful_calls)).
    pub fn total_failed_calls(&self) -> u64 {
        self.totals.failed
    }

    /// The calls that ended in an ignored error since the breaker was created (see
    /// [`total_successful_calls`](Self::total_successful_calls)).
    pub fn total_ignored_calls(&self) -> u64 {
        self.totals.ignored
    }

    /// The calls refused with `CallNotPermitted` since the breaker was created (see
    /// [`total_successful_calls`](Self::total_successful_calls)).
    pub fn total_not_permitted_calls(&self) -> u64 {
        self.totals.not_permitted
    }
}
