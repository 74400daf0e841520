//! One guarded call in progress: running a call through a [`Plan`] (this file), the permits
//! it holds ([`held`]), entering the plan's gates ([`enter`]), the call chain that recognises
//! re-entry ([`chain`]), plans with wrappers ([`wrapped`], [`wrapped_async`], the nested
//! model of an async call in [`nested_async`], the call made and judged in [`attempt`]), and
//! the reference every entry is held to ([`reference`](mod@reference)). Wrappers are driven
//! through their seam, `crate::wrapper`; none is named here.

mod attempt;
mod chain;
mod enter;
mod held;
mod nested_async;
#[cfg(feature = "tower")]
mod owned;
pub mod reference;
mod wrapped;
mod wrapped_async;

pub(crate) use held::Held;
#[cfg(feature = "tower")]
pub(crate) use owned::{Owned, OwnedEntry, OwnedRun};

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use attempt::{ByOutcome, Judged, OneShot, Repeat};
use chain::{on_chain, on_chain_one};

use crate::error::Rejected;
use crate::gate::{Entry, Gate, Permit};
use crate::outcome::CallOutcome;
use crate::plan::{match_step, Plan};

impl Plan {
    /// Runs `call` through the guards, blocking the thread while a gate makes it wait (and
    /// between the attempts of a retry). `Ok` counts as a success and every `Err` as a
    /// failure, which a retry in the plan retries; a rejection is returned as
    /// `E::from(rejected)`.
    ///
    /// `call` is made once per attempt: once, unless the plan has a retry (a hedge makes no
    /// second attempt of a sync call).
    pub fn call<T, E: From<Rejected>>(&self, call: impl FnMut() -> Result<T, E>) -> Result<T, E> {
        if self.has_wrappers() {
            let judge = ByOutcome(CallOutcome::of_result::<T, E>);
            return self.run_wrapped_into(
                Repeat(call),
                &judge,
                |result| result,
                |rejected| Err(E::from(rejected)),
            );
        }
        let mut call = call;
        self.enter_and_run(
            |admitted| match admitted {
                Ok(()) => call(),
                Err(rejected) => Err(E::from(rejected)),
            },
            CallOutcome::of_result,
        )
    }

    /// Runs `call` through the guards and classifies its result with `classify`; returns the
    /// result, or the rejection if a guard refused the call (then `call` did not run, or, for
    /// a guard inside a retry, the last attempt did not). A retry in the plan retries what
    /// `classify` calls a [`Failure`](CallOutcome::Failure), and lets an
    /// [`Ignored`](CallOutcome::Ignored) outcome end the call.
    ///
    /// ```
    /// use resilience_runtime::{CallOutcome, Guard, Registry};
    ///
    /// let registry = Registry::new();
    /// let plan = registry.plan(&[Guard::circuit_breaker("search")])?;
    /// // A 404 is the caller's mistake, not the dependency's: the breaker ignores it.
    /// let status = plan.run(|| 404, |status| match status {
    ///     400..=499 => CallOutcome::Ignored,
    ///     500.. => CallOutcome::Failure,
    ///     _ => CallOutcome::Success,
    /// });
    /// assert_eq!(status, Ok(404));
    /// assert_eq!(registry.circuit_breaker("search").metrics().number_of_buffered_calls(), 0);
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn run<R>(
        &self,
        call: impl FnMut() -> R,
        classify: impl Fn(&R) -> CallOutcome,
    ) -> Result<R, Rejected> {
        if self.has_wrappers() {
            return self.run_wrapped(Repeat(call), &ByOutcome(classify));
        }
        let mut call = call;
        self.enter_and_run(
            |admitted| admitted.map(|()| call()),
            // Only an admitted call is classified: its result is `Ok`.
            |result| result.as_ref().map_or(CallOutcome::Ignored, &classify),
        )
    }

    /// [`call`](Plan::call), [`run`](Plan::run) and the macros' [`run_guarded`]: enters the
    /// guards, then `body(Ok(()))` runs the call, its result classified by `classify`; or
    /// `body(Err(rejected))` answers a refusal, unclassified. One closure for both, so that each
    /// may own the same captures (a guarded function's arguments, taken by value).
    #[inline(always)]
    fn enter_and_run<R>(
        &self,
        body: impl FnOnce(Result<(), Rejected>) -> R,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> R {
        if let Some(step) = self.lone_step() {
            return match_step!(step, gate => one_gate(&**gate, body, classify));
        }
        let mut held = Held::new();
        match self.enter_into(&mut held) {
            Ok(()) => run(&mut held, || body(Ok(())), classify),
            Err(rejected) => body(Err(rejected)),
        }
        // Entered and run, or refused: either way `held` holds nothing now (see `run`), and
        // its drop finds nothing to release.
    }

    /// Runs the future `call()` makes through the guards, waiting asynchronously while a gate
    /// makes it wait (and between the attempts of a retry). `Ok` counts as a success and
    /// every `Err` as a failure, which a retry in the plan retries; a rejection is returned
    /// as `E::from(rejected)`. Dropping the returned future releases every guard and records
    /// nothing.
    ///
    /// `call` makes the call's future once per attempt: once, unless the plan has a retry.
    ///
    /// ```
    /// use resilience_runtime::{Guard, Registry, Rejected};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), resilience_runtime::ConfigError> {
    /// let registry = Registry::new();
    /// let plan = registry.plan(&[Guard::bulkhead("orders"), Guard::circuit_breaker("orders")])?;
    /// let order: Result<u32, Rejected> = plan.call_async(|| async { Ok(42) }).await;
    /// assert_eq!(order, Ok(42));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async<T, E, F>(&self, mut call: impl FnMut() -> F) -> Result<T, E>
    where
        E: From<Rejected>,
        F: Future<Output = Result<T, E>>,
    {
        // `run_async`'s body, not a call of it: one state machine fewer to resume and drop.
        // (One body for the four async entry points, returned as it is from each, measured
        // 0.8 ns slower on the two-gate plan and 2 ns on five aspects: BENCHMARKS.md at 79fb71f.)
        if self.has_wrappers() {
            let judge = ByOutcome(CallOutcome::of_result::<T, E>);
            return match self.run_wrapped_async(Repeat(&mut call), judge).await {
                Ok(result) => result,
                Err(rejected) => Err(E::from(rejected)),
            };
        }
        let mut guarded = GuardedCall::new();
        if let Err(rejected) = guarded.enter_async(self).await {
            return Err(E::from(rejected));
        }
        guarded.run_async(call(), CallOutcome::of_result).await
    }

    /// Runs the future `call()` makes through the guards and classifies its output with
    /// `classify`; returns the output, or the rejection if a guard refused the call. A retry
    /// in the plan retries what `classify` calls a [`Failure`](CallOutcome::Failure).
    pub async fn run_async<R, F>(
        &self,
        mut call: impl FnMut() -> F,
        classify: impl Fn(&R) -> CallOutcome,
    ) -> Result<R, Rejected>
    where
        F: Future<Output = R>,
    {
        if self.has_wrappers() {
            return self
                .run_wrapped_async(Repeat(&mut call), ByOutcome(classify))
                .await;
        }
        let mut guarded = GuardedCall::new();
        guarded.enter_async(self).await?;
        Ok(guarded.run_async(call(), classify).await)
    }

    /// Runs the future `call` through the guards, as [`call_async`](Plan::call_async) does
    /// with a future made once: for a call that cannot be made again (one that moves what it
    /// captured). A retry or a hedge in the plan then makes one attempt: it has nothing to run
    /// again.
    ///
    /// ```
    /// use resilience_runtime::{Guard, Registry, Rejected};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), resilience_runtime::ConfigError> {
    /// let registry = Registry::new();
    /// let plan = registry.plan(&[Guard::bulkhead("orders")])?;
    /// let order = String::from("book");
    /// let placed: Result<String, Rejected> = plan.call_future(async move { Ok(order) }).await;
    /// assert_eq!(placed.unwrap(), "book");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_future<T, E, F>(&self, call: F) -> Result<T, E>
    where
        E: From<Rejected>,
        F: Future<Output = Result<T, E>>,
    {
        // `run_future`'s body, not a call of it, as in `call_async`.
        if self.has_wrappers() {
            let judge = ByOutcome(CallOutcome::of_result::<T, E>);
            let attempt = OneShot(Some(move || call));
            return match self.run_wrapped_async(attempt, judge).await {
                Ok(result) => result,
                Err(rejected) => Err(E::from(rejected)),
            };
        }
        let mut guarded = GuardedCall::new();
        if let Err(rejected) = guarded.enter_async(self).await {
            return Err(E::from(rejected));
        }
        guarded.run_async(call, CallOutcome::of_result).await
    }

    /// Runs the future `call` through the guards and classifies its output with `classify`,
    /// as [`run_async`](Plan::run_async) does with a future made once (a retry or a hedge in
    /// the plan makes one attempt).
    pub async fn run_future<R, F>(
        &self,
        call: F,
        classify: impl Fn(&R) -> CallOutcome,
    ) -> Result<R, Rejected>
    where
        F: Future<Output = R>,
    {
        if self.has_wrappers() {
            let attempt = OneShot(Some(move || call));
            return self.run_wrapped_async(attempt, ByOutcome(classify)).await;
        }
        let mut guarded = GuardedCall::new();
        guarded.enter_async(self).await?;
        Ok(guarded.run_async(call, classify).await)
    }

    /// Acquires every guard, in order, blocking the thread while a bulkhead makes it wait:
    /// the first half of [`run`](Plan::run), for callers that need their arguments back when
    /// the call is refused (a fallback). Run the call with [`Entered::run`]; dropping the
    /// [`Entered`] instead releases the guards and records nothing.
    ///
    /// ```
    /// use resilience_runtime::{CallOutcome, Guard, Registry};
    ///
    /// let registry = Registry::new();
    /// let plan = registry.plan(&[Guard::circuit_breaker("quotes")])?;
    /// registry.circuit_breaker("quotes").transition_to_forced_open_state();
    ///
    /// let order = String::from("book");
    /// let quote = match plan.enter() {
    ///     Ok(entered) => entered.run(move || format!("fresh quote for {order}"), |_| CallOutcome::Success),
    ///     // `order` was never moved: the fallback still has it.
    ///     Err(rejected) => format!("cached quote for {order} ({rejected})"),
    /// };
    /// assert!(quote.starts_with("cached quote for book"));
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The [`Rejected`] of the first guard that refused the call; the guards already acquired
    /// are released (the breakers among them see a rejection, not a failure).
    ///
    /// # Panics
    ///
    /// If the plan has a retry or a time limiter: the guards inside a wrapper are entered per
    /// attempt, inside it, so such a plan cannot be entered ahead of its call. Use
    /// [`run`](Plan::run) or [`call`](Plan::call), whose call can borrow what a fallback needs
    /// (a refused call leaves it with the caller).
    pub fn enter(&self) -> Result<Entered<'_>, Rejected> {
        self.assert_splittable();
        let mut held = Held::new();
        self.enter_into(&mut held)?;
        Ok(Entered { held })
    }

    /// Acquires every guard, in order, waiting asynchronously while a bulkhead makes it wait:
    /// the first half of [`run_async`](Plan::run_async). Run the call with
    /// [`Entered::run_async`]. Cancel-safe: dropping this future while it waits leaves no
    /// trace and holds no permit.
    ///
    /// # Errors
    ///
    /// The [`Rejected`] of the first guard that refused the call, as for
    /// [`enter`](Plan::enter).
    ///
    /// # Panics
    ///
    /// If the plan has a retry or a time limiter, as [`enter`](Plan::enter).
    pub async fn enter_async(&self) -> Result<Entered<'_>, Rejected> {
        self.assert_splittable();
        let mut held = Held::new();
        self.enter_async_into(&mut held).await?;
        Ok(Entered { held })
    }
}

/// The guarded call of a function whose stack has a wrapper (`#[retry]`, `#[time_limiter]`),
/// for the attribute macros: `call` is made once per attempt; `classify` is the breakers'
/// classification, `failed` says whether a result is an `Err`, `retry_on` whether the retry
/// retries it, `retry_after` the least wait a retried result asks for.
#[doc(hidden)]
#[inline]
pub fn run_wrapped<R>(
    plan: &Plan,
    call: impl FnMut() -> R,
    classify: impl Fn(&R) -> CallOutcome,
    failed: impl Fn(&R) -> bool,
    retry_on: impl Fn(&R) -> bool,
    retry_after: impl Fn(&R) -> Option<std::time::Duration>,
) -> Result<R, Rejected> {
    let judge = Judged {
        classify,
        failed,
        retry_on,
        retry_after,
        // A sync call makes one attempt through a hedge.
        hedge_on: |_: &R| false,
    };
    plan.run_wrapped(Repeat(call), &judge)
}

/// [`run_wrapped`] for an `async fn`: `call` makes the body's future once per attempt;
/// `hedge_on` says whether a hedge starts its next attempt at once for a failed result.
#[doc(hidden)]
pub async fn run_wrapped_async<R, F: Future<Output = R>>(
    plan: &Plan,
    mut call: impl FnMut() -> F,
    classify: impl Fn(&R) -> CallOutcome,
    failed: impl Fn(&R) -> bool,
    retry_on: impl Fn(&R) -> bool,
    retry_after: impl Fn(&R) -> Option<std::time::Duration>,
    hedge_on: impl Fn(&R) -> bool,
) -> Result<R, Rejected> {
    let judge = Judged {
        classify,
        failed,
        retry_on,
        retry_after,
        hedge_on,
    };
    plan.run_wrapped_async(Repeat(&mut call), judge).await
}

/// [`run_wrapped_async`] with the body's future made once: a stack with a time limiter, no
/// retry and no hedge, whose body keeps its arguments by value.
#[doc(hidden)]
pub async fn run_wrapped_future<R, F: Future<Output = R>>(
    plan: &Plan,
    call: F,
    classify: impl Fn(&R) -> CallOutcome,
    failed: impl Fn(&R) -> bool,
) -> Result<R, Rejected> {
    let judge = Judged {
        classify,
        failed,
        retry_on: |_: &R| false,
        retry_after: |_: &R| None,
        hedge_on: |_: &R| false,
    };
    plan.run_wrapped_async(OneShot(Some(move || call)), judge)
        .await
}

/// The guarded call of a function whose stack has only gates, for the attribute macros:
/// `body(Ok(()))` runs the function's body once the guards admitted the call, and its result
/// is classified by `classify`; `body(Err(rejected))` answers a refusal (the rejection as the
/// function's error, or its fallback), unclassified. One closure for both, so that it can take
/// the function's arguments by value for either: the body and the fallback each receive them.
#[doc(hidden)]
#[inline(always)]
pub fn run_guarded<R>(
    plan: &Plan,
    body: impl FnOnce(Result<(), Rejected>) -> R,
    classify: impl FnOnce(&R) -> CallOutcome,
) -> R {
    debug_assert!(
        !plan.has_wrappers(),
        "the macros run plans with wrappers whole"
    );
    plan.enter_and_run(body, classify)
}

impl Plan {
    /// The check of [`enter`](Plan::enter): a plan with wrappers is run whole.
    fn assert_splittable(&self) {
        assert!(
            !self.has_wrappers(),
            "a plan with a retry or a time limiter cannot be entered ahead of its call (the \
             guards inside them are entered per attempt); use `Plan::run` or `Plan::call`"
        );
    }
}

/// A guarded async call made in place, for the attribute macros: declared empty in the
/// guarded function, filled by [`enter_async`](Self::enter_async), then run with
/// [`run_async`](Self::run_async). (A sync function's call is [`run_guarded`].) The public
/// equivalent, which returns the admitted call by value, is [`Plan::enter_async`] and
/// [`Entered`].
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

impl GuardedCall<'_> {
    /// Ends a call: one that [`run_async`](Self::run_async) completed, or that was refused,
    /// holds nothing, and its drop releases nothing; any other is abandoned (its permits
    /// released, nothing recorded).
    #[inline(always)]
    pub fn ran(self) {
        drop(self);
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

/// Runs `call` holding the permits `held`, records its outcome as `classify` says, and releases
/// them innermost first, leaving `held` empty (borrowed, not consumed: a call that consumed it
/// would copy it first). A panic in `call`, in `classify` or in a gate's record unwinds through
/// the owner, whose drop of `held` releases the gates still held, recording nothing.
#[inline(always)]
fn run<R>(
    held: &mut Held<'_>,
    call: impl FnOnce() -> R,
    classify: impl FnOnce(&R) -> CallOutcome,
) -> R {
    let result = on_chain(held, call);
    held.complete_in_place(classify(&result));
    result
}

/// [`Plan::enter_and_run`] for the gate of [`Plan::lone_step`] (a plan of one gate, on a thread
/// where no guarded call runs): the gate asked, the call run on the chain, the permit
/// completed, with no walk over the plan's steps or the slots of the other gate kinds, and a
/// refusal answered at once (nothing else is held to see it). Against the general path it
/// saved 20 instructions per admitted call and 92 per refusal (what a lone breaker answers
/// while it is open), and the permit in a local 14 more per admitted call (BENCHMARKS.md at 79fb71f).
#[inline(always)]
fn one_gate<G: Gate, R>(
    gate: &G,
    body: impl FnOnce(Result<(), Rejected>) -> R,
    classify: impl FnOnce(&R) -> CallOutcome,
) -> R {
    // The permit in a local of its own, not in a `Held`: one gate has no order to keep, and
    // its frame names it by its id. (Through a `Held`, its permit was written into the slot
    // and moved out again: 13 instructions per call.) Should `body` or `classify` panic, the
    // permit's drop releases it, recording nothing, as `Held`'s would.
    let mut permit = None;
    match gate.try_enter(&mut permit) {
        Ok(Entry::Entered) => {}
        Ok(Entry::MustWait) => match gate.enter_blocking() {
            Ok(waited) => permit = Some(waited),
            Err(rejected) => return body(Err(rejected)),
        },
        // The only gate refused: nothing is held.
        Err(rejected) => return body(Err(rejected)),
    }
    let result = on_chain_one(gate.id(), || body(Ok(())));
    // Classified while the permit is still held, as on the general path: should `classify`
    // panic, `result` is dropped before the permit goes (its destructor may call through the
    // same guard).
    let outcome = classify(&result);
    if let Some(permit) = permit {
        permit.complete(outcome);
    }
    result
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
    pub fn run<R>(
        mut self,
        call: impl FnOnce() -> R,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> R {
        run(&mut self.held, call, classify)
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
                on_chain(this.held.held_ref(), || this.call.set(None));
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
    C: Classify<R>,
{
    type Output = R;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let mut this = self.project();
        if this.call.is_none() {
            panic!("a guarded call's future was polled after it completed");
        }
        let polled = {
            // A panic in the call abandons it: its permits go during the unwind (as an
            // `async fn`'s locals do), not whenever this future happens to be dropped; after
            // the call is off the chain.
            let mut abandon = Abandon {
                held: &mut *this.held,
                polled: false,
            };
            let call = &mut this.call;
            let polled = on_chain(abandon.held.held_ref(), || {
                let polled = call.as_mut().as_pin_mut().map(|call| call.poll(cx));
                if let Some(Poll::Ready(_)) = polled {
                    // The call's future is dropped while its guards are still on the chain,
                    // as when it is cancelled: its destructors are part of the call.
                    call.set(None);
                }
                polled
            });
            abandon.polled = true;
            polled
        };
        let Some(Poll::Ready(result)) = polled else {
            return Poll::Pending;
        };
        let classify = this
            .classify
            .take()
            .expect("a guarded call's future was polled after it completed");
        this.held.complete_in_place(classify.classify(&result));
        Poll::Ready(result)
    }
}

/// How an async call's output counts for the gates, once it is ready: a closure (the
/// entries), or a classifier whose type a named future writes out (a tower service's).
pub(crate) trait Classify<R> {
    /// How `result` counts.
    fn classify(self, result: &R) -> CallOutcome;
}

impl<R, C: FnOnce(&R) -> CallOutcome> Classify<R> for C {
    #[inline]
    fn classify(self, result: &R) -> CallOutcome {
        self(result)
    }
}

/// Abandons the call (releases its permits, recording nothing) if dropped before its poll
/// returned: by an unwind.
struct Abandon<'r, H: HeldBy> {
    held: &'r mut H,
    polled: bool,
}

impl<H: HeldBy> Drop for Abandon<'_, H> {
    fn drop(&mut self) {
        if !self.polled {
            self.held.abandon();
        }
    }
}

/// The permits a [`RunAsync`] runs with: owned (an [`Entered`]) or borrowed (a
/// [`GuardedCall`]).
trait HeldBy {
    fn held_ref(&self) -> &Held<'_>;
    fn complete_in_place(&mut self, outcome: CallOutcome);
    /// Releases every permit, innermost first, recording nothing.
    fn abandon(&mut self);
}

impl HeldBy for Held<'_> {
    #[inline]
    fn held_ref(&self) -> &Held<'_> {
        self
    }
    #[inline(always)]
    fn complete_in_place(&mut self, outcome: CallOutcome) {
        Held::complete_in_place(self, outcome);
    }
    fn abandon(&mut self) {
        Held::abandon(self);
    }
}

impl HeldBy for &mut Held<'_> {
    #[inline]
    fn held_ref(&self) -> &Held<'_> {
        self
    }
    #[inline(always)]
    fn complete_in_place(&mut self, outcome: CallOutcome) {
        Held::complete_in_place(self, outcome);
    }
    fn abandon(&mut self) {
        Held::abandon(self);
    }
}
