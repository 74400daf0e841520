//! `Registry::trace_events`: every guard's rare events reach `tracing` with their fields, at
//! levels that do not flood a log under overload, for instances created before and after.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use resilience_runtime::{
    BulkheadConfig, CircuitBreakerConfig, Guard, RateLimiterConfig, Registry, Rejected,
    RetryConfig, TimeLimiterConfig,
};
use resilience_tests::CallError;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One event as `tracing` saw it: level, target and fields (the message as `message`).
#[derive(Clone, Debug)]
struct Seen {
    level: Level,
    target: String,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        struct Fields<'a>(&'a mut BTreeMap<String, String>);
        impl Visit for Fields<'_> {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name().to_owned(), format!("{value:?}"));
            }
            fn record_str(&mut self, field: &Field, value: &str) {
                self.0.insert(field.name().to_owned(), value.to_owned());
            }
        }
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
}

impl Capture {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Runs `f` with a subscriber that captures every event of this thread.
fn captured(f: impl FnOnce()) -> Vec<Seen> {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, f);
    capture.take()
}

fn field<'a>(seen: &'a Seen, name: &str) -> &'a str {
    seen.fields
        .get(name)
        .unwrap_or_else(|| panic!("no field `{name}` in {seen:?}"))
}

#[test]
fn a_breaker_opening_is_a_warning_and_its_refusals_are_debug() {
    let registry = Registry::new();
    registry
        .configure_circuit_breaker(
            "ledger",
            CircuitBreakerConfig::builder()
                .minimum_number_of_calls(2)
                .sliding_window(resilience_runtime::SlidingWindow::CountBased(2))
                .build()
                .unwrap(),
        )
        .unwrap();
    let seen = captured(|| {
        registry.trace_events();
        let plan = registry.plan(&[Guard::circuit_breaker("ledger")]).unwrap();
        let results: Vec<Result<(), CallError>> = (0..3)
            .map(|_| plan.call(|| Err(CallError::Downstream("down"))))
            .collect();
        assert!(matches!(
            &results[2],
            Err(CallError::Rejected(Rejected::CallNotPermitted { .. }))
        ));
    });
    let warnings: Vec<&Seen> = seen.iter().filter(|s| s.level == Level::WARN).collect();
    assert_eq!(warnings.len(), 1, "{seen:#?}");
    let opened = warnings[0];
    assert_eq!(opened.target, "resilience");
    assert_eq!(field(opened, "aspect"), "circuit_breaker");
    assert_eq!(field(opened, "name"), "ledger");
    assert_eq!(field(opened, "from"), "closed");
    assert_eq!(field(opened, "to"), "open");
    let refused: Vec<&Seen> = seen
        .iter()
        .filter(|s| {
            s.level == Level::DEBUG
                && s.fields
                    .get("aspect")
                    .is_some_and(|a| a == "circuit_breaker")
        })
        .collect();
    assert_eq!(refused.len(), 1, "the third call was refused: {seen:#?}");
    // Two failed calls and nothing else: no event for an ordinary call.
    assert!(seen
        .iter()
        .all(|s| !field(s, "message").contains("succeeded")));
}

#[test]
fn rejections_retries_and_time_outs_are_debug_with_their_fields() {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "pool",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_rate_limiter(
            "api",
            RateLimiterConfig::builder()
                .limit_for_period(1)
                .limit_refresh_period(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_retry(
            "inventory",
            RetryConfig::builder()
                .max_attempts(2)
                .wait_duration(Duration::ZERO)
                .build()
                .unwrap(),
        )
        .unwrap();
    let seen = captured(|| {
        registry.trace_events();
        // An instance created after `trace_events` forwards too.
        let bulkhead = registry.bulkhead("pool");
        let _held = bulkhead.try_acquire().unwrap();
        assert!(bulkhead.try_acquire().is_err());

        let limiter = registry.plan(&[Guard::rate_limiter("api")]).unwrap();
        let first: Result<(), Rejected> = limiter.call(|| Ok(()));
        let second: Result<(), Rejected> = limiter.call(|| Ok(()));
        assert!(first.is_ok() && second.is_err());

        let retry = registry.plan(&[Guard::retry("inventory")]).unwrap();
        let _: Result<(), CallError> = retry.call(|| Err(CallError::Downstream("down")));
    });
    let by = |aspect: &str| -> Vec<&Seen> {
        seen.iter()
            .filter(|s| s.fields.get("aspect").is_some_and(|a| a == aspect))
            .collect()
    };
    let bulkhead = by("bulkhead");
    assert_eq!(bulkhead.len(), 1, "{seen:#?}");
    assert_eq!(bulkhead[0].level, Level::DEBUG);
    assert_eq!(field(bulkhead[0], "name"), "pool");
    assert_eq!(field(bulkhead[0], "waited_ms"), "0");

    let limiter = by("rate_limiter");
    assert_eq!(
        limiter.len(),
        1,
        "the granted call is not an event: {seen:#?}"
    );
    assert_eq!(limiter[0].level, Level::DEBUG);
    assert!(field(limiter[0], "retry_after_ms").parse::<u64>().unwrap() > 0);

    let retry = by("retry");
    assert_eq!(
        retry.len(),
        2,
        "a retry, then every attempt failed: {seen:#?}"
    );
    assert_eq!(field(retry[0], "attempt"), "1");
    assert_eq!(field(retry[1], "attempts"), "2");
    assert!(retry.iter().all(|s| s.level == Level::DEBUG));
}

#[test]
fn a_time_out_is_debug() {
    let registry = Registry::new();
    registry
        .configure_time_limiter(
            "slow",
            TimeLimiterConfig::builder()
                .timeout_duration(Duration::from_millis(10))
                .build()
                .unwrap(),
        )
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let seen = captured(|| {
        registry.trace_events();
        let plan = registry.plan(&[Guard::time_limiter("slow")]).unwrap();
        let result: Result<(), Rejected> = runtime.block_on(plan.call_future(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(())
        }));
        assert!(matches!(result, Err(Rejected::TimedOut { .. })));
    });
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].level, Level::DEBUG);
    assert_eq!(field(&seen[0], "aspect"), "time_limiter");
    assert_eq!(field(&seen[0], "timeout_ms"), "10");
}

#[test]
fn forwarding_twice_logs_each_event_once_and_ordinary_calls_never() {
    let registry = Registry::new();
    let breaker = registry.circuit_breaker("orders");
    // Another subscriber asks for every call's events: the forwarder still ignores them.
    breaker.subscribe(|_| {});
    let seen = captured(|| {
        registry.trace_events();
        registry.trace_events();
        let plan = registry.plan(&[Guard::circuit_breaker("orders")]).unwrap();
        for _ in 0..10 {
            let _: Result<(), Rejected> = plan.call(|| Ok(()));
        }
        breaker.transition_to_forced_open_state();
    });
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].level, Level::WARN);
    assert_eq!(field(&seen[0], "to"), "forced_open");
}

#[test]
fn under_overload_the_refusals_of_an_instance_are_a_line_a_second_with_a_count() {
    let clock = resilience_runtime::ManualClock::new();
    let registry = Registry::with_clock(clock.clone());
    let one = BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .build()
        .unwrap();
    registry.configure_bulkhead("flooded", one).unwrap();
    let events = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = captured(|| {
        registry.trace_events();
        let bulkhead = registry.bulkhead("flooded");
        // Code that subscribes still hears every refusal.
        let counted = std::sync::Arc::clone(&events);
        bulkhead.subscribe(move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let _held = bulkhead.try_acquire().unwrap();
        for _ in 0..50 {
            assert!(bulkhead.try_acquire().is_err());
        }
        clock.advance(Duration::from_secs(1));
        assert!(bulkhead.try_acquire().is_err());
    });
    let lines: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.fields.get("aspect").is_some_and(|a| a == "bulkhead"))
        .collect();
    assert_eq!(lines.len(), 2, "{seen:#?}");
    assert_eq!(field(lines[0], "more"), "0");
    assert_eq!(field(lines[1], "more"), "49");
    assert!(
        field(lines[1], "message").contains("49 more like it"),
        "{lines:#?}"
    );
    assert_eq!(events.load(std::sync::atomic::Ordering::Relaxed), 51);
}
