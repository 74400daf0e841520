//! Unit tests of the rate limiter, on a manual clock: Resilience4j's `AtomicRateLimiter`
//! behaviours (cycles, reservation, refusal, drain), reconfiguration in place, cancellation,
//! waiting threads and tasks, events and configuration.

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex as StdMutex;
use std::task::{Context, Poll, Waker};

use super::*;
use crate::clock::ManualClock;
use crate::error::ConfigError;

const SEC: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `limit` permissions per second, waiting up to `timeout`.
fn config(limit: u32, timeout: Duration) -> RateLimiterConfig {
    RateLimiterConfig::builder()
        .limit_for_period(limit)
        .limit_refresh_period(SEC)
        .timeout_duration(timeout)
        .build()
        .expect("valid test configuration")
}

fn limiter(limit: u32, timeout: Duration) -> (RateLimiter, ManualClock) {
    let clock = ManualClock::new();
    let rl = RateLimiter::with_clock("test", config(limit, timeout), Clock::from(clock.clone()));
    (rl, clock)
}

fn retry_after(result: Result<(), Rejected>) -> Duration {
    match result {
        Err(Rejected::RequestNotPermitted { retry_after, name }) => {
            assert_eq!(name, "test");
            retry_after
        }
        other => panic!("expected RequestNotPermitted, got {other:?}"),
    }
}

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: Future + ?Sized>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

// ---- configuration ----------------------------------------------------------------------

#[test]
fn defaults_are_resilience4j_s_except_a_zero_timeout() {
    let config = RateLimiterConfig::builder().build().unwrap();
    assert_eq!(config.limit_for_period(), 50);
    assert_eq!(config.limit_refresh_period(), Duration::from_nanos(500));
    assert_eq!(config.timeout_duration(), Duration::ZERO);
    assert_eq!(config.base(), None);
    assert_eq!(config, RateLimiterConfig::default());
}

#[test]
fn invalid_configurations_name_their_field() {
    let field = |b: RateLimiterConfigBuilder| -> ConfigError { b.build().unwrap_err() };
    let b = RateLimiterConfig::builder;
    assert_eq!(field(b().limit_for_period(0)).field(), "limit_for_period");
    assert_eq!(
        field(b().limit_refresh_period(Duration::ZERO)).field(),
        "limit_refresh_period"
    );
    assert_eq!(
        field(b().limit_refresh_period(Duration::MAX)).field(),
        "limit_refresh_period"
    );
    // 11 permissions per 10 ns is above one per nanosecond: the timeline could overflow.
    let too_fast = field(
        b().limit_for_period(11)
            .limit_refresh_period(Duration::from_nanos(10)),
    );
    assert_eq!(too_fast.field(), "limit_for_period");
    assert!(too_fast.reason().contains("10^9 per second"), "{too_fast}");
    // Exactly one per nanosecond is accepted.
    assert!(b()
        .limit_for_period(10)
        .limit_refresh_period(Duration::from_nanos(10))
        .build()
        .is_ok());
}

#[test]
fn inherit_takes_only_unset_fields_from_the_base_and_validates() {
    let base = RateLimiterConfig::builder()
        .limit_for_period(5)
        .limit_refresh_period(ms(20))
        .timeout_duration(ms(7))
        .build()
        .unwrap();
    let derived = RateLimiterConfig::builder()
        .base("shared")
        .limit_for_period(9)
        .build()
        .unwrap();
    assert_eq!(derived.base(), Some("shared"));
    let merged = derived.inherit(&base).unwrap();
    assert_eq!(merged.limit_for_period(), 9);
    assert_eq!(merged.limit_refresh_period(), ms(20));
    assert_eq!(merged.timeout_duration(), ms(7));
    assert_eq!(merged.base(), None);

    // A merge can be invalid although both parts were valid: 9 per 5 ns.
    let fast_base = RateLimiterConfig::builder()
        .limit_for_period(1)
        .limit_refresh_period(Duration::from_nanos(5))
        .build()
        .unwrap();
    assert_eq!(
        derived.inherit(&fast_base).unwrap_err().field(),
        "limit_for_period"
    );
}

// ---- cycles -----------------------------------------------------------------------------

#[test]
fn grants_limit_for_period_per_cycle_then_refuses_with_the_time_to_the_next() {
    let (rl, clock) = limiter(3, Duration::ZERO);
    for _ in 0..3 {
        rl.try_acquire().unwrap();
    }
    clock.advance(ms(250));
    assert_eq!(retry_after(rl.try_acquire()), ms(750));
    assert_eq!(
        retry_after(rl.acquire_blocking()),
        ms(750),
        "a zero timeout never waits"
    );
    assert_eq!(rl.available_permissions(), 0, "a refusal consumes nothing");
    let m = rl.metrics();
    assert_eq!((m.permitted_calls(), m.rejected_calls()), (3, 2));
}

#[test]
fn permissions_refresh_at_the_cycle_boundary_and_do_not_accumulate() {
    let (rl, clock) = limiter(3, Duration::ZERO);
    rl.try_acquire().unwrap();
    clock.advance(ms(999));
    assert_eq!(rl.available_permissions(), 2, "same cycle until its end");
    clock.advance(ms(1));
    assert_eq!(rl.available_permissions(), 3, "refreshed at the boundary");
    clock.advance(SEC * 5);
    assert_eq!(rl.available_permissions(), 3, "idle cycles add nothing");
    for _ in 0..3 {
        rl.try_acquire().unwrap();
    }
    assert!(rl.try_acquire().is_err());
    assert_eq!(rl.metrics().permitted_calls(), 4);
}

#[test]
fn a_caller_reserves_a_later_cycle_within_the_timeout_and_proceeds_when_it_starts() {
    let (rl, clock) = limiter(1, SEC * 2);
    rl.try_acquire().unwrap();

    let mut first = pin!(rl.acquire());
    assert!(poll_once(first.as_mut()).is_pending(), "waits for cycle 1");
    assert_eq!(
        rl.available_permissions(),
        -1,
        "cycle 1's permission is reserved"
    );
    let mut second = pin!(rl.acquire());
    assert!(
        poll_once(second.as_mut()).is_pending(),
        "waits for cycle 2 (2 s)"
    );
    assert_eq!(rl.available_permissions(), -2);
    assert_eq!(rl.metrics().number_of_waiting_threads(), 2);

    // Cycle 3 is 3 s away, beyond the timeout: refused at once, with the time until the
    // first permission nobody reserved, and nothing consumed.
    assert_eq!(retry_after(pin!(rl.acquire()).as_mut().poll_now()), SEC * 3);
    assert_eq!(rl.available_permissions(), -2);

    clock.advance(SEC);
    assert_eq!(poll_once(first.as_mut()), Poll::Ready(Ok(())));
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(
        rl.available_permissions(),
        -1,
        "cycle 2's permission still reserved"
    );
    clock.advance(SEC);
    assert_eq!(poll_once(second.as_mut()), Poll::Ready(Ok(())));
    assert_eq!(rl.available_permissions(), 0);
    let m = rl.metrics();
    assert_eq!(m.number_of_waiting_threads(), 0);
    assert_eq!((m.permitted_calls(), m.rejected_calls()), (3, 1));
}

trait PollNow: Future {
    /// The output of a future that must not wait.
    fn poll_now(self: std::pin::Pin<&mut Self>) -> Self::Output {
        match poll_once(self) {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("the future waited"),
        }
    }
}

impl<F: Future> PollNow for F {}

#[test]
fn try_acquire_never_waits_whatever_the_timeout() {
    let (rl, _clock) = limiter(1, SEC * 10);
    rl.try_acquire().unwrap();
    assert_eq!(retry_after(rl.try_acquire()), SEC);
    assert_eq!(rl.available_permissions(), 0);
}

#[test]
fn try_acquire_or_wait_grants_says_wait_without_reserving_or_refuses() {
    let (rl, clock) = limiter(1, SEC);
    assert!(matches!(rl.try_acquire_or_wait(), Admission::Granted));
    assert!(matches!(rl.try_acquire_or_wait(), Admission::Wait));
    assert_eq!(rl.available_permissions(), 0, "`Wait` reserves nothing");
    let mut waiter = pin!(rl.acquire());
    assert!(poll_once(waiter.as_mut()).is_pending());
    // Cycle 2 is 2 s away: beyond the 1 s timeout.
    match rl.try_acquire_or_wait() {
        Admission::Refused(Rejected::RequestNotPermitted { retry_after, .. }) => {
            assert_eq!(retry_after, SEC * 2)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    clock.advance(SEC);
    assert_eq!(poll_once(waiter.as_mut()), Poll::Ready(Ok(())));

    let (zero, _clock) = limiter(1, Duration::ZERO);
    zero.try_acquire().unwrap();
    assert!(matches!(zero.try_acquire_or_wait(), Admission::Refused(_)));
    assert_eq!(zero.metrics().rejected_calls(), 1);
}

#[test]
fn drain_uses_up_the_current_cycle_only() {
    let (rl, clock) = limiter(5, Duration::ZERO);
    rl.try_acquire().unwrap();
    rl.drain_permissions();
    assert_eq!(rl.available_permissions(), 0);
    assert!(rl.try_acquire().is_err());
    clock.advance(SEC);
    assert_eq!(rl.available_permissions(), 5);
    assert_eq!(
        rl.metrics().permitted_calls(),
        1,
        "drained permissions were not permitted"
    );
}

#[test]
fn drain_keeps_reservations() {
    let (rl, clock) = limiter(1, SEC * 5);
    rl.try_acquire().unwrap();
    let mut waiter = pin!(rl.acquire());
    assert!(poll_once(waiter.as_mut()).is_pending());
    rl.drain_permissions();
    assert_eq!(rl.available_permissions(), -1);
    clock.advance(SEC);
    assert_eq!(poll_once(waiter.as_mut()), Poll::Ready(Ok(())));
}

// ---- cancellation -----------------------------------------------------------------------

#[test]
fn a_dropped_waiter_gives_its_permission_back_to_its_cycle() {
    let (rl, clock) = limiter(1, SEC * 5);
    rl.try_acquire().unwrap();
    {
        let mut gives_up = pin!(rl.acquire());
        assert!(poll_once(gives_up.as_mut()).is_pending());
        assert_eq!(rl.available_permissions(), -1);
    }
    assert_eq!(rl.available_permissions(), 0, "given back");
    assert_eq!(rl.metrics().number_of_waiting_threads(), 0);
    clock.advance(SEC);
    // The later caller gets cycle 1's permission, and only one.
    rl.try_acquire().unwrap();
    assert!(rl.try_acquire().is_err());
    assert_eq!(rl.metrics().permitted_calls(), 2);
}

#[test]
fn a_waiter_dropped_after_its_cycle_ended_gives_nothing_into_the_past() {
    let (rl, clock) = limiter(1, SEC * 5);
    rl.try_acquire().unwrap();
    let mut late = Box::pin(rl.acquire());
    assert!(poll_once(late.as_mut()).is_pending());
    clock.advance(SEC * 2);
    drop(late);
    assert_eq!(
        rl.available_permissions(),
        1,
        "cycle 2 keeps its one permission"
    );
    rl.try_acquire().unwrap();
    assert!(rl.try_acquire().is_err());
}

#[test]
fn a_waiter_dropped_across_a_reconfiguration_gives_nothing_back() {
    let (rl, _clock) = limiter(1, SEC * 5);
    rl.try_acquire().unwrap();
    let mut waiter = Box::pin(rl.acquire());
    assert!(poll_once(waiter.as_mut()).is_pending());
    rl.reconfigure(config(2, SEC * 5));
    assert_eq!(rl.available_permissions(), 2);
    drop(waiter);
    assert_eq!(
        rl.available_permissions(),
        2,
        "no permission above the new limit"
    );
}

// ---- waiting ----------------------------------------------------------------------------

#[test]
fn a_blocked_thread_is_woken_by_the_manual_clock() {
    let (rl, clock) = limiter(1, SEC * 2);
    rl.try_acquire().unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| rl.acquire_blocking());
        while rl.metrics().number_of_waiting_threads() == 0 {
            std::thread::yield_now();
        }
        assert_eq!(rl.available_permissions(), -1);
        assert!(!waiter.is_finished());
        clock.advance(SEC);
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    assert_eq!(rl.metrics().permitted_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_async_waiter_sleeps_on_paused_tokio_time() {
    // A period of 10 ms: below 100 coarse steps, so the precise (paused) clock drives it.
    let period = ms(10);
    let rl = RateLimiter::new(
        "paused",
        RateLimiterConfig::builder()
            .limit_for_period(1)
            .limit_refresh_period(period)
            .timeout_duration(period * 3)
            .build()
            .unwrap(),
    );
    rl.acquire().await.unwrap();
    let start = tokio::time::Instant::now();
    rl.acquire().await.unwrap();
    rl.acquire().await.unwrap();
    let waited = start.elapsed();
    // Two cycles of paused time (tokio's timer may round up to the next millisecond).
    assert!(
        waited >= period * 2 && waited <= period * 2 + ms(2),
        "{waited:?}"
    );
    assert_eq!(rl.metrics().permitted_calls(), 3);
}

// ---- reconfiguration --------------------------------------------------------------------

#[test]
fn reconfigure_changes_limit_and_period_in_place_and_keeps_everything_else() {
    let (rl, clock) = limiter(2, Duration::ZERO);
    let id = rl.id();
    let events = Arc::new(StdMutex::new(0));
    let sink = Arc::clone(&events);
    rl.subscribe(move |_| *sink.lock().unwrap() += 1);
    rl.try_acquire().unwrap();
    rl.try_acquire().unwrap();
    assert!(rl.try_acquire().is_err());

    // Up: a fresh cycle with the new limit.
    rl.reconfigure(config(4, Duration::ZERO));
    assert_eq!(rl.available_permissions(), 4);
    for _ in 0..4 {
        rl.try_acquire().unwrap();
    }
    assert!(rl.try_acquire().is_err());

    // Down, and a period of 10 s counted from the reconfiguration.
    clock.advance(ms(300));
    let slow = RateLimiterConfig::builder()
        .limit_for_period(1)
        .limit_refresh_period(SEC * 10)
        .build()
        .unwrap();
    rl.reconfigure(slow.clone());
    assert_eq!(rl.config(), slow);
    rl.try_acquire().unwrap();
    assert_eq!(retry_after(rl.try_acquire()), SEC * 10);
    clock.advance(SEC * 9);
    assert!(rl.try_acquire().is_err());
    clock.advance(SEC);
    rl.try_acquire().unwrap();

    assert_eq!((rl.name().as_str(), rl.id()), ("test", id));
    let m = rl.metrics();
    assert_eq!((m.permitted_calls(), m.rejected_calls()), (8, 4));
    assert_eq!(*events.lock().unwrap(), 12, "the subscriber saw every call");
}

#[test]
fn reconfigure_to_the_same_configuration_keeps_the_cycle() {
    let (rl, _clock) = limiter(2, Duration::ZERO);
    rl.try_acquire().unwrap();
    rl.reconfigure(config(2, Duration::ZERO));
    assert_eq!(rl.available_permissions(), 1);
}

// ---- events -----------------------------------------------------------------------------

#[test]
fn events_report_grants_with_their_wait_and_refusals_with_retry_after() {
    let (rl, clock) = limiter(1, SEC);
    let seen = Arc::new(StdMutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let id = rl.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
    rl.try_acquire().unwrap();
    let mut waiter = pin!(rl.acquire());
    assert!(poll_once(waiter.as_mut()).is_pending());
    clock.advance(ms(1_500));
    assert_eq!(poll_once(waiter.as_mut()), Poll::Ready(Ok(())));
    assert!(rl.try_acquire().is_err());
    assert!(rl.unsubscribe(id));
    assert!(!rl.unsubscribe(id));
    rl.try_acquire().unwrap_err();

    let name = Name::from("test");
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        [
            RateLimiterEvent::SuccessfulAcquire {
                name: name.clone(),
                waited: Duration::ZERO
            },
            RateLimiterEvent::SuccessfulAcquire {
                name: name.clone(),
                waited: ms(1_500)
            },
            RateLimiterEvent::FailedAcquire {
                name: name.clone(),
                retry_after: ms(500)
            },
        ]
    );
    assert_eq!(seen[2].name(), "test");
    assert_eq!(
        seen[2].to_string(),
        "rate limiter `test` refused a permission (one is free in 500ms)"
    );
}

#[test]
fn a_panicking_subscriber_does_not_skip_the_others_and_its_panic_is_resumed() {
    let (rl, _clock) = limiter(1, Duration::ZERO);
    let seen = Arc::new(StdMutex::new(0));
    rl.subscribe(|_| panic!("subscriber bug"));
    let sink = Arc::clone(&seen);
    rl.subscribe(move |_| *sink.lock().unwrap() += 1);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rl.try_acquire()));
    assert!(
        panicked.is_err(),
        "the subscriber's panic reaches the caller"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        1,
        "the second subscriber still got the event"
    );
    // The permission was taken before the subscribers ran: the limiter is consistent.
    assert_eq!(rl.available_permissions(), 0);
    assert_eq!(rl.metrics().permitted_calls(), 1);
}

#[test]
fn a_refusal_displays_its_limiter_and_wait() {
    let (rl, _clock) = limiter(1, Duration::ZERO);
    rl.try_acquire().unwrap();
    let rejected = rl.try_acquire().unwrap_err();
    assert_eq!(rejected.aspect(), crate::Aspect::RateLimiter);
    assert_eq!(rejected.name(), "test");
    assert_eq!(
        rejected.to_string(),
        "rate limiter `test` refused the call (a permission is free in 1000 ms)"
    );
}

// ---- concurrency ------------------------------------------------------------------------

#[test]
fn concurrent_callers_never_get_more_than_the_limit_of_a_cycle() {
    let (rl, clock) = limiter(100, Duration::ZERO);
    for _cycle in 0..3 {
        let granted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..60 {
                        if rl.try_acquire().is_ok() {
                            granted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(granted.load(Ordering::Relaxed), 100);
        clock.advance(SEC);
    }
    let m = rl.metrics();
    assert_eq!((m.permitted_calls(), m.rejected_calls()), (300, 420));
}

// ---- a cycle boundary crossed by another caller -----------------------------------------

/// A limiter of `limit` per second waiting up to `timeout`, one permission of cycle 0 taken,
/// whose next take on this thread is overtaken right after its clock reading: a
/// caller (on another core, as it were) advances the clock into cycle 1 and takes a
/// permission there, moving `next` into cycle 1.
fn overtaken_after_its_reading(limit: u32, timeout: Duration) -> std::sync::Arc<RateLimiter> {
    let (rl, clock) = limiter(limit, timeout);
    let rl = std::sync::Arc::new(rl);
    rl.try_acquire().expect("cycle 0 has a permission");
    let other = std::sync::Arc::clone(&rl);
    super::timeline::hooks::set_after_clock_read(move || {
        clock.advance(SEC);
        other.try_acquire().expect("cycle 1 has a permission");
    });
    rl
}

/// Judged by its reading in cycle 0, the overtaken caller would see cycle 0 used up and
/// cycle 1 a second away, and, with no wait allowed, be refused while cycle 1 still had a
/// permission. It reads the clock again and takes that permission.
#[test]
fn a_caller_overtaken_into_the_next_cycle_after_its_reading_is_not_refused() {
    let rl = overtaken_after_its_reading(2, Duration::ZERO);
    assert_eq!(rl.try_acquire(), Ok(()), "cycle 1 had a permission left");
    assert_eq!(rl.available_permissions(), 0);
    assert_eq!(retry_after(rl.try_acquire()), SEC);
}

/// The same overtaking with a wait allowed: judged by its old reading the caller would find
/// the next free permission two cycles away, beyond its timeout of one, and be refused; read
/// again, it is one cycle away, and the caller may wait for it.
#[test]
fn a_caller_overtaken_after_its_reading_may_still_wait_within_its_timeout() {
    let rl = overtaken_after_its_reading(1, SEC);
    assert!(
        matches!(rl.try_acquire_or_wait(), Admission::Wait),
        "cycle 2 starts within the timeout"
    );
}
