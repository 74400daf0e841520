//! [`Held`]: the permits of one call being made, and the order they were taken in.

use crate::bulkhead::{Bulkhead, BulkheadPermit};
use crate::circuit_breaker::{CircuitBreaker, CircuitPermit};
use crate::error::Rejected;
use crate::gate::{Entry, Gate, Permit};
use crate::outcome::CallOutcome;

/// The kinds of gate a call can hold, one slot of [`Held`] each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GateKind {
    Bulkhead,
    CircuitBreaker,
}

/// The most gates one call holds: one of each kind.
const MAX_GATES: usize = 2;

/// The permits of a call being made: one slot per gate kind (a plan holds each kind at most
/// once), and the kinds in the order they were taken, which is the plan's. Written in place
/// as the gates admit the call, so that nothing of the call's state is moved on the way (it
/// lives in the caller's frame or future). However the call ends, the permits go innermost
/// first (the reverse of `order`); dropped, it releases what it still holds, recording
/// nothing.
pub(crate) struct Held<'a> {
    bulkhead: Option<BulkheadPermit<'a>>,
    breaker: Option<CircuitPermit<'a>>,
    /// The kinds held, outermost first; `None` past the last.
    order: [Option<GateKind>; MAX_GATES],
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
    const KIND: GateKind;
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<Self::Permit<'a>>;
}

impl HeldSlot for Bulkhead {
    const KIND: GateKind = GateKind::Bulkhead;
    #[inline(always)]
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<BulkheadPermit<'a>> {
        &mut held.bulkhead
    }
}

impl HeldSlot for CircuitBreaker {
    const KIND: GateKind = GateKind::CircuitBreaker;
    #[inline(always)]
    fn slot<'h, 'a>(held: &'h mut Held<'a>) -> &'h mut Option<CircuitPermit<'a>> {
        &mut held.breaker
    }
}

impl<'a> Held<'a> {
    pub(crate) const fn new() -> Self {
        Held {
            bulkhead: None,
            breaker: None,
            order: [None; MAX_GATES],
        }
    }

    #[inline(always)]
    fn push(&mut self, kind: GateKind) {
        match self.order.iter_mut().find(|k| k.is_none()) {
            Some(free) => *free = Some(kind),
            None => debug_assert!(false, "a plan holds each gate kind once"),
        }
    }

    /// Asks `gate` to admit the call now, its permit written in its slot.
    #[inline(always)]
    pub(crate) fn try_enter<G: HeldSlot>(&mut self, gate: &'a G) -> Result<Entry, Rejected> {
        debug_assert!(G::slot(self).is_none(), "a plan holds each gate kind once");
        let entry = gate.try_enter(G::slot(self))?;
        if entry == Entry::Entered {
            self.push(G::KIND);
        }
        Ok(entry)
    }

    /// Holds a permit `gate` granted after a wait.
    #[inline]
    pub(crate) fn hold<G: HeldSlot>(&mut self, permit: G::Permit<'a>) {
        debug_assert!(G::slot(self).is_none(), "a plan holds each gate kind once");
        *G::slot(self) = Some(permit);
        self.push(G::KIND);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order[0].is_none()
    }

    /// The number of gates held.
    pub(crate) fn len(&self) -> usize {
        self.order.iter().flatten().count()
    }

    /// The instance ids of the gates held, outermost first.
    #[inline]
    pub(crate) fn instance_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.iter().map_while(|kind| {
            let kind = (*kind)?;
            match kind {
                GateKind::Bulkhead => self.bulkhead.as_ref().map(Permit::instance_id),
                GateKind::CircuitBreaker => self.breaker.as_ref().map(Permit::instance_id),
            }
        })
    }

    /// A gate refused the call with `rejected`: every gate held (outside that gate) sees the
    /// rejection and is released, innermost first; returns the rejection.
    #[cold]
    pub(crate) fn rejected(&mut self, rejected: Rejected) -> Rejected {
        self.end(End::Rejected(&rejected));
        rejected
    }

    /// The call completed with `outcome`: each gate records it and is released, innermost
    /// first.
    #[inline]
    pub(crate) fn complete(&mut self, outcome: CallOutcome) {
        self.end(End::Complete(outcome));
    }

    /// Releases every permit, innermost first, recording nothing.
    pub(crate) fn abandon(&mut self) {
        self.end(End::Abandon);
    }

    #[inline(always)]
    fn end(&mut self, end: End<'_>) {
        let order = std::mem::replace(&mut self.order, [None; MAX_GATES]);
        for kind in order.into_iter().rev().flatten() {
            match kind {
                GateKind::Bulkhead => finish(self.bulkhead.take(), end),
                GateKind::CircuitBreaker => finish(self.breaker.take(), end),
            }
        }
    }
}

#[inline(always)]
fn finish<P: Permit>(permit: Option<P>, end: End<'_>) {
    if let Some(permit) = permit {
        match end {
            End::Complete(outcome) => permit.complete(outcome),
            End::Rejected(rejection) => permit.rejected(rejection),
            End::Abandon => drop(permit),
        }
    }
}

impl Drop for Held<'_> {
    /// Abandoned (a panic, or the future dropped): release innermost first, record nothing.
    fn drop(&mut self) {
        self.abandon();
    }
}
