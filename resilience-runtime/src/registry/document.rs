//! Applying a [`ConfigDocument`] to a [`Registry`]: every kind resolved and checked first, then
//! all of it installed under one lock, so a document with any error changes nothing.

#[cfg(feature = "toml")]
use std::path::Path;

use super::kind::Prepared;
use super::{Registered, Registry, State};
use crate::aspect::{aspect_table, Aspect};
use crate::bulkhead::{Bulkhead, BulkheadConfig};
use crate::circuit_breaker::{CircuitBreaker, CircuitBreakerConfig};
use crate::document::keys::SetKeys;
use crate::document::raw::{
    BulkheadSettings, CircuitBreakerSettings, FaultSettings, HedgeSettings, PrecedenceSettings,
    RateLimiterSettings, RetrySettings, Settings, TimeLimiterSettings,
};
use crate::document::{
    Change, ChangeKind, Changes, ConfigDocument, DocumentError, DocumentSettings, Section, Setting,
};
use crate::error::ConfigError;
use crate::fault::{FaultConfig, FaultInjector};
use crate::fleet::Connection;
use crate::hedge::{Hedge, HedgeConfig};
use crate::name::Name;
use crate::rate_limiter::{RateLimiter, RateLimiterConfig};
use crate::retry::{Retry, RetryConfig};
use crate::time_limiter::{TimeLimiter, TimeLimiterConfig};

use super::kind::Pending;
use super::precedence::Precedence;

/// The name of the default configuration in a kind's `configs`, as in Resilience4j.
const DEFAULT: &str = "default";

impl Registry {
    /// Applies a whole configuration: every kind's default and named configurations and
    /// instances, the precedence table and the re-entrancy policy (see [`ConfigDocument`] for
    /// its shape). All or nothing: a document with any error changes nothing.
    ///
    /// Applying a document again, or a new one, reconfigures in place the instances whose
    /// effective configuration changed (their handles and subscribers stay; an instance whose
    /// configuration is the same is left alone: a breaker keeps its state). What the previous
    /// document set and this one leaves out returns to the default; what was configured in
    /// code and the document does not name is left as it is.
    ///
    /// # Errors
    ///
    /// A [`DocumentError`] with the key path of the first refused value (in kind, then name
    /// order): a value a builder refuses, an unknown or cyclic `base_config`, a name that is
    /// both a configuration and an instance, a tie in the precedence table.
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn apply_document(&self, document: &ConfigDocument) -> Result<Changes, DocumentError> {
        let settings = &document.settings;
        let redis = self.document_connection(settings)?;
        let redis_for = || redis.as_ref().cloned().or_else(|| self.fleet_connection());
        self.change_with(|state, clock| {
            let kinds = PreparedKinds::prepare(self, state, settings, &redis_for)?;
            let (precedence, precedence_set) = prepare_precedence(state, settings)?;

            // Everything is resolved: from here on nothing fails.
            let mut changes = Vec::new();
            let mut pending = Pending::new();
            kinds.commit(self, state, clock, &mut changes, &mut pending);
            for aspect in Aspect::ALL {
                if precedence.of(aspect) != state.precedence.of(aspect) {
                    changes.push(Change {
                        setting: Setting::Precedence(aspect),
                        kind: ChangeKind::Changed,
                    });
                }
            }
            state.precedence = precedence;
            state.precedence_from_document = precedence_set;
            #[cfg(feature = "redis")]
            if let Some(redis) = &redis {
                self.set_redis(redis.clone());
            }
            apply_switch(
                settings.reentrancy_policy,
                (&mut state.reentrancy, &mut state.reentrancy_from_document),
                Setting::ReentrancyPolicy,
                &mut changes,
            );
            apply_switch(
                settings.require_configured,
                (
                    &mut state.require_configured,
                    &mut state.require_configured_from_document,
                ),
                Setting::RequireConfigured,
                &mut changes,
            );
            Ok((pending, Changes { changes }))
        })
    }

    /// Reads a TOML document and applies it ([`apply_document`](Self::apply_document)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use resilience_runtime::Registry;
    ///
    /// let registry = Registry::new();
    /// let document = r#"
    ///     [bulkhead.instances.orders]
    ///     max_concurrent_calls = 80
    ///     max_wait_duration = "500ms"
    ///
    ///     [circuit_breaker.instances.orders]
    ///     failure_rate_threshold = 50
    ///     sliding_window_size = 100
    /// "#;
    /// let changes = registry.load_toml(document)?;
    /// assert_eq!(changes.to_string(), "bulkhead `orders`: added\ncircuit breaker `orders`: added");
    /// assert_eq!(registry.bulkhead_config("orders").max_wait_duration(), Duration::from_millis(500));
    ///
    /// // Loaded again unchanged: nothing to do, and the breaker keeps its state.
    /// let breaker = registry.circuit_breaker("orders");
    /// breaker.transition_to_open_state()?;
    /// assert!(registry.load_toml(document)?.is_empty());
    /// assert_eq!(breaker.state(), resilience_runtime::CircuitState::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`DocumentError`] with the line, column and key path: a syntax error, an unknown key
    /// (with the closest valid one, or what to write for a Resilience4j key that has no
    /// equivalent), a value of the wrong type, a duration without a unit, or anything
    /// [`apply_document`](Self::apply_document) refuses. Nothing is applied then.
    #[cfg(feature = "toml")]
    #[cfg_attr(docsrs, doc(cfg(feature = "toml")))]
    pub fn load_toml(&self, text: &str) -> Result<Changes, DocumentError> {
        let parsed = crate::document::toml::parse(text)?;
        self.apply_document(&parsed.document)
            .map_err(|e| parsed.locate(e))
    }

    /// Reads the TOML file at `path` and applies it ([`load_toml`](Self::load_toml)); call it
    /// again to reload the file. An error names the file.
    ///
    /// # Errors
    ///
    /// A [`DocumentError`]: the file cannot be read, or [`load_toml`](Self::load_toml)
    /// refuses it. Nothing is applied then.
    #[cfg(feature = "toml")]
    #[cfg_attr(docsrs, doc(cfg(feature = "toml")))]
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<Changes, DocumentError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| DocumentError::io(path, e))?;
        self.load_toml(&text).map_err(|e| e.in_file(path))
    }
}

impl Registry {
    /// The connection a document's `[redis]` table describes (the registry's own when it is
    /// the same), or `None` when it has none.
    fn document_connection(
        &self,
        settings: &DocumentSettings,
    ) -> Result<Option<Connection>, DocumentError> {
        let Some(redis) = &settings.redis else {
            return Ok(None);
        };
        let at = |e: ConfigError| {
            let key = if redis.set_keys().contains(&e.field()) {
                vec!["redis".to_owned(), e.field().to_owned()]
            } else {
                vec!["redis".to_owned()]
            };
            DocumentError::config(key, e)
        };
        #[cfg(feature = "redis")]
        return redis
            .connection(
                self.redis
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone(),
            )
            .map(Some)
            .map_err(at);
        #[cfg(not(feature = "redis"))]
        return Err(at(ConfigError::new(
            "redis",
            "a `[redis]` table needs the `redis` feature of resilience-runtime: enable it, or \
             remove the table",
        )));
    }
}

/// The key path of `name`'s table in `section` of kind `aspect`, and of its `key` if known.
fn table_path(aspect: Aspect, section: &str, name: &str, key: Option<&str>) -> Vec<String> {
    let mut path = vec![
        aspect.as_str().to_owned(),
        section.to_owned(),
        name.to_owned(),
    ];
    // A key of a nested table (`adaptive.min_limit`) is one segment per table.
    path.extend(
        key.into_iter()
            .flat_map(|key| key.split('.'))
            .map(str::to_owned),
    );
    path
}

/// Where a kind is in a document: its section, and its number in `[precedence]`. One impl
/// per kind of [`aspect_table!`], which the walk over the kinds asks for.
trait Documented: Registered {
    type Settings: Settings<Config = Self::Config>;
    fn section(settings: &DocumentSettings) -> Option<&Section<Self::Settings>>;
    fn precedence(precedence: &PrecedenceSettings) -> Option<i32>;
}

macro_rules! documented {
    ($($instance:ty, $settings:ty, $key:ident;)*) => {
        $(impl Documented for $instance {
            type Settings = $settings;
            fn section(settings: &DocumentSettings) -> Option<&Section<$settings>> {
                settings.$key.as_ref()
            }
            fn precedence(precedence: &PrecedenceSettings) -> Option<i32> {
                precedence.$key
            }
        })*
    };
}

documented! {
    Bulkhead, BulkheadSettings, bulkhead;
    RateLimiter, RateLimiterSettings, rate_limiter;
    Retry, RetrySettings, retry;
    Hedge, HedgeSettings, hedge;
    CircuitBreaker, CircuitBreakerSettings, circuit_breaker;
    TimeLimiter, TimeLimiterSettings, time_limiter;
    FaultInjector, FaultSettings, fault;
}

/// Walks [`aspect_table!`]: every kind's section resolved, then installed; and the
/// precedence the document gives each kind.
macro_rules! prepared_kinds {
    ($(
        $(#[$doc:meta])*
        $variant:ident($instance:ident, $config:ident, $field:ident):
            $snake:literal, $words:literal, precedence $precedence:literal;
    )*) => {
        /// Every kind's section, resolved and checked.
        struct PreparedKinds {
            $($field: Prepared<$config>,)*
        }

        impl PreparedKinds {
            /// Resolves every kind's section, in the table's order, changing nothing.
            fn prepare(
                registry: &Registry,
                state: &State,
                settings: &DocumentSettings,
                redis: &dyn Fn() -> Option<Connection>,
            ) -> Result<Self, DocumentError> {
                Ok(PreparedKinds {
                    $($field: prepare::<$instance>(
                        registry,
                        state,
                        <$instance as Documented>::section(settings),
                        redis,
                    )?,)*
                })
            }

            /// Installs every kind's section.
            fn commit(
                self,
                registry: &Registry,
                state: &mut State,
                clock: &crate::clock::Clock,
                changes: &mut Vec<Change>,
                pending: &mut Pending,
            ) {
                $(commit::<$instance>(registry, state, clock, self.$field, changes, pending);)*
            }

            /// The number `[precedence]` gives each kind, if it gives one.
            fn precedence(precedence: &PrecedenceSettings) -> [(Aspect, Option<i32>); Aspect::ALL.len()] {
                [$((Aspect::$variant, <$instance as Documented>::precedence(precedence)),)*]
            }
        }
    };
}

aspect_table!(prepared_kinds);

/// Resolves one kind's section, changing nothing.
fn prepare<I: Documented>(
    registry: &Registry,
    state: &State,
    section: Option<&Section<I::Settings>>,
    redis: &dyn Fn() -> Option<Connection>,
) -> Result<Prepared<I::Config>, DocumentError> {
    let aspect = I::ASPECT;
    let empty = Section::default();
    let section = section.unwrap_or(&empty);
    let build = |where_: &str, name: &str, settings: &I::Settings| {
        let mut config = settings.build();
        if let Ok(config) = &mut config {
            if let Err(e) = registry.resolve_backend(config, redis) {
                return Err(DocumentError::config(
                    table_path(aspect, where_, name, Some("backend")),
                    e,
                ));
            }
        }
        config.map_err(|e| {
            let key = settings.blame(e.field());
            DocumentError::config(table_path(aspect, where_, name, key), e)
        })
    };
    let mut default = None;
    let mut named = Vec::new();
    for (name, settings) in &section.configs {
        let config = build("configs", name, settings)?;
        if name == DEFAULT {
            default = Some(config);
        } else {
            named.push((Name::from(name.as_str()), config, false));
        }
    }
    for (name, settings) in &section.instances {
        if name == DEFAULT {
            return Err(DocumentError::at(
                table_path(aspect, "instances", name, None),
                format!(
                    "`default` names the default configuration, `[{aspect}.configs.default]`; \
                     give the instance another name",
                    aspect = aspect.as_str()
                ),
            ));
        }
        if section.configs.iter().any(|(n, _)| n == name) {
            return Err(DocumentError::at(
                table_path(aspect, "instances", name, None),
                format!(
                    "`{name}` is also a configuration (`{aspect}.configs.{name}`): an instance \
                     and a configuration share one name here, so rename one of them",
                    aspect = aspect.as_str()
                ),
            ));
        }
        let config = build("instances", name, settings)?;
        named.push((Name::from(name.as_str()), config, true));
    }
    I::table(state)
        .prepare(default, named)
        .map_err(|(name, e)| {
            let name = name.as_deref().unwrap_or(DEFAULT);
            let (where_, settings) = match section.instances.iter().find(|(n, _)| n == name) {
                Some((_, s)) => ("instances", Some(s)),
                None => (
                    "configs",
                    section
                        .configs
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, s)| s),
                ),
            };
            let key = settings.and_then(|s| s.blame(e.field()));
            DocumentError::config(table_path(aspect, where_, name, key), e)
        })
}

/// Installs one kind's prepared section and records what changed.
fn commit<I: Registered>(
    registry: &Registry,
    state: &mut State,
    clock: &crate::clock::Clock,
    prepared: Prepared<I::Config>,
    changes: &mut Vec<Change>,
    pending: &mut Pending,
) {
    for (name, change) in &prepared.changes {
        changes.push(Change {
            setting: match name {
                Some(name) => Setting::Named(I::ASPECT, name.clone()),
                None => Setting::Default(I::ASPECT),
            },
            kind: *change,
        });
    }
    pending.extend(I::table_mut(state).commit(prepared, |n, c| registry.made::<I>(n, c, clock)));
}

/// The precedence table a document gives, and the aspects it sets.
fn prepare_precedence(
    state: &State,
    settings: &crate::document::DocumentSettings,
) -> Result<(Precedence, Vec<Aspect>), DocumentError> {
    let mut table = state.precedence;
    for aspect in &state.precedence_from_document {
        table = table.with(*aspect, aspect.default_precedence());
    }
    let mut set = Vec::new();
    if let Some(p) = &settings.precedence {
        for (aspect, value) in PreparedKinds::precedence(p) {
            if let Some(value) = value {
                table = table.with(aspect, value);
                set.push(aspect);
            }
        }
    }
    if let Some((later, earlier)) = table.tie() {
        // Point at the one the document set, if it set one of the two.
        let blamed = if set.contains(&later) { later } else { earlier };
        let other = if blamed == later { earlier } else { later };
        return Err(DocumentError::config(
            vec!["precedence".to_owned(), blamed.as_str().to_owned()],
            ConfigError::new(
                "precedence",
                format!(
                    "{blamed} and {other} would both have precedence {}; give each aspect its own \
                     number",
                    table.of(blamed)
                ),
            ),
        ));
    }
    Ok((table, set))
}

/// Applies a registry-wide switch of a document: its value if the document gives it; if it
/// leaves it out, the default when the previous document had set it, else the value in force
/// (set in code, or never set). `current` is the switch and whether a document set it.
fn apply_switch<T: Copy + Default + PartialEq>(
    given: Option<T>,
    current: (&mut T, &mut bool),
    setting: Setting,
    changes: &mut Vec<Change>,
) {
    let (value, from_document) = current;
    let next = match given {
        Some(next) => next,
        None if *from_document => T::default(),
        None => *value,
    };
    if next != *value {
        changes.push(Change {
            setting,
            kind: ChangeKind::Changed,
        });
    }
    *value = next;
    *from_document = given.is_some();
}
