//! The global registry's plans are interned per call site: a guarded call borrows its plan as a
//! plain reference, found again after any change that leaves the plan as it was.
//!
//! One test in its own binary: it changes the precedence of the global registry, which every
//! test of a binary shares.

use std::ptr;

use resilience_runtime::{
    bulkhead, circuit_breaker, Aspect, BulkheadConfig, CachedPlan, Guard, Plan, PlanCache,
    ReentrancyPolicy, Registry,
};
use resilience_tests::CallError;

static SITE: PlanCache = PlanCache::new(&[
    Guard::circuit_breaker("interning"),
    Guard::bulkhead("interning"),
]);

/// The plan lent to a call now. Every handle is kept alive for the whole test, so two handles
/// at one address are one plan (a freed plan's address cannot be reused meanwhile).
fn current() -> CachedPlan {
    SITE.get(Registry::global())
}

fn same(a: &CachedPlan, b: &CachedPlan) -> bool {
    ptr::eq::<Plan>(&**a, &**b)
}

fn first_aspect(plan: &Plan) -> Aspect {
    plan.guards().next().expect("two guards").0
}

#[bulkhead(name = "interning-macro")]
#[circuit_breaker(name = "interning-macro")]
async fn guarded(x: u32) -> Result<u32, CallError> {
    Ok(x + 1)
}

#[test]
fn each_call_site_borrows_one_interned_plan_per_precedence_and_policy() {
    let global = Registry::global();
    let first = current();
    assert!(same(&first, &current()), "calls in a row borrow one plan");
    assert_eq!(first_aspect(&first), Aspect::Bulkhead);

    // A change elsewhere moves the generation; the call site finds the same plan again.
    global
        .configure_bulkhead(
            "interning-unrelated",
            BulkheadConfig::builder()
                .max_concurrent_calls(3)
                .build()
                .unwrap(),
        )
        .unwrap();
    assert!(
        same(&first, &current()),
        "an unrelated change keeps the plan"
    );

    // So does configuring the call site's own guards: they change in place, in the plan.
    global
        .configure_bulkhead(
            "interning",
            BulkheadConfig::builder()
                .max_concurrent_calls(7)
                .build()
                .unwrap(),
        )
        .unwrap();
    let reconfigured = current();
    assert!(
        same(&first, &reconfigured),
        "a configured guard keeps the plan"
    );
    let entered = reconfigured.enter().unwrap();
    assert_eq!(global.bulkhead("interning").available_concurrent_calls(), 6);
    drop(entered);

    // A new precedence is a new plan, in the new order.
    global.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
    let breaker_first = current();
    assert!(!same(&first, &breaker_first));
    assert_eq!(first_aspect(&breaker_first), Aspect::CircuitBreaker);

    // Back to the old precedence: the first plan again, not a new one.
    global
        .set_precedence(
            Aspect::CircuitBreaker,
            Aspect::CircuitBreaker.default_precedence(),
        )
        .unwrap();
    assert!(same(&first, &current()), "the old plan is found again");
    global.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
    assert!(same(&breaker_first, &current()));
    global
        .set_precedence(
            Aspect::CircuitBreaker,
            Aspect::CircuitBreaker.default_precedence(),
        )
        .unwrap();

    // A policy is part of the plan too.
    global.set_reentrancy_policy(ReentrancyPolicy::Reject);
    let rejecting = current();
    assert!(!same(&first, &rejecting));
    global.set_reentrancy_policy(ReentrancyPolicy::PassThrough);
    assert!(same(&first, &current()));

    // Calls through the macros run on interned plans, across precedence changes.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for precedence in [10, 400, 10, 400] {
        global
            .set_precedence(Aspect::CircuitBreaker, precedence)
            .unwrap();
        assert_eq!(runtime.block_on(guarded(1)).unwrap(), 2);
    }
    let breaker = global.circuit_breaker("interning-macro");
    assert_eq!(breaker.metrics().number_of_successful_calls(), 4);
    assert_eq!(
        global
            .bulkhead("interning-macro")
            .metrics()
            .permitted_calls(),
        4
    );
}
