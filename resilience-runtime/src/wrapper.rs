//! The seam of the wrapping aspects: a [`Wrap`] runs the rest of a plan (the guards after it,
//! then the call) on its own terms: again after a failure (the retry), under a deadline (the
//! time limiter). Shaped like tower's `retry::Policy`: a call [`begin`](Wrap::begin)s, polls
//! the deadline its rest runs under, and after each run of the rest says [`Next::Stop`] or
//! [`Next::RetryAfter`] a wait. An engine loops over that once per execution model and names no
//! wrapper: it holds a begun call as a [`WrapperCall`], dispatched statically over the closed
//! set of kinds (`match_wrapper_call!`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::Rejected;
use crate::hedge::Hedging;
use crate::plan::Wrapper;
use crate::retry::Attempts;
use crate::time_limiter::Limiting;

/// A wrapping aspect.
pub(crate) trait Wrap {
    /// One call through the wrapper: what it keeps across the runs of the rest.
    type Call<'w>: WrapCall<'w>
    where
        Self: 'w;

    /// A call enters the wrapper; `blocking` says its waits block the thread (a sync call).
    fn begin(&self, blocking: bool) -> Self::Call<'_>;

    /// Whether the rest runs under a deadline ([`WrapCall::poll_expired`] may fire).
    fn bounds(&self) -> bool {
        false
    }

    /// Whether the runs of the rest may overlap (a hedge's): the engine then runs each in a
    /// lane of its own, asks [`WrapCall::poll_another`] when to start the next beside them, and
    /// [`WrapCall::settle`] what each end means.
    fn overlaps(&self) -> bool {
        false
    }

    /// Whether a first run of the rest that succeeded is counted without an event (a retry's
    /// is; a time limiter's success goes to its per-call subscribers).
    fn quiet_success(&self) -> bool {
        false
    }
}

/// One call through a wrapper, borrowing from its wrapper for `'w`.
pub(crate) trait WrapCall<'w> {
    /// Polls the deadline the rest runs under, started at its first poll (the rest's first
    /// suspension): `Pending` until it fires, and forever for a wrapper without one, or after
    /// it fired. When it fires the call was counted as timed out, and is to be cut off
    /// ([`Expired::CutOff`]) or let run on ([`Expired::Overran`]).
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Expired> {
        let _ = cx;
        Poll::Pending
    }

    /// The rest ended as `ended` (`repeatable`: the call can be made again): stop with it, or
    /// run the rest again after a wait.
    fn after(&mut self, ended: Ended, repeatable: bool) -> Next;

    /// A wrapper that [overlaps](Wrap::overlaps): `Ready` when another run of the rest is to
    /// start beside the running ones (counted as started); `Pending` until then, and forever
    /// once no more may start. Polled while the runs are pending, from their first suspension.
    fn poll_another(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let _ = cx;
        Poll::Pending
    }

    /// A wrapper that [overlaps](Wrap::overlaps): the reading a run starting now starts at,
    /// if the wrapper learns from its runs' latencies (a hedge's percentile delay).
    fn run_starts(&self) -> Option<u64> {
        None
    }

    /// A wrapper that [overlaps](Wrap::overlaps): the reading of its first run's first wait
    /// (its first [`poll_another`](Self::poll_another)), if it learns from its runs'
    /// latencies.
    fn first_wait(&self) -> Option<u64> {
        None
    }

    /// A wrapper that [overlaps](Wrap::overlaps): run number `attempt` (1 for the first),
    /// started at `started` (its [`run_starts`](Self::run_starts)), ended as `ended` while
    /// `others` runs go on: whether the call ends with it, starts another run at once, or
    /// waits for the others. Asked of no other wrapper (the engine runs theirs one at a time,
    /// and asks [`after`](Self::after)).
    fn settle(&mut self, ended: Ended, run: Run, others: usize, repeatable: bool) -> Settle {
        let _ = (ended, run, others, repeatable);
        unreachable!("the engine settles the runs of a wrapper that overlaps only")
    }

    /// Waits `wait` before the next run of the rest, asynchronously (borrowing the wrapper,
    /// not the call, so that an engine keeps the two side by side).
    fn sleep(&self, wait: Duration) -> Sleep<'w> {
        let _ = wait;
        Sleep(None)
    }

    /// Waits `wait` before the next run of the rest, blocking the thread.
    fn sleep_blocking(&self, wait: Duration) {
        let _ = wait;
    }
}

/// How the rest of a plan ended, as a wrapper around it sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    /// As a retry sees it (a refusal from further in included).
    pub(crate) attempted: Attempted,
    /// Whether it failed, as a time limiter counts it (a refusal is a failure).
    pub(crate) failed: bool,
    /// The least wait before another run that a failure asks for itself (a server's
    /// `Retry-After`, through the caller's `retry_after`); `None` for any other end.
    pub(crate) retry_after: Option<Duration>,
    /// Whether it failed in a way a hedge starts its next run for at once (an `Err` that
    /// `hedge_on` accepts); `false` for a success and a refusal.
    pub(crate) hedge_on: bool,
}

/// How one run of the rest ended, as a retry sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempted {
    /// It succeeded: the call ends with it.
    Succeeded,
    /// It failed in a way the retry retries (an `Err` that `retry_on` accepts).
    Failed,
    /// It failed in a way the retry does not retry: the call ends with it.
    NotRetried,
    /// A guard inside the retry refused it; `failure` for a rejection that is a failure of
    /// the attempt: a time limiter's [`TimedOut`](crate::Rejected::TimedOut), an injected
    /// error.
    Refused {
        /// Whether the rejection is a failure of the attempt.
        failure: bool,
    },
}

/// What a call through a retry does after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// End with this attempt's result.
    Stop,
    /// Wait this long, then make the next attempt.
    RetryAfter(Duration),
}

/// One run of a wrapper whose runs overlap, as it ended: its number (1 for the first) and the
/// reading it started at, if the wrapper asked for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) attempt: u32,
    pub(crate) started: Option<u64>,
}

/// What a call through a wrapper whose runs overlap does when one run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settle {
    /// End with this run's result: the other runs are dropped.
    Ends,
    /// Start another run now (counted as started); this run's result is dropped.
    Another,
    /// Drop this run's result and wait for the others.
    Wait,
}

/// What a wrapper's deadline says when it fires.
pub(crate) enum Expired {
    /// Cut the call off: drop it, and end it with this rejection.
    CutOff(Rejected),
    /// Let it go on (`cancel_running_future(false)`): it was counted as timed out, and its
    /// completion is not counted again.
    Overran,
}

/// A wait between two runs of the rest: ready at once for no wait; otherwise boxed, so that
/// its state (a tokio `Sleep`, a manual clock's) is not laid out in the future of every call
/// through a wrapper, where only a call that waits needs it.
pub(crate) struct Sleep<'r>(pub(crate) Option<Pin<Box<dyn Future<Output = ()> + Send + 'r>>>);

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.0 {
            None => Poll::Ready(()),
            Some(sleep) => sleep.as_mut().poll(cx),
        }
    }
}

/// A begun call through one of the closed set of wrapper kinds.
pub(crate) enum WrapperCall<'w> {
    Retry(Attempts<'w>),
    TimeLimiter(Limiting<'w>),
    Hedge(Hedging<'w>),
}

/// Runs `$e` with `$c` bound to the call of whichever kind `$call` is: static dispatch, one arm
/// per wrapper kind, no wildcard.
macro_rules! match_wrapper_call {
    ($call:expr, $c:ident => $e:expr) => {
        match $call {
            WrapperCall::Retry($c) => $e,
            WrapperCall::TimeLimiter($c) => $e,
            WrapperCall::Hedge($c) => $e,
        }
    };
}

impl Wrapper {
    /// See [`Wrap::quiet_success`].
    pub(crate) fn quiet_success(&self) -> bool {
        crate::plan::match_wrapper!(self, w => w.quiet_success())
    }

    /// See [`Wrap::overlaps`].
    pub(crate) fn overlaps(&self) -> bool {
        crate::plan::match_wrapper!(self, w => w.overlaps())
    }

    /// See [`Wrap::bounds`].
    pub(crate) fn bounds(&self) -> bool {
        crate::plan::match_wrapper!(self, w => w.bounds())
    }

    /// A call enters this wrapper (see [`Wrap::begin`]).
    #[inline]
    pub(crate) fn begin(&self, blocking: bool) -> WrapperCall<'_> {
        match self {
            Wrapper::Retry(retry) => WrapperCall::Retry(retry.begin(blocking)),
            Wrapper::TimeLimiter(limiter) => WrapperCall::TimeLimiter(limiter.begin(blocking)),
            Wrapper::Hedge(hedge) => WrapperCall::Hedge(hedge.begin(blocking)),
        }
    }
}

impl<'w> WrapCall<'w> for WrapperCall<'w> {
    #[inline]
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Expired> {
        match_wrapper_call!(self, c => c.poll_expired(cx))
    }

    #[inline]
    fn after(&mut self, ended: Ended, repeatable: bool) -> Next {
        match_wrapper_call!(self, c => WrapCall::after(c, ended, repeatable))
    }

    #[inline]
    fn poll_another(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match_wrapper_call!(self, c => c.poll_another(cx))
    }

    #[inline]
    fn settle(&mut self, ended: Ended, run: Run, others: usize, repeatable: bool) -> Settle {
        match_wrapper_call!(self, c => c.settle(ended, run, others, repeatable))
    }

    #[inline]
    fn run_starts(&self) -> Option<u64> {
        match_wrapper_call!(self, c => c.run_starts())
    }

    #[inline]
    fn first_wait(&self) -> Option<u64> {
        match_wrapper_call!(self, c => c.first_wait())
    }

    #[inline]
    fn sleep(&self, wait: Duration) -> Sleep<'w> {
        match_wrapper_call!(self, c => c.sleep(wait))
    }

    #[inline]
    fn sleep_blocking(&self, wait: Duration) {
        match_wrapper_call!(self, c => c.sleep_blocking(wait));
    }
}
