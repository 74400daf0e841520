//! Behaviour of the bulkhead as a user relies on it.
//!
//! Waiters are driven by hand (a future polled with a counting waker) wherever order matters,
//! so that queue order, hand-over and barging are constructed deterministically, and so that
//! "the waiter was woken" is checked, not assumed.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering as O};
use std::sync::Arc;
use std::task::{Context, Poll, Wake as StdWake, Waker};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;

// ---------------------------------------------------------------------------------------------
// Helpers

fn config(max: u32, wait: Duration, fair: bool) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(max)
        .max_wait_duration(wait)
        .fair_call_handling(fair)
        .build()
        .unwrap()
}

fn bulkhead(max: u32, wait: Duration, fair: bool) -> Bulkhead {
    Bulkhead::new("test", config(max, wait, fair))
}

/// Queued and in-queue waiter counts.
fn waiters(bulkhead: &Bulkhead) -> (usize, usize) {
    bulkhead.semaphore.waiters()
}

/// Asserts that the bulkhead is idle: every permit free, no waiter, no waiter bit.
fn assert_idle(bulkhead: &Bulkhead) {
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls()
    );
    assert_eq!(waiters(bulkhead), (0, 0), "no waiter left");
    assert!(!bulkhead.semaphore.has_waiters_bit());
}

/// Spins until `bulkhead` has `n` queued waiters (another thread is about to queue).
fn wait_for_queued(bulkhead: &Bulkhead, n: usize) {
    while waiters(bulkhead).1 != n {
        thread::yield_now();
    }
}

#[derive(Default)]
struct CountingWaker {
    wakes: AtomicUsize,
}

impl StdWake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, O::SeqCst);
    }
}

type AcquireFuture<'a> = Pin<Box<dyn Future<Output = Result<BulkheadPermit<'a>, Rejected>> + 'a>>;

/// An `acquire()` future polled by hand, with a waker that counts its wake-ups.
struct Probe<'a> {
    future: AcquireFuture<'a>,
    counter: Arc<CountingWaker>,
    waker: Waker,
    wakes_seen: usize,
}

impl<'a> Probe<'a> {
    fn new(bulkhead: &'a Bulkhead) -> Self {
        let counter = Arc::new(CountingWaker::default());
        Probe {
            future: Box::pin(bulkhead.acquire()),
            waker: Waker::from(counter.clone()),
            counter,
            wakes_seen: 0,
        }
    }

    /// A probe polled once, expected to be queued.
    fn queued(bulkhead: &'a Bulkhead) -> Self {
        let mut probe = Probe::new(bulkhead);
        assert!(probe.poll().is_pending(), "expected the caller to queue");
        probe
    }

    fn poll(&mut self) -> Poll<Result<BulkheadPermit<'a>, Rejected>> {
        self.wakes_seen = self.wakes();
        self.future
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
    }

    fn wakes(&self) -> usize {
        self.counter.wakes.load(O::SeqCst)
    }

    /// Whether the probe was woken since it was last polled.
    fn woken(&self) -> bool {
        self.wakes() > self.wakes_seen
    }

    fn expect_permit(&mut self) -> BulkheadPermit<'a> {
        match self.poll() {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a permit, got {other:?}"),
        }
    }
}

/// Runs `future` on the current thread with no async runtime at all.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl StdWake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

fn expect_full(result: Result<BulkheadPermit<'_>, Rejected>) -> Duration {
    match result {
        Err(Rejected::BulkheadFull { name, waited }) => {
            assert_eq!(name, "test");
            waited
        }
        other => panic!("expected BulkheadFull, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Admission

#[test]
fn permits_are_bounded_by_max_concurrent_calls() {
    for fair in [true, false] {
        let bulkhead = bulkhead(3, Duration::ZERO, fair);
        assert_eq!(bulkhead.max_allowed_concurrent_calls(), 3);
        let held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().unwrap()).collect();
        assert_eq!(bulkhead.available_concurrent_calls(), 0);
        expect_full(bulkhead.try_acquire());
        expect_full(bulkhead.acquire_blocking());
        expect_full(block_on(bulkhead.acquire()));
        drop(held);
        assert_eq!(bulkhead.available_concurrent_calls(), 3);
        let _again = bulkhead.try_acquire().unwrap();
        assert_eq!(bulkhead.available_concurrent_calls(), 2);
    }
}

#[test]
fn a_zero_wait_rejects_at_once_without_a_runtime() {
    let clock = ManualClock::new();
    let bulkhead =
        Bulkhead::with_clock("test", config(1, Duration::ZERO, true), Clock::from(clock));
    let _held = bulkhead.try_acquire().unwrap();
    assert_eq!(expect_full(bulkhead.try_acquire()), Duration::ZERO);
    assert_eq!(expect_full(bulkhead.acquire_blocking()), Duration::ZERO);
    // No tokio runtime here: a zero wait must not touch the timer.
    assert_eq!(expect_full(block_on(bulkhead.acquire())), Duration::ZERO);
    assert_eq!(bulkhead.metrics().rejected_calls(), 3);
    assert_eq!(waiters(&bulkhead), (0, 0));
}

#[test]
fn an_async_wait_times_out_on_the_bulkhead_s_clock() {
    let clock = ManualClock::new();
    let bulkhead = Bulkhead::with_clock(
        "test",
        config(1, Duration::from_millis(100), true),
        Clock::from(clock.clone()),
    );
    let _held = bulkhead.try_acquire().unwrap();
    let mut waiting = Box::pin(bulkhead.acquire());
    let mut cx = Context::from_waker(Waker::noop());
    // An hour of wall time would not end it: only the bulkhead's clock does.
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    clock.advance(Duration::from_millis(99));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    clock.advance(Duration::from_millis(1));
    match waiting.as_mut().poll(&mut cx) {
        Poll::Ready(refused) => assert_eq!(expect_full(refused), Duration::from_millis(100)),
        Poll::Pending => panic!("still waiting at its max_wait_duration"),
    }
    drop(waiting);
    assert_eq!(waiters(&bulkhead), (0, 0));
}

#[test]
fn a_free_permit_needs_no_runtime_whatever_the_wait() {
    let bulkhead = bulkhead(1, Duration::from_secs(5), true);
    let permit = block_on(bulkhead.acquire()).unwrap();
    drop(permit);
    let _permit = bulkhead.acquire_blocking().unwrap();
}

#[test]
fn an_endless_wait_arms_no_timer() {
    // Duration::MAX waits forever: no tokio timer, so this works without a runtime.
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    thread::scope(|s| {
        s.spawn(|| {
            wait_for_queued(&bulkhead, 1);
            drop(held);
        });
        let permit = block_on(bulkhead.acquire()).unwrap();
        drop(permit);
    });
    assert_idle(&bulkhead);
}

// ---------------------------------------------------------------------------------------------
// Waiting

#[test]
fn blocking_waiter_gets_a_permit_freed_by_another_thread() {
    let bulkhead = bulkhead(1, Duration::from_secs(30), true);
    let held = bulkhead.try_acquire().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| bulkhead.acquire_blocking().map(drop));
        wait_for_queued(&bulkhead, 1);
        assert!(!waiter.is_finished());
        drop(held);
        waiter.join().unwrap().unwrap();
    });
    assert_idle(&bulkhead);
    assert_eq!(bulkhead.metrics().permitted_calls(), 2);
}

/// A bulkhead that lives as long as the test process, for spawned tasks holding permits.
fn leaked(max: u32, wait: Duration, fair: bool) -> &'static Bulkhead {
    Box::leak(Box::new(bulkhead(max, wait, fair)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_waiter_gets_a_permit_freed_by_another_task() {
    let bulkhead = leaked(1, Duration::from_secs(30), true);
    let held = bulkhead.try_acquire().unwrap();
    let waiter = tokio::spawn(async move { bulkhead.acquire().await.map(drop) });
    while waiters(bulkhead).1 == 0 {
        tokio::task::yield_now().await;
    }
    assert!(!waiter.is_finished());
    // The permit moves to another task, which frees it.
    tokio::spawn(async move { drop(held) }).await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_idle(bulkhead);
}

#[tokio::test(start_paused = true)]
async fn async_waiter_times_out_after_max_wait_and_leaves_no_trace() {
    let wait = Duration::from_millis(500);
    let bulkhead = bulkhead(1, wait, true);
    let held = bulkhead.try_acquire().unwrap();
    let start = tokio::time::Instant::now();
    let waited = expect_full(bulkhead.acquire().await);
    assert!(
        start.elapsed() >= wait,
        "timed out after {:?}",
        start.elapsed()
    );
    assert!(waited >= wait, "reported waiting {waited:?}");
    assert_eq!(waiters(&bulkhead), (0, 0));
    assert!(!bulkhead.semaphore.has_waiters_bit());
    assert_eq!(bulkhead.metrics().rejected_calls(), 1);
    // A later waiter is served normally.
    drop(held);
    let _permit = bulkhead.acquire().await.unwrap();
    assert_eq!(bulkhead.metrics().permitted_calls(), 2);
}

#[test]
fn blocking_waiter_times_out_after_max_wait_and_leaves_no_trace() {
    let wait = Duration::from_millis(30);
    for fair in [true, false] {
        let bulkhead = bulkhead(1, wait, fair);
        let held = bulkhead.try_acquire().unwrap();
        let waited = expect_full(bulkhead.acquire_blocking());
        assert!(waited >= wait, "reported waiting {waited:?}");
        assert_eq!(waiters(&bulkhead), (0, 0));
        assert!(!bulkhead.semaphore.has_waiters_bit());
        drop(held);
        assert_idle(&bulkhead);
    }
}

#[test]
fn waited_is_measured_with_the_bulkheads_clock() {
    let clock = ManualClock::new();
    let bulkhead = Bulkhead::with_clock(
        "test",
        config(1, Duration::from_millis(20), true),
        Clock::from(clock),
    );
    let _held = bulkhead.try_acquire().unwrap();
    // A manual clock does not move by itself: the real 20 ms wait reads as zero.
    assert_eq!(expect_full(bulkhead.acquire_blocking()), Duration::ZERO);
}

// ---------------------------------------------------------------------------------------------
// Fairness

#[test]
fn fair_handling_serves_waiters_in_arrival_order() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let mut permit = bulkhead.try_acquire().unwrap();
    let mut probes: Vec<Probe<'_>> = (0..5).map(|_| Probe::queued(&bulkhead)).collect();
    for next in 0..probes.len() {
        drop(permit);
        // The permit went to the longest waiter, not back to the pool.
        assert_eq!(bulkhead.available_concurrent_calls(), 0);
        expect_full(bulkhead.try_acquire());
        for (i, probe) in probes.iter_mut().enumerate().skip(next) {
            assert_eq!(probe.woken(), i == next, "only waiter {next} is woken");
            if i != next {
                assert!(probe.poll().is_pending(), "waiter {i} served out of order");
            }
        }
        permit = probes[next].expect_permit();
    }
    drop(permit);
    drop(probes);
    assert_idle(&bulkhead);
    assert_eq!(bulkhead.metrics().permitted_calls(), 6);
}

#[test]
fn fair_handling_queues_blocking_and_async_waiters_in_one_line() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    let mut first = Probe::queued(&bulkhead);
    thread::scope(|s| {
        let second = s.spawn(|| bulkhead.acquire_blocking().map(drop));
        wait_for_queued(&bulkhead, 2);
        drop(held);
        assert!(first.woken());
        let permit = first.expect_permit();
        assert!(!second.is_finished());
        assert_eq!(waiters(&bulkhead), (1, 1));
        drop(permit);
        second.join().unwrap().unwrap();
    });
    drop(first);
    assert_idle(&bulkhead);
}

#[test]
fn unfair_handling_lets_a_newcomer_take_a_freed_permit() {
    let bulkhead = bulkhead(1, Duration::MAX, false);
    let held = bulkhead.try_acquire().unwrap();
    let mut waiter = Probe::queued(&bulkhead);
    drop(held);
    assert!(waiter.woken(), "a freed permit wakes a waiter");
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    // The newcomer barges in ahead of the woken waiter.
    let newcomer = bulkhead.try_acquire().expect("barging");
    assert!(waiter.poll().is_pending(), "the waiter lost the race");
    assert_eq!(waiters(&bulkhead), (1, 1), "and waits again");
    drop(newcomer);
    assert!(waiter.woken(), "the next freed permit wakes it again");
    drop(waiter.expect_permit());
    drop(waiter);
    assert_idle(&bulkhead);
}

#[test]
fn fair_handling_queues_a_newcomer_behind_the_waiters() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    let mut waiter = Probe::queued(&bulkhead);
    drop(held);
    // The same sequence as the barging test: here the newcomer gets nothing.
    expect_full(bulkhead.try_acquire());
    let mut newcomer = Probe::queued(&bulkhead);
    let permit = waiter.expect_permit();
    assert!(!newcomer.woken());
    drop(permit);
    assert!(newcomer.woken());
    drop(newcomer.expect_permit());
    drop((waiter, newcomer));
    assert_idle(&bulkhead);
}

#[test]
fn unfair_handling_wakes_one_waiter_per_freed_permit() {
    let bulkhead = bulkhead(2, Duration::MAX, false);
    let held = [
        bulkhead.try_acquire().unwrap(),
        bulkhead.try_acquire().unwrap(),
    ];
    let mut probes: Vec<Probe<'_>> = (0..3).map(|_| Probe::queued(&bulkhead)).collect();
    drop(held);
    let woken: Vec<bool> = probes.iter().map(Probe::woken).collect();
    assert_eq!(
        woken,
        [true, true, false],
        "the two longest waiters are woken"
    );
    let permits: Vec<_> = probes[..2].iter_mut().map(Probe::expect_permit).collect();
    assert!(probes[2].poll().is_pending());
    drop(permits);
    drop(probes.remove(2).expect_permit());
    drop(probes);
    assert_idle(&bulkhead);
}

// ---------------------------------------------------------------------------------------------
// Cancellation

#[test]
fn dropped_queued_waiter_loses_no_permit_and_blocks_nobody() {
    for fair in [true, false] {
        let bulkhead = bulkhead(1, Duration::MAX, fair);
        let held = bulkhead.try_acquire().unwrap();
        let first = Probe::queued(&bulkhead);
        let mut second = Probe::queued(&bulkhead);
        drop(first);
        assert_eq!(waiters(&bulkhead), (1, 1));
        drop(held);
        assert!(second.woken());
        drop(second.expect_permit());
        drop(second);
        assert_idle(&bulkhead);
    }
}

#[test]
fn last_queued_waiter_dropped_clears_the_waiting_state() {
    for fair in [true, false] {
        let bulkhead = bulkhead(1, Duration::MAX, fair);
        let held = bulkhead.try_acquire().unwrap();
        drop(Probe::queued(&bulkhead));
        assert!(!bulkhead.semaphore.has_waiters_bit());
        drop(held);
        assert_idle(&bulkhead);
        // Newcomers are not held back by a waiter that is gone.
        let _permit = bulkhead.try_acquire().unwrap();
    }
}

#[test]
fn waiter_dropped_after_being_handed_a_permit_passes_it_on() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    let handed = Probe::queued(&bulkhead);
    let mut next = Probe::queued(&bulkhead);
    drop(held);
    assert!(handed.woken() && !next.woken());
    assert_eq!(
        waiters(&bulkhead),
        (2, 1),
        "one handed a permit, one queued"
    );
    drop(handed);
    assert!(next.woken(), "the permit went on to the next waiter");
    drop(next.expect_permit());
    drop(next);
    assert_idle(&bulkhead);
}

#[test]
fn waiter_dropped_after_being_handed_a_permit_returns_it_when_nobody_waits() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    let handed = Probe::queued(&bulkhead);
    drop(held);
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    drop(handed);
    assert_idle(&bulkhead);
    assert_eq!(
        bulkhead.metrics().permitted_calls(),
        1,
        "an unused hand-over is not a call"
    );
}

#[test]
fn woken_waiter_dropped_before_retrying_passes_the_wake_up_on() {
    let bulkhead = bulkhead(1, Duration::MAX, false);
    let held = bulkhead.try_acquire().unwrap();
    let woken = Probe::queued(&bulkhead);
    let mut next = Probe::queued(&bulkhead);
    drop(held);
    assert!(woken.woken() && !next.woken());
    drop(woken);
    assert!(next.woken(), "the wake-up went on to the next waiter");
    drop(next.expect_permit());
    drop(next);
    assert_idle(&bulkhead);
}

#[tokio::test(start_paused = true)]
async fn timed_out_waiter_leaves_its_place_to_the_next() {
    let wait = Duration::from_millis(100);
    let bulkhead = leaked(1, wait, true);
    let held = bulkhead.try_acquire().unwrap();
    let first = tokio::spawn(async move { bulkhead.acquire().await.map(drop) });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = tokio::spawn(async move { bulkhead.acquire().await.map(drop) });
    tokio::time::sleep(Duration::from_millis(70)).await;
    // At 120 ms the first waiter has given up; the second still waits, now at the head.
    assert!(first.is_finished());
    expect_full(first.await.unwrap().map(|()| unreachable!()));
    assert_eq!(waiters(bulkhead), (1, 1));
    drop(held);
    second.await.unwrap().unwrap();
    assert_idle(bulkhead);
    assert_eq!(bulkhead.metrics().rejected_calls(), 1);
}

#[test]
fn permit_is_released_when_the_call_panics() {
    let bulkhead = bulkhead(2, Duration::ZERO, true);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _permit = bulkhead.try_acquire().unwrap();
        assert_eq!(bulkhead.available_concurrent_calls(), 1);
        panic!("the guarded call failed");
    }));
    assert!(outcome.is_err());
    assert_idle(&bulkhead);
    assert_eq!(bulkhead.metrics().finished_calls(), 1);
}

// ---------------------------------------------------------------------------------------------
// Counters

#[test]
fn counters_count_permitted_rejected_and_finished_calls() {
    let bulkhead = bulkhead(2, Duration::MAX, true);
    let zero_wait = self::bulkhead(1, Duration::ZERO, true);
    let m = bulkhead.metrics();
    assert_eq!(
        (m.permitted_calls(), m.rejected_calls(), m.finished_calls()),
        (0, 0, 0)
    );
    assert_eq!(m.max_allowed_concurrent_calls(), 2);
    assert_eq!(m.available_concurrent_calls(), 2);

    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    let mut waiter = Probe::queued(&bulkhead);
    let cancelled = Probe::queued(&bulkhead);
    drop(a); // handed to `waiter`
    let c = waiter.expect_permit();
    drop(b); // handed to `cancelled`, which gives it back unused
    drop(cancelled);
    let m = bulkhead.metrics();
    assert_eq!(m.permitted_calls(), 3);
    assert_eq!(m.finished_calls(), 2);
    assert_eq!(m.available_concurrent_calls(), 1);
    drop(c);
    assert_eq!(bulkhead.metrics().finished_calls(), 3);
    assert_eq!(bulkhead.metrics().rejected_calls(), 0);

    let _held = zero_wait.try_acquire().unwrap();
    for _ in 0..3 {
        expect_full(zero_wait.try_acquire());
    }
    let m = zero_wait.metrics();
    assert_eq!(
        (m.permitted_calls(), m.rejected_calls(), m.finished_calls()),
        (1, 3, 0)
    );
}

#[test]
fn permitted_counter_carries_over_the_packed_fields_wrap_around() {
    let bulkhead = bulkhead(2, Duration::MAX, true);
    let field_max = semaphore::COUNT_FIELD_MAX;
    bulkhead.semaphore.set_permitted_field(field_max - 1);
    assert_eq!(bulkhead.metrics().permitted_calls(), field_max - 1);
    let a = bulkhead.try_acquire().unwrap(); // field_max
    let b = bulkhead.try_acquire().unwrap(); // wraps
    assert_eq!(bulkhead.metrics().permitted_calls(), field_max + 1);
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    // A hand-over counts through the other path.
    let mut waiter = Probe::queued(&bulkhead);
    drop(a);
    let c = waiter.expect_permit();
    assert_eq!(bulkhead.metrics().permitted_calls(), field_max + 2);
    drop((b, c));
    assert_eq!(bulkhead.metrics().finished_calls(), field_max + 2);
    drop(waiter);
    assert_idle(&bulkhead);
}

// ---------------------------------------------------------------------------------------------
// Reconfiguration

/// Asserts the bulkhead's readings with `in_flight` permits held: the limit, the free permits
/// (none while a shrink's surplus is outstanding) and the finished calls all agree.
fn assert_accounting(bulkhead: &Bulkhead, max: u32, in_flight: u32) {
    let m = bulkhead.metrics();
    let available = max.saturating_sub(in_flight);
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), max);
    assert_eq!(bulkhead.available_concurrent_calls(), available);
    assert_eq!(m.max_allowed_concurrent_calls(), max);
    assert_eq!(m.available_concurrent_calls(), available);
    assert_eq!(
        m.finished_calls(),
        m.permitted_calls() - u64::from(in_flight),
        "finished calls with {in_flight} in flight: {m:?}"
    );
}

#[test]
fn a_shrink_swallows_the_surplus_then_admits_at_the_new_limit() {
    for fair in [true, false] {
        let bulkhead = bulkhead(10, Duration::ZERO, fair);
        let mut held: Vec<_> = (0..7).map(|_| bulkhead.try_acquire().unwrap()).collect();
        bulkhead.reconfigure(config(4, Duration::ZERO, fair));
        assert_eq!(bulkhead.config().max_concurrent_calls(), 4);
        assert_accounting(&bulkhead, 4, 7);
        expect_full(bulkhead.try_acquire());
        // Three releases pay off the surplus: none of them frees a permit.
        for in_flight in (4..7).rev() {
            drop(held.pop());
            assert_accounting(&bulkhead, 4, in_flight);
            expect_full(bulkhead.try_acquire());
        }
        // From here the bulkhead admits up to 4 again, exactly.
        drop(held.pop());
        assert_accounting(&bulkhead, 4, 3);
        held.push(bulkhead.try_acquire().unwrap());
        assert_accounting(&bulkhead, 4, 4);
        expect_full(bulkhead.try_acquire());
        drop(held);
        assert_idle(&bulkhead);
        assert_eq!(bulkhead.metrics().permitted_calls(), 8);
        assert_eq!(bulkhead.metrics().rejected_calls(), 5);
    }
}

#[test]
fn a_shrink_holds_back_waiters_until_the_surplus_is_paid() {
    for fair in [true, false] {
        let bulkhead = bulkhead(3, Duration::MAX, fair);
        let mut held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().unwrap()).collect();
        let mut waiter = Probe::queued(&bulkhead);
        bulkhead.reconfigure(config(1, Duration::MAX, fair));
        for in_flight in [2, 1] {
            drop(held.pop());
            assert!(
                !waiter.woken(),
                "a release that pays the surplus serves nobody"
            );
            assert!(waiter.poll().is_pending());
            assert_accounting(&bulkhead, 1, in_flight);
        }
        drop(held.pop());
        assert!(waiter.woken());
        drop(waiter.expect_permit());
        drop(waiter);
        assert_idle(&bulkhead);
    }
}

/// A permit handed to a waiter that has not picked it up yet is held: a shrink counts it, and
/// if the waiter gives up, its permit pays the surplus instead of going to the next waiter.
#[test]
fn a_shrink_counts_the_permits_handed_to_waiters() {
    let bulkhead = bulkhead(2, Duration::MAX, true);
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    let handed = Probe::queued(&bulkhead);
    let mut next = Probe::queued(&bulkhead);
    drop(a);
    assert!(handed.woken());
    bulkhead.reconfigure(config(1, Duration::MAX, true));
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    drop(handed);
    assert!(!next.woken(), "the returned permit paid the surplus");
    assert!(next.poll().is_pending());
    drop(b);
    assert!(next.woken());
    drop(next.expect_permit());
    drop(next);
    assert_idle(&bulkhead);
}

#[test]
fn a_grow_hands_the_new_permits_to_queued_waiters_in_order() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    let mut probes: Vec<Probe<'_>> = (0..4).map(|_| Probe::queued(&bulkhead)).collect();
    bulkhead.reconfigure(config(3, Duration::MAX, true));
    let woken: Vec<bool> = probes.iter().map(Probe::woken).collect();
    assert_eq!(woken, [true, true, false, false], "the two longest waiters");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        0,
        "handed over, not freed"
    );
    expect_full(bulkhead.try_acquire());
    assert!(probes[2].poll().is_pending() && probes[3].poll().is_pending());
    let permits: Vec<_> = probes[..2].iter_mut().map(Probe::expect_permit).collect();
    // Growing again serves the next in line, not the last.
    bulkhead.reconfigure(config(4, Duration::MAX, true));
    assert!(probes[2].woken() && !probes[3].woken());
    let third = probes[2].expect_permit();
    drop(held);
    let fourth = probes[3].expect_permit();
    drop((permits, third, fourth, probes));
    assert_idle(&bulkhead);
    assert_eq!(bulkhead.metrics().permitted_calls(), 5);
}

#[test]
fn an_unfair_grow_wakes_one_waiter_per_new_permit() {
    let bulkhead = bulkhead(1, Duration::MAX, false);
    let held = bulkhead.try_acquire().unwrap();
    let mut probes: Vec<Probe<'_>> = (0..3).map(|_| Probe::queued(&bulkhead)).collect();
    bulkhead.reconfigure(config(3, Duration::MAX, false));
    let woken: Vec<bool> = probes.iter().map(Probe::woken).collect();
    assert_eq!(woken, [true, true, false]);
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        2,
        "free, for whoever comes"
    );
    let permits: Vec<_> = probes[..2].iter_mut().map(Probe::expect_permit).collect();
    assert!(probes[2].poll().is_pending());
    drop((held, permits));
    drop(probes.remove(2).expect_permit());
    drop(probes);
    assert_idle(&bulkhead);
}

#[test]
fn a_grow_serves_blocked_threads_in_arrival_order() {
    for fair in [true, false] {
        let bulkhead = bulkhead(1, Duration::from_secs(30), fair);
        let held = bulkhead.try_acquire().unwrap();
        thread::scope(|s| {
            let first = s.spawn(|| bulkhead.acquire_blocking());
            wait_for_queued(&bulkhead, 1);
            let second = s.spawn(|| bulkhead.acquire_blocking());
            wait_for_queued(&bulkhead, 2);
            bulkhead.reconfigure(config(2, Duration::from_secs(30), fair));
            // The permit went to (fair) or woke (unfair) the first thread; the second waits on.
            let first = first.join().unwrap().unwrap();
            assert_eq!(waiters(&bulkhead), (1, 1));
            assert!(!second.is_finished());
            bulkhead.reconfigure(config(3, Duration::from_secs(30), fair));
            let second = second.join().unwrap().unwrap();
            drop((first, second));
        });
        drop(held);
        assert_idle(&bulkhead);
        assert_eq!(bulkhead.available_concurrent_calls(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grow_serves_a_task_waiting_on_a_runtime() {
    let bulkhead = leaked(1, Duration::from_secs(30), true);
    let held = bulkhead.try_acquire().unwrap();
    let waiter = tokio::spawn(async move { bulkhead.acquire().await.map(drop) });
    while waiters(bulkhead).1 == 0 {
        tokio::task::yield_now().await;
    }
    bulkhead.reconfigure(config(2, Duration::from_secs(30), true));
    // Served while `held` is still held: by the grow, not by a release.
    waiter.await.unwrap().unwrap();
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    drop(held);
    assert_idle(bulkhead);
}

#[test]
fn a_shrink_then_a_grow_before_the_surplus_is_paid_net_out() {
    for fair in [true, false] {
        let bulkhead = bulkhead(10, Duration::ZERO, fair);
        let mut held: Vec<_> = (0..7).map(|_| bulkhead.try_acquire().unwrap()).collect();
        bulkhead.reconfigure(config(4, Duration::ZERO, fair)); // surplus 3
        drop(held.pop()); // surplus 2
        bulkhead.reconfigure(config(5, Duration::ZERO, fair)); // surplus 1, nothing free
        assert_accounting(&bulkhead, 5, 6);
        expect_full(bulkhead.try_acquire());
        bulkhead.reconfigure(config(8, Duration::ZERO, fair)); // 2 free
        assert_accounting(&bulkhead, 8, 6);
        held.push(bulkhead.try_acquire().unwrap());
        held.push(bulkhead.try_acquire().unwrap());
        expect_full(bulkhead.try_acquire());
        assert_accounting(&bulkhead, 8, 8);
        // Down and up again with nothing released in between: back where it was.
        bulkhead.reconfigure(config(2, Duration::ZERO, fair));
        assert_accounting(&bulkhead, 2, 8);
        bulkhead.reconfigure(config(9, Duration::ZERO, fair));
        assert_accounting(&bulkhead, 9, 8);
        held.push(bulkhead.try_acquire().unwrap());
        expect_full(bulkhead.try_acquire());
        drop(held);
        assert_idle(&bulkhead);
        assert_eq!(bulkhead.available_concurrent_calls(), 9);
    }
}

#[test]
fn the_largest_shrink_and_grow_keep_the_fields_apart() {
    let bulkhead = bulkhead(MAX_CONCURRENT_CALLS_LIMIT, Duration::ZERO, true);
    let held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().unwrap()).collect();
    bulkhead.reconfigure(config(1, Duration::ZERO, true));
    assert_accounting(&bulkhead, 1, 3);
    bulkhead.reconfigure(config(MAX_CONCURRENT_CALLS_LIMIT, Duration::ZERO, true));
    assert_accounting(&bulkhead, MAX_CONCURRENT_CALLS_LIMIT, 3);
    drop(held);
    assert_idle(&bulkhead);
    assert_eq!(bulkhead.metrics().permitted_calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_new_wait_applies_to_callers_that_start_waiting_after_it() {
    let bulkhead = leaked(1, Duration::from_millis(100), true);
    let held = bulkhead.try_acquire().unwrap();
    let early = tokio::spawn(async move { bulkhead.acquire().await.map(drop) });
    while waiters(bulkhead).1 != 1 {
        tokio::task::yield_now().await;
    }
    bulkhead.reconfigure(config(1, Duration::from_secs(1), true));
    let late = tokio::spawn(async move { bulkhead.acquire().await.map(drop) });
    while waiters(bulkhead).1 != 2 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The early caller kept its 100 ms; the late one waits up to a second.
    assert!(early.is_finished());
    let waited = expect_full(early.await.unwrap().map(|()| unreachable!()));
    assert!(waited < Duration::from_secs(1), "waited {waited:?}");
    assert!(!late.is_finished());
    // A zero wait turns new callers away at once, and leaves the waiting one waiting.
    bulkhead.reconfigure(config(1, Duration::ZERO, true));
    assert_eq!(expect_full(bulkhead.acquire().await), Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!late.is_finished(), "the late caller keeps its second");
    drop(held);
    late.await.unwrap().unwrap();
    assert_idle(bulkhead);
    assert_eq!(bulkhead.metrics().rejected_calls(), 2);
}

#[test]
fn a_wait_turned_on_or_off_applies_to_the_next_blocking_caller() {
    let bulkhead = bulkhead(1, Duration::ZERO, true);
    assert!(!bulkhead.waits());
    let held = bulkhead.try_acquire().unwrap();
    bulkhead.reconfigure(config(1, Duration::from_secs(30), true));
    assert!(bulkhead.waits());
    thread::scope(|s| {
        let waiter = s.spawn(|| bulkhead.acquire_blocking().map(drop));
        wait_for_queued(&bulkhead, 1);
        bulkhead.reconfigure(config(1, Duration::ZERO, true));
        assert!(!bulkhead.waits());
        assert_eq!(expect_full(bulkhead.acquire_blocking()), Duration::ZERO);
        assert!(!waiter.is_finished(), "the waiting thread keeps waiting");
        drop(held);
        waiter.join().unwrap().unwrap();
    });
    assert_idle(&bulkhead);
}

#[test]
fn turning_fairness_off_lets_newcomers_barge_past_the_queued_waiters() {
    let bulkhead = bulkhead(1, Duration::MAX, true);
    let held = bulkhead.try_acquire().unwrap();
    let mut first = Probe::queued(&bulkhead);
    let mut second = Probe::queued(&bulkhead);
    bulkhead.reconfigure(config(1, Duration::MAX, false));
    assert!(!bulkhead.semaphore.is_fair());
    assert_eq!(waiters(&bulkhead), (2, 2), "the waiters stay queued");
    drop(held);
    assert!(first.woken() && !second.woken());
    let newcomer = bulkhead.try_acquire().expect("barging, now unfair");
    assert!(
        first.poll().is_pending(),
        "lost the race, back at the front"
    );
    drop(newcomer);
    assert!(first.woken() && !second.woken());
    let permit = first.expect_permit();
    drop(permit);
    assert!(second.woken());
    drop(second.expect_permit());
    drop((first, second));
    assert_idle(&bulkhead);
}

/// Under unfair handling a freed permit is left for a woken waiter to take. Turning fairness on
/// before it does must not strand that permit behind the waiter bit: it goes to the queue.
#[test]
fn turning_fairness_on_hands_a_permit_left_free_to_the_queue() {
    let bulkhead = bulkhead(1, Duration::MAX, false);
    let held = bulkhead.try_acquire().unwrap();
    let mut notified = Probe::queued(&bulkhead);
    let mut queued = Probe::queued(&bulkhead);
    drop(held);
    assert!(notified.woken());
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    bulkhead.reconfigure(config(1, Duration::MAX, true));
    assert!(queued.woken(), "the free permit went to the queue");
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    expect_full(bulkhead.try_acquire());
    // The woken waiter finds no permit and goes back to the front of the queue.
    assert!(notified.poll().is_pending());
    assert_eq!(waiters(&bulkhead), (2, 1));
    let permit = queued.expect_permit();
    let mut newcomer = Probe::queued(&bulkhead);
    drop(permit);
    assert!(notified.woken() && !newcomer.woken(), "fair from here on");
    drop(notified.expect_permit());
    drop(newcomer.expect_permit());
    drop((notified, queued, newcomer));
    assert_idle(&bulkhead);
}

#[test]
fn turning_fairness_on_keeps_the_queue_order() {
    let bulkhead = bulkhead(1, Duration::MAX, false);
    let held = bulkhead.try_acquire().unwrap();
    let mut probes: Vec<Probe<'_>> = (0..3).map(|_| Probe::queued(&bulkhead)).collect();
    bulkhead.reconfigure(config(1, Duration::MAX, true));
    assert_eq!(waiters(&bulkhead), (3, 3));
    let mut permit = held;
    for next in 0..probes.len() {
        drop(permit);
        assert_eq!(bulkhead.available_concurrent_calls(), 0, "handed over");
        for (i, probe) in probes.iter().enumerate().skip(next) {
            assert_eq!(probe.woken(), i == next);
        }
        permit = probes[next].expect_permit();
    }
    drop((permit, probes));
    assert_idle(&bulkhead);
}

#[test]
fn reconfiguration_keeps_the_counters() {
    let bulkhead = bulkhead(2, Duration::ZERO, true);
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    expect_full(bulkhead.try_acquire());
    drop(a);
    let before = bulkhead.metrics();
    assert_eq!(
        (
            before.permitted_calls(),
            before.rejected_calls(),
            before.finished_calls()
        ),
        (2, 1, 1)
    );
    for (max, fair) in [(1, true), (5, false), (1, false), (3, true)] {
        bulkhead.reconfigure(config(max, Duration::from_millis(max.into()), fair));
        let m = bulkhead.metrics();
        assert_eq!(
            (m.permitted_calls(), m.rejected_calls(), m.finished_calls()),
            (2, 1, 1),
            "after reconfiguring to {max}"
        );
    }
    drop(b);
    let _c = bulkhead.try_acquire().unwrap();
    let m = bulkhead.metrics();
    assert_eq!(
        (m.permitted_calls(), m.rejected_calls(), m.finished_calls()),
        (3, 1, 2)
    );
}

#[test]
fn reconfiguring_with_an_equal_config_changes_nothing() {
    let bulkhead = bulkhead(2, Duration::MAX, true);
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    let waiter = Probe::queued(&bulkhead);
    let (metrics, shown) = (bulkhead.metrics(), format!("{bulkhead:?}"));
    bulkhead.reconfigure(config(2, Duration::MAX, true));
    assert_eq!(bulkhead.metrics(), metrics);
    assert_eq!(format!("{bulkhead:?}"), shown);
    assert_eq!(bulkhead.config(), config(2, Duration::MAX, true));
    assert_eq!(waiters(&bulkhead), (1, 1));
    assert!(!waiter.woken());
    drop((a, b, waiter));
    assert_idle(&bulkhead);
}

#[test]
fn config_returns_the_configuration_in_force() {
    let bulkhead = bulkhead(2, Duration::ZERO, true);
    assert_eq!(bulkhead.config(), config(2, Duration::ZERO, true));
    let next = config(7, Duration::from_millis(30), false);
    bulkhead.reconfigure(next.clone());
    assert_eq!(bulkhead.config(), next);
    assert!(format!("{bulkhead:?}").contains("max_concurrent_calls: 7,"));
}

// ---------------------------------------------------------------------------------------------
// Types

fn assert_send<T: Send>(_: &T) {}
fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn permits_and_futures_cross_threads() {
    assert_send_sync::<Bulkhead>();
    assert_send_sync::<BulkheadPermit<'static>>();
    assert_send_sync::<BulkheadMetrics>();
    let bulkhead = bulkhead(1, Duration::ZERO, true);
    let acquire = bulkhead.acquire();
    assert_send(&acquire);
    let permit = block_on(acquire).unwrap();
    assert_send(&permit);
}

#[test]
fn debug_output_names_the_bulkhead() {
    let bulkhead = bulkhead(4, Duration::ZERO, true);
    let permit = bulkhead.try_acquire().unwrap();
    let shown = format!("{bulkhead:?}");
    assert!(shown.contains("\"test\""), "{shown}");
    assert!(shown.contains("available_concurrent_calls: 3"), "{shown}");
    assert_eq!(
        format!("{permit:?}"),
        "BulkheadPermit { bulkhead: \"test\" }"
    );
}

// ---------------------------------------------------------------------------------------------
// Stress: threads and tasks acquiring, releasing, timing out and cancelling at random

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[derive(Default)]
struct Tally {
    in_use: AtomicU32,
    permitted: AtomicU64,
    rejected: AtomicU64,
    timed_out: AtomicU64,
    cancelled: AtomicU64,
}

impl Tally {
    fn enter(&self, max: u32) {
        let now = self.in_use.fetch_add(1, O::SeqCst) + 1;
        assert!(now <= max, "{now} calls admitted by a bulkhead of {max}");
        self.permitted.fetch_add(1, O::Relaxed);
    }

    fn leave(&self) {
        self.in_use.fetch_sub(1, O::SeqCst);
    }

    fn outcome(&self, result: &Result<BulkheadPermit<'_>, Rejected>, max: u32) {
        match result {
            Ok(_) => self.enter(max),
            Err(Rejected::BulkheadFull { waited, .. }) => {
                self.rejected.fetch_add(1, O::Relaxed);
                if !waited.is_zero() {
                    self.timed_out.fetch_add(1, O::Relaxed);
                }
            }
            Err(other) => panic!("unexpected rejection {other:?}"),
        }
    }
}

fn stress(fair: bool) {
    const MAX: u32 = 3;
    let bulkhead = Arc::new(bulkhead(MAX, Duration::from_millis(2), fair));
    let tally = Arc::new(Tally::default());

    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let (bulkhead, tally) = (bulkhead.clone(), tally.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(t + 1);
                for _ in 0..1_500 {
                    let result = if rng.below(3) == 0 {
                        bulkhead.try_acquire()
                    } else {
                        bulkhead.acquire_blocking()
                    };
                    tally.outcome(&result, MAX);
                    if result.is_ok() {
                        for _ in 0..rng.below(50) {
                            std::hint::spin_loop();
                        }
                        match rng.below(40) {
                            0 => thread::sleep(Duration::from_millis(3)),
                            1..=9 => thread::yield_now(),
                            _ => {}
                        }
                        tally.leave();
                    }
                }
            })
        })
        .collect();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..8u64)
            .map(|t| {
                let (bulkhead, tally) = (bulkhead.clone(), tally.clone());
                tokio::spawn(async move {
                    let mut rng = Rng::new(100 + t);
                    for _ in 0..400 {
                        let result = match rng.below(4) {
                            0 => bulkhead.try_acquire(),
                            1 => {
                                // Cancelled mid-wait (or not, if a permit comes in time).
                                let patience = Duration::from_micros(rng.below(1_500));
                                match tokio::time::timeout(patience, bulkhead.acquire()).await {
                                    Ok(result) => result,
                                    Err(_) => {
                                        tally.cancelled.fetch_add(1, O::Relaxed);
                                        continue;
                                    }
                                }
                            }
                            _ => bulkhead.acquire().await,
                        };
                        tally.outcome(&result, MAX);
                        if result.is_ok() {
                            if rng.below(40) == 0 {
                                tokio::time::sleep(Duration::from_millis(3)).await;
                            }
                            for _ in 0..rng.below(3) {
                                tokio::task::yield_now().await;
                            }
                            tally.leave();
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    for thread in threads {
        thread.join().unwrap();
    }

    assert_idle(&bulkhead);
    let m = bulkhead.metrics();
    assert_eq!(m.permitted_calls(), tally.permitted.load(O::Relaxed));
    assert_eq!(m.rejected_calls(), tally.rejected.load(O::Relaxed));
    assert_eq!(m.finished_calls(), m.permitted_calls());
    let attempts = 2 * 1_500 + 8 * 400;
    assert_eq!(
        m.permitted_calls() + m.rejected_calls() + tally.cancelled.load(O::Relaxed),
        attempts
    );
    eprintln!(
        "stress (fair: {fair}): {m:?}, {} timed out, {} cancelled",
        tally.timed_out.load(O::Relaxed),
        tally.cancelled.load(O::Relaxed)
    );
    assert!(m.permitted_calls() > 0 && m.rejected_calls() > 0);
}

#[test]
fn stress_fair() {
    stress(true);
}

#[test]
fn stress_unfair() {
    stress(false);
}

// ---------------------------------------------------------------------------------------------
// Property: the bulkhead driven step by step behaves like a plain reference model

#[derive(Clone, Debug)]
enum Step {
    TryAcquire,
    /// A new async caller, polled once.
    Arrive,
    /// Poll waiter `i` (modulo the live waiters) again.
    Poll(usize),
    /// Drop waiter `i` (cancel it).
    Cancel(usize),
    /// Drop held permit `i`.
    Release(usize),
    /// Reconfigure to this limit, toggling the fairness if `true`.
    Reconfigure(u32, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::TryAcquire),
        3 => Just(Step::Arrive),
        3 => any::<usize>().prop_map(Step::Poll),
        1 => any::<usize>().prop_map(Step::Cancel),
        3 => any::<usize>().prop_map(Step::Release),
        1 => (1u32..=4, proptest::bool::weighted(0.3))
            .prop_map(|(max, toggle)| Step::Reconfigure(max, toggle)),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stand {
    Queued,
    Notified,
    Granted,
}

/// The reference: a counter of free permits (negative while a shrink's surplus of held
/// permits is outstanding), a FIFO of waiter ids, and plain counters.
struct Model {
    fair: bool,
    max: u32,
    free: i64,
    queue: VecDeque<u32>,
    stands: std::collections::HashMap<u32, Stand>,
    permitted: u64,
    rejected: u64,
    /// Permits released by the calls that held them.
    finished: u64,
}

impl Model {
    fn newcomer_may_take(&self) -> bool {
        self.free > 0 && (!self.fair || self.queue.is_empty())
    }

    /// Free permits as the bulkhead reports them.
    fn available(&self) -> u32 {
        u32::try_from(self.free.max(0)).unwrap()
    }

    /// Permits handed to waiters that have not picked them up yet.
    fn granted(&self) -> u64 {
        self.stands
            .values()
            .filter(|s| **s == Stand::Granted)
            .count() as u64
    }

    /// The new limit counts the permits held; a grow serves the queue as releases would, and
    /// under fair handling (newly turned on, too) no permit stays free while someone waits.
    fn reconfigure(&mut self, max: u32, fair: bool) {
        let before = self.available();
        self.free += i64::from(max) - i64::from(self.max);
        self.max = max;
        self.fair = fair;
        if fair {
            while self.free > 0 && !self.queue.is_empty() {
                self.wake_next();
            }
        } else {
            for _ in 0..self.available().saturating_sub(before) {
                self.wake_next();
            }
        }
    }

    fn wake_next(&mut self) {
        if self.free <= 0 {
            return;
        }
        if let Some(head) = self.queue.pop_front() {
            if self.fair {
                self.free -= 1;
                self.stands.insert(head, Stand::Granted);
            } else {
                self.stands.insert(head, Stand::Notified);
            }
        }
    }

    fn release(&mut self) {
        self.free += 1;
        self.wake_next();
    }

    /// Polls waiter `id`: whether it gets its permit.
    fn poll(&mut self, id: u32) -> bool {
        match self.stands[&id] {
            Stand::Granted => true,
            // Out of the queue, it competes as a newcomer does (it can meet a queue under fair
            // handling turned on after it was woken).
            Stand::Notified if self.newcomer_may_take() => {
                self.free -= 1;
                true
            }
            Stand::Notified => {
                self.stands.insert(id, Stand::Queued);
                self.queue.push_front(id);
                false
            }
            Stand::Queued => false,
        }
    }

    fn cancel(&mut self, id: u32) {
        match self.stands.remove(&id).unwrap() {
            Stand::Queued => self.queue.retain(|&w| w != id),
            Stand::Granted => self.release(),
            Stand::Notified => self.wake_next(),
        }
    }
}

fn check_against_model(fair: bool, max: u32, steps: &[Step]) -> Result<(), TestCaseError> {
    let bulkhead = bulkhead(max, Duration::MAX, fair);
    let mut model = Model {
        fair,
        max,
        free: i64::from(max),
        queue: VecDeque::new(),
        stands: Default::default(),
        permitted: 0,
        rejected: 0,
        finished: 0,
    };
    let mut held = Vec::new();
    let mut probes: Vec<(u32, Probe<'_>)> = Vec::new();
    let mut next_id = 0;
    for step in steps {
        match step {
            Step::TryAcquire => {
                let expected = model.newcomer_may_take();
                let got = bulkhead.try_acquire();
                prop_assert_eq!(got.is_ok(), expected, "try_acquire");
                if let Ok(permit) = got {
                    model.free -= 1;
                    model.permitted += 1;
                    held.push(permit);
                } else {
                    model.rejected += 1;
                }
            }
            Step::Arrive => {
                let mut probe = Probe::new(&bulkhead);
                let expected = model.newcomer_may_take();
                match probe.poll() {
                    Poll::Ready(Ok(permit)) => {
                        prop_assert!(expected, "admitted a newcomer the model queues");
                        model.free -= 1;
                        model.permitted += 1;
                        held.push(permit);
                    }
                    Poll::Ready(Err(rejected)) => {
                        prop_assert!(false, "rejected with an endless wait: {:?}", rejected)
                    }
                    Poll::Pending => {
                        prop_assert!(!expected, "queued a newcomer the model admits");
                        model.queue.push_back(next_id);
                        model.stands.insert(next_id, Stand::Queued);
                        probes.push((next_id, probe));
                        next_id += 1;
                    }
                }
            }
            Step::Poll(i) if !probes.is_empty() => {
                let i = i % probes.len();
                let id = probes[i].0;
                let expected = model.poll(id);
                let woken = probes[i].1.woken();
                match probes[i].1.poll() {
                    Poll::Ready(Ok(permit)) => {
                        prop_assert!(expected, "waiter got a permit the model withholds");
                        prop_assert!(woken, "a waiter able to proceed was never woken");
                        model.stands.remove(&id);
                        model.permitted += 1;
                        held.push(permit);
                        probes.remove(i);
                    }
                    Poll::Ready(Err(rejected)) => {
                        prop_assert!(false, "rejected with an endless wait: {:?}", rejected)
                    }
                    Poll::Pending => prop_assert!(!expected, "waiter denied a permit"),
                }
            }
            Step::Cancel(i) if !probes.is_empty() => {
                let (id, probe) = probes.remove(i % probes.len());
                drop(probe);
                model.cancel(id);
            }
            Step::Release(i) if !held.is_empty() => {
                drop(held.remove(i % held.len()));
                model.release();
                model.finished += 1;
            }
            Step::Reconfigure(max, toggle) => {
                let fair = model.fair != *toggle;
                bulkhead.reconfigure(config(*max, Duration::MAX, fair));
                model.reconfigure(*max, fair);
            }
            Step::Poll(_) | Step::Cancel(_) | Step::Release(_) => {}
        }
        prop_assert_eq!(bulkhead.available_concurrent_calls(), model.available());
        prop_assert_eq!(bulkhead.max_allowed_concurrent_calls(), model.max);
        // Free permits and permits held add up to the limit (with any surplus), the held ones
        // being those of the calls and those handed to waiters.
        prop_assert_eq!(
            i64::from(model.max) - model.free,
            (held.len() as u64 + model.granted()) as i64
        );
        let m = bulkhead.metrics();
        prop_assert_eq!(m.available_concurrent_calls(), model.available());
        prop_assert_eq!(m.max_allowed_concurrent_calls(), model.max);
        prop_assert_eq!(m.permitted_calls(), model.permitted);
        prop_assert_eq!(m.rejected_calls(), model.rejected);
        // A permit handed over but not picked up is held yet not counted as permitted: the
        // finished calls lag by those (documented on `BulkheadMetrics`).
        prop_assert_eq!(
            m.finished_calls(),
            model.finished.saturating_sub(model.granted())
        );
        prop_assert_eq!(waiters(&bulkhead), (probes.len(), model.queue.len()));
        prop_assert_eq!(
            bulkhead.semaphore.has_waiters_bit(),
            !model.queue.is_empty()
        );
        // No lost wake-up: a free permit with callers queued means someone is awake for it.
        if model.free > 0 && !model.queue.is_empty() {
            let awake = probes
                .iter()
                .any(|(id, probe)| model.stands[id] != Stand::Queued && probe.woken());
            prop_assert!(awake, "a permit is free, callers wait, and nobody is awake");
        }
    }
    drop(probes);
    drop(held);
    prop_assert_eq!(bulkhead.available_concurrent_calls(), model.max);
    prop_assert_eq!(waiters(&bulkhead), (0, 0));
    prop_assert_eq!(bulkhead.metrics().finished_calls(), model.permitted);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fair_bulkhead_behaves_like_the_model(
        max in 1u32..=3,
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        check_against_model(true, max, &steps)?;
    }

    #[test]
    fn unfair_bulkhead_behaves_like_the_model(
        max in 1u32..=3,
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        check_against_model(false, max, &steps)?;
    }
}
