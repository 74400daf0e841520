//! Fault injection: off until code allows it, then latency, errors and refusals drawn from a
//! seeded sequence, injected inside the real guards of every plan that names the instance.

use std::future::Future;
use std::pin::pin;
use std::sync::LazyLock;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use resilience_runtime::{
    bulkhead, BulkheadConfig, CircuitBreakerConfig, FaultConfig, Guard, ManualClock, Registry,
    Rejected, RetryConfig, TimeLimiterConfig,
};

#[derive(Debug, PartialEq)]
struct Unavailable;

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the inventory is unavailable")
    }
}

impl std::error::Error for Unavailable {}

#[derive(Debug, PartialEq)]
enum InvError {
    /// What the dependency returns when it fails: what an injected error stands for.
    Unavailable,
    Rejected(Rejected),
}

impl From<Rejected> for InvError {
    fn from(r: Rejected) -> Self {
        match r
            .injected_error()
            .and_then(|e| e.downcast_ref::<Unavailable>())
        {
            Some(Unavailable) => InvError::Unavailable,
            None => InvError::Rejected(r),
        }
    }
}

fn poll<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

fn guarded_registry(clock: &ManualClock) -> Registry {
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_bulkhead(
            "inv",
            BulkheadConfig::builder()
                .max_concurrent_calls(2)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "inv",
            CircuitBreakerConfig::builder()
                .minimum_number_of_calls(100)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
}

#[test]
fn nothing_is_injected_until_code_allows_it_and_a_file_cannot() {
    let registry = Registry::new();
    registry
        .load_toml("[fault.instances.inv]\nrefusal_rate = 1.0\nseed = 3\n")
        .unwrap();
    assert_eq!(registry.fault_config("inv").refusal_rate(), 1.0);
    let plan = registry.plan(&[Guard::bulkhead("inv")]).unwrap();
    let answered: Result<u32, InvError> = plan.call(|| Ok(1));
    assert_eq!(answered, Ok(1), "configured, not allowed: nothing injected");
    assert!(!registry.fault_injection_allowed());

    registry.allow_fault_injection();
    let plan = registry.plan(&[Guard::bulkhead("inv")]).unwrap();
    let refused: Result<u32, InvError> = plan.call(|| Ok(1));
    assert!(matches!(
        refused,
        Err(InvError::Rejected(Rejected::Injected { error: None, .. }))
    ));
    assert_eq!(
        registry
            .fault("inv")
            .metrics()
            .number_of_injected_refusals(),
        1
    );
    let bulkhead = registry.bulkhead("inv");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls(),
        "the refusal gave the bulkhead's permit back"
    );
}

#[test]
fn an_injected_error_is_a_failure_the_breaker_records_and_the_retry_retries() {
    let clock = ManualClock::new();
    let registry = guarded_registry(&clock);
    registry
        .configure_retry(
            "inv",
            RetryConfig::builder()
                .max_attempts(3)
                .wait_duration(Duration::ZERO)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_fault(
            "inv",
            FaultConfig::builder()
                .error(1.0, || Box::new(Unavailable))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry
        .plan(&[
            Guard::bulkhead("inv"),
            Guard::retry("inv"),
            Guard::circuit_breaker("inv"),
        ])
        .unwrap();
    let mut ran = 0;
    let answered: Result<u32, InvError> = plan.call(|| {
        ran += 1;
        Ok(1)
    });
    assert_eq!(
        answered,
        Err(InvError::Unavailable),
        "through From<Rejected>"
    );
    assert_eq!(ran, 0, "an injected error stands for the call");
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(
        breaker.number_of_failed_calls(),
        3,
        "each attempt a failure"
    );
    assert_eq!(registry.fault("inv").metrics().number_of_draws(), 3);
    assert_eq!(
        registry
            .retry("inv")
            .metrics()
            .number_of_failed_calls_with_retry_attempt(),
        1
    );
    assert_eq!(registry.bulkhead("inv").available_concurrent_calls(), 2);
}

#[test]
fn an_injected_latency_holds_the_bulkhead_and_the_time_limiter_cuts_it_off() {
    let clock = ManualClock::new();
    let registry = guarded_registry(&clock);
    registry
        .configure_time_limiter(
            "inv",
            TimeLimiterConfig::builder()
                .timeout_duration(Duration::from_secs(1))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_fault(
            "inv",
            FaultConfig::builder()
                .latency(1.0, Duration::from_secs(2))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry
        .plan(&[
            Guard::bulkhead("inv"),
            Guard::circuit_breaker("inv"),
            Guard::time_limiter("inv"),
        ])
        .unwrap();
    let mut call = pin!(plan.call_async(|| async { Ok::<u32, InvError>(1) }));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        registry.bulkhead("inv").available_concurrent_calls(),
        1,
        "the bulkhead holds its permit through the latency"
    );
    clock.advance(Duration::from_secs(1));
    assert!(matches!(
        poll(call.as_mut()),
        Poll::Ready(Err(InvError::Rejected(Rejected::TimedOut { .. })))
    ));
    assert_eq!(registry.bulkhead("inv").available_concurrent_calls(), 2);
    assert_eq!(
        registry
            .circuit_breaker("inv")
            .metrics()
            .number_of_failed_calls(),
        1
    );
}

#[test]
fn a_refusal_reaches_the_caller_as_a_rejection_no_breaker_records() {
    let clock = ManualClock::new();
    let registry = guarded_registry(&clock);
    registry
        .configure_fault("inv", FaultConfig::builder().refusal(1.0).build().unwrap())
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry
        .plan(&[Guard::bulkhead("inv"), Guard::circuit_breaker("inv")])
        .unwrap();
    let answered: Result<u32, InvError> = plan.call(|| Ok(1));
    assert!(matches!(
        answered,
        Err(InvError::Rejected(Rejected::Injected { error: None, .. }))
    ));
    let breaker = registry.circuit_breaker("inv").metrics();
    assert_eq!(breaker.number_of_buffered_calls(), 0);
    assert_eq!(registry.bulkhead("inv").available_concurrent_calls(), 2);
}

/// The outcomes of 200 calls through a registry whose faults are seeded by `seed`.
fn outcomes(seed: u64) -> Vec<bool> {
    let registry = Registry::new();
    registry
        .configure_fault(
            "inv",
            FaultConfig::builder()
                .error_rate(0.3)
                .seed(seed)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry.plan(&[Guard::circuit_breaker("inv")]).unwrap();
    (0..200)
        .map(|_| plan.call(|| Ok::<u32, InvError>(1)).is_ok())
        .collect()
}

#[test]
fn the_same_seed_injects_the_same_faults() {
    let first = outcomes(11);
    assert_eq!(first, outcomes(11));
    assert_ne!(first, outcomes(12));
    let failed = first.iter().filter(|ok| !**ok).count();
    assert!((40..=80).contains(&failed), "about 30 % of 200: {failed}");
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let registry = Registry::new();
    registry
        .configure_fault(
            "annotated",
            FaultConfig::builder()
                .error(1.0, || Box::new(Unavailable))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.allow_fault_injection();
    registry
});

#[bulkhead(name = "annotated", registry = REGISTRY)]
fn annotated() -> Result<u32, InvError> {
    Ok(1)
}

#[test]
fn an_annotated_function_takes_the_faults_of_its_names_unchanged() {
    assert_eq!(annotated(), Err(InvError::Unavailable));
    assert_eq!(
        REGISTRY
            .fault("annotated")
            .metrics()
            .number_of_injected_errors(),
        1
    );
}

#[test]
fn a_bad_fault_table_names_its_line_and_field() {
    let registry = Registry::new();
    let err = registry
        .load_toml("[fault.instances.inv]\nlatency_rate = 0.5\n")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("2:") && err.contains("latency"), "{err}");
    let err = registry
        .load_toml("[fault.instances.inv]\nrefusal_rate = 2.0\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("refusal_rate"), "{err}");
}

#[test]
fn a_plan_of_several_names_takes_the_faults_of_one() {
    let registry = Registry::new();
    for name in ["orders", "payments"] {
        registry
            .configure_fault(name, FaultConfig::builder().refusal(1.0).build().unwrap())
            .unwrap();
    }
    registry.allow_fault_injection();
    let plan = registry
        .plan(&[
            Guard::bulkhead("orders"),
            Guard::circuit_breaker("payments"),
        ])
        .unwrap();
    let refused: Result<u32, InvError> = plan.call(|| Ok(1));
    assert!(matches!(
        refused,
        Err(InvError::Rejected(Rejected::Injected { name, .. })) if name == "orders"
    ));
    assert_eq!(registry.fault("payments").metrics().number_of_draws(), 0);

    // A default configuration injects into every name, still once per plan.
    let registry = Registry::new();
    registry
        .configure_default_fault(FaultConfig::builder().error_rate(1.0).build().unwrap())
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry
        .plan(&[Guard::bulkhead("a"), Guard::circuit_breaker("b")])
        .unwrap();
    let failed: Result<u32, InvError> = plan.call(|| Ok(1));
    assert!(matches!(
        failed,
        Err(InvError::Rejected(Rejected::Injected {
            error: Some(_),
            ..
        }))
    ));
}

#[test]
fn a_listed_fault_guard_injects_nothing_until_allowed() {
    let registry = Registry::new();
    registry
        .configure_fault("inv", FaultConfig::builder().refusal(1.0).build().unwrap())
        .unwrap();
    let plan = registry
        .plan(&[Guard::bulkhead("inv"), Guard::fault("inv")])
        .unwrap();
    assert_eq!(plan.call(|| Ok::<u32, InvError>(1)), Ok(1));
}

static LATE: LazyLock<Registry> = LazyLock::new(Registry::new);

#[bulkhead(name = "late", registry = LATE)]
fn late() -> Result<u32, InvError> {
    Ok(1)
}

#[test]
fn faults_allowed_after_a_call_site_made_its_plan_reach_it() {
    assert_eq!(late(), Ok(1), "the call site's plan made, without faults");
    LATE.configure_fault("late", FaultConfig::builder().refusal(1.0).build().unwrap())
        .unwrap();
    assert_eq!(late(), Ok(1), "configured, not allowed");
    LATE.allow_fault_injection();
    assert!(matches!(
        late(),
        Err(InvError::Rejected(Rejected::Injected { .. }))
    ));
    // Configured to inject nothing again: the plan loses its faults.
    LATE.configure_fault("late", FaultConfig::default())
        .unwrap();
    assert_eq!(late(), Ok(1));
}

#[test]
fn a_sync_latency_fault_blocks_a_plain_thread_and_is_refused_on_a_current_thread_runtime() {
    let registry = Registry::new();
    registry
        .configure_fault(
            "inv",
            FaultConfig::builder()
                .latency(1.0, Duration::from_millis(20))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry.plan(&[Guard::bulkhead("inv")]).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(plan.call(|| Ok::<u32, InvError>(1)), Ok(1));
    assert!(started.elapsed() >= Duration::from_millis(20), "it waited");
    assert_eq!(
        registry
            .fault("inv")
            .metrics()
            .number_of_injected_latencies(),
        1
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let refused = runtime.block_on(async { plan.call(|| Ok::<u32, InvError>(1)) });
    assert!(matches!(
        refused,
        Err(InvError::Rejected(Rejected::WouldBlock { .. }))
    ));
    assert_eq!(
        registry.fault("inv").metrics().number_of_draws(),
        1,
        "refused before it drew"
    );
}

#[test]
fn each_attempt_of_a_hedge_draws_its_own_fault() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_hedge(
            "inv",
            resilience_runtime::HedgeConfig::builder()
                .delay(Duration::from_millis(10))
                .max_hedged_attempts(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    // Every attempt waits 100 ms: the hedge starts the second at 10 ms, which answers at 110.
    registry
        .configure_fault(
            "inv",
            FaultConfig::builder()
                .latency(1.0, Duration::from_millis(100))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.allow_fault_injection();
    let plan = registry.plan(&[Guard::hedge("inv")]).unwrap();
    let mut call = pin!(plan.call_async(|| async { Ok::<u32, InvError>(7) }));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(10));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(registry.fault("inv").metrics().number_of_draws(), 2);
    clock.advance(Duration::from_millis(90));
    assert_eq!(
        poll(call.as_mut()),
        Poll::Ready(Ok(7)),
        "the first answers at 100 ms"
    );
    assert_eq!(registry.hedge("inv").metrics().primary_success_count(), 1);
}
