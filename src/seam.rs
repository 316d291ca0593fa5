//! The seam: what the capabilities above the core reach a breaker through,
//! and nothing else of it. The fleet's agent (`src/fleet/`), the
//! health-probe thread (`src/trading/probe.rs`), the guarded HTTP client
//! (`src/http/`) and the registry (`src/registry/`) each call the
//! [`Seam`] methods on a [`Breaker`], and hold a breaker without keeping it
//! alive as a [`WeakBreaker`].
//!
//! Compiled with every feature set, so that neither this file nor
//! `breaker.rs` names a feature: a build without a capability leaves its
//! methods unused, and the core does not change shape with the features.
//! The breaker does not import the health-probe thread's module either: the
//! builder's `health_probe` setter hands the thread's `watch` to the
//! breaker, which calls it once, at build.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::breaker::{until, Breaker, Inner};
use crate::delivery::Outbox;
use crate::gate::Word;
use crate::machine::Ticket;
use crate::Verdict;

/// A breaker held without keeping it alive, by the health-probe thread and
/// the fleet's agent.
#[derive(Clone)]
pub(crate) struct WeakBreaker(Weak<Inner>);

impl WeakBreaker {
    pub(crate) fn upgrade(&self) -> Option<Breaker> {
        self.0.upgrade().map(|inner| Breaker { inner })
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }

    pub(crate) fn same(&self, other: &WeakBreaker) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

/// A probe out on the health-probe thread: what
/// [`begin_health_probe`](Seam::begin_health_probe) hands out and
/// [`end_health_probe`](Seam::end_health_probe) takes back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProbeOut {
    ticket: Ticket,
    started: u64,
}

/// What a capability may ask of a breaker beyond its public face.
// A build without a capability leaves the methods only it calls unused.
#[allow(dead_code)]
pub(crate) trait Seam {
    /// A handle that does not keep the breaker alive.
    fn downgrade(&self) -> WeakBreaker;

    /// The health-probe thread: moves the breaker to half-open for its
    /// probe if its open period has ended, and returns the probe, out.
    /// Lock-free unless the gate says open and past its period, or
    /// half-open.
    fn begin_health_probe(&self) -> Option<ProbeOut>;

    /// The health-probe thread: records the probe's outcome. The changes it
    /// causes go to the notifier, so that a callback that blocks cannot
    /// hold up the probes of every breaker.
    fn end_health_probe(&self, probe: ProbeOut, outcome: Verdict);

    /// The registry: now, on the breaker's clock (a mock one in tests), to
    /// stamp its audit records with.
    fn clock_now(&self) -> quanta::Instant;

    /// The HTTP client: how long a probe may stay out
    /// (`max_probe_duration`) and the slow-call mark
    /// (`slow_call_duration`), to check its own timeout against them once,
    /// when it is set up.
    fn probe_and_slow_call_durations(&self) -> (Duration, Option<Duration>);

    /// The fleet: an operator's override from the fleet, forced open
    /// (`open`) or closed, for `lasting` or until a reset. Returns the
    /// `seq` of the change it made, read under the same lock, so that the
    /// agent lifts only this override later.
    fn fleet_override(&self, open: bool, actor: &str, note: &str, lasting: Option<Duration>)
        -> u64;

    /// The fleet: [`reset`](Breaker::reset), only if the breaker's last
    /// change is still `seq` (0: none yet), checked under the same lock: an
    /// override or reset a local operator made since is never undone.
    /// Returns whether it reset.
    fn reset_if_last(&self, seq: u64, actor: &str, note: &str) -> bool;

    /// The fleet: the failures recorded in the breaker's life
    /// ([`Totals::failures`](crate::Totals::failures)), and its first open
    /// period of an outage (`open_duration`). One lock round trip, no
    /// snapshot: the agent reads it every tick. Every failure is recorded
    /// under the lock, so the count is exact without taking in the quiet
    /// successes, and the gate's counters are left alone.
    fn failures_and_first_open(&self) -> (u64, Duration);

    /// The fleet: the calls refused in the breaker's life
    /// ([`Totals::short_circuits`](crate::Totals::short_circuits)), summed
    /// from the refusal counter without the lock: a caller's path is
    /// untouched, the agent reads it to see demand for a probe.
    fn refusals(&self) -> u64;

    /// The fleet: applies the fleet's state, open for `open_for` more on
    /// this breaker's clock at the fleet's backoff `step`, or closed
    /// (`None`), unless the breaker has changed since change `seen` (then
    /// the agent hears of that change first). Returns the `seq` of its last
    /// change after.
    fn apply_fleet(&self, seen: u64, open_for: Option<Duration>, step: u32) -> Option<u64>;
}

impl Seam for Breaker {
    fn downgrade(&self) -> WeakBreaker {
        WeakBreaker(Arc::downgrade(&self.inner))
    }

    fn begin_health_probe(&self) -> Option<ProbeOut> {
        let now = self.now();
        match self.inner.gate.word() {
            Word::Closed { .. } | Word::ForcedOpen { .. } => return None,
            Word::Open { until } if now < until => return None,
            Word::Open { .. } | Word::Locked => {}
        }
        let (ticket, changed) = {
            let mut core = self.lock();
            let (ticket, transition) = core.machine.admit_background(now);
            let changed = transition.is_some();
            if let Some(t) = transition {
                self.publish(&mut core, t);
            }
            (ticket, changed)
        };
        if changed {
            self.inner.hand_off(1);
        }
        if ticket.is_some() && self.inner.hot().counts_admitted {
            // It reports into the totals like any admitted call.
            self.inner.gate.counts().add_admitted();
        }
        ticket.map(|ticket| ProbeOut {
            ticket,
            started: now,
        })
    }

    fn end_health_probe(&self, probe: ProbeOut, outcome: Verdict) {
        if self.record_locked(probe.ticket, probe.started, outcome, None) {
            self.inner.hand_off(1);
        }
    }

    fn clock_now(&self) -> quanta::Instant {
        self.inner.hot().time.instant(self.now())
    }

    fn probe_and_slow_call_durations(&self) -> (Duration, Option<Duration>) {
        let core = self.inner.core.lock();
        let s = core.machine.settings();
        (s.max_probe_duration, s.slow_call_duration)
    }

    fn fleet_override(
        &self,
        open: bool,
        actor: &str,
        note: &str,
        lasting: Option<Duration>,
    ) -> u64 {
        let now = self.now();
        let seq = {
            let mut core = self.lock();
            let (actor, note, until) = (actor.into(), note.into(), lasting.map(|d| until(now, d)));
            let t = if open {
                core.machine.force_open(now, actor, note, until)
            } else {
                core.machine.force_closed(now, actor, note, until)
            };
            self.publish(&mut core, t);
            core.seq()
        };
        self.inner.dispatch(1);
        seq
    }

    fn reset_if_last(&self, seq: u64, actor: &str, note: &str) -> bool {
        let now = self.now();
        {
            let mut core = self.lock();
            if core.seq() != seq {
                return false;
            }
            let t = core.machine.reset(now, actor.into(), note.into());
            self.publish(&mut core, t);
        }
        self.inner.dispatch(1);
        true
    }

    fn failures_and_first_open(&self) -> (u64, Duration) {
        let core = self.inner.core.lock();
        let m = &core.machine;
        (m.failures(), m.settings().backoff.base)
    }

    fn refusals(&self) -> u64 {
        self.inner.gate.counts().refusals()
    }

    fn apply_fleet(&self, seen: u64, open_for: Option<Duration>, step: u32) -> Option<u64> {
        let now = self.now();
        let (changed, seq) = {
            let mut core = self.lock();
            if core.seq() != seen {
                return None;
            }
            let changed = match core
                .machine
                .apply_fleet(now, open_for.map(|d| until(now, d)), step)
            {
                Some(t) => {
                    self.publish(&mut core, t);
                    true
                }
                None => self.sync_gate(&mut core),
            };
            (changed, core.seq())
        };
        if changed {
            self.inner.dispatch(1);
        }
        Some(seq)
    }
}
