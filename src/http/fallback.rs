//! The last-known-good cache: the answer to serve, marked stale, when the
//! vendor cannot give a fresh one.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::failure::Failure;
use super::key::key;
use super::{Error, Response};
use crate::{CallError, Rejected};
use ureq::http::{Method, Uri};

/// The last successful response to each request, bounded in entries and
/// bytes, served (and marked stale) when the breaker refuses or the vendor
/// fails.
///
/// Fill and read it with
/// [`GuardedRequest::call_or_stale`](super::GuardedRequest::call_or_stale).
/// Entries are keyed by the request as it is sent: method, URI and query,
/// so `get("/px?sym=A")` and `get("/px").query("sym", "A")` are one entry.
/// Only 2xx answers to `GET` and `HEAD` are kept. A stale answer older than
/// [`max_staleness`](Self::new) is never served: past that, the caller gets
/// the error instead, so a strategy cannot go on trading on data of unknown
/// age. Every answer says whether it is fresh, and if not, how old it is and
/// why the fresh call did not happen ([`StaleReason`]).
///
/// An answer too old to serve is still kept (until a fresh one replaces it
/// or the bounds push it out), so that its age stays known: the error then
/// says how old the last good answer is ([`Unavailable::stale_age`]), which
/// tells "never had data" from "had data, 4 s ago". [`age`](Self::age) reads
/// the same without making a call.
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
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `max_staleness` | required, in [`new`](Self::new) |
/// | `max_entries` | 1024 |
/// | `max_bytes` | 64 MiB (key, header and body bytes) |
/// | `clock` | a real `quanta::Clock` |
///
/// # Cost
///
/// One lock round trip per call. Filing an answer under a new key allocates
/// the key; when the cache is over a bound, making room scans the entries
/// for the oldest, so keep `max_entries` in the thousands, not millions.
pub struct LastKnownGood {
    max_staleness: Duration,
    max_entries: usize,
    max_bytes: usize,
    clock: quanta::Clock,
    store: Mutex<Store>,
}

#[derive(Default)]
struct Store {
    entries: HashMap<String, Entry>,
    bytes: usize,
    /// Filing order, so that the oldest entry is well defined even when
    /// the clock has not moved (a mock clock).
    filed: u64,
}

struct Entry {
    response: Arc<Response>,
    stored_at: quanta::Instant,
    size: usize,
    filed: u64,
}

impl LastKnownGood {
    /// An empty cache that never serves an answer older than
    /// `max_staleness`. Zero means stale answers are never served, not even
    /// one filed this instant; answers are still filed, so that
    /// [`age`](Self::age) and [`Unavailable::stale_age`] can say how old the
    /// last good one is.
    pub fn new(max_staleness: Duration) -> Self {
        LastKnownGood {
            max_staleness,
            max_entries: 1024,
            max_bytes: 64 << 20,
            clock: quanta::Clock::new(),
            store: Mutex::new(Store::default()),
        }
    }

    /// The most answers kept; the oldest go first. Zero keeps none.
    pub fn max_entries(mut self, entries: usize) -> Self {
        self.max_entries = entries;
        self
    }

    /// The most bytes kept (keys, headers and bodies); the oldest answers
    /// go first, and an answer larger than this on its own is not kept.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The clock ages are read from. Pass the clock half of
    /// `quanta::Clock::mock()` in tests.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The longest an answer may have been kept and still be served.
    pub fn max_staleness(&self) -> Duration {
        self.max_staleness
    }

    /// How old the last good answer to `method` on `uri` is, without making
    /// a call: `None` when none is kept (never had one, or it was pushed out
    /// by the bounds). The age is read whether or not it is past
    /// `max_staleness`; compare with [`max_staleness`](Self::max_staleness)
    /// to know whether it would be served.
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
        let key = key(method, &uri, "");
        let now = self.clock.now();
        let store = self.store.lock();
        let entry = store.entries.get(&key)?;
        Some(now.saturating_duration_since(entry.stored_at))
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.store.lock().entries.len()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many bytes the kept answers take, as counted against
    /// [`max_bytes`](Self::max_bytes).
    pub fn bytes(&self) -> usize {
        self.store.lock().bytes
    }

    /// Forgets every answer.
    pub fn clear(&self) {
        let mut store = self.store.lock();
        store.entries.clear();
        store.bytes = 0;
    }

    /// Files a fresh answer, or finds a stale one for a failed call.
    pub(super) fn serve(
        &self,
        key: Option<String>,
        result: Result<Response, Failure>,
    ) -> Result<Served, Unavailable> {
        match result {
            Ok(response) => {
                let response = Arc::new(response);
                if let Some(key) = key {
                    if response.status().is_success() {
                        self.file(key, Arc::clone(&response));
                    }
                }
                Ok(Served {
                    response,
                    freshness: Freshness::Fresh,
                })
            }
            Err(failure) => self.stale(key.as_deref(), failure),
        }
    }

    fn stale(&self, key: Option<&str>, failure: Failure) -> Result<Served, Unavailable> {
        let unavailable = |error, why| Err(Unavailable { error, why });
        let Some(key) = key else {
            return unavailable(failure.error, Why::NotKept);
        };
        if !failure.vendor_unavailable() {
            return unavailable(failure.error, Why::VendorAnswered);
        }
        let now = self.clock.now();
        let found = self.store.lock().entries.get(key).map(|e| {
            let age = now.saturating_duration_since(e.stored_at);
            // Zero staleness serves nothing, not even an answer aged zero
            // (a mock clock that has not moved).
            if !self.max_staleness.is_zero() && age <= self.max_staleness {
                Ok((Arc::clone(&e.response), age))
            } else {
                // Too old: kept, so that its age stays known, never served.
                Err(age)
            }
        });
        match found {
            None => unavailable(failure.error, Why::Missing),
            Some(Err(age)) => unavailable(failure.error, Why::TooOld(age)),
            Some(Ok((response, age))) => Ok(Served {
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

    fn file(&self, key: String, response: Arc<Response>) {
        let size = key.len() + size_of(&response);
        let now = self.clock.now();
        let mut store = self.store.lock();
        if size > self.max_bytes || self.max_entries == 0 {
            // Not kept; nor is an older answer to the same request, which
            // is no longer the last known good one.
            store.remove(&key);
            return;
        }
        store.filed += 1;
        let entry = Entry {
            response,
            stored_at: now,
            size,
            filed: store.filed,
        };
        store.bytes += size;
        if let Some(old) = store.entries.insert(key, entry) {
            store.bytes -= old.size;
        }
        while store.entries.len() > self.max_entries || store.bytes > self.max_bytes {
            store.evict_oldest();
        }
    }
}

impl Store {
    fn remove(&mut self, key: &str) {
        if let Some(e) = self.entries.remove(key) {
            self.bytes -= e.size;
        }
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.filed)
            .map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            self.remove(&key);
        }
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

impl fmt::Debug for LastKnownGood {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = self.store.lock();
        f.debug_struct("LastKnownGood")
            .field("max_staleness", &self.max_staleness)
            .field("max_entries", &self.max_entries)
            .field("max_bytes", &self.max_bytes)
            .field("entries", &store.entries.len())
            .field("bytes", &store.bytes)
            .finish_non_exhaustive()
    }
}

/// An answer from [`call_or_stale`](super::GuardedRequest::call_or_stale):
/// fresh from the vendor, or the last good one, marked stale.
///
/// Check [`is_fresh`](Self::is_fresh) (or match on
/// [`freshness`](Self::freshness)) before acting on it.
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

    /// The response, shared with the cache.
    pub fn into_response(self) -> Arc<Response> {
        self.response
    }

    /// Fresh, or stale with its age and the reason.
    pub fn freshness(&self) -> &Freshness {
        &self.freshness
    }

    /// Whether the vendor just gave this answer.
    pub fn is_fresh(&self) -> bool {
        matches!(self.freshness, Freshness::Fresh)
    }

    /// Whether this is an older answer standing in for a fresh one.
    pub fn is_stale(&self) -> bool {
        !self.is_fresh()
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
#[non_exhaustive]
pub enum Freshness {
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

    /// The call's error, owned.
    pub fn into_error(self) -> CallError<Error> {
        self.error
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
