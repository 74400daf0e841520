//! A whole configuration from a document: what a Spring Boot + Resilience4j user writes in
//! `application.yml`, as TOML. Loading applies all of it or nothing, reloading reconfigures
//! instances in place, and every malformed document gets an error that says where and why.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilience_runtime::document::{ChangeKind, Setting};
use resilience_runtime::{
    AdaptiveLimit, Aspect, BulkheadConfig, CircuitBreakerEvent, CircuitState, ConfigDocument,
    Guard, LimitAlgorithm, ReentrancyPolicy, Registry, Rejected, SlidingWindow,
};

const INCIDENT: &str = include_str!("../../examples/config/incident.toml");

#[test]
fn the_incident_configuration_loads_with_every_value_in_force() {
    let registry = Registry::new();
    let changes = registry
        .load_toml(INCIDENT)
        .expect("the shipped file is valid");
    assert!(!changes.is_empty());

    let bulkhead = registry.bulkhead_config("orders");
    assert_eq!(bulkhead.max_concurrent_calls(), 80);
    assert_eq!(bulkhead.max_wait_duration(), Duration::from_millis(500));
    assert!(bulkhead.fair_call_handling());
    assert_eq!(
        registry.bulkhead("orders").max_allowed_concurrent_calls(),
        80
    );

    let breaker = registry.circuit_breaker_config("orders");
    assert_eq!(breaker.failure_rate_threshold(), 50.0);
    assert_eq!(breaker.sliding_window(), SlidingWindow::CountBased(100));
    assert_eq!(breaker.minimum_number_of_calls(), 20);
    assert_eq!(
        breaker.wait_duration_in_open_state(),
        Duration::from_secs(10)
    );
    assert_eq!(breaker.permitted_calls_in_half_open_state(), 5);
    assert!(!breaker.record_rejections());

    let limiter = registry.rate_limiter_config("orders");
    assert_eq!(limiter.limit_for_period(), 1500);
    assert_eq!(limiter.limit_refresh_period(), Duration::from_secs(1));

    let retry = registry.retry_config("orders");
    assert_eq!(retry.max_attempts(), 3);
    assert_eq!(retry.wait_before_retry(1), Duration::from_millis(50));
    assert_eq!(retry.wait_before_retry(2), Duration::from_millis(100));
    assert_eq!(
        retry.exponential_backoff(),
        Some((2.0, Duration::from_millis(800)))
    );

    let limiter = registry.time_limiter_config("orders");
    assert_eq!(limiter.timeout_duration(), Duration::from_millis(300));
    assert!(limiter.cancel_running_future());

    // Names the file does not mention get the file's default.
    assert_eq!(registry.bulkhead_config("other").max_concurrent_calls(), 25);
    assert_eq!(registry.precedence()[0], Aspect::Bulkhead);
}

#[test]
fn a_file_is_read_from_disk_and_its_errors_name_it() {
    let registry = Registry::new();
    registry
        .load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/config/incident.toml"
        ))
        .expect("the shipped file loads");

    let dir = std::env::temp_dir().join(format!("resilience-doc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[bulkhead.instances.orders]\nmax_concurrent_calls = 0\n",
    )
    .unwrap();
    let err = registry.load_file(&bad).unwrap_err();
    assert_eq!(err.file(), Some(bad.as_path()));
    assert!(
        err.to_string()
            .starts_with(&format!("{}:2:24: ", bad.display())),
        "{err}"
    );

    let missing = dir.join("missing.toml");
    let err = registry.load_file(&missing).unwrap_err();
    assert!(err.reason().starts_with("cannot read the file"), "{err}");
    assert!(std::error::Error::source(&err).is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reloading_reconfigures_in_place_and_reports_only_what_changed() {
    let registry = Registry::new();
    let first = r#"
        [bulkhead.instances.orders]
        max_concurrent_calls = 10
        [circuit_breaker.instances.orders]
        failure_rate_threshold = 50
        [circuit_breaker.instances.ledger]
        failure_rate_threshold = 20
    "#;
    registry.load_toml(first).unwrap();
    let bulkhead = registry.bulkhead("orders");
    let breaker = registry.circuit_breaker("orders");
    let ledger = registry.circuit_breaker("ledger");
    let heard = Arc::new(AtomicU64::new(0));
    let _subscription = breaker.subscribe({
        let heard = Arc::clone(&heard);
        move |event| {
            if let CircuitBreakerEvent::StateTransition { .. } = event {
                heard.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    ledger.transition_to_open_state().unwrap();

    // The same document again: nothing to do; the open ledger breaker stays open.
    assert!(registry.load_toml(first).unwrap().is_empty());
    assert_eq!(ledger.state(), CircuitState::Open);

    let second = r#"
        [bulkhead.instances.orders]
        max_concurrent_calls = 4
        [circuit_breaker.instances.orders]
        failure_rate_threshold = 50
        [circuit_breaker.instances.ledger]
        failure_rate_threshold = 20
        [retry.instances.orders]
        max_attempts = 5
    "#;
    let changes = registry.load_toml(second).unwrap();
    assert_eq!(
        changes
            .iter()
            .map(|c| (c.setting.clone(), c.kind))
            .collect::<Vec<_>>(),
        [
            (
                Setting::Named(Aspect::Bulkhead, "orders".into()),
                ChangeKind::Changed
            ),
            (
                Setting::Named(Aspect::Retry, "orders".into()),
                ChangeKind::Added
            ),
        ]
    );
    assert_eq!(
        changes.to_string(),
        "bulkhead `orders`: changed\nretry `orders`: added"
    );
    // The same handles, reconfigured.
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 4);
    assert!(Arc::ptr_eq(&bulkhead, &registry.bulkhead("orders")));
    assert_eq!(
        ledger.state(),
        CircuitState::Open,
        "an unchanged breaker keeps its state"
    );

    // Left out of the next document: back to the default, still the same instance.
    let third = r#"
        [circuit_breaker.instances.orders]
        failure_rate_threshold = 25
    "#;
    let changes = registry.load_toml(third).unwrap();
    assert_eq!(
        changes.to_string(),
        "bulkhead `orders`: removed (back to the default)\n\
         retry `orders`: removed (back to the default)\n\
         circuit breaker `ledger`: removed (back to the default)\n\
         circuit breaker `orders`: changed"
    );
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 25);
    assert_eq!(breaker.config().failure_rate_threshold(), 25.0);
    assert_eq!(
        ledger.state(),
        CircuitState::Closed,
        "reconfigured to the default"
    );
    // The subscriber still listens to the reconfigured breaker.
    let before = heard.load(Ordering::Relaxed);
    breaker.transition_to_open_state().unwrap();
    assert_eq!(heard.load(Ordering::Relaxed), before + 1);
}

#[test]
fn a_document_leaves_what_code_configured_and_it_does_not_name() {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "payments",
            BulkheadConfig::builder()
                .max_concurrent_calls(3)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .load_toml("[bulkhead.instances.orders]\nmax_concurrent_calls = 7\n")
        .unwrap();
    registry
        .load_toml("[bulkhead.instances.orders]\nmax_concurrent_calls = 8\n")
        .unwrap();
    assert_eq!(
        registry.bulkhead_config("payments").max_concurrent_calls(),
        3
    );
    registry.load_toml("").unwrap();
    assert_eq!(
        registry.bulkhead_config("payments").max_concurrent_calls(),
        3
    );
    assert_eq!(
        registry.bulkhead_config("orders").max_concurrent_calls(),
        25
    );
}

#[test]
fn bases_resolve_key_by_key_through_named_configurations_and_the_default() {
    let registry = Registry::new();
    registry
        .load_toml(
            r#"
            [circuit_breaker.configs.default]
            minimum_number_of_calls = 10

            [circuit_breaker.configs.slow-backends]
            sliding_window_type = "TIME_BASED"
            sliding_window_size = 60
            wait_duration_in_open_state = "30s"

            [circuit_breaker.instances.search]
            base_config = "slow-backends"
            sliding_window_size = 20

            [circuit_breaker.instances.ledger]
            base_config = "default"
            failure_rate_threshold = 10
            "#,
        )
        .unwrap();
    let search = registry.circuit_breaker_config("search");
    // The kind from the base, the size from the instance: one key at a time.
    assert_eq!(search.sliding_window(), SlidingWindow::TimeBased(20));
    assert_eq!(
        search.wait_duration_in_open_state(),
        Duration::from_secs(30)
    );
    assert_eq!(search.minimum_number_of_calls(), 10);
    let ledger = registry.circuit_breaker_config("ledger");
    assert_eq!(ledger.failure_rate_threshold(), 10.0);
    assert_eq!(ledger.minimum_number_of_calls(), 10);
    // A configuration is not an instance until something uses its name.
    assert!(registry
        .circuit_breakers()
        .iter()
        .all(|b| b.name() != "slow-backends"));
}

#[test]
fn precedence_and_the_reentrancy_policy_are_set_as_one_table() {
    let registry = Registry::new();
    // A swap: set one at a time, the first would tie with the second.
    registry
        .load_toml(
            "reentrancy_policy = \"reject\"\n[precedence]\nbulkhead = 400\ncircuit_breaker = 100\n",
        )
        .unwrap();
    assert_eq!(registry.precedence()[0], Aspect::CircuitBreaker);
    assert_eq!(registry.reentrancy_policy(), ReentrancyPolicy::Reject);
    // Left out next time: back to the defaults.
    let changes = registry.load_toml("").unwrap();
    assert_eq!(changes.len(), 3);
    assert_eq!(registry.precedence()[0], Aspect::Bulkhead);
    assert_eq!(registry.reentrancy_policy(), ReentrancyPolicy::PassThrough);
}

#[test]
fn a_document_can_require_every_name_configured_and_leave_it_again() {
    let registry = Registry::new();
    let changes = registry
        .load_toml(
            "require_configured = true\n[bulkhead.instances.orders]\nmax_concurrent_calls = 8\n",
        )
        .unwrap();
    assert!(registry.require_configured());
    assert!(changes
        .to_string()
        .contains("`require_configured`: changed"));
    // The document's names are configured; another is refused.
    assert!(registry.plan(&[Guard::bulkhead("orders")]).is_ok());
    let refused = registry.plan(&[Guard::bulkhead("payments")]).unwrap_err();
    assert!(refused
        .reason()
        .contains("bulkhead `payments` has no configuration"));
    // Left out next time: back to running unconfigured names on the defaults.
    registry.load_toml("").unwrap();
    assert!(!registry.require_configured());
    assert!(registry.plan(&[Guard::bulkhead("payments")]).is_ok());
    // Set in code, it stays set through a document that leaves the key out.
    registry.load_toml("require_configured = false\n").unwrap();
    registry.set_require_configured(true);
    registry.load_toml("").unwrap();
    assert!(registry.require_configured());
}

#[test]
fn spring_spellings_read_as_the_keys_and_values_they_mean() {
    let registry = Registry::new();
    registry
        .load_toml(
            r#"
            [circuit_breaker.instances.orders]
            failure-rate-threshold = 50.5
            sliding-window-type = "COUNT_BASED"
            sliding-window-size = 10
            automatic_transition_from_open_to_half_open = true
            wait-duration-in-open-state = "PT10S"
            "#,
        )
        .unwrap();
    let config = registry.circuit_breaker_config("orders");
    assert_eq!(config.failure_rate_threshold(), 50.5);
    assert_eq!(config.sliding_window(), SlidingWindow::CountBased(10));
    assert!(config.automatic_transition_from_open_to_half_open());
    assert_eq!(
        config.wait_duration_in_open_state(),
        Duration::from_secs(10)
    );
}

#[test]
fn a_configuration_reads_through_any_serde_format_and_is_validated() {
    let config: BulkheadConfig =
        serde_json::from_str(r#"{"max_concurrent_calls": 5, "max_wait_duration": "20ms"}"#)
            .unwrap();
    assert_eq!(config.max_concurrent_calls(), 5);
    let err = serde_json::from_str::<BulkheadConfig>(r#"{"max_concurrent_calls": 0}"#).unwrap_err();
    assert!(
        err.to_string().contains("invalid `max_concurrent_calls`"),
        "{err}"
    );
    let err = serde_json::from_str::<BulkheadConfig>(r#"{"maxConcurrentCalls": 5}"#).unwrap_err();
    assert!(
        err.to_string().contains("write `max_concurrent_calls`"),
        "{err}"
    );

    let document: ConfigDocument =
        serde_json::from_str(r#"{"retry": {"instances": {"inventory": {"max_attempts": 2}}}}"#)
            .unwrap();
    let registry = Registry::new();
    registry.apply_document(&document).unwrap();
    assert_eq!(registry.retry_config("inventory").max_attempts(), 2);
}

/// Everything a registry shows of its configuration, to check that a refused document changed
/// none of it.
fn snapshot(registry: &Registry) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        registry.bulkhead_config("orders"),
        registry.bulkhead_config("other"),
        registry.circuit_breaker_config("orders"),
        registry.rate_limiter_config("orders"),
        registry.retry_config("orders"),
        registry.time_limiter_config("orders"),
        registry.precedence(),
        registry.reentrancy_policy(),
    )
}

/// A malformed document, the key path and position its error names, and words of its reason.
struct Malformed {
    text: &'static str,
    path: &'static str,
    at: Option<(usize, usize)>,
    reason: &'static str,
}

const fn bad(
    text: &'static str,
    path: &'static str,
    at: Option<(usize, usize)>,
    reason: &'static str,
) -> Malformed {
    Malformed {
        text,
        path,
        at,
        reason,
    }
}

const CORPUS: &[Malformed] = &[
    // Syntax.
    bad("[bulkhead", "", Some((1, 10)), "unclosed table"),
    bad("a = ", "", Some((1, 5)), ""),
    bad("[bulkhead.instances.orders]\nmax_concurrent_calls = 1\nmax_concurrent_calls = 2\n", "", Some((3, 1)), "duplicate key"),
    // Unknown keys, with the closest one or what to do.
    bad("[bulkhead.instances.orders]\nmax_concurent_calls = 3\n", "bulkhead.instances.orders.max_concurent_calls", Some((2, 1)), "did you mean `max_concurrent_calls`?"),
    bad("[bulkhead.instances.orders]\nmaxConcurrentCalls = 3\n", "bulkhead.instances.orders.maxConcurrentCalls", Some((2, 1)), "write `max_concurrent_calls`"),
    bad("[circuitbreaker.instances.orders]\nfailure_rate_threshold = 3\n", "circuitbreaker", Some((1, 2)), "did you mean `circuit_breaker`?"),
    bad("[resilience4j.circuitbreaker.instances.orders]\n", "resilience4j", Some((1, 2)), "write the kinds at the top level"),
    bad("[circuit_breaker.instances.orders]\nrecord_exceptions = [\"IoError\"]\n", "circuit_breaker.instances.orders.record_exceptions", Some((2, 1)), "record = path"),
    bad("[retry.instances.orders]\nretry_exceptions = []\n", "retry.instances.orders.retry_exceptions", Some((2, 1)), "retry_on = path"),
    bad("[retry]\nretry_aspect_order = 2\n", "retry.retry_aspect_order", Some((2, 1)), "[precedence]"),
    bad("[bulkhead.instance.orders]\n", "bulkhead.instance", Some((1, 11)), "did you mean `instances`?"),
    bad("[thread_pool_bulkhead.instances.orders]\n", "thread_pool_bulkhead", Some((1, 2)), "no thread-pool bulkhead"),
    bad("[precedence]\nbulkheads = 1\n", "precedence.bulkheads", Some((2, 1)), "did you mean `bulkhead`?"),
    bad("[bulkhead.instances.orders]\nmax-concurrent-calls = 1\nmax_concurrent_calls = 2\n", "bulkhead.instances.orders.max_concurrent_calls", Some((3, 1)), "set twice"),
    // Wrong types.
    bad("[bulkhead.instances.orders]\nmax_concurrent_calls = \"eighty\"\n", "bulkhead.instances.orders.max_concurrent_calls", Some((2, 24)), "expected u32"),
    bad("[bulkhead.instances.orders]\nmax_concurrent_calls = -1\n", "bulkhead.instances.orders.max_concurrent_calls", Some((2, 24)), "expected u32"),
    bad("[bulkhead.instances.orders]\nmax_concurrent_calls = 99999999999\n", "bulkhead.instances.orders.max_concurrent_calls", Some((2, 24)), "expected u32"),
    bad("[bulkhead.instances.orders]\nfair_call_handling_enabled = \"yes\"\n", "bulkhead.instances.orders.fair_call_handling_enabled", Some((2, 30)), "expected a boolean"),
    bad("bulkhead = 5\n", "bulkhead", Some((1, 12)), "expected the `[bulkhead]` table"),
    bad("[bulkhead]\ninstances = [1]\n", "bulkhead.instances", Some((2, 13)), "expected a table of names"),
    bad("[circuit_breaker.instances.orders]\nsliding_window_type = \"rolling\"\n", "circuit_breaker.instances.orders.sliding_window_type", Some((2, 23)), "write one of \"count_based\", \"time_based\""),
    bad("[circuit_breaker.instances.orders]\ninitial_state = \"half_open\"\n", "circuit_breaker.instances.orders.initial_state", Some((2, 17)), "\"metrics_only\""),
    bad("reentrancy_policy = \"sometimes\"\n", "reentrancy_policy", Some((1, 21)), "\"pass_through\""),
    bad("require_configured = \"yes\"\n", "require_configured", Some((1, 22)), "expected a boolean"),
    // Durations.
    bad("[bulkhead.instances.orders]\nmax_wait_duration = 500\n", "bulkhead.instances.orders.max_wait_duration", Some((2, 21)), "needs a unit"),
    bad("[bulkhead.instances.orders]\nmax_wait_duration = \"500 millis\"\n", "bulkhead.instances.orders.max_wait_duration", Some((2, 21)), "`millis` is not a unit"),
    bad("[bulkhead.instances.orders]\nmax_wait_duration = \"-5s\"\n", "bulkhead.instances.orders.max_wait_duration", Some((2, 21)), "cannot be negative"),
    bad("[time_limiter.instances.orders]\ntimeout_duration = \"999999999999999999999d\"\n", "time_limiter.instances.orders.timeout_duration", Some((2, 20)), "longer than"),
    // Values a builder refuses.
    bad("[bulkhead.instances.orders]\nmax_concurrent_calls = 0\n", "bulkhead.instances.orders.max_concurrent_calls", Some((2, 24)), "must be at least 1"),
    bad("[circuit_breaker.instances.orders]\nfailure_rate_threshold = nan\n", "circuit_breaker.instances.orders.failure_rate_threshold", Some((2, 26)), "got NaN"),
    bad("[circuit_breaker.instances.orders]\nfailure_rate_threshold = 150\n", "circuit_breaker.instances.orders.failure_rate_threshold", Some((2, 26)), "at most 100"),
    bad("[circuit_breaker.instances.orders]\nsliding_window_size = 0\n", "circuit_breaker.instances.orders.sliding_window_size", Some((2, 23)), "window size must be 1"),
    bad("[retry.instances.orders]\nrandomized_wait_factor = 0.5\n", "retry.instances.orders.randomized_wait_factor", Some((2, 26)), "enable_randomized_wait = true"),
    bad("[retry.instances.orders]\nenable_randomized_wait = true\nrandomized_wait_factor = 1.5\n", "retry.instances.orders.randomized_wait_factor", Some((3, 26)), "below 1"),
    bad("[retry.instances.orders]\nwait_duration = \"1s\"\nenable_exponential_backoff = true\nexponential_max_wait_duration = \"10ms\"\n", "retry.instances.orders.exponential_max_wait_duration", Some((4, 33)), "must be at least the wait_duration"),
    bad("[rate_limiter.instances.orders]\nlimit_for_period = 0\n", "rate_limiter.instances.orders.limit_for_period", Some((2, 20)), "at least 1"),
    bad("[retry.instances.orders]\nmax_attempts = 0\n", "retry.instances.orders.max_attempts", Some((2, 16)), "at least 1"),
    // Names and bases.
    bad("[bulkhead.instances.\"\"]\nmax_concurrent_calls = 1\n", "bulkhead.instances.\"\"", Some((1, 21)), "cannot be empty"),
    bad("[bulkhead.instances.\"  \"]\n", "bulkhead.instances.\"  \"", Some((1, 21)), "cannot be empty"),
    bad("[bulkhead.instances.orders]\nbase_config = \"shared\"\n", "bulkhead.instances.orders.base_config", Some((2, 15)), "`shared`, which is not configured"),
    bad("[bulkhead.configs.a]\nbase_config = \"b\"\n[bulkhead.configs.b]\nbase_config = \"a\"\n", "bulkhead.configs.a.base_config", Some((2, 15)), "form a cycle: a -> b -> a"),
    bad("[bulkhead.configs.default]\nbase_config = \"x\"\n[bulkhead.configs.x]\n", "bulkhead.configs.default.base_config", Some((2, 15)), "cannot have a base"),
    bad("[bulkhead.configs.orders]\n[bulkhead.instances.orders]\n", "bulkhead.instances.orders", Some((2, 21)), "also a configuration"),
    bad("[bulkhead.instances.default]\n", "bulkhead.instances.default", Some((1, 21)), "names the default configuration"),
    // A rule across a base and its configuration, found only once merged.
    bad("[circuit_breaker.configs.shared]\nwait_duration_in_open_state = \"1m\"\n[circuit_breaker.instances.orders]\nbase_config = \"shared\"\nenable_exponential_backoff = true\nexponential_max_wait_duration_in_open_state = \"10s\"\n", "circuit_breaker.instances.orders.exponential_max_wait_duration_in_open_state", Some((6, 47)), "at least `wait_duration_in_open_state`"),
    // Precedence.
    bad("[precedence]\nretry = 100\n", "precedence.retry", Some((2, 9)), "retry and bulkhead would both have precedence 100"),
    bad("[precedence]\nretry = 1.5\n", "precedence.retry", Some((2, 9)), "expected i32"),
    // Unicode in names and keys.
    bad("[bulkhead.instances.\"zahlungsverkehr-ü\"]\n\"mäx\" = 1\n", "bulkhead.instances.\"zahlungsverkehr-ü\".\"mäx\"", Some((2, 1)), "unknown key `mäx`"),
];

#[test]
fn every_malformed_document_says_where_and_why_and_changes_nothing() {
    assert!(CORPUS.len() >= 30);
    let registry = Registry::new();
    registry.load_toml(INCIDENT).unwrap();
    let before = snapshot(&registry);
    let generation = registry.generation();
    let mut wrong = Vec::new();
    for case in CORPUS {
        let Err(err) = registry.load_toml(case.text) else {
            wrong.push(format!("accepted:\n{}", case.text));
            continue;
        };
        let found = (err.key_path(), err.line().zip(err.column()));
        if found != (case.path.to_owned(), case.at) || !err.reason().contains(case.reason) {
            wrong.push(format!(
                "{}\n  got:      {:?} {err}\n  expected: {:?} {:?} {:?}",
                case.text, found.1, case.path, case.at, case.reason
            ));
        }
        assert_eq!(snapshot(&registry), before, "{}", case.text);
        assert_eq!(registry.generation(), generation, "{}", case.text);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn a_document_with_one_bad_kind_applies_none_of_its_good_ones() {
    let registry = Registry::new();
    let err = registry
        .load_toml(
            "[bulkhead.instances.orders]\nmax_concurrent_calls = 3\n\
             [time_limiter.instances.orders]\ntimeout_duration = \"soon\"\n",
        )
        .unwrap_err();
    assert_eq!(
        err.key_path(),
        "time_limiter.instances.orders.timeout_duration"
    );
    assert_eq!(
        registry.bulkhead_config("orders").max_concurrent_calls(),
        25
    );
    let err = registry
        .load_toml(
            "[bulkhead.instances.orders]\nmax_concurrent_calls = 3\n\
             [precedence]\nretry = 100\n",
        )
        .unwrap_err();
    assert_eq!(err.key_path(), "precedence.retry");
    assert_eq!(
        registry.bulkhead_config("orders").max_concurrent_calls(),
        25
    );
    assert!(
        registry.bulkheads().is_empty(),
        "no instance was created either"
    );
}

#[test]
fn reloading_under_load_loses_no_call_and_leaks_no_permit() {
    let registry = Arc::new(Registry::new());
    let documents = [
        "[bulkhead.instances.x]\nmax_concurrent_calls = 2\n[circuit_breaker.instances.x]\nminimum_number_of_calls = 5\n",
        "[bulkhead.instances.x]\nmax_concurrent_calls = 6\nmax_wait_duration = \"1ms\"\n",
        "[bulkhead.configs.default]\nmax_concurrent_calls = 1\n[precedence]\ncircuit_breaker = 50\n",
    ];
    registry.load_toml(documents[0]).unwrap();
    let (ok, rejected) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let reloads = Arc::new(AtomicUsize::new(0));
    // The callers go on until every document was applied twice: calls alone can end before
    // the first reload.
    let (calls_per_thread, min_reloads) = (2_000, 2 * documents.len());
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (registry, ok, rejected, reloads) = (
                Arc::clone(&registry),
                Arc::clone(&ok),
                Arc::clone(&rejected),
                Arc::clone(&reloads),
            );
            std::thread::spawn(move || {
                let mut calls = 0;
                while calls < calls_per_thread || reloads.load(Ordering::Relaxed) < min_reloads {
                    calls += 1;
                    let plan = registry
                        .plan(&[Guard::bulkhead("x"), Guard::circuit_breaker("x")])
                        .unwrap();
                    let result: Result<(), Rejected> = plan.call(|| {
                        // Holds the permit across a switch, so calls overlap and meet the limit.
                        std::thread::yield_now();
                        Ok(())
                    });
                    // The breaker never sees a failure, so only the bulkhead refuses.
                    match result {
                        Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                        Err(Rejected::BulkheadFull { .. }) => {
                            rejected.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(other) => panic!("unexpected {other:?}"),
                    };
                }
                calls
            })
        })
        .collect();
    while !threads.iter().all(|t| t.is_finished()) {
        let done = reloads.load(Ordering::Relaxed);
        registry
            .load_toml(documents[done % documents.len()])
            .unwrap();
        reloads.store(done + 1, Ordering::Relaxed);
    }
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let bulkhead = registry.bulkhead("x");
    // Each reload reconfigured the one instance in place, and its counters outlive that: they
    // count every call of the run once, as its caller saw it.
    let metrics = bulkhead.metrics();
    assert_eq!(
        metrics.permitted_calls() + metrics.rejected_calls(),
        total,
        "the bulkhead saw every call"
    );
    assert_eq!(
        (metrics.permitted_calls(), metrics.rejected_calls()),
        (ok.load(Ordering::Relaxed), rejected.load(Ordering::Relaxed)),
        "admitted and refused as the callers saw"
    );
    assert!(metrics.rejected_calls() > 0, "the calls met the limit");
    assert_eq!(
        bulkhead.available_concurrent_calls(),
        bulkhead.max_allowed_concurrent_calls(),
        "every permit came back"
    );
}

mod never_panics {
    use proptest::prelude::*;
    use resilience_runtime::Registry;

    const KINDS: &[&str] = &[
        "bulkhead",
        "rate_limiter",
        "retry",
        "circuit_breaker",
        "time_limiter",
        "precedence",
        "bogus",
    ];
    const KEYS: &[&str] = &[
        "base_config",
        "max_concurrent_calls",
        "max_wait_duration",
        "fair_call_handling_enabled",
        "limit_for_period",
        "limit_refresh_period",
        "timeout_duration",
        "max_attempts",
        "wait_duration",
        "enable_exponential_backoff",
        "exponential_backoff_multiplier",
        "exponential_max_wait_duration",
        "enable_randomized_wait",
        "randomized_wait_factor",
        "failure_rate_threshold",
        "sliding_window_type",
        "sliding_window_size",
        "minimum_number_of_calls",
        "wait_duration_in_open_state",
        "exponential_max_wait_duration_in_open_state",
        "permitted_number_of_calls_in_half_open_state",
        "initial_state",
        "cancel_running_future",
        "bulkhead",
        "retry",
        "nonsense",
    ];
    const VALUES: &[&str] = &[
        "0",
        "1",
        "-1",
        "100",
        "4294967296",
        "9223372036854775807",
        "1.5",
        "nan",
        "inf",
        "-inf",
        "true",
        "\"500ms\"",
        "\"0s\"",
        "\"1m\"",
        "\"\"",
        "\"count_based\"",
        "\"time_based\"",
        "\"open\"",
        "\"default\"",
        "\"a\"",
        "\"b\"",
        "[]",
        "{}",
    ];

    fn line() -> impl Strategy<Value = String> {
        (
            0..KINDS.len(),
            prop::sample::select(vec!["configs", "instances"]),
            prop::sample::select(vec!["a", "b", "default", "ü"]),
            0..KEYS.len(),
            0..VALUES.len(),
        )
            .prop_map(|(kind, section, name, key, value)| {
                let table = if KINDS[kind] == "precedence" {
                    "[precedence]".to_owned()
                } else {
                    format!("[{}.{section}.\"{name}\"]", KINDS[kind])
                };
                format!("{table}\n{} = {}\n", KEYS[key], VALUES[value])
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn loading_any_document_of_known_pieces_never_panics(lines in prop::collection::vec(line(), 0..8)) {
            let registry = Registry::new();
            // Repeated tables are a syntax error; either way, an answer and no panic.
            let _ = registry.load_toml(&lines.concat());
            let _ = registry.bulkhead_config("a");
        }

        #[test]
        fn loading_any_text_never_panics(text in "\\PC{0,64}") {
            let _ = Registry::new().load_toml(&text);
        }
    }
}

/// The ```toml blocks of a Markdown text.
fn toml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The README and the task pages of `docs/`.
const DOCS: [(&str, &str); 4] = [
    ("README.md", include_str!("../../README.md")),
    ("docs/configuration.md", CONFIGURATION),
    (
        "docs/observability.md",
        include_str!("../../docs/observability.md"),
    ),
    ("docs/fleet.md", include_str!("../../docs/fleet.md")),
];

/// The page on configuration, whose errors are checked against the library's.
const CONFIGURATION: &str = include_str!("../../docs/configuration.md");

#[test]
fn every_configuration_the_docs_show_or_ship_loads() {
    for (page, text) in DOCS {
        // A Cargo manifest's lines are TOML too, and not a configuration document.
        let blocks: Vec<String> = toml_blocks(text)
            .into_iter()
            .filter(|b| !b.trim_start().starts_with("[dependencies]"))
            .collect();
        for block in &blocks {
            if let Err(e) = Registry::new().load_toml(block) {
                panic!("{page}: block refused: {e}\n{block}");
            }
        }
    }
    assert!(
        !toml_blocks(CONFIGURATION).is_empty(),
        "the configuration page shows a file"
    );
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/config");
    let mut shipped = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Err(e) = Registry::new().load_file(&path) {
                panic!("{e}");
            }
            shipped += 1;
        }
    }
    assert!(shipped >= 1);
}

#[test]
fn the_errors_the_docs_show_are_the_ones_their_file_gets() {
    let blocks = toml_blocks(CONFIGURATION);
    let file = blocks
        .iter()
        .find(|b| b.starts_with("[bulkhead.instances.orders]"))
        .expect("the configuration page's file");
    let variants = [
        file.replace("failure_rate_threshold = 50", "failure_rate_threshold = 0"),
        file.replacen("max_concurrent_calls = 80", "maxConcurrentCalls = 80", 1),
        format!("{file}record_exceptions = [\"IoError\"]\n"),
    ];
    for variant in variants {
        let err = Registry::new().load_toml(&variant).unwrap_err();
        let line = format!("config/resilience.toml:{err}");
        assert!(
            CONFIGURATION.contains(&line),
            "docs/configuration.md should show:\n{line}"
        );
    }
}

#[test]
fn the_configuration_the_actuator_shows_is_a_document_that_configures_the_same() {
    let original = Registry::new();
    original
        .load_toml(
            r#"
            [bulkhead.instances.a]
            max_concurrent_calls = 7
            max_wait_duration = "250ms"
            fair_call_handling_enabled = false
            [bulkhead.instances.g]
            adaptive = { algorithm = "gradient2", min_limit = 5, queue_size = 6, long_window = 100 }
            [bulkhead.instances.v]
            adaptive = { algorithm = "vegas", max_limit = 90, probe_multiplier = 10 }
            [bulkhead.instances.m]
            adaptive = { algorithm = "aimd", backoff_ratio = 0.75, timeout = "2s" }
            [bulkhead.instances.k]
            adaptive = { algorithm = "knee", min_limit = 4, max_limit = 300, initial_limit = 30 }
            [rate_limiter.instances.a]
            limit_for_period = 9
            limit_refresh_period = "2s"
            timeout_duration = "5ms"
            [retry.instances.a]
            max_attempts = 4
            wait_duration = "100ms"
            enable_exponential_backoff = true
            exponential_backoff_multiplier = 3.0
            exponential_max_wait_duration = "2s"
            enable_randomized_wait = true
            randomized_wait_factor = 0.25
            retry_on_rejection = true
            [retry.instances.b]
            max_attempts = 2
            [circuit_breaker.instances.a]
            failure_rate_threshold = 30.5
            slow_call_rate_threshold = 80
            slow_call_duration_threshold = "2s"
            sliding_window_type = "time_based"
            sliding_window_size = 30
            minimum_number_of_calls = 5
            wait_duration_in_open_state = "1m30s"
            enable_exponential_backoff = true
            exponential_backoff_multiplier = 2.0
            exponential_max_wait_duration_in_open_state = "10m"
            automatic_transition_from_open_to_half_open_enabled = true
            permitted_number_of_calls_in_half_open_state = 3
            max_wait_duration_in_half_open_state = "20s"
            record_rejections = true
            record_call_durations = true
            initial_state = "metrics_only"
            [circuit_breaker.instances.b]
            [time_limiter.instances.a]
            timeout_duration = "750ms"
            cancel_running_future = false
            "#,
        )
        .unwrap();
    let shown = resilience_runtime::axum::report(&original);
    // Every instance's `config`, as the instances of a document.
    let mut document = serde_json::json!({});
    for instance in shown["instances"].as_array().unwrap() {
        let kind = instance["kind"].as_str().unwrap();
        let name = instance["name"].as_str().unwrap();
        document[kind]["instances"][name] = instance["config"].clone();
    }
    let document: ConfigDocument = serde_json::from_value(document).unwrap();
    let copy = Registry::new();
    copy.apply_document(&document).unwrap();
    let configs = |registry: &Registry| {
        let report = resilience_runtime::axum::report(registry);
        report["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["kind"].clone(), i["name"].clone(), i["config"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(configs(&copy), configs(&original));
    assert_eq!(configs(&copy).len(), 11);
    assert_eq!(
        copy.bulkhead_config("m")
            .adaptive()
            .unwrap()
            .settings()
            .backoff_ratio,
        Some(0.75)
    );
    let knee = copy.bulkhead_config("k").adaptive().unwrap().settings();
    assert_eq!(
        (
            knee.algorithm,
            knee.min_limit,
            knee.max_limit,
            knee.initial_limit
        ),
        (resilience_runtime::LimitAlgorithm::Knee, 4, 300, 30)
    );
    assert_eq!(
        copy.circuit_breaker_config("a").sliding_window(),
        SlidingWindow::TimeBased(30)
    );
    assert_eq!(copy.retry_config("a").randomized_wait_factor(), 0.25);
    assert!(copy.circuit_breaker_config("a").record_call_durations());
    assert!(!copy.circuit_breaker_config("b").record_call_durations());
}

#[test]
fn an_adaptive_bulkhead_is_configured_in_its_own_table_and_its_mistakes_are_named() {
    let registry = Registry::new();
    registry
        .load_toml(
            r#"
            [bulkhead.instances.orders]
            max_wait_duration = "200ms"
            [bulkhead.instances.orders.adaptive]
            algorithm = "vegas"
            min_limit = 10
            initial_limit = 10
            max_limit = 400
            [bulkhead.instances.stock.adaptive]
            "#,
        )
        .unwrap();
    let orders = registry.bulkhead_config("orders");
    let settings = orders.adaptive().expect("adaptive").settings();
    assert_eq!(settings.algorithm, LimitAlgorithm::Vegas);
    assert_eq!(
        (
            settings.min_limit,
            settings.initial_limit,
            settings.max_limit
        ),
        (10, 10, 400)
    );
    assert_eq!(orders.max_wait_duration(), Duration::from_millis(200));
    assert_eq!(
        registry.bulkhead("orders").max_allowed_concurrent_calls(),
        10
    );
    // An empty table: the knee with its defaults.
    let stock = registry.bulkhead_config("stock");
    assert_eq!(
        stock.adaptive().unwrap().settings(),
        AdaptiveLimit::knee().settings()
    );

    // Reloaded as a fixed limit: the same instance, in place.
    registry
        .load_toml("[bulkhead.instances.orders]\nmax_concurrent_calls = 50\n")
        .unwrap();
    assert_eq!(
        registry.bulkhead("orders").max_allowed_concurrent_calls(),
        50
    );
    assert!(registry.bulkhead("orders").adaptive_estimates().is_none());

    for (document, says) in [
        (
            "[bulkhead.instances.a.adaptive]\nalgorithm = \"gradient3\"\n",
            "`gradient3` is not a limit algorithm; write one of \"knee\", \"gradient2\", \"vegas\", \"aimd\"",
        ),
        (
            "[bulkhead.instances.a.adaptive]\nmin_limt = 3\n",
            "min_limt",
        ),
        (
            "[bulkhead.instances.a.adaptive]\nalgorithm = \"aimd\"\nsmoothing = 0.5\n",
            "3:13: bulkhead.instances.a.adaptive.smoothing: applies to gradient2 and vegas only, \
             not to aimd",
        ),
        (
            "[bulkhead.instances.a]\nmax_concurrent_calls = 5\n[bulkhead.instances.a.adaptive]\n",
            "bulkhead.instances.a.adaptive: a bulkhead's limit is fixed (max_concurrent_calls) or \
             adaptive, not both",
        ),
        (
            "[bulkhead.instances.a.adaptive]\nmin_limit = 50\ninitial_limit = 20\n",
            "bulkhead.instances.a.adaptive.initial_limit: must be within min_limit and max_limit \
             (50..=200), got 20",
        ),
    ] {
        let err = Registry::new().load_toml(document).unwrap_err().to_string();
        assert!(err.contains(says), "{document}\n{err}");
    }
}
