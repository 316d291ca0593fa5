//! Reading a `Retry-After` header (RFC 9110 §10.2.3).

use std::time::{Duration, SystemTime};

use ureq::http::{header::RETRY_AFTER, HeaderMap};

/// How long `headers` ask the client to wait, measured from `now` for the
/// date form.
///
/// Accepts delay-seconds (`120`) and an HTTP date in any of the three forms
/// RFC 9110 §5.6.7 requires a recipient to accept: the IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and the asctime form
/// (`Sun Nov  6 08:49:37 1994`), parsed by the `httpdate` crate, which also
/// rejects dates that do not exist (31 February) and weekdays that do not
/// match the date. A date in the past is a zero wait. Anything else reads
/// as absent.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // A number too large for u64 is still "a very long time".
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;
    use ureq::http::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        h
    }

    /// 1994-11-06T08:49:37Z, the date RFC 9110 writes in all three forms.
    const RFC_EXAMPLE: u64 = 784_111_777;

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
    fn reads_the_three_date_forms_relative_to_now() {
        let now = UNIX_EPOCH + Duration::from_secs(RFC_EXAMPLE - 90);
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                retry_after(&headers(date), now),
                Some(Duration::from_secs(90)),
                "{date:?}"
            );
        }
        let later = UNIX_EPOCH + Duration::from_secs(RFC_EXAMPLE + 5);
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
        let now = UNIX_EPOCH;
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
        for bad in [
            "",
            "-5",
            "soon",
            "1.5",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            // Dates that do not exist, or whose weekday is wrong.
            "Sat, 31 Feb 2099 00:00:00 GMT",
            "Sat, 29 Feb 2100 00:00:00 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(retry_after(&headers(bad), now), None, "{bad:?}");
        }
    }
}
