//! The small rules that every file checking a setting uses, and the one
//! conversion of a duration into the clock's nanoseconds.
//!
//! A leaf: it imports nothing of the crate, so that a file can check a value
//! without standing on the builder. A broken rule is an [`Invalid`], which
//! `?` turns into [`ConfigError::Invalid`](crate::ConfigError::Invalid).

use std::fmt;
use std::time::Duration;

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
