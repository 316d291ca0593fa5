//! What the fleet agent has done, for dashboards and tests.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A fleet agent's counters at one instant ([`Fleet::snapshot`]).
///
/// [`Fleet::snapshot`]: crate::fleet::Fleet::snapshot
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct FleetSnapshot {
    /// Whether the agent holds a working connection to Redis now.
    pub connected: bool,
    /// Redis outages seen: each time the agent lost (or could not make) its
    /// connection after having had one, or at start. One log line each.
    pub outages: u64,
    /// Redis errors and timeouts, every one (an outage may count many).
    pub errors: u64,
    /// Breakers the agent serves.
    pub breakers: usize,
    /// Local changes written to the fleet (trips, re-opens, closes) that
    /// changed its state.
    pub published: u64,
    /// Fleet states applied to local breakers that changed their state.
    pub applied: u64,
    /// Probe leases this agent won.
    pub leases_won: u64,
    /// Probe leases this agent gave back unused: its breaker took no probe
    /// within [`FleetBuilder::lease_idle`].
    ///
    /// [`FleetBuilder::lease_idle`]: crate::fleet::FleetBuilder::lease_idle
    pub leases_returned: u64,
    /// Probe results refused by the fence: the lease they were made under
    /// was no longer this open period's.
    pub fenced: u64,
    /// Announcements received over pub/sub.
    pub messages: u64,
    /// Reads of a breaker's fleet state (refreshes and announced changes).
    pub reads: u64,
    /// Local failures sent to the fleet's recent-failures windows
    /// ([`FleetBuilder::failure_window`]), including those the window did
    /// not count (sent while the fleet was open or under an override).
    ///
    /// [`FleetBuilder::failure_window`]: crate::fleet::FleetBuilder::failure_window
    pub failures_published: u64,
    /// Fleet trips made by this agent's window writes: the fleet's failures
    /// reached the window's threshold. Also counted in `published`.
    pub window_trips: u64,
    /// Local trips this agent wrote that did not open the fleet: no quorum
    /// of members had tripped ([`FleetBuilder::min_members`]). The breaker
    /// stays open in this process only and probes for itself. Counted once
    /// per lone outage of a breaker (its own re-opens are not counted
    /// again).
    ///
    /// [`FleetBuilder::min_members`]: crate::fleet::FleetBuilder::min_members
    pub lone_trips: u64,
}

/// The counters, shared between the agent thread and its handle.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) connected: AtomicBool,
    pub(crate) outages: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) breakers: AtomicUsize,
    pub(crate) published: AtomicU64,
    pub(crate) applied: AtomicU64,
    pub(crate) leases_won: AtomicU64,
    pub(crate) leases_returned: AtomicU64,
    pub(crate) fenced: AtomicU64,
    pub(crate) messages: AtomicU64,
    pub(crate) reads: AtomicU64,
    pub(crate) failures_published: AtomicU64,
    pub(crate) window_trips: AtomicU64,
    pub(crate) lone_trips: AtomicU64,
}

impl Stats {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> FleetSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FleetSnapshot {
            connected: self.connected.load(Ordering::Relaxed),
            outages: get(&self.outages),
            errors: get(&self.errors),
            breakers: self.breakers.load(Ordering::Relaxed),
            published: get(&self.published),
            applied: get(&self.applied),
            leases_won: get(&self.leases_won),
            leases_returned: get(&self.leases_returned),
            fenced: get(&self.fenced),
            messages: get(&self.messages),
            reads: get(&self.reads),
            failures_published: get(&self.failures_published),
            window_trips: get(&self.window_trips),
            lone_trips: get(&self.lone_trips),
        }
    }
}
