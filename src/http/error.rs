//! What went wrong with a guarded HTTP call, and why an agent cannot be
//! guarded.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use super::Response;

/// A request through a [`GuardedClient`](super::GuardedClient) that was
/// attempted and did not succeed.
///
/// It comes wrapped in [`CallError::Failed`](crate::CallError::Failed); a
/// request the breaker refused is [`CallError::Rejected`](crate::CallError::Rejected)
/// instead, and never reached the network.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The vendor answered with a status of 400 or more. The response is
    /// here whole, body read, so its headers (`Retry-After`) and the vendor's
    /// own error message stay available.
    Status(Box<Response>),
    /// No complete answer: the connection was refused or reset, a timeout
    /// fired, the name did not resolve, TLS failed, or the vendor spoke
    /// broken HTTP. ureq's own error, unchanged.
    Transport(ureq::Error),
    /// The URL is `https` and the agent has no TLS: this build of ureq
    /// holds no TLS stack (fusebox built with `default-features = false`
    /// and none of its features `rustls` or `native-tls`), or the agent's
    /// own connector chain has no TLS connector. Nothing reached the
    /// vendor, and no call on this agent to an `https` URL can: the message
    /// names the fix. ureq reports it as `ureq::Error::TlsRequired`.
    ///
    /// It counts as a failure (`docs/http.md` says why), so the breaker
    /// opens and says so rather than stay closed while every call fails.
    NoTls,
}

impl Error {
    /// The HTTP status, for [`Error::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status(response) => Some(response.status().as_u16()),
            Error::Transport(ureq::Error::StatusCode(code)) => Some(*code),
            Error::Transport(_) | Error::NoTls => None,
        }
    }

    /// The vendor's response, for [`Error::Status`].
    pub fn response(&self) -> Option<&Response> {
        match self {
            Error::Status(response) => Some(response),
            Error::Transport(_) | Error::NoTls => None,
        }
    }

    /// ureq's error for a request that got no complete answer.
    pub(super) fn from_ureq(e: ureq::Error) -> Self {
        match e {
            ureq::Error::TlsRequired => Error::NoTls,
            e => Error::Transport(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Status(response) => write!(f, "http status {}", response.status().as_u16()),
            // ureq's error is the source, so a chain prints it once.
            Error::Transport(_) => f.write_str("transport failed"),
            Error::NoTls => f.write_str(NO_TLS),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Status(_) | Error::NoTls => None,
            Error::Transport(e) => Some(e),
        }
    }
}

/// What an `https` call on an agent without TLS says, fix included.
/// At most 240 bytes, a failure cause's longest message, so that it is kept whole.
const NO_TLS: &str = "no TLS for an https URL: build fusebox with its `rustls` feature (a default \
     feature, off under `default-features = false`) or `native-tls`, or give the agent's own \
     connector chain a TLS connector";

/// Why [`GuardedClient::new`](super::GuardedClient::new) refused an agent,
/// or an agent and a breaker whose settings do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// Nothing bounds how long a call may take. ureq sets no timeout by
    /// default, and a breaker only learns of a failure when the call
    /// returns: a vendor that accepts and never answers would hold the
    /// calling thread forever and never trip the breaker.
    #[error(
        "the agent has no timeout that bounds a whole call: set `timeout_global` (end to end, \
         body included) or `timeout_per_call` on its config, e.g. \
         `Agent::config_builder().timeout_global(Some(Duration::from_secs(2)))`"
    )]
    NoTimeout,
    /// The agent turns statuses of 400 and more into
    /// `ureq::Error::StatusCode`, which drops the response and its
    /// `Retry-After` header.
    #[error(
        "the agent has `http_status_as_error(true)` (ureq's default), which drops the response \
         of a 4xx/5xx and with it `Retry-After`: build it with `.http_status_as_error(false)`; \
         the guarded client maps statuses itself and still returns them as errors"
    )]
    StatusAsError,
    /// The breaker's `max_probe_duration` is shorter than the agent's
    /// timeout. A probe sent to a vendor that hangs would expire while its
    /// request still waits for the timeout; the next call would then go as
    /// a new probe, and another after it, so that several requests sit at
    /// the vendor at once, which is what half-open exists to prevent.
    #[error(
        "the breaker's max_probe_duration ({}) is shorter than the agent's timeout ({}): a \
         probe to a hanging vendor would expire while its request still waits, and further \
         probes would pile up at the vendor; set max_probe_duration to at least {1}, or \
         shorten the agent's timeout",
        crate::duration::display(*.max_probe_duration),
        crate::duration::display(*.timeout)
    )]
    ProbeOutlivedByCall {
        /// The breaker's `max_probe_duration`.
        max_probe_duration: Duration,
        /// The longest a call on the agent can take.
        timeout: Duration,
    },
    /// The breaker's `slow_call_duration` is longer than the agent's
    /// timeout: a call that slow times out and fails, so no call is ever
    /// counted slow, and the slow-call condition never fires.
    #[error(
        "the breaker's slow_call_duration ({}) is longer than the agent's timeout ({}): no \
         call can succeed that slowly, so the slow-call condition would never fire; set \
         slow_call_duration below {1}",
        crate::duration::display(*.slow_call_duration),
        crate::duration::display(*.timeout)
    )]
    SlowCallNeverFires {
        /// The breaker's `slow_call_duration`.
        slow_call_duration: Duration,
        /// The longest a call on the agent can take.
        timeout: Duration,
    },
    /// The agent's TLS configuration selects a TLS stack or verifier that
    /// this build of fusebox leaves out: ureq would panic at the first
    /// `https` request, on the calling thread. fusebox's features
    /// `rustls`, `native-tls` and `platform-verifier` decide which of
    /// ureq's are built.
    #[error(
        "the agent's TLS config selects {selected}, which this build of fusebox leaves out \
         (ureq would panic at the first https request): turn on fusebox's `{feature}` feature"
    )]
    TlsNotBuilt {
        /// What the agent selects: `"rustls"`, `"native-tls"` or `"the
        /// platform verifier"`.
        selected: &'static str,
        /// The fusebox feature that builds it.
        feature: &'static str,
    },
}
