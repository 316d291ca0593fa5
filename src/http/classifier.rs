//! Which HTTP outcomes count against a vendor.

use std::error::Error as StdError;
use std::fmt::{self, Write as _};
use std::io;
use std::time::{Duration, SystemTime};

use super::retry_after::retry_after;
use super::Error;
use crate::{Classifier, Verdict};

/// How a `429 Too Many Requests` counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TooManyRequests {
    /// A failure, [`Verdict::Throttled`] when the response carries a
    /// `Retry-After`: if the breaker opens, it stays open at least that
    /// long. The default: a vendor that is shedding load is a vendor in
    /// trouble, and hammering it makes things worse.
    #[default]
    Failure,
    /// The caller's problem (its own quota, say): passed through, never
    /// tripping the breaker.
    Ignore,
}

/// The ready classifier for `ureq` 3 and the guarded client.
///
/// It looks through an error's `source()` chain for a
/// [`fusebox::http::Error`](Error), a [`ureq::Error`] or an
/// [`io::Error`], and maps the first one it finds:
///
/// | outcome | verdict |
/// |---|---|
/// | status 5xx | failure (`Throttled` when a 503 carries `Retry-After`) |
/// | status 429 | failure, `Throttled(Retry-After)` when present; or ignored, see [`TooManyRequests`] |
/// | other status 4xx | ignored: the request was wrong, not the vendor |
/// | timeout (`Error::Timeout`, any phase) | failure |
/// | socket error (`Error::Io`): connection refused, reset, aborted, EOF | failure |
/// | DNS failure (`Error::HostNotFound`) | failure |
/// | TLS handshake failure (`Error::Tls`, `Rustls`, `NativeTls`, or `Io` from the TLS stream) | failure |
/// | no TLS for an `https` URL ([`Error::NoTls`], `Error::TlsRequired`): the agent cannot make any such call | failure |
/// | broken HTTP (`Error::Protocol`), corrupt body (`Decompress`), redirect loop, proxy `CONNECT` failure, `ConnectionFailed`, `Other` | failure |
/// | bad URI or header, `https_only` violated, invalid proxy URL, POST redirect refused | ignored: the request was wrong |
/// | body or header over the caller's size limit (`BodyExceedsLimit`, `LargeResponseHeader`) | ignored: a limit the caller chose |
/// | local TLS material (`Pem`, `Der`), cookies, JSON, charset, MIME | ignored: the caller's side |
/// | a later ureq variant this version does not know | failure: ureq adds transport errors |
/// | an async runtime's timeout: tokio's `time::error::Elapsed`, tower's `timeout::error::Elapsed` (an error whose `Debug` names it `Elapsed`) | failure |
/// | a bare `io::Error` (a body read through `io::Read`) | failure if `TimedOut`, `WouldBlock` (a socket read timeout on Unix), `ConnectionRefused`, `ConnectionReset`, `ConnectionAborted`, `NotConnected`, `BrokenPipe`, `UnexpectedEof` or `AddrNotAvailable`; else ignored |
/// | any other error | ignored: not an HTTP error, the caller's own |
///
/// A `Retry-After` is read as delay-seconds or an HTTP date (IMF-fixdate,
/// RFC 850 or asctime, as RFC 9110 requires; a date that does not exist
/// reads as absent), and capped at
/// [`max_retry_after`](Self::max_retry_after) so that one bad header cannot
/// keep the breaker open for a day.
///
/// ```
/// use fusebox::http::{HttpClassifier, TooManyRequests};
/// use fusebox::{Breaker, CallPath};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder("alt-data")
///     .call_path(CallPath::AltData)
///     .classifier(
///         HttpClassifier::new()
///             .too_many_requests(TooManyRequests::Failure)
///             .max_retry_after(Duration::from_secs(60)),
///     )
///     .build()?;
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `too_many_requests` | [`TooManyRequests::Failure`] |
/// | `max_retry_after` | 300 s |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpClassifier {
    too_many_requests: TooManyRequests,
    max_retry_after: Duration,
}

impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier::new()
    }
}

impl HttpClassifier {
    /// The defaults: 429 is a failure, `Retry-After` capped at 300 s.
    pub const fn new() -> Self {
        HttpClassifier {
            too_many_requests: TooManyRequests::Failure,
            max_retry_after: Duration::from_secs(300),
        }
    }

    /// How a 429 counts.
    pub const fn too_many_requests(mut self, value: TooManyRequests) -> Self {
        self.too_many_requests = value;
        self
    }

    /// The longest `Retry-After` honoured; longer ones are cut to this.
    pub const fn max_retry_after(mut self, value: Duration) -> Self {
        self.max_retry_after = value;
        self
    }

    /// The verdict for `err`, per the table above.
    pub fn verdict(&self, err: &(dyn StdError + 'static)) -> Verdict {
        let mut cur = Some(err);
        while let Some(e) = cur {
            if let Some(e) = e.downcast_ref::<Error>() {
                return self.verdict_for_error(e);
            }
            if let Some(e) = e.downcast_ref::<ureq::Error>() {
                return self.verdict_for_ureq(e);
            }
            if let Some(e) = e.downcast_ref::<io::Error>() {
                return self.verdict_for_io(e);
            }
            // An async runtime's timeout, tokio's or tower's, which this
            // crate does not depend on: both are a struct named `Elapsed`.
            if type_name(e).as_str() == "Elapsed" {
                return Verdict::Failure;
            }
            cur = e.source();
        }
        Verdict::Ignore
    }

    /// The verdict for a response with this status and, when it had one,
    /// this `Retry-After`. Statuses under 400 are not errors: ignored.
    pub fn verdict_for_status(&self, status: u16, retry_after: Option<Duration>) -> Verdict {
        let throttled = |d: Duration| Verdict::Throttled(d.min(self.max_retry_after));
        match status {
            429 => match (self.too_many_requests, retry_after) {
                (TooManyRequests::Ignore, _) => Verdict::Ignore,
                (TooManyRequests::Failure, Some(d)) => throttled(d),
                (TooManyRequests::Failure, None) => Verdict::Failure,
            },
            503 => retry_after.map_or(Verdict::Failure, throttled),
            500..=599 => Verdict::Failure,
            _ => Verdict::Ignore,
        }
    }

    fn verdict_for_error(&self, e: &Error) -> Verdict {
        match e {
            Error::Status(response) => {
                let wait = retry_after(response.headers(), SystemTime::now());
                self.verdict_for_status(response.status().as_u16(), wait)
            }
            Error::Transport(e) => self.verdict_for_ureq(e),
            // Every https call on this agent fails the same way until the
            // process is rebuilt: to the caller the vendor is unavailable,
            // and the breaker opening is how the process is told.
            Error::NoTls => Verdict::Failure,
        }
    }

    fn verdict_for_ureq(&self, e: &ureq::Error) -> Verdict {
        use ureq::Error as U;
        match e {
            U::StatusCode(code) => self.verdict_for_status(*code, None),
            // Socket I/O inside ureq: refused, reset, EOF, and TLS handshake
            // failures (rustls reports through `io::ErrorKind::InvalidData`).
            U::Io(_)
            | U::Timeout(_)
            | U::HostNotFound
            | U::Protocol(_)
            | U::ConnectionFailed
            | U::TooManyRedirects
            | U::Tls(_)
            | U::ConnectProxyFailed(_)
            | U::Other(_) => Verdict::Failure,
            // No TLS for an https URL: every such call fails, see `Error::NoTls`.
            U::TlsRequired => Verdict::Failure,
            U::Http(_)
            | U::BadUri(_)
            | U::RedirectFailed
            | U::InvalidProxyUrl
            | U::BodyExceedsLimit(_)
            | U::RequireHttpsOnly(_)
            | U::LargeResponseHeader(..) => Verdict::Ignore,
            // The rest exist only with some of ureq's features, which this
            // crate does not turn on but the application may: they cannot be
            // named in a pattern here, so they are told apart by name.
            other => match variant_name(other).as_str() {
                "Rustls" | "NativeTls" | "Decompress" | "BodyStalled" => Verdict::Failure,
                "Pem" | "Der" | "Cookie" | "CookieValue" | "CookieJar" | "UnknownCharset"
                | "Json" | "InvalidMimeType" => Verdict::Ignore,
                // A variant added after ureq 3.5: transport errors are what
                // ureq adds, and its connectors are told to report as such.
                _ => Verdict::Failure,
            },
        }
    }

    /// A bare `io::Error`, from reading a ureq body through `io::Read` or
    /// from the caller's own code: only network kinds count.
    fn verdict_for_io(&self, e: &io::Error) -> Verdict {
        // ureq reports its own errors through `io::Read` wrapped in an
        // `io::Error`; unwrap them.
        if let Some(inner) = e.get_ref() {
            if let Some(u) = inner.downcast_ref::<ureq::Error>() {
                return self.verdict_for_ureq(u);
            }
        }
        use io::ErrorKind as K;
        match e.kind() {
            K::TimedOut
            | K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::BrokenPipe
            | K::UnexpectedEof
            | K::AddrNotAvailable
            | K::WouldBlock => Verdict::Failure,
            _ => Verdict::Ignore,
        }
    }
}

impl From<HttpClassifier> for Classifier {
    fn from(c: HttpClassifier) -> Self {
        Classifier::new(move |err| c.verdict(err))
    }
}

/// The name of `e`'s variant, read from its derived `Debug` output into a
/// fixed buffer: no allocation, whatever the payload.
fn variant_name(e: &ureq::Error) -> Name {
    type_name(e)
}

/// The name a derived `Debug` output starts with (a struct's, or an enum
/// variant's), read into a fixed buffer: no allocation, whatever follows.
fn type_name(e: &dyn fmt::Debug) -> Name {
    let mut name = Name::default();
    // The writer stops at the first byte that cannot be part of the name,
    // which makes `write!` return an error: that is the expected way out.
    let _ = write!(name, "{e:?}");
    name
}

#[derive(Default)]
struct Name {
    buf: [u8; 24],
    len: usize,
    done: bool,
}

impl Name {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl fmt::Write for Name {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if self.done || !b.is_ascii_alphanumeric() || self.len == self.buf.len() {
                self.done = true;
                return Err(fmt::Error);
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_variant_name_without_its_payload() {
        let e = ureq::Error::Tls("handshake");
        assert_eq!(variant_name(&e).as_str(), "Tls");
        assert_eq!(
            variant_name(&ureq::Error::HostNotFound).as_str(),
            "HostNotFound"
        );
        assert_eq!(
            variant_name(&ureq::Error::BodyExceedsLimit(10)).as_str(),
            "BodyExceedsLimit"
        );
    }
}
