//! [`PlanCache`]: a call site's [`Plan`], resolved once and checked with one atomic load per
//! call.
//!
//! # Two caches
//!
//! - **The global registry** (the one the macros use). Its plans are interned: each distinct
//!   plan a call site resolves (the same instances in the same order under the same
//!   re-entrancy policy) is allocated once, kept for the rest of the program in one of
//!   [`SLOTS`] slots of the call site, and lent to calls as a `&'static Plan`. A call touches
//!   no reference count and has nothing to give back, sync or async. A registry keeps its
//!   instances as long as it lives (configuring a name changes its instance in place), so a
//!   call site's plan changes only with the precedence or the re-entrancy policy: a few
//!   distinct plans per call site in a program's life. Should a call site see more than
//!   [`SLOTS`], it uses the second cache from then on.
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
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;
use once_cell::race::OnceRef;

use crate::plan::{Guard, GuardListError, Plan};
use crate::registry::Registry;

/// The interned plans a call site can hold. Two guards in two orders under three re-entrancy
/// policies make six distinct plans.
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
    /// The distinct plans this call site has used, each allocated once and never freed.
    slots: [OnceRef<'static, Plan>; SLOTS],
    /// Every slot is taken: plans come from `PlanCache::cached` instead.
    full: AtomicBool,
    /// Serialises interning (a cold path); readers never take it.
    intern: Mutex<()>,
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
                interned: Interned {
                    current: AtomicU64::new(0),
                    slots: [const { OnceRef::new() }; SLOTS],
                    full: AtomicBool::new(false),
                    intern: Mutex::new(()),
                },
            },
        }
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
            return CachedPlan(match self.global() {
                SitePlan::Interned(plan) => Cached::Interned(plan),
                SitePlan::Owned(plan) => Cached::Built(plan),
            });
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

    /// The plan in the global registry: interned (the common case) or, if this call site has
    /// used more distinct plans than it has slots, owned.
    #[inline]
    pub(crate) fn global(&self) -> SitePlan {
        let registry = Registry::global();
        let current = self.interned.current.load(Ordering::Acquire);
        if current >> SLOT_BITS == registry.generation() {
            // `current` names a slot only once its plan is set (released by that store).
            if let Some(plan) = self.interned.slots[(current & SLOT_MASK) as usize].get() {
                return SitePlan::Interned(plan);
            }
        }
        self.global_miss(registry)
    }

    /// [`global`](Self::global) when the interned plan is not known current: finds the
    /// current plan among the interned ones, or interns it.
    #[cold]
    #[inline(never)]
    fn global_miss(&self, registry: &Registry) -> SitePlan {
        let interned = &self.interned;
        if interned.full.load(Ordering::Relaxed) {
            return SitePlan::Owned(self.get_arc(registry));
        }
        let _interning = interned
            .intern
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Read before the plan is resolved: the plan is never older than its label.
        let generation = registry.generation();
        let current = interned.current.load(Ordering::Acquire);
        if current >> SLOT_BITS == generation {
            // Another call interned it while this one waited for the lock.
            if let Some(plan) = interned.slots[(current & SLOT_MASK) as usize].get() {
                return SitePlan::Interned(plan);
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
            return SitePlan::Interned(found);
        }
        interned.full.store(true, Ordering::Relaxed);
        SitePlan::Owned(self.get_arc(registry))
    }

    #[cold]
    fn rebuild(&self, registry: &Registry) -> Arc<Plan> {
        let plan = Arc::new(registry.resolve_plan(self.guards));
        self.cached.store(Some(Arc::clone(&plan)));
        plan
    }
}

/// A call site's plan in the global registry, as a guarded call holds it (sync or async).
#[doc(hidden)]
pub enum SitePlan {
    /// Interned: lives as long as the program.
    Interned(&'static Plan),
    /// This call site has used more distinct plans than it can intern.
    Owned(Arc<Plan>),
}

impl Deref for SitePlan {
    type Target = Plan;

    #[inline]
    fn deref(&self) -> &Plan {
        match self {
            SitePlan::Interned(plan) => plan,
            SitePlan::Owned(plan) => plan,
        }
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
    fn a_call_site_with_every_slot_taken_gets_its_current_plan_owned() {
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
        for _ in 0..2 {
            let plan = SITE.global();
            assert!(matches!(plan, SitePlan::Owned(_)));
            let order: Vec<Aspect> = plan.guards().map(|(aspect, _)| aspect).collect();
            assert_eq!(order, [Aspect::Bulkhead, Aspect::CircuitBreaker]);
            assert!(SITE.interned.full.load(Ordering::Relaxed));
        }
    }

    #[test]
    fn an_interned_plan_is_lent_until_the_generation_moves() {
        static SITE: PlanCache = PlanCache::new(&[Guard::bulkhead("interned-unit")]);
        let SitePlan::Interned(first) = SITE.global() else {
            panic!("the first plan of a call site is interned");
        };
        let SitePlan::Interned(again) = SITE.global() else {
            panic!("interned");
        };
        assert!(std::ptr::eq(first, again));
        let packed = SITE.interned.current.load(Ordering::Relaxed);
        assert_eq!(packed >> SLOT_BITS, Registry::global().generation());
        assert_eq!(packed & SLOT_MASK, 0, "the first plan takes the first slot");
    }
}
