//! [`GuardService`]: a tower service run through its layer's guards. Readiness is the inner
//! service's; admission is in `call`; release is the response future's.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use super::attempts::Attempts;
use super::classify::Classifier;
use super::error::GuardError;
use super::future::{Classified, ResponseFuture};
use super::plans::Plans;
use crate::call::{Owned, OwnedEntry};

/// A tower service whose requests run through named guard instances; made by
/// [`GuardLayer`](super::GuardLayer), which documents its behaviour.
///
/// It needs the inner service to be `Clone` (a request that waits for a bulkhead, and each
/// attempt of a retry, is sent by a clone that it makes ready then), and the service, its
/// requests, responses, errors and futures to be `Send + 'static`, as every service axum,
/// tonic and hyper run are.
pub struct GuardService<S, K, A> {
    inner: S,
    plans: Arc<Plans>,
    classifier: K,
    attempts: A,
}

impl<S, K, A> GuardService<S, K, A> {
    pub(super) fn new(inner: S, plans: Arc<Plans>, classifier: K, attempts: A) -> Self {
        GuardService {
            inner,
            plans,
            classifier,
            attempts,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, K, A, Request> Service<Request> for GuardService<S, K, A>
where
    S: Service<Request> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    K: Classifier<S::Response, S::Error> + Clone + Send + Sync + 'static,
    A: Attempts<Request> + Clone + Send + 'static,
    Request: Send + 'static,
{
    type Response = S::Response;
    type Error = GuardError<S::Error>;
    type Future = ResponseFuture<S, Request, K>;

    /// The inner service's readiness: no permit is reserved here (see
    /// [`GuardLayer`](super::GuardLayer)).
    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(GuardError::Inner)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let plan = self.plans.get();
        if plan.has_wrappers() {
            return self.call_wrapped(plan, request);
        }
        match Owned::enter(plan) {
            Ok(OwnedEntry::Admitted(owned)) => {
                let inner = &mut self.inner;
                let classifier = Classified(self.classifier.clone());
                ResponseFuture::running(owned.run(|| inner.call(request), classifier))
            }
            Ok(OwnedEntry::Waiting(wait)) => {
                // Waiting for a gate: the request takes the service made ready for it, and
                // whatever it reserved (an inner limit's permit), which it sends on once
                // admitted (a clone that asked for readiness after the wait could find the
                // inner limit held by this very reservation).
                let mut service = self.take_ready();
                let classifier = Classified(self.classifier.clone());
                ResponseFuture::boxed(Box::pin(async move {
                    let owned = wait.await?;
                    Ok(owned.run(move || service.call(request), classifier).await)
                }))
            }
            Err(rejected) => ResponseFuture::refused(rejected),
        }
    }
}

impl<S, K, A> GuardService<S, K, A> {
    /// The inner service, made ready by `poll_ready`, for a call made later; a clone, not yet
    /// ready, takes its place (tower's pattern: readiness is never shared between clones).
    fn take_ready(&mut self) -> S
    where
        S: Clone,
    {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }

    /// A plan with a retry or a time limiter: run whole by the engine's nested model, boxed
    /// (its attempts, waits and timers are state a named future would spell out per plan).
    /// The first attempt is sent by the service made ready for it; each later one by a clone
    /// made ready then.
    #[cold]
    fn call_wrapped<Request>(
        &mut self,
        plan: crate::plan_cache::SitePlan,
        request: Request,
    ) -> ResponseFuture<S, Request, K>
    where
        S: Service<Request> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Response: Send + 'static,
        S::Error: Send + 'static,
        K: Classifier<S::Response, S::Error> + Clone + Send + Sync + 'static,
        A: Attempts<Request> + Clone + Send + 'static,
        Request: Send + 'static,
    {
        let classifier = self.classifier.clone();
        let classify = move |result: &Result<S::Response, S::Error>| classifier.classify(result);
        let ready = self.take_ready();
        let Some(template) = self.attempts.again(&request) else {
            let call = attempt(ready, request);
            return ResponseFuture::boxed(Box::pin(async move {
                plan.run_future(call, classify).await
            }));
        };
        // A retrying layer: the first attempt sends the request on the service made ready,
        // each later one a clone of both.
        let (spare, attempts) = (self.inner.clone(), self.attempts.clone());
        let mut first = Some((ready, request));
        let call = move || {
            let (service, request) = first.take().unwrap_or_else(|| {
                let again = attempts.again(&template);
                (
                    spare.clone(),
                    again.expect("a retrying layer clones its requests"),
                )
            });
            attempt(service, request)
        };
        ResponseFuture::boxed(Box::pin(
            async move { plan.run_async(call, classify).await },
        ))
    }
}

/// One attempt of a request through `service`: made ready, then called.
async fn attempt<S: Service<Request>, Request>(
    mut service: S,
    request: Request,
) -> Result<S::Response, S::Error> {
    poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}

impl<S: Clone, K: Clone, A: Clone> Clone for GuardService<S, K, A> {
    /// A clone shares the guard instances, never the inner service's readiness: it starts
    /// not ready, as the inner service's clone does.
    fn clone(&self) -> Self {
        GuardService {
            inner: self.inner.clone(),
            plans: Arc::clone(&self.plans),
            classifier: self.classifier.clone(),
            attempts: self.attempts.clone(),
        }
    }
}

impl<S: fmt::Debug, K, A> fmt::Debug for GuardService<S, K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}
