//! What the fleet agent has done, for dashboards and tests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::fleet::admin::OpenedBy;

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
    /// Reads of a breaker's fleet state: at a join or a reconnection, for an
    /// announced change, at a set time (an open period's or a lease's end,
    /// an override's expiry), for a keep-alive, and when announcements may
    /// have been lost.
    pub reads: u64,
    /// Round trips to Redis the agent has begun: each one pipeline of
    /// writes, reads and renewals (counted as it is sent, before Redis
    /// answers).
    pub round_trips: u64,
    /// Times the agent read every breaker it serves because announcements
    /// may have been lost: a heartbeat through its pub/sub connection did
    /// not come back within a `refresh`, or announcements found its reader
    /// behind ([`FleetBuilder::refresh`]).
    ///
    /// [`FleetBuilder::refresh`]: crate::fleet::FleetBuilder::refresh
    pub catch_ups: u64,
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
    /// Each breaker the agent serves, as it last read it from the fleet
    /// (by name): its members, the members tripped alone, and what holds
    /// the fleet open.
    pub quorum: Vec<FleetBreaker>,
}

/// One breaker of the fleet as an agent last read it
/// ([`FleetSnapshot::quorum`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct FleetBreaker {
    /// The breaker's name.
    pub name: String,
    /// The members serving it: their presence has not ended.
    pub members: u64,
    /// Those of them whose local trip counts towards the quorum now (zero
    /// once the fleet is open).
    pub tripped: u64,
    /// What holds the fleet open, while it is open (or forced open).
    pub opened_by: Option<OpenedBy>,
    /// Whether this process's breaker is open by a trip of its own that
    /// found no quorum: open here only, probing for itself.
    pub alone: bool,
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
    pub(crate) round_trips: AtomicU64,
    pub(crate) catch_ups: AtomicU64,
    pub(crate) failures_published: AtomicU64,
    pub(crate) window_trips: AtomicU64,
    pub(crate) lone_trips: AtomicU64,
    /// Each served breaker as last read, by name: written by the agent
    /// after each answer, removed when it stops serving the breaker.
    pub(crate) quorum: Mutex<BTreeMap<String, FleetBreaker>>,
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
            round_trips: get(&self.round_trips),
            catch_ups: get(&self.catch_ups),
            failures_published: get(&self.failures_published),
            window_trips: get(&self.window_trips),
            lone_trips: get(&self.lone_trips),
            quorum: self.quorum.lock().values().cloned().collect(),
        }
    }

    /// Records what the agent last read of breaker `name` (allocates only
    /// at a breaker's first read).
    pub(crate) fn read(&self, name: &str, view: FleetBreaker) {
        let mut all = self.quorum.lock();
        match all.get_mut(name) {
            Some(entry) => {
                *entry = FleetBreaker {
                    name: std::mem::take(&mut entry.name),
                    ..view
                }
            }
            None => {
                all.insert(
                    name.to_owned(),
                    FleetBreaker {
                        name: name.to_owned(),
                        ..view
                    },
                );
            }
        }
    }

    /// The agent no longer serves breaker `name`.
    pub(crate) fn forget(&self, name: &str) {
        self.quorum.lock().remove(name);
    }
}
