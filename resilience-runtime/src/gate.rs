//! The seam of the admission aspects: a [`Gate`] admits a call or refuses it, and holds a
//! [`Permit`] while the call runs. The bulkhead, the rate limiter, the circuit breaker's
//! permission and fault injection are gates; a plan runs them in its order through `call::enter`, which knows
//! them only through these two traits, dispatched statically over the closed set of a plan's
//! steps (`match_step!`).

use std::future::Future;

use crate::bulkhead::{Bulkhead, BulkheadPermit, Ended};
use crate::circuit_breaker::{CircuitBreaker, CircuitPermit};
use crate::error::Rejected;
use crate::fault::FaultInjector;
use crate::name::Name;
use crate::outcome::CallOutcome;
use crate::rate_limiter::{Admission, RateLimiter};
use crate::slot::fill;

/// What [`Gate::try_enter`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The permit is in the slot.
    Entered,
    /// No permit now, and the gate makes callers wait for one: nothing was taken or counted;
    /// the caller waits with [`Gate::enter_async`] (or [`Gate::enter_blocking`]).
    MustWait,
}

/// An admission aspect.
pub(crate) trait Gate {
    /// The permit of one admitted call. The engine ends it with
    /// [`complete`](Permit::complete), [`rejected`](Permit::rejected) or
    /// [`abandoned`](Permit::abandoned) (a panic, a future dropped mid-call), each of which
    /// releases it.
    type Permit<'a>: Permit
    where
        Self: 'a;

    /// The process-wide id of the instance (re-entrancy tracking of the call chain).
    fn id(&self) -> u64;

    /// The instance name.
    fn name(&self) -> &Name;

    /// Admits the call now into `slot` (written in place: a permit built in a temporary and
    /// copied into the call's state was read back in wide loads from the narrow stores that
    /// had just written it, a store-forwarding stall), or says it must wait, or refuses it.
    fn try_enter<'a>(&'a self, slot: &mut Option<Self::Permit<'a>>) -> Result<Entry, Rejected>;

    /// Admits the call, blocking the thread while the gate makes it wait.
    fn enter_blocking(&self) -> Result<Self::Permit<'_>, Rejected>;

    /// Admits the call, waiting asynchronously while the gate makes it wait. Cancel-safe:
    /// dropped while it waits, it holds nothing and leaves no trace.
    fn enter_async(&self) -> impl Future<Output = Result<Self::Permit<'_>, Rejected>> + Send;
}

/// What a gate's permit does when the call ends. Each consumes the permit and releases it; by
/// default they record nothing (the breaker's permit records the outcome, an adaptive
/// bulkhead's takes a sample).
pub(crate) trait Permit: Sized {
    /// The call ran to completion with `outcome`.
    #[inline]
    fn complete(self, outcome: CallOutcome) {
        let _ = outcome;
    }

    /// A gate further in refused the call with `rejection`.
    #[inline]
    fn rejected(self, rejection: &Rejected) {
        let _ = rejection;
    }

    /// The call was abandoned: a panic, a future dropped mid-call, or a call that never ran.
    #[inline]
    fn abandoned(self) {}

    /// The process-wide id of the gate instance.
    fn instance_id(&self) -> u64;
}

// ----- fault injection -----

/// The permit of a call a [`FaultInjector`] let run: it holds nothing (a latency was waited
/// before it was given), and is of no size, so that the slot every call's permits keep for it
/// costs a byte. It names no instance: a nested call through the same name draws again, as
/// each call to the dependency would.
pub(crate) struct FaultPermit;

impl Permit for FaultPermit {
    /// No instance (ids start at 1): never re-entered.
    fn instance_id(&self) -> u64 {
        0
    }
}

impl Gate for FaultInjector {
    type Permit<'a> = FaultPermit;

    fn id(&self) -> u64 {
        FaultInjector::id(self)
    }

    fn name(&self) -> &Name {
        FaultInjector::name(self)
    }

    /// Draws now, unless a latency may be drawn: then the call draws in its wait (one draw
    /// per call either way).
    fn try_enter(&self, slot: &mut Option<FaultPermit>) -> Result<Entry, Rejected> {
        let config = self.snapshot();
        if config.injects_latency() {
            return Ok(Entry::MustWait);
        }
        self.outcome(self.draw(&config))?;
        fill(slot, FaultPermit);
        Ok(Entry::Entered)
    }

    fn enter_blocking(&self) -> Result<FaultPermit, Rejected> {
        let config = self.snapshot();
        self.refuse_blocking(&config)?;
        let draw = self.draw(&config);
        if let Some(latency) = draw.latency() {
            self.sleep_blocking(latency);
        }
        self.outcome(draw)?;
        Ok(FaultPermit)
    }

    async fn enter_async(&self) -> Result<FaultPermit, Rejected> {
        let draw = self.draw(&self.snapshot());
        if let Some(latency) = draw.latency() {
            self.sleep(latency).await;
        }
        self.outcome(draw)?;
        Ok(FaultPermit)
    }
}

// ----- the bulkhead -----

impl Gate for Bulkhead {
    type Permit<'a> = BulkheadPermit<'a>;

    #[inline]
    fn id(&self) -> u64 {
        Bulkhead::id(self)
    }

    fn name(&self) -> &Name {
        Bulkhead::name(self)
    }

    #[inline(always)]
    fn try_enter<'a>(&'a self, slot: &mut Option<BulkheadPermit<'a>>) -> Result<Entry, Rejected> {
        match self.try_acquire_uncounted() {
            Some(permit) => {
                fill(slot, permit);
                Ok(Entry::Entered)
            }
            None if self.waits() => Ok(Entry::MustWait),
            // Counted as a rejection (or, if a permit came free meanwhile, an admission).
            None => {
                fill(slot, self.try_acquire()?);
                Ok(Entry::Entered)
            }
        }
    }

    fn enter_blocking(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        self.acquire_blocking()
    }

    fn enter_async(&self) -> impl Future<Output = Result<BulkheadPermit<'_>, Rejected>> + Send {
        self.acquire()
    }
}

/// How a call ended, for an adaptive limit's sample: its duration when it ran to its end
/// (succeeded or failed), a drop when a time limiter cut it off or its caller gave it up, and
/// nothing when it says nothing of the dependency.
impl Permit for BulkheadPermit<'_> {
    #[inline]
    fn complete(self, outcome: CallOutcome) {
        self.finish(match outcome {
            CallOutcome::Success | CallOutcome::Failure => Ended::Completed,
            CallOutcome::Overloaded => Ended::Dropped,
            CallOutcome::Ignored => Ended::Unsampled,
        });
    }

    #[inline]
    fn rejected(self, rejection: &Rejected) {
        self.finish(match rejection {
            Rejected::TimedOut { .. } => Ended::Dropped,
            _ => Ended::Unsampled,
        });
    }

    fn abandoned(self) {
        // A panic tells nothing of the dependency's load; a caller giving up does.
        self.finish(if std::thread::panicking() {
            Ended::Unsampled
        } else {
            Ended::Dropped
        });
    }

    #[inline]
    fn instance_id(&self) -> u64 {
        BulkheadPermit::instance_id(self)
    }
}

// ----- the rate limiter -----

/// A rate limiter's permit: a permission is spent when it is taken, so there is nothing to
/// release and no outcome to record; it names the instance for the call chain.
#[derive(Debug)]
pub(crate) struct RatePermit<'a>(&'a RateLimiter);

impl Gate for RateLimiter {
    type Permit<'a> = RatePermit<'a>;

    #[inline]
    fn id(&self) -> u64 {
        RateLimiter::id(self)
    }

    fn name(&self) -> &Name {
        RateLimiter::name(self)
    }

    #[inline(always)]
    fn try_enter<'a>(&'a self, slot: &mut Option<RatePermit<'a>>) -> Result<Entry, Rejected> {
        match self.try_acquire_or_wait() {
            Admission::Granted => {
                fill(slot, RatePermit(self));
                Ok(Entry::Entered)
            }
            Admission::Wait => Ok(Entry::MustWait),
            Admission::Refused(rejected) => Err(rejected),
        }
    }

    fn enter_blocking(&self) -> Result<RatePermit<'_>, Rejected> {
        self.acquire_blocking().map(|()| RatePermit(self))
    }

    async fn enter_async(&self) -> Result<RatePermit<'_>, Rejected> {
        self.acquire().await.map(|()| RatePermit(self))
    }
}

impl Permit for RatePermit<'_> {
    #[inline]
    fn instance_id(&self) -> u64 {
        self.0.id()
    }
}

// ----- the circuit breaker's permission -----

impl Gate for CircuitBreaker {
    type Permit<'a> = CircuitPermit<'a>;

    #[inline]
    fn id(&self) -> u64 {
        CircuitBreaker::id(self)
    }

    fn name(&self) -> &Name {
        CircuitBreaker::name(self)
    }

    #[inline(always)]
    fn try_enter<'a>(&'a self, slot: &mut Option<CircuitPermit<'a>>) -> Result<Entry, Rejected> {
        self.try_acquire_into(slot)?;
        Ok(Entry::Entered)
    }

    fn enter_blocking(&self) -> Result<CircuitPermit<'_>, Rejected> {
        self.try_acquire()
    }

    fn enter_async(&self) -> impl Future<Output = Result<CircuitPermit<'_>, Rejected>> + Send {
        std::future::ready(self.try_acquire())
    }
}

impl Permit for CircuitPermit<'_> {
    #[inline(always)]
    fn complete(self, outcome: CallOutcome) {
        match outcome {
            CallOutcome::Success => self.record_success(),
            CallOutcome::Failure => self.record_failure(),
            CallOutcome::Ignored | CallOutcome::Overloaded => self.record_ignored(),
        }
    }

    #[inline]
    fn rejected(self, rejection: &Rejected) {
        self.record_rejected(rejection);
    }

    #[inline]
    fn instance_id(&self) -> u64 {
        CircuitPermit::instance_id(self)
    }
}
