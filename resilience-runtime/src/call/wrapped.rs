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
//! it says in the same code. Written once for sync calls (a recursive function, here) and once
//! for async ones (a recursive structure of levels, any number deep: [`super::nested_async`]).
//!
//! A plan of one wrapper and no gate (`#[retry]` or `#[time_limiter]` alone, the common
//! case) has no segment to enter or release: an async call runs its wrapper directly, and so
//! does a sync call through a lone retry (a sync call through a lone time limiter only counts
//! its outcome, on the flat path). The wrapper counts, emits and waits as it would inside a
//! stack, which the tests in `tests/tests/wrapped_calls.rs` hold it to; what it skips is the
//! bookkeeping: the empty permit slots, the empty call-chain frames the nested model links
//! for later attempts, and the outcome the gates would have been given. The macros call an
//! async entry without that shortcut for a stack of more than one annotation, whose plan is
//! never a lone wrapper.
//!
//! An async call's first attempt runs flat, in the call's own future: its gates entered, its
//! call polled in place until it completes (under the time limiter's timer once it waits), a
//! refusal handed to the wrappers outside it. Only a call that waits for a gate, is retried,
//! or waits under a time limiter outside a retry goes on in the nested model, whose states
//! (about 450 bytes for five aspects) are boxed: such a call nearly always allocates anyway
//! (the gate's wait, the retry's sleep, the timer; not a retry with no wait, nor a limiter
//! whose timeout runs past the end of the clock), and in the call's own future they made every
//! call's future that much larger, moved with it.
//!
//! A retried attempt is not a re-entry: an attempt's call is on the call chain only while it
//! runs, so the next attempt enters the gates inside the retry as a new call would.

use super::attempt::{ended, finish, Attempt, Judge};
use super::chain::on_chain;
use super::held::Held;
use crate::error::Rejected;
use crate::plan::{match_wrapper, Plan};
use crate::wrapper::{Attempted, Ended, Next, Wrap, WrapCall, WrapperCall};

impl Plan {
    /// Runs `attempt` through a plan with wrappers, blocking the thread where a gate makes the
    /// call wait and between the attempts of a retry.
    ///
    /// The first attempt runs flat, as a plan without wrappers does: a wrapper does nothing
    /// before its first attempt, so entering every gate in order is entering the segments one
    /// by one. When it ends in a way no retry retries (the common case), the wrappers count it
    /// and every gate records the outcome, innermost first: what the nested segments would do,
    /// without their bookkeeping. A refusal, or an attempt a retry retries, continues in the
    /// nested model from where the first attempt left off. A plan that is one wrapper and no
    /// gate skips all of it (see [`wrapper_alone_blocking`]).
    #[inline]
    pub(crate) fn run_wrapped<A, J>(&self, attempt: A, judge: &J) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        self.run_wrapped_into(attempt, judge, Ok, Err)
    }

    /// [`run_wrapped`](Self::run_wrapped), its output turned into the caller's by `ran`, or its
    /// rejection by `refused`: [`Plan::call`] returns the call's own `Result`, which on the hot
    /// path is then the first attempt's output moved once, where wrapped in `Ok` and unwrapped
    /// again it was copied twice (BENCHMARKS.md at 79fb71f).
    #[inline]
    pub(crate) fn run_wrapped_into<A, J, O>(
        &self,
        mut attempt: A,
        judge: &J,
        ran: impl FnOnce(A::Output) -> O,
        refused: impl FnOnce(Rejected) -> O,
    ) -> O
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        if let Some(wrapper) = self.lone_wrapper() {
            let alone = match_wrapper!(wrapper, w => wrapper_alone_blocking(&**w, attempt, judge));
            return match alone {
                Ok(output) => ran(output),
                Err(rejected) => refused(rejected),
            };
        }
        let mut held = Held::new();
        let result = match self.enter_flat(&mut held) {
            Ok(()) => {
                // A plan of wrappers only holds nothing a nested call could re-enter: its call
                // needs no frame on the chain.
                let output = if self.steps().is_empty() {
                    attempt.attempt()
                } else {
                    on_chain(&held, || attempt.attempt())
                };
                // Judged by reference where it lies, as the async path does: moved only to be
                // returned (each move of a result is a copy, and a stall when the copy's wide
                // loads read the call's narrow stores: BENCHMARKS.md at 79fb71f).
                match self.end_first_attempt(&mut held, &attempt, judge, &output) {
                    None => return ran(output),
                    Some((index, call, wait)) => self.retry_later(
                        index,
                        call,
                        wait,
                        &mut held,
                        &mut attempt,
                        judge,
                        Ok(output),
                    ),
                }
            }
            Err((gate, rejected)) => {
                self.refused_flat(gate, rejected, &mut held, &mut attempt, judge)
            }
        };
        // Every gate was released: `held`'s drop finds nothing (a panic unwinds through it,
        // which releases what is still held).
        drop(held);
        match result {
            Ok(output) => ran(output),
            Err(rejected) => refused(rejected),
        }
    }

    /// The first attempt ended with `output`: the wrappers, innermost first, see it end; unless
    /// one runs the rest again, every gate records its outcome (`None`). `Some` says which
    /// wrapper does (its index and its call) and the wait before the next run.
    #[inline]
    fn end_first_attempt<'a, A, J>(
        &'a self,
        held: &mut Held<'a>,
        attempt: &A,
        judge: &J,
        output: &A::Output,
    ) -> Option<(usize, WrapperCall<'a>, std::time::Duration)>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        let attempted = judge.attempted(output);
        let ended = Ended {
            attempted,
            failed: judge.failed(output),
            retry_after: judge.retry_after_failed(attempted, output),
            // A sync call makes one attempt through a hedge.
            hedge_on: false,
        };
        // A first attempt that succeeded may be seen by the wrappers before the gates record
        // it, in one pass (the common case), where no event can show the order; otherwise the
        // gates inside each wrapper record it first, as in the nested model (a breaker's
        // transition comes before the retry's event).
        let succeeded = ended.attempted == Attempted::Succeeded && self.one_pass_success();
        for (index, (before, wrapper)) in self.wrappers().iter().enumerate().rev() {
            if !succeeded {
                held.complete_segment(&self.steps()[*before..], judge.outcome(output));
            }
            let mut call = wrapper.begin(true);
            if let Next::RetryAfter(wait) = call.after(ended, attempt.repeatable()) {
                return Some((index, call, wait));
            }
        }
        held.complete_in_place(judge.outcome(output));
        None
    }

    /// The first attempt's gate `gate` refused it: the gates held in its segment see the
    /// refusal, then the wrappers outside it and their segments, as in the nested model.
    #[cold]
    fn refused_flat<'a, A, J>(
        &'a self,
        gate: usize,
        rejected: Rejected,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
    ) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        let segment = self.segment_of(gate);
        held.rejected_segment(&self.steps()[self.segment_start(segment)..], &rejected);
        match segment.checked_sub(1) {
            None => Err(rejected),
            Some(wrapper) => self.ascend(wrapper, held, attempt, judge, Err(rejected)),
        }
    }

    /// The first attempt ended as `result`, which the retry `index` retries after `wait`: the
    /// gates inside the retry record it, then the retry goes on in the nested model, then the
    /// wrappers and gates outside it see how it ended.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn retry_later<'a, A, J>(
        &'a self,
        index: usize,
        call: WrapperCall<'a>,
        wait: std::time::Duration,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
        result: Result<A::Output, Rejected>,
    ) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        let before = self.wrappers()[index].0;
        finish(held, &self.steps()[before..], judge, &result);
        drop(result);
        call.sleep_blocking(wait);
        let result = self.run_again(index, call, held, attempt, judge);
        self.release_segment(index, held, judge, &result);
        match index.checked_sub(1) {
            None => result,
            Some(outer) => self.ascend(outer, held, attempt, judge, result),
        }
    }

    /// Wrapper `index`'s inside ended as `result` (the gates after it released): it and every
    /// wrapper outside it handle it in turn, each followed by the gates of its segment.
    #[cold]
    fn ascend<'a, A, J>(
        &'a self,
        mut index: usize,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
        mut result: Result<A::Output, Rejected>,
    ) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        loop {
            let mut call = self.wrappers()[index].1.begin(true);
            result = match call.after(ended(judge, &result), attempt.repeatable()) {
                Next::Stop => result,
                Next::RetryAfter(wait) => {
                    drop(result);
                    call.sleep_blocking(wait);
                    self.run_again(index, call, held, attempt, judge)
                }
            };
            self.release_segment(index, held, judge, &result);
            match index.checked_sub(1) {
                None => return result,
                Some(outer) => index = outer,
            }
        }
    }

    /// The runs after the first of the rest inside wrapper `index` (begun as `call`), each in
    /// the nested model, until the wrapper stops.
    fn run_again<'a, A, J>(
        &'a self,
        index: usize,
        mut call: WrapperCall<'a>,
        held: &mut Held<'a>,
        attempt: &mut A,
        judge: &J,
    ) -> Result<A::Output, Rejected>
    where
        A: Attempt,
        J: Judge<A::Output>,
    {
        loop {
            let result = self
                .enter_gates(self.segment(index + 1).gates, held)
                .and_then(|()| self.run_within(index + 1, held, attempt, judge));
            match call.after(ended(judge, &result), attempt.repeatable()) {
                Next::Stop => return result,
                Next::RetryAfter(wait) => {
                    drop(result);
                    call.sleep_blocking(wait);
                }
            }
        }
    }

    /// The gates of segment `index` (those before wrapper `index`) record `result` and go.
    fn release_segment<R>(
        &self,
        index: usize,
        held: &mut Held<'_>,
        judge: &impl Judge<R>,
        result: &Result<R, Rejected>,
    ) {
        let gates = self.segment(index).gates;
        finish(held, &self.steps()[gates], judge, result);
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
        let result = match segment.wrapper {
            None => Ok(on_chain(held, || attempt.attempt())),
            // A thread cannot be cut off: a time limiter only counts how the rest ended.
            Some(wrapper) => self.run_again(index, wrapper.begin(true), held, attempt, judge),
        };
        finish(held, &self.steps()[segment.gates], judge, &result);
        result
    }
}

/// A plan of one wrapper and no gate (`#[retry]` alone, sync), run as the nested model runs
/// it, without a gate to enter or release or an (empty) frame to link for each run.
fn wrapper_alone_blocking<W, A, J>(
    wrapper: &W,
    mut attempt: A,
    judge: &J,
) -> Result<A::Output, Rejected>
where
    W: Wrap,
    A: Attempt,
    J: Judge<A::Output>,
{
    let mut call = wrapper.begin(true);
    loop {
        let result = Ok(attempt.attempt());
        match call.after(ended(judge, &result), attempt.repeatable()) {
            Next::Stop => return result,
            Next::RetryAfter(wait) => {
                drop(result);
                call.sleep_blocking(wait);
            }
        }
    }
}
