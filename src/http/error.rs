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
}

impl Error {
    /// The HTTP status, for [`Error::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status(response) => Some(response.status().as_u16()),
            Error::Transport(ureq::Error::StatusCode(code)) => Some(*code),
            Error::Transport(_) => None,
        }
    }

    /// The vendor's response, for [`Error::Status`].
    pub fn response(&self) -> Option<&Response> {
        match self {
            Error::Status(response) => Some(response),
            Error::Transport(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Status(response) => write!(f, "http status {}", response.status().as_u16()),
            // ureq's error is the source, so a chain prints it once.
            Error::Transport(_) => f.write_str("transport failed"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Status(_) => None,
            Error::Transport(e) => Some(e),
        }
    }
}

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
}
