//! A synchronous, thread-safe circuit breaker that keeps a downstream
//! failure local.
//!
//! A trading process that calls a service it does not control (a
//! reference-data API, an alt-data vendor, an enrichment service) wraps each
//! such dependency in a [`Breaker`]. When the dependency starts failing or
//! slowing down, the breaker opens: calls are refused at once, without being
//! attempted, so the caller takes its fallback instead of queueing threads
//! behind a sick service. After an open period that grows with each failed
//! attempt, exactly one probe tests recovery.
//!
//! ```
//! use fusebox::{Breaker, CallError, CallPath, Classifier, Verdict};
//! use std::{io, time::Duration};
//!
//! let breaker = Breaker::builder("refdata")
//!     .call_path(CallPath::ReferenceData)
//!     // Timeouts and refused connections are the dependency's failures;
//!     // anything else is the caller's business and never trips the breaker.
//!     .classifier(Classifier::new(|err| match err.downcast_ref::<io::Error>() {
//!         Some(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::ConnectionRefused) => {
//!             Verdict::Failure
//!         }
//!         _ => Verdict::Ignore,
//!     }))
//!     .failure_threshold(3)
//!     .open_duration(Duration::from_secs(5))
//!     .build()?;
//!
//! for _ in 0..3 {
//!     let _ = breaker.call(|| Err::<(), _>(io::Error::from(io::ErrorKind::TimedOut)));
//! }
//! match breaker.call(|| Ok::<_, io::Error>("fresh")) {
//!     Ok(value) => println!("got {value}"),
//!     Err(CallError::Rejected(r)) => {
//!         // Nothing was attempted: serve the last known good value.
//!         assert!(r.retry_after().unwrap() <= Duration::from_secs(5));
//!     }
//!     Err(CallError::Failed(e)) => println!("the vendor failed: {e}"),
//! }
//! # Ok::<(), fusebox::ConfigError>(())
//! ```
//!
//! # Where a breaker must not stand
//!
//! On order submission, order cancellation, a kill switch, or a mandatory
//! pre-trade risk check, a fast refusal is worse than a slow call. The
//! builder requires a [`CallPath`] and refuses those paths.
//!
//! # Time
//!
//! Time comes from `quanta`'s monotonic clock, never the wall clock. By
//! default a breaker reads `quanta::Instant::recent()`, one atomic load; the
//! first breaker built that way starts quanta's upkeep thread (a 1 ms tick)
//! unless the application runs one, and the breaker restarts it should it be
//! stopped. Tests inject `quanta::Clock::mock()` through
//! [`BreakerBuilder::clock`] and move time with its handle instead of
//! sleeping; an injected clock is read directly and starts no thread.
//!
//! An application that starts its own `quanta::Upkeep` should do so before
//! building breakers, or treat `quanta::Error::UpkeepRunning` as success:
//! only one upkeep thread runs per process, and either one serves both.
//!
//! # Features
//!
//! - `http` (default): the `ureq` 3 integration in [`http`]: a classifier for
//!   ureq errors, a guarded client, and a last-known-good fallback.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod backoff;
mod breaker;
mod call_path;
mod classify;
mod clock;
mod config;
mod counter;
mod error;
mod events;
mod gate;
#[cfg(feature = "http")]
pub mod http;
mod latency;
mod machine;
mod name;
mod permit;
mod snapshot;
mod state;
mod sync;
mod window;

pub use breaker::{Breaker, Decorated};
pub use call_path::CallPath;
pub use classify::{Classifier, Outcome, Verdict};
pub use config::BreakerBuilder;
pub use error::{CallError, ConfigError, Rejected};
pub use events::{Reason, StateChange, Subscription};
pub use latency::LatencyTrip;
pub use permit::Permit;
pub use snapshot::{Snapshot, Totals};
pub use state::State;

/// The gate protocol, for the model checker's test only.
#[cfg(loom)]
#[doc(hidden)]
pub use gate::model as loom_gate;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
