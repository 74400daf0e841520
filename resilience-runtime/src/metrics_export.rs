//! The guards' metrics through the [`metrics`](https://docs.rs/metrics) facade
//! ([`Registry::record_metrics`]): Resilience4j's Micrometer names and tags, read from the
//! guards' own counters when the exporter is about to be scraped. Nothing is counted on the
//! path of a call for it: the guards keep their counters anyway, and this reads them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics::Label;

use crate::aspect::aspect_table;
use crate::bulkhead::Bulkhead;
use crate::circuit_breaker::durations::{BUCKET_LABELS, KINDS};
use crate::circuit_breaker::{CircuitBreaker, CircuitState, SlidingWindow};
use crate::fault::FaultInjector;
use crate::hedge::Hedge;
use crate::rate_limiter::RateLimiter;
use crate::registry::{GuardInstance, Registry};
use crate::retry::Retry;
use crate::time_limiter::TimeLimiter;

impl Registry {
    /// Writes the metrics of every guard of this registry to the installed `metrics`
    /// recorder, with the prefix `resilience` (see
    /// [`record_metrics_with_prefix`](Self::record_metrics_with_prefix) for the names).
    /// Call it where the metrics are read: in the handler that renders a Prometheus scrape,
    /// or on an interval for an exporter that pushes; or let
    /// [`export_metrics`](Self::export_metrics) call it on an interval, on a thread of its
    /// own.
    ///
    /// ```
    /// use resilience_runtime::Registry;
    ///
    /// let registry = Registry::new();
    /// let _ = registry.bulkhead("orders");
    /// // With a recorder installed (metrics-exporter-prometheus, say), this sets
    /// // resilience_bulkhead_available_concurrent_calls{name="orders"} 25, and the rest.
    /// registry.record_metrics();
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn record_metrics(&self) {
        self.record_metrics_with_prefix("resilience");
    }

    /// [`record_metrics`](Self::record_metrics) with the names starting `{prefix}_`; with
    /// `"resilience4j"` the queries of Resilience4j's own Grafana dashboard find them (its
    /// latency panels those of the breakers that keep call durations, below). Every metric has
    /// the label `name` (the instance); counters count since the guard was created and only
    /// grow.
    ///
    /// | metric | kind | other labels |
    /// |---|---|---|
    /// | `{prefix}_circuitbreaker_state` | gauge: 1 for the state the breaker is in, 0 for the others | `state`: `closed`, `open`, `half_open`, `forced_open`, `disabled`, `metrics_only` |
    /// | `{prefix}_circuitbreaker_calls_total` | counter | `kind`: `successful`, `failed`, `ignored`, `not_permitted` |
    /// | `{prefix}_circuitbreaker_calls_seconds_count`, `{prefix}_circuitbreaker_not_permitted_calls_total` | counter: the same counts under Micrometer's names (the calls that ran, by `kind`; the refused ones) | `kind` |
    /// | `{prefix}_circuitbreaker_calls_seconds_sum`, `…_calls_seconds_bucket` | with [`record_call_durations`](crate::CircuitBreakerConfigBuilder::record_call_durations) only: the recorded calls' total duration in seconds (gauge) and the calls at most `le` seconds long (counter) | `kind`: `successful`, `failed`, `ignored`; `le` for a bucket |
    /// | `{prefix}_circuitbreaker_max_buffered_calls` | gauge: the size of a count window | |
    /// | `{prefix}_circuitbreaker_failure_rate`, `…_slow_call_rate` | gauge, percent (−1 until the window holds its minimum of calls) | |
    /// | `{prefix}_circuitbreaker_buffered_calls`, `…_slow_calls` | gauge: the calls in the window | `kind`: `successful`, `failed` |
    /// | `{prefix}_bulkhead_available_concurrent_calls`, `…_max_allowed_concurrent_calls` | gauge | |
    /// | `{prefix}_bulkhead_calls_total` | counter | `kind`: `permitted`, `rejected`, `finished` |
    /// | `{prefix}_bulkhead_fleet_fallback_calls_total` | counter: the calls a fleet bulkhead decided while Redis did not answer (fleet bulkheads only) | |
    /// | `{prefix}_bulkhead_adaptive_rtt_seconds` | gauge, an adaptive limit's latencies: the one it compares samples with (the knee's latency without a queue, Gradient2's long-term average, Vegas's lowest), and the last sample's (`…_max_allowed_concurrent_calls` is its limit) | `estimate`: `baseline`, `sample` |
    /// | `{prefix}_ratelimiter_available_permissions`, `…_waiting_threads` | gauge | |
    /// | `{prefix}_ratelimiter_calls_total` | counter | `kind`: `successful`, `failed` |
    /// | `{prefix}_ratelimiter_fleet_fallback_calls_total` | counter: the calls a fleet limiter decided while Redis did not answer (fleet limiters only) | |
    /// | `{prefix}_retry_calls_total` | counter | `kind`: `successful_without_retry`, `successful_with_retry`, `failed_without_retry`, `failed_with_retry` |
    /// | `{prefix}_retry_over_budget_total` | counter: retries not made because the retry's budget was spent (retries with a budget only) | |
    /// | `{prefix}_timelimiter_calls_total` | counter | `kind`: `successful`, `failed`, `timeout` |
    ///
    /// Counters end in `_total`, as Micrometer's Prometheus registry names them. A breaker's
    /// call durations (the `_sum` and `_bucket` of Resilience4j's timer) are exported for the
    /// breakers whose configuration asks for them, as they cost every call a precise clock
    /// reading; the `_count`, which panels of call rates by outcome read, is always there.
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn record_metrics_with_prefix(&self, prefix: &str) {
        export_all(self, &Out { prefix });
    }
}

impl Registry {
    /// Keeps every guard's metrics current in the installed `metrics` recorder: records them
    /// now, then every `interval`, on a thread of its own, for the rest of the process. One
    /// line at startup, after the recorder is installed, and a Prometheus scrape handler only
    /// renders (nothing to forget there), and a push exporter has fresh values each period:
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use resilience_runtime::Registry;
    ///
    /// // With metrics-exporter-prometheus: `let prometheus = PrometheusBuilder::new().install_recorder()?;`,
    /// // and `GET /metrics` answers `prometheus.render()`.
    /// Registry::global().export_metrics(Duration::from_secs(5));
    /// ```
    ///
    /// A value is at most `interval` old when read. Called again, the exporter takes the new
    /// interval (and, with [`export_metrics_with_prefix`](Self::export_metrics_with_prefix),
    /// the new prefix); it never starts a second thread for the same registry.
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn export_metrics(&'static self, interval: Duration) {
        self.export_metrics_with_prefix("resilience", interval);
    }

    /// [`export_metrics`](Self::export_metrics) with the names of
    /// [`record_metrics_with_prefix`](Self::record_metrics_with_prefix).
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn export_metrics_with_prefix(&'static self, prefix: &str, interval: Duration) {
        // One exporter per registry, found by its address (a `'static` registry never moves).
        static EXPORTERS: Mutex<Vec<(usize, Arc<Exporter>)>> = Mutex::new(Vec::new());
        let settings = (prefix.to_owned(), interval.max(Duration::from_millis(1)));
        self.record_metrics_with_prefix(prefix);
        let mut exporters = EXPORTERS.lock().unwrap_or_else(PoisonError::into_inner);
        let key = std::ptr::from_ref(self) as usize;
        if let Some((_, exporter)) = exporters.iter().find(|(at, _)| *at == key) {
            *exporter
                .settings
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = settings;
            return;
        }
        let exporter = Arc::new(Exporter {
            settings: Mutex::new(settings),
        });
        exporters.push((key, Arc::clone(&exporter)));
        let spawned = std::thread::Builder::new()
            .name("resilience-metrics".to_owned())
            .spawn(move || loop {
                let (prefix, interval) = exporter
                    .settings
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                std::thread::sleep(interval);
                self.record_metrics_with_prefix(&prefix);
            });
        if spawned.is_err() {
            // No thread to be had: the metrics were recorded once, and the next call tries
            // again.
            exporters.retain(|(at, _)| *at != key);
        }
    }
}

/// What an exporter thread records, and how often.
struct Exporter {
    settings: Mutex<(String, Duration)>,
}

/// Where a scrape's metrics go: the installed recorder, under one prefix.
struct Out<'p> {
    prefix: &'p str,
}

impl Out<'_> {
    fn gauge(&self, name: &str, labels: Vec<Label>, value: f64) {
        metrics::gauge!(format!("{}_{name}", self.prefix), labels).set(value);
    }

    /// A counter, named as Prometheus and Micrometer name counters: `{prefix}_{name}_total`.
    fn counter(&self, name: &str, labels: Vec<Label>, value: u64) {
        metrics::counter!(format!("{}_{name}_total", self.prefix), labels).absolute(value);
    }

    /// A counting series named as it is (a timer's `…_seconds_count`).
    fn count(&self, name: &str, labels: Vec<Label>, value: u64) {
        metrics::counter!(format!("{}_{name}", self.prefix), labels).absolute(value);
    }
}

/// The label of the instance `name`.
fn named(name: &str) -> Vec<Label> {
    vec![Label::new("name", name.to_owned())]
}

/// The label of the instance `name`, and `key = value`.
fn with(name: &str, key: &'static str, value: &'static str) -> Vec<Label> {
    vec![Label::new("name", name.to_owned()), Label::new(key, value)]
}

/// What one kind writes of each of its instances.
trait Export: GuardInstance {
    fn export(&self, out: &Out<'_>);
}

/// Walks [`aspect_table!`]: every instance of every kind.
macro_rules! export_all {
    ($(
        $(#[$doc:meta])*
        $variant:ident($instance:ident, $config:ident, $field:ident):
            $snake:literal, $words:literal, precedence $precedence:literal;
    )*) => {
        fn export_all(registry: &Registry, out: &Out<'_>) {
            $(for instance in registry.instances::<$instance>() {
                instance.export(out);
            })*
        }
    };
}

aspect_table!(export_all);

impl Export for CircuitBreaker {
    fn export(&self, out: &Out<'_>) {
        let breaker = self;
        let name = breaker.name().as_str();
        let state = breaker.state();
        for each in STATES {
            let on = if each == state { 1.0 } else { 0.0 };
            out.gauge(
                "circuitbreaker_state",
                with(name, "state", each.as_str()),
                on,
            );
        }
        let m = breaker.metrics();
        for (kind, value) in [
            ("successful", m.total_successful_calls()),
            ("failed", m.total_failed_calls()),
            ("ignored", m.total_ignored_calls()),
            ("not_permitted", m.total_not_permitted_calls()),
        ] {
            out.counter("circuitbreaker_calls", with(name, "kind", kind), value);
            // Micrometer's names for the same counts: the calls that ran are its timer's
            // `…_calls_seconds_count`, the refused ones `…_not_permitted_calls_total`.
            if kind == "not_permitted" {
                out.counter(
                    "circuitbreaker_not_permitted_calls",
                    with(name, "kind", kind),
                    value,
                );
            } else {
                out.count(
                    "circuitbreaker_calls_seconds_count",
                    with(name, "kind", kind),
                    value,
                );
            }
        }
        if let Some(durations) = breaker.call_durations() {
            for (i, kind) in KINDS.into_iter().enumerate() {
                out.gauge(
                    "circuitbreaker_calls_seconds_sum",
                    with(name, "kind", kind),
                    durations.sum_seconds(i),
                );
                for (le, count) in BUCKET_LABELS.into_iter().zip(durations.cumulative(i)) {
                    let mut labels = with(name, "kind", kind);
                    labels.push(Label::new("le", le));
                    out.count("circuitbreaker_calls_seconds_bucket", labels, count);
                }
            }
        }
        if let SlidingWindow::CountBased(size) = breaker.config().sliding_window() {
            out.gauge(
                "circuitbreaker_max_buffered_calls",
                named(name),
                f64::from(size),
            );
        }
        out.gauge(
            "circuitbreaker_failure_rate",
            named(name),
            f64::from(m.failure_rate()),
        );
        out.gauge(
            "circuitbreaker_slow_call_rate",
            named(name),
            f64::from(m.slow_call_rate()),
        );
        for (kind, buffered, slow) in [
            (
                "successful",
                m.number_of_successful_calls(),
                m.number_of_slow_successful_calls(),
            ),
            (
                "failed",
                m.number_of_failed_calls(),
                m.number_of_slow_failed_calls(),
            ),
        ] {
            let labels = with(name, "kind", kind);
            out.gauge(
                "circuitbreaker_buffered_calls",
                labels.clone(),
                f64::from(buffered),
            );
            out.gauge("circuitbreaker_slow_calls", labels, f64::from(slow));
        }
    }
}

impl Export for Bulkhead {
    fn export(&self, out: &Out<'_>) {
        let bulkhead = self;
        let name = bulkhead.name().as_str();
        let m = bulkhead.metrics();
        out.gauge(
            "bulkhead_available_concurrent_calls",
            named(name),
            f64::from(m.available_concurrent_calls()),
        );
        out.gauge(
            "bulkhead_max_allowed_concurrent_calls",
            named(name),
            f64::from(m.max_allowed_concurrent_calls()),
        );
        for (kind, value) in [
            ("permitted", m.permitted_calls()),
            ("rejected", m.rejected_calls()),
            ("finished", m.finished_calls()),
        ] {
            out.counter("bulkhead_calls", with(name, "kind", kind), value);
        }
        if !bulkhead.config().backend().is_local() {
            out.counter(
                "bulkhead_fleet_fallback_calls",
                named(name),
                m.fleet_fallback_calls(),
            );
        }
        if let Some(estimates) = bulkhead.adaptive_estimates() {
            for (estimate, rtt) in [
                ("baseline", estimates.baseline_rtt),
                ("sample", estimates.sample_rtt),
            ] {
                if let Some(rtt) = rtt {
                    out.gauge(
                        "bulkhead_adaptive_rtt_seconds",
                        with(name, "estimate", estimate),
                        rtt.as_secs_f64(),
                    );
                }
            }
        }
    }
}

impl Export for RateLimiter {
    fn export(&self, out: &Out<'_>) {
        let limiter = self;
        let name = limiter.name().as_str();
        let m = limiter.metrics();
        // Negative while callers wait on permissions of later cycles.
        out.gauge(
            "ratelimiter_available_permissions",
            named(name),
            m.available_permissions() as f64,
        );
        out.gauge(
            "ratelimiter_waiting_threads",
            named(name),
            m.number_of_waiting_threads() as f64,
        );
        for (kind, value) in [
            ("successful", m.permitted_calls()),
            ("failed", m.rejected_calls()),
        ] {
            out.counter("ratelimiter_calls", with(name, "kind", kind), value);
        }
        if !limiter.config().backend().is_local() {
            out.counter(
                "ratelimiter_fleet_fallback_calls",
                named(name),
                m.fleet_fallback_calls(),
            );
        }
    }
}

impl Export for Retry {
    fn export(&self, out: &Out<'_>) {
        let retry = self;
        let name = retry.name().as_str();
        let m = retry.metrics();
        for (kind, value) in [
            (
                "successful_without_retry",
                m.number_of_successful_calls_without_retry_attempt(),
            ),
            (
                "successful_with_retry",
                m.number_of_successful_calls_with_retry_attempt(),
            ),
            (
                "failed_without_retry",
                m.number_of_failed_calls_without_retry_attempt(),
            ),
            (
                "failed_with_retry",
                m.number_of_failed_calls_with_retry_attempt(),
            ),
        ] {
            out.counter("retry_calls", with(name, "kind", kind), value);
        }
        if retry.config().budget().is_some() {
            out.counter(
                "retry_over_budget",
                named(name),
                m.number_of_retries_over_budget(),
            );
        }
    }
}

impl Export for Hedge {
    fn export(&self, out: &Out<'_>) {
        let hedge = self;
        let name = hedge.name().as_str();
        let m = hedge.metrics();
        for (kind, value) in [
            ("primary_success", m.primary_success_count()),
            ("secondary_success", m.secondary_success_count()),
            ("primary_failure", m.primary_failure_count()),
            ("secondary_failure", m.secondary_failure_count()),
        ] {
            out.counter("hedge_calls", with(name, "kind", kind), value);
        }
        out.counter("hedge_attempts", named(name), m.number_of_hedged_attempts());
        if hedge.config().budget().is_some() {
            out.counter(
                "hedge_over_budget",
                named(name),
                m.number_of_hedges_over_budget(),
            );
        }
    }
}

impl Export for FaultInjector {
    fn export(&self, out: &Out<'_>) {
        let name = self.name().as_str();
        let m = self.metrics();
        for (kind, value) in [
            ("latency", m.number_of_injected_latencies()),
            ("error", m.number_of_injected_errors()),
            ("refusal", m.number_of_injected_refusals()),
        ] {
            out.counter("fault_injected", with(name, "kind", kind), value);
        }
    }
}

impl Export for TimeLimiter {
    fn export(&self, out: &Out<'_>) {
        let limiter = self;
        let name = limiter.name().as_str();
        let m = limiter.metrics();
        for (kind, value) in [
            ("successful", m.number_of_successful_calls()),
            ("failed", m.number_of_failed_calls()),
            ("timeout", m.number_of_timed_out_calls()),
        ] {
            out.counter("timelimiter_calls", with(name, "kind", kind), value);
        }
    }
}

/// Every state, for the `state` gauge's one series per state (as Micrometer's).
const STATES: [CircuitState; 6] = [
    CircuitState::Closed,
    CircuitState::Open,
    CircuitState::HalfOpen,
    CircuitState::ForcedOpen,
    CircuitState::Disabled,
    CircuitState::MetricsOnly,
];
