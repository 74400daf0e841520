//! [`ResponseFuture`]: a guarded request in flight. Its drop is the only release of the
//! permits a request holds (tower's contract): completed, failed, panicked or dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tower_service::Service;

use super::classify::Classifier;
use super::error::GuardError;
use crate::call::{Classify, OwnedRun};
use crate::error::Rejected;
use crate::outcome::CallOutcome;

/// The boxed rest of a request that waits for a gate (a bulkhead's `max_wait_duration`), or
/// of one through a plan with a retry or a time limiter.
type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<Result<T, E>, Rejected>> + Send>>;

pin_project_lite::pin_project! {
    /// The response future of a [`GuardService`](super::GuardService).
    ///
    /// A request admitted at once (the common case) runs the inner service's future in place,
    /// with no allocation; one that waits for a bulkhead, and one through a plan with a retry
    /// or a time limiter, is boxed.
    pub struct ResponseFuture<S, Request, K>
    where
        S: Service<Request>,
    {
        #[pin]
        state: State<S, Request, K>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<S, Request, K>
    where
        S: Service<Request>,
    {
        /// Admitted: the inner service's future, run with the permits.
        Running {
            #[pin]
            run: OwnedRun<S::Future, Classified<K>>,
        },
        /// Waiting for a gate, or a plan with wrappers run whole.
        Boxed {
            run: Boxed<S::Response, S::Error>,
        },
        /// Refused on entry: answered on the first poll.
        Refused {
            rejected: Option<Rejected>,
        },
    }
}

impl<S: Service<Request>, Request, K> ResponseFuture<S, Request, K> {
    pub(super) fn running(run: OwnedRun<S::Future, Classified<K>>) -> Self {
        ResponseFuture {
            state: State::Running { run },
        }
    }

    pub(super) fn boxed(run: Boxed<S::Response, S::Error>) -> Self {
        ResponseFuture {
            state: State::Boxed { run },
        }
    }

    pub(super) fn refused(rejected: Rejected) -> Self {
        ResponseFuture {
            state: State::Refused {
                rejected: Some(rejected),
            },
        }
    }
}

impl<S, Request, K> Future for ResponseFuture<S, Request, K>
where
    S: Service<Request>,
    K: Classifier<S::Response, S::Error>,
{
    type Output = Result<S::Response, GuardError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Running { run } => {
                run.poll(cx).map(|result| result.map_err(GuardError::Inner))
            }
            StateProj::Boxed { run } => Poll::Ready(match ready!(run.as_mut().poll(cx)) {
                Ok(result) => result.map_err(GuardError::Inner),
                Err(rejected) => Err(GuardError::Rejected(rejected)),
            }),
            StateProj::Refused { rejected } => {
                let rejected = rejected.take().expect("a refusal is answered once");
                Poll::Ready(Err(GuardError::Rejected(rejected)))
            }
        }
    }
}

impl<S: Service<Request>, Request, K> fmt::Debug for ResponseFuture<S, Request, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Running { .. } => "running",
            State::Boxed { .. } => "boxed",
            State::Refused { .. } => "refused",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

/// A [`Classifier`] as the engine asks it: once, of the inner service's result.
pub(super) struct Classified<K>(pub(super) K);

impl<T, E, K: Classifier<T, E>> Classify<Result<T, E>> for Classified<K> {
    #[inline]
    fn classify(self, result: &Result<T, E>) -> CallOutcome {
        self.0.classify(result)
    }
}
