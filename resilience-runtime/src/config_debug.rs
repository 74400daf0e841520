//! The `Debug` output of the configuration types: what a guard runs with, not how the
//! configuration was written.
//!
//! A configuration keeps its fields as options, so that one built on a base configuration
//! inherits exactly the fields it does not set. A derived `Debug` showed those options, and
//! `bulkhead.config()` read `max_concurrent_calls: None` for the 25 in force. Each field is
//! shown as its value in force instead, marked `(default)` when nothing set it, or
//! `(from the base)` when a base configuration not yet resolved will give it.

use std::fmt;

/// One field of a configuration as `Debug` shows it.
pub(crate) enum Field<T> {
    /// Set explicitly (or inherited from a base already resolved).
    Set(T),
    /// Not set: the default is in force.
    Default(T),
    /// Not set, and the configuration names a base that will give it.
    Inherited,
}

impl<T> Field<T> {
    /// The field whose value in force is `effective`: `set` explicitly or not, in a
    /// configuration `based` on another or not.
    pub(crate) fn new(set: bool, based: bool, effective: T) -> Field<T> {
        match (set, based) {
            (true, _) => Field::Set(effective),
            (false, false) => Field::Default(effective),
            (false, true) => Field::Inherited,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Field<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Set(value) => value.fmt(f),
            Field::Default(value) => write!(f, "{value:?} (default)"),
            Field::Inherited => f.write_str("(from the base)"),
        }
    }
}

/// `impl Debug` for a configuration type with a `base: Option<Name>` field and, for each field
/// listed, an accessor of the same name giving the value in force. A field is set when its
/// `Option` is `Some`, or, written `field = |config| ..`, when that closure says so.
macro_rules! debug_effective {
    ($config:ident { $($field:ident $(= $set:expr)?),* $(,)? }) => {
        impl std::fmt::Debug for $config {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let based = self.base.is_some();
                let mut out = f.debug_struct(stringify!($config));
                if let Some(base) = &self.base {
                    out.field("base", base);
                }
                $(
                    let set = $crate::config_debug::debug_effective!(@set self, $field $(, $set)?);
                    out.field(
                        stringify!($field),
                        &$crate::config_debug::Field::new(set, based, self.$field()),
                    );
                )*
                out.finish()
            }
        }
    };
    (@set $config:ident, $field:ident) => {
        $config.$field.is_some()
    };
    (@set $config:ident, $field:ident, $set:expr) => {
        ($set)($config)
    };
}

pub(crate) use debug_effective;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{BulkheadConfig, CircuitBreakerConfig, RetryConfig, SlidingWindow};

    #[test]
    fn an_unset_field_shows_the_default_in_force() {
        let config = BulkheadConfig::builder()
            .max_wait_duration(Duration::from_millis(10))
            .build()
            .unwrap();
        assert_eq!(
            format!("{config:?}"),
            "BulkheadConfig { max_concurrent_calls: 25 (default), adaptive: None (default), \
             max_wait_duration: 10ms, fair_call_handling: true (default), backend: local (default) }"
        );
    }

    #[test]
    fn a_field_a_base_will_give_says_so() {
        let config = RetryConfig::builder()
            .base("standard")
            .max_attempts(5)
            .build()
            .unwrap();
        let shown = format!("{config:?}");
        assert!(shown.starts_with("RetryConfig { base: \"standard\", max_attempts: 5,"));
        assert!(shown.contains("wait_duration: (from the base)"), "{shown}");
    }

    #[test]
    fn the_breakers_window_is_shown_whole() {
        let config = CircuitBreakerConfig::builder()
            .sliding_window(SlidingWindow::TimeBased(10))
            .build()
            .unwrap();
        let shown = format!("{config:?}");
        assert!(shown.contains("sliding_window: TimeBased(10),"), "{shown}");
        assert!(
            shown.contains("failure_rate_threshold: 50.0 (default)"),
            "{shown}"
        );
    }
}
