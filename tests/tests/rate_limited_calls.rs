//! The rate limiter as one gate among three: its place in the default precedence (inside the
//! bulkhead, outside the breaker), what its refusals cost the other gates, its waits in a plan
//! (sync and async, driven by a manual clock), and the macros stacking it in any source order.

use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::{
    bulkhead, circuit_breaker, rate_limiter, Aspect, BulkheadConfig, CircuitBreakerConfig, Guard,
    ManualClock, RateLimiterConfig, Registry, Rejected,
};
use resilience_tests::CallError;

/// A registry on `clock` with the bulkhead, rate limiter and breaker `api`: a bulkhead of
/// `calls`, `limit` permissions per 10 s cycle (waiting up to `timeout`), a breaker that
/// records rejections as failures if `record_rejections`.
fn registry(
    clock: &ManualClock,
    calls: u32,
    limit: u32,
    timeout: Duration,
    record_rejections: bool,
) -> Registry {
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_bulkhead(
            "api",
            BulkheadConfig::builder()
                .max_concurrent_calls(calls)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_rate_limiter(
            "api",
            RateLimiterConfig::builder()
                .limit_for_period(limit)
                .limit_refresh_period(Duration::from_secs(10))
                .timeout_duration(timeout)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "api",
            CircuitBreakerConfig::builder()
                .record_rejections(record_rejections)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
}

const THREE: [Guard; 3] = [
    Guard::circuit_breaker("api"),
    Guard::rate_limiter("api"),
    Guard::bulkhead("api"),
];

#[test]
fn the_rate_limiter_runs_inside_the_bulkhead_and_outside_the_breaker_whatever_the_written_order() {
    let registry = Registry::new();
    let orders = [
        THREE,
        [THREE[2], THREE[1], THREE[0]],
        [THREE[1], THREE[0], THREE[2]],
    ];
    for guards in orders {
        let plan = registry.plan(&guards).unwrap();
        let order: Vec<Aspect> = plan.guards().map(|(aspect, _)| aspect).collect();
        assert_eq!(
            order,
            [
                Aspect::Bulkhead,
                Aspect::RateLimiter,
                Aspect::CircuitBreaker
            ]
        );
    }
}

#[test]
fn a_call_the_bulkhead_refuses_takes_no_permission() {
    let clock = ManualClock::new();
    let registry = registry(&clock, 1, 5, Duration::ZERO, false);
    let plan = registry.plan(&THREE).unwrap();
    let bulkhead_only = registry.plan(&[Guard::bulkhead("api")]).unwrap();
    let holding = bulkhead_only.enter().unwrap();
    let refused: Result<(), CallError> = plan.call(|| Ok(()));
    assert!(matches!(
        refused.unwrap_err().rejection(),
        Some(Rejected::BulkheadFull { .. })
    ));
    assert_eq!(registry.rate_limiter("api").available_permissions(), 5);
    drop(holding);
}

#[test]
fn a_call_the_rate_limiter_refuses_releases_the_bulkhead_and_never_reaches_the_breaker() {
    let clock = ManualClock::new();
    let registry = registry(&clock, 4, 1, Duration::ZERO, true);
    let plan = registry.plan(&THREE).unwrap();
    plan.call(|| Ok::<(), CallError>(())).unwrap();
    let refused: Result<(), CallError> = plan.call(|| panic!("a refused call never runs"));
    match refused.unwrap_err().rejection() {
        Some(Rejected::RequestNotPermitted {
            name, retry_after, ..
        }) => {
            assert_eq!(name, "api");
            assert_eq!(*retry_after, Duration::from_secs(10), "the next cycle");
        }
        other => panic!("expected the rate limiter's refusal, got {other:?}"),
    }
    assert_eq!(registry.bulkhead("api").available_concurrent_calls(), 4);
    // The breaker runs inside the rate limiter: it never saw the refused call, even though it
    // records rejections further in as failures.
    let metrics = registry.circuit_breaker("api").metrics();
    assert_eq!(metrics.number_of_buffered_calls(), 1);
    assert_eq!(metrics.number_of_failed_calls(), 0);
}

#[test]
fn a_breaker_moved_outside_the_rate_limiter_sees_its_refusals_as_rejections() {
    for record_rejections in [false, true] {
        let clock = ManualClock::new();
        let registry = registry(&clock, 4, 1, Duration::ZERO, record_rejections);
        registry
            .set_precedence(Aspect::CircuitBreaker, 150)
            .unwrap();
        let plan = registry.plan(&THREE).unwrap();
        let order: Vec<Aspect> = plan.guards().map(|(aspect, _)| aspect).collect();
        assert_eq!(
            order,
            [
                Aspect::Bulkhead,
                Aspect::CircuitBreaker,
                Aspect::RateLimiter
            ]
        );
        plan.call(|| Ok::<(), CallError>(())).unwrap();
        let _ = plan.call(|| Ok::<(), CallError>(()));
        let metrics = registry.circuit_breaker("api").metrics();
        // Recorded as a failure only when the breaker's configuration says so.
        assert_eq!(
            metrics.number_of_failed_calls(),
            u32::from(record_rejections)
        );
        assert_eq!(
            metrics.number_of_buffered_calls(),
            1 + u32::from(record_rejections)
        );
        assert_eq!(registry.bulkhead("api").available_concurrent_calls(), 4);
    }
}

#[test]
fn a_sync_call_waits_for_the_next_cycle_within_the_timeout() {
    let clock = ManualClock::new();
    let registry = Arc::new(registry(&clock, 4, 1, Duration::from_secs(20), false));
    let plan = Arc::new(registry.plan(&THREE).unwrap());
    plan.call(|| Ok::<(), CallError>(())).unwrap();
    let waiter = {
        let plan = Arc::clone(&plan);
        std::thread::spawn(move || plan.call(|| Ok::<u32, CallError>(7)))
    };
    // The waiter holds its bulkhead permit while it waits for its permission.
    while registry
        .rate_limiter("api")
        .metrics()
        .number_of_waiting_threads()
        == 0
    {
        std::thread::yield_now();
    }
    assert_eq!(registry.bulkhead("api").available_concurrent_calls(), 3);
    clock.advance(Duration::from_secs(10));
    assert_eq!(waiter.join().unwrap(), Ok(7));
    assert_eq!(registry.bulkhead("api").available_concurrent_calls(), 4);
    assert_eq!(
        registry
            .circuit_breaker("api")
            .metrics()
            .number_of_successful_calls(),
        2
    );
}

#[tokio::test]
async fn an_async_call_waits_for_the_next_cycle_and_a_dropped_one_gives_its_permission_back() {
    let clock = ManualClock::new();
    let registry = registry(&clock, 4, 1, Duration::from_secs(20), false);
    let plan = registry.plan(&THREE).unwrap();
    plan.call_async(|| async { Ok::<(), CallError>(()) })
        .await
        .unwrap();

    // A caller that waits for the next cycle, then gives up: its permission goes back to that
    // cycle, and its bulkhead permit to the bulkhead.
    let given_up = plan.call_async(|| async { Ok::<(), CallError>(()) });
    let polled = tokio::time::timeout(Duration::from_millis(10), given_up).await;
    assert!(polled.is_err(), "it waits for the next cycle");
    assert_eq!(registry.bulkhead("api").available_concurrent_calls(), 4);
    assert_eq!(registry.rate_limiter("api").available_permissions(), 0);

    let waiting = tokio::spawn({
        let plan = registry.plan(&THREE).unwrap();
        async move { plan.call_async(|| async { Ok::<u32, CallError>(9) }).await }
    });
    while registry
        .rate_limiter("api")
        .metrics()
        .number_of_waiting_threads()
        == 0
    {
        tokio::task::yield_now().await;
    }
    clock.advance(Duration::from_secs(10));
    assert_eq!(waiting.await.unwrap(), Ok(9));
    // The next cycle had one permission: the caller that waited took it; the one that gave up
    // took none (had it kept one, the waiter would have had to wait a cycle more).
    let limiter = registry.rate_limiter("api");
    assert_eq!(limiter.available_permissions(), 0);
    assert!(matches!(
        limiter.try_acquire(),
        Err(Rejected::RequestNotPermitted { .. })
    ));
    assert_eq!(registry.bulkhead("api").available_concurrent_calls(), 4);
}

#[bulkhead(name = "rl-macro-a")]
#[rate_limiter(name = "rl-macro-a")]
#[circuit_breaker(name = "rl-macro-a")]
fn three_written_bulkhead_first(x: u32) -> Result<u32, CallError> {
    Ok(x)
}

#[circuit_breaker(name = "rl-macro-b")]
#[rate_limiter(name = "rl-macro-b")]
#[bulkhead(name = "rl-macro-b")]
async fn three_written_breaker_first(x: u32) -> Result<u32, CallError> {
    Ok(x)
}

#[tokio::test]
async fn stacked_attributes_run_in_precedence_order_and_refuse_past_the_limit() {
    let registry = Registry::global();
    for name in ["rl-macro-a", "rl-macro-b"] {
        registry
            .configure_rate_limiter(
                name,
                RateLimiterConfig::builder()
                    .limit_for_period(2)
                    .limit_refresh_period(Duration::from_secs(3_600))
                    .build()
                    .unwrap(),
            )
            .unwrap();
    }
    assert_eq!(three_written_bulkhead_first(1), Ok(1));
    assert_eq!(three_written_breaker_first(2).await, Ok(2));
    assert_eq!(three_written_bulkhead_first(3), Ok(3));
    assert_eq!(three_written_breaker_first(4).await, Ok(4));
    assert!(matches!(
        three_written_bulkhead_first(5).unwrap_err().rejection(),
        Some(Rejected::RequestNotPermitted { .. })
    ));
    assert!(matches!(
        three_written_breaker_first(6)
            .await
            .unwrap_err()
            .rejection(),
        Some(Rejected::RequestNotPermitted { .. })
    ));
    for name in ["rl-macro-a", "rl-macro-b"] {
        let site = registry
            .call_sites()
            .into_iter()
            .find(|site| site.guards().iter().any(|g| g.name() == name))
            .expect("the call site is registered");
        assert_eq!(site.guards().len(), 3);
        let plan = registry.plan(site.guards()).unwrap();
        let order: Vec<Aspect> = plan.guards().map(|(aspect, _)| aspect).collect();
        assert_eq!(
            order,
            [
                Aspect::Bulkhead,
                Aspect::RateLimiter,
                Aspect::CircuitBreaker
            ]
        );
        // The breaker recorded the two calls that ran, and neither refusal.
        let metrics = registry.circuit_breaker(name).metrics();
        assert_eq!(metrics.number_of_buffered_calls(), 2, "{name}");
        assert_eq!(registry.bulkhead(name).available_concurrent_calls(), 25);
    }
}
