//! Ordered execution by hand: admission first, release on every path, rejections kept apart
//! from failures, re-entrancy along a call chain.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use resilience_runtime::{
    Aspect, BulkheadConfig, CallOutcome, CircuitBreakerConfig, CircuitState, Guard,
    ReentrancyPolicy, Registry, Rejected,
};
use resilience_tests::CallError;

fn registry_with(bulkhead_calls: u32, record_rejections: bool) -> Registry {
    resilience_tests::orders_registry(bulkhead_calls, record_rejections)
}

const BOTH_ORDERS: [[Guard; 2]; 2] = [
    [Guard::bulkhead("orders"), Guard::circuit_breaker("orders")],
    [Guard::circuit_breaker("orders"), Guard::bulkhead("orders")],
];

/// Saturates a bulkhead of 2 with 2 blocked calls on other threads, then makes `extra` calls
/// that the bulkhead must reject; returns what those calls returned.
fn overload_sync(
    registry: &Registry,
    guards: &[Guard],
    extra: usize,
) -> Vec<Result<(), CallError>> {
    let plan = Arc::new(registry.plan(guards).unwrap());
    let entered = Arc::new(Barrier::new(3));
    let release = Arc::new(Barrier::new(3));
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (plan, entered, release) = (plan.clone(), entered.clone(), release.clone());
            std::thread::spawn(move || {
                plan.call(|| -> Result<(), CallError> {
                    entered.wait();
                    release.wait();
                    Ok(())
                })
            })
        })
        .collect();
    entered.wait();
    let results = (0..extra).map(|_| plan.call(|| Ok(()))).collect();
    release.wait();
    for holder in holders {
        holder.join().unwrap().unwrap();
    }
    results
}

#[test]
fn the_breaker_never_sees_bulkhead_rejections_whatever_the_written_order() {
    for guards in BOTH_ORDERS {
        let registry = registry_with(2, false);
        let results = overload_sync(&registry, &guards, 20);
        for result in &results {
            assert!(
                matches!(result, Err(CallError::Rejected(Rejected::BulkheadFull { name, .. })) if name == "orders"),
                "{result:?}"
            );
        }
        let breaker = registry.circuit_breaker("orders");
        assert_eq!(breaker.state(), CircuitState::Closed);
        let metrics = breaker.metrics();
        assert_eq!(metrics.number_of_failed_calls(), 0);
        assert_eq!(
            metrics.number_of_successful_calls(),
            2,
            "the two admitted calls"
        );
        assert_eq!(registry.bulkhead("orders").metrics().rejected_calls(), 20);
    }
}

#[test]
fn the_incident_layout_opens_the_breaker_on_overload_alone() {
    // Breaker outside the bulkhead, counting rejections as failures: what this project
    // exists to prevent, reproduced on purpose.
    let registry = registry_with(2, true);
    registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
    let results = overload_sync(&registry, &BOTH_ORDERS[0], 20);
    let breaker = registry.circuit_breaker("orders");
    assert_eq!(breaker.state(), CircuitState::Open);
    assert!(results.iter().any(|r| matches!(
        r,
        Err(CallError::Rejected(Rejected::CallNotPermitted { .. }))
    )));
}

#[test]
fn a_rejected_call_is_never_run() {
    let registry = registry_with(1, false);
    let plan = registry.plan(&[Guard::circuit_breaker("orders")]).unwrap();
    registry
        .circuit_breaker("orders")
        .transition_to_forced_open_state();
    let ran = AtomicUsize::new(0);
    let result: Result<(), CallError> = plan.call(|| {
        ran.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    assert!(matches!(
        result,
        Err(CallError::Rejected(Rejected::CallNotPermitted {
            state: CircuitState::ForcedOpen,
            ..
        }))
    ));
    assert_eq!(ran.load(Ordering::Relaxed), 0);
}

#[test]
fn errors_are_failures_and_classification_can_ignore_them() {
    let registry = registry_with(4, false);
    let plan = registry.plan(&BOTH_ORDERS[1]).unwrap();
    let breaker = registry.circuit_breaker("orders");
    let failed: Result<(), CallError> = plan.call(|| Err(CallError::Downstream("timeout")));
    assert_eq!(failed, Err(CallError::Downstream("timeout")));
    assert_eq!(breaker.metrics().number_of_failed_calls(), 1);

    let ignored = plan.run(|| Err::<(), _>("404"), |_| CallOutcome::Ignored);
    assert_eq!(ignored, Ok(Err("404")));
    assert_eq!(
        breaker.metrics().number_of_buffered_calls(),
        1,
        "ignored: not buffered"
    );
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 4);
}

#[test]
fn a_panic_releases_every_guard_records_nothing_and_resumes() {
    let registry = registry_with(1, false);
    let plan = registry.plan(&BOTH_ORDERS[0]).unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Result<(), CallError> = plan.call(|| panic!("boom"));
    }));
    assert!(panicked.is_err(), "the panic resumes");
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    assert_eq!(
        registry
            .circuit_breaker("orders")
            .metrics()
            .number_of_buffered_calls(),
        0
    );
    // The guard works normally afterwards.
    let ok: Result<u8, CallError> = plan.call(|| Ok(1));
    assert_eq!(ok, Ok(1));
}

#[tokio::test]
async fn a_future_dropped_mid_call_releases_every_guard_and_records_nothing() {
    let registry = registry_with(1, false);
    let plan = registry.plan(&BOTH_ORDERS[1]).unwrap();
    let call = plan.call_async(|| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<(), CallError>(())
    });
    let timed_out = tokio::time::timeout(Duration::from_millis(10), call).await;
    assert!(timed_out.is_err());
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    assert_eq!(
        registry
            .circuit_breaker("orders")
            .metrics()
            .number_of_buffered_calls(),
        0
    );
}

#[tokio::test]
async fn a_dropped_half_open_probe_is_given_back() {
    let registry = Registry::new();
    registry
        .configure_circuit_breaker(
            "probe",
            CircuitBreakerConfig::builder()
                .permitted_calls_in_half_open_state(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    let breaker = registry.circuit_breaker("probe");
    breaker.transition_to_open_state().unwrap();
    breaker.transition_to_half_open_state().unwrap();
    let plan = registry.plan(&[Guard::circuit_breaker("probe")]).unwrap();
    let probe = plan.call_async(std::future::pending::<Result<(), CallError>>);
    assert!(tokio::time::timeout(Duration::from_millis(5), probe)
        .await
        .is_err());
    // The probe never completed: the next call may probe.
    let next: Result<(), CallError> = plan.call_async(|| async { Ok(()) }).await;
    assert_eq!(next, Ok(()));
    assert_eq!(breaker.state(), CircuitState::Closed);
}

#[tokio::test]
async fn async_overload_is_shed_by_the_bulkhead_before_the_breaker_whatever_the_order() {
    for guards in BOTH_ORDERS {
        let registry = Arc::new(registry_with(3, false));
        let plan = Arc::new(registry.plan(&guards).unwrap());
        let gate = Arc::new(tokio::sync::Notify::new());
        let mut tasks = Vec::new();
        for _ in 0..30 {
            let (plan, gate) = (plan.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                plan.call_future(async move {
                    gate.notified().await;
                    Ok::<(), CallError>(())
                })
                .await
            }));
        }
        // Let every task run to its first await: 3 admitted, 27 rejected at once.
        while registry.bulkhead("orders").metrics().rejected_calls() < 27 {
            tokio::task::yield_now().await;
        }
        gate.notify_waiters();
        let mut ok = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => ok += 1,
                Err(e) => assert!(
                    matches!(e.rejection(), Some(Rejected::BulkheadFull { .. })),
                    "{e:?}"
                ),
            }
        }
        assert_eq!(ok, 3);
        let metrics = registry.circuit_breaker("orders").metrics();
        assert_eq!(metrics.number_of_failed_calls(), 0);
        assert_eq!(metrics.number_of_successful_calls(), 3);
        assert_eq!(
            registry.circuit_breaker("orders").state(),
            CircuitState::Closed
        );
    }
}

#[test]
fn a_sync_call_re_entering_its_bulkhead_passes_through_and_counts_once() {
    let registry = registry_with(1, false);
    let plan = registry.plan(&BOTH_ORDERS[0]).unwrap();
    let inner_ran = AtomicUsize::new(0);
    let outer: Result<(), CallError> = plan.call(|| {
        // Same bulkhead (size 1, no wait) and same breaker on the same chain.
        plan.call(|| {
            inner_ran.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    });
    assert_eq!(outer, Ok(()));
    assert_eq!(inner_ran.load(Ordering::Relaxed), 1);
    assert_eq!(
        registry
            .circuit_breaker("orders")
            .metrics()
            .number_of_successful_calls(),
        1,
        "counted once"
    );
    assert_eq!(registry.bulkhead("orders").metrics().permitted_calls(), 1);
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

#[tokio::test]
async fn an_async_call_re_entering_its_bulkhead_passes_through_and_counts_once() {
    let registry = registry_with(1, false);
    let plan = registry.plan(&BOTH_ORDERS[1]).unwrap();
    let outer: Result<(), CallError> = plan
        .call_async(|| async {
            tokio::task::yield_now().await;
            plan.call_async(|| async { Ok::<(), CallError>(()) })
                .await?;
            // A sync guarded call inside the async one is on the same chain too.
            plan.call(|| Ok(()))
        })
        .await;
    assert_eq!(outer, Ok(()));
    assert_eq!(
        registry
            .circuit_breaker("orders")
            .metrics()
            .number_of_successful_calls(),
        1
    );
    assert_eq!(registry.bulkhead("orders").metrics().permitted_calls(), 1);
}

#[tokio::test]
async fn another_task_is_another_chain() {
    let registry = Arc::new(registry_with(1, false));
    let plan = Arc::new(registry.plan(&BOTH_ORDERS[0]).unwrap());
    let inner_plan = plan.clone();
    let outer: Result<Result<(), CallError>, CallError> = plan
        .call_future(async move {
            // A spawned task does not inherit the chain: the bulkhead of 1 is held, so it is
            // rejected rather than passed through.
            Ok(
                tokio::spawn(async move { inner_plan.call_async(|| async { Ok(()) }).await })
                    .await
                    .unwrap(),
            )
        })
        .await;
    let inner = outer.unwrap();
    assert!(matches!(
        inner,
        Err(CallError::Rejected(Rejected::BulkheadFull { .. }))
    ));
}

/// Two tasks polled in turn on one thread: a call of one task that waits mid-call leaves
/// nothing on the thread for the other task's calls to mistake for their own chain.
#[test]
fn tasks_interleaved_on_one_thread_do_not_share_a_chain() {
    let registry = Arc::new(registry_with(1, false));
    let plan = Arc::new(registry.plan(&BOTH_ORDERS[0]).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let holder = {
            let plan = plan.clone();
            tokio::spawn(async move {
                plan.call_future(async move {
                    released.await.unwrap();
                    Ok::<(), CallError>(())
                })
                .await
            })
        };
        // Let the holder take the only permit and park on its channel.
        tokio::task::yield_now().await;
        assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 0);
        let other = {
            let plan = plan.clone();
            tokio::spawn(async move { plan.call_async(|| async { Ok::<(), CallError>(()) }).await })
        };
        assert!(matches!(
            other.await.unwrap(),
            Err(CallError::Rejected(Rejected::BulkheadFull { .. }))
        ));
        release.send(()).unwrap();
        holder.await.unwrap().unwrap();
    });
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

#[test]
fn re_entry_can_be_rejected_or_allowed_by_policy() {
    let registry = registry_with(1, false);
    registry.set_reentrancy_policy(ReentrancyPolicy::Reject);
    let plan = registry.plan(&BOTH_ORDERS[0]).unwrap();
    let outer: Result<Result<(), CallError>, CallError> = plan.call(|| Ok(plan.call(|| Ok(()))));
    assert!(matches!(
        outer,
        Ok(Err(CallError::Rejected(Rejected::Reentrant {
            aspect: Aspect::Bulkhead,
            ..
        })))
    ));

    registry.set_reentrancy_policy(ReentrancyPolicy::Allow);
    let plan = registry.plan(&BOTH_ORDERS[0]).unwrap();
    let outer: Result<Result<(), CallError>, CallError> = plan.call(|| Ok(plan.call(|| Ok(()))));
    assert!(
        matches!(
            outer,
            Ok(Err(CallError::Rejected(Rejected::BulkheadFull { .. })))
        ),
        "acquired again: the bulkhead of 1 is full"
    );
}

#[test]
fn a_rejection_further_in_is_not_a_failure_of_the_breaker_outside() {
    // Breaker outside the bulkhead (precedence reversed), not recording rejections.
    let registry = registry_with(2, false);
    registry.set_precedence(Aspect::CircuitBreaker, 1).unwrap();
    let results = overload_sync(&registry, &BOTH_ORDERS[0], 20);
    assert!(results
        .iter()
        .all(|r| matches!(r, Err(CallError::Rejected(Rejected::BulkheadFull { .. })))));
    let breaker = registry.circuit_breaker("orders");
    assert_eq!(breaker.state(), CircuitState::Closed);
    assert_eq!(breaker.metrics().number_of_failed_calls(), 0);
    assert_eq!(breaker.metrics().number_of_successful_calls(), 2);
}

#[test]
fn a_task_driven_by_a_nested_block_on_is_not_on_the_sync_call_chain() {
    // A sync call holds the bulkhead of 1 and blocks on a runtime whose spawned tasks call
    // through the same bulkhead: those tasks are not on its call chain, so they must not pass
    // through; they are rejected (no wait configured).
    let registry = Arc::new(registry_with(1, false));
    let plan = Arc::new(registry.plan(&BOTH_ORDERS[0]).unwrap());
    let outer: Result<Vec<Result<(), CallError>>, CallError> = plan.call(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let results = runtime.block_on(async {
            let tasks: Vec<_> = (0..5)
                .map(|_| {
                    let plan = plan.clone();
                    tokio::spawn(async move { plan.call_async(|| async { Ok(()) }).await })
                })
                .collect();
            let mut results = Vec::new();
            for task in tasks {
                results.push(task.await.unwrap());
            }
            results
        });
        Ok(results)
    });
    let inner = outer.unwrap();
    assert_eq!(inner.len(), 5);
    assert!(
        inner
            .iter()
            .all(|r| matches!(r, Err(CallError::Rejected(Rejected::BulkheadFull { .. })))),
        "{inner:?}"
    );
}

#[test]
fn the_automatic_half_open_transition_runs_on_the_current_runtime_if_the_creating_one_ended() {
    use resilience_runtime::{CircuitBreaker, CircuitBreakerEvent};
    use std::sync::Mutex;

    let config = CircuitBreakerConfig::builder()
        .wait_duration_in_open_state(Duration::from_millis(50))
        .automatic_transition_from_open_to_half_open(true)
        .build()
        .unwrap();
    // Created inside a runtime that is gone by the time the breaker opens.
    let breaker = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { Arc::new(CircuitBreaker::new("timers", config)) });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    breaker.subscribe(move |event| {
        if let CircuitBreakerEvent::StateTransition { to, .. } = event {
            sink.lock().unwrap().push(*to);
        }
    });
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async {
            breaker.transition_to_open_state().unwrap();
            // Paused time: the sleep advances the clock past the wait, nothing observes the
            // breaker, only its timer can move it.
            tokio::time::sleep(Duration::from_millis(200)).await;
        });
    assert_eq!(
        *seen.lock().unwrap(),
        [CircuitState::Open, CircuitState::HalfOpen]
    );
}

/// Enters bulkheads `level..8` one inside the other, then re-enters every one of them at the
/// deepest level: each must pass through (held on the chain), none may reject.
fn nested(
    plans: Arc<Vec<resilience_runtime::Plan>>,
    level: usize,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<usize, CallError>> + Send>> {
    Box::pin(async move {
        if level == plans.len() {
            let mut passed = 0;
            for plan in plans.iter() {
                plan.call_async(|| async { Ok::<(), CallError>(()) })
                    .await?;
                passed += 1;
            }
            return Ok(passed);
        }
        let inner = plans.clone();
        plans[level].call_future(nested(inner, level + 1)).await
    })
}

#[tokio::test]
async fn re_entry_is_recognised_along_a_chain_deeper_than_the_inline_ids() {
    let registry = Registry::new();
    let plans: Vec<_> = (0..8)
        .map(|i| {
            let name = format!("deep-{i}");
            registry
                .configure_bulkhead(
                    name.as_str(),
                    BulkheadConfig::builder()
                        .max_concurrent_calls(1)
                        .build()
                        .unwrap(),
                )
                .unwrap();
            registry
                .plan(&[Guard::new(Aspect::Bulkhead, &name)])
                .unwrap()
        })
        .collect();
    assert_eq!(nested(Arc::new(plans), 0).await, Ok(8));
}
