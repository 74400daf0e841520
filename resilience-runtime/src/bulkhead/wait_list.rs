//! The queue of callers waiting for a bulkhead permit: a FIFO that also removes from any
//! position in O(1) (a cancelled waiter leaves from the middle), kept in a slab so that a
//! waiter costs no allocation once the slab has grown to the deepest queue seen so far.
//!
//! The list is always accessed under the semaphore's queue lock; it knows nothing of permits.

use std::task::Waker;
use std::thread::Thread;

/// A waiter's place in the slab, held by the waiter itself: only the waiter frees its slot,
/// so a key never refers to someone else's slot.
pub(super) type Key = usize;

/// How to wake a waiter.
#[derive(Debug, Default)]
pub(super) enum Wake {
    /// Nobody to wake yet: an async waiter queued before its first poll registered a waker.
    #[default]
    Nothing,
    /// A thread parked in `acquire_blocking`.
    Thread(Thread),
    /// A task awaiting `acquire`.
    Task(Waker),
}

impl Wake {
    /// Wakes the waiter (call it after releasing the queue lock).
    pub(super) fn wake(self) {
        match self {
            Wake::Nothing => {}
            Wake::Thread(thread) => thread.unpark(),
            Wake::Task(waker) => waker.wake(),
        }
    }
}

/// Where a waiter stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Status {
    /// In the queue, waiting to be woken.
    Waiting,
    /// Taken out of the queue and woken to retry (unfair handling): the waiter competes for
    /// the freed permit and goes back to the front of the queue if it loses.
    Notified,
    /// Taken out of the queue and handed a permit by a release (fair handling): the permit is
    /// the waiter's, to use or to pass on.
    Granted,
}

const NIL: usize = usize::MAX;

#[derive(Debug)]
struct Slot {
    status: Status,
    wake: Wake,
    /// Links, meaningful only while `status == Waiting`.
    prev: usize,
    next: usize,
}

/// The queue: a doubly linked list threaded through a slab of slots.
#[derive(Debug)]
pub(super) struct WaitList {
    slots: Vec<Option<Slot>>,
    free: Vec<Key>,
    head: usize,
    tail: usize,
    /// Number of waiters in the queue (status `Waiting`).
    queued: usize,
}

/// Slab capacity kept once the queue has drained after a burst.
const RETAINED_SLOTS: usize = 16;

impl WaitList {
    pub(super) fn new() -> Self {
        WaitList {
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            queued: 0,
        }
    }

    /// Whether no waiter is queued (waiters taken out of the queue do not count).
    pub(super) fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Number of queued waiters.
    pub(super) fn len(&self) -> usize {
        self.queued
    }

    /// Number of waiters holding a slot: queued, notified or granted.
    #[cfg(test)]
    pub(super) fn waiters(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Queues a new waiter at the back.
    pub(super) fn push_back(&mut self, wake: Wake) -> Key {
        let slot = Slot {
            status: Status::Waiting,
            wake,
            prev: NIL,
            next: NIL,
        };
        let key = match self.free.pop() {
            Some(key) => {
                self.slots[key] = Some(slot);
                key
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.link_back(key);
        key
    }

    /// Puts a notified waiter back at the front of the queue (it lost the race for a permit
    /// and keeps its place ahead of later arrivals).
    pub(super) fn requeue_front(&mut self, key: Key, wake: Wake) {
        let head = self.head;
        let slot = self.slot_mut(key);
        debug_assert_eq!(slot.status, Status::Notified);
        slot.status = Status::Waiting;
        slot.wake = wake;
        slot.prev = NIL;
        slot.next = head;
        match head {
            NIL => self.tail = key,
            head => self.slot_mut(head).prev = key,
        }
        self.head = key;
        self.queued += 1;
    }

    /// Takes the longest waiter out of the queue, gives it `status` (`Notified` or `Granted`)
    /// and returns how to wake it.
    pub(super) fn pop_front(&mut self, status: Status) -> Option<Wake> {
        let key = self.head;
        if key == NIL {
            return None;
        }
        self.unlink(key);
        let slot = self.slot_mut(key);
        slot.status = status;
        Some(std::mem::take(&mut slot.wake))
    }

    /// The waiter's status.
    pub(super) fn status(&self, key: Key) -> Status {
        self.slot(key).status
    }

    /// Registers `waker` for a queued waiter, cloning it only when it would wake another task.
    pub(super) fn set_waker(&mut self, key: Key, waker: &Waker) {
        let slot = self.slot_mut(key);
        match &slot.wake {
            Wake::Task(current) if current.will_wake(waker) => {}
            _ => slot.wake = Wake::Task(waker.clone()),
        }
    }

    /// Frees the waiter's slot, taking it out of the queue if it is queued; returns the status
    /// it had.
    pub(super) fn remove(&mut self, key: Key) -> Status {
        let status = self.slot(key).status;
        if status == Status::Waiting {
            self.unlink(key);
        }
        self.slots[key] = None;
        self.free.push(key);
        if self.free.len() == self.slots.len() {
            // Nobody waits: forget the slab's layout and give back what a burst grew.
            self.slots.clear();
            self.free.clear();
            self.slots.shrink_to(RETAINED_SLOTS);
            self.free.shrink_to(RETAINED_SLOTS);
        }
        status
    }

    fn link_back(&mut self, key: Key) {
        let tail = self.tail;
        {
            let slot = self.slot_mut(key);
            slot.prev = tail;
            slot.next = NIL;
        }
        match tail {
            NIL => self.head = key,
            tail => self.slot_mut(tail).next = key,
        }
        self.tail = key;
        self.queued += 1;
    }

    fn unlink(&mut self, key: Key) {
        let (prev, next) = {
            let slot = self.slot(key);
            (slot.prev, slot.next)
        };
        match prev {
            NIL => self.head = next,
            prev => self.slot_mut(prev).next = next,
        }
        match next {
            NIL => self.tail = prev,
            next => self.slot_mut(next).prev = prev,
        }
        self.queued -= 1;
    }

    fn slot(&self, key: Key) -> &Slot {
        self.slots[key]
            .as_ref()
            .expect("a waiter's key refers to its own live slot")
    }

    fn slot_mut(&mut self, key: Key) -> &mut Slot {
        self.slots[key]
            .as_mut()
            .expect("a waiter's key refers to its own live slot")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(list: &WaitList, keys: &[Key]) -> Vec<Status> {
        keys.iter().map(|&k| list.status(k)).collect()
    }

    #[test]
    fn pops_in_arrival_order() {
        let mut list = WaitList::new();
        let keys: Vec<Key> = (0..4).map(|_| list.push_back(Wake::Nothing)).collect();
        assert_eq!(list.len(), 4);
        for (i, &key) in keys.iter().enumerate() {
            assert!(list.pop_front(Status::Granted).is_some());
            assert_eq!(list.status(key), Status::Granted);
            assert_eq!(list.len(), 3 - i);
        }
        assert!(list.pop_front(Status::Granted).is_none());
        assert_eq!(list.waiters(), 4);
    }

    #[test]
    fn removes_from_the_middle_and_the_ends() {
        let mut list = WaitList::new();
        let keys: Vec<Key> = (0..5).map(|_| list.push_back(Wake::Nothing)).collect();
        assert_eq!(list.remove(keys[2]), Status::Waiting);
        assert_eq!(list.remove(keys[0]), Status::Waiting);
        assert_eq!(list.remove(keys[4]), Status::Waiting);
        assert_eq!(list.len(), 2);
        list.pop_front(Status::Notified);
        list.pop_front(Status::Notified);
        assert_eq!(
            statuses(&list, &[keys[1], keys[3]]),
            [Status::Notified, Status::Notified]
        );
        assert!(list.is_empty());
    }

    #[test]
    fn requeued_waiter_goes_first() {
        let mut list = WaitList::new();
        let a = list.push_back(Wake::Nothing);
        let b = list.push_back(Wake::Nothing);
        list.pop_front(Status::Notified);
        list.requeue_front(a, Wake::Nothing);
        let c = list.push_back(Wake::Nothing);
        list.pop_front(Status::Granted);
        assert_eq!(
            statuses(&list, &[a, b, c]),
            [Status::Granted, Status::Waiting, Status::Waiting]
        );
    }

    #[test]
    fn slots_are_reused_and_released_when_drained() {
        let mut list = WaitList::new();
        let a = list.push_back(Wake::Nothing);
        let b = list.push_back(Wake::Nothing);
        list.remove(a);
        let c = list.push_back(Wake::Nothing);
        assert_eq!(c, a, "a freed slot is reused");
        assert_eq!(list.waiters(), 2);
        list.remove(b);
        list.remove(c);
        assert_eq!(list.waiters(), 0);
        assert!(list.slots.is_empty());
    }
}
