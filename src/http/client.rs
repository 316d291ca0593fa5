//! The guarded client: a `ureq` agent whose every request goes through a
//! breaker.

use std::fmt;
use std::time::Duration;

use ureq::config::Config;
use ureq::http::{self, Uri};
#[cfg(any(feature = "rustls", feature = "native-tls"))]
use ureq::tls::{RootCerts, TlsConfig, TlsProvider};
use ureq::typestate::{WithBody, WithoutBody};
use ureq::{Agent, AsSendBody, Body, RequestBuilder};

use super::failure::Failure;
use super::fallback::{LastKnownGood, Served, Unavailable};
use super::key::{key, push_query_pair};
use super::{AgentError, Error, Response};
use crate::seam::Seam;
use crate::{Breaker, CallError, Verdict};

/// A `ureq` [`Agent`] and the [`Breaker`] in front of it.
///
/// Every request made through it asks the breaker first. A refused request
/// returns [`CallError::Rejected`] at once and **never touches the
/// network**. An admitted one runs on the agent, its body is read (within
/// [`max_body_size`](Self::max_body_size)) while the permit is held, so a
/// vendor that sends headers and then stalls is seen as slow or failed, and
/// the outcome is classified by the breaker's [`Classifier`](crate::Classifier)
/// (an [`HttpClassifier`](super::HttpClassifier)).
///
/// A status of 400 or more is returned as [`Error::Status`], with the
/// response whole: the classifier decides whether it counts.
///
/// Cheap to clone (the clones share the agent's connection pool and the
/// breaker) and `Send + Sync`: build one per vendor at start-up and share it
/// between threads.
///
/// ```no_run
/// use fusebox::http::{ureq, GuardedClient};
/// use fusebox::{Breaker, CallError, CallPath};
/// use std::time::Duration;
///
/// let agent: ureq::Agent = ureq::Agent::config_builder()
///     .timeout_global(Some(Duration::from_millis(800)))
///     .http_status_as_error(false)
///     .build()
///     .into();
/// let breaker = Breaker::builder("refdata")
///     .call_path(CallPath::ReferenceData)
///     .classifier(fusebox::http::HttpClassifier::new())
///     .build()?;
/// let client = GuardedClient::new(agent, breaker)?;
///
/// match client.get("https://refdata.example/instruments/ESZ6").call() {
///     Ok(response) => println!("{} bytes", response.body().len()),
///     Err(CallError::Rejected(r)) => println!("not attempted: {r}"),
///     Err(CallError::Failed(e)) => println!("vendor failed: {e}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct GuardedClient {
    agent: Agent,
    breaker: Breaker,
    max_body: u64,
    /// The longest a call on the agent can take (see [`call_bound`]).
    bound: Duration,
}

/// ureq's own default limit for reading a body into memory.
const DEFAULT_MAX_BODY: u64 = 10 * 1024 * 1024;

impl GuardedClient {
    /// Puts `breaker` in front of `agent`.
    ///
    /// The agent's timeout (the longest a call on it can take: its
    /// `timeout_global`, or else `timeout_per_call`, or else the sum of its
    /// phase timeouts, the last two once per redirect) is checked against
    /// the breaker's timing once, here.
    ///
    /// # Errors
    ///
    /// - [`AgentError::NoTimeout`] when nothing bounds a whole call: set
    ///   `timeout_global` or `timeout_per_call` (or every phase timeout:
    ///   resolve, connect, send request, send body, receive response,
    ///   receive body).
    /// - [`AgentError::StatusAsError`] when the agent turns 4xx and 5xx into
    ///   `ureq::Error::StatusCode`, which loses `Retry-After`: build it with
    ///   `http_status_as_error(false)`.
    /// - [`AgentError::ProbeOutlivedByCall`] when the breaker's
    ///   `max_probe_duration` is shorter than the agent's timeout: a probe
    ///   to a hanging vendor would expire while its request still waits,
    ///   and the next call would go as a new probe, so that probes pile up
    ///   at the vendor.
    /// - [`AgentError::SlowCallNeverFires`] when the breaker's
    ///   `slow_call_duration` is longer than the agent's timeout: no call
    ///   could ever succeed that slowly.
    /// - [`AgentError::TlsNotBuilt`] when the agent's TLS configuration
    ///   selects a TLS stack or verifier this build of fusebox leaves out
    ///   (native-tls without the `native-tls` feature, say), on which ureq
    ///   would panic at the first `https` request. An agent on a build with
    ///   no TLS at all is accepted (it may call `http` URLs only); an
    ///   `https` call on it fails with [`Error::NoTls`].
    pub fn new(agent: Agent, breaker: Breaker) -> Result<Self, AgentError> {
        let config = agent.config();
        let Some(bound) = call_bound(config) else {
            return Err(AgentError::NoTimeout);
        };
        if config.http_status_as_error() {
            return Err(AgentError::StatusAsError);
        }
        // With no TLS built, ureq has no TLS settings to get wrong: an
        // https call fails with `Error::NoTls`.
        #[cfg(any(feature = "rustls", feature = "native-tls"))]
        if let Some(missing) = TlsBuilt::THIS.missing(config.tls_config()) {
            return Err(missing);
        }
        let (max_probe_duration, slow_call_duration) = breaker.probe_and_slow_call_durations();
        if max_probe_duration < bound {
            return Err(AgentError::ProbeOutlivedByCall {
                max_probe_duration,
                timeout: bound,
            });
        }
        if let Some(slow_call_duration) = slow_call_duration.filter(|&slow| slow > bound) {
            return Err(AgentError::SlowCallNeverFires {
                slow_call_duration,
                timeout: bound,
            });
        }
        Ok(GuardedClient {
            agent,
            breaker,
            max_body: DEFAULT_MAX_BODY,
            bound,
        })
    }

    /// The largest response body read into memory, in bytes; a longer one
    /// fails with `ureq::Error::BodyExceedsLimit` (the caller's limit, so
    /// ignored by the classifier). Default 10 MiB, as in ureq.
    pub fn max_body_size(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }

    /// The breaker, for snapshots, subscriptions and overrides.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The longest a call through this client can take: the agent's
    /// timeout, as checked by [`new`](Self::new). Every request is bound
    /// by it, whatever its own configuration says (see
    /// [`GuardedRequest::with`]).
    pub fn timeout(&self) -> Duration {
        self.bound
    }

    /// A guarded `GET`.
    pub fn get<T>(&self, uri: T) -> GuardedRequest<'_, WithoutBody>
    where
        Uri: TryFrom<T>,
        <Uri as TryFrom<T>>::Error: Into<http::Error>,
    {
        self.request(self.agent.get(uri))
    }

    /// A guarded `HEAD`.
    pub fn head<T>(&self, uri: T) -> GuardedRequest<'_, WithoutBody>
    where
        Uri: TryFrom<T>,
        <Uri as TryFrom<T>>::Error: Into<http::Error>,
    {
        self.request(self.agent.head(uri))
    }

    /// A guarded `DELETE`.
    pub fn delete<T>(&self, uri: T) -> GuardedRequest<'_, WithoutBody>
    where
        Uri: TryFrom<T>,
        <Uri as TryFrom<T>>::Error: Into<http::Error>,
    {
        self.request(self.agent.delete(uri))
    }

    /// A guarded `POST`.
    pub fn post<T>(&self, uri: T) -> GuardedRequest<'_, WithBody>
    where
        Uri: TryFrom<T>,
        <Uri as TryFrom<T>>::Error: Into<http::Error>,
    {
        self.request(self.agent.post(uri))
    }

    /// A guarded `PUT`.
    pub fn put<T>(&self, uri: T) -> GuardedRequest<'_, WithBody>
    where
        Uri: TryFrom<T>,
        <Uri as TryFrom<T>>::Error: Into<http::Error>,
    {
        self.request(self.agent.put(uri))
    }

    /// A guarded `PATCH`.
    pub fn patch<T>(&self, uri: T) -> GuardedRequest<'_, WithBody>
    where
        Uri: TryFrom<T>,
        <Uri as TryFrom<T>>::Error: Into<http::Error>,
    {
        self.request(self.agent.patch(uri))
    }

    fn request<B>(&self, request: RequestBuilder<B>) -> GuardedRequest<'_, B> {
        GuardedRequest {
            client: self,
            request,
            query: String::new(),
            timeout: None,
            configured: false,
        }
    }

    /// The whole guarded call: ask the breaker, run, read the body, report.
    ///
    /// Everything a successful call costs beyond the request itself is here:
    /// one atomic load to be admitted, and the permit's report (one lock
    /// round trip, one clock read). Nothing is allocated on success.
    fn execute<F>(&self, send: F) -> Result<Response, Failure>
    where
        F: FnOnce() -> Result<http::Response<Body>, ureq::Error>,
    {
        let permit = match self.breaker.try_acquire() {
            Ok(permit) => permit,
            Err(rejected) => {
                return Err(Failure {
                    error: CallError::Rejected(rejected),
                    verdict: Verdict::Ignore,
                })
            }
        };
        let error = match send().and_then(|r| read_body(r, self.max_body)) {
            Ok(response) if response.status().as_u16() < 400 => {
                permit.record(Verdict::Success);
                return Ok(response);
            }
            Ok(response) => Error::Status(Box::new(response)),
            Err(e) => Error::from_ureq(e),
        };
        let view = crate::classify::ErrorView::of_error(&error);
        let verdict = self.breaker.classifier().classify_view(view);
        permit.record_failed::<Error>(verdict, view);
        Err(Failure {
            error: CallError::Failed(error),
            verdict,
        })
    }
}

impl fmt::Debug for GuardedClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedClient")
            .field("breaker", &self.breaker)
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

/// The longest a call on `config` can take, or `None` when nothing bounds
/// it: `timeout_global`; else `timeout_per_call` once per exchange (the
/// first and one per redirect followed); else, when every phase has one,
/// the sum of the phase timeouts per exchange. ureq applies all that are
/// set, so the shortest of these is the bound.
fn call_bound(config: &Config) -> Option<Duration> {
    let t = config.timeouts();
    let exchanges = config.max_redirects().saturating_add(1);
    let phases = [
        t.resolve,
        t.connect,
        t.send_request,
        t.send_body,
        t.recv_response,
        t.recv_body,
    ]
    .into_iter()
    .try_fold(t.await_100.unwrap_or(Duration::ZERO), |sum, phase| {
        Some(sum.saturating_add(phase?))
    });
    let per_exchange = [t.per_call, phases].into_iter().flatten().min();
    let whole = per_exchange.map(|d| d.saturating_mul(exchanges));
    [t.global, whole].into_iter().flatten().min()
}

/// The TLS pieces of ureq that this build of fusebox turns on, through its
/// features `rustls`, `native-tls` and `platform-verifier`.
#[cfg(any(feature = "rustls", feature = "native-tls"))]
#[derive(Clone, Copy, Debug)]
struct TlsBuilt {
    rustls: bool,
    native_tls: bool,
    platform_verifier: bool,
}

#[cfg(any(feature = "rustls", feature = "native-tls"))]
impl TlsBuilt {
    const THIS: TlsBuilt = TlsBuilt {
        rustls: cfg!(feature = "rustls"),
        native_tls: cfg!(feature = "native-tls"),
        platform_verifier: cfg!(feature = "platform-verifier"),
    };

    /// What `tls` selects that is not built: with some TLS stack built,
    /// ureq checks at the first `https` request that the selected one is,
    /// and panics if not.
    fn missing(self, tls: &TlsConfig) -> Option<AgentError> {
        let (selected, feature) = match tls.provider() {
            TlsProvider::Rustls if !self.rustls => ("rustls", "rustls"),
            TlsProvider::Rustls
                if matches!(tls.root_certs(), RootCerts::PlatformVerifier)
                    && !self.platform_verifier =>
            {
                ("the platform verifier", "platform-verifier")
            }
            TlsProvider::NativeTls if !self.native_tls => ("native-tls", "native-tls"),
            _ => return None,
        };
        Some(AgentError::TlsNotBuilt { selected, feature })
    }
}

fn read_body(response: http::Response<Body>, limit: u64) -> Result<Response, ureq::Error> {
    let (parts, body) = response.into_parts();
    let bytes = body.into_with_config().limit(limit).read_to_vec()?;
    Ok(Response::from_parts(parts, bytes))
}

/// A request being built on a [`GuardedClient`]. Send it with
/// [`call`](Self::call) / [`send`](Self::send), or with
/// [`call_or_stale`](Self::call_or_stale) to fall back on the last good
/// answer.
#[must_use = "a request does nothing until it is sent"]
pub struct GuardedRequest<'a, B> {
    client: &'a GuardedClient,
    request: RequestBuilder<B>,
    /// Query pairs added through `query`, encoded and joined as ureq sends
    /// them, for the fallback key. Empty (and unallocated) unless `query`
    /// is used.
    query: String,
    /// A whole-call timeout for this request, from `timeout`.
    timeout: Option<Duration>,
    /// Whether `with` may have changed the request's configuration.
    configured: bool,
}

impl<B> GuardedRequest<'_, B> {
    /// Appends a header.
    pub fn header<K, V>(mut self, key: K, value: V) -> Self
    where
        http::HeaderName: TryFrom<K>,
        <http::HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        http::HeaderValue: TryFrom<V>,
        <http::HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.request = self.request.header(key, value);
        self
    }

    /// Appends a query parameter (percent-encoded by ureq). It is part of
    /// the key under which [`LastKnownGood`] files the answer, exactly as
    /// if it had been written in the URI: `get("/px").query("sym", "A")`
    /// and `get("/px?sym=A")` are the same request.
    pub fn query(mut self, key: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        push_query_pair(&mut self.query, key, value);
        self.request = self.request.query(key, value);
        self
    }

    /// A whole-call timeout for this request alone, shorter than the
    /// client's: a longer one is cut to [`GuardedClient::timeout`], so that
    /// the checks [`GuardedClient::new`] made against the breaker hold.
    ///
    /// Costs one copy of the agent's configuration for the request (ureq's
    /// request-level config), as any request-level setting does.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Anything else ureq's [`RequestBuilder`] offers (request-level
    /// config, HTTP version, extensions).
    ///
    /// The whole-call timeout is not among them: ureq does not let a
    /// request's configuration be read back, so after `f` the request is
    /// bound again, with `timeout_global` set to the client's timeout (or
    /// the shorter one given to [`timeout`](Self::timeout)), and
    /// `http_status_as_error` set back to `false`. A request-level
    /// `timeout_global(None)` cannot leave a call to a hanging vendor
    /// unbounded; use [`timeout`](Self::timeout) for a shorter one.
    ///
    /// Query parameters added here are not part of the [`LastKnownGood`]
    /// key: use [`query`](Self::query).
    pub fn with(mut self, f: impl FnOnce(RequestBuilder<B>) -> RequestBuilder<B>) -> Self {
        self.request = f(self.request);
        self.configured = true;
        self
    }

    /// The request, bound by the client's timeout (or this request's
    /// shorter one) when its configuration may have been changed. A
    /// request left alone runs on the agent's configuration, which `new`
    /// checked, and costs nothing here.
    fn bounded(self) -> RequestBuilder<B> {
        if !self.configured && self.timeout.is_none() {
            return self.request;
        }
        let bound = self
            .timeout
            .map_or(self.client.bound, |t| t.min(self.client.bound));
        self.request
            .config()
            .timeout_global(Some(bound))
            .http_status_as_error(false)
            .build()
    }

    /// The key a [`LastKnownGood`] files this request under: method, URI
    /// and the pairs given to [`query`](Self::query).
    fn key(&self) -> Option<String> {
        let method = self.request.method_ref()?;
        if method != http::Method::GET && method != http::Method::HEAD {
            return None;
        }
        let uri = self.request.uri_ref()?;
        Some(key(method, uri, &self.query))
    }
}

impl GuardedRequest<'_, WithoutBody> {
    /// Sends the request through the breaker.
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] when the breaker refused (nothing was sent);
    /// [`CallError::Failed`] with the transport error or the error status.
    pub fn call(self) -> Result<Response, CallError<Error>> {
        let client = self.client;
        let request = self.bounded();
        client.execute(|| request.call()).map_err(|f| f.error)
    }

    /// Sends the request through the breaker and, when the breaker refuses
    /// or the vendor fails, answers with the last good response `cache`
    /// holds for this request, marked stale with its age and the reason.
    ///
    /// A fresh 2xx answer to a `GET` or `HEAD` is filed in `cache`. Only
    /// those are ever served stale; an error the classifier ignores (a 4xx)
    /// is returned as it is, never replaced by an older success.
    ///
    /// Costs, on top of [`call`](Self::call): building the key (one string),
    /// one allocation to share the response, one lock round trip on the
    /// cache.
    ///
    /// # Errors
    ///
    /// [`Unavailable`], holding the call's error, when there was nothing
    /// fresh and nothing (young enough) to fall back on.
    pub fn call_or_stale(self, cache: &LastKnownGood) -> Result<Served, Unavailable> {
        let key = self.key();
        let client = self.client;
        let request = self.bounded();
        super::fallback::serve(cache, key, client.execute(|| request.call()))
    }
}

impl GuardedRequest<'_, WithBody> {
    /// Sends the request with `body` through the breaker.
    ///
    /// # Errors
    ///
    /// As [`call`](GuardedRequest::call).
    pub fn send(self, body: impl AsSendBody) -> Result<Response, CallError<Error>> {
        let client = self.client;
        let request = self.bounded();
        client.execute(|| request.send(body)).map_err(|f| f.error)
    }

    /// Sends the request with no body through the breaker.
    ///
    /// # Errors
    ///
    /// As [`call`](GuardedRequest::call).
    pub fn send_empty(self) -> Result<Response, CallError<Error>> {
        let client = self.client;
        let request = self.bounded();
        client.execute(|| request.send_empty()).map_err(|f| f.error)
    }
}

impl<B> fmt::Debug for GuardedRequest<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedRequest")
            .field("breaker", &self.client.breaker.name())
            .field("method", &self.request.method_ref())
            .field("uri", &self.request.uri_ref())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, any(feature = "rustls", feature = "native-tls")))]
mod tests {
    use super::*;

    const RUSTLS: TlsBuilt = TlsBuilt {
        rustls: true,
        native_tls: false,
        platform_verifier: false,
    };
    const NATIVE: TlsBuilt = TlsBuilt {
        rustls: false,
        native_tls: true,
        platform_verifier: false,
    };

    fn tls(provider: TlsProvider, roots: RootCerts) -> TlsConfig {
        TlsConfig::builder()
            .provider(provider)
            .root_certs(roots)
            .build()
    }

    fn feature(err: Option<AgentError>) -> Option<&'static str> {
        match err? {
            AgentError::TlsNotBuilt { feature, .. } => Some(feature),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_tls_stack_the_build_leaves_out_names_the_feature_that_builds_it() {
        let default = TlsConfig::default();
        let native = tls(TlsProvider::NativeTls, RootCerts::WebPki);
        let platform = tls(TlsProvider::Rustls, RootCerts::PlatformVerifier);
        assert_eq!(feature(RUSTLS.missing(&default)), None);
        assert_eq!(feature(RUSTLS.missing(&native)), Some("native-tls"));
        assert_eq!(
            feature(RUSTLS.missing(&platform)),
            Some("platform-verifier")
        );
        assert_eq!(feature(NATIVE.missing(&default)), Some("rustls"));
        assert_eq!(feature(NATIVE.missing(&native)), None);
        // native-tls reads the platform's roots itself.
        let native_platform = tls(TlsProvider::NativeTls, RootCerts::PlatformVerifier);
        assert_eq!(feature(NATIVE.missing(&native_platform)), None);
        let verifier = TlsBuilt {
            platform_verifier: true,
            ..RUSTLS
        };
        assert_eq!(feature(verifier.missing(&platform)), None);
    }

    #[test]
    fn the_message_names_the_feature() {
        let err = RUSTLS
            .missing(&tls(TlsProvider::NativeTls, RootCerts::WebPki))
            .unwrap();
        assert!(
            err.to_string()
                .ends_with("turn on fusebox's `native-tls` feature"),
            "{err}"
        );
    }
}
