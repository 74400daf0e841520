//! [`GuardError`]: a guarded service's error, a refusal by a guard or the inner service's own.

use std::error::Error;
use std::fmt;

use crate::error::Rejected;

/// The error of a [`GuardService`](super::GuardService): a guard refused the request, or the
/// inner service failed.
///
/// Displayed as the refusal or the inner error itself; its [`source`](Error::source) is the
/// wrapped error, so a chain walked from a `BoxError` finds the [`Rejected`] by downcasting. It
/// is a `std::error::Error` when the inner error is, and so converts into tower's `BoxError`
/// with `?` or `.into()`; an inner error that is already a `BoxError` (which is not itself an
/// `Error`) converts with [`into_box_error`](Self::into_box_error).
///
/// ```
/// use std::sync::Arc;
/// use resilience_runtime::tower::GuardLayer;
/// use resilience_runtime::{Guard, Registry};
/// use tower::{service_fn, BoxError, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let registry = Arc::new(Registry::new());
/// registry.circuit_breaker("quotes").transition_to_forced_open_state();
/// let quotes = GuardLayer::new(&[Guard::circuit_breaker("quotes")])
///     .with_registry(registry)
///     .layer(service_fn(|_: ()| async { Ok::<u32, std::io::Error>(1) }));
///
/// let refused = quotes.oneshot(()).await.unwrap_err();
/// assert!(refused.is_rejected());
/// let boxed: BoxError = refused.into();
/// assert!(boxed.to_string().contains("quotes"));
/// // What a `HandleErrorLayer` receives: the refusal is in its chain.
/// let found = std::iter::successors(Some(&*boxed as &dyn std::error::Error), |e| e.source())
///     .find_map(|e| e.downcast_ref::<resilience_runtime::Rejected>());
/// assert!(matches!(found, Some(resilience_runtime::Rejected::CallNotPermitted { .. })));
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError<E> {
    /// A guard refused the request (the inner service never saw it, or, inside a retry, its
    /// last attempt did not). Not a failure of the dependency: the breakers outside the
    /// refusing guard did not record it.
    Rejected(Rejected),
    /// The inner service's error.
    Inner(E),
}

impl<E> GuardError<E> {
    /// Whether a guard refused the request.
    pub fn is_rejected(&self) -> bool {
        matches!(self, GuardError::Rejected(_))
    }

    /// The refusal, if a guard refused the request.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            GuardError::Rejected(rejected) => Some(rejected),
            GuardError::Inner(_) => None,
        }
    }

    /// The inner service's error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            GuardError::Rejected(_) => None,
            GuardError::Inner(inner) => Some(inner),
        }
    }

    /// The error as tower's `BoxError`: the [`Rejected`] itself (downcast to find it), or the
    /// inner error as it converts.
    pub fn into_box_error(self) -> Box<dyn Error + Send + Sync>
    where
        E: Into<Box<dyn Error + Send + Sync>>,
    {
        match self {
            GuardError::Rejected(rejected) => Box::new(rejected),
            GuardError::Inner(inner) => inner.into(),
        }
    }
}

impl<E> From<Rejected> for GuardError<E> {
    fn from(rejected: Rejected) -> Self {
        GuardError::Rejected(rejected)
    }
}

impl<E: fmt::Display> fmt::Display for GuardError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardError::Rejected(rejected) => fmt::Display::fmt(rejected, f),
            GuardError::Inner(inner) => fmt::Display::fmt(inner, f),
        }
    }
}

/// The source is the wrapped error itself, so that code walking a `BoxError`'s chain (tonic's
/// `Status::from_error`, a `HandleErrorLayer`'s handler) finds the [`Rejected`] or the inner
/// error by downcasting, without knowing `E`.
impl<E: Error + 'static> Error for GuardError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            GuardError::Rejected(rejected) => Some(rejected),
            GuardError::Inner(inner) => Some(inner),
        }
    }
}
