//! The audit trail: who changed which breaker, how, why, and when.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What an operator did to a breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Forced it open: every call refused.
    ForceOpen,
    /// Forced it closed: every call admitted, failures not counted against
    /// it.
    ForceClosed,
    /// Returned it to normal operation, closed, with its counters cleared.
    Reset,
    /// Declared a one-off maintenance window: failures inside it are
    /// neutral (see [`AuditRecord::window`]).
    Maintenance,
    /// Took the breaker out of the registry
    /// ([`Registry::remove`](super::Registry::remove)).
    Remove,
    /// Put another breaker in its place under the same name
    /// ([`Registry::replace`](super::Registry::replace)).
    Replace,
}

impl Action {
    /// A short lowercase name, as in the admin endpoint's paths.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Action::ForceOpen => "force-open",
            Action::ForceClosed => "force-closed",
            Action::Reset => "reset",
            Action::Maintenance => "maintenance",
            Action::Remove => "remove",
            Action::Replace => "replace",
        }
    }
}

/// A short lowercase name, as in the admin endpoint's paths: `force-open`,
/// `force-closed`, `reset`, `maintenance`, `remove` or `replace`.
impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One override, as kept in a registry's audit trail.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AuditRecord {
    /// Position in the registry's trail, from 1.
    pub seq: u64,
    /// The breaker's name.
    pub breaker: Arc<str>,
    /// What was done.
    pub action: Action,
    /// Who asked.
    pub actor: Arc<str>,
    /// Why.
    pub reason: Arc<str>,
    /// How long the override lasts before the breaker returns to normal
    /// operation by itself; `None` for until the next override.
    pub expires_after: Option<Duration>,
    /// For [`Action::Maintenance`], the window declared: its start and end
    /// on the breaker's wall clock.
    pub window: Option<(SystemTime, SystemTime)>,
    /// When, on the wall clock (for people and other systems' logs).
    pub wall_time: SystemTime,
    /// When, on the breaker's monotonic clock (for ordering and intervals):
    /// every record is stamped on it, so a breaker built on a mock clock
    /// gets records on that clock. For a replacement, the clock of the
    /// breaker replaced.
    pub at: quanta::Instant,
}

impl fmt::Display for AuditRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "override #{}: {} {} breaker `{}`: {}",
            self.seq,
            crate::text::shown(&self.actor),
            match self.action {
                Action::ForceOpen => "forced open",
                Action::ForceClosed => "forced closed",
                Action::Reset => "reset",
                Action::Maintenance => "declared maintenance of",
                Action::Remove => "removed",
                Action::Replace => "replaced",
            },
            self.breaker,
            crate::text::shown(&self.reason)
        )?;
        if let Some(d) = self.expires_after {
            write!(f, " (expires after {})", crate::duration::display(d))?;
        }
        if let Some((start, end)) = self.window {
            write!(f, " (from {start:?} to {end:?})")?;
        }
        Ok(())
    }
}

/// The last `capacity` records, oldest first.
#[derive(Debug)]
pub(crate) struct Trail {
    records: VecDeque<AuditRecord>,
    capacity: usize,
    seq: u64,
}

impl Trail {
    pub(crate) fn new(capacity: usize) -> Self {
        Trail {
            records: VecDeque::with_capacity(capacity.min(1024)),
            capacity,
            seq: 0,
        }
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub(crate) fn push(&mut self, record: AuditRecord) {
        if self.capacity == 0 {
            return;
        }
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    pub(crate) fn records(&self) -> Vec<AuditRecord> {
        self.records.iter().cloned().collect()
    }
}
