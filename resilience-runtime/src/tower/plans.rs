//! [`Plans`]: the plans of a layer's guards, found per request.

use std::sync::Arc;

use crate::aspect::Aspect;
use crate::error::ConfigError;
use crate::plan::{Guard, GuardListError};
use crate::plan_cache::{PlanCache, SitePlan};
use crate::registry::Registry;

/// The plans of a layer's guards: the current one in its registry, found per request with the
/// checks of a call site's (one atomic load of the registry's generation).
pub(crate) struct Plans {
    source: Source,
}

enum Source {
    /// The global registry: plans interned, lent as `&'static` (no reference count per call).
    Global(&'static PlanCache),
    /// Another registry: the plan in an `Arc`, cached per layer.
    Registry(Arc<Registry>, PlanCache),
}

impl Plans {
    /// The plans of `guards` in the global registry.
    pub(super) fn new(guards: &[Guard<'_>], retrying: bool) -> Result<Self, ConfigError> {
        if let Some(problem) = GuardListError::check(guards) {
            return Err(ConfigError::new("guards", problem.to_string()));
        }
        if !retrying && guards.iter().any(|g| g.aspect() == Aspect::Retry) {
            return Err(ConfigError::new(
                "guards",
                "a retry makes its request again, and this layer sends each request once; \
                 build it with `GuardLayer::retrying`, whose service clones each request \
                 (`Request: Clone`)",
            ));
        }
        Ok(Plans {
            source: Source::Global(PlanCache::for_list(guards)),
        })
    }

    /// The plans of `guards` (checked) in `registry`.
    pub(super) fn in_registry(guards: &'static [Guard<'static>], registry: Arc<Registry>) -> Self {
        let source = if std::ptr::eq(&*registry, Registry::global()) {
            Source::Global(PlanCache::for_list(guards))
        } else {
            Source::Registry(registry, PlanCache::new(guards))
        };
        Plans { source }
    }

    pub(super) fn cache(&self) -> &PlanCache {
        match &self.source {
            Source::Global(cache) => cache,
            Source::Registry(_, cache) => cache,
        }
    }

    /// The current plan.
    #[inline]
    pub(crate) fn get(&self) -> SitePlan {
        match &self.source {
            Source::Global(cache) => cache.site_plan(),
            Source::Registry(registry, cache) => cache.site_plan_in(registry),
        }
    }
}
