//! The reference execution of a plan: one level per guard, written for clarity and not for
//! speed, against which every entry is held by the differential test
//! (`tests/tests/differential.rs`). Not an API: reachable as `__reference` for that test.
//!
//! Each guard of the plan, in execution order, is one level that runs the levels after it:
//!
//! - a gate is asked (passed through if the call chain already holds it, as the re-entrancy
//!   policy says), runs the rest holding its permit, then records how the rest ended and
//!   releases the permit: an outcome, a refusal from further in, or nothing (a panic, a
//!   dropped future, a time limiter that cut the rest off);
//! - a wrapper (through its seam, `wrapper::WrapCall`) runs the rest under the deadline it
//!   polls (async: the time limiter's, cut off when it fires), then says stop or run the rest
//!   again after a wait (the retry); a sync call cannot be cut off, only counted;
//! - past the last guard, the call runs with every permit held on the call chain.
//!
//! It shares with the engine only the aspects' own steps (a gate's admission and permit, a
//! wrapper's call through the seam) and the permits' store and chain: what is compared is how
//! the engine joins them.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use super::attempt::{ended, Attempt, ByOutcome, Judge, Judged, OneShot, Repeat};
use super::chain::on_chain;
use super::held::{Held, HeldSlot};
use crate::error::Rejected;
use crate::gate::Entry;
use crate::outcome::CallOutcome;
use crate::plan::{match_step, Layer, Plan, ReentrancyPolicy, Step};
use crate::wrapper::{Expired, Next, Run, Settle, WrapCall, WrapperCall};

/// [`Plan::run`] (or, `once`, a call that can be made once), the reference way. Waits block
/// the thread.
pub fn run<R>(
    plan: &Plan,
    call: impl FnMut() -> R,
    classify: impl Fn(&R) -> CallOutcome,
    once: bool,
) -> Result<R, Rejected> {
    let judge = ByOutcome(classify);
    if once {
        start(plan, &mut OneShot(Some(call)), &judge)
    } else {
        start(plan, &mut Repeat(call), &judge)
    }
}

/// A guarded function's call (the macros' judge: `classify` for the breakers, `failed` for
/// the time limiter and the retry, `retry_on` for which failures the retry retries), the
/// reference way.
pub fn run_judged<R>(
    plan: &Plan,
    call: impl FnMut() -> R,
    classify: impl Fn(&R) -> CallOutcome,
    failed: impl Fn(&R) -> bool,
    retry_on: impl Fn(&R) -> bool,
) -> Result<R, Rejected> {
    let judge = Judged {
        classify,
        failed,
        retry_on,
        retry_after: |_: &R| None,
        hedge_on: |_: &R| false,
    };
    start(plan, &mut Repeat(call), &judge)
}

/// [`Plan::run_async`] (or, `once`, [`Plan::run_future`]), the reference way.
pub async fn run_async<R: Send, F: Future<Output = R> + Send>(
    plan: &Plan,
    mut call: impl FnMut() -> F + Send,
    classify: impl Fn(&R) -> CallOutcome + Sync,
    once: bool,
) -> Result<R, Rejected> {
    let judge = ByOutcome(classify);
    if once {
        start_async(plan, &mut OneShot(Some(&mut call)), &judge).await
    } else {
        start_async(plan, &mut Repeat(&mut call), &judge).await
    }
}

/// [`run_judged`] for an `async fn` (`once`: its body's future made once), with `hedge_on`
/// for which failures a hedge starts its next attempt for at once.
#[allow(clippy::too_many_arguments)] // the macros' judge, one closure per question
pub async fn run_judged_async<R: Send, F: Future<Output = R> + Send>(
    plan: &Plan,
    mut call: impl FnMut() -> F + Send,
    classify: impl Fn(&R) -> CallOutcome + Sync,
    failed: impl Fn(&R) -> bool + Sync,
    retry_on: impl Fn(&R) -> bool + Sync,
    hedge_on: impl Fn(&R) -> bool + Sync,
    once: bool,
) -> Result<R, Rejected> {
    let judge = Judged {
        classify,
        failed,
        retry_on,
        retry_after: |_: &R| None,
        hedge_on,
    };
    if once {
        start_async(plan, &mut OneShot(Some(&mut call)), &judge).await
    } else {
        start_async(plan, &mut Repeat(&mut call), &judge).await
    }
}

fn start<A: Attempt, J: Judge<A::Output>>(
    plan: &Plan,
    attempt: &mut A,
    judge: &J,
) -> Result<A::Output, Rejected> {
    if let Some(rejected) = plan.unconfigured() {
        return Err(rejected);
    }
    // Dropped by a panic, `held` releases what it still holds, recording nothing.
    let mut held = Held::new();
    held.start(plan.order());
    level(plan, 0, &mut held, attempt, judge)
}

/// Guard `index` of the plan and the rest after it, blocking where they wait.
fn level<'a, A: Attempt, J: Judge<A::Output>>(
    plan: &'a Plan,
    index: usize,
    held: &mut Held<'a>,
    attempt: &mut A,
    judge: &J,
) -> Result<A::Output, Rejected> {
    match plan.layer(index) {
        None => Ok(on_chain(held, || attempt.attempt())),
        Some(Layer::Gate(step)) => {
            if !admit(plan, step, held)? {
                return level(plan, index + 1, held, attempt, judge);
            }
            let result = level(plan, index + 1, held, attempt, judge);
            release(held, step, judge, &result);
            result
        }
        Some(Layer::Wrapper(wrapper)) => {
            let mut call = wrapper.begin(true);
            loop {
                let result = level(plan, index + 1, held, attempt, judge);
                match call.after(ended(judge, &result), attempt.repeatable()) {
                    Next::Stop => return result,
                    Next::RetryAfter(wait) => {
                        drop(result);
                        call.sleep_blocking(wait);
                    }
                }
            }
        }
    }
}

async fn start_async<A, J>(
    plan: &Plan,
    attempt: &mut A,
    judge: &J,
) -> Result<<A::Output as Future>::Output, Rejected>
where
    A: Attempt + Send,
    A::Output: Future + Send,
    <A::Output as Future>::Output: Send,
    J: Judge<<A::Output as Future>::Output> + Sync,
{
    if let Some(rejected) = plan.unconfigured() {
        return Err(rejected);
    }
    let mut held = Held::new();
    held.start(plan.order());
    level_async(plan, 0, &mut held, attempt, judge).await
}

/// `Send`, as the engine's futures are, so that a reference call can run inside a body that a
/// `Send` future (a tower service's) awaits.
type Boxed<'f, T> = Pin<Box<dyn Future<Output = T> + Send + 'f>>;

/// Guard `index` of the plan and the rest after it, waiting asynchronously. Dropped before it
/// ends (the caller gave up, or a time limiter outside cut it off), a level releases its gate
/// recording nothing, after the levels inside it.
fn level_async<'f, 'a: 'f, A, J>(
    plan: &'a Plan,
    index: usize,
    held: &'f mut Held<'a>,
    attempt: &'f mut A,
    judge: &'f J,
) -> Boxed<'f, Result<<A::Output as Future>::Output, Rejected>>
where
    A: Attempt + Send,
    A::Output: Future + Send,
    <A::Output as Future>::Output: Send,
    J: Judge<<A::Output as Future>::Output> + Sync,
{
    Box::pin(async move {
        match plan.layer(index) {
            None => Ok(call_on_chain(held, attempt.attempt()).await),
            Some(Layer::Gate(step)) => {
                if !admit_async(plan, step, held).await? {
                    return level_async(plan, index + 1, held, attempt, judge).await;
                }
                let mut holding = Holding {
                    held,
                    step,
                    running: true,
                };
                let result = level_async(plan, index + 1, &mut *holding.held, attempt, judge).await;
                holding.running = false;
                release(holding.held, step, judge, &result);
                result
            }
            Some(Layer::Wrapper(wrapper)) if wrapper.overlaps() => {
                hedged(plan, index, held, attempt, judge, wrapper.begin(false)).await
            }
            Some(Layer::Wrapper(wrapper)) => {
                let mut call = wrapper.begin(false);
                loop {
                    let rest = level_async(plan, index + 1, &mut *held, attempt, judge);
                    let result = under_deadline(&mut call, rest).await;
                    match call.after(ended(judge, &result), attempt.repeatable()) {
                        Next::Stop => return result,
                        Next::RetryAfter(wait) => {
                            drop(result);
                            call.sleep(wait).await;
                        }
                    }
                }
            }
        }
    })
}

/// The wrapper `index`, whose runs overlap (a hedge, begun as `call`): each run of the rest
/// is a future of its own with permits of its own, polled with the call's permits `outer` on
/// the call chain; the wrapper says when to start another, and what each end means.
async fn hedged<'a, A, J>(
    plan: &'a Plan,
    index: usize,
    outer: &Held<'a>,
    attempt: &mut A,
    judge: &J,
    mut call: WrapperCall<'_>,
) -> Result<<A::Output as Future>::Output, Rejected>
where
    A: Attempt + Send,
    A::Output: Future + Send,
    <A::Output as Future>::Output: Send,
    J: Judge<<A::Output as Future>::Output> + Sync,
{
    type Going<'f, R> = Boxed<'f, Result<R, Rejected>>;
    /// A run still going: its number, the reading of its first wait, whether it was polled.
    struct Running<'f, R> {
        run: Run,
        polled: bool,
        going: Going<'f, R>,
    }
    /// The runs still going, dropped with the call's permits on the chain.
    struct Runs<'h, 'a, 'f, R> {
        outer: &'h Held<'a>,
        runs: Vec<Running<'f, R>>,
    }
    impl<R> Drop for Runs<'_, '_, '_, R> {
        fn drop(&mut self) {
            let runs = &mut self.runs;
            on_chain(self.outer, || runs.clear());
        }
    }
    // The attempt's type erased: a lane's levels are then of one type whatever the nesting,
    // where `SharedAttempt<A>` would instantiate them again inside each (without end).
    let attempt: &mut (dyn Attempt<Output = A::Output> + Send) = attempt;
    let shared = std::sync::Mutex::new(attempt);
    let order = plan.order();
    let run = |attempt: u32| -> Running<'_, _> {
        let shared = &shared;
        Running {
            run: Run {
                attempt,
                started: None,
            },
            polled: false,
            going: Box::pin(async move {
                let mut held = Held::lane(order);
                let mut made = SharedAttempt(shared);
                level_async(plan, index + 1, &mut held, &mut made, judge).await
            }),
        }
    };
    let mut runs = Runs {
        outer,
        runs: vec![run(1)],
    };
    let mut next = 2;
    std::future::poll_fn(|cx| loop {
        let mut i = 0;
        while i < runs.runs.len() {
            let running = &mut runs.runs[i];
            let polled = on_chain(outer, || running.going.as_mut().poll(cx));
            let Poll::Ready(result) = polled else {
                // A run's latency counts from its first wait, as the engine's lanes count it.
                if !std::mem::replace(&mut running.polled, true) {
                    running.run.started = call.run_starts();
                }
                i += 1;
                continue;
            };
            let ran = runs.runs.remove(i).run;
            let repeatable = shared.lock().expect("not poisoned").repeatable();
            let others = runs.runs.len();
            match call.settle(ended(judge, &result), ran, others, repeatable) {
                Settle::Ends => {
                    let losers = &mut runs.runs;
                    on_chain(outer, || losers.clear());
                    return Poll::Ready(result);
                }
                Settle::Another => {
                    runs.runs.push(run(next));
                    next += 1;
                }
                Settle::Wait => {}
            }
        }
        if shared.lock().expect("not poisoned").once() {
            return Poll::Pending;
        }
        match call.poll_another(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(()) => {
                runs.runs.push(run(next));
                next += 1;
            }
        }
    })
    .await
}

/// The call's way to make an attempt, shared by a hedge's runs.
struct SharedAttempt<'s, 'a, O>(&'s std::sync::Mutex<&'a mut (dyn Attempt<Output = O> + Send)>);

impl<O> Attempt for SharedAttempt<'_, '_, O> {
    type Output = O;
    fn attempt(&mut self) -> O {
        self.0.lock().expect("not poisoned").attempt()
    }
    fn repeatable(&self) -> bool {
        self.0.lock().expect("not poisoned").repeatable()
    }
    fn once(&self) -> bool {
        self.0.lock().expect("not poisoned").once()
    }
}

/// Runs `rest` under `call`'s deadline: cut off (dropped, so every level inside releases its
/// gate, recording nothing) with the deadline's rejection if it fires first and says so.
async fn under_deadline<R>(
    call: &mut WrapperCall<'_>,
    rest: Boxed<'_, Result<R, Rejected>>,
) -> Result<R, Rejected> {
    let mut rest = Some(rest);
    std::future::poll_fn(|cx| {
        let running = rest.as_mut().expect("polled after it ended");
        if let Poll::Ready(result) = running.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        match call.poll_expired(cx) {
            Poll::Pending | Poll::Ready(Expired::Overran) => Poll::Pending,
            Poll::Ready(Expired::CutOff(rejected)) => {
                rest = None;
                Poll::Ready(Err(rejected))
            }
        }
    })
    .await
}

/// Polls the call's future with the call's permits on the call chain, and drops it there,
/// whether it completes or is given up (its destructors are part of the call).
async fn call_on_chain<F: Future>(held: &Held<'_>, call: F) -> F::Output {
    struct OnChain<'h, 'a, F> {
        held: &'h Held<'a>,
        call: Option<Pin<Box<F>>>,
    }
    impl<F> Drop for OnChain<'_, '_, F> {
        fn drop(&mut self) {
            let call = &mut self.call;
            on_chain(self.held, || *call = None);
        }
    }
    let mut running = OnChain {
        held,
        call: Some(Box::pin(call)),
    };
    std::future::poll_fn(|cx| {
        let OnChain { held, call } = &mut running;
        on_chain(held, || {
            let polled = call.as_mut().map_or(Poll::Pending, |f| f.as_mut().poll(cx));
            if polled.is_ready() {
                *call = None;
            }
            polled
        })
    })
    .await
}

/// A gate's permit held while the rest runs: released, recording nothing, if the level is
/// dropped before the rest ends.
struct Holding<'h, 'a> {
    held: &'h mut Held<'a>,
    step: &'a Step,
    /// The rest has not ended yet.
    running: bool,
}

impl Drop for Holding<'_, '_> {
    fn drop(&mut self) {
        if self.running {
            self.held.abandon_segment(std::slice::from_ref(self.step));
        }
    }
}

/// The gate `step` records how the rest of the plan ended, and its permit goes.
fn release<R>(
    held: &mut Held<'_>,
    step: &Step,
    judge: &impl Judge<R>,
    result: &Result<R, Rejected>,
) {
    let step = std::slice::from_ref(step);
    match result {
        Ok(output) => held.complete_segment(step, judge.outcome(output)),
        Err(rejected) => held.rejected_segment(step, rejected),
    }
}

/// Asks the gate `step` for the call, blocking while it makes the call wait: `Ok(true)` holding its permit, `Ok(false)` passing
/// through it (the call chain holds it already), `Err` refused.
fn admit<'a>(plan: &Plan, step: &'a Step, held: &mut Held<'a>) -> Result<bool, Rejected> {
    if !reentry_admitted(plan, step)? {
        return Ok(false);
    }
    match_step!(step, gate => enter_blocking(&**gate, held))?;
    Ok(true)
}

async fn admit_async<'a>(
    plan: &Plan,
    step: &'a Step,
    held: &mut Held<'a>,
) -> Result<bool, Rejected> {
    if !reentry_admitted(plan, step)? {
        return Ok(false);
    }
    match_step!(step, gate => enter_async(&**gate, held).await)?;
    Ok(true)
}

/// The re-entrancy policy at `step`, as the engine applies it: whether to ask it (`false`:
/// pass through it, the call chain holds it already).
fn reentry_admitted(plan: &Plan, step: &Step) -> Result<bool, Rejected> {
    if plan.policy() == ReentrancyPolicy::Allow {
        return Ok(true);
    }
    plan.admit_reentry(step)
}

fn enter_blocking<'a, G: HeldSlot>(gate: &'a G, held: &mut Held<'a>) -> Result<(), Rejected> {
    if held.try_enter(gate)? == Entry::MustWait {
        held.hold::<G>(gate.enter_blocking()?);
    }
    Ok(())
}

async fn enter_async<'a, G: HeldSlot>(gate: &'a G, held: &mut Held<'a>) -> Result<(), Rejected> {
    if held.try_enter(gate)? == Entry::MustWait {
        held.hold::<G>(gate.enter_async().await?);
    }
    Ok(())
}
