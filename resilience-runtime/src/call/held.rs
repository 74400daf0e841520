//! [`Held`]: the permits of one call being made, and the order they were taken in.

use crate::bulkhead::{Bulkhead, BulkheadPermit};
use crate::circuit_breaker::{CircuitBreaker, CircuitPermit};
use crate::error::Rejected;
use crate::fault::FaultInjector;
use crate::gate::FaultPermit;
use crate::gate::RatePermit;
use crate::gate::{Entry, Gate, Permit};
use crate::outcome::CallOutcome;
use crate::plan::{GateKind, GateOrder, Step};
use crate::rate_limiter::RateLimiter;

/// The permits of a call being made: one slot per gate kind (a plan holds each kind at most
/// once), and the plan's order of the kinds. Written in place as the gates admit the call, so
/// that nothing of the call's state is moved on the way (it lives in the caller's frame or
/// future). However the call ends, the permits go innermost first (the reverse of the plan's
/// order); dropped, it releases what it still holds, recording nothing.
pub(crate) struct Held<'a> {
    bulkhead: Option<BulkheadPermit<'a>>,
    rate_limiter: Option<RatePermit<'a>>,
    breaker: Option<CircuitPermit<'a>>,
    fault: Option<FaultPermit>,
    /// The plan's order of the gate kinds, set as the call starts entering the plan: the
    /// order the slots are released in, innermost first, whichever of them are held.
    order: GateOrder,
}

/// How the permits are let go.
#[derive(Clone, Copy)]
enum End<'r> {
    /// The call ran to completion.
    Complete(CallOutcome),
    /// A gate further in refused it.
    Rejected(&'r Rejected),
    /// A panic, a dropped future, or a call that never ran: nothing is recorded.
    Abandon,
}

/// The slot of [`Held`] that holds a gate's permit: one impl per gate kind.
pub(crate) trait HeldSlot: Gate + 'static {
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<Self::Permit<'a>>;
}

impl HeldSlot for Bulkhead {
    #[inline]
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<BulkheadPermit<'a>> {
        &mut held.bulkhead
    }
}

impl HeldSlot for RateLimiter {
    #[inline]
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<RatePermit<'a>> {
        &mut held.rate_limiter
    }
}

impl HeldSlot for CircuitBreaker {
    #[inline]
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<CircuitPermit<'a>> {
        &mut held.breaker
    }
}

impl HeldSlot for FaultInjector {
    #[inline]
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<FaultPermit> {
        &mut held.fault
    }
}

impl<'a> Held<'a> {
    pub(crate) const fn new() -> Self {
        Held {
            bulkhead: None,
            rate_limiter: None,
            breaker: None,
            fault: None,
            order: GateOrder::EMPTY,
        }
    }

    /// The permits of one lane of a hedge (a run of the rest beside others), released in the
    /// plan's `order`.
    pub(crate) fn lane(order: GateOrder) -> Self {
        let mut held = Held::new();
        held.order = order;
        held
    }

    /// Moves the permits of the gates `steps` into a [`lane`](Self::lane) of their own: those
    /// of the first run of a hedge, which it took in the call's permits before the hedge had
    /// another run beside it.
    pub(crate) fn split_off(&mut self, steps: &[Step]) -> Held<'a> {
        let mut lane = Held::lane(self.order);
        for step in steps {
            match step.kind() {
                GateKind::Bulkhead => lane.bulkhead = self.bulkhead.take(),
                GateKind::RateLimiter => lane.rate_limiter = self.rate_limiter.take(),
                GateKind::CircuitBreaker => lane.breaker = self.breaker.take(),
                GateKind::Fault => lane.fault = self.fault.take(),
            }
        }
        lane
    }

    /// Takes the release order of the plan whose gates the call enters.
    #[inline(always)]
    pub(crate) fn start(&mut self, order: GateOrder) {
        self.order = order;
    }

    /// Asks `gate` to admit the call now, its permit written in its slot.
    #[inline(always)]
    pub(crate) fn try_enter<G: HeldSlot>(&mut self, gate: &'a G) -> Result<Entry, Rejected> {
        debug_assert!(G::slot(self).is_none(), "a plan holds each gate kind once");
        gate.try_enter(G::slot(self))
    }

    /// Holds a permit `gate` granted after a wait.
    #[inline]
    pub(crate) fn hold<G: HeldSlot>(&mut self, permit: G::Permit<'a>) {
        crate::slot::fill(G::slot(self), permit);
    }

    /// Whether no gate is held. (The slots named one by one, by destructuring: a new slot
    /// does not compile until it is listed here. Cheaper than walking the order, and called
    /// on every call: after the call ended, by the drop.)
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        let Held {
            bulkhead,
            rate_limiter,
            breaker,
            fault,
            order: _,
        } = self;
        bulkhead.is_none() && rate_limiter.is_none() && breaker.is_none() && fault.is_none()
    }

    /// The number of gates held.
    pub(crate) fn len(&self) -> usize {
        self.instance_ids().count()
    }

    /// The instance ids of the gates held, outermost first.
    #[inline]
    pub(crate) fn instance_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.kinds().filter_map(|kind| match kind {
            GateKind::Bulkhead => self.bulkhead.as_ref().map(Permit::instance_id),
            GateKind::RateLimiter => self.rate_limiter.as_ref().map(Permit::instance_id),
            GateKind::CircuitBreaker => self.breaker.as_ref().map(Permit::instance_id),
            GateKind::Fault => self.fault.as_ref().map(Permit::instance_id),
        })
    }

    /// A gate refused the call with `rejected`: every gate held (outside that gate) sees the
    /// rejection and is released, innermost first.
    ///
    /// The rejection is borrowed, not moved in and back out. Out of line: inlined, it saved a
    /// refusal 15 instructions and cost every admitted call 4 to 11 (the code around it laid
    /// out worse), and admitted calls are most calls.
    ///
    /// The release itself is a second function: this one, left at once when nothing is held
    /// (the first gate refused, as a lone open breaker does), then saves no registers (the
    /// release's code around it made every refusal save and restore six: a refusal of a
    /// function with one annotation ran 13 instructions more).
    #[cold]
    #[inline(never)]
    pub(crate) fn rejected(&mut self, rejected: &Rejected) {
        if !self.is_empty() {
            self.release_rejected(rejected);
        }
    }

    #[cold]
    #[inline(never)]
    fn release_rejected(&mut self, rejected: &Rejected) {
        self.end(End::Rejected(rejected));
    }

    /// The call completed with `outcome`: each gate records it and is released, innermost
    /// first. Leaves every slot empty.
    #[inline(always)]
    pub(crate) fn complete_in_place(&mut self, outcome: CallOutcome) {
        self.end(End::Complete(outcome));
    }

    /// Releases every permit, innermost first, recording nothing.
    pub(crate) fn abandon(&mut self) {
        self.end(End::Abandon);
    }

    /// The gates `steps` (one segment of a plan run as nested segments) complete with
    /// `outcome`, innermost first; the slots of the other gates are left as they are.
    pub(crate) fn complete_segment(&mut self, steps: &[Step], outcome: CallOutcome) {
        self.end_segment(steps, End::Complete(outcome));
    }

    /// A guard further in than the gates `steps` refused the call (or cut it off), or one of
    /// them did: those held see `rejected` and are released, innermost first.
    pub(crate) fn rejected_segment(&mut self, steps: &[Step], rejected: &Rejected) {
        self.end_segment(steps, End::Rejected(rejected));
    }

    /// Releases the gates `steps` still held, innermost first, recording nothing.
    pub(crate) fn abandon_segment(&mut self, steps: &[Step]) {
        self.end_segment(steps, End::Abandon);
    }

    fn end_segment(&mut self, steps: &[Step], end: End<'_>) {
        for step in steps.iter().rev() {
            self.finish(step.kind(), end);
        }
    }

    #[inline(always)]
    fn end(&mut self, end: End<'_>) {
        if self.order.is_declared() {
            // The default precedence (or any order that agrees with it): a fixed sequence the
            // compiler unrolls, empty slots skipped.
            for kind in GateKind::ALL.into_iter().rev() {
                self.finish(kind, end);
            }
        } else {
            let order = self.order;
            for kind in order.kinds().rev() {
                self.finish(kind, end);
            }
        }
    }

    #[inline(always)]
    fn finish(&mut self, kind: GateKind, end: End<'_>) {
        match kind {
            GateKind::Bulkhead => finish(self.bulkhead.take(), end),
            GateKind::RateLimiter => finish(self.rate_limiter.take(), end),
            GateKind::CircuitBreaker => finish(self.breaker.take(), end),
            GateKind::Fault => finish(self.fault.take(), end),
        }
    }
}

#[inline(always)]
fn finish<P: Permit>(permit: Option<P>, end: End<'_>) {
    if let Some(permit) = permit {
        match end {
            End::Complete(outcome) => permit.complete(outcome),
            End::Rejected(rejection) => permit.rejected(rejection),
            End::Abandon => permit.abandoned(),
        }
    }
}

impl Drop for Held<'_> {
    /// Abandoned (a panic, or the future dropped): release innermost first, record nothing.
    #[inline]
    fn drop(&mut self) {
        if !self.is_empty() {
            self.abandon();
        }
    }
}
