//! Unit tests of the registry: configurations and their bases, instances reconfigured in
//! place, precedence, generations, plans.

use std::time::Duration;

use super::*;
use crate::bulkhead::BulkheadConfig;
use crate::circuit_breaker::{CircuitBreakerConfig, SlidingWindow};

fn bulkhead_of(calls: u32) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(calls)
        .build()
        .unwrap()
}

/// A breaker configuration with a count window of `calls`, the rest default.
fn breaker_of(calls: u32) -> CircuitBreakerConfig {
    CircuitBreakerConfig::builder()
        .sliding_window(SlidingWindow::CountBased(calls))
        .build()
        .unwrap()
}

#[test]
fn registries_are_send_and_sync_and_the_global_one_is_unique() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Registry>();
    assert!(std::ptr::eq(Registry::global(), Registry::global()));
}

#[test]
fn an_unknown_name_gets_the_default_config_and_keeps_its_instance() {
    let registry = Registry::new();
    let first = registry.bulkhead("unknown");
    assert_eq!(first.max_allowed_concurrent_calls(), 25);
    assert!(Arc::ptr_eq(&first, &registry.bulkhead("unknown")));
    let breaker = registry.circuit_breaker("unknown");
    assert!(Arc::ptr_eq(&breaker, &registry.circuit_breaker("unknown")));
    // Bulkheads and breakers have separate name spaces.
    assert_eq!(registry.bulkheads().len(), 1);
    assert_eq!(registry.circuit_breakers().len(), 1);
}

#[test]
fn configuring_a_name_reconfigures_its_instance_in_place() {
    let registry = Registry::new();
    let bulkhead = registry.bulkhead("orders");
    let held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().unwrap()).collect();
    registry
        .configure_bulkhead("orders", bulkhead_of(4))
        .unwrap();
    assert!(Arc::ptr_eq(&bulkhead, &registry.bulkhead("orders")));
    assert_eq!(bulkhead.max_allowed_concurrent_calls(), 4);
    // The 3 calls in flight count against the new limit: one more, not four.
    let fourth = bulkhead.try_acquire().unwrap();
    assert!(bulkhead.try_acquire().is_err());
    drop((held, fourth));
    assert_eq!(bulkhead.available_concurrent_calls(), 4);

    let breaker = registry.circuit_breaker("orders");
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    breaker.subscribe(move |event| sink.lock().unwrap().push(format!("{event:?}")));
    breaker.transition_to_open_state().unwrap();
    registry
        .configure_circuit_breaker("orders", breaker_of(10))
        .unwrap();
    assert!(Arc::ptr_eq(&breaker, &registry.circuit_breaker("orders")));
    assert_eq!(
        breaker.state(),
        crate::CircuitState::Closed,
        "the breaker starts over"
    );
    assert_eq!(
        breaker.config().sliding_window(),
        SlidingWindow::CountBased(10)
    );
    let events = events.lock().unwrap();
    assert!(
        events.last().is_some_and(|e| e.starts_with("Reset")),
        "the subscriber still listens: {events:?}"
    );
}

#[test]
fn a_subscriber_may_use_the_registry_while_its_breaker_is_reconfigured() {
    let registry = Arc::new(Registry::new());
    let breaker = registry.circuit_breaker("orders");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (weak, sink) = (Arc::downgrade(&registry), Arc::clone(&seen));
    // A subscriber that looks the registry up, as a metrics exporter would: it runs on the
    // configuring thread, which must not hold the registry's lock by then.
    breaker.subscribe(move |_| {
        if let Some(registry) = weak.upgrade() {
            let window = registry.circuit_breaker_config("orders").sliding_window();
            let other = registry.bulkhead("other").max_allowed_concurrent_calls();
            sink.lock().unwrap().push((window, other));
        }
    });
    let config = breaker_of(10);
    // On another thread, so that a deadlock fails the test instead of hanging it.
    let (done, configured) = std::sync::mpsc::channel();
    let configuring = Arc::clone(&registry);
    std::thread::spawn(move || {
        let result = configuring.configure_circuit_breaker("orders", config);
        let _ = done.send(result);
    });
    configured
        .recv_timeout(Duration::from_secs(30))
        .expect("configuring deadlocked on a subscriber that uses the registry")
        .unwrap();
    // The subscriber saw the registry's new configuration (Reset is its one event).
    assert_eq!(*seen.lock().unwrap(), [(SlidingWindow::CountBased(10), 25)]);
    assert_eq!(
        breaker.config().sliding_window(),
        SlidingWindow::CountBased(10)
    );
}

#[test]
fn a_panicking_subscriber_still_lets_every_instance_take_its_configuration() {
    let registry = Registry::new();
    registry
        .configure_circuit_breaker("base", breaker_of(10))
        .unwrap();
    let derived = CircuitBreakerConfig::builder()
        .base("base")
        .build()
        .unwrap();
    registry
        .configure_circuit_breaker("a", derived.clone())
        .unwrap();
    registry.configure_circuit_breaker("b", derived).unwrap();
    let generation = registry.generation();
    for name in ["base", "a", "b"] {
        registry
            .circuit_breaker(name)
            .subscribe(|_| panic!("a subscriber that panics"));
    }
    let changed = std::panic::catch_unwind(AssertUnwindSafe(|| {
        registry.configure_circuit_breaker("base", breaker_of(20))
    }));
    assert!(
        changed.is_err(),
        "the subscriber's panic reaches the caller"
    );
    assert_ne!(registry.generation(), generation);
    for name in ["base", "a", "b"] {
        assert_eq!(
            registry.circuit_breaker(name).config().sliding_window(),
            SlidingWindow::CountBased(20),
            "`{name}` took the new configuration"
        );
    }
    // The registry still works.
    registry
        .configure_circuit_breaker("c", breaker_of(5))
        .unwrap();
}

#[test]
fn a_named_config_inherits_unset_fields_from_its_base_then_the_default() {
    let registry = Registry::new();
    registry
        .configure_default_bulkhead(
            BulkheadConfig::builder()
                .fair_call_handling(false)
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_bulkhead(
            "shared",
            BulkheadConfig::builder()
                .max_concurrent_calls(7)
                .max_wait_duration(Duration::from_millis(30))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry
        .configure_bulkhead(
            "orders",
            BulkheadConfig::builder()
                .base("shared")
                .max_wait_duration(Duration::from_millis(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    let orders = registry.bulkhead_config("orders");
    assert_eq!(orders.max_concurrent_calls(), 7, "from the base");
    assert_eq!(orders.max_wait_duration(), Duration::from_millis(5), "own");
    assert!(
        !orders.fair_call_handling(),
        "from the default under the base"
    );
    assert_eq!(
        registry.bulkhead("orders").max_allowed_concurrent_calls(),
        7
    );
}

#[test]
fn changing_a_base_re_resolves_the_configs_built_on_it() {
    let registry = Registry::new();
    registry
        .configure_bulkhead("shared", bulkhead_of(7))
        .unwrap();
    registry
        .configure_bulkhead(
            "orders",
            BulkheadConfig::builder().base("shared").build().unwrap(),
        )
        .unwrap();
    let before = registry.bulkhead("orders");
    registry
        .configure_bulkhead("shared", bulkhead_of(9))
        .unwrap();
    assert!(Arc::ptr_eq(&before, &registry.bulkhead("orders")));
    assert_eq!(before.max_allowed_concurrent_calls(), 9);

    // A change that leaves a derived config as it was leaves its instance alone: an open
    // breaker stays open.
    registry
        .configure_circuit_breaker("shared", breaker_of(10))
        .unwrap();
    registry
        .configure_circuit_breaker(
            "orders",
            CircuitBreakerConfig::builder()
                .base("shared")
                .build()
                .unwrap(),
        )
        .unwrap();
    let breaker = registry.circuit_breaker("orders");
    breaker.transition_to_open_state().unwrap();
    registry
        .configure_circuit_breaker("shared", breaker_of(10))
        .unwrap();
    assert_eq!(breaker.state(), crate::CircuitState::Open);
    // One that changes it starts it over.
    registry
        .configure_circuit_breaker("shared", breaker_of(20))
        .unwrap();
    assert_eq!(breaker.state(), crate::CircuitState::Closed);
    assert_eq!(
        breaker.config().sliding_window(),
        SlidingWindow::CountBased(20)
    );
}

#[test]
fn changing_the_default_reaches_unconfigured_names_and_configs_without_base() {
    let registry = Registry::new();
    let unconfigured = registry.bulkhead("anything");
    registry
        .configure_bulkhead(
            "orders",
            BulkheadConfig::builder()
                .max_wait_duration(Duration::from_millis(5))
                .build()
                .unwrap(),
        )
        .unwrap();
    registry.configure_default_bulkhead(bulkhead_of(3)).unwrap();
    assert_eq!(
        registry.bulkhead("anything").max_allowed_concurrent_calls(),
        3
    );
    assert!(Arc::ptr_eq(&unconfigured, &registry.bulkhead("anything")));
    assert_eq!(unconfigured.max_allowed_concurrent_calls(), 3);
    assert_eq!(
        registry.bulkhead("orders").max_allowed_concurrent_calls(),
        3
    );
    assert_eq!(
        registry
            .bulkhead("never-seen")
            .max_allowed_concurrent_calls(),
        3
    );
}

#[test]
fn an_unknown_base_is_a_config_error_and_changes_nothing() {
    let registry = Registry::new();
    let generation = registry.generation();
    let err = registry
        .configure_bulkhead(
            "orders",
            BulkheadConfig::builder().base("missing").build().unwrap(),
        )
        .unwrap_err();
    assert_eq!(err.field(), "base");
    assert!(err.reason().contains("`missing`"), "{err}");
    assert_eq!(registry.generation(), generation);
    assert_eq!(registry.bulkheads().len(), 0);
}

#[test]
fn a_cycle_of_bases_is_a_config_error_and_changes_nothing() {
    let registry = Registry::new();
    let err = registry
        .configure_bulkhead("a", BulkheadConfig::builder().base("a").build().unwrap())
        .unwrap_err();
    assert_eq!(err.field(), "base");
    assert!(err.reason().contains("a -> a"), "{err}");

    registry.configure_bulkhead("b", bulkhead_of(2)).unwrap();
    registry
        .configure_bulkhead("a", BulkheadConfig::builder().base("b").build().unwrap())
        .unwrap();
    let err = registry
        .configure_bulkhead("b", BulkheadConfig::builder().base("a").build().unwrap())
        .unwrap_err();
    assert_eq!(err.field(), "base");
    assert!(err.reason().contains("cycle"), "{err}");
    assert_eq!(
        registry.bulkhead("b").max_allowed_concurrent_calls(),
        2,
        "unchanged"
    );

    let err = registry
        .configure_circuit_breaker(
            "x",
            CircuitBreakerConfig::builder().base("x").build().unwrap(),
        )
        .unwrap_err();
    assert_eq!(err.field(), "base");
}

#[test]
fn a_change_reaches_every_level_of_a_deep_chain_of_bases() {
    // c0 <- c1 <- ... <- c99, each level configured and its instance created.
    let registry = Registry::new();
    registry.configure_bulkhead("c0", bulkhead_of(5)).unwrap();
    for level in 1..100 {
        let derived = BulkheadConfig::builder()
            .base(format!("c{}", level - 1))
            .build()
            .unwrap();
        registry
            .configure_bulkhead(format!("c{level}"), derived)
            .unwrap();
    }
    let instances: Vec<_> = (0..100)
        .map(|level| registry.bulkhead(&format!("c{level}")))
        .collect();
    registry.configure_bulkhead("c0", bulkhead_of(7)).unwrap();
    for (level, bulkhead) in instances.iter().enumerate() {
        assert_eq!(
            bulkhead.max_allowed_concurrent_calls(),
            7,
            "level {level} took the new base"
        );
        assert_eq!(
            registry
                .bulkhead_config(&format!("c{level}"))
                .max_concurrent_calls(),
            7
        );
    }
}

#[test]
fn a_derived_config_is_validated_against_its_base_not_the_defaults() {
    let registry = Registry::new();
    let fast = CircuitBreakerConfig::builder()
        .wait_duration_in_open_state(Duration::from_millis(10))
        .build()
        .unwrap();
    registry.configure_circuit_breaker("fast", fast).unwrap();
    // The default open wait (60 s) is above the backoff's maximum; the base's 10 ms is not.
    let derived = CircuitBreakerConfig::builder()
        .base("fast")
        .open_state_backoff(2.0, Duration::from_millis(50))
        .build()
        .expect("nothing this builder sets contradicts itself");
    registry
        .configure_circuit_breaker("search", derived.clone())
        .unwrap();
    let resolved = registry.circuit_breaker("search").config();
    assert_eq!(
        resolved.wait_duration_in_open_state(),
        Duration::from_millis(10)
    );
    assert_eq!(
        resolved.open_state_backoff().map(|b| b.max_wait()),
        Some(Duration::from_millis(50))
    );
    // On a base whose wait is longer than the maximum, the merged configuration is refused
    // when the registry installs it, and nothing changes.
    let slow = CircuitBreakerConfig::builder()
        .wait_duration_in_open_state(Duration::from_secs(1))
        .build()
        .unwrap();
    registry.configure_circuit_breaker("slow", slow).unwrap();
    let on_slow = CircuitBreakerConfig::builder()
        .base("slow")
        .open_state_backoff(2.0, Duration::from_millis(50))
        .build()
        .unwrap();
    let refused = registry
        .configure_circuit_breaker("search", on_slow)
        .unwrap_err();
    assert_eq!(refused.field(), "open_state_backoff");
    assert_eq!(registry.circuit_breaker("search").config(), resolved);
    // And what the builder does set is still checked at once.
    let contradicts_itself = CircuitBreakerConfig::builder()
        .base("fast")
        .wait_duration_in_open_state(Duration::from_secs(1))
        .open_state_backoff(2.0, Duration::from_millis(50))
        .build()
        .unwrap_err();
    assert_eq!(contradicts_itself.field(), "open_state_backoff");
}

#[test]
fn the_default_config_cannot_have_a_base() {
    let registry = Registry::new();
    let err = registry
        .configure_default_bulkhead(BulkheadConfig::builder().base("x").build().unwrap())
        .unwrap_err();
    assert_eq!(err.field(), "base");
}

#[test]
fn precedence_defaults_put_the_bulkhead_outermost() {
    let registry = Registry::new();
    assert_eq!(
        registry.precedence(),
        vec![
            Aspect::Bulkhead,
            Aspect::RateLimiter,
            Aspect::Retry,
            Aspect::Hedge,
            Aspect::CircuitBreaker,
            Aspect::TimeLimiter,
            Aspect::Fault
        ]
    );
    assert_eq!(registry.precedence_of(Aspect::CircuitBreaker), 400);
}

#[test]
fn precedence_can_change_but_never_tie() {
    let registry = Registry::new();
    registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
    assert_eq!(registry.precedence()[0], Aspect::CircuitBreaker);
    let err = registry.set_precedence(Aspect::Bulkhead, 10).unwrap_err();
    assert_eq!(err.field(), "precedence");
    assert!(err.reason().contains("circuit breaker"), "{err}");
    assert_eq!(registry.precedence_of(Aspect::Bulkhead), 100, "unchanged");
    // Setting an aspect to its own current value is not a tie.
    registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
}

#[test]
fn every_change_moves_the_generation_and_look_ups_do_not() {
    let registry = Registry::new();
    let mut last = registry.generation();
    let mut changed = |registry: &Registry| {
        let now = registry.generation();
        assert_ne!(now, last);
        last = now;
    };
    registry.configure_bulkhead("a", bulkhead_of(1)).unwrap();
    changed(&registry);
    registry.set_precedence(Aspect::Retry, 1).unwrap();
    changed(&registry);
    registry
        .configure_circuit_breaker("a", CircuitBreakerConfig::default())
        .unwrap();
    changed(&registry);
    registry.set_reentrancy_policy(ReentrancyPolicy::Reject);
    changed(&registry);
    let _ = registry.bulkhead("new");
    let _ = registry.circuit_breaker("new");
    assert_eq!(registry.generation(), last);
    assert_ne!(Registry::new().generation(), registry.generation());
}

#[test]
fn a_plan_sorts_guards_by_precedence_whatever_their_order() {
    let registry = Registry::new();
    for guards in [
        [Guard::bulkhead("o"), Guard::circuit_breaker("o")],
        [Guard::circuit_breaker("o"), Guard::bulkhead("o")],
    ] {
        let plan = registry.plan(&guards).unwrap();
        let order: Vec<Aspect> = plan.guards().map(|(a, _)| a).collect();
        assert_eq!(order, [Aspect::Bulkhead, Aspect::CircuitBreaker]);
        assert_eq!(plan.generation(), registry.generation());
    }
    registry.set_precedence(Aspect::CircuitBreaker, 1).unwrap();
    let plan = registry
        .plan(&[Guard::bulkhead("o"), Guard::circuit_breaker("o")])
        .unwrap();
    let order: Vec<Aspect> = plan.guards().map(|(a, _)| a).collect();
    assert_eq!(order, [Aspect::CircuitBreaker, Aspect::Bulkhead]);
}

#[test]
fn a_plan_refuses_a_repeated_aspect() {
    let registry = Registry::new();
    let err = registry
        .plan(&[Guard::bulkhead("a"), Guard::bulkhead("b")])
        .unwrap_err();
    assert_eq!(err.field(), "guards");
    let err = registry
        .plan(&[Guard::retry("a"), Guard::retry("b")])
        .unwrap_err();
    assert!(err.reason().contains("retry appears twice"), "{err}");
}

#[test]
fn a_plan_lists_its_wrappers_among_its_gates_in_precedence_order() {
    let registry = Registry::new();
    // A listed fault guard stays only where fault injection is allowed.
    registry.allow_fault_injection();
    let plan = registry
        .plan(&[
            Guard::time_limiter("o"),
            Guard::fault("o"),
            Guard::hedge("o"),
            Guard::circuit_breaker("o"),
            Guard::retry("o"),
            Guard::rate_limiter("o"),
            Guard::bulkhead("o"),
        ])
        .unwrap();
    let order: Vec<Aspect> = plan.guards().map(|(a, _)| a).collect();
    assert_eq!(order, Aspect::ALL);
    // Retry moved outermost: it comes first, and the plan still holds the same instances.
    registry.set_precedence(Aspect::Retry, 1).unwrap();
    let moved = registry
        .plan(&[Guard::bulkhead("o"), Guard::retry("o")])
        .unwrap();
    let order: Vec<Aspect> = moved.guards().map(|(a, _)| a).collect();
    assert_eq!(order, [Aspect::Retry, Aspect::Bulkhead]);
}

/// A registry that requires configured names turns an unknown one away without keeping it:
/// names from a request (a tenant header) must not grow the process's set of names.
#[test]
fn a_plan_of_an_unconfigured_name_is_refused_without_keeping_the_name() {
    let registry = Registry::new();
    registry.set_require_configured(true);
    let unknown = "tenant-from-a-header-3c1f9a";
    let refused = registry
        .plan(&[Guard::bulkhead(unknown)])
        .expect_err("unconfigured");
    assert_eq!(refused.field(), "guards");
    assert!(
        refused
            .to_string()
            .contains("bulkhead `tenant-from-a-header-3c1f9a` has no configuration"),
        "{refused}"
    );
    assert!(!Name::is_interned(unknown), "the refused name was kept");
}
