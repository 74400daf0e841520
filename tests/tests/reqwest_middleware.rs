//! `reqwest::GuardMiddleware` against a real axum server on 127.0.0.1 that fails, stalls and
//! sheds on cue: the client breaker opens on real `5xx` and recovers through half-open, stays
//! closed while the server sheds (`429`, and this library's own `503` with `Retry-After`), a
//! retry waits out the server's `Retry-After`, and a time limiter cuts a stalled request
//! without leaving a permit or the server's handler behind. Waits are bounded polls.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use resilience_runtime::reqwest::{GuardMiddleware, GuardName, RequestError};
use resilience_runtime::tower::GuardLayer;
use resilience_runtime::{
    Aspect, BulkheadConfig, CircuitBreakerConfig, CircuitState, Guard, ManualClock, Registry,
    Rejected, RetryConfig, SlidingWindow, TimeLimiterConfig,
};

const OK: u8 = 0;
const FAIL: u8 = 1;
const SHED_429: u8 = 2;
const STALL: u8 = 3;
/// A 429 with `Retry-After: 1` on the first request, then answers.
const SHED_ONCE: u8 = 4;

/// What the server does, and what it saw.
#[derive(Default)]
struct Cue {
    mode: AtomicU8,
    /// Requests that reached the handler.
    seen: AtomicU32,
    /// Handlers running now (a stalled one ends when its connection is dropped).
    running: AtomicU32,
}

struct Running(Arc<Cue>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn dependency(State(cue): State<Arc<Cue>>) -> Response {
    let seen = cue.seen.fetch_add(1, Ordering::SeqCst);
    cue.running.fetch_add(1, Ordering::SeqCst);
    let _running = Running(Arc::clone(&cue));
    match cue.mode.load(Ordering::SeqCst) {
        FAIL => (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response(),
        SHED_429 => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "7")],
            "slow down",
        )
            .into_response(),
        SHED_ONCE if seen == 0 => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            "later",
        )
            .into_response(),
        STALL => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "late".into_response()
        }
        _ => "ok".into_response(),
    }
}

/// Serves `router` on an ephemeral port of 127.0.0.1.
async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn server() -> (SocketAddr, Arc<Cue>) {
    let cue = Arc::new(Cue::default());
    let router = Router::new()
        .route("/", get(dependency))
        .with_state(Arc::clone(&cue));
    (serve(router).await, cue)
}

fn client(middleware: GuardMiddleware) -> ClientWithMiddleware {
    // No proxy, whatever the environment says: traffic stays on 127.0.0.1.
    let inner = reqwest::Client::builder().no_proxy().build().unwrap();
    ClientBuilder::new(inner).with(middleware).build()
}

/// A breaker of a count window of 4, opening at 50 %, 30 s open, 2 probes.
fn breaker() -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(4))
        .minimum_number_of_calls(4)
        .failure_rate_threshold(50.0)
        .wait_duration_in_open_state(Duration::from_secs(30))
        .permitted_calls_in_half_open_state(2)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_client_breaker_opens_on_real_server_errors_and_recovers_through_half_open() {
    let (addr, cue) = server().await;
    let clock = ManualClock::new();
    let registry = Arc::new(Registry::with_clock(clock.clone()));
    registry
        .configure_circuit_breaker("dependency", breaker())
        .unwrap();
    let client = client(
        GuardMiddleware::new(&[Aspect::CircuitBreaker])
            .host("127.0.0.1", "dependency")
            .with_registry(registry.clone()),
    );
    let url = format!("http://{addr}/");

    cue.mode.store(FAIL, Ordering::SeqCst);
    for _ in 0..4 {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
    let breaker = registry.circuit_breaker("dependency");
    assert_eq!(breaker.state(), CircuitState::Open);
    let refused = client.get(&url).send().await.unwrap_err();
    assert!(matches!(
        RequestError::of(&refused),
        Some(RequestError::Rejected(Rejected::CallNotPermitted { .. }))
    ));
    assert_eq!(
        cue.seen.load(Ordering::SeqCst),
        4,
        "an open breaker sends nothing"
    );

    cue.mode.store(OK, Ordering::SeqCst);
    clock.advance(Duration::from_secs(30));
    for _ in 0..2 {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(breaker.state(), CircuitState::Closed);
}

#[tokio::test]
async fn the_client_breaker_stays_closed_while_the_server_sheds_with_429() {
    let (addr, cue) = server().await;
    let registry = Arc::new(Registry::new());
    registry
        .configure_circuit_breaker("dependency", breaker())
        .unwrap();
    let url = format!("http://{addr}/");
    cue.mode.store(SHED_429, Ordering::SeqCst);

    let client_of = |record: bool| {
        client(
            GuardMiddleware::new(&[Aspect::CircuitBreaker])
                .host("127.0.0.1", "dependency")
                .record_server_refusals(record)
                .with_registry(registry.clone()),
        )
    };
    let shed = client_of(false);
    for _ in 0..10 {
        let refused = shed.get(&url).send().await.unwrap_err();
        assert_eq!(
            RequestError::of(&refused),
            Some(&RequestError::ServerRefused {
                status: StatusCode::TOO_MANY_REQUESTS,
                retry_after: Some(Duration::from_secs(7)),
            })
        );
    }
    let breaker = registry.circuit_breaker("dependency");
    assert_eq!(breaker.state(), CircuitState::Closed);
    assert_eq!(breaker.metrics().number_of_buffered_calls(), 0);

    // Told to, the breaker records them as failures and opens.
    let recorded = client_of(true);
    for _ in 0..4 {
        recorded.get(&url).send().await.unwrap_err();
    }
    assert_eq!(breaker.state(), CircuitState::Open);
}

#[tokio::test]
async fn a_server_shedding_with_this_librarys_own_503_is_a_refusal_not_a_failure() {
    // The server: a route behind a bulkhead of one permit, answering refusals itself.
    let server_registry = Arc::new(Registry::new());
    let one = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .build()
        .unwrap();
    server_registry.configure_bulkhead("server", one).unwrap();
    let cue = Arc::new(Cue::default());
    let layer = GuardLayer::new(&[Guard::bulkhead("server")])
        .with_registry(server_registry.clone())
        .for_axum();
    let router = Router::new()
        .route("/", get(dependency))
        .route_layer(layer)
        .with_state(Arc::clone(&cue));
    let addr = serve(router).await;
    let url = format!("http://{addr}/");

    let client_registry = Arc::new(Registry::new());
    client_registry
        .configure_circuit_breaker("server", breaker())
        .unwrap();
    let client = client(
        GuardMiddleware::new(&[Aspect::CircuitBreaker])
            .host("127.0.0.1", "server")
            .with_registry(client_registry.clone()),
    );
    cue.mode.store(STALL, Ordering::SeqCst);
    let holder = {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move { client.get(&url).send().await })
    };
    for _ in 0..2000 {
        if server_registry
            .bulkhead("server")
            .available_concurrent_calls()
            == 0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for _ in 0..6 {
        let refused = client.get(&url).send().await.unwrap_err();
        assert_eq!(
            RequestError::of(&refused),
            Some(&RequestError::ServerRefused {
                status: StatusCode::SERVICE_UNAVAILABLE,
                retry_after: Some(Duration::from_secs(1)),
            })
        );
    }
    let breaker = client_registry.circuit_breaker("server");
    assert_eq!(breaker.state(), CircuitState::Closed);
    assert_eq!(breaker.metrics().number_of_failed_calls(), 0);
    holder.abort();
}

#[tokio::test]
async fn a_retry_waits_at_least_the_servers_retry_after() {
    let (addr, cue) = server().await;
    let registry = Arc::new(Registry::new());
    let retry = RetryConfig::builder()
        .max_attempts(2)
        .wait_duration(Duration::from_millis(10))
        .build()
        .unwrap();
    registry.configure_retry("dependency", retry).unwrap();
    let client = client(
        GuardMiddleware::new(&[Aspect::Retry, Aspect::CircuitBreaker])
            .host("127.0.0.1", "dependency")
            .with_registry(registry.clone()),
    );
    cue.mode.store(SHED_ONCE, Ordering::SeqCst);
    let started = Instant::now();
    let response = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(cue.seen.load(Ordering::SeqCst), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the second attempt came {:?} after the first, before the server's Retry-After",
        started.elapsed()
    );
    let metrics = registry.retry("dependency").metrics();
    assert_eq!(metrics.number_of_successful_calls_with_retry_attempt(), 1);
}

#[tokio::test]
async fn a_time_limiter_cuts_a_stalled_request_and_leaves_no_permit_or_handler_behind() {
    let (addr, cue) = server().await;
    let registry = Arc::new(Registry::new());
    let limit = TimeLimiterConfig::builder()
        .timeout_duration(Duration::from_millis(200))
        .build()
        .unwrap();
    registry
        .configure_time_limiter("dependency", limit)
        .unwrap();
    let two = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .build()
        .unwrap();
    registry.configure_bulkhead("dependency", two).unwrap();
    let client = client(
        GuardMiddleware::new(&[Aspect::Bulkhead, Aspect::TimeLimiter])
            .host("127.0.0.1", "dependency")
            .with_registry(registry.clone()),
    );
    cue.mode.store(STALL, Ordering::SeqCst);
    let cut = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert!(matches!(
        RequestError::of(&cut),
        Some(RequestError::Rejected(Rejected::TimedOut { .. }))
    ));
    assert_eq!(
        registry.bulkhead("dependency").available_concurrent_calls(),
        2
    );
    // The cut-off request's connection was dropped: the server's handler ends with it.
    for _ in 0..2000 {
        if cue.running.load(Ordering::SeqCst) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        cue.running.load(Ordering::SeqCst),
        0,
        "a handler left running"
    );
    cue.mode.store(OK, Ordering::SeqCst);
    let response = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_guard_name_on_the_request_chooses_its_instances_over_its_host() {
    let (addr, _cue) = server().await;
    let registry = Arc::new(Registry::new());
    let client = client(
        GuardMiddleware::new(&[Aspect::CircuitBreaker])
            .host("127.0.0.1", "by-host")
            .with_registry(registry.clone()),
    );
    let url = format!("http://{addr}/");
    client.get(&url).send().await.unwrap();
    client
        .get(&url)
        .with_extension(GuardName::new("by-name"))
        .send()
        .await
        .unwrap();
    let calls = |name: &str| {
        registry
            .circuit_breaker(name)
            .metrics()
            .number_of_successful_calls()
    };
    assert_eq!((calls("by-host"), calls("by-name")), (1, 1));

    // Unmapped, a host names its own instances.
    let by_ip = client_of_host(&registry);
    by_ip.get(&url).send().await.unwrap();
    assert_eq!(calls("127.0.0.1"), 1);
}

fn client_of_host(registry: &Arc<Registry>) -> ClientWithMiddleware {
    client(GuardMiddleware::new(&[Aspect::CircuitBreaker]).with_registry(registry.clone()))
}

/// A body of one chunk, as a stream: sent once, never cloned.
struct OneChunk(Option<&'static str>);

impl futures_core::Stream for OneChunk {
    type Item = Result<&'static str, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.take().map(Ok))
    }
}

#[tokio::test]
async fn a_streaming_body_under_a_retry_is_refused_before_it_is_sent() {
    let (addr, cue) = server().await;
    let registry = Arc::new(Registry::new());
    let guards = [Aspect::Retry, Aspect::CircuitBreaker];
    let client = client(
        GuardMiddleware::new(&guards)
            .host("127.0.0.1", "dependency")
            .with_registry(registry.clone()),
    );
    let url = format!("http://{addr}/");
    let refused = client
        .post(&url)
        .body(reqwest::Body::wrap_stream(OneChunk(Some("order"))))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        RequestError::of(&refused),
        Some(&RequestError::BodyNotRepeatable {
            instance: "dependency".into()
        })
    );
    assert!(refused.to_string().contains("buffer the body"), "{refused}");
    assert_eq!(cue.seen.load(Ordering::SeqCst), 0, "nothing was sent");
    // A buffered body is sent (and could be sent again).
    let sent = client.post(&url).body("order").send().await.unwrap();
    assert_eq!(sent.status(), StatusCode::METHOD_NOT_ALLOWED);
}
