//! Attribute macros of `resilience`: `#[bulkhead]`, `#[rate_limiter]`, `#[retry]`,
//! `#[circuit_breaker]` and `#[time_limiter]`.
//!
//! Use them through `resilience-runtime`, which re-exports them: generated code names only
//! `::resilience_runtime::__private` and `::core` (or the path given with `crate = "path"`),
//! so a service depends on `resilience-runtime` alone.

mod args;
mod expand;
mod stack;

use proc_macro::TokenStream;

use args::Kind;

/// Runs a function (or every method of an impl block that returns a `Result`) through the
/// bulkhead `name`: at most
/// `max_concurrent_calls` calls at once, the others wait up to `max_wait_duration` and are
/// then rejected with `Rejected::BulkheadFull`.
///
/// | argument | meaning |
/// |---|---|
/// | `name = "orders"` | the bulkhead instance (required), configured in the registry; a string literal or a `&str` constant (`name = ORDERS`) |
/// | `fallback = path` | called with the same arguments and the `Rejected` when the call is refused; its return type is the function's (an `async fn`'s fallback is an `async fn`; in a method, a bare name means `Self::name`) |
/// | `fallback_on_error = true` | the fallback also handles the function's `Err`: it then receives `E` (a rejection converted with `From<Rejected>`) after the outcome is recorded; arguments taken by value are cloned before the call, so they must be `Clone` |
/// | `registry = path` | the `static` `Registry` this function uses (a `LazyLock<Registry>`, say), given once per function; without it, the registry in scope (`Registry::scope`), else the global one |
/// | `crate = "path"` | where `resilience_runtime` is, if the dependency is renamed |
///
/// The function keeps its signature. Without a fallback it returns `Result<T, E>` with
/// `E: From<Rejected>`, and a rejection becomes `Err(E::from(rejected))`. A sync function waits
/// for a permit by blocking its thread (no tokio runtime needed); an `async fn` waits
/// asynchronously, and its future stays `Send` when the body is.
///
/// Stacked with `#[circuit_breaker]` in either order, the two make one guarded call whose
/// order comes from the registry's precedence: the bulkhead runs first by default, so the
/// breaker never sees its rejections.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{bulkhead, circuit_breaker, BulkheadConfig, Registry, Rejected};
///
/// #[derive(Debug)]
/// enum OrderError { Rejected(Rejected), OutOfStock }
/// impl From<Rejected> for OrderError {
///     fn from(r: Rejected) -> Self { OrderError::Rejected(r) }
/// }
///
/// #[circuit_breaker(name = "orders")]
/// #[bulkhead(name = "orders")]
/// fn create_order(qty: u32) -> Result<u64, OrderError> {
///     if qty == 0 {
///         return Err(OrderError::OutOfStock);
///     }
///     Ok(1000 + u64::from(qty))
/// }
///
/// Registry::global().configure_bulkhead("orders", BulkheadConfig::builder()
///     .max_concurrent_calls(80)
///     .max_wait_duration(Duration::from_millis(500))
///     .build()?)?;
/// assert_eq!(create_order(2).unwrap(), 1002);
/// assert!(matches!(create_order(0), Err(OrderError::OutOfStock)));
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
///
/// Without the macro, the same function reads:
///
/// ```
/// # use resilience_runtime::{CallOutcome, Guard, PlanCache, Registry, Rejected};
/// # #[derive(Debug)] enum OrderError { Rejected(Rejected), OutOfStock }
/// # impl From<Rejected> for OrderError { fn from(r: Rejected) -> Self { OrderError::Rejected(r) } }
/// fn create_order(qty: u32) -> Result<u64, OrderError> {
///     static SITE: PlanCache =
///         PlanCache::new(&[Guard::circuit_breaker("orders"), Guard::bulkhead("orders")]);
///     let plan = SITE.get(Registry::global()); // re-resolved only when the registry changes
///     let result = match plan.enter() {
///         // bulkhead acquired, breaker asked: run the body, record its outcome
///         Ok(entered) => entered.run(
///             move || if qty == 0 { Err(OrderError::OutOfStock) } else { Ok(1000 + u64::from(qty)) },
///             CallOutcome::of_result,
///         ),
///         Err(rejected) => Err(OrderError::from(rejected)),
///     };
///     result
/// }
/// # assert_eq!(create_order(1).unwrap(), 1001);
/// ```
#[proc_macro_attribute]
pub fn bulkhead(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::Bulkhead, args.into(), item.into()).into()
}

/// Runs a function (or every method of an impl block that returns a `Result`) through the
/// rate limiter `name`: at most `limit_for_period` calls per `limit_refresh_period`; a call
/// that finds no permission left waits for a later cycle up to `timeout_duration` (zero by
/// default: refused at once) and is then refused with `Rejected::RequestNotPermitted`, which
/// carries the time until a permission is free (`retry_after`).
///
/// | argument | meaning |
/// |---|---|
/// | `name = "payments"` | the rate limiter instance (required), configured in the registry; a string literal or a `&str` constant (`name = ORDERS`) |
/// | `fallback = path` | called with the same arguments and the `Rejected` when the call is refused (see `#[bulkhead]`) |
/// | `fallback_on_error = true` | the fallback also handles the function's `Err`, receiving `E` (see `#[bulkhead]`) |
/// | `registry = path` | the `static` `Registry` this function uses (a `LazyLock<Registry>`, say), given once per function; without it, the registry in scope (`Registry::scope`), else the global one |
/// | `crate = "path"` | where `resilience_runtime` is, if the dependency is renamed |
///
/// Stacked with `#[bulkhead]` and `#[circuit_breaker]` in any order, it runs inside the
/// bulkhead and outside the breaker by default (precedence 200): a call the bulkhead refuses
/// takes no permission, and a refusal by the rate limiter releases the bulkhead's permit at
/// once and never reaches the breaker. A permission is spent when it is taken: a call that
/// then fails or panics does not give it back (Resilience4j's semantics).
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{rate_limiter, RateLimiterConfig, Registry, Rejected};
///
/// #[derive(Debug)]
/// enum PayError { Rejected(Rejected) }
/// impl From<Rejected> for PayError {
///     fn from(r: Rejected) -> Self { PayError::Rejected(r) }
/// }
///
/// #[rate_limiter(name = "payments")]
/// fn pay(cents: u64) -> Result<u64, PayError> {
///     Ok(cents)
/// }
///
/// Registry::global().configure_rate_limiter("payments", RateLimiterConfig::builder()
///     .limit_for_period(2)
///     .limit_refresh_period(Duration::from_secs(60))
///     .build()?)?;
/// assert!(pay(1).is_ok());
/// assert!(pay(2).is_ok());
/// match pay(3) {
///     Err(PayError::Rejected(Rejected::RequestNotPermitted { retry_after, .. })) => {
///         assert!(retry_after <= Duration::from_secs(60));
///     }
///     other => panic!("expected a refusal, got {other:?}"),
/// }
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[proc_macro_attribute]
pub fn rate_limiter(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::RateLimiter, args.into(), item.into()).into()
}

/// Runs a function (or every method of an impl block that returns a `Result`) through the
/// circuit breaker `name`:
/// calls are refused with `Rejected::CallNotPermitted` while the breaker is open, and each
/// completed call is recorded as a success, a failure, or neither.
///
/// | argument | meaning |
/// |---|---|
/// | `name = "payments"` | the breaker instance (required), configured in the registry; a string literal or a `&str` constant (`name = ORDERS`) |
/// | `ignore = path` | `fn(&E) -> bool`: errors that count as neither success nor failure (a client's mistake) |
/// | `record = path` | `fn(&E) -> bool`: errors that count as failures; any other error counts as a success (Resilience4j's `recordExceptions`). Default: every `Err` is a failure |
/// | `fallback = path` | called with the same arguments and the `Rejected` when the call is refused |
/// | `fallback_on_error = true` | the fallback also handles the function's `Err`, receiving `E` (see `#[bulkhead]`) |
/// | `registry = path` | the `static` `Registry` this function uses (a `LazyLock<Registry>`, say), given once per function; without it, the registry in scope (`Registry::scope`), else the global one |
/// | `crate = "path"` | where `resilience_runtime` is, if the dependency is renamed |
///
/// A rejection by another guard (a full bulkhead) is not a failure of the call: the breaker
/// records it only if its configuration says `record_rejections(true)`. Panics and futures
/// dropped mid-call are not recorded.
///
/// ```
/// use resilience_runtime::{circuit_breaker, CircuitState, Registry, Rejected};
///
/// #[derive(Debug)]
/// enum HttpError { Rejected(Rejected), Status(u16) }
/// impl From<Rejected> for HttpError {
///     fn from(r: Rejected) -> Self { HttpError::Rejected(r) }
/// }
///
/// fn is_client_error(e: &HttpError) -> bool {
///     matches!(e, HttpError::Status(400..=499))
/// }
///
/// #[circuit_breaker(name = "search", ignore = is_client_error)]
/// async fn search(status: u16) -> Result<String, HttpError> {
///     match status {
///         200 => Ok("results".into()),
///         s => Err(HttpError::Status(s)),
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let _ = search(404).await; // ignored
/// let _ = search(503).await; // a failure
/// let metrics = Registry::global().circuit_breaker("search").metrics();
/// assert_eq!(metrics.number_of_failed_calls(), 1);
/// assert_eq!(metrics.number_of_buffered_calls(), 1);
/// assert_eq!(Registry::global().circuit_breaker("search").state(), CircuitState::Closed);
/// # });
/// ```
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::CircuitBreaker, args.into(), item.into()).into()
}

/// Runs a function (or every method of an impl block that returns a `Result`) through the
/// retry `name`: a call that fails is made again, up to the retry's `max_attempts`, waiting
/// between attempts as its configuration says.
///
/// | argument | meaning |
/// |---|---|
/// | `name = "inventory"` | the retry instance (required), configured in the registry; a string literal or a `&str` constant (`name = ORDERS`) |
/// | `retry_on = path` | `fn(&E) -> bool`: the errors that are retried. Default: every `Err` |
/// | `fallback = path` | called with the same arguments and the `Rejected` when the call is refused (see `#[bulkhead]`) |
/// | `fallback_on_error = true` | the fallback also handles the function's `Err`, receiving `E` (see `#[bulkhead]`) |
/// | `registry = path` | the `static` `Registry` this function uses (a `LazyLock<Registry>`, say), given once per function; without it, the registry in scope (`Registry::scope`), else the global one |
/// | `crate = "path"` | where `resilience_runtime` is, if the dependency is renamed |
///
/// Stacked with the other aspects in any order, it runs at precedence 300 by default: inside
/// the bulkhead and the rate limiter (which admit the call once, so a retry never adds to the
/// load they shed) and outside the circuit breaker and the time limiter (each attempt is
/// recorded by the breaker and bounded by the time limiter). A refusal by a guard inside the
/// retry ends the call unless the retry's `retry_on_rejection` is set; a time-out is retried.
///
/// Each attempt runs the body again: arguments taken by reference are reused, arguments taken
/// by value are cloned per attempt (their type must be `Clone`), and the function keeps the
/// originals, so a fallback still receives them. A sync function sleeps its thread between
/// attempts; an `async fn` sleeps on the timer, and dropping its future ends the call.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// use resilience_runtime::{retry, Registry, Rejected, RetryConfig};
///
/// #[derive(Debug, PartialEq)]
/// enum InvError { Busy, Gone, Rejected(Rejected) }
/// impl From<Rejected> for InvError {
///     fn from(r: Rejected) -> Self { InvError::Rejected(r) }
/// }
///
/// fn is_transient(e: &InvError) -> bool {
///     matches!(e, InvError::Busy)
/// }
///
/// static ATTEMPTS: AtomicU32 = AtomicU32::new(0);
///
/// #[retry(name = "inventory", retry_on = is_transient)]
/// fn reserve(sku: String) -> Result<String, InvError> {
///     match ATTEMPTS.fetch_add(1, Ordering::SeqCst) {
///         0 => Err(InvError::Busy),
///         _ => Ok(format!("hold:{sku}")),
///     }
/// }
///
/// Registry::global().configure_retry("inventory", RetryConfig::builder()
///     .max_attempts(3)
///     .wait_duration(Duration::from_millis(1))
///     .build()?)?;
/// assert_eq!(reserve("book".into()), Ok("hold:book".into()));
/// assert_eq!(ATTEMPTS.load(Ordering::SeqCst), 2);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::Retry, args.into(), item.into()).into()
}

/// Bounds an `async fn` (or every async method of an impl block that returns a `Result`)
/// with the time limiter `name`: a call that takes longer than its `timeout_duration` is cut
/// off (its future dropped, releasing every guard inside it) and ends with
/// `Rejected::TimedOut`.
///
/// | argument | meaning |
/// |---|---|
/// | `name = "inventory"` | the time limiter instance (required), configured in the registry; a string literal or a `&str` constant (`name = ORDERS`) |
/// | `fallback = path` | called with the same arguments and the `Rejected` when the call is refused or cut off (its arguments are cloned before the call: it needs them after the body took them) |
/// | `fallback_on_error = true` | the fallback also handles the function's `Err`, receiving `E` (see `#[bulkhead]`) |
/// | `registry = path` | the `static` `Registry` this function uses (a `LazyLock<Registry>`, say), given once per function; without it, the registry in scope (`Registry::scope`), else the global one |
/// | `crate = "path"` | where `resilience_runtime` is, if the dependency is renamed |
///
/// It runs at precedence 500 by default, inside everything else: each attempt of a retry is
/// bounded on its own, and a circuit breaker outside records a time-out as a failure (whatever
/// its `record_rejections` says: a time-out means the dependency was too slow).
///
/// Only on an `async fn`: a thread cannot be cancelled, so on a sync function it is a compile
/// error. Bound a sync call with a bulkhead's `max_wait_duration` and a timeout inside the body.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{time_limiter, Registry, Rejected, TimeLimiterConfig};
///
/// #[derive(Debug)]
/// enum InvError { Rejected(Rejected) }
/// impl From<Rejected> for InvError {
///     fn from(r: Rejected) -> Self { InvError::Rejected(r) }
/// }
///
/// #[time_limiter(name = "lookup")]
/// async fn lookup(sku: u32) -> Result<u32, InvError> {
///     tokio::time::sleep(Duration::from_secs(60)).await;
///     Ok(sku)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), resilience_runtime::ConfigError> {
/// Registry::global().configure_time_limiter("lookup", TimeLimiterConfig::builder()
///     .timeout_duration(Duration::from_millis(200))
///     .build()?)?;
/// match lookup(7).await {
///     Err(InvError::Rejected(Rejected::TimedOut { timeout, .. })) => {
///         assert_eq!(timeout, Duration::from_millis(200));
///     }
///     other => panic!("expected a time-out, got {other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[proc_macro_attribute]
pub fn time_limiter(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::attribute(Kind::TimeLimiter, args.into(), item.into()).into()
}

#[cfg(test)]
mod snapshots;
