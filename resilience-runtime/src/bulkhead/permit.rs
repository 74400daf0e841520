//! [`BulkheadPermit`]: the permit of one admitted call, and how it ends (an adaptive limit's
//! sample).

use std::fmt;

use super::Bulkhead;

/// The permit of one call admitted by a [`Bulkhead`]; dropping it frees the permit.
///
/// The permit is released when it is dropped, so it is returned on every path out of the
/// call: return, error, panic, or a future dropped mid-call. Under fair call handling a
/// released permit goes straight to the longest waiter. Under an
/// [`adaptive`](super::BulkheadConfigBuilder::adaptive) limit, dropping it counts a call that
/// ran to its end; [`record_drop`](Self::record_drop) and
/// [`record_ignored`](Self::record_ignored) release it saying otherwise (a guarded call says
/// so by itself).
#[must_use = "the permit is released as soon as it is dropped"]
// 12 bytes rather than 16 (align 4, a `u32` start): the permit is in every guarded call's
// future, and 16 took a call with a fallback past the 128 bytes moved without a call to
// `memcpy` (tests/tests/future_size.rs). Fields are read by value only.
#[repr(C, packed(4))]
pub struct BulkheadPermit<'a> {
    bulkhead: &'a Bulkhead,
    /// When the call was admitted under an adaptive limit, in [`tick`]s of the precise
    /// clock; a fleet bulkhead's lease number (a fleet limit is never adaptive); else
    /// `UNTIMED`. (How the call ended is given by the method that consumes the
    /// permit, not kept in it.)
    pub(super) start: u32,
}

/// The `start` of a permit not timed (a fixed limit).
pub(super) const UNTIMED: u32 = u32::MAX;

/// A tick is 2^10 ns, about a microsecond.
pub(super) const TICK_SHIFT: u32 = 10;

/// A precise clock reading in ticks, wrapping every 2^32 ticks (73 minutes): the duration of a
/// call shorter than that is the wrapping difference of its two ticks, to within a tick.
pub(super) fn tick(nanos: u64) -> u32 {
    // Keeps the low 32 bits: the wrap is the point.
    (nanos >> TICK_SHIFT) as u32
}

/// How an admitted call ended, for an adaptive limit's sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It ran to its end: its duration is a sample.
    Completed,
    /// It timed out or was given up: a drop.
    Dropped,
    /// It tells nothing of the dependency (refused further in, a panic, an ignored error).
    Unsampled,
}

impl<'a> BulkheadPermit<'a> {
    /// The permit of a call `bulkhead` admitted, timed from `start` (or `UNTIMED`).
    #[inline]
    pub(super) fn new(bulkhead: &'a Bulkhead, start: u32) -> Self {
        BulkheadPermit { bulkhead, start }
    }
}

impl BulkheadPermit<'_> {
    /// The process-wide id of the bulkhead (re-entrancy tracking of the call chain).
    #[inline]
    pub(crate) fn instance_id(&self) -> u64 {
        self.bulkhead.id()
    }

    /// Releases the permit, the call having ended as `end` (an adaptive limit's sample; a
    /// fixed limit ignores it).
    #[inline]
    pub(crate) fn finish(self, end: Ended) {
        let this = std::mem::ManuallyDrop::new(self);
        this.release(end);
    }

    /// Releases the permit of a call that timed out, or that its caller gave up: an adaptive
    /// limit counts a drop (dropping the permit counts a call that ran to its end).
    pub fn record_drop(self) {
        self.finish(Ended::Dropped);
    }

    /// Releases the permit of a call whose duration says nothing of the dependency (it ended
    /// in an error unrelated to load, or never reached the dependency): an adaptive limit
    /// takes no sample.
    pub fn record_ignored(self) {
        self.finish(Ended::Unsampled);
    }

    #[inline]
    fn release(&self, end: Ended) {
        let (bulkhead, start) = (self.bulkhead, self.start);
        if start == UNTIMED {
            bulkhead.semaphore.release();
            if end == Ended::Dropped {
                bulkhead.controller.untimed_drop();
            }
        } else {
            bulkhead.release_sampled(start, end);
        }
    }
}

impl Drop for BulkheadPermit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.release(Ended::Completed);
    }
}

impl fmt::Debug for BulkheadPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadPermit")
            .field("bulkhead", &{ self.bulkhead }.name)
            .finish()
    }
}
