//! [`PlanCache`]: a call site's [`Plan`], resolved once and checked with one atomic load per
//! call.
//!
//! # Two caches
//!
//! - **The global registry** (the one the macros use). Its plans are interned: each distinct
//!   plan a call site resolves (the same instances in the same order under the same
//!   re-entrancy policy) is allocated once, kept for the rest of the program, and lent to
//!   calls as a `&'static Plan`. A call touches no reference count and has nothing to give
//!   back, sync or async, and holds one pointer. A registry keeps its instances as long as it
//!   lives (configuring a name changes its instance in place), so a call site's plan changes
//!   only with the precedence or the re-entrancy policy: a call site of `k` guards has at most
//!   `k!` orders × 3 policies distinct plans in a program's life (18 for three gates), and,
//!   under [`set_require_configured`](Registry::set_require_configured), a refusing plan per
//!   guard and policy, which bounds what interning keeps. The first [`SLOTS`] are found lock-free; a call site that
//!   has seen more finds the others under a lock (a program that keeps changing its
//!   precedence pays that, nobody else).
//! - **Any registry.** The plan of the last registry asked, in an `ArcSwapOption`, borrowed
//!   without touching its reference count for a sync call ([`PlanCache::get`]) or as an
//!   `Arc` of its own ([`PlanCache::get_arc`]).
//!
//! # The check of an interned plan
//!
//! `current` packs the global registry's generation at which a slot's plan was found current
//! with the index of that slot, so one load gives both: a call whose registry generation
//! equals the packed one uses that slot's plan. Interning happens under a lock, after reading
//! the generation and before resolving the plan, so a packed generation is never newer than
//! the configuration its plan was resolved from.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;
use once_cell::race::OnceRef;

#[cfg(any(feature = "tower", feature = "reqwest"))]
use crate::name::Name;
use crate::plan::{Guard, GuardListError, Plan};
use crate::registry::Registry;

/// The interned plans a call site finds lock-free. Two guards in two orders under three
/// re-entrancy policies make six distinct plans; three gates in their default order and a
/// few changes of precedence stay within eight.
const SLOTS: usize = 8;
/// The bits of `Interned::current` that hold a slot index.
const SLOT_BITS: u32 = SLOTS.trailing_zeros();
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

const _: () = assert!(SLOTS.is_power_of_two());

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
    /// The plan of the last registry asked through [`get`](Self::get) or
    /// [`get_arc`](Self::get_arc) (other than the global one).
    cached: ArcSwapOption<Plan>,
    /// The plans of the global registry.
    interned: Interned,
}

/// The interned plans of a call site in the global registry (see the module documentation).
struct Interned {
    /// `generation << SLOT_BITS | slot`: the slot whose plan is current at that generation of
    /// the global registry. Zero until the first call: no registry has generation zero.
    current: AtomicU64,
    /// The first distinct plans this call site has used, each allocated once and never freed.
    slots: [OnceRef<'static, Plan>; SLOTS],
    /// Every slot is taken: further plans are in `intern`'s list.
    full: AtomicBool,
    /// Serialises interning (a cold path; readers of `slots` never take it), and holds the
    /// distinct plans beyond the slots, each allocated once and never freed.
    intern: Mutex<Vec<&'static Plan>>,
}

impl PlanCache {
    /// An empty cache for the call site guarded by `guards`, for a `static`.
    ///
    /// # Panics
    ///
    /// If `guards` repeats an aspect kind. In a
    /// `static` (its intended use) this is a compile-time error, not a run-time panic; use
    /// [`Registry::plan`] to check a list built at run time.
    pub const fn new(guards: &'static [Guard<'static>]) -> Self {
        match GuardListError::check(guards) {
            Some(GuardListError::Repeated(_)) => {
                panic!("a guard list repeats an aspect kind; a call takes each aspect once")
            }
            None => PlanCache {
                guards,
                cached: ArcSwapOption::const_empty(),
                interned: Interned {
                    current: AtomicU64::new(0),
                    slots: [const { OnceRef::new() }; SLOTS],
                    full: AtomicBool::new(false),
                    intern: Mutex::new(Vec::new()),
                },
            },
        }
    }

    /// The cache of a guard list known only at run time (a tower layer's, already checked):
    /// one per distinct list, kept for the life of the process as the names in it are, so
    /// that a layer built again over the same guards shares its interned plans.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    pub(crate) fn for_list(guards: &[Guard<'_>]) -> &'static PlanCache {
        static LISTS: Mutex<Vec<&'static PlanCache>> = Mutex::new(Vec::new());
        let mut lists = LISTS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&known) = lists.iter().find(|cache| cache.guards == guards) {
            return known;
        }
        let owned: Vec<Guard<'static>> = guards
            .iter()
            .map(|guard| Guard::new(guard.aspect(), Name::from(guard.name()).as_static()))
            .collect();
        let cache: &'static PlanCache = Box::leak(Box::new(PlanCache::new(owned.leak())));
        lists.push(cache);
        cache
    }

    /// The guards of this call site, as written.
    pub fn guards(&self) -> &'static [Guard<'static>] {
        self.guards
    }

    /// The plan in `registry`, from the cache if it is current, borrowed for a short call.
    ///
    /// In the [global](Registry::global) registry the plan is interned: the handle is a plain
    /// reference to a plan that lives as long as the program. An interned plan found current
    /// again keeps the [`generation`](Plan::generation) it was first resolved at: the cache
    /// knows it current; ask the cache again rather than compare generations. In any other registry, it
    /// borrows the cached plan through `arc-swap` without touching its reference count, using
    /// one of a few borrowing slots the thread shares with every `ArcSwap` in the process:
    /// hold it for a call that does not await, and use [`get_arc`](Self::get_arc) to hold a
    /// plan across `.await` or keep it. A plan replaced meanwhile lives until its last handle
    /// is dropped.
    pub fn get(&self, registry: &Registry) -> CachedPlan {
        if std::ptr::eq(registry, Registry::global()) {
            return CachedPlan(Cached::Interned(self.global()));
        }
        let generation = registry.generation();
        let cached = self.cached.load();
        if cached
            .as_ref()
            .is_some_and(|plan| plan.generation() == generation)
        {
            return CachedPlan(Cached::Loaded(cached));
        }
        drop(cached);
        CachedPlan(Cached::Built(self.rebuild(registry)))
    }

    /// The plan in `registry`, from the cache if it is current, as an `Arc` of its own: to
    /// hold across `.await`, or to keep.
    pub fn get_arc(&self, registry: &Registry) -> Arc<Plan> {
        let generation = registry.generation();
        match self.cached.load_full() {
            Some(plan) if plan.generation() == generation => plan,
            _ => self.rebuild(registry),
        }
    }

    /// The plan in `registry` as a call holds it: interned in the global registry, an `Arc`
    /// of its own in any other.
    #[inline]
    pub(crate) fn site_plan_in(&self, registry: &Registry) -> SitePlan {
        if std::ptr::eq(registry, Registry::global()) {
            SitePlan::interned(self.global())
        } else {
            SitePlan::shared(self.get_arc(registry))
        }
    }

    /// The plan in the registry in [scope](Registry::scope), else in the global one, as a
    /// call holds it.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    pub(crate) fn site_plan(&self) -> SitePlan {
        crate::registry::with_scoped(|scoped| match scoped {
            None => SitePlan::interned(self.global()),
            Some(registry) => self.site_plan_in(registry),
        })
    }

    /// The plan in the global registry, interned.
    #[inline]
    pub(crate) fn global(&self) -> &'static Plan {
        let registry = Registry::global();
        let current = self.interned.current.load(Ordering::Acquire);
        if current >> SLOT_BITS == registry.generation() {
            // `current` names a slot only once its plan is set (released by that store).
            if let Some(plan) = self.interned.slots[(current & SLOT_MASK) as usize].get() {
                return plan;
            }
        }
        self.global_miss(registry)
    }

    /// [`global`](Self::global) when the interned plan is not known current: finds the
    /// current plan among the interned ones, or interns it.
    #[cold]
    #[inline(never)]
    fn global_miss(&self, registry: &Registry) -> &'static Plan {
        let interned = &self.interned;
        let mut overflow = interned
            .intern
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if interned.full.load(Ordering::Relaxed) {
            // Beyond the slots: found (or interned) under the lock, on every call.
            let plan = registry.resolve_plan(self.guards);
            if let Some(known) = overflow.iter().find(|known| known.same_as(&plan)) {
                return known;
            }
            let leaked: &'static Plan = Box::leak(Box::new(plan));
            overflow.push(leaked);
            return leaked;
        }
        // Read before the plan is resolved: the plan is never older than its label.
        let generation = registry.generation();
        let current = interned.current.load(Ordering::Acquire);
        if current >> SLOT_BITS == generation {
            // Another call interned it while this one waited for the lock.
            if let Some(plan) = interned.slots[(current & SLOT_MASK) as usize].get() {
                return plan;
            }
        }
        let plan = registry.resolve_plan(self.guards);
        for (index, slot) in interned.slots.iter().enumerate() {
            let found = match slot.get() {
                Some(known) if known.same_as(&plan) => known,
                Some(_) => continue,
                None => {
                    let leaked: &'static Plan = Box::leak(Box::new(plan));
                    // Slots are set only under `intern`: this one is still empty.
                    let _ = slot.set(leaked);
                    leaked
                }
            };
            // A generation too large to pack (2^61 changes: never in practice) is simply
            // not recorded, and the next call looks again.
            if generation >> (u64::BITS - SLOT_BITS) == 0 {
                interned
                    .current
                    .store(generation << SLOT_BITS | index as u64, Ordering::Release);
            }
            return found;
        }
        interned.full.store(true, Ordering::Relaxed);
        let leaked: &'static Plan = Box::leak(Box::new(plan));
        overflow.push(leaked);
        leaked
    }

    #[cold]
    fn rebuild(&self, registry: &Registry) -> Arc<Plan> {
        let plan = Arc::new(registry.resolve_plan(self.guards));
        self.cached.store(Some(Arc::clone(&plan)));
        plan
    }
}

/// A call site's plan as a guarded call holds it (sync or async), dereferencing to the
/// [`Plan`]: in the global registry an interned plan (a plain reference, nothing to give
/// back), in any other (a [scope](Registry::scope), a `registry = path`) an `Arc` of its own.
///
/// One word, not an enum of the two (16 bytes): an `async fn` keeps it across `.await`, and a
/// guarded future of more than 128 bytes is moved with a `memcpy` (see
/// `tests/tests/future_size.rs`). Written by hand for that: the address of the plan, with its
/// low bit set when the handle owns a strong count of an `Arc<Plan>` (a plan's alignment is at
/// least 8, so the bit is otherwise always clear).
#[doc(hidden)]
pub struct SitePlan {
    tagged: NonNull<Plan>,
    _owns: PhantomData<Arc<Plan>>,
}

const SHARED: usize = 1;
const _: () = assert!(std::mem::align_of::<Plan>() > SHARED);

#[allow(unsafe_code)]
// SAFETY: a `SitePlan` is a `&'static Plan` or an `Arc<Plan>`, both `Send` and `Sync` because
// `Plan` is (checked below).
unsafe impl Send for SitePlan {}
#[allow(unsafe_code)]
// SAFETY: as for `Send`.
unsafe impl Sync for SitePlan {}
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Plan>();
};

impl SitePlan {
    #[inline(always)]
    pub(crate) fn interned(plan: &'static Plan) -> Self {
        SitePlan {
            tagged: NonNull::from(plan),
            _owns: PhantomData,
        }
    }

    pub(crate) fn shared(plan: Arc<Plan>) -> Self {
        #[allow(unsafe_code)]
        // SAFETY: `Arc::into_raw` never returns null.
        let raw = unsafe { NonNull::new_unchecked(Arc::into_raw(plan).cast_mut()) };
        SitePlan {
            tagged: raw.map_addr(|addr| addr | SHARED),
            _owns: PhantomData,
        }
    }

    /// The plan's address (`map_addr` keeps the pointer's provenance).
    #[inline(always)]
    fn untagged(&self) -> *mut Plan {
        self.tagged.as_ptr().map_addr(|addr| addr & !SHARED)
    }
}

impl Deref for SitePlan {
    type Target = Plan;

    #[inline(always)]
    fn deref(&self) -> &Plan {
        #[allow(unsafe_code)]
        // SAFETY: the untagged address is that of a `&'static Plan`, or of the plan of an
        // `Arc` whose strong count this handle owns until it is dropped.
        unsafe {
            &*self.untagged()
        }
    }
}

impl Drop for SitePlan {
    #[inline(always)]
    fn drop(&mut self) {
        if self.tagged.addr().get() & SHARED != 0 {
            #[allow(unsafe_code)]
            // SAFETY: tagged by `shared`, from `Arc::into_raw`: this gives its count back, once.
            unsafe {
                drop(Arc::from_raw(self.untagged()));
            }
        }
    }
}

impl fmt::Debug for SitePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A [`Plan`] borrowed from a [`PlanCache`] for one short call (see [`PlanCache::get`]):
/// dereferences to the plan; [`into_arc`](Self::into_arc) turns it into an `Arc` to keep.
pub struct CachedPlan(Cached);

impl CachedPlan {
    /// The plan as an `Arc` of its own, to hold across `.await` or keep (an interned plan is
    /// copied into a new `Arc`).
    pub fn into_arc(self) -> Arc<Plan> {
        match self.0 {
            Cached::Interned(plan) => Arc::new(plan.clone()),
            Cached::Loaded(guard) => match arc_swap::Guard::into_inner(guard) {
                Some(plan) => plan,
                None => unreachable!("a loaded plan is present"),
            },
            Cached::Built(plan) => plan,
        }
    }
}

enum Cached {
    /// Interned for the global registry.
    Interned(&'static Plan),
    /// Borrowed from the cache through `arc-swap` (no reference count touched in the common
    /// case); always `Some`.
    Loaded(arc_swap::Guard<Option<Arc<Plan>>>),
    /// Built by this call.
    Built(Arc<Plan>),
}

impl Deref for CachedPlan {
    type Target = Plan;

    #[inline]
    fn deref(&self) -> &Plan {
        match &self.0 {
            Cached::Interned(plan) => plan,
            Cached::Loaded(guard) => match &**guard {
                Some(plan) => plan,
                None => unreachable!("a loaded plan is present"),
            },
            Cached::Built(plan) => plan,
        }
    }
}

impl fmt::Debug for CachedPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let interned: Vec<&Plan> = self.interned.slots.iter().map_while(OnceRef::get).collect();
        f.debug_struct("PlanCache")
            .field("guards", &self.guards)
            .field("cached", &*self.cached.load())
            .field("interned", &interned)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aspect::Aspect;

    #[test]
    fn a_call_site_with_every_slot_taken_interns_its_plans_beyond_them() {
        static SITE: PlanCache = PlanCache::new(&[
            Guard::circuit_breaker("slots-full"),
            Guard::bulkhead("slots-full"),
        ]);
        let global = Registry::global();
        // Other plans in every slot, as if the call site had seen that many distinct plans.
        for slot in &SITE.interned.slots {
            let other = global.resolve_plan(&[Guard::bulkhead("slots-full-other")]);
            slot.set(Box::leak(Box::new(other))).unwrap();
        }
        let first = SITE.global();
        for _ in 0..2 {
            let plan = SITE.global();
            let order: Vec<Aspect> = plan.guards().map(|(aspect, _)| aspect).collect();
            assert_eq!(order, [Aspect::Bulkhead, Aspect::CircuitBreaker]);
            assert!(SITE.interned.full.load(Ordering::Relaxed));
            // Interned beyond the slots: the same plan again, not a new one per call.
            assert!(std::ptr::eq(plan, first));
        }
        assert_eq!(SITE.interned.intern.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_refusing_plan_is_never_interned_as_a_plan_that_runs() {
        let registry = Registry::new();
        let runs = registry.resolve_plan(&[]);
        registry.set_require_configured(true);
        let refuses = registry.resolve_plan(&[Guard::bulkhead("never-configured")]);
        assert!(refuses.unconfigured().is_some());
        // Neither has a guard to compare: the refusal tells them apart.
        assert!(!runs.same_as(&refuses) && !refuses.same_as(&runs));
        let other = registry.resolve_plan(&[Guard::retry("never-configured")]);
        assert!(!refuses.same_as(&other), "a refusal of another guard");
        assert!(
            registry.bulkheads().is_empty(),
            "no instance made to refuse"
        );
    }

    #[test]
    fn a_shared_site_plan_holds_one_count_of_its_plan_and_gives_it_back() {
        let registry = Registry::new();
        let plan = Arc::new(registry.resolve_plan(&[Guard::bulkhead("site-plan")]));
        let site = SitePlan::shared(Arc::clone(&plan));
        assert_eq!(Arc::strong_count(&plan), 2);
        assert!(std::ptr::eq(&*site, &*plan));
        assert_eq!(site.guards().count(), 1);
        drop(site);
        assert_eq!(Arc::strong_count(&plan), 1);

        // Interned plans live as long as the process: held by a static, as the cache holds them.
        static INTERNED: std::sync::OnceLock<Plan> = std::sync::OnceLock::new();
        let interned: &'static Plan = INTERNED.get_or_init(|| (*plan).clone());
        let site = SitePlan::interned(interned);
        assert!(std::ptr::eq(&*site, interned));
        assert_eq!(
            std::mem::size_of::<SitePlan>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn an_interned_plan_is_lent_until_the_generation_moves() {
        static SITE: PlanCache = PlanCache::new(&[Guard::bulkhead("interned-unit")]);
        let first = SITE.global();
        let again = SITE.global();
        assert!(std::ptr::eq(first, again));
        let packed = SITE.interned.current.load(Ordering::Relaxed);
        assert_eq!(packed >> SLOT_BITS, Registry::global().generation());
        assert_eq!(packed & SLOT_MASK, 0, "the first plan takes the first slot");
    }
}
