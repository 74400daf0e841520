//! `tower::GuardLayer`: the tower contract (readiness, admission in `call`, release on every
//! path of the response future, clones), the same instances as the annotations, re-entry
//! across the two, reconfiguration, retries, time-outs and classification. tower's own
//! `limit::concurrency` tests are the model of what is asserted.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use resilience_runtime::tower::{GuardError, GuardLayer, ServerErrorsAreFailures};
use resilience_runtime::{
    bulkhead, circuit_breaker, Aspect, BulkheadConfig, CircuitBreakerConfig, Guard, Registry,
    Rejected, RetryConfig, SlidingWindow, TimeLimiterConfig,
};
use resilience_tests::CallError;
use tokio::sync::oneshot;
use tower::{service_fn, Layer, Service, ServiceExt};

/// What the inner service does with a request.
#[derive(Debug)]
enum Do {
    Answer(u32),
    Fail,
    Panic,
    /// Answers what the sender sends, once it does.
    Hold(oneshot::Receiver<u32>),
}

#[derive(Debug, PartialEq)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the dependency failed")
    }
}

impl std::error::Error for Failed {}

fn dependency() -> impl Service<Do, Response = u32, Error = Failed, Future: Send> + Clone + Send {
    service_fn(|request: Do| async move {
        match request {
            Do::Answer(n) => Ok(n),
            Do::Fail => Err(Failed),
            Do::Panic => panic!("the dependency panicked"),
            Do::Hold(answer) => Ok(answer.await.unwrap_or(0)),
        }
    })
}

/// A registry of its own with the bulkhead `name` of `calls` permits, waiting `wait` for one.
fn registry_with_bulkhead(name: &str, calls: u32, wait: Duration) -> Arc<Registry> {
    let registry = Arc::new(Registry::new());
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(calls)
        .max_wait_duration(wait)
        .build()
        .unwrap();
    registry.configure_bulkhead(name, config).unwrap();
    registry
}

/// Polls `future` once, with a waker that does nothing.
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

fn held() -> (oneshot::Sender<u32>, Do) {
    let (answer, receiver) = oneshot::channel();
    (answer, Do::Hold(receiver))
}

#[tokio::test]
async fn n_requests_are_admitted_and_the_next_refused_until_one_completes() {
    let registry = registry_with_bulkhead("n", 2, Duration::ZERO);
    let bulkhead = registry.bulkhead("n");
    let mut svc = GuardLayer::new(&[Guard::bulkhead("n")])
        .with_registry(registry.clone())
        .layer(dependency());

    let (answer1, hold1) = held();
    let (_answer2, hold2) = held();
    let first = svc.ready().await.unwrap().call(hold1);
    let second = svc.ready().await.unwrap().call(hold2);
    // Admitted in `call`, before either future is polled.
    assert_eq!(bulkhead.available_concurrent_calls(), 0);

    let third = svc.ready().await.unwrap().call(Do::Answer(3)).await;
    assert!(
        matches!(
            third,
            Err(GuardError::Rejected(Rejected::BulkheadFull { .. }))
        ),
        "{third:?}"
    );

    answer1.send(10).unwrap();
    assert_eq!(first.await, Ok(10));
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    assert_eq!(svc.ready().await.unwrap().call(Do::Answer(4)).await, Ok(4));

    drop(second);
    assert_eq!(bulkhead.available_concurrent_calls(), 2);
}

#[tokio::test]
async fn every_permit_is_released_when_the_response_completes_fails_panics_or_is_dropped() {
    let registry = registry_with_bulkhead("paths", 1, Duration::ZERO);
    let bulkhead = registry.bulkhead("paths");
    let breaker = registry.circuit_breaker("paths");
    let layer = GuardLayer::new(&[Guard::bulkhead("paths"), Guard::circuit_breaker("paths")])
        .with_registry(registry.clone());
    let mut svc = layer.layer(dependency());

    assert_eq!(svc.ready().await.unwrap().call(Do::Answer(1)).await, Ok(1));
    assert_eq!(bulkhead.available_concurrent_calls(), 1);

    let failed = svc.ready().await.unwrap().call(Do::Fail).await;
    assert_eq!(failed, Err(GuardError::Inner(Failed)));
    assert_eq!(bulkhead.available_concurrent_calls(), 1);

    let panicked = tokio::spawn(svc.ready().await.unwrap().call(Do::Panic)).await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(bulkhead.available_concurrent_calls(), 1);

    let (_answer, hold) = held();
    let mut dropped = Box::pin(svc.ready().await.unwrap().call(hold));
    assert!(poll_once(dropped.as_mut()).is_pending());
    assert_eq!(bulkhead.available_concurrent_calls(), 0);
    drop(dropped);
    assert_eq!(bulkhead.available_concurrent_calls(), 1);

    // The success and the failure were recorded; the panic and the drop abandoned their call.
    let metrics = breaker.metrics();
    assert_eq!(metrics.number_of_successful_calls(), 1);
    assert_eq!(metrics.number_of_failed_calls(), 1);
    assert_eq!(metrics.number_of_buffered_calls(), 2);
}

/// A service with one slot shared by its clones, reserved by `poll_ready` and used by `call`,
/// as tower's `ConcurrencyLimit` reserves its permit: readiness belongs to one clone.
struct Slots {
    free: Arc<AtomicUsize>,
    reserved: bool,
}

impl Clone for Slots {
    fn clone(&self) -> Self {
        Slots {
            free: Arc::clone(&self.free),
            reserved: false,
        }
    }
}

impl Service<u32> for Slots {
    type Response = u32;
    type Error = Failed;
    type Future = std::future::Ready<Result<u32, Failed>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Failed>> {
        if self.reserved {
            return Poll::Ready(Ok(()));
        }
        let taken = self
            .free
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        self.reserved = taken.is_ok();
        if self.reserved {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, request: u32) -> Self::Future {
        assert!(self.reserved, "called without being ready");
        self.reserved = false;
        self.free.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(request))
    }
}

#[tokio::test]
async fn readiness_is_the_inner_services_and_a_clone_does_not_inherit_it() {
    let registry = registry_with_bulkhead("ready", 1, Duration::from_secs(5));
    let bulkhead = registry.bulkhead("ready");
    let slots = Slots {
        free: Arc::new(AtomicUsize::new(1)),
        reserved: false,
    };
    let mut svc = GuardLayer::new(&[Guard::bulkhead("ready")])
        .with_registry(registry.clone())
        .layer(slots.clone());
    let mut cx = Context::from_waker(Waker::noop());

    assert!(svc.poll_ready(&mut cx).is_ready());
    // No permit is reserved by readiness.
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    let mut clone = svc.clone();
    assert!(
        clone.poll_ready(&mut cx).is_pending(),
        "the clone has no slot of its own"
    );
    assert_eq!(svc.call(7).await, Ok(7));
    assert!(clone.poll_ready(&mut cx).is_ready());

    // A request that waits for the bulkhead is sent, once admitted, to the service that was
    // made ready for it (the inner `call` asserts it), not to a clone.
    let other = GuardLayer::new(&[Guard::bulkhead("ready")]).with_registry(registry.clone());
    let mut holder = other.layer(dependency());
    let (answer, hold) = held();
    let holding = holder.ready().await.unwrap().call(hold);
    let waiting = clone.call(8);
    let mut waiting = pin!(waiting);
    assert!(poll_once(waiting.as_mut()).is_pending());
    answer.send(1).unwrap();
    assert_eq!(holding.await, Ok(1));
    assert_eq!(waiting.await, Ok(8));
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
}

#[tokio::test]
async fn a_request_waits_for_the_bulkhead_and_one_dropped_while_waiting_leaves_nothing() {
    let registry = registry_with_bulkhead("wait", 1, Duration::from_secs(5));
    let bulkhead = registry.bulkhead("wait");
    let mut svc = GuardLayer::new(&[Guard::bulkhead("wait"), Guard::circuit_breaker("wait")])
        .with_registry(registry.clone())
        .layer(dependency());

    let (answer, hold) = held();
    let holding = svc.ready().await.unwrap().call(hold);
    let mut dropped = Box::pin(svc.ready().await.unwrap().call(Do::Answer(0)));
    assert!(poll_once(dropped.as_mut()).is_pending());
    drop(dropped);
    let waiting = svc.ready().await.unwrap().call(Do::Answer(2));
    answer.send(1).unwrap();
    assert_eq!(holding.await, Ok(1));
    assert_eq!(waiting.await, Ok(2));
    assert_eq!(bulkhead.available_concurrent_calls(), 1);
    let breaker = registry.circuit_breaker("wait").metrics();
    assert_eq!(
        breaker.number_of_successful_calls(),
        2,
        "the dropped wait was never a call"
    );
}

#[tokio::test]
async fn the_registrys_precedence_orders_the_guards_and_a_refusal_is_not_a_failure() {
    let registry = registry_with_bulkhead("order", 1, Duration::ZERO);
    let breaker = CircuitBreakerConfig::builder()
        .record_rejections(true)
        .sliding_window(SlidingWindow::CountBased(10))
        .build()
        .unwrap();
    registry
        .configure_circuit_breaker("order", breaker)
        .unwrap();
    // Written breaker first: the bulkhead still runs first.
    let mut svc = GuardLayer::new(&[Guard::circuit_breaker("order"), Guard::bulkhead("order")])
        .with_registry(registry.clone())
        .layer(dependency());
    let (answer, hold) = held();
    let holding = svc.ready().await.unwrap().call(hold);
    let refused = svc.ready().await.unwrap().call(Do::Answer(1)).await;
    assert!(matches!(
        refused,
        Err(GuardError::Rejected(Rejected::BulkheadFull { .. }))
    ));
    let metrics = registry.circuit_breaker("order").metrics();
    assert_eq!(
        metrics.number_of_buffered_calls(),
        0,
        "the breaker never saw it"
    );

    // The breaker moved outside: it now sees the bulkhead's refusal (and, configured to,
    // records it). A change of precedence reaches the layer's next request.
    registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
    let refused = svc.ready().await.unwrap().call(Do::Answer(1)).await;
    assert!(refused.unwrap_err().is_rejected());
    let metrics = registry.circuit_breaker("order").metrics();
    assert_eq!(metrics.number_of_failed_calls(), 1);
    answer.send(1).unwrap();
    assert_eq!(holding.await, Ok(1));
}

#[tokio::test]
async fn a_configuration_change_reaches_the_layers_next_request() {
    let registry = registry_with_bulkhead("resize", 1, Duration::ZERO);
    let mut svc = GuardLayer::new(&[Guard::bulkhead("resize")])
        .with_registry(registry.clone())
        .layer(dependency());
    let (answer, hold) = held();
    let holding = svc.ready().await.unwrap().call(hold);
    assert!(svc
        .ready()
        .await
        .unwrap()
        .call(Do::Answer(1))
        .await
        .is_err());
    let wider = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .build()
        .unwrap();
    registry.configure_bulkhead("resize", wider).unwrap();
    assert_eq!(svc.ready().await.unwrap().call(Do::Answer(2)).await, Ok(2));
    answer.send(1).unwrap();
    assert_eq!(holding.await, Ok(1));
}

#[bulkhead(name = "tower-shared")]
async fn annotated_holder(hold: oneshot::Receiver<u32>) -> Result<u32, CallError> {
    Ok(hold.await.unwrap_or(0))
}

#[tokio::test]
async fn a_layer_and_an_annotation_of_the_same_name_share_one_bulkhead() {
    let global = Registry::global();
    let one = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .build()
        .unwrap();
    global.configure_bulkhead("tower-shared", one).unwrap();
    let mut svc = GuardLayer::new(&[Guard::bulkhead("tower-shared")]).layer(dependency());

    let (answer, receiver) = oneshot::channel();
    let annotated = tokio::spawn(annotated_holder(receiver));
    while global.bulkhead("tower-shared").available_concurrent_calls() == 1 {
        tokio::task::yield_now().await;
    }
    let refused = svc.ready().await.unwrap().call(Do::Answer(1)).await;
    assert!(matches!(
        refused,
        Err(GuardError::Rejected(Rejected::BulkheadFull { .. }))
    ));
    answer.send(5).unwrap();
    assert_eq!(annotated.await.unwrap(), Ok(5));
    assert_eq!(svc.ready().await.unwrap().call(Do::Answer(2)).await, Ok(2));

    let metrics = global.bulkhead("tower-shared").metrics();
    assert_eq!(metrics.available_concurrent_calls(), 1);
}

/// The seed incident's shape: an annotated function that calls, through a hand-wrapped
/// client, the same guards it holds.
#[bulkhead(name = "tower-reentry")]
#[circuit_breaker(name = "tower-reentry")]
async fn annotated_caller<S>(mut client: S) -> Result<u32, CallError>
where
    S: Service<Do, Response = u32, Error = GuardError<Failed>>,
{
    let ready = client
        .ready()
        .await
        .map_err(|_| CallError::Downstream("not ready"))?;
    ready
        .call(Do::Answer(9))
        .await
        .map_err(|_| CallError::Downstream("refused"))
}

#[tokio::test]
async fn a_layer_called_while_an_annotated_function_holds_its_guards_passes_through_them() {
    let global = Registry::global();
    let one = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .build()
        .unwrap();
    global.configure_bulkhead("tower-reentry", one).unwrap();
    let layer = GuardLayer::new(&[
        Guard::bulkhead("tower-reentry"),
        Guard::circuit_breaker("tower-reentry"),
    ]);

    // A bulkhead of one permit does not refuse its own holder, and the breaker counts the
    // call once.
    assert_eq!(annotated_caller(layer.layer(dependency())).await, Ok(9));
    let breaker = global.circuit_breaker("tower-reentry").metrics();
    assert_eq!(breaker.number_of_successful_calls(), 1);
    assert_eq!(
        global
            .bulkhead("tower-reentry")
            .available_concurrent_calls(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn a_retrying_layer_sends_a_clone_of_the_request_per_attempt() {
    let registry = Arc::new(Registry::new());
    let retry = RetryConfig::builder()
        .max_attempts(3)
        .wait_duration(Duration::from_millis(10))
        .build()
        .unwrap();
    registry.configure_retry("flaky", retry).unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&attempts);
    let flaky = service_fn(move |request: String| {
        let attempt = seen.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if attempt < 3 {
                Err(Failed)
            } else {
                Ok(format!("{request} on attempt {attempt}"))
            }
        }
    });
    let layer = GuardLayer::retrying(&[Guard::retry("flaky"), Guard::circuit_breaker("flaky")])
        .with_registry(registry.clone());
    let answer = layer.layer(flaky).oneshot("quote".to_string()).await;
    assert_eq!(answer.unwrap(), "quote on attempt 3");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    let breaker = registry.circuit_breaker("flaky").metrics();
    assert_eq!(
        breaker.number_of_failed_calls(),
        2,
        "each attempt entered the breaker"
    );

    let refused = GuardLayer::try_new(&[Guard::retry("flaky")]).unwrap_err();
    assert!(
        refused.to_string().contains("GuardLayer::retrying"),
        "{refused}"
    );
    let repeated = GuardLayer::try_new(&[Guard::bulkhead("a"), Guard::bulkhead("b")]);
    assert!(repeated.unwrap_err().to_string().contains("twice"));
}

#[tokio::test(start_paused = true)]
async fn a_time_limiter_in_a_layer_cuts_a_stalled_request_and_frees_its_permits() {
    let registry = registry_with_bulkhead("stall", 1, Duration::ZERO);
    let limit = TimeLimiterConfig::builder()
        .timeout_duration(Duration::from_millis(50))
        .build()
        .unwrap();
    registry.configure_time_limiter("stall", limit).unwrap();
    let mut svc = GuardLayer::new(&[Guard::bulkhead("stall"), Guard::time_limiter("stall")])
        .with_registry(registry.clone())
        .layer(dependency());
    let (_never, hold) = held();
    let cut = svc.ready().await.unwrap().call(hold).await;
    assert!(
        matches!(cut, Err(GuardError::Rejected(Rejected::TimedOut { .. }))),
        "{cut:?}"
    );
    assert_eq!(registry.bulkhead("stall").available_concurrent_calls(), 1);
    assert_eq!(svc.ready().await.unwrap().call(Do::Answer(3)).await, Ok(3));
}

#[tokio::test]
async fn an_http_service_counts_server_errors_as_failures_and_client_errors_as_answers() {
    let registry = Arc::new(Registry::new());
    let status = service_fn(|status: u16| async move {
        Ok::<_, Failed>(http::Response::builder().status(status).body(()).unwrap())
    });
    let mut svc = GuardLayer::new(&[Guard::circuit_breaker("http")])
        .with_registry(registry.clone())
        .classifier(ServerErrorsAreFailures)
        .layer(status);
    for status in [200, 404, 503] {
        let response = svc.ready().await.unwrap().call(status).await.unwrap();
        assert_eq!(response.status(), status);
    }
    let metrics = registry.circuit_breaker("http").metrics();
    assert_eq!(metrics.number_of_successful_calls(), 2);
    assert_eq!(metrics.number_of_failed_calls(), 1);
}

#[tokio::test]
async fn a_guard_without_configuration_refuses_when_the_registry_requires_one() {
    let registry = Arc::new(Registry::new());
    registry.set_require_configured(true);
    let svc = GuardLayer::new(&[Guard::bulkhead("nowhere")])
        .with_registry(registry.clone())
        .layer(dependency());
    let refused = svc.oneshot(Do::Answer(1)).await.unwrap_err();
    assert!(matches!(
        refused,
        GuardError::Rejected(Rejected::Unconfigured { .. })
    ));
    // As tower's `BoxError`: the refusal is found by downcasting.
    let boxed = refused.into_box_error();
    assert!(boxed.downcast_ref::<Rejected>().is_some());
}

#[test]
fn the_response_future_is_send_when_the_inner_one_is() {
    fn send<T: Send>(_: &T) {}
    let mut svc = GuardLayer::new(&[Guard::bulkhead("send")]).layer(dependency());
    let future = svc.call(Do::Answer(1));
    send(&future);
}

#[tokio::test(start_paused = true)]
async fn an_axum_router_guarded_by_the_layer_answers_refusals_as_responses() {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use axum::Router;

    let registry = registry_with_bulkhead("axum-route", 1, Duration::ZERO);
    let limit = TimeLimiterConfig::builder()
        .timeout_duration(Duration::from_millis(100))
        .build()
        .unwrap();
    registry
        .configure_time_limiter("axum-route", limit)
        .unwrap();
    let guards = [
        Guard::bulkhead("axum-route"),
        Guard::time_limiter("axum-route"),
    ];
    let layer = GuardLayer::new(&guards)
        .with_registry(registry.clone())
        .for_axum();
    let app: Router = Router::new()
        .route("/fast", get(|| async { "done" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                "late"
            }),
        )
        .route_layer(layer);
    let request = |path: &str| Request::get(path).body(Body::empty()).unwrap();

    let fast = app.clone().oneshot(request("/fast")).await.unwrap();
    assert_eq!(fast.status(), StatusCode::OK);

    let slow = app.clone().oneshot(request("/slow")).await.unwrap();
    assert_eq!(slow.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(slow.headers().get("retry-after").is_none());

    // A request in flight holds the one permit: the next is a 503 with `Retry-After`.
    let holding = tokio::spawn(app.clone().oneshot(request("/slow")));
    while registry.bulkhead("axum-route").available_concurrent_calls() == 1 {
        tokio::task::yield_now().await;
    }
    let shed = app.clone().oneshot(request("/fast")).await.unwrap();
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["retry-after"], "1");
    assert_eq!(
        holding.await.unwrap().unwrap().status(),
        StatusCode::GATEWAY_TIMEOUT
    );

    // The route layer of an axum app counts a 5xx as a failure (`ServerErrorsAreFailures`).
    let breaker = [Guard::circuit_breaker("axum-route")];
    let counted: Router = Router::new()
        .route(
            "/broken",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "broken") }),
        )
        .route("/missing", get(|| async { StatusCode::NOT_FOUND }))
        .route_layer(
            GuardLayer::new(&breaker)
                .with_registry(registry.clone())
                .for_axum(),
        );
    assert_eq!(
        counted
            .clone()
            .oneshot(request("/broken"))
            .await
            .unwrap()
            .status(),
        500
    );
    assert_eq!(
        counted.oneshot(request("/missing")).await.unwrap().status(),
        404
    );
    let metrics = registry.circuit_breaker("axum-route").metrics();
    assert_eq!(metrics.number_of_failed_calls(), 1);
    assert_eq!(metrics.number_of_successful_calls(), 1);
}

/// A service whose `call` itself panics, before making any future.
#[derive(Clone)]
struct PanicsInCall;

impl Service<u32> for PanicsInCall {
    type Response = u32;
    type Error = Failed;
    type Future = std::future::Ready<Result<u32, Failed>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Failed>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: u32) -> Self::Future {
        panic!("the inner service's call panicked")
    }
}

#[test]
fn a_panic_in_the_inner_services_call_releases_the_permits_and_records_nothing() {
    let registry = registry_with_bulkhead("sync-panic", 1, Duration::ZERO);
    let mut svc = GuardLayer::new(&[
        Guard::bulkhead("sync-panic"),
        Guard::circuit_breaker("sync-panic"),
    ])
    .with_registry(registry.clone())
    .layer(PanicsInCall);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| svc.call(1)));
    assert!(panicked.is_err());
    assert_eq!(
        registry.bulkhead("sync-panic").available_concurrent_calls(),
        1
    );
    let breaker = registry.circuit_breaker("sync-panic").metrics();
    assert_eq!(breaker.number_of_buffered_calls(), 0);
}

#[tokio::test]
async fn a_server_shedding_load_backs_an_adaptive_limit_off_and_is_no_breaker_failure() {
    // A manual clock times every call: each response is a sample.
    let registry = Arc::new(Registry::with_clock(resilience_runtime::ManualClock::new()));
    let aimd = resilience_runtime::AdaptiveLimit::aimd()
        .min_limit(1)
        .max_limit(40)
        .initial_limit(20);
    registry
        .configure_bulkhead(
            "shed",
            BulkheadConfig::builder().adaptive(aimd).build().unwrap(),
        )
        .unwrap();
    let status = service_fn(|status: u16| async move {
        Ok::<_, Failed>(http::Response::builder().status(status).body(()).unwrap())
    });
    let mut svc = GuardLayer::new(&[Guard::bulkhead("shed"), Guard::circuit_breaker("shed")])
        .with_registry(registry.clone())
        .classifier(ServerErrorsAreFailures)
        .layer(status);
    let limit = || registry.bulkhead("shed").max_allowed_concurrent_calls();
    svc.ready().await.unwrap().call(429).await.unwrap();
    assert_eq!(limit(), 18, "a 429 is a drop: 20 × 0.9");
    svc.ready().await.unwrap().call(500).await.unwrap();
    assert_eq!(limit(), 18, "a 500 is a failure, not a drop");
    let breaker = registry.circuit_breaker("shed").metrics();
    assert_eq!(breaker.total_failed_calls(), 1, "the 500 alone");
    assert_eq!(breaker.total_ignored_calls(), 1, "the 429");
}
