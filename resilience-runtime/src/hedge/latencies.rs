//! [`Latencies`]: the recent latencies of a hedge's attempts, for a delay taken as their
//! percentile.
//!
//! Written by hand: tower's `hedge` keeps an `hdrhistogram` behind a mutex, a lock per
//! recorded attempt; a fixed set of logarithmic buckets of atomic counts needs none, and a
//! percentile read only when a call arms its hedge's timer.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per doubling of the latency: a bucket's upper bound is at most 25 % above its
/// lower one.
const PER_DOUBLING: u32 = 4;
// `bucket` takes the two bits below the top one as the step within a doubling.
const _: () = assert!(PER_DOUBLING == 4);
/// Doublings above 1 µs: 2^32 µs is over an hour, the longest delay a hedge takes.
const DOUBLINGS: u32 = 32;
const BUCKETS: usize = (PER_DOUBLING * DOUBLINGS) as usize + 1;

/// Two windows of counts, the current and the one before: a percentile reads both, so it
/// always has between one and two windows of history.
pub(crate) struct Latencies {
    window_nanos: u64,
    windows: [Window; 2],
}

struct Window {
    /// Which window of the clock the counts are of (the reading divided by its length).
    epoch: AtomicU64,
    counts: [AtomicU32; BUCKETS],
}

impl Window {
    fn new() -> Self {
        Window {
            epoch: AtomicU64::new(0),
            counts: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }
}

/// The bucket of `nanos`: 0 for none, then `PER_DOUBLING` per doubling of the whole
/// microseconds, rounded up (so that a bucket's upper bound is never below what it counts).
fn bucket(nanos: u64) -> usize {
    let micros = nanos.div_ceil(1_000);
    if micros == 0 {
        return 0;
    }
    let whole = 63 - micros.leading_zeros();
    // The fraction of the doubling in `PER_DOUBLING` steps, from the bits below the top one.
    let fraction = if whole >= 2 {
        ((micros >> (whole - 2)) & 0b11) as u32
    } else {
        ((micros << (2 - whole)) & 0b11) as u32
    };
    ((whole * PER_DOUBLING + fraction + 1) as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `i`, in nanoseconds.
fn upper_bound(i: usize) -> u64 {
    if i == 0 {
        return 1_000;
    }
    let step = (i - 1) as u32;
    let (whole, fraction) = (step / PER_DOUBLING, step % PER_DOUBLING);
    let base = 1u64 << whole;
    // The next step's lower bound: base * (1 + (fraction + 1) / 4) µs.
    let micros = base + (base * u64::from(fraction + 1)) / u64::from(PER_DOUBLING);
    micros.saturating_mul(1_000)
}

impl Latencies {
    /// Counts kept over windows of `window` (at least a second).
    pub(crate) fn new(window: Duration) -> Self {
        Latencies {
            window_nanos: u64::try_from(window.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1_000_000_000),
            windows: [Window::new(), Window::new()],
        }
    }

    /// The window of reading `now`, its counts started afresh if they were an older window's.
    /// Two callers that find it old at once may both clear it: a count or two is lost, which a
    /// percentile of thousands does not see.
    fn window(&self, now: u64) -> &Window {
        let epoch = now / self.window_nanos + 1;
        let window = &self.windows[(epoch % 2) as usize];
        let seen = window.epoch.load(Ordering::Relaxed);
        // Only forward: a reading older than the window's (a caller that read its clock
        // before another moved the window on) counts in it rather than rewinding it.
        if seen < epoch
            && window
                .epoch
                .compare_exchange(seen, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            for count in &window.counts {
                count.store(0, Ordering::Relaxed);
            }
        }
        window
    }

    /// Counts an attempt that took `nanos`, at reading `now`.
    pub(crate) fn record(&self, now: u64, nanos: u64) {
        self.window(now).counts[bucket(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// The `percentile` (0 to 100) of the latencies counted in this window and the one before,
    /// as of reading `now` (the upper bound of its bucket); `None` below `at_least` of them.
    pub(crate) fn percentile(&self, now: u64, percentile: f64, at_least: u64) -> Option<Duration> {
        let epoch = now / self.window_nanos + 1;
        let mut counts = [0u64; BUCKETS];
        for window in &self.windows {
            let e = window.epoch.load(Ordering::Relaxed);
            if e == epoch || e + 1 == epoch {
                for (sum, count) in counts.iter_mut().zip(&window.counts) {
                    *sum += u64::from(count.load(Ordering::Relaxed));
                }
            }
        }
        let total: u64 = counts.iter().sum();
        if total < at_least.max(1) {
            return None;
        }
        let rank = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(Duration::from_nanos(upper_bound(i)));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_bounds_its_latencies_within_a_quarter() {
        for nanos in [
            1u64, 999, 1_000, 1_999, 2_001, 3_500, 7_000, 99_999, 12_345_678,
        ] {
            let upper = upper_bound(bucket(nanos));
            assert!(upper >= nanos, "{nanos} ns: upper {upper}");
        }
        for micros in [4u64, 5, 7, 10, 99, 1_000, 12_345, 1_000_000, 3_600_000_000] {
            let nanos = micros * 1_000;
            let upper = upper_bound(bucket(nanos));
            assert!(upper >= nanos, "{micros} µs: upper {upper}");
            assert!(
                upper as f64 <= nanos as f64 * 1.25,
                "{micros} µs: upper {upper}"
            );
        }
    }

    #[test]
    fn the_percentile_follows_the_recent_windows() {
        let latencies = Latencies::new(Duration::from_secs(10));
        let second = 1_000_000_000;
        assert_eq!(latencies.percentile(0, 95.0, 20), None, "no data yet");
        for i in 0..100u64 {
            // 95 calls of 10 ms, 5 of 100 ms.
            let took = if i < 95 { 10_000_000 } else { 100_000_000 };
            latencies.record(second, took);
        }
        let p95 = latencies.percentile(second, 95.0, 20).unwrap();
        assert!(
            p95 >= Duration::from_millis(10) && p95 < Duration::from_millis(13),
            "{p95:?}"
        );
        let p99 = latencies.percentile(second, 99.0, 20).unwrap();
        assert!(p99 >= Duration::from_millis(100), "{p99:?}");
        // Still seen a window later; gone two windows later.
        assert!(latencies.percentile(15 * second, 95.0, 20).is_some());
        assert_eq!(latencies.percentile(25 * second, 95.0, 20), None);
    }
}
