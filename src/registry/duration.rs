//! Human durations ("250ms", "30s", "1.5m"), as configuration files and the
//! admin endpoint's override requests write them.

use std::time::Duration;

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
