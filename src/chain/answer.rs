//! What a lookup returns: the answer, which link gave it, and why every
//! earlier link did not.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use super::skip::{list, source_of, Skipped};
use crate::name::Inline;

/// Where an answer came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// A provider answered this lookup.
    Provider,
    /// A cache link served the last good answer, filed `age` ago.
    Cache {
        /// Time since a provider gave it, on the cache's clock.
        age: Duration,
    },
    /// The static default.
    Default,
}

/// A lookup's answer from a [`Chain`](super::Chain).
///
/// Check [`origin`](Self::origin) before
/// acting on it: a cached answer carries its age, and
/// [`skipped`](Self::skipped) says, for each link before the one that
/// answered, why it did not: an incident (refused, failed) reads apart from
/// a coverage gap (declined, not cached).
#[derive(Debug)]
pub struct Answer<T, E> {
    pub(super) value: T,
    pub(super) link: Inline,
    pub(super) origin: Origin,
    /// `None` when no link was skipped: a healthy lookup's answer then
    /// drops with one check.
    pub(super) skipped: Option<Vec<Skipped<E>>>,
}

impl<T, E> Answer<T, E> {
    /// The answer.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The answer, owned.
    pub fn into_value(self) -> T {
        self.value
    }

    /// The name of the link that answered.
    pub fn link(&self) -> &str {
        self.link.as_str()
    }

    /// Where the answer came from: a provider, a cache (with its age), or
    /// the static default.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Every link before the one that answered, in order, with the reason
    /// it did not. Empty when the first link answered.
    pub fn skipped(&self) -> &[Skipped<E>] {
        self.skipped.as_deref().unwrap_or_default()
    }
}

/// A lookup that ended without an answer: every link was skipped, or a
/// link gave a deterministic "no" that stops the chain.
///
/// Carries the same list of skipped links as an [`Answer`]; its `source()`
/// is the decisive error: the "no", or the last link's error or refusal.
#[derive(Debug)]
pub struct LookupError<E> {
    pub(super) chain: Inline,
    pub(super) declined: Option<Declined<E>>,
    pub(super) skipped: Vec<Skipped<E>>,
}

/// A link's deterministic "no".
#[derive(Debug)]
pub(super) struct Declined<E> {
    pub(super) link: Inline,
    pub(super) error: E,
}

impl<E> LookupError<E> {
    /// The chain's name.
    pub fn chain(&self) -> &str {
        self.chain.as_str()
    }

    /// The link that said "no" and its error, when one did.
    pub fn declined(&self) -> Option<(&str, &E)> {
        self.declined.as_ref().map(|d| (d.link.as_str(), &d.error))
    }

    /// Every link that did not answer before the lookup ended, in order
    /// (all of them when none answered and none said "no").
    pub fn skipped(&self) -> &[Skipped<E>] {
        &self.skipped
    }
}

/// Names the chain and, for a "no", the link and its error; then every
/// link skipped and why, on one line.
impl<E: StdError + 'static> fmt::Display for LookupError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.declined {
            Some(d) => {
                write!(f, "chain `{}`: `{}` said no (", self.chain, d.link)?;
                super::skip::error_chain(f, &d.error)?;
                f.write_str(")")?;
            }
            None => write!(f, "chain `{}`: no link answered", self.chain)?,
        }
        if !self.skipped.is_empty() {
            f.write_str(if self.declined.is_some() {
                ", after "
            } else {
                ": "
            })?;
            list(f, &self.skipped)?;
        }
        Ok(())
    }
}

impl<E: StdError + 'static> StdError for LookupError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.declined {
            Some(d) => Some(&d.error),
            None => self.skipped.iter().rev().find_map(|s| source_of(&s.skip)),
        }
    }
}
