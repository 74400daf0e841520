//! [`Kind`]: the configurations and instances of one aspect kind, with base inheritance:
//! named configurations resolved against their base chain and the default, and instances
//! created once per name and reconfigured in place.

#[cfg(feature = "serde")]
use std::collections::BTreeSet;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[cfg(feature = "serde")]
use crate::document::ChangeKind;
use crate::error::ConfigError;
use crate::name::Name;

/// A configuration type that can sit in a [`Kind`].
pub(crate) trait Config: Clone + PartialEq + Default + crate::fleet::HasBackend {
    fn base(&self) -> Option<&str>;
    fn inherit(&self, base: &Self) -> Result<Self, ConfigError>;
}

/// The configurations and instances of one aspect kind.
pub(crate) struct Kind<C, I> {
    default: C,
    /// Configurations as given, before resolution.
    configs: HashMap<Name, C>,
    /// The names whose configuration names a base: the only ones a change elsewhere can
    /// affect, so a change re-resolves these and not every configuration.
    derived: HashSet<Name>,
    /// Resolved configurations of the named ones.
    resolved: HashMap<Name, C>,
    instances: HashMap<Name, Arc<I>>,
    /// The names the last document applied configured, and whether it set the default: what
    /// the next document returns to the default if it leaves them out.
    #[cfg(feature = "serde")]
    from_document: BTreeSet<Name>,
    #[cfg(feature = "serde")]
    default_from_document: bool,
}

/// One kind's part of a document, resolved and checked, that commits without failing.
#[cfg(feature = "serde")]
pub(crate) struct Prepared<C> {
    default: C,
    configs: HashMap<Name, C>,
    resolved: HashMap<Name, C>,
    from_document: BTreeSet<Name>,
    default_from_document: bool,
    /// The names the document configures as instances, created if they do not exist.
    instances: Vec<Name>,
    /// `None` for the default configuration; sorted by name.
    pub(crate) changes: Vec<(Option<Name>, ChangeKind)>,
}

/// Reconfigurations of instances decided by a change, to run once the registry's lock is
/// released (see `Registry::change`).
pub(crate) type Pending = Vec<Box<dyn FnOnce() + Send>>;

/// A guard instance as the registry keeps it: created once per name, reconfigured in place.
pub(crate) trait Instance: Send + Sync + 'static {
    type Config: Config + Send + 'static;
    fn config(&self) -> Self::Config;
    fn reconfigure(&self, config: Self::Config);
}

impl<C: Config + Send + 'static, I: Instance<Config = C>> Kind<C, I> {
    pub(crate) fn new(default: C) -> Self {
        Kind {
            default,
            configs: HashMap::new(),
            derived: HashSet::new(),
            resolved: HashMap::new(),
            instances: HashMap::new(),
            #[cfg(feature = "serde")]
            from_document: BTreeSet::new(),
            #[cfg(feature = "serde")]
            default_from_document: false,
        }
    }

    /// The instance of `name`, if it exists.
    pub(crate) fn instance(&self, name: &str) -> Option<&Arc<I>> {
        self.instances.get(name)
    }

    /// The number of instances.
    pub(crate) fn len(&self) -> usize {
        self.instances.len()
    }

    /// The names configured explicitly.
    pub(crate) fn configured(&self) -> impl Iterator<Item = &Name> {
        self.configs.keys()
    }

    /// Whether `name` has a configuration of its own.
    pub(crate) fn is_configured(&self, name: &str) -> bool {
        self.configs.contains_key(name)
    }

    /// The names other configurations use as their base.
    pub(crate) fn bases(&self) -> impl Iterator<Item = &str> {
        self.configs.values().filter_map(|c| c.base())
    }

    pub(crate) fn effective(&self, name: &str) -> C {
        self.resolved.get(name).unwrap_or(&self.default).clone()
    }

    pub(crate) fn all(&self) -> Vec<Arc<I>> {
        let mut all: Vec<(&Name, &Arc<I>)> = self.instances.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, i)| Arc::clone(i)).collect()
    }

    pub(crate) fn get_or_create(&mut self, name: &str, make: impl FnOnce(Name, C) -> I) -> Arc<I> {
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
    pub(crate) fn configure(
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
    pub(crate) fn configure_default(
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

    #[cfg(feature = "serde")]
    /// Resolves what a document sets for this kind, changing nothing: `default` (if the
    /// document sets it) and `named` (`(name, configuration, is an instance)`). A name the
    /// previous document configured and this one leaves out returns to the default, and so
    /// does the default if the previous document set it and this one does not.
    ///
    /// # Errors
    ///
    /// The name (`None` for the default) whose configuration cannot be resolved, and why.
    pub(crate) fn prepare(
        &self,
        default: Option<C>,
        named: Vec<(Name, C, bool)>,
    ) -> Result<Prepared<C>, (Option<Name>, ConfigError)> {
        if let Some(base) = default.as_ref().and_then(|d| d.base()) {
            return Err((
                None,
                ConfigError::new(
                    "base",
                    format!("the default configuration cannot have a base (it names `{base}`)"),
                ),
            ));
        }
        let default_from_document = default.is_some();
        let new_default = match default {
            Some(default) => default,
            None if self.default_from_document => C::default(),
            None => self.default.clone(),
        };
        let from_document: BTreeSet<Name> = named.iter().map(|(n, _, _)| n.clone()).collect();
        let mut configs = self.configs.clone();
        for gone in self.from_document.difference(&from_document) {
            configs.remove(gone);
        }
        let mut instances = Vec::new();
        for (name, config, instance) in named {
            if instance {
                instances.push(name.clone());
            }
            configs.insert(name, config);
        }
        // In name order, so that of several errors the same one is reported every time.
        let mut names: Vec<&Name> = configs.keys().collect();
        names.sort();
        let mut resolved = HashMap::with_capacity(configs.len());
        for name in names {
            let own = Self::resolve(|n| configs.get(n), &new_default, name, &configs[name])
                .map_err(|e| (Some(name.clone()), e))?;
            resolved.insert(name.clone(), own);
        }
        let mut changes = Vec::new();
        if new_default != self.default {
            changes.push((None, ChangeKind::Changed));
        }
        let every: BTreeSet<&Name> = self.resolved.keys().chain(resolved.keys()).collect();
        for name in every {
            let change = match (self.resolved.get(name), resolved.get(name)) {
                (None, Some(_)) => ChangeKind::Added,
                (Some(_), None) => ChangeKind::Removed,
                (Some(old), Some(new)) if old != new => ChangeKind::Changed,
                _ => continue,
            };
            changes.push((Some(name.clone()), change));
        }
        Ok(Prepared {
            default: new_default,
            configs,
            resolved,
            from_document,
            default_from_document,
            instances,
            changes,
        })
    }

    #[cfg(feature = "serde")]
    /// Installs what [`prepare`](Self::prepare) resolved: reconfigures every instance whose
    /// effective configuration changed (in `Pending`) and creates the document's instances
    /// that do not exist yet.
    pub(crate) fn commit(&mut self, prepared: Prepared<C>, make: impl Fn(Name, C) -> I) -> Pending {
        self.derived = prepared
            .configs
            .iter()
            .filter(|(_, c)| c.base().is_some())
            .map(|(n, _)| n.clone())
            .collect();
        self.default = prepared.default;
        self.configs = prepared.configs;
        self.resolved = prepared.resolved;
        self.from_document = prepared.from_document;
        self.default_from_document = prepared.default_from_document;
        let mut pending = Pending::new();
        let mut changed: Vec<(Name, C)> = Vec::new();
        for (name, instance) in &self.instances {
            let effective = self.effective(name);
            if instance.config() != effective {
                changed.push((name.clone(), effective));
            }
        }
        for name in prepared.instances {
            if !self.instances.contains_key(&name) {
                let effective = self.effective(&name);
                changed.push((name, effective));
            }
        }
        for (name, config) in changed {
            self.apply(&name, config, &make, &mut pending);
        }
        pending
    }
}
