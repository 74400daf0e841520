//! Writing a permit into its slot among a call's permits: shared by the gates that admit a call
//! (`gate`, the circuit breaker) and the permits that hold it (`call::held`).

/// Writes `permit` into the empty `slot` of a call's permits. A plan holds each gate once, so
/// the slot is empty; were it not, the permit in it is released, never leaked.
#[inline(always)]
pub(crate) fn fill<P>(slot: &mut Option<P>, permit: P) {
    debug_assert!(slot.is_none(), "a plan holds each gate kind once");
    *slot = Some(permit);
}
