//! Model-based test: random sequences of calls, held and leaked permits,
//! clock moves (landing exactly on the boundaries), overrides; the real
//! breaker and a small reference model written from the specification must
//! agree on the state, `retry_after`, every admission and every counter after
//! every step.
//!
//! The model is deliberately naive: it keeps every windowed event in a list
//! and recounts it, computes open periods by repeated multiplication in
//! integers, and tracks outstanding permits by identity.

use std::cell::Cell;
use std::time::Duration;

use fusebox::{Breaker, CallError, CallPath, Classifier, Permit, Reason, State};
use proptest::prelude::*;

use crate::support::breaker::{Business, DepError, Outage};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

// ---------------------------------------------------------------------------
// Configuration

#[derive(Clone, Debug)]
struct Cfg {
    failure_threshold: Option<u32>,
    window_failure_threshold: Option<u32>,
    /// A rate of `k / 4`.
    failure_rate_quarters: Option<u32>,
    slow_rate_quarters: Option<u32>,
    minimum_calls: u32,
    slow_call: Option<u64>,
    failure_window: u64,
    base: u64,
    multiplier: u32,
    max: u64,
    half_open_max_calls: u32,
    success_threshold: u32,
    probe_budget: u64,
}

impl Cfg {
    fn uses_window(&self) -> bool {
        self.window_failure_threshold.is_some()
            || self.failure_rate_quarters.is_some()
            || self.slow_rate_quarters.is_some()
    }

    fn build(&self, clock: quanta::Clock) -> Breaker {
        let ns = Duration::from_nanos;
        let mut b = Breaker::builder("model")
            .call_path(CallPath::AltData)
            .classifier(Classifier::failures_of::<Outage>())
            .clock(clock)
            .jitter(0.0)
            .consecutive_failure_threshold(self.failure_threshold)
            .window_failure_threshold(self.window_failure_threshold)
            .failure_rate_threshold(self.failure_rate_quarters.map(|k| f64::from(k) / 4.0))
            .minimum_calls(self.minimum_calls)
            .slow_call_duration(self.slow_call.map(ns))
            .slow_call_rate_threshold(self.slow_rate_quarters.map(|k| f64::from(k) / 4.0))
            .failure_window(ns(self.failure_window))
            .open_duration(ns(self.base))
            .backoff_multiplier(f64::from(self.multiplier))
            .max_open_duration(ns(self.max))
            .half_open_max_calls(self.half_open_max_calls)
            .half_open_success_threshold(self.success_threshold)
            .max_probe_duration(ns(self.probe_budget));
        if self.slow_call.is_none() {
            b = b.slow_call_rate_threshold(None);
        }
        b.build().expect("generated configurations are valid")
    }
}

fn cfg_strategy() -> impl Strategy<Value = Cfg> {
    let conditions = (
        prop::option::weighted(0.7, 1..=4u32),
        prop::option::weighted(0.4, 1..=5u32),
        prop::option::weighted(0.4, 1..=4u32),
        prop::option::weighted(0.5, Just(100 * MS)),
        prop::option::weighted(0.5, 1..=4u32),
        1..=5u32,
    );
    let timing = (
        prop::sample::select(vec![SEC, 9 * SEC, 10 * SEC, 10 * SEC + 7, 2 * MS]),
        prop::sample::select(vec![SEC, 2 * SEC, 5 * SEC]),
        1..=3u32,
        prop::sample::select(vec![1u64, 3, 10]),
        1..=3u32,
        1..=3u32,
        prop::sample::select(vec![500 * MS, 3 * SEC, 30 * SEC]),
    );
    (conditions, timing).prop_map(
        |((ft, wft, frq, slow, srq, min), (fw, base, mult, max_factor, hmax, hsucc, budget))| {
            let mut cfg = Cfg {
                failure_threshold: ft,
                window_failure_threshold: wft,
                failure_rate_quarters: frq,
                slow_rate_quarters: srq.filter(|_| slow.is_some()),
                minimum_calls: min,
                slow_call: slow,
                failure_window: fw,
                base,
                multiplier: mult,
                max: base * max_factor,
                half_open_max_calls: hmax,
                success_threshold: hsucc,
                probe_budget: budget,
            };
            if cfg.failure_threshold.is_none() && !cfg.uses_window() {
                cfg.failure_threshold = Some(2);
            }
            cfg
        },
    )
}

// ---------------------------------------------------------------------------
// Operations

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Success,
    Failure,
    Ignore,
}

#[derive(Clone, Copy, Debug)]
enum Took {
    Nothing,
    /// Exactly `slow_call_duration` (not slow), or 100 ms with none set.
    AtSlowLimit,
    /// One nanosecond more (slow).
    OverSlowLimit,
    Nanos(u64),
}

#[derive(Clone, Copy, Debug)]
enum Settle {
    Report(Kind),
    Drop,
    Forget,
}

#[derive(Clone, Copy, Debug)]
enum Jump {
    Nanos(u64),
    /// To the end of the open period, plus -1, 0 or +1 ns.
    OpenEnd(i8),
    /// To the earliest outstanding probe's deadline, plus -1, 0 or +1 ns.
    ProbeDeadline(i8),
    /// To the instant the oldest windowed event ages out, plus -1, 0 or +1 ns.
    WindowEdge(i8),
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Call(Kind, Took),
    Acquire,
    Settle(usize, Settle, Took),
    Advance(Jump),
    ForceOpen,
    Reset,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => Just(Kind::Success),
        4 => Just(Kind::Failure),
        1 => Just(Kind::Ignore),
    ]
}

fn took() -> impl Strategy<Value = Took> {
    prop_oneof![
        6 => Just(Took::Nothing),
        1 => Just(Took::AtSlowLimit),
        2 => Just(Took::OverSlowLimit),
        1 => (0..4 * SEC).prop_map(Took::Nanos),
    ]
}

fn offset() -> impl Strategy<Value = i8> {
    -1i8..=1
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        24 => (kind(), took()).prop_map(|(k, t)| Op::Call(k, t)),
        6 => Just(Op::Acquire),
        6 => (
            any::<usize>(),
            prop_oneof![
                4 => kind().prop_map(Settle::Report),
                1 => Just(Settle::Drop),
                1 => Just(Settle::Forget),
            ],
            took()
        )
            .prop_map(|(i, s, t)| Op::Settle(i, s, t)),
        5 => prop_oneof![
            Just(1u64),
            0..2 * SEC,
            0..40 * SEC,
        ]
        .prop_map(|n| Op::Advance(Jump::Nanos(n))),
        8 => offset().prop_map(|d| Op::Advance(Jump::OpenEnd(d))),
        3 => offset().prop_map(|d| Op::Advance(Jump::ProbeDeadline(d))),
        2 => offset().prop_map(|d| Op::Advance(Jump::WindowEdge(d))),
        1 => Just(Op::ForceOpen),
        3 => Just(Op::Reset),
    ]
}

// ---------------------------------------------------------------------------
// The reference model

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ticket {
    Closed { period: u64 },
    Probe { id: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admission {
    Go(Ticket),
    Refuse(State, Option<u64>),
}

/// Why the model changed state, at the granularity the specification fixes
/// (which trip condition is named first when several hold is not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Trip,
    OpenPeriodElapsed,
    ProbeSucceeded,
    ProbeFailed,
    ProbeSlow,
    ProbeExpired,
    ForcedOpen,
    Reset,
}

fn why(r: &Reason) -> Why {
    match r {
        Reason::ConsecutiveFailures { .. }
        | Reason::FailuresInWindow { .. }
        | Reason::FailureRate { .. }
        | Reason::SlowCallRate { .. } => Why::Trip,
        Reason::OpenPeriodElapsed => Why::OpenPeriodElapsed,
        Reason::ProbeSucceeded { .. } => Why::ProbeSucceeded,
        Reason::ProbeFailed => Why::ProbeFailed,
        Reason::ProbeSlow { .. } => Why::ProbeSlow,
        Reason::ProbeExpired => Why::ProbeExpired,
        Reason::ForcedOpen { .. } => Why::ForcedOpen,
        Reason::Reset { .. } => Why::Reset,
        other => panic!("the model does not configure {other:?}"),
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Totals {
    calls: u64,
    successes: u64,
    failures: u64,
    ignored: u64,
    slow: u64,
    short_circuits: u64,
}

/// What the model says a snapshot shows.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    state: State,
    retry_after: Option<u64>,
    open_duration: u64,
    consecutive_failures: u32,
    window: (u64, u64, u64),
    probes_in_flight: u32,
    trips: u64,
    reopens: u64,
    /// The time in every state together: all the time since the build.
    state_time_total: u64,
    totals: Totals,
    time_in_state: u64,
    last: Option<(State, State, Why, u64)>,
}

struct Model {
    cfg: Cfg,
    now: u64,
    state: State,
    entered_at: u64,
    /// Which closed period we are in; a closed ticket from another is stale.
    period: u64,
    open_until: u64,
    open_duration: u64,
    reopens: u32,
    consecutive: u32,
    /// (when, failed, slow) for every call counted in the window since it
    /// was last cleared.
    events: Vec<(u64, bool, bool)>,
    /// Outstanding probes of this half-open period: (id, deadline).
    probes: Vec<(u64, u64)>,
    probe_successes: u32,
    next_probe: u64,
    trips: u64,
    reopens_total: u64,
    totals: Totals,
    last: Option<(State, State, Why, u64)>,
}

impl Model {
    fn new(cfg: Cfg) -> Self {
        Model {
            cfg,
            now: 0,
            state: State::Closed,
            entered_at: 0,
            period: 0,
            open_until: 0,
            open_duration: 0,
            reopens: 0,
            consecutive: 0,
            events: Vec::new(),
            probes: Vec::new(),
            probe_successes: 0,
            next_probe: 0,
            trips: 0,
            reopens_total: 0,
            totals: Totals::default(),
            last: None,
        }
    }

    /// The window's bucket width: a tenth of `failure_window`. An event
    /// stays until ten whole buckets lie after its own, so it counts for at
    /// least the window and ages out within a bucket after it.
    fn bucket(&self) -> u64 {
        (self.cfg.failure_window / 10).max(1)
    }

    fn in_window(&self, t: u64) -> bool {
        let w = self.bucket();
        self.now / w - t / w < 11
    }

    /// (calls, failures, slow) in the window now.
    fn window(&self) -> (u64, u64, u64) {
        if !self.cfg.uses_window() {
            return (0, 0, 0);
        }
        let mut c = (0, 0, 0);
        for &(t, failed, slow) in &self.events {
            if self.in_window(t) {
                c.0 += 1;
                c.1 += u64::from(failed);
                c.2 += u64::from(slow);
            }
        }
        c
    }

    /// When the oldest event still in the window will have aged out.
    fn window_edge(&self) -> Option<u64> {
        let w = self.bucket();
        self.events
            .iter()
            .filter(|e| self.in_window(e.0))
            .map(|e| (e.0 / w + 11) * w)
            .min()
    }

    fn enter(&mut self, to: State, why: Why) {
        self.last = Some((self.state, to, why, self.now));
        self.state = to;
        self.entered_at = self.now;
        self.probes.clear();
        self.probe_successes = 0;
    }

    /// min(max, base × multiplier^reopens), by repeated multiplication.
    fn nominal(&self) -> u64 {
        let mut d = u128::from(self.cfg.base);
        for _ in 0..self.reopens {
            d *= u128::from(self.cfg.multiplier);
            if d >= u128::from(self.cfg.max) {
                break;
            }
        }
        d.min(u128::from(self.cfg.max)) as u64
    }

    fn open(&mut self, why: Why) {
        // A trip opens an outage; anything else renews its open period.
        if why == Why::Trip {
            self.reopens = 0;
            self.trips += 1;
        } else {
            self.reopens += 1;
            self.reopens_total += 1;
        }
        self.open_duration = self.nominal();
        self.open_until = self.now + self.open_duration;
        self.enter(State::Open, why);
    }

    fn close(&mut self, why: Why) {
        self.period += 1;
        self.reopens = 0;
        self.consecutive = 0;
        self.open_duration = 0;
        self.events.clear();
        self.enter(State::Closed, why);
    }

    fn refuse(&mut self) -> Admission {
        self.totals.short_circuits += 1;
        // Open: until the period ends. Half-open: until the first probe out
        // reaches its deadline, when a slot frees up at the latest.
        let retry = match self.state {
            State::Open => Some(self.open_until - self.now),
            State::HalfOpen => self
                .probes
                .iter()
                .map(|&(_, deadline)| deadline.saturating_sub(self.now))
                .min(),
            _ => None,
        };
        Admission::Refuse(self.state, retry)
    }

    fn admit(&mut self) -> Admission {
        match self.state {
            State::Closed => Admission::Go(Ticket::Closed {
                period: self.period,
            }),
            State::ForcedOpen => self.refuse(),
            State::ForcedClosed => unreachable!("the model never forces a breaker closed"),
            State::Open if self.now < self.open_until => self.refuse(),
            State::Open => {
                self.enter(State::HalfOpen, Why::OpenPeriodElapsed);
                self.admit_probe()
            }
            State::HalfOpen => {
                if self
                    .probes
                    .iter()
                    .any(|&(_, deadline)| deadline <= self.now)
                {
                    self.open(Why::ProbeExpired);
                    self.refuse()
                } else {
                    self.admit_probe()
                }
            }
        }
    }

    fn admit_probe(&mut self) -> Admission {
        if self.probes.len() < self.cfg.half_open_max_calls as usize {
            self.next_probe += 1;
            let id = self.next_probe;
            self.probes.push((id, self.now + self.cfg.probe_budget));
            Admission::Go(Ticket::Probe { id })
        } else {
            self.refuse()
        }
    }

    /// The call admitted with `ticket` ends now, after `took`.
    fn record(&mut self, ticket: Ticket, kind: Kind, took: u64) {
        let slow = kind == Kind::Success && self.cfg.slow_call.is_some_and(|d| took > d);
        let t = &mut self.totals;
        t.calls += 1;
        match kind {
            Kind::Success => t.successes += 1,
            Kind::Failure => t.failures += 1,
            Kind::Ignore => t.ignored += 1,
        }
        t.slow += u64::from(slow);
        match ticket {
            Ticket::Closed { period } if self.state == State::Closed && period == self.period => {
                self.closed_outcome(kind, slow)
            }
            Ticket::Probe { id }
                if self.state == State::HalfOpen && self.probes.iter().any(|p| p.0 == id) =>
            {
                self.probe_outcome(id, kind, slow)
            }
            _ => {} // stale: the lifetime totals only
        }
    }

    fn closed_outcome(&mut self, kind: Kind, slow: bool) {
        let failed = match kind {
            Kind::Ignore => return,
            Kind::Success => {
                self.consecutive = 0;
                false
            }
            Kind::Failure => {
                self.consecutive += 1;
                true
            }
        };
        if self.cfg.uses_window() {
            self.events.push((self.now, failed, slow));
        }
        let (calls, failures, slows) = self.window();
        let c = &self.cfg;
        let enough = calls >= u64::from(c.minimum_calls);
        // Every condition is judged after every counted call, whatever its
        // outcome: a success can bring the window up to `minimum_calls`.
        let conditions = [
            failed && c.failure_threshold.is_some_and(|n| self.consecutive >= n),
            c.window_failure_threshold
                .is_some_and(|n| failures >= u64::from(n)),
            enough
                && c.failure_rate_quarters
                    .is_some_and(|k| 4 * failures >= u64::from(k) * calls),
            enough
                && c.slow_rate_quarters
                    .is_some_and(|k| 4 * slows >= u64::from(k) * calls),
        ];
        if conditions.contains(&true) {
            self.open(Why::Trip);
        }
    }

    fn probe_outcome(&mut self, id: u64, kind: Kind, slow: bool) {
        // A probe that answers at or after its deadline has already failed,
        // and so has the round when another probe is past its own.
        let expired = self
            .probes
            .iter()
            .any(|&(_, deadline)| deadline <= self.now);
        self.probes.retain(|p| p.0 != id);
        if expired {
            self.open(Why::ProbeExpired);
            return;
        }
        match kind {
            Kind::Ignore => {}
            Kind::Failure => self.open(Why::ProbeFailed),
            Kind::Success if slow => self.open(Why::ProbeSlow),
            Kind::Success => {
                self.probe_successes += 1;
                if self.probe_successes >= self.cfg.success_threshold {
                    self.close(Why::ProbeSucceeded);
                }
            }
        }
    }

    /// What a snapshot shows: the state a call made now would meet.
    fn observed(&self) -> Observed {
        let mut o = Observed {
            state: self.state,
            retry_after: (self.state == State::Open)
                .then(|| self.open_until.saturating_sub(self.now)),
            open_duration: self.open_duration,
            consecutive_failures: self.consecutive,
            window: self.window(),
            probes_in_flight: self.probes.len() as u32,
            trips: self.trips,
            reopens: self.reopens_total,
            state_time_total: self.now,
            totals: self.totals,
            time_in_state: self.now - self.entered_at,
            last: self.last,
        };
        let expired = self.probes.iter().any(|&(_, d)| d <= self.now);
        if self.state == State::Open && self.now >= self.open_until {
            // The next call is the probe.
            o.state = State::HalfOpen;
            o.retry_after = None;
            o.time_in_state = self.now - self.open_until;
        } else if self.state == State::HalfOpen && expired {
            // The next call re-opens it, for the next period of the outage.
            let mut next = Model {
                cfg: self.cfg.clone(),
                reopens: self.reopens + 1,
                ..Model::new(self.cfg.clone())
            };
            next.now = self.now;
            let period = next.nominal();
            o.state = State::Open;
            o.retry_after = Some(period);
            o.open_duration = period;
            o.time_in_state = 0;
            o.probes_in_flight = 0;
        }
        o
    }
}

impl Model {
    fn force_open(&mut self) {
        self.open_duration = 0;
        self.enter(State::ForcedOpen, Why::ForcedOpen);
    }

    fn reset(&mut self) {
        self.close(Why::Reset);
    }

    fn took(&self, took: Took) -> u64 {
        let limit = self.cfg.slow_call.unwrap_or(100 * MS);
        match took {
            Took::Nothing => 0,
            Took::AtSlowLimit => limit,
            Took::OverSlowLimit => limit + 1,
            Took::Nanos(n) => n,
        }
    }

    /// How far to move the clock for `jump` (zero when its boundary is not
    /// ahead).
    fn jump(&self, jump: Jump) -> u64 {
        let (target, offset) = match jump {
            Jump::Nanos(n) => return n,
            Jump::OpenEnd(d) => ((self.state == State::Open).then_some(self.open_until), d),
            Jump::ProbeDeadline(d) => (self.probes.iter().map(|p| p.1).min(), d),
            Jump::WindowEdge(d) => (self.window_edge(), d),
        };
        match target {
            Some(t) => {
                let t = (i128::from(t) + i128::from(offset)).max(0) as u64;
                t.saturating_sub(self.now)
            }
            None => 0,
        }
    }
}

// ---------------------------------------------------------------------------
// Running both side by side

struct Held<'b> {
    permit: Permit<'b>,
    ticket: Ticket,
    started: u64,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("fits")
}

fn real(b: &Breaker, base: quanta::Instant) -> Observed {
    let s = b.snapshot();
    let t = s.totals;
    Observed {
        state: s.state,
        retry_after: s.retry_after.map(nanos),
        open_duration: nanos(s.open_duration),
        consecutive_failures: s.consecutive_failures,
        window: (s.window_calls, s.window_failures, s.window_slow_calls),
        probes_in_flight: s.probes_in_flight,
        trips: s.trips,
        reopens: s.reopens,
        state_time_total: {
            let t = s.state_times;
            nanos(t.closed + t.open + t.half_open + t.forced_open + t.forced_closed)
        },
        totals: Totals {
            calls: t.calls,
            successes: t.successes,
            failures: t.failures,
            ignored: t.ignored,
            slow: t.slow,
            short_circuits: t.short_circuits,
        },
        time_in_state: nanos(s.time_in_state),
        last: s.last_transition.map(|c| {
            (
                c.from,
                c.to,
                why(&c.reason),
                nanos(c.at.duration_since(base)),
            )
        }),
    }
}

fn result_of(kind: Kind) -> Result<u32, DepError> {
    match kind {
        Kind::Success => Ok(1),
        Kind::Failure => Err(DepError::Outage(Outage)),
        Kind::Ignore => Err(DepError::Business(Business)),
    }
}

fn check_refusal(
    step: usize,
    rejected: &fusebox::Rejected,
    state: State,
    retry_after: Option<u64>,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(rejected.breaker(), "model");
    prop_assert_eq!(
        (rejected.state(), rejected.retry_after().map(nanos)),
        (state, retry_after),
        "step {}: the refusal",
        step
    );
    Ok(())
}

fn run(cfg: &Cfg, ops: &[Op]) -> Result<(), TestCaseError> {
    let (clock, mock) = quanta::Clock::mock();
    let base = clock.now();
    let b = cfg.build(clock);
    let mut m = Model::new(cfg.clone());
    let mut held: Vec<Held<'_>> = Vec::new();
    for (step, &op) in ops.iter().enumerate() {
        match op {
            Op::Call(kind, took) => {
                let took = m.took(took);
                let expected = m.admit();
                let invoked = Cell::new(false);
                let got = b.call(|| {
                    invoked.set(true);
                    mock.increment(took);
                    result_of(kind)
                });
                match expected {
                    Admission::Go(ticket) => {
                        prop_assert!(invoked.get(), "step {}: {:?} should go", step, op);
                        match (kind, &got) {
                            (Kind::Success, Ok(1)) => {}
                            (Kind::Failure, Err(CallError::Failed(DepError::Outage(_)))) => {}
                            (Kind::Ignore, Err(CallError::Failed(DepError::Business(_)))) => {}
                            _ => prop_assert!(false, "step {}: {:?} returned {:?}", step, op, got),
                        }
                        m.now += took;
                        m.record(ticket, kind, took);
                    }
                    Admission::Refuse(state, retry_after) => {
                        prop_assert!(!invoked.get(), "step {}: {:?} should be refused", step, op);
                        match &got {
                            Err(CallError::Rejected(r)) => {
                                check_refusal(step, r, state, retry_after)?
                            }
                            other => prop_assert!(false, "step {}: refused, got {:?}", step, other),
                        }
                    }
                }
            }
            Op::Acquire => match (m.admit(), b.try_acquire()) {
                (Admission::Go(ticket), Ok(permit)) => {
                    prop_assert_eq!(
                        permit.is_probe(),
                        matches!(ticket, Ticket::Probe { .. }),
                        "step {}",
                        step
                    );
                    held.push(Held {
                        permit,
                        ticket,
                        started: m.now,
                    });
                }
                (Admission::Refuse(state, retry_after), Err(r)) => {
                    check_refusal(step, &r, state, retry_after)?
                }
                (expected, got) => prop_assert!(
                    false,
                    "step {}: expected {:?}, got {:?}",
                    step,
                    expected,
                    got.map(|p| p.is_probe())
                ),
            },
            Op::Settle(i, settle, took) => {
                if !held.is_empty() {
                    let h = held.remove(i % held.len());
                    let took = m.took(took);
                    mock.increment(took);
                    m.now += took;
                    let elapsed = m.now - h.started;
                    match settle {
                        Settle::Report(kind) => {
                            match kind {
                                Kind::Success => h.permit.success(),
                                Kind::Failure => h.permit.failure(),
                                Kind::Ignore => h.permit.ignore(),
                            }
                            m.record(h.ticket, kind, elapsed);
                        }
                        Settle::Drop => {
                            drop(h.permit);
                            m.record(h.ticket, Kind::Failure, elapsed);
                        }
                        Settle::Forget => std::mem::forget(h.permit),
                    }
                }
            }
            Op::Advance(jump) => {
                let d = m.jump(jump);
                mock.increment(d);
                m.now += d;
            }
            Op::ForceOpen => {
                b.force_open("model", "forced");
                m.force_open();
            }
            Op::Reset => {
                b.reset("model", "reset");
                m.reset();
            }
        }
        prop_assert_eq!(
            b.state(),
            m.observed().state,
            "step {}: state after {:?}",
            step,
            op
        );
        prop_assert_eq!(
            real(&b, base),
            m.observed(),
            "step {}: after {:?}",
            step,
            op
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        max_shrink_iters: 4_096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_breaker_matches_the_reference_model(
        cfg in cfg_strategy(),
        ops in prop::collection::vec(op(), 1..160),
    ) {
        run(&cfg, &ops)?;
    }
}

/// The model's own sanity: a hand-written run whose answers are known.
#[test]
fn the_model_agrees_on_a_known_outage() {
    let cfg = Cfg {
        failure_threshold: Some(2),
        window_failure_threshold: None,
        failure_rate_quarters: None,
        slow_rate_quarters: None,
        minimum_calls: 1,
        slow_call: None,
        failure_window: 10 * SEC,
        base: SEC,
        multiplier: 2,
        max: 10 * SEC,
        half_open_max_calls: 1,
        success_threshold: 1,
        probe_budget: 3 * SEC,
    };
    let ops = [
        Op::Call(Kind::Failure, Took::Nothing),
        Op::Call(Kind::Failure, Took::Nothing),
        Op::Call(Kind::Success, Took::Nothing),
        Op::Advance(Jump::OpenEnd(-1)),
        Op::Call(Kind::Success, Took::Nothing),
        Op::Advance(Jump::OpenEnd(0)),
        Op::Acquire,
        Op::Call(Kind::Success, Took::Nothing),
        Op::Settle(0, Settle::Report(Kind::Failure), Took::Nothing),
        Op::Advance(Jump::OpenEnd(0)),
        Op::Acquire,
        Op::Settle(0, Settle::Forget, Took::Nothing),
        Op::Advance(Jump::ProbeDeadline(0)),
        Op::Call(Kind::Success, Took::Nothing),
        Op::Advance(Jump::OpenEnd(0)),
        Op::Call(Kind::Success, Took::Nothing),
    ];
    run(&cfg, &ops).unwrap();
    let mut m = Model::new(cfg);
    for kind in [Kind::Failure, Kind::Failure] {
        let Admission::Go(t) = m.admit() else {
            panic!("closed")
        };
        m.record(t, kind, 0);
    }
    assert_eq!(m.state, State::Open);
    assert_eq!(m.observed().retry_after, Some(SEC));
}
