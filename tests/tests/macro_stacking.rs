//! What users write: stacked annotations behave the same in either written order, overload
//! is shed before the breaker sees it, and re-entry along a call chain counts once.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use resilience_runtime::{
    bulkhead, circuit_breaker, BulkheadConfig, CircuitBreakerConfig, CircuitState, Registry,
    Rejected, SlidingWindow,
};
use resilience_tests::CallError;

fn configure(name: &str, max_calls: u32) {
    let registry = Registry::global();
    registry
        .configure_bulkhead(
            name,
            BulkheadConfig::builder()
                .max_concurrent_calls(max_calls)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            name,
            CircuitBreakerConfig::builder()
                .failure_rate_threshold(50.0)
                .sliding_window(SlidingWindow::CountBased(10))
                .minimum_number_of_calls(4)
                .build()
                .unwrap(),
        )
        .unwrap();
}

#[bulkhead(name = "stack-bulkhead-first")]
#[circuit_breaker(name = "stack-bulkhead-first")]
fn bulkhead_written_first(hold: &Barrier) -> Result<(), CallError> {
    hold.wait(); // inside
    hold.wait(); // released
    Ok(())
}

#[circuit_breaker(name = "stack-breaker-first")]
#[bulkhead(name = "stack-breaker-first")]
fn breaker_written_first(hold: &Barrier) -> Result<(), CallError> {
    hold.wait(); // inside
    hold.wait(); // released
    Ok(())
}

/// Two calls hold the bulkhead of 2 on other threads while 20 more arrive.
fn overload(call: fn(&Barrier) -> Result<(), CallError>) -> Vec<Result<(), CallError>> {
    let entered = Arc::new(Barrier::new(3));
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let entered = entered.clone();
            std::thread::spawn(move || {
                call(&entered)?;
                Ok::<(), CallError>(())
            })
        })
        .collect();
    // Both holders are inside the guarded body once the barrier opens; they stay there until
    // it opens a second time.
    entered.wait();
    let free = Barrier::new(1);
    let results = (0..20).map(|_| call(&free)).collect();
    entered.wait();
    for holder in holders {
        holder.join().unwrap().unwrap();
    }
    results
}

#[test]
fn overload_is_shed_before_the_breaker_whatever_the_written_order() {
    for (name, call) in [
        (
            "stack-bulkhead-first",
            bulkhead_written_first as fn(&Barrier) -> _,
        ),
        ("stack-breaker-first", breaker_written_first),
    ] {
        configure(name, 2);
        let results = overload(call);
        assert!(
            results.iter().all(|r| matches!(
                r,
                Err(CallError::Rejected(Rejected::BulkheadFull { name: n, .. })) if n == name
            )),
            "{name}: {results:?}"
        );
        let breaker = Registry::global().circuit_breaker(name);
        assert_eq!(breaker.state(), CircuitState::Closed, "{name}");
        assert_eq!(breaker.metrics().number_of_failed_calls(), 0, "{name}");
        assert_eq!(breaker.metrics().number_of_successful_calls(), 2, "{name}");
    }
}

#[bulkhead(name = "stack-async-a")]
#[circuit_breaker(name = "stack-async-a")]
async fn async_bulkhead_written_first(gate: Arc<tokio::sync::Notify>) -> Result<(), CallError> {
    gate.notified().await;
    Ok(())
}

#[circuit_breaker(name = "stack-async-b")]
#[bulkhead(name = "stack-async-b")]
async fn async_breaker_written_first(gate: Arc<tokio::sync::Notify>) -> Result<(), CallError> {
    gate.notified().await;
    Ok(())
}

#[tokio::test]
async fn async_overload_is_shed_before_the_breaker_whatever_the_written_order() {
    for name in ["stack-async-a", "stack-async-b"] {
        configure(name, 3);
        let gate = Arc::new(tokio::sync::Notify::new());
        let tasks: Vec<_> = (0..30)
            .map(|_| {
                let gate = gate.clone();
                tokio::spawn(async move {
                    if name == "stack-async-a" {
                        async_bulkhead_written_first(gate).await
                    } else {
                        async_breaker_written_first(gate).await
                    }
                })
            })
            .collect();
        let bulkhead = Registry::global().bulkhead(name);
        while bulkhead.metrics().rejected_calls() < 27 {
            tokio::task::yield_now().await;
        }
        gate.notify_waiters();
        let mut succeeded = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => succeeded += 1,
                Err(e) => assert!(matches!(e.rejection(), Some(Rejected::BulkheadFull { .. }))),
            }
        }
        assert_eq!(succeeded, 3);
        let breaker = Registry::global().circuit_breaker(name);
        assert_eq!(breaker.state(), CircuitState::Closed);
        assert_eq!(breaker.metrics().number_of_failed_calls(), 0);
    }
}

#[bulkhead(name = "stack-reentry")]
#[circuit_breaker(name = "stack-reentry")]
fn outer_sync(depth: u32) -> Result<u32, CallError> {
    if depth == 0 {
        return Ok(0);
    }
    // Same bulkhead (size 1, no wait) and breaker, re-entered on the same thread.
    Ok(inner_sync(depth - 1)? + 1)
}

#[circuit_breaker(name = "stack-reentry")]
#[bulkhead(name = "stack-reentry")]
fn inner_sync(depth: u32) -> Result<u32, CallError> {
    outer_sync(depth)
}

#[test]
fn a_guarded_call_re_entering_its_guards_counts_once_and_does_not_reject_itself() {
    configure("stack-reentry", 1);
    assert_eq!(outer_sync(3), Ok(3));
    let registry = Registry::global();
    assert_eq!(
        registry
            .bulkhead("stack-reentry")
            .metrics()
            .permitted_calls(),
        1
    );
    assert_eq!(
        registry
            .bulkhead("stack-reentry")
            .metrics()
            .rejected_calls(),
        0
    );
    assert_eq!(
        registry
            .circuit_breaker("stack-reentry")
            .metrics()
            .number_of_successful_calls(),
        1
    );
}

#[bulkhead(name = "stack-reentry-async")]
#[circuit_breaker(name = "stack-reentry-async")]
async fn outer_async() -> Result<u32, CallError> {
    tokio::time::sleep(Duration::from_millis(1)).await;
    let inner = inner_async().await?;
    Ok(inner + 1)
}

#[bulkhead(name = "stack-reentry-async")]
async fn inner_async() -> Result<u32, CallError> {
    tokio::task::yield_now().await;
    // A sync guarded call on the same chain.
    inner_sync_of_async()
}

#[circuit_breaker(name = "stack-reentry-async")]
fn inner_sync_of_async() -> Result<u32, CallError> {
    Ok(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_call_chain_re_entering_its_guards_counts_once() {
    configure("stack-reentry-async", 1);
    assert_eq!(tokio::spawn(outer_async()).await.unwrap(), Ok(2));
    let registry = Registry::global();
    assert_eq!(
        registry
            .bulkhead("stack-reentry-async")
            .metrics()
            .permitted_calls(),
        1
    );
    assert_eq!(
        registry
            .circuit_breaker("stack-reentry-async")
            .metrics()
            .number_of_successful_calls(),
        1
    );
}

fn is_client_error(e: &CallError) -> bool {
    matches!(e, CallError::Downstream("bad request"))
}

#[circuit_breaker(name = "stack-classify", ignore = is_client_error)]
fn classified(fail: &'static str) -> Result<(), CallError> {
    Err(CallError::Downstream(fail))
}

fn is_transient(e: &CallError) -> bool {
    matches!(e, CallError::Downstream("timeout"))
}

#[circuit_breaker(name = "stack-record", record = is_transient)]
fn recorded(fail: &'static str) -> Result<(), CallError> {
    Err(CallError::Downstream(fail))
}

#[test]
fn ignore_and_record_predicates_choose_what_the_breaker_counts() {
    let _ = classified("bad request");
    let _ = classified("timeout");
    let metrics = Registry::global()
        .circuit_breaker("stack-classify")
        .metrics();
    assert_eq!(metrics.number_of_failed_calls(), 1);
    assert_eq!(
        metrics.number_of_buffered_calls(),
        1,
        "the ignored error is not buffered"
    );

    let _ = recorded("timeout");
    let _ = recorded("bad request");
    let metrics = Registry::global().circuit_breaker("stack-record").metrics();
    assert_eq!(metrics.number_of_failed_calls(), 1);
    // Resilience4j's rule: an error that `record` does not match counts as a success.
    assert_eq!(metrics.number_of_successful_calls(), 1);
}

mod core {}

#[bulkhead(name = "stack-hygiene")]
fn hygiene(__plan: u32, __entered: u32, __rejected: u32) -> Result<u32, CallError> {
    let __output = __plan + __entered + __rejected;
    let __result = __output;
    Ok(__result)
}

#[test]
fn user_names_never_clash_with_generated_ones() {
    assert_eq!(hygiene(1, 2, 3), Ok(6));
}
