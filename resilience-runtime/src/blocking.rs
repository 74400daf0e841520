//! Where a sync guarded call may block its thread while a guard makes it wait: a bulkhead's
//! wait for a permit, a rate limiter's wait for its next cycle, a retry's wait between
//! attempts.
//!
//! Blocking is fine on a plain thread. On a tokio runtime's thread it stalls every task that
//! thread runs, the one holding the permit included, so a sync call made from async code
//! could wait its whole `max_wait_duration` for a permit that cannot come back. Before it
//! waits, a call therefore looks at where it runs, as tokio's own blocking calls do:
//!
//! | where | the wait |
//! |---|---|
//! | no tokio runtime | blocks the thread |
//! | a multi-thread runtime (a worker, `spawn_blocking`, `block_on`) | blocks through [`tokio::task::block_in_place`], which hands the worker's other tasks to another thread first |
//! | a current-thread runtime | is not taken: a gate refuses at once with [`Rejected::WouldBlock`](crate::Rejected::WouldBlock), a retry ends with the attempt's error |
//! | inside [`allow_blocking`] | blocks the thread |
//!
//! Only a call that must wait asks, so a call admitted at once pays nothing.
//!
//! Tokio does not tell a library whether a thread of a current-thread runtime is its
//! executor or one of its `spawn_blocking` threads (both see the runtime's `Handle`), so a
//! sync guarded call that would wait is refused on both; [`allow_blocking`] is how code on a
//! `spawn_blocking` thread says that waiting there is fine.

use std::cell::Cell;

use tokio::runtime::{Handle, RuntimeFlavor};

thread_local! {
    /// Inside [`allow_blocking`] on this thread.
    static ALLOWED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with this thread marked as one where a sync guarded call may block while a guard
/// makes it wait, whatever tokio runtime it belongs to.
///
/// A sync guarded function called on a current-thread tokio runtime does not wait for a full
/// bulkhead or a rate limiter's next cycle: it is refused with
/// [`Rejected::WouldBlock`](crate::Rejected::WouldBlock), because the task that would let it
/// in may be one the blocked thread runs. A `spawn_blocking` thread of that runtime may block,
/// but tokio does not let a library tell it from the executor's thread; wrap the call in
/// `allow_blocking` there. Do not use it on the executor's thread itself: the wait would stall
/// every task of the runtime until it ends.
///
/// On a multi-thread runtime and on plain threads nothing needs it: there a call waits.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{allow_blocking, Bulkhead, BulkheadConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let config = BulkheadConfig::builder()
///     .max_concurrent_calls(1)
///     .max_wait_duration(Duration::from_secs(1))
///     .build()
///     .unwrap();
/// let bulkhead = std::sync::Arc::new(Bulkhead::new("ledger", config));
/// let held = bulkhead.clone();
/// let waiter = tokio::task::spawn_blocking(move || {
///     // Waits for the permit the executor's task below gives back.
///     allow_blocking(|| held.acquire_blocking().map(drop))
/// });
/// let permit = bulkhead.try_acquire().unwrap();
/// tokio::time::sleep(Duration::from_millis(20)).await;
/// drop(permit);
/// assert!(waiter.await.unwrap().is_ok());
/// # }
/// ```
pub fn allow_blocking<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ALLOWED.with(|allowed| allowed.set(self.0));
        }
    }
    let _restore = Restore(ALLOWED.with(|allowed| allowed.replace(true)));
    f()
}

/// How a wait may block the current thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocking {
    /// Block it: no runtime is stalled.
    Thread,
    /// Block it through `block_in_place`: a worker of a multi-thread runtime first hands its
    /// other tasks on.
    InPlace,
    /// Do not wait: the thread may be a current-thread runtime's only one.
    Refused,
}

impl Blocking {
    /// Where the current thread stands. Reads a thread-local and tokio's, on the wait path
    /// only.
    pub(crate) fn here() -> Blocking {
        if ALLOWED.with(Cell::get) {
            return Blocking::Thread;
        }
        let Ok(handle) = Handle::try_current() else {
            return Blocking::Thread;
        };
        match handle.runtime_flavor() {
            RuntimeFlavor::MultiThread => Blocking::InPlace,
            RuntimeFlavor::CurrentThread => Blocking::Refused,
            // A flavor added later (tokio's enum is non-exhaustive): not waiting is the safe
            // side.
            _ => Blocking::Refused,
        }
    }

    /// Runs the blocking wait `wait` as this place allows (never called when refused).
    pub(crate) fn run<R>(self, wait: impl FnOnce() -> R) -> R {
        match self {
            Blocking::InPlace => tokio::task::block_in_place(wait),
            Blocking::Thread | Blocking::Refused => wait(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_thread_blocks() {
        assert_eq!(Blocking::here(), Blocking::Thread);
    }

    #[test]
    fn a_current_thread_runtime_refuses_unless_allowed() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            assert_eq!(Blocking::here(), Blocking::Refused);
            assert_eq!(allow_blocking(Blocking::here), Blocking::Thread);
            // Restored when it ends, nested or not.
            allow_blocking(|| allow_blocking(|| ()));
            assert_eq!(Blocking::here(), Blocking::Refused);
        });
    }

    #[test]
    fn a_multi_thread_runtime_blocks_in_place() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let here = runtime.block_on(async { tokio::spawn(async { Blocking::here() }).await });
        assert_eq!(here.unwrap(), Blocking::InPlace);
    }
}
