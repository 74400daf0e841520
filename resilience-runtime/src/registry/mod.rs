//! [`Registry`]: named configurations, guard instances, the precedence table. The facade is
//! here, one generic `instance` / `configure` underneath the named methods of each kind; the
//! tables with base inheritance are [`kind`], the precedence table [`precedence`].

#[cfg(feature = "serde")]
mod document;
mod generic;
mod kind;
mod named;
mod precedence;
mod redis;
mod scope;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use once_cell::sync::Lazy;

use crate::aspect::Aspect;
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::name::Name;
use crate::plan::{Guard, GuardListError, Plan, ReentrancyPolicy, Step, Wrapper};
use crate::recent::{EventLog, RecentEvent};

pub use generic::GuardInstance;
use generic::{EachKind, Kinds};
use kind::{Instance, Kind, Pending};
use precedence::Precedence;
pub(crate) use scope::with_scoped;
pub use scope::WithRegistry;

/// Generations are drawn from one process-wide counter, so a generation number identifies
/// both a registry and the state of its configuration: a cached [`Plan`] is current exactly
/// when its generation equals its registry's.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// Named guard configurations and instances, and the precedence that orders the guards of a
/// call.
///
/// The macros use [`Registry::global`]; tests build their own with [`Registry::new`] or
/// [`Registry::with_clock`]. Both are `Send + Sync`.
///
/// - **Configurations.** A default configuration per aspect kind and named configurations.
///   A named configuration takes every field it does not set from its
///   [`base`](crate::BulkheadConfig::base) configuration if it names one, else from the default
///   configuration of its kind (Resilience4j's `baseConfig` and `default`).
/// - **Instances.** [`bulkhead`](Registry::bulkhead), [`rate_limiter`](Registry::rate_limiter),
///   [`retry`](Registry::retry), [`circuit_breaker`](Registry::circuit_breaker) and
///   [`time_limiter`](Registry::time_limiter) get or create the instance of a name; a name
///   never configured gets the default configuration. An instance lives as long as its
///   registry: configuring a name reconfigures its instance in place, so every handle to it
///   stays live and its event subscribers keep listening (a breaker starts over with fresh
///   metrics; a bulkhead's limit moves at once, the calls in flight counted against it, and
///   its counters keep counting).
///   Changes apply one at a time; a breaker's subscribers hear of it on the configuring
///   thread, once the registry's lock is released, so they may use the registry (but not
///   configure it: that waits for the change that called them).
/// - **Precedence.** A number per aspect kind; lower runs first (outermost). Defaults:
///   bulkhead 100, rate limiter 200, retry 300, circuit breaker 400, time limiter 500.
/// - **Generation.** Every change of configuration or precedence moves the
///   [`generation`](Registry::generation), so a call site caches its resolved [`Plan`] and
///   checks it with one atomic load per call.
///
/// ```
/// use std::time::Duration;
/// use resilience_runtime::{Aspect, BulkheadConfig, CircuitBreakerConfig, Registry, SlidingWindow};
///
/// let registry = Registry::new();
/// registry.configure_bulkhead("orders", BulkheadConfig::builder()
///     .max_concurrent_calls(80)
///     .max_wait_duration(Duration::from_millis(500))
///     .build()?)?;
/// registry.configure_circuit_breaker("orders", CircuitBreakerConfig::builder()
///     .failure_rate_threshold(50.0)
///     .sliding_window(SlidingWindow::CountBased(100))
///     .build()?)?;
///
/// assert_eq!(registry.bulkhead("orders").max_allowed_concurrent_calls(), 80);
/// assert_eq!(registry.precedence()[0], Aspect::Bulkhead);
/// # Ok::<(), resilience_runtime::ConfigError>(())
/// ```
pub struct Registry {
    clock: Clock,
    generation: AtomicU64,
    state: RwLock<State>,
    /// Held for the whole of a change, so that changes apply one at a time, instances
    /// included; `state`'s write lock is held only while the tables change (see
    /// [`Registry::change`]).
    changing: Mutex<()>,
    /// Where every instance sends its rare events ([`trace_events`](Registry::trace_events),
    /// [`keep_recent_events`](Registry::keep_recent_events)): the existing ones from when a tap
    /// is added, the later ones from their creation. Written under `state`'s write lock, read
    /// under it (instances are created under it), so no instance is tapped twice or missed.
    taps: RwLock<Vec<Tap>>,
    /// The connection of the fleet instances that name none of their own.
    #[cfg(feature = "redis")]
    redis: Mutex<Option<crate::fleet::RedisConnection>>,
}

/// A destination of every instance's rare events.
#[derive(Clone)]
enum Tap {
    /// Forwarded to `tracing`, the per-call events throttled on the registry's clock.
    #[cfg(feature = "tracing")]
    Tracing(Clock),
    /// Kept in a bounded log.
    Recent(Arc<EventLog>),
}

struct State {
    kinds: Kinds,
    precedence: Precedence,
    reentrancy: ReentrancyPolicy,
    /// Whether resolving a name without a configuration of its own is an error
    /// ([`Registry::set_require_configured`]).
    require_configured: bool,
    /// Whether faults are injected ([`Registry::allow_fault_injection`]); code alone sets it.
    faults_allowed: bool,
    /// The aspects whose precedence the last document applied set, and whether it set the
    /// re-entrancy policy: what the next document returns to the default if it leaves out.
    #[cfg(feature = "serde")]
    precedence_from_document: Vec<Aspect>,
    #[cfg(feature = "serde")]
    reentrancy_from_document: bool,
    /// Whether the last document applied set `require_configured`.
    #[cfg(feature = "serde")]
    require_configured_from_document: bool,
}

impl State {
    /// Whether the instance of `guard` has a configuration of its own.
    fn configures(&self, guard: &Guard<'_>) -> bool {
        self.kinds.is_configured(guard.aspect(), guard.name())
    }

    /// The guards of a plan of `guards` as fault injection has them: without a fault guard
    /// unless the registry allows fault injection; with one, when it does and the list names
    /// none, for the first of the list's names whose faults inject something (a plan holds
    /// each kind once: a call is one call to its dependency, whose faults one name says).
    fn with_faults<'g>(&self, guards: &[Guard<'g>]) -> Vec<Guard<'g>> {
        let mut kept: Vec<Guard<'g>> = guards
            .iter()
            .filter(|g| self.faults_allowed || g.aspect() != Aspect::Fault)
            .copied()
            .collect();
        let listed = kept.iter().any(|g| g.aspect() == Aspect::Fault);
        if self.faults_allowed && !listed {
            if let Some(guard) = guards
                .iter()
                .find(|g| self.kinds.faults_of(g.name()).injects())
            {
                kept.push(Guard::fault(guard.name()));
            }
        }
        kept
    }
}

/// An aspect kind the registry keeps: its table in [`State`] and how to make an instance.
/// One impl per kind (at the end of this file); the registry's methods for each kind are
/// one line over the generic ones.
trait Registered: Instance + Sized {
    const ASPECT: Aspect;
    /// The kind's field in [`Kinds`] (`"bulkheads"`).
    const FIELD: &'static str;
    fn table(state: &State) -> &Kind<Self::Config, Self>;
    fn table_mut(state: &mut State) -> &mut Kind<Self::Config, Self>;
    fn make(name: Name, config: Self::Config, clock: &Clock) -> Self;
    /// Sends the instance's rare events to `tap`.
    fn tap(&self, tap: &Tap);
}

static GLOBAL: Lazy<Registry> = Lazy::new(Registry::new);

impl Registry {
    /// A registry on the system clock, with default configurations and precedence.
    pub fn new() -> Self {
        Registry::with_clock(Clock::system())
    }

    /// A registry whose guards read `clock`, such as a [`ManualClock`](crate::ManualClock).
    pub fn with_clock(clock: impl Into<Clock>) -> Self {
        Registry {
            #[cfg(feature = "redis")]
            redis: Mutex::new(None),
            clock: clock.into(),
            generation: AtomicU64::new(next_generation()),
            state: RwLock::new(State {
                kinds: Kinds::new(),
                precedence: Precedence::new(),
                reentrancy: ReentrancyPolicy::default(),
                require_configured: false,
                faults_allowed: false,
                #[cfg(feature = "serde")]
                precedence_from_document: Vec::new(),
                #[cfg(feature = "serde")]
                reentrancy_from_document: false,
                #[cfg(feature = "serde")]
                require_configured_from_document: false,
            }),
            changing: Mutex::new(()),
            taps: RwLock::new(Vec::new()),
        }
    }

    /// The process-wide registry the attribute macros use, built on first use.
    #[inline]
    pub fn global() -> &'static Registry {
        &GLOBAL
    }

    /// The clock the guards of this registry read.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A number that changes whenever the configuration or the precedence of this registry
    /// changes, and that no other registry ever shows.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies `change` under the write lock and moves the generation if it succeeded; then,
    /// with the lock released, reconfigures the instances it named.
    ///
    /// Instances are reconfigured outside the lock because reconfiguring one runs code of the
    /// user's: a breaker's event subscribers (called on this thread), a bulkhead's woken
    /// waiters. They may use the registry. Changes still apply one at a time (`changing`), so
    /// instances end with the configuration the registry records.
    fn change(
        &self,
        change: impl FnOnce(&mut State, &Clock) -> Result<Pending, ConfigError>,
    ) -> Result<(), ConfigError> {
        self.change_with(|state, clock| change(state, clock).map(|pending| (pending, ())))
    }

    /// [`change`](Self::change) for a change that returns a value and an error of its own.
    fn change_with<R, E>(
        &self,
        change: impl FnOnce(&mut State, &Clock) -> Result<(Pending, R), E>,
    ) -> Result<R, E> {
        let _changing = self.changing.lock().unwrap_or_else(PoisonError::into_inner);
        let (pending, value) = {
            let mut state: RwLockWriteGuard<'_, State> =
                self.state.write().unwrap_or_else(PoisonError::into_inner);
            let changed = change(&mut state, &self.clock)?;
            self.generation.store(next_generation(), Ordering::Release);
            changed
        };
        // Every instance is reconfigured even if a subscriber panics on the way: the first
        // panic resumes once the registry and its instances agree again.
        let mut panicked = None;
        for reconfigure in pending {
            if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(reconfigure)) {
                panicked.get_or_insert(panic);
            }
        }
        if let Some(panic) = panicked {
            panic::resume_unwind(panic);
        }
        Ok(value)
    }

    // ----- precedence and re-entrancy -----

    /// Sets the precedence of `aspect`: lower runs first (outermost).
    ///
    /// ```
    /// use resilience_runtime::{Aspect, Registry};
    ///
    /// let registry = Registry::new();
    /// registry.set_precedence(Aspect::CircuitBreaker, 10)?;
    /// assert_eq!(registry.precedence()[..2], [Aspect::CircuitBreaker, Aspect::Bulkhead]);
    /// assert!(registry.set_precedence(Aspect::Retry, 10).is_err()); // a tie is refused
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] if another aspect already has `precedence`: order must never depend
    /// on a tie-break.
    pub fn set_precedence(&self, aspect: Aspect, precedence: i32) -> Result<(), ConfigError> {
        self.change(|state, _| {
            state.precedence.set(aspect, precedence)?;
            Ok(Pending::new())
        })
    }

    /// Every aspect kind, outermost (runs first) first.
    pub fn precedence(&self) -> Vec<Aspect> {
        self.read().precedence.order()
    }

    /// The precedence number of `aspect`.
    pub fn precedence_of(&self, aspect: Aspect) -> i32 {
        self.read().precedence.of(aspect)
    }

    /// What a guarded call does when it enters a guard already held on its call chain.
    pub fn set_reentrancy_policy(&self, policy: ReentrancyPolicy) {
        self.set_switch(|state| {
            state.reentrancy = policy;
            #[cfg(feature = "serde")]
            {
                state.reentrancy_from_document = false;
            }
        });
    }

    /// The re-entrancy policy in force ([`ReentrancyPolicy::PassThrough`] by default).
    pub fn reentrancy_policy(&self) -> ReentrancyPolicy {
        self.read().reentrancy
    }

    /// Makes every instance name the annotations and [`plan`](Self::plan) use need a
    /// configuration of its own (`true`), instead of running a name nobody configured on the
    /// default configuration of its kind (`false`, the default).
    ///
    /// Under it, a guard list naming an unconfigured instance is a [`ConfigError`] from
    /// [`plan`](Self::plan), and a guarded function whose guard is unconfigured refuses every
    /// call with [`Rejected::Unconfigured`](crate::Rejected::Unconfigured) (its body does not
    /// run, no guard is entered) until the name is configured. A base configuration counts
    /// as configured; the default configuration of a kind does not. The accessors
    /// ([`bulkhead`](Self::bulkhead), …) still create what they are asked for: they name an
    /// instance on purpose.
    ///
    /// A name that `plan` turns away is not kept: guard lists built from what a request says
    /// (a tenant header) cannot grow the registry, or the process's set of
    /// [`Name`](crate::Name)s, with names nobody configured.
    ///
    /// Call [`validate`](Self::validate) in `main` too: it lists every unconfigured name at
    /// startup, with the functions that use it, before any call is refused.
    ///
    /// ```
    /// use resilience_runtime::{BulkheadConfig, Guard, Registry};
    ///
    /// let registry = Registry::new();
    /// registry.set_require_configured(true);
    /// let err = registry.plan(&[Guard::bulkhead("orders")]).unwrap_err();
    /// assert_eq!(err.field(), "guards");
    /// assert!(err.reason().contains("bulkhead `orders` has no configuration"));
    ///
    /// registry.configure_bulkhead("orders", BulkheadConfig::builder().max_concurrent_calls(8).build()?)?;
    /// assert!(registry.plan(&[Guard::bulkhead("orders")]).is_ok());
    /// # Ok::<(), resilience_runtime::ConfigError>(())
    /// ```
    pub fn set_require_configured(&self, required: bool) {
        self.set_switch(|state| {
            state.require_configured = required;
            #[cfg(feature = "serde")]
            {
                state.require_configured_from_document = false;
            }
        });
    }

    /// Lets this registry inject the faults configured for its instance names
    /// ([`configure_fault`](Self::configure_fault), or `[fault]` in a configuration file):
    /// from then on a plan holding a guard named `name` also holds the faults of `name`, innermost
    /// by default (precedence 650). Off by default, and only code turns it on: a configuration
    /// file cannot, so a release build injects nothing it was not built to.
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::{FaultConfig, Guard, Registry, Rejected};
    ///
    /// let registry = Registry::new();
    /// registry.configure_fault("orders", FaultConfig::builder().refusal(1.0).build()?)?;
    /// let plan = registry.plan(&[Guard::bulkhead("orders")])?;
    /// assert_eq!(plan.call(|| Ok::<_, Rejected>(1)), Ok(1), "not allowed: nothing injected");
    ///
    /// registry.allow_fault_injection();
    /// let plan = registry.plan(&[Guard::bulkhead("orders")])?;
    /// assert!(matches!(plan.call(|| Ok::<_, Rejected>(1)), Err(Rejected::Injected { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allow_fault_injection(&self) {
        self.set_switch(|state| state.faults_allowed = true);
    }

    /// Whether this registry injects faults ([`allow_fault_injection`](Self::allow_fault_injection)).
    pub fn fault_injection_allowed(&self) -> bool {
        self.read().faults_allowed
    }

    /// Sets a registry-wide switch in code, `set` also marking it as not from a document (so
    /// that a later document leaving its key out keeps it), and moves the generation.
    fn set_switch(&self, set: impl FnOnce(&mut State)) {
        // Infallible: the closure never returns an error.
        let _ = self.change(|state, _| {
            set(state);
            Ok(Pending::new())
        });
    }

    /// Whether every name used needs a configuration of its own
    /// ([`set_require_configured`](Self::set_require_configured); `false` by default).
    pub fn require_configured(&self) -> bool {
        self.read().require_configured
    }

    // ----- what validation reads -----

    /// The names configured explicitly, per aspect kind.
    pub(crate) fn configured_names(&self) -> Vec<(Aspect, String)> {
        struct Configured<'s>(&'s State, Vec<(Aspect, String)>);
        impl EachKind for Configured<'_> {
            fn kind<I: Registered>(&mut self) {
                let names = I::table(self.0).configured();
                self.1.extend(names.map(|n| (I::ASPECT, n.to_string())));
            }
        }
        let mut configured = Configured(&self.read(), Vec::new());
        Kinds::each(&mut configured);
        configured.1
    }

    /// The names other configurations use as their base.
    pub(crate) fn base_names(&self) -> BTreeSet<(Aspect, String)> {
        struct Bases<'s>(&'s State, BTreeSet<(Aspect, String)>);
        impl EachKind for Bases<'_> {
            fn kind<I: Registered>(&mut self) {
                let bases = I::table(self.0).bases();
                self.1.extend(bases.map(|b| (I::ASPECT, b.to_owned())));
            }
        }
        let mut bases = Bases(&self.read(), BTreeSet::new());
        Kinds::each(&mut bases);
        bases.1
    }

    // ----- events -----

    /// Forwards the rare events of every guard of this registry, those that exist and those
    /// created later, to [`tracing`](https://docs.rs/tracing) (target `resilience`): a breaker
    /// opening at `WARN`, its other transitions at `INFO`, a single rejection, retry or time-out
    /// at `DEBUG` (so an overload does not flood the logs). Each event carries the fields
    /// `aspect` and `name`, and its own (`from`, `to`, `waited_ms`, `retry_after_ms`,
    /// `attempt`, `wait_ms`, `timeout_ms`, `failure_rate`, …). Calling it again does nothing.
    ///
    /// It costs nothing on the path of an ordinary call: a guard gathers no event of a call
    /// that changes nothing for it (a closed breaker's record reads no precise clock).
    ///
    /// ```
    /// use resilience_runtime::Registry;
    ///
    /// let registry = Registry::new();
    /// registry.trace_events();
    /// // With a `tracing` subscriber installed, this logs at WARN:
    /// // circuit breaker `orders` is open (was closed): calls are refused
    /// registry.circuit_breaker("orders").transition_to_open_state()?;
    /// # Ok::<(), resilience_runtime::IllegalStateTransition>(())
    /// ```
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn trace_events(&self) {
        self.add_tap(
            |tap| matches!(tap, Tap::Tracing(_)),
            || Tap::Tracing(self.clock.clone()),
        );
    }

    /// Keeps the newest `capacity` rare events of every guard of this registry (those that
    /// exist and those created later) for [`recent_events`](Self::recent_events): breaker
    /// transitions, rejections, retries, time-outs, what Resilience4j's event endpoints show.
    /// The first call sets the capacity; later calls do nothing. Like
    /// [`trace_events`](Self::trace_events) it asks for no event of an ordinary call, so it
    /// costs a closed breaker nothing.
    ///
    /// ```
    /// use resilience_runtime::Registry;
    ///
    /// let registry = Registry::new();
    /// registry.keep_recent_events(100);
    /// registry.circuit_breaker("orders").transition_to_open_state()?;
    /// let events = registry.recent_events();
    /// assert_eq!(events[0].kind(), "state_transition");
    /// assert_eq!(events[0].message(), "circuit breaker `orders` changed state from closed to open");
    /// # Ok::<(), resilience_runtime::IllegalStateTransition>(())
    /// ```
    pub fn keep_recent_events(&self, capacity: usize) {
        self.add_tap(
            |tap| matches!(tap, Tap::Recent(_)),
            || Tap::Recent(Arc::new(EventLog::new(capacity))),
        );
    }

    /// The events kept since [`keep_recent_events`](Self::keep_recent_events), oldest first;
    /// empty if it was not called.
    // Without the `tracing` feature a tap is always a log: the `find_map` reads as a `map`.
    #[cfg_attr(not(feature = "tracing"), allow(clippy::unnecessary_find_map))]
    pub fn recent_events(&self) -> Vec<RecentEvent> {
        let taps = self.taps.read().unwrap_or_else(PoisonError::into_inner);
        taps.iter()
            .find_map(|tap| match tap {
                Tap::Recent(log) => Some(log.snapshot()),
                #[cfg(feature = "tracing")]
                Tap::Tracing(_) => None,
            })
            .unwrap_or_default()
    }

    // ----- plans -----

    /// Resolves `guards` to this registry's instances and sorts them by precedence: the
    /// ordered execution of one call site. Cache it, and build it again when
    /// [`generation`](Registry::generation) differs from [`Plan::generation`].
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (field `guards`) if the same aspect kind appears twice, or if the
    /// registry [requires every name configured](Self::set_require_configured) and one of
    /// `guards` is not.
    pub fn plan(&self, guards: &[Guard<'_>]) -> Result<Plan, ConfigError> {
        if let Some(problem) = GuardListError::check(guards) {
            return Err(ConfigError::new("guards", problem.to_string()));
        }
        // A name turned away is not interned (kept for the process): the message is made
        // from the name as given.
        self.try_resolve_plan(guards).map_err(|missing| {
            ConfigError::new(
                "guards",
                crate::error::unconfigured_message(missing.guard.aspect(), missing.guard.name()),
            )
        })
    }

    /// Builds the plan of a guard list already checked by [`GuardListError::check`]: for a
    /// call site, whose guard without a configuration (when the registry requires one) makes a
    /// plan that refuses every call.
    pub(crate) fn resolve_plan(&self, guards: &[Guard<'_>]) -> Plan {
        self.try_resolve_plan(guards).unwrap_or_else(|missing| {
            let guard = missing.guard;
            Plan::refusing(
                missing.generation,
                missing.policy,
                guard.aspect(),
                Name::from(guard.name()),
            )
        })
    }

    /// [`resolve_plan`](Self::resolve_plan), or the first guard without a configuration when
    /// the registry requires one: judged under the same lock as the plan's policy and
    /// generation, with nothing interned for it.
    fn try_resolve_plan<'g>(&self, guards: &'g [Guard<'g>]) -> Result<Plan, Missing<'g>> {
        let (precedence, policy, generation, guards) = {
            let state = self.read();
            let generation = self.generation();
            if state.require_configured {
                if let Some(guard) = guards.iter().find(|g| !state.configures(g)) {
                    return Err(Missing {
                        guard,
                        generation,
                        policy: state.reentrancy,
                    });
                }
            }
            (
                state.precedence,
                state.reentrancy,
                generation,
                state.with_faults(guards),
            )
        };
        let mut sorted: Vec<&Guard<'_>> = guards.iter().collect();
        precedence.sort(&mut sorted, |g| g.aspect());
        let mut plan = Plan::empty(generation, policy);
        for guard in sorted {
            let name = guard.name();
            match guard.aspect() {
                Aspect::Bulkhead => plan.push(Step::Bulkhead(self.bulkhead(name))),
                Aspect::RateLimiter => plan.push(Step::RateLimiter(self.rate_limiter(name))),
                Aspect::Retry => plan.push_wrapper(Wrapper::Retry(self.retry(name))),
                Aspect::CircuitBreaker => {
                    plan.push(Step::CircuitBreaker(self.circuit_breaker(name)));
                }
                Aspect::TimeLimiter => {
                    plan.push_wrapper(Wrapper::TimeLimiter(self.time_limiter(name)));
                }
                Aspect::Hedge => plan.push_wrapper(Wrapper::Hedge(self.hedge(name))),
                Aspect::Fault => plan.push(Step::Fault(self.fault(name))),
            }
        }
        // The generation was read before the instances: if the configuration changed in
        // between, the plan is labelled older than what it holds and is rebuilt on next use.
        Ok(plan)
    }
}

/// A guard without a configuration in a registry that requires one, with what a refusing
/// plan needs.
struct Missing<'g> {
    guard: &'g Guard<'g>,
    generation: u64,
    policy: ReentrancyPolicy,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.read();
        let mut debug = f.debug_struct("Registry");
        debug
            .field("generation", &self.generation())
            .field("clock", &self.clock)
            .field("precedence", &self.precedence())
            .field("reentrancy", &state.reentrancy)
            .field("require_configured", &state.require_configured);
        struct Counts<'s, 'f, 'a, 'b>(&'s State, &'f mut fmt::DebugStruct<'a, 'b>);
        impl EachKind for Counts<'_, '_, '_, '_> {
            fn kind<I: Registered>(&mut self) {
                self.1.field(I::FIELD, &I::table(self.0).len());
            }
        }
        Kinds::each(&mut Counts(&state, &mut debug));
        debug.finish()
    }
}

// ----- the kinds: one line each -----
