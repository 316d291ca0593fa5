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
//!     .consecutive_failure_threshold(3)
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
//! # Error types
//!
//! [`Breaker::call`] takes any error type that implements
//! `std::error::Error`. [`Breaker::call_any`] takes the rest:
//! `anyhow::Error`, `Box<dyn Error + Send + Sync>`, `String`, an enum of the
//! application's own. A [`Classifier`] is written over `dyn Error`
//! ([`Classifier::new`]) or typed over the calls' error type
//! ([`Classifier::for_type`]); one that cannot
//! read an error counts it as a failure.
//!
//! With anyhow, the usual error type of an application, use `call_any`,
//! and `CallError::into_anyhow` (feature `anyhow`, on by default) to
//! return its error with `?`; a refusal then downcasts to [`Rejected`]:
//!
//! ```
//! use fusebox::{Breaker, CallError, CallPath, Classifier, Rejected};
//!
//! fn sentiment(breaker: &Breaker, symbol: &str) -> anyhow::Result<f64> {
//!     let score = breaker
//!         .call_any(|| -> anyhow::Result<f64> {
//!             anyhow::bail!("vendor timed out scoring {symbol}")
//!         })
//!         .map_err(CallError::into_anyhow)?;
//!     Ok(score)
//! }
//!
//! let breaker = Breaker::builder("sentiment")
//!     .call_path(CallPath::AltData)
//!     .classifier(Classifier::every_error_is_a_failure())
//!     .consecutive_failure_threshold(1)
//!     .build()?;
//! let failed = sentiment(&breaker, "AAPL").unwrap_err();
//! assert!(failed.downcast_ref::<Rejected>().is_none());
//! let refused = sentiment(&breaker, "AAPL").unwrap_err();
//! assert!(refused.downcast_ref::<Rejected>().is_some()); // nothing was attempted
//! # Ok::<(), fusebox::ConfigError>(())
//! ```
//!
//! Every error of the crate says what happened at its own level and gives
//! the error below as its `source()`, so its `Display` is one line:
//! [`CallError`] prints "call failed" or "call not attempted". Print the
//! whole chain to see the cause: `{:#}` of an `anyhow::Error` does, or walk
//! `source()`:
//!
//! ```
//! use std::error::Error;
//!
//! fn chain(err: &dyn Error) -> String {
//!     let mut text = err.to_string();
//!     let mut source = err.source();
//!     while let Some(cause) = source {
//!         text = format!("{text}: {cause}");
//!         source = cause.source();
//!     }
//!     text
//! }
//! let err = fusebox::CallError::Failed(std::io::Error::other("connection reset"));
//! assert_eq!(chain(&err), "call failed: connection reset");
//! ```
//!
//! The questions a caller asks of an outcome or a state each have one
//! expression: "was it the breaker?" is [`CallError::rejected`]
//! (`err.rejected().is_some()`, with the refusal's `retry_after`); a layer
//! that maps the vendor's error keeps the refusal with
//! [`CallError::map_failed`]; "does it refuse every call now?" is
//! [`State::is_open`] (`Open` or an operator's `ForcedOpen`).
//!
//! For code that is not one closure, [`Breaker::try_acquire`] (or
//! [`Breaker::try_acquire_owned`], to move the permit to another thread)
//! returns a permit whose [`finish`](Permit::finish) classifies the call's
//! result. [`Breaker::would_permit`] asks without taking anything.
//!
//! # One configuration, many breakers
//!
//! A [`BreakerConfig`] is checked once and stamps breakers by name:
//!
//! ```
//! use fusebox::{BreakerConfig, CallPath};
//!
//! let vendor = BreakerConfig::builder()
//!     .call_path(CallPath::custom("ratings"))
//!     .classifier(fusebox::Classifier::every_error_is_a_failure())
//!     .consecutive_failure_threshold(3)
//!     .build()?;
//! let breakers: Vec<_> = ["moodys", "sp", "fitch"]
//!     .into_iter()
//!     .map(|name| vendor.breaker(name))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(breakers[2].name(), "fitch");
//! # Ok::<(), fusebox::ConfigError>(())
//! ```
//!
//! # Time
//!
//! Time comes from `quanta`'s monotonic clock, never the wall clock, and every
//! decision reads it directly: the end of an open period, the window's
//! buckets, a probe's expiry and a call's duration. Nothing is cached between
//! reads and no thread keeps the time, so a breaker keeps time whatever else
//! in the process does to quanta's upkeep thread or its "recent" time
//! (stopping it, slowing it, forking without it). A direct read costs about
//! 10 to 20 ns on x86-64 (the time-stamp counter, scaled);
//! `docs/performance.md` has the measurements.
//!
//! Tests inject the clock half of `quanta::Clock::mock()` through
//! [`BreakerBuilder::clock`] and move time with its handle instead of
//! sleeping.
//!
//! `quanta` 0.12 is part of this crate's public API (the builder's `clock`,
//! [`StateChange::at`]), re-exported as [`fusebox::quanta`](crate::quanta)
//! so that an application names it without a dependency of its own. Every
//! fusebox 0.1 release depends on quanta 0.12; moving to a later quanta
//! line is a breaking change of fusebox and comes only in a breaking
//! release. `docs/design.md` says why the clock is not wrapped.
//!
//! # Threads
//!
//! A breaker needs no thread: a call, its decision and its bookkeeping run
//! on the caller's thread. The crate starts threads only for what asks for
//! them, never more than configuration bounds:
//!
//! - the **notifier** (`fusebox-notifier`, one per process), the first time
//!   a breaker hands it a state change to deliver: a breaker built with
//!   [`Delivery::Notifier`], or a caller that finds another thread still
//!   delivering that breaker's changes;
//! - the **health-probe watcher** (`fusebox-health-probe`, one per process)
//!   and its short-lived workers (`fusebox-probe`, at most 64 at once), once
//!   a breaker is built with a [`trading::HealthProbe`];
//! - a **deadline pool**'s workers ([`isolation`]), an **admin endpoint**'s
//!   ([`admin`]), a **fleet**'s agent and its subscription listener
//!   ([`fleet`]), when the application builds one.
//!
//! # Features
//!
//! docs.rs documents every feature; each item says which one it needs.
//!
//! - `http` (default): the `ureq` 3 integration in [`http`]: a classifier for
//!   ureq errors, a guarded client, and a last-known-good fallback.
//! - `rustls` (default): HTTPS for `http`, through ureq's rustls with the
//!   ring provider and Mozilla's roots. Without a TLS feature an `https`
//!   call fails with an error that names this feature.
//! - `native-tls`: HTTPS for `http` through the platform's TLS library
//!   instead (OpenSSL on Linux, which then needs its headers to build);
//!   select it on the agent, see [`http`].
//! - `platform-verifier`: rustls checking certificates with the platform's
//!   verifier and root store; select it on the agent, see [`http`].
//! - `anyhow` (default): classifiers and the search for inner breakers'
//!   refusals see inside `anyhow::Error` (its context chain included) in
//!   [`Breaker::call_any`], and `CallError::into_anyhow` returns a call's
//!   error with `?`.
//! - `isolation` (default): [`isolation`]: a bulkhead, a deadline pool for
//!   calls that cannot time themselves out, and a bounded dead-letter buffer,
//!   layered around a breaker. No extra dependency.
//! - `async`: async callers. [`Breaker::call_async`] and
//!   [`Breaker::call_any_async`] guard a future (asked at its first poll,
//!   its outcome classified when it completes, a cancelled one counted as
//!   neither success nor failure), and with `isolation` a bulkhead guards
//!   one too. `std::future` only, no runtime; `pin-project-lite` (no
//!   dependencies) pins the inner future.
//! - `tower` (with `async`): [`tower`], a `Layer` and `Service` that put a
//!   breaker around any tower service, on `tower-layer` and
//!   `tower-service`.
//! - `coarse-clock` (default): on Linux, a quiet closed success of a
//!   breaker with a failure-rate window checks its window bucket on the
//!   kernel's coarse monotonic clock (about 4 ns, through `rustix`) instead
//!   of a full clock read, against a deadline that is never later than the
//!   breaker's own (`docs/design.md`, "Time"). Elsewhere, or for a breaker
//!   with an injected clock, it changes nothing.
//! - `calendar`: recurring deadlines and maintenance windows in a named IANA
//!   time zone in [`trading`], with `jiff` doing the time-zone arithmetic.
//! - `chain`: [`chain`], fallback chains: a lookup tries its providers in
//!   order, each behind its own breaker, then a last-known-good cache and a
//!   static default, and says which answered and why each earlier one was
//!   skipped. No dependencies.
//! - `retry`: [`retry`], a retry policy above a breaker or a chain: full
//!   jitter, a deadline, a retry budget, a refusal never spent as an
//!   attempt, no repeat of a non-idempotent call. No dependencies.
//! - `registry`: [`registry`], named breakers made from named
//!   templates, with overrides recorded in an audit trail. No dependencies.
//! - `prometheus`: the registry's metrics on the `prometheus-client` crate,
//!   read from snapshots at scrape time ([`prometheus`]). `prometheus-client`
//!   0.26 is then part of the public API, under the same promise as quanta:
//!   every fusebox 0.1 release stays on 0.26.
//! - `serde`: a registry's templates and breakers from TOML, or anything
//!   serde reads, with durations in the crate's one grammar ([`duration`]),
//!   in [`config_file`]; and `Serialize` for [`Snapshot`] and the other
//!   snapshots.
//! - `admin`: a small HTTP endpoint on its own threads, for metrics, JSON
//!   snapshots, a readiness probe, the audit trail and audited overrides
//!   behind a bearer token ([`admin`]).
//! - `replay`: what a configuration would have done over recorded call
//!   outcomes, on the mock clock: the timeline, refusals, time open, flaps,
//!   and a sweep of thresholds and windows over a healthy and an outage
//!   recording ([`replay`]); the `fusebox-replay` binary runs it over a
//!   configuration file. Implies `serde`.
//! - `redis`: fleet mode ([`fleet`]): breakers of one name in many processes
//!   share their state through Redis (`rediss://` through rustls and ring).
//! - `ctl`: the `fusebox-ctl` binary, for operators: a fleet's breakers'
//!   status, overrides, watch and audit stream, from a shell.
//!
// A module that exists only with its feature: link to it, or, when the
// crate is documented without it, to docs.rs, which documents every feature.
#![cfg_attr(feature = "http", doc = "[`http`]: crate::http")]
#![cfg_attr(
    not(feature = "http"),
    doc = "[`http`]: https://docs.rs/fusebox/latest/fusebox/http/"
)]
#![cfg_attr(feature = "isolation", doc = "[`isolation`]: crate::isolation")]
#![cfg_attr(
    not(feature = "isolation"),
    doc = "[`isolation`]: https://docs.rs/fusebox/latest/fusebox/isolation/"
)]
#![cfg_attr(feature = "replay", doc = "[`replay`]: crate::replay")]
#![cfg_attr(
    not(feature = "replay"),
    doc = "[`replay`]: https://docs.rs/fusebox/latest/fusebox/replay/"
)]
#![cfg_attr(feature = "tower", doc = "[`tower`]: crate::tower")]
#![cfg_attr(
    not(feature = "tower"),
    doc = "[`tower`]: https://docs.rs/fusebox/latest/fusebox/tower/"
)]
#![cfg_attr(
    feature = "async",
    doc = "[`Breaker::call_async`]: crate::Breaker::call_async"
)]
#![cfg_attr(
    not(feature = "async"),
    doc = "[`Breaker::call_async`]: https://docs.rs/fusebox/latest/fusebox/struct.Breaker.html#method.call_async"
)]
#![cfg_attr(
    feature = "async",
    doc = "[`Breaker::call_any_async`]: crate::Breaker::call_any_async"
)]
#![cfg_attr(
    not(feature = "async"),
    doc = "[`Breaker::call_any_async`]: https://docs.rs/fusebox/latest/fusebox/struct.Breaker.html#method.call_any_async"
)]
#![cfg_attr(feature = "chain", doc = "[`chain`]: crate::chain")]
#![cfg_attr(
    not(feature = "chain"),
    doc = "[`chain`]: https://docs.rs/fusebox/latest/fusebox/chain/"
)]
#![cfg_attr(feature = "retry", doc = "[`retry`]: crate::retry")]
#![cfg_attr(
    not(feature = "retry"),
    doc = "[`retry`]: https://docs.rs/fusebox/latest/fusebox/retry/"
)]
#![cfg_attr(feature = "registry", doc = "[`registry`]: crate::registry")]
#![cfg_attr(
    not(feature = "registry"),
    doc = "[`registry`]: https://docs.rs/fusebox/latest/fusebox/registry/"
)]
#![cfg_attr(feature = "prometheus", doc = "[`prometheus`]: crate::prometheus")]
#![cfg_attr(
    not(feature = "prometheus"),
    doc = "[`prometheus`]: https://docs.rs/fusebox/latest/fusebox/prometheus/"
)]
#![cfg_attr(feature = "serde", doc = "[`config_file`]: crate::config_file")]
#![cfg_attr(
    not(feature = "serde"),
    doc = "[`config_file`]: https://docs.rs/fusebox/latest/fusebox/config_file/"
)]
#![cfg_attr(feature = "admin", doc = "[`admin`]: crate::admin")]
#![cfg_attr(
    not(feature = "admin"),
    doc = "[`admin`]: https://docs.rs/fusebox/latest/fusebox/admin/"
)]
#![cfg_attr(feature = "redis", doc = "[`fleet`]: crate::fleet")]
#![cfg_attr(
    not(feature = "redis"),
    doc = "[`fleet`]: https://docs.rs/fusebox/latest/fusebox/fleet/"
)]
// On docs.rs (`--cfg docsrs`, nightly), each item is marked with the
// features it needs, read from its `cfg`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations, unreachable_pub)]

#[cfg(feature = "admin")]
pub mod admin;
mod backoff;
mod breaker;
mod call;
mod call_path;
mod cause;
#[cfg(feature = "chain")]
pub mod chain;
mod check;
mod classify;
mod clock;
mod config;
#[cfg(feature = "serde")]
pub mod config_file;
mod count_window;
mod counter;
mod delivery;
pub mod duration;
mod error;
mod events;
#[cfg(feature = "redis")]
pub mod fleet;
#[cfg(feature = "async")]
mod future;
mod gate;
mod histogram;
#[cfg(feature = "http")]
pub mod http;
mod in_flight;
#[cfg(feature = "isolation")]
pub mod isolation;
/// The bulkhead's lock-free parts, for the model checker's test only.
#[cfg(all(loom, feature = "isolation"))]
#[doc(hidden)]
pub use isolation::model as loom_bulkhead;
#[cfg(any(feature = "chain", feature = "http"))]
pub mod last_good;
mod latency;
mod machine;
mod name;
mod notifier;
mod overrides;
mod permit;
mod policy;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod ramp;
mod recovery;
#[cfg(feature = "registry")]
pub mod registry;
#[cfg(feature = "replay")]
pub mod replay;
#[cfg(feature = "retry")]
pub mod retry;
mod seam;
#[cfg(feature = "tower")]
pub mod tower;
// `Serialize` for snapshots: the `serde` feature's promise, and the shape
// the admin endpoint serves.
#[cfg(any(feature = "serde", feature = "admin"))]
mod serialize;
mod settings;
mod snapshot;
mod state;
mod stuck;
mod sync;
mod text;
pub mod trading;
#[cfg(any(feature = "admin", feature = "redis"))]
mod utc;
mod view;
mod wall;
mod window;

pub use breaker::Breaker;
pub use call_path::CallPath;
pub use cause::FailureCause;
pub use check::ConfigError;
pub use classify::{Classifier, ResultClassifier, Verdict};
pub use config::{BreakerBuilder, BreakerConfig};
pub use error::{CallError, IsStdError, Rejected};
pub use events::{Delivery, Reason, StateChange, Subscription};
#[cfg(feature = "async")]
pub use future::Guarded;
pub use histogram::CallDurations;
pub use latency::LatencyTrip;
pub use permit::{OwnedPermit, Permit};
pub use policy::{HalfOpenRate, OpenPeriod, OpenPeriodInput, TripPredicate, WindowCounts};
pub use ramp::RampUp;
pub use snapshot::{ProbeTotals, Snapshot, StateTimes, Totals};
pub use state::State;

/// The `quanta` this crate is built on (0.12), whose clock
/// [`BreakerBuilder::clock`] takes and whose instant [`StateChange::at`]
/// holds, so that an application (a test with `quanta::Clock::mock()`)
/// names its types without declaring a dependency on the same version.
pub use quanta;

/// The gate protocol, for the model checker's test only.
#[cfg(loom)]
#[doc(hidden)]
pub use gate::model as loom_gate;

/// The table of calls in flight, for the model checker's test only.
#[cfg(loom)]
#[doc(hidden)]
pub use in_flight::model as loom_in_flight;

/// The delivery protocol, for the model checker's test only.
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_delivery {
    pub use crate::delivery::{Courier, Outbox, Pending};
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
