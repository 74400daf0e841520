//! Writing a permit into its slot among a call's permits: shared by the gates that admit a call
//! (`gate`, the circuit breaker) and the permits that hold it (`call::held`).

/// Writes `permit` into the empty `slot` of a call's permits. A plain assignment would first
/// check whether the slot held a permit to drop; a plan holds each gate once, so it never
/// does, and the check is a load and a branch on every call.
#[inline(always)]
pub(crate) fn fill<P>(slot: &mut Option<P>, permit: P) {
    debug_assert!(slot.is_none(), "a plan holds each gate kind once");
    std::mem::forget(slot.replace(permit));
}
