//! Precedence changed at run time takes effect on the next call of an annotated function.
//! Its own test binary: it changes the global registry's precedence.

use std::sync::{Arc, Barrier};

use resilience_runtime::{
    bulkhead, circuit_breaker, Aspect, BulkheadConfig, CircuitBreakerConfig, CircuitState,
    Registry, Rejected, SlidingWindow,
};
use resilience_tests::CallError;

#[bulkhead(name = "precedence")]
#[circuit_breaker(name = "precedence")]
fn guarded(hold: &Barrier) -> Result<(), CallError> {
    hold.wait();
    Ok(())
}

/// One call holds the bulkhead of 1 while `extra` calls arrive; returns their results.
fn overload(extra: usize) -> Vec<Result<(), CallError>> {
    let hold = Arc::new(Barrier::new(2));
    let holder = {
        let hold = hold.clone();
        std::thread::spawn(move || guarded(&hold))
    };
    // Wait until the holder is inside the body.
    while Registry::global()
        .bulkhead("precedence")
        .available_concurrent_calls()
        > 0
    {
        std::thread::yield_now();
    }
    let free = Barrier::new(1);
    let results = (0..extra).map(|_| guarded(&free)).collect();
    hold.wait();
    holder.join().unwrap().unwrap();
    results
}

#[test]
fn precedence_changed_at_run_time_takes_effect_on_the_next_call() {
    let registry = Registry::global();
    registry
        .configure_bulkhead(
            "precedence",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    // The incident's breaker: counts rejections as failures.
    registry
        .configure_circuit_breaker(
            "precedence",
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(10))
                .minimum_number_of_calls(4)
                .record_rejections(true)
                .build()
                .unwrap(),
        )
        .unwrap();

    // Default precedence: the bulkhead runs first, the breaker never sees its rejections.
    let _ = overload(10);
    let breaker = registry.circuit_breaker("precedence");
    assert_eq!(breaker.state(), CircuitState::Closed);
    assert_eq!(breaker.metrics().number_of_failed_calls(), 0);

    // Reversed at run time: the next calls take the breaker first, and it records the
    // bulkhead's rejections until it opens.
    registry.set_precedence(Aspect::CircuitBreaker, 50).unwrap();
    let results = overload(10);
    assert_eq!(breaker.state(), CircuitState::Open);
    assert!(results.iter().any(|r| matches!(
        r,
        Err(CallError::Rejected(Rejected::CallNotPermitted { .. }))
    )));
}
