//! The call chain: the guard instances held by the guarded calls running on this thread, so
//! that a nested call recognises an instance it re-enters.
//!
//! Each running guarded call links one [`Frame`] into this thread's chain for the extent of its
//! body (a sync call) or of each poll of its future (an async call: linked again at every poll,
//! so a future handed to another task carries nothing from the task it was created in). The
//! frame lives on the stack of the function that runs the body, and points at the call's
//! permits (or, for a call of one gate, names that gate's instance); the thread-local holds
//! only the innermost frame. Linking is two stores, and
//! unlinking a comparison (that frames end in stack order, see [`Unlink`]) and a store,
//! whatever the number of guards: what every call pays. Walking the frames,
//! reading the instance ids they hold, is left to the rare call that is nested in
//! another one under a policy that checks.
//!
//! Written by hand, in the manner of `scoped-tls` (a thread-local pointer to a value on the
//! stack, set for the extent of a closure): a crate for it would still have to be told the
//! parent of each frame and the task, so it would save nothing.

use std::cell::Cell;
use std::ptr;

use super::held::Held;

/// One guarded call running on this thread: what it holds, the tokio task it runs in (`None`
/// outside any task), and the call it is nested in.
///
/// A nested call recognises only the frames of its own task: a task that a sync guarded call
/// happens to drive on its thread (a nested `block_on`) is not on that call's chain.
struct Frame {
    /// The frame of the call around this one on this thread; null for the outermost.
    parent: *const Frame,
    holds: Holds,
    task: Option<tokio::task::Id>,
}

/// What a frame's call holds, as a nested call reads it: the instance ids of its gates.
#[derive(Clone, Copy)]
enum Holds {
    /// The permits of the call. Their lifetime is erased: the frame is unlinked before the
    /// permits can go (see [`on_chain`]), and only the instance ids are read through it.
    Gates(*const Held<'static>),
    /// The one gate of a plan of one gate, by its instance id ([`on_chain_one`]): such a
    /// call keeps its permit in a local of its own, not in a [`Held`].
    Gate(u64),
}

thread_local! {
    /// The innermost frame of the guarded calls running on this thread; null when none runs.
    /// A `const` thread-local of a type without `Drop`: on targets with native thread-locals,
    /// always accessible and without lazy state.
    static INNERMOST: Cell<*const Frame> = const { Cell::new(ptr::null()) };

    /// Set once a frame was found out of stack order on this thread (see [`Unlink`]): from then
    /// on the frames are never read, and re-entry goes unrecognised on this thread.
    static BROKEN: Cell<bool> = const { Cell::new(false) };
}

/// The innermost frame; null when none runs, or while this thread's locals are destroyed.
#[inline(always)]
fn innermost() -> *const Frame {
    INNERMOST.try_with(Cell::get).unwrap_or(ptr::null())
}

/// Runs `body` with the call holding `held` on this thread's chain; unlinks it again on return
/// and on unwind. A call that holds nothing (its every gate passed through as re-entered) is
/// linked too: its frame matches no instance, and checking for that on every call would cost
/// more than the walk a nested call then makes. A call made while this thread's locals are
/// destroyed runs unlinked.
#[inline(always)]
pub(super) fn on_chain<R>(held: &Held<'_>, body: impl FnOnce() -> R) -> R {
    link(
        Holds::Gates(ptr::from_ref(held).cast::<Held<'static>>()),
        body,
    )
}

/// [`on_chain`] for a call that holds the one gate `id` (a plan of one gate, whose permit is
/// not in a [`Held`]).
#[inline(always)]
pub(super) fn on_chain_one<R>(id: u64, body: impl FnOnce() -> R) -> R {
    link(Holds::Gate(id), body)
}

#[inline(always)]
fn link<R>(holds: Holds, body: impl FnOnce() -> R) -> R {
    let parent = innermost();
    let frame = Frame {
        parent,
        holds,
        task: tokio::task::try_id(),
    };
    let this = ptr::from_ref(&frame);
    if INNERMOST.try_with(|innermost| innermost.set(this)).is_err() {
        return body();
    }
    // Declared after `frame`, so dropped before it: the frame is unlinked before it goes.
    let _unlink = Unlink { this, parent };
    body()
}

/// Unlinks a frame on return and on unwind: restores the chain to the frame's parent.
///
/// Frames end in stack order, innermost first, so the chain's innermost frame is this one. A
/// stackful coroutine can break that order (its stack, with a frame linked on it, freed while
/// a frame linked after it still runs): then the chain may point at freed frames. The unlink
/// checks for it, one comparison, and if so marks the thread's chain broken, so that no frame
/// is ever read on this thread again (re-entry then goes unrecognised there: a loss of
/// strictness, never a read of freed memory).
struct Unlink {
    this: *const Frame,
    parent: *const Frame,
}

impl Drop for Unlink {
    #[inline(always)]
    fn drop(&mut self) {
        let _ = INNERMOST.try_with(|innermost| {
            if innermost.get() != self.this {
                break_chain();
            }
            innermost.set(self.parent);
        });
    }
}

#[cold]
#[inline(never)]
fn break_chain() {
    let _ = BROKEN.try_with(|broken| broken.set(true));
}

/// Whether a guarded call runs on this thread (the current call may be nested in it).
#[inline(always)]
pub(crate) fn chain_is_busy() -> bool {
    !innermost().is_null()
}

/// Whether a guarded call around the current one, in the same task, holds the instance `id`.
#[allow(unsafe_code)] // reading the frames: see the comment in the loop
pub(crate) fn chain_holds(id: u64) -> bool {
    let mut frame = innermost();
    if frame.is_null() || BROKEN.try_with(Cell::get).unwrap_or(true) {
        return false;
    }
    let task = tokio::task::try_id();
    while !frame.is_null() {
        // SAFETY: a frame is linked only by `link` (through `on_chain` or `on_chain_one`),
        // which unlinks it (restoring its parent) before its stack frame ends, on return and
        // on unwind, and links frames strictly nested on this thread: while frames end in stack
        // order, every frame reachable from `INNERMOST` is alive, and so are the permits a
        // `Holds::Gates` points at, which `on_chain` borrows for the frame's whole life (a
        // `Holds::Gate` points at nothing). A frame ended out of stack order (a stackful coroutine)
        // marks the chain broken (see `Unlink`), and a broken chain is not read (above).
        let Frame {
            parent,
            holds,
            task: frame_task,
        } = unsafe { &*frame };
        let holds_id = || match *holds {
            Holds::Gates(held) => unsafe { &*held }.instance_ids().any(|held| held == id),
            Holds::Gate(gate) => gate == id,
        };
        if *frame_task == task && holds_id() {
            return true;
        }
        frame = *parent;
    }
    false
}

/// Polls the call's future in `slot` with `held` on the call chain (`None`: a plan without
/// gates, whose call needs no frame); once it is ready, drops it there (its destructors are
/// part of the call).
#[inline]
pub(super) fn poll_in_place<F: std::future::Future>(
    held: Option<&Held<'_>>,
    mut slot: std::pin::Pin<&mut Option<F>>,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<F::Output> {
    let mut poll = || {
        let Some(running) = slot.as_mut().as_pin_mut() else {
            panic!("a guarded call's future was polled after it completed");
        };
        let polled = running.poll(cx);
        if polled.is_ready() {
            slot.set(None);
        }
        polled
    };
    match held {
        None => poll(),
        Some(held) => on_chain(held, poll),
    }
}

/// Drops the call's future in `slot`, if one is there, with `held` on the call chain (its
/// destructors are part of the call).
pub(super) fn drop_in_place<F>(held: Option<&Held<'_>>, mut slot: std::pin::Pin<&mut Option<F>>) {
    if slot.is_none() {
        return;
    }
    match held {
        None => slot.set(None),
        Some(held) => on_chain(held, || slot.set(None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulkhead::Bulkhead;
    use crate::{Guard, Registry};

    /// A frame ended out of stack order (what a stackful coroutine freed mid-call would do)
    /// breaks the thread's chain: it is never read again, so a stale pointer left in it is
    /// never followed.
    #[test]
    fn a_frame_ended_out_of_order_breaks_the_chain_for_good() {
        std::thread::spawn(|| {
            let registry = Registry::new();
            let plan = registry.plan(&[Guard::bulkhead("chain")]).unwrap();
            let bulkhead = registry.bulkhead("chain");
            let id = bulkhead.id();
            // A call's permits as a plan of that one bulkhead holds them.
            let mut held = Held::new();
            held.start(plan.order());
            held.hold::<Bulkhead>(bulkhead.try_acquire().unwrap());
            on_chain(&held, || {
                assert!(chain_is_busy());
                assert!(chain_holds(id), "an intact chain is read");
                // An unlink whose frame is not the innermost one. It leaves `stale`, which
                // holds `id` too, as the innermost frame: read, it would answer yes.
                let stale = Frame {
                    parent: ptr::null(),
                    holds: Holds::Gates(ptr::from_ref(&held).cast::<Held<'static>>()),
                    task: None,
                };
                drop(Unlink {
                    this: ptr::from_ref(&stale),
                    parent: ptr::from_ref(&stale),
                });
                assert!(
                    BROKEN.get(),
                    "an out-of-order unlink marks the chain broken"
                );
                assert!(!chain_holds(id), "a broken chain is never read");
            });
            on_chain(&held, || {
                assert!(!chain_holds(id), "nor is a frame linked after it broke");
            });
        })
        .join()
        .expect("the thread runs");
    }
}
