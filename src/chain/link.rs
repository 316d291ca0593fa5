//! The kinds of link a chain holds, behind one trait: a provider behind its
//! breaker, a call that goes through a breaker itself (a guarded HTTP
//! client), an isolated call, a last-known-good cache, a static default.

use std::borrow::Borrow;
use std::error::Error as StdError;
use std::hash::Hash;
use std::time::Duration;

use super::skip::Skip;
use crate::last_good::{Kept, LastGood};
use crate::{Breaker, CallError, ErrorView, IsStdError, Rejected, Verdict};

/// What one link made of a lookup.
pub(super) enum Outcome<T, E> {
    /// A provider's answer.
    Fresh(T),
    /// A cache's answer, filed this long ago.
    Cached(T, Duration),
    /// The static default.
    Default(T),
    /// A deterministic "no".
    No(E),
    /// No answer.
    Skip(Skip<E>),
}

/// One link, whatever its kind.
pub(super) trait Source<Q: ?Sized, T, E>: Send + Sync {
    /// Answers `query`, or says why not.
    fn ask(&self, query: &Q) -> Outcome<T, E>;

    /// Files a provider's fresh answer (a cache keeps it).
    fn file(&self, _query: &Q, _value: &T) {}

    /// Whether this link keeps answers.
    fn is_cache(&self) -> bool {
        false
    }

    /// The breaker in front of the link's provider, if it has one.
    fn breaker(&self) -> Option<&Breaker> {
        None
    }

    /// The kind, for snapshots: `provider`, `guarded`, `isolated`, `cache`,
    /// `default`.
    fn kind(&self) -> &'static str;
}

/// Whether an error's verdict makes it a deterministic "no": the
/// classifier ignores it (an HTTP 404) or counts it as one of the
/// dependency's normal answers. An inner breaker's refusal, which
/// classifiers also ignore, is never one.
fn is_no(verdict: Verdict, err: Option<&(dyn StdError + 'static)>) -> bool {
    matches!(verdict, Verdict::Ignore | Verdict::Success) && !err.is_some_and(Rejected::in_chain)
}

/// A provider's error, judged by its breaker's classifier: a "no" or a
/// failure.
#[inline(never)]
fn failed<T, E: StdError + 'static>(breaker: &Breaker, err: E) -> Outcome<T, E> {
    let verdict = breaker
        .classifier()
        .classify_view(ErrorView::of_error(&err));
    if is_no(verdict, Some(&err)) {
        Outcome::No(err)
    } else {
        Outcome::Skip(Skip::Failed(err))
    }
}

/// A closure behind its own breaker.
pub(super) struct Provider<F> {
    pub(super) breaker: Breaker,
    pub(super) f: F,
}

impl<Q, T, E, F> Source<Q, T, E> for Provider<F>
where
    Q: ?Sized,
    T: 'static,
    E: IsStdError,
    F: Fn(&Q) -> Result<T, E> + Send + Sync,
{
    #[inline]
    fn ask(&self, query: &Q) -> Outcome<T, E> {
        // `Breaker::call` itself, so that the healthy path is the same
        // inlined code; an error is classified a second time here (the
        // breaker keeps its verdict to itself), off the healthy path.
        match self.breaker.call(|| (self.f)(query)) {
            Ok(value) => Outcome::Fresh(value),
            Err(CallError::Rejected(refused)) => Outcome::Skip(Skip::Refused(refused)),
            Err(CallError::Failed(err)) => failed(&self.breaker, err),
        }
    }

    fn breaker(&self) -> Option<&Breaker> {
        Some(&self.breaker)
    }

    fn kind(&self) -> &'static str {
        "provider"
    }
}

/// A closure that goes through `breaker` itself: a guarded HTTP client's
/// request, a `Decorated` call.
pub(super) struct Guarded<F> {
    pub(super) breaker: Breaker,
    pub(super) f: F,
}

impl<Q, T, E, F> Source<Q, T, E> for Guarded<F>
where
    Q: ?Sized,
    E: StdError + 'static,
    F: Fn(&Q) -> Result<T, CallError<E>> + Send + Sync,
{
    fn ask(&self, query: &Q) -> Outcome<T, E> {
        match (self.f)(query) {
            Ok(value) => Outcome::Fresh(value),
            Err(CallError::Rejected(refused)) => Outcome::Skip(Skip::Refused(refused)),
            Err(CallError::Failed(err)) => failed(&self.breaker, err),
        }
    }

    fn breaker(&self) -> Option<&Breaker> {
        Some(&self.breaker)
    }

    fn kind(&self) -> &'static str {
        "guarded"
    }
}

/// A call through an `Isolated`: breaker, bulkhead, deadline pool.
#[cfg(feature = "isolation")]
pub(super) struct Isolated<F> {
    pub(super) isolated: crate::isolation::Isolated,
    pub(super) f: F,
}

#[cfg(feature = "isolation")]
impl<Q, T, E, F, J> Source<Q, T, E> for Isolated<F>
where
    Q: ?Sized,
    T: Send + 'static,
    E: StdError + Send + 'static,
    F: Fn(&Q) -> J + Send + Sync,
    J: FnOnce() -> Result<T, E> + Send + 'static,
{
    fn ask(&self, query: &Q) -> Outcome<T, E> {
        use crate::isolation::IsolationError;
        match self.isolated.call((self.f)(query)) {
            Ok(value) => Outcome::Fresh(value),
            Err(IsolationError::Rejected(refused)) => Outcome::Skip(Skip::Refused(refused)),
            Err(IsolationError::Full(full)) => Outcome::Skip(Skip::Full(full)),
            Err(IsolationError::TimedOut(t)) => Outcome::Skip(Skip::TimedOut(t)),
            Err(IsolationError::Failed(err)) => failed(self.isolated.breaker(), err),
        }
    }

    fn breaker(&self) -> Option<&Breaker> {
        Some(self.isolated.breaker())
    }

    fn kind(&self) -> &'static str {
        "isolated"
    }
}

/// A last-known-good store, filed from every provider's answer.
pub(super) struct Cache<K, T> {
    pub(super) store: LastGood<K, T>,
}

impl<Q, K, T, E> Source<Q, T, E> for Cache<K, T>
where
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    K: Borrow<Q> + Hash + Eq + Send + Sync,
    T: Clone + Send + Sync,
{
    fn ask(&self, query: &Q) -> Outcome<T, E> {
        match self.store.get(query) {
            Kept::Fresh { value, age } => Outcome::Cached(value, age),
            Kept::TooOld { age } => Outcome::Skip(Skip::TooOld { age }),
            Kept::Missing => Outcome::Skip(Skip::NotCached),
        }
    }

    fn file(&self, query: &Q, value: &T) {
        self.store.file(query, value);
    }

    fn is_cache(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        "cache"
    }
}

/// The same answer every time.
pub(super) struct Fixed<T> {
    pub(super) value: T,
}

impl<Q: ?Sized, T: Clone + Send + Sync, E> Source<Q, T, E> for Fixed<T> {
    fn ask(&self, _query: &Q) -> Outcome<T, E> {
        Outcome::Default(self.value.clone())
    }

    fn kind(&self) -> &'static str {
        "default"
    }
}
