//! Thousands of randomized guarded calls mixing successes, errors, panics, rejections and
//! futures dropped mid-call: afterwards every permit is back and the breaker recorded exactly
//! the calls that completed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::{
    BulkheadConfig, CircuitBreakerConfig, CircuitState, Guard, Plan, Registry, Rejected,
    SlidingWindow,
};
use resilience_tests::{quiet_injected_panics, CallError, Rng};

/// The outcomes of the calls as their callers saw them.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    panicked: AtomicU64,
    /// Dropped by the caller's timeout, mid-call or while waiting for a permit.
    timed_out: AtomicU64,
}

fn registry(max_calls: u32, fair: bool) -> Registry {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "leak",
            BulkheadConfig::builder()
                .max_concurrent_calls(max_calls)
                .max_wait_duration(Duration::from_millis(2))
                .fair_call_handling(fair)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "leak",
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(100_000))
                .build()
                .unwrap(),
        )
        .unwrap();
    // Record everything, never open: the counts must match the tally exactly.
    registry
        .circuit_breaker("leak")
        .transition_to_metrics_only_state();
    registry
}

const GUARDS: [Guard; 2] = [Guard::circuit_breaker("leak"), Guard::bulkhead("leak")];

fn sync_worker(plan: &Plan, tally: &Tally, seed: u64, calls: usize) {
    let mut rng = Rng(seed);
    for _ in 0..calls {
        let action = rng.below(10);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            plan.call(|| -> Result<(), CallError> {
                // Some calls outlast the 2 ms a waiter may wait, so waiters both get permits
                // and time out.
                match action {
                    0 => std::thread::sleep(Duration::from_millis(3)),
                    1 => std::thread::sleep(Duration::from_micros(100)),
                    _ => {}
                }
                match action {
                    0..=5 => Ok(()),
                    6 | 7 => Err(CallError::Downstream("boom")),
                    _ => panic!("injected panic"),
                }
            })
        }));
        let counter = match outcome {
            Ok(Ok(())) => &tally.ok,
            Ok(Err(CallError::Rejected(Rejected::BulkheadFull { .. }))) => &tally.rejected,
            Ok(Err(CallError::Downstream(_))) => &tally.failed,
            Ok(Err(other)) => panic!("unexpected {other:?}"),
            Err(_) => &tally.panicked,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

async fn async_worker(plan: Arc<Plan>, tally: Arc<Tally>, seed: u64, calls: usize) {
    let mut rng = Rng(seed);
    for _ in 0..calls {
        let action = rng.below(10);
        let plan = plan.clone();
        // Each call in a task of its own, so a panic inside it ends that task only.
        let call = tokio::spawn(async move {
            let call = plan.call_future(async move {
                tokio::task::yield_now().await;
                match action {
                    0..=5 => Ok(()),
                    6 | 7 => Err(CallError::Downstream("boom")),
                    8 => panic!("injected panic"),
                    _ => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(())
                    }
                }
            });
            // Action 9 sleeps "forever": the timeout drops it mid-call. Until then it holds its
            // permit longer than a waiter's 2 ms, so waiters are both admitted and rejected (a
            // 1 ms timeout, on a timer of 1 ms ticks, left rejections to chance).
            tokio::time::timeout(Duration::from_millis(5), call).await
        });
        let counter = match call.await {
            Ok(Ok(Ok(()))) => &tally.ok,
            Ok(Ok(Err(CallError::Rejected(Rejected::BulkheadFull { .. })))) => &tally.rejected,
            Ok(Ok(Err(CallError::Downstream(_)))) => &tally.failed,
            Ok(Ok(Err(other))) => panic!("unexpected {other:?}"),
            Ok(Err(_)) => &tally.timed_out,
            Err(panic) if panic.is_panic() => &tally.panicked,
            Err(other) => panic!("unexpected {other:?}"),
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// `threads` threads making `calls` calls each through `plan`, seeded from `seed`.
fn on_threads(plan: &Arc<Plan>, tally: &Arc<Tally>, threads: u64, seed: u64, calls: usize) {
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let (plan, tally) = (plan.clone(), tally.clone());
            std::thread::spawn(move || sync_worker(&plan, &tally, seed + t, calls))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

/// `tasks` tasks making `calls` calls each through `plan`, seeded from `seed`.
async fn on_tasks(plan: &Arc<Plan>, tally: &Arc<Tally>, tasks: u64, seed: u64, calls: usize) {
    let tasks: Vec<_> = (0..tasks)
        .map(|t| tokio::spawn(async_worker(plan.clone(), tally.clone(), seed + t, calls)))
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// Checks the callers' tally of `total` calls against the counts the instances kept.
fn assert_consistent(registry: &Registry, tally: &Tally, total: u64) {
    let (ok, failed, rejected, panicked, timed_out) = (
        tally.ok.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
        tally.rejected.load(Ordering::Relaxed),
        tally.panicked.load(Ordering::Relaxed),
        tally.timed_out.load(Ordering::Relaxed),
    );
    let bulkhead = registry.bulkhead("leak");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls(),
        "every permit returned"
    );
    let metrics = bulkhead.metrics();
    let (permitted, refused) = (metrics.permitted_calls(), metrics.rejected_calls());
    assert_eq!(metrics.finished_calls(), permitted, "every permit released");
    assert_eq!(refused, rejected, "the bulkhead rejected the calls refused");
    // Every call reached the bulkhead and was admitted or rejected, except a future that
    // timed out while queued for a permit: that one was neither.
    assert!(
        permitted + refused <= total && total - (permitted + refused) <= timed_out,
        "{permitted} admitted and {refused} rejected of {total} calls, {timed_out} timed out"
    );
    // A call that returned or panicked ran its body, so it held a permit.
    assert!(
        permitted >= ok + failed + panicked,
        "{permitted} admitted, {} ran",
        ok + failed + panicked
    );
    // In the metrics-only state the breaker refuses nothing and records every call that ended:
    // a rejection further in, a panic and a dropped future leave no record.
    let metrics = registry.circuit_breaker("leak").metrics();
    assert_eq!(metrics.total_successful_calls(), ok);
    assert_eq!(metrics.total_failed_calls(), failed);
    assert_eq!(metrics.total_ignored_calls(), 0);
    assert_eq!(metrics.total_not_permitted_calls(), 0);
    assert_eq!(u64::from(metrics.number_of_buffered_calls()), ok + failed);
    assert!(
        panicked > 0 && rejected > 0 && failed > 0,
        "the mix was exercised"
    );
}

#[test]
fn threads_mixing_panics_errors_and_rejections_leak_no_permit() {
    quiet_injected_panics();
    for fair in [true, false] {
        let registry = Arc::new(registry(2, fair));
        let plan = Arc::new(registry.plan(&GUARDS).unwrap());
        let tally = Arc::new(Tally::default());
        on_threads(&plan, &tally, 4, 0x9e37_79b9, 600);
        assert_consistent(&registry, &tally, 4 * 600);
        let metrics = registry.bulkhead("leak").metrics();
        assert_eq!(
            metrics.permitted_calls() + metrics.rejected_calls(),
            4 * 600,
            "a sync call is either permitted or rejected"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_mixing_errors_panics_rejections_and_dropped_futures_leak_no_permit() {
    quiet_injected_panics();
    for fair in [true, false] {
        let registry = Arc::new(registry(3, fair));
        let plan = Arc::new(registry.plan(&GUARDS).unwrap());
        let tally = Arc::new(Tally::default());
        on_tasks(&plan, &tally, 8, 0x51_7cc1, 400).await;
        assert_consistent(&registry, &tally, 8 * 400);
    }
}

#[resilience_runtime::bulkhead(name = "leak-macro")]
#[resilience_runtime::circuit_breaker(name = "leak-macro")]
async fn flaky(action: u64) -> Result<(), CallError> {
    tokio::task::yield_now().await;
    match action {
        0..=3 => Ok(()),
        4..=7 => Err(CallError::Downstream("boom")),
        _ => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_calls_through_open_and_half_open_states_leak_no_permit_or_probe() {
    let registry = Registry::global();
    registry
        .configure_bulkhead(
            "leak-macro",
            BulkheadConfig::builder()
                .max_concurrent_calls(3)
                .max_wait_duration(Duration::from_millis(2))
                .build()
                .unwrap(),
        )
        .unwrap();
    // Opens often (40 % failures against a 30 % threshold) and comes back half-open quickly,
    // so probes are taken, failed, succeeded and dropped mid-call many times over.
    registry
        .configure_circuit_breaker(
            "leak-macro",
            CircuitBreakerConfig::builder()
                .failure_rate_threshold(30.0)
                .sliding_window(SlidingWindow::CountBased(10))
                .minimum_number_of_calls(5)
                .wait_duration_in_open_state(Duration::from_millis(2))
                .permitted_calls_in_half_open_state(2)
                .build()
                .unwrap(),
        )
        .unwrap();
    let openings = Arc::new(AtomicU64::new(0));
    {
        let openings = openings.clone();
        registry
            .circuit_breaker("leak-macro")
            .subscribe(move |event| {
                if let resilience_runtime::CircuitBreakerEvent::StateTransition {
                    to: CircuitState::Open,
                    ..
                } = event
                {
                    openings.fetch_add(1, Ordering::Relaxed);
                }
            });
    }
    let tasks: Vec<_> = (0..8u64)
        .map(|t| {
            tokio::spawn(async move {
                let mut rng = Rng(0xdead_beef + t);
                for _ in 0..300 {
                    let call = flaky(rng.below(10));
                    let _ = tokio::time::timeout(Duration::from_millis(1), call).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let bulkhead = registry.bulkhead("leak-macro");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        3,
        "every permit returned"
    );
    let breaker = registry.circuit_breaker("leak-macro");
    // Counted by events: the metrics restart with every transition.
    assert!(openings.load(Ordering::Relaxed) > 0, "the breaker opened");
    // No probe leaked: once the open wait is over, successful calls get probe permits and
    // close the breaker. A lost probe would leave it half-open, refusing every call.
    let mut closed = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(3)).await;
        let _ = flaky(0).await;
        if breaker.state() == CircuitState::Closed {
            closed = true;
            break;
        }
    }
    assert!(closed, "stuck in {:?}", breaker.state());
}

#[test]
fn a_subscriber_panicking_as_a_call_enters_leaks_no_permit_and_no_probe() {
    use resilience_runtime::{CircuitBreakerEvent, ManualClock};

    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_bulkhead(
            "probe",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "probe",
            CircuitBreakerConfig::builder()
                .permitted_calls_in_half_open_state(1)
                .wait_duration_in_open_state(Duration::from_secs(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry
        .plan(&[Guard::bulkhead("probe"), Guard::circuit_breaker("probe")])
        .unwrap();
    let breaker = registry.circuit_breaker("probe");
    breaker.transition_to_open_state().unwrap();
    clock.advance(Duration::from_secs(5));
    // The call that ends the wait turns the breaker half-open, and this subscriber panics.
    let panicking = breaker.subscribe(|event| {
        if let CircuitBreakerEvent::StateTransition {
            to: CircuitState::HalfOpen,
            ..
        } = event
        {
            panic!("a subscriber's bug");
        }
    });
    let entered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        plan.call(|| Ok::<(), CallError>(()))
    }));
    assert!(
        entered.is_err(),
        "the subscriber's panic reached the caller"
    );
    assert_eq!(breaker.state(), CircuitState::HalfOpen);
    assert_eq!(
        registry.bulkhead("probe").available_concurrent_calls(),
        1,
        "the bulkhead permit came back"
    );
    assert!(breaker.unsubscribe(panicking));
    // The single probe came back too: the next call is it, and its success closes the breaker.
    plan.call(|| Ok::<(), CallError>(())).unwrap();
    assert_eq!(breaker.state(), CircuitState::Closed);
}

/// The same guards with a retry and a time limiter around the breaker: the call runs as nested
/// segments. The retry makes one attempt, so the tally still maps onto the breaker's counts.
const WRAPPED: [Guard; 4] = [
    Guard::circuit_breaker("leak"),
    Guard::time_limiter("leak"),
    Guard::bulkhead("leak"),
    Guard::retry("leak"),
];

fn wrapped_registry(max_calls: u32) -> Registry {
    let registry = registry(max_calls, true);
    registry
        .configure_retry(
            "leak",
            resilience_runtime::RetryConfig::builder()
                .max_attempts(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
}

#[test]
fn threads_through_wrappers_leak_no_permit() {
    quiet_injected_panics();
    let registry = Arc::new(wrapped_registry(2));
    let plan = Arc::new(registry.plan(&WRAPPED).unwrap());
    let tally = Arc::new(Tally::default());
    on_threads(&plan, &tally, 4, 0x7f4a_7c15, 400);
    assert_consistent(&registry, &tally, 4 * 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_through_wrappers_leak_no_permit() {
    quiet_injected_panics();
    let registry = Arc::new(wrapped_registry(3));
    let plan = Arc::new(registry.plan(&WRAPPED).unwrap());
    let tally = Arc::new(Tally::default());
    on_tasks(&plan, &tally, 8, 0x2545_f491, 300).await;
    assert_consistent(&registry, &tally, 8 * 300);
}
