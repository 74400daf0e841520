//! Ordered execution: a call site's guards, resolved and sorted into a [`Plan`], run around a
//! closure or a future, with re-entrancy tracked along the call chain.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use crate::aspect::Aspect;
use crate::bulkhead::{Bulkhead, BulkheadPermit};
use crate::circuit_breaker::{CircuitBreaker, CircuitPermit};
use arc_swap::ArcSwapOption;

use crate::error::Rejected;
use crate::name::Name;
use crate::registry::Registry;

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

    /// The circuit breaker `name`.
    pub const fn circuit_breaker(name: &'a str) -> Self {
        Guard::new(Aspect::CircuitBreaker, name)
    }

    /// The instance `name` of `aspect`.
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
    /// An aspect kind with no implementation yet.
    Unimplemented(Aspect),
}

impl GuardListError {
    /// The first problem of `guards`, if any; usable in constants.
    pub(crate) const fn check(guards: &[Guard<'_>]) -> Option<GuardListError> {
        let mut i = 0;
        while i < guards.len() {
            let aspect = guards[i].aspect;
            if !matches!(aspect, Aspect::Bulkhead | Aspect::CircuitBreaker) {
                return Some(GuardListError::Unimplemented(aspect));
            }
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
            GuardListError::Unimplemented(aspect) => {
                write!(f, "the {aspect} aspect has no implementation yet")
            }
        }
    }
}

/// What a guarded call does when it enters a guard instance that an enclosing guarded call on
/// the same call chain (the same task for async code, the same thread for sync code) already
/// holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReentrancyPolicy {
    /// Pass through the guard: no second permit, no second record. A bulkhead of size 1
    /// cannot deadlock on itself and a breaker counts the call once.
    #[default]
    PassThrough,
    /// Refuse the inner call with [`Rejected::Reentrant`].
    Reject,
    /// Acquire the guard again, as if the calls were unrelated (double counting, and a full
    /// bulkhead can block on itself).
    Allow,
}

/// How a call that ran to completion counts for the circuit breakers around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// A success.
    Success,
    /// A failure (counts toward the failure rate).
    Failure,
    /// Neither a success nor a failure (an error the breaker ignores, such as a client error).
    Ignored,
}

impl CallOutcome {
    /// The default classification of a `Result`: `Ok` is a success, every `Err` a failure.
    pub fn of_result<T, E>(result: &Result<T, E>) -> CallOutcome {
        match result {
            Ok(_) => CallOutcome::Success,
            Err(_) => CallOutcome::Failure,
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Bulkhead(Arc<Bulkhead>),
    CircuitBreaker(Arc<CircuitBreaker>),
}

impl Step {
    fn id(&self) -> u64 {
        match self {
            Step::Bulkhead(b) => b.id(),
            Step::CircuitBreaker(c) => c.id(),
        }
    }

    fn aspect(&self) -> Aspect {
        match self {
            Step::Bulkhead(_) => Aspect::Bulkhead,
            Step::CircuitBreaker(_) => Aspect::CircuitBreaker,
        }
    }

    fn name(&self) -> &Name {
        match self {
            Step::Bulkhead(b) => b.name(),
            Step::CircuitBreaker(c) => c.name(),
        }
    }
}

/// The guards of one call site, resolved to instances of a [`Registry`](crate::Registry) and
/// sorted by its precedence (outermost first); built by
/// [`Registry::plan`](crate::Registry::plan).
///
/// Running a call through a plan acquires each guard in order, runs the call, records its
/// outcome, and releases the guards in reverse order on every path: `Ok`, `Err`, a rejection,
/// a panic (released, then the panic resumes), and a future dropped mid-call (abandoned: not
/// recorded). A guard that refuses the call returns [`Rejected`]; the guards outside it see a
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
    steps: Vec<Step>,
    generation: u64,
    policy: ReentrancyPolicy,
}

impl Plan {
    pub(crate) fn empty(generation: u64, policy: ReentrancyPolicy) -> Self {
        Plan {
            steps: Vec::with_capacity(2),
            generation,
            policy,
        }
    }

    pub(crate) fn push_bulkhead(&mut self, bulkhead: Arc<Bulkhead>) {
        self.steps.push(Step::Bulkhead(bulkhead));
    }

    pub(crate) fn push_circuit_breaker(&mut self, breaker: Arc<CircuitBreaker>) {
        self.steps.push(Step::CircuitBreaker(breaker));
    }

    /// The registry generation this plan was resolved at.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The guards in execution order (outermost first).
    pub fn guards(&self) -> impl ExactSizeIterator<Item = (Aspect, &Name)> + '_ {
        self.steps.iter().map(|s| (s.aspect(), s.name()))
    }

    /// Runs `call` through the guards, blocking the thread while a bulkhead makes it wait.
    /// `Ok` counts as a success and every `Err` as a failure; a rejection is returned as
    /// `E::from(rejected)`.
    pub fn call<T, E: From<Rejected>>(&self, call: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        self.run(call, CallOutcome::of_result)
            .unwrap_or_else(|rejected| Err(E::from(rejected)))
    }

    /// Runs `call` through the guards and classifies its result with `classify`; returns the
    /// result, or the rejection if a guard refused the call (then `call` did not run).
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
        call: impl FnOnce() -> R,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> Result<R, Rejected> {
        Ok(self.enter()?.run(call, classify))
    }

    /// Runs the future `call` through the guards, waiting asynchronously while a bulkhead
    /// makes it wait. `Ok` counts as a success and every `Err` as a failure; a rejection is
    /// returned as `E::from(rejected)`. Dropping the returned future releases every guard and
    /// records nothing.
    pub async fn call_async<T, E, F>(&self, call: F) -> Result<T, E>
    where
        E: From<Rejected>,
        F: Future<Output = Result<T, E>>,
    {
        match self.run_async(call, CallOutcome::of_result).await {
            Ok(result) => result,
            Err(rejected) => Err(E::from(rejected)),
        }
    }

    /// Runs the future `call` through the guards and classifies its output with `classify`;
    /// returns the output, or the rejection if a guard refused the call (then `call` was
    /// never polled).
    pub async fn run_async<R, F>(
        &self,
        call: F,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> Result<R, Rejected>
    where
        F: Future<Output = R>,
    {
        Ok(self.enter_async().await?.run_async(call, classify).await)
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
    pub fn enter(&self) -> Result<Entered<'_>, Rejected> {
        let enclosing = Enclosing::current();
        let mut held = Held::new();
        for step in &self.steps {
            if !self.admit_reentry(step, &enclosing, &mut held)? {
                continue;
            }
            let permit = match step {
                Step::Bulkhead(b) => b.acquire_blocking().map(Permit::Bulkhead),
                Step::CircuitBreaker(c) => c.try_acquire().map(Permit::CircuitBreaker),
            };
            held.push_or_reject(step.id(), permit)?;
        }
        Ok(Entered { held, enclosing })
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
    pub async fn enter_async(&self) -> Result<Entered<'_>, Rejected> {
        let enclosing = Enclosing::current();
        let mut held = Held::new();
        for step in &self.steps {
            if !self.admit_reentry(step, &enclosing, &mut held)? {
                continue;
            }
            let permit = match step {
                Step::Bulkhead(b) => b.acquire().await.map(Permit::Bulkhead),
                Step::CircuitBreaker(c) => c.try_acquire().map(Permit::CircuitBreaker),
            };
            held.push_or_reject(step.id(), permit)?;
        }
        Ok(Entered { held, enclosing })
    }

    /// Applies the re-entrancy policy to `step`: `Ok(true)` to acquire it, `Ok(false)` to
    /// pass through it, `Err` to refuse the call.
    fn admit_reentry(
        &self,
        step: &Step,
        enclosing: &Enclosing,
        held: &mut Held<'_>,
    ) -> Result<bool, Rejected> {
        if self.policy == ReentrancyPolicy::Allow || !enclosing.holds(step.id()) {
            return Ok(true);
        }
        match self.policy {
            ReentrancyPolicy::Reject => {
                let rejected = Rejected::Reentrant {
                    aspect: step.aspect(),
                    name: step.name().clone(),
                };
                held.reject(&rejected);
                Err(rejected)
            }
            _ => Ok(false),
        }
    }
}

/// A call admitted by every guard of its [`Plan`] and not yet run: the permits, held.
///
/// Run the call with [`run`](Entered::run) (sync) or [`run_async`](Entered::run_async); the
/// permits are released when it ends, on every path. Dropping an `Entered` without running it
/// releases them and records nothing (an abandoned call).
#[must_use = "an admitted call holds its permits until it runs or is dropped"]
pub struct Entered<'a> {
    held: Held<'a>,
    enclosing: Enclosing,
}

impl Entered<'_> {
    /// Runs `call` while holding the guards, records its outcome as `classify` says, and
    /// releases the guards innermost first. A panic in `call` releases them (recording
    /// nothing) and resumes.
    pub fn run<R>(
        mut self,
        call: impl FnOnce() -> R,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> R {
        let result = {
            let _on_chain = ThreadChain::enter(self.held.ids());
            call()
        };
        self.held.complete(classify(&result));
        result
    }

    /// Runs the future `call` while holding the guards, records its output as `classify`
    /// says, and releases the guards innermost first. Dropping the returned future releases
    /// them and records nothing.
    pub async fn run_async<R>(
        mut self,
        call: impl Future<Output = R>,
        classify: impl FnOnce(&R) -> CallOutcome,
    ) -> R {
        let chain = self.enclosing.extended(self.held.ids());
        let result = TASK_CHAIN.scope(chain, call).await;
        self.held.complete(classify(&result));
        result
    }
}

impl fmt::Debug for Entered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entered")
            .field("guards_held", &self.held.len)
            .finish()
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("guards", &self.guards().collect::<Vec<_>>())
            .field("generation", &self.generation)
            .field("policy", &self.policy)
            .finish()
    }
}

/// A call site's [`Plan`], cached: rebuilt only when the registry's configuration or
/// precedence changed since it was built: checking it costs one atomic load of the registry's
/// generation and one of the cache, with no look-up and no sort.
///
/// ```
/// use resilience_runtime::{Aspect, Guard, PlanCache, Registry};
///
/// static ORDERS: PlanCache =
///     PlanCache::new(&[Guard::circuit_breaker("orders"), Guard::bulkhead("orders")]);
///
/// let registry = Registry::new();
/// assert_eq!(ORDERS.get(&registry).guards().next().unwrap().0, Aspect::Bulkhead);
///
/// registry.set_precedence(Aspect::CircuitBreaker, 10)?; // takes effect on the next call
/// assert_eq!(ORDERS.get(&registry).guards().next().unwrap().0, Aspect::CircuitBreaker);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
///
/// A guard list that repeats an aspect kind, or names one without an implementation, does
/// not compile in a `static`:
///
/// ```compile_fail
/// use resilience_runtime::{Guard, PlanCache};
///
/// static TWICE: PlanCache = PlanCache::new(&[Guard::bulkhead("a"), Guard::bulkhead("b")]);
/// ```
pub struct PlanCache {
    guards: &'static [Guard<'static>],
    cached: ArcSwapOption<Plan>,
}

impl PlanCache {
    /// An empty cache for the call site guarded by `guards`, for a `static`.
    ///
    /// # Panics
    ///
    /// If `guards` repeats an aspect kind or names one without an implementation. In a
    /// `static` (its intended use) this is a compile-time error, not a run-time panic; use
    /// [`Registry::plan`] to check a list built at run time.
    pub const fn new(guards: &'static [Guard<'static>]) -> Self {
        match GuardListError::check(guards) {
            Some(GuardListError::Repeated(_)) => {
                panic!("a guard list repeats an aspect kind; a call takes each aspect once")
            }
            Some(GuardListError::Unimplemented(_)) => {
                panic!("a guard list names an aspect kind that has no implementation yet")
            }
            None => PlanCache {
                guards,
                cached: ArcSwapOption::const_empty(),
            },
        }
    }

    /// The guards of this call site, as written.
    pub fn guards(&self) -> &'static [Guard<'static>] {
        self.guards
    }

    /// The plan in `registry`, from the cache if it is current.
    pub fn get(&self, registry: &Registry) -> Arc<Plan> {
        let generation = registry.generation();
        if let Some(plan) = &*self.cached.load() {
            if plan.generation == generation {
                return Arc::clone(plan);
            }
        }
        let plan = Arc::new(registry.resolve_plan(self.guards));
        self.cached.store(Some(Arc::clone(&plan)));
        plan
    }
}

impl fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanCache")
            .field("guards", &self.guards)
            .field("cached", &*self.cached.load())
            .finish()
    }
}

/// A permit held by a running call.
enum Permit<'a> {
    #[allow(dead_code, reason = "held for its Drop, which releases the permit")]
    Bulkhead(BulkheadPermit<'a>),
    CircuitBreaker(CircuitPermit<'a>),
}

/// The most guards one call can hold: one per implemented aspect kind (a plan refuses a
/// repeated kind and the kinds without an implementation). Kept small: the permits live in the
/// call's stack frame or future, which is moved as a whole.
const MAX_GUARDS: usize = 2;

/// The permits of a running call, outermost first, on the stack. Dropping it releases them
/// innermost first.
struct Held<'a> {
    permits: [Option<Permit<'a>>; MAX_GUARDS],
    ids: [u64; MAX_GUARDS],
    len: usize,
}

impl<'a> Held<'a> {
    fn new() -> Self {
        Held {
            permits: [None, None],
            ids: [0; MAX_GUARDS],
            len: 0,
        }
    }

    fn ids(&self) -> &[u64] {
        &self.ids[..self.len]
    }

    /// Keeps `permit`, or, if the guard refused, tells the guards already held and returns the
    /// rejection.
    fn push_or_reject(
        &mut self,
        id: u64,
        permit: Result<Permit<'a>, Rejected>,
    ) -> Result<(), Rejected> {
        match permit {
            Ok(permit) => {
                // A plan holds at most one guard per aspect kind (checked when it is built).
                self.permits[self.len] = Some(permit);
                self.ids[self.len] = id;
                self.len += 1;
                Ok(())
            }
            Err(rejected) => {
                self.reject(&rejected);
                Err(rejected)
            }
        }
    }

    /// A guard further in refused the call: the breakers held see a rejection.
    fn reject(&mut self, rejected: &Rejected) {
        for slot in self.permits[..self.len].iter_mut().rev() {
            match slot.take() {
                Some(Permit::CircuitBreaker(p)) => p.record_rejected(rejected),
                other => drop(other),
            }
        }
        self.len = 0;
    }

    /// The call completed: the breakers record its outcome, innermost first, and every permit
    /// is released.
    fn complete(&mut self, outcome: CallOutcome) {
        for slot in self.permits[..self.len].iter_mut().rev() {
            match slot.take() {
                Some(Permit::CircuitBreaker(p)) => match outcome {
                    CallOutcome::Success => p.record_success(),
                    CallOutcome::Failure => p.record_failure(),
                    CallOutcome::Ignored => p.record_ignored(),
                },
                other => drop(other),
            }
        }
        self.len = 0;
    }
}

impl Drop for Held<'_> {
    /// Abandoned (a panic, or the future dropped): release innermost first, record nothing.
    fn drop(&mut self) {
        for slot in self.permits[..self.len].iter_mut().rev() {
            drop(slot.take());
        }
    }
}

/// The guard instances held by the enclosing guarded calls of the current task, carried into
/// the call's future as a task-local.
#[derive(Clone, Debug, Default)]
struct ChainIds {
    inline: [u64; INLINE_IDS],
    len: usize,
    /// Ids past the inline ones, for unusually deep chains.
    spill: Option<Arc<[u64]>>,
}

/// Ids held inline: enough for the distinct guards of a few nested guarded calls (a call that
/// re-enters a guard adds no id). Deeper chains spill to the heap.
const INLINE_IDS: usize = 6;

impl ChainIds {
    fn holds(&self, id: u64) -> bool {
        self.inline[..self.len].contains(&id)
            || self.spill.as_ref().is_some_and(|s| s.contains(&id))
    }

    fn extended(&self, ids: &[u64]) -> ChainIds {
        let mut next = self.clone();
        for &id in ids {
            if next.len < INLINE_IDS {
                next.inline[next.len] = id;
                next.len += 1;
            } else {
                let mut spill: Vec<u64> = next.spill.as_deref().unwrap_or_default().to_vec();
                spill.push(id);
                next.spill = Some(spill.into());
            }
        }
        next
    }
}

tokio::task_local! {
    static TASK_CHAIN: ChainIds;
}

thread_local! {
    /// The guard instances held by the sync guarded calls on this thread's stack, each with
    /// the tokio task it ran in (if any).
    static THREAD_CHAIN: RefCell<Vec<(Option<tokio::task::Id>, u64)>> =
        const { RefCell::new(Vec::new()) };
}

/// What the enclosing guarded calls hold: the chain of the guarded future being polled, if
/// any, and the sync guarded calls on this thread's stack that belong to the same task (a sync
/// call inside an async one, or an async call that a sync one blocks on). A sync call's
/// entries never reach another task that happens to run on its thread (a task a nested
/// `block_on` drives, say): that task is not on the call chain.
struct Enclosing {
    chain: ChainIds,
}

impl Enclosing {
    fn current() -> Self {
        let task = TASK_CHAIN.try_with(ChainIds::clone).unwrap_or_default();
        let chain = THREAD_CHAIN.with(|t| {
            let t = t.borrow();
            if t.is_empty() {
                return task;
            }
            let current = tokio::task::try_id();
            let mut chain = task;
            for &(owner, id) in t.iter() {
                if owner == current {
                    chain = chain.extended(&[id]);
                }
            }
            chain
        });
        Enclosing { chain }
    }

    fn holds(&self, id: u64) -> bool {
        self.chain.holds(id)
    }

    fn extended(&self, ids: &[u64]) -> ChainIds {
        self.chain.extended(ids)
    }
}

/// Marks this thread as holding `ids` until dropped: the extent of a sync guarded call.
struct ThreadChain {
    restore_len: usize,
}

impl ThreadChain {
    fn enter(ids: &[u64]) -> Self {
        let restore_len = THREAD_CHAIN.with(|t| {
            let mut t = t.borrow_mut();
            let len = t.len();
            if !ids.is_empty() {
                let owner = tokio::task::try_id();
                t.extend(ids.iter().map(|&id| (owner, id)));
            }
            len
        });
        ThreadChain { restore_len }
    }
}

impl Drop for ThreadChain {
    fn drop(&mut self) {
        THREAD_CHAIN.with(|t| t.borrow_mut().truncate(self.restore_len));
    }
}
