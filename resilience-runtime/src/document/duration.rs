//! Durations as people write them in configuration files: `"500ms"`, `"10s"`, `"1m30s"`, and
//! the ISO-8601 form Spring Boot also reads (`"PT10S"`).
//!
//! Written here rather than taken from `humantime`: that crate reads neither the ISO-8601 form
//! a Resilience4j file may hold nor refuses a bare number, and its errors cannot say which
//! forms are valid in this file's terms. The grammar is small and tested exhaustively below.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A duration read from a configuration document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dur(pub(crate) Duration);

const EXAMPLES: &str = r#"write it as "500ms", "10s", "1m30s" or "PT10S""#;

/// Parses `text` as a duration.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("an empty string is not a duration; {EXAMPLES}"));
    }
    if trimmed == "0" {
        return Ok(Duration::ZERO);
    }
    let result = match trimmed.strip_prefix(['P', 'p']) {
        Some(iso) => parse_iso(iso),
        None => parse_units(trimmed),
    };
    result.map_err(|why| format!("`{text}` is not a duration: {why}; {EXAMPLES}"))
}

/// `1m30s`, `1.5s`, `500 ms`: groups of a number and a unit, largest first or not.
fn parse_units(text: &str) -> Result<Duration, String> {
    let mut total: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let (number, after) = split_number(rest)?;
        let after = after.trim_start();
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            "" => return Err(format!("`{number}` has no unit")),
            other => return Err(format!("`{other}` is not a unit (ns, us, ms, s, m, h, d)")),
        };
        total = total
            .checked_add(scale(number, nanos)?)
            .ok_or_else(too_long)?;
        rest = after.trim_start();
    }
    to_duration(total)
}

/// The part after `P`: `T10S`, `T0.5S`, `1D`, `T1H30M`, `1DT2H`.
fn parse_iso(text: &str) -> Result<Duration, String> {
    let mut total: u128 = 0;
    let mut in_time = false;
    let mut rest = text;
    let mut any = false;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(['T', 't']) {
            if in_time {
                return Err("`T` appears twice".into());
            }
            in_time = true;
            rest = after;
            continue;
        }
        let (number, after) = split_number(rest)?;
        let mut chars = after.chars();
        let designator = chars.next().map(|c| c.to_ascii_uppercase());
        let nanos = match (designator, in_time) {
            (Some('D'), false) => 86_400_000_000_000,
            (Some('H'), true) => 3_600_000_000_000,
            (Some('M'), true) => 60_000_000_000,
            (Some('S'), true) => 1_000_000_000,
            (Some(c @ ('H' | 'M' | 'S')), false) => {
                return Err(format!("`{c}` belongs after `T` (`PT{number}{c}`)"))
            }
            (Some(c), _) => return Err(format!("`{c}` is not an ISO-8601 duration unit")),
            (None, _) => return Err(format!("`{number}` has no unit")),
        };
        total = total
            .checked_add(scale(number, nanos)?)
            .ok_or_else(too_long)?;
        any = true;
        rest = chars.as_str();
    }
    if !any {
        return Err("it has no value".into());
    }
    to_duration(total)
}

/// The leading decimal number of `text` (digits, an optional fraction) and what follows.
fn split_number(text: &str) -> Result<(&str, &str), String> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    if end == 0 {
        let bad = text.chars().next().unwrap_or(' ');
        return Err(match bad {
            '-' => "a duration cannot be negative".to_owned(),
            _ => format!("expected a number, found `{bad}`"),
        });
    }
    Ok(text.split_at(end))
}

/// `number` (decimal, maybe with a fraction) times `unit` nanoseconds, exactly.
fn scale(number: &str, unit: u128) -> Result<u128, String> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(format!("`{number}` is not a number"));
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_long())?
    };
    let mut nanos = whole.checked_mul(unit).ok_or_else(too_long)?;
    if !fraction.is_empty() {
        if fraction.len() > 18 {
            return Err(format!("`{number}` has more digits than nanoseconds"));
        }
        let digits: u128 = fraction
            .parse()
            .map_err(|_| format!("`{number}` is not a number"))?;
        let denominator = 10u128.pow(fraction.len() as u32);
        let part = digits * unit;
        if part % denominator != 0 {
            return Err(format!("`{number}` is finer than a nanosecond"));
        }
        nanos = nanos.checked_add(part / denominator).ok_or_else(too_long)?;
    }
    Ok(nanos)
}

fn too_long() -> String {
    "it is longer than this library can hold (about 584 billion years)".into()
}

fn to_duration(nanos: u128) -> Result<Duration, String> {
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| too_long())?;
    // The remainder is below 10^9, so it fits.
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurVisitor;

        impl Visitor<'_> for DurVisitor {
            type Value = Dur;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a duration such as "500ms" or "10s""#)
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Dur, E> {
                parse(text).map(Dur).map_err(E::custom)
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Dur, E> {
                if n == 0 {
                    return Ok(Dur(Duration::ZERO));
                }
                Err(E::custom(format!(
                    r#"a duration needs a unit: write "{n}ms" or "{n}s" (Spring reads a bare number as milliseconds; this file does not guess)"#
                )))
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Dur, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!("a duration cannot be negative, got {n}"))),
                }
            }

            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    r#"a duration needs a unit, in a string: write "{n}s""#
                )))
            }
        }

        deserializer.deserialize_any(DurVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_forms_people_write() {
        for (text, expected) in [
            ("500ms", ms(500)),
            ("10s", ms(10_000)),
            ("1m", ms(60_000)),
            ("1m30s", ms(90_000)),
            ("1m 30s", ms(90_000)),
            ("1.5s", ms(1_500)),
            (".5s", ms(500)),
            ("2h", Duration::from_secs(7_200)),
            ("1d", Duration::from_secs(86_400)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            (" 20 ms ", ms(20)),
            ("PT10S", ms(10_000)),
            ("PT0.5S", ms(500)),
            ("PT1M30S", ms(90_000)),
            ("P1DT1H", Duration::from_secs(90_000)),
            ("pt2s", ms(2_000)),
        ] {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn what_is_not_a_duration_says_why_and_how_to_write_one() {
        for (text, why) in [
            ("", "empty"),
            ("500", "has no unit"),
            ("10 seconds", "`seconds` is not a unit"),
            ("-5s", "cannot be negative"),
            ("1.2.3s", "not a number"),
            ("0.5ns", "finer than a nanosecond"),
            ("99999999999999999999999999d", "longer than"),
            ("P10S", "belongs after `T`"),
            ("PT", "no value"),
            ("PT5", "has no unit"),
            ("PT1ST2S", "twice"),
            ("ms", "expected a number"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
            assert!(err.contains("\"500ms\""), "{text}: {err}");
        }
    }

    #[test]
    fn the_longest_duration_fits_and_one_more_second_does_not() {
        let max_secs = u64::MAX;
        assert_eq!(
            parse(&format!("{max_secs}s")),
            Ok(Duration::from_secs(max_secs))
        );
        assert!(parse(&format!("{max_secs}s 1s")).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in "\\PC{0,24}") {
            let _ = parse(&text);
        }

        #[test]
        fn milliseconds_round_trip(n in 0u64..10_000_000_000) {
            proptest::prop_assert_eq!(parse(&format!("{n}ms")), Ok(Duration::from_millis(n)));
        }
    }
}
