//! The hedge: on a manual clock, polled by hand, each attempt a future the test answers when it
//! chooses. A slow first attempt is overtaken by the hedge and dropped with its permits
//! released; a failure starts the next attempt at once; the budget stops extra attempts; a time
//! limiter outside the hedge bounds every attempt; a sync call passes through.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use resilience_runtime::{
    hedge, Aspect, BulkheadConfig, CircuitBreakerConfig, Guard, HedgeConfig, HedgeEvent,
    ManualClock, Registry, Rejected, RetryBudget, TimeLimiterConfig,
};
use tokio::sync::oneshot;

#[derive(Clone, Debug, PartialEq)]
enum SearchError {
    Busy,
    NotFound,
    /// The attempt panics when it gets this answer.
    Panic,
    Rejected(Rejected),
}

impl From<Rejected> for SearchError {
    fn from(r: Rejected) -> Self {
        SearchError::Rejected(r)
    }
}

type Answer = Result<u32, SearchError>;

/// The attempts a call made: each waits for the answer the test sends it, and counts itself
/// as cancelled if dropped before it got one.
#[derive(Clone, Default)]
struct Dependency {
    answers: Arc<Mutex<Vec<Option<oneshot::Sender<Answer>>>>>,
    /// Answers given before the attempt is made: it answers at its first poll.
    ready: Arc<Mutex<Vec<(usize, Answer)>>>,
    cancelled: Arc<AtomicU32>,
}

struct Cancelled(Arc<AtomicU32>, bool);

impl Cancelled {
    fn answered(&mut self) {
        self.1 = true;
    }
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Dependency {
    /// One attempt: waits for its answer.
    fn attempt(&self) -> impl Future<Output = Answer> + Send + 'static {
        let (send, receive) = oneshot::channel();
        let mut answers = self.answers.lock().unwrap();
        answers.push(Some(send));
        let n = answers.len();
        let mut ready = self.ready.lock().unwrap();
        if let Some(i) = ready.iter().position(|(at, _)| *at == n) {
            let (_, answer) = ready.remove(i);
            let send = answers[n - 1].take().expect("not answered yet");
            let _ = send.send(answer);
        }
        let mut guard = Cancelled(Arc::clone(&self.cancelled), false);
        async move {
            let answer = receive
                .await
                .expect("the test answers every attempt it keeps");
            guard.answered();
            if answer == Err(SearchError::Panic) {
                panic!("the attempt panics");
            }
            answer
        }
    }

    /// Attempt `n` answers `answer` at its first poll.
    fn answers_at_once(&self, n: usize, answer: Answer) {
        self.ready.lock().unwrap().push((n, answer));
    }

    fn made(&self) -> usize {
        self.answers.lock().unwrap().len()
    }

    /// Answers attempt `n` (1 for the first).
    fn answer(&self, n: usize, answer: Answer) {
        let send = self.answers.lock().unwrap()[n - 1]
            .take()
            .expect("answered once");
        let _ = send.send(answer);
    }

    fn cancelled(&self) -> u32 {
        self.cancelled.load(Ordering::Relaxed)
    }
}

fn poll<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

fn hedge(delay_ms: u64, attempts: u32) -> HedgeConfig {
    HedgeConfig::builder()
        .delay(Duration::from_millis(delay_ms))
        .max_hedged_attempts(attempts)
        .build()
        .unwrap()
}

/// A registry on a manual clock with a bulkhead of 10, a hedge and a breaker.
fn registry(config: HedgeConfig) -> (Registry, ManualClock) {
    let clock = ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_bulkhead(
            "search",
            BulkheadConfig::builder()
                .max_concurrent_calls(10)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_circuit_breaker(
            "search",
            CircuitBreakerConfig::builder()
                .minimum_number_of_calls(100)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.configure_hedge("search", config).unwrap();
    (registry, clock)
}

const GUARDS: [Guard<'static>; 3] = [
    Guard::bulkhead("search"),
    Guard::hedge("search"),
    Guard::circuit_breaker("search"),
];

#[test]
fn a_slow_first_attempt_is_overtaken_and_dropped_with_its_permits_released() {
    let (registry, clock) = registry(hedge(50, 1));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    registry
        .hedge("search")
        .subscribe(move |e: &HedgeEvent| sink.lock().unwrap().push(e.to_string()));

    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 1);
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 9);

    clock.advance(Duration::from_millis(49));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 1, "no hedge before the delay");
    clock.advance(Duration::from_millis(1));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 2, "the hedge starts at the delay");
    assert_eq!(
        registry.bulkhead("search").available_concurrent_calls(),
        9,
        "the bulkhead outside the hedge admitted the call once"
    );

    dependency.answer(2, Ok(7));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(7)));
    assert_eq!(dependency.cancelled(), 1, "the first attempt was dropped");
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
    let breaker = registry.circuit_breaker("search").metrics();
    assert_eq!(
        breaker.number_of_successful_calls(),
        1,
        "the winner recorded"
    );
    assert_eq!(
        breaker.number_of_buffered_calls(),
        1,
        "the loser recorded nothing"
    );
    let m = registry.hedge("search").metrics();
    assert_eq!(m.secondary_success_count(), 1);
    assert_eq!(m.primary_success_count(), 0);
    assert_eq!(m.number_of_hedged_attempts(), 1);
    assert_eq!(
        *events.lock().unwrap(),
        [
            "hedge `search`: attempt 2 started",
            "hedge `search`: attempt 2 answered first and succeeded",
        ]
    );
}

#[test]
fn a_first_attempt_that_answers_before_the_delay_makes_no_hedge() {
    let (registry, clock) = registry(hedge(50, 1));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(30));
    dependency.answer(1, Ok(1));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(1)));
    clock.advance(Duration::from_secs(1));
    assert_eq!(dependency.made(), 1);
    let m = registry.hedge("search").metrics();
    assert_eq!(
        (m.primary_success_count(), m.number_of_hedged_attempts()),
        (1, 0)
    );
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
}

#[test]
fn a_failure_starts_the_next_attempt_at_once_and_the_last_failure_ends_the_call() {
    let (registry, clock) = registry(hedge(50, 2));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    dependency.answer(1, Err(SearchError::Busy));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        dependency.made(),
        2,
        "the failure started attempt 2 without waiting"
    );
    clock.advance(Duration::from_millis(50));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        dependency.made(),
        3,
        "attempt 3 after the delay, beside attempt 2"
    );
    dependency.answer(3, Err(SearchError::Busy));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        dependency.made(),
        3,
        "no attempt is left: it waits for attempt 2"
    );
    dependency.answer(2, Err(SearchError::Busy));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Err(SearchError::Busy)));
    let m = registry.hedge("search").metrics();
    assert_eq!(m.secondary_failure_count(), 1);
    assert_eq!(m.number_of_hedged_attempts(), 2);
    let breaker = registry.circuit_breaker("search").metrics();
    assert_eq!(
        breaker.number_of_failed_calls(),
        3,
        "each attempt entered the breaker"
    );
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
}

#[test]
fn the_budget_stops_extra_attempts_and_counts_them() {
    let config = HedgeConfig::builder()
        .delay(Duration::from_millis(50))
        .budget(RetryBudget::ratio(0.0).min_retries_per_second(0))
        .build()
        .unwrap();
    let (registry, clock) = registry(config);
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(200));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 1, "over budget: no hedge");
    dependency.answer(1, Ok(3));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(3)));
    let m = registry.hedge("search").metrics();
    assert_eq!(m.number_of_hedges_over_budget(), 1);
    assert_eq!(m.number_of_hedged_attempts(), 0);
    assert_eq!(m.primary_success_count(), 1);
}

#[test]
fn a_time_limiter_outside_the_hedge_cuts_off_every_attempt() {
    let (registry, clock) = registry(hedge(50, 3));
    registry
        .configure_time_limiter(
            "search",
            TimeLimiterConfig::builder()
                .timeout_duration(Duration::from_millis(120))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.set_precedence(Aspect::TimeLimiter, 150).unwrap();
    let plan = registry
        .plan(&[
            Guard::bulkhead("search"),
            Guard::time_limiter("search"),
            Guard::hedge("search"),
            Guard::circuit_breaker("search"),
        ])
        .unwrap();
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    for _ in 0..2 {
        clock.advance(Duration::from_millis(50));
        assert!(poll(call.as_mut()).is_pending());
    }
    assert_eq!(dependency.made(), 3);
    clock.advance(Duration::from_millis(20));
    assert!(matches!(
        poll(call.as_mut()),
        Poll::Ready(Err(SearchError::Rejected(Rejected::TimedOut { .. })))
    ));
    assert_eq!(
        dependency.made(),
        3,
        "no attempt started past the time limit"
    );
    assert_eq!(dependency.cancelled(), 3, "every attempt was cut off");
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
    assert_eq!(
        registry
            .circuit_breaker("search")
            .metrics()
            .number_of_buffered_calls(),
        0,
        "attempts cut off record nothing"
    );
}

#[test]
fn a_call_dropped_while_its_attempts_run_releases_every_permit() {
    let (registry, clock) = registry(hedge(10, 2));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    {
        let mut call = pin!(plan.call_async(|| dependency.attempt()));
        assert!(poll(call.as_mut()).is_pending());
        for _ in 0..2 {
            clock.advance(Duration::from_millis(10));
            assert!(poll(call.as_mut()).is_pending());
        }
        assert_eq!(dependency.made(), 3);
    }
    assert_eq!(dependency.cancelled(), 3);
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
    let m = registry.hedge("search").metrics();
    assert_eq!(
        m.primary_success_count()
            + m.secondary_success_count()
            + m.primary_failure_count()
            + m.secondary_failure_count(),
        0,
        "a call given up is not an outcome"
    );
}

#[test]
fn a_sync_call_passes_through_its_hedge() {
    let (registry, _clock) = registry(hedge(0, 3));
    let plan = registry.plan(&GUARDS).unwrap();
    let mut made = 0;
    let result: Result<u32, SearchError> = plan.call(|| {
        made += 1;
        Err(SearchError::NotFound)
    });
    assert_eq!(result, Err(SearchError::NotFound));
    assert_eq!(made, 1);
    assert_eq!(
        registry.hedge("search").metrics().primary_failure_count(),
        1
    );
}

#[test]
fn a_configuration_file_configures_a_hedge_and_refuses_a_bad_one() {
    let registry = Registry::new();
    registry
        .load_toml(
            r#"
            [hedge.instances.search]
            delay = "40ms"
            delay_percentile = 95.0
            max_hedged_attempts = 2
            budget_ratio = 0.1
            "#,
        )
        .unwrap();
    let config = registry.hedge("search").config();
    assert_eq!(config.delay(), Duration::from_millis(40));
    assert_eq!(config.max_hedged_attempts(), 2);
    assert_eq!(config.delay_percentile(), Some(95.0));
    assert_eq!(config.budget().map(|b| b.ratio_value()), Some(0.1));

    let err = registry
        .load_toml("[hedge.instances.search]\nmax_hedged_attempts = 0\n")
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("max_hedged_attempts"), "{message}");
    assert!(message.starts_with("2:"), "the line is named: {message}");
}

static CLOCK: LazyLock<ManualClock> = LazyLock::new(ManualClock::new);
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let registry = Registry::with_clock(CLOCK.clone());
    registry.configure_hedge("macro", hedge(50, 2)).unwrap();
    registry
});
static DEPENDENCY: LazyLock<Dependency> = LazyLock::new(Dependency::default);
static CLONES: AtomicU32 = AtomicU32::new(0);

/// A query taken by value: cloned for each attempt.
struct Query(u32);

impl Clone for Query {
    fn clone(&self) -> Self {
        CLONES.fetch_add(1, Ordering::Relaxed);
        Query(self.0)
    }
}

fn is_busy(e: &SearchError) -> bool {
    *e == SearchError::Busy
}

#[hedge(name = "macro", hedge_on = is_busy, registry = REGISTRY)]
async fn search(query: Query) -> Result<u32, SearchError> {
    DEPENDENCY.attempt().await.map(|hits| hits + query.0)
}

#[test]
fn the_attribute_hedges_on_the_errors_hedge_on_accepts_and_clones_arguments_per_attempt() {
    // An error `hedge_on` refuses is an answer: the call ends with it.
    let mut call = pin!(search(Query(100)));
    assert!(poll(call.as_mut()).is_pending());
    DEPENDENCY.answer(1, Err(SearchError::NotFound));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Err(SearchError::NotFound)));
    assert_eq!(DEPENDENCY.made(), 1);

    // One it accepts starts the next attempt at once; the delay starts the third beside it.
    let mut call = pin!(search(Query(100)));
    assert!(poll(call.as_mut()).is_pending());
    DEPENDENCY.answer(2, Err(SearchError::Busy));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(DEPENDENCY.made(), 3);
    CLOCK.advance(Duration::from_millis(50));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(DEPENDENCY.made(), 4);
    DEPENDENCY.answer(4, Ok(5));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(105)));
    assert_eq!(DEPENDENCY.cancelled(), 1, "attempt 3 was dropped");
    assert_eq!(CLONES.load(Ordering::Relaxed), 4, "one clone per attempt");
    let m = REGISTRY.hedge("macro").metrics();
    assert_eq!(m.primary_failure_count(), 1);
    assert_eq!(m.secondary_success_count(), 1);

    // An error it refuses, from a later attempt, ends the call with the others still running.
    let mut call = pin!(search(Query(100)));
    assert!(poll(call.as_mut()).is_pending());
    CLOCK.advance(Duration::from_millis(50));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(DEPENDENCY.made(), 6);
    DEPENDENCY.answer(6, Err(SearchError::NotFound));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Err(SearchError::NotFound)));
    assert_eq!(DEPENDENCY.cancelled(), 2, "attempt 5 was dropped");
    assert_eq!(
        REGISTRY.hedge("macro").metrics().secondary_failure_count(),
        1
    );
}

#[test]
fn a_first_attempt_that_fails_at_once_is_followed_by_the_next_in_its_place() {
    let (registry, clock) = registry(hedge(50, 2));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    dependency.answers_at_once(1, Err(SearchError::Busy));
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 2, "attempt 2 started at the first poll");
    clock.advance(Duration::from_millis(50));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 3, "attempt 3 after the delay");
    dependency.answer(2, Ok(2));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(2)));
    let m = registry.hedge("search").metrics();
    assert_eq!(
        (m.secondary_success_count(), m.number_of_hedged_attempts()),
        (1, 2)
    );
    assert_eq!(dependency.cancelled(), 1);
    let breaker = registry.circuit_breaker("search").metrics();
    assert_eq!(
        (
            breaker.number_of_failed_calls(),
            breaker.number_of_successful_calls()
        ),
        (1, 1),
        "the failure and the winner recorded, attempt 3 not"
    );
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
}

#[test]
fn a_retry_outside_the_hedge_begins_it_again_for_each_of_its_attempts() {
    let (registry, _clock) = registry(hedge(50, 1));
    registry
        .configure_retry(
            "search",
            resilience_runtime::RetryConfig::builder()
                .max_attempts(2)
                .wait_duration(Duration::ZERO)
                .build()
                .unwrap(),
        )
        .unwrap();
    let plan = registry
        .plan(&[Guard::retry("search"), Guard::hedge("search")])
        .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    registry
        .hedge("search")
        .subscribe(move |e: &HedgeEvent| sink.lock().unwrap().push(e.to_string()));
    let dependency = Dependency::default();
    dependency.answers_at_once(1, Err(SearchError::Busy));
    dependency.answers_at_once(2, Err(SearchError::Busy));
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        dependency.made(),
        3,
        "the retry's second attempt is the hedge's first again"
    );
    dependency.answer(3, Ok(9));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(9)));
    assert_eq!(
        *events.lock().unwrap(),
        [
            "hedge `search`: attempt 2 started",
            "hedge `search`: the call ended with attempt 2's failure",
            "hedge `search`: the first attempt succeeded",
        ]
    );
    let retry = registry.retry("search").metrics();
    assert_eq!(retry.number_of_successful_calls_with_retry_attempt(), 1);
}

#[test]
fn a_panic_in_one_attempt_releases_every_permit_and_counts_no_outcome() {
    let (registry, clock) = registry(hedge(10, 1));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    {
        let mut call = pin!(plan.call_async(|| dependency.attempt()));
        assert!(poll(call.as_mut()).is_pending());
        clock.advance(Duration::from_millis(10));
        assert!(poll(call.as_mut()).is_pending());
        assert_eq!(dependency.made(), 2);
        dependency.answer(2, Err(SearchError::Panic));
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = poll(call.as_mut());
        }));
        assert!(polled.is_err(), "the panic reaches the caller");
    }
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 10);
    let m = registry.hedge("search").metrics();
    assert_eq!(
        m.primary_success_count()
            + m.secondary_success_count()
            + m.primary_failure_count()
            + m.secondary_failure_count(),
        0
    );
    let breaker = registry.circuit_breaker("search").metrics();
    assert_eq!(
        breaker.number_of_buffered_calls(),
        0,
        "a panic records nothing"
    );
}

/// A plan whose bulkhead of one permit is inside the hedge: each attempt asks it.
fn bulkhead_inside(registry: &Registry) -> resilience_runtime::Plan {
    registry
        .configure_bulkhead(
            "search",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .max_wait_duration(Duration::from_secs(1))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.set_precedence(Aspect::Bulkhead, 380).unwrap();
    registry.plan(&GUARDS).unwrap()
}

#[test]
fn an_attempt_waiting_for_a_gate_inside_the_hedge_is_dropped_with_its_wait() {
    let (registry, clock) = registry(hedge(10, 1));
    let plan = bulkhead_inside(&registry);
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(10));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        dependency.made(),
        1,
        "attempt 2 waits for the bulkhead attempt 1 holds"
    );
    assert_eq!(
        registry
            .hedge("search")
            .metrics()
            .number_of_hedged_attempts(),
        1
    );
    dependency.answer(1, Ok(1));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(1)));
    // A wait left behind would have taken the permit attempt 1 gave back.
    assert_eq!(registry.bulkhead("search").available_concurrent_calls(), 1);
    assert_eq!(
        registry.hedge("search").metrics().primary_success_count(),
        1
    );
}

#[test]
fn a_future_given_once_makes_one_attempt_through_a_hedge() {
    let (registry, clock) = registry(hedge(10, 1));
    let plan = bulkhead_inside(&registry);
    let bulkhead = registry.bulkhead("search");
    let held = bulkhead.try_acquire().expect("a permit");
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_future(dependency.attempt()));
    assert!(
        poll(call.as_mut()).is_pending(),
        "it waits for the bulkhead"
    );
    clock.advance(Duration::from_millis(50));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        registry
            .hedge("search")
            .metrics()
            .number_of_hedged_attempts(),
        0
    );
    drop(held);
    assert!(poll(call.as_mut()).is_pending());
    dependency.answer(1, Ok(4));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(4)));
    assert_eq!(dependency.made(), 1);
}

#[test]
fn a_zero_delay_starts_every_attempt_at_once() {
    let (registry, _clock) = registry(hedge(0, 2));
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), 3);
    dependency.answer(3, Ok(3));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(3)));
    assert_eq!(dependency.cancelled(), 2);
}

#[test]
fn the_losers_half_open_permits_are_given_back_unrecorded() {
    let (registry, clock) = registry(hedge(10, 1));
    registry
        .configure_circuit_breaker(
            "search",
            CircuitBreakerConfig::builder()
                .permitted_calls_in_half_open_state(2)
                .build()
                .unwrap(),
        )
        .unwrap();
    let breaker = registry.circuit_breaker("search");
    breaker.transition_to_open_state().unwrap();
    breaker.transition_to_half_open_state().unwrap();
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(10));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(
        dependency.made(),
        2,
        "both attempts hold a half-open permit"
    );
    dependency.answer(2, Ok(2));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(2)));
    assert_eq!(breaker.metrics().number_of_successful_calls(), 1);
    assert_eq!(breaker.metrics().number_of_buffered_calls(), 1);
    // The loser's permit came back: one more trial call completes the half-open state.
    let answered: Result<u32, SearchError> = plan.call(|| Ok(1));
    assert_eq!(answered, Ok(1));
    assert_eq!(breaker.state(), resilience_runtime::CircuitState::Closed);
}

#[test]
fn a_percentile_delay_follows_the_latencies_of_the_attempts_that_won() {
    let config = HedgeConfig::builder()
        .delay(Duration::from_millis(50))
        .delay_percentile(90.0)
        .build()
        .unwrap();
    let (registry, clock) = registry(config);
    let plan = registry.plan(&GUARDS).unwrap();
    let dependency = Dependency::default();
    // Until 20 latencies are seen, the fixed delay.
    for n in 1..=HedgeConfig::MIN_LATENCIES as usize {
        let mut call = pin!(plan.call_async(|| dependency.attempt()));
        assert!(poll(call.as_mut()).is_pending());
        clock.advance(Duration::from_millis(10));
        dependency.answer(n, Ok(1));
        assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(1)));
    }
    let delay = registry.hedge("search").metrics().current_hedge_delay();
    assert!(
        delay >= Duration::from_millis(10) && delay < Duration::from_millis(13),
        "the p90 of 10 ms attempts: {delay:?}"
    );
    // The next call is hedged at the percentile, not at 50 ms.
    let made = dependency.made();
    let mut call = pin!(plan.call_async(|| dependency.attempt()));
    assert!(poll(call.as_mut()).is_pending());
    clock.advance(Duration::from_millis(13));
    assert!(poll(call.as_mut()).is_pending());
    assert_eq!(dependency.made(), made + 2, "hedged at the percentile");
    dependency.answer(made + 2, Ok(2));
    assert_eq!(poll(call.as_mut()), Poll::Ready(Ok(2)));
}
