use std::time::Duration;

use super::TimeLimiterConfig;
use crate::registry::Registry;

#[test]
fn a_zero_timeout_is_refused() {
    let err = TimeLimiterConfig::builder()
        .timeout_duration(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "timeout_duration");
}

#[test]
fn reconfiguring_keeps_the_instance_and_its_counters() {
    let registry = Registry::new();
    let limiter = registry.time_limiter("inv");
    assert_eq!(limiter.config().timeout_duration(), Duration::from_secs(1));
    limiter.completed(true);
    registry
        .configure_time_limiter(
            "inv",
            TimeLimiterConfig::builder()
                .timeout_duration(Duration::from_millis(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    assert!(std::sync::Arc::ptr_eq(
        &limiter,
        &registry.time_limiter("inv")
    ));
    assert_eq!(
        limiter.config().timeout_duration(),
        Duration::from_millis(5)
    );
    assert_eq!(limiter.metrics().number_of_successful_calls(), 1);
}
