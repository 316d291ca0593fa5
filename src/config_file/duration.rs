//! Durations in the crate's one grammar ([`crate::duration`]) and the
//! settings a file may switch off ("off"), read by serde.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::duration::parse;

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
