//! Running a plan with wrappers (a retry, a time limiter) as nested segments.
//!
//! A plan sorted by precedence is cut at each wrapper: segment *k* is the gates between
//! wrapper *k − 1* and wrapper *k*. Running segment *k* enters its gates, then runs wrapper
//! *k* around segment *k + 1* (the last segment runs the call instead), then releases its
//! gates with the outcome. So with the default precedence
//!
//! ```text
//! bulkhead → rate limiter → retry → [ circuit breaker → time limiter → [ call ] ]
//! ```
//!
//! the bulkhead and the rate limiter admit the call once, each attempt of the retry enters the
//! breaker again, and each attempt is bounded by the time limiter; any other order means what
//! it says in the same code. Written once for sync calls (a recursive function) and once for
//! async ones (one function per level: a plan holds each wrapper kind once, so there are at
//! most three segments, and an async function cannot recurse without boxing its future).
//!
//! A retried attempt is not a re-entry: an attempt's call is on the call chain only while it
//! runs, so the next attempt enters the gates inside the retry as a new call would.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::chain::on_chain;
use super::held::Held;
use crate::error::Rejected;
use crate::outcome::CallOutcome;
use crate::plan::{Plan, Step, Wrapper};
use crate::retry::{Attempted, Next};

/// A way to make the call: again for each attempt of a retry, or once.
pub(crate) trait Attempt {
    /// What one attempt gives: the call's result (sync) or its future (async).
    type Output;
    /// Makes the call.
    fn attempt(&mut self) -> Self::Output;
    /// Whether the call can be made again.
    fn repeatable(&self) -> bool;
}

/// A call made again for each attempt.
pub(crate) struct Repeat<F>(pub(crate) F);

impl<O, F: FnMut() -> O> Attempt for Repeat<F> {
    type Output = O;
    #[inline(always)]
    fn attempt(&mut self) -> O {
        (self.0)()
    }
    #[inline(always)]
    fn repeatable(&self) -> bool {
        true
    }
}

/// A call that can be made once (a future given as it is): a retry around it makes one
/// attempt.
pub(crate) struct Once<F>(pub(crate) Option<F>);

impl<O, F: FnOnce() -> O> Attempt for Once<F> {
    type Output = O;
    fn attempt(&mut self) -> O {
        // `repeatable` is false once it ran: no retry asks again.
        let call = self.0.take().expect("a one-shot call is made once");
        call()
    }
    fn repeatable(&self) -> bool {
        self.0.is_some()
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
}

/// A retry follows the breakers' classification: it retries a failure, lets an ignored
/// outcome through (a client error is not fixed by asking again).
pub(crate) struct ByOutcome<C>(pub(crate) C);

impl<R, C: Fn(&R) -> CallOutcome> Judge<R> for ByOutcome<C> {
    #[inline(always)]
    fn outcome(&self, result: &R) -> CallOutcome {
        (self.0)(result)
    }
    #[inline]
    fn attempted(&self, result: &R) -> Attempted {
        match (self.0)(result) {
            CallOutcome::Success => Attempted::Succeeded,
            CallOutcome::Failure => Attempted::Failed,
            CallOutcome::Ignored => Attempted::NotRetried,
        }
    }
    #[inline]
    fn failed(&self, result: &R) -> bool {
        (self.0)(result) == CallOutcome::Failure
    }
}

/// The judge of a guarded function (the macros'): the breakers' classification (`ignore`,
/// `record`), whether the result is an `Err`, and whether the retry retries it (`retry_on`).
pub(crate) struct Judged<C, F, Q> {
    pub(crate) classify: C,
    pub(crate) failed: F,
    pub(crate) retry_on: Q,
}

impl<R, C, F, Q> Judge<R> for Judged<C, F, Q>
where
    C: Fn(&R) -> CallOutcome,
    F: Fn(&R) -> bool,
    Q: Fn(&R) -> bool,
{
    #[inline(always)]
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
fn attempted<R>(judge: &impl Judge<R>, result: &Result<R, Rejected>) -> Attempted {
    match result {
        Ok(result) => judge.attempted(result),
        Err(rejected) => Attempted::Refused {
            timed_out: matches!(rejected, Rejected::TimedOut { .. }),
        },
    }
}

/// Whether the rest of a plan succeeded, as a time limiter around it counts it.
fn succeeded<R>(judge: &impl Judge<R>, result: &Result<R, Rejected>) -> bool {
    match result {
        Ok(result) => !judge.failed(result),
        Err(_) => false,
    }
}

/// The gates `steps` of a segment record how the rest of the plan ended, and are released.
fn finish<R>(
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

impl Plan {
    /// Runs `attempt` through a plan with wrappers, blocking the thread where a gate makes the
    /// call wait and between the attempts of a retry.
    pub(crate) fn run_wrapped<A, J>(&self, mut attempt: A, judge: &J) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        let mut held = Held::new();
        let result = self
            .enter_gates(self.segment(0).gates, &mut held)
            .and_then(|()| self.run_within(0, &mut held, &mut attempt, judge));
        // Every segment released its gates (a panic unwinds through `held`'s drop instead).
        debug_assert!(held.is_empty(), "a call that ran holds no permit");
        std::mem::forget(held);
        result
    }

    /// The rest of segment `index` once its gates are held: its wrapper around the segments
    /// after it (or the call), then its gates released with the outcome.
    pub(crate) fn run_within<'a, A, J>(
        &'a self,
        index: usize,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
    ) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        let segment = self.segment(index);
        let inner = |held: &mut Held<'a>, attempt: &mut A| {
            let next = self.segment(index + 1);
            self.enter_gates(next.gates, held)?;
            self.run_within(index + 1, held, attempt, judge)
        };
        let result = match segment.wrapper {
            None => Ok(on_chain(held, || attempt.attempt())),
            Some(Wrapper::Retry(retry)) => {
                let mut attempts = retry.attempts();
                loop {
                    let result = inner(held, attempt);
                    match attempts.after(attempted(judge, &result), attempt.repeatable()) {
                        Next::Stop => break result,
                        Next::RetryAfter(wait) => {
                            drop(result);
                            retry.sleep_blocking(wait);
                        }
                    }
                }
            }
            // A thread cannot be cancelled: the call runs through, counted.
            Some(Wrapper::TimeLimiter(limiter)) => {
                let result = inner(held, attempt);
                limiter.completed(succeeded(judge, &result));
                result
            }
        };
        finish(held, &self.steps()[segment.gates], judge, &result);
        result
    }

    /// Runs `attempt` through a plan with wrappers, asynchronously.
    pub(crate) async fn run_wrapped_async<A, J>(
        &self,
        mut attempt: A,
        judge: J,
    ) -> Result<<A::Output as Future>::Output, Rejected>
    where
        A: Attempt,
        A::Output: Future,
        J: Judge<<A::Output as Future>::Output>,
    {
        let mut held = Held::new();
        segment0(self, &mut held, &mut attempt, &judge).await
    }
}

/// Releases the gates of a segment, recording nothing, if dropped before the segment ended:
/// when a time limiter outside it cut the call off, or the whole call was dropped.
struct SegmentGuard<'h, 'a> {
    held: &'h mut Held<'a>,
    gates: &'a [Step],
    done: bool,
}

impl Drop for SegmentGuard<'_, '_> {
    fn drop(&mut self) {
        if !self.done {
            self.held.abandon_segment(self.gates);
        }
    }
}

/// Segment `$index` of an async plan run as nested segments (`$within` without entering its
/// gates), with `$next` the segment after it.
macro_rules! async_segment {
    ($segment:ident, $within:ident, $index:literal, $next:ident) => {
        async fn $segment<'a, A, J>(
            plan: &'a Plan,
            held: &mut Held<'a>,
            attempt: &mut A,
            judge: &J,
        ) -> Result<<A::Output as Future>::Output, Rejected>
        where
            A: Attempt,
            A::Output: Future,
            J: Judge<<A::Output as Future>::Output>,
        {
            plan.enter_gates_async(plan.segment($index).gates, held)
                .await?;
            $within(plan, held, attempt, judge).await
        }

        async fn $within<'a, A, J>(
            plan: &'a Plan,
            held: &mut Held<'a>,
            attempt: &mut A,
            judge: &J,
        ) -> Result<<A::Output as Future>::Output, Rejected>
        where
            A: Attempt,
            A::Output: Future,
            J: Judge<<A::Output as Future>::Output>,
        {
            let segment = plan.segment($index);
            let mut guard = SegmentGuard {
                held,
                gates: &plan.steps()[segment.gates],
                done: false,
            };
            let result = match segment.wrapper {
                None => Ok(OnChain::new(&*guard.held, attempt.attempt()).await),
                Some(Wrapper::Retry(retry)) => {
                    let mut attempts = retry.attempts();
                    loop {
                        let result = $next(plan, &mut *guard.held, attempt, judge).await;
                        match attempts.after(attempted(judge, &result), attempt.repeatable()) {
                            Next::Stop => break result,
                            Next::RetryAfter(wait) => {
                                drop(result);
                                retry.sleep(wait).await;
                            }
                        }
                    }
                }
                Some(Wrapper::TimeLimiter(limiter)) => {
                    let rest = $next(plan, &mut *guard.held, attempt, judge);
                    limiter.limit(rest, |result| succeeded(judge, result)).await
                }
            };
            guard.done = true;
            finish(guard.held, guard.gates, judge, &result);
            result
        }
    };
}

async_segment!(segment0, within0, 0, segment1);
async_segment!(segment1, within1, 1, segment2);

/// The last segment: a plan holds each wrapper kind once, so the third segment (after two
/// wrappers) has none and runs the call.
async fn segment2<'a, A, J>(
    plan: &'a Plan,
    held: &mut Held<'a>,
    attempt: &mut A,
    judge: &J,
) -> Result<<A::Output as Future>::Output, Rejected>
where
    A: Attempt,
    A::Output: Future,
    J: Judge<<A::Output as Future>::Output>,
{
    let segment = plan.segment(2);
    debug_assert!(segment.wrapper.is_none(), "a plan has at most two wrappers");
    plan.enter_gates_async(segment.gates.clone(), held).await?;
    let mut guard = SegmentGuard {
        held,
        gates: &plan.steps()[segment.gates],
        done: false,
    };
    let result = Ok(OnChain::new(&*guard.held, attempt.attempt()).await);
    guard.done = true;
    finish(guard.held, guard.gates, judge, &result);
    result
}

pin_project_lite::pin_project! {
    /// Polls the call's future with its guards on the call chain, and drops it there (when it
    /// completes, or when it is cut off or abandoned): its destructors are part of the call.
    struct OnChain<'h, 'a, F> {
        held: &'h Held<'a>,
        #[pin]
        call: Option<F>,
    }
    impl<'h, 'a, F> PinnedDrop for OnChain<'h, 'a, F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if this.call.is_some() {
                on_chain(this.held, || this.call.set(None));
            }
        }
    }
}

impl<'h, 'a, F> OnChain<'h, 'a, F> {
    fn new(held: &'h Held<'a>, call: F) -> Self {
        OnChain {
            held,
            call: Some(call),
        }
    }
}

impl<F: Future> Future for OnChain<'_, '_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        let call = &mut this.call;
        on_chain(this.held, || {
            let Some(running) = call.as_mut().as_pin_mut() else {
                panic!("a guarded call's future was polled after it completed");
            };
            let polled = running.poll(cx);
            if polled.is_ready() {
                call.set(None);
            }
            polled
        })
    }
}
