//! A chain's counters: answers and skips by reason, per link.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::skip::SkipReason;
use crate::counter::Counter;
use crate::name::Inline;

/// The counters of one chain, shared with whatever reads them (a
/// registry, for metrics). Not generic, so that a registry holds chains of
/// every type side by side.
#[derive(Debug)]
pub(super) struct Stats {
    pub(super) name: Inline,
    pub(super) links: Box<[LinkStats]>,
    pub(super) exhausted: AtomicU64,
}

pub(super) struct LinkStats {
    pub(super) name: Inline,
    pub(super) kind: &'static str,
    /// Answers served: striped, since every healthy lookup counts one;
    /// the chain holds its first link's too, to count there without going
    /// through these stats.
    pub(super) answers: Arc<Counter>,
    pub(super) declined: AtomicU64,
    pub(super) skips: [AtomicU64; SkipReason::ALL.len()],
}

impl std::fmt::Debug for LinkStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkStats")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl LinkStats {
    pub(super) fn new(name: Inline, kind: &'static str) -> Self {
        LinkStats {
            name,
            kind,
            answers: Arc::default(),
            declined: AtomicU64::new(0),
            skips: Default::default(),
        }
    }
}

/// Answers and skips of one chain, per link, since it was built: read
/// from relaxed counters, so a snapshot taken while lookups run may be a
/// few counts behind.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainSnapshot {
    /// The chain's name.
    pub name: String,
    /// Each link, in chain order.
    pub links: Vec<LinkSnapshot>,
    /// Lookups that ended with no link answering and none saying "no".
    pub exhausted: u64,
}

/// One link's counts in a [`ChainSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkSnapshot {
    /// The link's name.
    pub name: String,
    /// `provider`, `guarded`, `isolated`, `cache` or `default`.
    pub kind: &'static str,
    /// Lookups this link answered.
    pub answers: u64,
    /// Lookups this link ended with a deterministic "no".
    pub declined: u64,
    /// Lookups that went past this link, by reason.
    pub skips: SkipCounts,
}

/// A link's skips by [`SkipReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkipCounts([u64; SkipReason::ALL.len()]);

impl SkipCounts {
    /// The lookups that went past the link for `reason`.
    pub fn get(&self, reason: SkipReason) -> u64 {
        self.0[reason.index()]
    }

    /// Every reason with its count, in the order of [`SkipReason::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (SkipReason, u64)> + '_ {
        SkipReason::ALL.into_iter().zip(self.0)
    }
}

/// A chain's counters, without its links' closures: what a registry keeps
/// to report on a chain of any type.
#[derive(Clone, Debug)]
pub(crate) struct ChainStats(pub(super) Arc<Stats>);

impl ChainStats {
    /// The chain's name.
    #[cfg_attr(not(feature = "registry"), allow(dead_code))]
    pub(crate) fn name(&self) -> &str {
        self.0.name.as_str()
    }

    /// The counts so far.
    pub(crate) fn snapshot(&self) -> ChainSnapshot {
        let s = &self.0;
        ChainSnapshot {
            name: s.name.as_str().to_owned(),
            links: s
                .links
                .iter()
                .map(|l| LinkSnapshot {
                    name: l.name.as_str().to_owned(),
                    kind: l.kind,
                    answers: l.answers.sum(),
                    declined: l.declined.load(Ordering::Relaxed),
                    skips: SkipCounts(std::array::from_fn(|i| l.skips[i].load(Ordering::Relaxed))),
                })
                .collect(),
            exhausted: s.exhausted.load(Ordering::Relaxed),
        }
    }
}
