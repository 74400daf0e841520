//! `orders-service` over real HTTP: the app is served on an ephemeral port of 127.0.0.1 in the
//! test process and driven with an HTTP client.
//!
//! The tests share the global registry (the annotated handler uses it), so they run one at a
//! time under `SERIAL`, and each starts by configuring the `orders` guards afresh. Nothing here
//! asserts on timing: waits are bounded polls of the registry.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use reqwest::header::RETRY_AFTER;
use reqwest::{Client, Response, StatusCode};
use resilience_examples::service::{self, Settings, ORDERS};
use resilience_runtime::{CircuitState, Registry};
use serde_json::{json, Value};
use tokio::sync::Mutex;

/// One service test at a time: they share `Registry::global()`.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// Configures the service and serves it on `127.0.0.1:0`; returns its address and a client.
/// The bulkhead's counters when a test started: they only grow (reconfiguring the bulkhead
/// keeps them), and every test configures the same instance of the global registry.
#[derive(Clone, Copy)]
struct Before {
    permitted: u64,
    rejected: u64,
    /// The breaker's calls by outcome since it was created (they only grow too).
    successful: u64,
    failed: u64,
    not_permitted: u64,
}

async fn start(settings: Settings) -> (SocketAddr, Client, Before) {
    service::configure(&settings).expect("valid settings");
    let metrics = Registry::global().bulkhead(ORDERS).metrics();
    let breaker = Registry::global().circuit_breaker(ORDERS).metrics();
    let before = Before {
        permitted: metrics.permitted_calls(),
        rejected: metrics.rejected_calls(),
        successful: breaker.total_successful_calls(),
        failed: breaker.total_failed_calls(),
        not_permitted: breaker.total_not_permitted_calls(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind an ephemeral port");
    let addr = listener.local_addr().unwrap();
    // Built here, so that its actuator keeps events from now on.
    let app = service::app();
    tokio::spawn(async move { axum::serve(listener, app).await });
    // No proxy, whatever the environment says: traffic stays on 127.0.0.1.
    let client = Client::builder().no_proxy().build().unwrap();
    (addr, client, before)
}

fn settings(max_concurrent_calls: u32, downstream_latency: Duration) -> Settings {
    Settings {
        max_concurrent_calls,
        max_wait: Duration::ZERO,
        downstream_latency,
        downstream_failing: false,
    }
}

async fn post_order(client: &Client, addr: SocketAddr, body: Value) -> Response {
    client
        .post(format!("http://{addr}/orders"))
        .json(&body)
        .send()
        .await
        .expect("the service answers")
}

async fn resilience(client: &Client, addr: SocketAddr) -> Value {
    let response = client
        .get(format!("http://{addr}/actuator"))
        .send()
        .await
        .expect("the service answers");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("a JSON report")
}

/// The instance of `kind` named `orders` in a `/actuator` report.
fn instance<'a>(report: &'a Value, kind: &str) -> &'a Value {
    report["instances"]
        .as_array()
        .expect("an array of instances")
        .iter()
        .find(|i| i["kind"] == kind && i["name"] == ORDERS)
        .unwrap_or_else(|| panic!("no {kind} `orders` in {report:#}"))
}

/// A counter of an instance's metrics in the `GET /actuator` report.
fn counter(instance: &Value, name: &str) -> u64 {
    instance["metrics"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter `{name}` in {instance:#}"))
}

/// A response's status, `Retry-After` header and JSON body.
async fn parts(response: Response) -> (StatusCode, Option<String>, Value) {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .map(|v| v.to_str().expect("an ASCII header").to_owned());
    let body = response.json().await.expect("a JSON body");
    (status, retry_after, body)
}

/// Waits, bounded, until the `orders` bulkhead has no free permit.
async fn until_bulkhead_full() {
    let bulkhead = Registry::global().bulkhead(ORDERS);
    for _ in 0..6000 {
        if bulkhead.available_concurrent_calls() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the first calls never filled the bulkhead: {bulkhead:?}");
}

fn order() -> Value {
    json!({ "item": "book", "qty": 1 })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bulkhead_answers_503_with_retry_after_and_the_breaker_stays_closed() {
    let _serial = SERIAL.lock().await;
    // Two permits, no waiting, a slow downstream.
    let (addr, client, before) = start(settings(2, Duration::from_millis(1500))).await;

    // Two orders take both permits; 18 more arrive while they are in the downstream.
    let mut calls = Vec::new();
    for _ in 0..2 {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            parts(post_order(&client, addr, order()).await).await
        }));
    }
    until_bulkhead_full().await;
    let mut late = Vec::new();
    for _ in 0..18 {
        let client = client.clone();
        late.push(tokio::spawn(async move {
            parts(post_order(&client, addr, order()).await).await
        }));
    }
    let mut late_answers = Vec::new();
    for call in late {
        late_answers.push(call.await.expect("the client task"));
    }
    // Scraped during the overload: every refusal the clients have seen is counted.
    let during = scrape(&client, addr).await;
    let refused_so_far = late_answers
        .iter()
        .filter(|(status, _, _)| *status == StatusCode::SERVICE_UNAVAILABLE)
        .count() as u64;
    assert_eq!(
        sample(
            &during,
            "resilience_bulkhead_calls_total",
            &[("kind", "rejected")]
        ) - before.rejected,
        refused_so_far
    );
    assert_eq!(
        sample(
            &during,
            "resilience_bulkhead_max_allowed_concurrent_calls",
            &[]
        ),
        2
    );
    let mut answers = Vec::new();
    for call in calls {
        answers.push(call.await.expect("the client task"));
    }
    answers.extend(late_answers);

    let mut order_ids = HashSet::new();
    let mut rejected = 0u64;
    for (i, (status, retry_after, body)) in answers.iter().enumerate() {
        match *status {
            StatusCode::OK => {
                let id = body["order_id"].as_u64().expect("an order id");
                assert!(order_ids.insert(id), "order id {id} given twice");
                assert_eq!(body["item"], "book");
                assert_eq!(body["qty"], 1);
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                rejected += 1;
                assert_eq!(retry_after.as_deref(), Some("1"), "call {i}: {body}");
                assert_eq!(body["error"], "bulkhead_full", "call {i}: {body}");
                assert_eq!(body["aspect"], "bulkhead");
                assert_eq!(body["instance"], ORDERS);
                assert_eq!(body["retry_after_seconds"], 1);
                assert!(
                    body["message"].as_str().unwrap().contains("is full"),
                    "{body}"
                );
            }
            other => panic!("call {i}: unexpected {other}: {body}"),
        }
    }
    let admitted = order_ids.len() as u64;
    assert_eq!(answers[0].0, StatusCode::OK, "the first calls got permits");
    assert_eq!(answers[1].0, StatusCode::OK, "the first calls got permits");
    assert!(rejected > 0, "the bulkhead was full while 18 calls came in");
    assert_eq!(admitted + rejected, 20);

    // The bulkhead ran first: its rejections never reached the breaker.
    let registry = Registry::global();
    let breaker = registry.circuit_breaker(ORDERS);
    assert_eq!(breaker.state(), CircuitState::Closed);
    let metrics = breaker.metrics();
    assert_eq!(metrics.number_of_failed_calls(), 0);
    assert_eq!(metrics.number_of_not_permitted_calls(), 0);
    assert_eq!(u64::from(metrics.number_of_successful_calls()), admitted);
    let bulkhead = registry.bulkhead(ORDERS).metrics();
    assert_eq!(bulkhead.rejected_calls() - before.rejected, rejected);
    assert_eq!(bulkhead.permitted_calls() - before.permitted, admitted);

    // GET /actuator says the same.
    let report = resilience(&client, addr).await;
    let bulkhead = instance(&report, "bulkhead");
    assert_eq!(bulkhead["state"], "accepting", "{bulkhead:#}");
    assert_eq!(
        counter(bulkhead, "rejected_calls") - before.rejected,
        rejected
    );
    assert_eq!(
        counter(bulkhead, "permitted_calls") - before.permitted,
        admitted
    );
    assert_eq!(bulkhead["metrics"]["available_concurrent_calls"], 2);
    assert_eq!(bulkhead["config"]["max_concurrent_calls"], 2);
    assert_eq!(bulkhead["config"]["max_wait_duration"], "0s");
    let breaker = instance(&report, "circuit_breaker");
    assert_eq!(breaker["state"], "closed", "{breaker:#}");
    assert_eq!(breaker["metrics"]["number_of_failed_calls"], 0);
    assert_eq!(breaker["metrics"]["number_of_not_permitted_calls"], 0);
    assert_eq!(breaker["metrics"]["number_of_successful_calls"], admitted);
    assert_eq!(breaker["config"]["record_rejections"], false);
    assert_eq!(breaker["remaining_open_time_ms"], Value::Null);

    let site = report["call_sites"]
        .as_array()
        .expect("an array of call sites")
        .iter()
        // The drill, linked into the same crate, has a `create_order` of its own.
        .find(|s| {
            s["function"] == "create_order" && s["module_path"] == "resilience_examples::service"
        })
        .unwrap_or_else(|| panic!("no call site of the service's create_order in {report:#}"));
    assert!(site["file"].as_str().unwrap().ends_with("service.rs"));
    assert_eq!(
        site["guards"],
        json!([
            { "aspect": "bulkhead", "name": "orders", "precedence": 100 },
            { "aspect": "circuit_breaker", "name": "orders", "precedence": 400 },
        ])
    );
    assert_eq!(report["precedence"][0], "bulkhead");

    // GET /metrics, once the overload is over, counts what the clients saw.
    let after = scrape(&client, addr).await;
    let breaker_calls = |kind| {
        sample(
            &after,
            "resilience_circuitbreaker_calls_total",
            &[("kind", kind)],
        )
    };
    assert_eq!(breaker_calls("successful") - before.successful, admitted);
    assert_eq!(breaker_calls("failed") - before.failed, 0);
    assert_eq!(breaker_calls("not_permitted") - before.not_permitted, 0);
    assert_eq!(
        sample(
            &after,
            "resilience_bulkhead_calls_total",
            &[("kind", "rejected")]
        ) - before.rejected,
        rejected
    );
    assert_eq!(
        sample(
            &after,
            "resilience_bulkhead_calls_total",
            &[("kind", "permitted")]
        ) - before.permitted,
        admitted
    );
    assert_eq!(
        sample(
            &after,
            "resilience_circuitbreaker_state",
            &[("state", "closed")]
        ),
        1
    );
    assert_eq!(
        sample(
            &after,
            "resilience_circuitbreaker_state",
            &[("state", "open")]
        ),
        0
    );
}

/// `GET /metrics` as text.
async fn scrape(client: &Client, addr: SocketAddr) -> String {
    let response = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("GET /metrics answers");
    assert_eq!(response.status(), StatusCode::OK);
    response.text().await.expect("a text body")
}

/// The value of the sample of `metric` for the `orders` instance with `labels`, in a
/// Prometheus text exposition.
fn sample(text: &str, metric: &str, labels: &[(&str, &str)]) -> u64 {
    let wanted: Vec<String> = std::iter::once(format!("name=\"{ORDERS}\""))
        .chain(labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")))
        .collect();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, rest) = series.split_once('{')?;
            let labels: Vec<&str> = rest.trim_end_matches('}').split(',').collect();
            (name == metric && wanted.iter().all(|w| labels.contains(&w.as_str())))
                .then(|| value.parse::<f64>().expect("a number") as u64)
        })
        .unwrap_or_else(|| panic!("no sample of {metric} {labels:?} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_open_breaker_answers_503_with_the_fallback_retry_after() {
    let _serial = SERIAL.lock().await;
    let (addr, client, before) = start(settings(2, Duration::ZERO)).await;
    Registry::global()
        .circuit_breaker(ORDERS)
        .transition_to_forced_open_state();

    let (status, retry_after, body) = parts(post_order(&client, addr, order()).await).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry_after.as_deref(), Some("30"), "the forced-open hint");
    assert_eq!(body["error"], "call_not_permitted");
    assert_eq!(body["aspect"], "circuit_breaker");
    assert_eq!(body["instance"], ORDERS);
    assert_eq!(body["retry_after_seconds"], 30);

    let report = resilience(&client, addr).await;
    let breaker = instance(&report, "circuit_breaker");
    assert_eq!(breaker["state"], "forced_open");
    assert_eq!(breaker["metrics"]["number_of_not_permitted_calls"], 1);
    // The bulkhead ran first and admitted the call that the breaker then refused.
    let bulkhead = instance(&report, "bulkhead");
    assert_eq!(counter(bulkhead, "permitted_calls") - before.permitted, 1);
    assert_eq!(counter(bulkhead, "rejected_calls") - before.rejected, 0);
    assert_eq!(bulkhead["metrics"]["available_concurrent_calls"], 2);
    // The forced opening is among the last events.
    let events = report["events"].as_array().expect("an array of events");
    assert!(
        events.iter().any(|e| e["kind"] == "state_transition"
            && e["name"] == ORDERS
            && e["message"].as_str().unwrap().ends_with("to forced open")),
        "{events:#?}"
    );
    // Each kind and the events have their own endpoint.
    let get = |path: &'static str| {
        let client = client.clone();
        async move {
            let response = client
                .get(format!("http://{addr}/actuator{path}"))
                .send()
                .await
                .expect("the actuator answers");
            (response.status(), response.json::<Value>().await.ok())
        }
    };
    let (status, breakers) = get("/circuitbreakers").await;
    assert_eq!(status, StatusCode::OK);
    let breakers = breakers.expect("JSON");
    assert!(breakers["instances"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["kind"] == "circuit_breaker"));
    let (_, last) = get("/events?limit=1").await;
    assert_eq!(last.expect("JSON")["events"].as_array().unwrap().len(), 1);
    let (status, _) = get("/events?limit=lots").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_answers_503_with_its_remaining_open_time() {
    let _serial = SERIAL.lock().await;
    let (addr, client, _) = start(settings(2, Duration::ZERO)).await;
    Registry::global()
        .circuit_breaker(ORDERS)
        .transition_to_open_state()
        .unwrap();

    let (status, retry_after, body) = parts(post_order(&client, addr, order()).await).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"], "call_not_permitted");
    // The rest of a 10 s wait, in whole seconds rounded up.
    let seconds: u64 = retry_after
        .expect("a Retry-After header")
        .parse()
        .expect("whole seconds");
    assert!((1..=10).contains(&seconds), "Retry-After: {seconds}");
    assert_eq!(body["retry_after_seconds"], seconds);

    let report = resilience(&client, addr).await;
    let breaker = instance(&report, "circuit_breaker");
    assert_eq!(breaker["state"], "open");
    let remaining = breaker["remaining_open_time_ms"].as_u64().unwrap();
    assert!(remaining <= 10_000, "{breaker:#}");
}

async fn switch_downstream(client: &Client, addr: SocketAddr, failing: bool) -> Value {
    let response = client
        .put(format!("http://{addr}/downstream"))
        .json(&json!({ "failing": failing }))
        .send()
        .await
        .expect("the service answers");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("a JSON body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_downstream_opens_the_breaker_and_orders_then_get_its_retry_after() {
    let _serial = SERIAL.lock().await;
    let (addr, client, before) = start(settings(4, Duration::ZERO)).await;
    assert_eq!(
        switch_downstream(&client, addr, true).await,
        json!({ "failing": true })
    );

    // The breaker opens once 20 calls are recorded with half of them failed: all 20 fail.
    for _ in 0..20 {
        let (status, retry_after, body) = parts(post_order(&client, addr, order()).await).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
        assert_eq!(body["error"], "downstream_failed");
        assert_eq!(retry_after, None);
    }
    let breaker = Registry::global().circuit_breaker(ORDERS);
    assert_eq!(breaker.state(), CircuitState::Open);
    assert_eq!(breaker.metrics().total_failed_calls(), before.failed + 20);

    // Open: refused without reaching the downstream, with the rest of its 10 s as the hint.
    let (status, retry_after, body) = parts(post_order(&client, addr, order()).await).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"], "call_not_permitted");
    let seconds: u64 = retry_after.expect("a Retry-After header").parse().unwrap();
    assert!((1..=10).contains(&seconds), "Retry-After: {seconds}");
    assert_eq!(
        breaker.metrics().total_not_permitted_calls(),
        before.not_permitted + 1
    );

    // Switched back, the downstream serves again (the breaker waits out its open state).
    assert_eq!(
        switch_downstream(&client, addr, false).await,
        json!({ "failing": false })
    );
    let state = client
        .get(format!("http://{addr}/downstream"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        state.json::<Value>().await.unwrap(),
        json!({ "failing": false })
    );
    let refused = client
        .put(format!("http://{addr}/downstream"))
        .json(&json!({ "failing": "yes" }))
        .send()
        .await
        .unwrap();
    let (status, _, body) = parts(refused).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"], "invalid_body");
}

async fn get_order(client: &Client, addr: SocketAddr, id: u64) -> Response {
    client
        .get(format!("http://{addr}/orders/{id}"))
        .send()
        .await
        .expect("the service answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_guarded_by_a_layer_shares_the_annotated_handlers_bulkhead_and_breaker() {
    let _serial = SERIAL.lock().await;
    let (addr, client, before) = start(settings(1, Duration::from_millis(600))).await;
    let bulkhead = Registry::global().bulkhead(ORDERS);
    let breaker = Registry::global().circuit_breaker(ORDERS);

    // The annotated handler holds the one permit: the layer's route is refused by the same
    // bulkhead, with the same response.
    let placing = {
        let client = client.clone();
        tokio::spawn(async move { parts(post_order(&client, addr, order()).await).await })
    };
    until_bulkhead_full().await;
    let (status, retry_after, body) = parts(get_order(&client, addr, 1).await).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert_eq!(body["error"], "bulkhead_full");
    assert_eq!(body["instance"], ORDERS);
    assert_eq!(placing.await.unwrap().0, StatusCode::OK);

    let (status, _, body) = parts(get_order(&client, addr, 1).await).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({ "order_id": 1, "status": "placed" }));

    // A 502 of the route is a failure of the shared breaker.
    switch_downstream(&client, addr, true).await;
    let (status, _, _) = parts(get_order(&client, addr, 2).await).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    switch_downstream(&client, addr, false).await;

    // One bulkhead and one breaker, each call counted once, the refusal never a failure.
    let metrics = bulkhead.metrics();
    assert_eq!(metrics.permitted_calls() - before.permitted, 3);
    assert_eq!(metrics.rejected_calls() - before.rejected, 1);
    let metrics = breaker.metrics();
    assert_eq!(metrics.total_successful_calls() - before.successful, 2);
    assert_eq!(metrics.total_failed_calls() - before.failed, 1);
    assert_eq!(metrics.total_not_permitted_calls(), before.not_permitted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_through_the_middleware_counts_sheds_as_refusals_and_failures_as_failures() {
    use resilience_examples::client::{self, ClientSettings, Tally, CLIENT};

    let _serial = SERIAL.lock().await;
    let (addr, _, before) = start(settings(2, Duration::from_millis(300))).await;
    let orders = ClientSettings {
        base_url: format!("http://{addr}"),
        orders: 12,
        concurrency: 6,
    };
    client::configure(&orders).unwrap();
    let http = client::client(&orders).unwrap();
    let tally = client::place_orders(&http, &orders).await;
    // Six at once against a bulkhead of two: the service sheds some with 503 + Retry-After.
    assert_eq!(tally.placed + tally.shed_by_service, 12, "{tally}");
    assert!(tally.placed >= 2 && tally.shed_by_service >= 1, "{tally}");
    assert_eq!((tally.refused_by_client, tally.failed), (0, 0), "{tally}");
    let rejected = Registry::global()
        .bulkhead(ORDERS)
        .metrics()
        .rejected_calls();
    assert_eq!(rejected - before.rejected, u64::from(tally.shed_by_service));
    let breaker = Registry::global().circuit_breaker(CLIENT);
    assert_eq!(breaker.state(), CircuitState::Closed);
    assert_eq!(
        breaker.metrics().number_of_failed_calls(),
        0,
        "sheds are not failures"
    );

    // A failing service is what opens the client's breaker: then it refuses without sending.
    switch_downstream(&reqwest::Client::new(), addr, true).await;
    let failing = ClientSettings {
        orders: 25,
        concurrency: 1,
        ..orders
    };
    let placed = tally.placed;
    let tally = client::place_orders(&http, &failing).await;
    switch_downstream(&reqwest::Client::new(), addr, false).await;
    // The breaker's window of 20 held the placed orders; the failures fill the rest of it
    // and it opens at half of them failed.
    let failed = 20 - placed;
    assert_eq!(
        tally,
        Tally {
            placed: 0,
            shed_by_service: 0,
            refused_by_client: 25 - failed,
            failed,
        }
    );
    assert_eq!(breaker.state(), CircuitState::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_order_is_422_and_takes_no_permit() {
    let _serial = SERIAL.lock().await;
    let (addr, client, before) = start(settings(2, Duration::ZERO)).await;

    for body in [
        json!({ "item": "book", "qty": 0 }),
        json!({ "item": " ", "qty": 1 }),
    ] {
        let (status, _, answer) = parts(post_order(&client, addr, body).await).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(answer["error"], "invalid_order");
    }
    // Every 4xx is JSON: a body axum refuses, and a path with no route.
    let (status, _, answer) =
        parts(post_order(&client, addr, json!({ "item": "book" })).await).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer["error"], "invalid_body");
    assert!(
        answer["message"].as_str().unwrap().contains("qty"),
        "{answer}"
    );
    let malformed = client
        .post(format!("http://{addr}/orders"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (status, _, answer) = parts(malformed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer["error"], "invalid_body");
    let missing = client
        .get(format!("http://{addr}/nowhere"))
        .send()
        .await
        .unwrap();
    let (status, _, answer) = parts(missing).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(answer["error"], "not_found");

    let (status, _, _) = parts(post_order(&client, addr, order()).await).await;
    assert_eq!(status, StatusCode::OK);
    let registry = Registry::global();
    assert_eq!(
        registry.bulkhead(ORDERS).metrics().permitted_calls() - before.permitted,
        1
    );
    assert_eq!(
        registry
            .circuit_breaker(ORDERS)
            .metrics()
            .number_of_buffered_calls(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_shipped_dashboard_is_served() {
    let _serial = SERIAL.lock().await;
    let (addr, client, _) = start(settings(2, Duration::from_millis(1))).await;
    // One instance of each kind, so that each kind's metrics are served.
    let registry = Registry::global();
    let _ = (
        registry.rate_limiter(ORDERS),
        registry.retry(ORDERS),
        registry.time_limiter(ORDERS),
    );
    let served = scrape(&client, addr).await;
    let dashboard: Value =
        serde_json::from_str(include_str!("../grafana/resilience-dashboard.json"))
            .expect("the dashboard is JSON");
    let mut names = HashSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("an expression");
            let mut rest = expr;
            while let Some(at) = rest.find("resilience_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                names.insert(name);
            }
        }
    }
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        assert!(
            served
                .lines()
                .any(|line| line.starts_with(&format!("{name}{{"))),
            "the dashboard reads `{name}`, which GET /metrics does not serve:\n{served}"
        );
    }
}
