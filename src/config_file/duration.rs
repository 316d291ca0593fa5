//! Human durations ("250ms", "30s", "1.5m") and the settings a file may
//! switch off ("off"), read by serde.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Parses a duration written as a number and a unit: `ns`, `us`, `ms`, `s`,
/// `m` or `h`, as in `"250ms"`, `"30s"`, `"1.5m"`. No sign, no spaces
/// inside, nothing after the unit.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            format!("`{text}` has no unit: write it as \"250ms\", \"30s\", \"5m\" or \"1h\"")
        })?;
    let (number, unit) = text.split_at(split);
    let nanos_per_unit: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}` (use ns, us, ms, s, m or h)"
            ))
        }
    };
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(format!("`{text}` has no number before its unit"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}`: `{number}` is not a number"))?;
    let nanos = value * nanos_per_unit;
    if !nanos.is_finite() || nanos >= u64::MAX as f64 {
        return Err(format!("`{text}` is too long"));
    }
    if nanos.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of nanoseconds"));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// A duration in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Human(pub(crate) Duration);

impl<'de> Deserialize<'de> for Human {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Human;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"250ms\" or \"30s\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Human, E> {
                parse(s).map(Human).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// A setting that a file may give a value or switch off with `"off"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum OrOff<T> {
    Value(T),
    Off,
}

impl<T> OrOff<T> {
    pub(crate) fn into_option(self) -> Option<T> {
        match self {
            OrOff::Value(v) => Some(v),
            OrOff::Off => None,
        }
    }
}

fn off<T, E: de::Error>(s: &str, what: &str) -> Result<OrOff<T>, E> {
    if s == "off" {
        Ok(OrOff::Off)
    } else {
        Err(E::custom(format!("`{s}` is not {what} or \"off\"")))
    }
}

impl<'de> Deserialize<'de> for OrOff<u32> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = OrOff<u32>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number or \"off\"")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                u32::try_from(n)
                    .map(OrOff::Value)
                    .map_err(|_| E::custom(format!("{n} is too large (at most {})", u32::MAX)))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!("{n} is negative"))),
                }
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                off(s, "a whole number")
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for OrOff<f64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = OrOff<f64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or \"off\"")
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Ok(OrOff::Value(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(OrOff::Value(n as f64))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Ok(OrOff::Value(n as f64))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                off(s, "a number")
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for OrOff<Human> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = OrOff<Human>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"250ms\", or \"off\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                if s == "off" {
                    Ok(OrOff::Off)
                } else {
                    parse(s).map(|d| OrOff::Value(Human(d))).map_err(E::custom)
                }
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_unit() {
        for (text, want) in [
            ("10ns", Duration::from_nanos(10)),
            ("7us", Duration::from_micros(7)),
            ("250ms", Duration::from_millis(250)),
            ("30s", Duration::from_secs(30)),
            ("1.5s", Duration::from_millis(1500)),
            ("5m", Duration::from_secs(300)),
            ("2h", Duration::from_secs(7200)),
            ("0s", Duration::ZERO),
            (" 30s ", Duration::from_secs(30)),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_duration_and_says_why() {
        for (text, says) in [
            ("30", "has no unit"),
            ("30x", "unknown unit `x`"),
            ("30 s", "unknown unit ` s`"),
            ("s", "no number"),
            (".5s", "no number"),
            ("5.s", "no number"),
            ("-5s", "unknown unit `-5s`"),
            ("1.2.3s", "is not a number"),
            ("1.5ns", "whole number of nanoseconds"),
            ("99999999999h", "too long"),
            ("", "has no unit"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
