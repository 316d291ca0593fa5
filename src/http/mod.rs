//! HTTP vendors over `ureq` 3 (feature `http`, on by default).
//!
//! Three pieces, each usable alone:
//!
//! - [`HttpClassifier`]: which HTTP
//!   outcomes count against a vendor. Timeouts, refused and reset
//!   connections, DNS and TLS failures and 5xx do; 4xx never does; 429 does
//!   by default, and its `Retry-After` keeps the breaker open at least that
//!   long.
//! - [`GuardedClient`]: an agent and its breaker, so that
//!   `client.get(url).call()` goes through the breaker with no plumbing. It
//!   refuses an agent without a timeout, and a breaker whose probe would
//!   expire before that timeout ([`AgentError`]); no request through it
//!   can switch the timeout off.
//! - [`LastKnownGood`]: the last good answer per request, served when the
//!   breaker refuses or the vendor fails, and always marked: [`Served`] says
//!   whether it is fresh, how old it is, and why ([`StaleReason`]).
//!
//! The [`ureq`] it is built on is re-exported here: an application needs no
//! dependency of its own on ureq.
//!
//! # HTTPS
//!
//! The default features speak HTTPS: fusebox's `rustls` feature builds
//! ureq's rustls with the ring provider and Mozilla's roots. The features
//! `native-tls` (the platform's TLS library) and `platform-verifier`
//! (rustls with the platform's verifier and roots) build the others; the
//! agent selects one with its `TlsConfig` (`docs/http.md` has the table).
//! [`GuardedClient::new`] refuses an agent that selects one the build
//! leaves out ([`AgentError::TlsNotBuilt`]), on which ureq would panic;
//! on a build with no TLS at all, an `https` call fails with
//! [`Error::NoTls`], whose message names the fix, and counts as a failure.
//!
//! ```no_run
//! use fusebox::http::{ureq, GuardedClient, LastKnownGood};
//! use fusebox::{Breaker, CallPath};
//! use std::time::Duration;
//!
//! let agent: ureq::Agent = ureq::Agent::config_builder()
//!     .timeout_global(Some(Duration::from_millis(500)))
//!     .http_status_as_error(false)
//!     .build()
//!     .into();
//! let breaker = Breaker::builder("alt-data")
//!     .call_path(CallPath::AltData)
//!     .classifier(fusebox::http::HttpClassifier::new())
//!     .build()?;
//! let client = GuardedClient::new(agent, breaker)?;
//! let cache = LastKnownGood::new(Duration::from_secs(60));
//!
//! match client.get("https://vendor.example/sentiment/AAPL").call_or_stale(&cache) {
//!     Ok(answer) if answer.is_fresh() => println!("fresh: {} bytes", answer.body().len()),
//!     Ok(answer) => println!(
//!         "stale by {:?} ({}): size positions down",
//!         answer.age(),
//!         answer.stale_reason().unwrap()
//!     ),
//!     Err(unavailable) => println!("no data: {unavailable}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! See `docs/http.md` for wiring a vendor step by step.

mod classifier;
mod client;
mod error;
mod failure;
mod fallback;
mod key;
mod retry_after;

/// The `ureq` this integration is built on, so that an application can name
/// its types (`Agent`, `Error`, `http::Method`) without declaring a
/// dependency on the same version itself.
pub use ureq;

pub use classifier::{HttpClassifier, TooManyRequests};
pub use client::{GuardedClient, GuardedRequest};
pub use error::{AgentError, Error};
pub use fallback::{LastKnownGood, Served, StaleReason, Unavailable};

/// A response with its body read into memory, as the guarded client
/// returns it.
pub type Response = ureq::http::Response<Vec<u8>>;
