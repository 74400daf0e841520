//! The call chain at its edges: cancellation, panics in a poll, completed futures, waits, siblings in one task, nested executors, a plan of one guard.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use resilience_runtime::{
    BulkheadConfig, CallOutcome, CircuitBreakerConfig, Guard, Registry, Rejected,
};
use resilience_tests::CallError;

fn registry_with(bulkhead_calls: u32) -> Registry {
    resilience_tests::orders_registry(bulkhead_calls, false)
}

const BOTH: [Guard; 2] = [Guard::bulkhead("orders"), Guard::circuit_breaker("orders")];

struct OnDrop<F: FnMut()>(F);
impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

struct NoopWake;
impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// A call cancelled mid-run: its body's destructors run while the call still holds its
/// permits. Before the change (`TASK_CHAIN.scope`, whose `TaskLocalFuture` drops the inner
/// future inside the scope) a guarded call made from such a destructor was on the chain and
/// passed through; now the entries are pushed only while polling, so it tries to acquire the
/// bulkhead of 1 the cancelled call still holds.
#[tokio::test]
async fn a_cancelled_call_s_destructors_still_run_on_its_chain() {
    let registry = Arc::new(registry_with(1));
    let plan = Arc::new(registry.plan(&BOTH).unwrap());
    let seen: Arc<Mutex<Option<Result<(), CallError>>>> = Arc::new(Mutex::new(None));
    let call = {
        let (outer, inner, seen) = (plan.clone(), plan.clone(), seen.clone());
        async move {
            outer
                .call_future(async move {
                    // E.g. a transaction guard that rolls back through the same guarded client.
                    let _rollback = OnDrop(move || {
                        let r: Result<(), CallError> = inner.call(|| Ok(()));
                        *seen.lock().unwrap() = Some(r);
                    });
                    std::future::pending::<()>().await;
                    Ok::<(), CallError>(())
                })
                .await
        }
    };
    assert!(tokio::time::timeout(Duration::from_millis(10), call)
        .await
        .is_err());
    assert_eq!(
        *seen.lock().unwrap(),
        Some(Ok(())),
        "the destructor's call re-entered the held bulkhead: it should pass through"
    );
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// Two guarded calls joined in one task are siblings, not nested: the second must not pass
/// through the bulkhead the first holds.
#[tokio::test]
async fn sibling_calls_joined_in_one_task_do_not_pass_through_each_other() {
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let first = plan.call_async(|| async {
        tokio::task::yield_now().await;
        Ok::<(), CallError>(())
    });
    let second = plan.call_async(|| async { Ok::<(), CallError>(()) });
    let (a, b) = tokio::join!(first, second);
    assert_eq!(a, Ok(()));
    assert!(
        matches!(b, Err(CallError::Rejected(Rejected::BulkheadFull { .. }))),
        "{b:?}"
    );
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// A task spawned on a `LocalSet` that a guarded call drives is another task: not on the
/// call's chain. (Before the change the task-local leaked into it and it passed through.)
#[tokio::test]
async fn a_local_set_task_driven_inside_a_guarded_call_is_another_chain() {
    let registry = Arc::new(registry_with(1));
    let plan = Arc::new(registry.plan(&BOTH).unwrap());
    let inner_plan = plan.clone();
    let outer: Result<Result<(), CallError>, CallError> = plan
        .call_future(async move {
            let local = tokio::task::LocalSet::new();
            Ok(local
                .run_until(async move {
                    tokio::task::spawn_local(async move {
                        inner_plan.call_async(|| async { Ok(()) }).await
                    })
                    .await
                    .unwrap()
                })
                .await)
        })
        .await;
    assert!(
        matches!(
            outer,
            Ok(Err(CallError::Rejected(Rejected::BulkheadFull { .. })))
        ),
        "{outer:?}"
    );
}

/// A panic while a guarded future is polled leaves nothing on the thread's chain, and the
/// permits are released.
#[test]
fn a_panic_in_a_poll_leaves_nothing_on_the_chain() {
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    {
        let mut call = pin!(plan.call_async(|| async {
            panic!("boom");
            #[allow(unreachable_code)]
            Ok::<(), CallError>(())
        }));
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = call.as_mut().poll(&mut Context::from_waker(&waker));
        }));
        assert!(polled.is_err());
    }
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    // A later call on this thread is not nested in anything: it takes a permit.
    let ok: Result<(), CallError> = plan.call(|| Ok(()));
    assert_eq!(ok, Ok(()));
    assert_eq!(registry.bulkhead("orders").metrics().permitted_calls(), 2);
}

/// Permits of a call whose body panicked while polled through `Entered::run_async`: released
/// by the unwind (as an `async fn` releases its locals), not only when the future is dropped.
#[test]
fn a_panic_in_entered_run_async_releases_the_permits_during_the_unwind() {
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    let mut entered = pin!(plan.enter_async());
    let Poll::Ready(Ok(entered)) = entered.as_mut().poll(&mut Context::from_waker(&waker)) else {
        panic!("free guards admit at once");
    };
    let mut call = pin!(entered.run_async(
        async {
            panic!("boom");
        },
        |_: &()| CallOutcome::Success,
    ));
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = call.as_mut().poll(&mut Context::from_waker(&waker));
    }));
    assert!(polled.is_err());
    assert_eq!(
        registry.bulkhead("orders").available_concurrent_calls(),
        1,
        "the future is still alive (e.g. inside a CatchUnwind): is the permit held?"
    );
}

/// A future polled again after it completed: the guarded call's own future should refuse
/// (panic) without polling the user's completed future again.
#[test]
fn a_completed_call_is_not_polled_again() {
    struct CountPolls(Arc<AtomicUsize>);
    impl Future for CountPolls {
        type Output = ();
        fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Poll::Ready(())
        }
    }
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    let polls = Arc::new(AtomicUsize::new(0));
    let entered = plan.enter().unwrap();
    let mut call = pin!(entered.run_async(CountPolls(polls.clone()), |_| CallOutcome::Success));
    assert!(call
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready());
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = call.as_mut().poll(&mut Context::from_waker(&waker));
    }));
    assert!(again.is_err(), "polled after completion: a panic");
    assert_eq!(
        polls.load(Ordering::Relaxed),
        1,
        "the user's future was polled again"
    );
}

fn waiting_registry(breaker_outside: bool) -> Registry {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "w",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(Duration::from_secs(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "w",
            CircuitBreakerConfig::builder()
                .permitted_calls_in_half_open_state(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    if breaker_outside {
        registry
            .set_precedence(resilience_runtime::Aspect::CircuitBreaker, 10)
            .unwrap();
    }
    registry
}

/// A call that waited in the bulkhead queue goes on to the breaker inside it.
#[tokio::test]
async fn a_call_that_waited_goes_on_to_the_guards_inside() {
    let registry = Arc::new(waiting_registry(false));
    let plan = Arc::new(
        registry
            .plan(&[Guard::bulkhead("w"), Guard::circuit_breaker("w")])
            .unwrap(),
    );
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
    while registry.bulkhead("w").available_concurrent_calls() != 0 {
        tokio::task::yield_now().await;
    }
    let waiter = {
        let plan = plan.clone();
        tokio::spawn(async move { plan.call_async(|| async { Ok::<(), CallError>(()) }).await })
    };
    tokio::task::yield_now().await;
    release.send(()).unwrap();
    holder.await.unwrap().unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(
        registry
            .circuit_breaker("w")
            .metrics()
            .number_of_successful_calls(),
        2
    );
    assert_eq!(registry.bulkhead("w").available_concurrent_calls(), 1);
}

/// Breaker outside: a half-open probe permit taken by a call that then waits in the bulkhead
/// queue is given back when that call is dropped while it waits.
#[tokio::test]
async fn a_call_dropped_while_waiting_gives_back_the_probe_it_took_outside() {
    let registry = Arc::new(waiting_registry(true));
    let plan = Arc::new(
        registry
            .plan(&[Guard::bulkhead("w"), Guard::circuit_breaker("w")])
            .unwrap(),
    );
    // Hold the bulkhead with a call that skips the breaker.
    let bulkhead_only = registry.plan(&[Guard::bulkhead("w")]).unwrap();
    let entered = bulkhead_only.enter().unwrap();
    let breaker = registry.circuit_breaker("w");
    breaker.transition_to_open_state().unwrap();
    breaker.transition_to_half_open_state().unwrap();
    let waiting = plan.call_async(|| async { Ok::<(), CallError>(()) });
    assert!(tokio::time::timeout(Duration::from_millis(20), waiting)
        .await
        .is_err());
    drop(entered);
    assert_eq!(registry.bulkhead("w").available_concurrent_calls(), 1);
    // The probe was given back: the next call may probe, and closes the breaker.
    let next: Result<(), CallError> = plan.call_async(|| async { Ok(()) }).await;
    assert_eq!(next, Ok(()));
    assert_eq!(breaker.state(), resilience_runtime::CircuitState::Closed);
}

/// A call that completes: its future is dropped while the call still holds its permits, on
/// its chain, as a cancelled one is. A guarded call made from the future's destructor (a
/// rollback through the same guarded client) passes through the bulkhead of 1 the call holds.
#[test]
fn a_completed_call_s_destructors_still_run_on_its_chain() {
    struct ReadyThenRollback<F: FnMut()>(F);
    impl<F: FnMut()> Future for ReadyThenRollback<F> {
        type Output = Result<(), CallError>;
        fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Ready(Ok(()))
        }
    }
    impl<F: FnMut()> Drop for ReadyThenRollback<F> {
        fn drop(&mut self) {
            (self.0)();
        }
    }
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    let seen: Mutex<Option<Result<(), CallError>>> = Mutex::new(None);
    {
        let mut future = Some(ReadyThenRollback(|| {
            *seen.lock().unwrap() = Some(plan.call(|| Ok(())));
        }));
        let mut call = pin!(plan.call_async(|| future.take().expect("the plan makes one attempt")));
        let polled = call.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(Ok(())));
    }
    assert_eq!(
        *seen.lock().unwrap(),
        Some(Ok(())),
        "the destructor's call re-entered the held bulkhead: it should pass through"
    );
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// A nested call that panics, caught inside the outer call's body: the chain goes back to the
/// outer call (not to empty), so a later re-entry in the same body still passes through the
/// bulkhead of 1 the outer call holds.
#[test]
fn a_nested_panic_caught_in_the_body_leaves_the_outer_call_on_the_chain() {
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let outer: Result<Result<(), CallError>, CallError> = plan.call(|| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: Result<(), CallError> = plan.call(|| panic!("boom"));
        }));
        assert!(caught.is_err());
        Ok(plan.call(|| Ok(())))
    });
    assert_eq!(
        outer,
        Ok(Ok(())),
        "the re-entry after the caught panic passes through"
    );
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// Three calls deep, the middle one holding nothing (it passed through every guard): the
/// innermost still finds the outer call's permits beyond it, and passes through too.
#[test]
fn a_call_that_holds_nothing_does_not_hide_the_calls_around_it() {
    let registry = registry_with(1);
    let plan = registry.plan(&BOTH).unwrap();
    let outer: Result<Result<Result<(), CallError>, CallError>, CallError> =
        plan.call(|| Ok(plan.call(|| Ok(plan.call(|| Ok(()))))));
    assert_eq!(outer, Ok(Ok(Ok(()))));
    assert_eq!(registry.bulkhead("orders").metrics().permitted_calls(), 1);
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// A plan of one guard takes a path of its own when no guarded call runs on the thread; nested
/// in a call that holds its instance it must still see the chain: through a full bulkhead of 1
/// under the default policy, refused as re-entrant under `Reject`, and its own permit, taken
/// when the chain was empty, on the chain for the calls inside it.
#[test]
fn a_plan_of_one_guard_nested_in_its_own_call_sees_the_chain() {
    let registry = registry_with(1);
    let bulkhead = registry.plan(&[Guard::bulkhead("orders")]).unwrap();
    let nested: Result<Result<(), CallError>, CallError> =
        bulkhead.call(|| Ok(bulkhead.call(|| Ok(()))));
    assert_eq!(nested, Ok(Ok(())), "the inner call passes through");
    assert_eq!(registry.bulkhead("orders").metrics().permitted_calls(), 1);

    registry.set_reentrancy_policy(resilience_runtime::ReentrancyPolicy::Reject);
    let bulkhead = registry.plan(&[Guard::bulkhead("orders")]).unwrap();
    let refused: Result<Result<(), CallError>, CallError> =
        bulkhead.call(|| Ok(bulkhead.call(|| Ok(()))));
    match refused {
        Ok(Err(CallError::Rejected(Rejected::Reentrant { .. }))) => {}
        other => panic!("expected the inner call refused as re-entrant, got {other:?}"),
    }
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// The one-guard path releases on every path too: a panic in the call or in the
/// classification gives the permit back and records nothing; a full bulkhead refuses and takes
/// nothing; a bulkhead that makes callers wait lets the call wait for the permit.
#[test]
fn a_plan_of_one_guard_releases_on_every_path() {
    let registry = registry_with(1);
    let breaker = registry.plan(&[Guard::circuit_breaker("orders")]).unwrap();
    let bulkhead = registry.plan(&[Guard::bulkhead("orders")]).unwrap();
    assert_panics(|| {
        let _: Result<(), CallError> = bulkhead.call(|| panic!("the call fails hard"));
    });
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    assert_panics(|| {
        let _ = bulkhead.run(|| 7, |_| panic!("the classification fails"));
    });
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    assert_panics(|| {
        let _: Result<(), CallError> = breaker.call(|| panic!("the call fails hard"));
    });
    assert_panics(|| {
        let _ = breaker.run(|| 7, |_| panic!("the classification fails"));
    });
    let metrics = registry.circuit_breaker("orders").metrics();
    assert_eq!(
        metrics.number_of_buffered_calls(),
        0,
        "a panic records nothing"
    );

    // Full: held outside any guarded call, so the plan takes its one-gate path.
    let instance = registry.bulkhead("orders");
    let held = instance.try_acquire().unwrap();
    let refused: Result<(), CallError> = bulkhead.call(|| Ok(()));
    assert!(matches!(
        refused,
        Err(CallError::Rejected(Rejected::BulkheadFull { .. }))
    ));
    drop(held);
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    assert_eq!(bulkhead.call(|| Ok::<_, CallError>(3)), Ok(3));
}

/// A bulkhead that makes callers wait: the one-guard path blocks for the permit a call on
/// another thread gives back.
#[test]
fn a_plan_of_one_waiting_bulkhead_waits_for_the_permit() {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "orders",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(Duration::from_secs(10))
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&[Guard::bulkhead("orders")]).unwrap();
    let instance = registry.bulkhead("orders");
    let held = instance.try_acquire().unwrap();
    let calling = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Released 20 ms after the call starts: it finds the bulkhead full and waits.
            while !calling.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(20));
            drop(held);
        });
        calling.store(true, Ordering::SeqCst);
        assert_eq!(plan.call(|| Ok::<_, CallError>(5)), Ok(5));
    });
    assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
}

/// A result whose drop reads how many permits the bulkhead has free.
struct Observes<'r>(&'r Registry, &'r AtomicUsize);
impl Drop for Observes<'_> {
    fn drop(&mut self) {
        let free = self.0.bulkhead("orders").available_concurrent_calls();
        self.1
            .store(usize::try_from(free).unwrap(), Ordering::SeqCst);
    }
}

/// A classification that panics: the call's result is dropped while its permits are still
/// held (its destructor is part of the call, and may call through the same guards), then the
/// permits go. The same on the one-guard path as on the general one.
#[test]
fn a_panicking_classification_drops_the_result_before_the_permits() {
    let registry = registry_with(1);
    for guards in [&[Guard::bulkhead("orders")][..], &BOTH[..]] {
        let plan = registry.plan(guards).unwrap();
        let free_at_drop = AtomicUsize::new(usize::MAX);
        assert_panics(|| {
            let _ = plan.run(
                || Observes(&registry, &free_at_drop),
                |_| panic!("the classification fails"),
            );
        });
        assert_eq!(
            free_at_drop.load(Ordering::SeqCst),
            0,
            "{guards:?}: the result was dropped after the permit went"
        );
        assert_eq!(registry.bulkhead("orders").available_concurrent_calls(), 1);
    }
}

/// Runs `f`, which must panic (the panic is caught here).
fn assert_panics(f: impl FnOnce()) {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(caught.is_err(), "expected a panic");
}
