//! A guarded async call whose future owns its plan, for futures that must be `'static` and
//! named: a tower service's response future, which outlives the service's borrow and whose
//! type is written out. [`Owned`] is the plan's handle and the permits taken from it, held
//! together; [`OwnedRun`] runs the call with them, as [`Entered::run_async`] does.
//!
//! [`Entered::run_async`]: super::Entered::run_async

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::chain::on_chain;
use super::held::Held;
use super::{Classify, RunAsync};
use crate::error::Rejected;
use crate::plan::Plan;
use crate::plan_cache::SitePlan;

/// A plan's handle and the permits a call holds from its gates: a call admitted (or being
/// admitted) that owns what it borrows.
///
/// The permits borrow the gates of the plan the handle keeps alive, so their lifetime is
/// erased to `'static` (see [`plan`](Self::plan)). Field order is drop order: the permits go
/// before the handle.
pub(crate) struct Owned {
    held: Held<'static>,
    plan: SitePlan,
}

/// Where an owned call stands after its gates were asked once.
pub(crate) enum OwnedEntry {
    /// Every gate admitted it.
    Admitted(Owned),
    /// A gate makes it wait: the wait, then the gates after it, boxed (only a call that waits
    /// pays for its state, as in [`Plan::enter_async`]).
    Waiting(Pin<Box<dyn Future<Output = Result<Owned, Rejected>> + Send>>),
}

impl Owned {
    /// Asks every gate of `plan` (a plan without wrappers) now, in order, as an asynchronous
    /// entry's first poll does.
    ///
    /// # Errors
    ///
    /// The refusal of the first gate that refused the call; nothing is then held.
    #[inline(always)]
    pub(crate) fn enter(plan: SitePlan) -> Result<OwnedEntry, Rejected> {
        debug_assert!(
            !plan.has_wrappers(),
            "a plan with wrappers runs as segments"
        );
        let mut owned = Owned {
            held: Held::new(),
            plan,
        };
        let plan = owned.plan();
        Ok(match plan.enter_now(&mut owned.held)? {
            None => OwnedEntry::Admitted(owned),
            Some(from) => OwnedEntry::Waiting(Box::pin(owned.wait(from))),
        })
    }

    /// The rest of the entry from the gate `steps[from]`, which made the call wait.
    async fn wait(mut self, from: usize) -> Result<Owned, Rejected> {
        let plan = self.plan();
        plan.enter_waiting(from, &mut self.held).await?;
        Ok(self)
    }

    /// The plan, borrowed for as long as the permits are: `'static` in the type, valid while
    /// `self.plan` lives.
    ///
    /// Sound because the plan is behind the handle (an interned `&'static Plan`, or an
    /// `Arc<Plan>` the handle holds a count of): moving the handle, or the `Owned`, does not
    /// move it, and nothing mutates it. Every borrow made through this reference ends up in
    /// `self.held` (the permits), or in a future that owns `self` (the wait), and both are
    /// dropped before `self.plan` is (field order; an `Owned` moved into [`OwnedRun`] keeps
    /// that order there).
    fn plan(&self) -> &'static Plan {
        let plan: *const Plan = &*self.plan;
        #[allow(unsafe_code)]
        // SAFETY: see above: the plan outlives every use of this reference.
        unsafe {
            &*plan
        }
    }

    /// Makes the call's future with `make` and runs it holding the permits, as
    /// [`Entered::run_async`] does: its output recorded as `classify` says, the permits
    /// released on every path (a completed, panicked or dropped future). `make` runs on the
    /// call chain, as the future's polls do: what it does synchronously is part of the call.
    /// Should it panic, the permits go during the unwind, recording nothing.
    ///
    /// [`Entered::run_async`]: super::Entered::run_async
    #[inline(always)]
    pub(crate) fn run<F, C>(self, make: impl FnOnce() -> F, classify: C) -> OwnedRun<F, C> {
        let call = on_chain(&self.held, make);
        let Owned { held, plan } = self;
        OwnedRun {
            run: RunAsync::new(call, held, classify),
            _plan: plan,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Owned::run`]: the call run with the permits it owns.
    pub(crate) struct OwnedRun<F, C> {
        // Before the handle: dropped first (it holds the permits, which borrow the plan).
        #[pin]
        run: RunAsync<F, Held<'static>, C>,
        _plan: SitePlan,
    }
}

impl<R, F, C> Future for OwnedRun<F, C>
where
    F: Future<Output = R>,
    C: Classify<R>,
{
    type Output = R;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        self.project().run.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;
    use crate::aspect::Aspect;
    use crate::bulkhead::BulkheadConfig;
    use crate::clock::ManualClock;
    use crate::outcome::CallOutcome;
    use crate::plan::Guard;
    use crate::registry::Registry;

    const GUARDS: [Guard<'static>; 2] = [Guard::bulkhead("owned"), Guard::circuit_breaker("owned")];

    fn registry(wait: Duration) -> Registry {
        // A manual clock: a wait's timer needs no runtime.
        let registry = Registry::with_clock(ManualClock::new());
        let one = BulkheadConfig::builder()
            .max_concurrent_calls(1)
            .max_wait_duration(wait)
            .build()
            .unwrap();
        registry.configure_bulkhead("owned", one).unwrap();
        registry
    }

    fn admitted(plan: &Arc<Plan>) -> Owned {
        match Owned::enter(SitePlan::shared(Arc::clone(plan))) {
            Ok(OwnedEntry::Admitted(owned)) => owned,
            _ => panic!("a free plan admits the call at once"),
        }
    }

    #[test]
    fn an_owned_call_releases_its_permits_before_its_plan_on_every_path() {
        let registry = registry(Duration::ZERO);
        let plan = Arc::new(registry.resolve_plan(&GUARDS));
        let bulkhead = registry.bulkhead("owned");
        let mut cx = Context::from_waker(Waker::noop());

        // Completed.
        let run = admitted(&plan).run(|| std::future::ready(7), |_: &u32| CallOutcome::Success);
        assert_eq!(bulkhead.available_concurrent_calls(), 0);
        assert_eq!(pin!(run).poll(&mut cx), Poll::Ready(7));
        assert_eq!(bulkhead.available_concurrent_calls(), 1);

        // Dropped mid-call, moved first: the permits borrow the plan, not the `Owned`.
        let run = admitted(&plan).run(std::future::pending::<u32>, |_: &u32| CallOutcome::Success);
        let mut run = Box::pin(run);
        assert!(run.as_mut().poll(&mut cx).is_pending());
        assert_eq!(Arc::strong_count(&plan), 2);
        drop(run);
        assert_eq!(bulkhead.available_concurrent_calls(), 1);
        assert_eq!(Arc::strong_count(&plan), 1);

        // `make` panicked: the permits go during the unwind, recording nothing.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            admitted(&plan).run(
                || -> std::future::Ready<u32> { panic!("the inner call panicked") },
                |_: &u32| CallOutcome::Success,
            )
        }));
        assert!(panicked.is_err());
        assert_eq!(bulkhead.available_concurrent_calls(), 1);
        assert_eq!(Arc::strong_count(&plan), 1);

        // Refused: nothing held, the handle given back.
        let holder = admitted(&plan);
        assert!(matches!(
            Owned::enter(SitePlan::shared(Arc::clone(&plan))),
            Err(crate::Rejected::BulkheadFull { .. })
        ));
        drop(holder);
        assert_eq!(Arc::strong_count(&plan), 1);
        let metrics = registry.circuit_breaker("owned").metrics();
        assert_eq!(metrics.number_of_successful_calls(), 1);
    }

    #[test]
    fn a_wait_dropped_before_it_ends_releases_the_gates_entered_before_it() {
        let registry = registry(Duration::from_secs(60));
        // The breaker first: a call waiting for the bulkhead holds the breaker's permit.
        registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
        let plan = Arc::new(registry.resolve_plan(&GUARDS));
        let holder = admitted(&plan);
        let Ok(OwnedEntry::Waiting(mut wait)) = Owned::enter(SitePlan::shared(Arc::clone(&plan)))
        else {
            panic!("a full bulkhead with a wait makes the call wait");
        };
        assert_eq!(Arc::strong_count(&plan), 3);
        // Waiting in the bulkhead's queue, then given up.
        let mut cx = Context::from_waker(Waker::noop());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        drop(wait);
        drop(holder);
        assert_eq!(Arc::strong_count(&plan), 1);
        assert_eq!(registry.bulkhead("owned").available_concurrent_calls(), 1);
        let metrics = registry.circuit_breaker("owned").metrics();
        assert_eq!(
            metrics.number_of_buffered_calls(),
            0,
            "abandoned: nothing recorded"
        );
    }
}
