//! Ordered execution: a call site's guards, resolved and sorted into a [`Plan`], run around a
//! closure or a future, with re-entrancy tracked along the call chain.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use crate::aspect::Aspect;
use crate::bulkhead::Bulkhead;
use crate::call::{chain_holds, chain_is_busy, Entered, GuardedCall, Held};
use crate::circuit_breaker::CircuitBreaker;

use crate::error::Rejected;
use crate::name::Name;

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

    /// Whether `other` runs the same instances in the same order under the same policy.
    pub(crate) fn same_as(&self, other: &Plan) -> bool {
        self.policy == other.policy
            && self.steps.len() == other.steps.len()
            && self
                .steps
                .iter()
                .zip(&other.steps)
                .all(|(a, b)| a.id() == b.id())
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
        let mut guarded = GuardedCall::new();
        guarded.enter(self)?;
        Ok(guarded.run(call, classify))
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
    pub fn enter(&self) -> Result<Entered<'_>, Rejected> {
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
    pub async fn enter_async(&self) -> Result<Entered<'_>, Rejected> {
        let mut held = Held::new();
        self.enter_async_into(&mut held).await?;
        Ok(Entered { held })
    }

    /// [`enter`](Plan::enter), writing the permits into `held`.
    pub(crate) fn enter_into<'a>(&'a self, held: &mut Held<'a>) -> Result<(), Rejected> {
        let next = self.enter_from(0, held, Bulkheads::Block)?;
        debug_assert!(next.is_none(), "a blocking entry never stops at a bulkhead");
        Ok(())
    }

    /// [`enter_async`](Plan::enter_async), writing the permits into `held`.
    #[inline]
    pub(crate) fn enter_async_into<'c, 'a>(&'a self, held: &'c mut Held<'a>) -> EnterAsync<'c, 'a> {
        EnterAsync {
            plan: self,
            held: Some(held),
            wait: None,
        }
    }

    /// Acquires the guards from `steps[from]` on into `held`. With `Bulkheads::Stop`, returns
    /// the index of the first bulkhead that has no free permit and makes callers wait (its
    /// permit not taken, the guards before it held); `None` once every guard is acquired. On
    /// a rejection, `held` holds nothing.
    #[inline]
    fn enter_from<'a>(
        &'a self,
        from: usize,
        held: &mut Held<'a>,
        bulkheads: Bulkheads,
    ) -> Result<Option<usize>, Rejected> {
        // Most calls are not nested in another guarded call: then no guard needs the check.
        let nested = self.policy != ReentrancyPolicy::Allow && chain_is_busy();
        for (index, step) in self.steps.iter().enumerate().skip(from) {
            if nested && !self.admit_reentry(step, held)? {
                continue;
            }
            match step {
                Step::Bulkhead(b) => {
                    let permit = match bulkheads {
                        Bulkheads::Block => b.acquire_blocking(),
                        Bulkheads::Stop => match b.try_acquire_uncounted() {
                            Some(permit) => Ok(permit),
                            None if b.waits() => return Ok(Some(index)),
                            None => b.try_acquire(),
                        },
                    };
                    match permit {
                        Ok(permit) => held.hold_bulkhead(permit),
                        Err(rejected) => return Err(held.rejected(rejected)),
                    }
                }
                Step::CircuitBreaker(c) => {
                    if let Err(rejected) = held.acquire_breaker(c) {
                        return Err(held.rejected(rejected));
                    }
                }
            }
        }
        Ok(None)
    }

    /// [`enter_waiting`](Self::enter_waiting), boxed: only a call that waits pays for its
    /// state (a queue place and a timer).
    #[cold]
    #[inline(never)]
    fn wait_from<'c, 'a>(&'a self, from: usize, held: &'c mut Held<'a>) -> Waiting<'c> {
        Box::pin(self.enter_waiting(from, held))
    }

    /// The rest of an asynchronous entry from the bulkhead `steps[from]`, which had no free
    /// permit: waits for it, then acquires the guards after it.
    async fn enter_waiting<'a>(
        &'a self,
        mut from: usize,
        held: &mut Held<'a>,
    ) -> Result<(), Rejected> {
        loop {
            let Step::Bulkhead(bulkhead) = &self.steps[from] else {
                unreachable!("only a bulkhead makes a call wait");
            };
            match bulkhead.acquire().await {
                Ok(permit) => held.hold_bulkhead(permit),
                Err(rejected) => return Err(held.rejected(rejected)),
            }
            match self.enter_from(from + 1, held, Bulkheads::Stop)? {
                None => return Ok(()),
                Some(next) => from = next,
            }
        }
    }

    /// Applies the re-entrancy policy to `step`: `Ok(true)` to acquire it, `Ok(false)` to
    /// pass through it, `Err` to refuse the call.
    #[cold]
    fn admit_reentry(&self, step: &Step, held: &mut Held<'_>) -> Result<bool, Rejected> {
        if !chain_holds(step.id()) {
            return Ok(true);
        }
        match self.policy {
            ReentrancyPolicy::Reject => Err(held.rejected(Rejected::Reentrant {
                aspect: step.aspect(),
                name: step.name().clone(),
            })),
            _ => Ok(false),
        }
    }
}

/// The future of [`Plan::enter_async_into`]. Its first poll acquires every guard that has a
/// free permit, synchronously, and is ready unless a full bulkhead makes the call wait: only
/// then does it box the wait (a queue place and a timer) and poll that. Calls that never wait
/// (the common case) pay for no nested state machine, and the future of every guarded call
/// stays small.
pub(crate) struct EnterAsync<'c, 'a> {
    plan: &'a Plan,
    /// Where the permits go; taken by the first poll.
    held: Option<&'c mut Held<'a>>,
    /// The wait for a bulkhead's permit, then for the guards after it.
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
            match this.plan.enter_from(0, held, Bulkheads::Stop) {
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

/// What [`Plan::enter_from`] does at a bulkhead without a free permit.
#[derive(Clone, Copy)]
enum Bulkheads {
    /// Wait for a permit, blocking the thread.
    Block,
    /// Stop there, so that the caller waits asynchronously.
    Stop,
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
