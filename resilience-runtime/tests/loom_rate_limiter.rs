//! Model checks of the rate limiter's permission accounting with loom: concurrent acquisitions
//! racing a cycle refresh, and a give-back racing the clock.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p resilience-runtime --test loom_rate_limiter --release
//! ```
//!
//! The manual clock is plain std atomics, not loom's: loom switches threads only at its own
//! operations, so an advance happens atomically between two of them, at every point loom
//! explores. A caller reads the clock before and after its acquisition; a grant whose two
//! readings fall in one cycle belongs to that cycle, and no cycle may have more than its limit.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig};

const PERIOD: Duration = Duration::from_secs(1);

fn check(preemptions: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    builder.check(model);
}

fn limiter(limit: u32, timeout: Duration) -> (Arc<RateLimiter>, ManualClock) {
    let clock = ManualClock::new();
    let config = RateLimiterConfig::builder()
        .limit_for_period(limit)
        .limit_refresh_period(PERIOD)
        .timeout_duration(timeout)
        .build()
        .unwrap();
    let limiter = RateLimiter::with_clock("loom", config, Clock::from(clock.clone()));
    (Arc::new(limiter), clock)
}

/// The cycle the clock is in.
fn cycle(clock: &ManualClock) -> u64 {
    (clock.now().as_nanos() / PERIOD.as_nanos()) as u64
}

/// Grants of two concurrent callers of a limiter of one, while the clock moves into the next
/// cycle: never two in one cycle, and each cycle's permission granted at most once.
#[test]
fn acquisitions_racing_a_cycle_refresh_never_exceed_the_limit_of_a_cycle() {
    check(3, || {
        let (limiter, clock) = limiter(1, Duration::ZERO);
        // Grants seen entirely within cycle 0 / cycle 1, and all grants.
        let in_cycle = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let all = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, clock) = (Arc::clone(&limiter), clock.clone());
                let (in_cycle, all) = (Arc::clone(&in_cycle), Arc::clone(&all));
                thread::spawn(move || {
                    let before = cycle(&clock);
                    if limiter.try_acquire().is_ok() {
                        all.fetch_add(1, Ordering::SeqCst);
                        if cycle(&clock) == before {
                            in_cycle[before as usize].fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        let advancer = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(PERIOD))
        };
        for caller in callers {
            caller.join().unwrap();
        }
        advancer.join().unwrap();

        for n in in_cycle.iter() {
            assert!(n.load(Ordering::SeqCst) <= 1, "two grants in one cycle");
        }
        let all = all.load(Ordering::SeqCst);
        assert!(
            (1..=2).contains(&all),
            "{all} grants over two cycles of one"
        );
        // What cycle 1 has left matches what it granted.
        let left = limiter.available_permissions();
        assert!(left == 0 || left == 1, "{left}");
        if limiter.try_acquire().is_ok() {
            assert_eq!(left, 1);
        }
        assert!(limiter.try_acquire().is_err(), "cycle 1 granted twice");
        assert_eq!(
            limiter.metrics().permitted_calls() as usize,
            all + usize::from(left == 1)
        );
    });
}

/// A waiter for cycle 1 gives up while the clock jumps to cycle 2: its permission goes back to
/// cycle 1 if that cycle is not over, and never adds one to cycle 2.
#[test]
fn a_give_back_racing_the_clock_never_grants_into_a_past_or_extra_cycle() {
    for jump in [1u32, 2] {
        check(3, move || {
            let (limiter, clock) = limiter(1, PERIOD * 2);
            limiter.try_acquire().unwrap();
            let waiter = {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    let mut acquire = pin!(limiter.acquire());
                    let mut cx = Context::from_waker(Waker::noop());
                    // Pending if it reserved and its cycle has not started; else granted (or
                    // refused, as of a reading taken before the clock moved).
                    matches!(acquire.as_mut().poll(&mut cx), Poll::Ready(Ok(())))
                    // Dropped here: gives back a reservation still waiting.
                })
            };
            let advancer = {
                let clock = clock.clone();
                thread::spawn(move || clock.advance(PERIOD * jump))
            };
            let newcomer = {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || limiter.try_acquire().is_ok())
            };
            let waiter_granted = waiter.join().unwrap();
            advancer.join().unwrap();
            let newcomer_granted = newcomer.join().unwrap();

            // The current cycle never holds more than its one permission.
            let left = limiter.available_permissions();
            assert!(left <= 1, "{left} permissions in a cycle of one");
            let granted_now = limiter.try_acquire().is_ok();
            assert!(
                limiter.try_acquire().is_err(),
                "a cycle of one granted twice"
            );
            assert_eq!(granted_now, left == 1);
            // Every grant counted, and a given-back reservation not (a give-back into a past
            // cycle would show as a grant lost from the count).
            let permitted = limiter.metrics().permitted_calls();
            let granted = [true, waiter_granted, newcomer_granted, granted_now];
            assert_eq!(
                permitted,
                granted.iter().filter(|g| **g).count() as u64,
                "jump {jump}, grants {granted:?}: {limiter:?}"
            );
            // One permission per cycle the clock went through (cycle 0's went to the test).
            assert!(permitted <= 1 + u64::from(jump), "{permitted} grants");
            assert!(
                !(newcomer_granted && granted_now && jump == 1),
                "cycle 1 granted twice"
            );
            assert_eq!(limiter.metrics().number_of_waiting_threads(), 0);
        });
    }
}
