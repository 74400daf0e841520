//! `Registry::export_metrics`: with the Prometheus recorder installed and one call at startup,
//! a scrape renders every guard's metrics without calling `record_metrics` itself, and sees
//! them change. Waits are bounded polls.

use std::time::Duration;

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use resilience_runtime::{
    AdaptiveLimit, BulkheadConfig, CircuitBreakerConfig, Guard, Registry, RetryConfig,
    SlidingWindow,
};

/// The Prometheus recorder, installed once for the test binary (one global recorder).
fn prometheus() -> &'static PrometheusHandle {
    static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();
    PROMETHEUS.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("the only recorder of this test binary")
    })
}

/// The value of the sample of `metric` for the instance `name`, if rendered.
fn sample(text: &str, metric: &str, name: &str) -> Option<f64> {
    let prefix = format!("{metric}{{name=\"{name}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

#[test]
fn exported_metrics_reach_a_scrape_that_only_renders_and_stay_current() {
    let prometheus = prometheus();
    let registry = Registry::global();
    let three = BulkheadConfig::builder()
        .max_concurrent_calls(3)
        .build()
        .unwrap();
    registry.configure_bulkhead("exported", three).unwrap();
    registry.export_metrics(Duration::from_millis(10));

    let metric = "resilience_bulkhead_available_concurrent_calls";
    let rendered = prometheus.render();
    assert_eq!(
        sample(&rendered, metric, "exported"),
        Some(3.0),
        "{rendered}"
    );

    // A permit taken after the export started: a later scrape sees it, with no call here.
    let bulkhead = registry.bulkhead("exported");
    let _held = bulkhead.try_acquire().unwrap();
    let mut seen = None;
    for _ in 0..500 {
        seen = sample(&prometheus.render(), metric, "exported");
        if seen == Some(2.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(seen, Some(2.0));
}

/// The metrics the queries of Resilience4j's own Grafana dashboard (`grafana_dashboard.json`
/// at the root of its repository, its current and earlier versions) read, as Micrometer's
/// Prometheus registry names them: its latency panels read the timer's `_sum` (now) or its
/// `_bucket` (earlier versions, through `histogram_quantile`).
const RESILIENCE4J_DASHBOARD: &[&str] = &[
    "resilience4j_circuitbreaker_state",
    "resilience4j_circuitbreaker_failure_rate",
    "resilience4j_circuitbreaker_buffered_calls",
    "resilience4j_circuitbreaker_max_buffered_calls",
    "resilience4j_circuitbreaker_calls_seconds_count",
    "resilience4j_circuitbreaker_calls_seconds_sum",
    "resilience4j_circuitbreaker_calls_seconds_bucket",
    "resilience4j_circuitbreaker_calls_total",
    "resilience4j_retry_calls_total",
    "resilience4j_bulkhead_available_concurrent_calls",
    "resilience4j_bulkhead_max_allowed_concurrent_calls",
];

#[test]
fn with_the_resilience4j_prefix_its_dashboards_queries_find_their_metrics() {
    let prometheus = prometheus();
    let registry = Registry::new();
    let window = CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(20))
        .record_call_durations(true)
        .build()
        .unwrap();
    registry
        .configure_circuit_breaker("backendA", window)
        .unwrap();
    registry
        .configure_retry("backendA", RetryConfig::builder().build().unwrap())
        .unwrap();
    let _ = registry.bulkhead("backendA");
    let plan = registry
        .plan(&[
            Guard::circuit_breaker("backendA"),
            Guard::bulkhead("backendA"),
        ])
        .unwrap();
    let _: Result<u32, resilience_runtime::Rejected> = plan.call(|| {
        std::thread::sleep(Duration::from_millis(30));
        Ok(1)
    });
    // A breaker that keeps no durations.
    let _ = registry.circuit_breaker("untimed");
    registry.record_metrics_with_prefix("resilience4j");

    let rendered = prometheus.render();
    for name in RESILIENCE4J_DASHBOARD {
        assert!(
            rendered
                .lines()
                .any(|line| line.starts_with(&format!("{name}{{")) && line.contains("backendA")),
            "Resilience4j's dashboard reads `{name}`, which is not rendered:\n{rendered}"
        );
    }
    let calls = rendered
        .lines()
        .find(|line| {
            line.starts_with("resilience4j_circuitbreaker_calls_seconds_count{")
                && line.contains("kind=\"successful\"")
                && line.contains("backendA")
        })
        .expect("the successful calls' count");
    assert!(calls.ends_with(" 1"), "{calls}");

    // The call took at least 30 ms: more than the bucket up to 25 ms holds, all of `+Inf`.
    let successful = |metric: &str, more: &str| -> f64 {
        let line = rendered
            .lines()
            .find(|line| {
                line.starts_with(&format!("{metric}{{"))
                    && line.contains("name=\"backendA\"")
                    && line.contains("kind=\"successful\"")
                    && line.contains(more)
            })
            .unwrap_or_else(|| panic!("{metric} {more} is not rendered:\n{rendered}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let bucket = "resilience4j_circuitbreaker_calls_seconds_bucket";
    assert_eq!(successful(bucket, "le=\"0.025\""), 0.0);
    assert_eq!(successful(bucket, "le=\"+Inf\""), 1.0);
    let sum = successful("resilience4j_circuitbreaker_calls_seconds_sum", "");
    assert!((0.03..10.0).contains(&sum), "{sum}");
    // A breaker whose configuration does not ask for durations has only the count.
    for line in rendered
        .lines()
        .filter(|line| line.contains("name=\"untimed\""))
    {
        assert!(
            !line.contains("_calls_seconds_sum") && !line.contains("_calls_seconds_bucket"),
            "{line}"
        );
    }
    assert!(rendered.contains("resilience4j_circuitbreaker_calls_seconds_count{name=\"untimed\""));
}

#[test]
fn an_adaptive_bulkhead_exports_its_limit_and_its_latencies() {
    let prometheus = prometheus();
    let registry = Registry::new();
    let adaptive = BulkheadConfig::builder()
        .adaptive(AdaptiveLimit::gradient2().min_limit(3).initial_limit(3))
        .build()
        .unwrap();
    registry.configure_bulkhead("adaptive", adaptive).unwrap();
    let plan = registry.plan(&[Guard::bulkhead("adaptive")]).unwrap();
    let _: Result<(), resilience_runtime::Rejected> = plan.call(|| {
        std::thread::sleep(Duration::from_millis(2));
        Ok(())
    });
    registry.record_metrics();

    let rendered = prometheus.render();
    assert_eq!(
        sample(
            &rendered,
            "resilience_bulkhead_max_allowed_concurrent_calls",
            "adaptive"
        ),
        Some(3.0),
        "{rendered}"
    );
    for estimate in ["baseline", "sample"] {
        let line = rendered
            .lines()
            .find(|line| {
                line.starts_with("resilience_bulkhead_adaptive_rtt_seconds{")
                    && line.contains("name=\"adaptive\"")
                    && line.contains(&format!("estimate=\"{estimate}\""))
            })
            .unwrap_or_else(|| panic!("no {estimate} latency:\n{rendered}"));
        let seconds: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        // The call slept 2 ms: its sample, and the average of the one sample there is.
        assert!((0.002..5.0).contains(&seconds), "{line}");
    }
}
