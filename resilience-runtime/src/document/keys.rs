//! The keys of a configuration document: reading one (with Spring's kebab-case read as
//! snake_case), refusing an unknown one with the closest valid key or what to write instead,
//! and the [`settings!`] macro that declares a table of settings once.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

/// What a known key of Resilience4j that has no key of the same name here becomes.
const HINTS: &[(&str, &str)] = &[
    (
        "resilience4j",
        "write the kinds at the top level: `[circuit_breaker.instances.orders]` for \
         `resilience4j.circuitbreaker.instances.orders`",
    ),
    (
        "thread_pool_bulkhead",
        "there is no thread-pool bulkhead: an async call waits for a permit without holding a \
         thread; use `[bulkhead]`",
    ),
    (
        "configs",
        "configurations belong to a kind: `[bulkhead.configs.default]`",
    ),
    (
        "instances",
        "instances belong to a kind: `[bulkhead.instances.orders]`",
    ),
    (
        "register_health_indicator",
        "there is no health indicator; leave the key out",
    ),
    (
        "allow_health_indicator_to_fail",
        "there is no health indicator; leave the key out",
    ),
    (
        "event_consumer_buffer_size",
        "events go to subscribers (`subscribe`), which keep what they need; leave the key out",
    ),
    (
        "writable_stack_trace_enabled",
        "rejections carry no stack trace; leave the key out",
    ),
    (
        "record_exceptions",
        "which errors are failures is said in code: `#[circuit_breaker(name, record = path)]`",
    ),
    (
        "record_failure_predicate",
        "which errors are failures is said in code: `#[circuit_breaker(name, record = path)]`",
    ),
    (
        "ignore_exceptions",
        "which errors are ignored is said in code: `#[circuit_breaker(name, ignore = path)]`",
    ),
    (
        "ignore_exception_predicate",
        "which errors are ignored is said in code: `#[circuit_breaker(name, ignore = path)]`",
    ),
    (
        "retry_exceptions",
        "which errors are retried is said in code: `#[retry(name, retry_on = path)]`",
    ),
    (
        "retry_exception_predicate",
        "which errors are retried is said in code: `#[retry(name, retry_on = path)]`",
    ),
    (
        "result_predicate",
        "which results are retried is said in code: `#[retry(name, retry_on = path)]`",
    ),
    (
        "interval_bi_function",
        "a wait asked for by the error is said in code: `#[retry(name, retry_after = path)]`",
    ),
    (
        "max_retry_attempts",
        "Resilience4j's older name of `max_attempts`; write `max_attempts`",
    ),
    (
        "sliding_window",
        "write the window as `sliding_window_type` and `sliding_window_size`",
    ),
    (
        "open_state_backoff",
        "write `enable_exponential_backoff = true` with `exponential_backoff_multiplier` and \
         `exponential_max_wait_duration_in_open_state`",
    ),
    (
        "exponential_backoff",
        "write `enable_exponential_backoff = true` with `exponential_backoff_multiplier`",
    ),
];

/// Where a key is read and what it may be.
pub(crate) struct Table {
    /// What the table configures, for messages: "bulkhead settings".
    pub(crate) what: &'static str,
    /// The valid keys.
    pub(crate) keys: &'static [&'static str],
    /// Other spellings read as a valid key: `(alias, key)`.
    pub(crate) aliases: &'static [(&'static str, &'static str)],
}

impl Table {
    /// The message for `key`, which is not one of this table's.
    pub(crate) fn unknown(&self, key: &str) -> String {
        let normal = snake_case(key);
        let known =
            |k: &str| self.keys.contains(&k) || self.aliases.iter().any(|(alias, _)| *alias == k);
        if normal != key && known(&normal) {
            return format!(
                "unknown key `{key}` in {}; keys are snake_case: write `{normal}`",
                self.what
            );
        }
        if let Some((_, hint)) = HINTS.iter().find(|(k, _)| *k == normal) {
            return format!("`{key}` is not a key of {}: {hint}", self.what);
        }
        if normal.ends_with("_aspect_order") {
            return format!(
                "`{key}` is not a key of {}: the order of the aspects is the top-level \
                 `[precedence]` table, where a lower number runs first (outermost), e.g. \
                 `[precedence] retry = 300`",
                self.what
            );
        }
        let closest = self
            .keys
            .iter()
            .map(|k| (strsim::levenshtein(&normal, k), *k))
            .min();
        match closest {
            Some((distance, k)) if distance <= (normal.len() / 3).max(2) => {
                format!("unknown key `{key}` in {}; did you mean `{k}`?", self.what)
            }
            _ => format!(
                "unknown key `{key}` in {}; the keys are {}",
                self.what,
                self.keys
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The key `raw` names, read with `-` as `_` (Spring's relaxed binding of kebab-case).
    fn resolve(&self, raw: &str) -> Option<&'static str> {
        let normal = raw.replace('-', "_");
        if let Some(key) = self.keys.iter().find(|k| **k == normal) {
            return Some(key);
        }
        self.aliases
            .iter()
            .find(|(alias, _)| *alias == normal)
            .map(|(_, key)| *key)
    }
}

/// `maxConcurrentCalls` and `max-concurrent-calls` as `max_concurrent_calls`.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for (i, c) in key.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else if c == '-' {
            out.push('_');
        } else {
            out.push(c);
        }
    }
    out
}

/// Reads one key of `table`, refusing an unknown key and one already `seen` in this table.
/// The refusal is raised while the key itself is read, so a parser that tracks positions
/// points at the key.
pub(crate) struct KeySeed<'a> {
    pub(crate) table: &'a Table,
    pub(crate) seen: &'a mut Vec<&'static str>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<&'static str, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = &'static str;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a key of {}", self.table.what)
    }

    fn visit_str<E: de::Error>(self, raw: &str) -> Result<&'static str, E> {
        let Some(key) = self.table.resolve(raw) else {
            return Err(E::custom(self.table.unknown(raw)));
        };
        if self.seen.contains(&key) {
            let spelling = if raw == key {
                String::new()
            } else {
                format!(" (`{raw}` is another spelling of it)")
            };
            return Err(E::custom(format!(
                "`{key}` is set twice in {}{spelling}",
                self.table.what
            )));
        }
        self.seen.push(key);
        Ok(key)
    }
}

/// Reads a name of an instance or a configuration: any string but an empty or blank one.
pub(crate) struct NameSeed;

impl<'de> DeserializeSeed<'de> for NameSeed {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for NameSeed {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<String, E> {
        if name.trim().is_empty() {
            return Err(E::custom(
                "a name cannot be empty or blank: the annotations name their instances, as in \
                 `#[bulkhead(\"orders\")]`",
            ));
        }
        Ok(name.to_owned())
    }
}

/// Reads one of `choices` (`(spelling, value)`, snake_case), also in Resilience4j's upper case
/// (`COUNT_BASED`) or kebab-case.
pub(crate) fn choice<E: de::Error, T: Copy>(
    what: &str,
    raw: &str,
    choices: &[(&'static str, T)],
) -> Result<T, E> {
    let normal = raw.to_lowercase().replace('-', "_");
    if let Some((_, value)) = choices.iter().find(|(spelling, _)| *spelling == normal) {
        return Ok(*value);
    }
    let valid: Vec<String> = choices.iter().map(|(s, _)| format!("\"{s}\"")).collect();
    Err(E::custom(format!(
        "`{raw}` is not a {what}; write one of {}",
        valid.join(", ")
    )))
}

/// A table of settings that knows which of its keys a document set.
pub(crate) trait SetKeys {
    /// The keys this table sets.
    fn set_keys(&self) -> Vec<&'static str>;
}

/// Declares a table of settings read from a document: a struct of `Option`al fields, one per
/// key, and its `Deserialize`, which refuses unknown and repeated keys (see [`KeySeed`]).
macro_rules! settings {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($what:literal) {
            $( $(#[$field_meta:meta])* $key:ident : $ty:ty ),* $(,)?
        }
        $( aliases { $( $alias:literal => $canonical:literal ),* $(,)? } )?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        $vis struct $name {
            $( $(#[$field_meta])* pub(crate) $key: Option<$ty>, )*
        }

        impl $name {
            pub(crate) const TABLE: $crate::document::keys::Table = $crate::document::keys::Table {
                what: $what,
                keys: &[$(stringify!($key)),*],
                aliases: &[$($( ($alias, $canonical) ),*)?],
            };

        }

        impl $crate::document::keys::SetKeys for $name {
            fn set_keys(&self) -> Vec<&'static str> {
                let mut set = Vec::new();
                $( if self.$key.is_some() { set.push(stringify!($key)); } )*
                set
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct TableVisitor;

                impl<'de> ::serde::de::Visitor<'de> for TableVisitor {
                    type Value = $name;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        write!(f, "a table of {}", $what)
                    }

                    fn visit_map<A: ::serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                        let mut out = $name::default();
                        let mut seen = Vec::new();
                        while let Some(key) = map.next_key_seed($crate::document::keys::KeySeed {
                            table: &$name::TABLE,
                            seen: &mut seen,
                        })? {
                            $(
                                if key == stringify!($key) {
                                    out.$key = Some(map.next_value()?);
                                    continue;
                                }
                            )*
                            unreachable!("`KeySeed` returns only the keys of the table");
                        }
                        Ok(out)
                    }
                }

                deserializer.deserialize_map(TableVisitor)
            }
        }
    };
}

pub(crate) use settings;

#[cfg(test)]
mod tests {
    use super::*;

    const BULKHEAD: Table = Table {
        what: "bulkhead settings",
        keys: &["base_config", "max_concurrent_calls", "max_wait_duration"],
        aliases: &[("fair", "max_wait_duration")],
    };

    #[test]
    fn a_camel_case_key_is_told_its_snake_case_spelling() {
        let message = BULKHEAD.unknown("maxConcurrentCalls");
        assert!(
            message.contains("write `max_concurrent_calls`"),
            "{message}"
        );
    }

    #[test]
    fn a_misspelt_key_gets_the_closest_one() {
        let message = BULKHEAD.unknown("max_concurent_calls");
        assert!(
            message.contains("did you mean `max_concurrent_calls`?"),
            "{message}"
        );
    }

    #[test]
    fn a_resilience4j_key_without_an_equivalent_says_what_to_do() {
        let message = BULKHEAD.unknown("writableStackTraceEnabled");
        assert!(message.contains("leave the key out"), "{message}");
        let message = BULKHEAD.unknown("bulkhead-aspect-order");
        assert!(message.contains("[precedence]"), "{message}");
    }

    #[test]
    fn a_key_far_from_every_key_lists_them_all() {
        let message = BULKHEAD.unknown("colour");
        assert!(
            message.contains("`base_config`, `max_concurrent_calls`"),
            "{message}"
        );
    }

    #[test]
    fn kebab_case_and_aliases_read_as_the_key() {
        assert_eq!(
            BULKHEAD.resolve("max-wait-duration"),
            Some("max_wait_duration")
        );
        assert_eq!(BULKHEAD.resolve("fair"), Some("max_wait_duration"));
        assert_eq!(BULKHEAD.resolve("maxWaitDuration"), None);
    }
}
