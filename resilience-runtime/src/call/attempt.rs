//! How a call is made and judged, for the plans with wrappers: made again for each attempt of
//! a retry ([`Repeat`]) or once ([`OneShot`]), and judged for the breakers, the retry and the
//! time limiter ([`Judge`]).

use std::time::Duration;

use crate::error::Rejected;
use crate::outcome::CallOutcome;
use crate::plan::Step;
use crate::wrapper::{Attempted, Ended};

use super::held::Held;

/// A way to make the call: again for each attempt of a retry, or once.
pub(crate) trait Attempt {
    /// What one attempt gives: the call's result (sync) or its future (async).
    type Output;
    /// Makes the call.
    fn attempt(&mut self) -> Self::Output;
    /// Whether the call can be made again.
    fn repeatable(&self) -> bool;
    /// Whether the call is made once at most, made yet or not (a future given as it is): a
    /// hedge starts no other run beside it.
    fn once(&self) -> bool {
        false
    }
}

/// A call made again for each attempt. The sync entries hand it the call itself, not a `&mut`
/// to it: through the extra `&mut`, LLVM left `<&mut F as FnMut>::call_mut` out of line, and
/// each copy of the result it returned in memory stalled (the five-aspect sync plan 50.7–51.2
/// ns against 35.6–35.7 in `best_of`, commit `3985a23`). The async entries, whose call lives
/// in their future either way, measured the same both ways and keep the `&mut`.
pub(crate) struct Repeat<F>(pub(crate) F);

impl<O, F: FnMut() -> O> Attempt for Repeat<F> {
    type Output = O;
    #[inline]
    fn attempt(&mut self) -> O {
        (self.0)()
    }
    #[inline]
    fn repeatable(&self) -> bool {
        true
    }
}

/// A call that can be made once (a future given as it is): a retry around it makes one
/// attempt.
pub(crate) struct OneShot<F>(pub(crate) Option<F>);

impl<O, F: FnOnce() -> O> Attempt for OneShot<F> {
    type Output = O;
    fn attempt(&mut self) -> O {
        // `repeatable` is false once it ran: no retry asks again.
        let call = self.0.take().expect("a one-shot call is made once");
        call()
    }
    fn repeatable(&self) -> bool {
        self.0.is_some()
    }
    fn once(&self) -> bool {
        true
    }
}

/// How a call's result counts: for the breakers (its outcome) and for a retry (whether it is
/// retried).
pub(crate) trait Judge<R> {
    /// What the breakers record.
    fn outcome(&self, result: &R) -> CallOutcome;
    /// What a retry makes of it.
    fn attempted(&self, result: &R) -> Attempted;
    /// Whether it is a failure, as a time limiter counts it.
    fn failed(&self, result: &R) -> bool;
    /// The least wait before another attempt that the result asks for (a server's
    /// `Retry-After`): none unless the caller says how to read it.
    fn retry_after(&self, result: &R) -> Option<Duration> {
        let _ = result;
        None
    }
    /// Whether a hedge starts its next attempt at once for `result`, a failure: as a retry
    /// retries it, unless the caller says (`hedge_on`).
    fn hedge_on(&self, result: &R) -> bool {
        self.attempted(result) == Attempted::Failed
    }
    /// [`retry_after`](Self::retry_after) of a result a retry retries; `None` for any other
    /// (asked only off the success path).
    #[inline]
    fn retry_after_failed(&self, attempted: Attempted, result: &R) -> Option<Duration> {
        match attempted {
            Attempted::Failed => self.retry_after(result),
            _ => None,
        }
    }
}

/// A retry follows the breakers' classification: it retries a failure, lets an ignored
/// outcome through (a client error is not fixed by asking again).
pub(crate) struct ByOutcome<C>(pub(crate) C);

impl<R, C: Fn(&R) -> CallOutcome> Judge<R> for ByOutcome<C> {
    #[inline]
    fn outcome(&self, result: &R) -> CallOutcome {
        (self.0)(result)
    }
    #[inline]
    fn attempted(&self, result: &R) -> Attempted {
        match (self.0)(result) {
            CallOutcome::Success => Attempted::Succeeded,
            CallOutcome::Failure => Attempted::Failed,
            CallOutcome::Ignored | CallOutcome::Overloaded => Attempted::NotRetried,
        }
    }
    #[inline]
    fn failed(&self, result: &R) -> bool {
        (self.0)(result) == CallOutcome::Failure
    }
}

/// The judge of a guarded function (the macros'): the breakers' classification (`ignore`,
/// `record`), whether the result is an `Err`, whether the retry retries it (`retry_on`), the
/// least wait it asks for before the next attempt (`retry_after`), and whether a hedge starts
/// its next attempt for it (`hedge_on`).
pub(crate) struct Judged<C, F, Q, W, H> {
    pub(crate) classify: C,
    pub(crate) failed: F,
    pub(crate) retry_on: Q,
    pub(crate) retry_after: W,
    pub(crate) hedge_on: H,
}

impl<R, C, F, Q, W, H> Judge<R> for Judged<C, F, Q, W, H>
where
    C: Fn(&R) -> CallOutcome,
    F: Fn(&R) -> bool,
    Q: Fn(&R) -> bool,
    W: Fn(&R) -> Option<Duration>,
    H: Fn(&R) -> bool,
{
    #[inline]
    fn hedge_on(&self, result: &R) -> bool {
        (self.failed)(result) && (self.hedge_on)(result)
    }
    #[inline]
    fn retry_after(&self, result: &R) -> Option<Duration> {
        (self.retry_after)(result)
    }
    #[inline]
    fn outcome(&self, result: &R) -> CallOutcome {
        (self.classify)(result)
    }
    #[inline]
    fn attempted(&self, result: &R) -> Attempted {
        if !(self.failed)(result) {
            Attempted::Succeeded
        } else if (self.retry_on)(result) {
            Attempted::Failed
        } else {
            Attempted::NotRetried
        }
    }
    #[inline]
    fn failed(&self, result: &R) -> bool {
        (self.failed)(result)
    }
}

/// How the rest of a plan ended, as a retry around it sees it.
pub(super) fn attempted<R>(judge: &impl Judge<R>, result: &Result<R, Rejected>) -> Attempted {
    match result {
        Ok(result) => judge.attempted(result),
        Err(rejected) => Attempted::Refused {
            failure: rejected.is_failure(),
        },
    }
}

/// Whether the rest of a plan succeeded, as a time limiter around it counts it.
pub(super) fn succeeded<R>(judge: &impl Judge<R>, result: &Result<R, Rejected>) -> bool {
    match result {
        Ok(result) => !judge.failed(result),
        Err(_) => false,
    }
}

/// The gates `steps` of a segment record how the rest of the plan ended, and are released.
pub(super) fn finish<R>(
    held: &mut Held<'_>,
    steps: &[Step],
    judge: &impl Judge<R>,
    result: &Result<R, Rejected>,
) {
    match result {
        Ok(result) => held.complete_segment(steps, judge.outcome(result)),
        Err(rejected) => held.rejected_segment(steps, rejected),
    }
}

/// How the rest of a plan ended, as a wrapper around it sees it.
pub(super) fn ended<R>(judge: &impl Judge<R>, result: &Result<R, Rejected>) -> Ended {
    let attempted = attempted(judge, result);
    Ended {
        attempted,
        failed: !succeeded(judge, result),
        retry_after: match result {
            Ok(result) => judge.retry_after_failed(attempted, result),
            Err(_) => None,
        },
        hedge_on: match result {
            Ok(result) => attempted != Attempted::Succeeded && judge.hedge_on(result),
            Err(_) => false,
        },
    }
}
