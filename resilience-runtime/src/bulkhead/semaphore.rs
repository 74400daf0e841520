//! The raw semaphore under the bulkhead: permit accounting in one atomic word, a locked queue
//! for the callers that wait.
//!
//! # The state word
//!
//! ```text
//!  63                        26 25                1   0
//! [ permitted calls (38 bits) | free permits (25) | HAS_WAITERS ]
//! ```
//!
//! - The free-permit field holds the free permits plus a bias of 2^24 - 1
//!   (`MAX_CONCURRENT_CALLS_LIMIT`): the free permits are `max` minus the permits held, and go
//!   negative after a shrink (see "Reconfiguration"). A permit is free for the taking only while
//!   the field is above the bias.
//! - Taking a free permit is one compare-and-swap that also counts the permitted call, so the
//!   counter costs nothing on the hot path. The counter wraps every 2^38 calls; each wrap is
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
//!
//! # Reconfiguration
//!
//! The limit and the fairness change in place, under the queue lock (so a reconfiguration is
//! ordered with every hand-over and every caller queuing itself). Invariant, at every instant:
//! **free permits = `max` − permits held**, a held permit being one taken by a call or handed to
//! a waiter that has not picked it up yet. The state word does not hold `max`; a
//! reconfiguration stores the new `max` and adds the difference to the free-permit field in
//! one atomic step, so a take or a release racing with it sees the field before or after the
//! change, never half of it.
//!
//! - A shrink subtracts the difference. With more permits held than the new limit the field
//!   goes negative: the surplus. Nobody takes a permit until it is paid off (the field must be
//!   above the bias), and each release pays one unit with its usual `fetch_add` — the hot path
//!   neither reads nor writes anything else. A release's late half (under the lock) then finds
//!   no free permit and hands nothing over.
//! - A grow adds the difference, paying off any surplus first (it is the same field), then
//!   serves the queue as the releases of the permits it freed would: fair, hands free permits
//!   to the head while any is free; unfair, wakes one waiter per permit it made free.
//! - Turning fairness on hands every free permit to the queue at once, which restores the fair
//!   invariant (a free permit with the bit set may have been left for a notified waiter or a
//!   barging newcomer). Waiters already handed a permit or notified keep it. Turning it off
//!   needs nothing: the fair invariant implies the unfair one.
//! - The hot path reads the fairness (`newcomers_blocked_by`) with a relaxed load and may miss
//!   a change made at that instant (however long it was preempted since): a newcomer barges
//!   once into a fair queue, or is turned away once by an unfair one (a caller that may wait
//!   re-reads it under the lock before queuing). A barging newcomer may take a permit that a
//!   release or a grow, under the lock, is about to hand to the head of a fair queue: so a
//!   hand-over takes its permit with a compare-and-swap that checks it is still free, and
//!   hands nothing if not (the newcomer's own release serves the head later). No permit is
//!   admitted twice and no wake-up is lost.
//! - `max` and the free permits are two words: the counts that combine them (permits held)
//!   are read with reconfigurations excluded, by the caller's lock.

use std::fmt;
use std::task::Waker;

use super::config::MAX_CONCURRENT_CALLS_LIMIT;
use super::wait_list::{Key, Status, WaitList, Wake};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};

const HAS_WAITERS: u64 = 1;
const PERMIT_SHIFT: u32 = 1;
const PERMIT_BITS: u32 = 25;
const PERMIT_UNIT: u64 = 1 << PERMIT_SHIFT;
const PERMIT_MASK: u64 = ((1 << PERMIT_BITS) - 1) << PERMIT_SHIFT;
/// Added to the free permits in their field, so that the field stays positive while a shrink
/// leaves more permits held than the limit (free permits down to `1 - MAX_CONCURRENT_CALLS_LIMIT`).
const PERMIT_BIAS: u64 = MAX_CONCURRENT_CALLS_LIMIT as u64;
/// The permit field (in place) when no permit is free: a newcomer takes one only above it.
const NONE_FREE: u64 = PERMIT_BIAS << PERMIT_SHIFT;
const COUNT_SHIFT: u32 = PERMIT_SHIFT + PERMIT_BITS;
const COUNT_UNIT: u64 = 1 << COUNT_SHIFT;
/// The counter field with every bit set: the next permitted call wraps it to zero.
pub(super) const COUNT_FIELD_MAX: u64 = u64::MAX >> COUNT_SHIFT;
/// Added to the state word to take one permit and count one permitted call.
const TAKE: u64 = COUNT_UNIT - PERMIT_UNIT;

// The field holds every value from `1 - LIMIT` (a bulkhead of LIMIT shrunk to 1 with all its
// permits held) to `LIMIT` free permits: biased, 1 ..= 2 * LIMIT.
const _: () = assert!(2 * PERMIT_BIAS <= PERMIT_MASK >> PERMIT_SHIFT);

/// The free permits: the limit minus the permits held, negative while a shrink's surplus of
/// held permits is being returned.
fn free(state: u64) -> i64 {
    // The field is 25 bits wide and the bias 24 bits: both casts are lossless.
    ((state & PERMIT_MASK) >> PERMIT_SHIFT) as i64 - PERMIT_BIAS as i64
}

/// The free permits a caller may take: none while the surplus of a shrink is outstanding.
fn available(state: u64) -> u32 {
    // At most `MAX_CONCURRENT_CALLS_LIMIT`: lossless.
    free(state).max(0) as u32
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
    /// `HAS_WAITERS` under fair handling (a queued waiter blocks newcomers), else 0. Written
    /// only under the queue lock.
    newcomers_blocked_by: AtomicU64,
    /// `max_concurrent_calls`. Written only under the queue lock.
    max: AtomicU64,
}

/// A consistent reading of the semaphore's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) available: u32,
    /// Permits held: by admitted calls, and handed to waiters that have not taken them yet.
    pub(super) held: u64,
    pub(super) permitted: u64,
    pub(super) rejected: u64,
}

/// `newcomers_blocked_by` for a fairness setting.
fn blocked_by(fair: bool) -> u64 {
    if fair {
        HAS_WAITERS
    } else {
        0
    }
}

impl Semaphore {
    /// A semaphore of `max` permits (1..=16 777 215), all free.
    pub(super) fn new(max: u32, fair: bool) -> Self {
        assert!(
            (1..=MAX_CONCURRENT_CALLS_LIMIT).contains(&max),
            "the bulkhead config validates max_concurrent_calls"
        );
        Semaphore {
            state: AtomicU64::new((PERMIT_BIAS + u64::from(max)) << PERMIT_SHIFT),
            permitted_wraps: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            waiters: Mutex::new(WaitList::new()),
            newcomers_blocked_by: AtomicU64::new(blocked_by(fair)),
            max: AtomicU64::new(u64::from(max)),
        }
    }

    pub(super) fn max(&self) -> u32 {
        // Only ever set from a `u32`.
        self.max.load(Ordering::Relaxed) as u32
    }

    /// Under fair handling? Exact under the queue lock; elsewhere it may lag a change.
    pub(super) fn is_fair(&self) -> bool {
        self.newcomers_blocked_by.load(Ordering::Relaxed) != 0
    }

    /// Free permits now (zero while a shrink's surplus is outstanding).
    pub(super) fn available(&self) -> u32 {
        available(self.state.load(Ordering::Relaxed))
    }

    /// Whether a caller arriving now could take a permit in this state, `blocked_by` being
    /// `newcomers_blocked_by`.
    #[inline]
    fn can_take(state: u64, blocked_by: u64) -> bool {
        state & PERMIT_MASK > NONE_FREE && state & blocked_by == 0
    }

    /// Takes a free permit if a newcomer may: one compare-and-swap, no lock.
    #[inline]
    pub(super) fn try_acquire(&self) -> bool {
        // A fairness change racing with this call may not be seen yet: see "Reconfiguration".
        let blocked_by = self.newcomers_blocked_by.load(Ordering::Relaxed);
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if !Self::can_take(state, blocked_by) {
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
        if self.free_permit() & HAS_WAITERS != 0 {
            self.release_to_waiters();
        }
    }

    /// [`release`](Self::release), telling how many permits were held just before it (this
    /// one included): the calls in flight an adaptive limit's sample reports.
    pub(super) fn release_held(&self) -> u32 {
        let max = self.max.load(Ordering::Relaxed);
        let before = self.free_permit();
        if before & HAS_WAITERS != 0 {
            self.release_to_waiters();
        }
        // Held = max - free; a limit changed between the two readings is off by its change
        // for this one sample.
        (max as i64 - free(before)).clamp(1, i64::from(u32::MAX)) as u32
    }

    /// The lock-free half of a release: frees the permit and returns the state word before
    /// it (with `HAS_WAITERS` set, the permit must be offered to the queue).
    #[inline]
    fn free_permit(&self) -> u64 {
        let before = self.state.fetch_add(PERMIT_UNIT, Ordering::Release);
        // Checked against the field's bound rather than `max`: a release racing with a grow
        // may read the old `max` after the grow has already freed its permits.
        debug_assert!(
            free(before) < PERMIT_BIAS as i64,
            "more permits released than taken"
        );
        before
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
        self.serve_head(list).unwrap_or_default()
    }

    /// [`wake_next`](Self::wake_next), telling apart "nobody served" (`None`: no permit free,
    /// or nobody queued) from a served waiter that has no waker yet.
    fn serve_head(&self, list: &mut WaitList) -> Option<Wake> {
        if list.is_empty() {
            return None;
        }
        // The queue's last waiter leaves it: the bit goes with it.
        let clear = if list.len() == 1 { HAS_WAITERS } else { 0 };
        if self.is_fair() {
            // The permit is taken for the head with a compare-and-swap that checks it is still
            // free: a newcomer that read the fairness before it was turned on may take a free
            // permit even while the bit is set (it barges once), and a shrink's surplus may
            // have swallowed it.
            let mut state = self.state.load(Ordering::Acquire);
            loop {
                if free(state) <= 0 {
                    return None;
                }
                match self.state.compare_exchange_weak(
                    state,
                    state - (PERMIT_UNIT | clear),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(actual) => state = actual,
                }
            }
            return list.pop_front(Status::Granted);
        }
        if free(self.state.load(Ordering::Acquire)) <= 0 {
            // A newcomer barged in, or the permit paid off a shrink's surplus: nobody to wake
            // in vain.
            return None;
        }
        let wake = list.pop_front(Status::Notified);
        if clear != 0 {
            self.state.fetch_and(!HAS_WAITERS, Ordering::AcqRel);
        }
        wake
    }

    /// Changes the limit to `max` and the fairness to `fair`, in place: held permits stay held
    /// and count against the new limit, and permits a grow frees go to the queue as a release's
    /// would. Returns whom to wake once the caller may (after any lock it holds).
    ///
    /// The caller serialises reconfigurations (the adaptive controller's lock, which both a
    /// reconfiguration of the bulkhead and a change of an adaptive limit take), so that `max`
    /// and the state word are only read together under that lock.
    pub(super) fn reconfigure(&self, max: u32, fair: bool) -> Vec<Wake> {
        assert!(
            (1..=MAX_CONCURRENT_CALLS_LIMIT).contains(&max),
            "the bulkhead config validates max_concurrent_calls"
        );
        let mut list = lock(&self.waiters);
        let was_fair = self.is_fair();
        // Every writer holds the queue lock: a plain load is the current value.
        let old = self.max.load(Ordering::Relaxed);
        let new = u64::from(max);
        if new == old && fair == was_fair {
            return Vec::new();
        }
        self.newcomers_blocked_by
            .store(blocked_by(fair), Ordering::Relaxed);
        self.max.store(new, Ordering::Relaxed);
        // One atomic step for the whole difference: a release or take racing with it sees the
        // field before or after, never a limit without its permits. A shrink may leave the
        // field negative (the surplus); releases pay it off one by one.
        let (before, after) = if new >= old {
            let grow = (new - old) * PERMIT_UNIT;
            let before = self.state.fetch_add(grow, Ordering::AcqRel);
            (before, before + grow)
        } else {
            let shrink = (old - new) * PERMIT_UNIT;
            let before = self.state.fetch_sub(shrink, Ordering::AcqRel);
            (before, before - shrink)
        };
        let mut wakes = Vec::new();
        if fair {
            // Every free permit goes to the queue, in order: those a grow freed, and (when
            // fairness was just turned on) any left for notified waiters or barging newcomers.
            while let Some(wake) = self.serve_head(&mut list) {
                wakes.push(wake);
            }
        } else {
            // One waiter woken per permit the grow made free, as that many releases would.
            let freed = available(after).saturating_sub(available(before));
            for _ in 0..freed {
                match self.serve_head(&mut list) {
                    Some(wake) => wakes.push(wake),
                    None => break,
                }
            }
        }
        wakes
    }

    /// Under the queue lock: takes a permit if a newcomer may, else makes sure `HAS_WAITERS` is
    /// set (the caller must then queue itself before releasing the lock).
    fn take_or_mark_waiting(&self) -> bool {
        let blocked_by = self.newcomers_blocked_by.load(Ordering::Relaxed);
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            let (next, took) = if Self::can_take(state, blocked_by) {
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
    /// of that wrap is short by 2^38 permitted calls; that window opens once every 2^38 calls.
    ///
    /// `held` is exact only if no reconfiguration runs meanwhile (it is `max` minus the free
    /// permits, two separate words): the bulkhead reads the counts under its config lock.
    pub(super) fn counts(&self) -> Counts {
        let (wraps, state) = loop {
            let wraps = self.permitted_wraps.load(Ordering::Acquire);
            let state = self.state.load(Ordering::Acquire);
            if self.permitted_wraps.load(Ordering::Acquire) == wraps {
                break (wraps, state);
            }
        };
        let max = self.max.load(Ordering::Relaxed);
        Counts {
            available: available(state),
            held: max.saturating_add_signed(-free(state)),
            permitted: wraps
                .wrapping_mul(COUNT_FIELD_MAX + 1)
                .wrapping_add(state >> COUNT_SHIFT),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }

    /// Callers holding a place in the queue (queued, woken or handed a permit but not yet
    /// back), and of those the ones still queued.
    #[cfg(all(test, not(loom)))]
    pub(super) fn waiters(&self) -> (usize, usize) {
        let list = lock(&self.waiters);
        (list.waiters(), list.len())
    }

    /// Whether the `HAS_WAITERS` bit is set.
    #[cfg(all(test, not(loom)))]
    pub(super) fn has_waiters_bit(&self) -> bool {
        self.state.load(Ordering::Relaxed) & HAS_WAITERS != 0
    }

    /// Sets the permitted-calls field (tests of its wrap-around).
    #[cfg(all(test, not(loom)))]
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
            .field("available", &available(state))
            .field("max", &self.max())
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
            assert!(
                semaphore.free_permit() & HAS_WAITERS != 0,
                "the release sees a waiter"
            );
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
        assert!(semaphore.free_permit() & HAS_WAITERS != 0);
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

    /// A shrink lands between a release's `fetch_add` and its taking the lock: the freed
    /// permit pays the surplus, and the late half of the release hands nothing over.
    #[test]
    fn a_shrink_between_the_halves_of_a_release_takes_the_freed_permit() {
        for fair in [true, false] {
            let semaphore = Semaphore::new(2, fair);
            assert!(semaphore.try_acquire() && semaphore.try_acquire());
            let waiter = queue(&semaphore);
            assert!(
                semaphore.free_permit() & HAS_WAITERS != 0,
                "the release sees a waiter"
            );
            assert!(semaphore.reconfigure(1, fair).is_empty(), "nobody to wake");
            assert_eq!(semaphore.available(), 0);
            semaphore.release_to_waiters();
            assert!(!poll(&semaphore, waiter), "nothing was handed over");
            assert_eq!(semaphore.waiters(), (1, 1));
            semaphore.release();
            assert!(poll(&semaphore, waiter));
            semaphore.release();
            assert_eq!(semaphore.available(), 1);
            assert!(!semaphore.has_waiters_bit());
        }
    }

    /// A grow in the same window hands out the freed permit along with its own, in order; the
    /// late half of the release then finds nothing left to hand over.
    #[test]
    fn a_grow_between_the_halves_of_a_release_serves_the_queue_in_order() {
        let semaphore = Semaphore::new(1, true);
        assert!(semaphore.try_acquire());
        let first = queue(&semaphore);
        let second = queue(&semaphore);
        let third = queue(&semaphore);
        assert!(semaphore.free_permit() & HAS_WAITERS != 0);
        assert_eq!(semaphore.reconfigure(2, true).len(), 2, "two hand-overs");
        semaphore.release_to_waiters();
        assert!(poll(&semaphore, first) && poll(&semaphore, second));
        assert!(!poll(&semaphore, third));
        assert_eq!((semaphore.available(), semaphore.waiters()), (0, (1, 1)));
        semaphore.release();
        assert!(poll(&semaphore, third));
        semaphore.release();
        semaphore.release();
        assert_eq!(semaphore.available(), 2);
        assert!(!semaphore.has_waiters_bit());
    }

    /// The same limit and fairness leave a permit on its way to the queue to its release.
    #[test]
    fn an_unchanged_reconfiguration_does_nothing() {
        let semaphore = Semaphore::new(1, true);
        assert!(semaphore.try_acquire());
        let waiter = queue(&semaphore);
        assert!(semaphore.free_permit() & HAS_WAITERS != 0);
        assert!(semaphore.reconfigure(1, true).is_empty());
        assert_eq!(semaphore.waiters(), (1, 1), "still queued");
        assert_eq!(semaphore.available(), 1);
        semaphore.release_to_waiters();
        assert!(poll(&semaphore, waiter));
        semaphore.release();
        assert_eq!(semaphore.available(), 1);
    }

    #[test]
    fn counts_give_the_permits_held_through_a_surplus() {
        let semaphore = Semaphore::new(5, false);
        for _ in 0..4 {
            assert!(semaphore.try_acquire());
        }
        semaphore.reconfigure(1, false);
        let counts = semaphore.counts();
        assert_eq!((counts.available, counts.held, counts.permitted), (0, 4, 4));
        semaphore.release();
        assert_eq!(semaphore.counts().held, 3);
        assert_eq!(
            format!("{semaphore:?}"),
            "Semaphore { available: 0, max: 1, fair: false, has_waiters: false }"
        );
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
