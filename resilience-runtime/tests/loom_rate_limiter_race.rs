//! A model check with loom of a race at a cycle boundary: a caller that read the clock in one
//! cycle and lost its compare-and-swap to a caller of the next cycle must decide on the clock
//! as it is, not on its old reading (which made it refuse while the new cycle had permissions).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p resilience-runtime --test loom_rate_limiter_race --release
//! ```
//!
//! The manual clock is plain std atomics: loom switches threads only at its own operations, so
//! a caller can read the clock, then wait at its swap while another thread advances the clock
//! and takes a permission of the next cycle.
#![cfg(loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use resilience_runtime::{Clock, ManualClock, RateLimiter, RateLimiterConfig};

const PERIOD: Duration = Duration::from_secs(1);

#[test]
fn a_caller_that_loses_a_race_into_the_next_cycle_is_not_refused_below_the_rate() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(3);
    builder.check(|| {
        let clock = ManualClock::new();
        let config = RateLimiterConfig::builder()
            .limit_for_period(2)
            .limit_refresh_period(PERIOD)
            .timeout_duration(Duration::ZERO)
            .build()
            .unwrap();
        let limiter = Arc::new(RateLimiter::with_clock(
            "loom-race",
            config,
            Clock::from(clock.clone()),
        ));
        // Cycle 0 has one permission left, cycle 1 has two: two callers always fit.
        limiter.try_acquire().unwrap();
        let refused = Arc::new(AtomicUsize::new(0));
        let in_cycle_0 = {
            let (limiter, refused) = (Arc::clone(&limiter), Arc::clone(&refused));
            thread::spawn(move || {
                if limiter.try_acquire().is_err() {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let in_cycle_1 = {
            let (limiter, refused) = (Arc::clone(&limiter), Arc::clone(&refused));
            thread::spawn(move || {
                clock.advance(PERIOD);
                if limiter.try_acquire().is_err() {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        in_cycle_0.join().unwrap();
        in_cycle_1.join().unwrap();
        assert_eq!(
            refused.load(Ordering::SeqCst),
            0,
            "a call was refused while its cycle had permissions"
        );
    });
}
