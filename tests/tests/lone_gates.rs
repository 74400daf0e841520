//! Functions with one annotation, the shape most guarded functions have: the runtime runs them
//! on its lone-gate paths (a sync call's permit in a local; an async call's gate asked without
//! walking the plan). What users rely on still holds there: a fallback receives the arguments
//! by value, a panic in the body or the classification gives the permit back, a gate that makes the call
//! wait admits it later, a waiter dropped mid-wait takes nothing, and a call nested in a lone
//! gate's call sees it on the chain.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use resilience_runtime::{
    bulkhead, circuit_breaker, BulkheadConfig, CircuitBreakerConfig, CircuitState, Guard,
    ManualClock, RateLimiterConfig, Registry, Rejected,
};
use resilience_tests::CallError;

fn bulkhead_of(name: &str, calls: u32, wait: Duration) {
    Registry::global()
        .configure_bulkhead(
            name,
            BulkheadConfig::builder()
                .max_concurrent_calls(calls)
                .max_wait_duration(wait)
                .build()
                .unwrap(),
        )
        .unwrap();
}

// --- a fallback receives the arguments by value -------------------------------------------

fn labelled_later(name: String, tags: Vec<String>, rejected: Rejected) -> String {
    format!("{name} [{}] later ({})", tags.join(","), rejected.aspect())
}

#[circuit_breaker(name = "lone-owned-fallback", fallback = labelled_later)]
fn labelled(name: String, tags: Vec<String>) -> String {
    format!("{name} [{}]", tags.join(","))
}

#[test]
fn a_lone_gate_s_fallback_receives_arguments_taken_by_value() {
    let tags = || vec!["a".to_owned(), "b".to_owned()];
    assert_eq!(labelled("book".into(), tags()), "book [a,b]");
    Registry::global()
        .circuit_breaker("lone-owned-fallback")
        .transition_to_forced_open_state();
    assert_eq!(
        labelled("book".into(), tags()),
        "book [a,b] later (circuit breaker)"
    );
}

struct Ledger {
    entries: Vec<u32>,
}

impl Ledger {
    fn kept(self, _rejected: Rejected) -> usize {
        self.entries.len()
    }

    fn not_added(&mut self, _entry: u32, _rejected: Rejected) -> usize {
        self.entries.len()
    }

    #[circuit_breaker(name = "lone-self-fallback", fallback = kept)]
    fn close(self) -> usize {
        self.entries
            .iter()
            .map(|&e| usize::try_from(e).unwrap())
            .sum()
    }

    #[circuit_breaker(name = "lone-self-fallback", fallback = not_added)]
    fn add(&mut self, entry: u32) -> usize {
        self.entries.push(entry);
        self.entries.len()
    }
}

#[test]
fn a_lone_gate_s_fallback_receives_self_by_value_and_by_mut_reference() {
    let mut ledger = Ledger { entries: vec![1] };
    assert_eq!(ledger.add(2), 2);
    assert_eq!(ledger.close(), 3, "admitted: the body consumes `self`");
    Registry::global()
        .circuit_breaker("lone-self-fallback")
        .transition_to_forced_open_state();
    let mut ledger = Ledger {
        entries: vec![1, 2],
    };
    assert_eq!(ledger.add(3), 2, "refused: the fallback gets `&mut self`");
    assert_eq!(ledger.entries, [1, 2], "and the body never ran");
    assert_eq!(ledger.close(), 2, "refused: the fallback gets `self`");
}

// --- re-entry and a panic in the body -------------------------------------------------------

/// The frame of a lone sync gate's call (its permit in a local) is still seen by the calls
/// nested in it.
#[bulkhead(name = "lone-reentry")]
fn lone_recursive(depth: u32) -> Result<u32, CallError> {
    if depth == 0 {
        return Ok(0);
    }
    Ok(lone_recursive(depth - 1)? + 1)
}

#[bulkhead(name = "lone-panic")]
fn lone_panicking(fail: bool) -> Result<u32, CallError> {
    assert!(!fail, "a panic in the body of a lone gate");
    Ok(1)
}

#[test]
fn a_lone_gate_re_entered_counts_once_and_a_panic_in_it_gives_its_permit_back() {
    bulkhead_of("lone-reentry", 1, Duration::ZERO);
    assert_eq!(
        lone_recursive(3),
        Ok(3),
        "re-entry passes through its own gate"
    );
    let metrics = Registry::global().bulkhead("lone-reentry").metrics();
    assert_eq!(metrics.permitted_calls(), 1);
    assert_eq!(metrics.rejected_calls(), 0);
    assert_eq!(metrics.available_concurrent_calls(), 1);

    bulkhead_of("lone-panic", 1, Duration::ZERO);
    assert!(std::panic::catch_unwind(|| lone_panicking(true)).is_err());
    let bulkhead = Registry::global().bulkhead("lone-panic");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        1,
        "the permit is back"
    );
    assert_eq!(
        lone_panicking(false),
        Ok(1),
        "so the bulkhead of one admits again"
    );
    assert_eq!(bulkhead.metrics().permitted_calls(), 2);
}

// --- a classification that panics ---------------------------------------------------------

fn panicking_classification(_: &CallError) -> bool {
    panic!("a classification that panics")
}

#[circuit_breaker(name = "lone-panicking-ignore", ignore = panicking_classification)]
fn classified_by_a_panic() -> Result<u32, CallError> {
    Err(CallError::Downstream("boom"))
}

#[test]
fn a_lone_breaker_whose_classification_panics_records_nothing_and_gives_its_probe_back() {
    Registry::global()
        .configure_circuit_breaker(
            "lone-panicking-ignore",
            CircuitBreakerConfig::builder()
                .permitted_calls_in_half_open_state(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    let breaker = Registry::global().circuit_breaker("lone-panicking-ignore");
    // Half-open with one probe: a probe not given back would refuse every later call.
    breaker.transition_to_open_state().unwrap();
    breaker.transition_to_half_open_state().unwrap();
    assert!(std::panic::catch_unwind(classified_by_a_panic).is_err());
    assert_eq!(breaker.metrics().number_of_buffered_calls(), 0);
    assert_eq!(breaker.state(), CircuitState::HalfOpen);
    assert!(
        std::panic::catch_unwind(classified_by_a_panic).is_err(),
        "the probe came back: the breaker admits the next call"
    );
}

// --- a gate that makes the call wait ------------------------------------------------------

#[bulkhead(name = "lone-sync-wait")]
fn hold_sync(entered: &Barrier, release: &Barrier) -> Result<u32, CallError> {
    entered.wait();
    release.wait();
    Ok(1)
}

#[bulkhead(name = "lone-sync-wait")]
fn after_the_holder() -> Result<u32, CallError> {
    Ok(2)
}

#[test]
fn a_lone_sync_gate_that_makes_the_call_wait_blocks_until_its_permit_is_free() {
    bulkhead_of("lone-sync-wait", 1, Duration::from_secs(60));
    let bulkhead = Registry::global().bulkhead("lone-sync-wait");
    let entered = Arc::new(Barrier::new(2));
    let release = Arc::new(Barrier::new(2));
    let holder = std::thread::spawn({
        let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
        move || hold_sync(&entered, &release)
    });
    entered.wait();
    let waiter = std::thread::spawn(after_the_holder);
    // The waiter is blocked in the bulkhead: nothing can admit it while the holder is inside.
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !waiter.is_finished(),
        "the waiter waits for the held permit"
    );
    release.wait();
    assert_eq!(holder.join().unwrap(), Ok(1));
    assert_eq!(waiter.join().unwrap(), Ok(2));
    let metrics = bulkhead.metrics();
    assert_eq!(metrics.permitted_calls(), 2);
    assert_eq!(metrics.rejected_calls(), 0);
    assert_eq!(metrics.available_concurrent_calls(), 1);
}

#[tokio::test]
async fn a_lone_rate_limiter_waits_for_the_next_cycle_and_a_dropped_waiter_takes_nothing() {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_rate_limiter(
            "lone-rate",
            RateLimiterConfig::builder()
                .limit_for_period(1)
                .limit_refresh_period(Duration::from_secs(10))
                .timeout_duration(Duration::from_secs(20))
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry.plan(&[Guard::rate_limiter("lone-rate")]).unwrap();
    let call = || async { Ok::<u32, CallError>(1) };
    assert_eq!(plan.call_async(call).await, Ok(1));

    // A caller that waits for the next cycle, then gives up, takes no permission from it.
    let given_up = tokio::time::timeout(Duration::from_millis(10), plan.call_async(call)).await;
    assert!(given_up.is_err(), "it waits for the next cycle");
    let limiter = registry.rate_limiter("lone-rate");
    assert_eq!(limiter.metrics().number_of_waiting_threads(), 0);

    let waiting = tokio::spawn({
        let plan = registry.plan(&[Guard::rate_limiter("lone-rate")]).unwrap();
        async move { plan.call_async(|| async { Ok::<u32, CallError>(2) }).await }
    });
    while limiter.metrics().number_of_waiting_threads() == 0 {
        tokio::task::yield_now().await;
    }
    clock.advance(Duration::from_secs(10));
    assert_eq!(waiting.await.unwrap(), Ok(2));
    assert_eq!(
        limiter.available_permissions(),
        0,
        "the waiter took the next cycle's one permission, the caller that gave up none"
    );
}

/// A lone async gate is asked straight, without walking the plan; one that makes the call wait
/// hands it to the general path, which waits for it.
#[bulkhead(name = "lone-async-wait")]
async fn hold_async(until: tokio::sync::oneshot::Receiver<()>) -> Result<u32, CallError> {
    let _ = until.await;
    Ok(1)
}

#[tokio::test]
async fn a_lone_async_gate_admits_a_waiter_once_its_permit_is_free_and_a_dropped_one_holds_nothing()
{
    bulkhead_of("lone-async-wait", 1, Duration::from_secs(60));
    let bulkhead = Registry::global().bulkhead("lone-async-wait");
    let (release, until) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn(hold_async(until));
    while bulkhead.available_concurrent_calls() != 0 {
        tokio::task::yield_now().await;
    }

    // Its sender gone, a waiter's body ends as soon as it is admitted.
    let (_, at_once) = tokio::sync::oneshot::channel();
    let dropped = tokio::time::timeout(Duration::from_millis(10), hold_async(at_once)).await;
    assert!(
        dropped.is_err(),
        "it waited for the held permit, then was dropped"
    );

    let (_, at_once) = tokio::sync::oneshot::channel();
    let waiter = tokio::spawn(hold_async(at_once));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !waiter.is_finished(),
        "the waiter waits for the held permit"
    );
    release.send(()).unwrap();
    assert_eq!(holder.await.unwrap(), Ok(1));
    assert_eq!(waiter.await.unwrap(), Ok(1));
    let metrics = bulkhead.metrics();
    assert_eq!(metrics.available_concurrent_calls(), 1, "nothing is held");
    assert_eq!(
        metrics.permitted_calls(),
        2,
        "the holder and the waiter: the dropped waiter was never admitted"
    );
    assert_eq!(metrics.rejected_calls(), 0);
}

// --- refusals, and calls nested in a lone gate's call --------------------------------------

async fn cached(id: u32, rejected: Rejected) -> Result<u32, CallError> {
    assert!(matches!(rejected, Rejected::CallNotPermitted { .. }));
    Ok(id + 100)
}

#[circuit_breaker(name = "lone-async-refused", fallback = cached)]
async fn fresh(id: u32) -> Result<u32, CallError> {
    Ok(id)
}

#[tokio::test]
async fn a_lone_async_gate_s_refusal_goes_to_its_fallback_with_the_arguments() {
    assert_eq!(fresh(1).await, Ok(1));
    let breaker = Registry::global().circuit_breaker("lone-async-refused");
    breaker.transition_to_forced_open_state();
    assert_eq!(fresh(2).await, Ok(102));
    assert_eq!(breaker.metrics().number_of_not_permitted_calls(), 1);
}

#[bulkhead(name = "lone-async-outer")]
async fn outer() -> Result<u32, CallError> {
    tokio::task::yield_now().await;
    Ok(inner().await? + 1)
}

#[bulkhead(name = "lone-async-outer")]
async fn inner() -> Result<u32, CallError> {
    Ok(1)
}

#[tokio::test]
async fn a_call_nested_in_a_lone_async_gate_s_call_passes_through_it() {
    // A bulkhead of one that refuses at once: a nested call that did not see the outer call on
    // the chain would be refused.
    bulkhead_of("lone-async-outer", 1, Duration::ZERO);
    assert_eq!(outer().await, Ok(2));
    let metrics = Registry::global().bulkhead("lone-async-outer").metrics();
    assert_eq!(metrics.permitted_calls(), 1);
    assert_eq!(metrics.rejected_calls(), 0);
}
