//! [`Controller`]: an adaptive bulkhead's samples in, its limit out, shared by every thread
//! that releases a permit.
//!
//! The algorithms are sequential (Netflix's `AbstractLimit.onSample` is `synchronized`). Here a
//! release never waits for another: it takes the algorithm with `try_lock`, and if another
//! release holds it, its sample is skipped — a latency sample among thousands, as a sampling
//! profiler skips one — except a drop, which is counted and given to the next sample that gets
//! the algorithm (several drops between two samples back off once, as TCP does within one
//! round trip). Admissions never touch the algorithm.
//!
//! Not every call is timed: on a clock with a coarse reading (Linux's system clock), the first
//! call admitted in each tick of the coarse clock is, and the others cost the admission one
//! coarse reading instead of two precise ones and a turn at the algorithm at their release.
//! The algorithm sees at most a sample per tick, every call's below that rate, and every drop
//! a time-out or a caller giving up makes, timed or not (AIMD's `timeout`, a duration, applies
//! to timed calls). Choosing by the tick is independent of how long a call takes: the samples
//! are not biased. On a clock without a coarse reading (a manual clock) every call is timed.

use super::algorithms::Algorithm;
use super::limit::AdaptiveSettings;
use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering, TryLockError};

pub(crate) use super::sample::{Estimates, Sample};

/// The adaptive side of a bulkhead: off for a fixed limit.
pub(crate) struct Controller {
    /// Whether admissions are timed: an algorithm is installed.
    on: AtomicBool,
    algorithm: Mutex<Option<Algorithm>>,
    /// Drops whose sample found the algorithm taken.
    pending_drops: AtomicU64,
    /// The algorithm's [`Estimates`] after its last sample, as `f64` bits, for the metrics
    /// without the lock.
    baseline_rtt: AtomicU64,
    sample_rtt: AtomicU64,
    /// Seeds the algorithms' randomness: the bulkhead's id.
    seed: u64,
    /// The tick of the coarse clock a call was last timed in; `EVERY_CALL` when every call
    /// is timed.
    last_timed: AtomicU64,
}

/// `last_timed` of a controller that times every call.
const EVERY_CALL: u64 = u64::MAX;

/// What a sample did to the limit, when it changed it: from, to.
pub(crate) type Change = Option<(u32, u32)>;

impl Controller {
    /// A controller running `settings` (none: a fixed limit), timing a call per tick of the
    /// coarse clock if `per_tick`, else every call.
    pub(crate) fn new(settings: Option<&AdaptiveSettings>, seed: u64, per_tick: bool) -> Self {
        let controller = Controller {
            on: AtomicBool::new(false),
            algorithm: Mutex::new(None),
            pending_drops: AtomicU64::new(0),
            baseline_rtt: AtomicU64::new(0),
            sample_rtt: AtomicU64::new(0),
            seed,
            last_timed: AtomicU64::new(if per_tick { 0 } else { EVERY_CALL }),
        };
        controller.install(settings, || ());
        controller
    }

    /// Installs `settings` (a fresh algorithm at its initial limit; `None`: a fixed limit),
    /// then runs `apply` (which sets the bulkhead's limit) before any sample of the new
    /// algorithm, so that no sample of the old one overrides the limit it sets.
    pub(crate) fn install<R>(
        &self,
        settings: Option<&AdaptiveSettings>,
        apply: impl FnOnce() -> R,
    ) -> R {
        let mut algorithm = crate::sync::lock(&self.algorithm);
        *algorithm = settings.map(|s| Algorithm::new(s, self.seed));
        self.pending_drops.store(0, Ordering::Relaxed);
        self.publish(algorithm.as_ref());
        self.on.store(algorithm.is_some(), Ordering::Relaxed);
        apply()
    }

    /// Runs `f` with no sample taken meanwhile: no limit changes under it.
    pub(crate) fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _algorithm = crate::sync::lock(&self.algorithm);
        f()
    }

    /// Whether admissions are timed.
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Whether the call being admitted now is timed, `coarse` reading the coarse clock: the
    /// first of its tick (see the module's docs).
    #[inline]
    pub(crate) fn times_call(&self, coarse: impl FnOnce() -> u64) -> bool {
        let last = self.last_timed.load(Ordering::Relaxed);
        if last == EVERY_CALL {
            return true;
        }
        let now = coarse();
        // One winner per tick: the others see the tick taken, or lose the swap.
        now != last && self.last_timed.swap(now, Ordering::Relaxed) != now
    }

    /// Counts the drop of a call that was not timed, for the next sample.
    #[cold]
    pub(crate) fn untimed_drop(&self) {
        if self.is_on() {
            self.pending_drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes `sample`. Returns the change of the limit, if any, after `apply` applied the new
    /// limit (still under the algorithm, so that two changes apply in the order they were
    /// computed).
    pub(crate) fn sample(&self, sample: Sample, apply: impl FnOnce(u32)) -> Change {
        let dropped = sample.dropped;
        let mut guard = match self.algorithm.try_lock() {
            Ok(guard) => guard,
            // Nothing in the algorithm panics; were it poisoned, its state is still whole.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                // Taken by another sample: this one is skipped, a drop kept for the next.
                if dropped {
                    self.pending_drops.fetch_add(1, Ordering::Relaxed);
                }
                return None;
            }
        };
        let algorithm = guard.as_mut()?;
        let dropped = dropped
            || (self.pending_drops.load(Ordering::Relaxed) != 0
                && self.pending_drops.swap(0, Ordering::Relaxed) != 0);
        let before = algorithm.limit();
        let after = algorithm.sample(&Sample { dropped, ..sample });
        self.publish(Some(algorithm));
        if after == before {
            return None;
        }
        apply(after);
        Some((before, after))
    }

    fn publish(&self, algorithm: Option<&Algorithm>) {
        let estimates = algorithm.map(Algorithm::estimates).unwrap_or_default();
        self.baseline_rtt
            .store(estimates.baseline_rtt.to_bits(), Ordering::Relaxed);
        self.sample_rtt
            .store(estimates.sample_rtt.to_bits(), Ordering::Relaxed);
    }

    /// The algorithm's latency estimates, in nanoseconds, or `None` for a fixed limit.
    pub(crate) fn estimates(&self) -> Option<Estimates> {
        self.is_on().then(|| Estimates {
            baseline_rtt: f64::from_bits(self.baseline_rtt.load(Ordering::Relaxed)),
            sample_rtt: f64::from_bits(self.sample_rtt.load(Ordering::Relaxed)),
        })
    }
}
