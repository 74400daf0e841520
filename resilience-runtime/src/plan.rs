//! [`Plan`]: a call site's guards, resolved to instances and sorted by precedence, and the
//! [`Guard`]s and [`ReentrancyPolicy`] it is made from. Running a call through a plan is the
//! `call` module's.

use std::fmt;
use std::sync::Arc;

use crate::aspect::Aspect;
use crate::bulkhead::Bulkhead;
use crate::circuit_breaker::CircuitBreaker;
use crate::error::Rejected;
use crate::fault::FaultInjector;
use crate::gate::Gate;
use crate::hedge::Hedge;
use crate::name::Name;
use crate::rate_limiter::RateLimiter;
use crate::retry::Retry;
use crate::time_limiter::TimeLimiter;

/// One guard of a call: an aspect kind and the name of its instance.
///
/// ```
/// use resilience_runtime::{Aspect, Guard};
///
/// const ORDERS: [Guard; 2] = [Guard::bulkhead("orders"), Guard::circuit_breaker("orders")];
/// assert_eq!(ORDERS[1].aspect(), Aspect::CircuitBreaker);
/// assert_eq!(ORDERS[1].name(), "orders");
///
/// // Names known only at run time work too.
/// let tenant = String::from("tenant-7");
/// let guard = Guard::new(Aspect::Bulkhead, &tenant);
/// assert_eq!(guard.name(), "tenant-7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Guard<'a> {
    aspect: Aspect,
    name: &'a str,
}

impl<'a> Guard<'a> {
    /// The bulkhead `name`.
    pub const fn bulkhead(name: &'a str) -> Self {
        Guard::new(Aspect::Bulkhead, name)
    }

    /// The rate limiter `name`.
    pub const fn rate_limiter(name: &'a str) -> Self {
        Guard::new(Aspect::RateLimiter, name)
    }

    /// The retry `name`.
    pub const fn retry(name: &'a str) -> Self {
        Guard::new(Aspect::Retry, name)
    }

    /// The time limiter `name`.
    pub const fn time_limiter(name: &'a str) -> Self {
        Guard::new(Aspect::TimeLimiter, name)
    }

    /// The hedge `name`.
    pub const fn hedge(name: &'a str) -> Self {
        Guard::new(Aspect::Hedge, name)
    }

    /// The faults injected for `name` (a plan of a registry that allows fault injection takes
    /// them by itself for each of its guards' names).
    pub const fn fault(name: &'a str) -> Self {
        Guard::new(Aspect::Fault, name)
    }

    /// The circuit breaker `name`.
    pub const fn circuit_breaker(name: &'a str) -> Self {
        Guard::new(Aspect::CircuitBreaker, name)
    }

    /// The instance `name` of `aspect`.
    ///
    /// A plan made of it creates the instance, and each distinct name is kept for the life of
    /// the process (see [`Name`]): name instances by something bounded (a dependency, a
    /// tenant), never by request, or let [`Registry::set_require_configured`] turn unknown
    /// names away.
    ///
    /// [`Registry::set_require_configured`]: crate::Registry::set_require_configured
    pub const fn new(aspect: Aspect, name: &'a str) -> Self {
        Guard { aspect, name }
    }

    /// The aspect kind.
    pub const fn aspect(&self) -> Aspect {
        self.aspect
    }

    /// The instance name.
    pub const fn name(&self) -> &'a str {
        self.name
    }
}

/// Why a list of guards cannot make one call's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuardListError {
    /// The same aspect kind twice.
    Repeated(Aspect),
}

impl GuardListError {
    /// The first problem of `guards`, if any; usable in constants.
    pub(crate) const fn check(guards: &[Guard<'_>]) -> Option<GuardListError> {
        let mut i = 0;
        while i < guards.len() {
            let aspect = guards[i].aspect;
            let mut j = 0;
            while j < i {
                if guards[j].aspect as u8 == aspect as u8 {
                    return Some(GuardListError::Repeated(aspect));
                }
                j += 1;
            }
            i += 1;
        }
        None
    }
}

impl fmt::Display for GuardListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardListError::Repeated(aspect) => write!(
                f,
                "{aspect} appears twice; a call takes each aspect once (use one instance name)"
            ),
        }
    }
}

/// What a guarded call does when it enters a guard instance that an enclosing guarded call on
/// the same call chain already holds.
///
/// The call chain is the guarded calls the current one runs inside: on the same thread and in
/// the same tokio task (or outside any task), a sync call for the extent of its body, an async
/// call while its future is being polled or dropped. A task spawned from a guarded call, or
/// driven by a nested executor inside one, is another chain; so are sibling calls joined in one
/// task (they run one after the other, not inside each other).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReentrancyPolicy {
    /// Pass through the guard: no second permit, no second record. A bulkhead of size 1
    /// cannot deadlock on itself and a breaker counts the call once.
    #[default]
    PassThrough,
    /// Refuse the inner call with [`Rejected::Reentrant`](crate::Rejected::Reentrant).
    Reject,
    /// Acquire the guard again, as if the calls were unrelated (double counting, and a full
    /// bulkhead can block on itself).
    Allow,
}

/// One step of a plan: a guard instance, of one of the closed set of gate kinds. Every `match`
/// over it goes through [`match_step!`], so a new kind is one variant here and one arm there,
/// and the compiler lists every site that has to learn it.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Bulkhead(Arc<Bulkhead>),
    RateLimiter(Arc<RateLimiter>),
    CircuitBreaker(Arc<CircuitBreaker>),
    Fault(Arc<FaultInjector>),
}

/// Runs `$e` with `$g` bound to the instance of whichever variant `$step` is (tokio's
/// `match_flavor!`): static dispatch, one arm per gate kind, no wildcard.
macro_rules! match_step {
    ($step:expr, $g:ident => $e:expr) => {
        match $step {
            $crate::plan::Step::Bulkhead($g) => $e,
            $crate::plan::Step::RateLimiter($g) => $e,
            $crate::plan::Step::CircuitBreaker($g) => $e,
            $crate::plan::Step::Fault($g) => $e,
        }
    };
}
pub(crate) use match_step;

/// A step that wraps the rest of the plan (the steps after it, then the call) instead of
/// admitting the call: one of the closed set of wrapper kinds.
#[derive(Clone, Debug)]
pub(crate) enum Wrapper {
    /// Runs the rest again after a failure.
    Retry(Arc<Retry>),
    /// Bounds the rest's duration (async calls).
    TimeLimiter(Arc<TimeLimiter>),
    /// Runs the rest again beside a slow run (async calls).
    Hedge(Arc<Hedge>),
}

/// Runs `$e` with `$w` bound to the instance of whichever wrapper kind `$wrapper` is (as
/// [`match_step!`] for gates): static dispatch, one arm per wrapper kind, no wildcard.
macro_rules! match_wrapper {
    ($wrapper:expr, $w:ident => $e:expr) => {
        match $wrapper {
            $crate::plan::Wrapper::Retry($w) => $e,
            $crate::plan::Wrapper::TimeLimiter($w) => $e,
            $crate::plan::Wrapper::Hedge($w) => $e,
        }
    };
}
pub(crate) use match_wrapper;

impl Wrapper {
    fn id(&self) -> u64 {
        match_wrapper!(self, w => w.id())
    }

    fn aspect(&self) -> Aspect {
        match self {
            Wrapper::Retry(_) => Aspect::Retry,
            Wrapper::TimeLimiter(_) => Aspect::TimeLimiter,
            Wrapper::Hedge(_) => Aspect::Hedge,
        }
    }

    fn name(&self) -> &Name {
        match_wrapper!(self, w => w.name())
    }
}

/// Where one guard of a plan sits: the gate `steps[i]`, or the wrapper `wrappers[i]`.
#[derive(Clone, Copy, Debug)]
enum Place {
    Gate(usize),
    Wrapper(usize),
}

/// One guard of a plan, in execution order: a gate, or a wrapper of the rest.
pub(crate) enum Layer<'p> {
    Gate(&'p Step),
    Wrapper(&'p Wrapper),
}

/// One segment of a plan run as nested segments: gates, then the wrapper (if any) that wraps
/// the segments after it.
pub(crate) struct Segment<'p> {
    /// The gates of the segment, outermost first.
    pub(crate) gates: std::ops::Range<usize>,
    /// The wrapper after the gates; `None` in the last segment, whose gates wrap the call.
    pub(crate) wrapper: Option<&'p Wrapper>,
}

/// The kinds of gate, one slot of a call's permits each, declared in the order of the default
/// precedence (outermost first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GateKind {
    Bulkhead,
    RateLimiter,
    CircuitBreaker,
    Fault,
}

impl GateKind {
    /// Every kind, in declaration order: the default precedence's.
    pub(crate) const ALL: [GateKind; 4] = [
        GateKind::Bulkhead,
        GateKind::RateLimiter,
        GateKind::CircuitBreaker,
        GateKind::Fault,
    ];
}

/// The most gates one plan holds: one of each kind.
const MAX_GATES: usize = GateKind::ALL.len();

/// The gate kinds of a plan in its order, outermost first: what a call releases, in reverse.
///
/// Packed in 16 bits (three per place, outermost in the lowest, 0 for none; the top bit says
/// the kinds are in declaration order): a call's permits keep it, and at four kinds an array
/// of them and a flag made the permits 8 bytes larger, and every guarded call's future with
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GateOrder(u16);

/// Bits per place of a [`GateOrder`].
const PLACE_BITS: u32 = 3;
/// The bit of a [`GateOrder`] set when its kinds are in declaration order.
const DECLARED: u16 = 1 << 15;
const _: () = assert!(
    MAX_GATES as u32 * PLACE_BITS < 15,
    "the places fit below the flag"
);

impl GateOrder {
    /// No gate (in declaration order, trivially).
    pub(crate) const EMPTY: GateOrder = GateOrder(DECLARED);

    /// The kind at place `i`, if any.
    fn at(self, i: usize) -> Option<GateKind> {
        let code = (self.0 >> (PLACE_BITS * i as u32)) & ((1 << PLACE_BITS) - 1);
        (code != 0).then(|| GateKind::ALL[usize::from(code) - 1])
    }

    fn push(&mut self, kind: GateKind) {
        let held = (0..MAX_GATES).filter(|&i| self.at(i).is_some()).count();
        debug_assert!(held < MAX_GATES, "a plan holds each gate kind once");
        if held == MAX_GATES {
            return;
        }
        if let Some(last) = held.checked_sub(1).and_then(|i| self.at(i)) {
            if (last as u8) >= (kind as u8) {
                self.0 &= !DECLARED;
            }
        }
        self.0 |= (kind as u16 + 1) << (PLACE_BITS * held as u32);
    }

    /// Whether the kinds are in declaration order ([`GateKind::ALL`]), as under the default
    /// precedence: then a call releases its slots in one fixed sequence, without reading the
    /// kinds (the common case costs what the two-guard code did).
    #[inline(always)]
    pub(crate) fn is_declared(&self) -> bool {
        self.0 & DECLARED != 0
    }

    /// The kinds, outermost first.
    #[inline(always)]
    pub(crate) fn kinds(&self) -> impl DoubleEndedIterator<Item = GateKind> + '_ {
        (0..MAX_GATES).filter_map(|i| self.at(i))
    }
}

impl Step {
    /// The kind of gate.
    pub(crate) fn kind(&self) -> GateKind {
        match self {
            Step::Bulkhead(_) => GateKind::Bulkhead,
            Step::RateLimiter(_) => GateKind::RateLimiter,
            Step::CircuitBreaker(_) => GateKind::CircuitBreaker,
            Step::Fault(_) => GateKind::Fault,
        }
    }

    /// The process-wide id of the instance (re-entrancy tracking of the call chain).
    pub(crate) fn id(&self) -> u64 {
        match_step!(self, g => Gate::id(&**g))
    }

    /// Whether a call nested in one holding this gate passes through it (the re-entrancy
    /// policy applies): every gate but fault injection, which draws for each call.
    pub(crate) fn reenters(&self) -> bool {
        !matches!(self, Step::Fault(_))
    }

    pub(crate) fn aspect(&self) -> Aspect {
        match self {
            Step::Bulkhead(_) => Aspect::Bulkhead,
            Step::RateLimiter(_) => Aspect::RateLimiter,
            Step::CircuitBreaker(_) => Aspect::CircuitBreaker,
            Step::Fault(_) => Aspect::Fault,
        }
    }

    pub(crate) fn name(&self) -> &Name {
        match_step!(self, g => Gate::name(&**g))
    }
}

/// The guards of one call site, resolved to instances of a [`Registry`](crate::Registry) and
/// sorted by its precedence (outermost first); built by
/// [`Registry::plan`](crate::Registry::plan).
///
/// Running a call through a plan acquires each guard in order, runs the call, records its
/// outcome, and releases the guards in reverse order on every path: `Ok`, `Err`, a rejection,
/// a panic (released, then the panic resumes), and a future dropped mid-call (abandoned: not
/// recorded). A guard that refuses the call returns [`Rejected`](crate::Rejected); the guards outside it see a
/// rejection, not a failure of the call.
///
/// ```
/// use resilience_runtime::{Guard, Registry, Rejected};
///
/// #[derive(Debug)]
/// enum OrderError { Rejected(Rejected), OutOfStock }
/// impl From<Rejected> for OrderError {
///     fn from(r: Rejected) -> Self { OrderError::Rejected(r) }
/// }
///
/// let registry = Registry::new();
/// // Written breaker first; the bulkhead still runs first (precedence 100 < 400).
/// let plan = registry.plan(&[Guard::circuit_breaker("orders"), Guard::bulkhead("orders")])?;
/// let order: Result<u32, OrderError> = plan.call(|| Ok(42));
/// assert_eq!(order.unwrap(), 42);
/// let failed: Result<u32, OrderError> = plan.call(|| Err(OrderError::OutOfStock));
/// assert!(matches!(failed, Err(OrderError::OutOfStock)));
/// assert_eq!(registry.circuit_breaker("orders").metrics().number_of_failed_calls(), 1);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Plan {
    /// The gates, in order.
    steps: Vec<Step>,
    /// The kinds of `steps`, in order.
    order: GateOrder,
    /// The wrappers, in order, each with the number of gates before it: `(2, retry)` wraps
    /// `steps[2..]` and the wrappers after it. Empty for most plans, which then run as one
    /// segment, the gates around the call.
    wrappers: Vec<(usize, Wrapper)>,
    /// Every guard in execution order.
    layout: Vec<Place>,
    generation: u64,
    policy: ReentrancyPolicy,
    /// The first guard without a configuration, when the registry requires one
    /// ([`Registry::set_require_configured`](crate::Registry::set_require_configured)): the plan then
    /// has no guards and refuses every call with [`Rejected::Unconfigured`]. Only a call
    /// site's cache builds such a plan; [`Registry::plan`](crate::Registry::plan) returns an
    /// error instead.
    unconfigured: Option<(Aspect, Name)>,
    /// Whether a gate sits inside a wrapper that counts a first run that succeeded with an
    /// event (a time limiter): such a plan records that run in the nested model's order.
    gate_inside_a_loud_wrapper: bool,
}

impl Plan {
    pub(crate) fn empty(generation: u64, policy: ReentrancyPolicy) -> Self {
        Plan {
            steps: Vec::with_capacity(3),
            order: GateOrder::EMPTY,
            wrappers: Vec::new(),
            layout: Vec::with_capacity(3),
            generation,
            policy,
            unconfigured: None,
            gate_inside_a_loud_wrapper: false,
        }
    }

    /// A plan that refuses every call because its guard `aspect` `name` has no configuration
    /// and the registry requires one.
    pub(crate) fn refusing(
        generation: u64,
        policy: ReentrancyPolicy,
        aspect: Aspect,
        name: Name,
    ) -> Self {
        Plan {
            steps: Vec::new(),
            order: GateOrder::EMPTY,
            wrappers: Vec::new(),
            layout: Vec::new(),
            generation,
            policy,
            unconfigured: Some((aspect, name)),
            gate_inside_a_loud_wrapper: false,
        }
    }

    /// The refusal of a plan built by [`refusing`](Self::refusing); `None` for every other.
    #[inline(always)]
    pub(crate) fn unconfigured(&self) -> Option<Rejected> {
        self.unconfigured
            .as_ref()
            .map(|(aspect, name)| unconfigured(*aspect, name))
    }

    /// Adds the gate `step` after the guards already in the plan (the caller sorts them).
    pub(crate) fn push(&mut self, step: Step) {
        self.gate_inside_a_loud_wrapper |= self.wrappers.iter().any(|(_, w)| !w.quiet_success());
        self.order.push(step.kind());
        self.layout.push(Place::Gate(self.steps.len()));
        self.steps.push(step);
    }

    /// Adds the wrapper `wrapper` after the guards already in the plan: it wraps the guards
    /// pushed after it, then the call.
    pub(crate) fn push_wrapper(&mut self, wrapper: Wrapper) {
        self.layout.push(Place::Wrapper(self.wrappers.len()));
        self.wrappers.push((self.steps.len(), wrapper));
    }

    /// Whether a first attempt that succeeded may end in one pass, the wrappers seeing it
    /// before the gates record it: no event can then show the order (no gate sits inside a
    /// wrapper whose success is an event).
    #[inline]
    pub(crate) fn one_pass_success(&self) -> bool {
        !self.gate_inside_a_loud_wrapper
    }

    /// The kinds of the steps, in order.
    #[inline(always)]
    pub(crate) fn order(&self) -> GateOrder {
        self.order
    }

    /// The gates in execution order (outermost first).
    #[inline]
    pub(crate) fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Whether the plan has a wrapper, and so runs as nested segments.
    #[inline(always)]
    pub(crate) fn has_wrappers(&self) -> bool {
        !self.wrappers.is_empty()
    }

    /// The wrappers, in order, each with the number of gates before it.
    #[inline(always)]
    pub(crate) fn wrappers(&self) -> &[(usize, Wrapper)] {
        &self.wrappers
    }

    /// The wrapper of a plan that is one wrapper and no gate (`#[retry]` or `#[time_limiter]`
    /// alone): it has no segment to enter or release, so it runs without the nested model.
    /// `None` for every other plan, and for one that refuses every call (it has no guards).
    #[inline(always)]
    pub(crate) fn lone_wrapper(&self) -> Option<&Wrapper> {
        match (self.steps.as_slice(), self.wrappers.as_slice()) {
            ([], [(_, wrapper)]) => Some(wrapper),
            _ => None,
        }
    }

    /// Whether a wrapper that bounds the rest ([`Wrapper::bounds`]) has another wrapper inside
    /// it (a retry inside a time limiter: the timer bounds the attempts together).
    #[cold]
    pub(crate) fn bounds_across_wrappers(&self) -> bool {
        let inner = self.wrappers.len().saturating_sub(1);
        self.wrappers[..inner]
            .iter()
            .any(|(_, wrapper)| wrapper.bounds())
    }

    /// Whether a wrapper other than the innermost has runs that overlap ([`Wrapper::overlaps`]:
    /// a hedge with another wrapper inside it).
    #[cold]
    pub(crate) fn overlaps_outside_innermost(&self) -> bool {
        let inner = self.wrappers.len().saturating_sub(1);
        self.wrappers[..inner]
            .iter()
            .any(|(_, wrapper)| wrapper.overlaps())
    }

    /// The index of the first gate of segment `index` (the gates after wrapper `index - 1`).
    #[inline]
    pub(crate) fn segment_start(&self, index: usize) -> usize {
        match index.checked_sub(1) {
            None => 0,
            Some(before) => self.wrappers.get(before).map_or(self.steps.len(), |w| w.0),
        }
    }

    /// The segment that gate `gate` is in.
    pub(crate) fn segment_of(&self, gate: usize) -> usize {
        self.wrappers
            .iter()
            .position(|(before, _)| gate < *before)
            .unwrap_or(self.wrappers.len())
    }

    /// Segment `index` of the plan run as nested segments (0 is the outermost; there is one
    /// more segment than there are wrappers).
    pub(crate) fn segment(&self, index: usize) -> Segment<'_> {
        let start = match index.checked_sub(1) {
            None => 0,
            Some(before) => self.wrappers.get(before).map_or(self.steps.len(), |w| w.0),
        };
        let wrapper = self.wrappers.get(index);
        let end = wrapper.map_or(self.steps.len(), |w| w.0);
        Segment {
            gates: start..end,
            wrapper: wrapper.map(|w| &w.1),
        }
    }

    /// What a guarded call does when it enters an instance its call chain already holds.
    #[inline]
    pub(crate) fn policy(&self) -> ReentrancyPolicy {
        self.policy
    }

    /// The registry generation this plan was resolved at.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Guard `index` in execution order (0 is the outermost); `None` past the last.
    pub(crate) fn layer(&self, index: usize) -> Option<Layer<'_>> {
        Some(match *self.layout.get(index)? {
            Place::Gate(i) => Layer::Gate(&self.steps[i]),
            Place::Wrapper(i) => Layer::Wrapper(&self.wrappers[i].1),
        })
    }

    /// The process-wide id of every guard, in execution order.
    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.layout.iter().map(|place| match *place {
            Place::Gate(i) => self.steps[i].id(),
            Place::Wrapper(i) => self.wrappers[i].1.id(),
        })
    }

    /// Whether `other` runs the same instances in the same order under the same policy.
    pub(crate) fn same_as(&self, other: &Plan) -> bool {
        self.policy == other.policy
            && self.unconfigured == other.unconfigured
            && self.layout.len() == other.layout.len()
            && self.ids().eq(other.ids())
    }

    /// The guards in execution order (outermost first), gates and wrappers.
    pub fn guards(&self) -> impl ExactSizeIterator<Item = (Aspect, &Name)> + '_ {
        self.layout.iter().map(|place| match *place {
            Place::Gate(i) => (self.steps[i].aspect(), self.steps[i].name()),
            Place::Wrapper(i) => {
                let wrapper = &self.wrappers[i].1;
                (wrapper.aspect(), wrapper.name())
            }
        })
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("guards", &self.guards().collect::<Vec<_>>())
            .field("generation", &self.generation)
            .field("policy", &self.policy)
            .field("unconfigured", &self.unconfigured)
            .finish()
    }
}

#[cold]
#[inline(never)]
fn unconfigured(aspect: Aspect, name: &Name) -> Rejected {
    Rejected::Unconfigured {
        aspect,
        name: name.clone(),
    }
}

#[cfg(test)]
mod gate_order_tests {
    use super::{GateKind, GateOrder};

    #[test]
    fn the_packed_order_keeps_every_kind_in_its_place() {
        let mut declared = GateOrder::EMPTY;
        for kind in GateKind::ALL {
            declared.push(kind);
        }
        assert!(declared.is_declared());
        assert!(declared.kinds().eq(GateKind::ALL));
        assert!(declared.kinds().rev().eq(GateKind::ALL.into_iter().rev()));

        let reordered = [
            GateKind::Fault,
            GateKind::CircuitBreaker,
            GateKind::Bulkhead,
            GateKind::RateLimiter,
        ];
        let mut order = GateOrder::EMPTY;
        for kind in reordered {
            order.push(kind);
        }
        assert!(!order.is_declared());
        assert!(order.kinds().eq(reordered));

        let mut two = GateOrder::EMPTY;
        two.push(GateKind::RateLimiter);
        two.push(GateKind::Fault);
        assert!(two.is_declared(), "kinds skipped keep the declared order");
        assert!(two.kinds().eq([GateKind::RateLimiter, GateKind::Fault]));
        assert!(GateOrder::EMPTY.kinds().next().is_none());
    }
}
