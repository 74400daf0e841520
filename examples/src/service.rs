//! `orders-service`: an HTTP service whose order entry point is guarded by a bulkhead and a
//! circuit breaker, and that shows its guards over HTTP.
//!
//! - `POST /orders` with `{"item": "book", "qty": 1}` runs [`create_order`], annotated with
//!   `#[bulkhead(name = "orders")]` and `#[circuit_breaker(name = "orders")]`, which calls a
//!   simulated downstream. It answers `200 OK` with `{"order_id": 1, "item": "book", "qty": 1}`;
//!   a refusal answers `503 Service Unavailable` with `Retry-After` and a JSON body (the
//!   runtime's mapping, feature `axum`); an invalid order answers `422 Unprocessable Entity`
//!   before it reaches the guards.
//! - `GET /metrics` answers every guard's metrics in Prometheus's text format
//!   (`resilience_circuitbreaker_state{name="orders",state="closed"} 1`, …).
//! - `GET /resilience` answers the state of the registry: every guard instance (kind, name,
//!   state, metrics, configuration), the registered call sites and the precedence (see
//!   [`resilience_report`]).
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use resilience_runtime::{
    bulkhead, circuit_breaker, Bulkhead, BulkheadConfig, CallSite, Changes, CircuitBreaker,
    CircuitBreakerConfig, ConfigError, DocumentError, Registry, Rejected, SlidingWindow,
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
}

impl Default for Settings {
    /// 80 concurrent calls, a 500 ms wait for a permit, a 50 ms downstream.
    fn default() -> Self {
        Settings {
            max_concurrent_calls: 80,
            max_wait: Duration::from_millis(500),
            downstream_latency: Duration::from_millis(50),
        }
    }
}

/// The simulated downstream's latency in milliseconds, set by [`configure`].
static DOWNSTREAM_LATENCY_MS: AtomicU64 = AtomicU64::new(50);

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
            .build()?,
    )?;
    set_downstream_latency(settings.downstream_latency);
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

/// The service's routes: `POST /orders`, `GET /resilience` and `GET /metrics`.
pub fn app() -> Router {
    Router::new()
        .route("/orders", post(post_order))
        .route("/resilience", get(get_resilience))
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
        }
    }
}

/// Creates an order through the simulated downstream, guarded by the `orders` bulkhead and
/// circuit breaker (the bulkhead runs first, whatever the order of the attributes).
///
/// # Errors
///
/// [`OrderError::Rejected`] when the bulkhead is full or the breaker refuses the call.
#[bulkhead(name = "orders")]
#[circuit_breaker(name = "orders")]
pub async fn create_order(order: Order) -> Result<OrderId, OrderError> {
    Ok(downstream(&order).await)
}

/// The simulated order backend: takes `--downstream-latency-ms` whatever the order, never
/// fails, and numbers the orders from 1.
async fn downstream(_order: &Order) -> OrderId {
    static NEXT_ORDER_ID: AtomicU64 = AtomicU64::new(1);
    let latency = Duration::from_millis(DOWNSTREAM_LATENCY_MS.load(Ordering::Relaxed));
    tokio::time::sleep(latency).await;
    OrderId(NEXT_ORDER_ID.fetch_add(1, Ordering::Relaxed))
}

/// `POST /orders`: validates the order, then runs it through [`create_order`].
async fn post_order(body: Result<Json<Order>, JsonRejection>) -> Result<Json<Value>, Response> {
    let Json(order) = body.map_err(IntoResponse::into_response)?;
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

/// `GET /resilience`: [`resilience_report`] of the global registry.
async fn get_resilience() -> Json<Value> {
    Json(resilience_report(Registry::global()))
}

/// The state of `registry` as JSON:
///
/// ```json
/// {
///   "instances": [
///     {"kind": "bulkhead", "name": "orders", "state": "accepting",
///      "metrics": {"available_concurrent_calls": 80, "rejected_calls": 0, ..},
///      "config": {"max_concurrent_calls": 80, "max_wait_duration_ms": 500, ..}},
///     {"kind": "circuit_breaker", "name": "orders", "state": "closed",
///      "remaining_open_time_ms": null,
///      "metrics": {"failure_rate": -1.0, "number_of_failed_calls": 0, ..},
///      "config": {"failure_rate_threshold": 50.0, ..}}
///   ],
///   "call_sites": [
///     {"module_path": "resilience_examples::service", "function": "create_order",
///      "file": "examples/src/service.rs", "line": 170,
///      "guards": [{"aspect": "bulkhead", "name": "orders"},
///                 {"aspect": "circuit_breaker", "name": "orders"}]}
///   ],
///   "precedence": ["bulkhead", "rate_limiter", "retry", "circuit_breaker", "time_limiter"]
/// }
/// ```
///
/// A bulkhead's state is `"full"` when no permit is free, else `"accepting"`; a breaker's is its
/// [`CircuitState`](resilience_runtime::CircuitState) in snake case (`"half_open"`,
/// `"forced_open"`). Durations are whole milliseconds; a failure or slow-call rate of `-1.0`
/// means too few calls are recorded yet. Instances are listed bulkheads first, each kind sorted
/// by name; call sites are those of the annotations linked into the program.
pub fn resilience_report(registry: &Registry) -> Value {
    let bulkheads = registry.bulkheads();
    let breakers = registry.circuit_breakers();
    let instances: Vec<Value> = bulkheads
        .iter()
        .map(|b| bulkhead_json(b))
        .chain(breakers.iter().map(|cb| circuit_breaker_json(cb)))
        .collect();
    let call_sites: Vec<Value> = registry
        .call_sites()
        .into_iter()
        .map(call_site_json)
        .collect();
    let precedence: Vec<&str> = registry.precedence().iter().map(|a| a.as_str()).collect();
    json!({
        "instances": instances,
        "call_sites": call_sites,
        "precedence": precedence,
    })
}

/// Whole milliseconds, saturating (a wait of `Duration::MAX` means "forever").
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn bulkhead_json(bulkhead: &Bulkhead) -> Value {
    let metrics = bulkhead.metrics();
    let config = bulkhead.config();
    let state = if metrics.available_concurrent_calls() == 0 {
        "full"
    } else {
        "accepting"
    };
    json!({
        "kind": "bulkhead",
        "name": bulkhead.name().as_str(),
        "state": state,
        "metrics": {
            "available_concurrent_calls": metrics.available_concurrent_calls(),
            "max_allowed_concurrent_calls": metrics.max_allowed_concurrent_calls(),
            "permitted_calls": metrics.permitted_calls(),
            "rejected_calls": metrics.rejected_calls(),
            "finished_calls": metrics.finished_calls(),
        },
        "config": {
            "max_concurrent_calls": config.max_concurrent_calls(),
            "max_wait_duration_ms": millis(config.max_wait_duration()),
            "fair_call_handling": config.fair_call_handling(),
            "base": config.base(),
        },
    })
}

fn circuit_breaker_json(breaker: &CircuitBreaker) -> Value {
    let metrics = breaker.metrics();
    let config = breaker.config();
    // "half-open" -> "half_open", "forced open" -> "forced_open".
    let state = breaker.state().to_string().replace([' ', '-'], "_");
    let sliding_window = match config.sliding_window() {
        SlidingWindow::CountBased(calls) => json!({ "type": "count_based", "size": calls }),
        SlidingWindow::TimeBased(seconds) => json!({ "type": "time_based", "size": seconds }),
    };
    let backoff = config
        .open_state_backoff()
        .map(|b| json!({ "multiplier": b.multiplier(), "max_wait_ms": millis(b.max_wait()) }));
    json!({
        "kind": "circuit_breaker",
        "name": breaker.name().as_str(),
        "state": state,
        "remaining_open_time_ms": breaker.remaining_open_time().map(millis),
        "metrics": {
            "failure_rate": metrics.failure_rate(),
            "slow_call_rate": metrics.slow_call_rate(),
            "number_of_buffered_calls": metrics.number_of_buffered_calls(),
            "number_of_successful_calls": metrics.number_of_successful_calls(),
            "number_of_failed_calls": metrics.number_of_failed_calls(),
            "number_of_slow_calls": metrics.number_of_slow_calls(),
            "number_of_slow_successful_calls": metrics.number_of_slow_successful_calls(),
            "number_of_slow_failed_calls": metrics.number_of_slow_failed_calls(),
            "number_of_not_permitted_calls": metrics.number_of_not_permitted_calls(),
        },
        "config": {
            "failure_rate_threshold": config.failure_rate_threshold(),
            "slow_call_rate_threshold": config.slow_call_rate_threshold(),
            "slow_call_duration_threshold_ms": millis(config.slow_call_duration_threshold()),
            "sliding_window": sliding_window,
            "minimum_number_of_calls": config.minimum_number_of_calls(),
            "wait_duration_in_open_state_ms": millis(config.wait_duration_in_open_state()),
            "open_state_backoff": backoff,
            "automatic_transition_from_open_to_half_open":
                config.automatic_transition_from_open_to_half_open(),
            "permitted_calls_in_half_open_state": config.permitted_calls_in_half_open_state(),
            "max_wait_duration_in_half_open_state_ms":
                millis(config.max_wait_duration_in_half_open_state()),
            "record_rejections": config.record_rejections(),
            "base": config.base(),
        },
    })
}

fn call_site_json(site: &CallSite) -> Value {
    let guards: Vec<Value> = site
        .guards()
        .iter()
        .map(|g| json!({ "aspect": g.aspect().as_str(), "name": g.name() }))
        .collect();
    json!({
        "module_path": site.module_path(),
        "function": site.function(),
        "file": site.file(),
        "line": site.line(),
        "guards": guards,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn breaker_states_are_snake_case_in_the_report() {
        let registry = Registry::new();
        let breaker = registry.circuit_breaker("unit");
        breaker.transition_to_forced_open_state();
        let report = resilience_report(&registry);
        assert_eq!(report["instances"][0]["state"], "forced_open");
        breaker.transition_to_half_open_state().unwrap();
        let report = resilience_report(&registry);
        assert_eq!(report["instances"][0]["state"], "half_open");
        assert_eq!(report["precedence"][0], "bulkhead");
    }
}
