//! Durations as a person writes and reads them: one grammar for
//! configuration files, the admin endpoint's request bodies and
//! `fusebox-ctl`'s options, and one way of printing them.
//!
//! # The grammar
//!
//! [`parse`] reads jiff's "friendly" format and ISO 8601 durations, exactly
//! to the nanosecond:
//!
//! - a number and a unit: `250ms`, `1.5s`, `30s`, `5m`, `2h`, `7us` (or
//!   `7µs`), `100ns`; long names too (`30 secs`, `2 hours`);
//! - several units, largest first, with or without spaces: `1m30s`,
//!   `1h 30m`, `1h30m15.5s`;
//! - ISO 8601, as Spring and .NET write them: `PT30S`, `PT1H30M`, `PT0.25S`.
//!
//! Only the last unit may have a fraction, of up to nine digits, and it must
//! come to a whole number of nanoseconds: `4.1s` is 4,100,000,000 ns
//! exactly, `1.5ns` and `1.0000001ms` are refused rather than rounded.
//! Durations cannot be negative (`-5s`, `5s ago`). Days, weeks, months and
//! years are refused too, since a day is not always 24 hours: write `24h`.
//! Spaces around the text are ignored.
//!
//! # Printing
//!
//! [`display`] prints a duration the way the crate prints every duration
//! meant for a person (error messages, log lines, `fusebox-ctl`'s tables):
//! exact, in the same grammar, so that anything printed can be pasted back
//! (`250ms`, `4.1s`, `1m30s`, `2h0.5s`). JSON and metrics carry numbers
//! instead (seconds, or milliseconds where the field's name says so).
//!
//! The parser uses `jiff` and exists with the features that read durations
//! from people (`serde`, `admin`, `ctl`); the printer has no dependency and
//! is always there.
//!
// `parse` exists only with the features that read durations: link to it, or
// to its published docs when the crate is documented without them.
#![cfg_attr(
    not(any(feature = "serde", feature = "admin", feature = "ctl")),
    doc = "[`parse`]: https://docs.rs/fusebox/latest/fusebox/duration/fn.parse.html"
)]
#![cfg_attr(
    any(feature = "serde", feature = "admin", feature = "ctl"),
    doc = r#"```
use std::time::Duration;
use fusebox::duration;

assert_eq!(duration::parse("1m30s")?, Duration::from_secs(90));
assert_eq!(duration::parse("1h 30m")?, Duration::from_secs(5_400));
assert_eq!(duration::parse("PT30S")?, Duration::from_secs(30));
assert_eq!(duration::parse("4.1s")?, Duration::from_millis(4_100));
assert_eq!(
    duration::parse("-5s").unwrap_err().to_string(),
    "`-5s`: durations cannot be negative"
);
assert_eq!(duration::display(Duration::from_millis(90_250)).to_string(), "1m30.25s");
# Ok::<(), duration::ParseError>(())
```"#
)]

use std::fmt::{self, Write as _};
use std::time::Duration;

/// Writes `d` exactly, in the grammar `parse` reads: `0s`, `1ns`,
/// `1.5µs`, `250ms`, `4.1s`, `1m30s`, `2h0.5s`.
///
/// Below a second, the largest of `ns`, `µs` and `ms` that is at most `d`,
/// with a fraction when needed; from a second on, hours, minutes and seconds,
/// each left out when zero, the seconds with a fraction when needed. Width
/// and alignment (`{:>8}`) apply. Allocates nothing.
pub fn display(d: Duration) -> Display {
    Display(d)
}

/// A duration ready to print: made by [`display`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Display(Duration);

impl fmt::Display for Display {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Buf::new();
        write(&mut buf, self.0)?;
        f.pad(buf.as_str())
    }
}

fn write(out: &mut Buf, d: Duration) -> fmt::Result {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    if secs == 0 {
        return match nanos {
            0 => out.write_str("0s"),
            n if n < 1_000 => write!(out, "{n}ns"),
            n if n < 1_000_000 => decimal(out, u64::from(n / 1_000), n % 1_000, 3, "µs"),
            n => decimal(out, u64::from(n / 1_000_000), n % 1_000_000, 6, "ms"),
        };
    }
    let (h, m, s) = (secs / 3_600, secs / 60 % 60, secs % 60);
    if h > 0 {
        write!(out, "{h}h")?;
    }
    if m > 0 {
        write!(out, "{m}m")?;
    }
    if s > 0 || nanos > 0 {
        decimal(out, s, nanos, 9, "s")?;
    }
    Ok(())
}

/// `whole.fraction` and the unit, the fraction (of `digits` digits) without
/// its trailing zeros, and left out when zero.
fn decimal(
    out: &mut Buf,
    whole: u64,
    mut fraction: u32,
    mut digits: usize,
    unit: &str,
) -> fmt::Result {
    write!(out, "{whole}")?;
    if fraction > 0 {
        while fraction % 10 == 0 {
            fraction /= 10;
            digits -= 1;
        }
        write!(out, ".{fraction:0digits$}")?;
    }
    out.write_str(unit)
}

/// Room for the longest duration printed, 33 bytes: at most 16 digits of
/// hours (`Duration::MAX` is `5124095576030431h15.999999999s`), then
/// `59m59.999999999s`.
struct Buf {
    bytes: [u8; 40],
    len: usize,
}

impl Buf {
    const fn new() -> Self {
        Buf {
            bytes: [0; 40],
            len: 0,
        }
    }

    fn as_str(&self) -> &str {
        // Only whole `str`s are ever written in.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(any(feature = "serde", feature = "admin", feature = "ctl"))]
pub use read::{parse, ParseError};

#[cfg(any(feature = "serde", feature = "admin", feature = "ctl"))]
mod read {
    use std::error::Error as StdError;
    use std::fmt;
    use std::time::Duration;

    use jiff::fmt::{friendly, temporal};

    const FORMS: &str = "write a number and a unit (250ms, 1.5s, 30s, 5m, 2h), several units \
                         (1m30s, 1h 30m) or ISO 8601 (PT30S)";

    /// Reads a duration a person wrote, in the grammar the
    /// [module](crate::duration) describes: `250ms`, `4.1s`, `1m30s`,
    /// `1h 30m`, `PT30S`. Exact to the nanosecond; never negative.
    pub fn parse(text: &str) -> Result<Duration, ParseError> {
        let text = text.trim();
        let error = |why| ParseError {
            text: text.into(),
            why,
        };
        if text.is_empty() {
            return Err(error(Why::Empty));
        }
        let parsed = if is_iso(text) {
            temporal::SpanParser::new().parse_unsigned_duration(text)
        } else {
            friendly::SpanParser::new().parse_unsigned_duration(text)
        };
        match parsed {
            Ok(d) if finer_than_a_nanosecond(text) => Err(error(Why::Inexact(d))),
            Ok(d) => Ok(d),
            Err(e) => Err(error(why_not(text, e))),
        }
    }

    /// Why jiff refused `text`, in terms of this grammar where jiff's own
    /// words would mislead (it suggests parsing days into its `Span`).
    fn why_not(text: &str, e: jiff::Error) -> Why {
        let span = text.parse::<jiff::Span>().ok();
        let lower = text.to_ascii_lowercase();
        if text.starts_with('-') || lower.ends_with("ago") || span.is_some_and(|s| s.is_negative())
        {
            Why::Negative
        } else if span.is_some_and(|s| {
            s.get_years() != 0 || s.get_months() != 0 || s.get_weeks() != 0 || s.get_days() != 0
        }) {
            Why::Calendar
        } else if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            Why::NoUnit
        } else {
            // jiff's words without its preamble, which names a format the
            // reader did not choose.
            let e = e.to_string();
            let preamble = "failed to parse input in the \"friendly\" duration format: ";
            Why::Jiff(e.strip_prefix(preamble).unwrap_or(&e).to_owned())
        }
    }

    /// ISO 8601 (`PT30S`), as against jiff's friendly format.
    fn is_iso(text: &str) -> bool {
        text.trim_start_matches(['+', '-']).starts_with(['P', 'p'])
    }

    /// Whether the fraction of an accepted `text` holds digits below a
    /// nanosecond, which jiff drops (`1.0000001ms`). Only the last unit may
    /// have a fraction, so the last decimal point is the one; the unit's
    /// length comes from jiff itself (`"1" + unit`). ISO 8601's units (H, M,
    /// S) are whole seconds, and jiff takes at most nine digits.
    fn finer_than_a_nanosecond(text: &str) -> bool {
        let Some(point) = text.rfind(['.', ',']).filter(|_| !is_iso(text)) else {
            return false;
        };
        let rest = &text[point + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let unit = format!("1{}", rest[digits..].trim());
        match (
            rest[..digits].parse::<u128>(),
            friendly::SpanParser::new().parse_unsigned_duration(unit),
        ) {
            (Ok(fraction), Ok(one)) => fraction * one.as_nanos() % 10u128.pow(digits as u32) != 0,
            _ => false,
        }
    }

    /// A duration that could not be read: says what was written, why it was
    /// refused, and which forms are accepted.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct ParseError {
        text: Box<str>,
        why: Why,
    }

    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Why {
        Empty,
        NoUnit,
        Negative,
        Calendar,
        /// What jiff read, to the nanosecond.
        Inexact(Duration),
        Jiff(String),
    }

    impl fmt::Display for ParseError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let text = &self.text;
            match &self.why {
                Why::Empty => write!(f, "an empty text is not a duration; {FORMS}"),
                Why::NoUnit => write!(f, "`{text}` has no unit; {FORMS}"),
                Why::Negative => write!(f, "`{text}`: durations cannot be negative"),
                Why::Calendar => write!(
                    f,
                    "`{text}`: days, weeks, months and years are not accepted, since their \
                     length varies; write hours (24h) or less"
                ),
                Why::Inexact(d) => write!(
                    f,
                    "`{text}` is not a whole number of nanoseconds (it would be rounded to {})",
                    super::display(*d)
                ),
                Why::Jiff(e) => write!(f, "`{text}` is not a duration: {e}; {FORMS}"),
            }
        }
    }

    impl StdError for ParseError {}
}
