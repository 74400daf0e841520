//! [`GuardRouteLayer`]: a [`GuardLayer`] for axum routers and routes, whose refusals are
//! answered as responses (the table of the module's documentation) rather than returned as
//! errors, so that no `HandleErrorLayer` is needed.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use ::axum::response::{IntoResponse, Response};
use tower_layer::Layer;
use tower_service::Service;

use crate::tower::{
    Attempts, Classifier, ErrorsAreFailures, GuardError, GuardLayer, GuardService, ResponseFuture,
    ServerErrorsAreFailures,
};

impl<A> GuardLayer<ErrorsAreFailures, A> {
    /// This layer for an axum `Router` or route: a refusal is answered with its response
    /// (`503` or `429` with `Retry-After`, `504` for a time-out), and a `5xx` response counts
    /// as a failure ([`ServerErrorsAreFailures`]; a route's error type is `Infallible`, so
    /// counting errors would count nothing).
    ///
    /// ```
    /// use axum::routing::get;
    /// use axum::Router;
    /// use resilience_runtime::tower::GuardLayer;
    /// use resilience_runtime::Guard;
    ///
    /// let orders = GuardLayer::new(&[Guard::bulkhead("orders"), Guard::circuit_breaker("orders")]);
    /// let app: Router = Router::new()
    ///     .route("/orders", get(|| async { "[]" }))
    ///     .route_layer(orders.for_axum());
    /// # let _ = app;
    /// ```
    pub fn for_axum(self) -> GuardRouteLayer<ServerErrorsAreFailures, A> {
        GuardRouteLayer {
            layer: self.classifier(ServerErrorsAreFailures),
        }
    }
}

/// A [`GuardLayer`] for axum routers and routes, made by
/// [`GuardLayer::for_axum`]: its service's error is `Infallible`, a refusal answered with its
/// response.
#[derive(Clone)]
pub struct GuardRouteLayer<K, A> {
    layer: GuardLayer<K, A>,
}

impl<K, A> GuardRouteLayer<K, A> {
    /// The same layer, its responses classified by `classifier` (see [`Classifier`]).
    pub fn classifier<K2>(self, classifier: K2) -> GuardRouteLayer<K2, A> {
        GuardRouteLayer {
            layer: self.layer.classifier(classifier),
        }
    }
}

impl<S, K: Clone, A: Clone> Layer<S> for GuardRouteLayer<K, A> {
    type Service = GuardRouteService<S, K, A>;

    fn layer(&self, inner: S) -> Self::Service {
        GuardRouteService {
            inner: self.layer.layer(inner),
        }
    }
}

impl<K, A> fmt::Debug for GuardRouteLayer<K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GuardRouteLayer").field(&self.layer).finish()
    }
}

/// The service of a [`GuardRouteLayer`]: a [`GuardService`] whose refusals are responses.
#[derive(Clone)]
pub struct GuardRouteService<S, K, A> {
    inner: GuardService<S, K, A>,
}

impl<S, K, A, Request> Service<Request> for GuardRouteService<S, K, A>
where
    GuardService<S, K, A>: Service<
        Request,
        Response = S::Response,
        Error = GuardError<Infallible>,
        Future = ResponseFuture<S, Request, K>,
    >,
    S: Service<Request, Error = Infallible>,
    S::Response: IntoResponse,
    K: Classifier<S::Response, Infallible>,
    A: Attempts<Request>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RouteFuture<S, Request, K>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx).map_err(|error| match error {
            GuardError::Inner(never) => match never {},
            GuardError::Rejected(_) => unreachable!("readiness admits nothing"),
        })
    }

    fn call(&mut self, request: Request) -> Self::Future {
        RouteFuture {
            inner: self.inner.call(request),
        }
    }
}

impl<S: fmt::Debug, K, A> fmt::Debug for GuardRouteService<S, K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GuardRouteService")
            .field(&self.inner)
            .finish()
    }
}

pin_project_lite::pin_project! {
    /// The response future of a [`GuardRouteService`].
    pub struct RouteFuture<S, Request, K>
    where
        S: Service<Request>,
    {
        #[pin]
        inner: ResponseFuture<S, Request, K>,
    }
}

impl<S, Request, K> Future for RouteFuture<S, Request, K>
where
    S: Service<Request, Error = Infallible>,
    S::Response: IntoResponse,
    K: Classifier<S::Response, Infallible>,
{
    type Output = Result<Response, Infallible>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(match ready!(self.project().inner.poll(cx)) {
            Ok(response) => response.into_response(),
            Err(GuardError::Rejected(rejected)) => rejected.into_response(),
            Err(GuardError::Inner(never)) => match never {},
        }))
    }
}

impl<S: Service<Request>, Request, K> fmt::Debug for RouteFuture<S, Request, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RouteFuture").field(&self.inner).finish()
    }
}
