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

/// Which events a callback hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Every event, the one of each call included (a breaker's `Success`, a rate limiter's
    /// `SuccessfulAcquire`): gathering those costs the hot path.
    Every,
    /// The rare ones only: transitions, rejections, time-outs, retries. A guard gathers no
    /// event of an ordinary call for such a callback (the tracing forwarder is one), so it
    /// costs nothing on the path of a call that changes nothing.
    Rare,
}

/// The callbacks of one guard. Reading the list is lock-free; `any` and `per_call` let the
/// hot path skip events with one relaxed load. (Plain std types: subscribing is not part of
/// what the loom models check.)
pub(crate) struct Subscribers<E> {
    any: AtomicBool,
    /// Whether a callback wants the events of every call ([`Interest::Every`]).
    per_call: AtomicBool,
    list: ArcSwap<Vec<(SubscriptionId, Interest, Callback<E>)>>,
    /// Serialises subscribe and unsubscribe, so that `any` follows the list.
    writer: Mutex<u64>,
}

impl<E> Subscribers<E> {
    pub(crate) fn new() -> Self {
        Subscribers {
            any: AtomicBool::new(false),
            per_call: AtomicBool::new(false),
            list: ArcSwap::from_pointee(Vec::new()),
            writer: Mutex::new(0),
        }
    }

    /// Whether events should be gathered at all.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// Whether the events of every call should be gathered (see [`Interest`]).
    #[inline]
    pub(crate) fn per_call(&self) -> bool {
        self.per_call.load(Ordering::Relaxed)
    }

    /// Adds a callback for every event.
    pub(crate) fn add(&self, callback: Callback<E>) -> SubscriptionId {
        self.add_with(Interest::Every, callback)
    }

    /// Adds a callback for the events of `interest`. A [`Interest::Rare`] callback still hears
    /// the events of every call while another callback asks for them: it ignores them.
    pub(crate) fn add_with(&self, interest: Interest, callback: Callback<E>) -> SubscriptionId {
        let mut last_id = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        *last_id += 1;
        let id = SubscriptionId(*last_id);
        let mut list = Vec::clone(&self.list.load());
        list.push((id, interest, callback));
        self.publish(list);
        id
    }

    pub(crate) fn remove(&self, id: SubscriptionId) -> bool {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut list = Vec::clone(&self.list.load());
        let before = list.len();
        list.retain(|(other, _, _)| *other != id);
        let removed = list.len() != before;
        self.publish(list);
        removed
    }

    /// Installs `list` and the flags that follow from it; called with `writer` held.
    fn publish(&self, list: Vec<(SubscriptionId, Interest, Callback<E>)>) {
        let per_call = list.iter().any(|(_, i, _)| *i == Interest::Every);
        let any = !list.is_empty();
        self.list.store(Arc::new(list));
        self.any.store(any, Ordering::Relaxed);
        self.per_call.store(per_call, Ordering::Relaxed);
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
            for (_, _, callback) in list.iter() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_callback_for_every_event_asks_for_the_events_of_every_call() {
        let subscribers: Subscribers<u32> = Subscribers::new();
        let rare = subscribers.add_with(Interest::Rare, Arc::new(|_| {}));
        assert!(subscribers.any() && !subscribers.per_call());
        let every = subscribers.add(Arc::new(|_| {}));
        assert!(subscribers.per_call());
        assert!(subscribers.remove(every));
        assert!(subscribers.any() && !subscribers.per_call());
        assert!(subscribers.remove(rare));
        assert!(!subscribers.any());
    }
}
