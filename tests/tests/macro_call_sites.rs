//! Every annotated function registers its call site; `validate` reports names used without a
//! configuration, and configurations nothing uses. Its own test binary: it inspects every call
//! site linked in.

use resilience_runtime::{
    bulkhead, circuit_breaker, Aspect, BulkheadConfig, CircuitBreakerConfig, Registry,
};
use resilience_tests::CallError;

#[bulkhead(name = "sites-orders")]
#[circuit_breaker(name = "sites-payments")]
fn create_order() -> Result<(), CallError> {
    Ok(())
}

mod billing {
    use super::*;

    pub struct Billing;

    impl Billing {
        #[circuit_breaker(name = "sites-payments")]
        pub async fn charge(&self) -> Result<(), CallError> {
            Ok(())
        }
    }
}

#[test]
fn every_guarded_function_is_listed_with_its_guards() {
    let _ = create_order();
    let sites = Registry::global().call_sites();
    let order = sites
        .iter()
        .find(|s| s.function() == "create_order")
        .expect("create_order is registered");
    assert_eq!(order.module_path(), "macro_call_sites");
    assert!(order.file().ends_with("macro_call_sites.rs"));
    assert_eq!(order.line(), 12);
    let guards: Vec<(Aspect, &str)> = order
        .guards()
        .iter()
        .map(|g| (g.aspect(), g.name()))
        .collect();
    assert_eq!(
        guards,
        [
            (Aspect::Bulkhead, "sites-orders"),
            (Aspect::CircuitBreaker, "sites-payments")
        ]
    );
    let charge = sites.iter().find(|s| s.function() == "charge").unwrap();
    assert_eq!(charge.module_path(), "macro_call_sites::billing");
    let _ = billing::Billing;
}

#[test]
fn validating_a_module_checks_its_call_sites_only() {
    let registry = Registry::new();
    let report = registry
        .validate_module("macro_call_sites::billing")
        .unwrap_err();
    let missing: Vec<(Aspect, &str)> = report
        .unconfigured
        .iter()
        .map(|u| (u.aspect, u.name.as_str()))
        .collect();
    assert_eq!(missing, [(Aspect::CircuitBreaker, "sites-payments")]);
    assert_eq!(report.unconfigured[0].used_by.len(), 1, "{report}");
    // A module name is a whole path segment: `macro_call_sites::bill` is no module here.
    let none = registry.validate_module("macro_call_sites::bill").unwrap();
    assert!(none.unconfigured.is_empty() && none.unused.is_empty());
    // The crate root takes every module of it.
    let all = registry.validate_module("macro_call_sites").unwrap_err();
    assert_eq!(all.unconfigured.len(), 2);
}

#[test]
fn validate_lists_unconfigured_names_and_unused_configs() {
    let registry = Registry::new();
    let report = registry.validate().unwrap_err();
    let missing: Vec<(Aspect, &str)> = report
        .unconfigured
        .iter()
        .map(|u| (u.aspect, u.name.as_str()))
        .collect();
    assert_eq!(
        missing,
        [
            (Aspect::Bulkhead, "sites-orders"),
            (Aspect::CircuitBreaker, "sites-payments")
        ]
    );
    let payments = &report.unconfigured[1];
    assert_eq!(payments.used_by.len(), 2, "{payments:?}");
    assert!(report.to_string().contains("sites-payments"), "{report}");

    registry
        .configure_bulkhead("sites-orders", BulkheadConfig::default())
        .unwrap();
    registry
        .configure_circuit_breaker("sites-payments", CircuitBreakerConfig::default())
        .unwrap();
    registry
        .configure_circuit_breaker("sites-typo", CircuitBreakerConfig::default())
        .unwrap();
    let report = registry.validate().expect("every used name is configured");
    assert_eq!(
        report.unused,
        [(Aspect::CircuitBreaker, "sites-typo".to_owned())]
    );
}
