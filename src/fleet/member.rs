//! One breaker as the agent serves it: what its local changes ask of the
//! fleet, and what the fleet's view does to it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::fleet::admin::OpenedBy;
use crate::fleet::idle::LeaseUse;
use crate::fleet::presence::{Due, Presence};
use crate::fleet::scripts::{lease_of, Action, ActionKind, Keys, Script, View};
use crate::fleet::snapshot::{FleetBreaker, Stats};
use crate::fleet::Settings;
use crate::seam::{Seam, WeakBreaker};
use crate::{Breaker, Reason, State, StateChange, Subscription};

/// A write to the fleet that a local change asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// A local trip: opens the fleet's breaker if a quorum of members has
    /// tripped it. With `judge` false (set by the agent while its session
    /// is younger than `presence`: the members may not all have renewed
    /// their presence yet), the trip is only recorded.
    Trip {
        open_ms: u64,
        step: u32,
        judge: bool,
    },
    /// The probe under `token` failed: a new open period.
    Reopen {
        token: String,
        open_ms: u64,
        step: u32,
    },
    /// The probe under `token` succeeded: close.
    Close { token: String },
    /// Read the fleet's view (and take the probe lease if it is free).
    Sync,
    /// Add local failures to the fleet's recent-failures window, which
    /// opens the fleet for `open_ms` when it reaches its threshold.
    Window { failures: u64, open_ms: u64 },
    /// Give back the probe lease under `token`: the process has not used it.
    Return { token: String },
    /// Stop serving the breaker: end this agent's presence among its
    /// members, and give back the lease under `token` (empty: none).
    Leave { token: String },
    /// The local breaker, tripped alone, closed again on its own: its
    /// trip no longer counts towards the fleet's quorum.
    Recover,
    /// Renew this agent's presence among the breaker's members, until
    /// `score` (server milliseconds), if it is still there: a plain
    /// command, not a script (see [`presence`](crate::fleet::presence)).
    Renew { score: i64 },
}

impl Op {
    /// The script that does it; none for a renewal.
    pub(crate) fn script(&self) -> Option<Script> {
        Some(match self {
            Op::Trip { .. } => Script::Trip,
            Op::Reopen { .. } => Script::Reopen,
            Op::Close { .. } => Script::Close,
            Op::Sync => Script::Sync,
            Op::Window { .. } => Script::Window,
            Op::Return { .. } => Script::Return,
            Op::Leave { .. } => Script::Leave,
            Op::Recover => Script::Recover,
            Op::Renew { .. } => return None,
        })
    }

    /// Whether this write, applied, changes the fleet's state (a give-back
    /// only ends a lease).
    pub(crate) fn changes_state(&self) -> bool {
        !matches!(
            self,
            Op::Return { .. } | Op::Leave { .. } | Op::Recover | Op::Renew { .. }
        )
    }

    /// Whether a refusal of this write is the fence at work.
    pub(crate) fn is_fenced(&self) -> bool {
        matches!(self, Op::Reopen { .. } | Op::Close { .. })
    }
}

/// A breaker held without keeping it alive.
#[derive(Clone)]
pub(crate) struct Held(pub(crate) WeakBreaker);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_alive() {
            "alive"
        } else {
            "dropped"
        })
    }
}

#[derive(Debug)]
pub(crate) struct Member {
    /// The breaker, held without keeping it alive: once its handles are all
    /// dropped, the agent stops serving it.
    breaker: Held,
    name: String,
    pub(crate) keys: Keys,
    changes: Subscription,
    /// The `seq` of the last change the agent knows of.
    seen: u64,
    /// The subscription's count of dropped changes, when last looked at.
    dropped: u64,
    /// The probe lease this agent holds for the breaker, if any.
    token: Option<String>,
    /// Whether the local breaker was let probe under `token`.
    released: bool,
    /// Whether a hold was refused during the current `apply`: the view is
    /// read again at once, after the unread change.
    read_again: bool,
    /// The `ovr_id` of the fleet's last operator action this agent has
    /// acted on (`None` until the first read).
    action_seen: Option<i64>,
    /// The `seq` of the local change by which the agent applied the
    /// fleet's override, while it may still be in force.
    override_seq: Option<u64>,
    /// When the fleet's view is to be read next, if at a set time: at once
    /// (announced, or asked for again), an open period's or a lease's end,
    /// an override's expiry. `None` while nothing is in motion: a closed
    /// breaker is read again when a change is announced, when the agent
    /// suspects an announcement was lost, and for its keep-alive.
    next_sync: Option<Instant>,
    /// Its presence among the members, and its keys' expiries.
    presence: Presence,
    /// Writes waiting for the next round trip, in the order the changes
    /// that ask for them happened.
    pub(crate) ops: Vec<Op>,
    /// Whether the next round trip reads the fleet's view, after the
    /// writes (see [`round`](Self::round)).
    pub(crate) read: bool,
    /// Whether the breaker's failures go to the fleet's window.
    counts_failures: bool,
    /// The breaker's lifetime failures when last written to the window (or
    /// dropped, while there was no Redis to tell).
    failures: u64,
    /// When the failure count is read next.
    failures_due: Instant,
    /// Whether the local breaker uses the lease it was let probe under.
    lease_use: LeaseUse,
    /// While the local breaker is open by a trip of its own that did not
    /// open the fleet (no quorum): the fleet's closed period (`epoch`) it
    /// tripped in. The fleet's "closed" does not close it then; it probes
    /// for itself. A new period of the fleet ends it.
    alone: Option<i64>,
    /// Whether the last trip written was only recorded, not judged (the
    /// session was too young): it is written again once the session is
    /// settled, if the breaker is still open alone.
    unjudged: bool,
}

impl Member {
    pub(crate) fn new(breaker: &Breaker, changes: Subscription, s: &Settings) -> Member {
        let keys = Keys::new(&s.prefix, breaker.name());
        let failures = breaker.failures_and_first_open().0;
        let now = Instant::now();
        let mut m = Member {
            breaker: Held(breaker.downgrade()),
            name: breaker.name().to_owned(),
            keys,
            changes,
            seen: 0,
            dropped: 0,
            token: None,
            released: false,
            read_again: false,
            action_seen: None,
            override_seq: None,
            next_sync: None,
            presence: Presence::new(s.keep_alive, spread(breaker.name()), now),
            ops: Vec::new(),
            read: false,
            counts_failures: s.window.is_some(),
            failures,
            failures_due: now,
            lease_use: LeaseUse::default(),
            alone: None,
            unjudged: false,
        };
        m.resync(breaker);
        m
    }

    /// The breaker, while a handle of it is alive.
    pub(crate) fn breaker(&self) -> Option<Breaker> {
        self.breaker.0.upgrade()
    }

    /// Whether every handle of the breaker is gone.
    pub(crate) fn dropped(&self) -> bool {
        !self.breaker.0.is_alive()
    }

    /// Whether this member serves `breaker` (that breaker, not another of
    /// its name).
    pub(crate) fn serves(&self, breaker: &Held) -> bool {
        self.breaker.0.same(&breaker.0)
    }

    /// The breaker's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The write that ends this agent's service of the breaker: its presence
    /// ends, and the lease it holds goes back.
    pub(crate) fn leave(&self) -> Op {
        Op::Leave {
            token: self.token.clone().unwrap_or_default(),
        }
    }

    /// After a (re)connection: what the breaker is now, whatever was
    /// missed meanwhile. A local open the fleet did not cause is written as
    /// a trip; anything else reads the fleet's view.
    pub(crate) fn resync(&mut self, b: &Breaker) {
        while self.changes.try_recv().is_some() {}
        let snap = b.snapshot();
        let last = snap.last_transition.as_ref();
        self.seen = last.map_or(0, |c| c.seq);
        self.ops.clear();
        // A probe let through under this agent's lease that ended while its
        // change was missed (Redis was away, or the agent fell behind): its
        // result is written under the lease's token, fenced as any.
        let probe_ended = |to| {
            last.is_some_and(|c| {
                c.from == State::HalfOpen && c.to == to && c.reason != Reason::Fleet
            })
        };
        let probed = match self.token.take() {
            Some(token)
                if self.released && snap.state == State::Closed && probe_ended(State::Closed) =>
            {
                Some(Op::Close { token })
            }
            Some(token)
                if self.released && snap.state == State::Open && probe_ended(State::Open) =>
            {
                let (open_ms, step) = open_period(b);
                Some(Op::Reopen {
                    token,
                    open_ms,
                    step,
                })
            }
            token => {
                self.token = token;
                None
            }
        };
        if let Some(op) = probed {
            self.released = false;
            self.ops.push(op);
        } else {
            let local_open = snap.state == State::Open
                && last.is_some_and(|c| c.to == State::Open && c.reason != Reason::Fleet);
            if local_open {
                self.ops.push(trip(b));
            }
        }
        self.read = true;
    }

    /// What the next round trip sends for this breaker: its writes, then
    /// its read, if one is due. The read goes last whatever asked for it
    /// first (a join, a reconnection, an announcement), so that the view
    /// it answers already holds every write of a change the agent has read:
    /// a fleet's "closed" never reaches a breaker ahead of the answer to a
    /// trip it made.
    pub(crate) fn round(&mut self) -> Vec<Op> {
        let mut ops = std::mem::take(&mut self.ops);
        if std::mem::take(&mut self.read) {
            ops.push(Op::Sync);
        }
        ops
    }

    /// The channel the breaker's changes arrive on, for the agent to wake on
    /// (it receives them with [`collect`](Self::collect)).
    pub(crate) fn changes(&self) -> &Receiver<StateChange> {
        self.changes.receiver()
    }

    /// Reads the fleet's view at the next tick (its change was announced).
    pub(crate) fn sync_now(&mut self) {
        self.next_sync = Some(Instant::now());
    }

    /// When the agent has something to do for this breaker without being
    /// told: a read at a set time, its failure count's next look, its
    /// lease's give-back. `None`: only an event, or the agent's sweep.
    pub(crate) fn due(&self, s: &Settings) -> Option<Instant> {
        let failures = self.counts_failures.then_some(self.failures_due);
        [
            self.next_sync,
            failures,
            self.lease_use.idle_at(s.lease_idle),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// At the agent's sweep (every `refresh`): renews the breaker's
    /// presence, or reads it to keep its keys alive, when that is due and
    /// this round trip does not read it anyway.
    pub(crate) fn sweep(&mut self, now: Instant, s: &Settings) {
        if self.read {
            return;
        }
        match self.presence.due(now, s.presence) {
            Due::Nothing => {}
            Due::Read => self.read = true,
            Due::Renew(score) => self.ops.push(Op::Renew { score }),
        }
    }

    /// A renewal sent at `sent` answered whether it found this agent among
    /// the members: if not, the breaker is read at once, which writes the
    /// presence again.
    pub(crate) fn renewal(&mut self, found: bool, sent: Instant) {
        if found {
            self.presence.renewed(sent);
        } else {
            self.next_sync = Some(Instant::now());
        }
    }

    /// Drops what happened while there was no Redis to tell, failures
    /// included: they would be old news in the fleet's window.
    pub(crate) fn forget_changes(&mut self, b: &Breaker) {
        while self.changes.try_recv().is_some() {}
        self.dropped = self.changes.dropped();
        if self.counts_failures {
            self.failures = b.failures_and_first_open().0;
        }
    }

    /// Turns the local changes since the last tick into writes, and queues
    /// a read when one is due.
    pub(crate) fn collect(&mut self, b: &Breaker, now: Instant, s: &Settings, stats: &Stats) {
        if self.changes.dropped() != self.dropped {
            // The agent fell behind and lost changes: start from what the
            // breaker is now.
            self.dropped = self.changes.dropped();
            self.resync(b);
            return;
        }
        while let Some(change) = self.changes.try_recv() {
            self.seen = self.seen.max(change.seq);
            if is_probe(&change) {
                self.lease_use.probe_taken();
            }
            match self.op_for(b, &change) {
                Some(Op::Sync) => self.read = true,
                Some(op) => self.ops.push(op),
                None => {}
            }
        }
        if self.counts_failures && now >= self.failures_due {
            // One lock round trip of the agent's (never a caller's), half a
            // bucket apart rather than at every tick: a failure reaches the
            // window at most a twentieth of it late.
            let half_bucket = s.window.as_ref().map_or(0, |w| w.bucket_ms / 2);
            self.failures_due = now + Duration::from_millis(half_bucket);
            let (failures, first_open) = b.failures_and_first_open();
            if failures > self.failures {
                self.ops.push(Op::Window {
                    failures: failures - self.failures,
                    open_ms: millis(first_open),
                });
            }
            self.failures = failures;
        }
        self.give_back_if_idle(b, now, s, stats);
        if self.lease_use.gave_back() && self.lease_use.demand(b.refusals()) {
            // A call refused since the give-back: read (and take the
            // lease, if it is free) now.
            self.next_sync = Some(now);
        }
        if self.next_sync.is_some_and(|t| now >= t) {
            self.next_sync = None;
            self.read = true;
        }
    }

    fn op_for(&mut self, b: &Breaker, change: &StateChange) -> Option<Op> {
        if self.alone.is_some() && change.to == State::Closed && change.reason != Reason::Fleet {
            // Tripped alone and closed again here (its own probe, or a
            // local operator's reset): its trip no longer counts.
            self.alone = None;
            return Some(Op::Recover);
        }
        // What the fleet caused is not written back, and an operator's
        // action on the local breaker (through its own API) stays local.
        if change.reason == Reason::Fleet
            || change.reason == Reason::OverrideExpired
            || change.reason.actor().is_some()
        {
            return None;
        }
        match (change.from, change.to) {
            (State::Closed, State::Open) => Some(trip(b)),
            (State::HalfOpen, State::Open) => {
                self.released = false;
                let (open_ms, step) = open_period(b);
                Some(match self.token.take() {
                    Some(token) => Op::Reopen {
                        token,
                        open_ms,
                        step,
                    },
                    None => Op::Trip {
                        open_ms,
                        step,
                        judge: true,
                    },
                })
            }
            (State::HalfOpen, State::Closed) => {
                self.released = false;
                Some(match self.token.take() {
                    Some(token) => Op::Close { token },
                    // Probed on local state (Redis was away): the fleet's
                    // view decides.
                    None => Op::Sync,
                })
            }
            // Entering half-open, and operator overrides: the fleet's view
            // is read again at the next refresh.
            _ => None,
        }
    }

    /// Applies the fleet's view answered to `op` and schedules the next
    /// read: at once if a hold was refused for a local change the agent
    /// has not read yet (it reads that change at the next tick).
    pub(crate) fn apply(
        &mut self,
        b: &Breaker,
        op: &Op,
        view: &View,
        agent: &str,
        s: &Settings,
        stats: &Stats,
    ) {
        self.read_again = false;
        let at = Instant::now();
        self.presence.answered(view.now, at, *op == Op::Sync);
        self.apply_view(b, op, view, agent, s, stats);
        // The give-back's clock starts when the breaker is let probe.
        let token = self.token.as_deref().filter(|_| self.released);
        self.lease_use.released(token, at);
        stats.read(
            &self.name,
            FleetBreaker {
                name: String::new(),
                members: view.members,
                tripped: view.tripped,
                opened_by: OpenedBy::of(view),
                alone: self.alone.is_some(),
            },
        );
        if self.read_again {
            self.next_sync = Some(Instant::now());
        }
    }

    fn apply_view(
        &mut self,
        b: &Breaker,
        op: &Op,
        view: &View,
        agent: &str,
        s: &Settings,
        stats: &Stats,
    ) {
        if *op == Op::Sync {
            Stats::add(&stats.reads);
        }
        self.lease_use.period(view.epoch);
        if let Op::Return { .. } = op {
            // Given back, or no longer ours to give (fenced): either way
            // the lease is not this agent's.
            self.token = None;
            self.released = false;
            if view.applied {
                Stats::add(&stats.leases_returned);
            }
        }
        if let Op::Window { failures, .. } = op {
            stats
                .failures_published
                .fetch_add(*failures, Ordering::Relaxed);
            if view.applied {
                Stats::add(&stats.window_trips);
            }
        }
        if view.applied && op.changes_state() {
            Stats::add(&stats.published);
        } else if op.is_fenced() {
            Stats::add(&stats.fenced);
        }
        if let Op::Trip { judge, .. } = op {
            if !view.open && !view.action.kind.in_force() {
                // No quorum: the trip stays this member's own. Counted
                // once per lone outage, when a quorum was looked for.
                if *judge && (self.alone.is_none() || self.unjudged) {
                    Stats::add(&stats.lone_trips);
                }
                self.alone = Some(view.epoch);
                self.unjudged = !judge;
            }
        }
        if view.open || self.alone.is_some_and(|e| e != view.epoch) {
            // The fleet opened, or moved on (closed again, reset): this
            // member follows it as every other.
            self.alone = None;
        }
        if self.alone.is_none() {
            self.unjudged = false;
        }
        let now = Instant::now();
        if self.follow_operator(b, &view.action, view.now) {
            // An operator's override holds every process: no hold, no
            // lease, until it is lifted or expires.
            self.token = None;
            self.released = false;
            // Read again when it expires; a reset is announced.
            self.next_sync = view.action.left(view.now).map(|left| now + ms(left));
            return;
        }
        if !view.open {
            self.token = None;
            self.released = false;
            if self.alone.is_none() {
                self.hold(b, None, 0, stats);
            }
            // Nothing in motion: the next change is announced.
            self.next_sync = None;
            return;
        }
        if view.now < view.open_until {
            // Cool-down: everyone holds open until it ends, and a margin
            // more, in which the lease is taken and announced.
            let left = ms(view.open_until - view.now);
            self.released = false;
            self.hold(b, Some(left + s.hold_margin), view.step, stats);
            // Read again when it ends, for the lease.
            self.next_sync = Some(now + left);
            return;
        }
        let ours = (!view.lease.is_empty())
            .then(|| lease_of(&view.lease, agent))
            .flatten()
            == Some(view.epoch);
        if ours {
            if self.token.as_deref() != Some(view.lease.as_str()) {
                self.token = Some(view.lease.clone());
                self.released = false;
                Stats::add(&stats.leases_won);
            }
            if !self.released {
                // The next call here is the fleet's probe. Released only
                // once the hold is applied: one refused for a local change
                // not read yet is tried again at the next read, at once.
                self.released = self.hold(b, Some(Duration::ZERO), view.step, stats);
            }
            self.next_sync = Some(now + ms(view.lease_ttl.max(1)).min(s.refresh));
        } else if !view.lease.is_empty() {
            self.released = false;
            self.hold(
                b,
                Some(ms(view.lease_ttl.max(0)) + s.hold_margin),
                view.step,
                stats,
            );
            self.next_sync = Some(now + ms(view.lease_ttl.max(1)).min(s.refresh));
        } else {
            // Free: held open past the next read, which takes the lease if
            // this process may (an agent that gave it back waits for
            // demand, reading at the refresh).
            self.hold(b, Some(s.refresh + s.hold_margin), view.step, stats);
            self.next_sync = Some(if self.lease_use.may_take() {
                now
            } else {
                now + s.refresh
            });
        }
    }

    /// Once the agent's session is settled: writes again a trip that was
    /// only recorded, if the breaker is still open by it, so that the
    /// quorum is judged with every member's presence renewed.
    pub(crate) fn judge_again(&mut self, b: &Breaker) {
        // The answer to the trip clears `unjudged`, in this same tick.
        if !self.unjudged || self.ops.iter().any(|op| matches!(op, Op::Trip { .. })) {
            return;
        }
        if self.alone.is_some() && b.state() == State::Open {
            self.ops.push(trip(b));
        }
    }

    /// Whether a read may take the probe lease: the local breaker has no
    /// probe out (nor is let probe), and the agent did not give back this
    /// period's lease, or its breaker refused a call since.
    pub(crate) fn wants_lease(&self, b: &Breaker) -> bool {
        b.state() != State::HalfOpen && self.lease_use.may_take()
    }

    /// Gives back the lease the local breaker was let probe under if it has
    /// taken no probe within `lease_idle`: holds the breaker open again
    /// first (refused if a call took the probe since the agent last read
    /// its changes), then queues the fenced `RETURN`.
    fn give_back_if_idle(&mut self, b: &Breaker, now: Instant, s: &Settings, stats: &Stats) {
        let token = self.token.as_deref().filter(|_| self.released);
        self.lease_use.released(token, now);
        let Some(token) = self.lease_use.idle(now, s.lease_idle).map(str::to_owned) else {
            return;
        };
        let Some(epoch) = lease_of(&token, &s.agent) else {
            return;
        };
        let snap = b.snapshot();
        if snap.probes_in_flight > 0 {
            return;
        }
        // Counted before the hold: a call refused from then on is demand.
        let refused = b.refusals();
        if !self.hold(b, Some(s.lease + s.hold_margin), snap.backoff_step, stats) {
            self.next_sync = Some(now);
            return;
        }
        self.released = false;
        self.lease_use.give_back(epoch, refused);
        // First in the round trip: a read sent with it sees the lease free.
        self.ops.insert(0, Op::Return { token });
    }

    /// Applies the fleet's operator action to the local breaker, once per
    /// action, and returns whether an override is in force in the fleet.
    ///
    /// - An override in force is applied with the operator's actor and
    ///   reason, and the time it has left on the server's clock.
    /// - A reset, an expiry or an override gone from Redis lifts the
    ///   override the agent applied, if it is still what holds the local
    ///   breaker (its last change): an override a local operator set since,
    ///   through the breaker's own API, is never undone.
    /// - A reset also resets a breaker under no override (one the fleet
    ///   holds open, or one tripped on its own).
    fn follow_operator(&mut self, b: &Breaker, action: &Action, now: i64) -> bool {
        let first = self.action_seen.is_none();
        let new = self.action_seen != Some(action.id);
        self.action_seen = Some(action.id);
        if action.kind.in_force() {
            if new {
                let (actor, reason) = (action.actor.as_str(), action.reason.as_str());
                let left = action.left(now).map(ms);
                let open = action.kind == ActionKind::Open;
                self.override_seq = Some(b.fleet_override(open, actor, reason, left));
            }
            return true;
        }
        if !new && self.override_seq.is_none() {
            // Nothing to do: no snapshot (and no lock) at every read.
            return false;
        }
        let snap = b.snapshot();
        let last = snap.last_transition.as_ref().map_or(0, |c| c.seq);
        let forced = snap.state.is_forced();
        // The override the agent applied is still what holds the breaker.
        let ours = forced && self.override_seq.take() == Some(last);
        // Each reset happens only if nothing changed the breaker since this
        // look (`reset_if_last`): a local operator's override made in
        // between is never undone.
        match action.kind {
            // A reset closes every breaker but one a local operator
            // overrode on their own.
            ActionKind::Reset if new && !first && (ours || !forced) => {
                b.reset_if_last(last, &action.actor, &action.reason);
            }
            ActionKind::Reset => {}
            ActionKind::Expired if ours => {
                b.reset_if_last(last, FLEET, "the fleet's override expired");
            }
            _ if ours => {
                b.reset_if_last(last, FLEET, "the fleet's override is gone");
            }
            _ => {}
        }
        false
    }

    /// Holds the local breaker open for `open_for` at the fleet's backoff
    /// `step`, or closes it. Returns false only when a local change the
    /// agent has not read yet refused it; true also when the breaker kept
    /// its state on purpose (under an override, or with a probe out).
    fn hold(&mut self, b: &Breaker, open_for: Option<Duration>, step: u32, stats: &Stats) -> bool {
        match b.apply_fleet(self.seen, open_for, step) {
            Some(seq) => {
                if seq != self.seen {
                    Stats::add(&stats.applied);
                }
                self.seen = seq;
                true
            }
            // A local change the agent has not read yet: it goes first,
            // and the view is read again after it.
            None => {
                self.read_again = true;
                false
            }
        }
    }
}

/// The actor of the agent's own resets, when a fleet override it applied
/// expires or vanishes.
const FLEET: &str = "fleet";

/// Whether `change` is the local breaker taking a probe: open to half-open
/// on a call, not by the fleet's hand.
fn is_probe(change: &StateChange) -> bool {
    change.from == State::Open && change.to == State::HalfOpen && change.reason != Reason::Fleet
}

/// Where a breaker's keep-alive falls in its period, 0 to 1, from its name:
/// the same in every run, different from breaker to breaker.
fn spread(name: &str) -> f64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    (h.finish() % 1_024) as f64 / 1_024.0
}

/// A trip's write, with the open period the local breaker chose.
fn trip(breaker: &Breaker) -> Op {
    let (open_ms, step) = open_period(breaker);
    Op::Trip {
        open_ms,
        step,
        judge: true,
    }
}

/// The local breaker's open period in milliseconds, and its backoff step.
fn open_period(breaker: &Breaker) -> (u64, u32) {
    let snap = breaker.snapshot();
    (millis(snap.open_duration), snap.backoff_step)
}

/// A period in whole milliseconds, at least one.
fn millis(d: Duration) -> u64 {
    d.as_millis().clamp(1, u128::from(u32::MAX)) as u64
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io;

    use super::*;
    use crate::fleet::url::RedisUrl;
    use crate::{CallPath, Classifier};

    pub(crate) const AGENT: &str = "4242-0-ab";

    /// An agent's settings, with a URL nothing listens on.
    pub(crate) fn settings() -> Settings {
        let url = "redis://127.0.0.1:1/";
        Settings {
            topology: crate::fleet::link::Topology::Server(
                redis::Client::open(url).expect("a valid URL"),
            ),
            redis: RedisUrl::new(url.into()),
            prefix: "test".into(),
            channel: "test:fleet".into(),
            agent: AGENT.into(),
            timeout: Duration::from_millis(50),
            tick: Duration::from_millis(5),
            refresh: Duration::from_millis(250),
            hold_margin: Duration::from_secs(1),
            lease: Duration::from_secs(5),
            lease_idle: Duration::from_millis(500),
            reconnect_min: Duration::from_millis(10),
            reconnect_max: Duration::from_secs(2),
            window: None,
            presence: Duration::from_secs(5),
            idle_expiry: Duration::from_secs(3_600),
            keep_alive: Duration::from_secs(60),
            heartbeat: "test:fleet:4242-0-ab".into(),
            quorum: crate::fleet::Quorum::DEFAULT,
        }
    }

    /// A breaker that trips on its first failure and stays open a minute
    /// on a mock clock that never moves: only the fleet ends its open
    /// period.
    pub(crate) fn vendor(name: &str) -> Breaker {
        let (clock, _mock) = quanta::Clock::mock();
        Breaker::builder(name)
            .call_path(CallPath::ReferenceData)
            .classifier(Classifier::every_error_is_a_failure())
            .consecutive_failure_threshold(1)
            .failure_rate_threshold(None)
            .open_duration(Duration::from_secs(60))
            .clock(clock)
            .build()
            .expect("valid configuration")
    }

    /// The fleet open, its cool-down over, and the probe lease this agent's.
    fn lease_is_ours() -> View {
        View {
            open: true,
            epoch: 3,
            open_until: 1_000,
            now: 2_000,
            lease: format!("3:1:{AGENT}"),
            lease_ttl: 5_000,
            applied: false,
            step: 0,
            action: Action::default(),
            members: 1,
            tripped: 0,
            cause: Default::default(),
        }
    }

    fn call(b: &Breaker, ok: bool) -> Result<(), crate::CallError<io::Error>> {
        b.call(|| {
            if ok {
                Ok(())
            } else {
                Err(io::Error::other("down"))
            }
        })
    }

    #[test]
    fn a_lease_holder_refused_by_an_unread_local_change_is_released_at_the_next_read() {
        let (s, stats) = (settings(), Stats::default());
        let b = vendor("vendor");
        let mut m = Member::new(&b, b.subscribe(16).unwrap(), &s);
        m.round();
        // The local breaker trips while the agent's read is under way: the
        // answer finds a change the agent has not read, and the hold that
        // would let the probe through is refused.
        assert!(call(&b, false).is_err());
        assert_eq!(b.state(), State::Open);
        m.apply(&b, &Op::Sync, &lease_is_ours(), AGENT, &s, &stats);
        assert!(call(&b, true).is_err(), "refused: the hold was");

        // The next tick reads the change and, at once rather than at the
        // refresh, the fleet again: the lease is still this agent's, and
        // now the breaker lets the probe through.
        m.collect(&b, Instant::now(), &s, &stats);
        assert!(m.read, "read at once");
        m.apply(&b, &Op::Sync, &lease_is_ours(), AGENT, &s, &stats);
        assert!(call(&b, true).is_ok(), "the fleet's probe went through");
        assert_eq!(stats.leases_won.load(Ordering::Relaxed), 1);
    }

    /// The fleet closed in period `epoch`, with three members, one tripped.
    fn closed(epoch: i64) -> View {
        View {
            open: false,
            epoch,
            open_until: 0,
            now: 2_000,
            lease: String::new(),
            lease_ttl: -2,
            applied: false,
            step: 0,
            action: Action::default(),
            members: 3,
            tripped: 1,
            cause: Default::default(),
        }
    }

    #[test]
    fn a_trip_without_a_quorum_stays_open_until_the_fleet_moves_on() {
        let (s, stats) = (settings(), Stats::default());
        let b = vendor("vendor");
        let mut m = Member::new(&b, b.subscribe(16).unwrap(), &s);
        m.round();
        assert!(call(&b, false).is_err());
        m.collect(&b, Instant::now(), &s, &stats);
        let trip = m.ops.first().cloned().expect("the trip is written");
        assert!(matches!(trip, Op::Trip { .. }), "{trip:?}");
        m.apply(&b, &trip, &closed(4), AGENT, &s, &stats);
        m.apply(&b, &Op::Sync, &closed(4), AGENT, &s, &stats);
        assert_eq!(
            b.state(),
            State::Open,
            "the fleet's closed does not close it"
        );
        assert_eq!(stats.lone_trips.load(Ordering::Relaxed), 1);
        // The fleet opened and closed meanwhile: it follows the fleet.
        m.apply(&b, &Op::Sync, &closed(6), AGENT, &s, &stats);
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn a_member_tripped_alone_that_closes_on_its_own_writes_its_recovery() {
        let (s, stats) = (settings(), Stats::default());
        let b = vendor("vendor");
        let mut m = Member::new(&b, b.subscribe(16).unwrap(), &s);
        m.round();
        assert!(call(&b, false).is_err());
        m.collect(&b, Instant::now(), &s, &stats);
        let trip = m.ops.remove(0);
        m.round();
        m.apply(&b, &trip, &closed(4), AGENT, &s, &stats);
        b.reset("ops", "the host is fixed");
        m.collect(&b, Instant::now(), &s, &stats);
        assert_eq!(m.ops.first(), Some(&Op::Recover), "{:?}", m.ops);
    }

    #[test]
    fn a_fleet_reset_never_undoes_an_override_made_after_the_agent_looked() {
        let b = vendor("vendor");
        let seq = b.fleet_override(true, "alice", "drill", None);
        assert_eq!(b.state(), State::ForcedOpen);
        // A local operator forces it closed after the agent's look (`seq`).
        b.force_closed("bob", "local fix");
        assert!(!b.reset_if_last(seq, "alice", "drill over"));
        assert_eq!(b.state(), State::ForcedClosed);
        // With nothing in between, the agent's own override is lifted.
        let seq = b.fleet_override(false, "alice", "again", None);
        assert!(b.reset_if_last(seq, "alice", "over"));
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn a_probe_result_missed_by_the_agent_is_still_written_under_the_lease() {
        let (s, stats) = (settings(), Stats::default());
        let b = vendor("vendor");
        // Room for one change: the probe's two overflow it.
        let mut m = Member::new(&b, b.subscribe(1).unwrap(), &s);
        m.round();
        assert!(call(&b, false).is_err());
        m.collect(&b, Instant::now(), &s, &stats);
        m.round();
        m.apply(&b, &Op::Sync, &lease_is_ours(), AGENT, &s, &stats);
        assert!(call(&b, true).is_ok(), "the fleet's probe went through");
        assert_eq!(b.state(), State::Closed);
        m.collect(&b, Instant::now(), &s, &stats);
        assert_eq!(
            m.ops.first(),
            Some(&Op::Close {
                token: lease_is_ours().lease
            }),
            "{:?}",
            m.ops
        );
    }
}
