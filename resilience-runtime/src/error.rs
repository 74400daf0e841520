//! The two error types of the runtime: [`Rejected`] (a guard refused a call) and
//! [`ConfigError`] (a configuration was refused).

use std::fmt;
use std::time::Duration;

use crate::aspect::Aspect;
use crate::circuit_breaker::state::CircuitState;
use crate::name::Name;

/// A guard refused to run a call, or cut it off. This is not a failure of the guarded
/// function: the function was never entered (or, for [`Rejected::Reentrant`], entered a guard
/// it already held), except for [`Rejected::TimedOut`], which ends a call that took too long.
///
/// A guarded function returns `Result<T, E>` with `E: From<Rejected>`, so a rejection reaches
/// the caller as the function's own error type. With the cargo feature `axum`, a `Rejected` is
/// also an `axum` response (`impl IntoResponse`): `503 Service Unavailable` with `Retry-After`,
/// `429` from a rate limiter, `504` for a time-out (module `axum`). Without the feature,
/// `rejected.into_response()` does not exist: add `features = ["axum"]` to the dependency.
///
/// ```
/// use resilience_runtime::{Bulkhead, BulkheadConfig, Rejected};
///
/// let bulkhead = Bulkhead::new("orders", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
/// let _held = bulkhead.try_acquire()?;
/// match bulkhead.try_acquire() {
///     Err(Rejected::BulkheadFull { name, .. }) => assert_eq!(name, "orders"),
///     other => panic!("expected a full bulkhead, got {other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
// Found by a search for `into_response` in the docs, which lead here and to the feature: the
// error of a call made without it (rustc's "no method named `into_response`") cannot be
// annotated, the trait being axum's.
#[doc(alias = "into_response")]
#[doc(alias = "IntoResponse")]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// The bulkhead had no free permit within its `max_wait_duration`.
    #[non_exhaustive]
    BulkheadFull {
        /// The bulkhead instance.
        name: Name,
        /// How long the caller waited for a permit before giving up.
        waited: Duration,
    },
    /// The circuit breaker is open (or forced open, or out of half-open probes).
    #[non_exhaustive]
    CallNotPermitted {
        /// The circuit breaker instance.
        name: Name,
        /// The breaker's state when it refused the call.
        state: CircuitState,
        /// How long until the breaker lets probe calls through, as of the refusal: the rest of
        /// the wait of an open breaker. `None` when no such time is known: a forced-open
        /// breaker (refuses until a manual transition) or a half-open one whose probes are all
        /// taken (it decides when they are recorded).
        retry_after: Option<Duration>,
    },
    /// The rate limiter had no permission left in this cycle, and none of a later cycle within
    /// its `timeout_duration`. Nothing was consumed.
    #[non_exhaustive]
    RequestNotPermitted {
        /// The rate limiter instance.
        name: Name,
        /// How long until the earliest permission not yet reserved by a waiting caller becomes
        /// available, as of the refusal.
        retry_after: Duration,
    },
    /// The time limiter's `timeout_duration` passed before the call completed: its future was
    /// dropped (which released every guard inside it). Unlike the other rejections this one
    /// says the dependency was too slow, so a circuit breaker outside the time limiter records
    /// it as a failure, and a retry outside it retries it.
    #[non_exhaustive]
    TimedOut {
        /// The time limiter instance.
        name: Name,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// A sync guarded call would have had to wait (for a full bulkhead's permit, for a rate
    /// limiter's next cycle) on a current-thread tokio runtime, where blocking the thread
    /// stalls every task, the one that would let the call in included. It was refused at once
    /// instead of waiting. Make the function `async`, or call it on a multi-thread runtime or
    /// a plain thread; see [`allow_blocking`](crate::allow_blocking) for a `spawn_blocking`
    /// thread.
    #[non_exhaustive]
    WouldBlock {
        /// The kind of guard that would have made the call wait.
        aspect: Aspect,
        /// Its instance.
        name: Name,
    },
    /// The call re-entered a guard already held on its call chain and the registry's
    /// [`ReentrancyPolicy`](crate::ReentrancyPolicy) is `Reject`.
    #[non_exhaustive]
    Reentrant {
        /// The kind of guard re-entered.
        aspect: Aspect,
        /// The instance re-entered.
        name: Name,
    },
    /// A fault injected by the registry's [fault injection](crate::FaultConfig) for `name`: a
    /// refusal (`error` is `None`), or the injected error, which the guards around count as a
    /// failure of the call, as a time-out. [`injected_error`](Rejected::injected_error) gives
    /// the error back, for a `From<Rejected>` to turn into the error the dependency would have
    /// returned.
    #[non_exhaustive]
    Injected {
        /// The instance name the faults are configured for.
        name: Name,
        /// The injected error; `None` for an injected refusal.
        error: Option<InjectedError>,
    },
    /// The registry [requires every name to be configured](crate::Registry::set_require_configured)
    /// and this call's guard `name` was not: no guard of the call was entered, and the call
    /// did not run. A deployment mistake, not an overload: configure the name at startup, and
    /// call [`Registry::validate`](crate::Registry::validate) in `main` to catch it before
    /// the first call.
    #[non_exhaustive]
    Unconfigured {
        /// The kind of guard without a configuration.
        aspect: Aspect,
        /// Its instance name.
        name: Name,
    },
}

// Every guarded call moves a `Result<_, Rejected>`: a destructor in it (an `Arc` of an
// injected error was one) put drop flags and drop calls on every async call's path
// (BENCHMARKS.md, "Fault injection, in a call without faults").
const _: () = assert!(
    !std::mem::needs_drop::<Rejected>(),
    "a Rejected must not need dropping"
);

impl Rejected {
    /// The kind of guard that refused the call.
    pub fn aspect(&self) -> Aspect {
        match self {
            Rejected::BulkheadFull { .. } => Aspect::Bulkhead,
            Rejected::CallNotPermitted { .. } => Aspect::CircuitBreaker,
            Rejected::RequestNotPermitted { .. } => Aspect::RateLimiter,
            Rejected::TimedOut { .. } => Aspect::TimeLimiter,
            Rejected::Injected { .. } => Aspect::Fault,
            Rejected::WouldBlock { aspect, .. }
            | Rejected::Reentrant { aspect, .. }
            | Rejected::Unconfigured { aspect, .. } => *aspect,
        }
    }

    /// The name of the instance that refused the call.
    pub fn name(&self) -> &Name {
        match self {
            Rejected::BulkheadFull { name, .. }
            | Rejected::CallNotPermitted { name, .. }
            | Rejected::RequestNotPermitted { name, .. }
            | Rejected::TimedOut { name, .. }
            | Rejected::Injected { name, .. }
            | Rejected::WouldBlock { name, .. }
            | Rejected::Reentrant { name, .. }
            | Rejected::Unconfigured { name, .. } => name,
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::BulkheadFull { name, waited } => write!(
                f,
                "bulkhead `{name}` is full (waited {} ms for a permit)",
                waited.as_millis()
            ),
            Rejected::CallNotPermitted {
                name,
                state,
                retry_after,
            } => {
                write!(f, "circuit breaker `{name}` does not permit calls ({state}")?;
                match retry_after {
                    Some(wait) => write!(f, ", {} ms left to wait)", wait.as_millis()),
                    None => f.write_str(")"),
                }
            }
            Rejected::RequestNotPermitted { name, retry_after } => write!(
                f,
                "rate limiter `{name}` refused the call (a permission is free in {} ms)",
                retry_after.as_millis()
            ),
            Rejected::TimedOut { name, timeout } => write!(
                f,
                "time limiter `{name}` cut the call off after {timeout:?}"
            ),
            Rejected::WouldBlock { aspect, name } => write!(
                f,
                "{aspect} `{name}` would make this sync call wait on a current-thread tokio \
                 runtime, stalling every task on it: make the function async, or call it on a \
                 multi-thread runtime or a plain thread"
            ),
            Rejected::Reentrant { aspect, name } => write!(
                f,
                "{aspect} `{name}` is already held on this call chain and re-entry is rejected"
            ),
            Rejected::Injected { name, error: None } => {
                write!(f, "fault `{name}`: a refusal injected")
            }
            Rejected::Injected {
                name,
                error: Some(error),
            } => write!(f, "fault `{name}`: an error injected: {error}"),
            Rejected::Unconfigured { aspect, name } => write_unconfigured(f, *aspect, name),
        }
    }
}

impl Rejected {
    /// The error a [fault](crate::FaultConfig) injected, if this is one: for a
    /// `From<Rejected>` to give back the error the dependency would have returned.
    ///
    /// ```
    /// use resilience_runtime::Rejected;
    ///
    /// #[derive(Debug)]
    /// struct Unavailable;
    /// impl std::fmt::Display for Unavailable {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("unavailable") }
    /// }
    /// impl std::error::Error for Unavailable {}
    ///
    /// enum OrderError { Unavailable, Rejected(Rejected) }
    /// impl From<Rejected> for OrderError {
    ///     fn from(r: Rejected) -> Self {
    ///         match r.injected_error().and_then(|e| e.downcast_ref::<Unavailable>()) {
    ///             Some(Unavailable) => OrderError::Unavailable,
    ///             None => OrderError::Rejected(r),
    ///         }
    ///     }
    /// }
    /// ```
    pub fn injected_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            Rejected::Injected {
                error: Some(error), ..
            } => Some(error.0),
            _ => None,
        }
    }

    /// Whether the rejection is a failure of the call for the guards around it: a time-out,
    /// an injected error. Any other is a refusal.
    pub(crate) fn is_failure(&self) -> bool {
        matches!(
            self,
            Rejected::TimedOut { .. } | Rejected::Injected { error: Some(_), .. }
        )
    }
}

/// An error [fault injection](crate::FaultConfig) made, carried by [`Rejected::Injected`]:
/// made once per configuration and kept for the life of the process (as instance names are),
/// so that a `Rejected` stays a value without a destructor, which every guarded call moves;
/// equal only to itself.
#[derive(Clone, Copy)]
pub struct InjectedError(&'static (dyn std::error::Error + Send + Sync));

impl InjectedError {
    /// Keeps `error` for the life of the process.
    pub(crate) fn new(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        InjectedError(Box::leak(error))
    }
}

impl InjectedError {
    /// The error, to downcast to the type that made it.
    pub fn error(&self) -> &'static (dyn std::error::Error + Send + Sync) {
        self.0
    }
}

impl PartialEq for InjectedError {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(self.0, other.0)
    }
}

impl Eq for InjectedError {}

impl fmt::Debug for InjectedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for InjectedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// What [`Rejected::Unconfigured`] says, for a name that need not be made a [`Name`].
fn write_unconfigured(out: &mut impl fmt::Write, aspect: Aspect, name: &str) -> fmt::Result {
    write!(
        out,
        "{aspect} `{name}` has no configuration, and the registry requires one \
         (`set_require_configured`): configure it at startup"
    )
}

/// The message of [`Rejected::Unconfigured`] for `aspect` `name`, without interning `name`
/// (a name the registry turns away is not kept: it may come from a request).
pub(crate) fn unconfigured_message(aspect: Aspect, name: &str) -> String {
    let mut message = String::new();
    // Writing into a `String` cannot fail.
    let _ = write_unconfigured(&mut message, aspect, name);
    message
}

impl std::error::Error for Rejected {
    /// An injected error, for error chains.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Rejected::Injected {
                error: Some(error), ..
            } => Some(error.0),
            _ => None,
        }
    }
}

/// A configuration was refused: which field, and why.
///
/// Builders return it from `build()`, and the registry returns it when a configuration cannot
/// be installed (an unknown or cyclic base configuration, a tie in the precedence table).
/// Nothing in this crate panics on a bad configuration.
///
/// ```
/// use resilience_runtime::CircuitBreakerConfig;
///
/// let err = CircuitBreakerConfig::builder().failure_rate_threshold(0.0).build().unwrap_err();
/// assert_eq!(err.field(), "failure_rate_threshold");
/// assert!(err.to_string().contains("failure_rate_threshold"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: String,
}

/// `{:?}` is the message (what `?` in `main` prints: `Error: invalid `field`: reason`);
/// `{:#?}` the fields.
impl fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.debug_struct("ConfigError")
                .field("field", &self.field)
                .field("reason", &self.reason)
                .finish()
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

impl ConfigError {
    /// A refusal of `field` for `reason` (lowercase, no trailing period).
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        ConfigError {
            field,
            reason: reason.into(),
        }
    }

    /// The configuration field (or registry setting) that was refused.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// Why it was refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}
