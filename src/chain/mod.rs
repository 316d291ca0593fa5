//! Provider fallback chains (feature `chain`): what a lookup does when a
//! breaker says no.
//!
//! A [`Chain`] holds the providers of one kind of lookup in order (a
//! primary vendor, a secondary, a last-known-good cache, a static
//! default), each provider behind its own breaker. A lookup tries the links
//! in order:
//!
//! - a link whose breaker refuses is **skipped without being called**;
//! - a link that fails is recorded and the next one tried;
//! - the **first answer wins**, and no link is called twice in one lookup;
//! - a **deterministic "no"** (the classifier's `Ignore`, an HTTP 404 for
//!   a delisted instrument) is an answer: it ends the lookup by default, so
//!   that an older "yes" from a secondary source cannot paper over it
//!   ([`ChainBuilder::continue_past_no`] per link).
//!
//! Every [`Answer`] says which link gave it, how old it is when it came
//! from a cache, and for every earlier link why it did not answer
//! ([`Skip`]: refused, with the breaker's state and `retry_after`; no
//! slot in a bulkhead; deadline passed; provider error, with the error). A
//! lookup with no answer returns a [`LookupError`] with the same list, so a
//! review of why a batch fell back so often can tell an incident (refused,
//! failed) from a coverage gap (declined, not cached).
//!
//! ```
//! use fusebox::chain::{Chain, Origin, SkipReason};
//! use fusebox::last_good::LastGood;
//! use fusebox::{Breaker, CallPath, Classifier};
//! use std::{io, time::Duration};
//!
//! let vendor = |name: &str| {
//!     Breaker::builder(name)
//!         .call_path(CallPath::ReferenceData)
//!         .classifier(Classifier::every_error_is_a_failure())
//!         .consecutive_failure_threshold(1)
//!         .build()
//! };
//! let (primary, secondary) = (vendor("primary")?, vendor("secondary")?);
//! let cache: LastGood<String, f64> = LastGood::new(Duration::from_secs(60));
//!
//! let chain = Chain::builder("closing-price")
//!     .provider("primary", &primary, |_sym: &str| Err(io::Error::from(io::ErrorKind::TimedOut)))
//!     .provider("secondary", &secondary, |_sym: &str| Ok(101.25))
//!     .cache("last-good", cache.clone())
//!     .build()?;
//!
//! let answer = chain.lookup("AAPL").unwrap();
//! assert_eq!((*answer.value(), answer.link()), (101.25, "secondary"));
//! assert_eq!(answer.skipped()[0].skip().reason(), SkipReason::Failed);
//!
//! // The primary is open now: skipped without a call.
//! let answer = chain.lookup("AAPL").unwrap();
//! assert_eq!(answer.skipped()[0].skip().reason(), SkipReason::Refused);
//!
//! secondary.force_open("ops", "vendor maintenance");
//! let answer = chain.lookup("AAPL").unwrap();
//! assert_eq!(answer.link(), "last-good");
//! assert!(matches!(answer.origin(), Origin::Cache { .. }));
//! # Ok::<(), fusebox::ConfigError>(())
//! ```
//!
//! # Where a chain must not stand
//!
//! A chain is a fallback, and an order, a cancel, a kill switch or a
//! mandatory risk check must have none: [`ChainBuilder::build`] refuses a
//! link whose breaker is declared for one of those paths, as the breaker's
//! own builder does.
//!
//! # Cost
//!
//! With the first link's breaker closed and its provider answering, a
//! lookup is that provider's guarded call, inlined with its closure as
//! `breaker.call(f)` is, and one increment of a counter the thread owns:
//! no lock, no clock read (without a deadline), no allocation. That is for
//! a chain whose first link is a provider and whose type carries that
//! provider's closure, as [`ChainStart::provider`] and
//! [`ChainBuilder::build`] make it (`Chain<Q, T, E, Provider<F>>`). A chain
//! whose type is written out in a struct field, `Chain<Q, T, E>`, holds its
//! first link behind a box ([`Chain::boxed`]): one indirect call more per
//! lookup. A chain with a cache link or a deadline walks its links from
//! the first on every lookup. A skipped link allocates the list of skips
//! once (a `Vec` grown on the first skip). With a cache link, each fresh
//! answer is filed: one lock round trip and a clone of the answer.
//! `docs/performance.md` has the measured ratios.

mod answer;
mod builder;
mod link;
mod skip;
mod stats;

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub use answer::{Answer, LookupError, Origin};
pub use builder::{ChainBuilder, ChainStart};
pub use link::{Boxed, Provider};
pub use skip::{Skip, SkipReason, Skipped};
pub(crate) use stats::ChainStats;
pub use stats::{ChainSnapshot, LinkSnapshot, SkipCounts};

use answer::Declined;
use link::{Lead, Outcome, Source};
use stats::Stats;

use crate::counter::Counter;
use crate::name::Inline;

/// An ordered chain of providers for one kind of lookup: queries `Q`
/// (`str` for a symbol), answers `T`, provider errors `E`; `L` is the first
/// link, as the chain holds it.
///
/// Built with [`Chain::builder`]; see the [module docs](self). `Send` and
/// `Sync`: share one chain between threads behind an `Arc`.
///
/// # The first link's type
///
/// A chain whose first link is a provider is built as a
/// `Chain<Q, T, E, Provider<F>>`, `F` being that provider's closure: a
/// healthy lookup then inlines the breaker's call and the closure, as
/// `breaker.call(f)` does. A closure's type has no name, so where a chain's
/// type is written out (a struct field), write `Chain<Q, T, E>`: its first
/// link is [`Boxed`], which [`boxed`](Self::boxed) makes of any chain,
/// at the cost of one indirect
/// call per lookup. A chain led by anything but a provider is `Boxed` from
/// the start. Code generic over both takes `L: FirstLink<Q, T, E>`.
///
/// ```
/// use fusebox::chain::Chain;
/// use fusebox::{Breaker, CallPath, Classifier};
/// use std::io;
///
/// struct Pricer {
///     chain: Chain<str, f64, io::Error>,
/// }
///
/// let vendor = Breaker::builder("vendor")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .build()?;
/// let chain = Chain::builder("price")
///     .provider("vendor", &vendor, |_sym: &str| Ok::<_, io::Error>(101.25))
///     .default_value("default", 0.0)
///     .build()?;
/// assert_eq!(*chain.lookup("AAPL").unwrap().value(), 101.25);
/// let pricer = Pricer { chain: chain.boxed() };
/// assert_eq!(*pricer.chain.lookup("AAPL").unwrap().value(), 101.25);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
pub struct Chain<Q: ?Sized, T, E, L = Boxed<Q, T, E>> {
    /// The first link; `links[0]` has its name and no source.
    lead: L,
    /// No deadline and no cache: a lookup asks the first link at once and
    /// ends with its fresh answer.
    plain: bool,
    /// The first link's answers (also in `stats`), counted without going
    /// through the stats.
    answers: Arc<Counter>,
    /// The first link's name, for its answers.
    first: Inline,
    links: Box<[Link<Q, T, E>]>,
    has_cache: bool,
    deadline: Option<Duration>,
    clock: quanta::Clock,
    stats: Arc<Stats>,
}

/// What a chain's first link can be: a [`Provider`] or [`Boxed`]. Sealed:
/// for code generic over a chain's type, `Chain<Q, T, E, L>` with
/// `L: FirstLink<Q, T, E>`.
pub trait FirstLink<Q: ?Sized, T, E>: Lead<Q, T, E> {}

impl<Q: ?Sized, T, E, L: Lead<Q, T, E>> FirstLink<Q, T, E> for L {}

struct Link<Q: ?Sized, T, E> {
    name: Inline,
    stop_on_no: bool,
    /// Whether the link calls a provider (and so is subject to the
    /// deadline); caches and defaults answer locally.
    calls_out: bool,
    kind: &'static str,
    is_cache: bool,
    /// `None` for the first link, which the chain holds apart.
    source: Option<Box<dyn Source<Q, T, E>>>,
}

impl<Q: ?Sized + 'static, T: 'static, E: 'static> Chain<Q, T, E> {
    /// Starts building a chain called `name` (in metrics and errors; the
    /// rules of a breaker's name).
    pub fn builder(name: impl Into<String>) -> ChainStart<Q, T, E> {
        ChainStart::new(name.into())
    }
}

impl<Q: ?Sized, T, E, L> Chain<Q, T, E, L> {
    /// The chain's name.
    pub fn name(&self) -> &str {
        self.stats.name.as_str()
    }

    /// The chain's counters, for a registry to read without the chain's
    /// types.
    // Only a registry (feature `registry`) holds a chain's counters.
    #[cfg_attr(not(feature = "registry"), allow(dead_code))]
    pub(crate) fn stats(&self) -> ChainStats {
        ChainStats(Arc::clone(&self.stats))
    }

    /// Answers and skips so far, per link.
    pub fn snapshot(&self) -> ChainSnapshot {
        self.stats().snapshot()
    }
}

impl<Q: ?Sized, T, E, L: FirstLink<Q, T, E>> Chain<Q, T, E, L> {
    /// Answers `query` from the first link that can; see the
    /// [module docs](self) for the rules.
    ///
    /// # Errors
    ///
    /// [`LookupError`] when a link said a deterministic "no" that stops the
    /// chain, or when no link answered; both list every link skipped and
    /// why.
    #[inline]
    pub fn lookup(&self, query: &Q) -> Result<Answer<T, E>, LookupError<E>> {
        if self.plain {
            self.lead.lookup(self, query)
        } else {
            self.rest(query, None)
        }
    }

    /// The same chain with its first link behind a box: a type that can be
    /// written out, `Chain<Q, T, E>`, for one indirect call more per
    /// lookup. Answers, counters and breakers are the same.
    pub fn boxed(self) -> Chain<Q, T, E>
    where
        L: 'static,
    {
        Chain {
            lead: self.lead.into_boxed(),
            plain: self.plain,
            answers: self.answers,
            first: self.first,
            links: self.links,
            has_cache: self.has_cache,
            deadline: self.deadline,
            clock: self.clock,
            stats: self.stats,
        }
    }

    /// The fresh answer of the first link, counted.
    #[inline(always)]
    pub(super) fn answered_first(&self, value: T) -> Answer<T, E> {
        self.answers.add_one();
        Answer {
            value,
            link: self.first,
            origin: Origin::Provider,
            skipped: None,
        }
    }

    /// [`walk`](Self::walk), its result handed back through a slot of its
    /// own rather than as the return value. The caller's result is then not
    /// one that an out-of-line function writes through a pointer, so the
    /// compiler can keep a healthy lookup's answer in registers instead of
    /// storing all of it to read it back where the two paths meet.
    #[inline(always)]
    pub(super) fn rest(
        &self,
        query: &Q,
        first: Option<Outcome<T, E>>,
    ) -> Result<Answer<T, E>, LookupError<E>> {
        let mut out = None;
        self.walk_into(query, first, &mut out);
        match out {
            Some(result) => result,
            None => unreachable!("`walk_into` always sets its result"),
        }
    }

    /// The walk, out of line, off the healthy path.
    #[inline(never)]
    fn walk_into(
        &self,
        query: &Q,
        first: Option<Outcome<T, E>>,
        out: &mut Option<Result<Answer<T, E>, LookupError<E>>>,
    ) {
        *out = Some(self.walk(query, first));
    }

    /// The link at `position`.
    fn source(&self, position: usize) -> &dyn Source<Q, T, E> {
        match &self.links[position].source {
            Some(source) => &**source,
            None => self.lead.source(),
        }
    }

    /// Tries the links in order from the first, whose outcome is `first`
    /// when it has been asked already (in a chain without a deadline).
    #[inline]
    fn walk(
        &self,
        query: &Q,
        mut first: Option<Outcome<T, E>>,
    ) -> Result<Answer<T, E>, LookupError<E>> {
        let started = self.deadline.map(|_| self.clock.now());
        let mut skipped = Vec::new();
        for (position, link) in self.links.iter().enumerate() {
            let stats = &self.stats.links[position];
            if let (Some(deadline), Some(started), true) = (self.deadline, started, link.calls_out)
            {
                if position > 0 && self.clock.now().saturating_duration_since(started) >= deadline {
                    let skip = Skip::DeadlinePassed { deadline };
                    stats.skips[skip.reason().index()].fetch_add(1, Ordering::Relaxed);
                    skipped.push(Skipped {
                        link: link.name,
                        skip,
                    });
                    continue;
                }
            }
            let outcome = match first.take() {
                Some(outcome) => outcome,
                None => self.source(position).ask(query),
            };
            let (value, origin) = match outcome {
                Outcome::Fresh(value) => {
                    if self.has_cache {
                        self.file(query, &value);
                    }
                    (value, Origin::Provider)
                }
                Outcome::Cached(value, age) => (value, Origin::Cache { age }),
                Outcome::Default(value) => (value, Origin::Default),
                Outcome::No(error) if link.stop_on_no => {
                    stats.declined.fetch_add(1, Ordering::Relaxed);
                    return Err(LookupError {
                        chain: self.stats.name,
                        declined: Some(Declined {
                            link: link.name,
                            error,
                        }),
                        skipped,
                    });
                }
                Outcome::No(error) => {
                    self.skip(&mut skipped, position, Skip::Declined(error));
                    continue;
                }
                Outcome::Skip(skip) => {
                    self.skip(&mut skipped, position, skip);
                    continue;
                }
            };
            stats.answers.add_one();
            return Ok(Answer {
                value,
                link: link.name,
                origin,
                skipped: (!skipped.is_empty()).then_some(skipped),
            });
        }
        self.stats.exhausted.fetch_add(1, Ordering::Relaxed);
        Err(LookupError {
            chain: self.stats.name,
            declined: None,
            skipped,
        })
    }

    /// Records a skip: counted, and listed for the caller. Out of line, to
    /// keep the healthy path of `lookup` short.
    #[inline(never)]
    fn skip(&self, skipped: &mut Vec<Skipped<E>>, position: usize, skip: Skip<E>) {
        self.stats.links[position].skips[skip.reason().index()].fetch_add(1, Ordering::Relaxed);
        skipped.push(Skipped {
            link: self.links[position].name,
            skip,
        });
    }

    /// Files a fresh answer in every cache link.
    #[inline(never)]
    fn file(&self, query: &Q, value: &T) {
        for (position, link) in self.links.iter().enumerate() {
            if link.is_cache {
                self.source(position).file(query, value);
            }
        }
    }
}

impl<Q: ?Sized, T, E, L> fmt::Debug for Chain<Q, T, E, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chain")
            .field("name", &self.name())
            .field(
                "links",
                &self
                    .links
                    .iter()
                    .map(|l| (l.name.as_str(), l.kind))
                    .collect::<Vec<_>>(),
            )
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// The Rust examples of `docs/fallback.md`, compiled and run as doctests.
#[cfg(all(doctest, feature = "retry"))]
#[doc = include_str!("../../docs/fallback.md")]
pub struct FallbackGuideDoctests;
