use std::time::Duration;

use super::HedgeConfig;
use crate::registry::Registry;
use crate::retry::RetryBudget;
use crate::wrapper::{Attempted, Ended, Run, Settle, Wrap, WrapCall};

fn run(attempt: u32) -> Run {
    Run {
        attempt,
        started: None,
    }
}

fn ended(attempted: Attempted) -> Ended {
    Ended {
        attempted,
        failed: attempted != Attempted::Succeeded,
        retry_after: None,
        hedge_on: attempted == Attempted::Failed,
    }
}

#[test]
fn a_bad_configuration_names_its_field() {
    for attempts in [0, HedgeConfig::MAX_HEDGED_ATTEMPTS + 1] {
        let err = HedgeConfig::builder()
            .max_hedged_attempts(attempts)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "max_hedged_attempts");
    }
    let err = HedgeConfig::builder()
        .delay(Duration::from_secs(7200))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "delay");
    for p in [0.0, 100.0, f64::NAN] {
        let err = HedgeConfig::builder()
            .delay_percentile(p)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "delay_percentile");
    }
    let err = HedgeConfig::builder()
        .budget(RetryBudget::ratio(-1.0))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "budget.ratio");
}

#[test]
fn reconfiguring_keeps_the_instance_and_its_counters() {
    let registry = Registry::new();
    let hedge = registry.hedge("search");
    assert_eq!(hedge.config().delay(), HedgeConfig::DEFAULT_DELAY);
    let mut call = hedge.begin(false);
    assert_eq!(
        call.settle(ended(Attempted::Succeeded), run(1), 0, true),
        Settle::Ends
    );
    let config = HedgeConfig::builder()
        .delay(Duration::from_millis(5))
        .build()
        .unwrap();
    registry.configure_hedge("search", config).unwrap();
    assert!(std::sync::Arc::ptr_eq(&hedge, &registry.hedge("search")));
    assert_eq!(
        hedge.metrics().current_hedge_delay(),
        Duration::from_millis(5)
    );
    assert_eq!(hedge.metrics().primary_success_count(), 1);
}

#[test]
fn a_refusal_ends_the_call_only_when_no_other_attempt_runs() {
    let registry = Registry::new();
    let hedge = registry.hedge("search");
    let refused = ended(Attempted::Refused { failure: false });
    let mut call = hedge.begin(false);
    assert_eq!(call.settle(refused, run(2), 1, true), Settle::Wait);
    assert_eq!(call.settle(refused, run(1), 0, true), Settle::Ends);
    assert_eq!(hedge.metrics().primary_failure_count(), 1);
    assert_eq!(hedge.metrics().number_of_hedged_attempts(), 0);
}

#[test]
fn a_failure_or_a_time_out_starts_another_attempt_until_none_is_left() {
    let registry = Registry::new();
    let hedge = registry.hedge("search");
    let mut call = hedge.begin(false);
    let timed_out = ended(Attempted::Refused { failure: true });
    assert_eq!(call.settle(timed_out, run(1), 0, true), Settle::Another);
    assert_eq!(
        call.settle(ended(Attempted::Failed), run(2), 0, true),
        Settle::Ends
    );
    assert_eq!(hedge.metrics().secondary_failure_count(), 1);
    // A failure the hedge does not hedge on is an answer: it ends the call.
    let mut call = hedge.begin(false);
    assert_eq!(
        call.settle(ended(Attempted::NotRetried), run(1), 1, true),
        Settle::Ends
    );
    // A call that cannot be made again, and a sync call, make one attempt.
    assert_eq!(
        hedge
            .begin(false)
            .settle(ended(Attempted::Failed), run(1), 0, false),
        Settle::Ends
    );
    assert_eq!(
        hedge
            .begin(true)
            .settle(ended(Attempted::Failed), run(1), 0, true),
        Settle::Ends
    );
}
