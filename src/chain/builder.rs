//! Building a chain: links in order, checked once at `build()`.

use std::borrow::Borrow;
use std::error::Error as StdError;
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::link::{Cache, Fixed, Guarded, Provider, Source};
use super::stats::{LinkStats, Stats};
use super::{Chain, Link};
use crate::last_good::LastGood;
use crate::name::Inline;
use crate::{Breaker, CallError, ConfigError, IsStdError};

/// Builds a [`Chain`]: its links in the order they are tried. Start with
/// [`Chain::builder`].
///
/// Nothing is checked until [`build`](Self::build), which names the field
/// at fault.
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | links | none: at least one is required |
/// | a deterministic "no" | stops the chain ([`continue_past_no`](Self::continue_past_no) per link) |
/// | `deadline` | none: every link is tried |
/// | `clock` | a real `quanta::Clock` (read only with a deadline) |
pub struct ChainBuilder<Q: ?Sized, T, E> {
    name: String,
    links: Vec<Pending<Q, T, E>>,
    deadline: Option<Duration>,
    clock: Option<quanta::Clock>,
    /// A setter used out of place, reported by `build`.
    misplaced: Option<&'static str>,
}

struct Pending<Q: ?Sized, T, E> {
    name: String,
    stop_on_no: bool,
    source: Box<dyn Source<Q, T, E>>,
}

impl<Q: ?Sized, T, E> std::fmt::Debug for ChainBuilder<Q, T, E> {
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

impl<Q: ?Sized + 'static, T: 'static, E: 'static> ChainBuilder<Q, T, E> {
    pub(super) fn new(name: String) -> Self {
        ChainBuilder {
            name,
            links: Vec::new(),
            deadline: None,
            clock: None,
            misplaced: None,
        }
    }

    fn push(mut self, name: impl Into<String>, source: Box<dyn Source<Q, T, E>>) -> Self {
        self.links.push(Pending {
            name: name.into(),
            stop_on_no: true,
            source,
        });
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
        let source = Provider {
            breaker: breaker.clone(),
            f,
        };
        self.push(name, Box::new(source))
    }

    /// Adds a link whose call goes through `breaker` by itself: a
    /// [`GuardedClient`](crate::http::GuardedClient) request, a
    /// [`Decorated`](crate::Decorated) call. `f` must call through that
    /// breaker: a refusal (`CallError::Rejected`) skips the link, and a
    /// failure is judged by the breaker's classifier to tell a
    /// deterministic "no" (an HTTP 404) from an outage.
    pub fn guarded<F>(self, name: impl Into<String>, breaker: &Breaker, f: F) -> Self
    where
        F: Fn(&Q) -> Result<T, CallError<E>> + Send + Sync + 'static,
        E: StdError,
    {
        let source = Guarded {
            breaker: breaker.clone(),
            f,
        };
        self.push(name, Box::new(source))
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
        let source = super::link::Isolated { isolated, f };
        self.push(name, Box::new(source))
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
        self.push(name, Box::new(Cache { store }))
    }

    /// Adds a static default, the last link: it always answers with a
    /// clone of `value`, marked [`Origin::Default`](super::Origin::Default).
    pub fn default_value(self, name: impl Into<String>, value: T) -> Self
    where
        T: Clone + Send + Sync,
    {
        self.push(name, Box::new(Fixed { value }))
    }

    /// The link added last goes on to the next link after a deterministic
    /// "no" (recorded as [`Skip::Declined`](super::Skip::Declined)),
    /// instead of ending the lookup with it. Only for a source that may
    /// lack what another has (one vendor's coverage gap); by default a
    /// "no" stands, so that an older "yes" from a secondary source cannot
    /// paper over a delisting.
    pub fn continue_past_no(mut self) -> Self {
        match self.links.last_mut() {
            Some(link) if link.source.breaker().is_some() => link.stop_on_no = false,
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
    pub fn build(self) -> Result<Chain<Q, T, E>, ConfigError> {
        crate::name::check(&self.name)?;
        if let Some(field) = self.misplaced {
            return Err(ConfigError::Invalid {
                field,
                rule: "must follow a link with a breaker (provider, guarded or isolated)",
                value: String::new(),
            });
        }
        if self.links.is_empty() {
            return Err(ConfigError::Missing {
                field: "links",
                why: "a chain needs at least one link to try",
            });
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
            if let Some(breaker) = link.source.breaker() {
                let path = breaker.call_path();
                if let Some(why) = path.refusal() {
                    return Err(ConfigError::ForbiddenCallPath { path, why });
                }
            }
            if link.source.kind() == "default" && i + 1 < self.links.len() {
                return Err(ConfigError::Invalid {
                    field: "default_value",
                    rule: "must be the chain's last link: the links after it are never tried",
                    value: format!("{:?}", link.name),
                });
            }
        }
        let stats = Stats {
            name: Inline::new(&self.name),
            links: self
                .links
                .iter()
                .map(|l| LinkStats::new(Inline::new(&l.name), l.source.kind()))
                .collect(),
            exhausted: AtomicU64::new(0),
        };
        let has_cache = self.links.iter().any(|l| l.source.is_cache());
        let links = self
            .links
            .into_iter()
            .map(|l| Link {
                name: Inline::new(&l.name),
                stop_on_no: l.stop_on_no,
                calls_out: l.source.breaker().is_some(),
                source: l.source,
            })
            .collect();
        Ok(Chain {
            links,
            has_cache,
            deadline: self.deadline,
            clock: self.clock.unwrap_or_default(),
            stats: Arc::new(stats),
        })
    }
}
