//! Model-checks the half-open permit accounting of the circuit breaker under every
//! interleaving loom explores: never more probes than permitted, probes given back are
//! re-acquirable, and the atomic state mirror agrees with the state machine behind the lock.
//! And the closed state's fast path (records under the window's spin lock, without the state
//! machine's lock): a stale record never reaches a later closed state's window, and racing
//! records open the breaker exactly once. And reconfiguration in place: a record of a permit
//! taken before never lands in the new configuration's window, nor opens the breaker.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p resilience-runtime --test loom_circuit_breaker --release
//! ```

#![cfg(loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use resilience_runtime::{
    CircuitBreaker, CircuitBreakerConfig, CircuitPermit, CircuitState, Clock, ManualClock,
    Rejected, SlidingWindow,
};

/// A half-open breaker with `probes` probe calls, on a manual clock that never moves.
fn half_open(probes: u32) -> CircuitBreaker {
    let config = CircuitBreakerConfig::builder()
        .permitted_calls_in_half_open_state(probes)
        .build()
        .unwrap();
    let cb = CircuitBreaker::with_clock("loom", config, Clock::from(ManualClock::new()));
    cb.transition_to_open_state().unwrap();
    cb.transition_to_half_open_state().unwrap();
    cb
}

/// Explores the interleavings of `f`: exhaustively for two threads; for three, up to a
/// preemption bound (loom's advice: most concurrency bugs need few preemptions), so that the
/// whole file runs in seconds.
fn model(threads: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if threads > 2 {
        builder.preemption_bound = Some(4);
    }
    builder.check(f);
}

fn is_half_open_refusal(result: &Result<(), Rejected>) -> bool {
    matches!(
        result,
        Err(Rejected::CallNotPermitted {
            state: CircuitState::HalfOpen,
            ..
        })
    )
}

/// Three callers race for two probes and give them back (abandoned calls): at no point are
/// more than two held, and afterwards both are available again.
#[test]
fn probes_in_flight_never_exceed_the_limit_and_come_back() {
    model(3, || {
        let cb = Arc::new(half_open(2));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (cb, in_flight) = (Arc::clone(&cb), Arc::clone(&in_flight));
                thread::spawn(move || match cb.try_acquire() {
                    Ok(permit) => {
                        assert!(permit.is_probe());
                        let held = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(held <= 2, "{held} probes held, 2 permitted");
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        drop(permit); // abandoned: given back
                    }
                    Err(rejected) => assert!(is_half_open_refusal(&Err(rejected))),
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(cb.state(), CircuitState::HalfOpen);
        let a = cb.try_acquire().expect("first probe given back");
        let b = cb.try_acquire().expect("second probe given back");
        assert!(is_half_open_refusal(&cb.try_acquire().map(drop)));
        drop((a, b));
    });
}

/// Three callers race for two probes and record successes: the breaker closes exactly once,
/// at most one caller is refused, and a caller that came after the close recorded into the
/// fresh closed window.
#[test]
fn racing_successful_probes_close_the_breaker_once() {
    model(3, || {
        let cb = Arc::new(half_open(2));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let cb = Arc::clone(&cb);
                thread::spawn(move || match cb.try_acquire() {
                    Ok(permit) => {
                        let probe = permit.is_probe();
                        permit.record_success();
                        Ok(probe)
                    }
                    Err(rejected) => Err(rejected),
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let probes = results.iter().filter(|r| matches!(r, Ok(true))).count();
        let closed_calls = results.iter().filter(|r| matches!(r, Ok(false))).count();
        let refused = results.iter().filter(|r| r.is_err()).count();
        assert_eq!(probes, 2, "{results:?}");
        assert_eq!(closed_calls + refused, 1, "{results:?}");
        // The atomic mirror read by state() agrees with the state machine.
        assert_eq!(cb.state(), CircuitState::Closed);
        let metrics = cb.metrics();
        assert_eq!(metrics.number_of_buffered_calls() as usize, closed_calls);
        assert_eq!(metrics.number_of_not_permitted_calls() as usize, 0);
    });
}

/// One caller abandons its probe while another takes one and fails: the abandoned probe is
/// never lost (a refused caller leaves a probe to take), and a recorded failure opens.
#[test]
fn a_given_back_probe_is_never_lost() {
    model(2, || {
        let cb = Arc::new(half_open(1));
        let abandon = {
            let cb = Arc::clone(&cb);
            thread::spawn(move || {
                if let Ok(permit) = cb.try_acquire() {
                    drop(permit);
                }
            })
        };
        let fail = spawn_failure(&cb);
        abandon.join().unwrap();
        let failed = fail.join().unwrap();
        if failed {
            assert_eq!(cb.state(), CircuitState::Open);
            assert!(cb.try_acquire().is_err());
        } else {
            assert_eq!(cb.state(), CircuitState::HalfOpen);
            let probe = cb
                .try_acquire()
                .expect("the abandoned probe was given back");
            probe.record_success();
            assert_eq!(cb.state(), CircuitState::Closed);
        }
    });
}

/// A manual transition races with a probe: the probe's outcome is recorded only in the epoch
/// it was taken in, so the closed window never receives a stale half-open failure, and the
/// state mirror matches what the lock holds.
#[test]
fn a_stale_probe_does_not_reach_the_next_state() {
    model(2, || {
        let cb = Arc::new(half_open(1));
        let prober = {
            let cb = Arc::clone(&cb);
            thread::spawn(move || match cb.try_acquire() {
                Ok(permit) => {
                    let probe = permit.is_probe();
                    permit.record_failure();
                    Some(probe)
                }
                Err(_) => None,
            })
        };
        cb.transition_to_closed_state();
        let probe = prober.join().unwrap();
        // The manual close is the last transition: nothing the prober did reopens it.
        assert_eq!(cb.state(), CircuitState::Closed);
        // Only a call taken after the close is in the closed window.
        let expected = usize::from(probe == Some(false));
        assert_eq!(cb.metrics().number_of_buffered_calls() as usize, expected);
    });
}

/// A closed breaker: count window of `size` calls, minimum `size`, failure threshold 50 %, on a
/// manual clock that never moves.
fn closed(size: u32) -> CircuitBreaker {
    let config = CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(size))
        .minimum_number_of_calls(size)
        .failure_rate_threshold(50.0)
        .build()
        .unwrap();
    CircuitBreaker::with_clock("loom", config, Clock::from(ManualClock::new()))
}

/// The epoch a permit was taken in, from its `Debug` output (the only place it shows).
fn epoch_of(permit: &CircuitPermit<'_>) -> u64 {
    number_after(&format!("{permit:?}"), "epoch: ")
}

/// The number of transitions so far, from the breaker's `Debug` output.
fn transitions_of(cb: &CircuitBreaker) -> u64 {
    number_after(&format!("{cb:?}"), "transitions: ")
}

/// The number that follows `field` in a `Debug` output.
fn number_after(text: &str, field: &str) -> u64 {
    let digits: String = text
        .split(field)
        .nth(1)
        .unwrap_or_else(|| panic!("`{field}` in {text}"))
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("a number")
}

/// Makes a failing call on another thread; it answers whether the call was permitted.
fn spawn_failure(cb: &Arc<CircuitBreaker>) -> thread::JoinHandle<bool> {
    let cb = Arc::clone(cb);
    thread::spawn(move || match cb.try_acquire() {
        Ok(permit) => {
            permit.record_failure();
            true
        }
        Err(_) => false,
    })
}

/// Records a failure on another thread while this one transitions `cb` to open and back to
/// closed; returns the epoch of the failure's permit (`None` if it was refused).
fn failure_racing_a_reopening(cb: &Arc<CircuitBreaker>) -> Option<u64> {
    let caller = {
        let cb = Arc::clone(cb);
        thread::spawn(move || match cb.try_acquire() {
            Ok(permit) => {
                let epoch = epoch_of(&permit);
                permit.record_failure();
                Some(epoch)
            }
            Err(_) => None,
        })
    };
    cb.transition_to_open_state().unwrap();
    cb.transition_to_closed_state();
    caller.join().unwrap()
}

/// A closed-state failure races manual transitions to open and back to closed: the failure is
/// in the final closed window only if its permit was taken in that closed state (epoch 2); a
/// permit of the first closed state records nothing there, whether it lands before, between or
/// after the transitions.
#[test]
fn a_stale_closed_record_never_lands_in_a_later_closed_window() {
    model(2, || {
        let cb = Arc::new(closed(4));
        let epoch = failure_racing_a_reopening(&cb);
        assert_eq!(cb.state(), CircuitState::Closed);
        let metrics = cb.metrics();
        let expected = u32::from(epoch == Some(2));
        assert_eq!(metrics.number_of_buffered_calls(), expected, "{epoch:?}");
        assert_eq!(metrics.number_of_failed_calls(), expected, "{epoch:?}");
    });
}

/// A closed-state failure that opens the breaker (window 1) races manual transitions to open and
/// back to closed: the breaker ends open only if the failure's permit was taken in the final
/// closed state; a trip of the first closed state that loses the race to the manual
/// transitions changes nothing.
#[test]
fn a_stale_trip_never_opens_a_later_closed_state() {
    model(2, || {
        let cb = Arc::new(closed(1));
        let epoch = failure_racing_a_reopening(&cb);
        let metrics = cb.metrics();
        if epoch == Some(2) {
            assert_eq!(cb.state(), CircuitState::Open);
            assert_eq!(metrics.number_of_failed_calls(), 1);
        } else {
            assert_eq!(cb.state(), CircuitState::Closed, "{epoch:?}");
            assert_eq!(metrics.number_of_buffered_calls(), 0, "{epoch:?}");
        }
    });
}

/// Two closed-state calls record at once into a window of 2 that holds one success: whichever
/// failure lands first makes the rate 50 % and opens the breaker, exactly once; the other call
/// is refused or its record is dropped, so the open state keeps the two calls that opened it.
#[test]
fn racing_closed_records_open_the_breaker_once() {
    model(2, || {
        let cb = Arc::new(closed(2));
        cb.try_acquire().unwrap().record_success();
        let callers: Vec<_> = (0..2).map(|_| spawn_failure(&cb)).collect();
        let refused = callers
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|permitted| !permitted)
            .count();
        assert_eq!(cb.state(), CircuitState::Open);
        assert_eq!(transitions_of(&cb), 1, "opened exactly once");
        let metrics = cb.metrics();
        assert_eq!(metrics.number_of_buffered_calls(), 2);
        assert_eq!(metrics.number_of_failed_calls(), 1);
        assert_eq!(metrics.number_of_not_permitted_calls() as usize, refused);
    });
}

/// `closed(size)` with a failure threshold of `threshold` percent.
fn closed_config(size: u32, threshold: f32) -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(size))
        .minimum_number_of_calls(size)
        .failure_rate_threshold(threshold)
        .build()
        .unwrap()
}

/// Records a failure on another thread while this one reconfigures `cb` with `config`; returns
/// the epoch of the failure's permit (`None` if it was refused) and the epoch the
/// reconfiguration started (read right after it, on this thread).
fn failure_racing_a_reconfigure(
    cb: &Arc<CircuitBreaker>,
    config: CircuitBreakerConfig,
) -> (Option<u64>, u64) {
    let caller = {
        let cb = Arc::clone(cb);
        thread::spawn(move || match cb.try_acquire() {
            Ok(permit) => {
                let epoch = epoch_of(&permit);
                permit.record_failure();
                Some(epoch)
            }
            Err(_) => None,
        })
    };
    cb.reconfigure(config);
    let reconfigured = transitions_of(cb);
    (caller.join().unwrap(), reconfigured)
}

/// A closed-state failure that would open the breaker (window 1) races a reconfiguration to a
/// window of 2 (minimum 2, threshold 100 %): the failure lands in the new window only if its permit was taken
/// after the reconfiguration. A record of before (or its trip) that finishes after changes
/// nothing, even if it read values of the new configuration. The breaker ends closed, with the
/// new configuration's window.
#[test]
fn a_record_of_before_a_reconfigure_never_lands_in_the_new_window() {
    model(2, || {
        let cb = Arc::new(closed(1));
        let (epoch, reconfigured) = failure_racing_a_reconfigure(&cb, closed_config(2, 100.0));
        // Open → closed if the old record tripped first, else closed → closed: 1 or 2.
        assert!(matches!(reconfigured, 1 | 2), "{reconfigured}");
        assert_eq!(cb.state(), CircuitState::Closed, "{epoch:?}");
        assert_eq!(transitions_of(&cb), reconfigured, "nothing opened it again");
        let landed = u32::from(epoch == Some(reconfigured));
        let metrics = cb.metrics();
        assert_eq!(metrics.number_of_buffered_calls(), landed, "{epoch:?}");
        assert_eq!(metrics.number_of_failed_calls(), landed, "{epoch:?}");
        // The new window holds 2 calls.
        assert_eq!(cb.config().sliding_window(), SlidingWindow::CountBased(2));
        for _ in 0..3 {
            cb.try_acquire().unwrap().record_success();
        }
        assert_eq!(cb.metrics().number_of_buffered_calls(), 2);
    });
}

/// A closed-state failure races a reconfiguration from a window of 4 (the failure alone opens
/// nothing) to a window of 1 (a failure opens it): the breaker opens only if the failure's
/// permit was taken after the reconfiguration, judged by the new window, minimum and threshold;
/// a record of before never opens the reconfigured breaker.
#[test]
fn only_a_record_of_after_a_reconfigure_is_judged_by_the_new_config() {
    model(2, || {
        let cb = Arc::new(closed(4));
        // The old configuration never opens, so the reconfiguration is the first transition
        // (a failure of after may open the breaker before this thread reads the epoch).
        let (epoch, _) = failure_racing_a_reconfigure(&cb, closed_config(1, 100.0));
        let metrics = cb.metrics();
        if epoch == Some(1) {
            assert_eq!(cb.state(), CircuitState::Open);
            assert_eq!(transitions_of(&cb), 2);
            assert_eq!(metrics.number_of_failed_calls(), 1);
        } else {
            assert_eq!(cb.state(), CircuitState::Closed, "{epoch:?}");
            assert_eq!(metrics.number_of_buffered_calls(), 0, "{epoch:?}");
        }
    });
}

/// A closed-state call that takes 2 ms races a reconfiguration from no slow-call rule (calls are
/// not timed at all) to a rule of 1 ms that opens the breaker on one slow call (window 1): a
/// permit taken after the reconfiguration is timed by the new rule (the reconfiguration
/// publishes its epoch after the readings it installs), so its slow call opens the breaker; a
/// permit of before records nothing.
#[test]
fn a_permit_of_after_a_reconfigure_is_timed_by_the_new_rule() {
    model(2, || {
        let clock = ManualClock::new();
        let off = CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::CountBased(1))
            .minimum_number_of_calls(1)
            .slow_call_duration_threshold(Duration::MAX)
            .build()
            .unwrap();
        let cb = Arc::new(CircuitBreaker::with_clock(
            "loom",
            off,
            Clock::from(clock.clone()),
        ));
        let caller = {
            let cb = Arc::clone(&cb);
            thread::spawn(move || match cb.try_acquire() {
                Ok(permit) => {
                    let epoch = epoch_of(&permit);
                    clock.advance(Duration::from_millis(2));
                    permit.record_success();
                    Some(epoch)
                }
                Err(_) => None,
            })
        };
        cb.reconfigure(
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(1))
                .minimum_number_of_calls(1)
                .slow_call_duration_threshold(Duration::from_millis(1))
                .slow_call_rate_threshold(100.0)
                .build()
                .unwrap(),
        );
        let epoch = caller.join().unwrap();
        if epoch == Some(1) {
            assert_eq!(cb.state(), CircuitState::Open, "a slow call of after");
            assert_eq!(cb.metrics().number_of_slow_calls(), 1);
        } else {
            assert_eq!(cb.state(), CircuitState::Closed, "{epoch:?}");
            assert_eq!(cb.metrics().number_of_buffered_calls(), 0, "{epoch:?}");
        }
    });
}
