//! The kinds of link a chain holds, behind one trait: a provider behind its
//! breaker, a call that goes through a breaker itself (a guarded HTTP
//! client), an isolated call, a last-known-good cache, a static default.
//!
//! A chain holds its first link apart, as a [`Lead`]: a [`Provider`] whose
//! closure's type the chain carries, so that a healthy lookup is the
//! provider's guarded call inlined, or any link [`Boxed`].

use std::borrow::Borrow;
use std::error::Error as StdError;
use std::hash::Hash;
use std::time::Duration;

use super::answer::{Answer, LookupError};
use super::skip::Skip;
use super::Chain;
use crate::classify::ErrorView;
use crate::last_good::{Kept, LastGood};
use crate::{Breaker, CallError, IsStdError, Verdict};

/// What one link made of a lookup.
///
/// Nominally public, as [`Lead`]'s methods name it; not reachable from
/// outside the crate.
#[derive(Debug)]
pub enum Outcome<T, E> {
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
///
/// Nominally public, as [`Lead`]'s methods name it; not reachable from
/// outside the crate.
pub trait Source<Q: ?Sized, T, E>: Send + Sync {
    /// Answers `query`, or says why not.
    fn ask(&self, query: &Q) -> Outcome<T, E>;

    /// The healthy path of a lookup whose first link this is, in a chain
    /// without a deadline or a cache: the value, when this link answers
    /// it fresh at once. Otherwise `None`, with the link's outcome in
    /// `outcome` if it was asked; the chain then walks its links. By
    /// default, asks nothing.
    #[inline]
    fn lead(&self, _query: &Q, _outcome: &mut Option<Outcome<T, E>>) -> Option<T> {
        None
    }

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

/// A provider's error: a refusal when it holds one (a breaker the call
/// goes through refused it, so nothing was sent), else judged by the link's
/// breaker's classifier: a deterministic "no" when it ignores the error
/// (an HTTP 404) or counts it as one of the dependency's normal answers, a
/// failure otherwise.
#[inline(never)]
fn failed<T, E: StdError + 'static>(breaker: &Breaker, err: E) -> Outcome<T, E> {
    let view = ErrorView::of_error(&err);
    if let Some(refused) = view.refusal() {
        return Outcome::Skip(Skip::Refused(*refused));
    }
    match breaker.classifier().classify_view(view) {
        Verdict::Ignore | Verdict::Success => Outcome::No(err),
        _ => Outcome::Skip(Skip::Failed(err)),
    }
}

/// A chain's first link when it is a provider
/// ([`ChainBuilder::provider`](super::ChainBuilder::provider) called first):
/// the closure `F` behind its own breaker, its type carried by the chain so
/// that a healthy lookup inlines the breaker's call and the closure, as
/// `breaker.call(f)` does.
///
/// Also every later provider link, behind a box.
pub struct Provider<F> {
    pub(super) breaker: Breaker,
    pub(super) f: F,
}

impl<F> std::fmt::Debug for Provider<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("breaker", &self.breaker.name())
            .finish_non_exhaustive()
    }
}

impl<F> Provider<F> {
    /// A failed or refused call of the first link, classified: out of
    /// line, off the healthy path.
    #[inline(never)]
    fn after<T, E: IsStdError>(&self, err: CallError<E>) -> Outcome<T, E> {
        match err {
            CallError::Rejected(refused) => Outcome::Skip(Skip::Refused(refused)),
            CallError::Failed(err) => failed(&self.breaker, err),
        }
    }
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

    /// The breaker's call and the closure, inlined: behind a box, one
    /// dynamic call for a healthy lookup.
    #[inline]
    fn lead(&self, query: &Q, outcome: &mut Option<Outcome<T, E>>) -> Option<T> {
        *outcome = Some(match self.breaker.call(|| (self.f)(query)) {
            Ok(value) => return Some(value),
            Err(CallError::Rejected(refused)) => Outcome::Skip(Skip::Refused(refused)),
            Err(CallError::Failed(err)) => failed(&self.breaker, err),
        });
        None
    }

    fn breaker(&self) -> Option<&Breaker> {
        Some(&self.breaker)
    }

    fn kind(&self) -> &'static str {
        "provider"
    }
}

/// A chain's first link as its chain holds it.
///
/// Nominally public, as the bound of [`FirstLink`](super::FirstLink), which
/// seals it; not reachable from outside the crate.
pub trait Lead<Q: ?Sized, T, E>: Send + Sync + Sized {
    /// The healthy path of a lookup in a chain without a deadline or a
    /// cache: the first link asked, and on its fresh answer that answer,
    /// counted; anything else walks the chain.
    fn lookup(
        &self,
        chain: &Chain<Q, T, E, Self>,
        query: &Q,
    ) -> Result<Answer<T, E>, LookupError<E>>;

    /// The link, for the walk over the chain's links.
    fn source(&self) -> &dyn Source<Q, T, E>;

    /// The link behind a box.
    fn into_boxed(self) -> Boxed<Q, T, E>
    where
        Self: 'static;
}

impl<Q, T, E, F> Lead<Q, T, E> for Provider<F>
where
    Q: ?Sized,
    T: 'static,
    E: IsStdError,
    F: Fn(&Q) -> Result<T, E> + Send + Sync,
{
    /// `breaker.call(f)`, inlined with the closure, then one increment of
    /// a counter this thread owns; everything else out of line.
    #[inline(always)]
    fn lookup(
        &self,
        chain: &Chain<Q, T, E, Self>,
        query: &Q,
    ) -> Result<Answer<T, E>, LookupError<E>> {
        match self.breaker.call(|| (self.f)(query)) {
            Ok(value) => Ok(chain.answered_first(value)),
            Err(err) => chain.rest(query, Some(self.after(err))),
        }
    }

    fn source(&self) -> &dyn Source<Q, T, E> {
        self
    }

    fn into_boxed(self) -> Boxed<Q, T, E>
    where
        Self: 'static,
    {
        Boxed(Box::new(self))
    }
}

/// A chain's first link behind a box, whatever its kind: the first link of
/// a chain whose type is written without it (`Chain<str, f64, io::Error>`,
/// in a struct field), of a chain led by a cache, a default, a guarded or an
/// isolated call, and of [`Chain::boxed`](super::Chain::boxed).
///
/// A healthy lookup led by a boxed provider makes one dynamic call more
/// than one led by a [`Provider`] (`docs/performance.md` has both).
pub struct Boxed<Q: ?Sized, T, E>(pub(super) Box<dyn Source<Q, T, E>>);

impl<Q: ?Sized, T, E> std::fmt::Debug for Boxed<Q, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Boxed").field(&self.0.kind()).finish()
    }
}

impl<Q: ?Sized, T, E> Lead<Q, T, E> for Boxed<Q, T, E> {
    /// One call through the box: a provider link answers there on its
    /// healthy path and hands the value back in registers, so that the
    /// answer is built here, where the caller may keep it out of memory.
    #[inline]
    fn lookup(
        &self,
        chain: &Chain<Q, T, E, Self>,
        query: &Q,
    ) -> Result<Answer<T, E>, LookupError<E>> {
        let mut outcome = None;
        match self.0.lead(query, &mut outcome) {
            Some(value) => {
                // A link that answers leaves `outcome` empty: nothing to
                // drop, and no check of it on the healthy path.
                debug_assert!(outcome.is_none());
                std::mem::forget(outcome);
                Ok(chain.answered_first(value))
            }
            None => chain.rest(query, outcome),
        }
    }

    fn source(&self) -> &dyn Source<Q, T, E> {
        &*self.0
    }

    fn into_boxed(self) -> Boxed<Q, T, E> {
        self
    }
}

/// A closure that goes through `breaker` itself: a guarded HTTP client's
/// request, a function that calls `Breaker::call`.
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
