//! Guards on `Clock::precise()` inside a paused tokio runtime: everything they time follows the
//! runtime's virtual time (what the drill's replay of a traffic profile relies on), and a
//! configuration read from a file changed in one setting with `to_builder`.

use std::time::Duration;

use resilience_runtime::{
    AdaptiveLimit, BulkheadConfig, CircuitBreakerConfig, CircuitState, Clock, Guard, HedgeConfig,
    LimitAlgorithm, Plan, RateLimiterConfig, Registry, Rejected, SlidingWindow, TimeLimiterConfig,
};

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// `calls` calls through `plan`, one after another, each sleeping 2 s of virtual time.
fn calls_of_two_seconds(plan: &Plan, calls: u32) {
    paused().block_on(async {
        for _ in 0..calls {
            let answer: Result<(), Rejected> = plan
                .call_async(|| async {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    Ok(())
                })
                .await;
            assert!(answer.is_ok());
        }
    });
}

/// Calls that sleep 2 s of virtual time through a breaker that counts calls over 1 s as
/// slow, on `clock`: whether the breaker opened on them.
fn slow_calls_open_the_breaker(clock: Clock) -> bool {
    let registry = Registry::with_clock(clock);
    registry
        .configure_circuit_breaker(
            "slow",
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(4))
                .minimum_number_of_calls(4)
                .slow_call_duration_threshold(Duration::from_secs(1))
                .slow_call_rate_threshold(50.0)
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&[Guard::circuit_breaker("slow")]).unwrap();
    calls_of_two_seconds(&plan, 4);
    registry.circuit_breaker("slow").state() == CircuitState::Open
}

#[test]
fn on_the_precise_clock_a_breaker_times_calls_in_paused_time() {
    assert!(
        slow_calls_open_the_breaker(Clock::precise()),
        "four calls of 2 s of virtual time are slow: the breaker opens"
    );
    // The system clock reads call durations from Linux's coarse clock, which paused time does
    // not move: the same calls take no time.
    if cfg!(target_os = "linux") {
        assert!(!slow_calls_open_the_breaker(Clock::system()));
    }
}

#[test]
fn on_the_precise_clock_a_time_based_window_moves_with_paused_time() {
    let registry = Registry::with_clock(Clock::precise());
    registry
        .configure_circuit_breaker(
            "window",
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::TimeBased(2))
                .minimum_number_of_calls(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&[Guard::circuit_breaker("window")]).unwrap();
    let breaker = registry.circuit_breaker("window");
    paused().block_on(async {
        let answer: Result<(), Rejected> = plan.call_async(|| async { Ok(()) }).await;
        assert!(answer.is_ok());
        assert_eq!(breaker.metrics().number_of_successful_calls(), 1);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            breaker.metrics().number_of_successful_calls(),
            0,
            "the call left the 2 s window after 3 s of virtual time"
        );
    });
}

#[test]
fn on_the_precise_clock_an_adaptive_bulkhead_learns_from_paused_time() {
    let registry = Registry::with_clock(Clock::precise());
    registry
        .configure_bulkhead(
            "adaptive",
            BulkheadConfig::builder()
                .adaptive(
                    AdaptiveLimit::new(LimitAlgorithm::Aimd)
                        .initial_limit(20)
                        .min_limit(1)
                        .max_limit(100)
                        .timeout(Duration::from_secs(1)),
                )
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&[Guard::bulkhead("adaptive")]).unwrap();
    let bulkhead = registry.bulkhead("adaptive");
    // Calls over AIMD's timeout of 1 s: it backs off on each. On the system clock it would time
    // one call per tick of the coarse clock, which paused time does not move: one back-off.
    calls_of_two_seconds(&plan, 10);
    assert!(
        bulkhead.max_allowed_concurrent_calls() < 10,
        "the limit backed off from its start of 20 on every call: {}",
        bulkhead.max_allowed_concurrent_calls()
    );
}

#[test]
fn to_builder_changes_one_setting_of_a_configuration_read_from_a_file() {
    let registry = Registry::new();
    registry
        .load_toml(
            r#"
            [circuit_breaker.instances.orders]
            failure_rate_threshold = 30
            sliding_window_size = 40
            wait_duration_in_open_state = "7s"

            [retry.instances.orders]
            max_attempts = 5
            wait_duration = "20ms"

            [bulkhead.instances.orders]
            max_concurrent_calls = 12
            max_wait_duration = "150ms"
            "#,
        )
        .unwrap();
    let breaker = registry
        .circuit_breaker_config("orders")
        .to_builder()
        .record_rejections(true)
        .build()
        .unwrap();
    assert!(breaker.record_rejections());
    assert_eq!(breaker.failure_rate_threshold(), 30.0);
    assert_eq!(breaker.sliding_window(), SlidingWindow::CountBased(40));
    assert_eq!(
        breaker.wait_duration_in_open_state(),
        Duration::from_secs(7)
    );

    let retry = registry
        .retry_config("orders")
        .to_builder()
        .retry_on_rejection(true)
        .build()
        .unwrap();
    assert!(retry.retry_on_rejection());
    assert_eq!(retry.max_attempts(), 5);
    assert_eq!(retry.wait_duration(), Duration::from_millis(20));

    let bulkhead = registry
        .bulkhead_config("orders")
        .to_builder()
        .max_wait_duration(Duration::from_millis(500))
        .build()
        .unwrap();
    assert_eq!(bulkhead.max_concurrent_calls(), 12);
    assert_eq!(bulkhead.max_wait_duration(), Duration::from_millis(500));
    // A fixed limit and an adaptive one stay refused together, from a file's configuration too.
    let both = registry
        .bulkhead_config("orders")
        .to_builder()
        .adaptive(AdaptiveLimit::new(LimitAlgorithm::Knee))
        .build();
    assert!(both.is_err());

    let hedge = HedgeConfig::builder()
        .delay(Duration::from_millis(30))
        .max_hedged_attempts(2)
        .build()
        .unwrap()
        .to_builder()
        .max_hedged_attempts(3)
        .build()
        .unwrap();
    assert_eq!(hedge.delay(), Duration::from_millis(30));
    assert_eq!(hedge.max_hedged_attempts(), 3);
    let limiter = RateLimiterConfig::builder()
        .limit_for_period(7)
        .build()
        .unwrap()
        .to_builder()
        .timeout_duration(Duration::from_millis(5))
        .build()
        .unwrap();
    assert_eq!(limiter.limit_for_period(), 7);
    assert_eq!(limiter.timeout_duration(), Duration::from_millis(5));
    let time_limiter = TimeLimiterConfig::builder()
        .timeout_duration(Duration::from_secs(3))
        .build()
        .unwrap()
        .to_builder()
        .cancel_running_future(false)
        .build()
        .unwrap();
    assert_eq!(time_limiter.timeout_duration(), Duration::from_secs(3));
    assert!(!time_limiter.cancel_running_future());
}
