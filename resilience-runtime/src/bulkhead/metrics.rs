//! [`BulkheadMetrics`], a snapshot of a bulkhead's counters, and [`AdaptiveEstimates`], the
//! latencies an adaptive limit works from.

use std::time::Duration;

/// The latencies an adaptive limit's algorithm works from
/// ([`Bulkhead::adaptive_estimates`](super::Bulkhead::adaptive_estimates)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveEstimates {
    /// The latency samples are compared with: the knee's latency without a queue (that of
    /// its last lower probe), Gradient2's long-term average, Vegas's lowest latency; `None`
    /// for AIMD, or before the first estimate.
    pub baseline_rtt: Option<Duration>,
    /// The last sample's latency (`None` before the first).
    pub sample_rtt: Option<Duration>,
}

/// Nanoseconds of an estimate as a duration.
pub(super) fn nanos_duration(nanos: f64) -> Duration {
    // Estimates are averages of `u64` nanoseconds: within range, and positive.
    Duration::from_nanos(nanos.round() as u64)
}

/// A snapshot of a bulkhead's counters, from [`Bulkhead::metrics`](super::Bulkhead::metrics).
///
/// The counters count since the bulkhead was created;
/// [`Bulkhead::reconfigure`](super::Bulkhead::reconfigure) does not reset them.
/// `finished_calls` is derived as the permitted calls minus those holding a permit (more than
/// the limit after a shrink, until the surplus is returned), so it may briefly lag behind a
/// permit that a release has just handed to a waiter.
///
/// ```
/// use resilience_runtime::{Bulkhead, BulkheadConfig};
///
/// let bulkhead = Bulkhead::new("inventory", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
/// drop(bulkhead.try_acquire()?);
/// let _held = bulkhead.try_acquire()?;
/// assert!(bulkhead.try_acquire().is_err());
///
/// let metrics = bulkhead.metrics();
/// assert_eq!(metrics.permitted_calls(), 2);
/// assert_eq!(metrics.finished_calls(), 1);
/// assert_eq!(metrics.rejected_calls(), 1);
/// assert_eq!(metrics.available_concurrent_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadMetrics {
    pub(super) available_concurrent_calls: u32,
    pub(super) max_allowed_concurrent_calls: u32,
    pub(super) permitted_calls: u64,
    pub(super) rejected_calls: u64,
    pub(super) finished_calls: u64,
    pub(super) fleet_fallback_calls: u64,
}

impl BulkheadMetrics {
    /// Free permits when the snapshot was taken.
    pub fn available_concurrent_calls(&self) -> u32 {
        self.available_concurrent_calls
    }

    /// The number of calls admitted at once.
    pub fn max_allowed_concurrent_calls(&self) -> u32 {
        self.max_allowed_concurrent_calls
    }

    /// Calls that got a permit, at once or after waiting.
    pub fn permitted_calls(&self) -> u64 {
        self.permitted_calls
    }

    /// Calls rejected because no permit was free within `max_wait_duration`.
    pub fn rejected_calls(&self) -> u64 {
        self.rejected_calls
    }

    /// Permitted calls that have released their permit.
    pub fn finished_calls(&self) -> u64 {
        self.finished_calls
    }

    /// Calls a fleet bulkhead decided by its fallback while Redis did not answer (0 for a
    /// local bulkhead).
    pub fn fleet_fallback_calls(&self) -> u64 {
        self.fleet_fallback_calls
    }
}
