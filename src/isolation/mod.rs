//! Isolation around a breaker (feature `isolation`, on by default): a
//! bulkhead, deadline-bounded calls, and a bounded dead-letter buffer.
//!
//! A breaker guards the aggregate: it stops calling a dependency that has
//! been failing. It cannot bound one call, and it cannot act before enough
//! calls have come back to judge. Two layers do what it cannot:
//!
//! - [`Bulkhead`]: at most N calls to one dependency at a time, so that a
//!   slow dependency holds at most N of the caller's threads. A caller
//!   beyond that is refused at once (or after a bounded wait) with
//!   [`Full`], which never counts as the dependency's failure. With an
//!   [`AdaptiveLimit`], N falls when the dependency slows down (the calls
//!   still in flight counting with their ages) and grows back when it
//!   recovers; with lanes, kinds of call share N, each with a guaranteed
//!   share and one shed last.
//! - [`DeadlinePool`]: for a call that cannot time itself out (a vendor SDK
//!   with none), a few worker threads run it and the caller waits at most
//!   its deadline. At the deadline the breaker counts a failure, so it can
//!   open while the calls are still hanging; the abandoned call keeps its
//!   thread until it returns, so the pool bounds what a hung vendor holds.
//!
//! [`Isolated`] puts the three in one call path: breaker outside, then the
//! bulkhead, then the pool. [`DeadLetters`] keeps fire-and-forget emits the
//! breaker diverted, bounded and by priority, and replays them once it
//! closes.
//!
//! Every layer is built on the breaker's public face ([`Breaker::try_acquire`]
//! and [`Permit`](crate::Permit)); none reaches into its state machine.
//! With the `async` feature, `Bulkhead::call_async` and
//! `Isolated::call_async` guard a future: a slot taken at its first poll,
//! never waited for, given back when the future ends or is dropped.
//! `docs/isolation.md` has the picture and when to use each.
//!
//! [`Breaker::try_acquire`]: crate::Breaker::try_acquire

mod adaptive;
mod bulkhead;
mod dead_letter;
mod deadline;
mod error;
#[cfg(feature = "async")]
mod future;
mod gradient;
mod isolated;
mod lanes;
mod shares;
mod tracked;

pub use adaptive::AdaptiveLimit;
pub use bulkhead::{
    AdaptiveSnapshot, Bulkhead, BulkheadBuilder, BulkheadSnapshot, LaneSnapshot, Slot,
};
pub use dead_letter::{
    DeadLetterSnapshot, DeadLetters, DeadLettersBuilder, Emitted, PrioritySnapshot, Refused,
    RefusedBecause, Replay, ReplayStop, Shed,
};
pub use deadline::{DeadlinePool, DeadlinePoolBuilder, DeadlinePoolSnapshot};
pub use error::{BuildError, Full, IsolationError, Layer, TimedOut};
#[cfg(feature = "async")]
pub use future::IsolatedFuture;
pub use isolated::Isolated;

/// The bulkhead's lock-free parts, for the model checker's test only.
#[cfg(loom)]
#[doc(hidden)]
pub mod model {
    pub use super::shares::model::Shares;
    pub use super::tracked::model::Tracked;
}

/// The Rust examples of `docs/isolation.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/isolation.md")]
pub struct IsolationGuideDoctests;
