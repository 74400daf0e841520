//! [`GuardLayer`]: named guard instances of a registry, as a tower `Layer`.

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::attempts::{CloneRequests, SendOnce};
use super::classify::ErrorsAreFailures;
use super::plans::Plans;
use super::service::GuardService;
use crate::error::ConfigError;
use crate::plan::Guard;
use crate::registry::Registry;

/// Guards a tower service with named guard instances: the very instances that `#[bulkhead]`,
/// `#[circuit_breaker]` and the other annotations of the same names use, in the registry's
/// precedence.
///
/// Inside the layer the registry's precedence decides the order of the guards, whatever the
/// order of the list; the layer's place in a `ServiceBuilder` only places it among the other
/// layers. A bulkhead shared by an annotated function and a layer is one bulkhead (one limit,
/// one set of metrics), and a change of configuration or precedence reaches the layer's next
/// request. A request made while the same task runs a guarded call holding one of the
/// instances passes through it, as a nested annotated call does (the registry's
/// [`ReentrancyPolicy`](crate::ReentrancyPolicy)). A layer on the global registry follows
/// [`Registry::scope`] as the annotations do: a request sent (its `call`) inside a scope uses
/// the scope's registry, so a test that gives annotated code a registry of its own gives it to
/// the layers that code calls through too.
///
/// ```
/// use resilience_runtime::tower::{GuardError, GuardLayer};
/// use resilience_runtime::{BulkheadConfig, Guard, Registry};
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = std::sync::Arc::new(Registry::new());
/// registry.configure_bulkhead("orders", BulkheadConfig::builder().max_concurrent_calls(10).build()?)?;
///
/// let layer = GuardLayer::new(&[Guard::circuit_breaker("orders"), Guard::bulkhead("orders")])
///     .with_registry(registry.clone());
/// let mut orders = layer.layer(service_fn(|id: u32| async move {
///     Ok::<_, std::io::Error>(format!("order {id}"))
/// }));
/// let placed = orders.ready().await?.call(7).await?;
/// assert_eq!(placed, "order 7");
/// assert_eq!(registry.circuit_breaker("orders").metrics().number_of_successful_calls(), 1);
/// # Ok(())
/// # }
/// ```
///
/// # Admission, readiness and release
///
/// `poll_ready` reports the inner service's readiness and nothing else; the guards admit a
/// request in `call`. A permit reserved in `poll_ready` would be held by a service that may
/// never call (a clone that was polled and dropped, a router that polled every route): capacity
/// lost, which is what tower's own `ConcurrencyLimit` risks. So a request a guard refuses is
/// answered at once with [`GuardError::Rejected`](super::GuardError::Rejected), and one a
/// bulkhead makes wait (its `max_wait_duration`) waits in the response future, taking with it
/// the inner service made ready for it (and what that reserved, an inner limit's permit: the
/// request will use it). Clones share the instances and nothing else. Every permit goes when the response future completes,
/// fails, panics or is dropped.
///
/// # Retries
///
/// A retry makes the request again, so a layer with a retry guard clones each request: build
/// it with [`retrying`](Self::retrying), whose service requires `Request: Clone`. The other
/// constructors refuse a retry guard.
#[derive(Clone)]
pub struct GuardLayer<K = ErrorsAreFailures, A = SendOnce> {
    plans: Arc<Plans>,
    classifier: K,
    attempts: A,
}

impl GuardLayer {
    /// The guards `guards` of the [global](Registry::global) registry (the annotations'),
    /// every `Err` of the inner service a failure.
    ///
    /// # Panics
    ///
    /// If `guards` names an aspect twice, or has a retry (use [`retrying`](Self::retrying)).
    /// [`try_new`](Self::try_new) returns these as a [`ConfigError`] instead, for a list built
    /// at run time.
    #[track_caller]
    pub fn new(guards: &[Guard<'_>]) -> Self {
        GuardLayer::try_new(guards).unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`new`](Self::new), returning a problem with `guards` as a [`ConfigError`].
    ///
    /// # Errors
    ///
    /// If `guards` names an aspect twice, or has a retry.
    pub fn try_new(guards: &[Guard<'_>]) -> Result<Self, ConfigError> {
        Ok(GuardLayer {
            plans: Arc::new(Plans::new(guards, false)?),
            classifier: ErrorsAreFailures,
            attempts: SendOnce,
        })
    }
}

impl GuardLayer<ErrorsAreFailures, CloneRequests> {
    /// A layer whose guards may include a retry, which makes each request again: its service
    /// clones the request for each attempt (`Request: Clone`), as tower's own `Retry` does.
    ///
    /// ```
    /// use resilience_runtime::tower::GuardLayer;
    /// use resilience_runtime::Guard;
    ///
    /// let layer = GuardLayer::retrying(&[Guard::retry("quotes"), Guard::circuit_breaker("quotes")]);
    /// # let _ = layer;
    /// ```
    ///
    /// # Panics
    ///
    /// If `guards` names an aspect twice.
    #[track_caller]
    pub fn retrying(guards: &[Guard<'_>]) -> Self {
        GuardLayer::try_retrying(guards).unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`retrying`](Self::retrying), returning a repeated aspect as a [`ConfigError`].
    ///
    /// # Errors
    ///
    /// If `guards` names an aspect twice.
    pub fn try_retrying(guards: &[Guard<'_>]) -> Result<Self, ConfigError> {
        Ok(GuardLayer {
            plans: Arc::new(Plans::new(guards, true)?),
            classifier: ErrorsAreFailures,
            attempts: CloneRequests,
        })
    }
}

impl<K, A> GuardLayer<K, A> {
    /// The same layer, its responses classified by `classifier` (see [`Classifier`]); for an
    /// HTTP service, [`ServerErrorsAreFailures`].
    ///
    /// [`Classifier`]: super::Classifier
    /// [`ServerErrorsAreFailures`]: super::ServerErrorsAreFailures
    pub fn classifier<K2>(self, classifier: K2) -> GuardLayer<K2, A> {
        GuardLayer {
            plans: self.plans,
            classifier,
            attempts: self.attempts,
        }
    }

    /// The same guards in `registry` rather than the global one: a test's own registry, with
    /// its own clock and configuration.
    pub fn with_registry(self, registry: Arc<Registry>) -> Self {
        let plans = Plans::in_registry(self.plans.cache().guards(), registry);
        GuardLayer {
            plans: Arc::new(plans),
            classifier: self.classifier,
            attempts: self.attempts,
        }
    }

    /// The guards, as given.
    pub fn guards(&self) -> &[Guard<'static>] {
        self.plans.cache().guards()
    }
}

impl<S, K: Clone, A: Clone> Layer<S> for GuardLayer<K, A> {
    type Service = GuardService<S, K, A>;

    fn layer(&self, inner: S) -> Self::Service {
        GuardService::new(
            inner,
            Arc::clone(&self.plans),
            self.classifier.clone(),
            self.attempts.clone(),
        )
    }
}

impl<K, A> fmt::Debug for GuardLayer<K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardLayer")
            .field("guards", &self.guards())
            .field("classifier", &std::any::type_name::<K>())
            .finish()
    }
}
