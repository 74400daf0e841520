//! [`Registry`]: named configurations, guard instances, the precedence table.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use once_cell::sync::Lazy;

use crate::aspect::Aspect;
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::call_site::{self, CallSite, Validation};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerConfig};
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::name::Name;
use crate::plan::{Guard, GuardListError, Plan, ReentrancyPolicy, Step};

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
///   [`base`](BulkheadConfig::base) configuration if it names one, else from the default
///   configuration of its kind (Resilience4j's `baseConfig` and `default`).
/// - **Instances.** [`bulkhead`](Registry::bulkhead) and
///   [`circuit_breaker`](Registry::circuit_breaker) get or create the instance of a name; a
///   name never configured gets the default configuration. An instance lives as long as its
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
}

struct State {
    bulkheads: Kind<BulkheadConfig, Bulkhead>,
    circuit_breakers: Kind<CircuitBreakerConfig, CircuitBreaker>,
    precedence: [i32; Aspect::ALL.len()],
    reentrancy: ReentrancyPolicy,
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
            clock: clock.into(),
            generation: AtomicU64::new(next_generation()),
            state: RwLock::new(State {
                bulkheads: Kind::new(BulkheadConfig::default()),
                circuit_breakers: Kind::new(CircuitBreakerConfig::default()),
                precedence: Aspect::ALL.map(Aspect::default_precedence),
                reentrancy: ReentrancyPolicy::default(),
            }),
            changing: Mutex::new(()),
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
        let _changing = self.changing.lock().unwrap_or_else(PoisonError::into_inner);
        let pending = {
            let mut state: RwLockWriteGuard<'_, State> =
                self.state.write().unwrap_or_else(PoisonError::into_inner);
            let pending = change(&mut state, &self.clock)?;
            self.generation.store(next_generation(), Ordering::Release);
            pending
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
        Ok(())
    }

    // ----- bulkheads -----

    /// The bulkhead named `name`, created with its configuration (or the default one) on
    /// first use.
    pub fn bulkhead(&self, name: &str) -> Arc<Bulkhead> {
        if let Some(found) = self.read().bulkheads.instances.get(name) {
            return Arc::clone(found);
        }
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let clock = &self.clock;
        state
            .bulkheads
            .get_or_create(name, |n, c| Bulkhead::with_clock(n, c, clock.clone()))
    }

    /// Installs `config` for the bulkhead `name` and reconfigures its instance in place (see
    /// [`Bulkhead::reconfigure`]: permits held count against the new limit); configurations
    /// based on it are re-resolved, and their instances reconfigured if their effective
    /// configuration changed.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for an unknown or cyclic base configuration, or a merged
    /// configuration that is invalid; the registry is unchanged then.
    pub fn configure_bulkhead(
        &self,
        name: impl Into<Name>,
        config: BulkheadConfig,
    ) -> Result<(), ConfigError> {
        let name = name.into();
        self.change(|state, clock| {
            state.bulkheads.configure(name, config, |n, c| {
                Bulkhead::with_clock(n, c, clock.clone())
            })
        })
    }

    /// Replaces the default bulkhead configuration: the one of names never configured, and
    /// the base of named configurations that name no base.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] if `config` names a base (the default has none) or leaves a named
    /// configuration invalid; the registry is unchanged then.
    pub fn configure_default_bulkhead(&self, config: BulkheadConfig) -> Result<(), ConfigError> {
        self.change(|state, clock| {
            state
                .bulkheads
                .configure_default(config, |n, c| Bulkhead::with_clock(n, c, clock.clone()))
        })
    }

    /// Every bulkhead instance created so far, sorted by name.
    pub fn bulkheads(&self) -> Vec<Arc<Bulkhead>> {
        self.read().bulkheads.all()
    }

    /// The effective configuration of the bulkhead `name` (its own, resolved against its
    /// base, or the default).
    pub fn bulkhead_config(&self, name: &str) -> BulkheadConfig {
        self.read().bulkheads.effective(name)
    }

    // ----- circuit breakers -----

    /// The circuit breaker named `name`, created with its configuration (or the default one)
    /// on first use.
    pub fn circuit_breaker(&self, name: &str) -> Arc<CircuitBreaker> {
        if let Some(found) = self.read().circuit_breakers.instances.get(name) {
            return Arc::clone(found);
        }
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let clock = &self.clock;
        state
            .circuit_breakers
            .get_or_create(name, |n, c| CircuitBreaker::with_clock(n, c, clock.clone()))
    }

    /// Installs `config` for the circuit breaker `name` and reconfigures its instance in place
    /// (see [`CircuitBreaker::reconfigure`]: it starts over in its initial state, with fresh
    /// metrics); configurations based on it are re-resolved, and their instances reconfigured
    /// if their effective configuration changed.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for an unknown or cyclic base configuration, or a merged
    /// configuration that is invalid; the registry is unchanged then.
    pub fn configure_circuit_breaker(
        &self,
        name: impl Into<Name>,
        config: CircuitBreakerConfig,
    ) -> Result<(), ConfigError> {
        let name = name.into();
        self.change(|state, clock| {
            state.circuit_breakers.configure(name, config, |n, c| {
                CircuitBreaker::with_clock(n, c, clock.clone())
            })
        })
    }

    /// Replaces the default circuit breaker configuration: the one of names never
    /// configured, and the base of named configurations that name no base.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] if `config` names a base (the default has none) or leaves a named
    /// configuration invalid; the registry is unchanged then.
    pub fn configure_default_circuit_breaker(
        &self,
        config: CircuitBreakerConfig,
    ) -> Result<(), ConfigError> {
        self.change(|state, clock| {
            state.circuit_breakers.configure_default(config, |n, c| {
                CircuitBreaker::with_clock(n, c, clock.clone())
            })
        })
    }

    /// Every circuit breaker instance created so far, sorted by name.
    pub fn circuit_breakers(&self) -> Vec<Arc<CircuitBreaker>> {
        self.read().circuit_breakers.all()
    }

    /// The effective configuration of the circuit breaker `name` (its own, resolved against
    /// its base, or the default).
    pub fn circuit_breaker_config(&self, name: &str) -> CircuitBreakerConfig {
        self.read().circuit_breakers.effective(name)
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
            if let Some(other) = Aspect::ALL
                .into_iter()
                .find(|a| *a != aspect && state.precedence[a.index()] == precedence)
            {
                return Err(ConfigError::new(
                    "precedence",
                    format!(
                        "{aspect} and {other} would both have precedence {precedence}; \
                         give each aspect its own value"
                    ),
                ));
            }
            state.precedence[aspect.index()] = precedence;
            Ok(Pending::new())
        })
    }

    /// Every aspect kind, outermost (runs first) first.
    pub fn precedence(&self) -> Vec<Aspect> {
        let table = self.read().precedence;
        let mut order = Aspect::ALL.to_vec();
        order.sort_by_key(|a| table[a.index()]);
        order
    }

    /// The precedence number of `aspect`.
    pub fn precedence_of(&self, aspect: Aspect) -> i32 {
        self.read().precedence[aspect.index()]
    }

    /// What a guarded call does when it enters a guard already held on its call chain.
    pub fn set_reentrancy_policy(&self, policy: ReentrancyPolicy) {
        // Infallible: the closure never returns an error.
        let _ = self.change(|state, _| {
            state.reentrancy = policy;
            Ok(Pending::new())
        });
    }

    /// The re-entrancy policy in force ([`ReentrancyPolicy::PassThrough`] by default).
    pub fn reentrancy_policy(&self) -> ReentrancyPolicy {
        self.read().reentrancy
    }

    // ----- call sites -----

    /// Every function guarded by the attribute macros in the crates linked into this program,
    /// sorted by file and line. A crate whose guarded functions are not linked in (nothing
    /// calls into it) contributes none.
    pub fn call_sites(&self) -> Vec<&'static CallSite> {
        call_site::all()
    }

    /// Checks the instance names used by the annotations against this registry's
    /// configurations, so a service can fail fast at startup.
    ///
    /// ```
    /// use resilience_runtime::Registry;
    ///
    /// let registry = Registry::new();
    /// // No annotation in this program: nothing is missing.
    /// let report = registry.validate().expect("every used name is configured");
    /// assert!(report.unconfigured.is_empty());
    /// ```
    ///
    /// # Errors
    ///
    /// A [`Validation`] listing every instance name used by an annotation that has no
    /// configuration of its own (it would run on the default), with the functions using it.
    /// Configurations that no annotation uses are listed in the report either way (a base
    /// configuration counts as used).
    pub fn validate(&self) -> Result<Validation, Validation> {
        call_site::validate(self, &call_site::all())
    }

    /// The names configured explicitly, per aspect kind.
    pub(crate) fn configured_names(&self) -> Vec<(Aspect, String)> {
        let state = self.read();
        let bulkheads = state
            .bulkheads
            .configs
            .keys()
            .map(|n| (Aspect::Bulkhead, n.to_string()));
        let breakers = state
            .circuit_breakers
            .configs
            .keys()
            .map(|n| (Aspect::CircuitBreaker, n.to_string()));
        bulkheads.chain(breakers).collect()
    }

    /// The names other configurations use as their base.
    pub(crate) fn base_names(&self) -> BTreeSet<(Aspect, String)> {
        let state = self.read();
        let bulkheads = state
            .bulkheads
            .configs
            .values()
            .filter_map(|c| c.base())
            .map(|b| (Aspect::Bulkhead, b.to_owned()));
        let breakers = state
            .circuit_breakers
            .configs
            .values()
            .filter_map(|c| c.base())
            .map(|b| (Aspect::CircuitBreaker, b.to_owned()));
        bulkheads.chain(breakers).collect()
    }

    // ----- plans -----

    /// Resolves `guards` to this registry's instances and sorts them by precedence: the
    /// ordered execution of one call site. Cache it, and build it again when
    /// [`generation`](Registry::generation) differs from [`Plan::generation`].
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (field `guards`) if the same aspect kind appears twice, or a kind
    /// that has no implementation yet appears.
    pub fn plan(&self, guards: &[Guard<'_>]) -> Result<Plan, ConfigError> {
        match GuardListError::check(guards) {
            Some(problem) => Err(ConfigError::new("guards", problem.to_string())),
            None => Ok(self.resolve_plan(guards)),
        }
    }

    /// Builds the plan of a guard list already checked by [`GuardListError::check`].
    pub(crate) fn resolve_plan(&self, guards: &[Guard<'_>]) -> Plan {
        let (precedence, policy, generation) = {
            let state = self.read();
            (state.precedence, state.reentrancy, self.generation())
        };
        let mut sorted: Vec<&Guard<'_>> = guards.iter().collect();
        sorted.sort_by_key(|g| precedence[g.aspect().index()]);
        let mut plan = Plan::empty(generation, policy);
        for guard in sorted {
            let name = guard.name();
            plan.push(match guard.aspect() {
                Aspect::Bulkhead => Step::Bulkhead(self.bulkhead(name)),
                Aspect::CircuitBreaker => Step::CircuitBreaker(self.circuit_breaker(name)),
                // `Registry::plan` and `PlanCache::new` refuse these (`GuardListError`).
                aspect @ (Aspect::RateLimiter | Aspect::Retry | Aspect::TimeLimiter) => {
                    unreachable!("the {aspect} aspect has no implementation yet")
                }
            });
        }
        // The generation was read before the instances: if the configuration changed in
        // between, the plan is labelled older than what it holds and is rebuilt on next use.
        plan
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.read();
        f.debug_struct("Registry")
            .field("generation", &self.generation())
            .field("clock", &self.clock)
            .field("precedence", &self.precedence())
            .field("reentrancy", &state.reentrancy)
            .field("bulkheads", &state.bulkheads.instances.len())
            .field("circuit_breakers", &state.circuit_breakers.instances.len())
            .finish()
    }
}

/// A configuration type that can sit in a [`Kind`].
pub(crate) trait Config: Clone + PartialEq {
    fn base(&self) -> Option<&str>;
    fn inherit(&self, base: &Self) -> Result<Self, ConfigError>;
}

impl Config for BulkheadConfig {
    fn base(&self) -> Option<&str> {
        BulkheadConfig::base(self)
    }
    fn inherit(&self, base: &Self) -> Result<Self, ConfigError> {
        BulkheadConfig::inherit(self, base)
    }
}

impl Config for CircuitBreakerConfig {
    fn base(&self) -> Option<&str> {
        CircuitBreakerConfig::base(self)
    }
    fn inherit(&self, base: &Self) -> Result<Self, ConfigError> {
        CircuitBreakerConfig::inherit(self, base)
    }
}

/// The configurations and instances of one aspect kind.
struct Kind<C, I> {
    default: C,
    /// Configurations as given, before resolution.
    configs: HashMap<Name, C>,
    /// The names whose configuration names a base: the only ones a change elsewhere can
    /// affect, so a change re-resolves these and not every configuration.
    derived: HashSet<Name>,
    /// Resolved configurations of the named ones.
    resolved: HashMap<Name, C>,
    instances: HashMap<Name, Arc<I>>,
}

/// Reconfigurations of instances decided by a change, to run once the registry's lock is
/// released (see [`Registry::change`]).
type Pending = Vec<Box<dyn FnOnce() + Send>>;

/// A guard instance as the registry keeps it: created once per name, reconfigured in place.
trait Instance: Send + Sync + 'static {
    type Config: Send + 'static;
    fn config(&self) -> Self::Config;
    fn reconfigure(&self, config: Self::Config);
}

impl Instance for Bulkhead {
    type Config = BulkheadConfig;
    fn config(&self) -> BulkheadConfig {
        Bulkhead::config(self)
    }
    fn reconfigure(&self, config: BulkheadConfig) {
        Bulkhead::reconfigure(self, config);
    }
}

impl Instance for CircuitBreaker {
    type Config = CircuitBreakerConfig;
    fn config(&self) -> CircuitBreakerConfig {
        CircuitBreaker::config(self)
    }
    fn reconfigure(&self, config: CircuitBreakerConfig) {
        CircuitBreaker::reconfigure(self, config);
    }
}

impl<C: Config + Send + 'static, I: Instance<Config = C>> Kind<C, I> {
    fn new(default: C) -> Self {
        Kind {
            default,
            configs: HashMap::new(),
            derived: HashSet::new(),
            resolved: HashMap::new(),
            instances: HashMap::new(),
        }
    }

    fn effective(&self, name: &str) -> C {
        self.resolved.get(name).unwrap_or(&self.default).clone()
    }

    fn all(&self) -> Vec<Arc<I>> {
        let mut all: Vec<(&Name, &Arc<I>)> = self.instances.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, i)| Arc::clone(i)).collect()
    }

    fn get_or_create(&mut self, name: &str, make: impl FnOnce(Name, C) -> I) -> Arc<I> {
        if let Some(found) = self.instances.get(name) {
            return Arc::clone(found);
        }
        let name = Name::from(name);
        let instance = Arc::new(make(name.clone(), self.effective(&name)));
        self.instances.insert(name, Arc::clone(&instance));
        instance
    }

    /// Resolves the configuration `config` of `name`: its base chain (looked up with `get`),
    /// then `default` under all of it.
    fn resolve<'a>(
        get: impl Fn(&str) -> Option<&'a C>,
        default: &C,
        name: &'a str,
        config: &'a C,
    ) -> Result<C, ConfigError>
    where
        C: 'a,
    {
        let mut chain: Vec<&str> = vec![name];
        // The names seen, for a cycle check that stays linear in a chain of any depth.
        let mut seen: HashSet<&str> = HashSet::from([name]);
        let mut layers = vec![config];
        let mut current = config;
        while let Some(base) = current.base() {
            if !seen.insert(base) {
                chain.push(base);
                return Err(ConfigError::new(
                    "base",
                    format!(
                        "base configurations form a cycle: {}; one of them must stop naming a base",
                        chain.join(" -> ")
                    ),
                ));
            }
            let named_by = chain.last().copied().unwrap_or(name);
            current = get(base).ok_or_else(|| {
                ConfigError::new(
                    "base",
                    format!(
                        "`{named_by}` names the base configuration `{base}`, which is not \
                         configured; configure `{base}` first"
                    ),
                )
            })?;
            chain.push(base);
            layers.push(current);
        }
        let mut resolved = default.clone();
        for layer in layers.into_iter().rev() {
            resolved = layer.inherit(&resolved)?;
        }
        Ok(resolved)
    }

    /// Whether the base chain of `name` (within `get`, which holds at most `configs`
    /// configurations) passes through `target`, however deep the chain is.
    fn depends_on<'a>(
        get: impl Fn(&str) -> Option<&'a C>,
        configs: usize,
        name: &str,
        target: &str,
    ) -> bool
    where
        C: 'a,
    {
        let mut current = get(name);
        // A chain of more steps than there are configurations goes round a cycle, which
        // `resolve` reports; without one, every step is taken.
        for _ in 0..=configs {
            match current.and_then(|c| c.base()) {
                Some(base) if base == target => return true,
                Some(base) => current = get(base),
                None => return false,
            }
        }
        false
    }

    /// Gives the instance of `name` the configuration `config`: a new instance if there is
    /// none, else the existing one reconfigured in place (every handle to it stays live, and
    /// the plans that hold it stay current), added to `pending`.
    fn apply(
        &mut self,
        name: &Name,
        config: C,
        make: &impl Fn(Name, C) -> I,
        pending: &mut Pending,
    ) {
        match self.instances.get(name) {
            Some(instance) => {
                let instance = Arc::clone(instance);
                pending.push(Box::new(move || instance.reconfigure(config)));
            }
            None => {
                let instance = Arc::new(make(name.clone(), config));
                self.instances.insert(name.clone(), instance);
            }
        }
    }

    /// Installs `config` under `name`: resolves it and every configuration derived from it
    /// first, so a refused change leaves everything as it was.
    fn configure(
        &mut self,
        name: Name,
        config: C,
        make: impl Fn(Name, C) -> I,
    ) -> Result<Pending, ConfigError> {
        let get = |n: &str| {
            if n == &*name {
                Some(&config)
            } else {
                self.configs.get(n)
            }
        };
        let own = Self::resolve(get, &self.default, &name, &config)?;
        let mut dependents = Vec::new();
        for derived in &self.derived {
            // `get` sees every configuration, and `name`'s if it is new.
            let configs = self.configs.len() + 1;
            if *derived != name && Self::depends_on(get, configs, derived, &name) {
                let raw = &self.configs[derived];
                dependents.push((
                    derived.clone(),
                    Self::resolve(get, &self.default, derived, raw)?,
                ));
            }
        }
        // Everything resolved: commit.
        if config.base().is_some() {
            self.derived.insert(name.clone());
        } else {
            self.derived.remove(&name);
        }
        self.configs.insert(name.clone(), config);
        self.resolved.insert(name.clone(), own.clone());
        let mut pending = Pending::new();
        self.apply(&name, own, &make, &mut pending);
        for (dependent, resolved) in dependents {
            self.resolved.insert(dependent.clone(), resolved.clone());
            let changed = self
                .instances
                .get(&dependent)
                .is_none_or(|i| i.config() != resolved);
            if changed {
                self.apply(&dependent, resolved, &make, &mut pending);
            }
        }
        Ok(pending)
    }

    /// Replaces the default configuration: re-resolves every named configuration (they all
    /// rest on it) and reconfigures the instances whose effective configuration changed.
    fn configure_default(
        &mut self,
        default: C,
        make: impl Fn(Name, C) -> I,
    ) -> Result<Pending, ConfigError> {
        if let Some(base) = default.base() {
            return Err(ConfigError::new(
                "base",
                format!("the default configuration cannot have a base (it names `{base}`)"),
            ));
        }
        let mut resolved = HashMap::with_capacity(self.configs.len());
        for (name, raw) in &self.configs {
            let get = |n: &str| self.configs.get(n);
            resolved.insert(name.clone(), Self::resolve(get, &default, name, raw)?);
        }
        let mut pending = Pending::new();
        let names: Vec<Name> = self.instances.keys().cloned().collect();
        for name in names {
            let effective = resolved.get(&name).unwrap_or(&default).clone();
            if self.instances[&name].config() != effective {
                self.apply(&name, effective, &make, &mut pending);
            }
        }
        self.resolved = resolved;
        self.default = default;
        Ok(pending)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::circuit_breaker::SlidingWindow;

    fn bulkhead_of(calls: u32) -> BulkheadConfig {
        BulkheadConfig::builder()
            .max_concurrent_calls(calls)
            .build()
            .unwrap()
    }

    /// A breaker configuration with a count window of `calls`, the rest default.
    fn breaker_of(calls: u32) -> CircuitBreakerConfig {
        CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::CountBased(calls))
            .build()
            .unwrap()
    }

    #[test]
    fn registries_are_send_and_sync_and_the_global_one_is_unique() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Registry>();
        assert!(std::ptr::eq(Registry::global(), Registry::global()));
    }

    #[test]
    fn an_unknown_name_gets_the_default_config_and_keeps_its_instance() {
        let registry = Registry::new();
        let first = registry.bulkhead("unknown");
        assert_eq!(first.max_allowed_concurrent_calls(), 25);
        assert!(Arc::ptr_eq(&first, &registry.bulkhead("unknown")));
        let breaker = registry.circuit_breaker("unknown");
        assert!(Arc::ptr_eq(&breaker, &registry.circuit_breaker("unknown")));
        // Bulkheads and breakers have separate name spaces.
        assert_eq!(registry.bulkheads().len(), 1);
        assert_eq!(registry.circuit_breakers().len(), 1);
    }

    #[test]
    fn configuring_a_name_reconfigures_its_instance_in_place() {
        let registry = Registry::new();
        let bulkhead = registry.bulkhead("orders");
        let held: Vec<_> = (0..3).map(|_| bulkhead.try_acquire().unwrap()).collect();
        registry
            .configure_bulkhead("orders", bulkhead_of(4))
            .unwrap();
        assert!(Arc::ptr_eq(&bulkhead, &registry.bulkhead("orders")));
        assert_eq!(bulkhead.max_allowed_concurrent_calls(), 4);
        // The 3 calls in flight count against the new limit: one more, not four.
        let fourth = bulkhead.try_acquire().unwrap();
        assert!(bulkhead.try_acquire().is_err());
        drop((held, fourth));
        assert_eq!(bulkhead.available_concurrent_calls(), 4);

        let breaker = registry.circuit_breaker("orders");
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        breaker.subscribe(move |event| sink.lock().unwrap().push(format!("{event:?}")));
        breaker.transition_to_open_state().unwrap();
        registry
            .configure_circuit_breaker("orders", breaker_of(10))
            .unwrap();
        assert!(Arc::ptr_eq(&breaker, &registry.circuit_breaker("orders")));
        assert_eq!(
            breaker.state(),
            crate::CircuitState::Closed,
            "the breaker starts over"
        );
        assert_eq!(
            breaker.config().sliding_window(),
            SlidingWindow::CountBased(10)
        );
        let events = events.lock().unwrap();
        assert!(
            events.last().is_some_and(|e| e.starts_with("Reset")),
            "the subscriber still listens: {events:?}"
        );
    }

    #[test]
    fn a_subscriber_may_use_the_registry_while_its_breaker_is_reconfigured() {
        let registry = Arc::new(Registry::new());
        let breaker = registry.circuit_breaker("orders");
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (weak, sink) = (Arc::downgrade(&registry), Arc::clone(&seen));
        // A subscriber that looks the registry up, as a metrics exporter would: it runs on the
        // configuring thread, which must not hold the registry's lock by then.
        breaker.subscribe(move |_| {
            if let Some(registry) = weak.upgrade() {
                let window = registry.circuit_breaker_config("orders").sliding_window();
                let other = registry.bulkhead("other").max_allowed_concurrent_calls();
                sink.lock().unwrap().push((window, other));
            }
        });
        let config = breaker_of(10);
        // On another thread, so that a deadlock fails the test instead of hanging it.
        let (done, configured) = std::sync::mpsc::channel();
        let configuring = Arc::clone(&registry);
        std::thread::spawn(move || {
            let result = configuring.configure_circuit_breaker("orders", config);
            let _ = done.send(result);
        });
        configured
            .recv_timeout(Duration::from_secs(30))
            .expect("configuring deadlocked on a subscriber that uses the registry")
            .unwrap();
        // The subscriber saw the registry's new configuration (Reset is its one event).
        assert_eq!(*seen.lock().unwrap(), [(SlidingWindow::CountBased(10), 25)]);
        assert_eq!(
            breaker.config().sliding_window(),
            SlidingWindow::CountBased(10)
        );
    }

    #[test]
    fn a_panicking_subscriber_still_lets_every_instance_take_its_configuration() {
        let registry = Registry::new();
        registry
            .configure_circuit_breaker("base", breaker_of(10))
            .unwrap();
        let derived = CircuitBreakerConfig::builder()
            .base("base")
            .build()
            .unwrap();
        registry
            .configure_circuit_breaker("a", derived.clone())
            .unwrap();
        registry.configure_circuit_breaker("b", derived).unwrap();
        let generation = registry.generation();
        for name in ["base", "a", "b"] {
            registry
                .circuit_breaker(name)
                .subscribe(|_| panic!("a subscriber that panics"));
        }
        let changed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            registry.configure_circuit_breaker("base", breaker_of(20))
        }));
        assert!(
            changed.is_err(),
            "the subscriber's panic reaches the caller"
        );
        assert_ne!(registry.generation(), generation);
        for name in ["base", "a", "b"] {
            assert_eq!(
                registry.circuit_breaker(name).config().sliding_window(),
                SlidingWindow::CountBased(20),
                "`{name}` took the new configuration"
            );
        }
        // The registry still works.
        registry
            .configure_circuit_breaker("c", breaker_of(5))
            .unwrap();
    }

    #[test]
    fn a_named_config_inherits_unset_fields_from_its_base_then_the_default() {
        let registry = Registry::new();
        registry
            .configure_default_bulkhead(
                BulkheadConfig::builder()
                    .fair_call_handling(false)
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_bulkhead(
                "shared",
                BulkheadConfig::builder()
                    .max_concurrent_calls(7)
                    .max_wait_duration(Duration::from_millis(30))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry
            .configure_bulkhead(
                "orders",
                BulkheadConfig::builder()
                    .base("shared")
                    .max_wait_duration(Duration::from_millis(5))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let orders = registry.bulkhead_config("orders");
        assert_eq!(orders.max_concurrent_calls(), 7, "from the base");
        assert_eq!(orders.max_wait_duration(), Duration::from_millis(5), "own");
        assert!(
            !orders.fair_call_handling(),
            "from the default under the base"
        );
        assert_eq!(
            registry.bulkhead("orders").max_allowed_concurrent_calls(),
            7
        );
    }

    #[test]
    fn changing_a_base_re_resolves_the_configs_built_on_it() {
        let registry = Registry::new();
        registry
            .configure_bulkhead("shared", bulkhead_of(7))
            .unwrap();
        registry
            .configure_bulkhead(
                "orders",
                BulkheadConfig::builder().base("shared").build().unwrap(),
            )
            .unwrap();
        let before = registry.bulkhead("orders");
        registry
            .configure_bulkhead("shared", bulkhead_of(9))
            .unwrap();
        assert!(Arc::ptr_eq(&before, &registry.bulkhead("orders")));
        assert_eq!(before.max_allowed_concurrent_calls(), 9);

        // A change that leaves a derived config as it was leaves its instance alone: an open
        // breaker stays open.
        registry
            .configure_circuit_breaker("shared", breaker_of(10))
            .unwrap();
        registry
            .configure_circuit_breaker(
                "orders",
                CircuitBreakerConfig::builder()
                    .base("shared")
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let breaker = registry.circuit_breaker("orders");
        breaker.transition_to_open_state().unwrap();
        registry
            .configure_circuit_breaker("shared", breaker_of(10))
            .unwrap();
        assert_eq!(breaker.state(), crate::CircuitState::Open);
        // One that changes it starts it over.
        registry
            .configure_circuit_breaker("shared", breaker_of(20))
            .unwrap();
        assert_eq!(breaker.state(), crate::CircuitState::Closed);
        assert_eq!(
            breaker.config().sliding_window(),
            SlidingWindow::CountBased(20)
        );
    }

    #[test]
    fn changing_the_default_reaches_unconfigured_names_and_configs_without_base() {
        let registry = Registry::new();
        let unconfigured = registry.bulkhead("anything");
        registry
            .configure_bulkhead(
                "orders",
                BulkheadConfig::builder()
                    .max_wait_duration(Duration::from_millis(5))
                    .build()
                    .unwrap(),
            )
            .unwrap();
        registry.configure_default_bulkhead(bulkhead_of(3)).unwrap();
        assert_eq!(
            registry.bulkhead("anything").max_allowed_concurrent_calls(),
            3
        );
        assert!(Arc::ptr_eq(&unconfigured, &registry.bulkhead("anything")));
        assert_eq!(unconfigured.max_allowed_concurrent_calls(), 3);
        assert_eq!(
            registry.bulkhead("orders").max_allowed_concurrent_calls(),
            3
        );
        assert_eq!(
            registry
                .bulkhead("never-seen")
                .max_allowed_concurrent_calls(),
            3
        );
    }

    #[test]
    fn an_unknown_base_is_a_config_error_and_changes_nothing() {
        let registry = Registry::new();
        let generation = registry.generation();
        let err = registry
            .configure_bulkhead(
                "orders",
                BulkheadConfig::builder().base("missing").build().unwrap(),
            )
            .unwrap_err();
        assert_eq!(err.field(), "base");
        assert!(err.reason().contains("`missing`"), "{err}");
        assert_eq!(registry.generation(), generation);
        assert_eq!(registry.bulkheads().len(), 0);
    }

    #[test]
    fn a_cycle_of_bases_is_a_config_error_and_changes_nothing() {
        let registry = Registry::new();
        let err = registry
            .configure_bulkhead("a", BulkheadConfig::builder().base("a").build().unwrap())
            .unwrap_err();
        assert_eq!(err.field(), "base");
        assert!(err.reason().contains("a -> a"), "{err}");

        registry.configure_bulkhead("b", bulkhead_of(2)).unwrap();
        registry
            .configure_bulkhead("a", BulkheadConfig::builder().base("b").build().unwrap())
            .unwrap();
        let err = registry
            .configure_bulkhead("b", BulkheadConfig::builder().base("a").build().unwrap())
            .unwrap_err();
        assert_eq!(err.field(), "base");
        assert!(err.reason().contains("cycle"), "{err}");
        assert_eq!(
            registry.bulkhead("b").max_allowed_concurrent_calls(),
            2,
            "unchanged"
        );

        let err = registry
            .configure_circuit_breaker(
                "x",
                CircuitBreakerConfig::builder().base("x").build().unwrap(),
            )
            .unwrap_err();
        assert_eq!(err.field(), "base");
    }

    #[test]
    fn a_change_reaches_every_level_of_a_deep_chain_of_bases() {
        // c0 <- c1 <- ... <- c99, each level configured and its instance created.
        let registry = Registry::new();
        registry.configure_bulkhead("c0", bulkhead_of(5)).unwrap();
        for level in 1..100 {
            let derived = BulkheadConfig::builder()
                .base(format!("c{}", level - 1))
                .build()
                .unwrap();
            registry
                .configure_bulkhead(format!("c{level}"), derived)
                .unwrap();
        }
        let instances: Vec<_> = (0..100)
            .map(|level| registry.bulkhead(&format!("c{level}")))
            .collect();
        registry.configure_bulkhead("c0", bulkhead_of(7)).unwrap();
        for (level, bulkhead) in instances.iter().enumerate() {
            assert_eq!(
                bulkhead.max_allowed_concurrent_calls(),
                7,
                "level {level} took the new base"
            );
            assert_eq!(
                registry
                    .bulkhead_config(&format!("c{level}"))
                    .max_concurrent_calls(),
                7
            );
        }
    }

    #[test]
    fn a_derived_config_is_validated_against_its_base_not_the_defaults() {
        let registry = Registry::new();
        let fast = CircuitBreakerConfig::builder()
            .wait_duration_in_open_state(Duration::from_millis(10))
            .build()
            .unwrap();
        registry.configure_circuit_breaker("fast", fast).unwrap();
        // The default open wait (60 s) is above the backoff's maximum; the base's 10 ms is not.
        let derived = CircuitBreakerConfig::builder()
            .base("fast")
            .open_state_backoff(2.0, Duration::from_millis(50))
            .build()
            .expect("nothing this builder sets contradicts itself");
        registry
            .configure_circuit_breaker("search", derived.clone())
            .unwrap();
        let resolved = registry.circuit_breaker("search").config();
        assert_eq!(
            resolved.wait_duration_in_open_state(),
            Duration::from_millis(10)
        );
        assert_eq!(
            resolved.open_state_backoff().map(|b| b.max_wait()),
            Some(Duration::from_millis(50))
        );
        // On a base whose wait is longer than the maximum, the merged configuration is refused
        // when the registry installs it, and nothing changes.
        let slow = CircuitBreakerConfig::builder()
            .wait_duration_in_open_state(Duration::from_secs(1))
            .build()
            .unwrap();
        registry.configure_circuit_breaker("slow", slow).unwrap();
        let on_slow = CircuitBreakerConfig::builder()
            .base("slow")
            .open_state_backoff(2.0, Duration::from_millis(50))
            .build()
            .unwrap();
        let refused = registry
            .configure_circuit_breaker("search", on_slow)
            .unwrap_err();
        assert_eq!(refused.field(), "open_state_backoff");
        assert_eq!(registry.circuit_breaker("search").config(), resolved);
        // And what the builder does set is still checked at once.
        let contradicts_itself = CircuitBreakerConfig::builder()
            .base("fast")
            .wait_duration_in_open_state(Duration::from_secs(1))
            .open_state_backoff(2.0, Duration::from_millis(50))
            .build()
            .unwrap_err();
        assert_eq!(contradicts_itself.field(), "open_state_backoff");
    }

    #[test]
    fn the_default_config_cannot_have_a_base() {
        let registry = Registry::new();
        let err = registry
            .configure_default_bulkhead(BulkheadConfig::builder().base("x").build().unwrap())
            .unwrap_err();
        assert_eq!(err.field(), "base");
    }

    #[test]
    fn precedence_defaults_put_the_bulkhead_outermost() {
        let registry = Registry::new();
        assert_eq!(
            registry.precedence(),
            vec![
                Aspect::Bulkhead,
                Aspect::RateLimiter,
                Aspect::Retry,
                Aspect::CircuitBreaker,
                Aspect::TimeLimiter
            ]
        );
        assert_eq!(registry.precedence_of(Aspect::CircuitBreaker), 400);
    }

    #[test]
    fn precedence_can_change_but_never_tie() {
        let registry = Registry::new();
        registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
        assert_eq!(registry.precedence()[0], Aspect::CircuitBreaker);
        let err = registry.set_precedence(Aspect::Bulkhead, 10).unwrap_err();
        assert_eq!(err.field(), "precedence");
        assert!(err.reason().contains("circuit breaker"), "{err}");
        assert_eq!(registry.precedence_of(Aspect::Bulkhead), 100, "unchanged");
        // Setting an aspect to its own current value is not a tie.
        registry.set_precedence(Aspect::CircuitBreaker, 10).unwrap();
    }

    #[test]
    fn every_change_moves_the_generation_and_look_ups_do_not() {
        let registry = Registry::new();
        let mut last = registry.generation();
        let mut changed = |registry: &Registry| {
            let now = registry.generation();
            assert_ne!(now, last);
            last = now;
        };
        registry.configure_bulkhead("a", bulkhead_of(1)).unwrap();
        changed(&registry);
        registry.set_precedence(Aspect::Retry, 1).unwrap();
        changed(&registry);
        registry
            .configure_circuit_breaker("a", CircuitBreakerConfig::default())
            .unwrap();
        changed(&registry);
        registry.set_reentrancy_policy(ReentrancyPolicy::Reject);
        changed(&registry);
        let _ = registry.bulkhead("new");
        let _ = registry.circuit_breaker("new");
        assert_eq!(registry.generation(), last);
        assert_ne!(Registry::new().generation(), registry.generation());
    }

    #[test]
    fn a_plan_sorts_guards_by_precedence_whatever_their_order() {
        let registry = Registry::new();
        for guards in [
            [Guard::bulkhead("o"), Guard::circuit_breaker("o")],
            [Guard::circuit_breaker("o"), Guard::bulkhead("o")],
        ] {
            let plan = registry.plan(&guards).unwrap();
            let order: Vec<Aspect> = plan.guards().map(|(a, _)| a).collect();
            assert_eq!(order, [Aspect::Bulkhead, Aspect::CircuitBreaker]);
            assert_eq!(plan.generation(), registry.generation());
        }
        registry.set_precedence(Aspect::CircuitBreaker, 1).unwrap();
        let plan = registry
            .plan(&[Guard::bulkhead("o"), Guard::circuit_breaker("o")])
            .unwrap();
        let order: Vec<Aspect> = plan.guards().map(|(a, _)| a).collect();
        assert_eq!(order, [Aspect::CircuitBreaker, Aspect::Bulkhead]);
    }

    #[test]
    fn a_plan_refuses_a_repeated_or_unimplemented_aspect() {
        let registry = Registry::new();
        let err = registry
            .plan(&[Guard::bulkhead("a"), Guard::bulkhead("b")])
            .unwrap_err();
        assert_eq!(err.field(), "guards");
        let err = registry
            .plan(&[Guard::new(Aspect::Retry, "a")])
            .unwrap_err();
        assert!(err.reason().contains("retry"), "{err}");
    }
}
