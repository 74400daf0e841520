//! `orders-service`: an HTTP service whose order entry point is guarded by a bulkhead and a
//! circuit breaker, and that shows its guards over HTTP.
//!
//! - `POST /orders` with `{"item": "book", "qty": 1}` runs [`create_order`], annotated with
//!   `#[bulkhead(name = "orders")]` and `#[circuit_breaker(name = "orders")]`, which calls a
//!   simulated downstream. It answers `200 OK` with `{"order_id": 1, "item": "book", "qty": 1}`;
//!   a refusal answers `503 Service Unavailable` with `Retry-After` and a JSON body (the
//!   runtime's mapping, feature `axum`); an invalid order answers `422 Unprocessable Entity`
//!   before it reaches the guards.
//! - `GET /orders/{id}` answers `{"order_id": 1, "status": "placed"}` through the same
//!   simulated downstream, guarded by a tower layer on the same `orders` instances
//!   (`GuardLayer::new(..).for_axum()` as the route's `route_layer`): one bulkhead and one
//!   breaker for both routes, and the same `503` for a refusal.
//! - `PUT /downstream` with `{"failing": true}` makes the simulated downstream fail every
//!   order (`502 Bad Gateway`) until `{"failing": false}`; `GET /downstream` says which. Past
//!   20 failed orders the breaker opens, and orders answer `503` with the `Retry-After` of its
//!   remaining open time, without reaching the downstream.
//! - `GET /metrics` answers every guard's metrics in Prometheus's text format
//!   (`resilience_circuitbreaker_state{name="orders",state="closed"} 1`, …).
//! - `GET /actuator` (and `/actuator/circuitbreakers`, `/actuator/bulkheads`,
//!   `/actuator/events`, …) answers the state of the registry: every guard instance (kind,
//!   name, state, metrics, configuration in force), the call sites with their guards in
//!   execution order, the precedence and the last events (the runtime's
//!   `resilience_runtime::axum::actuator`).
//!
//! The bulkhead runs first (registry precedence), so a full bulkhead is never recorded by the
//! breaker: under overload the service sheds load with 503s and the breaker stays closed.
//!
//! ```no_run
//! use resilience_examples::service::{app, configure, Settings};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! configure(&Settings::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app()).await?;
//! # Ok(())
//! # }
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::Path as UrlPath;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use resilience_runtime::axum::actuator_at;
use resilience_runtime::tower::GuardLayer;
use resilience_runtime::{
    bulkhead, circuit_breaker, BulkheadConfig, Changes, CircuitBreakerConfig, ConfigError,
    DocumentError, Guard, Registry, Rejected, SlidingWindow,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The instance name of the bulkhead and of the circuit breaker guarding [`create_order`].
pub const ORDERS: &str = "orders";

/// The settings of the service that its command-line flags set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The bulkhead's `max_concurrent_calls` (`--max-concurrent-calls`).
    pub max_concurrent_calls: u32,
    /// The bulkhead's `max_wait_duration` (`--max-wait-ms`); zero rejects at once when full.
    pub max_wait: Duration,
    /// How long the simulated downstream takes per order (`--downstream-latency-ms`).
    pub downstream_latency: Duration,
    /// Whether the simulated downstream fails every order (`--downstream-failing`; switched at
    /// run time with `PUT /downstream`).
    pub downstream_failing: bool,
}

impl Default for Settings {
    /// 80 concurrent calls, a 500 ms wait for a permit, a 50 ms downstream that does not fail.
    fn default() -> Self {
        Settings {
            max_concurrent_calls: 80,
            max_wait: Duration::from_millis(500),
            downstream_latency: Duration::from_millis(50),
            downstream_failing: false,
        }
    }
}

/// The simulated downstream's latency in milliseconds, set by [`configure`].
static DOWNSTREAM_LATENCY_MS: AtomicU64 = AtomicU64::new(50);

/// Whether the simulated downstream fails every order, set by [`configure`] and
/// [`set_downstream_failing`].
static DOWNSTREAM_FAILING: AtomicBool = AtomicBool::new(false);

/// Makes the simulated downstream fail every order from now on (`true`), or serve them again
/// (`false`), as `PUT /downstream` does.
pub fn set_downstream_failing(failing: bool) {
    DOWNSTREAM_FAILING.store(failing, Ordering::Relaxed);
}

/// Whether the simulated downstream fails every order.
pub fn downstream_failing() -> bool {
    DOWNSTREAM_FAILING.load(Ordering::Relaxed)
}

/// Configures the global registry's `orders` bulkhead and circuit breaker (replacing their
/// instances, so state and metrics start afresh) and the simulated downstream's latency.
///
/// The breaker opens when half of the last 100 calls fail (once 20 are recorded), stays open
/// 10 s, probes with 5 calls, and does not record rejections by other guards.
///
/// # Errors
///
/// A [`ConfigError`] if a setting is refused (such as zero concurrent calls).
pub fn configure(settings: &Settings) -> Result<(), ConfigError> {
    let registry = Registry::global();
    registry.configure_bulkhead(
        ORDERS,
        BulkheadConfig::builder()
            .max_concurrent_calls(settings.max_concurrent_calls)
            .max_wait_duration(settings.max_wait)
            .fair_call_handling(true)
            .build()?,
    )?;
    registry.configure_circuit_breaker(
        ORDERS,
        CircuitBreakerConfig::builder()
            .failure_rate_threshold(50.0)
            .sliding_window(SlidingWindow::CountBased(100))
            .minimum_number_of_calls(20)
            .wait_duration_in_open_state(Duration::from_secs(10))
            .permitted_calls_in_half_open_state(5)
            .record_rejections(false)
            // The dashboard's latency panel; a call to the dependency dwarfs its cost.
            .record_call_durations(true)
            .build()?,
    )?;
    set_downstream_latency(settings.downstream_latency);
    set_downstream_failing(settings.downstream_failing);
    Ok(())
}

/// Configures the global registry from a configuration file (such as
/// `examples/config/incident.toml`, the incident's configuration: the same `orders` guards as
/// [`configure`] with [`Settings::default`]) and sets the simulated downstream's latency.
/// Call it again to reload the file: the instances are reconfigured in place.
///
/// ```
/// use std::time::Duration;
/// use resilience_examples::service::{configure_from_file, ORDERS};
/// use resilience_runtime::Registry;
///
/// configure_from_file("config/incident.toml", Duration::from_millis(50))?;
/// assert_eq!(Registry::global().bulkhead(ORDERS).max_allowed_concurrent_calls(), 80);
/// # Ok::<(), resilience_runtime::DocumentError>(())
/// ```
///
/// # Errors
///
/// A [`DocumentError`] naming the file, the line and the key of what it refuses; nothing is
/// applied then.
pub fn configure_from_file(
    path: impl AsRef<Path>,
    downstream_latency: Duration,
) -> Result<Changes, DocumentError> {
    let changes = Registry::global().load_file(path)?;
    set_downstream_latency(downstream_latency);
    Ok(changes)
}

fn set_downstream_latency(latency: Duration) {
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    DOWNSTREAM_LATENCY_MS.store(latency_ms, Ordering::Relaxed);
}

/// The service's routes: `POST /orders`, `GET /orders/{id}`, `GET`/`PUT /downstream`,
/// `GET /metrics` and the actuator under `/actuator`.
pub fn app() -> Router {
    // `GET /orders/{id}` is guarded by a tower layer rather than by annotations: the same
    // `orders` bulkhead and breaker as `create_order`, one limit for both routes.
    let lookups = Router::new()
        .route("/orders/{id}", get(get_order))
        .route_layer(
            GuardLayer::new(&[Guard::bulkhead(ORDERS), Guard::circuit_breaker(ORDERS)]).for_axum(),
        );
    Router::new()
        .route("/orders", post(post_order))
        .merge(lookups)
        .route(
            "/downstream",
            get(get_downstream).merge(put(put_downstream)),
        )
        .merge(actuator_at("/actuator", Registry::global()))
        .fallback(not_found)
        .route("/metrics", get(get_metrics))
}

/// `GET /metrics`: every guard's metrics in Prometheus's text format (Resilience4j's
/// Micrometer names with the prefix `resilience`, see `Registry::record_metrics`), read from
/// the guards when scraped. The `metrics` facade's Prometheus recorder is installed on the
/// first scrape; if the process installed another recorder, the answer is `500`.
async fn get_metrics() -> Response {
    static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    let handle = PROMETHEUS.get_or_init(|| PrometheusBuilder::new().install_recorder().ok());
    match handle {
        Some(handle) => {
            Registry::global().record_metrics();
            (
                [(CONTENT_TYPE, "text/plain; version=0.0.4")],
                handle.render(),
            )
                .into_response()
        }
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "another `metrics` recorder is installed in this process",
        )
            .into_response(),
    }
}

/// An order as posted: `{"item": "book", "qty": 1}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// What is ordered; not empty.
    pub item: String,
    /// How many; at least 1.
    pub qty: u32,
}

/// The id the downstream gives an accepted order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderId(pub u64);

/// Why an order was not created.
#[derive(Debug)]
pub enum OrderError {
    /// A guard refused the call: `503` (or `500` for a re-entrant call), with the runtime's
    /// `Retry-After` and JSON body.
    Rejected(Rejected),
    /// The order is not valid: `422`. Checked before the guards, so it takes no permit.
    Invalid(&'static str),
    /// The downstream failed the order: `502`. The breaker records it as a failure.
    Downstream,
}

impl From<Rejected> for OrderError {
    fn from(rejected: Rejected) -> Self {
        OrderError::Rejected(rejected)
    }
}

impl IntoResponse for OrderError {
    fn into_response(self) -> Response {
        match self {
            OrderError::Rejected(rejected) => rejected.into_response(),
            OrderError::Invalid(reason) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({ "error": "invalid_order", "message": reason })),
            )
                .into_response(),
            OrderError::Downstream => (
                StatusCode::BAD_GATEWAY,
                Json(json!({
                    "error": "downstream_failed",
                    "message": "the order backend failed the order",
                })),
            )
                .into_response(),
        }
    }
}

/// Creates an order through the simulated downstream, guarded by the `orders` bulkhead and
/// circuit breaker (the bulkhead runs first, whatever the order of the attributes).
///
/// # Errors
///
/// [`OrderError::Rejected`] when the bulkhead is full or the breaker refuses the call;
/// [`OrderError::Downstream`] when the downstream fails it.
#[bulkhead(name = "orders")]
#[circuit_breaker(name = "orders")]
pub async fn create_order(order: Order) -> Result<OrderId, OrderError> {
    downstream(&order).await
}

/// The simulated order backend: takes `--downstream-latency-ms` whatever the order, fails it
/// while [`downstream_failing`], and numbers the orders it serves from 1.
async fn downstream(_order: &Order) -> Result<OrderId, OrderError> {
    static NEXT_ORDER_ID: AtomicU64 = AtomicU64::new(1);
    let latency = Duration::from_millis(DOWNSTREAM_LATENCY_MS.load(Ordering::Relaxed));
    tokio::time::sleep(latency).await;
    if downstream_failing() {
        return Err(OrderError::Downstream);
    }
    Ok(OrderId(NEXT_ORDER_ID.fetch_add(1, Ordering::Relaxed)))
}

/// The body of `GET` and `PUT /downstream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamSwitch {
    /// Whether the simulated downstream fails every order.
    pub failing: bool,
}

/// `GET /downstream`: whether the simulated downstream fails every order.
async fn get_downstream() -> Json<DownstreamSwitch> {
    Json(DownstreamSwitch {
        failing: downstream_failing(),
    })
}

/// `PUT /downstream` with `{"failing": true}` or `{"failing": false}`: switches the simulated
/// downstream, and answers the switch now in force.
async fn put_downstream(
    body: Result<Json<DownstreamSwitch>, JsonRejection>,
) -> Result<Json<DownstreamSwitch>, Response> {
    let Json(switch) = body.map_err(invalid_body)?;
    set_downstream_failing(switch.failing);
    Ok(get_downstream().await)
}

/// axum's own refusal of a body (malformed JSON, a missing field, no JSON content type),
/// answered in the same JSON shape as every other 4xx of the service.
fn invalid_body(rejection: JsonRejection) -> Response {
    (
        rejection.status(),
        Json(json!({ "error": "invalid_body", "message": rejection.body_text() })),
    )
        .into_response()
}

/// Any other path: `404` with a JSON body, like the service's other refusals.
async fn not_found(uri: axum::http::Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({ "error": "not_found", "message": format!("no route for {}", uri.path()) })),
    )
        .into_response()
}

/// `GET /orders/{id}`: the order's status, from the simulated downstream (its latency, and
/// `502` while it fails). Guarded by the route's layer (see [`app`]): a refusal is the
/// layer's `503`, and a `502` counts as a failure of the `orders` breaker.
async fn get_order(UrlPath(id): UrlPath<u64>) -> Response {
    let latency = Duration::from_millis(DOWNSTREAM_LATENCY_MS.load(Ordering::Relaxed));
    tokio::time::sleep(latency).await;
    if downstream_failing() {
        return OrderError::Downstream.into_response();
    }
    Json(json!({ "order_id": id, "status": "placed" })).into_response()
}

/// `POST /orders`: validates the order, then runs it through [`create_order`].
async fn post_order(body: Result<Json<Order>, JsonRejection>) -> Result<Json<Value>, Response> {
    let Json(order) = body.map_err(invalid_body)?;
    if order.item.trim().is_empty() {
        return Err(OrderError::Invalid("`item` must not be empty").into_response());
    }
    if order.qty == 0 {
        return Err(OrderError::Invalid("`qty` must be at least 1").into_response());
    }
    let (item, qty) = (order.item.clone(), order.qty);
    let id = create_order(order)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok(Json(json!({ "order_id": id, "item": item, "qty": qty })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use resilience_runtime::Bulkhead;

    fn status_of(error: OrderError) -> StatusCode {
        error.into_response().status()
    }

    #[test]
    fn an_invalid_order_is_422_and_a_rejection_keeps_the_runtime_mapping() {
        assert_eq!(
            status_of(OrderError::Invalid("`qty` must be at least 1")),
            StatusCode::UNPROCESSABLE_ENTITY
        );
        let bulkhead = Bulkhead::new(
            "unit",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .build()
                .unwrap(),
        );
        let _held = bulkhead.try_acquire().unwrap();
        let rejected = bulkhead.try_acquire().unwrap_err();
        let response = OrderError::from(rejected).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "1");
    }
}
