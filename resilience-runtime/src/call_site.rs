//! [`CallSite`]: a guarded function as the macros record it, listed by
//! [`Registry::call_sites`] and checked by [`Registry::validate`].

use std::collections::BTreeSet;
use std::fmt;

use crate::aspect::Aspect;
use crate::plan::Guard;
use crate::plan_cache::{PlanCache, SitePlan};
use crate::registry::{with_scoped, Registry};

/// A function guarded by the attribute macros: where it is, and which guards it runs through.
///
/// Each guarded function owns one `CallSite` in a `static`, registered at program start (with
/// `inventory`), and its plan cache. Only the crates linked into the program register their
/// call sites: a library whose guarded functions are never linked in has none listed.
pub struct CallSite {
    module_path: &'static str,
    function: &'static str,
    file: &'static str,
    line: u32,
    plan: PlanCache,
    /// The registry fixed by `registry = path`, if any.
    registry: Option<fn() -> &'static Registry>,
}

impl CallSite {
    /// A call site; the macros build one per guarded function.
    #[doc(hidden)]
    pub const fn new(
        module_path: &'static str,
        function: &'static str,
        file: &'static str,
        line: u32,
        guards: &'static [Guard<'static>],
    ) -> Self {
        CallSite {
            module_path,
            function,
            file,
            line,
            plan: PlanCache::new(guards),
            registry: None,
        }
    }

    /// The call site with its registry fixed (`registry = path`): its calls, and
    /// [`Registry::validate`], use that registry whatever is in scope.
    #[doc(hidden)]
    pub const fn with_registry(mut self, registry: fn() -> &'static Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Whether `registry` is the one this call site's calls use: its fixed one, or, without
    /// one, any (the global registry, or the one in scope).
    fn runs_on(&self, registry: &Registry) -> bool {
        self.registry
            .is_none_or(|fixed| std::ptr::eq(fixed(), registry))
    }

    /// The module the function is in (`my_service::orders`).
    pub fn module_path(&self) -> &'static str {
        self.module_path
    }

    /// The function's name (`create_order`).
    pub fn function(&self) -> &'static str {
        self.function
    }

    /// The source file.
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// The line of the function's name in the source file.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// The guards as written on the function (not in execution order; see
    /// [`Registry::precedence`]).
    pub fn guards(&self) -> &'static [Guard<'static>] {
        self.plan.guards()
    }

    /// This call site's plan in the registry in [scope](Registry::scope), else in the global
    /// one, cached. A global plan is interned: a plain reference that a sync or an async call
    /// holds for as long as it runs; outside every scope this costs one thread-local read.
    #[doc(hidden)]
    #[inline]
    pub fn plan(&self) -> SitePlan {
        with_scoped(|scoped| match scoped {
            None => SitePlan::interned(self.plan.global()),
            Some(registry) => self.plan_scoped(registry),
        })
    }

    /// [`plan`](Self::plan) inside a scope: out of the way of a call outside every scope.
    #[cold]
    #[inline(never)]
    fn plan_scoped(&self, registry: &Registry) -> SitePlan {
        self.plan_in(registry)
    }

    /// This call site's plan in its fixed registry (`registry = path` on the annotation),
    /// cached.
    #[doc(hidden)]
    pub fn plan_fixed(&self) -> SitePlan {
        match self.registry {
            Some(registry) => self.plan_in(registry()),
            None => self.plan(),
        }
    }

    /// This call site's plan in `registry`, cached.
    fn plan_in(&self, registry: &Registry) -> SitePlan {
        self.plan.site_plan_in(registry)
    }
}

impl fmt::Debug for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallSite")
            .field(
                "function",
                &format_args!("{}::{}", self.module_path, self.function),
            )
            .field("location", &format_args!("{}:{}", self.file, self.line))
            .field("guards", &self.guards())
            .finish()
    }
}

/// The entry the macros submit to `inventory` for each call site.
#[doc(hidden)]
pub struct CallSiteEntry(pub &'static CallSite);

inventory::collect!(CallSiteEntry);

/// Every call site linked into the program, sorted by file and line.
pub(crate) fn all() -> Vec<&'static CallSite> {
    let mut sites: Vec<&'static CallSite> = inventory::iter::<CallSiteEntry>
        .into_iter()
        .map(|entry| entry.0)
        .collect();
    sites.sort_by_key(|s| (s.file, s.line, s.module_path, s.function));
    sites
}

/// What [`Registry::validate`] found: instance names the annotations use without a
/// configuration of their own (an error at startup), and configurations nothing uses.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Validation {
    /// Guards used by annotations whose name was never configured (they run on the default
    /// configuration), with the functions that use them.
    pub unconfigured: Vec<UnconfiguredGuard>,
    /// Configured names that no annotation uses (a typo, or a configuration left behind).
    pub unused: Vec<(Aspect, String)>,
}

/// An instance name used by annotations but never configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnconfiguredGuard {
    /// The aspect kind.
    pub aspect: Aspect,
    /// The instance name.
    pub name: String,
    /// The functions that use it, as `module::function (file:line)`.
    pub used_by: Vec<String>,
}

impl Validation {
    /// Whether every name the annotations use is configured.
    pub fn is_ok(&self) -> bool {
        self.unconfigured.is_empty()
    }
}

/// `{:?}` is the report (what `registry.validate()?` in `main` prints); `{:#?}` the fields.
impl fmt::Debug for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.debug_struct("Validation")
                .field("unconfigured", &self.unconfigured)
                .field("unused", &self.unused)
                .finish()
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

impl fmt::Display for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unconfigured.is_empty() && self.unused.is_empty() {
            return f.write_str("every guard used by an annotation is configured");
        }
        for guard in &self.unconfigured {
            writeln!(
                f,
                "{} `{}` has no configuration (it runs on the default configuration, or is \
                 refused if the registry requires configured names); used by {}",
                guard.aspect,
                guard.name,
                guard.used_by.join(", ")
            )?;
        }
        for (aspect, name) in &self.unused {
            writeln!(
                f,
                "{aspect} `{name}` is configured but no annotation uses it"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Validation {}

/// Checks `sites` against the configured names of `registry`.
pub(crate) fn validate(
    registry: &Registry,
    sites: &[&'static CallSite],
) -> Result<Validation, Validation> {
    let configured: BTreeSet<(Aspect, String)> = registry.configured_names().into_iter().collect();
    let mut used: BTreeSet<(Aspect, String)> = BTreeSet::new();
    let mut unconfigured: Vec<UnconfiguredGuard> = Vec::new();
    for site in sites.iter().filter(|site| site.runs_on(registry)) {
        for guard in site.guards() {
            let key = (guard.aspect(), guard.name().to_owned());
            let user = format!(
                "{}::{} ({}:{})",
                site.module_path, site.function, site.file, site.line
            );
            if !configured.contains(&key) {
                match unconfigured
                    .iter_mut()
                    .find(|u| u.aspect == key.0 && u.name == key.1)
                {
                    Some(existing) => existing.used_by.push(user),
                    None => unconfigured.push(UnconfiguredGuard {
                        aspect: key.0,
                        name: key.1.clone(),
                        used_by: vec![user],
                    }),
                }
            }
            used.insert(key);
        }
    }
    let bases = registry.base_names();
    let unused = configured
        .into_iter()
        .filter(|key| !used.contains(key) && !bases.contains(key))
        .collect();
    unconfigured.sort_by(|a, b| (a.aspect, &a.name).cmp(&(b.aspect, &b.name)));
    let validation = Validation {
        unconfigured,
        unused,
    };
    if validation.is_ok() {
        Ok(validation)
    } else {
        Err(validation)
    }
}

impl Registry {
    /// Every function guarded by the attribute macros in the crates linked into this program,
    /// sorted by file and line. A crate whose guarded functions are not linked in (nothing
    /// calls into it) contributes none.
    pub fn call_sites(&self) -> Vec<&'static CallSite> {
        all()
    }

    /// Checks the instance names used by the annotations against this registry's
    /// configurations, so a service can fail fast at startup. A function whose annotation
    /// fixes another registry (`registry = path`) is that registry's to check, not this one's.
    ///
    /// Both sides are a [`Validation`], because both carry the same report: an unconfigured
    /// name makes it an `Err`, so `registry.validate()?` stops `main` (printing the report);
    /// unused configurations alone do not, and are still in the `Ok` side for a service to log.
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
        validate(self, &all())
    }

    /// [`validate`](Self::validate) for the call sites in the module `module` and its
    /// submodules only (`my_service` takes `my_service::orders`, not `my_service_admin`): for a
    /// binary that links guarded functions it never calls, such as a library's other tools.
    /// A configuration is reported unused if none of these call sites uses it.
    ///
    /// # Errors
    ///
    /// A [`Validation`] as [`validate`](Self::validate)'s, of these call sites.
    pub fn validate_module(&self, module: &str) -> Result<Validation, Validation> {
        let within = |path: &str| {
            path == module
                || path
                    .strip_prefix(module)
                    .is_some_and(|rest| rest.starts_with("::"))
        };
        let sites: Vec<&'static CallSite> = all()
            .into_iter()
            .filter(|s| within(s.module_path))
            .collect();
        validate(self, &sites)
    }
}
