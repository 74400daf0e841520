//! Entering a plan: its gates asked in order, the call's permits written into its [`Held`],
//! blocking or asynchronously. Knows the gates only through [`Gate`](crate::gate::Gate)
//! (and [`HeldSlot`]), dispatched over the plan's steps with `match_step!`.

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use super::chain::{chain_holds, chain_is_busy};
use super::held::{Held, HeldSlot};
use crate::error::Rejected;
use crate::gate::Entry;
use crate::plan::{match_step, Plan, ReentrancyPolicy, Step};

/// What [`Plan::enter_from`] does at a gate that makes the call wait.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    /// Wait for it, blocking the thread.
    Block,
    /// Stop there, so that the caller waits asynchronously.
    Stop,
}

impl Plan {
    /// [`enter`](Plan::enter), writing the permits into `held`: every gate of a plan without
    /// wrappers.
    #[inline]
    pub(crate) fn enter_into<'a>(&'a self, held: &mut Held<'a>) -> Result<(), Rejected> {
        debug_assert!(
            !self.has_wrappers(),
            "a plan with wrappers runs as segments"
        );
        let next = self.enter_from(0, Whole, held, Mode::Block)?;
        debug_assert!(next.is_none(), "a blocking entry never stops at a gate");
        Ok(())
    }

    /// Enters the gates `steps[gates]` (one segment), blocking the thread while one makes the
    /// call wait. On a rejection, the gates of the segment are released (those outside it are
    /// left as they are).
    #[inline(always)]
    pub(crate) fn enter_gates<'a>(
        &'a self,
        gates: Range<usize>,
        held: &mut Held<'a>,
    ) -> Result<(), Rejected> {
        let part = Part {
            start: gates.start,
            end: gates.end,
        };
        let next = self.enter_from(gates.start, part, held, Mode::Block)?;
        debug_assert!(next.is_none(), "a blocking entry never stops at a gate");
        Ok(())
    }

    /// Asks the gates `steps[from..gates.end]` of one segment now, in order, into `held`:
    /// `Ok(None)` once every one admitted the call, `Ok(Some(i))` at the first that makes it
    /// wait (nothing taken there, the gates before it held). On a refusal the segment's gates
    /// held see it and go.
    pub(super) fn enter_segment_now<'a>(
        &'a self,
        from: usize,
        gates: Range<usize>,
        held: &mut Held<'a>,
    ) -> Result<Option<usize>, Rejected> {
        let part = Part {
            start: gates.start,
            end: gates.end,
        };
        self.enter_from(from, part, held, Mode::Stop)
    }

    /// A gate of the segment starting at `steps[start]` refused the call after a wait: as
    /// a refusal on entry.
    #[cold]
    pub(super) fn refused_in(
        &self,
        start: usize,
        held: &mut Held<'_>,
        rejected: Rejected,
    ) -> Rejected {
        self.refused(start, held, rejected)
    }

    /// [`enter_async`](Plan::enter_async), writing the permits into `held`: every gate of a
    /// plan without wrappers.
    #[inline]
    pub(crate) fn enter_async_into<'c, 'a>(&'a self, held: &'c mut Held<'a>) -> EnterAsync<'c, 'a> {
        debug_assert!(
            !self.has_wrappers(),
            "a plan with wrappers runs as segments"
        );
        EnterAsync {
            plan: self,
            held: Some(held),
            wait: None,
        }
    }

    /// Asks the gates from `steps[from]` to the end of the segment `gates`, in order, into
    /// `held`. With `Mode::Stop`, returns the index of the first gate that makes the call
    /// wait (nothing taken there, the gates before it held); `None` once every gate admitted
    /// the call. On a rejection, `held` holds none of the segment's gates.
    #[inline(always)]
    fn enter_from<'a, S: GateRange>(
        &'a self,
        from: usize,
        span: S,
        held: &mut Held<'a>,
        mode: Mode,
    ) -> Result<Option<usize>, Rejected> {
        self.enter_from_or(from, span, held, mode, |_, held, rejected| {
            self.refused(span.start(), held, rejected)
        })
    }

    /// [`enter_from`](Self::enter_from) with the refusal of the gate `steps[i]` turned into the
    /// error by `refused(i, held, rejected)`, where it happens (a closure, not a wider error
    /// mapped after the loop: returning the index with the rejection cost the two-gate
    /// `Plan::call` 26 instructions).
    #[inline(always)]
    pub(crate) fn enter_from_or<'a, S: GateRange, E>(
        &'a self,
        from: usize,
        span: S,
        held: &mut Held<'a>,
        mode: Mode,
        refused: impl FnOnce(usize, &mut Held<'a>, Rejected) -> E,
    ) -> Result<Option<usize>, E> {
        if from == 0 {
            held.start(self.order());
        }
        let steps = &self.steps()[..span.end(self)];
        // A plan that refuses every call (a name the registry requires configured was not)
        // has no gates: only a plan without gates asks.
        if steps.is_empty() && from == 0 {
            if let Some(rejected) = self.unconfigured() {
                return Err(refused(0, held, rejected));
            }
        }
        // Most calls are not nested in another guarded call: then no gate needs the check.
        let nested = self.policy() != ReentrancyPolicy::Allow && chain_is_busy();
        for (index, step) in steps.iter().enumerate().skip(from) {
            if nested {
                match self.admit_reentry(step) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(rejected) => return Err(refused(index, held, rejected)),
                }
            }
            let entered = match_step!(step, gate => enter_one(&**gate, held, mode));
            match entered {
                Ok(Entry::Entered) => {}
                Ok(Entry::MustWait) => return Ok(Some(index)),
                Err(rejected) => return Err(refused(index, held, rejected)),
            }
        }
        Ok(None)
    }

    /// The gate of a plan of one gate, on a thread where no guarded call runs (so there is no
    /// re-entry to check): such a call asks it straight, without the walk over the steps, and
    /// answers its refusal at once (nothing else is held to see it). `None` for any other
    /// plan, or on a thread where a guarded call runs. The one test of the lone paths, sync
    /// (`one_gate`) and async ([`enter_lone`](Self::enter_lone)).
    #[inline(always)]
    pub(super) fn lone_step(&self) -> Option<&Step> {
        match self.steps() {
            [step] if !chain_is_busy() => Some(step),
            _ => None,
        }
    }

    /// [`enter_from`](Self::enter_from) for the gate of [`lone_step`](Self::lone_step), into
    /// `held`; `None` where there is none.
    #[inline(always)]
    fn enter_lone<'a>(&'a self, held: &mut Held<'a>) -> Option<Result<Entry, Rejected>> {
        let step = self.lone_step()?;
        held.start(self.order());
        Some(match_step!(step, gate => held.try_enter(&**gate)))
    }

    /// A gate of the segment starting at `steps[start]` refused the call: the segment's gates
    /// held see the rejection and are released. The outermost segment holds nothing outside
    /// it, so all of `held` goes (the common case, a plan without wrappers).
    #[inline(always)]
    fn refused(&self, start: usize, held: &mut Held<'_>, rejected: Rejected) -> Rejected {
        if start == 0 {
            held.rejected(&rejected);
            rejected
        } else {
            self.refused_inside(start, held, rejected)
        }
    }

    #[cold]
    fn refused_inside(&self, start: usize, held: &mut Held<'_>, rejected: Rejected) -> Rejected {
        held.rejected_segment(&self.steps()[start..], &rejected);
        rejected
    }

    /// Asks every gate of a plan without wrappers now, in order, into `held`, as an
    /// asynchronous entry starts: `Ok(None)` once every one admitted the call, `Ok(Some(i))` at
    /// the first that makes it wait (continue with [`enter_waiting`](Self::enter_waiting) from
    /// there), or the refusal (nothing held).
    #[inline]
    pub(super) fn enter_now<'a>(&'a self, held: &mut Held<'a>) -> Result<Option<usize>, Rejected> {
        // A lone gate that makes the call wait took nothing: the general path below asks it
        // again and waits for it (one more ask, on a path that waits anyway).
        match self.enter_lone(held) {
            Some(Ok(Entry::Entered)) => return Ok(None),
            Some(Err(rejected)) => return Err(rejected),
            Some(Ok(Entry::MustWait)) | None => {}
        }
        self.enter_from(0, Whole, held, Mode::Stop)
    }

    /// [`enter_waiting`](Self::enter_waiting), boxed: only a call that waits pays for its
    /// state (a queue place, a timer).
    #[cold]
    #[inline(never)]
    fn wait_from<'c, 'a>(&'a self, from: usize, held: &'c mut Held<'a>) -> Waiting<'c> {
        Box::pin(self.enter_waiting(from, held))
    }

    /// The rest of an asynchronous entry from the gate `steps[from]`, which made the call
    /// wait: waits for it, then asks the gates after it.
    pub(super) async fn enter_waiting<'a>(
        &'a self,
        mut from: usize,
        held: &mut Held<'a>,
    ) -> Result<(), Rejected> {
        loop {
            let waited = match_step!(&self.steps()[from], gate => wait_one(&**gate, held).await);
            if let Err(rejected) = waited {
                return Err(self.refused(0, held, rejected));
            }
            match self.enter_from(from + 1, Whole, held, Mode::Stop)? {
                None => return Ok(()),
                Some(next) => from = next,
            }
        }
    }

    /// Applies the re-entrancy policy to `step`: `Ok(true)` to ask it, `Ok(false)` to pass
    /// through it, `Err` to refuse the call.
    #[cold]
    pub(super) fn admit_reentry(&self, step: &Step) -> Result<bool, Rejected> {
        // Faults are drawn per call to the dependency: a nested call draws again.
        if !step.reenters() || !chain_holds(step.id()) {
            return Ok(true);
        }
        match self.policy() {
            ReentrancyPolicy::Reject => Err(Rejected::Reentrant {
                aspect: step.aspect(),
                name: step.name().clone(),
            }),
            ReentrancyPolicy::PassThrough | ReentrancyPolicy::Allow => Ok(false),
        }
    }
}

/// Which gates of a plan an entry asks: every one ([`Whole`], a plan without wrappers: nothing
/// to store or compare) or one segment ([`Part`]).
pub(crate) trait GateRange: Copy + Unpin + Send + Sync + 'static {
    /// The first gate's index.
    fn start(self) -> usize;
    /// One past the last gate's index.
    fn end(self, plan: &Plan) -> usize;
}

/// Every gate of the plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Whole;

impl Plan {
    /// The first attempt of a plan with wrappers, entered flat: every gate in order, blocking
    /// where one makes the call wait (a wrapper does nothing before its first attempt, so this
    /// is what entering the segments one by one does). A refusal releases nothing and says
    /// which gate refused.
    #[inline(always)]
    pub(crate) fn enter_flat<'a>(&'a self, held: &mut Held<'a>) -> Result<(), (usize, Rejected)> {
        let next = self.enter_from_or(0, Whole, held, Mode::Block, |index, _, rejected| {
            (index, rejected)
        })?;
        debug_assert!(next.is_none(), "a blocking entry never stops at a gate");
        Ok(())
    }
}

impl GateRange for Whole {
    #[inline(always)]
    fn start(self) -> usize {
        0
    }
    #[inline(always)]
    fn end(self, plan: &Plan) -> usize {
        plan.steps().len()
    }
}

/// The gates `start..end` of the plan: one segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Part {
    start: usize,
    end: usize,
}

impl GateRange for Part {
    #[inline(always)]
    fn start(self) -> usize {
        self.start
    }
    #[inline(always)]
    fn end(self, _plan: &Plan) -> usize {
        self.end
    }
}

/// Asks one gate: now, or blocking the thread while it makes the call wait.
#[inline(always)]
fn enter_one<'a, G: HeldSlot>(
    gate: &'a G,
    held: &mut Held<'a>,
    mode: Mode,
) -> Result<Entry, Rejected> {
    match held.try_enter(gate)? {
        Entry::Entered => Ok(Entry::Entered),
        Entry::MustWait => match mode {
            Mode::Stop => Ok(Entry::MustWait),
            Mode::Block => {
                held.hold::<G>(gate.enter_blocking()?);
                Ok(Entry::Entered)
            }
        },
    }
}

/// Waits asynchronously for one gate that made the call wait.
async fn wait_one<'a, G: HeldSlot>(gate: &'a G, held: &mut Held<'a>) -> Result<(), Rejected> {
    let permit = gate.enter_async().await?;
    held.hold::<G>(permit);
    Ok(())
}

/// The future of [`Plan::enter_async_into`]. Its first poll asks every gate, synchronously,
/// and is ready unless a gate makes the call wait: only then does it box the wait (a queue
/// place, a timer) and poll that. Calls that never wait (the common case) pay for no nested
/// state machine, and the future of every guarded call stays small.
pub(crate) struct EnterAsync<'c, 'a> {
    plan: &'a Plan,
    /// Where the permits go; taken by the first poll.
    held: Option<&'c mut Held<'a>>,
    /// The wait for a gate, then for the gates after it.
    wait: Option<Waiting<'c>>,
}

/// The boxed wait of an asynchronous entry (see [`Plan::enter_waiting`]).
type Waiting<'c> = Pin<Box<dyn Future<Output = Result<(), Rejected>> + Send + 'c>>;

impl Future for EnterAsync<'_, '_> {
    type Output = Result<(), Rejected>;

    // Inlined into the guarded call's own future, whose first poll it is: the state is read
    // field by field, in registers, not reloaded wide from the stores that just wrote it (a
    // store-forwarding stall perf showed here).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(held) = this.held.take() {
            match this.plan.enter_now(held) {
                Ok(None) => return Poll::Ready(Ok(())),
                Err(rejected) => return Poll::Ready(Err(rejected)),
                Ok(Some(step)) => this.wait = Some(this.plan.wait_from(step, held)),
            }
        }
        let Some(wait) = &mut this.wait else {
            panic!("a guarded call's entry was polled after it completed");
        };
        let entered = ready!(wait.as_mut().poll(cx));
        this.wait = None;
        Poll::Ready(entered)
    }
}
