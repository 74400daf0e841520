//! One guarded call in progress: the permits it holds ([`Held`], wrapped by [`GuardedCall`]
//! and [`Entered`]), the future that runs it, and the call chain that recognises re-entry.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::bulkhead::BulkheadPermit;
use crate::chain::{CallOutcome, Plan};
use crate::circuit_breaker::{CircuitBreaker, CircuitPermit};
use crate::error::Rejected;

/// The permits of a call being made: one slot per implemented aspect kind (a plan holds each
/// kind at most once). Written in place as the guards admit the call, so that nothing of the
/// call's state is moved on the way (the state lives in the caller's frame or future).
/// Dropping it releases what it still holds, innermost first, recording nothing.
pub(crate) struct Held<'a> {
    bulkhead: Option<BulkheadPermit<'a>>,
    breaker: Option<CircuitPermit<'a>>,
    /// Whether the breaker was acquired before the bulkhead (runs outside it).
    breaker_outside: bool,
}

impl<'a> Held<'a> {
    pub(crate) const fn new() -> Self {
        Held {
            bulkhead: None,
            breaker: None,
            breaker_outside: false,
        }
    }

    #[inline]
    pub(crate) fn hold_bulkhead(&mut self, permit: BulkheadPermit<'a>) {
        debug_assert!(self.bulkhead.is_none(), "a plan holds one bulkhead");
        self.bulkhead = Some(permit);
    }

    /// Takes a permit of `breaker` into this call's breaker slot, in place.
    #[inline(always)]
    pub(crate) fn acquire_breaker(&mut self, breaker: &'a CircuitBreaker) -> Result<(), Rejected> {
        debug_assert!(self.breaker.is_none(), "a plan holds one circuit breaker");
        self.breaker_outside = self.bulkhead.is_none();
        breaker.try_acquire_into(&mut self.breaker)
    }

    fn is_empty(&self) -> bool {
        self.bulkhead.is_none() && self.breaker.is_none()
    }

    /// The number of guards held.
    fn len(&self) -> usize {
        usize::from(self.bulkhead.is_some()) + usize::from(self.breaker.is_some())
    }

    /// A guard refused the call with `rejected`: the breaker held (outside that guard) sees
    /// a rejection, every permit is released, innermost first; returns the rejection.
    #[cold]
    pub(crate) fn rejected(&mut self, rejected: Rejected) -> Rejected {
        self.reject(&rejected);
        rejected
    }

    fn reject(&mut self, rejected: &Rejected) {
        if self.breaker_outside {
            self.bulkhead = None;
        }
        if let Some(permit) = self.breaker.take() {
            permit.record_rejected(rejected);
        }
        self.bulkhead = None;
    }

    /// The call completed: the breaker records its outcome and every permit is released,
    /// innermost first.
    #[inline]
    fn complete(&mut self, outcome: CallOutcome) {
        if self.breaker_outside {
            self.bulkhead = None;
        }
        if let Some(permit) = self.breaker.take() {
            match outcome {
                CallOutcome::Success => permit.record_success(),
                CallOutcome::Failure => permit.record_failure(),
                CallOutcome::Ignored => permit.record_ignored(),
            }
        }
        self.bulkhead = None;
    }
}

impl Drop for Held<'_> {
    /// Abandoned (a panic, or the future dropped): release innermost first, record nothing.
    fn drop(&mut self) {
        if self.breaker_outside {
            self.bulkhead = None;
        }
        self.breaker = None;
    }
}

/// A guarded call made in place, for the attribute macros: declared empty in the guarded
/// function, filled by [`enter`](Self::enter) / [`enter_async`](Self::enter_async), then run
/// with [`run`](Self::run) / [`run_async`](Self::run_async). The public equivalent, which
/// returns the admitted call by value, is [`Plan::enter`] and [`Entered`].
#[doc(hidden)]
#[must_use = "a guarded call holds its permits until it runs or is dropped"]
pub struct GuardedCall<'a> {
    held: Held<'a>,
}

impl<'a> GuardedCall<'a> {
    /// A call that holds nothing yet.
    #[inline]
    pub const fn new() -> Self {
        GuardedCall { held: Held::new() }
    }

    /// Acquires the guards of `plan` as [`Plan::enter`] does.
    ///
    /// # Errors
    ///
    /// As [`Plan::enter`]; the call then holds nothing.
    #[inline]
    pub fn enter(&mut self, plan: &'a Plan) -> Result<(), Rejected> {
        plan.enter_into(&mut self.held)
    }

    /// Acquires the guards of `plan` as [`Plan::enter_async`] does.
    ///
    /// # Errors
    ///
    /// As [`Plan::enter_async`]; the call then holds nothing.
    #[inline]
    pub fn enter_async<'c>(
        &'c mut self,
        plan: &'a Plan,
    ) -> impl Future<Output = Result<(), Rejected>> + use<'c, 'a> {
        plan.enter_async_into(&mut self.held)
    }

    /// Runs `call` as [`Entered::run`] does.
    #[inline]
    pub fn run<R>(
        &mut self,
        call: impl FnOnce() -> R,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> R {
        let result = {
            let _on_chain = OnChain::push(&self.held);
            call()
        };
        self.held.complete(classify(&result));
        result
    }

    /// Runs the future `call` as [`Entered::run_async`] does; dropping the returned future
    /// abandons the call (the permits go when this `GuardedCall` is dropped).
    #[inline]
    pub fn run_async<'c, R, F, C>(
        &'c mut self,
        call: F,
        classify: C,
    ) -> impl Future<Output = R> + use<'c, 'a, R, F, C>
    where
        F: Future<Output = R>,
        C: FnOnce(&R) -> CallOutcome,
    {
        RunAsync::new(call, &mut self.held, classify)
    }
}

impl Default for GuardedCall<'_> {
    fn default() -> Self {
        GuardedCall::new()
    }
}

impl fmt::Debug for GuardedCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedCall")
            .field("guards_held", &self.held.len())
            .finish()
    }
}

/// A call admitted by every guard of its [`Plan`] and not yet run: the permits, held.
///
/// Run the call with [`run`](Entered::run) (sync) or [`run_async`](Entered::run_async); the
/// permits are released when it ends, on every path. Dropping an `Entered` without running it
/// releases them and records nothing (an abandoned call).
#[must_use = "an admitted call holds its permits until it runs or is dropped"]
pub struct Entered<'a> {
    pub(crate) held: Held<'a>,
}

impl<'a> Entered<'a> {
    /// Runs `call` while holding the guards, records its outcome as `classify` says, and
    /// releases the guards innermost first. A panic in `call` releases them (recording
    /// nothing) and resumes.
    pub fn run<R>(self, call: impl FnOnce() -> R, classify: impl FnOnce(&R) -> CallOutcome) -> R {
        GuardedCall { held: self.held }.run(call, classify)
    }

    /// Runs the future `call` while holding the guards, records its output as `classify`
    /// says, and releases the guards innermost first. Dropping the returned future releases
    /// them and records nothing.
    pub fn run_async<R, F, C>(
        self,
        call: F,
        classify: C,
    ) -> impl Future<Output = R> + use<'a, R, F, C>
    where
        F: Future<Output = R>,
        C: FnOnce(&R) -> CallOutcome,
    {
        RunAsync::new(call, self.held, classify)
    }
}

impl fmt::Debug for Entered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entered")
            .field("guards_held", &self.held.len())
            .finish()
    }
}

pin_project_lite::pin_project! {
    /// Polls a guarded call's future with its guards on the call chain, then records the
    /// outcome. `H` is the held permits, owned (`Entered`) or borrowed (`GuardedCall`).
    /// Dropped before it completes (cancelled), it drops the call's future with its guards
    /// still on the call chain (its destructors are part of the call), then the permits.
    struct RunAsync<F, H: HeldBy, C> {
        #[pin]
        call: Option<F>,
        held: H,
        classify: Option<C>,
    }
    impl<F, H: HeldBy, C> PinnedDrop for RunAsync<F, H, C> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if this.call.is_some() {
                let _on_chain = OnChain::push(this.held.held_ref());
                this.call.set(None);
            }
        }
    }
}

impl<F, H: HeldBy, C> RunAsync<F, H, C> {
    fn new(call: F, held: H, classify: C) -> Self {
        RunAsync {
            call: Some(call),
            held,
            classify: Some(classify),
        }
    }
}

impl<R, F, H, C> Future for RunAsync<F, H, C>
where
    F: Future<Output = R>,
    H: HeldBy,
    C: FnOnce(&R) -> CallOutcome,
{
    type Output = R;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let mut this = self.project();
        let Some(call) = this.call.as_mut().as_pin_mut() else {
            panic!("a guarded call's future was polled after it completed");
        };
        let polled = {
            let _on_chain = OnChain::push(this.held.held_ref());
            // A panic in the call abandons it: its permits go during the unwind (as an
            // `async fn`'s locals do), not whenever this future happens to be dropped.
            let abandon = Abandon(Some(&mut *this.held));
            let polled = call.poll(cx);
            std::mem::forget(abandon);
            polled
        };
        let Poll::Ready(result) = polled else {
            return Poll::Pending;
        };
        this.call.set(None);
        let classify = this
            .classify
            .take()
            .expect("a guarded call's future was polled after it completed");
        this.held.complete(classify(&result));
        Poll::Ready(result)
    }
}

/// Abandons the call (releases its permits, recording nothing) if dropped: by an unwind.
struct Abandon<'r, H: HeldBy>(Option<&'r mut H>);

impl<H: HeldBy> Drop for Abandon<'_, H> {
    fn drop(&mut self) {
        if let Some(held) = self.0.take() {
            held.abandon();
        }
    }
}

/// The permits a [`RunAsync`] runs with: owned (an [`Entered`]) or borrowed (a
/// [`GuardedCall`]).
trait HeldBy {
    fn held_ref(&self) -> &Held<'_>;
    fn complete(&mut self, outcome: CallOutcome);
    /// Releases every permit, innermost first, recording nothing.
    fn abandon(&mut self);
}

impl HeldBy for Held<'_> {
    #[inline]
    fn held_ref(&self) -> &Held<'_> {
        self
    }
    #[inline]
    fn complete(&mut self, outcome: CallOutcome) {
        Held::complete(self, outcome);
    }
    fn abandon(&mut self) {
        drop(std::mem::replace(self, Held::new()));
    }
}

impl HeldBy for &mut Held<'_> {
    #[inline]
    fn held_ref(&self) -> &Held<'_> {
        self
    }
    #[inline]
    fn complete(&mut self, outcome: CallOutcome) {
        Held::complete(self, outcome);
    }
    fn abandon(&mut self) {
        drop(std::mem::replace(&mut **self, Held::new()));
    }
}

/// One guard instance held by a guarded call running on this thread, and the tokio task the
/// call runs in (`None` outside any task).
///
/// Each thread keeps the instances held by the guarded calls running on it in [`CHAIN`],
/// innermost last: a sync call's for the extent of its body, an async call's for each poll of
/// its future (pushed again at every poll, so a future handed to another task carries nothing
/// from the task it was created in). A nested call recognises only the entries of its own
/// task: a task that a sync guarded call happens to drive on its thread (a nested `block_on`)
/// is not on that call's chain.
#[derive(Clone, Copy)]
struct Link {
    task: Option<tokio::task::Id>,
    id: u64,
}

thread_local! {
    /// The entries of the guarded calls running on this thread, innermost last (see [`Link`]).
    static CHAIN: RefCell<Vec<Link>> = const { RefCell::new(Vec::new()) };
}

/// Whether a guarded call runs on this thread (the current call may be nested in it).
#[inline]
pub(crate) fn chain_is_busy() -> bool {
    // `try_with`: a call made while this thread's locals are being destroyed has no chain.
    CHAIN
        .try_with(|chain| !chain.borrow().is_empty())
        .unwrap_or(false)
}

/// Whether a guarded call around the current one, in the same task, holds the instance `id`.
pub(crate) fn chain_holds(id: u64) -> bool {
    CHAIN
        .try_with(|chain| {
            let chain = chain.borrow();
            if chain.is_empty() {
                return false;
            }
            let task = tokio::task::try_id();
            chain.iter().any(|link| link.id == id && link.task == task)
        })
        .unwrap_or(false)
}

/// A call's entry on this thread's chain; dropping it takes the entry off again (on return
/// and on unwind). Kept in a local of the scope that runs the call, so entries come off in
/// the reverse order they went on.
struct OnChain {
    /// The chain's length before the push; `None` if nothing was pushed.
    restore: Option<usize>,
}

impl OnChain {
    /// Pushes the guard instances `held` holds; pushes nothing if it holds none.
    #[inline]
    fn push(held: &Held<'_>) -> OnChain {
        if held.is_empty() {
            return OnChain { restore: None };
        }
        let task = tokio::task::try_id();
        let restore = CHAIN.try_with(|chain| {
            let mut chain = chain.borrow_mut();
            let len = chain.len();
            if let Some(permit) = &held.bulkhead {
                chain.push(Link {
                    task,
                    id: permit.instance_id(),
                });
            }
            if let Some(permit) = &held.breaker {
                chain.push(Link {
                    task,
                    id: permit.instance_id(),
                });
            }
            len
        });
        OnChain {
            restore: restore.ok(),
        }
    }
}

impl Drop for OnChain {
    #[inline]
    fn drop(&mut self) {
        if let Some(len) = self.restore {
            let _ = CHAIN.try_with(|chain| chain.borrow_mut().truncate(len));
        }
    }
}
