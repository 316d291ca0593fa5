//! Reading a `Retry-After` header (RFC 9110 §10.2.3).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ureq::http::{header::RETRY_AFTER, HeaderMap};

/// How long `headers` ask the client to wait, measured from `now` for the
/// date form.
///
/// Accepts delay-seconds (`120`) and an IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`); a date in the past is a zero wait.
/// Anything else, including the obsolete date formats, reads as absent.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // A number too large for u64 is still "a very long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = imf_fixdate(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses `Sun, 06 Nov 1994 08:49:37 GMT`.
fn imf_fixdate(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 29 || &b[3..5] != b", " || &b[25..] != b" GMT" {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let day = num(5..7)?;
    let month = match s.get(8..11)? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year = num(12..16)?;
    let (hour, min, sec) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if b[7] != b' ' || b[11] != b' ' || b[16] != b' ' || b[19] != b':' || b[22] != b':' {
        return None;
    }
    if !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 || year < 1970 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + min * 60 + sec;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year >= 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    // Howard Hinnant's algorithm, restricted to dates after the epoch.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use ureq::http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn reads_delay_seconds() {
        let now = SystemTime::now();
        assert_eq!(
            retry_after(&headers("120"), now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            retry_after(&headers(" 7 "), now),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn reads_an_imf_fixdate_relative_to_now() {
        // 1994-11-06T08:49:37Z is 784111777 s after the epoch.
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777 - 90);
        assert_eq!(
            retry_after(&headers("Sun, 06 Nov 1994 08:49:37 GMT"), now),
            Some(Duration::from_secs(90))
        );
        let later = UNIX_EPOCH + Duration::from_secs(784_111_777 + 5);
        assert_eq!(
            retry_after(&headers("Sun, 06 Nov 1994 08:49:37 GMT"), later),
            Some(Duration::ZERO)
        );
        // A leap-year date after February.
        let t = UNIX_EPOCH + Duration::from_secs(1_709_251_200); // 2024-03-01T00:00:00Z
        assert_eq!(
            retry_after(&headers("Fri, 01 Mar 2024 00:00:10 GMT"), t),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn anything_else_reads_as_absent() {
        let now = SystemTime::now();
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
        for bad in [
            "",
            "-5",
            "soon",
            "1.5",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
        ] {
            assert_eq!(retry_after(&headers(bad), now), None, "{bad:?}");
        }
    }
}
