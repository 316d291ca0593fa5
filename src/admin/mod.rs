//! A small admin endpoint for a [`Registry`]: metrics, JSON snapshots, a
//! readiness probe, the audit trail, and audited overrides behind a bearer
//! token.
//!
//! | request | answer |
//! |---|---|
//! | `GET /metrics` | the Prometheus exposition of [`crate::prometheus`] |
//! | `GET /breakers` | every breaker's snapshot, as JSON: the [`Snapshot`](crate::Snapshot)'s `Serialize` shape, with `call_path`, `critical` and `override` added |
//! | `GET /breakers/{name}` | one breaker's snapshot, or 404 |
//! | `GET /health` | 200 when ready, 503 while a breaker marked critical refuses calls |
//! | `GET /audit` | the registry's audit trail, oldest first |
//! | `POST /breakers/{name}/force-open` | forces it open; the body is `{"actor": "...", "reason": "...", "expires_after": "30m"}` (`expires_after` optional) |
//! | `POST /breakers/{name}/force-closed` | forces it closed; same body |
//! | `POST /breakers/{name}/reset` | returns it to normal operation; the body without `expires_after` |
//! | `POST /breakers/{name}/maintenance` | declares a one-off maintenance window: `{"actor": "...", "reason": "...", "duration": "2h"}`, or `"until"` (RFC 3339) instead of `duration`, and an optional `"start"` (RFC 3339; default now); audited like an override |
//!
//! A mutation without the right `Authorization: Bearer <token>` gets 401, an
//! unknown breaker 404, a malformed body 400 and a body over the limit 413;
//! in each case nothing changes and the refusal is logged at warn. Reads are
//! open unless [`AdminConfig::guard_reads`] asks for the token too.
//!
//! The endpoint runs on threads of its own and touches breakers only
//! through snapshots and overrides, so a slow or hostile client never holds
//! anything a trading thread waits for. Each connection has a thread of its
//! own, at most [`AdminConfig::max_connections`] at once, and its request
//! must arrive within [`AdminConfig::request_timeout`] of its accept: a slow
//! client costs the others nothing but its place under the limit, and a
//! connection over the limit is answered 503 at once. [`Admin::stop`] shuts
//! every connection and returns without waiting on any client. The endpoint
//! binds 127.0.0.1 unless told otherwise, refuses a non-loopback address
//! unless [`AdminConfig::allow_non_loopback`] is set, and does not start
//! without a token.
//!
//! ```
//! use fusebox::admin::{Admin, AdminConfig};
//! use fusebox::registry::Registry;
//! use std::io::{Read, Write};
//!
//! let registry = Registry::new();
//! let admin = Admin::start(
//!     &registry,
//!     AdminConfig::new("a-long-random-secret-from-the-environment")
//!         .bind("127.0.0.1:0".parse().unwrap()),
//! )?;
//! let mut conn = std::net::TcpStream::connect(admin.addr())?;
//! conn.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
//! let mut answer = String::new();
//! conn.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! admin.stop();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod http;
mod json;
mod routes;
mod server;
mod token;

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use crate::registry::Registry;
use server::Server;
use token::Token;

/// The shortest token the endpoint accepts.
const MIN_TOKEN_LEN: usize = 16;

/// How the admin endpoint runs.
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `bind` | `127.0.0.1:9187` |
/// | `allow_non_loopback` | off: a non-loopback `bind` is refused |
/// | `guard_reads` | off: reads need no token |
/// | `max_body` | 4 KiB |
/// | `request_timeout` | 2 s from the connection's accept for the whole request, head and body; as long again to take the answer |
/// | `max_connections` | 256 served at once, each on a thread of its own; beyond that, 503 at once |
#[derive(Clone, Debug)]
pub struct AdminConfig {
    token: Token,
    token_len: usize,
    bind: SocketAddr,
    allow_non_loopback: bool,
    guard_reads: bool,
    max_body: usize,
    request_timeout: Duration,
    max_connections: usize,
}

impl AdminConfig {
    /// The endpoint's settings, with the bearer token that mutations must
    /// present (at least 16 bytes; read it from the
    /// environment or a secrets file, never from source).
    pub fn new(token: impl AsRef<str>) -> Self {
        let token = token.as_ref();
        AdminConfig {
            token: Token::new(token),
            token_len: token.trim().len(),
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 9187)),
            allow_non_loopback: false,
            guard_reads: false,
            max_body: 4 * 1024,
            request_timeout: Duration::from_secs(2),
            max_connections: 256,
        }
    }

    /// The address to listen on (port 0 picks a free one).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Allows a `bind` address that is not loopback. Without it such an
    /// address is refused: the endpoint steers breakers, and the network
    /// beyond the host should reach it only by a decision.
    pub fn allow_non_loopback(mut self) -> Self {
        self.allow_non_loopback = true;
        self
    }

    /// Whether reads (`/metrics`, `/breakers`, `/health`, `/audit`) need the
    /// token too.
    pub fn guard_reads(mut self, guard: bool) -> Self {
        self.guard_reads = guard;
        self
    }

    /// The largest request body accepted; larger ones get 413 unread.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// How long a client has to send its whole request, counted from the
    /// moment its connection is accepted; a client still sending then is
    /// cut off without an answer. A client has as long again to read the
    /// answer. More than zero and at most an hour.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How many connections are served at once (at least 1), each on a
    /// thread of its own that lasts as long as the connection: at most
    /// twice `request_timeout`, and a tenth of a second to close. One more
    /// is answered 503 at once and closed.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
}

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The token is shorter than 16 bytes (or blank).
    #[error("the admin token must be at least {min} bytes (got {len})")]
    WeakToken {
        /// Its length, spaces trimmed.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// The address is not loopback and `allow_non_loopback` was not set.
    #[error("refusing to bind the admin endpoint to {addr}, which is not loopback; call allow_non_loopback() to do it anyway")]
    NonLoopback {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A setting is out of range.
    #[error("`{field}` {rule}")]
    Invalid {
        /// The setting.
        field: &'static str,
        /// The rule it broke.
        rule: &'static str,
    },
    /// The address could not be bound.
    #[error("could not bind the admin endpoint to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The endpoint's accept thread could not be started.
    #[error("could not start the admin endpoint's thread: {source}")]
    Thread {
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// What the connection threads share.
pub(crate) struct Shared {
    pub(crate) registry: Registry,
    pub(crate) token: Token,
    pub(crate) guard_reads: bool,
    pub(crate) max_body: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) max_connections: usize,
}

/// A running admin endpoint. Stops when [`stop`](Self::stop) is called or
/// it is dropped.
pub struct Admin {
    addr: SocketAddr,
    server: Server,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// Checks `config`, binds, and starts serving `registry` on threads of
    /// its own.
    ///
    /// # Errors
    ///
    /// An [`AdminError`]; no thread is left running.
    pub fn start(registry: &Registry, config: AdminConfig) -> Result<Admin, AdminError> {
        if config.token_len < MIN_TOKEN_LEN {
            return Err(AdminError::WeakToken {
                len: config.token_len,
                min: MIN_TOKEN_LEN,
            });
        }
        if !config.bind.ip().is_loopback() && !config.allow_non_loopback {
            return Err(AdminError::NonLoopback { addr: config.bind });
        }
        if config.max_connections == 0 {
            return Err(AdminError::Invalid {
                field: "max_connections",
                rule: "must be at least 1",
            });
        }
        if config.request_timeout.is_zero() || config.request_timeout > Duration::from_secs(3600) {
            return Err(AdminError::Invalid {
                field: "request_timeout",
                rule: "must be greater than zero and at most an hour",
            });
        }
        let listener = TcpListener::bind(config.bind).map_err(|source| AdminError::Bind {
            addr: config.bind,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| AdminError::Bind {
            addr: config.bind,
            source,
        })?;
        let shared = Arc::new(Shared {
            registry: registry.clone(),
            token: config.token.clone(),
            guard_reads: config.guard_reads,
            max_body: config.max_body,
            request_timeout: config.request_timeout,
            max_connections: config.max_connections,
        });
        let server = Server::start(listener, addr, shared)
            .map_err(|source| AdminError::Thread { source })?;
        log::info!("admin endpoint listening on {addr}");
        Ok(Admin { addr, server })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every connection and joins the endpoint's
    /// threads. It waits on no client: a request not yet read is not
    /// served, one being applied completes (its answer may not reach the
    /// client), and it returns in well under a second whatever the clients
    /// do.
    pub fn stop(mut self) {
        self.server.stop();
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.server.stop();
    }
}
