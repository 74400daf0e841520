//! Runs one case of the benches `N` times, for `valgrind --tool=callgrind` to count the
//! instructions: `instructions CASE N`. `scripts/instructions.sh` runs every case with `N = 0`
//! and `N = 100000` and prints the difference per call.
//!
//! The policies are those of the criterion cases in `benches/peers.rs` (count window of 100,
//! minimum 100 calls, 50 %, slow-call rule off for the equal policy; bulkhead of 25 permits,
//! no wait; rate limiter of 10⁹ permissions per second, no wait, so none is refused; retry of
//! 3 attempts, 500 ms apart; time limiter of 1 s, the wrapped call ready at its first poll, so
//! none retries, sleeps or starts a timer). Setup is the same whatever `N` is, and ends with `WARM_UP` calls of the case, so
//! that lazy initialisation (the macro's plan look-up, thread-locals) and the filling of the
//! count windows fall outside the difference: what is left is the steady call.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::ExitCode;
use std::time::Duration;

use resilience_runtime::{
    bulkhead, circuit_breaker, rate_limiter, retry, time_limiter, Bulkhead, BulkheadConfig,
    CircuitBreaker, CircuitBreakerConfig, CircuitBreakerConfigBuilder, Guard, Plan, RateLimiter,
    RateLimiterConfig, Registry, RetryConfig, SlidingWindow, TimeLimiterConfig,
};

#[path = "../../benches/common/mod.rs"]
mod common;
use common::{bare, poll_now, CallError};

/// One request through a tower service: `poll_ready`, `call`, the response future polled once.
#[inline(always)]
fn tower_call<S: tower::Service<()>>(service: &mut S) -> Result<S::Response, S::Error> {
    use std::task::{Context, Poll, Waker};
    match service.poll_ready(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(e)) => return Err(e),
        Poll::Pending => panic!("a measured service must be ready"),
    }
    poll_now(service.call(()))
}

/// The cases, in the order `scripts/instructions.sh` prints them.
const CASES: &[&str] = &[
    "bare",
    "breaker_direct",
    "recloser",
    "breaker_plan",
    "breaker_macro_sync",
    "breaker_macro_async",
    "breaker_plan_traced",
    "breaker_plan_subscribed",
    "two_gates_plan",
    "two_gates_plan_async",
    "two_gates_macro_sync",
    "two_gates_macro_async",
    "three_gates_macro_async",
    "five_aspects_macro_async",
    "five_aspects_plan_async",
    "five_aspects_plan_sync",
    "four_aspects_macro_sync",
    "retry_plan_async",
    "retry_plan_sync",
    "time_limiter_plan_async",
    "tokio_timeout",
    "semaphore_recloser",
    "semaphore_async_recloser",
    "two_gates_layer",
    "limit_loadshed_layer",
    "tokio_semaphore",
    "bulkhead",
    "open_rejection_ours",
    "open_rejection_plan",
    "open_rejection_macro",
    "open_rejection_recloser",
    "rate_limiter_ours",
    "rate_limiter_governor",
    "rate_limiter_refusal_ours",
    "rate_limiter_refusal_governor",
];

/// Calls of the case made during setup: more than a count window (100), so that every window
/// is full before the counted calls.
const WARM_UP: u64 = 1_000;

/// The global registry's instances of the two-gate cases (plan and macros).
const GATES: &str = "instructions";
/// The global registry's instances of the three-gate case.
const THREE: &str = "instructions-three";
/// The global registry's instances of the five-aspect (and four-aspect) cases.
const FIVE: &str = "instructions-five";
/// The retry of `retry_plan_async`, alone in its plan.
const RETRY: &str = "instructions-retry";
/// The time limiter of `time_limiter_plan_async`, alone in its plan.
const TIME_LIMITER: &str = "instructions-time-limiter";
/// The breaker of `breaker_plan`, alone in its plan.
const BREAKER: &str = "instructions-breaker";
/// The open breaker of `open_rejection_plan`.
const OPEN: &str = "instructions-open";

#[bulkhead(name = "instructions")]
#[circuit_breaker(name = "instructions")]
#[inline(never)]
fn guarded_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

#[bulkhead(name = "instructions")]
#[circuit_breaker(name = "instructions")]
#[inline(never)]
async fn guarded_async(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// One annotation, the breaker of `breaker_plan`: what most guarded functions are.
#[circuit_breaker(name = "instructions-breaker")]
#[inline(never)]
fn breaker_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// `breaker_sync` as an `async fn`.
#[circuit_breaker(name = "instructions-breaker")]
#[inline(never)]
async fn breaker_async(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// `breaker_sync` on the open breaker of `open_rejection_plan`.
#[circuit_breaker(name = "instructions-open")]
#[inline(never)]
fn open_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// `guarded_async` with a rate limiter between its bulkhead and its breaker.
#[bulkhead(name = "instructions-three")]
#[rate_limiter(name = "instructions-three")]
#[circuit_breaker(name = "instructions-three")]
#[inline(never)]
async fn guarded_three(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// Every aspect, in precedence order: `guarded_three` with a retry and a time limiter.
#[bulkhead(name = "instructions-five")]
#[rate_limiter(name = "instructions-five")]
#[retry(name = "instructions-five")]
#[circuit_breaker(name = "instructions-five")]
#[time_limiter(name = "instructions-five")]
#[inline(never)]
async fn guarded_five(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// The four aspects a sync function can have (a time limiter cannot bound a thread).
#[bulkhead(name = "instructions-five")]
#[rate_limiter(name = "instructions-five")]
#[retry(name = "instructions-five")]
#[circuit_breaker(name = "instructions-five")]
#[inline(never)]
fn guarded_four_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// Our highest rate (one permission per nanosecond): none refused, as in peers.rs.
const RATE_PER_SECOND: u32 = 1_000_000_000;

/// 10⁹ per second, refusing at once: peers.rs's `rate_limiter_permit` policy.
fn rate_limiter_config() -> RateLimiterConfig {
    RateLimiterConfig::builder()
        .limit_for_period(RATE_PER_SECOND)
        .limit_refresh_period(Duration::from_secs(1))
        .timeout_duration(Duration::ZERO)
        .build()
        .expect("valid rate limiter config")
}

/// At most 3 attempts, a fixed 500 ms apart: peers.rs's `retry_success` policy.
fn retry_config() -> RetryConfig {
    RetryConfig::builder()
        .max_attempts(3)
        .wait_duration(Duration::from_millis(500))
        .build()
        .expect("valid retry config")
}

/// peers.rs's `time_limiter_ready` bound.
const TIMEOUT: Duration = Duration::from_secs(1);

/// 1 s, cancelling the call: peers.rs's `time_limiter_ready` policy.
fn time_limiter_config() -> TimeLimiterConfig {
    TimeLimiterConfig::builder()
        .timeout_duration(TIMEOUT)
        .cancel_running_future(true)
        .build()
        .expect("valid time limiter config")
}

/// A current-thread runtime with its timer: `tokio::time::timeout` needs one entered.
fn time_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// Count window of 100, 50 %, at least 100 calls, 3 600 s open; the default 60 s slow-call rule.
fn breaker_builder() -> CircuitBreakerConfigBuilder {
    CircuitBreakerConfig::builder()
        .failure_rate_threshold(50.0)
        .sliding_window(SlidingWindow::CountBased(100))
        .minimum_number_of_calls(100)
        .wait_duration_in_open_state(Duration::from_secs(3600))
}

/// `breaker_builder` with the slow-call rule off: recloser's policy, no clock read.
fn breaker_config_equal() -> CircuitBreakerConfig {
    breaker_builder()
        .slow_call_duration_threshold(Duration::MAX)
        .build()
        .expect("valid breaker config")
}

/// The open-rejection policy of peers.rs: the default slow-call rule, opened by hand.
fn breaker_config_open() -> CircuitBreakerConfig {
    breaker_builder().build().expect("valid breaker config")
}

/// 25 permits, no wait, fair.
fn bulkhead_config() -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(25)
        .max_wait_duration(Duration::ZERO)
        .fair_call_handling(true)
        .build()
        .expect("valid bulkhead config")
}

fn recloser_closed() -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .half_open_len(10)
        .open_wait(Duration::from_secs(3600))
        .build()
}

/// Opened by failures (`closed_len(1)`), as in peers.rs.
fn recloser_open() -> recloser::Recloser {
    let rc = recloser::Recloser::custom()
        .closed_len(1)
        .open_wait(Duration::from_secs(3600))
        .build();
    for _ in 0..3 {
        let _ = rc.call(|| Err::<(), ()>(()));
    }
    assert!(matches!(
        rc.call(|| Ok::<(), ()>(())),
        Err(recloser::Error::Rejected)
    ));
    rc
}

/// A plan of the global registry.
fn plan(guards: &[Guard<'_>]) -> Plan {
    Registry::global().plan(guards).expect("plan")
}

/// The two-gate instances of the global registry, the macros' registry.
fn configure_gates() {
    let r = Registry::global();
    r.configure_bulkhead(GATES, bulkhead_config())
        .expect("bulkhead");
    r.configure_circuit_breaker(GATES, breaker_config_equal())
        .expect("breaker");
}

/// The three-gate instances: `configure_gates`'s bulkhead and breaker, and the rate limiter.
fn configure_three_gates() {
    let r = Registry::global();
    r.configure_bulkhead(THREE, bulkhead_config())
        .expect("bulkhead");
    r.configure_rate_limiter(THREE, rate_limiter_config())
        .expect("rate limiter");
    r.configure_circuit_breaker(THREE, breaker_config_equal())
        .expect("breaker");
}

/// The five instances: `configure_three_gates`'s policies, a retry and a time limiter.
fn configure_five() {
    let r = Registry::global();
    r.configure_bulkhead(FIVE, bulkhead_config())
        .expect("bulkhead");
    r.configure_rate_limiter(FIVE, rate_limiter_config())
        .expect("rate limiter");
    r.configure_retry(FIVE, retry_config()).expect("retry");
    r.configure_circuit_breaker(FIVE, breaker_config_equal())
        .expect("breaker");
    r.configure_time_limiter(FIVE, time_limiter_config())
        .expect("time limiter");
}

/// The five instances as a plan, in precedence order.
fn plan_five() -> Plan {
    plan(&[
        Guard::bulkhead(FIVE),
        Guard::rate_limiter(FIVE),
        Guard::retry(FIVE),
        Guard::circuit_breaker(FIVE),
        Guard::time_limiter(FIVE),
    ])
}

/// `WARM_UP` calls, then `n` calls: each case is its own closure type, so that the call is
/// inlined into this loop. `scripts/instructions.sh` collects only what runs in here (setup is
/// not always the same instructions twice: governor's clock calibrates itself).
#[inline(never)]
fn run(n: u64, mut call: impl FnMut()) {
    for _ in 0..WARM_UP {
        call();
    }
    for _ in 0..black_box(n) {
        call();
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let n = args.next().and_then(|n| n.parse::<u64>().ok());
    let Some(n) = n.filter(|_| CASES.contains(&case.as_str())) else {
        if !CASES.contains(&case.as_str()) {
            eprintln!("unknown case `{case}`");
        }
        eprintln!("usage: instructions CASE N (N: the count of calls, a whole number)");
        eprintln!("cases:");
        for case in CASES {
            eprintln!("  {case}");
        }
        return ExitCode::from(2);
    };
    match case.as_str() {
        "bare" => run(n, || drop(black_box(poll_now(bare(black_box(1)))))),
        "breaker_direct" => {
            let cb = CircuitBreaker::new("instructions", breaker_config_equal());
            run(n, || {
                black_box(&cb)
                    .try_acquire()
                    .expect("closed")
                    .record_success()
            })
        }
        "recloser" => {
            let rc = recloser_closed();
            run(n, || {
                black_box(black_box(&rc).call(|| Ok::<u32, ()>(black_box(1)))).unwrap();
            })
        }
        "breaker_plan" => {
            Registry::global()
                .configure_circuit_breaker(BREAKER, breaker_config_equal())
                .expect("breaker");
            let plan = plan(&[Guard::circuit_breaker(BREAKER)]);
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap();
            })
        }
        "breaker_macro_sync" => {
            Registry::global()
                .configure_circuit_breaker(BREAKER, breaker_config_equal())
                .expect("breaker");
            run(n, || {
                black_box(breaker_sync(black_box(1))).unwrap();
            })
        }
        "breaker_macro_async" => {
            Registry::global()
                .configure_circuit_breaker(BREAKER, breaker_config_equal())
                .expect("breaker");
            run(n, || {
                black_box(poll_now(breaker_async(black_box(1)))).unwrap();
            })
        }
        "breaker_plan_traced" => {
            // `breaker_plan` with the registry's events forwarded to `tracing`: a rare-event
            // subscriber on the breaker, which its closed path must not pay for.
            Registry::global().trace_events();
            Registry::global()
                .configure_circuit_breaker(BREAKER, breaker_config_equal())
                .expect("breaker");
            let plan = plan(&[Guard::circuit_breaker(BREAKER)]);
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap();
            })
        }
        "breaker_plan_subscribed" => {
            // `breaker_plan` with a subscriber to every event: what the forwarder would cost
            // if it asked for every call's (a precise clock reading and an event per call).
            Registry::global()
                .configure_circuit_breaker(BREAKER, breaker_config_equal())
                .expect("breaker");
            Registry::global()
                .circuit_breaker(BREAKER)
                .subscribe(|event| {
                    black_box(event);
                });
            let plan = plan(&[Guard::circuit_breaker(BREAKER)]);
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap();
            })
        }
        "two_gates_plan" => {
            configure_gates();
            let plan = plan(&[Guard::bulkhead(GATES), Guard::circuit_breaker(GATES)]);
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap();
            })
        }
        "two_gates_plan_async" => {
            configure_gates();
            let plan = plan(&[Guard::bulkhead(GATES), Guard::circuit_breaker(GATES)]);
            run(n, || {
                black_box(poll_now(black_box(&plan).call_async(|| bare(black_box(1))))).unwrap();
            })
        }
        "two_gates_macro_sync" => {
            configure_gates();
            run(n, || {
                black_box(guarded_sync(black_box(1))).unwrap();
            })
        }
        "two_gates_macro_async" => {
            configure_gates();
            run(n, || {
                black_box(poll_now(guarded_async(black_box(1)))).unwrap();
            })
        }
        "three_gates_macro_async" => {
            configure_three_gates();
            run(n, || {
                black_box(poll_now(guarded_three(black_box(1)))).unwrap();
            })
        }
        "five_aspects_macro_async" => {
            configure_five();
            run(n, || {
                black_box(poll_now(guarded_five(black_box(1)))).unwrap();
            })
        }
        "five_aspects_plan_async" => {
            configure_five();
            let plan = plan_five();
            run(n, || {
                black_box(poll_now(black_box(&plan).call_async(|| bare(black_box(1))))).unwrap();
            })
        }
        "five_aspects_plan_sync" => {
            configure_five();
            let plan = plan_five();
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap();
            })
        }
        "four_aspects_macro_sync" => {
            configure_five();
            run(n, || {
                black_box(guarded_four_sync(black_box(1))).unwrap();
            })
        }
        "retry_plan_async" => {
            Registry::global()
                .configure_retry(RETRY, retry_config())
                .expect("retry");
            let plan = plan(&[Guard::retry(RETRY)]);
            run(n, || {
                black_box(poll_now(black_box(&plan).call_async(|| bare(black_box(1))))).unwrap();
            })
        }
        "retry_plan_sync" => {
            Registry::global()
                .configure_retry(RETRY, retry_config())
                .expect("retry");
            let plan = plan(&[Guard::retry(RETRY)]);
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap();
            })
        }
        "time_limiter_plan_async" => {
            Registry::global()
                .configure_time_limiter(TIME_LIMITER, time_limiter_config())
                .expect("time limiter");
            let plan = plan(&[Guard::time_limiter(TIME_LIMITER)]);
            // In a runtime context, as `tokio_timeout` is (ours needs none for a ready call).
            let rt = time_runtime();
            let _context = rt.enter();
            run(n, || {
                black_box(poll_now(black_box(&plan).call_async(|| bare(black_box(1))))).unwrap();
            })
        }
        "tokio_timeout" => {
            let rt = time_runtime();
            let _context = rt.enter();
            run(n, || {
                black_box(poll_now(tokio::time::timeout(TIMEOUT, bare(black_box(1)))))
                    .expect("in time")
                    .unwrap();
            })
        }
        "two_gates_layer" => {
            use resilience_runtime::tower::GuardLayer;
            use tower::Layer;
            configure_gates();
            let guards = [Guard::bulkhead(GATES), Guard::circuit_breaker(GATES)];
            let mut svc =
                GuardLayer::new(&guards).layer(tower::service_fn(|()| bare(black_box(1))));
            run(n, || {
                black_box(tower_call(black_box(&mut svc))).unwrap();
            })
        }
        "limit_loadshed_layer" => {
            let mut svc = tower::ServiceBuilder::new()
                .load_shed()
                .concurrency_limit(25)
                .service(tower::service_fn(|()| bare(black_box(1))));
            run(n, || {
                black_box(tower_call(black_box(&mut svc))).unwrap();
            })
        }
        "semaphore_recloser" => {
            let sem = tokio::sync::Semaphore::new(25);
            let rc = recloser_closed();
            run(n, || {
                let _permit = black_box(&sem).try_acquire().expect("free permit");
                black_box(black_box(&rc).call(|| poll_now(bare(black_box(1))))).unwrap();
            })
        }
        "semaphore_async_recloser" => {
            // The async composition a recloser user writes: its `AsyncRecloser` around the
            // call's future, under tokio's semaphore, the whole polled as one future.
            let sem = tokio::sync::Semaphore::new(25);
            let rc = recloser::AsyncRecloser::from(recloser_closed());
            run(n, || {
                black_box(poll_now(async {
                    let _permit = black_box(&sem).try_acquire().expect("free permit");
                    black_box(&rc).call(bare(black_box(1))).await
                }))
                .unwrap();
            })
        }
        "tokio_semaphore" => {
            let sem = tokio::sync::Semaphore::new(25);
            run(n, || {
                drop(black_box(
                    black_box(&sem).try_acquire().expect("free permit"),
                ))
            })
        }
        "bulkhead" => {
            let bh = Bulkhead::new("instructions", bulkhead_config());
            run(n, || {
                drop(black_box(
                    black_box(&bh).try_acquire().expect("free permit"),
                ))
            })
        }
        "open_rejection_ours" => {
            let cb = CircuitBreaker::new("instructions", breaker_config_open());
            cb.transition_to_open_state().expect("closed to open");
            run(n, || {
                black_box(black_box(&cb).try_acquire()).unwrap_err();
            })
        }
        "open_rejection_plan" => {
            let r = Registry::global();
            r.configure_circuit_breaker(OPEN, breaker_config_open())
                .expect("breaker");
            r.circuit_breaker(OPEN)
                .transition_to_open_state()
                .expect("closed to open");
            let plan = plan(&[Guard::circuit_breaker(OPEN)]);
            run(n, || {
                black_box(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)))
                    .unwrap_err();
            })
        }
        "open_rejection_macro" => {
            let r = Registry::global();
            r.configure_circuit_breaker(OPEN, breaker_config_open())
                .expect("breaker");
            r.circuit_breaker(OPEN)
                .transition_to_open_state()
                .expect("closed to open");
            run(n, || {
                black_box(open_sync(black_box(1))).unwrap_err();
            })
        }
        "open_rejection_recloser" => {
            let rc = recloser_open();
            run(n, || {
                black_box(black_box(&rc).call(|| Ok::<u32, ()>(black_box(1)))).unwrap_err();
            })
        }
        "rate_limiter_ours" => {
            let rl = RateLimiter::new("instructions", rate_limiter_config());
            run(n, || {
                black_box(&rl).try_acquire().expect("below the rate");
            })
        }
        "rate_limiter_governor" => {
            let gov = governor::RateLimiter::direct(governor::Quota::per_second(
                NonZeroU32::new(RATE_PER_SECOND).expect("non-zero"),
            ));
            run(n, || {
                black_box(black_box(&gov).check()).expect("below the rate");
            })
        }
        // peers.rs's `rate_limiter_refusal`: one permission an hour, taken before the calls.
        "rate_limiter_refusal_ours" => {
            let rl = RateLimiter::new(
                "instructions",
                RateLimiterConfig::builder()
                    .limit_for_period(1)
                    .limit_refresh_period(Duration::from_secs(3600))
                    .timeout_duration(Duration::ZERO)
                    .build()
                    .expect("valid rate limiter config"),
            );
            rl.try_acquire().expect("the hour's permission");
            run(n, || {
                black_box(black_box(&rl).try_acquire()).unwrap_err();
            })
        }
        "rate_limiter_refusal_governor" => {
            let gov = governor::RateLimiter::direct(governor::Quota::per_hour(
                NonZeroU32::new(1).expect("non-zero"),
            ));
            gov.check().expect("the hour's permission");
            run(n, || {
                black_box(black_box(&gov).check()).unwrap_err();
            })
        }
        _ => unreachable!("checked against CASES"),
    }
    ExitCode::SUCCESS
}
