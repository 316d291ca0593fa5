//! What happened to an isolated call: refused by the breaker, refused for
//! want of a slot, abandoned at its deadline, or failed.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::{CallError, ConfigError, Permit, Rejected};

/// Which layer had no room for a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// A [`Bulkhead`](super::Bulkhead): its concurrent calls were at the limit.
    Bulkhead,
    /// A [`DeadlinePool`](super::DeadlinePool): every worker thread was busy
    /// (some perhaps with calls already abandoned at their deadline).
    DeadlinePool,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Bulkhead => "bulkhead",
            Layer::DeadlinePool => "deadline pool",
        })
    }
}

/// A bulkhead or a deadline pool had no free slot: **nothing was attempted**.
///
/// Like [`Rejected`], a fallback is always safe and a retry cannot duplicate
/// a side effect. Unlike a breaker's refusal, it says nothing about the
/// dependency's health, only that this process already has as many calls to
/// it in flight as it allows; it is never counted as the dependency's
/// failure.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Full {
    pub(super) name: crate::name::Inline,
    /// The bulkhead's lane the call was made in, if it has lanes.
    pub(super) lane: Option<crate::name::Inline>,
    pub(super) layer: Layer,
    pub(super) limit: usize,
    pub(super) waited: Duration,
}

impl Full {
    /// The name of the bulkhead or pool that refused.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The bulkhead's lane the call was made in, if the bulkhead has lanes.
    pub fn lane(&self) -> Option<&str> {
        self.lane.as_ref().map(|l| l.as_str())
    }

    /// Which layer refused.
    pub fn layer(&self) -> Layer {
        self.layer
    }

    /// Its limit when it refused: concurrent calls for a bulkhead (the
    /// limit then, for an adaptive one), threads for a pool.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How long the caller waited for a slot before the refusal (zero when
    /// refused at once).
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl fmt::Debug for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Full")
            .field("name", &self.name)
            .field("lane", &self.lane)
            .field("layer", &self.layer)
            .field("limit", &self.limit)
            .field("waited", &self.waited)
            .finish()
    }
}

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.layer, self.name)?;
        if let Some(lane) = &self.lane {
            write!(f, " lane `{lane}`")?;
        }
        write!(f, " is full ({} in use): call not attempted", self.limit)?;
        if !self.waited.is_zero() {
            write!(
                f,
                " after waiting {}",
                crate::duration::display(self.waited)
            )?;
        }
        Ok(())
    }
}

impl StdError for Full {}

/// The call was made and **abandoned at its deadline**: it may still be
/// running on a pool thread, and whatever it does there (a side effect
/// included) is no longer reported to anyone.
///
/// A breaker counts it as the dependency's failure at the deadline, not when
/// the call finally returns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TimedOut {
    pub(super) name: crate::name::Inline,
    pub(super) deadline: Duration,
}

impl TimedOut {
    /// The name of the pool the call ran on.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The deadline the caller waited for.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}

impl fmt::Debug for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedOut")
            .field("name", &self.name)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call on `{}` abandoned at its {} deadline; it may still be running",
            self.name,
            crate::duration::display(self.deadline)
        )
    }
}

impl StdError for TimedOut {}

/// The result of an isolated call that did not succeed.
///
/// The first two variants mean **nothing was attempted**; the last two that
/// the call was made.
#[derive(Debug)]
#[non_exhaustive]
pub enum IsolationError<E> {
    /// The breaker refused the call; nothing was attempted.
    Rejected(Rejected),
    /// A bulkhead or a deadline pool had no room; nothing was attempted, and
    /// the breaker did not count it.
    Full(Full),
    /// The call was made and abandoned at its deadline; the breaker counted
    /// it as a failure.
    TimedOut(TimedOut),
    /// The call returned this error, passed through unchanged. Whether it
    /// counted against the dependency is up to the breaker's classifier.
    Failed(E),
}

impl<E> IsolationError<E> {
    /// Whether nothing was attempted: the breaker refused the call, or a
    /// bulkhead or deadline pool had no room (what a chain's
    /// `Skip::nothing_attempted` says of a link). A fallback is then always
    /// safe.
    pub fn nothing_attempted(&self) -> bool {
        matches!(self, IsolationError::Rejected(_) | IsolationError::Full(_))
    }

    /// The breaker's refusal, if it refused.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            IsolationError::Rejected(r) => Some(r),
            _ => None,
        }
    }

    /// The dependency's own error, if the call returned one.
    pub fn into_failed(self) -> Option<E> {
        match self {
            IsolationError::Failed(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<CallError<E>> for IsolationError<E> {
    fn from(err: CallError<E>) -> Self {
        match err {
            CallError::Rejected(r) => IsolationError::Rejected(r),
            CallError::Failed(e) => IsolationError::Failed(e),
        }
    }
}

impl<E: fmt::Display> fmt::Display for IsolationError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IsolationError::Rejected(r) => fmt::Display::fmt(r, f),
            IsolationError::Full(full) => fmt::Display::fmt(full, f),
            IsolationError::TimedOut(t) => fmt::Display::fmt(t, f),
            IsolationError::Failed(e) => write!(f, "call failed: {e}"),
        }
    }
}

impl<E: StdError + 'static> StdError for IsolationError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            // The refusal itself, so that `Rejected::in_chain` finds it.
            IsolationError::Rejected(r) => Some(r),
            IsolationError::Full(full) => Some(full),
            IsolationError::TimedOut(t) => Some(t),
            IsolationError::Failed(e) => Some(e),
        }
    }
}

/// A deadline pool could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting broke a rule.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The operating system refused a worker thread.
    #[error("deadline pool `{name}`: could not start a worker thread: {source}")]
    Spawn {
        /// The pool's name.
        name: String,
        /// The error from `std::thread::Builder::spawn`.
        source: std::io::Error,
    },
}

/// Reports what a call that was made returned, as `Breaker::call` does:
/// an `Ok` through the result classifier, an error through the classifier,
/// with the failure kept in case the breaker opens on it.
#[inline(always)]
pub(super) fn settle<T, E>(permit: Permit<'_>, result: Result<T, E>) -> Result<T, IsolationError<E>>
where
    T: 'static,
    E: StdError + 'static,
{
    permit.finish(&result);
    result.map_err(IsolationError::Failed)
}

/// The configuration error for a limit of zero.
pub(super) fn at_least_one(field: &'static str, value: usize) -> ConfigError {
    ConfigError::Invalid {
        field,
        rule: "must be at least 1",
        value: value.to_string(),
    }
}
