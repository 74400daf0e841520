//! Synchronisation primitives, swapped for loom's under `--cfg loom` so that the permit
//! accounting of the bulkhead and the circuit breaker can be model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

pub(crate) use std::sync::atomic::Ordering;

/// Locks `mutex`, ignoring poisoning: every critical section of this crate leaves its data
/// consistent before anything in it can panic (user callbacks run outside the locks).
#[cfg(not(loom))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks `mutex` (loom's mutex does not poison).
#[cfg(loom)]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap()
}
