//! The attribute macros on every shape of function they accept: free functions and methods
//! (every receiver), generics, `impl Trait`, sync and async, impl blocks, `#[async_trait]`.

use std::sync::Arc;

use resilience_runtime::{bulkhead, circuit_breaker, BulkheadConfig, Registry, Rejected};
use resilience_tests::CallError;

#[bulkhead(name = "shapes-free")]
fn free(x: u32) -> Result<u32, CallError> {
    if x == 0 {
        return Err(CallError::Downstream("zero"));
    }
    let doubled = x.checked_mul(2).ok_or(CallError::Downstream("overflow"))?;
    Ok(doubled)
}

#[test]
fn a_free_function_keeps_its_behaviour_and_is_guarded() {
    assert_eq!(free(21), Ok(42));
    assert_eq!(free(0), Err(CallError::Downstream("zero")));
    assert_eq!(free(u32::MAX), Err(CallError::Downstream("overflow")));
    let bulkhead = Registry::global().bulkhead("shapes-free");
    assert_eq!(bulkhead.metrics().permitted_calls(), 3);
}

struct Counter {
    value: u32,
}

impl Counter {
    #[circuit_breaker(name = "shapes-ref")]
    fn get(&self) -> Result<u32, CallError> {
        Ok(self.value)
    }

    #[bulkhead(name = "shapes-mut")]
    fn bump(&mut self, by: u32) -> Result<u32, CallError> {
        self.value += by;
        Ok(self.value)
    }

    #[bulkhead(name = "shapes-owned")]
    fn into_value(self) -> Result<u32, CallError> {
        Ok(self.value)
    }

    #[circuit_breaker(name = "shapes-arc")]
    fn shared(self: Arc<Self>) -> Result<u32, CallError> {
        Ok(self.value + 1)
    }

    #[bulkhead(name = "shapes-async-mut")]
    async fn bump_later(&mut self, by: u32) -> Result<u32, CallError> {
        tokio::task::yield_now().await;
        self.value += by;
        Ok(self.value)
    }
}

#[test]
fn methods_with_every_receiver_are_guarded() {
    let mut counter = Counter { value: 1 };
    assert_eq!(counter.bump(2), Ok(3));
    assert_eq!(counter.get(), Ok(3));
    assert_eq!(Arc::new(Counter { value: 9 }).shared(), Ok(10));
    assert_eq!(counter.into_value(), Ok(3));
    let registry = Registry::global();
    assert_eq!(
        registry.bulkhead("shapes-mut").metrics().permitted_calls(),
        1
    );
    assert_eq!(
        registry
            .circuit_breaker("shapes-ref")
            .metrics()
            .number_of_successful_calls(),
        1
    );
}

#[tokio::test]
async fn an_async_method_with_mut_self_is_guarded() {
    let registry = Registry::new();
    registry
        .configure_bulkhead(
            "shapes-async-mut",
            BulkheadConfig::builder()
                .max_concurrent_calls(1)
                .build()
                .unwrap(),
        )
        .unwrap();
    let bulkhead = registry.bulkhead("shapes-async-mut");
    let mut counter = Counter { value: 1 };

    // The only permit taken: the guard refuses the call before the body can touch `self`.
    let held = bulkhead.try_acquire().unwrap();
    let refused = registry.scope_async(counter.bump_later(4)).await;
    assert!(
        matches!(
            refused,
            Err(CallError::Rejected(Rejected::BulkheadFull { .. }))
        ),
        "{refused:?}"
    );
    assert_eq!(counter.value, 1, "the refused call did not run");
    drop(held);

    assert_eq!(registry.scope_async(counter.bump_later(4)).await, Ok(5));
    assert_eq!(counter.value, 5);
    let metrics = bulkhead.metrics();
    // One permit taken by hand, one by the admitted call.
    assert_eq!(metrics.permitted_calls(), 2);
    assert_eq!(metrics.rejected_calls(), 1);
    assert_eq!(
        metrics.available_concurrent_calls(),
        1,
        "the permit came back"
    );
}

#[bulkhead(name = "shapes-generic")]
fn longest<'a, T>(items: &'a [T], extra: impl IntoIterator<Item = T>) -> Result<usize, CallError>
where
    T: Clone + PartialOrd,
{
    Ok(items.len() + extra.into_iter().count())
}

#[circuit_breaker(name = "shapes-impl-return")]
fn evens(limit: u32) -> Result<impl Iterator<Item = u32>, CallError> {
    Ok((0..limit).filter(|n| n % 2 == 0))
}

#[test]
fn generics_where_clauses_and_impl_trait_are_kept() {
    assert_eq!(longest(&[1, 2, 3], vec![4]), Ok(4));
    assert_eq!(evens(7).map(|i| i.count()), Ok(4));
}

#[bulkhead(name = "shapes-async")]
#[circuit_breaker(name = "shapes-async")]
async fn fetch(id: u32) -> Result<String, CallError> {
    tokio::task::yield_now().await;
    if id == 0 {
        Err(CallError::Downstream("not found"))?;
    }
    Ok(format!("item-{id}"))
}

#[tokio::test]
async fn an_async_fn_is_guarded_and_its_future_is_send() {
    let handle = tokio::spawn(fetch(7));
    assert_eq!(handle.await.unwrap(), Ok("item-7".to_owned()));
    assert_eq!(fetch(0).await, Err(CallError::Downstream("not found")));
    let metrics = Registry::global().circuit_breaker("shapes-async").metrics();
    assert_eq!(metrics.number_of_successful_calls(), 1);
    assert_eq!(metrics.number_of_failed_calls(), 1);
}

struct Inventory;

#[bulkhead(name = "shapes-impl")]
impl Inventory {
    // Neither returns a `Result`: left unguarded, as a constructor or a getter should be.
    fn new() -> Self {
        Inventory
    }

    fn shelves(&self) -> usize {
        3
    }

    fn reserve(&self, qty: u32) -> Result<u32, CallError> {
        Ok(qty)
    }

    #[circuit_breaker(name = "shapes-impl")]
    async fn release(&self, qty: u32) -> Result<u32, CallError> {
        Ok(qty)
    }
}

#[tokio::test]
async fn an_impl_block_guards_every_method() {
    assert_eq!(Inventory::new().shelves(), 3);
    assert_eq!(Inventory.reserve(2), Ok(2));
    assert_eq!(Inventory.release(3).await, Ok(3));
    let registry = Registry::global();
    assert_eq!(
        registry.bulkhead("shapes-impl").metrics().permitted_calls(),
        2
    );
    assert_eq!(
        registry
            .circuit_breaker("shapes-impl")
            .metrics()
            .number_of_successful_calls(),
        1
    );
}

#[async_trait::async_trait]
trait Store {
    async fn load(&self, key: u32) -> Result<u32, CallError>;
}

struct Memory;

#[async_trait::async_trait]
impl Store for Memory {
    #[bulkhead(name = "shapes-async-trait")]
    async fn load(&self, key: u32) -> Result<u32, CallError> {
        tokio::task::yield_now().await;
        Ok(key * 10)
    }
}

struct Disk;

#[bulkhead(name = "shapes-async-trait-outer")]
#[async_trait::async_trait]
impl Store for Disk {
    async fn load(&self, key: u32) -> Result<u32, CallError> {
        Ok(key + 1)
    }
}

#[tokio::test]
async fn async_trait_methods_guard_the_inner_future() {
    let store: Box<dyn Store + Send + Sync> = Box::new(Memory);
    let load = store.load(4);
    // Building the future takes no permit: the guard is inside it.
    let bulkhead = Registry::global().bulkhead("shapes-async-trait");
    assert_eq!(bulkhead.metrics().permitted_calls(), 0);
    assert_eq!(load.await, Ok(40));
    assert_eq!(bulkhead.metrics().permitted_calls(), 1);
    assert_eq!(Disk.load(1).await, Ok(2));
    assert_eq!(
        Registry::global()
            .bulkhead("shapes-async-trait-outer")
            .metrics()
            .permitted_calls(),
        1
    );
}

#[bulkhead(name = "shapes-instrumented")]
#[tracing::instrument(level = "debug")]
fn instrumented(x: u32) -> Result<u32, CallError> {
    Ok(x)
}

#[tracing::instrument(level = "debug")]
#[circuit_breaker(name = "shapes-instrumented-async")]
async fn instrumented_async(x: u32) -> Result<u32, CallError> {
    Ok(x)
}

#[tokio::test]
async fn other_attributes_stack_in_either_order() {
    assert_eq!(instrumented(1), Ok(1));
    assert_eq!(instrumented_async(2).await, Ok(2));
}

fn cached_price(item: &str, rejected: Rejected) -> String {
    format!("cached price of {item} ({})", rejected.aspect())
}

#[circuit_breaker(name = "shapes-fallback", fallback = cached_price)]
fn price(item: &str) -> String {
    format!("fresh price of {item}")
}

#[test]
fn a_fallback_receives_the_arguments_and_the_rejection() {
    assert_eq!(price("book"), "fresh price of book");
    Registry::global()
        .circuit_breaker("shapes-fallback")
        .transition_to_forced_open_state();
    assert_eq!(price("book"), "cached price of book (circuit breaker)");
}

fn stale_stock(item: String, qty: u32, error: CallError) -> Result<u32, CallError> {
    match error {
        CallError::Rejected(_) => Ok(qty.min(1)),
        CallError::Downstream(why) => Err(CallError::Downstream(if item.is_empty() {
            why
        } else {
            "recovered"
        })),
    }
}

#[circuit_breaker(name = "shapes-fallback-error", fallback = stale_stock, fallback_on_error = true)]
fn stock(item: String, qty: u32) -> Result<u32, CallError> {
    if qty == 0 {
        return Err(CallError::Downstream("empty"));
    }
    drop(item); // the body consumes its argument; the fallback gets a clone
    Ok(qty)
}

#[test]
fn a_fallback_on_error_handles_failures_and_rejections_after_they_are_recorded() {
    assert_eq!(stock("book".into(), 3), Ok(3));
    assert_eq!(
        stock("book".into(), 0),
        Err(CallError::Downstream("recovered"))
    );
    let breaker = Registry::global().circuit_breaker("shapes-fallback-error");
    assert_eq!(
        breaker.metrics().number_of_failed_calls(),
        1,
        "recorded before the fallback"
    );
    breaker.transition_to_forced_open_state();
    assert_eq!(stock("book".into(), 5), Ok(1));
}
