//! How long the recorded calls took, by outcome, as a Prometheus histogram: what the breaker
//! keeps with `record_call_durations`, for the `…_calls_seconds_{sum,bucket}` of
//! Resilience4j's timer. Kept under the window's lock, beside the counts it matches.

/// The upper bounds of the buckets, in nanoseconds: Prometheus's default buckets (5 ms to
/// 10 s) with 1 ms and 2.5 ms below them, for calls to a dependency on the same network.
const BOUNDS_NANOS: [u64; 13] = [
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// The bounds as Prometheus writes them in the `le` label, the last one for every call.
pub(crate) const BUCKET_LABELS: [&str; 14] = [
    "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5",
    "10", "+Inf",
];

/// The outcomes timed, in the order of the arrays below: the first two at the indexes of
/// `Recorder::recorded` (`usize::from(failed)`).
pub(crate) const KINDS: [&str; 3] = ["successful", "failed", "ignored"];
pub(super) const IGNORED: usize = 2;

/// Per outcome: the calls in each bucket (not cumulative; the last holds those above every
/// bound) and the sum of their durations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallDurations {
    counts: [[u64; BUCKET_LABELS.len()]; KINDS.len()],
    sum_nanos: [u64; KINDS.len()],
}

impl CallDurations {
    /// Adds a call of outcome `kind` that took `nanos`.
    #[inline]
    pub(super) fn record(&mut self, kind: usize, nanos: u64) {
        // The first bound at or above the duration: a bucket counts the calls up to its bound.
        let bucket = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.counts[kind][bucket] += 1;
        self.sum_nanos[kind] = self.sum_nanos[kind].saturating_add(nanos);
    }

    /// The cumulative counts of outcome `kind`, in the order of [`BUCKET_LABELS`]: the calls
    /// that took at most each bound (the last: all of them).
    #[cfg(any(feature = "metrics", test))]
    pub(crate) fn cumulative(&self, kind: usize) -> [u64; BUCKET_LABELS.len()] {
        let mut total = 0;
        self.counts[kind].map(|count| {
            total += count;
            total
        })
    }

    /// The total duration of the calls of outcome `kind`, in seconds.
    #[cfg(any(feature = "metrics", test))]
    pub(crate) fn sum_seconds(&self, kind: usize) -> f64 {
        // Every nanosecond counts below 2⁵³ ns (104 days of summed call time).
        self.sum_nanos[kind] as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUCCESSFUL: usize = 0;
    const FAILED: usize = 1;

    #[test]
    fn a_call_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let mut durations = CallDurations::default();
        durations.record(SUCCESSFUL, 1_000_000); // exactly 1 ms: le="0.001"
        durations.record(SUCCESSFUL, 1_000_001); // just above: le="0.0025"
        durations.record(SUCCESSFUL, 0);
        durations.record(FAILED, 30_000_000); // 30 ms: le="0.05"
        durations.record(IGNORED, 60_000_000_000); // a minute: only le="+Inf"
        let successful = durations.cumulative(SUCCESSFUL);
        assert_eq!(successful[0], 2);
        assert_eq!(successful[1], 3);
        assert_eq!(successful[13], 3);
        let failed = durations.cumulative(FAILED);
        assert_eq!(failed[4], 0, "le=0.025");
        assert_eq!(failed[5], 1, "le=0.05");
        assert_eq!(failed[13], 1);
        let ignored = durations.cumulative(IGNORED);
        assert_eq!(ignored[12], 0, "le=10");
        assert_eq!(ignored[13], 1);
        assert_eq!(durations.sum_seconds(SUCCESSFUL), 0.002000001);
        assert_eq!(durations.sum_seconds(FAILED), 0.03);
        assert_eq!(durations.sum_seconds(IGNORED), 60.0);
    }

    #[test]
    fn the_labels_name_the_bounds() {
        for (bound, label) in BOUNDS_NANOS.iter().zip(BUCKET_LABELS) {
            let seconds: f64 = label.parse().unwrap();
            assert_eq!((seconds * 1e9).round() as u64, *bound, "{label}");
        }
        assert_eq!(BUCKET_LABELS.len(), BOUNDS_NANOS.len() + 1);
    }
}
