//! [`actuator`]: what Spring Boot's actuator shows of Resilience4j, as a router a service
//! mounts: every instance with its state, metrics and configuration in force, the call sites
//! with their guards in execution order, and the last events.

use std::time::{Duration, UNIX_EPOCH};

use ::axum::http::{header, StatusCode, Uri};
use ::axum::response::{IntoResponse, Response};
use ::axum::routing::get;
use ::axum::Router;
use serde_json::{json, Map, Value};

use crate::aspect::aspect_table;
use crate::bulkhead::{AdaptiveSettings, Bulkhead};
use crate::call_site::CallSite;
use crate::circuit_breaker::{CircuitBreaker, SlidingWindow};
use crate::fault::FaultInjector;
use crate::hedge::Hedge;
use crate::rate_limiter::RateLimiter;
use crate::recent::RecentEvent;
use crate::registry::{GuardInstance, Registry};
use crate::retry::Retry;
use crate::time_limiter::TimeLimiter;

/// How many events [`actuator`] keeps, if the registry keeps none yet.
pub const ACTUATOR_EVENTS: usize = 256;

/// The actuator's endpoints for `registry`, to [`nest`](Router::nest) where the service wants
/// them (`/actuator`, say; [`actuator_at`] does that and answers `/actuator/` too). Every answer
/// is JSON:
///
/// | path | answers |
/// |---|---|
/// | `/` | all of the below in one object: `instances`, `call_sites`, `precedence`, `events` |
/// | `/circuitbreakers`, `/bulkheads`, `/ratelimiters`, `/retries`, `/timelimiters` | `{"instances": [...]}` of that kind |
/// | `/callsites` | `{"call_sites": [...]}`: each guarded function and its guards in execution order |
/// | `/events` | `{"events": [...]}`, oldest first; `?limit=N` keeps the newest N |
///
/// An instance is `{"kind", "name", "state", "metrics", "config"}`. Its `config` is the
/// configuration in force (bases and defaults resolved) with the keys and the duration format
/// of a configuration file, so it can be pasted into one; `state` is a breaker's state, and for
/// the others what their metrics say (`accepting` or `full` for a bulkhead, say).
///
/// It turns on [`Registry::keep_recent_events`] with [`ACTUATOR_EVENTS`] unless the registry
/// keeps events already.
///
/// # Who may see it
///
/// It shows every guarded function (its name, file and line) and every configuration to
/// whoever reaches it, as Spring Boot's actuator would if all its endpoints were exposed (by
/// default Spring exposes only `health` over HTTP). Serve it on an internal port, or behind
/// the service's own authentication, not beside the public routes; and leave the call sites
/// out where even an internal reader should not see the code's layout
/// ([`Actuator::call_sites`]).
///
/// ```
/// use resilience_runtime::{axum::actuator, Registry};
///
/// // The service's routes on its public port; the actuator on a port of its own, served
/// // on loopback only: `axum::serve(TcpListener::bind("127.0.0.1:9090").await?, ops)`.
/// let ops: axum::Router = axum::Router::new().nest("/actuator", actuator(Registry::global()));
/// # let _ = ops;
/// ```
pub fn actuator(registry: &'static Registry) -> Router {
    Actuator::new(registry).router()
}

/// The actuator mounted at `prefix` (`"/actuator"`), to [`merge`](Router::merge) into a
/// service's router: [`actuator`] nested there, and its summary answered at `prefix/` too
/// (axum's `nest` answers `/actuator` but not `/actuator/`).
///
/// ```
/// use resilience_runtime::{axum::actuator_at, Registry};
///
/// let app: axum::Router = axum::Router::new().merge(actuator_at("/actuator", Registry::global()));
/// # let _ = app;
/// ```
///
/// # Panics
///
/// If `prefix` does not start with `/` or ends with one (axum's rule for `nest`).
pub fn actuator_at(prefix: &str, registry: &'static Registry) -> Router {
    Actuator::new(registry).at(prefix)
}

/// The actuator with its options: [`actuator`] and [`actuator_at`] are its defaults.
///
/// ```
/// use resilience_runtime::{axum::Actuator, Registry};
///
/// // Instances, precedence and events; no function names, files or lines.
/// let ops: axum::Router = Actuator::new(Registry::global()).call_sites(false).at("/actuator");
/// # let _ = ops;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Actuator {
    registry: &'static Registry,
    call_sites: bool,
}

impl Actuator {
    /// The actuator of `registry`, showing everything.
    pub fn new(registry: &'static Registry) -> Self {
        Actuator {
            registry,
            call_sites: true,
        }
    }

    /// Whether it shows the call sites (`/callsites`, and `call_sites` in its summary); `true`
    /// by default. Without them, `/callsites` answers `404`.
    pub fn call_sites(mut self, show: bool) -> Self {
        self.call_sites = show;
        self
    }

    /// Its endpoints, to [`nest`](Router::nest) where the service wants them.
    pub fn router(self) -> Router {
        let Actuator {
            registry,
            call_sites: show_call_sites,
        } = self;
        registry.keep_recent_events(ACTUATOR_EVENTS);
        let router = kind_routes(Router::new(), registry)
            .route("/", get(move || async move { answer(self.summary()) }))
            .route(
                "/events",
                get(move |uri: Uri| async move {
                    match limit(&uri) {
                        Ok(limit) => answer(json!({ "events": events(registry, limit) })),
                        Err(reason) => (StatusCode::BAD_REQUEST, reason).into_response(),
                    }
                }),
            );
        if !show_call_sites {
            return router;
        }
        router.route(
            "/callsites",
            get(move || async move { answer(json!({ "call_sites": call_sites(registry) })) }),
        )
    }

    /// Its endpoints mounted at `prefix`, as [`actuator_at`] mounts them.
    ///
    /// # Panics
    ///
    /// If `prefix` does not start with `/` or ends with one (axum's rule for `nest`).
    pub fn at(self, prefix: &str) -> Router {
        Router::new().nest(prefix, self.router()).route(
            &format!("{prefix}/"),
            get(move || async move { answer(self.summary()) }),
        )
    }

    /// What its `/` answers.
    fn summary(self) -> Value {
        let mut summary = everything(self.registry);
        if !self.call_sites {
            if let Some(object) = summary.as_object_mut() {
                object.remove("call_sites");
            }
        }
        summary
    }
}

/// Everything the actuator shows, as one JSON object (its `/`).
pub fn report(registry: &Registry) -> Value {
    everything(registry)
}

fn everything(registry: &Registry) -> Value {
    let instances = every_instance(registry);
    let precedence: Vec<&str> = registry.precedence().iter().map(|a| a.as_str()).collect();
    json!({
        "instances": instances,
        "call_sites": call_sites(registry),
        "precedence": precedence,
        "events": events(registry, None),
    })
}

fn answer(body: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `?limit=N`, if given.
fn limit(uri: &Uri) -> Result<Option<usize>, String> {
    let Some(query) = uri.query() else {
        return Ok(None);
    };
    for pair in query.split('&') {
        if let Some(value) = pair.strip_prefix("limit=") {
            return value
                .parse()
                .map(Some)
                .map_err(|_| format!("`limit` must be a number of events, got `{value}`"));
        }
    }
    Ok(None)
}

/// A duration as a configuration file writes it: the largest unit it is a whole number of.
pub(crate) fn duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [
        ("d", 86_400_000_000_000u128),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if nanos % size == 0 {
            return format!("{}{unit}", nanos / size);
        }
    }
    format!("{nanos}ns")
}

/// What the actuator shows of one kind of instance: each kind answers at its route
/// (Resilience4j's), and in `/` with the others, in the aspect table's order.
trait Report: GuardInstance + Send + Sync + 'static {
    const ROUTE: &'static str;
    fn report(&self) -> Value;
}

macro_rules! reported {
    ($($instance:ty, $route:literal, $report:ident;)*) => {
        $(impl Report for $instance {
            const ROUTE: &'static str = $route;
            fn report(&self) -> Value {
                $report(self)
            }
        })*
    };
}

reported! {
    Bulkhead, "/bulkheads", bulkhead;
    RateLimiter, "/ratelimiters", rate_limiter;
    Retry, "/retries", retry;
    CircuitBreaker, "/circuitbreakers", breaker;
    Hedge, "/hedges", hedge;
    TimeLimiter, "/timelimiters", time_limiter;
    FaultInjector, "/faults", fault;
}

/// Every instance of kind `G`, sorted by name.
fn reports<G: Report>(registry: &Registry) -> Vec<Value> {
    registry
        .instances::<G>()
        .iter()
        .map(|i| i.report())
        .collect()
}

/// Walks [`aspect_table!`]: the route of every kind, and every instance of every kind.
macro_rules! every_kind {
    ($(
        $(#[$doc:meta])*
        $variant:ident($instance:ident, $config:ident, $field:ident):
            $snake:literal, $words:literal, precedence $precedence:literal;
    )*) => {
        fn kind_routes(router: Router, registry: &'static Registry) -> Router {
            router
                $(.route(
                    <$instance as Report>::ROUTE,
                    get(move || async move {
                        answer(json!({ "instances": reports::<$instance>(registry) }))
                    }),
                ))*
        }

        fn every_instance(registry: &Registry) -> Vec<Value> {
            let mut instances = Vec::new();
            $(instances.extend(reports::<$instance>(registry));)*
            instances
        }
    };
}

aspect_table!(every_kind);

fn instance(kind: &str, name: &str, state: &str, metrics: Value, config: Value) -> Value {
    json!({ "kind": kind, "name": name, "state": state, "metrics": metrics, "config": config })
}

fn bulkhead(bulkhead: &Bulkhead) -> Value {
    let m = bulkhead.metrics();
    let c = bulkhead.config();
    let state = if m.available_concurrent_calls() == 0 {
        "full"
    } else {
        "accepting"
    };
    instance(
        "bulkhead",
        bulkhead.name(),
        state,
        {
            let mut metrics = json!({
                "available_concurrent_calls": m.available_concurrent_calls(),
                "max_allowed_concurrent_calls": m.max_allowed_concurrent_calls(),
                "permitted_calls": m.permitted_calls(),
                "rejected_calls": m.rejected_calls(),
                "finished_calls": m.finished_calls(),
            });
            // What an adaptive limit works from, in milliseconds (null before a sample).
            if let Some(e) = bulkhead.adaptive_estimates() {
                let millis = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
                metrics["adaptive_baseline_rtt_ms"] = json!(millis(e.baseline_rtt));
                metrics["adaptive_sample_rtt_ms"] = json!(millis(e.sample_rtt));
            }
            metrics
        },
        {
            let mut config = json!({
                "max_wait_duration": duration(c.max_wait_duration()),
                "fair_call_handling_enabled": c.fair_call_handling(),
            });
            // The limit as a configuration file writes it: fixed, or an `adaptive` table.
            match c.adaptive() {
                None => config["max_concurrent_calls"] = json!(c.max_concurrent_calls()),
                Some(adaptive) => config["adaptive"] = adaptive_table(&adaptive.settings()),
            }
            config
        },
    )
}

/// An adaptive limit's settings in force, keyed as the `adaptive` table of a file.
fn adaptive_table(s: &AdaptiveSettings) -> Value {
    let mut table = json!({
        "algorithm": s.algorithm.as_str(),
        "min_limit": s.min_limit,
        "max_limit": s.max_limit,
        "initial_limit": s.initial_limit,
    });
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            table[key] = value;
        }
    };
    set("smoothing", s.smoothing.map(|x| json!(x)));
    set("rtt_tolerance", s.rtt_tolerance.map(|x| json!(x)));
    set("queue_size", s.queue_size.map(|x| json!(x)));
    set("long_window", s.long_window.map(|x| json!(x)));
    set("probe_multiplier", s.probe_multiplier.map(|x| json!(x)));
    set("backoff_ratio", s.backoff_ratio.map(|x| json!(x)));
    set("timeout", s.timeout.map(|d| json!(duration(d))));
    table
}

fn rate_limiter(limiter: &RateLimiter) -> Value {
    let m = limiter.metrics();
    let c = limiter.config();
    let state = if m.available_permissions() > 0 {
        "accepting"
    } else {
        "exhausted"
    };
    instance(
        "rate_limiter",
        limiter.name(),
        state,
        json!({
            "available_permissions": m.available_permissions(),
            "number_of_waiting_threads": m.number_of_waiting_threads(),
            "permitted_calls": m.permitted_calls(),
            "rejected_calls": m.rejected_calls(),
        }),
        json!({
            "limit_for_period": c.limit_for_period(),
            "limit_refresh_period": duration(c.limit_refresh_period()),
            "timeout_duration": duration(c.timeout_duration()),
        }),
    )
}

fn retry(retry: &Retry) -> Value {
    let m = retry.metrics();
    let c = retry.config();
    let mut config = Map::new();
    config.insert("max_attempts".into(), json!(c.max_attempts()));
    config.insert("wait_duration".into(), json!(duration(c.wait_duration())));
    match c.exponential_backoff() {
        Some((multiplier, max_wait)) => {
            config.insert("enable_exponential_backoff".into(), json!(true));
            config.insert("exponential_backoff_multiplier".into(), json!(multiplier));
            config.insert(
                "exponential_max_wait_duration".into(),
                json!(duration(max_wait)),
            );
        }
        None => {
            config.insert("enable_exponential_backoff".into(), json!(false));
        }
    }
    let factor = c.randomized_wait_factor();
    config.insert("enable_randomized_wait".into(), json!(factor > 0.0));
    if factor > 0.0 {
        config.insert("randomized_wait_factor".into(), json!(factor));
    }
    config.insert("retry_on_rejection".into(), json!(c.retry_on_rejection()));
    config.insert(
        "max_retry_after".into(),
        json!(duration(c.max_retry_after())),
    );
    instance(
        "retry",
        retry.name(),
        "ready",
        json!({
            "successful_calls_without_retry": m.number_of_successful_calls_without_retry_attempt(),
            "successful_calls_with_retry": m.number_of_successful_calls_with_retry_attempt(),
            "failed_calls_without_retry": m.number_of_failed_calls_without_retry_attempt(),
            "failed_calls_with_retry": m.number_of_failed_calls_with_retry_attempt(),
        }),
        Value::Object(config),
    )
}

fn breaker(breaker: &CircuitBreaker) -> Value {
    let m = breaker.metrics();
    let c = breaker.config();
    let (window_type, window_size) = match c.sliding_window() {
        SlidingWindow::CountBased(calls) => ("count_based", calls),
        SlidingWindow::TimeBased(seconds) => ("time_based", seconds),
    };
    let mut config = Map::new();
    let mut set = |key: &str, value: Value| {
        config.insert(key.to_owned(), value);
    };
    set("failure_rate_threshold", json!(c.failure_rate_threshold()));
    set(
        "slow_call_rate_threshold",
        json!(c.slow_call_rate_threshold()),
    );
    set(
        "slow_call_duration_threshold",
        json!(duration(c.slow_call_duration_threshold())),
    );
    set("sliding_window_type", json!(window_type));
    set("sliding_window_size", json!(window_size));
    set(
        "minimum_number_of_calls",
        json!(c.minimum_number_of_calls()),
    );
    set(
        "wait_duration_in_open_state",
        json!(duration(c.wait_duration_in_open_state())),
    );
    match c.open_state_backoff() {
        Some(backoff) => {
            set("enable_exponential_backoff", json!(true));
            set(
                "exponential_backoff_multiplier",
                json!(backoff.multiplier()),
            );
            set(
                "exponential_max_wait_duration_in_open_state",
                json!(duration(backoff.max_wait())),
            );
        }
        None => set("enable_exponential_backoff", json!(false)),
    }
    set(
        "automatic_transition_from_open_to_half_open_enabled",
        json!(c.automatic_transition_from_open_to_half_open()),
    );
    set(
        "permitted_number_of_calls_in_half_open_state",
        json!(c.permitted_calls_in_half_open_state()),
    );
    set(
        "max_wait_duration_in_half_open_state",
        json!(duration(c.max_wait_duration_in_half_open_state())),
    );
    set("record_rejections", json!(c.record_rejections()));
    set("record_call_durations", json!(c.record_call_durations()));
    set("initial_state", json!(c.initial_state().as_str()));
    let mut value = instance(
        "circuit_breaker",
        breaker.name(),
        breaker.state().as_str(),
        json!({
            "failure_rate": m.failure_rate(),
            "slow_call_rate": m.slow_call_rate(),
            "number_of_buffered_calls": m.number_of_buffered_calls(),
            "number_of_successful_calls": m.number_of_successful_calls(),
            "number_of_failed_calls": m.number_of_failed_calls(),
            "number_of_slow_calls": m.number_of_slow_calls(),
            "number_of_slow_successful_calls": m.number_of_slow_successful_calls(),
            "number_of_slow_failed_calls": m.number_of_slow_failed_calls(),
            "number_of_not_permitted_calls": m.number_of_not_permitted_calls(),
            "total_successful_calls": m.total_successful_calls(),
            "total_failed_calls": m.total_failed_calls(),
            "total_ignored_calls": m.total_ignored_calls(),
            "total_not_permitted_calls": m.total_not_permitted_calls(),
        }),
        Value::Object(config),
    );
    value["remaining_open_time_ms"] = json!(breaker
        .remaining_open_time()
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
    value
}

fn time_limiter(limiter: &TimeLimiter) -> Value {
    let m = limiter.metrics();
    let c = limiter.config();
    instance(
        "time_limiter",
        limiter.name(),
        "ready",
        json!({
            "successful_calls": m.number_of_successful_calls(),
            "failed_calls": m.number_of_failed_calls(),
            "timed_out_calls": m.number_of_timed_out_calls(),
        }),
        json!({
            "timeout_duration": duration(c.timeout_duration()),
            "cancel_running_future": c.cancel_running_future(),
        }),
    )
}

fn hedge(hedge: &Hedge) -> Value {
    let m = hedge.metrics();
    let c = hedge.config();
    instance(
        "hedge",
        hedge.name(),
        "ready",
        json!({
            "primary_success_calls": m.primary_success_count(),
            "secondary_success_calls": m.secondary_success_count(),
            "primary_failure_calls": m.primary_failure_count(),
            "secondary_failure_calls": m.secondary_failure_count(),
            "hedged_attempts": m.number_of_hedged_attempts(),
            "hedges_over_budget": m.number_of_hedges_over_budget(),
        }),
        json!({
            "delay": duration(c.delay()),
            "delay_percentile": c.delay_percentile(),
            "current_delay": duration(m.current_hedge_delay()),
            "max_hedged_attempts": c.max_hedged_attempts(),
            "budget_ratio": c.budget().map(|b| b.ratio_value()),
        }),
    )
}

fn fault(faults: &FaultInjector) -> Value {
    let m = faults.metrics();
    let c = faults.config();
    instance(
        "fault",
        faults.name(),
        "ready",
        json!({
            "draws": m.number_of_draws(),
            "injected_latencies": m.number_of_injected_latencies(),
            "injected_errors": m.number_of_injected_errors(),
            "injected_refusals": m.number_of_injected_refusals(),
        }),
        json!({
            "latency_rate": c.latency_rate(),
            "latency": duration(c.latency()),
            "error_rate": c.error_rate(),
            "refusal_rate": c.refusal_rate(),
            "seed": c.seed(),
        }),
    )
}

fn call_sites(registry: &Registry) -> Vec<Value> {
    registry
        .call_sites()
        .into_iter()
        .map(|site| call_site(registry, site))
        .collect()
}

fn call_site(registry: &Registry, site: &CallSite) -> Value {
    // In execution order, as this registry's precedence sorts them; a site whose guard list is
    // refused (the same aspect twice) shows its guards as declared.
    let guards: Vec<Value> = match registry.plan(site.guards()) {
        Ok(plan) => plan
            .guards()
            .map(|(aspect, name)| {
                json!({
                    "aspect": aspect.as_str(),
                    "name": name.as_str(),
                    "precedence": registry.precedence_of(aspect),
                })
            })
            .collect(),
        Err(_) => site
            .guards()
            .iter()
            .map(|g| json!({ "aspect": g.aspect().as_str(), "name": g.name() }))
            .collect(),
    };
    json!({
        "module_path": site.module_path(),
        "function": site.function(),
        "file": site.file(),
        "line": site.line(),
        "guards": guards,
    })
}

fn events(registry: &Registry, limit: Option<usize>) -> Vec<Value> {
    let events = registry.recent_events();
    let skip = limit.map_or(0, |limit| events.len().saturating_sub(limit));
    events.iter().skip(skip).map(event).collect()
}

fn event(event: &RecentEvent) -> Value {
    let at = event
        .at()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    json!({
        "at_unix_ms": at,
        "aspect": event.aspect().as_str(),
        "name": event.name().as_str(),
        "kind": event.kind(),
        "message": event.message(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_in_the_largest_whole_unit() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(7_200), "2h"),
            (Duration::from_secs(86_400), "1d"),
            (Duration::from_micros(1_500), "1500us"),
            (Duration::from_nanos(7), "7ns"),
        ] {
            assert_eq!(duration(d), text);
        }
    }

    #[test]
    fn breaker_states_are_snake_case_in_the_report() {
        let registry = Registry::new();
        let breaker = registry.circuit_breaker("unit");
        breaker.transition_to_forced_open_state();
        assert_eq!(report(&registry)["instances"][0]["state"], "forced_open");
        breaker.transition_to_half_open_state().unwrap();
        let report = report(&registry);
        assert_eq!(report["instances"][0]["state"], "half_open");
        assert_eq!(report["precedence"][0], "bulkhead");
    }

    #[tokio::test]
    async fn the_actuator_answers_with_and_without_a_trailing_slash() {
        use ::axum::body::Body;
        use ::axum::http::Request;
        use tower::ServiceExt;

        let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
        let app = Router::new().merge(actuator_at("/actuator", registry));
        for path in [
            "/actuator",
            "/actuator/",
            "/actuator/events",
            "/actuator/bulkheads",
        ] {
            let request = Request::get(path).body(Body::empty()).unwrap();
            let response = app.clone().oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path}");
        }
    }

    #[tokio::test]
    async fn an_actuator_without_call_sites_shows_none() {
        use ::axum::body::Body;
        use ::axum::http::Request;
        use tower::ServiceExt;

        let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
        let app = Actuator::new(registry).call_sites(false).at("/actuator");
        let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
        let hidden = app
            .clone()
            .oneshot(get("/actuator/callsites"))
            .await
            .unwrap();
        assert_eq!(hidden.status(), StatusCode::NOT_FOUND);
        for path in ["/actuator", "/actuator/"] {
            let summary = app.clone().oneshot(get(path)).await.unwrap();
            let body = ::axum::body::to_bytes(summary.into_body(), 1 << 20)
                .await
                .unwrap();
            let summary: Value = serde_json::from_slice(&body).unwrap();
            assert!(summary.get("call_sites").is_none(), "{path}: {summary}");
            assert!(summary.get("instances").is_some());
        }
    }

    #[test]
    fn a_limit_is_a_number() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert_eq!(limit(&uri("/events")), Ok(None));
        assert_eq!(limit(&uri("/events?limit=5")), Ok(Some(5)));
        assert!(limit(&uri("/events?limit=many")).is_err());
    }
}
