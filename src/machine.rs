//! The pure state machine.
//!
//! Every transition is here, and nothing else is: no lock, no clock, no
//! callback, no log line. Each operation takes `now` (nanoseconds on the
//! breaker's clock) and returns what happened; [`crate::Breaker`] holds the
//! lock around it, reads the clock, and delivers the transitions afterwards.

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Rng;
use crate::config::Settings;
use crate::events::Reason;
use crate::latency::LatencyWindow;
use crate::window::Window;
use crate::{State, Verdict};

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
}

/// Lifetime totals. Never reset, so they can feed monotonic counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) calls: u64,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) ignored: u64,
    pub(crate) slow: u64,
}

// The gate: one word that lets the hot path decide without the lock.
// Low two bits are the state. Open: the rest is the end of the open period in
// nanoseconds. Closed: bit 2 is GATE_QUIET_SUCCESS, the rest the generation.
//
// A quiet success is one that changes nothing but counts: no failure run to
// reset, no latency to file, no call to time. The breaker counts those with
// one atomic increment and hands the count to the machine
// (`absorb_quiet_successes`) at its next locked operation; with a window,
// only while the window's head bucket is current (`quiet_until`), so that
// each success is filed in the bucket it happened in.
pub(crate) const GATE_CLOSED: u64 = 0;
pub(crate) const GATE_HALF_OPEN: u64 = 1;
pub(crate) const GATE_FORCED: u64 = 2;
pub(crate) const GATE_OPEN: u64 = 3;
/// Closed, and a success in this generation would change nothing but the
/// lifetime totals: no failure run to reset, no window, no timing.
pub(crate) const GATE_QUIET_SUCCESS: u64 = 4;
/// Where the generation starts in a closed gate.
pub(crate) const GATE_GENERATION_SHIFT: u32 = 3;

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX >> 2)) as u64
}

#[derive(Debug)]
pub(crate) struct Machine {
    s: Settings,
    slow_after: Option<u64>,
    /// A probe slower than this has not shown recovery: the shorter of
    /// `slow_call_duration` and the latency policy's threshold.
    probe_slow_after: Option<u64>,
    probe_budget: u64,
    state: State,
    entered_at: u64,
    generation: u64,
    open_until: u64,
    open_period: u64,
    reopens: u32,
    consecutive: u32,
    throttle_until: u64,
    window: Option<Window>,
    latency: Option<LatencyWindow>,
    probes: Box<[Option<Probe>]>,
    probe_successes: u32,
    next_probe_id: u64,
    rng: Rng,
    totals: Totals,
    trips: u64,
}

/// Everything the snapshot reads from the machine, at one instant.
#[derive(Clone, Debug)]
pub(crate) struct View {
    pub(crate) state: State,
    pub(crate) consecutive_failures: u32,
    pub(crate) window_calls: u32,
    pub(crate) window_failures: u32,
    pub(crate) window_slow: u32,
    pub(crate) retry_after: Option<u64>,
    pub(crate) open_period: u64,
    pub(crate) trips: u64,
    pub(crate) totals: Totals,
    pub(crate) in_state: u64,
    pub(crate) probes_in_flight: u32,
    pub(crate) latency_percentile: Option<Duration>,
    pub(crate) latency_breaches: u32,
}

impl Machine {
    pub(crate) fn new(s: Settings, seed: u64, now: u64) -> Self {
        Machine {
            slow_after: s.slow_call_duration.map(nanos),
            probe_slow_after: s
                .slow_call_duration
                .into_iter()
                .chain(s.latency_trip.as_ref().map(|l| l.threshold))
                .min()
                .map(nanos),
            probe_budget: nanos(s.max_probe_duration),
            window: s
                .uses_window()
                .then(|| Window::new(nanos(s.failure_window))),
            latency: s.latency_trip.clone().map(|p| LatencyWindow::new(p, now)),
            probes: vec![None; s.half_open_max_calls as usize].into_boxed_slice(),
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
        }
    }

    /// The gate word for the current state.
    pub(crate) fn gate(&self) -> u64 {
        match self.state {
            State::Closed => {
                let quiet =
                    self.consecutive == 0 && self.latency.is_none() && self.slow_after.is_none();
                (self.generation << GATE_GENERATION_SHIFT)
                    | if quiet { GATE_QUIET_SUCCESS } else { 0 }
                    | GATE_CLOSED
            }
            State::HalfOpen => GATE_HALF_OPEN,
            State::ForcedOpen => GATE_FORCED,
            State::Open => (self.open_until.min(u64::MAX >> 2) << 2) | GATE_OPEN,
        }
    }

    /// The settings it was built with.
    #[cfg(feature = "http")]
    pub(crate) fn settings(&self) -> &Settings {
        &self.s
    }

    /// Whether the slow-call clock must be read when a call starts.
    pub(crate) fn times_calls(&self) -> bool {
        self.slow_after.is_some() || self.latency.is_some()
    }

    /// Decides whether a call may go at `now`.
    pub(crate) fn admit(&mut self, now: u64) -> (Admit, Option<Transition>) {
        match self.state {
            State::Closed => (
                Admit::Go(Ticket::Closed {
                    generation: self.generation,
                }),
                None,
            ),
            State::ForcedOpen => (self.refuse(now), None),
            State::Open if now < self.open_until => (self.refuse(now), None),
            State::Open => {
                let t = self.enter(now, State::HalfOpen, Reason::OpenPeriodElapsed);
                (self.admit_probe(now), Some(t))
            }
            State::HalfOpen => {
                let expired = self.probes.iter().flatten().any(|p| p.deadline <= now);
                if expired {
                    let t = self.reopen(now, Reason::ProbeExpired);
                    (self.refuse(now), Some(t))
                } else {
                    (self.admit_probe(now), None)
                }
            }
        }
    }

    /// Whether `admit(now)` would admit a call, changing nothing.
    pub(crate) fn would_admit(&self, now: u64) -> bool {
        match self.state {
            State::Closed => true,
            State::ForcedOpen => false,
            State::Open => now >= self.open_until,
            State::HalfOpen => {
                !self.probes.iter().flatten().any(|p| p.deadline <= now)
                    && self.probes.iter().any(Option::is_none)
            }
        }
    }

    fn admit_probe(&mut self, now: u64) -> Admit {
        match self.probes.iter_mut().find(|p| p.is_none()) {
            Some(slot) => {
                self.next_probe_id += 1;
                let id = self.next_probe_id;
                *slot = Some(Probe {
                    id,
                    deadline: now.saturating_add(self.probe_budget),
                });
                Admit::Go(Ticket::Probe { id })
            }
            None => self.refuse(now),
        }
    }

    fn refuse(&self, now: u64) -> Admit {
        Admit::Refuse {
            state: self.state,
            retry_after: (self.state == State::Open).then(|| self.open_until.saturating_sub(now)),
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
        let slow = outcome == Verdict::Success && self.slow_after.is_some_and(|d| elapsed > d);
        let t = &mut self.totals;
        t.calls += 1;
        match outcome {
            Verdict::Success => t.successes += 1,
            Verdict::Failure | Verdict::Throttled(_) => t.failures += 1,
            Verdict::Ignore => t.ignored += 1,
        }
        t.slow += u64::from(slow);
        // Admitted before the state last changed: it counts in the totals
        // only. In particular a straggler's request to back off must not
        // lengthen an outage it was not part of.
        if !self.is_current(ticket) {
            return None;
        }
        if let Verdict::Throttled(d) = outcome {
            self.throttle_until = self.throttle_until.max(now.saturating_add(nanos(d)));
        }
        match ticket {
            Ticket::Closed { .. } => self.closed_outcome(now, outcome, slow, elapsed),
            Ticket::Probe { id } => {
                let slot = self
                    .probes
                    .iter_mut()
                    .find(|p| p.is_some_and(|p| p.id == id))?;
                let probe = slot.take()?;
                // A probe that answers after its deadline has already
                // failed, whatever it says; so has the round if another
                // probe is past its own.
                let expired = |p: &Probe| p.deadline <= now;
                if expired(&probe) || self.probes.iter().flatten().any(expired) {
                    return Some(self.reopen(now, Reason::ProbeExpired));
                }
                let slow_probe = self.probe_slow_after.is_some_and(|d| elapsed > d);
                self.probe_outcome(now, outcome, slow_probe, elapsed)
            }
        }
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
                false
            }
            Verdict::Failure | Verdict::Throttled(_) => {
                self.consecutive = self.consecutive.saturating_add(1);
                true
            }
        };
        if let Some(w) = &mut self.window {
            w.record(now, failed, slow);
        }
        // Keep the common path free of moves of `Reason` values: a success
        // that is not slow, with no latency policy, returns at once.
        let latency = match &mut self.latency {
            Some(l) => l.record(now, elapsed, failed),
            None if !failed && !slow => return None,
            None => None,
        };
        if failed || slow {
            if let Some(reason) = self.trip_reason(failed, slow) {
                return Some(self.trip(now, reason));
            }
        }
        latency.map(|reason| self.trip(now, reason))
    }

    /// The first trip condition that holds after a call, if any.
    /// Called only after a failure or a slow call: a plain success can only
    /// lower a rate.
    fn trip_reason(&self, failed: bool, slow: bool) -> Option<Reason> {
        let s = &self.s;
        if failed && s.failure_threshold.is_some_and(|n| self.consecutive >= n) {
            return Some(Reason::ConsecutiveFailures {
                count: self.consecutive,
            });
        }
        let w = self.window.as_ref()?.totals();
        if failed && s.window_failure_threshold.is_some_and(|n| w.failures >= n) {
            return Some(Reason::FailuresInWindow {
                failures: w.failures,
            });
        }
        if w.calls < s.minimum_calls {
            return None;
        }
        let calls = f64::from(w.calls);
        let failure_rate = f64::from(w.failures) / calls;
        if failed && s.failure_rate_threshold.is_some_and(|r| failure_rate >= r) {
            return Some(Reason::FailureRate {
                rate: failure_rate,
                calls: w.calls,
            });
        }
        let slow_rate = f64::from(w.slow) / calls;
        if slow && s.slow_call_rate_threshold.is_some_and(|r| slow_rate >= r) {
            return Some(Reason::SlowCallRate {
                rate: slow_rate,
                calls: w.calls,
            });
        }
        None
    }

    fn probe_outcome(
        &mut self,
        now: u64,
        outcome: Verdict,
        slow: bool,
        elapsed: u64,
    ) -> Option<Transition> {
        match outcome {
            Verdict::Ignore => None,
            Verdict::Success if slow => Some(self.reopen(
                now,
                Reason::ProbeSlow {
                    elapsed: Duration::from_nanos(elapsed),
                },
            )),
            Verdict::Success => {
                self.probe_successes += 1;
                if self.probe_successes >= self.s.half_open_success_threshold {
                    let successes = self.probe_successes;
                    Some(self.close(now, Reason::ProbeSucceeded { successes }))
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
        self.open(now, reason)
    }

    /// HalfOpen -> Open: a longer open period.
    fn reopen(&mut self, now: u64, reason: Reason) -> Transition {
        self.reopens = self.reopens.saturating_add(1);
        self.open(now, reason)
    }

    fn open(&mut self, now: u64, reason: Reason) -> Transition {
        let period = nanos(self.s.backoff.period(self.reopens, &mut self.rng));
        self.open_until = now.saturating_add(period).max(self.throttle_until);
        self.open_period = self.open_until - now;
        self.trips += 1;
        self.enter(now, State::Open, reason)
    }

    fn close(&mut self, now: u64, reason: Reason) -> Transition {
        self.generation += 1;
        self.reopens = 0;
        self.consecutive = 0;
        self.throttle_until = 0;
        self.open_period = 0;
        if let Some(w) = &mut self.window {
            w.clear();
        }
        if let Some(l) = &mut self.latency {
            l.clear(now);
        }
        self.enter(now, State::Closed, reason)
    }

    fn enter(&mut self, now: u64, to: State, reason: Reason) -> Transition {
        // Callers read the clock before taking the lock, so a transition can
        // arrive with an instant a little older than the previous one's; keep
        // the recorded times in order.
        let now = now.max(self.entered_at);
        self.probes.iter_mut().for_each(|p| *p = None);
        self.probe_successes = 0;
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

    /// An operator opens the breaker until reset.
    pub(crate) fn force_open(&mut self, now: u64, actor: Arc<str>, note: Arc<str>) -> Transition {
        self.open_period = 0;
        self.enter(now, State::ForcedOpen, Reason::ForcedOpen { actor, note })
    }

    /// An operator closes the breaker, clearing the trip counters and the
    /// backoff. Lifetime totals are kept.
    pub(crate) fn reset(&mut self, now: u64, actor: Arc<str>, note: Arc<str>) -> Transition {
        self.close(now, Reason::Reset { actor, note })
    }

    /// Until when a quiet success may be counted without the lock: the end
    /// of the window's head bucket, or forever without a window.
    pub(crate) fn quiet_until(&self) -> u64 {
        self.window.as_ref().map_or(u64::MAX, Window::head_end)
    }

    /// Takes `n` successes counted without the lock since the last locked
    /// operation. They belong to the window's head bucket, which has not
    /// moved since: only a locked operation moves it, and each one absorbs
    /// first.
    pub(crate) fn absorb_quiet_successes(&mut self, n: u64) {
        if let Some(w) = &mut self.window {
            w.absorb_successes(n.min(u64::from(u32::MAX)) as u32);
        }
    }

    pub(crate) fn view(&mut self, now: u64) -> View {
        let w = match &mut self.window {
            Some(w) => {
                w.advance(now);
                w.totals()
            }
            None => Default::default(),
        };
        View {
            state: self.state,
            consecutive_failures: self.consecutive,
            window_calls: w.calls,
            window_failures: w.failures,
            window_slow: w.slow,
            retry_after: (self.state == State::Open).then(|| self.open_until.saturating_sub(now)),
            open_period: self.open_period,
            trips: self.trips,
            totals: self.totals,
            in_state: now.saturating_sub(self.entered_at),
            probes_in_flight: self.probes.iter().flatten().count() as u32,
            latency_percentile: self.latency.as_ref().and_then(|l| l.last_percentile()),
            latency_breaches: self.latency.as_ref().map_or(0, |l| l.breaches()),
        }
    }
}
