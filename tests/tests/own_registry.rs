//! Annotated functions on a registry of their own: a test's scope (`Registry::scope`,
//! `Registry::scope_async`), a fixed `registry = path`, and a registry that requires every
//! name to be configured (`require_configured`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use resilience_runtime::{
    bulkhead, circuit_breaker, rate_limiter, retry, time_limiter, Aspect, BulkheadConfig,
    CircuitBreakerConfig, CircuitState, ManualClock, RateLimiterConfig, Registry, Rejected,
    RetryConfig, SlidingWindow,
};
use resilience_tests::CallError;

fn bulkhead_of(calls: u32) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(calls)
        .build()
        .unwrap()
}

/// The permits of this registry's bulkhead `own.orders` free while the body runs.
#[bulkhead(name = "own.orders")]
fn free_permits_inside(registry: &Registry) -> Result<u32, CallError> {
    Ok(registry.bulkhead("own.orders").available_concurrent_calls())
}

#[test]
fn a_scope_gives_an_annotated_function_the_instances_of_its_registry() {
    let registry = Registry::new();
    registry
        .configure_bulkhead("own.orders", bulkhead_of(3))
        .unwrap();
    let inside = registry.scope(|| free_permits_inside(&registry)).unwrap();
    assert_eq!(
        inside, 2,
        "the call held one of the scoped bulkhead's 3 permits"
    );
    assert_eq!(
        registry.bulkhead("own.orders").available_concurrent_calls(),
        3
    );
    assert!(
        !Registry::global()
            .bulkheads()
            .iter()
            .any(|b| b.name() == "own.orders"),
        "the global registry never made the instance"
    );
}

/// As `free_permits_inside`, for the one test that calls it on the global registry (the
/// test above checks that the global registry never made `own.orders`).
#[bulkhead(name = "own.orders_back")]
fn free_permits_back(registry: &Registry) -> Result<u32, CallError> {
    Ok(registry
        .bulkhead("own.orders_back")
        .available_concurrent_calls())
}

#[test]
fn after_the_scope_the_same_function_is_back_on_the_global_registry() {
    let registry = Registry::new();
    registry
        .configure_bulkhead("own.orders_back", bulkhead_of(3))
        .unwrap();
    assert_eq!(registry.scope(|| free_permits_back(&registry)), Ok(2));
    // Outside the scope the call holds a permit of the global bulkhead (25 by default).
    let global = Registry::global();
    assert_eq!(free_permits_back(global).unwrap(), 24);
}

#[circuit_breaker(name = "own.inventory")]
fn fetch_stock(up: bool) -> Result<u32, CallError> {
    if up {
        Ok(7)
    } else {
        Err(CallError::Downstream("inventory is down"))
    }
}

fn small_breaker() -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(2))
        .minimum_number_of_calls(2)
        .wait_duration_in_open_state(Duration::from_secs(30))
        .build()
        .unwrap()
}

#[test]
fn tests_running_side_by_side_each_open_only_their_own_breaker() {
    let opened = |fail: bool| {
        std::thread::spawn(move || {
            let registry = Registry::new();
            registry
                .configure_circuit_breaker("own.inventory", small_breaker())
                .unwrap();
            registry.scope(|| {
                for _ in 0..20 {
                    let _ = fetch_stock(!fail);
                }
            });
            registry.circuit_breaker("own.inventory").state()
        })
    };
    let (failing, healthy) = (opened(true), opened(false));
    assert_eq!(failing.join().unwrap(), CircuitState::Open);
    assert_eq!(healthy.join().unwrap(), CircuitState::Closed);
}

#[test]
fn a_manual_clock_drives_the_open_state_of_an_annotated_function() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_circuit_breaker("own.inventory", small_breaker())
        .unwrap();
    registry.scope(|| {
        assert!(fetch_stock(false).is_err());
        assert!(fetch_stock(false).is_err());
        let refused = fetch_stock(true).unwrap_err();
        assert!(matches!(
            refused.rejection(),
            Some(Rejected::CallNotPermitted { retry_after: Some(wait), .. })
                if *wait == Duration::from_secs(30)
        ));
        clock.advance(Duration::from_secs(30));
        assert_eq!(fetch_stock(true), Ok(7), "a half-open probe goes through");
    });
}

#[rate_limiter(name = "own.search")]
fn search() -> Result<(), CallError> {
    Ok(())
}

#[test]
fn a_manual_clock_drives_the_cycles_of_an_annotated_rate_limiter() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let one_per_second = RateLimiterConfig::builder()
        .limit_for_period(1)
        .limit_refresh_period(Duration::from_secs(1))
        .build()
        .unwrap();
    registry
        .configure_rate_limiter("own.search", one_per_second)
        .unwrap();
    registry.scope(|| {
        assert_eq!(search(), Ok(()));
        assert!(matches!(
            search().unwrap_err().rejection(),
            Some(Rejected::RequestNotPermitted { .. })
        ));
        clock.advance(Duration::from_secs(1));
        assert_eq!(search(), Ok(()), "the next cycle's permission");
    });
}

#[bulkhead(name = "own.payments")]
async fn charge(registry: &Registry, cents: u64) -> Result<u64, CallError> {
    tokio::task::yield_now().await;
    // Still held across the `.await`.
    assert_eq!(
        registry
            .bulkhead("own.payments")
            .available_concurrent_calls(),
        1
    );
    Ok(cents)
}

#[tokio::test]
async fn a_scoped_future_runs_its_annotated_calls_on_its_registry() {
    let registry = Registry::new();
    registry
        .configure_bulkhead("own.payments", bulkhead_of(2))
        .unwrap();
    let charged = registry.scope_async(charge(&registry, 250)).await;
    assert_eq!(charged, Ok(250));
    assert_eq!(
        registry
            .bulkhead("own.payments")
            .available_concurrent_calls(),
        2
    );
}

static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(name = "own.flaky")]
#[bulkhead(name = "own.flaky")]
fn flaky() -> Result<u32, CallError> {
    match ATTEMPTS.fetch_add(1, Ordering::Relaxed) {
        0 => Err(CallError::Downstream("first attempt fails")),
        n => Ok(n),
    }
}

#[test]
fn a_stack_with_a_retry_runs_on_the_scoped_registry_too() {
    let registry = Registry::new();
    registry
        .configure_retry(
            "own.flaky",
            RetryConfig::builder()
                .max_attempts(2)
                .wait_duration(Duration::from_millis(1))
                .build()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(registry.scope(flaky), Ok(1));
    let metrics = registry.retry("own.flaky").metrics();
    assert_eq!(metrics.number_of_successful_calls_with_retry_attempt(), 1);
}

/// A registry of its own for some of a service's functions, fixed by the annotation.
static BILLING: LazyLock<Registry> = LazyLock::new(|| {
    let registry = Registry::new();
    registry
        .configure_bulkhead("own.billing", bulkhead_of(4))
        .unwrap();
    registry
});

#[bulkhead(name = "own.billing", registry = BILLING)]
fn bill() -> Result<u32, CallError> {
    Ok(BILLING.bulkhead("own.billing").available_concurrent_calls())
}

#[test]
fn a_fixed_registry_is_used_in_and_out_of_a_scope() {
    assert_eq!(bill(), Ok(3));
    let other = Registry::new();
    assert_eq!(other.scope(bill), Ok(3), "the annotation's registry wins");
    assert!(other.bulkheads().is_empty());
}

// ----- a registry that requires every name configured -----

/// Counts its runs in the caller's `ran`: each test keeps its own count, whatever runs beside.
#[circuit_breaker(name = "own.strict")]
#[bulkhead(name = "own.strict")]
fn strict_call(ran: &AtomicU32) -> Result<(), CallError> {
    ran.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[test]
fn an_unconfigured_name_is_refused_without_entering_any_guard_until_it_is_configured() {
    let registry = Registry::new();
    registry.set_require_configured(true);
    registry
        .configure_bulkhead("own.strict", bulkhead_of(1))
        .unwrap();
    let ran = AtomicU32::new(0);

    let refused = registry.scope(|| strict_call(&ran)).unwrap_err();
    assert!(matches!(
        refused.rejection(),
        Some(Rejected::Unconfigured { aspect: Aspect::CircuitBreaker, name, .. }) if name == "own.strict"
    ));
    assert_eq!(ran.load(Ordering::Relaxed), 0, "the body did not run");
    assert_eq!(
        registry.bulkhead("own.strict").available_concurrent_calls(),
        1
    );
    assert!(
        registry.circuit_breakers().is_empty(),
        "no breaker was made on the default configuration"
    );
    let message = refused.rejection().unwrap().to_string();
    assert!(message.contains("circuit breaker `own.strict` has no configuration"));

    registry
        .configure_circuit_breaker("own.strict", small_breaker())
        .unwrap();
    assert_eq!(registry.scope(|| strict_call(&ran)), Ok(()));
    assert_eq!(ran.load(Ordering::Relaxed), 1);
}

#[test]
fn without_strictness_the_same_name_runs_on_the_default() {
    let registry = Registry::new();
    assert!(!registry.require_configured());
    let ran = AtomicU32::new(0);
    assert_eq!(registry.scope(|| strict_call(&ran)), Ok(()));
    assert_eq!(ran.load(Ordering::Relaxed), 1);
    assert_eq!(
        registry
            .circuit_breaker_config("own.strict")
            .sliding_window(),
        CircuitBreakerConfig::default().sliding_window()
    );
}

#[retry(name = "own.strict_async")]
#[bulkhead(name = "own.strict_async")]
async fn strict_async(ran: Arc<AtomicU32>) -> Result<(), CallError> {
    ran.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[tokio::test]
async fn an_async_stack_with_a_retry_is_refused_the_same_way() {
    let registry = Registry::new();
    registry.set_require_configured(true);
    registry
        .configure_bulkhead("own.strict_async", bulkhead_of(1))
        .unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    let refused = registry
        .scope_async(strict_async(Arc::clone(&ran)))
        .await
        .unwrap_err();
    assert!(matches!(
        refused.rejection(),
        Some(Rejected::Unconfigured {
            aspect: Aspect::Retry,
            ..
        })
    ));
    assert_eq!(ran.load(Ordering::Relaxed), 0);

    registry
        .configure_retry("own.strict_async", RetryConfig::default())
        .unwrap();
    registry
        .scope_async(strict_async(Arc::clone(&ran)))
        .await
        .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 1);
}

#[retry(name = "own.strict_sync")]
fn strict_sync_retry(ran: &AtomicU32) -> Result<(), CallError> {
    ran.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[test]
fn a_sync_stack_with_a_retry_is_refused_the_same_way() {
    let registry = Registry::new();
    registry.set_require_configured(true);
    let ran = AtomicU32::new(0);
    let refused = registry.scope(|| strict_sync_retry(&ran)).unwrap_err();
    assert!(matches!(
        refused.rejection(),
        Some(Rejected::Unconfigured {
            aspect: Aspect::Retry,
            ..
        })
    ));
    assert_eq!(ran.load(Ordering::Relaxed), 0);
}

#[test]
fn a_function_with_a_fixed_registry_is_validated_by_that_registry_only() {
    let fixed = |report: &resilience_runtime::Validation| {
        report.unconfigured.iter().any(|u| u.name == "own.billing")
    };
    // The global registry has no `own.billing`, and is not asked for it.
    let global = match Registry::global().validate_module(module_path!()) {
        Ok(report) | Err(report) => report,
    };
    assert!(!fixed(&global), "{global}");
    assert!(
        global.unconfigured.iter().any(|u| u.name == "own.strict"),
        "the functions without a fixed registry are checked: {global}"
    );
    // BILLING configures it.
    let billing = match BILLING.validate_module(module_path!()) {
        Ok(report) | Err(report) => report,
    };
    assert!(!fixed(&billing), "{billing}");
    // A registry that lacks it and that the function does not run on is not asked either.
    let other = Registry::new();
    let report = match other.validate_module(module_path!()) {
        Ok(report) | Err(report) => report,
    };
    assert!(!fixed(&report), "{report}");
}

#[time_limiter(name = "own.strict_timed")]
async fn strict_timed(ran: Arc<AtomicU32>) -> Result<(), CallError> {
    ran.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[tokio::test]
async fn an_async_function_with_only_a_time_limiter_is_refused_too() {
    let registry = Registry::new();
    registry.set_require_configured(true);
    let ran = Arc::new(AtomicU32::new(0));
    let refused = registry
        .scope_async(strict_timed(Arc::clone(&ran)))
        .await
        .unwrap_err();
    assert!(matches!(
        refused.rejection(),
        Some(Rejected::Unconfigured {
            aspect: Aspect::TimeLimiter,
            ..
        })
    ));
    assert_eq!(ran.load(Ordering::Relaxed), 0);
}
