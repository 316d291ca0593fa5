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
//! anything a trading thread waits for. It binds 127.0.0.1 unless told
//! otherwise, refuses a non-loopback address unless
//! [`AdminConfig::allow_non_loopback`] is set, and does not start without a
//! token.
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
mod token;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, TrySendError};

use crate::registry::Registry;
use http::{Conn, ReadError, Reply};
use token::Token;

/// The shortest token the endpoint accepts.
pub const MIN_TOKEN_LEN: usize = 16;

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
/// | `request_timeout` | 2 s for the whole request, head and body |
/// | `workers` | 4 threads |
/// | `queue` | 64 connections waiting for a worker; beyond that, 503 at once |
#[derive(Clone, Debug)]
pub struct AdminConfig {
    token: Token,
    token_len: usize,
    bind: SocketAddr,
    allow_non_loopback: bool,
    guard_reads: bool,
    max_body: usize,
    request_timeout: Duration,
    workers: usize,
    queue: usize,
}

impl AdminConfig {
    /// The endpoint's settings, with the bearer token that mutations must
    /// present (at least [`MIN_TOKEN_LEN`] bytes; read it from the
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
            workers: 4,
            queue: 64,
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

    /// How long a client has to send its whole request.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How many threads answer requests (at least 1).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// How many accepted connections may wait for a worker (at least 1);
    /// one more is answered 503 at once.
    pub fn queue(mut self, n: usize) -> Self {
        self.queue = n;
        self
    }
}

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The token is shorter than [`MIN_TOKEN_LEN`] bytes (or blank).
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
}

/// What the worker threads share.
pub(crate) struct Shared {
    pub(crate) registry: Registry,
    pub(crate) token: Token,
    pub(crate) guard_reads: bool,
    pub(crate) max_body: usize,
}

/// A running admin endpoint. Stops when [`stop`](Self::stop) is called or
/// it is dropped.
#[derive(Debug)]
pub struct Admin {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
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
        if config.workers == 0 {
            return Err(AdminError::Invalid {
                field: "workers",
                rule: "must be at least 1",
            });
        }
        if config.queue == 0 {
            return Err(AdminError::Invalid {
                field: "queue",
                rule: "must be at least 1",
            });
        }
        if config.request_timeout.is_zero() {
            return Err(AdminError::Invalid {
                field: "request_timeout",
                rule: "must be greater than zero",
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
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let (tx, rx) = bounded::<TcpStream>(config.queue);
        let mut threads = Vec::with_capacity(config.workers + 1);
        for i in 0..config.workers {
            let rx: Receiver<TcpStream> = rx.clone();
            let shared = Arc::clone(&shared);
            let timeout = config.request_timeout;
            let spawned = thread::Builder::new()
                .name(format!("fusebox-admin-{i}"))
                .spawn(move || {
                    for stream in rx {
                        serve(&shared, stream, timeout);
                    }
                });
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(source) => return Err(AdminError::Bind { addr, source }),
            }
        }
        let stop = Arc::clone(&stopping);
        let accept = thread::Builder::new()
            .name("fusebox-admin-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    match tx.try_send(stream) {
                        Ok(()) => {}
                        Err(TrySendError::Full(mut stream)) => {
                            // Answered on the accept thread, so without
                            // lingering: it must not wait on any client.
                            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                            http::send(
                                &mut stream,
                                &Reply::error(503, "the admin endpoint is busy"),
                                Duration::ZERO,
                            );
                        }
                        Err(TrySendError::Disconnected(_)) => break,
                    }
                }
                // Dropping `tx` ends the workers once the queue is drained.
            });
        match accept {
            Ok(handle) => threads.push(handle),
            Err(source) => return Err(AdminError::Bind { addr, source }),
        }
        log::info!("admin endpoint listening on {addr}");
        Ok(Admin {
            addr,
            stopping,
            threads,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, finishes the requests in hand and joins the
    /// endpoint's threads.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wake the accept thread with a connection of our own.
        let wake = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => {
                SocketAddr::from((Ipv4Addr::LOCALHOST, self.addr.port()))
            }
            IpAddr::V6(ip) if ip.is_unspecified() => {
                SocketAddr::from((Ipv6Addr::LOCALHOST, self.addr.port()))
            }
            _ => self.addr,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One connection: one request, one answer.
fn serve(shared: &Shared, stream: TcpStream, timeout: Duration) {
    let mut conn = Conn::new(stream, timeout);
    let reply = match conn.head() {
        Ok(head) => routes::route(shared, &head, &mut conn),
        Err(ReadError::Refuse(status, why)) => Reply::error(status, why),
        Err(ReadError::Gone) => return,
    };
    http::send(&mut conn.stream, &reply, http::LINGER);
}
