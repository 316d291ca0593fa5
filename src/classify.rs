//! Which errors count against the dependency.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What an error says about the dependency's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The dependency failed (timeout, refused connection, 5xx...): counts
    /// against it.
    Failure,
    /// The dependency asked the caller to back off for at least this long
    /// (an HTTP 429 with `Retry-After`, say). Counts as a failure, and if the
    /// breaker opens, its open period is at least this long, up to
    /// `max_open_duration`, the ceiling of every open period.
    Throttled(Duration),
    /// Not the dependency's fault (a 4xx, a business rejection, a parse error
    /// in the caller's code): passed through unchanged, touches no counter, and
    /// in half-open frees the probe slot without deciding anything.
    Ignore,
}

/// The outcome of one admitted call, as reported through a
/// [`Permit`](crate::Permit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call succeeded (it may still be slow).
    Success,
    /// The call failed in a way that counts against the dependency.
    Failure,
    /// The call failed and asked for a back-off of at least this long (the
    /// open period is capped at `max_open_duration` all the same).
    Throttled(Duration),
    /// The call's result says nothing about the dependency.
    Ignored,
}

impl From<Verdict> for Outcome {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Failure => Outcome::Failure,
            Verdict::Throttled(d) => Outcome::Throttled(d),
            Verdict::Ignore => Outcome::Ignored,
        }
    }
}

type ClassifyFn = dyn Fn(&(dyn StdError + 'static)) -> Verdict + Send + Sync;

/// Decides, for each error a wrapped call returns, whether it is the
/// dependency's failure.
///
/// There is deliberately no default: a breaker that counts every error
/// turns a bug in the caller's own parsing into a fake outage. Build one from
/// a closure that downcasts to the client library's error type:
///
/// ```
/// use fusebox::{Classifier, Verdict};
/// use std::io;
///
/// let classifier = Classifier::new(|err| match err.downcast_ref::<io::Error>() {
///     Some(e) if matches!(
///         e.kind(),
///         io::ErrorKind::TimedOut | io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset
///     ) => Verdict::Failure,
///     _ => Verdict::Ignore,
/// });
/// let timeout = io::Error::from(io::ErrorKind::TimedOut);
/// assert_eq!(classifier.classify(&timeout), Verdict::Failure);
/// ```
///
/// Whatever the closure says, an error whose `source()` chain holds a
/// [`Rejected`](crate::Rejected) (a refusal by an inner breaker) is always
/// [`Verdict::Ignore`]: one sick leaf must not open every breaker above it.
#[derive(Clone)]
pub struct Classifier(Arc<ClassifyFn>);

impl Classifier {
    /// A classifier from a closure.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&(dyn StdError + 'static)) -> Verdict + Send + Sync + 'static,
    {
        Classifier(Arc::new(f))
    }

    /// Counts every error of type `E` (anywhere in the source chain) as a
    /// failure and ignores everything else.
    pub fn failures_of<E: StdError + 'static>() -> Self {
        Classifier::new(|err| {
            let mut cur = Some(err);
            while let Some(e) = cur {
                if e.is::<E>() {
                    return Verdict::Failure;
                }
                cur = e.source();
            }
            Verdict::Ignore
        })
    }

    /// Counts every error as a failure. Only for call sites where every error
    /// really is the dependency's: choosing this is an explicit decision.
    pub fn every_error_is_a_failure() -> Self {
        Classifier::new(|_| Verdict::Failure)
    }

    /// Classifies `err`, ignoring refusals by inner breakers.
    pub fn classify(&self, err: &(dyn StdError + 'static)) -> Verdict {
        if crate::Rejected::in_chain(err) {
            return Verdict::Ignore;
        }
        (self.0)(err)
    }
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Classifier(..)")
    }
}
