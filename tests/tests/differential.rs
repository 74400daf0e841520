//! Every entry of the engine against the reference execution of a plan
//! (`resilience_runtime::__reference`), on random plans, configurations and scripts.
//!
//! A case is a set of guards (any subset of the five aspects), a random precedence, small
//! configurations near their limits (the breaker's window by count or by time, the breaker
//! forced open, disabled or only measuring), and a few calls in a row on one registry, each
//! with a script: the instances reconfigured in place before the call or, async, while it
//! runs; how long each attempt takes and how it ends (`Ok`, a failure, an ignored error, a
//! panic), bulkhead permits held by someone else, time passing before the call, and for async
//! calls a caller that gives up after some polls and calls that run side by side (their
//! polls taking turns, as two tasks on one thread); an attempt may also call through the same
//! plan again (a re-entry, under a random re-entrancy policy). The same case runs once through
//! the reference and once through each entry, each on a registry of its own with a manual
//! clock; after every call the two must agree on the result, the attempts the body saw (and
//! those it was dropped in), every instance's metrics, the breaker's state, the permits left,
//! and the event log.
//!
//! The entries: `Plan::{run, call, enter + Entered::run}` (sync), `Plan::{run_async,
//! call_async, run_future, call_future, enter_async + Entered::run_async}`, and annotated
//! functions of the shapes the macros expand differently (one annotation or several, with and
//! without a wrapper, a fallback, methods by `&self`, `&mut self` and `self`), which reach
//! every `__private` entry; generic and `async_trait` functions expand to the same entries and
//! are held to their own tests (`macro_shapes.rs`). Sync calls never wait here, for a gate or
//! between a retry's attempts (a blocking wait on a manual clock has no one to move the
//! clock); those waits are covered by the bulkhead's, the rate limiter's and the retry's own
//! tests.
//!
//! Time is the manual clock's: a sync body moves it by its latency; an async body is pending
//! until the clock reaches its end, and the driver moves the clock one tick after every poll
//! that leaves the call pending (so a time limiter, a gate's wait or a retry's wait all pass
//! in ticks, the same way for every entry).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use resilience_runtime::__private::{classify, is_err, retry_on};
use resilience_runtime::__reference as reference;
use resilience_runtime::tower::{GuardError, GuardLayer};
use resilience_runtime::{
    bulkhead, circuit_breaker, hedge, rate_limiter, retry, time_limiter, Aspect, BulkheadConfig,
    CallOutcome, CircuitBreakerConfig, FaultConfig, Guard, HedgeConfig, ManualClock, Plan,
    RateLimiterConfig, ReentrancyPolicy, Registry, Rejected, RetryConfig, SlidingWindow,
    TimeLimiterConfig,
};
use tower::{service_fn, Layer, ServiceExt};

/// Every instance of a case is called this.
const NAME: &str = "diff";

/// How far the driver moves the clock after a poll that leaves a call pending.
const TICK: Duration = Duration::from_millis(10);

/// A bound on the polls of one call: every scripted wait ends long before it.
const MAX_POLLS: u32 = 2_000;

// ----- the script -----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ends {
    Ok,
    /// An error the breakers record and the retry retries.
    Fail,
    /// An error the breakers ignore and the retry does not retry (a client error).
    Ignore,
    /// An error the breakers do not record as a failure (`record` says no: a success for
    /// them), which a time limiter still counts as failed and a macro's retry retries.
    Quiet,
    Panic,
}

#[derive(Clone, Copy, Debug)]
struct AttemptScript {
    /// In ticks.
    latency: u32,
    ends: Ends,
    /// Whether the attempt makes a call through the same plan (a re-entry, which the policy
    /// decides), before it ends.
    nested: bool,
}

#[derive(Clone, Debug)]
struct CallScript {
    /// Ticks the clock moves before the call.
    advance: u32,
    /// Bulkhead permits someone else holds when the call starts.
    occupied: u32,
    /// Async: the polls after which those permits come free (sync: after the call).
    freed_after: u32,
    /// Async: the polls after which the caller gives up (drops the call).
    dropped_after: Option<u32>,
    /// Async: the call runs side by side with the next one.
    with_next: bool,
    /// The instances are reconfigured (the case's other configuration) before the call
    /// starts, or, async, after this many of its polls: in place, while it runs.
    reconfigure: Option<u32>,
    /// Attempt `n` follows `attempts[n]`, the last one every attempt after it.
    attempts: Vec<AttemptScript>,
}

#[derive(Clone, Debug)]
struct Case {
    guards: Vec<Aspect>,
    precedence: Vec<(Aspect, i32)>,
    max_concurrent_calls: u32,
    max_wait: u32,
    limit_for_period: u32,
    rate_timeout: u32,
    max_attempts: u32,
    retry_wait: u32,
    retry_on_rejection: bool,
    window: u32,
    minimum_calls: u32,
    slow_call_ticks: u32,
    record_rejections: bool,
    timeout: u32,
    cancel: bool,
    policy: ReentrancyPolicy,
    /// The breaker's window counts the last calls, or (`true`) those of the last second.
    time_window: bool,
    /// The breaker keeps a histogram of call durations (which must change no decision).
    record_call_durations: bool,
    /// The breaker is put in this state before the first call.
    breaker_state: BreakerState,
    calls: Vec<CallScript>,
}

/// A state a breaker is put in by hand.
#[derive(Clone, Copy, Debug)]
enum BreakerState {
    AsConfigured,
    ForcedOpen,
    Disabled,
    MetricsOnly,
}

fn ticks(n: u32) -> Duration {
    TICK * n
}

impl Case {
    /// The guards a call site lists: fault injection is not among them, the registry adds it
    /// by itself to every plan of a name with faults (as it does for an annotated function).
    fn guards(&self) -> Vec<Guard<'static>> {
        self.listed().iter().map(|a| Guard::new(*a, NAME)).collect()
    }

    /// The case's aspects but fault injection.
    fn listed(&self) -> Vec<Aspect> {
        self.guards.iter().copied().filter(|a| *a != F).collect()
    }

    fn has(&self, aspect: Aspect) -> bool {
        self.guards.contains(&aspect)
    }

    fn has_wrappers(&self) -> bool {
        self.has(Aspect::Retry) || self.has(Aspect::TimeLimiter) || self.has(Aspect::Hedge)
    }

    /// A registry of its own, on a manual clock, configured for the case.
    fn registry(&self) -> (Registry, ManualClock, Events) {
        let clock = ManualClock::new();
        let registry = Registry::with_clock(clock.clone());
        registry.keep_recent_events(4096);
        registry.allow_fault_injection();
        registry.set_reentrancy_policy(self.policy);
        for (aspect, precedence) in &self.precedence {
            registry.set_precedence(*aspect, *precedence).unwrap();
        }
        self.configure(&registry, false);
        match self.breaker_state {
            BreakerState::AsConfigured => {}
            BreakerState::ForcedOpen => registry
                .circuit_breaker(NAME)
                .transition_to_forced_open_state(),
            BreakerState::Disabled => registry
                .circuit_breaker(NAME)
                .transition_to_disabled_state(),
            BreakerState::MetricsOnly => registry
                .circuit_breaker(NAME)
                .transition_to_metrics_only_state(),
        }
        let events = Events::default();
        events.subscribe(&registry);
        (registry, clock, events)
    }

    /// Configures every instance: the case's configuration, or (`other`) one that differs in
    /// each instance's limit, for a reconfiguration while calls run.
    fn configure(&self, registry: &Registry, other: bool) {
        let shift = u32::from(other);
        registry
            .configure_bulkhead(
                NAME,
                BulkheadConfig::builder()
                    .max_concurrent_calls(match (other, self.max_concurrent_calls) {
                        (false, calls) => calls,
                        (true, 1) => 2,
                        (true, calls) => calls - 1,
                    })
                    .max_wait_duration(ticks(self.max_wait))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_rate_limiter(
                NAME,
                RateLimiterConfig::builder()
                    .limit_for_period(self.limit_for_period + shift)
                    .limit_refresh_period(ticks(10))
                    .timeout_duration(ticks(self.rate_timeout))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_retry(
                NAME,
                RetryConfig::builder()
                    .max_attempts(self.max_attempts + shift)
                    .wait_duration(ticks(self.retry_wait))
                    .retry_on_rejection(self.retry_on_rejection)
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_circuit_breaker(
                NAME,
                CircuitBreakerConfig::builder()
                    .failure_rate_threshold(if other { 60.0 } else { 50.0 })
                    .slow_call_rate_threshold(50.0)
                    .slow_call_duration_threshold(ticks(self.slow_call_ticks))
                    .sliding_window(if self.time_window {
                        SlidingWindow::TimeBased(1)
                    } else {
                        SlidingWindow::CountBased(self.window)
                    })
                    .minimum_number_of_calls(self.minimum_calls)
                    .wait_duration_in_open_state(ticks(5))
                    .permitted_calls_in_half_open_state(1)
                    .record_rejections(self.record_rejections)
                    .record_call_durations(self.record_call_durations)
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_fault(
                NAME,
                if self.has(F) {
                    FaultConfig::builder()
                        .latency(if self.max_wait > 0 { 0.2 } else { 0.0 }, ticks(2))
                        .error_rate(0.15)
                        .refusal(0.1 + 0.05 * f64::from(shift))
                        .seed(u64::from(self.window))
                        .build()
                        .unwrap()
                } else {
                    FaultConfig::default()
                },
            )
            .unwrap();
        registry
            .configure_hedge(
                NAME,
                HedgeConfig::builder()
                    .delay_percentile(if self.cancel { 50.0 } else { 90.0 })
                    .delay(ticks(self.timeout.saturating_sub(1) + shift))
                    .max_hedged_attempts(self.max_attempts)
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_time_limiter(
                NAME,
                TimeLimiterConfig::builder()
                    .timeout_duration(ticks(self.timeout + shift))
                    .cancel_running_future(self.cancel)
                    .build()
                    .unwrap(),
            )
            .unwrap();
    }

    /// Reconfigures the instances in place: the other configuration from the one in force.
    fn reconfigure(&self, registry: &Registry, other: &std::cell::Cell<bool>) {
        other.set(!other.get());
        self.configure(registry, other.get());
    }
}

// ----- the body -----

#[derive(Debug, Clone, PartialEq)]
enum E {
    Rejected(Rejected),
    /// A fallback's answer to a refusal.
    Fallback(Rejected),
    Fail(u32),
    Ignore(u32),
    Quiet(u32),
}

impl From<Rejected> for E {
    fn from(rejected: Rejected) -> Self {
        E::Rejected(rejected)
    }
}

/// What one call through an entry ends in: its result, or a refusal.
type Out = Result<Result<u32, E>, Rejected>;

fn is_ignored(e: &E) -> bool {
    matches!(e, E::Ignore(_))
}

fn is_recorded(e: &E) -> bool {
    !matches!(e, E::Quiet(_))
}

fn is_retryable(e: &E) -> bool {
    !matches!(e, E::Ignore(_))
}

/// The breakers' classification of every run: an ignored error is neither a success nor a
/// failure.
fn classify3(result: &Result<u32, E>) -> CallOutcome {
    classify(result, is_ignored, |_| false, is_recorded)
}

/// What the body saw: each attempt started, ended, or given up (its future dropped before it
/// ended).
type Log = Arc<Mutex<Vec<String>>>;

/// One call's body: made again for each attempt, each following its attempt's script.
#[derive(Clone)]
struct Body {
    script: Arc<Vec<AttemptScript>>,
    /// The plan a nested call goes through.
    plan: Plan,
    clock: ManualClock,
    log: Log,
    attempt: Arc<Mutex<usize>>,
}

const PANIC: &str = "a scripted panic";

impl Body {
    fn next(&self) -> (u32, AttemptScript) {
        let mut attempt = self.attempt.lock().unwrap();
        let n = *attempt;
        *attempt += 1;
        let script = self.script[n.min(self.script.len() - 1)];
        self.log.lock().unwrap().push(format!("start {n}"));
        (n as u32, script)
    }

    fn end(&self, n: u32, ends: Ends) -> Result<u32, E> {
        self.log.lock().unwrap().push(format!("end {n}"));
        match ends {
            Ends::Ok => Ok(n),
            Ends::Fail => Err(E::Fail(n)),
            Ends::Ignore => Err(E::Ignore(n)),
            Ends::Quiet => Err(E::Quiet(n)),
            Ends::Panic => std::panic::panic_any(PANIC),
        }
    }

    /// A sync attempt: its latency passes on the clock while it runs.
    fn run(&self) -> Result<u32, E> {
        let (n, script) = self.next();
        self.clock.advance(ticks(script.latency));
        if script.nested {
            // Through the reference: what is compared is the call chain the outer call left.
            let nested = reference::run(&self.plan, || Ok(99), classify3, false);
            self.log_nested(nested);
        }
        self.end(n, script.ends)
    }

    fn log_nested(&self, nested: Out) {
        self.log
            .lock()
            .unwrap()
            .push(format!("nested {}", result_of(nested)));
    }

    /// An async attempt: pending until its latency has passed on the clock (which the
    /// driver moves); logged as given up if dropped before.
    fn run_async(&self) -> impl Future<Output = Result<u32, E>> + 'static {
        let body = self.clone();
        async move {
            let (n, script) = body.next();
            let end = body.clock.now() + ticks(script.latency);
            let mut pending = GiveUp {
                log: body.log.clone(),
                n,
                armed: true,
            };
            std::future::poll_fn(|_| {
                if body.clock.now() >= end {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            if script.nested {
                // Awaited in the body, so that a gate's wait passes in ticks as every other.
                let nested =
                    reference::run_async(&body.plan, || async { Ok(99) }, classify3, false).await;
                body.log_nested(nested);
            }
            pending.armed = false;
            body.end(n, script.ends)
        }
    }
}

struct GiveUp {
    log: Log,
    n: u32,
    armed: bool,
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        if self.armed {
            self.log.lock().unwrap().push(format!("dropped {}", self.n));
        }
    }
}

// ----- what is compared -----

/// Everything a user can see of a registry's instances after a call.
fn observe(registry: &Registry) -> Vec<String> {
    let bulkhead = registry.bulkhead(NAME);
    let limiter = registry.rate_limiter(NAME);
    let breaker = registry.circuit_breaker(NAME);
    let mut seen = vec![
        format!("{:?}", bulkhead.metrics()),
        format!(
            "rate limiter: {} available, {:?}",
            limiter.available_permissions(),
            limiter.metrics()
        ),
        format!("breaker: {:?} {:?}", breaker.state(), breaker.metrics()),
        format!("{:?}", registry.retry(NAME).metrics()),
        format!("{:?}", registry.time_limiter(NAME).metrics()),
        format!("{:?}", registry.hedge(NAME).metrics()),
        format!("{:?}", registry.fault(NAME).metrics()),
    ];
    seen.extend(registry.recent_events().iter().map(|e| {
        format!(
            "event {:?} {} {}: {}",
            e.aspect(),
            e.name(),
            e.kind(),
            e.message()
        )
    }));
    seen
}

/// Every event each instance delivered to a subscriber, in order: the per-call ones (a
/// success, an error, a time limiter's count) as well as the rare ones the registry keeps.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    fn subscribe(&self, registry: &Registry) {
        macro_rules! into {
            ($log:expr) => {{
                let log = Arc::clone(&$log.0);
                move |event: &_| log.lock().unwrap().push(format!("{event:?}"))
            }};
        }
        registry.bulkhead(NAME).subscribe(into!(self));
        registry.rate_limiter(NAME).subscribe(into!(self));
        registry.retry(NAME).subscribe(into!(self));
        registry.circuit_breaker(NAME).subscribe(into!(self));
        registry.time_limiter(NAME).subscribe(into!(self));
        registry.hedge(NAME).subscribe(into!(self));
        registry.fault(NAME).subscribe(into!(self));
    }

    /// The events since the last call of `take`.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// One call as the test saw it.
#[derive(Debug, PartialEq)]
struct Seen {
    result: String,
    /// The events delivered during the call.
    events: Vec<String>,
    body: Vec<String>,
    after: Vec<String>,
}

/// A call's result, in words common to every entry.
fn result_of(result: Out) -> String {
    match result {
        Ok(Ok(n)) => format!("ok {n}"),
        Ok(Err(E::Fail(n))) => format!("failed {n}"),
        Ok(Err(E::Ignore(n))) => format!("ignored {n}"),
        Ok(Err(E::Quiet(n))) => format!("unrecorded {n}"),
        Ok(Err(E::Rejected(r))) | Err(r) => format!("refused: {r:?}"),
        Ok(Err(E::Fallback(r))) => format!("fallback: {r:?}"),
    }
}

/// What a call ended in, besides its result.
enum Ended<T> {
    Returned(T),
    Panicked,
    Dropped,
}

fn ended_as(ended: Ended<Out>) -> String {
    match ended {
        Ended::Returned(result) => result_of(result),
        Ended::Panicked => "panicked".into(),
        Ended::Dropped => "dropped".into(),
    }
}

// ----- running a case -----

/// One way into the engine, run on `plan` for one call.
type SyncEntry<'e> = &'e dyn Fn(&Case, &Plan, &Body) -> Out;

/// Runs every call of `case` on a fresh registry through `entry`, sync.
fn run_sync(case: &Case, entry: SyncEntry<'_>) -> Vec<Seen> {
    let (registry, clock, events) = case.registry();
    let plan = registry.plan(&case.guards()).unwrap();
    let other = std::cell::Cell::new(false);
    let mut seen = Vec::new();
    for call in &case.calls {
        clock.advance(ticks(call.advance));
        if call.reconfigure.is_some() {
            case.reconfigure(&registry, &other);
        }
        let log = Log::default();
        let body = Body {
            script: Arc::new(call.attempts.clone()),
            plan: plan.clone(),
            clock: clock.clone(),
            log: log.clone(),
            attempt: Arc::default(),
        };
        let bulkhead = registry.bulkhead(NAME);
        let permits: Vec<_> = (0..call.occupied)
            .filter_map(|_| bulkhead.try_acquire().ok())
            .collect();
        let ended = match catch_unwind(AssertUnwindSafe(|| {
            registry.scope(|| entry(case, &plan, &body))
        })) {
            Ok(result) => Ended::Returned(result),
            Err(_) => Ended::Panicked,
        };
        drop(permits);
        seen.push(Seen {
            result: ended_as(ended),
            events: events.take(),
            body: std::mem::take(&mut *log.lock().unwrap()),
            after: observe(&registry),
        });
    }
    seen
}

/// The future of one call through an async entry.
type CallFuture<'a> = Pin<Box<dyn Future<Output = Out> + 'a>>;

/// An async entry: the future of one call on `plan`.
type AsyncEntry<'e> = &'e dyn for<'a> Fn(&'a Case, &'a Plan, &'a Body) -> CallFuture<'a>;

/// Runs every call of `case` on a fresh registry through `entry`, polled by hand: a call
/// scripted `with_next` runs side by side with the next one, their polls taking turns.
fn run_async(case: &Case, entry: AsyncEntry<'_>) -> Vec<Seen> {
    let (registry, clock, events) = case.registry();
    let plan = registry.plan(&case.guards()).unwrap();
    let bulkhead = registry.bulkhead(NAME);
    let other = std::cell::Cell::new(false);
    let reconfigure = || case.reconfigure(&registry, &other);
    let mut seen = Vec::new();
    let mut calls = case.calls.as_slice();
    while !calls.is_empty() {
        let together = calls
            .iter()
            .position(|c| !c.with_next)
            .map_or(calls.len(), |i| i + 1);
        let (group, rest) = calls.split_at(together);
        calls = rest;
        let bodies: Vec<Body> = group
            .iter()
            .map(|call| {
                clock.advance(ticks(call.advance));
                Body {
                    script: Arc::new(call.attempts.clone()),
                    plan: plan.clone(),
                    clock: clock.clone(),
                    log: Log::default(),
                    attempt: Arc::default(),
                }
            })
            .collect();
        let mut permits: Vec<Vec<_>> = group
            .iter()
            .map(|call| {
                (0..call.occupied)
                    .filter_map(|_| bulkhead.try_acquire().ok())
                    .collect()
            })
            .collect();
        let futures = bodies
            .iter()
            .map(|body| registry.scope_async(entry(case, &plan, body)))
            .collect();
        let ended = drive(futures, &clock, group, &mut permits, &reconfigure);
        drop(permits);
        let after = observe(&registry);
        let delivered = events.take();
        for (ended, body) in ended.into_iter().zip(&bodies) {
            seen.push(Seen {
                result: ended_as(ended),
                events: delivered.clone(),
                body: std::mem::take(&mut *body.log.lock().unwrap()),
                after: after.clone(),
            });
        }
    }
    seen
}

/// Polls `futures` in turn until each has ended, moving the clock a tick after each round
/// that leaves one pending; frees each call's occupied permits and gives it up as its script
/// says.
fn drive<F: Future, P>(
    futures: Vec<F>,
    clock: &ManualClock,
    calls: &[CallScript],
    permits: &mut [Vec<P>],
    reconfigure: &dyn Fn(),
) -> Vec<Ended<F::Output>> {
    let mut running: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut ended: Vec<_> = running.iter().map(|_| None).collect();
    let mut cx = Context::from_waker(Waker::noop());
    for round in 0..MAX_POLLS {
        for (i, call) in calls.iter().enumerate() {
            if round == call.freed_after {
                permits[i].clear();
            }
            if call.reconfigure == Some(round) {
                reconfigure();
            }
            let Some(future) = running[i].as_mut() else {
                continue;
            };
            let polled = if call.dropped_after == Some(round) {
                Some(Ended::Dropped)
            } else {
                match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
                    Ok(Poll::Ready(output)) => Some(Ended::Returned(output)),
                    Ok(Poll::Pending) => None,
                    Err(_) => Some(Ended::Panicked),
                }
            };
            if polled.is_some() {
                running[i] = None;
                ended[i] = polled;
            }
        }
        if running.iter().all(Option::is_none) {
            return ended.into_iter().map(|e| e.expect("ended")).collect();
        }
        clock.advance(TICK);
    }
    panic!("a call still pending after {MAX_POLLS} rounds");
}

// ----- the entries -----

fn reference_sync(_: &Case, plan: &Plan, body: &Body) -> Out {
    reference::run(plan, || body.run(), classify3, false)
}

fn reference_sync_judged(_: &Case, plan: &Plan, body: &Body) -> Out {
    reference::run_judged(
        plan,
        || body.run(),
        classify3,
        is_err,
        |r| retry_on(r, is_retryable),
    )
}

fn reference_sync_of_result(_: &Case, plan: &Plan, body: &Body) -> Out {
    reference::run(plan, || body.run(), CallOutcome::of_result, false)
}

fn plan_call(_: &Case, plan: &Plan, body: &Body) -> Out {
    Ok(plan.call(|| body.run()))
}

fn plan_run(_: &Case, plan: &Plan, body: &Body) -> Out {
    plan.run(|| body.run(), classify3)
}

fn plan_enter(_: &Case, plan: &Plan, body: &Body) -> Out {
    let entered = plan.enter()?;
    Ok(entered.run(|| body.run(), classify3))
}

fn boxed<'a>(future: impl Future<Output = Out> + 'a) -> CallFuture<'a> {
    Box::pin(future)
}

fn reference_async<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(reference::run_async(
        plan,
        || body.run_async(),
        classify3,
        false,
    ))
}

fn reference_async_once<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(reference::run_async(
        plan,
        || body.run_async(),
        classify3,
        true,
    ))
}

fn reference_async_of_result<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(reference::run_async(
        plan,
        || body.run_async(),
        CallOutcome::of_result,
        false,
    ))
}

fn reference_async_of_result_once<'a>(
    _: &'a Case,
    plan: &'a Plan,
    body: &'a Body,
) -> CallFuture<'a> {
    boxed(reference::run_async(
        plan,
        || body.run_async(),
        CallOutcome::of_result,
        true,
    ))
}

fn reference_async_judged<'a>(case: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    // The macros make the body's future once when the stack has no retry.
    let once = !case.has(Aspect::Retry) && !case.has(Aspect::Hedge);
    boxed(reference::run_judged_async(
        plan,
        || body.run_async(),
        classify3,
        is_err,
        |r| retry_on(r, is_retryable),
        |r| retry_on(r, is_retryable),
        once,
    ))
}

fn call_async<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(async move { Ok(plan.call_async(|| body.run_async()).await) })
}

fn run_async_entry<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(plan.run_async(|| body.run_async(), classify3))
}

fn call_future<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(async move { Ok(plan.call_future(body.run_async()).await) })
}

fn run_future<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(plan.run_future(body.run_async(), classify3))
}

/// A tower service around the body, through a `GuardLayer` of the case's guards on the
/// global registry (the case's registry is in scope).
fn tower_service<'a>(case: &'a Case, _: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    let body = body.clone();
    let inner = service_fn(move |()| body.run_async());
    let classify: fn(&Result<u32, E>) -> CallOutcome = classify3;
    let guards = case.guards();
    boxed(async move {
        let answered = if case.has(Aspect::Retry) || case.has(Aspect::Hedge) {
            let layer = GuardLayer::retrying(&guards).classifier(classify);
            layer.layer(inner).oneshot(()).await
        } else {
            let layer = GuardLayer::new(&guards).classifier(classify);
            layer.layer(inner).oneshot(()).await
        };
        match answered {
            Ok(answer) => Ok(Ok(answer)),
            Err(GuardError::Inner(error)) => Ok(Err(error)),
            Err(GuardError::Rejected(rejected)) => Err(rejected),
        }
    })
}

fn enter_async<'a>(_: &'a Case, plan: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    boxed(async move {
        let entered = plan.enter_async().await?;
        Ok(entered.run_async(body.run_async(), classify3).await)
    })
}

// ----- annotated functions, one per stack -----

/// Annotated functions with the guards `$attr`, sync and async, as free functions and as
/// methods; each registers its stack in `STACKS`.
macro_rules! guarded {
    ($sync:ident, $async_fn:ident, [$($attr:ident ( $($args:tt)* )),*]) => {
        $(#[$attr($($args)*)])*
        fn $sync(body: Body) -> Result<u32, E> {
            body.run()
        }
        guarded!(@async $async_fn, [$($attr ( $($args)* )),*]);
    };
    (@async $async_fn:ident, [$($attr:ident ( $($args:tt)* )),*]) => {
        $(#[$attr($($args)*)])*
        async fn $async_fn(body: Body) -> Result<u32, E> {
            body.run_async().await
        }
    };
}

guarded!(b_sync, b_async, [bulkhead(name = "diff")]);
guarded!(r_sync, r_async, [rate_limiter(name = "diff")]);
guarded!(
    c_sync,
    c_async,
    [circuit_breaker(
        name = "diff",
        ignore = is_ignored,
        record = is_recorded
    )]
);
guarded!(
    y_sync,
    y_async,
    [retry(name = "diff", retry_on = is_retryable)]
);
guarded!(@async t_async, [time_limiter(name = "diff")]);
guarded!(
    bc_sync,
    bc_async,
    [
        bulkhead(name = "diff"),
        circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)
    ]
);
guarded!(
    brc_sync,
    brc_async,
    [
        circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded),
        rate_limiter(name = "diff"),
        bulkhead(name = "diff")
    ]
);
guarded!(
    yc_sync,
    yc_async,
    [
        retry(name = "diff", retry_on = is_retryable),
        circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)
    ]
);
guarded!(
    by_sync,
    by_async,
    [
        bulkhead(name = "diff"),
        retry(name = "diff", retry_on = is_retryable)
    ]
);
guarded!(@async ct_async, [circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded), time_limiter(name = "diff")]);
guarded!(@async yt_async, [time_limiter(name = "diff"), retry(name = "diff", retry_on = is_retryable)]);
guarded!(
    bryc_sync,
    bryc_async,
    [
        bulkhead(name = "diff"),
        rate_limiter(name = "diff"),
        retry(name = "diff", retry_on = is_retryable),
        circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)
    ]
);
guarded!(
    @async all_async,
    [bulkhead(name = "diff"), rate_limiter(name = "diff"), retry(name = "diff", retry_on = is_retryable), circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded), time_limiter(name = "diff")]
);

guarded!(@async h_async, [hedge(name = "diff", hedge_on = is_retryable)]);
guarded!(
    @async hc_async,
    [hedge(name = "diff", hedge_on = is_retryable), circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)]
);
guarded!(
    @async six_async,
    [bulkhead(name = "diff"), rate_limiter(name = "diff"), retry(name = "diff", retry_on = is_retryable), hedge(name = "diff", hedge_on = is_retryable), circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded), time_limiter(name = "diff")]
);

/// A fallback: the refusal as the function's own answer, told apart from a rejection.
fn on_refused(body: Body, rejected: Rejected) -> Result<u32, E> {
    drop(body);
    Err(E::Fallback(rejected))
}

async fn on_refused_async(body: Body, rejected: Rejected) -> Result<u32, E> {
    on_refused(body, rejected)
}

#[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded, fallback = on_refused)]
fn c_fallback_sync(body: Body) -> Result<u32, E> {
    body.run()
}

#[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded, fallback = on_refused_async)]
async fn c_fallback_async(body: Body) -> Result<u32, E> {
    body.run_async().await
}

#[bulkhead(name = "diff", fallback = on_refused)]
#[rate_limiter(name = "diff")]
#[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)]
fn brc_fallback_sync(body: Body) -> Result<u32, E> {
    body.run()
}

#[bulkhead(name = "diff", fallback = on_refused_async)]
#[rate_limiter(name = "diff")]
#[retry(name = "diff", retry_on = is_retryable)]
#[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)]
#[time_limiter(name = "diff")]
async fn all_fallback_async(body: Body) -> Result<u32, E> {
    body.run_async().await
}

/// The same stacks on methods.
struct Service;

impl Service {
    #[bulkhead(name = "diff")]
    #[rate_limiter(name = "diff")]
    #[retry(name = "diff", retry_on = is_retryable)]
    #[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)]
    fn bryc(&self, body: Body) -> Result<u32, E> {
        body.run()
    }

    #[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)]
    #[bulkhead(name = "diff")]
    fn bc(&mut self, body: Body) -> Result<u32, E> {
        body.run()
    }

    #[bulkhead(name = "diff")]
    #[rate_limiter(name = "diff")]
    #[retry(name = "diff", retry_on = is_retryable)]
    #[circuit_breaker(name = "diff", ignore = is_ignored, record = is_recorded)]
    #[time_limiter(name = "diff")]
    async fn all(&self, body: Body) -> Result<u32, E> {
        body.run_async().await
    }

    #[bulkhead(name = "diff")]
    async fn b(self, body: Body) -> Result<u32, E> {
        body.run_async().await
    }
}

/// Whether an annotated function answers refusals with its fallback.
#[derive(Clone, Copy, PartialEq)]
enum Fallback {
    No,
    Yes,
}

/// The annotated functions of a stack, other than the free function without a fallback:
/// with a fallback, and methods (each named for the test's message).
fn more_annotated_sync(guards: &[Aspect]) -> Vec<(&'static str, Fallback, SyncFn)> {
    match guards {
        [C] => vec![("a sync fallback", Fallback::Yes, c_fallback_sync)],
        [B, R, C] => vec![("a sync fallback, stacked", Fallback::Yes, brc_fallback_sync)],
        [B, R, Y, C] => vec![("a sync method", Fallback::No, |body| Service.bryc(body))],
        [B, C] => vec![("a sync `&mut self` method", Fallback::No, |body| {
            Service.bc(body)
        })],
        _ => Vec::new(),
    }
}

fn more_annotated_async(guards: &[Aspect]) -> Vec<(&'static str, Fallback, AsyncFn)> {
    match guards {
        [C] => vec![("an async fallback", Fallback::Yes, |body| {
            Box::pin(c_fallback_async(body))
        })],
        [B, R, Y, C, T] => vec![
            ("an async fallback, stacked", Fallback::Yes, |body| {
                Box::pin(all_fallback_async(body))
            }),
            ("an async method", Fallback::No, |body| {
                Box::pin(async move { Service.all(body).await })
            }),
        ],
        [B] => vec![("an async `self` method", Fallback::No, |body| {
            Box::pin(Service.b(body))
        })],
        _ => Vec::new(),
    }
}

/// What the reference saw, as a function with a fallback answers it: every refusal handed to
/// the fallback.
fn through_fallback(expected: &[Seen], fallback: Fallback) -> Vec<Seen> {
    expected
        .iter()
        .map(|seen| Seen {
            result: match fallback {
                Fallback::Yes => seen.result.replacen("refused: ", "fallback: ", 1),
                Fallback::No => seen.result.clone(),
            },
            events: seen.events.clone(),
            body: seen.body.clone(),
            after: seen.after.clone(),
        })
        .collect()
}

use Aspect::{
    Bulkhead as B, CircuitBreaker as C, Fault as F, Hedge as H, RateLimiter as R, Retry as Y,
    TimeLimiter as T,
};

/// The annotated function of a stack (its aspects in declaration order), sync.
fn annotated_sync(guards: &[Aspect]) -> Option<SyncFn> {
    Some(match guards {
        [B] => b_sync,
        [R] => r_sync,
        [C] => c_sync,
        [Y] => y_sync,
        [B, C] => bc_sync,
        [B, R, C] => brc_sync,
        [Y, C] => yc_sync,
        [B, Y] => by_sync,
        [B, R, Y, C] => bryc_sync,
        _ => return None,
    })
}

/// An annotated sync function.
type SyncFn = fn(Body) -> Result<u32, E>;

/// An annotated async function, its future boxed.
type AsyncFn = fn(Body) -> Pin<Box<dyn Future<Output = Result<u32, E>>>>;

macro_rules! async_fns {
    ($($pattern:pat => $f:ident),* $(,)?) => {
        fn annotated_async(guards: &[Aspect]) -> Option<AsyncFn> {
            Some(match guards {
                $($pattern => |body| Box::pin($f(body)),)*
                _ => return None,
            })
        }
    };
}

async_fns! {
    [B] => b_async,
    [R] => r_async,
    [C] => c_async,
    [Y] => y_async,
    [T] => t_async,
    [B, C] => bc_async,
    [B, R, C] => brc_async,
    [Y, C] => yc_async,
    [B, Y] => by_async,
    [C, T] => ct_async,
    [Y, T] => yt_async,
    [B, R, Y, C] => bryc_async,
    [B, R, Y, C, T] => all_async,
    [H] => h_async,
    [H, C] => hc_async,
    [B, R, Y, H, C, T] => six_async,
}

fn macro_sync(case: &Case, _: &Plan, body: &Body) -> Out {
    let f = annotated_sync(&case.listed()).expect("a stack with an annotated function");
    Ok(f(body.clone()))
}

fn macro_async<'a>(case: &'a Case, _: &'a Plan, body: &'a Body) -> CallFuture<'a> {
    let f = annotated_async(&case.listed()).expect("a stack with an annotated function");
    let call = f(body.clone());
    boxed(async move { Ok(call.await) })
}

// ----- the cases -----

const ALL: [Aspect; 7] = [B, R, Y, H, C, T, F];

fn attempt_script(sync: bool) -> impl Strategy<Value = AttemptScript> {
    let ends = prop_oneof![
        4 => Just(Ends::Ok),
        4 => Just(Ends::Fail),
        1 => Just(Ends::Ignore),
        1 => Just(Ends::Quiet),
        1 => Just(Ends::Panic),
    ];
    let latency = if sync { 0..4u32 } else { 0..8u32 };
    (latency, ends, prop::bool::weighted(0.15)).prop_map(|(latency, ends, nested)| AttemptScript {
        latency,
        ends,
        nested,
    })
}

fn call_script(sync: bool) -> impl Strategy<Value = CallScript> {
    (
        prop_oneof![Just(0u32), Just(1), Just(6), Just(12)],
        0..3u32,
        0..6u32,
        if sync {
            Just(None).boxed()
        } else {
            prop_oneof![4 => Just(None), 1 => (0..6u32).prop_map(Some)].boxed()
        },
        prop::collection::vec(attempt_script(sync), 1..4),
        prop::bool::weighted(if sync { 0.0 } else { 0.3 }),
        // Sync: before the call only (a sync call runs to its end before anyone else acts).
        if sync {
            prop_oneof![5 => Just(None), 1 => Just(Some(0u32))].boxed()
        } else {
            prop_oneof![5 => Just(None), 1 => (0..4u32).prop_map(Some)].boxed()
        },
    )
        .prop_map(
            |(advance, occupied, freed_after, dropped_after, attempts, with_next, reconfigure)| {
                CallScript {
                    advance,
                    occupied,
                    freed_after,
                    dropped_after,
                    with_next,
                    reconfigure,
                    attempts,
                }
            },
        )
}

fn case(sync: bool) -> impl Strategy<Value = Case> {
    let guards = (1..128u32).prop_map(|bits| {
        ALL.iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, a)| *a)
            .collect::<Vec<_>>()
    });
    // Sync calls never wait for a gate: a blocking wait on a manual clock has no one to move it.
    let wait = if sync {
        Just(0u32).boxed()
    } else {
        prop_oneof![Just(0u32), Just(3)].boxed()
    };
    let rate_wait = if sync {
        Just(0u32).boxed()
    } else {
        prop_oneof![Just(0u32), Just(12)].boxed()
    };
    let retry_wait = if sync {
        Just(0u32).boxed()
    } else {
        prop_oneof![Just(0u32), Just(2)].boxed()
    };
    (
        (guards, Just(ALL).prop_shuffle(), any::<bool>()),
        (1..4u32, wait, 1..4u32, rate_wait),
        (1..4u32, retry_wait, any::<bool>()),
        (1..5u32, 1..4u32, 2..6u32, any::<bool>()),
        (
            2..7u32,
            any::<bool>(),
            prop_oneof![
                4 => Just(ReentrancyPolicy::PassThrough),
                1 => Just(ReentrancyPolicy::Reject),
                1 => Just(ReentrancyPolicy::Allow),
            ],
        ),
        prop::collection::vec(call_script(sync), 1..5),
        (
            prop::bool::weighted(0.25),
            prop_oneof![
                8 => Just(BreakerState::AsConfigured),
                1 => Just(BreakerState::ForcedOpen),
                1 => Just(BreakerState::Disabled),
                1 => Just(BreakerState::MetricsOnly),
            ],
            any::<bool>(),
        ),
    )
        .prop_map(
            move |(
                (guards, order, default_precedence),
                (max_concurrent_calls, max_wait, limit_for_period, rate_timeout),
                (max_attempts, retry_wait, retry_on_rejection),
                (window, minimum_calls, slow_call_ticks, record_rejections),
                (timeout, cancel, policy),
                calls,
                (time_window, breaker_state, record_call_durations),
            )| Case {
                time_window,
                record_call_durations,
                breaker_state,
                guards,
                precedence: if default_precedence {
                    Vec::new()
                } else {
                    order
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (*a, 10 * (i as i32 + 1)))
                        .collect()
                },
                max_concurrent_calls,
                max_wait,
                limit_for_period,
                rate_timeout,
                max_attempts,
                retry_wait,
                retry_on_rejection,
                window,
                minimum_calls: minimum_calls.min(window),
                slow_call_ticks,
                record_rejections,
                timeout,
                cancel,
                policy,
                calls,
            },
        )
}

/// Silences the scripted panics (thousands of them), and nothing else.
fn quiet_scripted_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&PANIC) {
                default(info);
            }
        }));
    });
}

/// Asserts that `entry` saw what the reference saw, naming the first call and the first
/// observable where they part.
fn agree(entry: &str, seen: &[Seen], expected: &[Seen]) {
    for (call, (seen, expected)) in seen.iter().zip(expected).enumerate() {
        let same = |what: &str, a: &[String], b: &[String]| {
            if a != b {
                let at = a
                    .iter()
                    .zip(b)
                    .position(|(a, b)| a != b)
                    .unwrap_or(a.len().min(b.len()));
                let from = at.saturating_sub(3);
                panic!(
                    "{entry}, call {call}, {what} from #{from}:\n  entry:     {:#?}\n  reference: {:#?}",
                    &a[from..a.len().min(at + 1)],
                    &b[from..b.len().min(at + 1)],
                );
            }
        };
        same(
            "result",
            std::slice::from_ref(&seen.result),
            std::slice::from_ref(&expected.result),
        );
        same("body", &seen.body, &expected.body);
        same("events", &seen.events, &expected.events);
        same("after", &seen.after, &expected.after);
    }
    assert_eq!(seen.len(), expected.len());
}

fn check_sync(case: &Case) {
    let expected = run_sync(case, &reference_sync);
    let of_result = run_sync(case, &reference_sync_of_result);
    agree("Plan::run", &run_sync(case, &plan_run), &expected);
    agree("Plan::call", &run_sync(case, &plan_call), &of_result);
    if !case.has_wrappers() {
        agree(
            "Plan::enter + Entered::run",
            &run_sync(case, &plan_enter),
            &expected,
        );
    }
    if annotated_sync(&case.listed()).is_some() {
        let judged = run_sync(case, &reference_sync_judged);
        agree(
            "the annotated sync function",
            &run_sync(case, &macro_sync),
            &judged,
        );
        for (what, fallback, f) in more_annotated_sync(&case.listed()) {
            let seen = run_sync(case, &|_, _, body| Ok(f(body.clone())));
            agree(what, &seen, &through_fallback(&judged, fallback));
        }
    }
}

fn check_async(case: &Case) {
    let expected = run_async(case, &reference_async);
    let of_result = run_async(case, &reference_async_of_result);
    agree(
        "Plan::run_async",
        &run_async(case, &run_async_entry),
        &expected,
    );
    agree(
        "Plan::call_async",
        &run_async(case, &call_async),
        &of_result,
    );
    let once = run_async(case, &reference_async_once);
    agree("Plan::run_future", &run_async(case, &run_future), &once);
    let of_result_once = run_async(case, &reference_async_of_result_once);
    agree(
        "Plan::call_future",
        &run_async(case, &call_future),
        &of_result_once,
    );
    agree(
        "tower::GuardService",
        &run_async(case, &tower_service),
        &expected,
    );
    if !case.has_wrappers() {
        agree(
            "Plan::enter_async + Entered::run_async",
            &run_async(case, &enter_async),
            &expected,
        );
    }
    if annotated_async(&case.listed()).is_some() {
        let judged = run_async(case, &reference_async_judged);
        agree(
            "the annotated async function",
            &run_async(case, &macro_async),
            &judged,
        );
        for (what, fallback, f) in more_annotated_async(&case.listed()) {
            let seen = run_async(case, &|_, _, body| {
                let call = f(body.clone());
                boxed(async move { Ok(call.await) })
            });
            agree(what, &seen, &through_fallback(&judged, fallback));
        }
    }
}

// ----- the cases the generator found, kept as they are -----
//
// A failing seed replays only while the strategy is unchanged; each failure found is also
// written here, shrunk, as a case of its own.

/// A case of `guards` (under the default precedence unless `precedence` says otherwise) with
/// the smallest configurations, and `calls`.
fn found(guards: &[Aspect], precedence: &[(Aspect, i32)], calls: Vec<CallScript>) -> Case {
    Case {
        guards: guards.to_vec(),
        precedence: precedence.to_vec(),
        max_concurrent_calls: 1,
        max_wait: 0,
        limit_for_period: 1,
        rate_timeout: 0,
        max_attempts: 1,
        retry_wait: 0,
        retry_on_rejection: false,
        window: 1,
        minimum_calls: 1,
        slow_call_ticks: 2,
        record_rejections: false,
        timeout: 2,
        cancel: false,
        policy: ReentrancyPolicy::PassThrough,
        time_window: false,
        record_call_durations: false,
        breaker_state: BreakerState::AsConfigured,
        calls,
    }
}

/// A call whose attempts take no time and end as `ends`.
fn call_ending(ends: &[Ends]) -> CallScript {
    CallScript {
        advance: 0,
        occupied: 0,
        freed_after: 0,
        dropped_after: None,
        with_next: false,
        reconfigure: None,
        attempts: ends
            .iter()
            .map(|&ends| AttemptScript {
                latency: 0,
                ends,
                nested: false,
            })
            .collect(),
    }
}

#[test]
fn found_a_breaker_inside_a_retry_records_before_the_retry_gives_up() {
    quiet_scripted_panics();
    let case = found(&[Y, C], &[], vec![call_ending(&[Ends::Fail])]);
    check_sync(&case);
    check_async(&case);
}

#[test]
fn found_a_time_limiter_cutting_off_a_wait_for_a_gate_releases_the_gates_entered() {
    quiet_scripted_panics();
    let mut case = found(
        &[B, R, Y, T],
        &[(Y, 10), (C, 20), (T, 30), (B, 40), (R, 50)],
        vec![call_ending(&[Ends::Ok]), call_ending(&[Ends::Ok])],
    );
    (
        case.max_concurrent_calls,
        case.rate_timeout,
        case.max_attempts,
    ) = (2, 12, 2);
    case.cancel = true;
    check_async(&case);
}

#[test]
fn found_a_breaker_inside_a_time_limiter_reports_its_success_first() {
    quiet_scripted_panics();
    let case = found(&[C, T], &[(T, 10), (C, 20)], vec![call_ending(&[Ends::Ok])]);
    check_sync(&case);
    check_async(&case);
}

#[test]
fn found_a_hedge_around_a_time_limiter_on_a_layer_made_once() {
    quiet_scripted_panics();
    let case = found(
        &[H, T],
        &[(B, 10), (R, 20), (Y, 30), (H, 40), (C, 50), (T, 60)],
        vec![call_ending(&[Ends::Fail])],
    );
    check_async(&case);
}

proptest! {
    #![proptest_config(ProptestConfig {
        // More for a deeper search after a change to the engine: `DIFFERENTIAL_CASES=50000`.
        cases: std::env::var("DIFFERENTIAL_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(3000),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn sync_entries_agree_with_the_reference(case in case(true)) {
        quiet_scripted_panics();
        check_sync(&case);
    }

    #[test]
    fn async_entries_agree_with_the_reference(case in case(false)) {
        quiet_scripted_panics();
        check_async(&case);
    }
}
