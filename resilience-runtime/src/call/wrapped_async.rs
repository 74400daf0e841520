//! The async half of running a plan with wrappers (see [`super::wrapped`] for the model): the
//! first attempt flat in the call's own future, then, boxed, the nested model
//! ([`super::nested_async`]) from where it left off.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{ready, Context, Poll};

use super::attempt::{ended, finish, Attempt, Judge};
use super::chain::{drop_in_place, poll_in_place};
use super::enter::{Mode, Whole};
use super::held::Held;
use super::nested_async::{NestedRun, Resume};
use crate::error::Rejected;
use crate::plan::{match_wrapper, Plan};
use crate::wrapper::{Attempted, Expired, Next, Sleep, Wrap, WrapCall, WrapperCall};

/// The first attempt of an async call ended as `$result`, off its hot path (its call was not
/// ready at its first poll, or a gate refused it): the outermost `$wrappers` wrappers see it,
/// innermost of them first ([`Plan::attempt_ended`]); [`Then::Done`] with it unless a retry
/// retries it (the call's future then returns from two places: the hot path's and its end).
macro_rules! attempt_over {
    ($plan:ident, $held:ident, $attempt:ident, $judge:ident, $result:ident,
     $wrappers:expr, $innermost:expr) => {
        match $plan.attempt_ended_off_hot_path(
            $wrappers,
            $innermost,
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

impl Plan {
    /// Runs `attempt` through a plan with wrappers, asynchronously.
    ///
    /// The first attempt runs flat, as in [`run_wrapped`](Self::run_wrapped): every gate
    /// asked in order without waiting, the call's future made and polled in place (under the
    /// innermost wrapper's deadline from its first suspension), a refusal handed to the
    /// wrappers outside it. When the attempt ends in a way no wrapper runs again (the common
    /// case), the call ends there. A gate that makes the call wait, an attempt a wrapper runs
    /// again, or a call that suspends under a deadline that bounds another wrapper's runs
    /// (a time limiter outside a retry) continues in the nested model, boxed, from where the
    /// first attempt left off ([`Resume`]): nothing is asked twice, nothing counted twice. A
    /// plan that is one wrapper and no gate skips all of it and runs its wrapper directly
    /// ([`Alone`]).
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
        // matches no instance a nested call could re-enter). Dropped while an attempt runs or
        // while it waits, the call ends there and the wrapper counts nothing more. Written
        // here rather than as a future of its own: a nested future is one more state machine
        // to resume and to drop on every call.
        // Matched per kind, so that the loop drives the kind's own call (`Wrap::Call`), not
        // the enum of them: a retry alone then polls no deadline and asks no time limiter's
        // question of the judge (the enum's dispatch cost the lone retry 12 ns a call,
        // nearly doubling it, and the lone time limiter 10: BENCHMARKS.md).
        // A lone hedge is not one: its runs overlap, which only the nested model keeps.
        if let Some(wrapper) = self.lone_wrapper().filter(|w| !w.overlaps()) {
            return match_wrapper!(wrapper, w => Alone {
                call: w.begin(false),
                attempt,
                judge,
                running: None,
                sleep: None,
            }
            .await);
        }
        let mut held = Held::new();
        // The place of the call's future, for every attempt: the first is polled here, and
        // the nested model polls it in place if it is not ready.
        let mut slot = pin!(None::<A::Output>);
        let entered = self.enter_from_or(0, Whole, &mut held, Mode::Stop, |gate, _, rejected| {
            (gate, rejected)
        });
        let then = match entered {
            Ok(None) => {
                slot.set(Some(attempt.attempt()));
                // The first poll's output goes out of scope before anything else is awaited.
                // Matched on with the `.await` of a call not ready at once in one of the arms,
                // it stayed alive across that await, so was laid out in the future's state:
                // the hot path's result was written there and copied out in pieces, wide
                // loads over narrow stores (five aspects: 33 instructions and 5 to 12 ns per
                // call more than this, BENCHMARKS.md at 79fb71f).
                let retried = {
                    let first = FirstPoll {
                        held: self.gates_on_chain(&held),
                        slot: slot.as_mut(),
                    }
                    .await;
                    match first {
                        Poll::Ready(output) => {
                            let result = Ok(output);
                            let wrappers = self.wrappers().len();
                            match self.attempt_ended(
                                wrappers,
                                None,
                                &mut held,
                                &mut attempt,
                                &judge,
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
                    // A wrapper that bounds the rest outside another wrapper bounds the
                    // other's runs together: its deadline goes on across them, as the nested
                    // model keeps it. (Such a call allocates its timer anyway.)
                    // So does a hedge with another wrapper inside it: its runs overlap.
                    None if self.bounds_across_wrappers() || self.overlaps_outside_innermost() => {
                        Then::Resume(Box::new(Resume::EnterFrom(self.steps().len())))
                    }
                    // Otherwise the innermost wrapper is the one that may bound the attempt (a
                    // time limiter) or start another beside it (a hedge): the call goes on in
                    // its place under its deadline, and only a hedge's second attempt hands it
                    // over to the nested model.
                    None => {
                        let innermost = self.wrappers().len() - 1;
                        let mut call = self.wrappers()[innermost].1.begin(false);
                        let bound = Bounded {
                            held: self.gates_on_chain(&held),
                            slot: slot.as_mut(),
                            call: &mut call,
                            polled: true,
                            overlaps: !attempt.once() && self.wrappers()[innermost].1.overlaps(),
                            handed_over: false,
                        }
                        .await;
                        match bound {
                            Bound::Another => Then::Resume(Box::new(Resume::Hedged { call })),
                            Bound::Ended(result) => {
                                if result.is_err() {
                                    self.cut_off(innermost, &mut held);
                                }
                                attempt_over!(
                                    self,
                                    held,
                                    attempt,
                                    judge,
                                    result,
                                    innermost + 1,
                                    Some(call)
                                )
                            }
                        }
                    }
                }
            }
            Ok(Some(gate)) => Then::Resume(Box::new(Resume::EnterFrom(gate))),
            Err((gate, rejected)) => {
                // Refused: the gates held in its segment see it, then the wrappers outside
                // it and their segments, as in the nested model.
                let segment = self.segment_of(gate);
                held.rejected_segment(&self.steps()[self.segment_start(segment)..], &rejected);
                let result = Err(rejected);
                attempt_over!(self, held, attempt, judge, result, segment, None)
            }
        };
        // Matched before the await, so that nothing of `then` is kept across it.
        let nested = match then {
            Then::Done(result) => return result,
            // A gate makes the call wait, a wrapper runs the rest again, or a deadline goes on
            // across the runs of another wrapper: the nested model takes over, in a future of
            // its own on the heap (the call's future keeps the box alone). Such a call nearly
            // always allocates anyway (the gate's wait, the retry's sleep, the timer); in the
            // call's own future, the nested model's states made every call's future larger,
            // and moved with it, where few calls ever reach them.
            Then::Resume(resume) => Box::pin(NestedRun::new(
                self,
                &mut held,
                &mut attempt,
                &judge,
                slot.as_mut(),
                *resume,
            )),
        };
        nested.await
    }

    /// [`end_first_attempt`](Self::end_first_attempt) for an async call whose first attempt
    /// ended as `result`, seen by the outermost `wrappers` wrappers, innermost of them first
    /// (those further in never saw the call, being inside the gate that refused it; the gates
    /// inside them are released). `innermost` is the call of the innermost of them, begun
    /// already if the attempt ran under its deadline. `None` once every gate recorded it, or
    /// where the nested model resumes if a wrapper runs the rest again (the gates inside that
    /// wrapper released, its next run due after a wait).
    #[inline]
    fn attempt_ended<'a, A, J, O>(
        &'a self,
        wrappers: usize,
        mut innermost: Option<WrapperCall<'a>>,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
        result: &Result<O, Rejected>,
    ) -> Option<Box<Resume<'a>>>
    where
        A: Attempt,
        J: Judge<O>,
    {
        let ended = ended(judge, result);
        // As in `end_first_attempt`: a success is seen by the wrappers first, in one pass.
        let hot = self.one_pass_success() && ended.attempted == Attempted::Succeeded;
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
            let mut call = match innermost.take() {
                Some(call) => call,
                None => wrapper.begin(false),
            };
            if let Next::RetryAfter(wait) = call.after(ended, attempt.repeatable()) {
                finish(held, &self.steps()[*before..], judge, result);
                return Some(Box::new(Resume::Again { index, call, wait }));
            }
        }
        match result {
            Ok(output) => held.complete_in_place(judge.outcome(output)),
            Err(rejected) => held.rejected(rejected),
        }
        None
    }

    /// [`attempt_ended`](Self::attempt_ended) off the hot path (the first attempt suspended,
    /// or was refused): out of line, so that the call's future holds the hot path's copy only.
    /// Its two inlined copies more made the future's poll too large to inline into its
    /// caller: the five-aspect `Plan::call_async` 67.5 → 78 ns, and 84.6 when polled out of
    /// line to spare the gates' path (BENCHMARKS.md).
    #[inline(never)]
    fn attempt_ended_off_hot_path<'a, A, J, O>(
        &'a self,
        wrappers: usize,
        innermost: Option<WrapperCall<'a>>,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
        result: &Result<O, Rejected>,
    ) -> Option<Box<Resume<'a>>>
    where
        A: Attempt,
        J: Judge<O>,
    {
        self.attempt_ended(wrappers, innermost, held, attempt, judge, result)
    }

    /// The permits to put on the call chain while a call runs: `None` for a plan of wrappers
    /// only, which holds nothing a nested call could re-enter (its call needs no frame).
    #[inline]
    fn gates_on_chain<'h, 'a>(&self, held: &'h Held<'a>) -> Option<&'h Held<'a>> {
        (!self.steps().is_empty()).then_some(held)
    }

    /// The wrapper `index` cut the first attempt off, its call dropped: the gates inside it
    /// are released, recording nothing, innermost first.
    #[cold]
    fn cut_off(&self, index: usize, held: &mut Held<'_>) {
        held.abandon_segment(&self.steps()[self.wrappers()[index].0..]);
    }
}

/// How the first attempt of an async call ended, off its hot path.
enum Then<'p, R> {
    /// The call ends with this result.
    Done(R),
    /// The nested model takes over.
    /// Boxed: the call's future keeps a pointer across its awaits, not a wrapper's call.
    Resume(Box<Resume<'p>>),
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
        Poll::Ready(poll_in_place(this.held, this.slot.as_mut(), cx))
    }
}

/// The first attempt's call in its place after a first poll that was not ready, polled (on
/// the call chain, if it holds gates) until it completes, under the deadline of the innermost
/// wrapper, begun as `call`. `Err` when the deadline cut it off (its future dropped). Written
/// by hand, in the call's own future: the nested model would do the same in a level per
/// segment, and a call that waits on its dependency is a common call, not one that may
/// allocate.
struct Bounded<'s, 'h, 'c, 'a, F: Future> {
    /// The call's permits, to put on the chain while it is polled; `None` for a plan without
    /// gates.
    held: Option<&'h Held<'a>>,
    slot: Pin<&'s mut Option<F>>,
    call: &'c mut WrapperCall<'a>,
    /// The call's future was polled just now (the first attempt's first poll, in this poll of
    /// the task): not polled again before the wrapper's deadline or timer is.
    polled: bool,
    /// The wrapper's runs overlap (a hedge) and the call can be made again: its timer may
    /// start another beside this one.
    overlaps: bool,
    /// The call went on in the nested model ([`Bound::Another`]), its future with it.
    handed_over: bool,
}

/// How a call [`Bounded`] by its innermost wrapper went on.
enum Bound<O> {
    /// It ended (`Err`: the deadline cut it off, its future dropped).
    Ended(Result<O, Rejected>),
    /// The wrapper, a hedge, starts a second run beside it (counted as started): the call
    /// goes on in the nested model, its future running in its place.
    Another,
}

impl<F: Future> Future for Bounded<'_, '_, '_, '_, F> {
    type Output = Bound<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if !std::mem::take(&mut this.polled) {
            if let Poll::Ready(output) = poll_in_place(this.held, this.slot.as_mut(), cx) {
                return Poll::Ready(Bound::Ended(Ok(output)));
            }
        }
        if let Poll::Ready(Expired::CutOff(rejected)) = this.call.poll_expired(cx) {
            drop_in_place(this.held, this.slot.as_mut());
            return Poll::Ready(Bound::Ended(Err(rejected)));
        }
        if this.overlaps && this.call.poll_another(cx).is_ready() {
            // The call's future stays in its place, for the nested model: not this one's to
            // drop any more.
            this.overlaps = false;
            this.handed_over = true;
            return Poll::Ready(Bound::Another);
        }
        Poll::Pending
    }
}

impl<F: Future> Drop for Bounded<'_, '_, '_, '_, F> {
    /// The whole call dropped while its call runs: the call's future goes first, on the chain
    /// (then the permits, with the call's [`Held`]).
    fn drop(&mut self) {
        if !self.handed_over {
            drop_in_place(self.held, self.slot.as_mut());
        }
    }
}

pin_project_lite::pin_project! {
    /// A call through a lone wrapper (no gate, so no frame on the call chain), whose `call`
    /// bounds each attempt's future and says whether to make another after a wait. One future
    /// written by hand, awaited once: as the loop of an `async fn`, its states (the wrapper's
    /// call, the result, the wait) were live across several awaits, so each kept a place of
    /// its own in the future of every call through the plan (64 bytes more).
    struct Alone<'w, A: Attempt, J, C> {
        call: C,
        attempt: A,
        judge: J,
        #[pin]
        running: Option<A::Output>,
        sleep: Option<Sleep<'w>>,
    }
}

impl<'w, A, J, C> Future for Alone<'w, A, J, C>
where
    A: Attempt,
    A::Output: Future,
    J: Judge<<A::Output as Future>::Output>,
    C: WrapCall<'w>,
{
    type Output = Result<<A::Output as Future>::Output, Rejected>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            if let Some(sleep) = this.sleep {
                ready!(Pin::new(sleep).poll(cx));
                *this.sleep = None;
            }
            if this.running.is_none() {
                this.running.set(Some(this.attempt.attempt()));
            }
            let Some(running) = this.running.as_mut().as_pin_mut() else {
                unreachable!("an attempt was just made");
            };
            let result = match running.poll(cx) {
                Poll::Ready(output) => Ok(output),
                Poll::Pending => match this.call.poll_expired(cx) {
                    Poll::Pending | Poll::Ready(Expired::Overran) => return Poll::Pending,
                    Poll::Ready(Expired::CutOff(rejected)) => Err(rejected),
                },
            };
            this.running.set(None);
            let repeatable = this.attempt.repeatable();
            match WrapCall::after(this.call, ended(this.judge, &result), repeatable) {
                Next::Stop => return Poll::Ready(result),
                Next::RetryAfter(wait) => {
                    drop(result);
                    *this.sleep = Some(this.call.sleep(wait));
                }
            }
        }
    }
}
