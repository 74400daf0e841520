use std::time::Duration;

use super::{Draw, FaultConfig, FaultInjector};
use crate::error::Rejected;

#[test]
fn a_bad_configuration_names_its_field() {
    let err = FaultConfig::builder().refusal(1.5).build().unwrap_err();
    assert_eq!(err.field(), "refusal_rate");
    let err = FaultConfig::builder().error_rate(-0.1).build().unwrap_err();
    assert_eq!(err.field(), "error_rate");
    let err = FaultConfig::builder()
        .error_rate(0.6)
        .refusal(0.6)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "error_rate");
    let err = FaultConfig::builder()
        .latency(0.5, Duration::from_secs(7200))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "latency");
}

#[test]
fn the_draws_follow_the_rates_and_repeat_for_a_seed() {
    let config = FaultConfig::builder()
        .latency(0.3, Duration::from_millis(5))
        .error_rate(0.2)
        .refusal(0.1)
        .seed(7)
        .build()
        .unwrap();
    let injector = FaultInjector::new("inv", config.clone());
    let draws: Vec<Draw> = (0..10_000)
        .map(|_| injector.draw(&injector.snapshot()))
        .collect();
    let share = |f: &dyn Fn(&Draw) -> bool| draws.iter().filter(|d| f(d)).count() as f64 / 1e4;
    let refused = share(&|d| matches!(d, Draw::Refusal(_)));
    let errors = share(&|d| matches!(d, Draw::Error(_)));
    let slow = share(&|d| d.latency().is_some());
    assert!((refused - 0.1).abs() < 0.015, "{refused}");
    assert!((errors - 0.2).abs() < 0.015, "{errors}");
    assert!((slow - 0.3).abs() < 0.015, "{slow}");
    let m = injector.metrics();
    assert_eq!(m.number_of_draws(), 10_000);
    assert_eq!(
        m.number_of_injected_refusals() as f64 / 1e4,
        refused,
        "counted as drawn"
    );

    let again = FaultInjector::new("inv", config);
    let replayed: Vec<Draw> = (0..10_000).map(|_| again.draw(&again.snapshot())).collect();
    assert_eq!(draws, replayed, "the same seed, the same faults");
}

#[test]
fn an_injected_error_carries_the_users_error_and_a_refusal_none() {
    #[derive(Debug)]
    struct Unavailable;
    impl std::fmt::Display for Unavailable {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("unavailable")
        }
    }
    impl std::error::Error for Unavailable {}

    let injector = FaultInjector::new(
        "inv",
        FaultConfig::builder()
            .error(1.0, || Box::new(Unavailable))
            .build()
            .unwrap(),
    );
    let rejected = injector.outcome(Draw::Error(None)).unwrap_err();
    assert!(rejected.is_failure());
    assert!(rejected
        .injected_error()
        .and_then(|e| e.downcast_ref::<Unavailable>())
        .is_some());
    assert_eq!(
        rejected.to_string(),
        "fault `inv`: an error injected: unavailable"
    );
    let refused = injector.outcome(Draw::Refusal(None)).unwrap_err();
    assert!(matches!(refused, Rejected::Injected { error: None, .. }));
    assert!(!refused.is_failure());
    assert_eq!(injector.outcome(Draw::Run(None)), Ok(()));
}
