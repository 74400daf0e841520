use std::time::Duration;

use super::RetryConfig;
use crate::registry::Registry;

#[test]
fn every_refused_field_is_named() {
    let field = |built: Result<RetryConfig, crate::ConfigError>| built.unwrap_err().field();
    assert_eq!(
        field(RetryConfig::builder().max_attempts(0).build()),
        "max_attempts"
    );
    assert_eq!(
        field(
            RetryConfig::builder()
                .exponential_backoff(0.5, Duration::from_secs(1))
                .build()
        ),
        "exponential_backoff"
    );
    assert_eq!(
        field(
            RetryConfig::builder()
                .exponential_backoff(f64::NAN, Duration::from_secs(1))
                .build()
        ),
        "exponential_backoff"
    );
    let short_cap = RetryConfig::builder()
        .wait_duration(Duration::from_secs(2))
        .exponential_backoff(2.0, Duration::from_secs(1))
        .build()
        .unwrap_err();
    assert_eq!(short_cap.field(), "exponential_backoff");
    assert!(short_cap.reason().contains("max_wait"), "{short_cap}");
    assert_eq!(
        field(RetryConfig::builder().randomized_wait_factor(1.0).build()),
        "randomized_wait_factor"
    );
    assert_eq!(
        field(RetryConfig::builder().randomized_wait_factor(-0.1).build()),
        "randomized_wait_factor"
    );
}

#[test]
fn jitter_stays_within_its_factor_and_under_the_cap() {
    let config = RetryConfig::builder()
        .wait_duration(Duration::from_millis(100))
        .randomized_wait_factor(0.5)
        .build()
        .unwrap();
    assert_eq!(config.jittered_wait(1, 0.0), Duration::from_millis(50));
    assert_eq!(config.jittered_wait(1, 0.5), Duration::from_millis(100));
    assert!(config.jittered_wait(1, 0.999_999) < Duration::from_millis(150));
    let capped = RetryConfig::builder()
        .wait_duration(Duration::from_millis(100))
        .exponential_backoff(10.0, Duration::from_millis(120))
        .randomized_wait_factor(0.5)
        .build()
        .unwrap();
    assert_eq!(capped.jittered_wait(5, 0.999), Duration::from_millis(120));
}

#[test]
fn a_huge_backoff_saturates_at_max_wait() {
    let config = RetryConfig::builder()
        .wait_duration(Duration::from_secs(1))
        .exponential_backoff(1e300, Duration::from_secs(30))
        .build()
        .unwrap();
    assert_eq!(config.wait_before_retry(u32::MAX), Duration::from_secs(30));
}

#[test]
fn a_configuration_on_a_base_is_checked_with_the_base_s_fields() {
    let registry = Registry::new();
    registry
        .configure_retry(
            "slow",
            RetryConfig::builder()
                .wait_duration(Duration::from_secs(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    // Valid alone (the default wait is 500 ms), invalid on its base (5 s above the 1 s cap).
    let derived = RetryConfig::builder()
        .base("slow")
        .exponential_backoff(2.0, Duration::from_secs(1))
        .build()
        .unwrap();
    let err = registry.configure_retry("orders", derived).unwrap_err();
    assert_eq!(err.field(), "exponential_backoff");
    let inherits = RetryConfig::builder()
        .base("slow")
        .max_attempts(5)
        .build()
        .unwrap();
    registry.configure_retry("orders", inherits).unwrap();
    let effective = registry.retry("orders").config();
    assert_eq!(effective.max_attempts(), 5);
    assert_eq!(effective.wait_duration(), Duration::from_secs(5));
}
