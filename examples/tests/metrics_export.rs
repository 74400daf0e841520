//! `Registry::export_metrics`: with the Prometheus recorder installed and one call at startup,
//! a scrape renders every guard's metrics without calling `record_metrics` itself, and sees
//! them change. Waits are bounded polls.

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use resilience_runtime::{BulkheadConfig, Registry};

/// The value of the sample of `metric` for the instance `name`, if rendered.
fn sample(text: &str, metric: &str, name: &str) -> Option<f64> {
    let prefix = format!("{metric}{{name=\"{name}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

#[test]
fn exported_metrics_reach_a_scrape_that_only_renders_and_stay_current() {
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
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
