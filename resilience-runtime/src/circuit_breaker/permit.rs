//! [`CircuitPermit`]: permission to make one call through a breaker, and how it records.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use super::{Finish, Shared};
use crate::clock::Reading;
use crate::error::Rejected;
use crate::sync::Ordering;

/// Whether the permit takes part in the accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PermitKind {
    /// Disabled state: nothing is recorded.
    Unrecorded,
    /// Closed: recorded in the sliding window under its lock only (the fast path).
    Closed,
    /// Metrics-only: recorded in the sliding window under the state machine's lock.
    Recorded,
    /// Half-open: one of the bounded probes.
    Probe,
}

/// Permission to make one call through a [`CircuitBreaker`](super::CircuitBreaker); report how the call ended with
/// one of the `record_*` methods.
///
/// The elapsed time of the call (for slow calls and events) is measured from
/// [`try_acquire`](super::CircuitBreaker::try_acquire) to the `record_*` call, with the clock the
/// [module docs](super) describe (none, coarse or precise; always precise while someone is
/// subscribed to the breaker's events). An outcome
/// is recorded only if the breaker has not changed state since the permit was taken. Dropping
/// the permit without recording abandons the call (a dropped future, a panic): nothing is
/// recorded, and a half-open probe is given back.
#[must_use = "dropping a permit without recording an outcome abandons the call"]
pub struct CircuitPermit<'a> {
    shared: &'a Arc<Shared>,
    epoch: u64,
    /// When the call started, read with `reading` (the end is read the same way).
    pub(super) start: u64,
    reading: Reading,
    kind: PermitKind,
}

impl<'a> CircuitPermit<'a> {
    #[inline(always)]
    pub(super) fn new(
        shared: &'a Arc<Shared>,
        epoch: u64,
        start: u64,
        reading: Reading,
        kind: PermitKind,
    ) -> Self {
        CircuitPermit {
            shared,
            epoch,
            start,
            reading,
            kind,
        }
    }

    #[cfg(test)]
    pub(super) fn reading(&self) -> Reading {
        self.reading
    }
}

impl CircuitPermit<'_> {
    /// The call succeeded.
    #[inline(always)]
    pub fn record_success(self) {
        self.finish(Finish::Success);
    }

    /// The call failed.
    #[inline(always)]
    pub fn record_failure(self) {
        self.finish(Finish::Failure);
    }

    /// The call ended in an error that counts as neither success nor failure (a half-open probe
    /// is given back).
    pub fn record_ignored(self) {
        self.finish(Finish::Ignored);
    }

    /// The call was rejected further in by another guard (a bulkhead inside this breaker): a
    /// failure if the configuration's `record_rejections` is set; otherwise nothing is recorded
    /// and a half-open probe is given back. A [`Rejected::TimedOut`] is always a failure (a time
    /// limiter inside the breaker cut off a call to the dependency that took too long), and so
    /// is an injected error (a fault standing for the dependency's).
    pub fn record_rejected(self, rejection: &Rejected) {
        let finish =
            if rejection.is_failure() || self.shared.record_rejections.load(Ordering::Relaxed) {
                Finish::Failure
            } else {
                Finish::GiveBack
            };
        self.finish(finish);
    }

    /// The process-wide id of the breaker (re-entrancy tracking of the call chain).
    #[inline]
    pub(crate) fn instance_id(&self) -> u64 {
        self.shared.id
    }

    /// Whether this permit is one of the probe calls of the half-open state.
    pub fn is_probe(&self) -> bool {
        self.kind == PermitKind::Probe
    }

    #[inline(always)]
    fn finish(self, finish: Finish) {
        let this = ManuallyDrop::new(self);
        match (this.kind, finish) {
            // Nothing to record: no lock taken.
            (PermitKind::Unrecorded, _)
            | (PermitKind::Closed | PermitKind::Recorded, Finish::GiveBack) => {}
            // Only an event to emit, and nobody listens; no duration to keep.
            (PermitKind::Closed | PermitKind::Recorded, Finish::Ignored)
                if !this.shared.subscribers.per_call()
                    && !this.shared.record_call_durations.load(Ordering::Relaxed) =>
            {
                this.shared.count_ignored();
            }
            (PermitKind::Closed, Finish::Success | Finish::Failure) => {
                let failed = finish == Finish::Failure;
                this.shared
                    .finish_closed(this.epoch, this.start, this.reading, failed);
            }
            _ => this
                .shared
                .finish(this.epoch, this.start, this.reading, finish),
        }
    }
}

impl Drop for CircuitPermit<'_> {
    fn drop(&mut self) {
        if self.kind == PermitKind::Probe {
            self.shared
                .finish(self.epoch, self.start, self.reading, Finish::GiveBack);
        }
    }
}

impl fmt::Debug for CircuitPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitPermit")
            .field("breaker", &self.shared.name)
            .field("epoch", &self.epoch)
            .field("probe", &(self.kind == PermitKind::Probe))
            .finish()
    }
}
