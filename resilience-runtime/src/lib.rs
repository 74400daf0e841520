// The README is the crate's documentation, its examples tested; one of them loads a file, so
// without the `toml` feature the crate documents itself in one line instead.
#![cfg_attr(feature = "toml", doc = include_str!("../README.md"))]
#![cfg_attr(
    not(feature = "toml"),
    doc = "Fault-tolerance guards run in a declared order; see the README."
)]
// Denied everywhere but six audited spots, each allowed item by item with a `// SAFETY:` note,
// their unit tests run under Miri (`scripts/miri.sh`): the breaker's spin lock
// (`sync::SpinLock`), the coarse clock's `libc` calls (`clock`), the registry in scope
// (`registry::scope`), a call site's one-word plan handle (`plan_cache`), the frames of the
// call chain (`call::chain`) and a call that owns its plan (`call::owned`).
#![deny(unsafe_code)]
// docs.rs marks each item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The task pages of `docs/`, whose examples are tested as the README's are.
#[cfg(all(doctest, feature = "toml"))]
mod docs {
    #[doc = include_str!("../docs/stacking.md")]
    struct Stacking;
    #[doc = include_str!("../docs/configuration.md")]
    struct Configuration;
    #[doc = include_str!("../docs/testing.md")]
    struct Testing;
    #[doc = include_str!("../docs/observability.md")]
    struct Observability;
    #[doc = include_str!("../docs/http.md")]
    struct Http;
    #[doc = include_str!("../docs/runtime-by-hand.md")]
    struct RuntimeByHand;
    #[doc = include_str!("../docs/overload-drill.md")]
    struct OverloadDrill;
    #[doc = include_str!("../docs/development.md")]
    struct Development;
    #[cfg(feature = "redis")]
    #[doc = include_str!("../docs/fleet.md")]
    struct Fleet;
}

mod aspect;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod axum;
mod blocking;
pub mod bulkhead;
mod call;
mod call_site;
pub mod circuit_breaker;
mod clock;
mod config_debug;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod document;
mod error;
pub mod fault;
pub mod fleet;
mod gate;
pub mod hedge;
#[cfg(feature = "metrics")]
mod metrics_export;
mod name;
mod outcome;
mod plan;
mod plan_cache;
pub mod rate_limiter;
mod recent;
mod registry;
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub mod reqwest;
pub mod retry;
#[cfg(any(feature = "tower", feature = "reqwest"))]
mod shed;
mod slot;
mod subscribers;
mod sync;
pub mod time_limiter;
mod timer;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
#[cfg(feature = "tracing")]
mod trace;
mod wrapper;

pub use aspect::Aspect;
pub use blocking::allow_blocking;
pub use bulkhead::{
    AdaptiveEstimates, AdaptiveLimit, AdaptiveSettings, Bulkhead, BulkheadConfig,
    BulkheadConfigBuilder, BulkheadEvent, BulkheadMetrics, BulkheadPermit, LimitAlgorithm,
};
pub use call::Entered;
pub use call_site::{CallSite, UnconfiguredGuard, Validation};
pub use circuit_breaker::{
    CircuitBreaker, CircuitBreakerConfig, CircuitBreakerConfigBuilder, CircuitBreakerEvent,
    CircuitBreakerMetrics, CircuitPermit, CircuitState, IllegalStateTransition, OpenStateBackoff,
    SlidingWindow, SubscriptionId,
};
pub use clock::{Clock, ManualClock};
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use document::{Changes, ConfigDocument, DocumentError};
pub use error::{ConfigError, InjectedError, Rejected};
pub use fault::{FaultConfig, FaultConfigBuilder, FaultEvent, FaultInjector, FaultMetrics};
pub use hedge::{Hedge, HedgeConfig, HedgeConfigBuilder, HedgeEvent, HedgeMetrics};
pub use name::Name;
pub use outcome::CallOutcome;
pub use plan::{Guard, Plan, ReentrancyPolicy};
pub use plan_cache::{CachedPlan, PlanCache};
pub use rate_limiter::{
    RateLimiter, RateLimiterConfig, RateLimiterConfigBuilder, RateLimiterEvent, RateLimiterMetrics,
};
pub use recent::RecentEvent;
pub use registry::{GuardInstance, Registry, WithRegistry};
pub use retry::{Retry, RetryBudget, RetryConfig, RetryConfigBuilder, RetryEvent, RetryMetrics};
pub use time_limiter::{
    TimeLimiter, TimeLimiterConfig, TimeLimiterConfigBuilder, TimeLimiterEvent, TimeLimiterMetrics,
};

/// A process-wide unique id for a guard instance, used to recognise re-entry.
pub(crate) fn next_instance_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[doc = include_str!("attributes/bulkhead.md")]
#[doc(inline)]
pub use resilience_macros::bulkhead;
#[doc = include_str!("attributes/circuit_breaker.md")]
#[doc(inline)]
pub use resilience_macros::circuit_breaker;
#[doc = include_str!("attributes/hedge.md")]
#[doc(inline)]
pub use resilience_macros::hedge;
#[doc = include_str!("attributes/rate_limiter.md")]
#[doc(inline)]
pub use resilience_macros::rate_limiter;
#[doc = include_str!("attributes/retry.md")]
#[doc(inline)]
pub use resilience_macros::retry;
#[doc = include_str!("attributes/time_limiter.md")]
#[doc(inline)]
pub use resilience_macros::time_limiter;

/// The reference execution of a plan, for the differential tests. Not a public API.
#[doc(hidden)]
pub use call::reference as __reference;

/// What the attribute macros expand to. Not a public API: names here change without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::call::{
        run_guarded, run_wrapped, run_wrapped_async, run_wrapped_future, Entered, GuardedCall,
    };
    pub use crate::call_site::{CallSite, CallSiteEntry};
    pub use crate::error::Rejected;
    pub use crate::outcome::CallOutcome;
    pub use crate::plan::{Guard, Plan};
    pub use crate::plan_cache::SitePlan;
    pub use crate::registry::Registry;
    pub use inventory;
    use std::time::Duration;

    /// How a guarded function's `Result` counts for its guards: `Ok` is a success; an `Err`
    /// is ignored if `ignore` says so, else overload if `overload` says so, else a failure if
    /// `record` says so, else a success (Resilience4j's `ignoreExceptions` /
    /// `recordExceptions`, and the bulkhead's `overload`).
    #[inline]
    pub fn classify<T, E>(
        result: &Result<T, E>,
        ignore: impl FnOnce(&E) -> bool,
        overload: impl FnOnce(&E) -> bool,
        record: impl FnOnce(&E) -> bool,
    ) -> CallOutcome {
        match result {
            Ok(_) => CallOutcome::Success,
            Err(e) if ignore(e) => CallOutcome::Ignored,
            Err(e) if overload(e) => CallOutcome::Overloaded,
            Err(e) if record(e) => CallOutcome::Failure,
            Err(_) => CallOutcome::Success,
        }
    }

    /// Whether a guarded function's result is an `Err` (a failure for its time limiter and,
    /// without `retry_on`, one its retry retries).
    #[inline]
    pub fn is_err<T, E>(result: &Result<T, E>) -> bool {
        result.is_err()
    }

    /// Whether a retry retries `result`: an `Err` that `retry_on` accepts.
    #[inline]
    pub fn retry_on<T, E>(result: &Result<T, E>, retry_on: impl FnOnce(&E) -> bool) -> bool {
        match result {
            Ok(_) => false,
            Err(e) => retry_on(e),
        }
    }

    /// The least wait before the next attempt that `result` asks for: `retry_after` of an
    /// `Err` (`#[retry(retry_after = path)]`).
    #[inline]
    pub fn retry_after<T, E>(
        result: &Result<T, E>,
        retry_after: impl FnOnce(&E) -> Option<Duration>,
    ) -> Option<Duration> {
        match result {
            Ok(_) => None,
            Err(e) => retry_after(e),
        }
    }

    /// An async fallback called with its arguments in one tuple (the guarded function's, then
    /// the refusal or the error), for the attribute macros: a fallback that takes others is
    /// reported at the fallback as the signature it must have ("expected function signature
    /// `fn(Path<u32>, Rejected) -> _`"), not as a mismatch inside the guarded function's
    /// signature with rustc's suggestions for the expanded call.
    pub trait AsyncFallback<Args> {
        /// The fallback's future.
        type Future: std::future::Future;
        /// Calls the fallback.
        fn call_fallback(self, args: Args) -> Self::Future;
    }

    macro_rules! async_fallback {
        ($($arg:ident),+) => {
            impl<F, Fut, $($arg),+> AsyncFallback<($($arg,)+)> for F
            where
                F: FnOnce($($arg),+) -> Fut,
                Fut: std::future::Future,
            {
                type Future = Fut;
                #[inline]
                #[allow(non_snake_case)]
                fn call_fallback(self, ($($arg,)+): ($($arg,)+)) -> Fut {
                    self($($arg),+)
                }
            }
        };
    }
    async_fallback!(A1);
    async_fallback!(A1, A2);
    async_fallback!(A1, A2, A3);
    async_fallback!(A1, A2, A3, A4);
    async_fallback!(A1, A2, A3, A4, A5);
    async_fallback!(A1, A2, A3, A4, A5, A6);
    async_fallback!(A1, A2, A3, A4, A5, A6, A7);
    async_fallback!(A1, A2, A3, A4, A5, A6, A7, A8);
    async_fallback!(A1, A2, A3, A4, A5, A6, A7, A8, A9);
    async_fallback!(A1, A2, A3, A4, A5, A6, A7, A8, A9, A10);
    async_fallback!(A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11);
    async_fallback!(A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12);

    /// No result asks for a wait of its own (a `#[retry]` without `retry_after`).
    #[inline]
    pub fn no_retry_after<R>(_: &R) -> Option<Duration> {
        None
    }

    /// A clone of a by-value argument for one more attempt of a `#[retry]` function.
    #[inline]
    pub fn again<T: Again>(value: &T) -> T {
        value.again()
    }

    /// An argument a retried function takes by value: every `T: Clone`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is taken by value, and `#[retry]` or `#[hedge]` runs the body again with a clone of it",
        label = "not `Clone`: each attempt needs its own",
        note = "implement or derive `Clone` for `{Self}`, or take the argument by reference"
    )]
    pub trait Again {
        /// The value for the next attempt.
        fn again(&self) -> Self;
    }

    impl<T: Clone> Again for T {
        #[inline]
        fn again(&self) -> Self {
            self.clone()
        }
    }

    /// The error a rejection becomes when the function returns `Result<T, E>`.
    #[inline]
    pub fn rejection_into<E: FromRejected>(rejected: Rejected) -> E {
        E::from_rejected(rejected)
    }

    /// An error type that can carry a rejection: every `E: From<Rejected>`.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot carry a rejection of a guarded call",
        label = "the error type of this guarded function",
        note = "implement `From<resilience_runtime::Rejected>` for `{Self}`, or name a fallback: `fallback = on_rejected`"
    )]
    pub trait FromRejected {
        /// Converts the rejection.
        fn from_rejected(rejected: Rejected) -> Self;
    }

    impl<E: From<Rejected>> FromRejected for E {
        #[inline]
        fn from_rejected(rejected: Rejected) -> Self {
            E::from(rejected)
        }
    }
}
