//! A retry budget, held to a plain reference: random sequences of calls (some failing once)
//! and clock steps through a registry's retry with a budget, fractional ratios included, and
//! the same sequence replayed in a list of timestamped events. Every retry the budget allows or
//! refuses must be the one the reference allows or refuses.

use std::time::Duration;

use proptest::prelude::*;
use resilience_runtime::{
    Guard, ManualClock, Registry, Rejected, RetryBudget, RetryConfig, RetryEvent,
};

#[derive(Debug, PartialEq)]
enum InvError {
    Busy,
    Rejected(Rejected),
}

impl From<Rejected> for InvError {
    fn from(r: Rejected) -> Self {
        InvError::Rejected(r)
    }
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// A call whose first `n` attempts fail (0: it succeeds at once), the others succeed.
    Fails(u32),
    /// The clock moves on.
    Wait(Duration),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Fails(0)),
        2 => Just(Step::Fails(1)),
        1 => Just(Step::Fails(2)),
        1 => Just(Step::Fails(3)),
        1 => (1u64..3_000).prop_map(|ms| Step::Wait(Duration::from_millis(ms))),
    ]
}

/// The budget as its docs state it, with the ratio as an exact fraction `p / q` taken to the
/// millionth, rounded down: over the window's last whole seconds (this one included), a retry
/// is allowed while `ratio × first attempts + floor × seconds ≥ retries + 1`.
struct Reference {
    ratio_millionths: u64,
    floor: u64,
    seconds: u64,
    firsts: Vec<u64>,
    retries: Vec<u64>,
}

impl Reference {
    fn new((p, q): (u64, u64), floor: u32, seconds: u64) -> Self {
        Reference {
            ratio_millionths: p * 1_000_000 / q,
            floor: u64::from(floor),
            seconds,
            firsts: Vec::new(),
            retries: Vec::new(),
        }
    }

    fn in_window(&self, at: &[u64], now: u64) -> u64 {
        at.iter()
            .filter(|&&s| s <= now && now - s < self.seconds)
            .count() as u64
    }

    /// Spends a retry at `now` if the budget allows one.
    fn allows(&mut self, now: u64) -> bool {
        let allowed = self.ratio_millionths * self.in_window(&self.firsts, now)
            + self.floor * self.seconds * 1_000_000;
        let ok = allowed >= (self.in_window(&self.retries, now) + 1) * 1_000_000;
        if ok {
            self.retries.push(now);
        }
        ok
    }

    /// The attempts a call whose first `failing` attempts fail makes, with `max_attempts`: a
    /// retry is asked of the budget only when the retry would otherwise be made.
    fn attempts(&mut self, now: u64, failing: u32, max_attempts: u32) -> (u32, bool) {
        self.firsts.push(now);
        let mut attempts = 1;
        while attempts <= failing && attempts < max_attempts {
            if !self.allows(now) {
                return (attempts, true);
            }
            attempts += 1;
        }
        (attempts, false)
    }
}

const MAX_ATTEMPTS: u32 = 3;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_budget_allows_exactly_the_retries_the_reference_allows(
        (p, q) in prop_oneof![
            Just((1, 10)), Just((1, 5)), Just((7, 20)), Just((1, 3)), Just((2, 3)),
            Just((1, 1000)), Just((3, 2)),
        ],
        floor in 0u32..3,
        window in 1u64..5,
        steps in proptest::collection::vec(step(), 1..300),
    ) {
        let clock = ManualClock::new();
        let registry = Registry::with_clock(clock.clone());
        let budget = RetryBudget::ratio(p as f64 / q as f64)
            .min_retries_per_second(floor)
            .window(Duration::from_secs(window));
        registry.configure_retry("inventory", RetryConfig::builder()
            .max_attempts(MAX_ATTEMPTS)
            .wait_duration(Duration::ZERO)
            .budget(budget)
            .build()?)?;
        let told = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let sink = std::sync::Arc::clone(&told);
        registry.retry("inventory").subscribe(move |event| {
            if matches!(event, RetryEvent::OverBudget { .. }) {
                sink.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let plan = registry.plan(&[Guard::retry("inventory")])?;
        let mut reference = Reference::new((p, q), floor, window);
        let mut over_budget = 0u64;
        for step in steps {
            let now = clock.now().as_secs();
            match step {
                Step::Wait(by) => clock.advance(by),
                Step::Fails(failing) => {
                    let (expected, refused) = reference.attempts(now, failing, MAX_ATTEMPTS);
                    let mut attempts = 0;
                    let result: Result<(), InvError> = plan.call(|| {
                        attempts += 1;
                        if attempts <= failing { Err(InvError::Busy) } else { Ok(()) }
                    });
                    prop_assert_eq!(attempts, expected, "at second {}", now);
                    prop_assert_eq!(result.is_ok(), attempts > failing);
                    over_budget += u64::from(refused);
                }
            }
        }
        let metrics = registry.retry("inventory").metrics();
        prop_assert_eq!(metrics.number_of_retries_over_budget(), over_budget);
        prop_assert_eq!(told.load(std::sync::atomic::Ordering::Relaxed), over_budget);
    }
}

#[test]
fn a_retry_over_budget_ends_with_the_last_error_and_is_told() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_retry(
            "inventory",
            RetryConfig::builder()
                .max_attempts(3)
                .wait_duration(Duration::ZERO)
                .budget(RetryBudget::ratio(0.1))
                .build()
                .unwrap(),
        )
        .unwrap();
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&told);
    registry.retry("inventory").subscribe(move |event| {
        if let RetryEvent::OverBudget { attempts, .. } = event {
            sink.lock().unwrap().push(*attempts);
        }
    });
    let plan = registry.plan(&[Guard::retry("inventory")]).unwrap();
    for _ in 0..19 {
        let _: Result<(), InvError> = plan.call(|| Ok(()));
    }
    // The twentieth call: 20 first attempts in the window, 2 retries allowed, both spent by
    // this call; its third attempt would be a third retry.
    let mut attempts = 0;
    let result: Result<(), InvError> = plan.call(|| {
        attempts += 1;
        Err(InvError::Busy)
    });
    assert_eq!(result, Err(InvError::Busy));
    assert_eq!(
        attempts, 3,
        "two retries within the budget, then max_attempts"
    );
    let mut attempts = 0;
    let _: Result<(), InvError> = plan.call(|| {
        attempts += 1;
        Err(InvError::Busy)
    });
    assert_eq!(attempts, 1, "21 first attempts allow 2.1 retries: no third");
    assert_eq!(
        *told.lock().unwrap(),
        [1],
        "the retry refused after attempt 1"
    );
    let metrics = registry.retry("inventory").metrics();
    assert_eq!(metrics.number_of_retries_over_budget(), 1);
    assert_eq!(metrics.number_of_failed_calls_with_retry_attempt(), 1);
    assert_eq!(metrics.number_of_failed_calls_without_retry_attempt(), 1);

    // Ten seconds on, the window is empty.
    clock.advance(Duration::from_secs(10));
    let mut attempts = 0;
    let _: Result<(), InvError> = plan.call(|| {
        attempts += 1;
        Err(InvError::Busy)
    });
    assert_eq!(attempts, 1, "1 first attempt: 0.1 of a retry");
}

#[test]
fn a_file_sets_the_budget_and_a_part_of_one_is_refused_with_the_fix() {
    let registry = Registry::new();
    registry
        .load_toml(
            "[retry.instances.inventory]\nbudget_ratio = 0.25\n\
             budget_min_retries_per_second = 2\nbudget_window = \"5s\"\n",
        )
        .unwrap();
    let config = registry.retry("inventory").config();
    let budget = config.budget().expect("a budget");
    assert_eq!(budget.ratio_value(), 0.25);
    assert_eq!(budget.min_retries_per_second_value(), 2);
    assert_eq!(budget.window_value(), Duration::from_secs(5));

    for (document, key, reason) in [
        (
            "[retry.instances.inventory]\nbudget_window = \"5s\"\n",
            "retry.instances.inventory.budget_window",
            "takes effect only with `budget_ratio`",
        ),
        (
            "[retry.instances.inventory]\nbudget_ratio = -1.0\n",
            "retry.instances.inventory.budget_ratio",
            "from 0 to 1000",
        ),
        (
            "[retry.instances.inventory]\nbudget_ratio = 0.2\nbudget_window = \"1500ms\"\n",
            "retry.instances.inventory.budget_window",
            "whole seconds",
        ),
    ] {
        let error = Registry::new().load_toml(document).unwrap_err();
        assert_eq!(error.key_path(), key, "{error}");
        assert!(error.to_string().contains(reason), "{error}");
    }
}
