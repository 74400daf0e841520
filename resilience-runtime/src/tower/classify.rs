//! How a guarded service's responses count for its breakers and its retry: [`Classifier`],
//! with every `Err` a failure by default ([`ErrorsAreFailures`]) and HTTP's server errors for
//! HTTP services ([`ServerErrorsAreFailures`]).

use crate::outcome::CallOutcome;
use crate::shed::shed;

/// How a response of the inner service counts: a success, a failure (the breakers count it, a
/// retry retries it), or neither (ignored, as the macros' `ignore` does). A refusal by a guard
/// is never classified: it is not an outcome of the dependency.
///
/// Any `Fn(&Result<Response, Error>) -> CallOutcome + Clone` is a classifier:
///
/// ```
/// use resilience_runtime::tower::GuardLayer;
/// use resilience_runtime::{CallOutcome, Guard};
///
/// // A lookup's "not found" is an answer, not a failure of the service.
/// #[derive(Debug)]
/// enum LookupError { NotFound, Down }
///
/// let layer = GuardLayer::new(&[Guard::circuit_breaker("lookup")]).classifier(
///     |result: &Result<String, LookupError>| match result {
///         Ok(_) => CallOutcome::Success,
///         Err(LookupError::NotFound) => CallOutcome::Ignored,
///         Err(LookupError::Down) => CallOutcome::Failure,
///     },
/// );
/// # let _ = layer;
/// ```
pub trait Classifier<Response, Error> {
    /// How `result` counts.
    fn classify(&self, result: &Result<Response, Error>) -> CallOutcome;
}

impl<Response, Error, F> Classifier<Response, Error> for F
where
    F: Fn(&Result<Response, Error>) -> CallOutcome,
{
    #[inline]
    fn classify(&self, result: &Result<Response, Error>) -> CallOutcome {
        self(result)
    }
}

/// The default [`Classifier`]: `Ok` is a success, every `Err` a failure (as the macros count
/// a function's `Result`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrorsAreFailures;

impl<Response, Error> Classifier<Response, Error> for ErrorsAreFailures {
    #[inline]
    fn classify(&self, result: &Result<Response, Error>) -> CallOutcome {
        CallOutcome::of_result(result)
    }
}

/// The [`Classifier`] of an HTTP service: a `5xx` response and an `Err` (a transport error:
/// no response at all) are failures; every other response, `4xx` included, is a success: a
/// client's mistake says nothing of the server's health. A `429`, and a `503` that carries
/// `Retry-After`, are [`Overloaded`](CallOutcome::Overloaded): a server shedding load (this
/// library's own refusals are answered so), which a breaker that counted them would mistake
/// for a failing server, and which an adaptive bulkhead limit backs off from.
///
/// ```
/// use resilience_runtime::tower::{Classifier, ServerErrorsAreFailures};
/// use resilience_runtime::CallOutcome;
///
/// let status = |code: u16| http::Response::builder().status(code).body(()).unwrap();
/// let classify = |r: Result<_, std::io::Error>| ServerErrorsAreFailures.classify(&r);
/// assert_eq!(classify(Ok(status(404))), CallOutcome::Success);
/// assert_eq!(classify(Ok(status(502))), CallOutcome::Failure);
/// assert_eq!(classify(Ok(status(429))), CallOutcome::Overloaded);
/// let shed = http::Response::builder().status(503).header("retry-after", "1").body(()).unwrap();
/// assert_eq!(classify(Ok(shed)), CallOutcome::Overloaded);
/// assert_eq!(classify(Ok(status(503))), CallOutcome::Failure);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerErrorsAreFailures;

impl<Body, Error> Classifier<http::Response<Body>, Error> for ServerErrorsAreFailures {
    #[inline]
    fn classify(&self, result: &Result<http::Response<Body>, Error>) -> CallOutcome {
        match result {
            Ok(response) if shed(response.status(), response.headers()).is_some() => {
                CallOutcome::Overloaded
            }
            Ok(response) if response.status().is_server_error() => CallOutcome::Failure,
            Ok(_) => CallOutcome::Success,
            Err(_) => CallOutcome::Failure,
        }
    }
}
