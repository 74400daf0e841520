//! An adaptive bulkhead as a user relies on it: the limit follows its samples, stays within
//! its bounds, never revokes a permit held, serves waiters when it grows, and switches to and
//! from a fixed limit in place. Time is a manual clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;
use crate::gate::Permit;
use crate::outcome::CallOutcome;

const MS: Duration = Duration::from_millis(1);

fn adaptive(limit: AdaptiveLimit) -> (Bulkhead, ManualClock) {
    let clock = ManualClock::new();
    let config = BulkheadConfig::builder().adaptive(limit).build().unwrap();
    let bulkhead = Bulkhead::with_clock("adaptive", config, Clock::from(clock.clone()));
    (bulkhead, clock)
}

/// AIMD from 4, between 2 and 8: one more per sample with half the limit in flight, × 0.9 on
/// a drop.
fn aimd() -> AdaptiveLimit {
    AdaptiveLimit::aimd()
        .min_limit(2)
        .initial_limit(4)
        .max_limit(8)
}

/// Takes every free permit (counting no refusal).
fn fill(bulkhead: &Bulkhead) -> Vec<BulkheadPermit<'_>> {
    std::iter::from_fn(|| bulkhead.try_acquire_uncounted()).collect()
}

#[test]
fn the_limit_grows_with_calls_that_use_it_and_applies_at_once() {
    let (bulkhead, clock) = adaptive(aimd());
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 4);
    let mut held = fill(&bulkhead);
    assert_eq!(held.len(), 4);
    clock.advance(10 * MS);
    // Released with 4 in flight (itself included): 4 * 2 >= 4, one more.
    held.pop();
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 5);
    // Two permits free now: the one released and the one the limit grew by.
    assert_eq!(bulkhead.available_concurrent_calls(), 2);
    let estimates = bulkhead.adaptive_estimates().expect("adaptive");
    // Timed in ticks of 1024 ns: to within a microsecond.
    let rtt = estimates.sample_rtt.unwrap();
    assert!(10 * MS - rtt < Duration::from_nanos(1024), "{rtt:?}");
    assert_eq!(estimates.baseline_rtt, None, "AIMD has no baseline");
}

#[test]
fn a_lower_limit_revokes_no_permit_held() {
    let (bulkhead, _clock) = adaptive(aimd().initial_limit(8));
    let mut held = fill(&bulkhead);
    assert_eq!(held.len(), 8);
    // A drop: 8 * 0.9 = 7.2, floor 7. Seven permits are still held, none is free.
    held.pop().unwrap().record_drop();
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 7);
    assert_eq!(held.len(), 7);
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    assert!(bulkhead.try_acquire().is_err());
    // Another drop: floor(7 * 0.9) = 6, with 6 held: still none free.
    held.pop().unwrap().record_drop();
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 6);
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    // Ignored: no sample, and the permit comes back.
    held.pop().unwrap().record_ignored();
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 6);
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    drop(held);
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls()
    );
}

#[test]
fn the_limit_stays_within_its_bounds() {
    let (bulkhead, _clock) = adaptive(aimd());
    for _ in 0..20 {
        let mut held = fill(&bulkhead);
        held.pop().unwrap().record_drop();
        held.into_iter().for_each(BulkheadPermit::record_ignored);
    }
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 2);
    for _ in 0..20 {
        drop(fill(&bulkhead));
    }
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 8);
}

#[test]
fn how_the_engine_ends_a_call_decides_the_sample() {
    let (bulkhead, _clock) = adaptive(aimd().initial_limit(8));
    let drop_one = |end: &dyn Fn(BulkheadPermit<'_>)| {
        let mut held = fill(&bulkhead);
        let before = bulkhead.max_allowed_concurrent_calls();
        end(held.pop().unwrap());
        let after = bulkhead.max_allowed_concurrent_calls();
        held.into_iter().for_each(BulkheadPermit::record_ignored);
        (before, after)
    };
    // A time-out of a time limiter further in is a drop: 8 → 7.
    let timed_out = Rejected::TimedOut {
        name: Name::from("inner"),
        timeout: Duration::from_secs(1),
    };
    assert_eq!(drop_one(&|p| p.rejected(&timed_out)), (8, 7));
    // A refusal by another guard, an ignored error: no sample.
    let full = Rejected::BulkheadFull {
        name: Name::from("inner"),
        waited: Duration::ZERO,
    };
    assert_eq!(drop_one(&|p| p.rejected(&full)), (7, 7));
    assert_eq!(drop_one(&|p| p.complete(CallOutcome::Ignored)), (7, 7));
    // A success or a failure is a sample: 7 in flight, one more.
    assert_eq!(drop_one(&|p| p.complete(CallOutcome::Failure)), (7, 8));
    // Abandoned (a future dropped mid-call): a drop.
    assert_eq!(drop_one(&|p| p.abandoned()), (8, 7));
    // Shed by the dependency (a 429, an error `overload` accepts): a drop.
    assert_eq!(drop_one(&|p| p.complete(CallOutcome::Overloaded)), (7, 6));
}

#[test]
fn a_panicking_call_is_no_sample() {
    let (bulkhead, _clock) = adaptive(aimd().initial_limit(8));
    let mut held = fill(&bulkhead);
    let last = held.pop().unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        struct AbandonOnUnwind<'a>(Option<BulkheadPermit<'a>>);
        impl Drop for AbandonOnUnwind<'_> {
            fn drop(&mut self) {
                self.0.take().unwrap().abandoned();
            }
        }
        let _guard = AbandonOnUnwind(Some(last));
        panic!("the call panics");
    }));
    assert!(panicked.is_err());
    assert_eq!(
        bulkhead.max_allowed_concurrent_calls(),
        8,
        "no drop counted"
    );
    drop(held);
}

#[test]
fn a_grown_limit_serves_the_waiters() {
    let clock = ManualClock::new();
    let config = BulkheadConfig::builder()
        .adaptive(
            AdaptiveLimit::aimd()
                .min_limit(1)
                .initial_limit(1)
                .max_limit(4),
        )
        .max_wait_duration(Duration::from_secs(10))
        .build()
        .unwrap();
    let bulkhead = Arc::new(Bulkhead::with_clock("adaptive", config, Clock::from(clock)));
    let first = bulkhead.try_acquire().unwrap();
    // Each waiter holds its permit until both hold one (or a bounded while): the second can
    // only have the permit the limit grew by, not one the first gave back.
    let inside = std::sync::atomic::AtomicUsize::new(0);
    let hold = || {
        let permit = bulkhead.acquire_blocking()?;
        inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while inside.load(std::sync::atomic::Ordering::SeqCst) < 2
            && std::time::Instant::now() < until
        {
            std::thread::yield_now();
        }
        let both = inside.load(std::sync::atomic::Ordering::SeqCst) == 2;
        drop(permit);
        Ok::<bool, Rejected>(both)
    };
    std::thread::scope(|s| {
        let waiting = [s.spawn(hold), s.spawn(hold)];
        while bulkhead.semaphore.waiters().1 != 2 {
            std::thread::yield_now();
        }
        // The release hands its permit to one waiter and grows the limit (1 in flight,
        // 1 * 2 >= 1): the other waiter gets the new permit at once.
        drop(first);
        for waiter in waiting {
            assert_eq!(
                waiter.join().unwrap(),
                Ok(true),
                "both held a permit at once"
            );
        }
    });
}

#[test]
fn limit_changes_are_events() {
    let (bulkhead, _clock) = adaptive(aimd());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    bulkhead.subscribe(move |event| sink.lock().unwrap().push(event.to_string()));
    let mut held = fill(&bulkhead);
    held.pop();
    held.pop().unwrap().record_drop();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "bulkhead `adaptive`: limit changed from 4 to 5",
            "bulkhead `adaptive`: limit changed from 5 to 4",
        ]
    );
}

#[test]
fn reconfiguration_switches_between_fixed_and_adaptive_in_place() {
    let clock = ManualClock::new();
    let fixed = |calls| {
        BulkheadConfig::builder()
            .max_concurrent_calls(calls)
            .build()
            .unwrap()
    };
    let bulkhead = Bulkhead::with_clock("switch", fixed(3), Clock::from(clock.clone()));
    let held = fill(&bulkhead);
    assert!(bulkhead.adaptive_estimates().is_none());

    // To adaptive: the limit is the initial one at once, the permits held count against it.
    let to_adaptive = BulkheadConfig::builder().adaptive(aimd()).build().unwrap();
    bulkhead.reconfigure(to_adaptive.clone());
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 4);
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    // Permits taken under the fixed limit were not timed: they are no sample.
    drop(held);
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 4);
    // A timed one is.
    let mut held = fill(&bulkhead);
    clock.advance(MS);
    held.pop();
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 5);

    // Only the wait changes: the limit found stays.
    let with_wait = BulkheadConfig::builder()
        .adaptive(aimd())
        .max_wait_duration(MS)
        .build()
        .unwrap();
    bulkhead.reconfigure(with_wait);
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 5);

    // Back to fixed: its limit, and the timed permits still held give no sample.
    bulkhead.reconfigure(fixed(2));
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 2);
    drop(held);
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 2);
    assert_eq!(bulkhead.available_concurrent_calls(), 2);
    assert!(bulkhead.adaptive_estimates().is_none());
}

proptest! {
    /// Any sequence of calls and how they end keeps the limit within its bounds and the
    /// permits accounted: free permits are the limit minus the permits held (or none while
    /// a lower limit's surplus is held), and every permit comes back.
    #[test]
    fn any_samples_keep_the_limit_in_bounds_and_the_permits_accounted(
        algorithm in prop_oneof![Just(0u8), Just(1), Just(2), Just(3)],
        steps in prop::collection::vec((0u8..4, 0u64..50), 1..200),
    ) {
        let limit = match algorithm {
            0 => AdaptiveLimit::gradient2().min_limit(2).max_limit(16).initial_limit(5),
            1 => AdaptiveLimit::vegas().min_limit(2).max_limit(16).initial_limit(5),
            2 => AdaptiveLimit::aimd().min_limit(2).max_limit(16).initial_limit(5),
            _ => AdaptiveLimit::knee().min_limit(2).max_limit(16).initial_limit(5),
        };
        let (bulkhead, clock) = adaptive(limit);
        let mut held = Vec::new();
        for (action, millis) in steps {
            clock.advance(Duration::from_millis(millis));
            match action {
                0 => held.extend(bulkhead.try_acquire().ok()),
                1 if !held.is_empty() => drop(held.remove(0)),
                2 if !held.is_empty() => held.remove(0).record_drop(),
                3 if !held.is_empty() => held.remove(0).record_ignored(),
                _ => {}
            }
            let max = bulkhead.max_allowed_concurrent_calls();
            prop_assert!((2..=16).contains(&max), "limit {}", max);
            let held_now = u32::try_from(held.len()).unwrap();
            prop_assert_eq!(
                bulkhead.available_concurrent_calls(),
                max.saturating_sub(held_now)
            );
        }
        drop(held);
        let max = bulkhead.max_allowed_concurrent_calls();
        prop_assert_eq!(bulkhead.available_concurrent_calls(), max);
        let m = bulkhead.metrics();
        prop_assert_eq!(m.permitted_calls(), m.finished_calls());
    }
}

#[test]
fn on_the_system_clock_one_call_per_coarse_tick_is_timed() {
    let Some(resolution) = Clock::system().coarse_resolution() else {
        return; // No coarse clock here: every call is timed, as on a manual clock.
    };
    let config = BulkheadConfig::builder()
        .adaptive(
            AdaptiveLimit::aimd()
                .min_limit(10)
                .initial_limit(100)
                .max_limit(200),
        )
        .build()
        .unwrap();
    let bulkhead = Bulkhead::new("sampled", config);
    let timed =
        |permits: &[BulkheadPermit<'_>]| permits.iter().filter(|p| { p.start } != UNTIMED).count();
    let burst: Vec<_> = (0..50).map(|_| bulkhead.try_acquire().unwrap()).collect();
    // Fifty admissions in a few microseconds: the first of its tick is timed, few others.
    let first = timed(&burst);
    assert!((1..50).contains(&first), "{first} of 50 timed");
    // A later tick times a call again.
    std::thread::sleep(Duration::from_nanos(3 * resolution));
    let later = bulkhead.try_acquire().unwrap();
    assert_eq!(timed(std::slice::from_ref(&later)), 1);
    // Untimed drops still reach the algorithm, with the next sample: AIMD backs off once.
    let (timed_ones, untimed): (Vec<_>, Vec<_>) =
        burst.into_iter().partition(|p| { p.start } != UNTIMED);
    untimed.into_iter().for_each(BulkheadPermit::record_drop);
    timed_ones
        .into_iter()
        .for_each(BulkheadPermit::record_ignored);
    assert_eq!(
        bulkhead.max_allowed_concurrent_calls(),
        100,
        "no sample yet"
    );
    drop(later);
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 90);
}

#[test]
fn a_bound_set_alone_moves_the_defaults_out_of_its_way() {
    let settings = |limit: AdaptiveLimit| {
        let config = BulkheadConfig::builder().adaptive(limit).build();
        config.map(|c| {
            let s = c.adaptive().unwrap().settings();
            (s.min_limit, s.initial_limit, s.max_limit)
        })
    };
    assert_eq!(
        settings(AdaptiveLimit::gradient2().max_limit(10)),
        Ok((10, 10, 10))
    );
    assert_eq!(
        settings(AdaptiveLimit::aimd().min_limit(300)),
        Ok((300, 300, 300))
    );
    // Set against each other, they are refused, naming the one that cannot hold.
    let err = settings(AdaptiveLimit::vegas().min_limit(30).max_limit(20)).unwrap_err();
    assert_eq!(err.field(), "adaptive.min_limit");
}

#[test]
fn reconfiguring_with_the_same_settings_written_out_keeps_the_limit_found() {
    let (bulkhead, clock) = adaptive(aimd());
    let mut held = fill(&bulkhead);
    clock.advance(MS);
    held.pop();
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 5);
    // AIMD's defaults written out: the same settings in force, nothing starts over.
    let written_out = aimd().backoff_ratio(0.9).timeout(Duration::from_secs(5));
    bulkhead.reconfigure(
        BulkheadConfig::builder()
            .adaptive(written_out)
            .build()
            .unwrap(),
    );
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 5);
    held.into_iter().for_each(BulkheadPermit::record_ignored);
}
