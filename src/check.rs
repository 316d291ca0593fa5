//! The small rules that every file checking a setting uses, the error a
//! refused configuration is ([`ConfigError`]), and the one conversion of a
//! duration into the clock's nanoseconds.
//!
//! Low in the crate (on `call_path.rs` and `text.rs` only), so that a file
//! can check a value without standing on the builder. A broken rule is an
//! [`Invalid`], which `?` turns into [`ConfigError::Invalid`].

use std::fmt;
use std::time::Duration;

use crate::call_path::CallPath;

/// A setting that broke a rule: the field, the rule, the value given.
#[derive(Debug)]
pub(crate) struct Invalid {
    /// The builder method that set it.
    pub(crate) field: &'static str,
    /// The rule it broke.
    pub(crate) rule: &'static str,
    /// The value given, formatted.
    pub(crate) value: String,
}

/// `Ok` if `ok`, else the `rule` that `field` broke with `value`.
pub(crate) fn check(
    field: &'static str,
    ok: bool,
    rule: &'static str,
    value: impl fmt::Display,
) -> Result<(), Invalid> {
    if ok {
        Ok(())
    } else {
        Err(Invalid {
            field,
            rule,
            value: value.to_string(),
        })
    }
}

/// A rate: within (0, 1].
pub(crate) fn check_rate(field: &'static str, rate: f64) -> Result<(), Invalid> {
    check(
        field,
        rate > 0.0 && rate <= 1.0,
        "must be within (0, 1]",
        rate,
    )
}

/// A duration in clock nanoseconds, capped where an open gate word can still
/// hold it (`u64::MAX >> 2`): the one conversion every deadline goes through.
pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX >> 2)) as u64
}

/// A configuration refused by [`BreakerBuilder::build`](crate::BreakerBuilder::build).
///
/// Every variant names the field at fault; nothing about a bad configuration
/// panics.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required setting was not given.
    #[error("`{field}` is required: {why}")]
    Missing {
        /// The builder method that sets it.
        field: &'static str,
        /// Why there is no default.
        why: &'static str,
    },
    /// A setting broke a rule.
    #[error("`{field}` {rule} (got {})", crate::text::shown(.value))]
    Invalid {
        /// The builder method that set it.
        field: &'static str,
        /// The rule it broke.
        rule: &'static str,
        /// The value given, formatted.
        value: String,
    },
    /// The breaker was declared for a call path on which it would do harm.
    #[error("refusing to build a breaker for the {path} path: {why}")]
    ForbiddenCallPath {
        /// The path that was declared.
        path: CallPath,
        /// Why a breaker must not stand there.
        why: &'static str,
    },
}

impl From<Invalid> for ConfigError {
    fn from(i: Invalid) -> Self {
        ConfigError::Invalid {
            field: i.field,
            rule: i.rule,
            value: i.value,
        }
    }
}

impl ConfigError {
    /// The builder field at fault (`"call_path"` for a forbidden path).
    pub fn field(&self) -> &'static str {
        match self {
            ConfigError::Missing { field, .. } | ConfigError::Invalid { field, .. } => field,
            ConfigError::ForbiddenCallPath { .. } => "call_path",
        }
    }
}
