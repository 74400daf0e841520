//! `#[retry]` and `#[time_limiter]` as users write them: stacked with the gates in any source
//! order, on functions, methods and impl blocks, sync and async, with fallbacks.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use resilience_runtime::{
    bulkhead, circuit_breaker, rate_limiter, retry, time_limiter, Registry, Rejected, RetryConfig,
    TimeLimiterConfig,
};
use resilience_tests::CallError;

fn quick_retry(name: &str, attempts: u32) {
    Registry::global()
        .configure_retry(
            name,
            RetryConfig::builder()
                .max_attempts(attempts)
                .wait_duration(Duration::from_millis(1))
                .build()
                .unwrap(),
        )
        .unwrap();
}

fn time_limit(name: &str, timeout: Duration) {
    Registry::global()
        .configure_time_limiter(
            name,
            TimeLimiterConfig::builder()
                .timeout_duration(timeout)
                .build()
                .unwrap(),
        )
        .unwrap();
}

/// A by-value argument that counts its clones: each retried attempt gets one.
#[derive(Debug)]
struct Order {
    clones: &'static AtomicU32,
}

impl Clone for Order {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Order {
            clones: self.clones,
        }
    }
}

static SYNC_ATTEMPTS: AtomicU32 = AtomicU32::new(0);
static SYNC_CLONES: AtomicU32 = AtomicU32::new(0);

#[retry(name = "wrap-sync")]
#[bulkhead(name = "wrap-sync")]
fn place(order: Order, note: &str) -> Result<String, CallError> {
    let _owned: Order = order;
    match SYNC_ATTEMPTS.fetch_add(1, Ordering::SeqCst) {
        0 | 1 => Err(CallError::Downstream("busy")),
        _ => Ok(note.to_uppercase()),
    }
}

#[test]
fn a_sync_function_is_retried_with_a_clone_of_its_by_value_arguments_per_attempt() {
    quick_retry("wrap-sync", 3);
    let placed = place(
        Order {
            clones: &SYNC_CLONES,
        },
        "book",
    );
    assert_eq!(placed, Ok("BOOK".to_owned()));
    assert_eq!(SYNC_ATTEMPTS.load(Ordering::SeqCst), 3);
    assert_eq!(SYNC_CLONES.load(Ordering::SeqCst), 3);
    let bulkhead = Registry::global().bulkhead("wrap-sync");
    assert_eq!(bulkhead.metrics().permitted_calls(), 1, "admitted once");
}

fn is_transient(e: &CallError) -> bool {
    matches!(e, CallError::Downstream("busy"))
}

static NARROW_ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(name = "wrap-narrow", retry_on = is_transient)]
fn narrowed(fail_with: &'static str) -> Result<(), CallError> {
    NARROW_ATTEMPTS.fetch_add(1, Ordering::SeqCst);
    Err(CallError::Downstream(fail_with))
}

#[test]
fn retry_on_chooses_the_errors_that_are_retried() {
    quick_retry("wrap-narrow", 3);
    assert!(narrowed("gone").is_err());
    assert_eq!(NARROW_ATTEMPTS.load(Ordering::SeqCst), 1);
    assert!(narrowed("busy").is_err());
    assert_eq!(NARROW_ATTEMPTS.load(Ordering::SeqCst), 1 + 3);
    let metrics = Registry::global().retry("wrap-narrow").metrics();
    assert_eq!(metrics.number_of_failed_calls_without_retry_attempt(), 1);
    assert_eq!(metrics.number_of_failed_calls_with_retry_attempt(), 1);
}

static FIVE_A: AtomicU32 = AtomicU32::new(0);
static FIVE_B: AtomicU32 = AtomicU32::new(0);

#[time_limiter(name = "wrap-five-a")]
#[circuit_breaker(name = "wrap-five-a")]
#[retry(name = "wrap-five-a")]
#[rate_limiter(name = "wrap-five-a")]
#[bulkhead(name = "wrap-five-a")]
async fn five_written_inside_out(slow_first: bool) -> Result<u32, CallError> {
    let attempt = FIVE_A.fetch_add(1, Ordering::SeqCst);
    if slow_first && attempt == 0 {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    Ok(attempt)
}

#[bulkhead(name = "wrap-five-b")]
#[rate_limiter(name = "wrap-five-b")]
#[retry(name = "wrap-five-b")]
#[circuit_breaker(name = "wrap-five-b")]
#[time_limiter(name = "wrap-five-b")]
async fn five_written_outside_in(slow_first: bool) -> Result<u32, CallError> {
    let attempt = FIVE_B.fetch_add(1, Ordering::SeqCst);
    if slow_first && attempt == 0 {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    Ok(attempt)
}

#[tokio::test(start_paused = true)]
async fn five_aspects_in_either_source_order_time_out_the_attempt_and_retry_it() {
    for name in ["wrap-five-a", "wrap-five-b"] {
        quick_retry(name, 2);
        time_limit(name, Duration::from_millis(50));
    }
    assert_eq!(five_written_inside_out(true).await, Ok(1));
    assert_eq!(five_written_outside_in(true).await, Ok(1));
    for name in ["wrap-five-a", "wrap-five-b"] {
        let registry = Registry::global();
        let breaker = registry.circuit_breaker(name).metrics();
        assert_eq!(breaker.number_of_failed_calls(), 1, "{name}: the time-out");
        assert_eq!(breaker.number_of_successful_calls(), 1, "{name}");
        let limiter = registry.time_limiter(name).metrics();
        assert_eq!(limiter.number_of_timed_out_calls(), 1, "{name}");
        let bulkhead = registry.bulkhead(name);
        assert_eq!(bulkhead.metrics().permitted_calls(), 1, "{name}");
        assert_eq!(
            bulkhead.available_concurrent_calls(),
            bulkhead.max_allowed_concurrent_calls()
        );
    }
}

async fn cached(id: u32, rejected: Rejected) -> Result<String, CallError> {
    Ok(format!("cached {id} ({})", rejected.aspect()))
}

#[time_limiter(name = "wrap-fallback", fallback = cached)]
async fn fetch(id: u32) -> Result<String, CallError> {
    tokio::time::sleep(Duration::from_secs(10)).await;
    Ok(format!("fresh {id}"))
}

#[tokio::test(start_paused = true)]
async fn a_fallback_receives_the_arguments_of_a_call_that_was_cut_off() {
    time_limit("wrap-fallback", Duration::from_millis(5));
    assert_eq!(fetch(7).await, Ok("cached 7 (time limiter)".to_owned()));
}

async fn cached_guarded(id: u32, _slow: bool, rejected: Rejected) -> Result<String, CallError> {
    cached(id, rejected).await
}

/// A gate and a time limiter, no retry: the body's future is made once (its arguments kept by
/// value), through the entry for stacks of more than one annotation.
#[bulkhead(name = "wrap-gate-limit")]
#[time_limiter(name = "wrap-gate-limit", fallback = cached_guarded)]
async fn fetch_guarded(id: u32, slow: bool) -> Result<String, CallError> {
    if slow {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    Ok(format!("fresh {id}"))
}

#[tokio::test(start_paused = true)]
async fn a_gate_around_a_time_limiter_admits_once_and_gets_its_permit_back_from_a_cut_off_call() {
    time_limit("wrap-gate-limit", Duration::from_millis(5));
    assert_eq!(fetch_guarded(1, false).await, Ok("fresh 1".to_owned()));
    assert_eq!(
        fetch_guarded(2, true).await,
        Ok("cached 2 (time limiter)".to_owned())
    );
    let registry = Registry::global();
    let limiter = registry.time_limiter("wrap-gate-limit").metrics();
    assert_eq!(limiter.number_of_timed_out_calls(), 1);
    let bulkhead = registry.bulkhead("wrap-gate-limit");
    assert_eq!(bulkhead.metrics().permitted_calls(), 2);
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls(),
        "the cut-off call's permit is back"
    );
}

struct Ledger {
    calls: AtomicU32,
}

/// A method's own retry inside the gate its impl block declares: a stack of two, merged.
#[bulkhead(name = "wrap-impl-gate")]
impl Ledger {
    #[retry(name = "wrap-impl-gate")]
    async fn post(&self) -> Result<u32, CallError> {
        let calls = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if calls == 1 {
            return Err(CallError::Downstream("busy"));
        }
        Ok(calls)
    }
}

#[tokio::test]
async fn a_method_retries_inside_the_gate_of_its_impl_block() {
    quick_retry("wrap-impl-gate", 2);
    let ledger = Ledger {
        calls: AtomicU32::new(0),
    };
    assert_eq!(ledger.post().await, Ok(2));
    let bulkhead = Registry::global().bulkhead("wrap-impl-gate");
    assert_eq!(
        bulkhead.metrics().permitted_calls(),
        1,
        "admitted once, outside the retry"
    );
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls()
    );
    let retry = Registry::global().retry("wrap-impl-gate").metrics();
    assert_eq!(retry.number_of_successful_calls_with_retry_attempt(), 1);
}

struct Inventory {
    calls: AtomicU32,
}

#[retry(name = "wrap-impl")]
impl Inventory {
    fn new() -> Self {
        Inventory {
            calls: AtomicU32::new(0),
        }
    }

    async fn reserve(&self, sku: String) -> Result<String, CallError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(CallError::Downstream("busy"));
        }
        Ok(sku)
    }

    fn count(&mut self) -> Result<u32, CallError> {
        let calls = self.calls.get_mut();
        *calls += 1;
        if *calls % 2 == 1 {
            Err(CallError::Downstream("odd"))
        } else {
            Ok(*calls)
        }
    }
}

// Multi-thread: on a current-thread runtime the sync method would not block the runtime's
// only thread to wait between attempts (see `sync_in_async.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn an_impl_block_retries_its_methods_sync_and_async() {
    quick_retry("wrap-impl", 2);
    let mut inventory = Inventory::new();
    assert_eq!(inventory.reserve("sku-1".into()).await, Ok("sku-1".into()));
    assert_eq!(inventory.count(), Ok(4));
}

#[async_trait::async_trait]
trait Lookup {
    async fn find(&self, key: String) -> Result<String, CallError>;
}

struct Remote {
    calls: AtomicU32,
}

#[async_trait::async_trait]
impl Lookup for Remote {
    #[retry(name = "wrap-async-trait")]
    async fn find(&self, key: String) -> Result<String, CallError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(CallError::Downstream("busy"));
        }
        Ok(key)
    }
}

#[tokio::test]
async fn an_async_trait_method_is_retried() {
    quick_retry("wrap-async-trait", 2);
    let remote = Remote {
        calls: AtomicU32::new(0),
    };
    assert_eq!(remote.find("k".into()).await, Ok("k".into()));
    assert_eq!(remote.calls.load(Ordering::SeqCst), 2);
}

/// A dependency's error that says how long to wait before asking again.
#[derive(Debug)]
enum Throttled {
    Rejected(#[allow(dead_code)] Rejected),
    For(Duration),
    Down,
}

impl From<Rejected> for Throttled {
    fn from(rejected: Rejected) -> Self {
        Throttled::Rejected(rejected)
    }
}

fn wait_asked(error: &Throttled) -> Option<Duration> {
    match error {
        Throttled::For(wait) => Some(*wait),
        _ => None,
    }
}

static THROTTLED_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(name = "retry-after-hint", retry_after = wait_asked)]
fn throttled_once(hint: Option<Duration>) -> Result<u32, Throttled> {
    match THROTTLED_CALLS.fetch_add(1, Ordering::SeqCst) {
        0 => Err(hint.map_or(Throttled::Down, Throttled::For)),
        n => Ok(n),
    }
}

#[test]
fn a_retry_waits_at_least_what_the_error_asks_for() {
    quick_retry("retry-after-hint", 2);
    let waits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&waits);
    Registry::global()
        .retry("retry-after-hint")
        .subscribe(move |event| {
            if let resilience_runtime::RetryEvent::Retry { wait, .. } = event {
                seen.lock().unwrap().push(*wait);
            }
        });
    // Asked for 30 ms: waited at least that, not the configured 1 ms.
    assert_eq!(throttled_once(Some(Duration::from_millis(30))).unwrap(), 1);
    // An error that asks for nothing waits the configured time.
    THROTTLED_CALLS.store(0, Ordering::SeqCst);
    assert_eq!(throttled_once(None).unwrap(), 1);
    // One that asks for longer than `max_retry_after` (30 s by default) is not retried: the
    // caller gets it, with what it asked for.
    THROTTLED_CALLS.store(0, Ordering::SeqCst);
    let asked = throttled_once(Some(Duration::from_secs(31))).unwrap_err();
    assert!(matches!(asked, Throttled::For(wait) if wait == Duration::from_secs(31)));
    assert_eq!(THROTTLED_CALLS.load(Ordering::SeqCst), 1);
    let waits = waits.lock().unwrap().clone();
    assert_eq!(waits, [Duration::from_millis(30), Duration::from_millis(1)]);
}

/// An extractor as axum's are: a tuple struct that is not `Clone`.
struct Extracted<T>(T);

static PRICED: AtomicU32 = AtomicU32::new(0);

#[retry(name = "retry-patterns")]
async fn price(
    Extracted(sku): Extracted<String>,
    (quantity, mut note): (u32, String),
) -> Result<String, CallError> {
    note.push('!');
    match PRICED.fetch_add(1, Ordering::SeqCst) {
        0 => Err(CallError::Downstream("busy")),
        _ => Ok(format!("{quantity} x {sku} {note}")),
    }
}

#[tokio::test]
async fn a_retry_gives_each_attempt_a_copy_of_what_a_pattern_argument_binds() {
    quick_retry("retry-patterns", 3);
    let priced = price(Extracted("book".to_owned()), (2, "ok".to_owned())).await;
    // The second attempt had its own `note`: the first attempt's push is not in it.
    assert_eq!(priced.unwrap(), "2 x book ok!");
    assert_eq!(PRICED.load(Ordering::SeqCst), 2);
}

/// A fallback receives a pattern argument rebuilt from what it bound.
async fn cached_price(item: Extracted<String>, _: Rejected) -> Result<String, CallError> {
    Ok(format!("cached {}", item.0))
}

#[circuit_breaker(name = "pattern-fallback", fallback = cached_price)]
async fn price_or_cached(Extracted(sku): Extracted<String>) -> Result<String, CallError> {
    Ok(format!("fresh {sku}"))
}

/// A time limiter takes the arguments into the call's future, so the fallback's copy of a
/// pattern argument is rebuilt from clones of what it bound, before the call.
async fn late_quote(
    (quantity, note): (u32, String),
    rejected: Rejected,
) -> Result<String, CallError> {
    Ok(format!(
        "{quantity} {note} after {}",
        rejected.aspect().as_str()
    ))
}

#[time_limiter(name = "pattern-fallback-late", fallback = late_quote)]
async fn slow_quote((quantity, note): (u32, String)) -> Result<String, CallError> {
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(format!("{quantity} {note}"))
}

#[tokio::test(start_paused = true)]
async fn a_fallback_receives_a_pattern_argument_rebuilt_from_what_it_bound() {
    let registry = Registry::global();
    assert_eq!(
        price_or_cached(Extracted("book".to_owned())).await.unwrap(),
        "fresh book"
    );
    registry
        .circuit_breaker("pattern-fallback")
        .transition_to_forced_open_state();
    assert_eq!(
        price_or_cached(Extracted("book".to_owned())).await.unwrap(),
        "cached book"
    );
    time_limit("pattern-fallback-late", Duration::from_millis(10));
    assert_eq!(
        slow_quote((2, "pens".to_owned())).await.unwrap(),
        "2 pens after time_limiter"
    );
}
