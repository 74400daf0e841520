//! The subscriber list of a guard's events ([`Subscribers`]), shared by the circuit breaker and
//! the rate limiter: lock-free reads, a free check when nobody subscribed, and delivery that a
//! panicking subscriber cannot cut short.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

/// What a subscription is known by, to unsubscribe it
/// ([`CircuitBreaker::unsubscribe`](crate::CircuitBreaker::unsubscribe),
/// [`RateLimiter::unsubscribe`](crate::RateLimiter::unsubscribe)). Ids are unique per guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubscriptionId(u64);

/// A subscriber callback.
pub(crate) type Callback<E> = Arc<dyn Fn(&E) + Send + Sync>;

/// The callbacks of one guard. Reading the list is lock-free; `any` lets the hot path skip
/// events with one relaxed load. (Plain std types: subscribing is not part of what the loom
/// models check.)
pub(crate) struct Subscribers<E> {
    any: AtomicBool,
    list: ArcSwap<Vec<(SubscriptionId, Callback<E>)>>,
    /// Serialises subscribe and unsubscribe, so that `any` follows the list.
    writer: Mutex<u64>,
}

impl<E> Subscribers<E> {
    pub(crate) fn new() -> Self {
        Subscribers {
            any: AtomicBool::new(false),
            list: ArcSwap::from_pointee(Vec::new()),
            writer: Mutex::new(0),
        }
    }

    /// Whether events should be gathered at all.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    pub(crate) fn add(&self, callback: Callback<E>) -> SubscriptionId {
        let mut last_id = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        *last_id += 1;
        let id = SubscriptionId(*last_id);
        let mut list = Vec::clone(&self.list.load());
        list.push((id, callback));
        self.list.store(Arc::new(list));
        self.any.store(true, Ordering::Relaxed);
        id
    }

    pub(crate) fn remove(&self, id: SubscriptionId) -> bool {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut list = Vec::clone(&self.list.load());
        let before = list.len();
        list.retain(|(other, _)| *other != id);
        let removed = list.len() != before;
        self.any.store(!list.is_empty(), Ordering::Relaxed);
        self.list.store(Arc::new(list));
        removed
    }

    /// Delivers `events` to every callback, in order. Call it with no lock held, once the
    /// guard is consistent.
    ///
    /// A callback is user code: one that panics does not keep the event from the callbacks
    /// after it, nor the later events from anyone. Once every callback has had every event,
    /// the first panic is resumed on the calling thread (a subscriber's bug is not hidden),
    /// unless that thread is already unwinding (a permit dropped by a panic): a second panic
    /// there would abort the process, so that one is dropped.
    pub(crate) fn deliver(&self, events: impl IntoIterator<Item = E>) {
        let list = self.list.load_full();
        let mut first_panic = None;
        for event in events {
            for (_, callback) in list.iter() {
                if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| callback(&event))) {
                    first_panic.get_or_insert(panic);
                }
            }
        }
        if let Some(panic) = first_panic {
            if !std::thread::panicking() {
                panic::resume_unwind(panic);
            }
        }
    }
}

impl<E> fmt::Debug for Subscribers<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscribers")
            .field("count", &self.list.load().len())
            .finish()
    }
}
