//! The nested model of an async call (the model is described in `wrapped.rs`): the segments
//! after the first attempt, as one recursive structure of [`Level`]s, any number deep.
//!
//! A level is segment *k*: it enters its gates, then runs the call (the last segment) or its
//! wrapper around level *k + 1*, then records the outcome in its gates and releases them. The
//! wrapper is driven through its seam ([`WrapCall`]): the rest runs under the deadline it polls
//! and is cut off when that says so, and when the rest ends the wrapper says stop, or run it
//! again after a wait. No wrapper is named here.
//!
//! Levels are written by hand, not as `async fn`s: an `async fn` cannot recurse without a
//! `dyn` future, which would lose the call's `Send` (a level's future is `Send` exactly when
//! the call's is, as the compiler works out for this structure). A level holds none of the
//! call's types: the call's future, its permits and its judge are the [`NestedRun`]'s, lent to
//! each level as it is polled, so one level type serves every call.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::attempt::{ended, finish, Attempt, Judge};
use super::chain::{drop_in_place, on_chain, poll_in_place};
use super::held::{Held, HeldSlot};
use crate::error::Rejected;
use crate::plan::{match_step, Plan};
use crate::wrapper::{Expired, Next, Run, Settle, Sleep, WrapCall, WrapperCall};

/// Where the nested model takes over an async call whose first attempt ran flat.
pub(super) enum Resume<'a> {
    /// The gate `steps[i]` made the first attempt wait; the gates before it are held. With
    /// `i == steps.len()` every gate is held, and the call's future is in its place, polled
    /// once and not ready (a wrapper that bounds the rest sits outside another wrapper).
    EnterFrom(usize),
    /// The first attempt runs, every gate held, its future in its place, polled in this poll
    /// of the task; the innermost wrapper, a hedge begun as `call`, starts a second run beside
    /// it now (counted as started).
    Hedged { call: WrapperCall<'a> },
    /// The first attempt ended in a way the wrapper `index` (begun as `call`) runs the rest
    /// again for after `wait`: the gates inside it released, those outside it held.
    Again {
        index: usize,
        call: WrapperCall<'a>,
        wait: Duration,
    },
}

/// The rest of an async call in the nested model: the call's future, permits and judge, and
/// the outermost level.
pub(super) struct NestedRun<'c, 'a, A: Attempt, J> {
    call: Call<'c, 'a, A, J>,
    root: Level<'a>,
}

/// What every level works on, lent to it as it is polled.
struct Call<'c, 'a, A: Attempt, J> {
    plan: &'a Plan,
    held: &'c mut Held<'a>,
    attempt: &'c mut A,
    judge: &'c J,
    /// The place of the call's future, for every attempt (of a hedge's lanes, the one in
    /// slot 0).
    slot: Pin<&'c mut Option<A::Output>>,
    /// For a hedge's lane: the call's permits of the gates outside the hedge, linked on the
    /// call chain around the lane's own.
    outer: Option<&'c Held<'a>>,
    /// The places of the futures of a hedge's lanes beyond slot 0 (lane slot `n` is
    /// `spare[n - 1]`), made as a hedge first needs them.
    spare: Vec<Pin<Box<Option<A::Output>>>>,
}

impl<'c, 'a, A, J> NestedRun<'c, 'a, A, J>
where
    A: Attempt,
    A::Output: Future,
    J: Judge<<A::Output as Future>::Output>,
{
    /// The nested model, taking over from `resume`.
    pub(super) fn new(
        plan: &'a Plan,
        held: &'c mut Held<'a>,
        attempt: &'c mut A,
        judge: &'c J,
        slot: Pin<&'c mut Option<A::Output>>,
        resume: Resume<'a>,
    ) -> Self {
        NestedRun {
            root: Level::resumed(plan, resume, held),
            call: Call {
                plan,
                held,
                attempt,
                judge,
                slot,
                outer: None,
                spare: Vec::new(),
            },
        }
    }
}

impl<A, J> Future for NestedRun<'_, '_, A, J>
where
    A: Attempt,
    A::Output: Future,
    J: Judge<<A::Output as Future>::Output>,
{
    type Output = Result<<A::Output as Future>::Output, Rejected>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Unpin: the call's future is behind the pinned reference `slot`, the rest is boxed.
        let this = self.get_mut();
        this.root.poll(&mut this.call, cx)
    }
}

impl<A: Attempt, J> Drop for NestedRun<'_, '_, A, J> {
    /// The whole call dropped before it ended: the call's future goes first, on the call
    /// chain; then the levels (a gate's wait, a timer); then, with the call's [`Held`], the
    /// permits, recording nothing.
    fn drop(&mut self) {
        self.root.cancel(&mut self.call);
        self.call.drop_call();
    }
}

impl<'a, A: Attempt, J> Call<'_, 'a, A, J> {
    /// The call as `lane` runs it: its permits, its place for the future, the call's permits
    /// outside the hedge around them.
    fn lane<'l>(&'l mut self, slot: usize, held: &'l mut Held<'a>) -> Call<'l, 'a, A, J> {
        let slot = match slot {
            0 => self.slot.as_mut(),
            n => {
                if self.spare.len() < n {
                    self.spare.resize_with(n, || Box::pin(None));
                }
                self.spare[n - 1].as_mut()
            }
        };
        Call {
            plan: self.plan,
            held,
            attempt: &mut *self.attempt,
            judge: self.judge,
            slot,
            outer: Some(&*self.held),
            spare: Vec::new(),
        }
    }

    /// Drops the call's future, if one is running, on the call chain.
    fn drop_call(&mut self) {
        match self.outer {
            None => drop_in_place(Some(&*self.held), self.slot.as_mut()),
            Some(outer) => on_chain(outer, || {
                drop_in_place(Some(&*self.held), self.slot.as_mut());
            }),
        }
    }
}

/// One segment of the plan, and the levels inside it.
struct Level<'a> {
    /// The segment's index (0 is the outermost).
    index: usize,
    state: State<'a>,
}

enum State<'a> {
    /// Entering the segment's gates from `steps[from]`, waiting for it first if `wait`.
    Entering {
        from: usize,
        wait: Option<Waiting<'a>>,
    },
    /// The segment's gates are held, and it is the last: the call runs. `polled`: its future
    /// was polled just now, as the nested model took over (not polled again in the same poll
    /// of the task: a hedge's timer would otherwise start a poll later than the reference's).
    Calling { polled: bool },
    /// The segment's gates are held: its wrapper (begun as `call`) runs the level `inner`,
    /// after `sleep` if it is waiting to run it again.
    Wrapping {
        call: WrapperCall<'a>,
        inner: Box<Level<'a>>,
        sleep: Option<Sleep<'a>>,
    },
    /// The segment's gates are held, and its wrapper's runs overlap (a hedge): each run of
    /// the level inside is a lane of its own, started as the wrapper (begun as `call`) says.
    Hedging {
        call: WrapperCall<'a>,
        lanes: Lanes<'a>,
    },
    /// Ended, or cut off from outside.
    Ended,
}

/// The runs of a hedge's call still going, and the number the next one gets.
struct Lanes<'a> {
    running: Vec<Lane<'a>>,
    next: u32,
    /// The segment each run starts from (the one after the hedge's).
    inside: usize,
}

/// One run of the rest inside a hedge, beside the others: its own permits of the gates
/// inside the hedge, its own levels, its own place for the call's future.
struct Lane<'a> {
    /// The run's number (1 for the call's first).
    number: u32,
    /// The reading of its first wait (its first poll that was not ready), if the hedge learns
    /// from its runs' latencies; `None` before it, and for a run that answers at once.
    started: Option<u64>,
    /// Whether it was polled yet.
    polled: bool,
    /// Where its future is: 0 the call's own place, `n` the spare place `n - 1`.
    slot: usize,
    held: Held<'a>,
    level: Level<'a>,
}

impl<'a> Level<'a> {
    /// Segment `index` entered afresh.
    fn fresh(plan: &Plan, index: usize) -> Self {
        Level {
            index,
            state: State::Entering {
                from: plan.segment(index).gates.start,
                wait: None,
            },
        }
    }

    /// The levels of a call taking over from its first attempt, as `resume` says; the
    /// outermost returned. The wrappers outside the resumption begin their call now: each
    /// saw nothing of the first attempt (it did not end).
    ///
    /// The first run of a hedge among them keeps its permits of the gates inside the hedge in
    /// a lane of its own, split off `held`.
    #[cold]
    fn resumed(plan: &'a Plan, resume: Resume<'a>, held: &mut Held<'a>) -> Self {
        let (index, state) = match resume {
            Resume::EnterFrom(gate) if gate == plan.steps().len() => {
                (plan.wrappers().len(), State::Calling { polled: true })
            }
            Resume::EnterFrom(gate) => {
                let wait = match_step!(&plan.steps()[gate], g => wait_for(&**g));
                let state = State::Entering {
                    from: gate,
                    wait: Some(wait),
                };
                (plan.segment_of(gate), state)
            }
            // The hedge's first run ended, and it asked for another at once (counted it as
            // started): its second run, in the place of the first.
            Resume::Again { index, call, .. } if plan.wrappers()[index].1.overlaps() => {
                let mut lanes = Lanes {
                    running: Vec::new(),
                    next: 2,
                    inside: index + 1,
                };
                lanes.start(plan);
                (index, State::Hedging { call, lanes })
            }
            Resume::Hedged { call } => {
                let index = plan.wrappers().len() - 1;
                let level = Level {
                    index: index + 1,
                    state: State::Calling { polled: false },
                };
                let first = Lane::first(plan, index, call.first_wait(), held, level);
                let mut lanes = Lanes {
                    running: vec![first],
                    next: 2,
                    inside: index + 1,
                };
                lanes.start(plan);
                (index, State::Hedging { call, lanes })
            }
            Resume::Again { index, call, wait } => {
                let state = State::Wrapping {
                    sleep: Some(call.sleep(wait)),
                    call,
                    inner: Box::new(Level {
                        index: index + 1,
                        state: State::Ended,
                    }),
                };
                (index, state)
            }
        };
        let mut level = Level { index, state };
        for (outer, (_, wrapper)) in plan.wrappers()[..index].iter().enumerate().rev() {
            let call = wrapper.begin(false);
            let state = if wrapper.overlaps() {
                let first = Lane::first(plan, outer, call.run_starts(), held, level);
                State::Hedging {
                    call,
                    lanes: Lanes {
                        running: vec![first],
                        next: 2,
                        inside: outer + 1,
                    },
                }
            } else {
                State::Wrapping {
                    call,
                    inner: Box::new(level),
                    sleep: None,
                }
            };
            level = Level {
                index: outer,
                state,
            };
        }
        level
    }

    /// Drops every lane of a hedge in or inside this level, each as [`cancel_lane`] does:
    /// the whole call dropped, or a wrapper outside cut it off.
    fn cancel<A: Attempt, J>(&mut self, run: &mut Call<'_, 'a, A, J>) {
        match &mut self.state {
            State::Wrapping { inner, .. } => inner.cancel(run),
            State::Hedging { lanes, .. } => {
                for lane in lanes.running.drain(..) {
                    cancel_lane(lane, run);
                }
            }
            State::Entering { .. } | State::Calling { .. } | State::Ended => {}
        }
    }

    /// Polls the segment: its entry, then the call or its wrapper around the level inside.
    fn poll<A, J>(
        &mut self,
        run: &mut Call<'_, 'a, A, J>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<<A::Output as Future>::Output, Rejected>>
    where
        A: Attempt,
        A::Output: Future,
        J: Judge<<A::Output as Future>::Output>,
    {
        let plan = run.plan;
        let segment = plan.segment(self.index);
        loop {
            match &mut self.state {
                State::Entering { from, wait } => {
                    if let Some(waiting) = wait {
                        let waited = ready!(waiting.as_mut().poll_hold(cx, run.held));
                        *wait = None;
                        if let Err(rejected) = waited {
                            self.state = State::Ended;
                            let start = segment.gates.start;
                            return Poll::Ready(Err(plan.refused_in(start, run.held, rejected)));
                        }
                        *from += 1;
                    }
                    match plan.enter_segment_now(*from, segment.gates.clone(), run.held) {
                        Ok(None) => {
                            self.state = match segment.wrapper {
                                None => State::Calling { polled: false },
                                Some(wrapper) if wrapper.overlaps() => {
                                    let call = wrapper.begin(false);
                                    let mut lanes = Lanes {
                                        running: Vec::new(),
                                        next: 1,
                                        inside: self.index + 1,
                                    };
                                    lanes.start(plan);
                                    State::Hedging { call, lanes }
                                }
                                Some(wrapper) => State::Wrapping {
                                    call: wrapper.begin(false),
                                    inner: Box::new(Level::fresh(plan, self.index + 1)),
                                    sleep: None,
                                },
                            };
                        }
                        Ok(Some(gate)) => {
                            *from = gate;
                            let step = &plan.steps()[gate];
                            *wait = Some(match_step!(step, g => wait_for(&**g)));
                        }
                        Err(rejected) => {
                            self.state = State::Ended;
                            return Poll::Ready(Err(rejected));
                        }
                    }
                }
                State::Calling { polled } => {
                    if std::mem::take(polled) {
                        return Poll::Pending;
                    }
                    let output = ready!(run.poll_call(cx));
                    return self.end(run, &segment.gates, Ok(output));
                }
                State::Wrapping { call, inner, sleep } => {
                    if let Some(waiting) = sleep {
                        ready!(Pin::new(waiting).poll(cx));
                        *sleep = None;
                        **inner = Level::fresh(plan, self.index + 1);
                    }
                    let result = match inner.poll(run, cx) {
                        Poll::Ready(result) => result,
                        Poll::Pending => match call.poll_expired(cx) {
                            Poll::Pending | Poll::Ready(Expired::Overran) => return Poll::Pending,
                            Poll::Ready(Expired::CutOff(rejected)) => {
                                run.cut_off(self.index, inner);
                                Err(rejected)
                            }
                        },
                    };
                    let repeatable = run.attempt.repeatable();
                    match call.after(ended(run.judge, &result), repeatable) {
                        Next::Stop => return self.end(run, &segment.gates, result),
                        Next::RetryAfter(wait) => {
                            drop(result);
                            *sleep = Some(call.sleep(wait));
                        }
                    }
                }
                State::Hedging { call, lanes } => match lanes.poll(call, run, cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(result) => return self.end(run, &segment.gates, result),
                },
                State::Ended => panic!("a guarded call's future was polled after it completed"),
            }
        }
    }

    /// The rest of the segment ended as `result`: its gates record it and go.
    fn end<A, J>(
        &mut self,
        run: &mut Call<'_, 'a, A, J>,
        gates: &std::ops::Range<usize>,
        result: Result<<A::Output as Future>::Output, Rejected>,
    ) -> Poll<Result<<A::Output as Future>::Output, Rejected>>
    where
        A: Attempt,
        A::Output: Future,
        J: Judge<<A::Output as Future>::Output>,
    {
        self.state = State::Ended;
        finish(
            run.held,
            &run.plan.steps()[gates.clone()],
            run.judge,
            &result,
        );
        Poll::Ready(result)
    }
}

impl<'a, A, J> Call<'_, 'a, A, J>
where
    A: Attempt,
    A::Output: Future,
{
    /// Polls the attempt's call, made now if none is running, with the permits on the call
    /// chain; once it is ready, drops it there (its destructors are part of the call).
    fn poll_call(&mut self, cx: &mut Context<'_>) -> Poll<<A::Output as Future>::Output> {
        if self.slot.is_none() {
            let call = self.attempt.attempt();
            self.slot.set(Some(call));
        }
        match self.outer {
            None => poll_in_place(Some(&*self.held), self.slot.as_mut(), cx),
            Some(outer) => on_chain(outer, || {
                poll_in_place(Some(&*self.held), self.slot.as_mut(), cx)
            }),
        }
    }

    /// The wrapper of segment `index` cut the rest off: the call's future goes (on the chain),
    /// then the levels inside (a gate's wait, a timer), then the gates inside, recording
    /// nothing, innermost first; a hedge's lanes inside go first, each the same way.
    #[cold]
    fn cut_off(&mut self, index: usize, inner: &mut Level<'a>) {
        inner.cancel(self);
        self.drop_call();
        inner.state = State::Ended;
        let inside = self.plan.segment(index + 1).gates.start;
        self.held.abandon_segment(&self.plan.steps()[inside..]);
    }
}

impl<'a> Lane<'a> {
    /// The first run of the hedge of segment `index`, going on as `level`, polled in this poll
    /// of the task, started at `started`: its permits of the gates inside the hedge split off
    /// `held`, its future in the call's own place.
    fn first(
        plan: &Plan,
        index: usize,
        started: Option<u64>,
        held: &mut Held<'a>,
        level: Level<'a>,
    ) -> Self {
        let inside = plan.segment(index + 1).gates.start;
        Lane {
            number: 1,
            started,
            polled: true,
            slot: 0,
            held: held.split_off(&plan.steps()[inside..]),
            level,
        }
    }
}

impl<'a> Lanes<'a> {
    /// Starts the next run, in the first place for a call's future no running lane uses.
    fn start(&mut self, plan: &Plan) {
        let running = &self.running;
        let slot = (0..=running.len())
            .find(|slot| running.iter().all(|lane| lane.slot != *slot))
            .unwrap_or(running.len());
        self.running.push(Lane {
            number: self.next,
            started: None,
            polled: false,
            slot,
            held: Held::lane(plan.order()),
            level: Level::fresh(plan, self.inside),
        });
        self.next += 1;
    }

    /// Polls the runs (of the hedge's call `call`) until one ends the call: each ready run's
    /// end is settled by the hedge (the call ends with it, another run starts at once, or the
    /// others go on), and while all are pending the hedge says whether to start another.
    fn poll<A, J>(
        &mut self,
        call: &mut WrapperCall<'a>,
        run: &mut Call<'_, 'a, A, J>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<<A::Output as Future>::Output, Rejected>>
    where
        A: Attempt,
        A::Output: Future,
        J: Judge<<A::Output as Future>::Output>,
    {
        let plan = run.plan;
        loop {
            debug_assert!(
                !self.running.is_empty(),
                "a hedge's call runs until it ends"
            );
            let mut i = 0;
            while i < self.running.len() {
                let lane = &mut self.running[i];
                let polled = lane
                    .level
                    .poll(&mut run.lane(lane.slot, &mut lane.held), cx);
                let Poll::Ready(result) = polled else {
                    if !std::mem::replace(&mut lane.polled, true) {
                        lane.started = call.run_starts();
                    }
                    i += 1;
                    continue;
                };
                let lane = self.running.remove(i);
                let others = self.running.len();
                let repeatable = run.attempt.repeatable();
                let ran = Run {
                    attempt: lane.number,
                    started: lane.started,
                };
                match call.settle(ended(run.judge, &result), ran, others, repeatable) {
                    Settle::Ends => {
                        for loser in self.running.drain(..) {
                            cancel_lane(loser, run);
                        }
                        return Poll::Ready(result);
                    }
                    Settle::Another => {
                        drop(lane);
                        self.start(plan);
                    }
                    Settle::Wait => {}
                }
            }
            // A call made once at most (a future given as it is) runs alone.
            if run.attempt.once() {
                return Poll::Pending;
            }
            ready!(call.poll_another(cx));
            self.start(plan);
        }
    }
}

/// A lane given up (another won, or the whole call went): its future goes first, on the
/// chain; then its levels (a gate's wait, a timer); then its permits, recording nothing.
fn cancel_lane<'a, A: Attempt, J>(mut lane: Lane<'a>, run: &mut Call<'_, 'a, A, J>) {
    run.lane(lane.slot, &mut lane.held).drop_call();
    lane.level.state = State::Ended;
    lane.held.abandon();
}

/// A gate's asynchronous wait for a call, its kind erased: when the gate admits the call, its
/// permit goes into the call's [`Held`], lent at each poll.
trait GateWait<'a>: Send {
    fn poll_hold(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        held: &mut Held<'a>,
    ) -> Poll<Result<(), Rejected>>;
}

/// A boxed [`GateWait`]: only a call that waits pays for its state (a queue place, a timer).
type Waiting<'a> = Pin<Box<dyn GateWait<'a> + 'a>>;

pin_project_lite::pin_project! {
    /// [`GateWait`] for the gate kind `G`, its wait `F`.
    struct WaitFor<G, F> {
        #[pin]
        wait: F,
        gate: PhantomData<fn() -> G>,
    }
}

impl<'a, G, F> GateWait<'a> for WaitFor<G, F>
where
    G: HeldSlot,
    F: Future<Output = Result<G::Permit<'a>, Rejected>> + Send,
{
    fn poll_hold(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        held: &mut Held<'a>,
    ) -> Poll<Result<(), Rejected>> {
        let permit = ready!(self.project().wait.poll(cx))?;
        held.hold::<G>(permit);
        Poll::Ready(Ok(()))
    }
}

/// The wait for `gate`, which made the call wait.
#[cold]
fn wait_for<G: HeldSlot>(gate: &G) -> Waiting<'_> {
    Box::pin(WaitFor::<G, _> {
        wait: gate.enter_async(),
        gate: PhantomData,
    })
}
