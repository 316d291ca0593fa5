//! Breaker names: the rules `build()` checks, and the fixed inline copy that a
//! refusal carries.
//!
//! A refusal carries its breaker's name. Holding it inline, in a fixed buffer
//! of [`MAX_LEN`] bytes, keeps the refusal path free of reference-count
//! traffic (no atomic increment on a cache line that every refusing thread
//! shares) and of allocation, and keeps [`Rejected`](crate::Rejected) `Copy`,
//! without keeping any name alive for the rest of the process: a breaker's
//! name is freed with the breaker.
//!
//! The rules: between 1 and [`MAX_LEN`] bytes, printable ASCII (space to
//! `~`), no backtick, not only spaces. So a name can neither forge a log line
//! (no line breaks, no control characters) nor close the backticks that log
//! lines and error messages put around it.

use crate::ConfigError;

/// The longest name accepted, in bytes.
pub(crate) const MAX_LEN: usize = 32;

/// Checks `name` against the rules, naming the one it breaks.
pub(crate) fn check(name: &str) -> Result<(), ConfigError> {
    let rule = if name.trim().is_empty() {
        "must not be empty"
    } else if name.len() > MAX_LEN {
        "must be at most 32 bytes"
    } else if !name.bytes().all(allowed) {
        "must be printable ASCII (space to `~`) without a backtick"
    } else {
        return Ok(());
    };
    Err(ConfigError::Invalid {
        field: "name",
        rule,
        value: shown(name),
    })
}

fn allowed(b: u8) -> bool {
    (b' '..=b'~').contains(&b) && b != b'`'
}

/// The name as an error shows it: quoted, escaped, and cut after
/// [`MAX_LEN`] bytes, so that a refused name cannot make a huge error either.
fn shown(name: &str) -> String {
    format!("{:?}", crate::text::Shown::cut(name, MAX_LEN))
}

/// A checked name, inline: up to [`MAX_LEN`] bytes, padded with zero bytes
/// (which a checked name never contains). No length field: the refusal
/// stays a run of whole words, which the hot path copies cheaply.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inline {
    bytes: [u8; MAX_LEN],
}

impl Inline {
    /// The inline copy of a name that passed [`check`]. A longer name is cut
    /// at a character boundary (which `check` rules out).
    pub(crate) fn new(name: &str) -> Inline {
        let mut end = name.len().min(MAX_LEN);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        let mut bytes = [0; MAX_LEN];
        bytes[..end].copy_from_slice(&name.as_bytes()[..end]);
        Inline { bytes }
    }

    /// The name.
    pub(crate) fn as_str(&self) -> &str {
        let len = self.bytes.iter().position(|&b| b == 0).unwrap_or(MAX_LEN);
        // Always valid: `new` copies whole characters of a `str`.
        std::str::from_utf8(&self.bytes[..len]).unwrap_or("")
    }
}

impl std::fmt::Display for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inline_name_reads_back_as_given() {
        for name in [
            "refdata",
            "a",
            &"x".repeat(MAX_LEN),
            "fx rates: EUR/USD ~1 (eu-west)",
        ] {
            assert_eq!(Inline::new(name).as_str(), name);
        }
    }

    #[test]
    fn a_long_name_is_cut_at_a_character_boundary() {
        let name = format!("{}é", "x".repeat(MAX_LEN - 1));
        assert_eq!(Inline::new(&name).as_str(), "x".repeat(MAX_LEN - 1));
    }

    #[test]
    fn the_rules_are_checked_in_order() {
        let rule = |name: &str| match check(name) {
            Ok(()) => None,
            Err(ConfigError::Invalid { field, rule, .. }) => {
                assert_eq!(field, "name");
                Some(rule)
            }
            Err(other) => panic!("unexpected {other:?}"),
        };
        assert_eq!(rule("refdata-vendor.eu:1 ~ A/B_c"), None);
        assert_eq!(rule(&"x".repeat(MAX_LEN)), None);
        assert_eq!(rule(""), Some("must not be empty"));
        assert_eq!(rule("   "), Some("must not be empty"));
        assert_eq!(
            rule(&"x".repeat(MAX_LEN + 1)),
            Some("must be at most 32 bytes")
        );
        for bad in [
            "a\nb",
            "a\rb",
            "a\tb",
            "a`b",
            "caf\u{e9}",
            "a\u{7f}b",
            "a\0b",
        ] {
            assert_eq!(
                rule(bad),
                Some("must be printable ASCII (space to `~`) without a backtick"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_huge_name_is_shown_cut_short() {
        let huge = "y".repeat(16 << 20);
        let Err(ConfigError::Invalid { value, .. }) = check(&huge) else {
            panic!("accepted a 16 MiB name");
        };
        assert!(value.len() < 100, "{value}");
        assert!(value.ends_with("(16777216 bytes)"), "{value}");
    }
}
