//! The permission timeline under the rate limiter: which permission a caller gets, in one
//! compare-and-swap on one atomic word.
//!
//! # The timeline
//!
//! ```text
//!  positions:  base ........ base+L ........ base+2L ........
//!  cycles:     [  cycle 0   )[   cycle 1    )[   cycle 2    )
//!  time:       t0            t0+period       t0+2*period
//!                         ^ next (the first position not taken)
//! ```
//!
//! Cycle `c = (now - t0) / period` owns the positions `[base + c*L, base + (c+1)*L)`. A caller
//! takes `start = max(next, base + c*L)`: positions below the current cycle's start are gone
//! (unused permissions do not carry over), so the first caller of a cycle jumps `next` there.
//! If `start` is inside the current cycle the permission is granted now; otherwise it belongs
//! to the cycle `(start - base) / L`, which starts at `t0 + k*period`, and a caller allowed to
//! wait that long reserves it (`next` moves past it: reservations are paid by later cycles).
//! Every decision is one `compare_exchange` of `next` from the value the caller read.
//!
//! The configuration bounds the rate at one position per nanosecond, so `next` stays below
//! 2⁶⁴ for 584 years of uptime (arithmetic saturates beyond).
//!
//! # Reconfiguration
//!
//! The parameters (`t0`, `base`, `period`, `L`, the timeout, the clock reading) are several
//! words, published under a sequence lock (`seq`, odd while a writer is in): a reader takes
//! them only when `seq` was even and unchanged around its reads. A reconfiguration moves
//! `next` to a fresh `base` greater than every value `next` has ever held (`peak` records the
//! values a give-back lowered), so a caller that decided on the old parameters and compares
//! against an old value of `next` fails its swap and reads the parameters again: a call is
//! judged by one configuration or the other, never by a mix. A writer bumps `seq` before moving
//! `next`, so a caller that sees the new `next` also sees the writer in or done: a take reads
//! the parameters, then `next`, then `seq` again, and decides on parameters read after `next`
//! whenever `seq` moved in between (the other readers simply read `next` first).
//!
//! # Give-back
//!
//! A waiter that gives up decrements `next` by one, only if the position below `next` is in the
//! current cycle or later (a permission is never handed back into the past) and only if no
//! reconfiguration happened since it reserved (same `seq`; a reconfiguration moved `next` above
//! `peak`, which the give-back raised to its expected value first, so its swap cannot succeed
//! across one). (Even without the first check a give-back could not grant into the past:
//! `next` at or below the current cycle's start is clamped to it by `max`, and the skip of the
//! next jump balances the count; the loom model checks both. The check keeps such a give-back
//! a no-op rather than a write.)
//!
//! # Counting without a second atomic on the fast path
//!
//! The permissions granted at once are derived: every position `next` moved past was granted,
//! skipped (the jump to a new cycle, or a reconfiguration), drained, or reserved; give-backs
//! moved it back. The rare movements are counted beside it (skips once per cycle), *before*
//! their swap and undone if it fails, so a reading of the sum is never above the truth while
//! they are in flight; the caller latches the largest value read so the count never decreases.

use std::fmt;

use crossbeam_utils::CachePadded;

use crate::clock::{Clock, Reading};
use crate::sync::{AtomicU64, Ordering};

#[cfg(loom)]
use loom::{sync::atomic::fence, thread::yield_now};
#[cfg(not(loom))]
use std::{sync::atomic::fence, thread::yield_now};

/// The parameters of one configuration, as the timeline applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Params {
    /// The sequence number they were published under (even).
    pub(super) seq: u64,
    /// The clock reading at which cycle 0 starts.
    pub(super) t0: u64,
    /// The position of cycle 0's first permission.
    pub(super) base: u64,
    /// The cycle, in nanoseconds (at least `limit`).
    pub(super) period: u64,
    /// The permissions of one cycle (at least 1).
    pub(super) limit: u64,
    /// The longest wait for a later cycle, in nanoseconds: 0 never waits, `u64::MAX` always may.
    pub(super) timeout: u64,
    /// How the clock is read (one timeline per configuration).
    pub(super) reading: Reading,
}

impl Params {
    #[inline]
    fn cycle(&self, now: u64) -> u64 {
        now.saturating_sub(self.t0) / self.period
    }

    #[inline]
    fn cycle_start(&self, cycle: u64) -> u64 {
        self.base.saturating_add(cycle.saturating_mul(self.limit))
    }

    /// Reads `clock` as these parameters say, with the positions of the cycle the reading is
    /// in: `(now, its first position, one past its last)`.
    #[inline]
    fn read_cycle(&self, clock: &Clock) -> (u64, u64, u64) {
        let now = clock.read(self.reading);
        let start = self.cycle_start(self.cycle(now));
        (now, start, start.saturating_add(self.limit))
    }

    /// The clock reading at which `cycle` starts (`u64::MAX`: never).
    fn cycle_time(&self, cycle: u64) -> u64 {
        let at = u128::from(self.t0) + u128::from(cycle) * u128::from(self.period);
        u64::try_from(at).unwrap_or(u64::MAX)
    }
}

/// What a caller may do when no permission is free now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Nothing: refused.
    Now,
    /// Say whether it could wait ([`Take::WouldWait`]), reserving nothing.
    Probe,
    /// Reserve a permission of a later cycle within the timeout.
    Reserve,
}

/// The outcome of [`Timeline::take`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Take {
    /// A permission of the current cycle.
    Granted,
    /// A permission of a later cycle, to be waited for.
    Reserved(Reservation),
    /// None now, but one within the timeout ([`Mode::Probe`]); nothing reserved.
    WouldWait,
    /// None within the timeout (or none now, with [`Mode::Now`]); nothing consumed. The
    /// earliest free permission comes in `retry_after` nanoseconds.
    Refused { retry_after: u64 },
}

/// A permission of a later cycle, held by a waiting caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reservation {
    /// The parameters' sequence number when it was made.
    pub(super) seq: u64,
    /// The clock reading at which its cycle starts.
    pub(super) deadline: u64,
    /// The reading `deadline` is on.
    pub(super) reading: Reading,
    /// The wait, in nanoseconds, as of the reservation.
    pub(super) wait: u64,
}

pub(super) struct Timeline {
    /// The first position not taken: the one word every take writes. On a cache line of its
    /// own, so that callers on other cores keep reading the parameters below from their own
    /// caches while this line moves between the cores that take.
    next: CachePadded<AtomicU64>,
    /// At least every value `next` held before a give-back lowered it.
    peak: AtomicU64,
    /// The parameters' sequence lock: odd while a reconfiguration writes them.
    seq: AtomicU64,
    t0: AtomicU64,
    base: AtomicU64,
    period: AtomicU64,
    limit: AtomicU64,
    timeout: AtomicU64,
    reading: AtomicU64,
    /// Positions jumped over: unused permissions of past cycles, reconfiguration gaps.
    skipped: AtomicU64,
    /// Positions taken by `drain`.
    drained: AtomicU64,
    /// Positions reserved by waiters.
    reserved: AtomicU64,
    /// Positions given back by waiters that gave up.
    given_back: AtomicU64,
}

const fn reading_code(reading: Reading) -> u64 {
    match reading {
        Reading::None => 0,
        Reading::Coarse => 1,
        Reading::Precise => 2,
    }
}

fn reading_of(code: u64) -> Reading {
    match code {
        0 => Reading::None,
        1 => Reading::Coarse,
        _ => Reading::Precise,
    }
}

impl Timeline {
    /// A timeline whose cycle 0 starts at `t0`.
    pub(super) fn new(params: Params) -> Self {
        Timeline {
            next: CachePadded::new(AtomicU64::new(params.base)),
            peak: AtomicU64::new(params.base),
            seq: AtomicU64::new(0),
            t0: AtomicU64::new(params.t0),
            base: AtomicU64::new(params.base),
            period: AtomicU64::new(params.period),
            limit: AtomicU64::new(params.limit),
            timeout: AtomicU64::new(params.timeout),
            reading: AtomicU64::new(reading_code(params.reading)),
            skipped: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            given_back: AtomicU64::new(0),
        }
    }

    /// The parameters in force, read consistently (a reader waits out a reconfiguration,
    /// which writes a handful of words).
    #[inline]
    pub(super) fn params(&self) -> Params {
        let mut spins = 0u32;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq & 1 == 0 {
                let params = Params {
                    seq,
                    t0: self.t0.load(Ordering::Relaxed),
                    base: self.base.load(Ordering::Relaxed),
                    period: self.period.load(Ordering::Relaxed),
                    limit: self.limit.load(Ordering::Relaxed),
                    timeout: self.timeout.load(Ordering::Relaxed),
                    reading: reading_of(self.reading.load(Ordering::Relaxed)),
                };
                // Orders the loads above before the check below (the seqlock's read side).
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == seq {
                    return params;
                }
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                yield_now();
            }
        }
    }

    /// Takes a permission as `mode` allows. Inlined into its callers: out of line, the call's
    /// prologue and epilogue were a seventh of a take's instructions.
    #[inline(always)]
    pub(super) fn take(&self, clock: &Clock, mode: Mode) -> Take {
        // The parameters, the clock and the current cycle first, `next` last: the line every
        // take writes is then held from its read to its swap for a handful of instructions,
        // not for a clock reading and a division, so that callers on two cores rarely swap
        // from a stale value (this order took two threads taking from one limiter from
        // 1.5–1.9× governor's time to 0.6–0.9×: BENCHMARKS.md at 79fb71f). Read after the parameters,
        // `next` is checked against them at the top of the loop: see "Reconfiguration" above.
        let mut params = self.params();
        let (mut now, mut cycle_start, mut cycle_end) = params.read_cycle(clock);
        #[cfg(test)]
        hooks::after_clock_read();
        let mut next = self.next.load(Ordering::Acquire);
        // Whether `now` was read after `next` was: then a `next` past this cycle is not the
        // work of a caller that read the clock later than this one did.
        let mut now_is_fresh = false;
        loop {
            // A reconfiguration that moved `next` before it was read bumped `seq` first: then
            // decide on its parameters, read after `next` (so never older than it).
            if self.seq.load(Ordering::Acquire) != params.seq {
                params = self.params();
                (now, cycle_start, cycle_end) = params.read_cycle(clock);
                now_is_fresh = true;
            }
            let start = next.max(cycle_start);
            if start > cycle_end && !now_is_fresh {
                // `next` is past this reading's cycle: beyond its last position, so not simply
                // used up (that leaves `next` at its end). A caller that read the clock after
                // this one (but before this read of `next`) moved it into a later cycle, or
                // waiters reserved ahead. Judged by this reading, the later cycle would look
                // out of reach (or further away than it is) and this call would be refused
                // below the rate: read the clock again, once. A refusal from a used-up cycle
                // pays nothing for it; while waiters hold reservations ahead, `next` is past
                // the cycle as a rule, and each take then reads the clock twice.
                (now, cycle_start, cycle_end) = params.read_cycle(clock);
                now_is_fresh = true;
                continue;
            }
            if start < cycle_end {
                let skip = start - next;
                if skip != 0 {
                    self.skipped.fetch_add(skip, Ordering::Relaxed);
                }
                match self.next.compare_exchange_weak(
                    next,
                    start + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Take::Granted,
                    Err(actual) => {
                        if skip != 0 {
                            self.skipped.fetch_sub(skip, Ordering::Relaxed);
                        }
                        next = actual;
                        now_is_fresh = false;
                        if next >= cycle_end {
                            // Another caller took the rest of this cycle, or one that read the
                            // clock later moved `next` into a later cycle: judged by this
                            // reading, that caller's cycle would look exhausted and this call
                            // would be refused below the rate. Read the clock again (only on
                            // this contended path).
                            (now, cycle_start, cycle_end) = params.read_cycle(clock);
                            now_is_fresh = true;
                        }
                    }
                }
            } else {
                // `start` is beyond the current cycle, so `start >= base`.
                let cycle = (start - params.base) / params.limit;
                let deadline = params.cycle_time(cycle);
                let wait = deadline.saturating_sub(now);
                let within = params.timeout != 0 && wait <= params.timeout;
                match mode {
                    Mode::Reserve if within => {
                        self.reserved.fetch_add(1, Ordering::Relaxed);
                        match self.next.compare_exchange_weak(
                            next,
                            start + 1,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => {
                                return Take::Reserved(Reservation {
                                    seq: params.seq,
                                    deadline,
                                    reading: params.reading,
                                    wait,
                                })
                            }
                            Err(actual) => {
                                self.reserved.fetch_sub(1, Ordering::Relaxed);
                                next = actual;
                                // As above: a later cycle may have begun meanwhile.
                                (now, cycle_start, cycle_end) = params.read_cycle(clock);
                                now_is_fresh = true;
                            }
                        }
                    }
                    Mode::Probe if within => return Take::WouldWait,
                    Mode::Now | Mode::Probe | Mode::Reserve => {
                        return Take::Refused { retry_after: wait }
                    }
                }
            }
        }
    }

    /// Gives a waiter's permission back, if it can still serve someone (see "Give-back").
    /// `true` if it was given back.
    pub(super) fn give_back(&self, clock: &Clock, reservation: &Reservation) -> bool {
        let mut next = self.next.load(Ordering::SeqCst);
        loop {
            let params = self.params();
            if params.seq != reservation.seq {
                return false;
            }
            let now = clock.read(params.reading);
            let cycle_start = params.cycle_start(params.cycle(now));
            // The position handed back is `next - 1`: never one of a past cycle.
            if next == 0 || next - 1 < cycle_start {
                return false;
            }
            self.peak.fetch_max(next, Ordering::SeqCst);
            match self
                .next
                .compare_exchange(next, next - 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    self.given_back.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Err(actual) => next = actual,
            }
        }
    }

    /// Uses up what is left of the current cycle (Resilience4j's `drainPermissions`).
    pub(super) fn drain(&self, clock: &Clock) {
        let mut next = self.next.load(Ordering::Acquire);
        let mut params = self.params();
        let mut now = clock.read(params.reading);
        loop {
            let cycle_start = params.cycle_start(params.cycle(now));
            let cycle_end = cycle_start.saturating_add(params.limit);
            if next >= cycle_end {
                return;
            }
            let moved = cycle_end - next;
            self.drained.fetch_add(moved, Ordering::Relaxed);
            match self
                .next
                .compare_exchange(next, cycle_end, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => {
                    self.drained.fetch_sub(moved, Ordering::Relaxed);
                    next = actual;
                }
            }
            if self.seq.load(Ordering::Acquire) != params.seq {
                params = self.params();
                now = clock.read(params.reading);
            }
        }
    }

    /// The permissions left in the current cycle; negative: reserved ahead by waiters.
    pub(super) fn available(&self, clock: &Clock) -> i64 {
        let next = self.next.load(Ordering::Acquire);
        let params = self.params();
        let now = clock.read(params.reading);
        let cycle_start = params.cycle_start(params.cycle(now));
        let cycle_end = cycle_start.saturating_add(params.limit);
        let available = i128::from(cycle_end) - i128::from(next.max(cycle_start));
        i64::try_from(available).unwrap_or(if available < 0 { i64::MIN } else { i64::MAX })
    }

    /// Permissions granted at once (not after a wait) since creation: see "Counting". May be
    /// low by the operations in flight while it is read, never high by more than a waiter
    /// that completes its reservation meanwhile.
    pub(super) fn granted_at_once(&self) -> u64 {
        // Given-back first (counted after its swap), then `next`, then the counts made before
        // their swaps: each reads at most what `next` includes.
        let given_back = self.given_back.load(Ordering::SeqCst);
        let next = self.next.load(Ordering::SeqCst);
        let skipped = self.skipped.load(Ordering::SeqCst);
        let drained = self.drained.load(Ordering::SeqCst);
        let reserved = self.reserved.load(Ordering::SeqCst);
        // Positions start at 0 at creation; each reconfiguration's gap is in `skipped`.
        let granted = i128::from(next) + i128::from(given_back)
            - i128::from(skipped)
            - i128::from(drained)
            - i128::from(reserved);
        u64::try_from(granted.max(0)).unwrap_or(u64::MAX)
    }

    /// Installs new parameters (their `seq` and `base` are ignored): a fresh cycle 0 starting
    /// at `params.t0`, on positions above every one used so far. The caller serialises
    /// reconfigurations.
    pub(super) fn reconfigure(&self, params: Params) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // The seqlock's write side: `seq` odd before any parameter (or `next`) changes.
        fence(Ordering::Release);
        let mut next = self.next.load(Ordering::SeqCst);
        let base = loop {
            let base = next.max(self.peak.load(Ordering::SeqCst)).saturating_add(1);
            let gap = base - next;
            self.skipped.fetch_add(gap, Ordering::Relaxed);
            match self
                .next
                .compare_exchange(next, base, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break base,
                Err(actual) => {
                    self.skipped.fetch_sub(gap, Ordering::Relaxed);
                    next = actual;
                }
            }
        };
        self.peak.fetch_max(base, Ordering::SeqCst);
        self.t0.store(params.t0, Ordering::Relaxed);
        self.base.store(base, Ordering::Relaxed);
        self.period.store(params.period, Ordering::Relaxed);
        self.limit.store(params.limit, Ordering::Relaxed);
        self.timeout.store(params.timeout, Ordering::Relaxed);
        self.reading
            .store(reading_code(params.reading), Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

impl fmt::Debug for Timeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeline")
            .field("next", &self.next.load(Ordering::Relaxed))
            .field("params", &self.params())
            .finish_non_exhaustive()
    }
}

/// A test's way into [`Timeline::take`] between its clock reading and its read of `next`, where
/// a caller on another core can take a permission of a later cycle: the unit tests run that
/// caller here, on the same thread, to make the interleaving certain (loom does not reach it:
/// the manual clock's reads are not its operations).
#[cfg(test)]
pub(super) mod hooks {
    use std::cell::RefCell;

    thread_local! {
        static AFTER_CLOCK_READ: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// Runs `f` in the next take on this thread, after it read the clock, once.
    pub(in crate::rate_limiter) fn set_after_clock_read(f: impl FnOnce() + 'static) {
        AFTER_CLOCK_READ.with(|hook| *hook.borrow_mut() = Some(Box::new(f)));
    }

    pub(super) fn after_clock_read() {
        // Taken before it runs: a take inside it does not run it again.
        if let Some(f) = AFTER_CLOCK_READ.with(|hook| hook.borrow_mut().take()) {
            f();
        }
    }
}
