//! A sync guarded function called from async code, when a guard makes it wait: on a
//! multi-thread runtime it waits without stalling the worker's other tasks
//! (`block_in_place`); on a current-thread runtime it does not wait at all (a rejection that
//! says why, or a retry that ends), because the task that would let it in may be one that the
//! blocked thread runs. On a `spawn_blocking` thread, `allow_blocking` lets it wait.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::{
    allow_blocking, bulkhead, rate_limiter, retry, Aspect, Bulkhead, BulkheadConfig,
    RateLimiterConfig, Registry, Rejected, RetryConfig,
};
use resilience_tests::CallError;

/// Configures the bulkhead `name` in the global registry (the macros' registry): one call at a
/// time, callers waiting up to 5 s for it.
fn one_call_waiting(name: &'static str) -> Arc<Bulkhead> {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(Duration::from_secs(5))
        .build()
        .unwrap();
    Registry::global().configure_bulkhead(name, config).unwrap();
    Registry::global().bulkhead(name)
}

#[bulkhead(name = "sync_in_async.current_thread")]
fn ledger_on_current_thread() -> Result<u32, CallError> {
    Ok(7)
}

#[bulkhead(name = "sync_in_async.multi_thread")]
fn ledger_on_multi_thread() -> Result<u32, CallError> {
    Ok(7)
}

#[bulkhead(name = "sync_in_async.spawn_blocking")]
fn ledger_on_blocking_thread() -> Result<u32, CallError> {
    Ok(7)
}

/// Holds `bulkhead`'s only permit in a task until `release` fires; returns once it is held.
async fn hold_permit(bulkhead: Arc<Bulkhead>, hold: Duration) -> tokio::task::JoinHandle<()> {
    let (held, is_held) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn(async move {
        let permit = bulkhead.try_acquire().unwrap();
        held.send(()).unwrap();
        tokio::time::sleep(hold).await;
        drop(permit);
    });
    is_held.await.unwrap();
    holder
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime_a_full_bulkhead_refuses_at_once_saying_why() {
    let bulkhead = one_call_waiting("sync_in_async.current_thread");
    // The holder runs on this same thread: a blocked wait could never see it give back.
    let holder = hold_permit(bulkhead.clone(), Duration::from_millis(20)).await;

    let refused = ledger_on_current_thread().unwrap_err();
    let rejection = refused.rejection().unwrap();
    assert!(
        matches!(rejection, Rejected::WouldBlock { aspect: Aspect::Bulkhead, name, .. }
            if name == "sync_in_async.current_thread"),
        "{rejection:?}"
    );
    assert!(rejection.to_string().contains("make the function async"));
    assert_eq!(bulkhead.metrics().rejected_calls(), 1);

    holder.await.unwrap();
    // A free permit needs no wait, so the call is admitted on this thread as anywhere.
    assert_eq!(ledger_on_current_thread(), Ok(7));
}

#[test]
fn on_a_multi_thread_runtime_the_wait_hands_the_workers_tasks_on() {
    let bulkhead = one_call_waiting("sync_in_async.multi_thread");
    // One worker: had the waiting call blocked it, the holder's timer would never fire and the
    // call would give up after its 5 s as `BulkheadFull`.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async {
        let holder = hold_permit(bulkhead.clone(), Duration::from_millis(20)).await;
        let called = tokio::spawn(async { ledger_on_multi_thread() })
            .await
            .unwrap();
        holder.await.unwrap();
        called
    });
    assert_eq!(result, Ok(7));
    assert_eq!(bulkhead.metrics().rejected_calls(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_spawn_blocking_thread_of_a_current_thread_runtime_waits_inside_allow_blocking() {
    let bulkhead = one_call_waiting("sync_in_async.spawn_blocking");
    let holder = hold_permit(bulkhead.clone(), Duration::from_millis(20)).await;

    let waited = tokio::task::spawn_blocking(|| allow_blocking(ledger_on_blocking_thread));
    assert_eq!(waited.await.unwrap(), Ok(7));
    holder.await.unwrap();
    assert_eq!(bulkhead.metrics().rejected_calls(), 0);
}

#[rate_limiter(name = "sync_in_async.rate")]
fn quote() -> Result<u32, CallError> {
    Ok(3)
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime_a_rate_limiter_refuses_instead_of_sleeping_to_its_next_cycle()
{
    let config = RateLimiterConfig::builder()
        .limit_for_period(1)
        .limit_refresh_period(Duration::from_secs(30))
        .timeout_duration(Duration::from_secs(60))
        .build()
        .unwrap();
    Registry::global()
        .configure_rate_limiter("sync_in_async.rate", config)
        .unwrap();
    assert_eq!(quote(), Ok(3));
    let refused = quote().unwrap_err();
    assert!(
        matches!(refused.rejection(), Some(Rejected::WouldBlock { aspect: Aspect::RateLimiter, name, .. })
            if name == "sync_in_async.rate"),
        "{refused:?}"
    );
    // The permission of the next cycle it had reserved was given back.
    let limiter = Registry::global().rate_limiter("sync_in_async.rate");
    assert_eq!(limiter.metrics().number_of_waiting_threads(), 0);
}

static FLAKY_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(name = "sync_in_async.retry")]
fn flaky() -> Result<u32, CallError> {
    FLAKY_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(CallError::Downstream("down"))
}

#[test]
fn a_sync_retry_waits_between_attempts_on_a_multi_thread_runtime_and_ends_on_a_current_thread_one()
{
    let config = RetryConfig::builder()
        .max_attempts(3)
        .wait_duration(Duration::from_millis(5))
        .build()
        .unwrap();
    Registry::global()
        .configure_retry("sync_in_async.retry", config)
        .unwrap();
    let retry = Registry::global().retry("sync_in_async.retry");

    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let result = multi.block_on(async { tokio::spawn(async { flaky() }).await.unwrap() });
    assert_eq!(result, Err(CallError::Downstream("down")));
    assert_eq!(FLAKY_CALLS.swap(0, Ordering::SeqCst), 3);
    assert_eq!(
        retry.metrics().number_of_failed_calls_with_retry_attempt(),
        1
    );

    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = current.block_on(async { flaky() });
    // The first attempt's own error, not a rejection: the dependency's failure is the news.
    assert_eq!(result, Err(CallError::Downstream("down")));
    assert_eq!(FLAKY_CALLS.swap(0, Ordering::SeqCst), 1);
    assert_eq!(
        retry
            .metrics()
            .number_of_failed_calls_without_retry_attempt(),
        1
    );
}
