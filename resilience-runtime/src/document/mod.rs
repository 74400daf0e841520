//! A whole configuration as one document: every kind's named configurations and instances,
//! the precedence table, the re-entrancy policy and whether every name must be configured, with the shape and key names of
//! Resilience4j's Spring configuration (in snake_case). [`ConfigDocument`] reads through any
//! `serde` format; [`Registry::load_toml`](crate::Registry::load_toml) and
//! [`Registry::load_file`](crate::Registry::load_file) read TOML and say where an error is.

mod choices;
mod duration;
pub(crate) mod keys;
pub(crate) mod raw;
#[cfg(feature = "toml")]
pub(crate) mod toml;
#[cfg(feature = "watch")]
mod watch;

#[cfg(feature = "watch")]
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub use watch::FileWatcher;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

use crate::aspect::Aspect;
use crate::error::ConfigError;
use crate::name::Name;
use crate::plan::ReentrancyPolicy;
use keys::{settings, KeySeed, NameSeed, Table};
use raw::{
    BulkheadSettings, CircuitBreakerSettings, FaultSettings, HedgeSettings, PrecedenceSettings,
    RateLimiterSettings, RedisSettings, RetrySettings, TimeLimiterSettings,
};

settings! {
    /// The top level of a document.
    pub(crate) struct DocumentSettings ("a configuration document") {
        bulkhead: Section<BulkheadSettings>,
        rate_limiter: Section<RateLimiterSettings>,
        retry: Section<RetrySettings>,
        hedge: Section<HedgeSettings>,
        circuit_breaker: Section<CircuitBreakerSettings>,
        time_limiter: Section<TimeLimiterSettings>,
        fault: Section<FaultSettings>,
        precedence: PrecedenceSettings,
        reentrancy_policy: ReentrancyPolicy,
        require_configured: bool,
        redis: RedisSettings,
    }
}

/// A whole configuration of a [`Registry`](crate::Registry), read from any `serde` format
/// (through `figment`, `config`, `serde_json`, …) and applied in one step with
/// [`Registry::apply_document`](crate::Registry::apply_document). For TOML,
/// [`Registry::load_toml`](crate::Registry::load_toml) and
/// [`load_file`](crate::Registry::load_file) read it and also say at which line an error is.
///
/// Its shape is Resilience4j's Spring configuration with the keys in snake_case, so an
/// `application.yml` translates line by line (docs/configuration.md shows the incident's
/// configuration both ways):
///
/// | in the document | here |
/// |---|---|
/// | `bulkhead`, `rate_limiter`, `retry`, `circuit_breaker`, `time_limiter` | one table per aspect kind (`circuitbreaker` in Resilience4j) |
/// | `<kind>.configs.default` | the kind's default configuration |
/// | `<kind>.configs.<name>` | a named configuration, for `base_config` to name |
/// | `<kind>.instances.<name>` | the configuration of the instance `<name>` (the name in the annotation) |
/// | `base_config` | the configuration this one takes every unset key from (`"default"`: the default) |
/// | `precedence.<kind>` | the kind's precedence: lower runs first (outermost); Resilience4j's `*AspectOrder` has no equivalent |
/// | `reentrancy_policy` | `"pass_through"`, `"reject"` or `"allow"` |
/// | `require_configured` | `true`: a name used without a configuration of its own is refused ([`Registry::set_require_configured`](crate::Registry::set_require_configured)) |
///
/// The keys of each kind are Resilience4j's (`max_concurrent_calls`, `max_wait_duration`,
/// `fair_call_handling_enabled`; `limit_for_period`, `limit_refresh_period`,
/// `timeout_duration`; `max_attempts`, `wait_duration`, `enable_exponential_backoff`,
/// `exponential_backoff_multiplier`, `exponential_max_wait_duration`,
/// `enable_randomized_wait`, `randomized_wait_factor`; `failure_rate_threshold`,
/// `slow_call_rate_threshold`, `slow_call_duration_threshold`, `sliding_window_type`,
/// `sliding_window_size`, `minimum_number_of_calls`, `wait_duration_in_open_state`,
/// `enable_exponential_backoff`, `exponential_backoff_multiplier`,
/// `exponential_max_wait_duration_in_open_state`,
/// `automatic_transition_from_open_to_half_open_enabled`,
/// `permitted_number_of_calls_in_half_open_state`, `max_wait_duration_in_half_open_state`;
/// `timeout_duration`, `cancel_running_future`), plus this library's `retry_on_rejection`,
/// `max_retry_after`, `record_rejections`, `record_call_durations` and `initial_state`. Kebab-case (`max-concurrent-calls`) reads as
/// snake_case, as Spring's relaxed binding does; a camelCase key is refused with its
/// snake_case spelling. Durations are strings with a unit (`"500ms"`, `"10s"`, `"1m30s"`,
/// `"PT10S"`); percentages are numbers (`50`).
///
/// Every value is checked by the builder of its configuration, as in code. Which errors count
/// as failures, and which are retried, is said in code (`record`, `ignore`, `retry_on` on the
/// annotations), so Resilience4j's `record_exceptions` and the like are refused with that
/// advice.
///
/// ```
/// use resilience_runtime::{ConfigDocument, Registry};
///
/// // Any serde format; here JSON, as a `config` or `figment` source would give it.
/// let document: ConfigDocument = serde_json::from_str(r#"{
///     "bulkhead": { "instances": { "orders": { "max_concurrent_calls": 80 } } }
/// }"#)?;
/// let registry = Registry::new();
/// registry.apply_document(&document)?;
/// assert_eq!(registry.bulkhead("orders").max_allowed_concurrent_calls(), 80);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigDocument {
    pub(crate) settings: DocumentSettings,
}

impl<'de> Deserialize<'de> for ConfigDocument {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DocumentSettings::deserialize(deserializer).map(|settings| ConfigDocument { settings })
    }
}

/// One kind's table: `configs` (named configurations, `default` among them) and `instances`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Section<S> {
    pub(crate) configs: Vec<(String, S)>,
    pub(crate) instances: Vec<(String, S)>,
}

impl<S> Default for Section<S> {
    fn default() -> Self {
        Section {
            configs: Vec::new(),
            instances: Vec::new(),
        }
    }
}

/// The table of a kind, for the messages about its keys.
pub(crate) trait Kind {
    /// The keys of the kind's table.
    const SECTION: Table;
}

macro_rules! kind {
    ($settings:ty, $what:literal) => {
        impl Kind for $settings {
            const SECTION: Table = Table {
                what: $what,
                keys: &["configs", "instances"],
                aliases: &[],
            };
        }
    };
}

kind!(BulkheadSettings, "the `[bulkhead]` table");
kind!(RateLimiterSettings, "the `[rate_limiter]` table");
kind!(RetrySettings, "the `[retry]` table");
kind!(CircuitBreakerSettings, "the `[circuit_breaker]` table");
kind!(HedgeSettings, "the `[hedge]` table");
kind!(TimeLimiterSettings, "the `[time_limiter]` table");
kind!(FaultSettings, "the `[fault]` table");

impl<'de, S: Deserialize<'de> + Kind> Deserialize<'de> for Section<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SectionVisitor<S>(std::marker::PhantomData<S>);

        impl<'de, S: Deserialize<'de> + Kind> Visitor<'de> for SectionVisitor<S> {
            type Value = Section<S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} (`configs` and `instances`)", S::SECTION.what)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Section<S>, A::Error> {
                let mut section = Section::default();
                let mut seen = Vec::new();
                while let Some(key) = map.next_key_seed(KeySeed {
                    table: &S::SECTION,
                    seen: &mut seen,
                })? {
                    let named = map.next_value::<Named<S>>()?.0;
                    match key {
                        "configs" => section.configs = named,
                        _ => section.instances = named,
                    }
                }
                Ok(section)
            }
        }

        deserializer.deserialize_map(SectionVisitor(std::marker::PhantomData))
    }
}

/// A table of names, each with its settings, in document order.
struct Named<S>(Vec<(String, S)>);

impl<'de, S: Deserialize<'de>> Deserialize<'de> for Named<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NamedVisitor<S>(std::marker::PhantomData<S>);

        impl<'de, S: Deserialize<'de>> Visitor<'de> for NamedVisitor<S> {
            type Value = Named<S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of names, each with a table of settings")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Named<S>, A::Error> {
                let mut named: Vec<(String, S)> = Vec::new();
                while let Some(name) = map.next_key_seed(NameSeed)? {
                    if named.iter().any(|(n, _)| *n == name) {
                        return Err(de::Error::custom(format!("`{name}` is named twice")));
                    }
                    let settings = map.next_value()?;
                    named.push((name, settings));
                }
                Ok(Named(named))
            }
        }

        deserializer.deserialize_map(NamedVisitor(std::marker::PhantomData))
    }
}

/// A document was refused: where (the file, the line and column, the key path) and why.
/// Nothing of the document was applied.
///
/// Displayed as `file:line:column: key.path: reason`, the parts that are known.
///
/// ```
/// use resilience_runtime::Registry;
///
/// let registry = Registry::new();
/// let err = registry
///     .load_toml("[circuit_breaker.instances.orders]\nfailure_rate_threshold = 0\n")
///     .unwrap_err();
/// assert_eq!(err.key_path(), "circuit_breaker.instances.orders.failure_rate_threshold");
/// assert_eq!((err.line(), err.column()), (Some(2), Some(26)));
/// assert_eq!(err.config_error().map(|e| e.field()), Some("failure_rate_threshold"));
/// # assert!(err.to_string().starts_with("2:26: circuit_breaker.instances.orders.failure_rate_threshold: "));
/// ```
pub struct DocumentError(Box<Located>);

/// `{:?}` is the message, with the file, line and key path (what `?` in `main` prints);
/// `{:#?}` the parts.
impl fmt::Debug for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.debug_tuple("DocumentError").field(&self.0).finish()
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

/// The parts of a [`DocumentError`], boxed so that a `Result` of one stays small.
#[derive(Debug)]
struct Located {
    file: Option<PathBuf>,
    line: Option<usize>,
    column: Option<usize>,
    path: Vec<String>,
    reason: String,
    cause: Cause,
}

#[derive(Debug)]
enum Cause {
    None,
    Config(ConfigError),
    #[cfg(feature = "toml")]
    Io(std::io::Error),
}

impl DocumentError {
    /// A refusal of the value at `path`, for `reason`.
    pub(crate) fn at(path: Vec<String>, reason: impl Into<String>) -> Self {
        DocumentError(Box::new(Located {
            file: None,
            line: None,
            column: None,
            path,
            reason: reason.into(),
            cause: Cause::None,
        }))
    }

    /// A refusal by a builder or by the registry of the value at `path`.
    pub(crate) fn config(path: Vec<String>, error: ConfigError) -> Self {
        let mut located = DocumentError::at(path, error.reason());
        located.0.cause = Cause::Config(error);
        located
    }

    #[cfg(feature = "toml")]
    /// A file that could not be read.
    pub(crate) fn io(file: &Path, error: std::io::Error) -> Self {
        let mut located = DocumentError::at(Vec::new(), format!("cannot read the file: {error}"));
        located.0.file = Some(file.to_owned());
        located.0.cause = Cause::Io(error);
        located
    }

    #[cfg(feature = "toml")]
    pub(crate) fn path_segments(&self) -> &[String] {
        &self.0.path
    }

    #[cfg(feature = "toml")]
    pub(crate) fn with_location(mut self, line: usize, column: usize) -> Self {
        self.0.line = Some(line);
        self.0.column = Some(column);
        self
    }

    #[cfg(feature = "toml")]
    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        self.0.file = Some(file.to_owned());
        self
    }

    /// The file the document was read from, if it was.
    pub fn file(&self) -> Option<&Path> {
        self.0.file.as_deref()
    }

    /// The line of the error (from 1), when the document's text is known.
    pub fn line(&self) -> Option<usize> {
        self.0.line
    }

    /// The column of the error (from 1, in characters), when the document's text is known.
    pub fn column(&self) -> Option<usize> {
        self.0.column
    }

    /// The key path of the refused value, such as
    /// `circuit_breaker.instances.orders.failure_rate_threshold`; empty for an error of syntax
    /// or of the whole document. A name that is not a bare TOML key is quoted.
    pub fn key_path(&self) -> String {
        display_path(&self.0.path)
    }

    /// Why the document was refused.
    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// The refusal of a configuration's builder or of the registry, when that is the cause.
    pub fn config_error(&self) -> Option<&ConfigError> {
        match &self.0.cause {
            Cause::Config(error) => Some(error),
            Cause::None => None,
            #[cfg(feature = "toml")]
            Cause::Io(_) => None,
        }
    }
}

/// A key path as TOML writes it: `a.b."c.d"`.
pub(crate) fn display_path(path: &[String]) -> String {
    let bare = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    path.iter()
        .map(|s| if bare(s) { s.clone() } else { format!("{s:?}") })
        .collect::<Vec<_>>()
        .join(".")
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.0.file {
            write!(f, "{}:", file.display())?;
        }
        if let (Some(line), Some(column)) = (self.0.line, self.0.column) {
            write!(f, "{line}:{column}:")?;
        }
        if self.0.file.is_some() || self.0.line.is_some() {
            f.write_str(" ")?;
        }
        if !self.0.path.is_empty() {
            write!(f, "{}: ", self.key_path())?;
        }
        f.write_str(&self.0.reason)
    }
}

impl std::error::Error for DocumentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.cause {
            Cause::Config(error) => Some(error),
            #[cfg(feature = "toml")]
            Cause::Io(error) => Some(error),
            Cause::None => None,
        }
    }
}

/// What a document set, in [`Changes`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setting {
    /// The default configuration of a kind.
    Default(Aspect),
    /// The configuration of a name (an instance, or a base of other configurations).
    Named(Aspect, Name),
    /// The precedence of a kind.
    Precedence(Aspect),
    /// The re-entrancy policy.
    ReentrancyPolicy,
    /// Whether every name used needs a configuration of its own.
    RequireConfigured,
}

/// How a [`Setting`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Configured now, not before.
    Added,
    /// Configured before, differently (its effective configuration, bases resolved, differs).
    Changed,
    /// Configured by the previous document and left out of this one: back to the default.
    Removed,
}

/// One change a document made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change {
    /// What changed.
    pub setting: Setting,
    /// How.
    pub kind: ChangeKind,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.setting {
            Setting::Default(aspect) => write!(f, "the default {aspect} configuration")?,
            Setting::Named(aspect, name) => write!(f, "{aspect} `{name}`")?,
            Setting::Precedence(aspect) => write!(f, "the precedence of the {aspect}")?,
            Setting::ReentrancyPolicy => f.write_str("the re-entrancy policy")?,
            Setting::RequireConfigured => f.write_str("`require_configured`")?,
        }
        f.write_str(match self.kind {
            ChangeKind::Added => ": added",
            ChangeKind::Changed => ": changed",
            ChangeKind::Removed => ": removed (back to the default)",
        })
    }
}

/// What applying a document changed, in a fixed order (kinds in precedence-table order, names
/// sorted); empty when the document matched the configuration in force. Instances whose
/// effective configuration changed were reconfigured in place: their handles and subscribers
/// stay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub(crate) changes: Vec<Change>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The number of changes.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// The changes.
    pub fn iter(&self) -> std::slice::Iter<'_, Change> {
        self.changes.iter()
    }
}

impl<'a> IntoIterator for &'a Changes {
    type Item = &'a Change;
    type IntoIter = std::slice::Iter<'a, Change>;
    fn into_iter(self) -> Self::IntoIter {
        self.changes.iter()
    }
}

impl fmt::Display for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changes.is_empty() {
            return f.write_str("no change");
        }
        for (i, change) in self.changes.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{change}")?;
        }
        Ok(())
    }
}
