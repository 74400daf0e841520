//! Model checks of the bulkhead's permit accounting with loom: every interleaving of a few
//! threads taking, waiting for, cancelling and releasing permits, under fair and unfair call
//! handling.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p resilience-runtime --test loom_bulkhead --release
//! ```
//!
//! Each model checks that no more than `max_concurrent_calls` permits are ever held, that all
//! of them are free again at the end with the counters agreeing, and that no waiter is stranded:
//! a waiter that is never woken makes `loom::future::block_on` report a deadlock. The models of
//! reconfiguration race a change of the limit or of the fairness with takes, waits and
//! releases, and check that no permit is lost or created: at the end, the free permits are the
//! new limit.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use resilience_runtime::{AdaptiveLimit, Bulkhead, BulkheadConfig, Clock, ManualClock};

/// Runs `model` over every interleaving with at most `preemptions` preemptions (unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise), which keeps each model within seconds to a minute.
fn check(preemptions: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    builder.check(model);
}

/// A bulkhead shared by the model's threads, and a count of the calls it admitted.
struct Shared {
    bulkhead: Bulkhead,
    inside: AtomicUsize,
}

/// A configuration that waits forever (no timer under loom).
fn config(max: u32, fair: bool) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(max)
        .max_wait_duration(Duration::MAX)
        .fair_call_handling(fair)
        .build()
        .unwrap()
}

impl Shared {
    fn new(max: u32, fair: bool) -> Arc<Self> {
        Arc::new(Shared {
            bulkhead: Bulkhead::with_clock(
                "loom",
                config(max, fair),
                Clock::from(ManualClock::new()),
            ),
            inside: AtomicUsize::new(0),
        })
    }

    /// Runs one admitted call: asserts the bound while "inside".
    fn call(&self) {
        self.call_within(self.bulkhead.max_allowed_concurrent_calls() as usize);
    }

    /// Runs one admitted call, asserting that at most `max` calls are inside.
    fn call_within(&self, max: usize) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(now <= max, "{now} calls inside a bulkhead of {max}");
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    /// A thread that waits for a permit and makes one call.
    fn spawn_waiter(this: &Arc<Self>) -> thread::JoinHandle<()> {
        let shared = Arc::clone(this);
        thread::spawn(move || shared.acquire_and_call())
    }

    /// A thread that makes one call if a permit is free (never waits), asserting at most
    /// `max` calls inside (by default the bulkhead's limit when it checks).
    fn spawn_newcomer(this: &Arc<Self>, max: Option<usize>) -> thread::JoinHandle<()> {
        let shared = Arc::clone(this);
        thread::spawn(move || {
            if let Ok(permit) = shared.bulkhead.try_acquire() {
                match max {
                    Some(max) => shared.call_within(max),
                    None => shared.call(),
                }
                drop(permit);
            }
        })
    }

    /// Waits (async, on loom's executor) for a permit and makes one call.
    fn acquire_and_call(&self) {
        let permit = loom::future::block_on(self.bulkhead.acquire()).expect("waits forever");
        self.call();
        drop(permit);
    }

    fn assert_idle(&self) {
        let metrics = self.bulkhead.metrics();
        assert_eq!(
            metrics.available_concurrent_calls(),
            metrics.max_allowed_concurrent_calls(),
            "a permit was lost"
        );
        assert_eq!(metrics.finished_calls(), metrics.permitted_calls());
    }
}

struct NoopWaker;

impl Wake for NoopWaker {
    fn wake(self: StdArc<Self>) {}
}

#[test]
fn try_acquire_never_admits_more_than_max() {
    for fair in [true, false] {
        check(4, move || {
            let shared = Shared::new(1, fair);
            let others: Vec<_> = (0..2)
                .map(|_| Shared::spawn_newcomer(&shared, None))
                .collect();
            if let Ok(permit) = shared.bulkhead.try_acquire() {
                shared.call();
                drop(permit);
            }
            for other in others {
                other.join().unwrap();
            }
            shared.assert_idle();
            let metrics = shared.bulkhead.metrics();
            assert_eq!(metrics.permitted_calls() + metrics.rejected_calls(), 3);
        });
    }
}

fn waiters_are_served(fair: bool) {
    check(4, move || {
        let shared = Shared::new(1, fair);
        let other = Shared::spawn_waiter(&shared);
        shared.acquire_and_call();
        other.join().unwrap();
        shared.assert_idle();
        assert_eq!(shared.bulkhead.metrics().permitted_calls(), 2);
    });
}

#[test]
fn fair_waiters_are_served() {
    waiters_are_served(true);
}

#[test]
fn unfair_waiters_are_served() {
    waiters_are_served(false);
}

/// A newcomer using `try_acquire` races an async waiter for the permit a third thread frees.
fn newcomer_races_a_waiter(fair: bool) {
    check(4, move || {
        let shared = Shared::new(1, fair);
        let held = shared.bulkhead.try_acquire().unwrap();
        let waiter = Shared::spawn_waiter(&shared);
        let newcomer = Shared::spawn_newcomer(&shared, None);
        drop(held);
        waiter.join().unwrap();
        newcomer.join().unwrap();
        shared.assert_idle();
    });
}

#[test]
fn fair_newcomer_races_a_waiter() {
    newcomer_races_a_waiter(true);
}

#[test]
fn unfair_newcomer_races_a_waiter() {
    newcomer_races_a_waiter(false);
}

/// A waiter polled once and dropped (cancelled) while the permit is released and another
/// waiter waits: whatever it had been given (a permit under fair handling, a wake-up under
/// unfair) must reach the other waiter.
fn cancelled_waiter_loses_nothing(fair: bool) {
    check(4, move || {
        let shared = Shared::new(1, fair);
        let held = shared.bulkhead.try_acquire().unwrap();
        let cancelled = {
            let shared = shared.clone();
            thread::spawn(move || poll_once_and_cancel(&shared))
        };
        let waiter = Shared::spawn_waiter(&shared);
        drop(held);
        cancelled.join().unwrap();
        waiter.join().unwrap();
        shared.assert_idle();
    });
}

#[test]
fn fair_cancelled_waiter_loses_nothing() {
    cancelled_waiter_loses_nothing(true);
}

#[test]
fn unfair_cancelled_waiter_loses_nothing() {
    cancelled_waiter_loses_nothing(false);
}

/// Polls `acquire()` once with a waker that does nothing, then drops it (cancelling the wait);
/// a permit it got at once is used and released.
fn poll_once_and_cancel(shared: &Shared) {
    let waker = Waker::from(StdArc::new(NoopWaker));
    let mut acquire = pin!(shared.bulkhead.acquire());
    if let Poll::Ready(result) = acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
        let permit = result.expect("waits forever");
        shared.call();
        drop(permit);
    }
}

/// A release sees waiters, but before it reaches the queue the only waiter cancels, a
/// newcomer takes the freed permit, and the cancelled caller queues again: the late release
/// must not hand over (or wake for) a permit that is no longer free.
fn release_finds_a_different_queue(fair: bool) {
    // Five preemptions: the release, the cancel, the newcomer and the return all interleave.
    check(5, move || {
        let shared = Shared::new(1, fair);
        let held = shared.bulkhead.try_acquire().unwrap();
        let returning = {
            let shared = shared.clone();
            thread::spawn(move || {
                poll_once_and_cancel(&shared);
                shared.acquire_and_call();
            })
        };
        let newcomer = Shared::spawn_newcomer(&shared, None);
        drop(held);
        returning.join().unwrap();
        newcomer.join().unwrap();
        shared.assert_idle();
    });
}

#[test]
fn fair_release_finds_a_different_queue() {
    release_finds_a_different_queue(true);
}

#[test]
fn unfair_release_finds_a_different_queue() {
    release_finds_a_different_queue(false);
}

/// Two permits, three callers: releases and waits interleave with more than one permit free.
fn two_permits_three_waiters(fair: bool) {
    check(4, move || {
        let shared = Shared::new(2, fair);
        let others: Vec<_> = (0..2).map(|_| Shared::spawn_waiter(&shared)).collect();
        shared.acquire_and_call();
        for other in others {
            other.join().unwrap();
        }
        shared.assert_idle();
        assert_eq!(shared.bulkhead.metrics().permitted_calls(), 3);
    });
}

#[test]
fn fair_two_permits_three_waiters() {
    two_permits_three_waiters(true);
}

#[test]
fn unfair_two_permits_three_waiters() {
    two_permits_three_waiters(false);
}

// ---------------------------------------------------------------- reconfiguration

/// A shrink from 2 to 1 races a caller waiting for (or taking) the second permit while the
/// first is held. A call admitted after the shrink returned must find at most one call inside,
/// the held one counted; at the end the one permit is free.
fn shrink_races_a_caller(fair: bool) {
    check(4, move || {
        let shared = Shared::new(2, fair);
        let shrunk = Arc::new(AtomicBool::new(false));
        shared.inside.fetch_add(1, Ordering::SeqCst);
        let held = shared.bulkhead.try_acquire().unwrap();
        let caller = {
            let (shared, shrunk) = (shared.clone(), shrunk.clone());
            thread::spawn(move || {
                let after_shrink = shrunk.load(Ordering::SeqCst);
                let permit = loom::future::block_on(shared.bulkhead.acquire()).unwrap();
                shared.call_within(if after_shrink { 1 } else { 2 });
                drop(permit);
            })
        };
        shared.bulkhead.reconfigure(config(1, fair));
        shrunk.store(true, Ordering::SeqCst);
        shared.inside.fetch_sub(1, Ordering::SeqCst);
        drop(held);
        caller.join().unwrap();
        shared.assert_idle();
        assert_eq!(shared.bulkhead.available_concurrent_calls(), 1);
        assert_eq!(shared.bulkhead.metrics().permitted_calls(), 2);
    });
}

#[test]
fn fair_shrink_races_a_caller() {
    shrink_races_a_caller(true);
}

#[test]
fn unfair_shrink_races_a_caller() {
    shrink_races_a_caller(false);
}

/// A grow from 1 to 2 while the only permit is held must serve a waiter by itself: the holder
/// lets go only after the waiter is through (a waiter left queued is a deadlock). A newcomer
/// using `try_acquire` races both for the new permit.
fn grow_serves_a_waiter(fair: bool) {
    check(3, move || {
        let shared = Shared::new(1, fair);
        let held = shared.bulkhead.try_acquire().unwrap();
        let waiter = Shared::spawn_waiter(&shared);
        let newcomer = Shared::spawn_newcomer(&shared, Some(1));
        shared.bulkhead.reconfigure(config(2, fair));
        waiter.join().unwrap();
        newcomer.join().unwrap();
        drop(held);
        shared.assert_idle();
        assert_eq!(shared.bulkhead.available_concurrent_calls(), 2);
    });
}

#[test]
fn fair_grow_serves_a_waiter() {
    grow_serves_a_waiter(true);
}

#[test]
fn unfair_grow_serves_a_waiter() {
    grow_serves_a_waiter(false);
}

/// A shrink to 1 and a grow to 3 in a row race two callers of a bulkhead of 2: whatever the
/// surplus when the grow lands, the limit is 3 at the end with all 3 permits free.
fn shrink_then_grow_nets_out(fair: bool) {
    check(3, move || {
        let shared = Shared::new(2, fair);
        let caller = {
            let shared = shared.clone();
            thread::spawn(move || {
                let permit = loom::future::block_on(shared.bulkhead.acquire()).unwrap();
                shared.call_within(2);
                drop(permit);
            })
        };
        let reconfigurer = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.bulkhead.reconfigure(config(1, fair));
                shared.bulkhead.reconfigure(config(3, fair));
            })
        };
        let permit = loom::future::block_on(shared.bulkhead.acquire()).unwrap();
        shared.call_within(2);
        drop(permit);
        caller.join().unwrap();
        reconfigurer.join().unwrap();
        shared.assert_idle();
        assert_eq!(shared.bulkhead.available_concurrent_calls(), 3);
        assert_eq!(shared.bulkhead.metrics().permitted_calls(), 2);
    });
}

#[test]
fn fair_shrink_then_grow_nets_out() {
    shrink_then_grow_nets_out(true);
}

#[test]
fn unfair_shrink_then_grow_nets_out() {
    shrink_then_grow_nets_out(false);
}

/// Fairness changes just after the only permit is released, with two callers waiting (or
/// about to): whether the release woke the head (unfair) or handed it the permit (fair), and
/// however the waiters' polls interleave with the change, both are served and the permit comes
/// back. Turning fairness on must not leave a permit that was freed for a woken waiter behind
/// the other waiter's bit.
fn fairness_toggle_races_a_release(from_fair: bool) {
    check(3, move || {
        let shared = Shared::new(1, from_fair);
        let held = shared.bulkhead.try_acquire().unwrap();
        let waiters: Vec<_> = (0..2).map(|_| Shared::spawn_waiter(&shared)).collect();
        drop(held);
        shared.bulkhead.reconfigure(config(1, !from_fair));
        for waiter in waiters {
            waiter.join().unwrap();
        }
        shared.assert_idle();
        assert_eq!(shared.bulkhead.metrics().permitted_calls(), 3);
    });
}

#[test]
fn fairness_turned_on_races_a_release() {
    fairness_toggle_races_a_release(false);
}

#[test]
fn fairness_turned_off_races_a_release() {
    fairness_toggle_races_a_release(true);
}

/// A newcomer that read the fairness before it was turned on barges into the now fair queue
/// while a hand-over to its head is under way: the grow of `grow_to` (or, without one, the
/// release of the held permit) must not hand the head a permit the newcomer already took.
/// The held permit counts as a call inside, until it is released: after the others are done
/// when the bulkhead grows (so that three calls inside a bulkhead of 2 cannot go unseen).
fn stale_newcomer_races_a_fair_hand_over(grow_to: u32) {
    check(3, move || {
        let shared = Shared::new(1, false);
        let held = shared.bulkhead.try_acquire().unwrap();
        shared.inside.fetch_add(1, Ordering::SeqCst);
        let waiter = Shared::spawn_waiter(&shared);
        let newcomer = Shared::spawn_newcomer(&shared, None);
        shared.bulkhead.reconfigure(config(grow_to, true));
        let mut held = Some(held);
        if grow_to == 1 {
            // Without a grow, only this release lets the waiter in.
            shared.inside.fetch_sub(1, Ordering::SeqCst);
            held = None;
        }
        waiter.join().unwrap();
        newcomer.join().unwrap();
        if held.take().is_some() {
            shared.inside.fetch_sub(1, Ordering::SeqCst);
        }
        shared.assert_idle();
    });
}

#[test]
fn stale_newcomer_races_the_hand_over_of_a_grow() {
    stale_newcomer_races_a_fair_hand_over(2);
}

#[test]
fn stale_newcomer_races_the_hand_over_of_a_release() {
    stale_newcomer_races_a_fair_hand_over(1);
}

// ---------------------------------------------------------------- adaptive limits

/// An AIMD limit between 1 and 2, starting at `initial`, waiting forever; every call timed
/// (a manual clock).
fn adaptive(initial: u32, fair: bool) -> Arc<Shared> {
    let config = BulkheadConfig::builder()
        .adaptive(
            AdaptiveLimit::aimd()
                .min_limit(1)
                .initial_limit(initial)
                .max_limit(2),
        )
        .max_wait_duration(Duration::MAX)
        .fair_call_handling(fair)
        .build()
        .unwrap();
    Arc::new(Shared {
        bulkhead: Bulkhead::with_clock("loom", config, Clock::from(ManualClock::new())),
        inside: AtomicUsize::new(0),
    })
}

/// A waiter that asserts at most `max` calls inside (the limit may grow while it is inside).
fn spawn_waiter_within(shared: &Arc<Shared>, max: usize) -> thread::JoinHandle<()> {
    let shared = Arc::clone(shared);
    thread::spawn(move || {
        let permit = loom::future::block_on(shared.bulkhead.acquire()).expect("waits forever");
        shared.call_within(max);
        drop(permit);
    })
}

/// The release of the only permit is a sample that grows the limit from 1 to 2 (1 in flight
/// uses half of it), racing a waiter and a newcomer: the waiter is served (by the permit
/// released or the one grown), at most 2 are inside, every permit comes back.
fn a_sample_that_grows_the_limit_serves_the_waiters(fair: bool) {
    check(3, move || {
        let shared = adaptive(1, fair);
        let held = shared.bulkhead.try_acquire().unwrap();
        let waiter = spawn_waiter_within(&shared, 2);
        let newcomer = Shared::spawn_newcomer(&shared, Some(2));
        drop(held);
        waiter.join().unwrap();
        newcomer.join().unwrap();
        shared.assert_idle();
        assert_eq!(shared.bulkhead.max_allowed_concurrent_calls(), 2);
    });
}

#[test]
fn fair_adaptive_grow_serves_the_waiters() {
    a_sample_that_grows_the_limit_serves_the_waiters(true);
}

#[test]
fn unfair_adaptive_grow_serves_the_waiters() {
    a_sample_that_grows_the_limit_serves_the_waiters(false);
}

/// Two calls of a limit of 2 end at once, one as a drop (the limit falls to 1) and one as a
/// success (whose sample may find the algorithm taken and be skipped), racing a newcomer for
/// the permits they free: at most 2 inside, and every permit comes back to whatever limit the
/// samples left.
fn samples_race_each_other_and_a_newcomer(fair: bool) {
    check(3, move || {
        let shared = adaptive(2, fair);
        let second = shared.bulkhead.try_acquire().unwrap();
        let dropper = {
            let shared = shared.clone();
            thread::spawn(move || {
                if let Ok(permit) = shared.bulkhead.try_acquire() {
                    permit.record_drop();
                }
            })
        };
        let newcomer = Shared::spawn_newcomer(&shared, Some(2));
        drop(second);
        dropper.join().unwrap();
        newcomer.join().unwrap();
        shared.assert_idle();
    });
}

#[test]
fn fair_adaptive_samples_race() {
    samples_race_each_other_and_a_newcomer(true);
}

#[test]
fn unfair_adaptive_samples_race() {
    samples_race_each_other_and_a_newcomer(false);
}

/// A reconfiguration from the adaptive limit to a fixed one of 1 races a call whose sample
/// grows the limit to 2, and a waiter: the fixed limit wins (no sample applies after it),
/// the waiter is served, every permit comes back to the limit of 1.
fn reconfiguration_races_a_sample(fair: bool) {
    check(3, move || {
        let shared = adaptive(1, fair);
        let waiter = spawn_waiter_within(&shared, 2);
        let releaser = Shared::spawn_newcomer(&shared, Some(2));
        shared.bulkhead.reconfigure(config(1, fair));
        releaser.join().unwrap();
        waiter.join().unwrap();
        shared.assert_idle();
        assert_eq!(shared.bulkhead.max_allowed_concurrent_calls(), 1);
    });
}

#[test]
fn fair_reconfiguration_races_a_sample() {
    reconfiguration_races_a_sample(true);
}

#[test]
fn unfair_reconfiguration_races_a_sample() {
    reconfiguration_races_a_sample(false);
}
