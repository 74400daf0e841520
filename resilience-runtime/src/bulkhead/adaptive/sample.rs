//! [`Sample`] and [`Estimates`]: what the limit algorithms take and tell.

/// One admitted call's end, as the algorithms see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// When it ended, in nanoseconds on the bulkhead's clock.
    pub(crate) now: u64,
    /// How long it took from its admission, in nanoseconds.
    pub(crate) rtt: u64,
    /// The calls holding permits when it ended, itself included.
    pub(crate) inflight: u32,
    /// Whether it was dropped: timed out, given up, or shed by the dependency.
    pub(crate) dropped: bool,
}

/// What an algorithm estimates besides the limit, for the metrics: in nanoseconds, 0 when
/// it has none yet.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Estimates {
    /// The latency the algorithm compares samples with: the knee's latency without a queue,
    /// Gradient2's long-term average, Vegas's lowest latency; AIMD has none.
    pub(crate) baseline_rtt: f64,
    /// The last sample's latency.
    pub(crate) sample_rtt: f64,
}
