//! gRPC through a [`GuardLayer`](super::GuardLayer) around a tonic channel: how a response
//! counts ([`GrpcErrorsAreFailures`]), and a refusal as a gRPC `Status` (feature `tonic`).

use crate::outcome::CallOutcome;

use super::classify::Classifier;

/// The [`Classifier`] of a gRPC client channel (a tonic `Channel`): no answer (a transport
/// error) and a call that ended `UNAVAILABLE`, `UNKNOWN`, `INTERNAL`, `DEADLINE_EXCEEDED` or
/// `DATA_LOSS` are failures; `RESOURCE_EXHAUSTED` is the server shedding load
/// ([`Overloaded`](CallOutcome::Overloaded): no failure, a drop for an adaptive limit); any
/// other status is an answer (`NOT_FOUND`, `INVALID_ARGUMENT` are the caller's business).
///
/// It reads the status a layer can see: the `grpc-status` of a response without a body (what
/// a server sends for a call that failed at once, the common case of an error); a status sent
/// in trailers after a streamed body is not seen by the layer, and counts as a success.
///
/// ```
/// use resilience_runtime::tower::{Classifier, GrpcErrorsAreFailures};
/// use resilience_runtime::CallOutcome;
///
/// let status = |code: &str| http::Response::builder().header("grpc-status", code).body(()).unwrap();
/// let classify = |r: Result<_, std::io::Error>| GrpcErrorsAreFailures.classify(&r);
/// assert_eq!(classify(Ok(status("14"))), CallOutcome::Failure); // UNAVAILABLE
/// assert_eq!(classify(Ok(status("5"))), CallOutcome::Success); // NOT_FOUND: an answer
/// assert_eq!(classify(Ok(status("8"))), CallOutcome::Overloaded); // RESOURCE_EXHAUSTED: shed
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcErrorsAreFailures;

impl<Body, Error> Classifier<http::Response<Body>, Error> for GrpcErrorsAreFailures {
    fn classify(&self, result: &Result<http::Response<Body>, Error>) -> CallOutcome {
        let Ok(response) = result else {
            return CallOutcome::Failure;
        };
        let code = response
            .headers()
            .get("grpc-status")
            .and_then(|code| code.to_str().ok())
            .and_then(|code| code.parse::<u8>().ok());
        match code {
            // UNKNOWN, DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS.
            Some(2 | 4 | 13 | 14 | 15) => CallOutcome::Failure,
            // RESOURCE_EXHAUSTED: shed, as HTTP's 429.
            Some(8) => CallOutcome::Overloaded,
            Some(_) | None if response.status().is_server_error() => CallOutcome::Failure,
            _ => CallOutcome::Success,
        }
    }
}

#[cfg(feature = "tonic")]
mod status {
    use std::error::Error;

    use crate::error::Rejected;
    use crate::tower::GuardError;

    /// A refusal as the gRPC status a caller expects: `UNAVAILABLE` for a full bulkhead, an
    /// open breaker or a guard that would block; `RESOURCE_EXHAUSTED` for a rate limiter;
    /// `DEADLINE_EXCEEDED` for a time-out; `FAILED_PRECONDITION` for a refused re-entry and
    /// `INTERNAL` for a guard without configuration. The message is the refusal's.
    impl From<Rejected> for tonic::Status {
        fn from(rejected: Rejected) -> Self {
            let message = rejected.to_string();
            match rejected {
                Rejected::RequestNotPermitted { .. } => tonic::Status::resource_exhausted(message),
                Rejected::TimedOut { .. } => tonic::Status::deadline_exceeded(message),
                Rejected::Reentrant { .. } => tonic::Status::failed_precondition(message),
                Rejected::Unconfigured { .. } => tonic::Status::internal(message),
                Rejected::BulkheadFull { .. }
                | Rejected::CallNotPermitted { .. }
                | Rejected::WouldBlock { .. }
                | Rejected::Injected { .. } => tonic::Status::unavailable(message),
            }
        }
    }

    impl<E: Into<Box<dyn Error + Send + Sync>>> GuardError<E> {
        /// The error as a guarded tonic channel's error: a refusal as its gRPC `Status` (see
        /// `From<Rejected> for tonic::Status`), which tonic hands the caller as it is; the
        /// inner error as it converts. For tower's `map_err`:
        ///
        /// ```
        /// use resilience_runtime::tower::{GuardError, GuardLayer, GrpcErrorsAreFailures};
        /// use resilience_runtime::Guard;
        /// use tower::ServiceBuilder;
        ///
        /// let guards = ServiceBuilder::new()
        ///     .map_err(GuardError::<tower::BoxError>::into_grpc_error)
        ///     .layer(GuardLayer::new(&[Guard::circuit_breaker("users")]).classifier(GrpcErrorsAreFailures));
        /// # let _ = guards;
        /// ```
        pub fn into_grpc_error(self) -> Box<dyn Error + Send + Sync> {
            match self {
                GuardError::Rejected(rejected) => Box::new(tonic::Status::from(rejected)),
                GuardError::Inner(inner) => inner.into(),
            }
        }
    }
}
