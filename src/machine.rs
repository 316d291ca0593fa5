//! The pure state machine.
//!
//! Every transition is here, and nothing else is: no lock, no clock, no
//! callback, no log line. Each operation takes `now` (nanoseconds on the
//! breaker's clock) and returns what happened; [`crate::Breaker`] holds the
//! lock around it, reads the clock, and delivers the transitions afterwards.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Rng;
use crate::check::nanos;
use crate::count_window::{CountWindow, Tally};
use crate::events::Reason;
use crate::gate::Word;
use crate::histogram::CallDurations;
use crate::in_flight::{Marks, Scan};
use crate::latency::LatencyWindow;
use crate::policy::{OpenPeriodInput, RoundDecision, WindowCounts};
use crate::recovery::{Recovering, Recovery};
use crate::settings::Settings;
use crate::window::{Counts, Window};
use crate::{ProbeTotals, State, Verdict};

/// What an admitted call holds until it reports its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ticket {
    /// Admitted while closed, in the closed period numbered `generation`.
    Closed { generation: u64 },
    /// Admitted as the half-open probe numbered `id`.
    Probe { id: u64 },
}

/// The answer to a request for admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    Go(Ticket),
    Refuse {
        state: State,
        retry_after: Option<u64>,
    },
}

/// A state change, in clock nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Transition {
    pub(crate) from: State,
    pub(crate) to: State,
    pub(crate) reason: Reason,
    pub(crate) at: u64,
}

#[derive(Clone, Copy, Debug)]
struct Probe {
    id: u64,
    deadline: u64,
    /// Whether `deadline` is the probe's slow mark, with calls in flight
    /// tracked (`probe_stuck_after`), rather than `max_probe_duration`.
    stuck: bool,
}

/// Lifetime totals. Never reset, so they can feed monotonic counters.
/// The calls reported are not kept apart: every one is a success, a
/// failure or ignored ([`calls`](Self::calls)), and a word less keeps the
/// breaker's shared state within its lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) ignored: u64,
    pub(crate) slow: u64,
    /// Calls cancelled before they finished: not in `calls`.
    pub(crate) cancelled: u64,
}

impl Totals {
    /// Calls reported with an outcome: successes, failures and ignored.
    pub(crate) fn calls(&self) -> u64 {
        self.successes + self.failures + self.ignored
    }
}

// The gate (`src/gate.rs`): one word that lets the hot path decide without
// the lock, which `Machine::gate` says. A quiet success is one that changes
// nothing but counts: no failure run to reset, no latency to file, no call
// to time, no trip condition it could make true. The breaker counts those
// without the lock and hands the count to the machine
// (`absorb_quiet_successes`) at its next locked operation; with a window,
// only while the window's head bucket is current (`quiet_until`), so that
// each success is filed in the bucket it happened in.

#[derive(Debug)]
pub(crate) struct Machine {
    /// Shared by the breakers a configuration stamps (`src/settings.rs`).
    s: Arc<Settings>,
    state: State,
    entered_at: u64,
    generation: u64,
    open_until: u64,
    open_period: u64,
    reopens: u32,
    consecutive: u32,
    throttle_until: u64,
    window: Option<Tally>,
    /// Boxed: a breaker without a latency policy keeps a pointer, not the
    /// window's 184 bytes.
    latency: Option<Box<LatencyWindow>>,
    probes: Box<[Option<Probe>]>,
    probe_successes: u32,
    next_probe_id: u64,
    rng: Rng,
    totals: Totals,
    /// Openings from closed (trip conditions), and renewals of an
    /// outage's open period (`reopen`).
    trips: u64,
    reopens_total: u64,
    probe_totals: ProbeTotals,
    /// Nanoseconds spent in each state (gauge order) up to `accounted_to`.
    state_nanos: [u64; 5],
    accounted_to: u64,
    /// With call timing: the durations of the calls that reported. Boxed:
    /// a breaker that does not time its calls keeps a pointer.
    durations: Option<Box<CallDurations>>,
    /// When an operator override ends by itself, if it does.
    /// `u64::MAX` without one (an end 584 years after the build is none);
    /// read through [`Machine::override_until`].
    override_until: u64,
    /// The instants of the latest trips, a ring of `flapping_trips` slots.
    recent_trips: Box<[u64]>,
    /// Below `flapping_trips`, at most 64.
    next_trip_slot: u8,
    /// Ramp-up, maintenance windows and deadlines (`src/trading/`).
    recovering: Recovering,
    /// Successes in a row in the current state (gobreaker's
    /// `ConsecutiveSuccesses`).
    consecutive_successes: u64,
    /// With `closed_interval`: when the closed-state counts are next cleared.
    interval_end: u64,
    /// Probes admitted in this half-open period and not ignored, for
    /// `half_open_max_probes`.
    probes_admitted: u32,
    /// Failed probes in this half-open period, for `half_open_rate`.
    probe_failures: u32,
}

/// Everything the snapshot reads from the machine, at one instant.
#[derive(Clone, Debug)]
pub(crate) struct View {
    pub(crate) state: State,
    pub(crate) consecutive_failures: u32,
    pub(crate) window_calls: u64,
    pub(crate) window_failures: u64,
    pub(crate) window_slow: u64,
    pub(crate) retry_after: Option<u64>,
    pub(crate) open_period: u64,
    pub(crate) trips: u64,
    pub(crate) reopens: u64,
    pub(crate) probes: ProbeTotals,
    pub(crate) state_nanos: [u64; 5],
    pub(crate) call_durations: Option<CallDurations>,
    pub(crate) totals: Totals,
    pub(crate) in_state: u64,
    pub(crate) probes_in_flight: u32,
    pub(crate) latency_percentile: Option<Duration>,
    pub(crate) latency_breaches: u32,
    pub(crate) backoff_step: u32,
    pub(crate) override_remaining: Option<u64>,
    pub(crate) flapping: bool,
    pub(crate) ramp_fraction: Option<f64>,
    pub(crate) maintenance_until: Option<u64>,
    pub(crate) neutral_failures: u64,
    pub(crate) consecutive_successes: u64,
}

impl Machine {
    pub(crate) fn new(s: Arc<Settings>, recovery: &Recovery, seed: u64, now: u64) -> Self {
        Machine {
            window: s.uses_window().then(|| match s.count_window {
                Some(n) => Tally::Count(CountWindow::new(n)),
                None => Tally::Time(Window::new(nanos(s.failure_window))),
            }),
            interval_end: s
                .closed_interval
                .map_or(u64::MAX, |d| now.saturating_add(nanos(d))),
            latency: s
                .latency_trip
                .as_deref()
                .map(|p| Box::new(LatencyWindow::new(p.clone(), now))),
            durations: (s.slow_call_duration.is_some() || s.latency_trip.is_some())
                .then(|| Box::new(CallDurations::new(&s.call_duration_buckets))),
            probes: vec![None; s.half_open_max_concurrent as usize].into_boxed_slice(),
            recent_trips: vec![u64::MAX; s.flapping_trips.unwrap_or(0) as usize].into_boxed_slice(),
            next_trip_slot: 0,
            override_until: u64::MAX,
            recovering: Recovering::new(recovery),
            s,
            state: State::Closed,
            entered_at: now,
            generation: 0,
            open_until: 0,
            open_period: 0,
            reopens: 0,
            consecutive: 0,
            throttle_until: 0,
            probe_successes: 0,
            next_probe_id: 0,
            rng: Rng::new(seed),
            totals: Totals::default(),
            trips: 0,
            reopens_total: 0,
            probe_totals: ProbeTotals::default(),
            state_nanos: [0; 5],
            accounted_to: now,
            consecutive_successes: 0,
            probes_admitted: 0,
            probe_failures: 0,
        }
    }

    /// The gate word for the current state. Forced closed takes the lock
    /// on every call, where the override's expiry is checked.
    pub(crate) fn gate(&self) -> Word {
        match self.state {
            // A ramp decides on each call under the lock.
            State::Closed if self.recovering.routes_through_lock() => Word::Locked,
            State::Closed => Word::Closed {
                generation: self.generation,
                quiet: self.success_is_quiet(),
            },
            State::HalfOpen | State::ForcedClosed => Word::Locked,
            State::ForcedOpen => Word::ForcedOpen {
                until: self.override_until(),
            },
            State::Open => Word::Open {
                until: self.open_until,
            },
        }
    }

    /// The settings it was built with.
    pub(crate) fn settings(&self) -> &Settings {
        &self.s
    }

    /// Whether a success of the current closed period, recorded now, would
    /// change nothing but counts: no failure run to reset, no call to time
    /// or to take out of the calls in flight, and no trip condition that a
    /// success could make true. Successes only raise the call count and
    /// lower the rates, so once this holds it holds for any number of
    /// further successes, until the window slides.
    fn success_is_quiet(&self) -> bool {
        self.state == State::Closed
            && self.consecutive == 0
            && self.latency.is_none()
            && self.slow_after() == u64::MAX
            && !self.s.tracks_in_flight()
            && !self.judges_every_success()
            && !self.a_success_could_trip()
    }

    /// Whether some number of successes could make a window condition true.
    /// The rates are highest at the first success that brings the window to
    /// `minimum_calls` (or at the next success, past it), so that is the
    /// one to judge.
    fn a_success_could_trip(&self) -> bool {
        let Some(w) = &self.window else {
            return false;
        };
        let mut c = w.totals();
        c.calls = c
            .calls
            .saturating_add(1)
            .max(u64::from(self.s.minimum_calls));
        self.window_reason(c).is_some()
    }

    /// From when a call to a closed breaker must take the lock to be
    /// checked against a maintenance window (`u64::MAX`: never).
    pub(crate) fn watch_from(&self, now: u64) -> u64 {
        self.recovering.watch_from(now)
    }

    /// Whether a schedule converts wall-clock time (`src/recovery/mod.rs`).
    pub(crate) fn has_schedule(&self) -> bool {
        self.recovering.has_schedule()
    }

    /// Converts wall-clock time through a fresh reading of the wall clock,
    /// `wall` at `now`, from here on (`src/recovery/schedule.rs`).
    pub(crate) fn reanchor(&mut self, wall: std::time::SystemTime, now: u64) {
        self.recovering.reanchor(wall, now);
    }

    /// Adds a one-off maintenance window at `now` (`src/recovery/declare.rs`).
    pub(crate) fn declare_maintenance(
        &mut self,
        now: u64,
        start: Option<std::time::SystemTime>,
        end: crate::recovery::declare::WindowEnd,
    ) -> Result<(std::time::SystemTime, std::time::SystemTime), crate::ConfigError> {
        self.recovering.declare(now, start, end)
    }

    /// Whether the slow-call clock must be read when a call starts.
    pub(crate) fn times_calls(&self) -> bool {
        self.slow_after() != u64::MAX || self.latency.is_some() || self.s.tracks_in_flight()
    }

    /// The state, as the last operation left it.
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// The closed period calls are admitted in now.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The marks the calls in flight are judged against
    /// (`src/in_flight.rs`): `slow_call_duration` with
    /// `stuck_call_threshold`, and `hung_call_duration`.
    pub(crate) fn in_flight_marks(&self) -> Marks {
        Marks {
            stuck: match self.s.stuck_call_threshold {
                Some(_) => self.slow_after(),
                None => u64::MAX,
            },
            hung: self.s.hung_call_duration.map_or(u64::MAX, nanos),
        }
    }

    /// From when the calls in flight are aged at `now`, at the latest
    /// (`src/in_flight.rs`): time inside a maintenance window counts for
    /// nothing, so inside one `now` (every call is 0 old), and after one,
    /// its end (a call out through it is aged from there). 0 without one.
    pub(crate) fn in_flight_aged_from(&self, now: u64) -> u64 {
        self.recovering.maintenance_floor(now)
    }

    /// Judges the calls in flight a scan at `now` saw (`scan` of the
    /// current period, aged from [`in_flight_aged_from`], so that none is
    /// past a mark inside a maintenance window): opens a closed or ramping
    /// breaker when one is past `hung_call_duration`, or
    /// `stuck_call_threshold` are past `slow_call_duration`. When both
    /// hold, the reason names both.
    ///
    /// [`in_flight_aged_from`]: Self::in_flight_aged_from
    pub(crate) fn judge_in_flight(&mut self, now: u64, scan: &Scan) -> Option<Transition> {
        if self.state != State::Closed {
            return None;
        }
        let hung = self.s.hung_call_duration.filter(|_| scan.hung > 0);
        let stuck = self
            .s
            .stuck_call_threshold
            .zip(self.s.slow_call_duration)
            .filter(|&(n, _)| scan.stuck >= n)
            .map(|(_, over)| over);
        let reason = match (stuck, hung) {
            (Some(stuck_over), Some(hung_over)) => Reason::StuckAndHungCalls {
                stuck: scan.stuck,
                stuck_over,
                hung: scan.hung,
                hung_over,
            },
            (Some(over), None) => Reason::StuckCalls {
                count: scan.stuck,
                over,
            },
            (None, Some(over)) => Reason::StuckCalls {
                count: scan.hung,
                over,
            },
            (None, None) => return None,
        };
        Some(self.trip(now, reason))
    }

    /// With calls in flight tracked: how long a probe may be out before it
    /// is stuck, its slow mark (the shorter of `slow_call_duration` and the
    /// latency policy's threshold, or `hung_call_duration` without either);
    /// `u64::MAX` otherwise.
    fn probe_stuck_after(&self) -> u64 {
        if !self.s.tracks_in_flight() {
            return u64::MAX;
        }
        match self.probe_slow_after() {
            u64::MAX => self.s.hung_call_duration.map_or(u64::MAX, nanos),
            mark => mark,
        }
    }

    // Read from the settings when needed rather than kept per breaker: the
    // settings are shared, and a conversion costs less than a line of
    // every breaker.

    /// A successful call slower than this is slow (`u64::MAX` without a
    /// slow-call mark).
    fn slow_after(&self) -> u64 {
        self.s.slow_call_duration.map_or(u64::MAX, nanos)
    }

    /// A probe slower than this has not shown recovery: the shorter of
    /// `slow_call_duration` and the latency policy's threshold (`u64::MAX`:
    /// neither is set).
    fn probe_slow_after(&self) -> u64 {
        let latency = self.s.latency_trip.as_ref().map(|l| l.threshold);
        self.s
            .slow_call_duration
            .into_iter()
            .chain(latency)
            .min()
            .map_or(u64::MAX, nanos)
    }

    /// How long a probe may take before it is taken for failed.
    fn probe_budget(&self) -> u64 {
        nanos(self.s.max_probe_duration)
    }

    /// Decides whether a call may go at `now`.
    pub(crate) fn admit(&mut self, now: u64) -> (Admit, Option<Transition>) {
        if let Some(t) = self.expire(now) {
            return (self.admit(now).0, Some(t));
        }
        match self.state {
            State::ForcedClosed => (
                Admit::Go(Ticket::Closed {
                    generation: self.generation,
                }),
                None,
            ),
            State::Closed => match self.recovering.admit_closed(now) {
                Ok(()) => (
                    Admit::Go(Ticket::Closed {
                        generation: self.generation,
                    }),
                    None,
                ),
                Err(retry_after) => (
                    Admit::Refuse {
                        state: State::Closed,
                        retry_after,
                    },
                    None,
                ),
            },
            State::ForcedOpen => (self.refuse(now), None),
            State::Open if now < self.open_until => (self.refuse(now), None),
            State::Open => {
                let t = self.enter(now, State::HalfOpen, Reason::OpenPeriodElapsed);
                (self.admit_probe(now), Some(t))
            }
            State::HalfOpen => {
                if self.a_probe_expired(now) {
                    let t = self.reopen(now, self.expiry_reason());
                    (self.refuse(now), Some(t))
                } else {
                    (self.admit_probe(now), None)
                }
            }
        }
    }

    /// Whether `admit(now)` would admit a call, changing nothing.
    pub(crate) fn would_admit(&self, now: u64) -> bool {
        // An override past its expiry: the next call closes it and goes.
        if self.override_expired(now) {
            return true;
        }
        // With a health probe, only its thread probes.
        if matches!(self.state, State::Open | State::HalfOpen)
            && self.recovering.probes_in_background()
        {
            return false;
        }
        match self.state {
            State::Closed => self.recovering.would_admit_closed(now),
            State::ForcedClosed => true,
            State::ForcedOpen => self.override_expired(now),
            State::Open => now >= self.open_until,
            State::HalfOpen => {
                !self.a_probe_expired(now)
                    && self.probes.iter().any(Option::is_none)
                    && !self.probe_cap_reached()
            }
        }
    }

    fn admit_probe(&mut self, now: u64) -> Admit {
        if self.recovering.probes_in_background() {
            return self.refuse(now);
        }
        self.take_probe(now)
            .map_or_else(|| self.refuse(now), Admit::Go)
    }

    /// The health-probe thread asks to probe at `now` (`src/trading/`): past
    /// the open period, or half-open with no probe out, and outside any
    /// maintenance window.
    pub(crate) fn admit_background(&mut self, now: u64) -> (Option<Ticket>, Option<Transition>) {
        // Not during a maintenance window: its failure would be neutral,
        // and the probe would go again at once.
        if self.recovering.maintenance_until(now).is_some() {
            return (None, None);
        }
        let t = match self.state {
            State::Open if now >= self.open_until => {
                Some(self.enter(now, State::HalfOpen, Reason::OpenPeriodElapsed))
            }
            State::HalfOpen if self.probes.iter().all(Option::is_none) => None,
            _ => return (None, None),
        };
        (self.take_probe(now), t)
    }

    /// The health-probe thread cannot take this breaker: live calls probe.
    pub(crate) fn probe_live(&mut self) {
        self.recovering.probe_live();
    }

    fn take_probe(&mut self, now: u64) -> Option<Ticket> {
        if self.probe_cap_reached() {
            return None;
        }
        self.probes_admitted += 1;
        let budget = self.probe_budget();
        // Past its slow mark, a probe is stuck: strictly longer than it.
        let mark = self.probe_stuck_after().saturating_add(1);
        let stuck = mark < budget;
        let deadline = now.saturating_add(budget.min(mark));
        match self.probes.iter_mut().find(|p| p.is_none()) {
            Some(slot) => {
                self.next_probe_id += 1;
                let id = self.next_probe_id;
                *slot = Some(Probe {
                    id,
                    deadline,
                    stuck,
                });
                Some(Ticket::Probe { id })
            }
            None => {
                self.probes_admitted -= 1;
                None
            }
        }
    }

    fn refuse(&self, now: u64) -> Admit {
        Admit::Refuse {
            state: self.state,
            retry_after: match self.state {
                State::Open => Some(self.open_until.saturating_sub(now)),
                State::HalfOpen => self.next_probe_deadline(now),
                _ => None,
            },
        }
    }

    /// Records the outcome of a call admitted with `ticket`, which ended at
    /// `now` after running for `elapsed` nanoseconds.
    #[inline]
    pub(crate) fn record(
        &mut self,
        now: u64,
        ticket: Ticket,
        outcome: Verdict,
        elapsed: u64,
    ) -> Option<Transition> {
        if let Some(h) = &mut self.durations {
            h.observe(elapsed);
        }
        // An expired override first: the call then belongs to the period
        // that ended and counts in the totals only.
        let expired = self.expire(now);
        // A failure in a maintenance window touches no counter.
        if self.recovering.is_neutral(now, outcome) {
            return self.give_back(now, ticket).or(expired);
        }
        let slow = outcome == Verdict::Success && elapsed > self.slow_after();
        let t = &mut self.totals;
        match outcome {
            Verdict::Success => t.successes += 1,
            Verdict::Failure | Verdict::Throttled(_) => t.failures += 1,
            Verdict::Ignore => t.ignored += 1,
        }
        t.slow += u64::from(slow);
        // Admitted before the state last changed: it counts in the totals
        // only. In particular a straggler's request to back off must not
        // lengthen an outage it was not part of.
        if expired.is_some() || !self.is_current(ticket) {
            return expired;
        }
        if let Verdict::Throttled(d) = outcome {
            // `max_open_duration` is the ceiling of every open period, one
            // the dependency asked for included.
            let d = nanos(d.min(self.s.backoff.max));
            self.throttle_until = self.throttle_until.max(now.saturating_add(d));
        }
        match ticket {
            Ticket::Closed { .. } => {
                self.roll_interval(now);
                self.closed_outcome(now, outcome, slow, elapsed)
            }
            Ticket::Probe { id } => {
                // A probe that answers after its deadline has already
                // failed, whatever it says; so has the round if another
                // probe is past its own. Judged with the probe still out,
                // so that the time since the first deadline is filed as
                // the open time it has read as.
                if self.a_probe_expired(now) {
                    return Some(self.reopen(now, self.expiry_reason()));
                }
                let slot = self
                    .probes
                    .iter_mut()
                    .find(|p| p.is_some_and(|p| p.id == id))?;
                *slot = None;
                let slow_probe = elapsed > self.probe_slow_after();
                self.probe_outcome(now, outcome, slow_probe, elapsed)
            }
        }
    }

    /// Records that a call admitted with `ticket` was cancelled at `now`: it
    /// ended without an outcome (an async caller's future dropped before it
    /// finished). Neither a success nor a failure, it touches no window and
    /// no run; a probe gives its place back, as an ignored one does.
    pub(crate) fn cancel(&mut self, now: u64, ticket: Ticket) -> Option<Transition> {
        let expired = self.expire(now);
        self.totals.cancelled += 1;
        self.give_back(now, ticket).or(expired)
    }

    /// A probe that reports no outcome (a failure made neutral by a
    /// maintenance window, a cancelled call) gives its place back: with a
    /// probe cap or a rate round, it must not use up the half-open period.
    /// Unless the round is past a probe's deadline: then it has failed
    /// whatever the report says, and re-opens, as it has read since that
    /// deadline.
    fn give_back(&mut self, now: u64, ticket: Ticket) -> Option<Transition> {
        let Ticket::Probe { id } = ticket else {
            return None;
        };
        if self.is_current(ticket) && self.a_probe_expired(now) {
            return Some(self.reopen(now, self.expiry_reason()));
        }
        let mine = |p: &Option<Probe>| p.is_some_and(|p| p.id == id);
        if let Some(slot) = self.probes.iter_mut().find(|p| mine(p)) {
            *slot = None;
            self.probes_admitted = self.probes_admitted.saturating_sub(1);
        }
        None
    }

    /// Whether `ticket` was admitted in the current closed period or as one
    /// of the current probes.
    fn is_current(&self, ticket: Ticket) -> bool {
        match ticket {
            Ticket::Closed { generation } => {
                self.state == State::Closed && generation == self.generation
            }
            Ticket::Probe { id } => {
                self.state == State::HalfOpen && self.probes.iter().flatten().any(|p| p.id == id)
            }
        }
    }

    #[inline]
    fn closed_outcome(
        &mut self,
        now: u64,
        outcome: Verdict,
        slow: bool,
        elapsed: u64,
    ) -> Option<Transition> {
        let failed = match outcome {
            Verdict::Ignore => return None,
            Verdict::Success => {
                self.consecutive = 0;
                self.consecutive_successes += 1;
                false
            }
            Verdict::Failure | Verdict::Throttled(_) => {
                if let Some(reopens) = self.recovering.ramp_failed(now) {
                    // A relapse during the ramp: the outage's backoff goes on.
                    self.reopens = reopens;
                    return Some(self.reopen(now, Reason::RampFailed));
                }
                self.consecutive = self.consecutive.saturating_add(1);
                self.consecutive_successes = 0;
                true
            }
        };
        let judge_window = match &mut self.window {
            Some(w) => {
                w.record(now, failed, slow);
                true
            }
            None => false,
        };
        let latency = match &mut self.latency {
            Some(l) => l.record(now, elapsed, failed),
            None => None,
        };
        // Every condition is judged after every call that could have made it
        // true, a success included: a success can bring the window up to
        // `minimum_calls`, and the window may have slid past old successes.
        if failed
            && self
                .s
                .failure_threshold
                .is_some_and(|n| self.consecutive >= n)
        {
            let count = self.consecutive;
            return Some(self.trip(now, Reason::ConsecutiveFailures { count }));
        }
        if judge_window {
            if let Some(reason) = self
                .window
                .as_ref()
                .and_then(|w| self.window_reason(w.totals()))
            {
                return Some(self.trip(now, reason));
            }
        }
        latency.map(|reason| self.trip(now, reason))
    }

    /// The first window condition that holds for the counts `w`, if any.
    fn window_reason(&self, w: Counts) -> Option<Reason> {
        let s = &self.s;
        if s.window_failure_threshold
            .is_some_and(|n| w.failures >= u64::from(n))
        {
            return Some(Reason::FailuresInWindow {
                failures: w.failures.min(u64::from(u32::MAX)) as u32,
            });
        }
        if w.calls < u64::from(s.minimum_calls) {
            return self.predicate_reason(w);
        }
        let calls = w.calls as f64;
        let failure_rate = w.failures as f64 / calls;
        if s.failure_rate_threshold.is_some_and(|r| failure_rate >= r) {
            return Some(Reason::FailureRate {
                rate: failure_rate,
                calls: w.calls.min(u64::from(u32::MAX)) as u32,
            });
        }
        let slow_rate = w.slow as f64 / calls;
        if s.slow_call_rate_threshold.is_some_and(|r| slow_rate >= r) {
            return Some(Reason::SlowCallRate {
                rate: slow_rate,
                calls: w.calls.min(u64::from(u32::MAX)) as u32,
            });
        }
        self.predicate_reason(w)
    }

    fn probe_outcome(
        &mut self,
        now: u64,
        outcome: Verdict,
        slow: bool,
        elapsed: u64,
    ) -> Option<Transition> {
        let p = &mut self.probe_totals;
        match outcome {
            Verdict::Ignore => p.ignored += 1,
            Verdict::Success if !slow => p.successes += 1,
            _ => p.failures += 1,
        }
        if self.s.half_open_rate.is_some() {
            return self.rate_probe_outcome(now, outcome, slow);
        }
        match outcome {
            Verdict::Ignore => {
                self.probes_admitted -= 1;
                None
            }
            Verdict::Success if slow => Some(self.reopen(
                now,
                Reason::ProbeSlow {
                    elapsed: Duration::from_nanos(elapsed),
                },
            )),
            Verdict::Success => {
                self.probe_successes += 1;
                self.consecutive_successes += 1;
                if self.probe_successes >= self.s.half_open_success_threshold {
                    let (successes, reopens) = (self.probe_successes, self.reopens);
                    let t = self.close(now, Reason::ProbeSucceeded { successes });
                    self.recovering.closed_on_probe(now, reopens);
                    Some(t)
                } else {
                    None
                }
            }
            Verdict::Failure | Verdict::Throttled(_) => Some(self.reopen(now, Reason::ProbeFailed)),
        }
    }

    /// Closed -> Open: the first open period of an outage.
    fn trip(&mut self, now: u64, reason: Reason) -> Transition {
        self.reopens = 0;
        self.trips += 1;
        if !self.recent_trips.is_empty() {
            let slot = self.next_trip_slot as usize % self.recent_trips.len();
            self.recent_trips[slot] = now;
            self.next_trip_slot = ((slot + 1) % self.recent_trips.len()) as u8;
        }
        self.open(now, reason)
    }

    /// `(flapping_trips, flapping_window)` when the breaker is flapping at
    /// `now`.
    pub(crate) fn flapping_rule(&self, now: u64) -> Option<(u32, Duration)> {
        self.flapping(now)
            .then_some((self.recent_trips.len() as u32, self.s.flapping_window))
    }

    /// Whether `flapping_trips` trips happened within the `flapping_window`
    /// that ends at `now`.
    fn flapping(&self, now: u64) -> bool {
        let window = nanos(self.s.flapping_window);
        !self.recent_trips.is_empty()
            && self
                .recent_trips
                .iter()
                .all(|&t| t <= now && now - t <= window)
    }

    /// HalfOpen -> Open: a longer open period.
    fn reopen(&mut self, now: u64, reason: Reason) -> Transition {
        self.reopens = self.reopens.saturating_add(1);
        self.reopens_total += 1;
        match reason {
            Reason::ProbeExpired => self.probe_totals.expired += 1,
            Reason::ProbeStuck { .. } => self.probe_totals.stuck += 1,
            _ => {}
        }
        self.open(now, reason)
    }

    fn open(&mut self, now: u64, reason: Reason) -> Transition {
        let mut rng = self.rng.clone();
        self.open_until = self.open_until_from(now, self.reopens, &mut rng);
        // Deadlines cap every open period (`src/trading/`).
        self.open_until = self.recovering.cap(now, self.open_until);
        self.rng = rng;
        self.open_period = self.open_until - now;
        self.enter(now, State::Open, reason)
    }

    /// The end of an open period that starts at `now` after `reopens`
    /// re-opens, drawing its jitter from `rng`: the backoff's period, or
    /// longer if the dependency asked to be left alone for longer, and
    /// never longer than `max_open_duration`.
    fn open_until_from(&self, now: u64, reopens: u32, rng: &mut Rng) -> u64 {
        now.saturating_add(self.open_period(now, reopens, rng))
    }

    fn close(&mut self, now: u64, reason: Reason) -> Transition {
        self.generation = (self.generation + 1) % Word::GENERATIONS;
        self.reopens = 0;
        self.consecutive = 0;
        self.throttle_until = 0;
        self.open_period = 0;
        self.recovering.end_ramp();
        if let Some(w) = &mut self.window {
            w.clear();
        }
        if let Some(l) = &mut self.latency {
            l.clear(now);
        }
        self.restart_interval(now);
        self.enter(now, State::Closed, reason)
    }

    fn enter(&mut self, now: u64, to: State, reason: Reason) -> Transition {
        // Callers read the clock before taking the lock, so a transition can
        // arrive with an instant a little older than the previous one's; keep
        // the recorded times in order.
        let now = now.max(self.entered_at);
        self.account(now);
        self.probes.iter_mut().for_each(|p| *p = None);
        self.probe_successes = 0;
        self.probes_admitted = 0;
        self.probe_failures = 0;
        self.consecutive_successes = 0;
        let t = Transition {
            from: self.state,
            to,
            reason,
            at: now,
        };
        self.state = to;
        self.entered_at = now;
        t
    }

    /// An operator opens the breaker until reset, or until `until`.
    pub(crate) fn force_open(
        &mut self,
        now: u64,
        actor: Arc<str>,
        note: Arc<str>,
        until: Option<u64>,
    ) -> Transition {
        self.open_period = 0;
        let t = self.enter(now, State::ForcedOpen, Reason::ForcedOpen { actor, note });
        self.override_until = until.unwrap_or(u64::MAX);
        t
    }

    /// An operator closes the breaker until reset, or until `until`: calls
    /// are admitted and their outcomes go to the totals only.
    pub(crate) fn force_closed(
        &mut self,
        now: u64,
        actor: Arc<str>,
        note: Arc<str>,
        until: Option<u64>,
    ) -> Transition {
        let mut t = self.close(now, Reason::ForcedClosed { actor, note });
        self.state = State::ForcedClosed;
        t.to = State::ForcedClosed;
        self.override_until = until.unwrap_or(u64::MAX);
        t
    }

    /// Failures recorded in the breaker's life, for the fleet's window
    /// (`src/fleet/`).
    // A build without the fleet leaves it unused.
    #[allow(dead_code)]
    pub(crate) fn failures(&self) -> u64 {
        self.totals.failures
    }

    /// The fleet's state (`src/fleet/`), applied by its agent: open until
    /// `until` (a closed breaker opens, an open one's period ends then, a
    /// half-open one with no probe out re-opens), or closed (`None`: an open
    /// or half-open breaker closes). Overrides and a probe out are left alone.
    /// An open period is the fleet's backoff `step`: the breaker adopts it,
    /// so that its next failed probe escalates from the fleet's step.
    ///
    /// An operation the machine always has, tested here in every build; a
    /// build without the fleet leaves it unused.
    #[allow(dead_code)]
    pub(crate) fn apply_fleet(
        &mut self,
        now: u64,
        until: Option<u64>,
        step: u32,
    ) -> Option<Transition> {
        let probe_out = self.probes.iter().any(Option::is_some);
        match (self.state, until) {
            (State::ForcedOpen | State::ForcedClosed, _) | (State::Closed, None) => None,
            (State::HalfOpen, _) if probe_out => None,
            (State::Open, Some(until)) => {
                // The time so far is open or half-open by the period that
                // is ending; the new one counts from now.
                self.account(now);
                self.reopens = step;
                self.open_until = until;
                self.open_period = self.open_until.saturating_sub(self.entered_at);
                None
            }
            (_, Some(until)) => {
                self.reopens = step;
                self.open_until = until.max(now);
                self.open_period = self.open_until - now;
                Some(self.enter(now, State::Open, Reason::Fleet))
            }
            (_, None) => Some(self.close(now, Reason::Fleet)),
        }
    }

    /// When an operator override ends by itself, if it does.
    fn override_until(&self) -> Option<u64> {
        (self.override_until != u64::MAX).then_some(self.override_until)
    }

    fn override_expired(&self, now: u64) -> bool {
        self.state.is_forced() && self.override_until().is_some_and(|u| now >= u)
    }

    /// Ends an override whose time is up: back to closed, with the counters
    /// cleared as by a reset.
    pub(crate) fn expire(&mut self, now: u64) -> Option<Transition> {
        if !self.override_expired(now) {
            return None;
        }
        // The time since the expiry is closed time, as snapshots read it.
        self.account(now);
        self.override_until = u64::MAX;
        Some(self.close(now, Reason::OverrideExpired))
    }

    /// An operator closes the breaker, clearing the trip counters and the
    /// backoff. Lifetime totals are kept.
    pub(crate) fn reset(&mut self, now: u64, actor: Arc<str>, note: Arc<str>) -> Transition {
        self.account(now);
        self.override_until = u64::MAX;
        self.close(now, Reason::Reset { actor, note })
    }

    /// Until when a quiet success may be counted without the lock: the end
    /// of the window's head bucket, or forever without a window.
    pub(crate) fn quiet_until(&self) -> u64 {
        self.window
            .as_ref()
            .map_or(u64::MAX, Tally::head_end)
            .min(self.interval_end)
    }

    /// Takes `n` successes counted without the lock since the last locked
    /// operation, all while the gate said a success was quiet. They belong
    /// to the window's head bucket, which has not moved since: only a locked
    /// operation moves it, and each one absorbs first. Being quiet, they
    /// change nothing else.
    pub(crate) fn absorb_quiet_successes(&mut self, n: u64) {
        self.totals.successes += n;
        self.consecutive_successes += n;
        if let Some(w) = &mut self.window {
            w.absorb_successes(n);
        }
    }

    /// Records `n` successes of calls admitted while closed in `generation`
    /// that were counted without the lock after the last locked operation
    /// took the count, and before the gate was sealed: each is recorded as
    /// if it had taken the lock after that operation. A success counted
    /// without the lock was checked against the head bucket's end, so it
    /// belongs to the current head bucket, as a locked success with the same
    /// clock reading would. `now` dates a trip they cause.
    pub(crate) fn late_successes(
        &mut self,
        now: u64,
        generation: u64,
        n: u64,
    ) -> Option<Transition> {
        self.totals.successes += n;
        if !self.is_current(Ticket::Closed { generation }) {
            return None;
        }
        self.consecutive = 0;
        self.consecutive_successes += n;
        let mut left = n;
        // One at a time while a success could trip (at most until the window
        // holds `minimum_calls`), then the rest at once.
        while left > 0 && self.a_success_could_trip() {
            left -= 1;
            let w = self.window.as_mut()?;
            w.absorb_successes(1);
            let counts = w.totals();
            if let Some(reason) = self.window_reason(counts) {
                return Some(self.trip(now, reason));
            }
        }
        if let Some(w) = &mut self.window {
            w.absorb_successes(left);
        }
        None
    }

    /// Slides the window to `now`, as a snapshot does before it reads.
    pub(crate) fn slide(&mut self, now: u64) {
        self.roll_interval(now);
        if let Some(w) = &mut self.window {
            w.advance(now);
        }
    }

    /// When the state a call would meet changes with no call to change
    /// it, and to what: an open breaker is half-open from the end of its
    /// period (the next call is the probe), a half-open one open from its
    /// first probe's deadline (the next call re-opens it), an override
    /// closed from its expiry (the next call ends it). `u64::MAX` for
    /// none. The one place that says so: [`state_at`](Self::state_at),
    /// [`state_nanos_at`](Self::state_nanos_at) and [`view`](Self::view)
    /// read it.
    fn lapse(&self) -> (u64, State) {
        match self.state {
            State::Open => (self.open_until, State::HalfOpen),
            State::HalfOpen => (self.first_probe_deadline(), State::Open),
            State::ForcedOpen | State::ForcedClosed => (self.override_until, State::Closed),
            State::Closed => (u64::MAX, State::Closed),
        }
    }

    /// The state a call arriving at `now` would meet (see
    /// [`lapse`](Self::lapse)).
    pub(crate) fn state_at(&self, now: u64) -> State {
        match self.lapse() {
            (at, to) if now >= at => to,
            _ => self.state,
        }
    }

    /// Files the time since the last account under the states it was spent
    /// in (see [`state_nanos_at`](Self::state_nanos_at)), up to `now` and
    /// never back. A look calls
    /// it before it reads, so a state change that arrives afterwards with
    /// an instant read before the look's files nothing under what the look
    /// reported, and every state's time only grows from one look to the
    /// next (each feeds a `_total` counter).
    pub(crate) fn account(&mut self, now: u64) {
        self.state_nanos = self.state_nanos_at(now);
        self.accounted_to = self.accounted_to.max(now);
    }

    /// Nanoseconds spent in each state (gauge order) up to `now`, as
    /// [`state_at`](Self::state_at) reads the time since the last account:
    /// the time from the [`lapse`](Self::lapse) on is the next state's.
    /// Never less than an earlier reading, so each feeds a monotonic
    /// counter: the transition that makes the lapse real accounts first.
    fn state_nanos_at(&self, now: u64) -> [u64; 5] {
        let mut t = self.state_nanos;
        let from = self.accounted_to;
        if now <= from {
            return t;
        }
        let (split, after) = self.lapse();
        let mid = split.clamp(from, now);
        t[self.state.index()] += mid - from;
        t[after.index()] += now - mid;
        t
    }

    /// The earliest deadline of a probe out (`u64::MAX`: none).
    fn first_probe_deadline(&self) -> u64 {
        self.probes
            .iter()
            .flatten()
            .map(|p| p.deadline)
            .min()
            .unwrap_or(u64::MAX)
    }

    fn a_probe_expired(&self, now: u64) -> bool {
        self.first_probe_deadline() <= now
    }

    /// Why the probes failed when the first deadline passed: a probe due
    /// then was stuck past its slow mark, or else out past
    /// `max_probe_duration`.
    fn expiry_reason(&self) -> Reason {
        let first = self.first_probe_deadline();
        let stuck = |p: &&Probe| p.deadline == first && p.stuck;
        match self.probes.iter().flatten().find(stuck) {
            Some(_) => Reason::ProbeStuck {
                over: Duration::from_nanos(self.probe_stuck_after()),
            },
            None => Reason::ProbeExpired,
        }
    }

    /// The end of the maintenance window `now` is in, if any.
    pub(crate) fn maintenance_end(&self, now: u64) -> Option<u64> {
        self.recovering.maintenance_until(now)
    }

    /// Everything a snapshot shows, as a call arriving at `now` would meet
    /// it (see [`state_at`](Self::state_at)); the window as of the last
    /// slide. Changes nothing.
    pub(crate) fn view(&self, now: u64) -> View {
        let w = self.window.as_ref().map(Tally::totals).unwrap_or_default();
        let mut v = View {
            state: self.state,
            consecutive_failures: self.consecutive,
            window_calls: w.calls,
            window_failures: w.failures,
            window_slow: w.slow,
            retry_after: (self.state == State::Open).then(|| self.open_until.saturating_sub(now)),
            open_period: self.open_period,
            trips: self.trips,
            reopens: self.reopens_total,
            probes: self.probe_totals,
            state_nanos: self.state_nanos_at(now),
            call_durations: self.durations.as_deref().cloned(),
            totals: self.totals,
            in_state: now.saturating_sub(self.entered_at),
            probes_in_flight: self.probes.iter().flatten().count() as u32,
            latency_percentile: self.latency.as_ref().and_then(|l| l.last_percentile()),
            latency_breaches: self.latency.as_ref().map_or(0, |l| l.breaches()),
            backoff_step: self.reopens,
            override_remaining: self
                .override_until()
                .filter(|_| self.state.is_forced())
                .map(|u| u.saturating_sub(now)),
            flapping: self.flapping(now),
            ramp_fraction: (self.state == State::Closed)
                .then(|| self.recovering.ramp_fraction(now))
                .flatten(),
            maintenance_until: self.recovering.maintenance_until(now),
            neutral_failures: self.recovering.neutral_failures(),
            consecutive_successes: self.consecutive_successes,
        };
        let (lapsed_at, lapsed_to) = self.lapse();
        if now < lapsed_at {
            return v;
        }
        v.state = lapsed_to;
        v.in_state = now - lapsed_at;
        match lapsed_to {
            // Past its open period: the next call is the probe.
            State::HalfOpen => v.retry_after = None,
            // A probe is past its deadline: the next call re-opens it, with
            // the period it would draw now.
            State::Open => {
                let until = self.open_until_from(
                    now,
                    self.reopens.saturating_add(1),
                    &mut self.rng.clone(),
                );
                let until = self.recovering.cap(now, until);
                v.retry_after = Some(until - now);
                v.open_period = until - now;
                v.probes_in_flight = 0;
            }
            // An override past its expiry: the next call ends it.
            _ => v.override_remaining = None,
        }
        v
    }
}

// The settings that bring the peers' policies over (Resilience4j, Polly,
// gobreaker): each is a function here, called from a line or two of the
// transitions above.
impl Machine {
    /// The length, in nanoseconds, of an open period that starts at `now`
    /// after `reopens` re-opens, drawing any jitter from `rng`: the
    /// `open_period` function's, or the backoff's, lengthened to what a
    /// throttling dependency asked for, and never longer than
    /// `max_open_duration`. Every open period, and the one a snapshot
    /// predicts, is computed here: a rule that shortens or lengthens open
    /// periods wraps this function.
    fn open_period(&self, now: u64, reopens: u32, rng: &mut Rng) -> u64 {
        // The user's function runs under the breaker's lock: a panic in it
        // falls back to the backoff rather than unwinding through a
        // transition half made.
        let custom = self.s.open_period.as_ref().and_then(|f| {
            let input = OpenPeriodInput {
                reopens,
                failure_rate: self.window.as_ref().map(|w| {
                    let c = w.totals();
                    crate::snapshot::rate(c.failures, c.calls)
                }),
                last_period: Duration::from_nanos(self.open_period),
            };
            catch_unwind(AssertUnwindSafe(|| f.period(&input))).ok()
        });
        let period = match custom {
            Some(d) => nanos(d),
            None => nanos(self.s.backoff.period(reopens, rng)),
        };
        let ceiling = now.saturating_add(nanos(self.s.backoff.max));
        let until = now
            .saturating_add(period)
            .max(self.throttle_until)
            .min(ceiling)
            .max(now);
        until - now
    }

    /// Whether every success must be recorded under the lock: a custom
    /// trip predicate may be made true by any success (the breaker cannot
    /// foresee which, as it does for its own conditions), and a count
    /// window pushes an old call out with each one.
    fn judges_every_success(&self) -> bool {
        self.s.trip_predicate.is_some() || self.window.as_ref().is_some_and(Tally::counts_calls)
    }

    /// The custom trip predicate's reason, if it holds for `w`.
    fn predicate_reason(&self, w: Counts) -> Option<Reason> {
        let p = self.s.trip_predicate.as_ref()?;
        let counts = WindowCounts {
            calls: w.calls,
            failures: w.failures,
            slow: w.slow,
            consecutive_failures: self.consecutive,
            consecutive_successes: self.consecutive_successes,
        };
        // Under the breaker's lock: a predicate that panics does not hold.
        let holds = catch_unwind(AssertUnwindSafe(|| p.holds(&counts))).unwrap_or(false);
        holds.then(|| Reason::TripPredicate {
            name: p.shared_name(),
            calls: w.calls,
            failures: w.failures,
        })
    }

    /// With `closed_interval`: clears the closed-state counts (the failure
    /// run, the success run, the window) if the interval has ended by `now`,
    /// and starts the interval `now` falls in.
    fn roll_interval(&mut self, now: u64) {
        let Some(d) = self.s.closed_interval.map(nanos) else {
            return;
        };
        if self.state != State::Closed || now < self.interval_end {
            return;
        }
        let passed = (now - self.interval_end) / d.max(1) + 1;
        self.interval_end = self.interval_end.saturating_add(passed.saturating_mul(d));
        self.consecutive = 0;
        self.consecutive_successes = 0;
        if let Some(w) = &mut self.window {
            w.clear();
        }
    }

    /// With `closed_interval`: a closed period starting at `now` starts an
    /// interval.
    fn restart_interval(&mut self, now: u64) {
        if let Some(d) = self.s.closed_interval {
            self.interval_end = now.saturating_add(nanos(d));
        }
    }

    /// Whether this half-open period has admitted all the probes it may:
    /// `half_open_max_probes`, or the round of a `half_open_rate`.
    /// Ignored probes give their place back.
    fn probe_cap_reached(&self) -> bool {
        let cap = match (self.s.half_open_max_probes, self.s.half_open_rate) {
            (Some(n), Some(r)) => n.min(r.probes),
            (Some(n), None) => n,
            (None, Some(r)) => r.probes,
            (None, None) => return false,
        };
        self.probes_admitted >= cap
    }

    /// How long until the first probe out reaches its deadline: when a
    /// probe slot frees up at the latest. `None` with no probe out.
    fn next_probe_deadline(&self, now: u64) -> Option<u64> {
        self.probes
            .iter()
            .flatten()
            .map(|p| p.deadline.saturating_sub(now))
            .min()
    }

    /// A probe's outcome when half-open is judged by a rate over a round
    /// of probes (`half_open_rate`).
    fn rate_probe_outcome(&mut self, now: u64, outcome: Verdict, slow: bool) -> Option<Transition> {
        let round = self.s.half_open_rate?;
        match outcome {
            Verdict::Ignore => {
                self.probes_admitted -= 1;
                return None;
            }
            Verdict::Success if !slow => {
                self.probe_successes += 1;
                self.consecutive_successes += 1;
            }
            _ => self.probe_failures += 1,
        }
        match round.decide(self.probe_successes, self.probe_failures) {
            RoundDecision::Undecided => None,
            RoundDecision::Close => {
                let (successes, reopens) = (self.probe_successes, self.reopens);
                let t = self.close(now, Reason::ProbeSucceeded { successes });
                self.recovering.closed_on_probe(now, reopens);
                Some(t)
            }
            RoundDecision::Reopen { rate } => {
                let probes = self.probe_successes + self.probe_failures;
                Some(self.reopen(now, Reason::ProbeFailureRate { rate, probes }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn rate_machine() -> Machine {
        let s = Settings {
            failure_threshold: None,
            failure_rate_threshold: Some(0.5),
            minimum_calls: 10,
            ..Settings::default()
        };
        Machine::new(Arc::new(s), &Recovery::default(), 1, SEC)
    }

    fn quiet(m: &Machine) -> bool {
        matches!(m.gate(), Word::Closed { quiet: true, .. })
    }

    fn closed(m: &Machine) -> Ticket {
        Ticket::Closed {
            generation: m.generation,
        }
    }

    #[test]
    fn late_successes_are_judged_one_by_one_until_none_could_trip() {
        let mut m = rate_machine();
        for _ in 0..5 {
            assert!(m.record(SEC, closed(&m), Verdict::Failure, 0).is_none());
        }
        for _ in 0..3 {
            assert!(m.record(SEC, closed(&m), Verdict::Success, 0).is_none());
        }
        assert!(!quiet(&m), "a success could trip");
        let generation = m.generation;
        let t = m
            .late_successes(SEC, generation, 5)
            .expect("the tenth call trips");
        assert_eq!(
            t.reason,
            Reason::FailureRate {
                rate: 0.5,
                calls: 10
            }
        );
        assert_eq!(m.totals.calls(), 13, "all five in the totals");
        assert_eq!(
            m.window.as_ref().unwrap().totals().calls,
            10,
            "the three after the trip were too late to count"
        );
    }

    #[test]
    fn late_successes_of_an_earlier_generation_count_in_the_totals_only() {
        let mut m = rate_machine();
        let old = m.generation;
        m.record(SEC, closed(&m), Verdict::Failure, 0);
        m.reset(SEC, "ops".into(), "test".into());
        assert!(m.late_successes(SEC, old, 4).is_none());
        assert_eq!(m.totals.successes, 4);
        assert_eq!(m.window.as_ref().unwrap().totals().calls, 0);
    }

    #[test]
    fn once_no_success_could_trip_the_gate_says_quiet() {
        let mut m = rate_machine();
        for _ in 0..4 {
            m.record(SEC, closed(&m), Verdict::Failure, 0);
        }
        m.record(SEC, closed(&m), Verdict::Success, 0);
        assert!(quiet(&m), "4 of at least 10 is below 0.5");
        m.record(SEC, closed(&m), Verdict::Failure, 0);
        m.record(SEC, closed(&m), Verdict::Success, 0);
        assert!(!quiet(&m), "5 of 10 would trip");
    }

    /// A breaker whose open periods are 1 s, doubling, without jitter.
    fn backoff_machine() -> Machine {
        let s = Settings {
            failure_threshold: Some(1),
            backoff: crate::backoff::Backoff {
                base: Duration::from_secs(1),
                multiplier: 2.0,
                max: Duration::from_secs(300),
                jitter: 0.0,
            },
            ..Settings::default()
        };
        Machine::new(Arc::new(s), &Recovery::default(), 1, SEC)
    }

    /// Lets the probe of an open breaker go at `now` and fails it.
    fn fail_probe(m: &mut Machine, now: u64) -> Transition {
        let (Admit::Go(ticket), _) = m.admit(now) else {
            panic!("the probe is refused");
        };
        m.record(now, ticket, Verdict::Failure, 0)
            .expect("a failed probe re-opens")
    }

    #[test]
    fn a_cancelled_call_is_neither_success_nor_failure_and_a_cancelled_probe_gives_its_place_back()
    {
        let s = Settings {
            failure_threshold: Some(1),
            half_open_max_probes: Some(1),
            ..Settings::default()
        };
        let mut m = Machine::new(Arc::new(s), &Recovery::default(), 1, SEC);
        assert!(m.cancel(SEC, closed(&m)).is_none());
        assert_eq!((m.totals.calls(), m.totals.cancelled), (0, 1));
        assert!(quiet(&m), "no run to reset, no window touched");

        m.record(SEC, closed(&m), Verdict::Failure, 0)
            .expect("trips");
        let later = 100 * SEC;
        let (Admit::Go(probe), _) = m.admit(later) else {
            panic!("the probe is refused");
        };
        assert!(
            matches!(m.admit(later).0, Admit::Refuse { .. }),
            "one probe"
        );
        assert!(m.cancel(later, probe).is_none(), "decides nothing");
        assert_eq!(m.state, State::HalfOpen);
        let (Admit::Go(next), _) = m.admit(later) else {
            panic!("the cancelled probe kept its place");
        };
        let t = m.record(later, next, Verdict::Success, 0).expect("closes");
        assert_eq!(t.to, State::Closed);
        assert_eq!(m.totals.cancelled, 2);
        assert_eq!(
            m.probe_totals,
            ProbeTotals {
                successes: 1,
                ..ProbeTotals::default()
            }
        );
    }

    #[test]
    fn a_trip_filed_at_an_instant_before_a_look_takes_nothing_from_what_the_look_read() {
        let s = Settings {
            failure_threshold: Some(1),
            ..Settings::default()
        };
        let mut m = Machine::new(Arc::new(s), &Recovery::default(), 1, SEC);
        // A look at 10 s reads 9 s closed (and accounts them).
        m.account(10 * SEC);
        let read = m.view(10 * SEC).state_nanos[State::Closed.index()];
        assert_eq!(read, 9 * SEC);
        // A call that read the clock at 5 s reaches the lock after the look
        // and trips the breaker at its own instant.
        let t = m
            .record(5 * SEC, closed(&m), Verdict::Failure, 0)
            .expect("trips");
        assert_eq!(t.to, State::Open);
        let later = m.view(11 * SEC).state_nanos;
        assert_eq!(
            later[State::Closed.index()],
            read,
            "closed time never falls"
        );
        assert_eq!(
            later[State::Open.index()],
            SEC,
            "open from the look's instant on"
        );
    }

    #[test]
    fn a_fleet_open_period_hands_its_backoff_step_to_the_next_failed_probe() {
        let mut m = backoff_machine();
        // The fleet opens this breaker at step 3 (others probed and failed).
        assert!(m.apply_fleet(SEC, Some(2 * SEC), 3).is_some());
        assert_eq!(m.view(SEC).backoff_step, 3);
        // Its period ends and its own probe fails: step 4, 1 s × 2⁴.
        let t = fail_probe(&mut m, 2 * SEC);
        assert_eq!(t.to, State::Open);
        let v = m.view(2 * SEC);
        assert_eq!(v.backoff_step, 4);
        assert_eq!(v.open_period, 16 * SEC);

        // Held open by the fleet at a later step, an open breaker adopts it
        // too.
        assert!(m.apply_fleet(3 * SEC, Some(40 * SEC), 6).is_none());
        assert_eq!(m.view(3 * SEC).backoff_step, 6);
        fail_probe(&mut m, 40 * SEC);
        assert_eq!(m.view(40 * SEC).backoff_step, 7);

        // The fleet closes: the step starts over.
        assert!(m.apply_fleet(41 * SEC, None, 0).is_some());
        assert_eq!(m.view(41 * SEC).backoff_step, 0);
    }
}
