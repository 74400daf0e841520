//! The whole guarded call, measured as the best of many short rounds instead of a median:
//! on a shared machine whose load moves while it runs, the fastest round of each case is the
//! steadiest figure to compare cases by (the cases are interleaved round by round, so each
//! sees the same quiet moments). `cargo bench -p resilience-benches --features peers --bench best_of [rounds]`.
//! Criterion's medians (`peers.rs`) are the published table; this is the cross-check, for the
//! whole guarded call (two gates, and all five aspects), for the breaker's closed path by
//! window size, and for the rate limiter beside governor on one thread and on two.

#![allow(missing_docs)]

use std::hint::black_box;
use std::num::NonZeroU32;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use resilience_runtime::{
    bulkhead, circuit_breaker, hedge, rate_limiter, retry, time_limiter, AdaptiveLimit,
    BulkheadConfig, CircuitBreaker, CircuitBreakerConfig, Guard, HedgeConfig, RateLimiterConfig,
    Registry, RetryConfig, SlidingWindow, TimeLimiterConfig,
};
use tower::{Service, ServiceBuilder};

mod common;
use common::{bare, bare_pending, poll_now, poll_to_end, CallError};

#[bulkhead(name = "best-of")]
#[circuit_breaker(name = "best-of")]
#[inline(never)]
async fn guarded(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

#[bulkhead(name = "best-of")]
#[circuit_breaker(name = "best-of")]
#[inline(never)]
fn guarded_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// A lone breaker, the shape most annotations have: `breaker_alone`'s plans, written as the
/// macro writes them.
#[circuit_breaker(name = "best-of-breaker")]
#[inline(never)]
fn breaker_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`breaker_sync`] as an `async fn`.
#[circuit_breaker(name = "best-of-breaker")]
#[inline(never)]
async fn breaker_async(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`breaker_sync`] on the open breaker.
#[circuit_breaker(name = "best-of-open")]
#[inline(never)]
fn open_breaker_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// The three gates of `guarded_five` (the same instances) without its retry and time limiter:
/// what those two add to a call whose first attempt succeeds.
#[bulkhead(name = "best-of-five")]
#[rate_limiter(name = "best-of-five")]
#[circuit_breaker(name = "best-of-five")]
#[inline(never)]
async fn guarded_three(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// Every aspect, in precedence order, the first attempt successful.
#[bulkhead(name = "best-of-five")]
#[rate_limiter(name = "best-of-five")]
#[retry(name = "best-of-five")]
#[circuit_breaker(name = "best-of-five")]
#[time_limiter(name = "best-of-five")]
#[inline(never)]
async fn guarded_five(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`guarded_five`] on a call that suspends once: the first attempt runs under the time
/// limiter's timer.
#[bulkhead(name = "best-of-five")]
#[rate_limiter(name = "best-of-five")]
#[retry(name = "best-of-five")]
#[circuit_breaker(name = "best-of-five")]
#[time_limiter(name = "best-of-five")]
#[inline(never)]
async fn guarded_five_pending(x: u32) -> Result<u32, CallError> {
    bare_pending(x).await
}

/// A retry alone, the first attempt successful.
#[retry(name = "best-of-five")]
#[inline(never)]
async fn retry_alone(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`retry_alone`], sync.
#[retry(name = "best-of-five")]
#[inline(never)]
fn retry_alone_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`retry_alone_sync`] on a retry with a budget: each call counts its first attempt.
#[retry(name = "best-of-budget")]
#[inline(never)]
fn retry_budget_sync(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`guarded_three`] with a hedge among its gates (its default place: inside the rate limiter,
/// outside the breaker), the first attempt answering before the delay.
#[bulkhead(name = "best-of-five")]
#[rate_limiter(name = "best-of-five")]
#[hedge(name = "best-of-hedge")]
#[circuit_breaker(name = "best-of-five")]
#[inline(never)]
async fn hedged_three(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// [`guarded_three`] on a call that suspends once.
#[bulkhead(name = "best-of-five")]
#[rate_limiter(name = "best-of-five")]
#[circuit_breaker(name = "best-of-five")]
#[inline(never)]
async fn guarded_three_pending(x: u32) -> Result<u32, CallError> {
    bare_pending(x).await
}

/// [`hedged_three`] on a call that suspends once: its first attempt waits, under the hedge's
/// timer, and answers before the delay.
#[bulkhead(name = "best-of-five")]
#[rate_limiter(name = "best-of-five")]
#[hedge(name = "best-of-hedge")]
#[circuit_breaker(name = "best-of-five")]
#[inline(never)]
async fn hedged_three_pending(x: u32) -> Result<u32, CallError> {
    bare_pending(x).await
}

/// A hedge alone, the first attempt answering at once.
#[hedge(name = "best-of-hedge")]
#[inline(never)]
async fn hedge_alone(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// A time limiter alone, the call ready at once.
#[time_limiter(name = "best-of-five")]
#[inline(never)]
async fn time_limiter_alone(x: u32) -> Result<u32, CallError> {
    Ok(black_box(x) + 1)
}

/// A time limiter alone, on a call that suspends once (its timer started).
#[time_limiter(name = "best-of-five")]
#[inline(never)]
async fn time_limiter_alone_pending(x: u32) -> Result<u32, CallError> {
    bare_pending(x).await
}

/// The best round of each case, the cases interleaved round by round: `best!(rounds; "name" =>
/// call, ...)` returns `[f64; N]`, ns per call. A macro, so that each case stays its own
/// closure type and every round is a direct, inlinable call.
macro_rules! best {
    ($rounds:expr; $($name:literal => $call:expr),+ $(,)?) => {{
        let mut best = [$({ let _ = $name; f64::MAX }),+];
        for _ in 0..$rounds {
            let times = [$(round(|| { $call; })),+];
            for (best, time) in best.iter_mut().zip(times) {
                *best = best.min(time);
            }
        }
        best
    }};
}

/// The breaker alone and the bulkhead alone, each beside its peer, as the instruction counts of
/// `scripts/instructions.sh` measure them (same policies, same cases): the cross-check of those
/// counts in time.
fn breaker_alone(rounds: usize) {
    let equal = || {
        CircuitBreakerConfig::builder()
            .failure_rate_threshold(50.0)
            .sliding_window(SlidingWindow::CountBased(100))
            .minimum_number_of_calls(100)
            .slow_call_duration_threshold(Duration::MAX)
            .wait_duration_in_open_state(Duration::from_secs(3600))
            .build()
            .expect("valid breaker")
    };
    let registry = Registry::global();
    registry
        .configure_circuit_breaker("best-of-breaker", equal())
        .expect("breaker");
    registry
        .configure_circuit_breaker("best-of-open", equal())
        .expect("breaker");
    registry
        .circuit_breaker("best-of-open")
        .transition_to_open_state()
        .expect("closed to open");
    let breaker_plan = registry
        .plan(&[Guard::circuit_breaker("best-of-breaker")])
        .expect("plan");
    let open_plan = registry
        .plan(&[Guard::circuit_breaker("best-of-open")])
        .expect("plan");
    let direct = CircuitBreaker::new("best-of-direct", equal());
    let open_direct = CircuitBreaker::new("best-of-direct-open", equal());
    open_direct
        .transition_to_open_state()
        .expect("closed to open");
    let closed = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .half_open_len(10)
        .open_wait(Duration::from_secs(3600))
        .build();
    let open = recloser::Recloser::custom()
        .closed_len(1)
        .open_wait(Duration::from_secs(3600))
        .build();
    for _ in 0..2 {
        let _ = open.call(|| Err::<(), ()>(()));
    }
    let semaphore = tokio::sync::Semaphore::new(25);
    let bulkhead = resilience_runtime::Bulkhead::new(
        "best-of-alone",
        BulkheadConfig::builder()
            .max_concurrent_calls(25)
            .build()
            .expect("valid bulkhead"),
    );
    let names = [
        "recloser",
        "ours_direct",
        "ours_plan",
        "ours_macro_sync",
        "ours_macro_async",
        "open_recloser",
        "open_ours_direct",
        "open_ours_plan",
        "open_ours_macro_sync",
        "tokio_semaphore",
        "ours_bulkhead",
    ];
    let best = best!(rounds;
        "recloser" => black_box(black_box(&closed).call(|| Ok::<u32, ()>(black_box(1)))).unwrap(),
        "ours_direct" => black_box(&direct).try_acquire().expect("closed").record_success(),
        "ours_plan" => black_box(black_box(&breaker_plan).call(|| Ok::<u32, CallError>(black_box(1) + 1))).unwrap(),
        "ours_macro_sync" => black_box(breaker_sync(black_box(1))).unwrap(),
        "ours_macro_async" => black_box(poll_now(breaker_async(black_box(1)))).unwrap(),
        "open_recloser" => black_box(black_box(&open).call(|| Ok::<u32, ()>(black_box(1)))).unwrap_err(),
        "open_ours_direct" => black_box(black_box(&open_direct).try_acquire()).unwrap_err(),
        "open_ours_plan" => black_box(black_box(&open_plan).call(|| Ok::<u32, CallError>(black_box(1) + 1))).unwrap_err(),
        "open_ours_macro_sync" => black_box(open_breaker_sync(black_box(1))).unwrap_err(),
        "tokio_semaphore" => drop(black_box(black_box(&semaphore).try_acquire().expect("free permit"))),
        "ours_bulkhead" => drop(black_box(black_box(&bulkhead).try_acquire().expect("free permit"))),
    );
    println!(
        "\nthe breaker alone and the bulkhead alone, best of {rounds} rounds: ns per call, and ours / peer"
    );
    // Each case's peer: the recloser call of its state, tokio's semaphore for the bulkhead.
    let peers = [
        None,
        Some(0),
        Some(0),
        Some(0),
        Some(0),
        None,
        Some(5),
        Some(5),
        Some(5),
        None,
        Some(9),
    ];
    for ((name, time), peer) in names.iter().zip(&best).zip(peers) {
        match peer {
            Some(peer) => println!("{name:20} {time:6.1}   {:.2}x", time / best[peer]),
            None => println!("{name:20} {time:6.1}"),
        }
    }
}

/// What `record_call_durations` costs a breaker's call: the default configuration (its 60 s
/// slow-call rule times calls with the coarse clock) beside the same with the setting on
/// (the precise clock and a histogram update), a 1 ms slow-call rule (the precise clock
/// alone) and no slow-call rule (no clock).
fn call_durations(rounds: usize) {
    let config = |slow: Duration, durations: bool| {
        CircuitBreakerConfig::builder()
            .slow_call_duration_threshold(slow)
            .record_call_durations(durations)
            .wait_duration_in_open_state(Duration::from_secs(3600))
            .build()
            .expect("valid breaker")
    };
    let default_slow = CircuitBreakerConfig::DEFAULT_SLOW_CALL_DURATION_THRESHOLD;
    let breakers = [
        ("default", config(default_slow, false)),
        ("record_call_durations", config(default_slow, true)),
        ("precise_clock", config(Duration::from_millis(1), false)),
        ("no_clock", config(Duration::MAX, false)),
    ]
    .map(|(name, config)| (name, CircuitBreaker::new(name, config)));
    let [default, durations, precise, none] = &breakers;
    let best = best!(rounds;
        "default" => black_box(&default.1).try_acquire().expect("closed").record_success(),
        "record_call_durations" => black_box(&durations.1).try_acquire().expect("closed").record_success(),
        "precise_clock" => black_box(&precise.1).try_acquire().expect("closed").record_success(),
        "no_clock" => black_box(&none.1).try_acquire().expect("closed").record_success(),
    );
    println!(
        "\na breaker's call (try_acquire, record_success), best of {rounds} rounds: ns per call, and / default"
    );
    for ((name, _), time) in breakers.iter().zip(&best) {
        println!("{name:22} {time:6.1}   {:.2}x", time / best[0]);
    }
}

/// What an adaptive limit costs a call: a fixed bulkhead's admission and release beside an
/// adaptive one's (Gradient2, AIMD) whose limit does not move (the calls use less than half
/// of it), by hand and through a plan; the permit alone, and the whole call.
fn adaptive_bulkhead(rounds: usize) {
    let fixed = BulkheadConfig::builder()
        .max_concurrent_calls(100)
        .build()
        .expect("valid bulkhead");
    let adaptive = |limit: AdaptiveLimit| {
        BulkheadConfig::builder()
            .adaptive(limit.min_limit(100).initial_limit(100).max_limit(200))
            .build()
            .expect("valid bulkhead")
    };
    let registry = Registry::new();
    registry
        .configure_bulkhead("fixed", fixed.clone())
        .expect("bulkhead");
    registry
        .configure_bulkhead("gradient2", adaptive(AdaptiveLimit::gradient2()))
        .expect("bulkhead");
    // The knee probes up and down from its estimate: bounds of 100 hold it still.
    let knee = || adaptive(AdaptiveLimit::knee().max_limit(100));
    registry
        .configure_bulkhead("knee", knee())
        .expect("bulkhead");
    let fixed_plan = registry.plan(&[Guard::bulkhead("fixed")]).expect("plan");
    let gradient_plan = registry
        .plan(&[Guard::bulkhead("gradient2")])
        .expect("plan");
    let knee_plan = registry.plan(&[Guard::bulkhead("knee")]).expect("plan");
    let knee_direct = resilience_runtime::Bulkhead::new("knee", knee());
    let fixed_direct = resilience_runtime::Bulkhead::new("fixed", fixed);
    let gradient_direct =
        resilience_runtime::Bulkhead::new("gradient2", adaptive(AdaptiveLimit::gradient2()));
    let aimd_direct = resilience_runtime::Bulkhead::new("aimd", adaptive(AdaptiveLimit::aimd()));
    let names = [
        "fixed_permit",
        "gradient2_permit",
        "aimd_permit",
        "knee_permit",
        "fixed_plan",
        "gradient2_plan",
        "knee_plan",
    ];
    let best = best!(rounds;
        "fixed_permit" => drop(black_box(black_box(&fixed_direct).try_acquire().expect("free permit"))),
        "gradient2_permit" => drop(black_box(black_box(&gradient_direct).try_acquire().expect("free permit"))),
        "aimd_permit" => drop(black_box(black_box(&aimd_direct).try_acquire().expect("free permit"))),
        "knee_permit" => drop(black_box(black_box(&knee_direct).try_acquire().expect("free permit"))),
        "fixed_plan" => black_box(black_box(&fixed_plan).call(|| Ok::<u32, CallError>(black_box(1) + 1))).unwrap(),
        "gradient2_plan" => black_box(black_box(&gradient_plan).call(|| Ok::<u32, CallError>(black_box(1) + 1))).unwrap(),
        "knee_plan" => black_box(black_box(&knee_plan).call(|| Ok::<u32, CallError>(black_box(1) + 1))).unwrap(),
    );
    assert_eq!(
        gradient_direct.max_allowed_concurrent_calls(),
        100,
        "the limit held still"
    );
    println!("\nan adaptive bulkhead beside a fixed one, best of {rounds} rounds: ns per call, and / fixed");
    let peers = [0, 0, 0, 0, 4, 4, 4];
    for ((name, time), peer) in names.iter().zip(&best).zip(peers) {
        println!("{name:20} {time:6.1}   {:.2}x", time / best[peer]);
    }
}

/// One call through a tower service: `poll_ready`, `call`, the response future polled once
/// (peers.rs's `tower_call`).
#[inline(always)]
fn tower_call<S: Service<()>>(service: &mut S) -> Result<S::Response, S::Error> {
    match service.poll_ready(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(e)) => return Err(e),
        Poll::Pending => panic!("a measured service must be ready"),
    }
    poll_now(service.call(()))
}

/// The instances of [`five_aspects`]' calls.
fn five_aspects_config(registry: &Registry) {
    configure_gates("best-of-five");
    registry
        .configure_rate_limiter(
            "best-of-five",
            RateLimiterConfig::builder()
                .limit_for_period(1_000_000_000)
                .limit_refresh_period(Duration::from_secs(1))
                .timeout_duration(Duration::ZERO)
                .build()
                .expect("valid rate limiter"),
        )
        .expect("rate limiter");
    registry
        .configure_retry(
            "best-of-five",
            RetryConfig::builder()
                .max_attempts(3)
                .wait_duration(Duration::from_millis(500))
                .build()
                .expect("valid retry"),
        )
        .expect("retry");
    registry
        .configure_retry(
            "best-of-budget",
            RetryConfig::builder()
                .max_attempts(3)
                .wait_duration(Duration::from_millis(500))
                .budget(resilience_runtime::RetryBudget::ratio(0.2))
                .build()
                .expect("valid retry"),
        )
        .expect("retry");
    registry
        .configure_time_limiter(
            "best-of-five",
            TimeLimiterConfig::builder()
                .timeout_duration(Duration::from_secs(1))
                .build()
                .expect("valid time limiter"),
        )
        .expect("time limiter");
}

/// peers.rs's `five_aspects` group: the two-gate call against the five-aspect one (bulkhead,
/// rate limiter, retry, breaker, time limiter; first attempt successful, ready at its first
/// poll), through the macro, a held plan (async and sync) and tower-resilience's layers in the
/// same order, and the five-aspect macro call against its three gates alone, with the same
/// policies: 25 permits; 10⁹ permissions per second (none refused);
/// 3 attempts, 500 ms apart; count window of 100, no slow-call rule; 1 s.
fn five_aspects(rounds: usize) {
    let registry = Registry::global();
    five_aspects_config(registry);
    let two = registry
        .plan(&[
            Guard::bulkhead("best-of"),
            Guard::circuit_breaker("best-of"),
        ])
        .expect("plan");
    let five = registry
        .plan(&[
            Guard::bulkhead("best-of-five"),
            Guard::rate_limiter("best-of-five"),
            Guard::retry("best-of-five"),
            Guard::circuit_breaker("best-of-five"),
            Guard::time_limiter("best-of-five"),
        ])
        .expect("plan");

    // tower-resilience's bulkhead and time limiter need a runtime context.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let _context = rt.enter();
    let bulkhead = || {
        tower_resilience_bulkhead::BulkheadLayer::builder()
            .max_concurrent_calls(25)
            .reject_when_full()
            .build()
            .expect("valid tower-resilience bulkhead")
    };
    let breaker = || {
        tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
            .failure_rate_threshold(0.5)
            .sliding_window_size(100)
            .minimum_number_of_calls(100)
            .wait_duration_in_open(Duration::from_secs(3600))
            .build()
            .expect("valid tower-resilience breaker")
    };
    let mut tower_two = ServiceBuilder::new()
        .layer(bulkhead())
        .layer(breaker())
        .service(tower::service_fn(|()| bare(black_box(1))));
    let mut tower_five = ServiceBuilder::new()
        .layer(bulkhead())
        .layer(
            tower_resilience_ratelimiter::RateLimiterLayer::builder()
                .limit_for_period(1_000_000_000)
                .refresh_period(Duration::from_secs(1))
                .timeout_duration(Duration::ZERO)
                .build()
                .expect("valid tower-resilience rate limiter"),
        )
        .layer(
            tower_resilience_retry::RetryLayer::builder()
                .max_attempts(3)
                .fixed_backoff(Duration::from_millis(500))
                .build(),
        )
        .layer(breaker())
        .layer(
            tower_resilience_timelimiter::TimeLimiterLayer::builder()
                .timeout_duration(Duration::from_secs(1))
                .build(),
        )
        .service(tower::service_fn(|()| bare(black_box(1))));

    let names = [
        "bare",
        "ours_macro",
        "ours_five_macro",
        "ours_plan",
        "ours_five_plan",
        "ours_plan_sync",
        "ours_five_plan_sync",
        "tower_resilience_two",
        "tower_resilience_five",
        "ours_three_macro",
    ];
    let best = best!(rounds;
        "bare" => drop(poll_now(bare(black_box(1)))),
        "ours_macro" => drop(poll_now(guarded(black_box(1)))),
        "ours_five_macro" => drop(poll_now(guarded_five(black_box(1)))),
        "ours_plan" => drop(poll_now(two.call_async(|| bare(black_box(1))))),
        "ours_five_plan" => drop(poll_now(five.call_async(|| bare(black_box(1))))),
        "ours_plan_sync" => drop(two.call(|| Ok::<u32, CallError>(black_box(1) + 1))),
        "ours_five_plan_sync" => drop(five.call(|| Ok::<u32, CallError>(black_box(1) + 1))),
        "tower_resilience_two" => drop(tower_call(&mut tower_two)),
        "tower_resilience_five" => drop(tower_call(&mut tower_five)),
        "ours_three_macro" => drop(poll_now(guarded_three(black_box(1)))),
    );
    println!(
        "\nfive aspects against two gates, best of {rounds} rounds: ns per call, over `bare`, \
         over the same call with two gates, and ours / tower-resilience's"
    );
    // Each case's two-gate counterpart, and its tower-resilience peer.
    let cases: [(Option<usize>, Option<usize>); 10] = [
        (None, None),
        (None, Some(7)),
        (Some(1), Some(8)),
        (None, Some(7)),
        (Some(3), Some(8)),
        (None, Some(7)),
        (Some(5), Some(8)),
        (None, None),
        (Some(7), None),
        (Some(1), None),
    ];
    for ((name, time), (two, peer)) in names.iter().zip(&best).zip(cases) {
        let over_two = two.map_or(String::new(), |two| format!("+{:.1}", time - best[two]));
        let ratio = peer.map_or(String::new(), |peer| format!("{:.2}x", time / best[peer]));
        println!(
            "{name:22} {time:7.1}   +{:<7.1} {over_two:>7}   {ratio}",
            time - best[0]
        );
    }
    println!(
        "the retry and the time limiter over the three gates (the macro): +{:.1}",
        best[2] - best[9]
    );

    let names = [
        "bare_pending",
        "five_macro_pending",
        "five_plan_pending",
        "retry_alone_macro",
        "retry_alone_sync",
        "retry_budget_sync",
        "time_limiter_alone_macro",
        "time_limiter_alone_pending",
    ];
    let best = best!(rounds;
        "bare_pending" => drop(poll_to_end(bare_pending(black_box(1)))),
        "five_macro_pending" => drop(poll_to_end(guarded_five_pending(black_box(1)))),
        "five_plan_pending" => drop(poll_to_end(five.call_async(|| bare_pending(black_box(1))))),
        "retry_alone_macro" => drop(poll_now(retry_alone(black_box(1)))),
        "retry_alone_sync" => drop(retry_alone_sync(black_box(1))),
        "retry_budget_sync" => drop(retry_budget_sync(black_box(1))),
        "time_limiter_alone_macro" => drop(poll_now(time_limiter_alone(black_box(1)))),
        "time_limiter_alone_pending" => drop(poll_to_end(time_limiter_alone_pending(black_box(1)))),
    );
    println!("\nwrappers alone, and calls that suspend once, best of {rounds} rounds: ns per call");
    for (name, time) in names.iter().zip(&best) {
        println!("{name:26} {time:7.1}");
    }
}

/// A hedge whose first attempt answers before the delay (100 ms, one extra attempt), against
/// the same call without it: a hedge alone against the bare call and against tower's `Hedge`
/// (its delay a latency percentile, as it has no fixed one) and tower-resilience's
/// `HedgeLayer` around the same trivial service; the three gates with and without a hedge
/// among them, ready at once and suspending once.
fn hedges(rounds: usize) {
    let registry = Registry::global();
    five_aspects_config(registry);
    registry
        .configure_hedge(
            "best-of-hedge",
            HedgeConfig::builder()
                .delay(Duration::from_millis(100))
                .max_hedged_attempts(1)
                .build()
                .expect("valid hedge"),
        )
        .expect("hedge");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let _context = rt.enter();

    /// tower's hedge asks its policy whether a request can be sent again.
    #[derive(Clone)]
    struct Always;
    impl tower::hedge::Policy<()> for Always {
        fn clone_request(&self, (): &()) -> Option<()> {
            Some(())
        }
        fn can_retry(&self, (): &()) -> bool {
            true
        }
    }
    let mut tower_hedge = tower::hedge::Hedge::new(
        tower::service_fn(|()| bare(black_box(1))),
        Always,
        10,
        0.95,
        Duration::from_secs(10),
    );
    let mut tower_resilience = tower::Layer::layer(
        &tower_resilience_hedge::HedgeLayer::builder()
            .delay(Duration::from_millis(100))
            .max_hedged_attempts(1)
            .build(),
        tower::service_fn(|()| bare(black_box(1))),
    );

    let names = [
        "bare",
        "hedge_alone_macro",
        "three_macro",
        "three_hedged_macro",
        "bare_pending",
        "three_macro_pending",
        "three_hedged_macro_pending",
    ];
    let best = best!(rounds;
        "bare" => drop(poll_now(bare(black_box(1)))),
        "hedge_alone_macro" => drop(poll_now(hedge_alone(black_box(1)))),
        "three_macro" => drop(poll_now(guarded_three(black_box(1)))),
        "three_hedged_macro" => drop(poll_now(hedged_three(black_box(1)))),
        "bare_pending" => drop(poll_to_end(bare_pending(black_box(1)))),
        "three_macro_pending" => drop(poll_to_end(guarded_three_pending(black_box(1)))),
        "three_hedged_macro_pending" => drop(poll_to_end(hedged_three_pending(black_box(1)))),
    );
    println!(
        "\nhedges whose first attempt answers before the delay, best of {rounds} rounds: ns per \
         call, and over the same call without the hedge"
    );
    // Each case's counterpart without the hedge.
    let without: [Option<usize>; 7] = [None, Some(0), None, Some(2), None, None, Some(5)];
    for ((name, time), without) in names.iter().zip(&best).zip(without) {
        let over = without.map_or(String::new(), |w| format!("+{:.1}", time - best[w]));
        println!("{name:28} {time:7.1}   {over:>7}");
    }

    // tower-resilience's hedge spawns each attempt as a task, so every call of this half runs
    // on the runtime (`block_on`), ours too, over the bare call run the same way.
    let names = [
        "bare_block_on",
        "hedge_alone_block_on",
        "tower_hedge_block_on",
        "tower_resilience_hedge_block_on",
    ];
    let best = best!(rounds;
        "bare_block_on" => drop(rt.block_on(bare(black_box(1)))),
        "hedge_alone_block_on" => drop(rt.block_on(hedge_alone(black_box(1)))),
        "tower_hedge_block_on" => drop(rt.block_on(tower_ready_call(&mut tower_hedge))),
        "tower_resilience_hedge_block_on" => drop(rt.block_on(tower_ready_call(&mut tower_resilience))),
    );
    println!(
        "\nthe same hedge on the runtime, beside its peers: ns per call, and over the bare call"
    );
    for (name, time) in names.iter().zip(&best) {
        println!("{name:34} {time:7.1}   +{:.1}", time - best[0]);
    }
}

/// One call through a tower service on a runtime: ready, then called, then awaited.
async fn tower_ready_call<S: Service<()>>(service: &mut S) -> Result<S::Response, S::Error> {
    use tower::ServiceExt;
    service.ready().await?.call(()).await
}

/// A request through a tower layer around the same trivial service: ours (the bulkhead and
/// breaker `best-of`, in the global registry and in one of its own), tower-resilience's
/// bulkhead and breaker, and tower's own `ConcurrencyLimit` + `LoadShed` (a bulkhead alone).
/// Same policies: 25 permits, refused at once when full; a count window of 100.
fn tower_layer(rounds: usize) {
    use resilience_runtime::tower::GuardLayer;
    use tower::Layer;

    let inner = || tower::service_fn(|()| bare(black_box(1)));
    let two = [
        Guard::bulkhead("best-of"),
        Guard::circuit_breaker("best-of"),
    ];
    let mut ours_two = GuardLayer::new(&two).layer(inner());
    let mut ours_bulkhead = GuardLayer::new(&two[..1]).layer(inner());
    let own = std::sync::Arc::new(Registry::new());
    configure_gates_in(&own, "best-of");
    let mut ours_own = GuardLayer::new(&two).with_registry(own).layer(inner());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let _context = rt.enter();
    let mut tower_resilience = ServiceBuilder::new()
        .layer(
            tower_resilience_bulkhead::BulkheadLayer::builder()
                .max_concurrent_calls(25)
                .reject_when_full()
                .build()
                .expect("valid tower-resilience bulkhead"),
        )
        .layer(
            tower_resilience_circuitbreaker::CircuitBreakerLayer::builder()
                .failure_rate_threshold(0.5)
                .sliding_window_size(100)
                .minimum_number_of_calls(100)
                .wait_duration_in_open(Duration::from_secs(3600))
                .build()
                .expect("valid tower-resilience breaker"),
        )
        .service(inner());
    let mut limit_loadshed = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(25)
        .service(inner());

    let names = [
        "bare",
        "ours_layer_two",
        "ours_layer_two_own",
        "ours_layer_bulkhead",
        "tower_resilience_two",
        "tower_limit_loadshed",
    ];
    let best = best!(rounds;
        "bare" => drop(poll_now(bare(black_box(1)))),
        "ours_layer_two" => drop(tower_call(&mut ours_two)),
        "ours_layer_two_own" => drop(tower_call(&mut ours_own)),
        "ours_layer_bulkhead" => drop(tower_call(&mut ours_bulkhead)),
        "tower_resilience_two" => drop(tower_call(&mut tower_resilience)),
        "tower_limit_loadshed" => drop(tower_call(&mut limit_loadshed)),
    );
    println!(
        "\na request through a tower layer, best of {rounds} rounds: ns per call, and over \
         tower-resilience's two layers and tower's limit + load-shed"
    );
    for (name, time) in names.iter().zip(&best) {
        println!(
            "{name:22} {time:7.1}   {:.2}x  {:.2}x",
            time / best[4],
            time / best[5]
        );
    }
}

/// The policy of `semaphore+recloser` for the instances `name`: a bulkhead of 25, a count
/// window of 100, no slow-call rule.
fn configure_gates(name: &str) {
    configure_gates_in(Registry::global(), name);
}

/// [`configure_gates`] in `registry`.
fn configure_gates_in(registry: &Registry, name: &str) {
    registry
        .configure_bulkhead(
            name,
            BulkheadConfig::builder()
                .max_concurrent_calls(25)
                .build()
                .expect("valid bulkhead"),
        )
        .expect("bulkhead");
    registry
        .configure_circuit_breaker(
            name,
            CircuitBreakerConfig::builder()
                .sliding_window(SlidingWindow::CountBased(100))
                .minimum_number_of_calls(100)
                .slow_call_duration_threshold(Duration::MAX)
                .build()
                .expect("valid breaker"),
        )
        .expect("breaker");
}

/// Two threads making 10⁶ calls each at once on one shared value ([`common::two_threads`]): ns
/// per call of one thread. Compared by the median of long runs, not by the best of short
/// rounds: the fastest round of two threads is one in which they did not contend (one ran
/// after the other), which is not the case measured.
fn two_threads_per_call<S: Sync>(shared: &S, call: impl Fn(&S) + Sync) -> f64 {
    const CALLS: u32 = 1_000_000;
    common::two_threads(u64::from(CALLS), shared, call).as_nanos() as f64 / f64::from(CALLS)
}

/// A permission of the rate limiter beside governor's `check()` (10⁹ per second, no wait: no
/// call is ever refused), on one thread and on two contending for one limiter; and ours with a
/// 1 ms cycle, which reads the precise clock where the 1 s cycle reads the coarse one.
fn rate_limiter_alone(rounds: usize) {
    const RATE: u32 = 1_000_000_000;
    let ours = |limit: u32, period: Duration| {
        resilience_runtime::RateLimiter::new(
            "best-of-rate",
            RateLimiterConfig::builder()
                .limit_for_period(limit)
                .limit_refresh_period(period)
                .timeout_duration(Duration::ZERO)
                .build()
                .expect("valid rate limiter"),
        )
    };
    let second = ours(RATE, Duration::from_secs(1));
    let millisecond = ours(RATE / 1000, Duration::from_millis(1));
    let governor = governor::RateLimiter::direct(governor::Quota::per_second(
        NonZeroU32::new(RATE).expect("non-zero"),
    ));
    let take = |rl: &resilience_runtime::RateLimiter| {
        black_box(rl).try_acquire().expect("below the rate");
    };
    let check = |gov: &governor::DefaultDirectRateLimiter| {
        black_box(black_box(gov).check()).expect("below the rate");
    };
    let best = best!(rounds;
        "ours" => take(&second),
        "governor" => check(&governor),
        "ours_period_1ms" => take(&millisecond),
    );
    println!("\nthe rate limiter, best of {rounds} rounds: ns per call, and ours / governor");
    println!(
        "ours                 {:6.1}   {:.2}x",
        best[0],
        best[0] / best[1]
    );
    println!("governor             {:6.1}", best[1]);
    println!(
        "ours_period_1ms      {:6.1}   {:.2}x",
        best[2],
        best[2] / best[1]
    );
    // Interleaved run by run, like the rounds above.
    let (mut ours_runs, mut governor_runs) = (Vec::new(), Vec::new());
    for _ in 0..9 {
        ours_runs.push(two_threads_per_call(&second, take));
        governor_runs.push(two_threads_per_call(&governor, check));
    }
    let median = |mut runs: Vec<f64>| {
        runs.sort_by(f64::total_cmp);
        runs[runs.len() / 2]
    };
    let (ours_two, governor_two) = (median(ours_runs), median(governor_runs));
    println!("two threads, median of 9 runs of 1 000 000 calls each: ns per call of one thread");
    println!(
        "ours_2threads        {ours_two:6.1}   {:.2}x",
        ours_two / governor_two
    );
    println!("governor_2threads    {governor_two:6.1}");
}

/// One request through the reqwest middleware (a bulkhead and a breaker) against the same
/// request through a bare `reqwest-middleware` client, both to an axum server on loopback:
/// the best of `rounds / 10` interleaved rounds of 200 sequential requests, in µs per request.
fn http_client(rounds: usize) {
    use resilience_runtime::reqwest::GuardMiddleware;
    use resilience_runtime::Aspect;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    let url = format!("http://{addr}/");
    let inner = || {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client")
    };
    let bare = reqwest_middleware::ClientBuilder::new(inner()).build();
    let guards = GuardMiddleware::new(&[Aspect::Bulkhead, Aspect::CircuitBreaker])
        .host("127.0.0.1", "best-of");
    let guarded = reqwest_middleware::ClientBuilder::new(inner())
        .with(guards)
        .build();
    let round = |client: &reqwest_middleware::ClientWithMiddleware| {
        const REQUESTS: u32 = 200;
        runtime.block_on(async {
            let start = Instant::now();
            for _ in 0..REQUESTS {
                let response = client.get(&url).send().await.expect("an answer");
                drop(response.bytes().await.expect("a body"));
            }
            start.elapsed().as_nanos() as f64 / f64::from(REQUESTS) / 1000.0
        })
    };
    let mut best = [f64::MAX; 2];
    for _ in 0..(rounds / 10).max(5) {
        best[0] = best[0].min(round(&bare));
        best[1] = best[1].min(round(&guarded));
    }
    println!(
        "\na request on loopback, best of {} rounds of 200: µs per request",
        (rounds / 10).max(5)
    );
    println!("bare reqwest-middleware {:7.1}", best[0]);
    println!(
        "guarded (GuardMiddleware) {:5.1}   {:.3}x",
        best[1],
        best[1] / best[0]
    );
}

fn round(mut call: impl FnMut()) -> f64 {
    const CALLS: u32 = 20_000;
    let start = Instant::now();
    for _ in 0..CALLS {
        call();
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

/// The two-gate sync call with no metrics exporter, and with the Prometheus recorder installed
/// and a scraper calling `Registry::record_metrics` and rendering every millisecond on another
/// thread (far more often than a Prometheus server scrapes, so that many rounds overlap one).
/// A scrape is intermittent, so the mean of the rounds is printed beside the best: the best
/// round may have run between two scrapes.
fn metrics_on_and_off(rounds: usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let registry = Registry::global();
    let plan = registry
        .plan(&[
            Guard::bulkhead("best-of"),
            Guard::circuit_breaker("best-of"),
        ])
        .expect("plan");
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this process");
    let scraping = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let (scraping, scrapes) = (Arc::clone(&scraping), Arc::clone(&scrapes));
        std::thread::spawn(move || loop {
            if scraping.load(Ordering::Relaxed) {
                registry.record_metrics();
                black_box(handle.render());
                scrapes.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(1));
        });
    }
    let call = || drop(black_box(&plan).call(|| Ok::<u32, CallError>(black_box(1) + 1)));
    let (mut best, mut sum) = ([f64::MAX; 2], [0.0; 2]);
    for _ in 0..rounds {
        let off = round(call);
        scraping.store(true, Ordering::Relaxed);
        let on = round(call);
        scraping.store(false, Ordering::Relaxed);
        for (i, time) in [off, on].into_iter().enumerate() {
            best[i] = best[i].min(time);
            sum[i] += time;
        }
    }
    println!(
        "\nthe two-gate sync call without metrics and while scraped every ms ({} scrapes), {rounds} rounds: best and mean ns per call",
        scrapes.load(Ordering::Relaxed)
    );
    for (i, name) in ["metrics_off", "metrics_scraped"].into_iter().enumerate() {
        println!("{name:20} {:6.1} {:6.1}", best[i], sum[i] / rounds as f64);
    }
    println!(
        "ratio scraped / off: best {:.2}x, mean {:.2}x",
        best[1] / best[0],
        sum[1] / sum[0]
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a number among the arguments is the count of rounds.
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(200);
    // A word among the arguments runs that group alone: `best_of tower_layer`.
    let only = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-') && arg.parse::<usize>().is_err());
    if let Some(group) = only {
        configure_gates("best-of");
        match group.as_str() {
            "breaker_alone" => breaker_alone(rounds),
            "rate_limiter_alone" => rate_limiter_alone(rounds),
            "five_aspects" => five_aspects(rounds),
            "tower_layer" => tower_layer(rounds),
            "http_client" => http_client(rounds),
            "call_durations" => call_durations(rounds),
            "adaptive_bulkhead" => adaptive_bulkhead(rounds),
            "hedges" => hedges(rounds),
            other => panic!(
                "no group `{other}`: breaker_alone, rate_limiter_alone, five_aspects, \
                 tower_layer, http_client, call_durations, adaptive_bulkhead, hedges"
            ),
        }
        return;
    }
    // The policy of `semaphore+recloser`: 25 permits, count window of 100, no slow-call rule.
    let registry = Registry::global();
    configure_gates("best-of");
    let plan = registry
        .plan(&[
            Guard::bulkhead("best-of"),
            Guard::circuit_breaker("best-of"),
        ])
        .expect("plan");
    let semaphore = tokio::sync::Semaphore::new(25);
    let recloser = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .open_wait(Duration::from_secs(3600))
        .build();

    // Each case is its own closure type, so that every round is a direct, inlinable call.
    let names = [
        "bare",
        "ours_macro",
        "ours_macro_sync",
        "ours_plan",
        "ours_plan_sync",
        "semaphore+recloser",
        "semaphore+async_rec",
    ];
    // The async composition a recloser user writes: `AsyncRecloser` around the call's future.
    let async_recloser = recloser::AsyncRecloser::from(
        recloser::Recloser::custom()
            .error_rate(0.5)
            .closed_len(100)
            .open_wait(Duration::from_secs(3600))
            .build(),
    );
    let mut best = [f64::MAX; 7];
    for _ in 0..rounds {
        let times = [
            round(|| drop(poll_now(bare(black_box(1))))),
            round(|| drop(poll_now(guarded(black_box(1))))),
            round(|| drop(guarded_sync(black_box(1)))),
            round(|| drop(poll_now(plan.call_async(|| bare(black_box(1)))))),
            round(|| drop(plan.call(|| Ok::<u32, CallError>(black_box(1) + 1)))),
            round(|| {
                let _permit = semaphore.try_acquire().expect("free permit");
                drop(recloser.call(|| poll_now(bare(black_box(1)))));
            }),
            round(|| {
                drop(poll_now(async {
                    let _permit = semaphore.try_acquire().expect("free permit");
                    async_recloser.call(bare(black_box(1))).await
                }))
            }),
        ];
        for (best, time) in best.iter_mut().zip(times) {
            *best = best.min(time);
        }
    }
    println!("best of {rounds} rounds of 20 000 calls: ns per call, and over `bare`");
    let bare = best[0];
    for (name, best) in names.iter().zip(&best) {
        println!("{name:20} {best:6.1}   +{:.1}", best - bare);
    }

    breaker_alone(rounds);

    rate_limiter_alone(rounds);

    five_aspects(rounds);

    tower_layer(rounds);

    http_client(rounds);

    metrics_on_and_off(rounds);

    // `scaling_window`'s cases: one successful call through a closed breaker with the default
    // 60 s slow-call rule (timed with the coarse clock on Linux), by window size.
    let windows = [
        ("count_10", SlidingWindow::CountBased(10)),
        ("count_10000", SlidingWindow::CountBased(10_000)),
        ("time_1s", SlidingWindow::TimeBased(1)),
        ("time_3600s", SlidingWindow::TimeBased(3600)),
    ];
    let breakers = windows.map(|(_, window)| {
        CircuitBreaker::new(
            "best-of",
            CircuitBreakerConfig::builder()
                .failure_rate_threshold(50.0)
                .sliding_window(window)
                .minimum_number_of_calls(window.size().min(100))
                .wait_duration_in_open_state(Duration::from_secs(3600))
                .build()
                .expect("valid breaker"),
        )
    });
    let call = |breaker: &CircuitBreaker| {
        black_box(breaker)
            .try_acquire()
            .expect("closed")
            .record_success();
    };
    let mut best = [f64::MAX; 4];
    for _ in 0..rounds {
        let times = [
            round(|| call(&breakers[0])),
            round(|| call(&breakers[1])),
            round(|| call(&breakers[2])),
            round(|| call(&breakers[3])),
        ];
        for (best, time) in best.iter_mut().zip(times) {
            *best = best.min(time);
        }
    }
    println!("\nbreaker closed path by window, best of {rounds} rounds (ns per call)");
    for ((name, _), best) in windows.iter().zip(&best) {
        println!("{name:20} {best:6.1}");
    }
    let spread = |a: f64, b: f64| a.max(b) / a.min(b);
    println!(
        "spread: count {:.2}x, time {:.2}x",
        spread(best[0], best[1]),
        spread(best[2], best[3])
    );
}
