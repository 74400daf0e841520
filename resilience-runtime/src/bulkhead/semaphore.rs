//! The raw semaphore under the bulkhead: permit accounting in one atomic word, a locked queue
//! for the callers that wait.
//!
//! # The state word
//!
//! ```text
//!  63                        25 24                1   0
//! [ permitted calls (39 bits) | free permits (24) | HAS_WAITERS ]
//! ```
//!
//! - Taking a free permit is one compare-and-swap that also counts the permitted call, so the
//!   counter costs nothing on the hot path. The counter wraps every 2^39 calls; each wrap is
//!   recorded in `permitted_wraps` by the caller whose swap wrapped it.
//! - Releasing a permit is one `fetch_add`; only when `HAS_WAITERS` was set does the release
//!   take the queue lock to wake (or, under fair handling, hand the permit to) a waiter.
//! - `HAS_WAITERS` is set exactly while the queue is non-empty, and only under the queue lock.
//!   It is set by a compare-and-swap that also checks that no permit is free, so a release
//!   either sees the bit (and wakes someone) or frees a permit the queuing caller then sees.
//!
//! # Fair handling
//!
//! A caller takes a free permit only when nobody is queued. A release that finds waiters
//! hands its permit to the head of the queue under the lock (the permit never becomes free for
//! a newcomer); a waiter dropped after being handed a permit releases it again, which passes
//! it on to the next waiter. Invariant: while the bit is set, the free permits are at most the
//! number of releases between their `fetch_add` and their hand-over, so a free permit is never
//! left behind while someone waits.
//!
//! # Unfair handling (barging)
//!
//! A caller takes any free permit. A release that finds waiters takes the head out of the
//! queue and wakes it (`Notified`); the woken waiter retries, and if a newcomer took the permit
//! first it goes back to the front of the queue. A notified waiter that is dropped before it
//! retries passes the notification on. Invariant: while the queue is non-empty, the free
//! permits are at most the notified waiters plus the releases on their way to notify one, so
//! whenever a permit is free and someone waits, some waiter is awake to take it.

use std::fmt;
use std::task::Waker;

use super::config::MAX_CONCURRENT_CALLS_LIMIT;
use super::wait_list::{Key, Status, WaitList, Wake};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};

const HAS_WAITERS: u64 = 1;
const PERMIT_SHIFT: u32 = 1;
const PERMIT_BITS: u32 = 24;
const PERMIT_UNIT: u64 = 1 << PERMIT_SHIFT;
const PERMIT_MASK: u64 = ((1 << PERMIT_BITS) - 1) << PERMIT_SHIFT;
const COUNT_SHIFT: u32 = PERMIT_SHIFT + PERMIT_BITS;
const COUNT_UNIT: u64 = 1 << COUNT_SHIFT;
/// The counter field with every bit set: the next permitted call wraps it to zero.
const COUNT_FIELD_MAX: u64 = u64::MAX >> COUNT_SHIFT;
/// Added to the state word to take one permit and count one permitted call.
const TAKE: u64 = COUNT_UNIT - PERMIT_UNIT;

const _: () = assert!(MAX_CONCURRENT_CALLS_LIMIT as u64 == PERMIT_MASK >> PERMIT_SHIFT);

fn permits(state: u64) -> u32 {
    // The field is 24 bits wide, so the cast is lossless.
    ((state & PERMIT_MASK) >> PERMIT_SHIFT) as u32
}

/// How a waiter that polls again can be woken next time.
#[derive(Clone, Copy)]
pub(super) enum Waking<'a> {
    /// The current thread (a blocking waiter).
    Thread,
    /// The current task (an async waiter).
    Task(&'a Waker),
}

impl Waking<'_> {
    pub(super) fn to_wake(self) -> Wake {
        match self {
            Waking::Thread => Wake::Thread(std::thread::current()),
            Waking::Task(waker) => Wake::Task(waker.clone()),
        }
    }
}

/// A counting semaphore with a wait queue, fair or barging.
pub(super) struct Semaphore {
    state: AtomicU64,
    /// How many times the permitted-calls field of `state` wrapped around.
    permitted_wraps: AtomicU64,
    rejected: AtomicU64,
    waiters: Mutex<WaitList>,
    /// `HAS_WAITERS` under fair handling (a queued waiter blocks newcomers), else 0.
    newcomers_blocked_by: u64,
    max: u32,
}

/// A consistent reading of the semaphore's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) available: u32,
    pub(super) permitted: u64,
    pub(super) rejected: u64,
}

impl Semaphore {
    /// A semaphore of `max` permits (1..=16 777 215), all free.
    pub(super) fn new(max: u32, fair: bool) -> Self {
        assert!(
            (1..=MAX_CONCURRENT_CALLS_LIMIT).contains(&max),
            "the bulkhead config validates max_concurrent_calls"
        );
        Semaphore {
            state: AtomicU64::new(u64::from(max) << PERMIT_SHIFT),
            permitted_wraps: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            waiters: Mutex::new(WaitList::new()),
            newcomers_blocked_by: if fair { HAS_WAITERS } else { 0 },
            max,
        }
    }

    pub(super) fn max(&self) -> u32 {
        self.max
    }

    pub(super) fn is_fair(&self) -> bool {
        self.newcomers_blocked_by != 0
    }

    /// Free permits now.
    pub(super) fn available(&self) -> u32 {
        permits(self.state.load(Ordering::Relaxed))
    }

    /// Whether a caller arriving now could take a permit in this state.
    #[inline]
    fn can_take(&self, state: u64) -> bool {
        state & PERMIT_MASK != 0 && state & self.newcomers_blocked_by == 0
    }

    /// Takes a free permit if a newcomer may: one compare-and-swap, no lock.
    #[inline]
    pub(super) fn try_acquire(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if !self.can_take(state) {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state.wrapping_add(TAKE),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.note_count_wrap(state);
                    return true;
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Records a wrap of the permitted-calls field if the swap from `before` wrapped it.
    #[inline]
    fn note_count_wrap(&self, before: u64) {
        if before >> COUNT_SHIFT == COUNT_FIELD_MAX {
            self.permitted_wraps.fetch_add(1, Ordering::Release);
        }
    }

    /// Counts a permitted call whose permit was handed over rather than taken.
    fn count_permitted(&self) {
        let before = self.state.fetch_add(COUNT_UNIT, Ordering::Relaxed);
        self.note_count_wrap(before);
    }

    /// Counts a rejected call.
    pub(super) fn count_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Returns a permit: one `fetch_add`, plus the queue lock only if someone waits.
    #[inline]
    pub(super) fn release(&self) {
        if self.free_permit() {
            self.release_to_waiters();
        }
    }

    /// The lock-free half of a release: frees the permit and tells whether anyone was queued
    /// at that instant (then the permit must be offered to the queue).
    #[inline]
    fn free_permit(&self) -> bool {
        let before = self.state.fetch_add(PERMIT_UNIT, Ordering::Release);
        debug_assert!(
            permits(before) < self.max,
            "more permits released than taken"
        );
        before & HAS_WAITERS != 0
    }

    #[cold]
    #[inline(never)]
    fn release_to_waiters(&self) {
        let wake = {
            let mut list = lock(&self.waiters);
            self.wake_next(&mut list)
        };
        wake.wake();
    }

    /// Under the queue lock: if a permit is free and someone is queued, hands the permit to the
    /// head (fair) or takes the head out of the queue to retry (unfair). Returns whom to wake
    /// once the lock is released.
    fn wake_next(&self, list: &mut WaitList) -> Wake {
        let state = self.state.load(Ordering::Acquire);
        if permits(state) == 0 {
            // A newcomer took the freed permit while the queue was briefly empty (fair), or
            // barged in (unfair): nothing to hand over, nobody to wake in vain.
            return Wake::Nothing;
        }
        let status = if self.is_fair() {
            Status::Granted
        } else {
            Status::Notified
        };
        let Some(wake) = list.pop_front(status) else {
            return Wake::Nothing;
        };
        let clear = if list.is_empty() { HAS_WAITERS } else { 0 };
        if self.is_fair() {
            // The bit is set (the queue was not empty) and, under the lock with the bit set,
            // nothing but a hand-over takes a free permit: no field borrows.
            self.state.fetch_sub(PERMIT_UNIT | clear, Ordering::AcqRel);
        } else if clear != 0 {
            self.state.fetch_and(!HAS_WAITERS, Ordering::AcqRel);
        }
        wake
    }

    /// Under the queue lock: takes a permit if a newcomer may, else makes sure `HAS_WAITERS` is
    /// set (the caller must then queue itself before releasing the lock).
    fn take_or_mark_waiting(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let (next, took) = if self.can_take(state) {
                (state.wrapping_add(TAKE), true)
            } else if state & HAS_WAITERS != 0 {
                return false;
            } else {
                // Set only while no permit is free: a release racing with this swap either
                // frees a permit first (the swap fails and the permit is taken on the retry)
                // or sees the bit and wakes the waiter about to be queued.
                (state | HAS_WAITERS, false)
            };
            match self
                .state
                .compare_exchange(state, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    if took {
                        self.note_count_wrap(state);
                    }
                    return took;
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Takes a permit, or queues the caller (to be woken by `wake`) and returns its key.
    pub(super) fn acquire_or_enqueue(&self, wake: Wake) -> Result<(), Key> {
        let mut list = lock(&self.waiters);
        if self.take_or_mark_waiting() {
            return Ok(());
        }
        Err(list.push_back(wake))
    }

    /// A queued caller checks whether it has a permit now. `true`: it holds one and its key is
    /// spent. `false`: it is (still, or again) queued, to be woken through `waking`.
    pub(super) fn poll_waiter(&self, key: Key, waking: Waking<'_>) -> bool {
        let mut list = lock(&self.waiters);
        match list.status(key) {
            Status::Granted => {
                list.remove(key);
                drop(list);
                self.count_permitted();
                true
            }
            Status::Notified => {
                if self.take_or_mark_waiting() {
                    list.remove(key);
                    true
                } else {
                    list.requeue_front(key, waking.to_wake());
                    false
                }
            }
            Status::Waiting => {
                if let Waking::Task(waker) = waking {
                    list.set_waker(key, waker);
                }
                false
            }
        }
    }

    /// A queued caller gives up (dropped, or timed out): it leaves the queue, and a permit or a
    /// wake-up it had been given goes to the next waiter.
    pub(super) fn cancel(&self, key: Key) {
        let mut list = lock(&self.waiters);
        match list.remove(key) {
            Status::Waiting => {
                if list.is_empty() {
                    self.state.fetch_and(!HAS_WAITERS, Ordering::AcqRel);
                }
            }
            Status::Granted => {
                drop(list);
                self.release();
            }
            Status::Notified => {
                let wake = self.wake_next(&mut list);
                drop(list);
                wake.wake();
            }
        }
    }

    /// The counters, read together (retried if the permitted-calls field wraps meanwhile).
    ///
    /// A reading taken in the instant between the swap that wraps the field and the recording
    /// of that wrap is short by 2^39 permitted calls; that window opens once every 2^39 calls.
    pub(super) fn counts(&self) -> Counts {
        let (wraps, state) = loop {
            let wraps = self.permitted_wraps.load(Ordering::Acquire);
            let state = self.state.load(Ordering::Acquire);
            if self.permitted_wraps.load(Ordering::Acquire) == wraps {
                break (wraps, state);
            }
        };
        Counts {
            available: permits(state),
            permitted: wraps
                .wrapping_mul(COUNT_FIELD_MAX + 1)
                .wrapping_add(state >> COUNT_SHIFT),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }

    /// Callers holding a place in the queue (queued, woken or handed a permit but not yet
    /// back), and of those the ones still queued.
    #[cfg(test)]
    pub(super) fn waiters(&self) -> (usize, usize) {
        let list = lock(&self.waiters);
        (list.waiters(), list.len())
    }

    /// Whether the `HAS_WAITERS` bit is set.
    #[cfg(test)]
    pub(super) fn has_waiters_bit(&self) -> bool {
        self.state.load(Ordering::Relaxed) & HAS_WAITERS != 0
    }

    /// Sets the permitted-calls field (tests of its wrap-around).
    #[cfg(test)]
    pub(super) fn set_permitted_field(&self, value: u64) {
        let state = self.state.load(Ordering::Relaxed);
        let field = value & COUNT_FIELD_MAX;
        self.state.store(
            (state & !(COUNT_FIELD_MAX << COUNT_SHIFT)) | (field << COUNT_SHIFT),
            Ordering::Relaxed,
        );
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.load(Ordering::Relaxed);
        f.debug_struct("Semaphore")
            .field("available", &permits(state))
            .field("max", &self.max)
            .field("fair", &self.is_fair())
            .field("has_waiters", &(state & HAS_WAITERS != 0))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::task::Wake as StdWake;

    use super::*;

    struct Noop;

    impl StdWake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    fn queue(semaphore: &Semaphore) -> Key {
        semaphore
            .acquire_or_enqueue(Wake::Nothing)
            .expect_err("no permit is free for this caller")
    }

    fn poll(semaphore: &Semaphore, key: Key) -> bool {
        let waker = Waker::from(Arc::new(Noop));
        semaphore.poll_waiter(key, Waking::Task(&waker))
    }

    /// Between a release's `fetch_add` and its taking the lock, the only waiter leaves, a
    /// newcomer takes the freed permit and another caller queues: the late half of the release
    /// finds no free permit and must neither hand one over nor wake anyone.
    #[test]
    fn a_late_release_offers_no_permit_it_no_longer_has() {
        for fair in [true, false] {
            let semaphore = Semaphore::new(1, fair);
            assert!(semaphore.try_acquire());
            let leaving = queue(&semaphore);
            assert!(semaphore.free_permit(), "the release sees a waiter");
            semaphore.cancel(leaving);
            assert!(
                semaphore.try_acquire(),
                "the newcomer takes the freed permit"
            );
            let late = queue(&semaphore);
            semaphore.release_to_waiters();
            assert_eq!(semaphore.available(), 0);
            assert!(!poll(&semaphore, late), "nothing was handed over");
            assert_eq!(semaphore.waiters(), (1, 1));
            // The newcomer's release serves the waiter.
            semaphore.release();
            assert!(poll(&semaphore, late));
            semaphore.release();
            assert_eq!(semaphore.available(), 1);
            assert_eq!(semaphore.waiters(), (0, 0));
            assert!(!semaphore.has_waiters_bit());
        }
    }

    /// Under fair handling a free permit with the waiter bit set is on its way to the queue
    /// head: a caller arriving in that window queues behind instead of taking it.
    #[test]
    fn a_permit_on_its_way_to_the_queue_is_not_free_for_newcomers() {
        let semaphore = Semaphore::new(1, true);
        assert!(semaphore.try_acquire());
        let head = queue(&semaphore);
        assert!(semaphore.free_permit());
        assert_eq!(semaphore.available(), 1);
        assert!(!semaphore.try_acquire());
        let behind = queue(&semaphore);
        semaphore.release_to_waiters();
        assert!(poll(&semaphore, head));
        assert!(!poll(&semaphore, behind));
        semaphore.release();
        assert!(poll(&semaphore, behind));
        semaphore.release();
        assert_eq!(semaphore.available(), 1);
    }

    #[test]
    fn the_largest_bulkhead_keeps_its_fields_apart() {
        let semaphore = Semaphore::new(MAX_CONCURRENT_CALLS_LIMIT, true);
        assert_eq!(semaphore.available(), MAX_CONCURRENT_CALLS_LIMIT);
        assert!(semaphore.try_acquire());
        assert_eq!(semaphore.available(), MAX_CONCURRENT_CALLS_LIMIT - 1);
        semaphore.release();
        let counts = semaphore.counts();
        assert_eq!(counts.available, MAX_CONCURRENT_CALLS_LIMIT);
        assert_eq!(counts.permitted, 1);
        assert!(!semaphore.has_waiters_bit());
    }
}
