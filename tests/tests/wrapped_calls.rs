//! Calls through plans with wrappers: a retry re-runs the rest of the plan, a time limiter
//! bounds it, and the precedence decides which guards are inside them.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::{
    Aspect, BulkheadConfig, CircuitBreakerConfig, CircuitState, Guard, ReentrancyPolicy, Registry,
    Rejected, RetryConfig, SlidingWindow, TimeLimiterConfig,
};
use resilience_tests::CallError;

const FIVE: [Guard<'static>; 5] = [
    Guard::bulkhead("inv"),
    Guard::rate_limiter("inv"),
    Guard::retry("inv"),
    Guard::circuit_breaker("inv"),
    Guard::time_limiter("inv"),
];

/// A retry of `attempts` attempts, `wait` apart.
fn retry_waiting(attempts: u32, wait: Duration) -> RetryConfig {
    RetryConfig::builder()
        .max_attempts(attempts)
        .wait_duration(wait)
        .build()
        .unwrap()
}

/// A call that fails at its first attempt and succeeds after, counting its attempts.
fn fails_first(attempts: &mut u32) -> Result<(), CallError> {
    *attempts += 1;
    if *attempts == 1 {
        Err(CallError::Downstream("503"))
    } else {
        Ok(())
    }
}

fn registry_with_retry(attempts: u32) -> Registry {
    registry_with_waits(attempts, Duration::ZERO)
}

/// A registry with the retry `inv` of `attempts` attempts, `wait` apart.
fn registry_with_waits(attempts: u32, wait: Duration) -> Registry {
    let registry = Registry::new();
    registry
        .configure_retry("inv", retry_waiting(attempts, wait))
        .unwrap();
    registry
}

#[test]
fn a_failing_call_is_made_max_attempts_times_and_ends_with_its_last_error() {
    let registry = registry_with_retry(3);
    let plan = registry.plan(&FIVE).unwrap();
    let mut attempts = 0;
    let result: Result<(), CallError> = plan.call(|| {
        attempts += 1;
        Err(CallError::Downstream("503"))
    });
    assert_eq!(result, Err(CallError::Downstream("503")));
    assert_eq!(attempts, 3);
    let metrics = registry.retry("inv").metrics();
    assert_eq!(metrics.number_of_failed_calls_with_retry_attempt(), 1);
    assert_eq!(
        metrics.number_of_successful_calls_without_retry_attempt(),
        0
    );
}

#[test]
fn each_attempt_enters_the_breaker_but_the_bulkhead_admits_the_call_once() {
    let registry = registry_with_retry(3);
    registry
        .configure_bulkhead(
            "inv",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&FIVE).unwrap();
    let bulkhead = registry.bulkhead("inv");
    let mut attempts = 0;
    let result: Result<u32, CallError> = plan.call(|| {
        attempts += 1;
        // The bulkhead of 1 is held by this call across its attempts, once.
        assert_eq!(bulkhead.available_concurrent_calls(), 0);
        if attempts < 3 {
            Err(CallError::Downstream("503"))
        } else {
            Ok(attempts)
        }
    });
    assert_eq!(result, Ok(3));
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    assert_eq!(bulkhead.metrics().permitted_calls(), 1);
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(breaker.number_of_failed_calls(), 2);
    assert_eq!(breaker.number_of_successful_calls(), 1);
    let retried = registry.retry("inv").metrics();
    assert_eq!(retried.number_of_successful_calls_with_retry_attempt(), 1);
}

fn open_breaker(registry: &Registry) {
    registry
        .configure_circuit_breaker(
            "inv",
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(2))
                .minimum_number_of_calls(2)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .circuit_breaker("inv")
        .transition_to_open_state()
        .unwrap();
}

#[test]
fn an_open_breaker_inside_the_retry_ends_the_call_without_retrying() {
    let registry = registry_with_retry(3);
    open_breaker(&registry);
    let plan = registry.plan(&FIVE).unwrap();
    let mut attempts = 0;
    let result: Result<(), CallError> = plan.call(|| {
        attempts += 1;
        Ok(())
    });
    assert!(matches!(
        result,
        Err(CallError::Rejected(Rejected::CallNotPermitted { .. }))
    ));
    assert_eq!(attempts, 0);
    let breaker = registry.circuit_breaker("inv");
    assert_eq!(breaker.state(), CircuitState::Open);
    assert_eq!(breaker.metrics().number_of_not_permitted_calls(), 1);
    assert_eq!(
        registry
            .retry("inv")
            .metrics()
            .number_of_failed_calls_without_retry_attempt(),
        1
    );
}

#[test]
fn retry_on_rejection_asks_the_open_breaker_again() {
    let registry = Registry::new();
    registry
        .configure_retry(
            "inv",
            RetryConfig::builder()
                .max_attempts(3)
                .wait_duration(Duration::ZERO)
                .retry_on_rejection(true)
                .build()
                .unwrap(),
        )
        .unwrap();
    open_breaker(&registry);
    let plan = registry.plan(&FIVE).unwrap();
    let result: Result<(), CallError> = plan.call(|| Ok(()));
    assert!(result.is_err());
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(breaker.number_of_not_permitted_calls(), 3);
    assert_eq!(
        registry
            .retry("inv")
            .metrics()
            .number_of_failed_calls_with_retry_attempt(),
        1
    );
}

#[test]
fn a_retry_moved_outside_the_bulkhead_enters_it_per_attempt() {
    let registry = Registry::new();
    registry
        .configure_retry(
            "inv",
            RetryConfig::builder()
                .max_attempts(4)
                .wait_duration(Duration::ZERO)
                .retry_on_rejection(true)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_bulkhead(
            "inv",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(Duration::ZERO)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.set_precedence(Aspect::Retry, 50).unwrap();
    let plan = registry.plan(&FIVE).unwrap();
    let order: Vec<Aspect> = plan.guards().map(|(aspect, _)| aspect).collect();
    assert_eq!(order[0], Aspect::Retry);
    let bulkhead = registry.bulkhead("inv");

    let held = bulkhead.try_acquire().unwrap();
    let result: Result<(), CallError> = plan.call(|| Ok(()));
    assert!(matches!(
        result,
        Err(CallError::Rejected(Rejected::BulkheadFull { .. }))
    ));
    // Each of the four attempts asked the bulkhead.
    assert_eq!(bulkhead.metrics().rejected_calls(), 4);
    drop(held);

    let mut attempts = 0;
    let result: Result<(), CallError> = plan.call(|| fails_first(&mut attempts));
    assert_eq!(result, Ok(()));
    assert_eq!(bulkhead.metrics().permitted_calls(), 1 + 2);
}

#[test]
fn a_retried_attempt_is_not_a_re_entry() {
    let registry = registry_with_retry(2);
    registry.set_reentrancy_policy(ReentrancyPolicy::Reject);
    let plan = registry.plan(&FIVE).unwrap();
    let mut attempts = 0;
    let result: Result<(), CallError> = plan.call(|| fails_first(&mut attempts));
    assert_eq!(result, Ok(()));
    assert_eq!(attempts, 2);
}

#[test]
fn an_error_the_classification_ignores_is_not_retried() {
    let registry = registry_with_retry(3);
    let plan = registry
        .plan(&[Guard::retry("inv"), Guard::circuit_breaker("inv")])
        .unwrap();
    let mut attempts = 0;
    let status = plan.run(
        || {
            attempts += 1;
            404
        },
        |status| {
            if *status >= 500 {
                resilience_runtime::CallOutcome::Failure
            } else if *status >= 400 {
                resilience_runtime::CallOutcome::Ignored
            } else {
                resilience_runtime::CallOutcome::Success
            }
        },
    );
    assert_eq!(status, Ok(404));
    assert_eq!(attempts, 1);
}

#[test]
fn a_sync_thread_sleeps_between_attempts_on_the_registrys_clock() {
    let clock = resilience_runtime::ManualClock::new();
    let registry = Arc::new(Registry::with_clock(clock.clone()));
    registry
        .configure_retry(
            "inv",
            RetryConfig::builder()
                .max_attempts(2)
                .wait_duration(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let caller = {
        let (registry, attempts) = (Arc::clone(&registry), Arc::clone(&attempts));
        std::thread::spawn(move || {
            let plan = registry.plan(&[Guard::retry("inv")]).unwrap();
            let result: Result<(), CallError> = plan.call(|| {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err(CallError::Downstream("503"))
            });
            result
        })
    };
    while attempts.load(Ordering::SeqCst) < 1 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "it waits for the clock");
    clock.advance(Duration::from_secs(60));
    assert!(caller.join().unwrap().is_err());
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn an_async_retry_waits_on_tokio_time_with_exponential_backoff() {
    let registry = Registry::new();
    registry
        .configure_retry(
            "inv",
            RetryConfig::builder()
                .max_attempts(4)
                .wait_duration(Duration::from_secs(1))
                .exponential_backoff(2.0, Duration::from_secs(3))
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&FIVE).unwrap();
    let start = tokio::time::Instant::now();
    let attempts = AtomicU32::new(0);
    let result: Result<(), CallError> = plan
        .call_async(|| async {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err(CallError::Downstream("503"))
        })
        .await;
    assert!(result.is_err());
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    // 1 s, then 2 s, then 3 s (4 s capped at the backoff's max_wait).
    assert_eq!(start.elapsed(), Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_call_while_it_waits_to_retry_ends_it_and_releases_its_guards() {
    let registry = registry_with_waits(3, Duration::from_secs(10));
    let plan = registry.plan(&FIVE).unwrap();
    let call = plan.call_async(|| async { Err::<(), _>(CallError::Downstream("503")) });
    let gave_up = tokio::time::timeout(Duration::from_secs(5), call).await;
    assert!(gave_up.is_err());
    let bulkhead = registry.bulkhead("inv");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls()
    );
    assert_eq!(
        registry.retry("inv").metrics(),
        Default::default(),
        "an abandoned call is not counted"
    );
}

fn time_limit(registry: &Registry, timeout: Duration, cancel: bool) {
    registry
        .configure_time_limiter(
            "inv",
            TimeLimiterConfig::builder()
                .timeout_duration(timeout)
                .cancel_running_future(cancel)
                .build()
                .unwrap(),
        )
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_cut_off_recorded_as_a_failure_and_retried() {
    let registry = registry_with_retry(2);
    time_limit(&registry, Duration::from_millis(100), true);
    let plan = registry.plan(&FIVE).unwrap();
    let attempts = AtomicU32::new(0);
    let result: Result<u32, CallError> = plan
        .call_async(|| async {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            Ok(7)
        })
        .await;
    assert_eq!(result, Ok(7));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(
        breaker.number_of_failed_calls(),
        1,
        "a time-out is a failure for the breaker outside the time limiter"
    );
    assert_eq!(breaker.number_of_successful_calls(), 1);
    let limited = registry.time_limiter("inv").metrics();
    assert_eq!(limited.number_of_timed_out_calls(), 1);
    assert_eq!(limited.number_of_successful_calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_time_out_ends_the_call_with_timed_out_and_releases_the_guards_inside() {
    let registry = Registry::new();
    time_limit(&registry, Duration::from_millis(100), true);
    // The bulkhead moved inside the time limiter.
    registry.set_precedence(Aspect::Bulkhead, 600).unwrap();
    let plan = registry
        .plan(&[Guard::time_limiter("inv"), Guard::bulkhead("inv")])
        .unwrap();
    let bulkhead = registry.bulkhead("inv");
    let result: Result<(), CallError> = plan
        .call_async(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        })
        .await;
    match result {
        Err(CallError::Rejected(Rejected::TimedOut { name, timeout, .. })) => {
            assert_eq!(name, "inv");
            assert_eq!(timeout, Duration::from_millis(100));
        }
        other => panic!("expected a time-out, got {other:?}"),
    }
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls()
    );
}

#[tokio::test(start_paused = true)]
async fn without_cancelling_a_slow_call_finishes_with_its_result_and_is_reported() {
    let registry = Registry::new();
    time_limit(&registry, Duration::from_millis(100), false);
    let plan = registry.plan(&[Guard::time_limiter("inv")]).unwrap();
    let result: Result<u32, CallError> = plan
        .call_async(|| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(3)
        })
        .await;
    assert_eq!(result, Ok(3));
    let limited = registry.time_limiter("inv").metrics();
    assert_eq!(limited.number_of_timed_out_calls(), 1);
    assert_eq!(limited.number_of_successful_calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_time_limiter_outside_the_retry_bounds_all_the_attempts_together() {
    let registry = Registry::new();
    registry
        .configure_retry(
            "inv",
            RetryConfig::builder()
                .max_attempts(10)
                .wait_duration(Duration::from_millis(40))
                .build()
                .unwrap(),
        )
        .unwrap();
    time_limit(&registry, Duration::from_millis(100), true);
    registry.set_precedence(Aspect::TimeLimiter, 250).unwrap();
    let plan = registry
        .plan(&[Guard::retry("inv"), Guard::time_limiter("inv")])
        .unwrap();
    let attempts = AtomicU32::new(0);
    let result: Result<(), CallError> = plan
        .call_async(|| async {
            attempts.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Err(CallError::Downstream("503"))
        })
        .await;
    assert!(matches!(
        result,
        Err(CallError::Rejected(Rejected::TimedOut { .. }))
    ));
    // Attempts at 0, 40 and 80 ms; the time-out at 100 ms ends the wait for the fourth.
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_time_limiter_outside_the_retry_counts_from_the_first_attempts_suspension() {
    let registry = registry_with_waits(3, Duration::from_millis(10));
    time_limit(&registry, Duration::from_millis(100), true);
    registry.set_precedence(Aspect::TimeLimiter, 150).unwrap();
    let plan = registry.plan(&FIVE).unwrap();
    let attempts = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let result: Result<(), CallError> = plan
        .call_async(|| async {
            attempts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(60)).await;
            Err(CallError::Downstream("503"))
        })
        .await;
    assert!(
        matches!(result, Err(CallError::Rejected(Rejected::TimedOut { .. }))),
        "{result:?}"
    );
    // The first attempt 0–60 ms, the wait to 70, the second cut off at 100: the timer runs
    // from the first attempt's suspension, not from the retry's first wait.
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    let limited = registry.time_limiter("inv").metrics();
    assert_eq!(limited.number_of_timed_out_calls(), 1);
    let bulkhead = registry.bulkhead("inv");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls()
    );
}

#[tokio::test(start_paused = true)]
async fn without_cancelling_a_slow_call_in_a_stack_finishes_and_counts_once() {
    let registry = registry_with_retry(3);
    time_limit(&registry, Duration::from_millis(100), false);
    let plan = registry.plan(&FIVE).unwrap();
    let attempts = AtomicU32::new(0);
    let result: Result<u32, CallError> = plan
        .call_async(|| async {
            attempts.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(3)
        })
        .await;
    assert_eq!(result, Ok(3));
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    let limited = registry.time_limiter("inv").metrics();
    assert_eq!(limited.number_of_timed_out_calls(), 1);
    assert_eq!(
        limited.number_of_successful_calls(),
        0,
        "reported as timed out, not again as a success"
    );
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(breaker.number_of_successful_calls(), 1);
    assert_eq!(breaker.number_of_failed_calls(), 0);
    let retried = registry.retry("inv").metrics();
    assert_eq!(
        retried.number_of_successful_calls_without_retry_attempt(),
        1
    );
}

#[test]
fn a_sync_call_passes_through_its_time_limiter() {
    let registry = Registry::new();
    time_limit(&registry, Duration::from_nanos(1), true);
    let plan = registry.plan(&[Guard::time_limiter("inv")]).unwrap();
    let result: Result<u32, CallError> = plan.call(|| {
        std::thread::sleep(Duration::from_millis(2));
        Ok(1)
    });
    assert_eq!(result, Ok(1));
    assert_eq!(
        registry
            .time_limiter("inv")
            .metrics()
            .number_of_successful_calls(),
        1
    );
}

#[test]
fn a_future_given_as_it_is_makes_one_attempt() {
    let registry = registry_with_retry(3);
    let plan = registry.plan(&FIVE).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result: Result<(), CallError> =
        runtime.block_on(plan.call_future(async { Err(CallError::Downstream("503")) }));
    assert_eq!(result, Err(CallError::Downstream("503")));
    let metrics = registry.retry("inv").metrics();
    assert_eq!(metrics.number_of_failed_calls_without_retry_attempt(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_async_call_refused_inside_the_retry_is_asked_again_only_with_retry_on_rejection() {
    for (retry_on_rejection, asked) in [(false, 1), (true, 3)] {
        let registry = Registry::new();
        registry
            .configure_retry(
                "inv",
                RetryConfig::builder()
                    .max_attempts(3)
                    .wait_duration(Duration::from_millis(10))
                    .retry_on_rejection(retry_on_rejection)
                    .build()
                    .unwrap(),
            )
            .unwrap();
        open_breaker(&registry);
        let plan = registry.plan(&FIVE).unwrap();
        let result: Result<(), CallError> = plan.call_async(|| async { Ok(()) }).await;
        assert!(matches!(
            result,
            Err(CallError::Rejected(Rejected::CallNotPermitted { .. }))
        ));
        let breaker = registry.circuit_breaker("inv").metrics();
        assert_eq!(breaker.number_of_not_permitted_calls(), asked);
        let bulkhead = registry.bulkhead("inv");
        assert_eq!(bulkhead.metrics().permitted_calls(), 1, "admitted once");
        assert_eq!(
            bulkhead.available_concurrent_calls(),
            bulkhead.max_allowed_concurrent_calls()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_async_call_that_waits_for_a_gate_inside_the_retry_resumes_there() {
    let registry = registry_with_retry(2);
    registry
        .configure_bulkhead(
            "inv",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(Duration::from_secs(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    // The bulkhead inside the retry, behind the breaker.
    registry.set_precedence(Aspect::Bulkhead, 450).unwrap();
    let plan = Arc::new(registry.plan(&FIVE).unwrap());
    let bulkhead = registry.bulkhead("inv");
    let held = bulkhead.try_acquire().unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let call = {
        let (plan, attempts) = (Arc::clone(&plan), Arc::clone(&attempts));
        tokio::spawn(async move {
            plan.call_async(|| {
                let attempts = Arc::clone(&attempts);
                async move {
                    if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                        Err(CallError::Downstream("503"))
                    } else {
                        Ok(())
                    }
                }
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        0,
        "it waits for the bulkhead"
    );
    drop(held);
    assert_eq!(call.await.unwrap(), Ok(()));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(bulkhead.metrics().permitted_calls(), 1 + 2);
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(breaker.number_of_failed_calls(), 1);
    assert_eq!(breaker.number_of_successful_calls(), 1);
}

// A retry or a time limiter alone in its plan runs without the nested model (it has no gate
// to enter or release). Each test below runs the same calls through the wrapper alone and
// through a stack (the five aspects for the retry; the bulkhead around the time limiter, since
// a retry would retry its time-out), on fresh registries, and expects the same of both.

/// The retry alone, and the five aspects around it.
const RETRY_PLANS: [&[Guard<'static>]; 2] = [&[Guard::retry("inv")], &FIVE];

#[tokio::test(start_paused = true)]
async fn an_async_retry_alone_waits_retries_and_counts_as_in_a_stack() {
    for guards in RETRY_PLANS {
        let registry = registry_with_waits(3, Duration::from_secs(1));
        let plan = registry.plan(guards).unwrap();
        let start = tokio::time::Instant::now();
        let attempts = AtomicU32::new(0);
        let result: Result<u32, CallError> = plan
            .call_async(|| async {
                // Not ready at its first poll: each attempt takes 100 ms.
                tokio::time::sleep(Duration::from_millis(100)).await;
                match attempts.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => Err(CallError::Downstream("503")),
                    n => Ok(n),
                }
            })
            .await;
        assert_eq!(result, Ok(2), "{} guards", guards.len());
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(2300),
            "three attempts of 100 ms, two waits of 1 s"
        );
        let metrics = registry.retry("inv").metrics();
        assert_eq!(metrics.number_of_successful_calls_with_retry_attempt(), 1);
        assert_eq!(
            metrics.number_of_successful_calls_without_retry_attempt()
                + metrics.number_of_failed_calls_with_retry_attempt()
                + metrics.number_of_failed_calls_without_retry_attempt(),
            0
        );

        // Every attempt failing: the last error, counted as failed with retries.
        let result: Result<u32, CallError> = plan
            .call_async(|| async { Err(CallError::Downstream("500")) })
            .await;
        assert_eq!(result, Err(CallError::Downstream("500")));
        let metrics = registry.retry("inv").metrics();
        assert_eq!(metrics.number_of_failed_calls_with_retry_attempt(), 1);

        // At once: counted as a success without retries.
        let result: Result<u32, CallError> = plan.call_async(|| async { Ok(9) }).await;
        assert_eq!(result, Ok(9));
        let metrics = registry.retry("inv").metrics();
        assert_eq!(
            metrics.number_of_successful_calls_without_retry_attempt(),
            1
        );
    }
}

/// Gives up on a call through `guards` of a retry of 3 attempts `wait` apart, each attempt
/// failing after `takes`, once `after` has passed; returns the attempts made, and checks the
/// retry counted nothing.
async fn given_up(guards: &[Guard<'_>], wait: Duration, takes: Duration, after: Duration) -> u32 {
    let registry = registry_with_waits(3, wait);
    let plan = registry.plan(guards).unwrap();
    let attempts = AtomicU32::new(0);
    let call = plan.call_async(|| async {
        attempts.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(takes).await;
        Err::<(), _>(CallError::Downstream("503"))
    });
    assert!(tokio::time::timeout(after, call).await.is_err());
    assert_eq!(
        registry.retry("inv").metrics(),
        Default::default(),
        "an abandoned call is not counted ({} guards)",
        guards.len()
    );
    attempts.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn an_async_retry_alone_dropped_while_it_waits_or_while_an_attempt_runs_counts_nothing() {
    for guards in RETRY_PLANS {
        // In the wait after the first attempt.
        let attempts = given_up(
            guards,
            Duration::from_secs(10),
            Duration::ZERO,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(attempts, 1, "{} guards", guards.len());
        // In the second attempt: the first failed at 50 ms, the second started at 60.
        let attempts = given_up(
            guards,
            Duration::from_millis(10),
            Duration::from_millis(50),
            Duration::from_millis(80),
        )
        .await;
        assert_eq!(attempts, 2, "{} guards", guards.len());
    }
}

#[tokio::test(start_paused = true)]
async fn an_async_retry_alone_does_not_retry_what_the_classification_ignores_or_a_future_made_once()
{
    for guards in RETRY_PLANS {
        let registry = registry_with_waits(3, Duration::from_secs(1));
        let plan = registry.plan(guards).unwrap();
        let attempts = AtomicU32::new(0);
        let status = plan
            .run_async(
                || async {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    404
                },
                |_| resilience_runtime::CallOutcome::Ignored,
            )
            .await;
        assert_eq!(status, Ok(404));
        assert_eq!(
            attempts.load(Ordering::SeqCst),
            1,
            "{} guards",
            guards.len()
        );

        let once: Result<(), CallError> = plan
            .call_future(async { Err(CallError::Downstream("503")) })
            .await;
        assert_eq!(once, Err(CallError::Downstream("503")));
        let metrics = registry.retry("inv").metrics();
        assert_eq!(metrics.number_of_failed_calls_without_retry_attempt(), 2);
    }
}

#[test]
fn a_sync_retry_alone_retries_and_counts_as_in_a_stack() {
    for guards in RETRY_PLANS {
        let registry = registry_with_retry(3);
        let plan = registry.plan(guards).unwrap();
        let mut attempts = 0;
        let result = plan.call(|| fails_first(&mut attempts));
        assert_eq!(result, Ok(()), "{} guards", guards.len());
        assert_eq!(attempts, 2);
        let metrics = registry.retry("inv").metrics();
        assert_eq!(metrics.number_of_successful_calls_with_retry_attempt(), 1);

        let ignored = plan.run(|| 404, |_| resilience_runtime::CallOutcome::Ignored);
        assert_eq!(ignored, Ok(404));
        assert_eq!(
            registry
                .retry("inv")
                .metrics()
                .number_of_failed_calls_without_retry_attempt(),
            1
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_async_time_limiter_alone_cuts_off_a_slow_call_and_counts_a_quick_one() {
    // The time limiter alone, and with the bulkhead around it.
    let plans: [&[Guard<'static>]; 2] = [
        &[Guard::time_limiter("inv")],
        &[Guard::bulkhead("inv"), Guard::time_limiter("inv")],
    ];
    for guards in plans {
        let registry = Registry::new();
        time_limit(&registry, Duration::from_millis(100), true);
        let plan = registry.plan(guards).unwrap();
        let start = tokio::time::Instant::now();
        let slow: Result<u32, CallError> = plan
            .call_async(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(1)
            })
            .await;
        assert!(
            matches!(slow, Err(CallError::Rejected(Rejected::TimedOut { .. }))),
            "{slow:?} with {} guards",
            guards.len()
        );
        assert_eq!(start.elapsed(), Duration::from_millis(100));
        let quick: Result<u32, CallError> = plan.call_async(|| async { Ok(2) }).await;
        assert_eq!(quick, Ok(2));
        let failed: Result<u32, CallError> = plan
            .call_async(|| async { Err(CallError::Downstream("503")) })
            .await;
        assert!(failed.is_err());
        let metrics = registry.time_limiter("inv").metrics();
        assert_eq!(metrics.number_of_timed_out_calls(), 1);
        assert_eq!(metrics.number_of_successful_calls(), 1);
        assert_eq!(metrics.number_of_failed_calls(), 1);
    }
}
