//! The last-known-good cache: the answer to serve, marked stale, when the
//! vendor cannot give a fresh one.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::failure::Failure;
use super::key::key;
use super::{Error, Response};
use crate::last_good::{Kept, LastGood};
use crate::{CallError, Rejected};
use ureq::http::{Method, Uri};

/// The last successful response to each request, bounded in entries and
/// bytes, served (and marked stale) when the breaker refuses or the vendor
/// fails: the crate's one last-known-good store,
/// [`LastGood`](crate::last_good::LastGood), keyed by request.
///
/// Fill and read it with
/// [`GuardedRequest::call_or_stale`](super::GuardedRequest::call_or_stale).
/// Entries are keyed by the request as it is sent: method, URI and query,
/// so `get("/px?sym=A")` and `get("/px").query("sym", "A")` are one entry.
/// Only 2xx answers to `GET` and `HEAD` are kept, each weighing its key,
/// header and body bytes against `max_bytes`. A stale answer older than
/// `max_staleness` is never served: past that, the caller gets the error
/// instead, so a strategy cannot go on trading on data of unknown age.
/// Every answer says whether it is fresh, and if not, how old it is and
/// why the fresh call did not happen ([`StaleReason`]).
///
/// An answer too old to serve is still kept (until a fresh one replaces it
/// or the bounds push it out), so that its age stays known: the error then
/// says how old the last good answer is ([`Unavailable::stale_age`]), which
/// tells "never had data" from "had data, 4 s ago".
/// [`age`](crate::last_good::LastGood::age) reads the same without making a
/// call.
///
/// Ages come from a `quanta` clock; pass the mock (the same one as the
/// breaker's) in tests to age entries without sleeping.
///
/// ```
/// use fusebox::http::LastKnownGood;
/// use std::time::Duration;
///
/// let cache = LastKnownGood::new(Duration::from_secs(30))
///     .max_entries(512)
///     .max_bytes(8 << 20);
/// assert!(cache.is_empty());
/// ```
pub type LastKnownGood = LastGood<String, Arc<Response>>;

impl LastGood<String, Arc<Response>> {
    /// How old the last good answer to `method` on `uri` is, without making
    /// a call: `None` when none is kept (never had one, or it was pushed out
    /// by the bounds). The age is read whether or not it is past
    /// `max_staleness`.
    ///
    /// `uri` carries the whole query (`"https://vendor/px?sym=A"` is the
    /// entry `get("https://vendor/px").query("sym", "A")` filed); a `uri`
    /// that does not parse has no entry.
    ///
    /// ```
    /// use fusebox::http::{ureq::http::Method, LastKnownGood};
    /// use std::time::Duration;
    ///
    /// let cache = LastKnownGood::new(Duration::from_secs(30));
    /// assert_eq!(cache.age(&Method::GET, "https://vendor.example/px?sym=A"), None);
    /// ```
    pub fn age<T>(&self, method: &Method, uri: T) -> Option<Duration>
    where
        Uri: TryFrom<T>,
    {
        let uri = Uri::try_from(uri).ok()?;
        self.age_of(key(method, &uri, "").as_str())
    }
}

/// Files a fresh answer in `cache`, or finds a stale one for a failed call.
pub(super) fn serve(
    cache: &LastKnownGood,
    key: Option<String>,
    result: Result<Response, Failure>,
) -> Result<Served, Unavailable> {
    match result {
        Ok(response) => {
            let response = Arc::new(response);
            if let Some(key) = key {
                if response.status().is_success() {
                    let size = key.len() + size_of(&response);
                    cache.file_weighed(key, Arc::clone(&response), size);
                }
            }
            Ok(Served {
                response,
                freshness: Freshness::Fresh,
            })
        }
        Err(failure) => stale(cache, key.as_deref(), failure),
    }
}

fn stale(
    cache: &LastKnownGood,
    key: Option<&str>,
    failure: Failure,
) -> Result<Served, Unavailable> {
    let unavailable = |error, why| Err(Unavailable { error, why });
    let Some(key) = key else {
        return unavailable(failure.error, Why::NotKept);
    };
    if !failure.vendor_unavailable() {
        return unavailable(failure.error, Why::VendorAnswered);
    }
    match cache.get(key) {
        Kept::Missing => unavailable(failure.error, Why::Missing),
        // Too old: kept, so that its age stays known, never served.
        Kept::TooOld { age } => unavailable(failure.error, Why::TooOld(age)),
        Kept::Fresh {
            value: response,
            age,
        } => Ok(Served {
            response,
            freshness: Freshness::Stale {
                age,
                reason: match failure.error {
                    CallError::Rejected(r) => StaleReason::BreakerOpen(r),
                    CallError::Failed(e) => StaleReason::ProviderError(e),
                },
            },
        }),
    }
}

/// Header and body bytes of a response.
fn size_of(response: &Response) -> usize {
    let headers: usize = response
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    headers + response.body().len()
}

/// An answer from [`call_or_stale`](super::GuardedRequest::call_or_stale):
/// fresh from the vendor, or the last good one, marked stale.
///
/// Check [`is_fresh`](Self::is_fresh) before acting on it; a stale one
/// says how old it is ([`age`](Self::age)) and why
/// ([`stale_reason`](Self::stale_reason)).
#[derive(Debug)]
pub struct Served {
    response: Arc<Response>,
    freshness: Freshness,
}

impl Served {
    /// The response.
    pub fn response(&self) -> &Response {
        &self.response
    }

    /// The response body.
    pub fn body(&self) -> &[u8] {
        self.response.body()
    }

    /// Whether the vendor just gave this answer.
    pub fn is_fresh(&self) -> bool {
        matches!(self.freshness, Freshness::Fresh)
    }

    /// How old the answer is: zero when fresh.
    pub fn age(&self) -> Duration {
        match self.freshness {
            Freshness::Fresh => Duration::ZERO,
            Freshness::Stale { age, .. } => age,
        }
    }

    /// Why no fresh answer was had, when stale.
    pub fn stale_reason(&self) -> Option<&StaleReason> {
        match &self.freshness {
            Freshness::Fresh => None,
            Freshness::Stale { reason, .. } => Some(reason),
        }
    }
}

/// Whether an answer is fresh.
#[derive(Debug)]
enum Freshness {
    /// The vendor gave this answer to this call.
    Fresh,
    /// The last good answer, given by the vendor `age` ago.
    Stale {
        /// Time since the vendor gave it, on the cache's clock.
        age: Duration,
        /// Why there was no fresh answer.
        reason: StaleReason,
    },
}

/// Why a stale answer was served.
#[derive(Debug)]
#[non_exhaustive]
pub enum StaleReason {
    /// The breaker refused the call (open, forced open, or half-open with
    /// its probe out): nothing was sent.
    BreakerOpen(Rejected),
    /// The call was made and the vendor failed (a failure by the
    /// classifier: timeout, refused connection, 5xx, 429...).
    ProviderError(Error),
}

impl fmt::Display for StaleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StaleReason::BreakerOpen(r) => {
                write!(f, "breaker open ({} {})", r.breaker(), r.state())
            }
            // Not an error itself, so it prints the whole chain.
            StaleReason::ProviderError(e) => {
                f.write_str("provider error (")?;
                for (i, link) in crate::error::chain(e).enumerate() {
                    let sep = if i == 0 { "" } else { ": " };
                    write!(f, "{sep}{link}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// Neither a fresh answer nor a stale one to serve: the call's error, and
/// why no stale answer stood in.
#[derive(Debug)]
pub struct Unavailable {
    error: CallError<Error>,
    why: Why,
}

#[derive(Clone, Copy, Debug)]
enum Why {
    /// Not a `GET` or `HEAD`, or the request did not build.
    NotKept,
    /// The vendor answered with an error the classifier ignores (a 4xx).
    VendorAnswered,
    /// Nothing was kept for this request.
    Missing,
    /// The last good answer is older than `max_staleness` (kept, not served).
    TooOld(Duration),
}

impl Unavailable {
    /// The call's error: refused by the breaker, or failed.
    pub fn error(&self) -> &CallError<Error> {
        &self.error
    }

    /// When a last good answer is kept but is older than `max_staleness`:
    /// its age. `None` when there is none to fall back on (never had one,
    /// pushed out by the bounds, or not a request that is kept) or when the
    /// vendor's answer stands.
    pub fn stale_age(&self) -> Option<Duration> {
        match self.why {
            Why::TooOld(age) => Some(age),
            _ => None,
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The call's error is the source, so a chain prints it once.
        match self.why {
            Why::NotKept => f.write_str("no fallback for this request"),
            Why::VendorAnswered => f.write_str("the vendor's answer stands, no fallback"),
            Why::Missing => f.write_str("no last good answer to fall back on"),
            Why::TooOld(age) => write!(
                f,
                "last good answer too old to serve ({})",
                crate::duration::display(age)
            ),
        }
    }
}

impl StdError for Unavailable {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.error)
    }
}
