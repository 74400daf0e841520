//! The async half of running a plan with wrappers (see [`super::wrapped`] for the model): the
//! first attempt flat in the call's own future, then, boxed, the nested model
//! ([`super::nested_async`]) from where it left off.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};

use super::attempt::{attempted, ended, finish, succeeded, Attempt, Judge};
use super::chain::on_chain;
use super::enter::{Mode, Whole};
use super::held::Held;
use super::nested_async::{NestedRun, Resume};
use crate::error::Rejected;
use crate::plan::{Plan, Wrapper};
use crate::retry::{Attempted, Next};
use crate::time_limiter::{Deadline, Expired};
use crate::wrapper::WrapCall;

/// The first attempt of an async call ended as `$result`, off its hot path (its call was not
/// ready at its first poll, or a gate refused it): the outermost `$wrappers` wrappers see it,
/// innermost of them first ([`Plan::attempt_ended`]); [`Then::Done`] with it unless a retry
/// retries it (the call's future then returns from two places: the hot path's and its end).
macro_rules! attempt_over {
    ($plan:ident, $held:ident, $attempt:ident, $judge:ident, $result:ident,
     $wrappers:expr, $overran:expr) => {
        match $plan.attempt_ended(
            $wrappers,
            $overran,
            &mut $held,
            &mut $attempt,
            &$judge,
            &$result,
        ) {
            None => Then::Done($result),
            Some(resume) => {
                drop($result);
                Then::Resume(resume)
            }
        }
    };
}

/// The body of [`Plan::run_wrapped_async`] and [`Plan::run_nested_async`] after their
/// shortcuts: the first attempt flat, then the nested model. A macro, not an `async fn` the two
/// await: a nested future is one more state machine to resume and to drop on every call, and a
/// branch that a constant rules out still has its states in the coroutine's layout (both
/// measured: BENCHMARKS.md at 79fb71f), so the two are written out from one text.
macro_rules! nested_async {
    ($plan:ident, $attempt:ident, $judge:ident) => {{
        let mut held = Held::new();
        // The place of the call's future, for every attempt: the first is polled here, and
        // the nested model polls it in place if it is not ready.
        let mut slot = pin!(None::<A::Output>);
        let entered = $plan.enter_from_or(0, Whole, &mut held, Mode::Stop, |gate, _, rejected| {
            (gate, rejected)
        });
        let then = match entered {
            Ok(None) => {
                slot.set(Some($attempt.attempt()));
                // The first poll's output goes out of scope before anything else is awaited.
                // Matched on with the `.await` of a call not ready at once in one of the arms,
                // it stayed alive across that await, so was laid out in the future's state:
                // the hot path's result was written there and copied out in pieces, wide
                // loads over narrow stores (five aspects: 33 instructions and 5 to 12 ns per
                // call more than this, BENCHMARKS.md at 79fb71f).
                let retried = {
                    let first = FirstPoll {
                        held: $plan.gates_on_chain(&held),
                        slot: slot.as_mut(),
                    }
                    .await;
                    match first {
                        Poll::Ready(output) => {
                            let result = Ok(output);
                            let wrappers = $plan.wrappers().len();
                            match $plan.attempt_ended(
                                wrappers,
                                false,
                                &mut held,
                                &mut $attempt,
                                &$judge,
                                &result,
                            ) {
                                // Every gate released: `held`'s drop finds nothing.
                                None => return result,
                                Some(resume) => {
                                    drop(result);
                                    Some(resume)
                                }
                            }
                        }
                        Poll::Pending => None,
                    }
                };
                match retried {
                    Some(resume) => Then::Resume(resume),
                    // A time limiter outside a retry bounds its attempts together: its timer
                    // goes on across them, as the nested model keeps it. (Such a call
                    // allocates its timer anyway.)
                    None if $plan.retries_within_time_limiter() => {
                        Then::Resume(Resume::EnterFrom($plan.steps().len()))
                    }
                    None => match Running::new($plan, $plan.gates_on_chain(&held), slot.as_mut())
                        .await
                    {
                        Ran::Completed { output, overran } => {
                            let result = Ok(output);
                            let wrappers = $plan.wrappers().len();
                            attempt_over!($plan, held, $attempt, $judge, result, wrappers, overran)
                        }
                        Ran::CutOff { limiter, rejected } => {
                            $plan.cut_off(limiter, &mut held);
                            let result = Err(rejected);
                            attempt_over!($plan, held, $attempt, $judge, result, limiter, false)
                        }
                    },
                }
            }
            Ok(Some(gate)) => Then::Resume(Resume::EnterFrom(gate)),
            Err((gate, rejected)) => {
                // Refused: the gates held in its segment see it, then the wrappers outside
                // it and their segments, as in the nested model.
                let segment = $plan.segment_of(gate);
                held.rejected_segment(&$plan.steps()[$plan.segment_start(segment)..], &rejected);
                let result = Err(rejected);
                attempt_over!($plan, held, $attempt, $judge, result, segment, false)
            }
        };
        match then {
            Then::Done(result) => result,
            // A gate makes the call wait, a retry retries it, or a time limiter's timer goes
            // on across attempts: the nested model takes over, in a future of its own on the
            // heap, with its context (the call's future keeps the box alone). Such a call
            // nearly always allocates anyway (the gate's wait, the retry's sleep, the timer);
            // in the call's own future, the nested model's states (the segments' futures,
            // about 450 bytes for five aspects) made every call's future that much larger, and
            // moved with it, where few calls ever reach them.
            Then::Resume(resume) => {
                Box::pin(NestedRun::new(
                    $plan,
                    &mut held,
                    &mut $attempt,
                    &$judge,
                    slot.as_mut(),
                    resume,
                ))
                .await
            }
        }
    }};
}

impl Plan {
    /// Runs `attempt` through a plan with wrappers, asynchronously.
    ///
    /// The first attempt runs flat, as in [`run_wrapped`](Self::run_wrapped): every gate
    /// asked in order without waiting, the call's future made and polled in place (under the
    /// time limiter's timer from its first suspension), a refusal handed to the wrappers
    /// outside it. When the attempt ends in a way no retry retries (the common case), the call
    /// ends there. A gate that makes the call wait, an attempt a retry retries, or a call that
    /// suspends under a time limiter outside a retry continues in the nested model, boxed,
    /// from where the first attempt left off ([`Resume`]): nothing is asked twice, nothing
    /// counted twice. A plan that is one wrapper and no gate skips all of it and runs its
    /// wrapper directly.
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
        // A plan that refuses every call has no gates: refused here, before any entry. Not
        // only tidy: the entry's refusal would name gate 0, which the nested model reads as a
        // gate past the (empty) first segment, and would go on to run the call.
        if let Some(rejected) = self.unconfigured() {
            return Err(rejected);
        }
        // A plan of one wrapper and no gate (`#[retry]` or `#[time_limiter]` alone): the
        // wrapper's counts, events and waits as in the nested model, without its bookkeeping.
        // There is no gate to enter, hold or release, and no frame worth linking (an empty one
        // matches no instance a nested call could re-enter). The time limiter's timer starts at
        // the call's first suspension, as documented (the nested model polls the call a second
        // time before starting it). Written here rather than as futures of their own: a nested
        // future is one more state machine to resume and to drop on every call.
        match self.lone_wrapper() {
            Some(Wrapper::Retry(retry)) => {
                // Dropped while an attempt runs or while it waits, the call ends there and the
                // retry counts nothing more.
                let mut attempts = retry.attempts();
                loop {
                    let result = Ok(attempt.attempt().await);
                    match attempts.after(attempted(&judge, &result), attempt.repeatable()) {
                        Next::Stop => return result,
                        Next::RetryAfter(wait) => {
                            drop(result);
                            retry.sleep(wait).await;
                        }
                    }
                }
            }
            Some(Wrapper::TimeLimiter(limiter)) => {
                let call = async { Ok(attempt.attempt().await) };
                return limiter
                    .limit(call, |result| succeeded(&judge, result))
                    .await;
            }
            None => {}
        }
        nested_async!(self, attempt, judge)
    }

    /// [`run_wrapped_async`](Self::run_wrapped_async) without the lone wrapper's shortcut, for
    /// a plan that has a gate or more than one wrapper (the macros know it of a stack of more
    /// than one annotation: its plan holds every guard of the stack). Its state machine lacks
    /// the lone wrapper's states, which every call of the other pays to resume and to drop
    /// (five aspects: 21 instructions; BENCHMARKS.md at 79fb71f). Right for any plan: given a lone
    /// wrapper after all, the nested model runs it, as it did before the shortcut existed.
    pub(crate) async fn run_nested_async<A, J>(
        &self,
        mut attempt: A,
        judge: J,
    ) -> Result<<A::Output as Future>::Output, Rejected>
    where
        A: Attempt,
        A::Output: Future,
        J: Judge<<A::Output as Future>::Output>,
    {
        // As in `run_wrapped_async`; a plan that refuses has neither gate nor wrapper.
        if let Some(rejected) = self.unconfigured() {
            return Err(rejected);
        }
        nested_async!(self, attempt, judge)
    }

    /// [`end_first_attempt`](Self::end_first_attempt) for an async call whose first attempt
    /// ended as `result`, seen by the outermost `wrappers` wrappers, innermost of them first
    /// (those further in saw it already, as a time limiter that cut the call off did, or never
    /// saw the call, being inside the gate that refused it; the gates inside them are
    /// released). A time limiter that let the call overrun counted it already. `None` once
    /// every gate recorded it, or where the nested model resumes if a retry retries it (the
    /// gates inside that retry released, its next attempt due after a wait).
    #[inline(always)]
    fn attempt_ended<'a, A, J, O>(
        &'a self,
        wrappers: usize,
        overran: bool,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
        result: &Result<O, Rejected>,
    ) -> Option<Resume<'a>>
    where
        A: Attempt,
        J: Judge<O>,
    {
        // As in `end_first_attempt`: a success is seen by the wrappers first, in one pass.
        let hot = self.one_pass_success()
            && matches!(result, Ok(output) if judge.attempted(output) == Attempted::Succeeded);
        for (index, (before, wrapper)) in self.wrappers()[..wrappers].iter().enumerate().rev() {
            // The gates inside the wrapper see the attempt end before the wrapper does, as in
            // the nested model (those a refusal or a cut-off released already hold nothing).
            if !hot {
                finish(
                    held,
                    &self.steps()[self.segment(index + 1).gates],
                    judge,
                    result,
                );
            }
            match wrapper {
                Wrapper::TimeLimiter(limiter) => {
                    if !overran {
                        limiter.completed(succeeded(judge, result));
                    }
                }
                Wrapper::Retry(_) => {
                    let mut call = wrapper.begin(false);
                    if let Next::RetryAfter(wait) =
                        call.after(ended(judge, result), attempt.repeatable())
                    {
                        finish(held, &self.steps()[*before..], judge, result);
                        return Some(Resume::Again { index, call, wait });
                    }
                }
            }
        }
        match result {
            Ok(output) => held.complete_in_place(judge.outcome(output)),
            Err(rejected) => held.rejected(rejected),
        }
        None
    }

    /// The permits to put on the call chain while a call runs: `None` for a plan of wrappers
    /// only, which holds nothing a nested call could re-enter (its call needs no frame).
    #[inline(always)]
    fn gates_on_chain<'h, 'a>(&self, held: &'h Held<'a>) -> Option<&'h Held<'a>> {
        (!self.steps().is_empty()).then_some(held)
    }

    /// The time limiter `limiter` (a wrapper's index) cut the first attempt off, its call
    /// dropped: the gates inside it are released, recording nothing, innermost first.
    #[cold]
    fn cut_off(&self, limiter: usize, held: &mut Held<'_>) {
        held.abandon_segment(&self.steps()[self.wrappers()[limiter].0..]);
    }
}

/// How the first attempt of an async call ended, off its hot path.
enum Then<'p, R> {
    /// The call ends with this result.
    Done(R),
    /// The nested model takes over.
    Resume(Resume<'p>),
}

/// The first poll of the first attempt's future, whatever it gives: `Ready` at once, with
/// the call's poll in it. A future of its own rather than a `poll_fn` closure, so that its
/// poll is inlined into the call's: LLVM kept the closure's out of line, and the call-chain
/// link and the first poll of the call's future with it (five aspects 618 → 559
/// instructions, BENCHMARKS.md at 79fb71f).
struct FirstPoll<'s, 'h, 'a, F> {
    /// The call's permits, to put on the chain while it is polled; `None` for a plan without
    /// gates.
    held: Option<&'h Held<'a>>,
    slot: Pin<&'s mut Option<F>>,
}

impl<F: Future> Future for FirstPoll<'_, '_, '_, F> {
    type Output = Poll<F::Output>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        Poll::Ready(match this.held {
            None => poll_in(this.slot.as_mut(), cx),
            Some(held) => poll_on_chain(held, this.slot.as_mut(), cx),
        })
    }
}

/// The first attempt's call after a first poll that was not ready, every gate held: polled in
/// its place, on the call chain, until it completes, under the timer of the plan's time
/// limiter if it has one (started here, at the call's first suspension). Written by hand, in
/// the call's own future: the nested model would do the same in a segment's future per level,
/// and a call that waits on its dependency is a common call, not one that may allocate.
struct Running<'s, 'h, 'a, F: Future> {
    /// The call's permits, to put on the chain while it is polled; `None` for a plan without
    /// gates.
    held: Option<&'h Held<'a>>,
    slot: Pin<&'s mut Option<F>>,
    /// The plan's time limiter (its index among the wrappers) and the call's timer.
    limit: Option<(usize, Deadline<'a>)>,
    /// The time limiter reported the call as timed out and let it go on.
    overran: bool,
}

/// How a [`Running`] call ended.
enum Ran<O> {
    /// It completed, in time or after it overran.
    Completed { output: O, overran: bool },
    /// The time limiter `limiter` (its index among the wrappers) cut it off; its future is
    /// dropped.
    CutOff { limiter: usize, rejected: Rejected },
}

impl<'s, 'h, 'a, F: Future> Running<'s, 'h, 'a, F> {
    #[cold]
    fn new(plan: &'a Plan, held: Option<&'h Held<'a>>, slot: Pin<&'s mut Option<F>>) -> Self {
        let limit = plan
            .wrappers()
            .iter()
            .enumerate()
            .find_map(|(index, (_, wrapper))| match wrapper {
                Wrapper::TimeLimiter(limiter) => Some((index, limiter.start())),
                Wrapper::Retry(_) => None,
            });
        Running {
            held,
            slot,
            limit,
            overran: false,
        }
    }

    /// Drops the call's future in its place, on the call chain.
    fn drop_call(&mut self) {
        let slot = &mut self.slot;
        match self.held {
            None => slot.set(None),
            Some(held) => on_chain(held, || slot.set(None)),
        }
    }
}

impl<F: Future> Future for Running<'_, '_, '_, F> {
    type Output = Ran<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled = match this.held {
            None => poll_in(this.slot.as_mut(), cx),
            Some(held) => poll_on_chain(held, this.slot.as_mut(), cx),
        };
        if let Poll::Ready(output) = polled {
            return Poll::Ready(Ran::Completed {
                output,
                overran: this.overran,
            });
        }
        let Some((limiter, deadline)) = &mut this.limit else {
            return Poll::Pending;
        };
        match deadline.poll_expired(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Expired::Overran) => {
                this.overran = true;
                Poll::Pending
            }
            Poll::Ready(Expired::CutOff(rejected)) => {
                let limiter = *limiter;
                this.drop_call();
                Poll::Ready(Ran::CutOff { limiter, rejected })
            }
        }
    }
}

impl<F: Future> Drop for Running<'_, '_, '_, F> {
    /// The whole call dropped while its call runs: the call's future goes first, on the chain
    /// (then the permits, with the call's [`Held`]).
    fn drop(&mut self) {
        if self.slot.is_some() {
            self.drop_call();
        }
    }
}

/// Polls the call's future in `slot` with its guards on the call chain; once it is ready,
/// drops it there (its destructors are part of the call).
fn poll_on_chain<F: Future>(
    held: &Held<'_>,
    slot: Pin<&mut Option<F>>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    on_chain(held, || poll_in(slot, cx))
}

/// Polls the call's future in `slot`; once it is ready, drops it.
#[inline(always)]
fn poll_in<F: Future>(mut slot: Pin<&mut Option<F>>, cx: &mut Context<'_>) -> Poll<F::Output> {
    let Some(running) = slot.as_mut().as_pin_mut() else {
        panic!("a guarded call's future was polled after it completed");
    };
    let polled = running.poll(cx);
    if polled.is_ready() {
        slot.set(None);
    }
    polled
}
