//! Unit tests of the circuit breaker: configuration, every transition, the windows as the
//! breaker sees them, permits, events and timers.

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use super::derived::{call_reading, window_reading};
use super::events::Ev;
use super::*;
use crate::clock::{ManualClock, Reading};
use crate::error::ConfigError;

const SEC: Duration = Duration::from_secs(1);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker on a manual clock; `builder` holds the settings of the test.
fn breaker(builder: CircuitBreakerConfigBuilder) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let config = builder.build().expect("valid test configuration");
    let cb = CircuitBreaker::with_clock("test", config, Clock::from(clock.clone()));
    (cb, clock)
}

impl CircuitBreaker {
    /// A breaker on the same clock as this one, with `config`.
    fn with_config_for_test(&self, config: CircuitBreakerConfig) -> CircuitBreaker {
        CircuitBreaker::with_clock("test", config, self.shared.clock.clone())
    }
}

/// A small count-based breaker: window `size`, minimum `size`, probes `probes`, wait 10 s.
fn small(size: u32, probes: u32) -> CircuitBreakerConfigBuilder {
    CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(size))
        .minimum_number_of_calls(size)
        .permitted_calls_in_half_open_state(probes)
        .wait_duration_in_open_state(secs(10))
}

/// Makes one call per letter: `s` success, `f` failure, `i` ignored, `a` abandoned, `r`
/// rejected further in. Panics if a call is not permitted.
fn calls(cb: &CircuitBreaker, script: &str) {
    for c in script.chars() {
        let permit = cb.try_acquire().expect("call permitted");
        match c {
            's' => permit.record_success(),
            'f' => permit.record_failure(),
            'i' => permit.record_ignored(),
            'a' => drop(permit),
            'r' => permit.record_rejected(&rejection()),
            other => panic!("unknown call {other:?}"),
        }
    }
}

/// A call that takes `took` on `clock`.
fn slow_call(cb: &CircuitBreaker, clock: &ManualClock, took: Duration, ok: bool) {
    let permit = cb.try_acquire().expect("call permitted");
    clock.advance(took);
    if ok {
        permit.record_success()
    } else {
        permit.record_failure()
    }
}

fn rejection() -> Rejected {
    Rejected::BulkheadFull {
        name: Name::from("inner"),
        waited: Duration::ZERO,
    }
}

fn refused_with(cb: &CircuitBreaker) -> Option<CircuitState> {
    match cb.try_acquire() {
        Ok(_) => None,
        Err(Rejected::CallNotPermitted { name, state, .. }) => {
            assert_eq!(name, *cb.name());
            Some(state)
        }
        Err(other) => panic!("unexpected rejection {other:?}"),
    }
}

/// Trips a `small(size, _)` breaker with failures.
fn trip(cb: &CircuitBreaker, size: u32) {
    calls(cb, &"f".repeat(size as usize));
    assert_eq!(cb.state(), CircuitState::Open);
}

/// Turns `cb` half-open by hand, opening it first if it is closed or metrics-only (the table
/// allows neither to turn half-open).
fn half_open(cb: &CircuitBreaker) {
    match cb.state() {
        CircuitState::Closed => cb.transition_to_open_state().unwrap(),
        CircuitState::MetricsOnly => {
            cb.transition_to_closed_state();
            cb.transition_to_open_state().unwrap();
        }
        _ => {}
    }
    cb.transition_to_half_open_state().unwrap();
}

/// Records every event of `cb`.
fn recorder(cb: &CircuitBreaker) -> Arc<Mutex<Vec<CircuitBreakerEvent>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    cb.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    seen
}

fn transitions(events: &Mutex<Vec<CircuitBreakerEvent>>) -> Vec<(CircuitState, CircuitState)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            CircuitBreakerEvent::StateTransition { from, to, .. } => Some((*from, *to)),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Configuration

#[test]
fn defaults_follow_resilience4j_except_record_rejections() {
    let c = CircuitBreakerConfig::builder().build().unwrap();
    assert_eq!(c.failure_rate_threshold(), 50.0);
    assert_eq!(c.slow_call_rate_threshold(), 100.0);
    assert_eq!(c.slow_call_duration_threshold(), secs(60));
    assert_eq!(c.sliding_window(), SlidingWindow::CountBased(100));
    assert_eq!(c.minimum_number_of_calls(), 100);
    assert_eq!(c.wait_duration_in_open_state(), secs(60));
    assert_eq!(c.open_state_backoff(), None);
    assert!(!c.automatic_transition_from_open_to_half_open());
    assert_eq!(c.permitted_calls_in_half_open_state(), 10);
    assert_eq!(c.max_wait_duration_in_half_open_state(), Duration::ZERO);
    assert!(!c.record_rejections());
    assert_eq!(c.base(), None);
    assert_eq!(c, CircuitBreakerConfig::default());
}

#[test]
fn every_setter_sets_its_field() {
    let c = CircuitBreakerConfig::builder()
        .failure_rate_threshold(25.0)
        .slow_call_rate_threshold(75.0)
        .slow_call_duration_threshold(secs(2))
        .sliding_window(SlidingWindow::TimeBased(30))
        .minimum_number_of_calls(7)
        .wait_duration_in_open_state(secs(5))
        .open_state_backoff(2.0, secs(40))
        .automatic_transition_from_open_to_half_open(true)
        .permitted_calls_in_half_open_state(3)
        .max_wait_duration_in_half_open_state(secs(9))
        .record_rejections(true)
        .base("shared")
        .build()
        .unwrap();
    assert_eq!(c.failure_rate_threshold(), 25.0);
    assert_eq!(c.slow_call_rate_threshold(), 75.0);
    assert_eq!(c.slow_call_duration_threshold(), secs(2));
    assert_eq!(c.sliding_window(), SlidingWindow::TimeBased(30));
    assert_eq!(c.minimum_number_of_calls(), 7);
    assert_eq!(c.wait_duration_in_open_state(), secs(5));
    let backoff = c.open_state_backoff().unwrap();
    assert_eq!((backoff.multiplier(), backoff.max_wait()), (2.0, secs(40)));
    assert!(c.automatic_transition_from_open_to_half_open());
    assert_eq!(c.permitted_calls_in_half_open_state(), 3);
    assert_eq!(c.max_wait_duration_in_half_open_state(), secs(9));
    assert!(c.record_rejections());
    assert_eq!(c.base(), Some("shared"));
}

#[test]
fn every_bad_setting_is_refused_with_its_field() {
    type Bad = fn(CircuitBreakerConfigBuilder) -> CircuitBreakerConfigBuilder;
    let cases: &[(&str, Bad)] = &[
        ("failure_rate_threshold", |b| b.failure_rate_threshold(0.0)),
        ("failure_rate_threshold", |b| b.failure_rate_threshold(-5.0)),
        ("failure_rate_threshold", |b| {
            b.failure_rate_threshold(100.5)
        }),
        ("failure_rate_threshold", |b| {
            b.failure_rate_threshold(f32::NAN)
        }),
        ("failure_rate_threshold", |b| {
            b.failure_rate_threshold(f32::INFINITY)
        }),
        ("slow_call_rate_threshold", |b| {
            b.slow_call_rate_threshold(0.0)
        }),
        ("slow_call_rate_threshold", |b| {
            b.slow_call_rate_threshold(101.0)
        }),
        ("slow_call_rate_threshold", |b| {
            b.slow_call_rate_threshold(f32::NAN)
        }),
        ("slow_call_duration_threshold", |b| {
            b.slow_call_duration_threshold(Duration::ZERO)
        }),
        ("sliding_window", |b| {
            b.sliding_window(SlidingWindow::CountBased(0))
        }),
        ("sliding_window", |b| {
            b.sliding_window(SlidingWindow::TimeBased(0))
        }),
        ("sliding_window", |b| {
            b.sliding_window(SlidingWindow::CountBased(SlidingWindow::MAX_CALLS + 1))
        }),
        ("sliding_window", |b| {
            b.sliding_window(SlidingWindow::TimeBased(SlidingWindow::MAX_SECONDS + 1))
        }),
        ("minimum_number_of_calls", |b| b.minimum_number_of_calls(0)),
        ("wait_duration_in_open_state", |b| {
            b.wait_duration_in_open_state(Duration::ZERO)
        }),
        ("wait_duration_in_open_state", |b| {
            b.wait_duration_in_open_state(Duration::from_micros(999))
        }),
        ("open_state_backoff", |b| {
            b.open_state_backoff(0.5, secs(600))
        }),
        ("open_state_backoff", |b| {
            b.open_state_backoff(f64::NAN, secs(600))
        }),
        ("open_state_backoff", |b| {
            b.open_state_backoff(f64::INFINITY, secs(600))
        }),
        ("open_state_backoff", |b| {
            // The maximum is below the default wait of 60 s.
            b.open_state_backoff(2.0, secs(30))
        }),
        ("permitted_calls_in_half_open_state", |b| {
            b.permitted_calls_in_half_open_state(0)
        }),
    ];
    for (field, bad) in cases {
        let err: ConfigError = bad(CircuitBreakerConfig::builder()).build().unwrap_err();
        assert_eq!(err.field(), *field, "{err}");
        let reason = err.reason();
        assert!(reason.contains("got"), "says what was given: {reason}");
        assert!(!reason.ends_with('.'), "no trailing period: {reason}");
        assert_eq!(
            reason.chars().next().map(|c| c.is_lowercase()),
            Some(true),
            "lowercase: {reason}"
        );
    }
}

#[test]
fn edge_settings_are_accepted() {
    let c = CircuitBreakerConfig::builder()
        .failure_rate_threshold(100.0)
        .slow_call_rate_threshold(0.001)
        .slow_call_duration_threshold(Duration::from_nanos(1))
        .sliding_window(SlidingWindow::CountBased(SlidingWindow::MAX_CALLS))
        .minimum_number_of_calls(u32::MAX)
        .wait_duration_in_open_state(Duration::from_millis(1))
        .open_state_backoff(1.0, Duration::from_millis(1))
        .max_wait_duration_in_half_open_state(Duration::MAX)
        .build();
    assert!(c.is_ok(), "{c:?}");
    let c = CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::TimeBased(SlidingWindow::MAX_SECONDS))
        .wait_duration_in_open_state(Duration::MAX)
        .build();
    assert!(c.is_ok(), "{c:?}");
}

#[test]
fn inherit_takes_only_unset_fields_from_the_base() {
    let base = CircuitBreakerConfig::builder()
        .failure_rate_threshold(20.0)
        .sliding_window(SlidingWindow::TimeBased(10))
        .wait_duration_in_open_state(secs(5))
        .open_state_backoff(3.0, secs(100))
        .record_rejections(true)
        .build()
        .unwrap();
    let derived = CircuitBreakerConfig::builder()
        .base("shared")
        .failure_rate_threshold(70.0)
        .permitted_calls_in_half_open_state(2)
        .build()
        .unwrap();
    let merged = derived.inherit(&base).unwrap();
    assert_eq!(merged.base(), None);
    assert_eq!(merged.failure_rate_threshold(), 70.0);
    assert_eq!(merged.permitted_calls_in_half_open_state(), 2);
    assert_eq!(merged.sliding_window(), SlidingWindow::TimeBased(10));
    assert_eq!(merged.wait_duration_in_open_state(), secs(5));
    assert_eq!(merged.open_state_backoff().unwrap().multiplier(), 3.0);
    assert!(merged.record_rejections());
    // Unset in both: the default.
    assert_eq!(merged.minimum_number_of_calls(), 100);
}

#[test]
fn inherit_validates_the_merged_configuration() {
    let base = CircuitBreakerConfig::builder()
        .open_state_backoff(2.0, secs(60))
        .build()
        .unwrap();
    let derived = CircuitBreakerConfig::builder()
        .base("shared")
        .wait_duration_in_open_state(secs(120))
        .build()
        .unwrap();
    let err = derived.inherit(&base).unwrap_err();
    assert_eq!(err.field(), "open_state_backoff");
}

#[test]
fn backoff_grows_the_wait_up_to_its_maximum() {
    let c = CircuitBreakerConfig::builder()
        .wait_duration_in_open_state(secs(10))
        .open_state_backoff(2.0, secs(50))
        .build()
        .unwrap();
    let waits: Vec<_> = (1..=5).map(|n| c.wait_in_open_state(n)).collect();
    assert_eq!(waits, [secs(10), secs(20), secs(40), secs(50), secs(50)]);
    assert_eq!(c.wait_in_open_state(u32::MAX), secs(50));
    let flat = CircuitBreakerConfig::builder()
        .wait_duration_in_open_state(secs(10))
        .build()
        .unwrap();
    assert_eq!(flat.wait_in_open_state(7), secs(10));
}

// ---------------------------------------------------------------------------------------------
// The breaker's traits and basics

#[test]
fn breaker_and_permit_are_send_sync_debug() {
    fn check<T: Send + Sync + fmt::Debug>() {}
    check::<CircuitBreaker>();
    check::<CircuitPermit<'static>>();
    check::<CircuitBreakerEvent>();
    check::<CircuitBreakerMetrics>();
    let (cb, _) = breaker(small(2, 1));
    let debug = format!("{cb:?}");
    assert!(
        debug.contains("\"test\"") && debug.contains("Closed"),
        "{debug}"
    );
    let permit = cb.try_acquire().unwrap();
    assert!(format!("{permit:?}").contains("CircuitPermit"));
    permit.record_success();
}

#[test]
fn instances_have_distinct_ids() {
    let (a, _) = breaker(small(2, 1));
    let (b, _) = breaker(small(2, 1));
    assert_ne!(a.id(), b.id());
}

#[test]
fn state_display_is_lowercase() {
    let names: Vec<_> = [
        CircuitState::Closed,
        CircuitState::Open,
        CircuitState::HalfOpen,
        CircuitState::Disabled,
        CircuitState::ForcedOpen,
        CircuitState::MetricsOnly,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        names,
        [
            "closed",
            "open",
            "half-open",
            "disabled",
            "forced open",
            "metrics only"
        ]
    );
    let rejected = Rejected::CallNotPermitted {
        name: Name::from("x"),
        state: CircuitState::ForcedOpen,
        retry_after: None,
    };
    assert_eq!(
        rejected.to_string(),
        "circuit breaker `x` does not permit calls (forced open)"
    );
    let rejected = Rejected::CallNotPermitted {
        name: Name::from("x"),
        state: CircuitState::Open,
        retry_after: Some(Duration::from_millis(1500)),
    };
    assert_eq!(
        rejected.to_string(),
        "circuit breaker `x` does not permit calls (open, 1500 ms left to wait)"
    );
}

#[test]
fn state_packing_round_trips() {
    for state in [
        CircuitState::Closed,
        CircuitState::Open,
        CircuitState::HalfOpen,
        CircuitState::Disabled,
        CircuitState::ForcedOpen,
        CircuitState::MetricsOnly,
    ] {
        for epoch in [0, 1, 12_345, (1 << 56) - 1] {
            assert_eq!(unpack(pack(epoch, state)), (epoch, state));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Closed state and the window

#[test]
fn closed_opens_when_the_failure_rate_reaches_the_threshold() {
    let (cb, _) = breaker(small(4, 1));
    calls(&cb, "sfs");
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().failure_rate(), -1.0);
    calls(&cb, "f"); // 2 of 4: 50 %
    assert_eq!(cb.state(), CircuitState::Open);
    let m = cb.metrics();
    // The open state keeps the metrics that opened it.
    assert_eq!(m.failure_rate(), 50.0);
    assert_eq!(m.number_of_buffered_calls(), 4);
    assert_eq!(m.number_of_failed_calls(), 2);
    assert_eq!(m.number_of_successful_calls(), 2);
}

#[test]
fn closed_stays_closed_below_the_threshold() {
    let (cb, _) = breaker(small(4, 1).failure_rate_threshold(60.0));
    calls(&cb, "sfsfsfsf");
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().failure_rate(), 50.0);
    calls(&cb, "f"); // window: f s f f -> 75 %
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn count_window_forgets_the_oldest_calls() {
    let (cb, _) = breaker(small(4, 1));
    calls(&cb, "fsss"); // 25 %
    calls(&cb, "ssss"); // the failure has left the window
    let m = cb.metrics();
    assert_eq!(m.number_of_buffered_calls(), 4);
    assert_eq!(m.number_of_failed_calls(), 0);
    assert_eq!(m.failure_rate(), 0.0);
}

#[test]
fn minimum_number_of_calls_delays_the_rates() {
    let (cb, _) = breaker(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::CountBased(10))
            .minimum_number_of_calls(5),
    );
    calls(&cb, "ffff");
    assert_eq!(cb.state(), CircuitState::Closed);
    let m = cb.metrics();
    assert_eq!((m.failure_rate(), m.slow_call_rate()), (-1.0, -1.0));
    assert_eq!(m.number_of_failed_calls(), 4);
    calls(&cb, "s"); // 4 of 5: 80 %
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn minimum_number_of_calls_is_capped_by_a_count_window() {
    // Resilience4j: for a count window the minimum is at most the window size.
    let (cb, _) = breaker(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::CountBased(3))
            .minimum_number_of_calls(100),
    );
    calls(&cb, "sff");
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn minimum_number_of_calls_is_not_capped_by_a_time_window() {
    let (cb, _) = breaker(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::TimeBased(3))
            .minimum_number_of_calls(5),
    );
    calls(&cb, "ffff");
    assert_eq!(cb.state(), CircuitState::Closed);
    calls(&cb, "f");
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn time_window_forgets_calls_older_than_the_window() {
    let (cb, clock) = breaker(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::TimeBased(3))
            .minimum_number_of_calls(4),
    );
    calls(&cb, "ff"); // second 0
    clock.advance(SEC);
    calls(&cb, "s"); // second 1
    clock.advance(2 * SEC); // second 3: second 0 has left
    assert_eq!(cb.metrics().number_of_buffered_calls(), 1);
    calls(&cb, "ss"); // 3 calls, none failed
    assert_eq!(cb.state(), CircuitState::Closed);
    calls(&cb, "f"); // 4 calls, 1 failed: 25 %
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().failure_rate(), 25.0);
    clock.advance(SEC); // second 4: second 1 leaves
    let m = cb.metrics();
    assert_eq!(m.number_of_buffered_calls(), 3);
    assert_eq!(m.failure_rate(), -1.0);
}

#[test]
fn time_window_is_empty_after_a_long_gap() {
    let (cb, clock) = breaker(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::TimeBased(5))
            .minimum_number_of_calls(3),
    );
    calls(&cb, "fs");
    clock.advance(secs(3600));
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    calls(&cb, "ff"); // the failure of an hour ago does not count
    assert_eq!(cb.state(), CircuitState::Closed);
    calls(&cb, "s"); // 2 of 3
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn time_window_trips_on_failures_within_the_window_only() {
    let (cb, clock) = breaker(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::TimeBased(2))
            .minimum_number_of_calls(2),
    );
    calls(&cb, "f");
    clock.advance(secs(2)); // the failure leaves the window
    calls(&cb, "f");
    assert_eq!(cb.state(), CircuitState::Closed);
    clock.advance(SEC); // the second failure is still in the window
    calls(&cb, "s"); // 1 of 2
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn slow_calls_are_those_longer_than_the_duration_threshold() {
    let (cb, clock) = breaker(
        small(4, 1)
            .slow_call_duration_threshold(secs(2))
            .slow_call_rate_threshold(100.0),
    );
    slow_call(&cb, &clock, secs(2), true); // exactly the threshold: not slow (Resilience4j's `>`)
    slow_call(&cb, &clock, secs(3), false); // slow failure
    slow_call(&cb, &clock, secs(2) + Duration::from_nanos(1), true); // 1 ns over: slow
    let m = cb.metrics();
    assert_eq!(m.number_of_slow_calls(), 2);
    assert_eq!(m.number_of_slow_successful_calls(), 1);
    assert_eq!(m.number_of_slow_failed_calls(), 1);
    assert_eq!(m.number_of_failed_calls(), 1);
}

#[test]
fn slow_call_rate_opens_the_breaker() {
    let (cb, clock) = breaker(
        small(4, 1)
            .slow_call_duration_threshold(secs(1))
            .slow_call_rate_threshold(50.0),
    );
    let seen = recorder(&cb);
    slow_call(&cb, &clock, secs(2), true);
    calls(&cb, "ss");
    assert_eq!(cb.state(), CircuitState::Closed);
    slow_call(&cb, &clock, secs(5), true); // 2 of 4 slow, no failure
    assert_eq!(cb.state(), CircuitState::Open);
    assert_eq!(cb.metrics().slow_call_rate(), 50.0);
    let events = seen.lock().unwrap();
    assert!(events.iter().any(
        |e| matches!(e, CircuitBreakerEvent::SlowCallRateExceeded { rate, .. } if *rate == 50.0)
    ));
    assert!(!events
        .iter()
        .any(|e| matches!(e, CircuitBreakerEvent::FailureRateExceeded { .. })));
}

#[test]
fn by_default_only_all_slow_calls_open_the_breaker() {
    let (cb, clock) = breaker(small(2, 1).slow_call_duration_threshold(secs(1)));
    slow_call(&cb, &clock, secs(2), true);
    calls(&cb, "s");
    assert_eq!(cb.state(), CircuitState::Closed); // 50 % slow < 100 %
    slow_call(&cb, &clock, secs(2), true); // window: s, s(slow)
    assert_eq!(cb.state(), CircuitState::Closed);
    slow_call(&cb, &clock, secs(2), true); // window: s(slow), s(slow)
    assert_eq!(cb.state(), CircuitState::Open);
}

// ---------------------------------------------------------------------------------------------
// How calls and windows are timed

const MS: u64 = 1_000_000;

#[test]
fn a_slow_call_rule_of_duration_max_reads_no_clock() {
    // Whatever the clock and its coarse resolution.
    for resolution in [None, Some(4 * MS), Some(u64::MAX)] {
        assert_eq!(call_reading(NEVER_SLOW, resolution), Reading::None);
    }
    assert_eq!(duration_nanos(Duration::MAX), NEVER_SLOW);
    // A count window needs no clock either: the closed path reads none.
    let off = CircuitBreakerConfig::builder()
        .slow_call_duration_threshold(Duration::MAX)
        .sliding_window(SlidingWindow::CountBased(10))
        .build()
        .unwrap();
    for cb in [
        CircuitBreaker::new("system", off.clone()),
        breaker(CircuitBreakerConfigBuilder::default())
            .0
            .with_config_for_test(off),
    ] {
        assert_eq!(cb.shared.call_reading.load(), Reading::None);
        assert_eq!(cb.shared.window_reading.load(), Reading::None);
        let permit = cb.try_acquire().unwrap();
        assert_eq!((permit.reading(), permit.start), (Reading::None, 0));
        permit.record_success();
        assert_eq!(cb.metrics().number_of_successful_calls(), 1);
    }
}

#[test]
fn a_slow_call_rule_of_duration_max_never_marks_a_call_slow() {
    let (cb, clock) = breaker(
        small(2, 1)
            .slow_call_duration_threshold(Duration::MAX)
            .slow_call_rate_threshold(1.0),
    );
    let seen = recorder(&cb); // subscribed: the calls are timed, precisely
                              // From the clock's origin to its end: the longest call a clock can measure.
    slow_call(&cb, &clock, Duration::MAX, true);
    slow_call(&cb, &clock, Duration::from_secs(3_600), true);
    let m = cb.metrics();
    assert_eq!(
        (m.number_of_buffered_calls(), m.number_of_slow_calls()),
        (2, 0)
    );
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn the_coarse_clock_times_calls_when_its_resolution_is_at_most_1_percent_of_the_threshold() {
    let four_ms = Some(4 * MS);
    let default = duration_nanos(CircuitBreakerConfig::DEFAULT_SLOW_CALL_DURATION_THRESHOLD);
    assert_eq!(call_reading(default, four_ms), Reading::Coarse);
    assert_eq!(call_reading(400 * MS, four_ms), Reading::Coarse); // exactly 1 %
    assert_eq!(call_reading(400 * MS - 1, four_ms), Reading::Precise);
    assert_eq!(call_reading(MS, four_ms), Reading::Precise);
    // No coarse clock (a manual clock, or not Linux): precise.
    assert_eq!(call_reading(default, None), Reading::Precise);
    // A resolution so coarse that 100 × overflows is never fine enough.
    assert_eq!(
        call_reading(u64::MAX - 1, Some(u64::MAX / 2)),
        Reading::Precise
    );
}

#[test]
fn a_time_window_reads_the_coarse_clock_when_its_resolution_is_at_most_10_ms() {
    let time = SlidingWindow::TimeBased(1);
    assert_eq!(window_reading(time, Some(4 * MS)), Reading::Coarse);
    assert_eq!(window_reading(time, Some(10 * MS)), Reading::Coarse);
    assert_eq!(window_reading(time, Some(10 * MS + 1)), Reading::Precise);
    assert_eq!(window_reading(time, None), Reading::Precise);
    let count = SlidingWindow::CountBased(100);
    assert_eq!(window_reading(count, Some(4 * MS)), Reading::None);
    assert_eq!(window_reading(count, None), Reading::None);
}

#[test]
fn a_breaker_picks_its_readings_from_its_clock() {
    let time = CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::TimeBased(10))
        .build()
        .unwrap();
    // A manual clock drives everything: always precise.
    let (manual, _) = breaker(CircuitBreakerConfigBuilder::default());
    assert_eq!(manual.shared.call_reading.load(), Reading::Precise);
    assert_eq!(manual.shared.window_reading.load(), Reading::None);
    let manual = manual.with_config_for_test(time.clone());
    assert_eq!(manual.shared.window_reading.load(), Reading::Precise);
    // The system clock: coarse where the platform has a fine enough coarse clock.
    let resolution = Clock::system().coarse_resolution();
    let system = CircuitBreaker::new("system", CircuitBreakerConfig::default());
    let default = duration_nanos(CircuitBreakerConfig::DEFAULT_SLOW_CALL_DURATION_THRESHOLD);
    assert_eq!(
        system.shared.call_reading.load(),
        call_reading(default, resolution)
    );
    let system = CircuitBreaker::new("system", time);
    assert_eq!(
        system.shared.window_reading.load(),
        window_reading(SlidingWindow::TimeBased(10), resolution)
    );
    #[cfg(target_os = "linux")]
    {
        assert_eq!(
            CircuitBreaker::new("linux", CircuitBreakerConfig::default())
                .shared
                .call_reading
                .load(),
            Reading::Coarse,
            "the default 60 s threshold qualifies for the coarse clock"
        );
    }
}

#[test]
fn slow_calls_are_detected_with_the_default_threshold() {
    let (cb, clock) = breaker(small(4, 1));
    assert_eq!(
        cb.config().slow_call_duration_threshold(),
        Duration::from_secs(60)
    );
    slow_call(&cb, &clock, Duration::from_millis(60_001), true);
    slow_call(&cb, &clock, Duration::from_secs(60), true);
    slow_call(&cb, &clock, Duration::from_secs(61), false);
    let m = cb.metrics();
    assert_eq!(m.number_of_slow_calls(), 2);
    assert_eq!(m.number_of_slow_failed_calls(), 1);
}

#[test]
fn slow_calls_are_detected_on_the_coarse_clock() {
    // A 300 ms threshold and the system clock: coarse on Linux (resolution ≤ 3 ms), precise
    // elsewhere; both see a call of 400 ms as slow and an immediate one as not.
    let cb = CircuitBreaker::new(
        "coarse",
        small(4, 1)
            .slow_call_duration_threshold(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    let permit = cb.try_acquire().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    permit.record_success();
    cb.try_acquire().unwrap().record_success();
    assert_eq!(cb.metrics().number_of_slow_calls(), 1);
}

#[test]
fn events_carry_the_elapsed_time_of_calls_taken_while_subscribed() {
    // Slow-call detection off: without subscribers the calls are not timed at all.
    let (cb, clock) = breaker(small(4, 1).slow_call_duration_threshold(Duration::MAX));
    let before = cb.try_acquire().unwrap(); // taken before anyone subscribed: not timed
    let seen = recorder(&cb);
    let during = cb.try_acquire().unwrap();
    assert_eq!(during.reading(), Reading::Precise);
    clock.advance(Duration::from_millis(7));
    during.record_success();
    before.record_failure();
    let ignored = cb.try_acquire().unwrap();
    clock.advance(Duration::from_millis(3));
    ignored.record_ignored();
    let events = seen.lock().unwrap();
    assert!(
        matches!(
            events.as_slice(),
            [
                CircuitBreakerEvent::Success { elapsed: a, .. },
                CircuitBreakerEvent::Error { elapsed: b, .. },
                CircuitBreakerEvent::IgnoredError { elapsed: c, .. },
            ] if *a == Duration::from_millis(7) && b.is_zero() && *c == Duration::from_millis(3)
        ),
        "{events:?}"
    );
}

#[test]
fn events_of_the_system_clock_carry_a_precise_elapsed_time() {
    let cb = CircuitBreaker::new("events", CircuitBreakerConfig::default());
    let seen = recorder(&cb);
    let permit = cb.try_acquire().unwrap();
    std::thread::sleep(Duration::from_millis(2));
    permit.record_success();
    let events = seen.lock().unwrap();
    match events.as_slice() {
        // Precise: at least the 2 ms slept (a coarse reading could show 0 or 4 ms).
        [CircuitBreakerEvent::Success { elapsed, .. }] => {
            assert!(*elapsed >= Duration::from_millis(2), "{elapsed:?}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_time_window_on_the_system_clock_records_and_reads_on_one_timeline() {
    let cb = CircuitBreaker::new(
        "time",
        small(4, 1)
            .sliding_window(SlidingWindow::TimeBased(60))
            .minimum_number_of_calls(3)
            .build()
            .unwrap(),
    );
    calls(&cb, "sfs");
    let m = cb.metrics();
    assert_eq!(
        (m.number_of_buffered_calls(), m.number_of_failed_calls()),
        (3, 1)
    );
    calls(&cb, "f"); // 2 of 4 failed: 50 %
    assert_eq!(cb.state(), CircuitState::Open);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 4);
}

#[test]
fn ignored_calls_are_not_recorded() {
    let (cb, _) = breaker(small(2, 1));
    let seen = recorder(&cb);
    calls(&cb, "iiiif");
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 1);
    let ignored = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, CircuitBreakerEvent::IgnoredError { .. }))
        .count();
    assert_eq!(ignored, 4);
}

#[test]
fn abandoned_calls_are_not_recorded() {
    let (cb, _) = breaker(small(2, 1));
    calls(&cb, "aaaf");
    assert_eq!(cb.metrics().number_of_buffered_calls(), 1);
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn rejections_further_in_are_not_failures_by_default() {
    let (cb, _) = breaker(small(2, 1));
    let seen = recorder(&cb);
    calls(&cb, "rrrrr");
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn rejections_further_in_are_failures_with_record_rejections() {
    let (cb, _) = breaker(small(2, 1).record_rejections(true));
    calls(&cb, "r");
    assert_eq!(cb.metrics().number_of_failed_calls(), 1);
    calls(&cb, "r");
    assert_eq!(cb.state(), CircuitState::Open);
}

// ---------------------------------------------------------------------------------------------
// Open state

#[test]
fn open_refuses_calls_and_counts_them() {
    let (cb, clock) = breaker(small(2, 1));
    trip(&cb, 2);
    let seen = recorder(&cb);
    for _ in 0..3 {
        assert_eq!(refused_with(&cb), Some(CircuitState::Open));
    }
    assert_eq!(cb.metrics().number_of_not_permitted_calls(), 3);
    assert_eq!(cb.remaining_open_time(), Some(secs(10)));
    clock.advance(secs(4));
    assert_eq!(cb.remaining_open_time(), Some(secs(6)));
    let not_permitted = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, CircuitBreakerEvent::NotPermitted { .. }))
        .count();
    assert_eq!(not_permitted, 3);
}

#[test]
fn remaining_open_time_is_none_unless_open() {
    let (cb, _) = breaker(small(2, 1));
    assert_eq!(cb.remaining_open_time(), None);
    cb.transition_to_forced_open_state();
    assert_eq!(cb.remaining_open_time(), None);
    half_open(&cb);
    assert_eq!(cb.remaining_open_time(), None);
    cb.transition_to_open_state().unwrap();
    assert_eq!(cb.remaining_open_time(), Some(secs(10)));
}

/// The `retry_after` of a refusal, for a breaker expected to refuse.
fn retry_after_of_refusal(cb: &CircuitBreaker) -> Option<Duration> {
    match cb.try_acquire() {
        Err(Rejected::CallNotPermitted { retry_after, .. }) => retry_after,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_refusal_carries_the_rest_of_the_open_wait() {
    let (cb, clock) = breaker(small(2, 1).max_wait_duration_in_half_open_state(secs(5)));
    trip(&cb, 2);
    assert_eq!(retry_after_of_refusal(&cb), Some(secs(10)));
    clock.advance(Duration::from_millis(3500));
    assert_eq!(
        retry_after_of_refusal(&cb),
        Some(Duration::from_millis(6500))
    );

    // Reopened under the lock (half-open past its maximum wait): a fresh wait.
    half_open(&cb);
    clock.advance(secs(5));
    assert_eq!(retry_after_of_refusal(&cb), Some(secs(10)));
    assert_eq!(cb.state(), CircuitState::Open);

    // No known time: forced open, or half-open with every probe taken.
    cb.transition_to_forced_open_state();
    assert_eq!(retry_after_of_refusal(&cb), None);
    half_open(&cb);
    let _probe = cb.try_acquire().expect("one probe");
    assert_eq!(retry_after_of_refusal(&cb), None);
}

#[test]
fn open_turns_half_open_on_the_first_call_after_the_wait() {
    let (cb, clock) = breaker(small(2, 2));
    trip(&cb, 2);
    clock.advance(Duration::from_millis(9_999));
    assert_eq!(refused_with(&cb), Some(CircuitState::Open));
    clock.advance(Duration::from_millis(1));
    // Without the automatic transition, observing does not change the state.
    assert_eq!(cb.state(), CircuitState::Open);
    assert_eq!(cb.remaining_open_time(), Some(Duration::ZERO));
    let probe = cb.try_acquire().expect("the wait is over");
    assert!(probe.is_probe());
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    // Fresh metrics for the half-open state.
    assert_eq!(cb.metrics().number_of_not_permitted_calls(), 0);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    probe.record_success();
}

#[test]
fn automatic_transition_is_observed_from_the_clock() {
    let (cb, clock) = breaker(small(2, 1).automatic_transition_from_open_to_half_open(true));
    let seen = recorder(&cb);
    trip(&cb, 2);
    clock.advance(secs(10));
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    assert_eq!(
        transitions(&seen),
        [
            (CircuitState::Closed, CircuitState::Open),
            (CircuitState::Open, CircuitState::HalfOpen)
        ]
    );
    // Also through metrics().
    cb.transition_to_open_state().unwrap();
    clock.advance(secs(10));
    let _ = cb.metrics();
    assert_eq!(
        transitions(&seen).last(),
        Some(&(CircuitState::Open, CircuitState::HalfOpen))
    );
    assert_eq!(cb.remaining_open_time(), None);
}

#[test]
fn backoff_grows_the_wait_over_consecutive_openings_and_resets_when_closed() {
    let (cb, clock) = breaker(small(2, 1).open_state_backoff(2.0, secs(30)));
    trip(&cb, 2);
    assert_eq!(cb.remaining_open_time(), Some(secs(10)));
    for expected in [20, 30, 30] {
        clock.advance(cb.remaining_open_time().unwrap());
        calls(&cb, "f"); // the probe fails: open again
        assert_eq!(cb.remaining_open_time(), Some(secs(expected)));
    }
    clock.advance(secs(30));
    calls(&cb, "s"); // the probe succeeds: closed
    assert_eq!(cb.state(), CircuitState::Closed);
    trip(&cb, 2);
    assert_eq!(cb.remaining_open_time(), Some(secs(10)));
    // A manual opening counts as a further opening; reset forgets them.
    cb.transition_to_open_state().unwrap();
    assert_eq!(cb.remaining_open_time(), Some(secs(20)));
    cb.reset();
    cb.transition_to_open_state().unwrap();
    assert_eq!(cb.remaining_open_time(), Some(secs(10)));
}

// ---------------------------------------------------------------------------------------------
// Half-open state

#[test]
fn half_open_permits_a_bounded_number_of_probes() {
    let (cb, _) = breaker(small(2, 3));
    half_open(&cb);
    let probes: Vec<_> = (0..3).map(|_| cb.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(CircuitPermit::is_probe));
    assert_eq!(refused_with(&cb), Some(CircuitState::HalfOpen));
    assert_eq!(cb.metrics().number_of_not_permitted_calls(), 1);
    for probe in probes {
        probe.record_success();
    }
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0, "fresh window");
}

#[test]
fn half_open_decides_only_once_every_probe_is_recorded() {
    let (cb, _) = breaker(small(2, 3));
    half_open(&cb);
    calls(&cb, "ss");
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    let m = cb.metrics();
    assert_eq!(m.number_of_buffered_calls(), 2);
    assert_eq!(m.failure_rate(), -1.0);
    calls(&cb, "s");
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn half_open_opens_again_when_the_probes_fail() {
    let (cb, _) = breaker(small(2, 4));
    half_open(&cb);
    calls(&cb, "sfsf"); // 50 %
    assert_eq!(cb.state(), CircuitState::Open);
    // The open state shows the probes that opened it.
    let m = cb.metrics();
    assert_eq!((m.number_of_buffered_calls(), m.failure_rate()), (4, 50.0));
}

#[test]
fn half_open_closes_below_the_threshold() {
    let (cb, _) = breaker(small(2, 4));
    half_open(&cb);
    calls(&cb, "sssf"); // 25 %
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn half_open_probes_that_never_reached_the_dependency_are_given_back() {
    let (cb, _) = breaker(small(2, 2));
    half_open(&cb);
    // Abandoned, rejected further in, ignored: each probe is given back.
    calls(&cb, "aaaarrrriiii");
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    let held: Vec<_> = (0..2).map(|_| cb.try_acquire().unwrap()).collect();
    assert_eq!(refused_with(&cb), Some(CircuitState::HalfOpen));
    drop(held);
    calls(&cb, "ss");
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn half_open_counts_rejections_with_record_rejections() {
    let (cb, _) = breaker(small(2, 2).record_rejections(true));
    half_open(&cb);
    calls(&cb, "rs");
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn half_open_opens_again_after_its_maximum_wait() {
    let (cb, clock) = breaker(small(2, 2).max_wait_duration_in_half_open_state(secs(5)));
    let seen = recorder(&cb);
    half_open(&cb);
    let probe = cb.try_acquire().unwrap();
    clock.advance(secs(4));
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    clock.advance(secs(1));
    assert_eq!(cb.state(), CircuitState::Open);
    // The probe's late outcome belongs to the half-open epoch: not recorded.
    probe.record_success();
    assert_eq!(cb.state(), CircuitState::Open);
    assert_eq!(
        transitions(&seen),
        [
            (CircuitState::Closed, CircuitState::Open),
            (CircuitState::Open, CircuitState::HalfOpen),
            (CircuitState::HalfOpen, CircuitState::Open)
        ]
    );
}

#[test]
fn half_open_maximum_wait_is_observed_by_a_call() {
    let (cb, clock) = breaker(small(2, 1).max_wait_duration_in_half_open_state(secs(5)));
    half_open(&cb);
    let probe = cb.try_acquire().unwrap();
    clock.advance(secs(5));
    assert_eq!(refused_with(&cb), Some(CircuitState::Open));
    drop(probe);
}

#[test]
fn half_open_without_maximum_wait_waits_indefinitely() {
    let (cb, clock) = breaker(small(2, 1));
    half_open(&cb);
    let probe = cb.try_acquire().unwrap();
    clock.advance(secs(1_000_000));
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    // (A success now would be a slow call.)
    drop(probe);
    calls(&cb, "s");
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn half_open_probes_are_strictly_bounded_under_racing_threads() {
    const THREADS: usize = 8;
    const PROBES: u32 = 3;
    for _ in 0..50 {
        let (cb, _) = breaker(small(2, PROBES));
        half_open(&cb);
        let barrier = Barrier::new(THREADS);
        let granted = std::sync::atomic::AtomicU32::new(0);
        let holding = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    let permit = cb.try_acquire();
                    if permit.is_ok() {
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Hold every permit until all threads have tried.
                    holding.wait();
                    drop(permit);
                });
            }
        });
        assert_eq!(granted.load(Ordering::Relaxed), PROBES);
        assert_eq!(
            cb.metrics().number_of_not_permitted_calls(),
            THREADS as u64 - u64::from(PROBES)
        );
        assert_eq!(cb.state(), CircuitState::HalfOpen);
    }
}

#[test]
fn racing_probes_that_record_decide_exactly_once() {
    const THREADS: usize = 6;
    for _ in 0..50 {
        let (cb, _) = breaker(small(2, 4));
        let seen = recorder(&cb);
        half_open(&cb);
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    if let Ok(permit) = cb.try_acquire() {
                        permit.record_success();
                    }
                });
            }
        });
        assert_eq!(cb.state(), CircuitState::Closed);
        let to_closed = transitions(&seen)
            .iter()
            .filter(|t| **t == (CircuitState::HalfOpen, CircuitState::Closed))
            .count();
        assert_eq!(to_closed, 1);
    }
}

// ---------------------------------------------------------------------------------------------
// Epochs

#[test]
fn outcomes_of_an_earlier_state_are_dropped() {
    let (cb, _) = breaker(small(4, 1));
    let stale = cb.try_acquire().unwrap();
    cb.transition_to_open_state().unwrap();
    cb.transition_to_closed_state();
    stale.record_failure();
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);

    let stale = cb.try_acquire().unwrap();
    cb.reset();
    stale.record_failure();
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
}

#[test]
fn a_stale_probe_neither_records_nor_gives_back_into_a_new_half_open_state() {
    let (cb, _) = breaker(small(2, 1));
    half_open(&cb);
    let stale = cb.try_acquire().unwrap();
    half_open(&cb); // a new epoch with one fresh probe
    let fresh = cb.try_acquire().unwrap();
    drop(stale); // must not give a probe back to the new epoch
    assert_eq!(refused_with(&cb), Some(CircuitState::HalfOpen));
    let stale_outcome = {
        half_open(&cb);
        let p = cb.try_acquire().unwrap();
        half_open(&cb);
        p
    };
    stale_outcome.record_failure(); // not a probe of this epoch
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    fresh.record_success(); // stale as well
    calls(&cb, "s");
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn closed_permits_taken_before_the_breaker_opened_do_not_count_in_half_open() {
    let (cb, clock) = breaker(small(2, 1));
    let early = cb.try_acquire().unwrap();
    trip(&cb, 2);
    clock.advance(secs(10));
    let probe = cb.try_acquire().unwrap();
    early.record_failure();
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    // (A success now would be a slow call.)
    drop(probe);
    calls(&cb, "s");
    assert_eq!(cb.state(), CircuitState::Closed);
}

// ---------------------------------------------------------------------------------------------
// Disabled, forced open, metrics-only, manual transitions, reset

#[test]
fn disabled_permits_everything_and_records_nothing() {
    let (cb, clock) = breaker(small(2, 1));
    let seen = recorder(&cb);
    cb.transition_to_disabled_state();
    calls(&cb, "ffffffff");
    clock.advance(secs(1000));
    assert_eq!(cb.state(), CircuitState::Disabled);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    assert!(!cb.try_acquire().unwrap().is_probe());
    assert_eq!(seen.lock().unwrap().len(), 1, "only the transition");
}

#[test]
fn forced_open_refuses_everything_until_a_manual_transition() {
    let (cb, clock) = breaker(small(2, 1).automatic_transition_from_open_to_half_open(true));
    cb.transition_to_forced_open_state();
    clock.advance(secs(1_000_000));
    assert_eq!(cb.state(), CircuitState::ForcedOpen);
    assert_eq!(refused_with(&cb), Some(CircuitState::ForcedOpen));
    assert_eq!(cb.metrics().number_of_not_permitted_calls(), 1);
    cb.transition_to_closed_state();
    calls(&cb, "s");
}

#[test]
fn metrics_only_records_and_reports_but_never_opens() {
    let (cb, _) = breaker(small(2, 1));
    let seen = recorder(&cb);
    cb.transition_to_metrics_only_state();
    calls(&cb, "ffff");
    assert_eq!(cb.state(), CircuitState::MetricsOnly);
    let m = cb.metrics();
    assert_eq!((m.number_of_failed_calls(), m.failure_rate()), (2, 100.0));
    calls(&cb, "ss"); // back below the threshold
    calls(&cb, "ff"); // and above again
    let exceeded = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, CircuitBreakerEvent::FailureRateExceeded { .. }))
        .count();
    assert_eq!(exceeded, 2, "once per crossing");
    assert_eq!(transitions(&seen).len(), 1);
}

/// A manual transition of `cb` to `to`.
fn go(cb: &CircuitBreaker, to: CircuitState) -> Result<(), IllegalStateTransition> {
    match to {
        CircuitState::Closed => cb.transition_to_closed_state(),
        CircuitState::Open => return cb.transition_to_open_state(),
        CircuitState::HalfOpen => return cb.transition_to_half_open_state(),
        CircuitState::Disabled => cb.transition_to_disabled_state(),
        CircuitState::ForcedOpen => cb.transition_to_forced_open_state(),
        CircuitState::MetricsOnly => cb.transition_to_metrics_only_state(),
    }
    Ok(())
}

#[test]
fn manual_transitions_follow_resilience4j_s_table() {
    // Resilience4j's `CircuitBreaker.StateTransition` lists 33 of the 36 pairs; these three
    // are missing there, and refused here.
    let refused = |from, to| {
        matches!(
            (from, to),
            (CircuitState::Closed, CircuitState::HalfOpen)
                | (CircuitState::MetricsOnly, CircuitState::Open)
                | (CircuitState::MetricsOnly, CircuitState::HalfOpen)
        )
    };
    let mut allowed = 0;
    for from in STATES {
        for to in STATES {
            let (cb, _) = breaker(small(2, 1));
            if from == CircuitState::HalfOpen {
                half_open(&cb);
            } else {
                go(&cb, from).unwrap();
            }
            assert_eq!(cb.state(), from);
            let seen = recorder(&cb);
            match go(&cb, to) {
                Ok(()) => {
                    assert!(!refused(from, to), "{from} -> {to} was allowed");
                    assert_eq!(cb.state(), to, "{from} -> {to}");
                    assert_eq!(transitions(&seen), [(from, to)]);
                    allowed += 1;
                }
                Err(error) => {
                    assert!(refused(from, to), "{from} -> {to} was refused");
                    let expected = IllegalStateTransition {
                        name: Name::from("test"),
                        from,
                        to,
                    };
                    assert_eq!(error, expected);
                    assert_eq!(cb.state(), from, "a refused transition changes nothing");
                    assert!(seen.lock().unwrap().is_empty(), "and says nothing");
                }
            }
        }
    }
    assert_eq!(allowed, 33);
}

#[test]
fn a_refused_transition_says_both_states_and_what_to_do() {
    let (cb, _) = breaker(small(2, 1));
    let closed = cb.transition_to_half_open_state().unwrap_err();
    assert_eq!(
        closed.to_string(),
        "circuit breaker `test` cannot go from closed to half-open; open it first"
    );
    cb.transition_to_metrics_only_state();
    let metrics_only = cb.transition_to_open_state().unwrap_err();
    assert_eq!(
        metrics_only.to_string(),
        "circuit breaker `test` cannot go from metrics only to open; close it first"
    );
}

#[test]
fn open_state_for_a_given_wait_then_half_open() {
    let (cb, clock) = breaker(small(2, 1).wait_duration_in_open_state(secs(60)));
    cb.transition_to_open_state_for(secs(5)).unwrap();
    assert_eq!(cb.state(), CircuitState::Open);
    assert_eq!(cb.remaining_open_time(), Some(secs(5)));
    clock.advance(secs(4));
    assert_eq!(refused_with(&cb), Some(CircuitState::Open));
    clock.advance(SEC);
    let probe = cb
        .try_acquire()
        .expect("the wait of 5 s is over, not the configured 60 s");
    assert!(probe.is_probe());
    probe.record_success();
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn open_state_until_a_reading_of_the_breaker_s_clock() {
    let (cb, clock) = breaker(small(2, 1));
    clock.advance(secs(100));
    assert_eq!(cb.clock().now(), secs(100));
    cb.transition_to_open_state_until(secs(103)).unwrap();
    assert_eq!(cb.remaining_open_time(), Some(secs(3)));
    clock.advance(secs(3));
    assert!(cb.try_acquire().unwrap().is_probe());
    // A deadline already passed: the next call is a probe.
    cb.transition_to_open_state_until(secs(1)).unwrap();
    assert_eq!(cb.remaining_open_time(), Some(Duration::ZERO));
    assert!(cb.try_acquire().unwrap().is_probe());
}

#[test]
fn an_opening_for_a_given_wait_counts_for_the_backoff() {
    let (cb, clock) = breaker(small(1, 1).open_state_backoff(2.0, secs(100)));
    cb.transition_to_open_state_for(SEC).unwrap();
    clock.advance(SEC);
    calls(&cb, "f"); // the probe fails: the second consecutive opening
    assert_eq!(cb.remaining_open_time(), Some(secs(20)), "10 s × 2");
}

#[test]
fn timed_openings_follow_the_table_too() {
    let (cb, _) = breaker(small(2, 1));
    cb.transition_to_metrics_only_state();
    for refused in [
        cb.transition_to_open_state_for(SEC),
        cb.transition_to_open_state_until(secs(5)),
    ] {
        let error = refused.unwrap_err();
        assert_eq!(
            (error.from, error.to),
            (CircuitState::MetricsOnly, CircuitState::Open)
        );
    }
    assert_eq!(cb.state(), CircuitState::MetricsOnly);
}

#[test]
fn a_breaker_starts_in_its_initial_state() {
    let (closed, _) = breaker(small(2, 1));
    assert_eq!(closed.state(), CircuitState::Closed);

    let (open, clock) = breaker(small(2, 1).initial_state(CircuitState::Open));
    assert_eq!(open.state(), CircuitState::Open);
    assert_eq!(refused_with(&open), Some(CircuitState::Open));
    assert_eq!(open.remaining_open_time(), Some(secs(10)));
    clock.advance(secs(10));
    calls(&open, "s"); // the probe closes it
    assert_eq!(open.state(), CircuitState::Closed);

    let (metrics_only, _) = breaker(small(2, 1).initial_state(CircuitState::MetricsOnly));
    assert_eq!(metrics_only.state(), CircuitState::MetricsOnly);
    calls(&metrics_only, "ffff");
    assert_eq!(metrics_only.state(), CircuitState::MetricsOnly);
    assert_eq!(metrics_only.metrics().number_of_failed_calls(), 2);
}

#[test]
fn an_initial_state_that_is_not_a_start_is_refused() {
    for state in [
        CircuitState::HalfOpen,
        CircuitState::Disabled,
        CircuitState::ForcedOpen,
    ] {
        let error = CircuitBreakerConfig::builder()
            .initial_state(state)
            .build()
            .unwrap_err();
        assert_eq!(error.field(), "initial_state", "{state}");
        assert!(error.to_string().contains(&state.to_string()), "{error}");
    }
}

#[test]
fn reconfigure_starts_over_in_the_new_initial_state() {
    let (cb, _) = breaker(small(2, 1));
    calls(&cb, "f");
    let seen = recorder(&cb);
    cb.reconfigure(
        small(2, 1)
            .initial_state(CircuitState::Open)
            .build()
            .unwrap(),
    );
    assert_eq!(cb.state(), CircuitState::Open);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0, "fresh metrics");
    assert_eq!(cb.remaining_open_time(), Some(secs(10)), "a first opening");
    assert_eq!(
        transitions(&seen),
        [(CircuitState::Closed, CircuitState::Open)]
    );
    assert!(matches!(
        seen.lock().unwrap().last(),
        Some(CircuitBreakerEvent::Reset { .. })
    ));
    // A reset still closes.
    cb.reset();
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn a_panicking_subscriber_costs_a_half_open_breaker_no_probe() {
    let (cb, clock) = breaker(small(2, 1));
    trip(&cb, 2);
    let panicking = cb.subscribe(|event| {
        if let CircuitBreakerEvent::StateTransition {
            to: CircuitState::HalfOpen,
            ..
        } = event
        {
            panic!("a subscriber's bug");
        }
    });
    let seen = recorder(&cb); // subscribed after the one that panics
    clock.advance(secs(10));
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cb.try_acquire().map(|_| ())
    }));
    assert!(
        attempt.is_err(),
        "the subscriber's panic reaches the caller"
    );
    assert_eq!(
        transitions(&seen),
        [(CircuitState::Open, CircuitState::HalfOpen)],
        "the next subscriber still got the event"
    );
    assert!(cb.unsubscribe(panicking));
    // The one probe was given back when the panic dropped its permit.
    let probe = cb.try_acquire().expect("the probe is available again");
    assert!(probe.is_probe());
    probe.record_success();
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn a_subscriber_panicking_while_a_call_unwinds_does_not_abort() {
    let (cb, clock) = breaker(small(2, 2).max_wait_duration_in_half_open_state(secs(5)));
    half_open(&cb);
    cb.subscribe(|event| {
        if let CircuitBreakerEvent::StateTransition { .. } = event {
            panic!("a subscriber's bug");
        }
    });
    let call = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _probe = cb.try_acquire().unwrap();
        clock.advance(secs(6));
        // Dropping the probe observes the maximum wait: half-open -> open, whose event
        // panics in the subscriber while this panic unwinds.
        panic!("the call's own panic");
    }));
    let payload = call.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the call's own panic"),
        "the caller gets its own panic, and the process goes on"
    );
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn a_manual_clock_at_its_end_still_has_deadlines() {
    let (cb, clock) = breaker(small(2, 1).max_wait_duration_in_half_open_state(secs(5)));
    clock.advance(Duration::MAX);
    cb.transition_to_open_state().unwrap();
    cb.transition_to_half_open_state().unwrap();
    // Half-open with a maximum wait that cannot end any more: still half-open, not read as an
    // expired "no deadline".
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    let (cb, clock) = breaker(small(2, 1));
    clock.advance(Duration::MAX);
    trip(&cb, 2);
    cb.transition_to_half_open_state().unwrap();
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    let probe = cb.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.record_success();
    assert_eq!(cb.state(), CircuitState::Closed);
}

#[test]
fn reset_closes_with_fresh_metrics_and_says_so() {
    let (cb, _) = breaker(small(4, 1));
    calls(&cb, "fss");
    let seen = recorder(&cb);
    cb.reset();
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    assert!(matches!(
        seen.lock().unwrap().as_slice(),
        [CircuitBreakerEvent::Reset { .. }]
    ));
    seen.lock().unwrap().clear();
    trip(&cb, 4);
    assert_eq!(refused_with(&cb), Some(CircuitState::Open));
    seen.lock().unwrap().clear();
    cb.reset();
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().number_of_not_permitted_calls(), 0);
    let events = seen.lock().unwrap();
    assert!(matches!(
        events.as_slice(),
        [
            CircuitBreakerEvent::StateTransition {
                from: CircuitState::Open,
                to: CircuitState::Closed,
                ..
            },
            CircuitBreakerEvent::Reset { .. }
        ]
    ));
}

// ---------------------------------------------------------------------------------------------
// Reconfiguration in place

/// Puts a `small(4, 2)` breaker in `state`, with something in its metrics where that state
/// keeps any (recorded calls, probes, a refused call). Returns a probe still held, if any.
fn fill(cb: &CircuitBreaker, state: CircuitState) -> Option<CircuitPermit<'_>> {
    match state {
        CircuitState::Closed => calls(cb, "fsf"),
        CircuitState::Open => trip(cb, 4),
        CircuitState::HalfOpen => half_open(cb),
        CircuitState::Disabled => cb.transition_to_disabled_state(),
        CircuitState::ForcedOpen => cb.transition_to_forced_open_state(),
        CircuitState::MetricsOnly => {
            cb.transition_to_metrics_only_state();
            calls(cb, "ff");
        }
    }
    let held = if state == CircuitState::HalfOpen {
        calls(cb, "f");
        let held = cb.try_acquire().unwrap();
        assert!(held.is_probe());
        Some(held)
    } else {
        None
    };
    if state.refuses_calls() || state == CircuitState::HalfOpen {
        assert_eq!(refused_with(cb), Some(state));
        assert_eq!(cb.metrics().number_of_not_permitted_calls(), 1);
    }
    assert_eq!(cb.state(), state);
    held
}

const STATES: [CircuitState; 6] = [
    CircuitState::Closed,
    CircuitState::Open,
    CircuitState::HalfOpen,
    CircuitState::Disabled,
    CircuitState::ForcedOpen,
    CircuitState::MetricsOnly,
];

#[test]
fn reconfigure_closes_every_state_with_fresh_metrics_and_the_new_config() {
    let new = small(6, 1).failure_rate_threshold(80.0).build().unwrap();
    for state in STATES {
        let (cb, _) = breaker(small(4, 2));
        let held = fill(&cb, state);
        if state != CircuitState::Disabled {
            assert_ne!(
                cb.metrics().window_only(),
                cb.with_config_for_test(new.clone()).metrics()
            );
        }
        cb.reconfigure(new.clone());
        assert_eq!(cb.state(), CircuitState::Closed, "from {state}");
        // What a fresh breaker of the new configuration would report.
        let fresh = cb.with_config_for_test(new.clone());
        assert_eq!(cb.metrics().window_only(), fresh.metrics(), "from {state}");
        assert_eq!(cb.metrics().number_of_not_permitted_calls(), 0);
        assert_eq!(cb.config(), new, "from {state}");
        drop(held); // a probe of the half-open state: given back to nobody
        assert_eq!(cb.state(), CircuitState::Closed, "from {state}");
    }
}

#[test]
fn reconfigure_forgets_the_backoff_and_the_open_wait() {
    let config = small(2, 1)
        .open_state_backoff(2.0, secs(30))
        .build()
        .unwrap();
    let (cb, clock) = breaker(small(2, 1).open_state_backoff(2.0, secs(30)));
    trip(&cb, 2);
    clock.advance(secs(10));
    calls(&cb, "f"); // the probe fails: the second opening waits 20 s
    assert_eq!(cb.remaining_open_time(), Some(secs(20)));
    cb.reconfigure(config);
    assert_eq!(cb.remaining_open_time(), None);
    trip(&cb, 2);
    assert_eq!(cb.remaining_open_time(), Some(secs(10)), "a first opening");
}

#[test]
fn reconfigure_installs_a_window_of_the_new_size_minimum_and_threshold() {
    let (cb, _) = breaker(small(10, 1));
    calls(&cb, "ffff"); // 4 of a minimum of 10: no rate yet
    assert_eq!(cb.metrics().failure_rate(), -1.0);
    cb.reconfigure(small(4, 1).failure_rate_threshold(75.0).build().unwrap());
    calls(&cb, "ssf");
    assert_eq!(
        cb.metrics().failure_rate(),
        -1.0,
        "3 of the new minimum of 4"
    );
    calls(&cb, "f"); // 50 %: below the new threshold of 75 %
    assert_eq!(cb.state(), CircuitState::Closed);
    calls(&cb, "f"); // evicts the first success: s f f f, 75 %
    assert_eq!(cb.state(), CircuitState::Open);
    let m = cb.metrics();
    assert_eq!((m.number_of_buffered_calls(), m.failure_rate()), (4, 75.0));
}

#[test]
fn reconfigure_switches_the_window_kind() {
    let (cb, clock) = breaker(small(2, 1));
    cb.reconfigure(
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::TimeBased(2))
            .minimum_number_of_calls(2)
            .build()
            .unwrap(),
    );
    calls(&cb, "f");
    clock.advance(secs(2)); // the failure leaves the window of 2 s
    calls(&cb, "f");
    let m = cb.metrics();
    assert_eq!((m.number_of_buffered_calls(), m.failure_rate()), (1, -1.0));
    assert_eq!(
        cb.state(),
        CircuitState::Closed,
        "a count window of 2 would be open"
    );
    calls(&cb, "f");
    assert_eq!(cb.state(), CircuitState::Open);
    // And back to a count window, where time does not matter.
    cb.reconfigure(small(2, 1).build().unwrap());
    calls(&cb, "f");
    clock.advance(secs(100));
    calls(&cb, "f");
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn reconfigure_takes_record_rejections_into_account() {
    let (cb, _) = breaker(small(2, 1));
    calls(&cb, "rr");
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    cb.reconfigure(small(2, 1).record_rejections(true).build().unwrap());
    calls(&cb, "rr");
    assert_eq!(cb.state(), CircuitState::Open);
}

#[test]
fn reconfigure_turns_the_automatic_transition_on() {
    let (cb, clock) = breaker(small(2, 1));
    trip(&cb, 2);
    clock.advance(secs(10));
    assert_eq!(cb.state(), CircuitState::Open, "waits for a call");
    cb.reconfigure(
        small(2, 1)
            .automatic_transition_from_open_to_half_open(true)
            .build()
            .unwrap(),
    );
    trip(&cb, 2);
    clock.advance(secs(10));
    assert_eq!(
        cb.state(),
        CircuitState::HalfOpen,
        "observed from the clock"
    );
}

#[test]
fn permits_taken_before_reconfigure_record_nothing() {
    // Window of 1, minimum 1, slow calls from 1 s: any failure or slow call landing opens it.
    let config = small(1, 1)
        .slow_call_duration_threshold(SEC)
        .build()
        .unwrap();
    let (cb, clock) = breaker(small(1, 1).slow_call_duration_threshold(SEC));
    let seen = recorder(&cb);
    let ok = cb.try_acquire().unwrap();
    let failed = cb.try_acquire().unwrap();
    let slow = cb.try_acquire().unwrap();
    cb.reconfigure(config.clone());
    clock.advance(secs(2));
    ok.record_success();
    failed.record_failure();
    slow.record_success();
    assert_eq!(cb.state(), CircuitState::Closed);
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    // Nor do permits of the metrics-only state (recorded under the state machine's lock).
    cb.transition_to_metrics_only_state();
    let recorded = cb.try_acquire().unwrap();
    cb.reconfigure(config.clone());
    cb.transition_to_metrics_only_state();
    recorded.record_failure();
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    // A probe taken before is not given back to a later half-open state.
    half_open(&cb);
    let probe = cb.try_acquire().unwrap();
    cb.reconfigure(config);
    half_open(&cb);
    let fresh = cb.try_acquire().unwrap();
    drop(probe);
    assert_eq!(refused_with(&cb), Some(CircuitState::HalfOpen));
    drop(fresh);
    // No call event either: the calls' outcomes belong to no state.
    assert!(
        !seen.lock().unwrap().iter().any(|e| matches!(
            e,
            CircuitBreakerEvent::Success { .. } | CircuitBreakerEvent::Error { .. }
        )),
        "{seen:?}"
    );
}

#[test]
fn subscribers_name_and_id_survive_reconfigure() {
    let (cb, _) = breaker(small(2, 1));
    let (name, id) = (cb.name().clone(), cb.id());
    let seen = recorder(&cb);
    let count = Arc::new(Mutex::new(0));
    let sink = Arc::clone(&count);
    let subscription = cb.subscribe(move |_| *sink.lock().unwrap() += 1);
    trip(&cb, 2);
    seen.lock().unwrap().clear();
    cb.reconfigure(small(4, 1).build().unwrap());
    assert!(
        matches!(
            seen.lock().unwrap().as_slice(),
            [
                CircuitBreakerEvent::StateTransition {
                    from: CircuitState::Open,
                    to: CircuitState::Closed,
                    ..
                },
                CircuitBreakerEvent::Reset { .. }
            ]
        ),
        "{seen:?}"
    );
    // A closed breaker: no change of state, only the reset.
    seen.lock().unwrap().clear();
    cb.reconfigure(small(4, 1).build().unwrap());
    assert!(matches!(
        seen.lock().unwrap().as_slice(),
        [CircuitBreakerEvent::Reset { .. }]
    ));
    // Calls after the change still reach the subscribers.
    seen.lock().unwrap().clear();
    calls(&cb, "sf");
    assert!(matches!(
        seen.lock().unwrap().as_slice(),
        [
            CircuitBreakerEvent::Success { .. },
            CircuitBreakerEvent::Error { .. }
        ]
    ));
    assert!(seen.lock().unwrap().iter().all(|e| *e.name() == name));
    assert_eq!((cb.name(), cb.id()), (&name, id));
    let delivered = *count.lock().unwrap();
    assert!(cb.unsubscribe(subscription), "still subscribed");
    calls(&cb, "s");
    assert_eq!(*count.lock().unwrap(), delivered);
}

#[test]
fn reconfiguring_with_an_equal_config_still_starts_over() {
    let (cb, _) = breaker(small(4, 1));
    calls(&cb, "fsf");
    let seen = recorder(&cb);
    cb.reconfigure(cb.config());
    assert_eq!(cb.metrics().number_of_buffered_calls(), 0);
    assert!(matches!(
        seen.lock().unwrap().as_slice(),
        [CircuitBreakerEvent::Reset { .. }]
    ));
}

#[test]
fn reconfigure_turns_the_slow_call_rule_off_and_on() {
    // No subscriber: calls are timed only as the slow-call rule needs.
    let (cb, clock) = breaker(small(4, 1).slow_call_duration_threshold(Duration::MAX));
    assert_eq!(cb.shared.call_reading.load(), Reading::None);
    slow_call(&cb, &clock, secs(3_600), true);
    assert_eq!(cb.metrics().number_of_slow_calls(), 0);

    cb.reconfigure(
        small(4, 1)
            .slow_call_duration_threshold(SEC)
            .build()
            .unwrap(),
    );
    assert_eq!(cb.shared.call_reading.load(), Reading::Precise);
    slow_call(&cb, &clock, secs(2), true);
    slow_call(&cb, &clock, Duration::from_millis(999), false);
    let m = cb.metrics();
    assert_eq!(
        (m.number_of_slow_calls(), m.number_of_buffered_calls()),
        (1, 2)
    );

    cb.reconfigure(
        small(4, 1)
            .slow_call_duration_threshold(secs(10))
            .build()
            .unwrap(),
    );
    slow_call(&cb, &clock, secs(2), true);
    assert_eq!(
        cb.metrics().number_of_slow_calls(),
        0,
        "2 s is not slow from 10 s"
    );

    cb.reconfigure(
        small(4, 1)
            .slow_call_duration_threshold(Duration::MAX)
            .build()
            .unwrap(),
    );
    assert_eq!(cb.shared.call_reading.load(), Reading::None);
    slow_call(&cb, &clock, secs(3_600), false);
    let m = cb.metrics();
    assert_eq!(
        (m.number_of_slow_calls(), m.number_of_failed_calls()),
        (0, 1)
    );
}

#[test]
fn reconfigure_switches_the_readings_of_a_system_clock_breaker() {
    let count = CircuitBreakerConfig::builder()
        .slow_call_duration_threshold(Duration::MAX)
        .build()
        .unwrap();
    let time = CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::TimeBased(10))
        .build()
        .unwrap();
    let cb = CircuitBreaker::new("system", count.clone());
    let resolution = Clock::system().coarse_resolution();
    assert_eq!(cb.shared.window_reading.load(), Reading::None);
    cb.reconfigure(time);
    let default = duration_nanos(CircuitBreakerConfig::DEFAULT_SLOW_CALL_DURATION_THRESHOLD);
    assert_eq!(
        cb.shared.window_reading.load(),
        window_reading(SlidingWindow::TimeBased(10), resolution)
    );
    assert_eq!(
        cb.shared.call_reading.load(),
        call_reading(default, resolution)
    );
    cb.try_acquire().unwrap().record_failure();
    assert_eq!(cb.metrics().number_of_failed_calls(), 1);
    cb.reconfigure(count);
    assert_eq!(cb.shared.window_reading.load(), Reading::None);
    assert_eq!(cb.shared.call_reading.load(), Reading::None);
}

#[test]
fn record_call_durations_times_every_recorded_call_by_outcome() {
    const MS: Duration = Duration::from_millis(1);
    let (cb, clock) = breaker(
        small(4, 2)
            .slow_call_duration_threshold(Duration::MAX)
            .record_call_durations(true),
    );
    // Timed although no rule needs a clock.
    assert_eq!(cb.shared.call_reading.load(), Reading::Precise);
    slow_call(&cb, &clock, 30 * MS, true);
    slow_call(&cb, &clock, secs(2), false);
    let permit = cb.try_acquire().unwrap();
    clock.advance(7 * MS);
    permit.record_ignored();
    // Neither an abandoned call nor one rejected further in is recorded, nor timed.
    let permit = cb.try_acquire().unwrap();
    clock.advance(secs(1));
    drop(permit);
    let permit = cb.try_acquire().unwrap();
    clock.advance(secs(1));
    permit.record_rejected(&rejection());
    // Half-open probes, recorded under the state machine's lock.
    cb.transition_to_open_state().unwrap();
    clock.advance(secs(10));
    slow_call(&cb, &clock, 400 * MS, true);
    assert_eq!(cb.state(), CircuitState::HalfOpen);
    slow_call(&cb, &clock, 400 * MS, false);

    let durations = cb.call_durations().expect("kept");
    // Buckets are cumulative, in the order 1, 2.5, 5, 10, 25, 50, 100, 250, 500 ms, 1, 2.5,
    // 5, 10 s, +Inf.
    assert_eq!(
        durations.cumulative(0),
        [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2]
    );
    assert_eq!(
        durations.cumulative(1),
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2]
    );
    assert_eq!(
        durations.cumulative(2),
        [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    );
    assert!((durations.sum_seconds(0) - 0.43).abs() < 1e-9);
    assert!((durations.sum_seconds(1) - 2.4).abs() < 1e-9);
    assert!((durations.sum_seconds(2) - 0.007).abs() < 1e-9);
    // The same calls as the counts of the metrics.
    let m = cb.metrics();
    assert_eq!(
        (
            m.total_successful_calls(),
            m.total_failed_calls(),
            m.total_ignored_calls()
        ),
        (2, 2, 1)
    );
}

#[test]
fn record_call_durations_times_metrics_only_calls_and_follows_reconfiguration() {
    let (cb, clock) = breaker(small(4, 1).slow_call_duration_threshold(Duration::MAX));
    assert_eq!(cb.call_durations(), None, "off by default");
    assert_eq!(cb.shared.call_reading.load(), Reading::None);
    slow_call(&cb, &clock, secs(3), true);

    // Turned on, the histogram starts with the calls that follow.
    cb.reconfigure(
        small(4, 1)
            .slow_call_duration_threshold(Duration::MAX)
            .record_call_durations(true)
            .initial_state(CircuitState::MetricsOnly)
            .build()
            .unwrap(),
    );
    assert_eq!(cb.shared.call_reading.load(), Reading::Precise);
    slow_call(&cb, &clock, Duration::from_millis(20), false);
    let durations = cb.call_durations().expect("kept");
    assert_eq!(durations.cumulative(0)[13], 0);
    assert_eq!(durations.cumulative(1)[4], 1, "20 ms: le=0.025");

    cb.reconfigure(
        small(4, 1)
            .slow_call_duration_threshold(Duration::MAX)
            .build()
            .unwrap(),
    );
    assert_eq!(cb.call_durations(), None);
    assert_eq!(cb.shared.call_reading.load(), Reading::None);
}

// ---------------------------------------------------------------------------------------------
// Events

#[test]
fn events_of_a_tripping_breaker_come_in_order() {
    let (cb, clock) = breaker(small(2, 1));
    let seen = recorder(&cb);
    let p = cb.try_acquire().unwrap();
    clock.advance(Duration::from_millis(5));
    p.record_success();
    calls(&cb, "f");
    let events = seen.lock().unwrap();
    assert!(
        matches!(
            events.as_slice(),
            [
                CircuitBreakerEvent::Success { elapsed, .. },
                CircuitBreakerEvent::Error { .. },
                CircuitBreakerEvent::FailureRateExceeded { rate, .. },
                CircuitBreakerEvent::StateTransition { from: CircuitState::Closed, to: CircuitState::Open, .. },
            ] if *elapsed == Duration::from_millis(5) && *rate == 50.0
        ),
        "{events:?}"
    );
    assert!(events.iter().all(|e| e.name() == "test"));
    assert!(events[3].to_string().contains("from closed to open"));
}

#[test]
fn a_callback_may_use_the_breaker() {
    let (cb, _) = breaker(small(2, 1));
    let cb = Arc::new(cb);
    let observed = Arc::new(Mutex::new(Vec::new()));
    let (weak, sink) = (Arc::downgrade(&cb), Arc::clone(&observed));
    cb.subscribe(move |event| {
        if let (Some(cb), CircuitBreakerEvent::StateTransition { .. }) = (weak.upgrade(), event) {
            // Both take the breaker's lock: the event must come after it is released.
            sink.lock()
                .unwrap()
                .push((cb.state(), cb.metrics().number_of_buffered_calls()));
        }
    });
    calls(&cb, "ff");
    cb.reset();
    assert_eq!(
        *observed.lock().unwrap(),
        [(CircuitState::Open, 2), (CircuitState::Closed, 0)]
    );
}

#[test]
fn unsubscribed_callbacks_get_nothing() {
    let (cb, _) = breaker(small(2, 1));
    let seen = Arc::new(Mutex::new(0));
    let sink = Arc::clone(&seen);
    let id = cb.subscribe(move |_| *sink.lock().unwrap() += 1);
    calls(&cb, "s");
    assert!(cb.unsubscribe(id));
    assert!(!cb.unsubscribe(id));
    calls(&cb, "sf");
    cb.reset();
    assert_eq!(*seen.lock().unwrap(), 1);
    assert!(!cb.shared.subscribers.any());
}

#[test]
fn no_event_is_gathered_without_subscribers() {
    let (cb, _) = breaker(small(2, 1));
    let mut fx = Effects::new(&cb.shared);
    fx.events.push(Ev::Reset);
    assert!(fx.events.is_empty());
    let id = cb.subscribe(|_| {});
    let mut fx = Effects::new(&cb.shared);
    fx.events.push(Ev::Reset);
    assert!(!fx.events.is_empty());
    cb.unsubscribe(id);
}

// ---------------------------------------------------------------------------------------------
// Timers on a tokio runtime

#[tokio::test(start_paused = true)]
async fn automatic_transition_runs_on_a_tokio_timer() {
    let cb = CircuitBreaker::new(
        "timed",
        small(2, 1)
            .automatic_transition_from_open_to_half_open(true)
            .build()
            .unwrap(),
    );
    let seen = recorder(&cb);
    trip(&cb, 2);
    tokio::time::sleep(Duration::from_millis(9_990)).await;
    assert_eq!(transitions(&seen).len(), 1);
    tokio::time::sleep(Duration::from_millis(20)).await;
    // The timer made the transition: nobody called the breaker.
    assert_eq!(
        transitions(&seen),
        [
            (CircuitState::Closed, CircuitState::Open),
            (CircuitState::Open, CircuitState::HalfOpen)
        ]
    );
    assert_eq!(cb.state(), CircuitState::HalfOpen);
}

#[tokio::test(start_paused = true)]
async fn half_open_maximum_wait_runs_on_a_tokio_timer() {
    let cb = CircuitBreaker::new(
        "timed",
        small(2, 1)
            .max_wait_duration_in_half_open_state(secs(3))
            .build()
            .unwrap(),
    );
    let seen = recorder(&cb);
    half_open(&cb);
    tokio::time::sleep(secs(4)).await;
    assert_eq!(
        transitions(&seen).last(),
        Some(&(CircuitState::HalfOpen, CircuitState::Open))
    );
}

#[tokio::test(start_paused = true)]
async fn a_timer_of_an_earlier_state_does_nothing() {
    let cb = CircuitBreaker::new(
        "timed",
        small(2, 1)
            .automatic_transition_from_open_to_half_open(true)
            .build()
            .unwrap(),
    );
    let seen = recorder(&cb);
    cb.transition_to_open_state().unwrap();
    cb.transition_to_forced_open_state();
    tokio::time::sleep(secs(20)).await;
    assert_eq!(transitions(&seen).len(), 2);
    assert_eq!(cb.state(), CircuitState::ForcedOpen);
}

#[tokio::test(start_paused = true)]
async fn an_open_state_timer_from_before_reconfigure_does_nothing() {
    let automatic = |wait| {
        small(2, 1)
            .automatic_transition_from_open_to_half_open(true)
            .wait_duration_in_open_state(wait)
            .build()
            .unwrap()
    };
    let cb = CircuitBreaker::new("timed", automatic(secs(10)));
    let seen = recorder(&cb);
    trip(&cb, 2); // a timer for 10 s
    tokio::time::sleep(SEC).await;
    cb.reconfigure(automatic(secs(60)));
    trip(&cb, 2); // open again, until 61 s
    tokio::time::sleep(secs(19)).await;
    let (closed, open, half_open) = (
        CircuitState::Closed,
        CircuitState::Open,
        CircuitState::HalfOpen,
    );
    assert_eq!(
        transitions(&seen),
        [(closed, open), (open, closed), (closed, open)],
        "the first timer fired into the reconfigured breaker"
    );
    // The timer of the new open state, with the new wait.
    tokio::time::sleep(secs(42)).await;
    assert_eq!(transitions(&seen).last(), Some(&(open, half_open)));
}

#[tokio::test(start_paused = true)]
async fn a_reconfigured_breaker_keeps_its_runtime_for_timers() {
    let cb = CircuitBreaker::new("timed", small(2, 1).build().unwrap());
    let seen = recorder(&cb);
    // Reconfigured and tripped on a thread outside any runtime: the timer runs on the runtime
    // the breaker was created in.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert!(tokio::runtime::Handle::try_current().is_err());
            cb.reconfigure(
                small(2, 1)
                    .automatic_transition_from_open_to_half_open(true)
                    .build()
                    .unwrap(),
            );
            trip(&cb, 2);
        });
    });
    tokio::time::sleep(secs(11)).await;
    // Nobody called the breaker: the timer made the transition.
    assert_eq!(
        transitions(&seen).last(),
        Some(&(CircuitState::Open, CircuitState::HalfOpen))
    );
}

#[tokio::test(start_paused = true)]
async fn a_pending_timer_does_not_keep_the_breaker_alive() {
    let cb = CircuitBreaker::new(
        "timed",
        small(2, 1)
            .automatic_transition_from_open_to_half_open(true)
            .build()
            .unwrap(),
    );
    cb.transition_to_open_state().unwrap();
    let weak = Arc::downgrade(&cb.shared);
    drop(cb);
    assert!(weak.upgrade().is_none());
    tokio::time::sleep(secs(20)).await; // the timer wakes up and finds nothing
}

#[test]
fn no_timer_without_a_runtime_or_with_a_manual_clock() {
    let cb = CircuitBreaker::new("plain", CircuitBreakerConfig::default());
    assert!(cb.shared.runtime.is_none());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let (manual, _) = breaker(small(2, 1));
    assert!(manual.shared.runtime.is_none());
    let system = CircuitBreaker::new("system", CircuitBreakerConfig::default());
    assert!(system.shared.runtime.is_some());
}

#[test]
fn totals_since_creation_only_grow_through_transitions_resets_and_reconfiguration() {
    let (cb, _) = breaker(small(4, 2));
    for _ in 0..3 {
        cb.try_acquire().unwrap().record_success();
    }
    cb.try_acquire().unwrap().record_failure();
    cb.try_acquire().unwrap().record_ignored();
    cb.transition_to_open_state().unwrap();
    assert!(cb.try_acquire().is_err());
    let before = cb.metrics();
    assert_eq!(
        (
            before.total_successful_calls(),
            before.total_failed_calls(),
            before.total_ignored_calls(),
            before.total_not_permitted_calls()
        ),
        (3, 1, 1, 1)
    );
    cb.transition_to_half_open_state().unwrap();
    cb.try_acquire().unwrap().record_failure();
    cb.reset();
    cb.reconfigure(small(6, 1).build().unwrap());
    let after = cb.metrics();
    assert_eq!(
        after.number_of_not_permitted_calls(),
        0,
        "the window starts over"
    );
    assert_eq!(after.number_of_buffered_calls(), 0);
    assert_eq!(
        (
            after.total_successful_calls(),
            after.total_failed_calls(),
            after.total_ignored_calls(),
            after.total_not_permitted_calls()
        ),
        (3, 2, 1, 1),
        "the half-open probe counted; nothing was cleared"
    );
}
