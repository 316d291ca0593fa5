//! Building a chain: links in order, checked once at `build()`.

use std::borrow::Borrow;
use std::error::Error as StdError;
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::link::{Boxed, Cache, Fixed, Guarded, Lead, Provider, Source};
use super::stats::{LinkStats, Stats};
use super::{Chain, FirstLink, Link};
use crate::last_good::LastGood;
use crate::name::Inline;
use crate::{Breaker, CallError, ConfigError, IsStdError};

/// Builds a [`Chain`]: its links in the order they are tried. Start with
/// [`Chain::builder`].
///
/// Nothing is checked until [`build`](Self::build), which names the field
/// at fault.
///
/// The last type parameter is the chain's first link, as in [`Chain`]:
/// [`Provider<F>`](super::Provider) when it is a provider,
/// [`Boxed`](super::Boxed) otherwise (the default, and what
/// [`Chain::boxed`] makes of either). Before the first link, the
/// builder is a [`ChainStart`].
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | links | none: at least one is required |
/// | a deterministic "no" | stops the chain ([`continue_past_no`](Self::continue_past_no) per link) |
/// | `deadline` | none: every link is tried |
/// | `clock` | a real `quanta::Clock` (read only with a deadline) |
pub struct ChainBuilder<Q: ?Sized, T, E, L = Boxed<Q, T, E>> {
    name: String,
    /// The first link.
    lead: L,
    /// Every link, the first included (whose source is `lead`).
    links: Vec<Pending<Q, T, E>>,
    deadline: Option<Duration>,
    clock: Option<quanta::Clock>,
    /// A setter used out of place, reported by `build`.
    misplaced: Option<&'static str>,
}

struct Pending<Q: ?Sized, T, E> {
    name: String,
    stop_on_no: bool,
    kind: &'static str,
    is_cache: bool,
    /// The breaker in front of the link's provider, if it has one.
    breaker: Option<Breaker>,
    /// `None` for the first link, held apart.
    source: Option<Box<dyn Source<Q, T, E>>>,
}

impl<Q: ?Sized, T, E> Pending<Q, T, E> {
    fn of(name: String, source: &dyn Source<Q, T, E>) -> Self {
        Pending {
            name,
            stop_on_no: true,
            kind: source.kind(),
            is_cache: source.is_cache(),
            breaker: source.breaker().cloned(),
            source: None,
        }
    }
}

impl<Q: ?Sized, T, E, L> std::fmt::Debug for ChainBuilder<Q, T, E, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainBuilder")
            .field("name", &self.name)
            .field(
                "links",
                &self
                    .links
                    .iter()
                    .map(|l| l.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

fn provider<Q, T, E, F>(breaker: &Breaker, f: F) -> Provider<F>
where
    Q: ?Sized,
    F: Fn(&Q) -> Result<T, E> + Send + Sync + 'static,
    E: IsStdError,
{
    Provider {
        breaker: breaker.clone(),
        f,
    }
}

fn guarded<Q, T, E, F>(breaker: &Breaker, f: F) -> Box<dyn Source<Q, T, E>>
where
    Q: ?Sized + 'static,
    T: 'static,
    F: Fn(&Q) -> Result<T, CallError<E>> + Send + Sync + 'static,
    E: StdError + 'static,
{
    Box::new(Guarded {
        breaker: breaker.clone(),
        f,
    })
}

#[cfg(feature = "isolation")]
fn isolated<Q, T, E, F, J>(isolated: crate::isolation::Isolated, f: F) -> Box<dyn Source<Q, T, E>>
where
    Q: ?Sized + 'static,
    F: Fn(&Q) -> J + Send + Sync + 'static,
    J: FnOnce() -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: StdError + Send + 'static,
{
    Box::new(super::link::Isolated { isolated, f })
}

fn cache<Q, K, T, E>(store: LastGood<K, T>) -> Box<dyn Source<Q, T, E>>
where
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'static,
    K: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    E: 'static,
{
    Box::new(Cache { store })
}

fn default_value<Q, T, E>(value: T) -> Box<dyn Source<Q, T, E>>
where
    Q: ?Sized + 'static,
    T: Clone + Send + Sync + 'static,
    E: 'static,
{
    Box::new(Fixed { value })
}

/// The shape of a lookup, for a builder that holds none yet.
type Lookup<Q, T, E> = fn(&Q) -> Result<T, E>;

/// A [`ChainBuilder`] before its first link, from [`Chain::builder`]:
/// adding that link sets the chain's type ([`Provider<F>`](super::Provider)
/// for a provider, [`Boxed`](super::Boxed) for any other link).
pub struct ChainStart<Q: ?Sized, T, E> {
    name: String,
    kind: std::marker::PhantomData<Lookup<Q, T, E>>,
}

impl<Q: ?Sized, T, E> std::fmt::Debug for ChainStart<Q, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainStart")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<Q: ?Sized + 'static, T: 'static, E: 'static> ChainStart<Q, T, E> {
    pub(super) fn new(name: String) -> Self {
        ChainStart {
            name,
            kind: std::marker::PhantomData,
        }
    }

    fn start<L: Lead<Q, T, E>>(self, name: impl Into<String>, lead: L) -> ChainBuilder<Q, T, E, L> {
        let first = Pending::of(name.into(), lead.source());
        ChainBuilder {
            name: self.name,
            lead,
            links: vec![first],
            deadline: None,
            clock: None,
            misplaced: None,
        }
    }

    /// Adds a provider as the first link: `f` behind `breaker`, as every
    /// later [`provider`](ChainBuilder::provider). The chain carries `f`'s
    /// type ([`Provider<F>`](super::Provider)), so that a healthy lookup
    /// is `breaker.call(f)` inlined and one count.
    pub fn provider<F>(
        self,
        name: impl Into<String>,
        breaker: &Breaker,
        f: F,
    ) -> ChainBuilder<Q, T, E, Provider<F>>
    where
        F: Fn(&Q) -> Result<T, E> + Send + Sync + 'static,
        E: IsStdError,
    {
        self.start(name, provider(breaker, f))
    }

    /// Adds a call that goes through `breaker` by itself as the first
    /// link; see [`guarded`](ChainBuilder::guarded) after the first.
    pub fn guarded<F>(
        self,
        name: impl Into<String>,
        breaker: &Breaker,
        f: F,
    ) -> ChainBuilder<Q, T, E>
    where
        F: Fn(&Q) -> Result<T, CallError<E>> + Send + Sync + 'static,
        E: StdError,
    {
        self.start(name, Boxed(guarded(breaker, f)))
    }

    /// Adds a provider behind an [`Isolated`](crate::isolation::Isolated)
    /// as the first link; see [`isolated`](ChainBuilder::isolated) after
    /// the first.
    #[cfg(feature = "isolation")]
    pub fn isolated<F, J>(
        self,
        name: impl Into<String>,
        isolated: crate::isolation::Isolated,
        f: F,
    ) -> ChainBuilder<Q, T, E>
    where
        F: Fn(&Q) -> J + Send + Sync + 'static,
        J: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send,
        E: StdError + Send,
    {
        self.start(name, Boxed(self::isolated(isolated, f)))
    }

    /// Adds a last-known-good cache as the first link; see
    /// [`cache`](ChainBuilder::cache) after the first.
    pub fn cache<K>(self, name: impl Into<String>, store: LastGood<K, T>) -> ChainBuilder<Q, T, E>
    where
        Q: Hash + Eq + ToOwned<Owned = K>,
        K: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
        T: Clone + Send + Sync,
    {
        self.start(name, Boxed(cache(store)))
    }
}

fn misplaced(field: &'static str) -> ConfigError {
    ConfigError::Invalid {
        field,
        rule: "must follow a link with a breaker (provider, guarded or isolated)",
        value: String::new(),
    }
}

/// Settings.
impl<Q: ?Sized, T, E, L> ChainBuilder<Q, T, E, L> {
    /// The link added last goes on to the next link after a deterministic
    /// "no" (recorded as [`Skip::Declined`](super::Skip::Declined)),
    /// instead of ending the lookup with it. Only for a source that may
    /// lack what another has (one vendor's coverage gap); by default a
    /// "no" stands, so that an older "yes" from a secondary source cannot
    /// paper over a delisting.
    pub fn continue_past_no(mut self) -> Self {
        match self.links.last_mut() {
            Some(link) if link.breaker.is_some() => link.stop_on_no = false,
            _ => self.misplaced = Some("continue_past_no"),
        }
        self
    }

    /// The most a lookup spends on providers: a provider whose turn comes
    /// after this much time since the lookup began is skipped with
    /// [`Skip::DeadlinePassed`](super::Skip::DeadlinePassed) without being
    /// called; cache and default links still answer. Costs two clock reads
    /// per lookup, and more when the first link does not answer.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The clock the deadline is read from: the clock half of
    /// `quanta::Clock::mock()` in tests.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = Some(clock);
        self
    }
}

/// Links after the first, and the chain.
impl<Q, T, E, L> ChainBuilder<Q, T, E, L>
where
    Q: ?Sized + 'static,
    T: 'static,
    E: 'static,
    L: FirstLink<Q, T, E>,
{
    fn push(mut self, name: impl Into<String>, source: Box<dyn Source<Q, T, E>>) -> Self {
        let mut link = Pending::of(name.into(), &*source);
        link.source = Some(source);
        self.links.push(link);
        self
    }

    /// Adds a provider: `f` behind `breaker`, which the chain asks first
    /// (a refusal skips the link without calling `f`) and tells how the
    /// call went, judged by the breaker's classifier.
    pub fn provider<F>(self, name: impl Into<String>, breaker: &Breaker, f: F) -> Self
    where
        F: Fn(&Q) -> Result<T, E> + Send + Sync + 'static,
        E: IsStdError,
    {
        self.push(name, Box::new(provider(breaker, f)))
    }

    /// Adds a link whose call goes through `breaker` by itself: a
    /// `GuardedClient` request (feature `http`), a function
    /// that calls [`Breaker::call`]. `f` must call through that
    /// breaker: a refusal (`CallError::Rejected`) skips the link, and a
    /// failure is judged by the breaker's classifier to tell a
    /// deterministic "no" (an HTTP 404) from an outage.
    pub fn guarded<F>(self, name: impl Into<String>, breaker: &Breaker, f: F) -> Self
    where
        F: Fn(&Q) -> Result<T, CallError<E>> + Send + Sync + 'static,
        E: StdError,
    {
        self.push(name, guarded(breaker, f))
    }

    /// Adds a provider behind an [`Isolated`](crate::isolation::Isolated):
    /// its breaker, then its bulkhead (a full one skips the link with
    /// [`Skip::Full`](super::Skip::Full)), then its deadline pool (a call
    /// abandoned at the deadline skips it with
    /// [`Skip::TimedOut`](super::Skip::TimedOut)). `f` makes the call to
    /// run, owning what it needs from the query.
    #[cfg(feature = "isolation")]
    pub fn isolated<F, J>(
        self,
        name: impl Into<String>,
        isolated: crate::isolation::Isolated,
        f: F,
    ) -> Self
    where
        F: Fn(&Q) -> J + Send + Sync + 'static,
        J: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send,
        E: StdError + Send,
    {
        self.push(name, self::isolated(isolated, f))
    }

    /// Adds a last-known-good cache: every provider's fresh answer is filed
    /// in `store` (whatever its place in the chain), and this link serves
    /// it, with its age, while younger than the store's `max_staleness`.
    pub fn cache<K>(self, name: impl Into<String>, store: LastGood<K, T>) -> Self
    where
        Q: Hash + Eq + ToOwned<Owned = K>,
        K: Borrow<Q> + Hash + Eq + Send + Sync + 'static,
        T: Clone + Send + Sync,
    {
        self.push(name, cache(store))
    }

    /// Adds a static default, the last link: it always answers with a
    /// clone of `value`, marked [`Origin::Default`](super::Origin::Default).
    pub fn default_value(self, name: impl Into<String>, value: T) -> Self
    where
        T: Clone + Send + Sync,
    {
        self.push(name, default_value(value))
    }

    /// Checks the chain and builds it.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the field at fault: `name` (the chain's,
    /// under the rules of a breaker's name), `links` (none given), `link`
    /// (a name that breaks those rules or is used twice),
    /// `default_value` (a link after the static default, never reached),
    /// `continue_past_no` (not after a provider link), `deadline` (zero),
    /// and [`ConfigError::ForbiddenCallPath`] when a link's breaker is
    /// declared for an order, cancel, kill-switch or risk-check path (a
    /// chain is a fallback, and those paths must not have one).
    pub fn build(self) -> Result<Chain<Q, T, E, L>, ConfigError> {
        crate::name::check(&self.name)?;
        if let Some(field) = self.misplaced {
            return Err(misplaced(field));
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::Invalid {
                field: "deadline",
                rule: "must be greater than zero",
                value: "0s".into(),
            });
        }
        for (i, link) in self.links.iter().enumerate() {
            crate::name::check(&link.name).map_err(|e| match e {
                ConfigError::Invalid { rule, value, .. } => ConfigError::Invalid {
                    field: "link",
                    rule,
                    value,
                },
                other => other,
            })?;
            if self.links[..i].iter().any(|l| l.name == link.name) {
                return Err(ConfigError::Invalid {
                    field: "link",
                    rule: "must be unique within the chain",
                    value: format!("{:?}", link.name),
                });
            }
            if let Some(breaker) = &link.breaker {
                let path = breaker.call_path();
                if let Some(why) = path.refusal() {
                    return Err(ConfigError::ForbiddenCallPath { path, why });
                }
            }
            if link.kind == "default" && i + 1 < self.links.len() {
                return Err(ConfigError::Invalid {
                    field: "default_value",
                    rule: "must be the chain's last link: the links after it are never tried",
                    value: format!("{:?}", link.name),
                });
            }
        }
        let links: Box<[LinkStats]> = self
            .links
            .iter()
            .map(|l| LinkStats::new(Inline::new(&l.name), l.kind))
            .collect();
        let answers = Arc::clone(&links[0].answers);
        let stats = Stats {
            name: Inline::new(&self.name),
            links,
            exhausted: AtomicU64::new(0),
        };
        let has_cache = self.links.iter().any(|l| l.is_cache);
        let first = Inline::new(&self.links[0].name);
        let links = self
            .links
            .into_iter()
            .map(|l| Link {
                name: Inline::new(&l.name),
                stop_on_no: l.stop_on_no,
                calls_out: l.breaker.is_some(),
                kind: l.kind,
                is_cache: l.is_cache,
                source: l.source,
            })
            .collect();
        Ok(Chain {
            lead: self.lead,
            plain: !has_cache && self.deadline.is_none(),
            answers,
            first,
            links,
            has_cache,
            deadline: self.deadline,
            clock: self.clock.unwrap_or_default(),
            stats: Arc::new(stats),
        })
    }
}
