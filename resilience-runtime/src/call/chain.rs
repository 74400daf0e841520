//! The call chain: the guard instances held by the guarded calls running on this thread, so
//! that a nested call recognises an instance it re-enters.

use std::cell::RefCell;

use super::held::Held;

/// One guard instance held by a guarded call running on this thread, and the tokio task the
/// call runs in (`None` outside any task).
///
/// Each thread keeps the instances held by the guarded calls running on it in [`CHAIN`],
/// innermost last: a sync call's for the extent of its body, an async call's for each poll of
/// its future (pushed again at every poll, so a future handed to another task carries nothing
/// from the task it was created in). A nested call recognises only the entries of its own
/// task: a task that a sync guarded call happens to drive on its thread (a nested `block_on`)
/// is not on that call's chain.
#[derive(Clone, Copy)]
struct Link {
    task: Option<tokio::task::Id>,
    id: u64,
}

thread_local! {
    /// The entries of the guarded calls running on this thread, innermost last (see [`Link`]).
    static CHAIN: RefCell<Vec<Link>> = const { RefCell::new(Vec::new()) };
}

/// Whether a guarded call runs on this thread (the current call may be nested in it).
#[inline]
pub(crate) fn chain_is_busy() -> bool {
    // `try_with`: a call made while this thread's locals are being destroyed has no chain.
    CHAIN
        .try_with(|chain| !chain.borrow().is_empty())
        .unwrap_or(false)
}

/// Whether a guarded call around the current one, in the same task, holds the instance `id`.
pub(crate) fn chain_holds(id: u64) -> bool {
    CHAIN
        .try_with(|chain| {
            let chain = chain.borrow();
            if chain.is_empty() {
                return false;
            }
            let task = tokio::task::try_id();
            chain.iter().any(|link| link.id == id && link.task == task)
        })
        .unwrap_or(false)
}

/// A call's entry on this thread's chain; dropping it takes the entry off again (on return
/// and on unwind). Kept in a local of the scope that runs the call, so entries come off in
/// the reverse order they went on.
pub(super) struct OnChain {
    /// The chain's length before the push; `None` if nothing was pushed.
    restore: Option<usize>,
}

impl OnChain {
    /// Pushes the guard instances `held` holds; pushes nothing if it holds none.
    #[inline]
    pub(super) fn push(held: &Held<'_>) -> OnChain {
        if held.is_empty() {
            return OnChain { restore: None };
        }
        let task = tokio::task::try_id();
        let restore = CHAIN.try_with(|chain| {
            let mut chain = chain.borrow_mut();
            let len = chain.len();
            chain.extend(held.instance_ids().map(|id| Link { task, id }));
            len
        });
        OnChain {
            restore: restore.ok(),
        }
    }
}

impl Drop for OnChain {
    #[inline]
    fn drop(&mut self) {
        if let Some(len) = self.restore {
            let _ = CHAIN.try_with(|chain| chain.borrow_mut().truncate(len));
        }
    }
}
