//! `#[bulkhead(overload = ..)]`: the errors a function marks as the dependency shedding load
//! are drops for an adaptive limit (it backs off), and neither failures for the breaker nor
//! successes; other errors stay what the breaker's own arguments make them.

use resilience_runtime::{
    bulkhead, circuit_breaker, AdaptiveLimit, BulkheadConfig, CircuitBreakerConfig, ManualClock,
    Registry, SlidingWindow,
};
use resilience_tests::CallError;

fn is_overloaded(error: &CallError) -> bool {
    matches!(error, CallError::Downstream("overloaded"))
}

#[bulkhead(name = "shop", overload = is_overloaded)]
#[circuit_breaker(name = "shop")]
fn shop(answer: Result<(), &'static str>) -> Result<(), CallError> {
    answer.map_err(CallError::Downstream)
}

/// The same without a breaker: the bulkhead alone reads the outcome.
#[bulkhead(name = "shop", overload = is_overloaded)]
fn shop_alone(answer: Result<(), &'static str>) -> Result<(), CallError> {
    answer.map_err(CallError::Downstream)
}

/// `shop` on a registry of its own: an AIMD limit at 20 (AIMD backs off on a drop, and grows
/// by one a call while calls use half of it), and a breaker that opens at 50 % of 4 calls.
fn registry() -> Registry {
    // A manual clock times every call, so that every call is a sample.
    let registry = Registry::with_clock(ManualClock::new());
    registry
        .configure_bulkhead(
            "shop",
            BulkheadConfig::builder()
                .adaptive(
                    AdaptiveLimit::aimd()
                        .min_limit(1)
                        .max_limit(40)
                        .initial_limit(20),
                )
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "shop",
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(4))
                .minimum_number_of_calls(4)
                .failure_rate_threshold(50.0)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
}

fn limit(registry: &Registry) -> u32 {
    registry
        .bulkhead("shop")
        .metrics()
        .max_allowed_concurrent_calls()
}

#[test]
fn an_overload_error_backs_the_adaptive_limit_off_and_is_no_breaker_failure() {
    let registry = registry();
    registry.scope(|| {
        // 20 × 0.9 (AIMD's backoff ratio) = 18, then 16.
        assert!(shop(Err("overloaded")).is_err());
        assert_eq!(limit(&registry), 18);
        assert!(shop(Err("overloaded")).is_err());
        assert_eq!(limit(&registry), 16);
        let breaker = registry.circuit_breaker("shop").metrics();
        assert_eq!(
            breaker.total_failed_calls(),
            0,
            "a refusal is not a failure"
        );
        assert_eq!(breaker.total_ignored_calls(), 2);
    });
}

#[test]
fn another_error_is_a_breaker_failure_and_no_drop() {
    let registry = registry();
    registry.scope(|| {
        assert!(shop(Err("broken")).is_err());
        let after = limit(&registry);
        assert!(after >= 16, "a failure is a sample, not a drop: {after}");
        assert_ne!(after, 18, "not backed off");
        assert_eq!(
            registry
                .circuit_breaker("shop")
                .metrics()
                .total_failed_calls(),
            1
        );
    });
}

#[test]
fn the_bulkhead_reads_overload_without_a_breaker() {
    let registry = registry();
    registry.scope(|| {
        assert!(shop_alone(Err("overloaded")).is_err());
        assert_eq!(limit(&registry), 18);
        assert!(shop_alone(Ok(())).is_ok());
        assert!(shop_alone(Err("broken")).is_err());
        assert_eq!(limit(&registry), 18, "a success and a failure: no drop");
    });
}
