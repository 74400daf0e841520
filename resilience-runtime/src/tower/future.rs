//! [`ResponseFuture`]: a guarded request in flight. Its drop is the only release of the
//! permits a request holds (tower's contract): completed, failed, panicked or dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tower_service::Service;

use super::classify::Classifier;
use super::error::GuardError;
use crate::call::{Classify, Owned, OwnedRun};
use crate::error::Rejected;
use crate::outcome::CallOutcome;

/// The boxed wait of a request a gate makes wait (a bulkhead's `max_wait_duration`).
type Waiting = Pin<Box<dyn Future<Output = Result<Owned, Rejected>> + Send>>;

/// The boxed run of a plan with a retry or a time limiter.
type Wrapped<T, E> = Pin<Box<dyn Future<Output = Result<Result<T, E>, Rejected>> + Send>>;

pin_project_lite::pin_project! {
    /// The response future of a [`GuardService`](super::GuardService).
    ///
    /// A request admitted at once (the common case) runs the inner service's future in place,
    /// with no allocation; one that waits for a bulkhead boxes its wait, and a plan with a
    /// retry or a time limiter boxes its run. `Send` when the inner service's future is.
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
        /// Waiting for a gate; then the request goes to the service made ready for it.
        Waiting {
            wait: Waiting,
            call: Option<(S, Request, K)>,
        },
        /// A plan with wrappers, run whole.
        Wrapped {
            run: Wrapped<S::Response, S::Error>,
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

    pub(super) fn waiting(wait: Waiting, service: S, request: Request, classifier: K) -> Self {
        ResponseFuture {
            state: State::Waiting {
                wait,
                call: Some((service, request, classifier)),
            },
        }
    }

    pub(super) fn wrapped(run: Wrapped<S::Response, S::Error>) -> Self {
        ResponseFuture {
            state: State::Wrapped { run },
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
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Running { run } => {
                    return run.poll(cx).map(|result| result.map_err(GuardError::Inner));
                }
                StateProj::Waiting { wait, call } => {
                    let owned = ready!(wait.as_mut().poll(cx))?;
                    let (mut service, request, classifier) =
                        call.take().expect("a waiting request is sent once");
                    let run = owned.run(|| service.call(request), Classified(classifier));
                    state.set(State::Running { run });
                }
                StateProj::Wrapped { run } => {
                    return run.as_mut().poll(cx).map(|result| match result {
                        Ok(result) => result.map_err(GuardError::Inner),
                        Err(rejected) => Err(GuardError::Rejected(rejected)),
                    });
                }
                StateProj::Refused { rejected } => {
                    let rejected = rejected.take().expect("a refusal is answered once");
                    return Poll::Ready(Err(GuardError::Rejected(rejected)));
                }
            }
        }
    }
}

impl<S: Service<Request>, Request, K> fmt::Debug for ResponseFuture<S, Request, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Running { .. } => "running",
            State::Waiting { .. } => "waiting",
            State::Wrapped { .. } => "wrapped",
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
