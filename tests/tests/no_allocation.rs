//! A guarded call whose guards do not wait allocates nothing on its success path (a test of
//! counts, not of time). Only the measuring thread's allocations are counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use resilience_runtime::{
    bulkhead, circuit_breaker, rate_limiter, AdaptiveLimit, BulkheadConfig, Guard, Registry,
};
use resilience_tests::CallError;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted: only the measuring thread's are, so the
    /// test harness's own threads (busy when the machine is loaded) do not count.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    // `try_with`: a thread being torn down has no locals left; it is not the measuring one.
    if COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct NoopWake;
impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

fn poll_ready<F: Future>(future: F, waker: &Waker) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(waker)) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a call with free guards must complete in one poll"),
    }
}

#[bulkhead(name = "no-alloc-macro")]
#[circuit_breaker(name = "no-alloc-macro")]
fn annotated(i: u32) -> Result<u32, CallError> {
    Ok(i)
}

#[bulkhead(name = "no-alloc-macro-async")]
#[circuit_breaker(name = "no-alloc-macro-async")]
async fn annotated_async(i: u32) -> Result<u32, CallError> {
    Ok(i)
}

/// One annotation: the runtime's lone-gate paths.
#[circuit_breaker(name = "no-alloc-lone")]
fn lone(i: u32) -> Result<u32, CallError> {
    Ok(i)
}

#[circuit_breaker(name = "no-alloc-lone-async")]
async fn lone_async(i: u32) -> Result<u32, CallError> {
    Ok(i)
}

#[bulkhead(name = "no-alloc-three")]
#[rate_limiter(name = "no-alloc-three")]
#[circuit_breaker(name = "no-alloc-three")]
async fn three_gates(i: u32) -> Result<u32, CallError> {
    Ok(i)
}

#[test]
fn the_success_path_of_a_guarded_call_does_not_allocate() {
    let registry = Registry::new();
    let plan = registry
        .plan(&[
            Guard::bulkhead("a"),
            Guard::rate_limiter("a"),
            Guard::circuit_breaker("a"),
        ])
        .unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    // Warm up: thread-locals and lazily built statics allocate once.
    for _ in 0..3 {
        let _: Result<u32, CallError> = plan.call(|| Ok(1));
        let _: Result<u32, CallError> = poll_ready(plan.call_async(|| async { Ok(1) }), &waker);
        let _ = annotated(1);
        let _ = poll_ready(annotated_async(1), &waker);
        let _ = poll_ready(three_gates(1), &waker);
        let _ = lone(1);
        let _ = poll_ready(lone_async(1), &waker);
    }

    COUNTED.with(|counted| counted.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for i in 0..1000u32 {
        let sync: Result<u32, CallError> = plan.call(|| Ok(i));
        assert_eq!(sync, Ok(i));
        let not_found: Result<u32, CallError> = plan.call(|| Err(CallError::Downstream("404")));
        assert!(not_found.is_err());
        let async_: Result<u32, CallError> =
            poll_ready(plan.call_async(|| async move { Ok(i) }), &waker);
        assert_eq!(async_, Ok(i));
        assert_eq!(annotated(i), Ok(i));
        assert_eq!(poll_ready(annotated_async(i), &waker), Ok(i));
        // The default rate limiter (50 per 500 ns) has a permission for each of these calls.
        assert_eq!(poll_ready(three_gates(i), &waker), Ok(i));
        assert_eq!(lone(i), Ok(i));
        assert_eq!(poll_ready(lone_async(i), &waker), Ok(i));
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|counted| counted.set(false));
    assert_eq!(allocated, 0, "allocations in 8000 guarded calls");
    assert_eq!(
        registry
            .circuit_breaker("a")
            .metrics()
            .number_of_buffered_calls(),
        100,
        "the default count window is full"
    );
}

#[test]
fn a_call_through_wrappers_that_succeeds_at_once_does_not_allocate() {
    // All five aspects: the retry succeeds at its first attempt and the time limiter's call
    // completes at its first poll, so neither reads a clock nor starts a timer.
    succeeds_at_once_without_allocating(&[
        Guard::bulkhead("w"),
        Guard::rate_limiter("w"),
        Guard::retry("w"),
        Guard::circuit_breaker("w"),
        Guard::time_limiter("w"),
    ]);
}

#[test]
fn a_call_through_a_lone_retry_or_time_limiter_that_succeeds_at_once_does_not_allocate() {
    // A wrapper alone in its plan runs without the nested model: the same holds of it.
    succeeds_at_once_without_allocating(&[Guard::retry("w")]);
    succeeds_at_once_without_allocating(&[Guard::time_limiter("w")]);
}

#[test]
fn a_hedged_call_whose_first_attempt_answers_at_once_does_not_allocate() {
    // The hedge arms its timer at the first attempt's first wait: there is none.
    succeeds_at_once_without_allocating(&[Guard::hedge("w")]);
    succeeds_at_once_without_allocating(&[
        Guard::bulkhead("w"),
        Guard::rate_limiter("w"),
        Guard::retry("w"),
        Guard::hedge("w"),
        Guard::circuit_breaker("w"),
        Guard::time_limiter("w"),
    ]);
}

/// 1000 sync and 1000 async calls through `guards` (in a new registry), each succeeding at
/// once, allocate nothing.
fn succeeds_at_once_without_allocating(guards: &[Guard<'_>]) {
    let registry = Registry::new();
    let plan = registry.plan(guards).unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    for _ in 0..3 {
        let _: Result<u32, CallError> = plan.call(|| Ok(1));
        let _: Result<u32, CallError> = poll_ready(plan.call_async(|| async { Ok(1) }), &waker);
    }

    COUNTED.with(|counted| counted.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for i in 0..1000u32 {
        let sync: Result<u32, CallError> = plan.call(|| Ok(i));
        assert_eq!(sync, Ok(i));
        let async_: Result<u32, CallError> =
            poll_ready(plan.call_async(|| async move { Ok(i) }), &waker);
        assert_eq!(async_, Ok(i));
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|counted| counted.set(false));
    assert_eq!(allocated, 0, "allocations in 2000 calls through {guards:?}");
    if guards.contains(&Guard::retry("w")) {
        let retried = registry.retry("w").metrics();
        assert_eq!(
            retried.number_of_successful_calls_without_retry_attempt(),
            2006
        );
    }
}

/// A future that is not ready at its first poll (as a call waiting on its dependency is), and
/// ready at its second.
struct NotReadyOnce(bool);

impl Future for NotReadyOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Polls `future` to its end (at most a few polls: nothing it waits for is slow).
fn poll_to_end<F: Future>(future: F, waker: &Waker) -> F::Output {
    let mut future = pin!(future);
    for _ in 0..8 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(waker)) {
            return output;
        }
    }
    panic!("a call whose body waits once completes in two polls");
}

#[test]
fn a_call_through_a_retry_whose_body_waits_does_not_allocate() {
    // A call that is not ready at its first poll is most calls to a real dependency: with a
    // retry in the stack and no time limiter (whose timer is allocated when the call waits),
    // it runs to its end without a box.
    let registry = Registry::new();
    let plan = registry
        .plan(&[
            Guard::bulkhead("w"),
            Guard::rate_limiter("w"),
            Guard::retry("w"),
            Guard::circuit_breaker("w"),
        ])
        .unwrap();
    let waker = Waker::from(Arc::new(NoopWake));
    let call = |i: u32| async move {
        NotReadyOnce(false).await;
        Ok::<u32, CallError>(i)
    };
    for _ in 0..3 {
        let _ = poll_to_end(plan.call_async(|| call(1)), &waker);
    }

    COUNTED.with(|counted| counted.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for i in 0..1000u32 {
        assert_eq!(poll_to_end(plan.call_async(|| call(i)), &waker), Ok(i));
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|counted| counted.set(false));
    assert_eq!(allocated, 0, "allocations in 1000 calls that waited once");
    assert_eq!(
        registry
            .retry("w")
            .metrics()
            .number_of_successful_calls_without_retry_attempt(),
        1003
    );
}

#[test]
fn a_refusal_inside_a_retry_does_not_allocate() {
    // An open breaker refuses every call while its dependency is down: with all five aspects
    // around it, the refusal goes out through the retry (which does not retry it) without a
    // box.
    let registry = Registry::new();
    let plan = registry
        .plan(&[
            Guard::bulkhead("w"),
            Guard::rate_limiter("w"),
            Guard::retry("w"),
            Guard::circuit_breaker("w"),
            Guard::time_limiter("w"),
        ])
        .unwrap();
    registry
        .circuit_breaker("w")
        .transition_to_forced_open_state();
    let waker = Waker::from(Arc::new(NoopWake));
    for _ in 0..3 {
        let _: Result<u32, CallError> = poll_ready(plan.call_async(|| async { Ok(1) }), &waker);
    }

    COUNTED.with(|counted| counted.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..1000u32 {
        let refused: Result<u32, CallError> =
            poll_ready(plan.call_async(|| async { Ok(1) }), &waker);
        assert!(
            matches!(refused, Err(CallError::Rejected(_))),
            "{refused:?}"
        );
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|counted| counted.set(false));
    assert_eq!(allocated, 0, "allocations in 1000 refusals");
    assert_eq!(
        registry
            .retry("w")
            .metrics()
            .number_of_failed_calls_without_retry_attempt(),
        1003
    );
}

#[test]
fn a_request_through_a_guard_layer_admitted_at_once_does_not_allocate() {
    use resilience_runtime::tower::GuardLayer;
    use tower::{service_fn, Layer, Service};

    let registry = Arc::new(Registry::new());
    let guards = [
        Guard::bulkhead("layer"),
        Guard::rate_limiter("layer"),
        Guard::circuit_breaker("layer"),
    ];
    let inner = service_fn(|i: u32| async move { Ok::<u32, CallError>(i) });
    let mut in_registry = GuardLayer::new(&guards)
        .with_registry(registry.clone())
        .layer(inner);
    let mut global = GuardLayer::new(&[Guard::bulkhead("no-alloc-layer")]).layer(inner);
    let waker = Waker::from(Arc::new(NoopWake));
    for _ in 0..3 {
        let _ = poll_ready(in_registry.call(1), &waker);
        let _ = poll_ready(global.call(1), &waker);
    }

    COUNTED.with(|counted| counted.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for i in 0..1000u32 {
        // `service_fn` is always ready: `poll_ready` has nothing to do.
        assert_eq!(poll_ready(in_registry.call(i), &waker), Ok(i));
        assert_eq!(poll_ready(global.call(i), &waker), Ok(i));
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|counted| counted.set(false));
    assert_eq!(allocated, 0, "allocations in 2000 requests");
    let breaker = registry.circuit_breaker("layer").metrics();
    assert_eq!(
        breaker.number_of_buffered_calls(),
        100,
        "the default count window is full"
    );
}

#[test]
fn an_adaptive_bulkhead_samples_and_moves_its_limit_without_allocating() {
    // A manual clock: every call is timed and sampled; the calls use the whole limit, so the
    // limit moves (up on successes, down on drops).
    let clock = resilience_runtime::ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    for (name, limit) in [
        (
            "gradient2",
            AdaptiveLimit::gradient2().min_limit(1).initial_limit(4),
        ),
        ("aimd", AdaptiveLimit::aimd().min_limit(1).initial_limit(4)),
        ("knee", AdaptiveLimit::knee().min_limit(1).initial_limit(4)),
    ] {
        let config = BulkheadConfig::builder().adaptive(limit).build().unwrap();
        registry.configure_bulkhead(name, config).unwrap();
    }
    let names = ["gradient2", "aimd", "knee"];
    let plans = names.map(|name| registry.plan(&[Guard::bulkhead(name)]).unwrap());
    let bulkheads = names.map(|name| registry.bulkhead(name));
    let waker = Waker::from(Arc::new(NoopWake));
    // Per bulkhead, the lowest and the highest limit seen in the counted rounds.
    let seen = [(); 3].map(|()| (Cell::new(u32::MAX), Cell::new(0)));
    let counting = Cell::new(false);
    let round = |i: u32| {
        for ((plan, bulkhead), (lowest, highest)) in plans.iter().zip(&bulkheads).zip(&seen) {
            let sync: Result<u32, CallError> = plan.call(|| {
                clock.advance(std::time::Duration::from_millis(1));
                Ok(i)
            });
            assert_eq!(sync, Ok(i));
            let async_: Result<u32, CallError> =
                poll_ready(plan.call_async(|| async move { Ok(i) }), &waker);
            assert_eq!(async_, Ok(i));
            // By hand: the whole limit in flight (in an array: no allocation of the test's
            // own), then every other one released as a drop.
            let mut held: [Option<resilience_runtime::BulkheadPermit<'_>>; 256] =
                std::array::from_fn(|_| None);
            for slot in &mut held {
                *slot = bulkhead.try_acquire().ok();
            }
            for (n, permit) in held.into_iter().flatten().enumerate() {
                if n % 2 == 0 && i % 3 == 0 {
                    permit.record_drop();
                }
            }
            if counting.get() {
                let limit = bulkhead.max_allowed_concurrent_calls();
                lowest.set(lowest.get().min(limit));
                highest.set(highest.get().max(limit));
            }
        }
    };
    round(1);

    counting.set(true);
    COUNTED.with(|counted| counted.set(true));
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for i in 0..200u32 {
        round(i);
    }
    let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
    COUNTED.with(|counted| counted.set(false));
    assert_eq!(allocated, 0, "allocations in 200 rounds of samples");
    for ((lowest, highest), name) in seen.iter().zip(names) {
        assert!(
            lowest.get() < highest.get(),
            "{name}: the limit moved while counted"
        );
    }
}
