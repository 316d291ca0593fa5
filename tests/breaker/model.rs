//! Model-based test: random configurations and random sequences of calls,
//! held and leaked permits, clock moves (landing exactly on the
//! boundaries), overrides; the real breaker and a small reference model
//! written from the specification must agree on the state, `retry_after`,
//! every admission, every counter and the time in each state after every
//! step, and on what a look that makes no call reads after every step
//! (`would_permit`, `state`, the snapshot), calls in flight included: a
//! look at a breaker whose calls in flight would open it opens it.
//!
//! The configurations cover every setting the lock-free success path
//! depends on: time and count windows, a trip predicate, closed intervals,
//! slow calls, latency trips, a result classifier, calls counted in
//! flight, calls in flight judged as stuck or hung (held permits that
//! report late or never, async calls cancelled), probe caps and half-open rate rounds, ramp-up after recovery
//! and maintenance windows (with and without short-circuiting). Runs come
//! in phases of mostly failing and mostly succeeding calls, so that
//! outages recover and ramps run.
//!
//! The model is deliberately naive: it keeps every windowed event in a list
//! and recounts it, computes open periods by repeated multiplication in
//! integers, sorts a latency window's samples to read its percentile,
//! tracks outstanding permits by identity, and sums the time in each state
//! as it moves its clock, reading the state at each instant the reading
//! could change.

use std::cell::Cell;
use std::time::{Duration, SystemTime};

use fusebox::trading::{MaintenanceWindow, WallClock};
use fusebox::{
    Breaker, CallError, CallPath, Classifier, HalfOpenRate, LatencyTrip, Permit, RampUp, Reason,
    ResultClassifier, State, TripPredicate, Verdict, WindowCounts,
};
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
    /// The window conditions judge the last `n` calls instead.
    count_window: Option<u32>,
    latency: Option<Latency>,
    base: u64,
    multiplier: u32,
    max: u64,
    half_open_max_concurrent: u32,
    success_threshold: u32,
    probe_budget: u64,
    /// Probes over a whole half-open period.
    half_open_max_probes: Option<u32>,
    /// Half-open judged by a round of `.0` probes, re-opening at a failure
    /// rate of `.1 / 4`.
    half_open_rate: Option<(u32, u32)>,
    /// After closing on a probe, admit from `.1 / 4` of the calls (1 to 3
    /// quarters: a ramp from all of them is refused at build), rising to
    /// all of them over `.0`.
    ramp: Option<(u64, u32)>,
    /// `[.0, .1)` after the build is a maintenance window; calls in it are
    /// refused when `.2`.
    maintenance: Option<(u64, u64, bool)>,
    /// The closed-state counts are cleared every interval.
    closed_interval: Option<u64>,
    /// A trip predicate: at least `.0` failures in the window, or `.1`
    /// successes in a row.
    trip_predicate: Option<(u64, u64)>,
    /// A result classifier that takes the value 2 for a failure.
    result_classifier: bool,
    /// Calls admitted and not reported are counted.
    count_in_flight: bool,
    /// `stuck_call_threshold` (with `slow_call`).
    stuck: Option<u32>,
    /// `hung_call_duration`.
    hung: Option<u64>,
}

/// A latency trip policy, with its rates and percentile in quarters.
#[derive(Clone, Debug)]
struct Latency {
    percentile_quarters: u32,
    threshold: u64,
    window: u64,
    consecutive_windows: u32,
    error_quarters: Option<u32>,
    minimum_samples: u32,
    capacity: usize,
}

/// Where the wall clock stands when the breaker is built.
fn wall_at_build() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

impl Cfg {
    /// The configuration of the hand-written runs: two failures in a row
    /// open for 1 s, doubling to 10 s; one probe decides within 3 s.
    fn plain() -> Cfg {
        Cfg {
            failure_threshold: Some(2),
            window_failure_threshold: None,
            failure_rate_quarters: None,
            slow_rate_quarters: None,
            minimum_calls: 1,
            slow_call: None,
            failure_window: 10 * SEC,
            count_window: None,
            latency: None,
            base: SEC,
            multiplier: 2,
            max: 10 * SEC,
            half_open_max_concurrent: 1,
            success_threshold: 1,
            probe_budget: 3 * SEC,
            half_open_max_probes: None,
            half_open_rate: None,
            ramp: None,
            maintenance: None,
            closed_interval: None,
            trip_predicate: None,
            result_classifier: false,
            count_in_flight: false,
            stuck: None,
            hung: None,
        }
    }

    fn tracks_in_flight(&self) -> bool {
        self.stuck.is_some() || self.hung.is_some()
    }

    /// With calls in flight tracked, a probe out longer than this is stuck:
    /// its slow mark, or `hung` without one.
    fn probe_stuck_after(&self) -> Option<u64> {
        if !self.tracks_in_flight() {
            return None;
        }
        self.probe_slow_after().or(self.hung)
    }

    fn uses_window(&self) -> bool {
        self.window_failure_threshold.is_some()
            || self.failure_rate_quarters.is_some()
            || self.slow_rate_quarters.is_some()
            || self.trip_predicate.is_some()
    }

    /// A probe slower than this has not shown recovery.
    fn probe_slow_after(&self) -> Option<u64> {
        let latency = self.latency.as_ref().map(|l| l.threshold);
        self.slow_call.into_iter().chain(latency).min()
    }

    fn build(&self, clock: quanta::Clock) -> Breaker {
        let ns = Duration::from_nanos;
        let quarters = |k: u32| f64::from(k) / 4.0;
        let mut b = Breaker::builder("model")
            .call_path(CallPath::AltData)
            .classifier(Classifier::failures_of::<Outage>())
            .clock(clock)
            .jitter(0.0)
            .consecutive_failure_threshold(self.failure_threshold)
            .window_failure_threshold(self.window_failure_threshold)
            .failure_rate_threshold(self.failure_rate_quarters.map(quarters))
            .minimum_calls(self.minimum_calls)
            .slow_call_duration(self.slow_call.map(ns))
            .slow_call_rate_threshold(self.slow_rate_quarters.map(quarters))
            .failure_window(ns(self.failure_window))
            .count_window(self.count_window)
            .latency_trip(self.latency.as_ref().map(|l| {
                LatencyTrip::new()
                    .percentile(quarters(l.percentile_quarters))
                    .threshold(ns(l.threshold))
                    .window(ns(l.window))
                    .consecutive_windows(l.consecutive_windows)
                    .error_rate(l.error_quarters.map(quarters))
                    .minimum_samples(l.minimum_samples)
                    .capacity(l.capacity)
            }))
            .open_duration(ns(self.base))
            .backoff_multiplier(f64::from(self.multiplier))
            .max_open_duration(ns(self.max))
            .half_open_max_concurrent(self.half_open_max_concurrent)
            .half_open_success_threshold(self.success_threshold)
            .max_probe_duration(ns(self.probe_budget))
            .half_open_max_probes(self.half_open_max_probes)
            .half_open_rate(self.half_open_rate.map(|(probes, k)| HalfOpenRate {
                probes,
                failure_rate_threshold: quarters(k),
            }))
            .ramp_up(
                self.ramp
                    .map(|(lasting, k)| RampUp::linear(ns(lasting), quarters(k))),
            )
            .closed_interval(self.closed_interval.map(ns))
            .trip_predicate(self.trip_predicate.map(|(failures, successes)| {
                TripPredicate::new("model", move |c: &WindowCounts| {
                    c.failures >= failures || c.consecutive_successes >= successes
                })
            }))
            .count_calls_in_flight(self.count_in_flight)
            .stuck_call_threshold(self.stuck)
            .hung_call_duration(self.hung.map(ns));
        if self.result_classifier {
            b = b.result_classifier(ResultClassifier::for_type(|v: &u32| {
                if *v == 2 {
                    Verdict::Failure
                } else {
                    Verdict::Success
                }
            }));
        }
        if let Some((start, end, short_circuit)) = self.maintenance {
            let wall = wall_at_build();
            b = b
                .wall_clock(WallClock::fixed(wall))
                .maintenance_window(MaintenanceWindow::once(wall + ns(start), wall + ns(end)))
                .short_circuit_in_maintenance(short_circuit);
        }
        if self.slow_call.is_none() {
            b = b.slow_call_rate_threshold(None);
        }
        b.build().expect("generated configurations are valid")
    }
}

fn latency_strategy() -> impl Strategy<Value = Latency> {
    (
        1..=4u32,
        prop::sample::select(vec![50 * MS, 500 * MS, 2 * SEC]),
        prop::sample::select(vec![SEC, 3 * SEC, 10 * SEC]),
        1..=3u32,
        prop::option::weighted(0.5, 1..=4u32),
        1..=4u32,
        prop::sample::select(vec![1usize, 3, 256]),
    )
        .prop_map(|(p, threshold, window, k, error, min, capacity)| Latency {
            percentile_quarters: p,
            threshold,
            window,
            consecutive_windows: k,
            error_quarters: error,
            minimum_samples: min,
            capacity,
        })
}

fn cfg_strategy() -> impl Strategy<Value = Cfg> {
    let conditions = (
        prop::option::weighted(0.7, 1..=4u32),
        prop::option::weighted(0.4, 1..=5u32),
        prop::option::weighted(0.4, 1..=4u32),
        prop::option::weighted(0.5, Just(100 * MS)),
        prop::option::weighted(0.5, 1..=4u32),
        1..=5u32,
        prop::option::weighted(0.3, 1..=8u32),
        prop::option::weighted(0.3, latency_strategy()),
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
    let paths = (
        prop::option::weighted(0.2, prop::sample::select(vec![SEC, 7 * SEC, 30 * SEC])),
        prop::option::weighted(0.2, (1..=4u64, 2..=6u64)),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.3),
    );
    let recovery = (
        prop::option::weighted(0.3, 0..=2u32),
        prop::option::weighted(0.3, (1..=4u32, 1..=4u32)),
        prop::option::weighted(
            0.3,
            (prop::sample::select(vec![SEC, 5 * SEC, 20 * SEC]), 1..=3u32),
        ),
        prop::option::weighted(
            0.3,
            (
                0..30 * SEC,
                prop::sample::select(vec![SEC, 10 * SEC, 40 * SEC]),
                any::<bool>(),
            ),
        ),
    );
    let in_flight = (
        prop::option::weighted(0.3, 1..=3u32),
        prop::option::weighted(
            0.25,
            prop::sample::select(vec![100 * MS + 1, 150 * MS, 2 * SEC]),
        ),
    );
    (conditions, timing, paths, recovery, in_flight).prop_map(
        |(
            (ft, wft, frq, slow, srq, min, count, latency),
            (fw, base, mult, max_factor, hmax, hsucc, budget),
            (interval, predicate, result_classifier, count_in_flight),
            (extra_probes, rate, ramp, maintenance),
            (stuck, hung),
        )| {
            let mut cfg = Cfg {
                failure_threshold: ft,
                window_failure_threshold: wft,
                failure_rate_quarters: frq,
                slow_rate_quarters: srq.filter(|_| slow.is_some()),
                minimum_calls: min,
                slow_call: slow,
                failure_window: fw,
                count_window: None,
                latency,
                base,
                multiplier: mult,
                max: base * max_factor,
                half_open_max_concurrent: hmax,
                success_threshold: hsucc,
                probe_budget: budget,
                half_open_max_probes: None,
                half_open_rate: rate,
                ramp,
                maintenance: maintenance
                    .map(|(start, length, short)| (start, start + length, short)),
                closed_interval: interval,
                trip_predicate: predicate,
                result_classifier,
                count_in_flight,
                stuck: stuck.filter(|_| slow.is_some()),
                hung,
            };
            if cfg.failure_threshold.is_none()
                && !cfg.uses_window()
                && cfg.latency.is_none()
                && !cfg.tracks_in_flight()
            {
                cfg.failure_threshold = Some(2);
            }
            // A count window needs a window condition and at least
            // `minimum_calls` calls.
            if let Some(n) = count.filter(|_| cfg.uses_window()) {
                cfg.count_window = Some(n);
                cfg.minimum_calls = cfg.minimum_calls.min(n);
            }
            // A probe cap leaves room for the probes that close.
            let needed = cfg.half_open_rate.map_or(cfg.success_threshold, |r| r.0);
            cfg.half_open_max_probes = extra_probes.map(|extra| needed + extra);
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
    /// An `Ok` value the result classifier (when there is one) takes for
    /// a failure.
    BadValue,
}

#[derive(Clone, Copy, Debug)]
enum Took {
    Nothing,
    /// Exactly `slow_call_duration` (not slow), or else the latency
    /// policy's threshold, or else 100 ms.
    AtSlowLimit,
    /// One nanosecond more (slow).
    OverSlowLimit,
    /// Exactly the latency policy's threshold (not above it), or 100 ms.
    AtLatencyLimit,
    /// One nanosecond more.
    OverLatencyLimit,
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
    /// To the start of the maintenance window, plus -1, 0 or +1 ns.
    MaintenanceStart(i8),
    /// To its end, plus -1, 0 or +1 ns.
    MaintenanceEnd(i8),
    /// To the end of the ramp in progress, plus -1, 0 or +1 ns.
    RampEnd(i8),
    /// To the end of the latency policy's current window, plus -1, 0 or +1 ns.
    LatencyWindowEnd(i8),
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Call(Kind, Took),
    /// The clock moves, then a call is made, with no look between: the
    /// admission, not a look, finds what the move made due.
    Later(Jump, Kind),
    Acquire,
    /// An async call admitted at its first poll and left pending; settled,
    /// it is cancelled (its future dropped), whatever the settlement says.
    AcquireAsync,
    Settle(usize, Settle, Took),
    Advance(Jump),
    ForceOpen,
    Reset,
}

/// How often calls succeed, fail and are ignored, relative to each other.
type Mix = (u32, u32, u32);

fn kind(mix: Mix) -> impl Strategy<Value = Kind> {
    prop_oneof![
        mix.0 => Just(Kind::Success),
        mix.1 => Just(Kind::Failure),
        mix.2 => Just(Kind::Ignore),
        mix.0 / 4 + 1 => Just(Kind::BadValue),
    ]
}

fn took() -> impl Strategy<Value = Took> {
    prop_oneof![
        8 => Just(Took::Nothing),
        1 => Just(Took::AtSlowLimit),
        2 => Just(Took::OverSlowLimit),
        1 => Just(Took::AtLatencyLimit),
        1 => Just(Took::OverLatencyLimit),
        2 => (0..4 * SEC).prop_map(Took::Nanos),
    ]
}

fn offset() -> impl Strategy<Value = i8> {
    -1i8..=1
}

fn op(mix: Mix) -> impl Strategy<Value = Op> {
    prop_oneof![
        48 => (kind(mix), took()).prop_map(|(k, t)| Op::Call(k, t)),
        8 => (
            prop_oneof![
                Just(Jump::Nanos(1)),
                (0..2 * SEC).prop_map(Jump::Nanos),
                offset().prop_map(Jump::OpenEnd),
                offset().prop_map(Jump::ProbeDeadline),
                offset().prop_map(Jump::MaintenanceEnd),
            ],
            kind(mix)
        )
            .prop_map(|(j, k)| Op::Later(j, k)),
        12 => Just(Op::Acquire),
        3 => Just(Op::AcquireAsync),
        12 => (
            any::<usize>(),
            prop_oneof![
                4 => kind(mix).prop_map(Settle::Report),
                1 => Just(Settle::Drop),
                1 => Just(Settle::Forget),
            ],
            took()
        )
            .prop_map(|(i, s, t)| Op::Settle(i, s, t)),
        10 => prop_oneof![
            Just(1u64),
            0..2 * SEC,
            0..40 * SEC,
        ]
        .prop_map(|n| Op::Advance(Jump::Nanos(n))),
        16 => offset().prop_map(|d| Op::Advance(Jump::OpenEnd(d))),
        6 => offset().prop_map(|d| Op::Advance(Jump::ProbeDeadline(d))),
        4 => offset().prop_map(|d| Op::Advance(Jump::WindowEdge(d))),
        2 => offset().prop_map(|d| Op::Advance(Jump::MaintenanceStart(d))),
        2 => offset().prop_map(|d| Op::Advance(Jump::MaintenanceEnd(d))),
        2 => offset().prop_map(|d| Op::Advance(Jump::RampEnd(d))),
        4 => offset().prop_map(|d| Op::Advance(Jump::LatencyWindowEnd(d))),
        1 => Just(Op::ForceOpen),
        3 => Just(Op::Reset),
    ]
}

/// A run of operations in up to four phases, each mostly failing (an
/// outage, failed probes), mostly succeeding (a recovery, a ramp, quiet
/// successes) or in between.
fn ops() -> impl Strategy<Value = Vec<Op>> {
    let mix = prop::sample::select(vec![(3, 4, 1), (20, 1, 1), (20, 1, 1), (2, 10, 1)]);
    prop::collection::vec((mix, 1..60usize), 1..=4)
        .prop_flat_map(|phases| {
            phases
                .into_iter()
                .map(|(mix, n)| prop::collection::vec(op(mix), n))
                .collect::<Vec<_>>()
        })
        .prop_map(|phases| phases.concat())
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
    ProbeFailureRate,
    ProbeExpired,
    ProbeStuck,
    RampFailed,
    ForcedOpen,
    Reset,
}

fn why(r: &Reason) -> Why {
    match r {
        Reason::ConsecutiveFailures { .. }
        | Reason::FailuresInWindow { .. }
        | Reason::FailureRate { .. }
        | Reason::SlowCallRate { .. }
        | Reason::LatencyBreach { .. }
        | Reason::WindowErrorRate { .. }
        | Reason::TripPredicate { .. }
        | Reason::StuckCalls { .. }
        | Reason::StuckAndHungCalls { .. } => Why::Trip,
        Reason::OpenPeriodElapsed => Why::OpenPeriodElapsed,
        Reason::ProbeSucceeded { .. } => Why::ProbeSucceeded,
        Reason::ProbeFailed => Why::ProbeFailed,
        Reason::ProbeSlow { .. } => Why::ProbeSlow,
        Reason::ProbeFailureRate { .. } => Why::ProbeFailureRate,
        Reason::ProbeExpired => Why::ProbeExpired,
        Reason::ProbeStuck { .. } => Why::ProbeStuck,
        Reason::RampFailed => Why::RampFailed,
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

/// Probes by outcome: successes, failures, expired, ignored, stuck.
type Probes = (u64, u64, u64, u64, u64);

/// What the model says a snapshot shows.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    state: State,
    retry_after: Option<u64>,
    open_duration: u64,
    consecutive_failures: u32,
    consecutive_successes: u64,
    window: (u64, u64, u64),
    probes_in_flight: u32,
    probes: Probes,
    trips: u64,
    reopens: u64,
    backoff_step: u32,
    /// Time in each state, as the state read at each instant: closed,
    /// open, half-open, forced open, forced closed.
    state_times: [u64; 5],
    totals: Totals,
    time_in_state: u64,
    latency: (Option<u64>, u32),
    ramp_fraction: Option<f64>,
    maintenance: Option<u64>,
    neutral_failures: u64,
    calls_in_flight: Option<u64>,
    calls_stuck: Option<u32>,
    last: Option<(State, State, Why, u64)>,
}

/// A ramp in progress.
#[derive(Clone, Copy, Debug)]
struct Ramp {
    began: u64,
    /// The re-opens of the outage it recovers from.
    escalation: u32,
    /// Parts per million: each call offered adds the fraction admitted at
    /// that instant, each call admitted spends a whole one.
    credit: u64,
}

const MILLION: u64 = 1_000_000;

/// The latency policy's current window.
#[derive(Clone, Debug)]
struct LatencyState {
    started: u64,
    /// When the last call was filed.
    last: u64,
    /// The latencies filed in this window, the most recent `capacity`.
    samples: Vec<u64>,
    calls: u64,
    failures: u64,
    breaches: u32,
    last_percentile: Option<u64>,
}

impl LatencyState {
    fn new(now: u64) -> Self {
        LatencyState {
            started: now,
            last: now,
            samples: Vec::new(),
            calls: 0,
            failures: 0,
            breaches: 0,
            last_percentile: None,
        }
    }

    /// Files a call that ended at `now` after `took`; whether a window
    /// that closed trips the breaker.
    fn record(&mut self, p: &Latency, now: u64, took: u64, failed: bool) -> bool {
        let trips = self.roll(p, now);
        self.samples.push(took);
        if self.samples.len() > p.capacity {
            self.samples.remove(0);
        }
        self.calls += 1;
        self.failures += u64::from(failed);
        self.last = now;
        trips
    }

    /// At the first call past a window's end: a window with
    /// `minimum_samples` calls is judged; one with fewer is kept open
    /// while calls come, up to four window lengths, and dropped after
    /// (a whole window length with no call breaks the run of breaches).
    /// The next window starts on the grid of the first.
    fn roll(&mut self, p: &Latency, now: u64) -> bool {
        let elapsed = now - self.started;
        if elapsed < p.window {
            return false;
        }
        let silent = now - self.last >= p.window;
        let trips = if self.calls >= u64::from(p.minimum_samples) {
            self.judge(p)
        } else if !silent && elapsed < 4 * p.window {
            return false;
        } else {
            self.breaches = 0;
            false
        };
        if silent {
            self.breaches = 0;
        }
        self.started = now - elapsed % p.window;
        self.samples.clear();
        self.calls = 0;
        self.failures = 0;
        trips
    }

    /// A full window: its error rate trips at once, its percentile (the
    /// nearest rank over the samples, sorted) adds to the run of breaches.
    fn judge(&mut self, p: &Latency) -> bool {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let n = sorted.len() as u64;
        let rank = (u64::from(p.percentile_quarters) * n).div_ceil(4);
        let observed = sorted[(rank.clamp(1, n) - 1) as usize];
        self.last_percentile = Some(observed);
        if p.error_quarters
            .is_some_and(|k| 4 * self.failures >= u64::from(k) * self.calls)
        {
            self.breaches = 0;
            return true;
        }
        if observed > p.threshold {
            self.breaches += 1;
            if self.breaches >= p.consecutive_windows {
                self.breaches = 0;
                return true;
            }
        } else {
            self.breaches = 0;
        }
        false
    }

    /// Starts afresh when the breaker closes; the last percentile stays.
    fn clear(&mut self, now: u64) {
        *self = LatencyState {
            last_percentile: self.last_percentile,
            ..LatencyState::new(now)
        };
    }
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
    consecutive_successes: u64,
    /// (when, failed, slow) for every call counted in the window since it
    /// was last cleared.
    events: Vec<(u64, bool, bool)>,
    latency: Option<LatencyState>,
    /// Outstanding probes of this half-open period: (id, deadline, whether
    /// the deadline is the stuck mark).
    probes: Vec<(u64, u64, bool)>,
    /// The closed calls of this period tracked in flight, by value
    /// (period, start): at most 64, and a call that reports frees a value
    /// equal to its own, whichever call claimed it.
    in_flight: Vec<(u64, u64)>,
    /// Calls cancelled.
    cancelled: u64,
    /// Probes admitted in this half-open period, less those that gave
    /// their place back.
    probes_admitted: u32,
    probe_successes: u32,
    probe_failures: u32,
    next_probe: u64,
    probe_totals: Probes,
    ramp: Option<Ramp>,
    neutral_failures: u64,
    /// With `closed_interval`: when the closed-state counts are next
    /// cleared.
    interval_end: u64,
    /// Permits given out.
    admitted: u64,
    trips: u64,
    reopens_total: u64,
    totals: Totals,
    state_times: [u64; 5],
    last: Option<(State, State, Why, u64)>,
}

/// A state's place in [`Observed::state_times`].
fn slot(state: State) -> usize {
    match state {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::ForcedClosed => 4,
    }
}

impl Model {
    fn new(cfg: Cfg) -> Self {
        Model {
            latency: cfg.latency.as_ref().map(|_| LatencyState::new(0)),
            interval_end: cfg.closed_interval.unwrap_or(u64::MAX),
            cfg,
            now: 0,
            state: State::Closed,
            entered_at: 0,
            period: 0,
            open_until: 0,
            open_duration: 0,
            reopens: 0,
            consecutive: 0,
            consecutive_successes: 0,
            events: Vec::new(),
            probes: Vec::new(),
            in_flight: Vec::new(),
            cancelled: 0,
            probes_admitted: 0,
            probe_successes: 0,
            probe_failures: 0,
            next_probe: 0,
            probe_totals: (0, 0, 0, 0, 0),
            ramp: None,
            neutral_failures: 0,
            admitted: 0,
            trips: 0,
            reopens_total: 0,
            totals: Totals::default(),
            state_times: [0; 5],
            last: None,
        }
    }

    /// The state a call arriving at `t` would meet, nothing happening in
    /// between: an open breaker is half-open from the end of its period, a
    /// half-open one open from a probe's deadline.
    fn reads(&self, t: u64) -> State {
        match self.state {
            State::Open if t >= self.open_until => State::HalfOpen,
            State::HalfOpen if self.probes.iter().any(|&(_, d, _)| d <= t) => State::Open,
            s => s,
        }
    }

    /// Moves the clock `d` on, filing each stretch of time under the state
    /// read at its start: the reading can change only at the end of the
    /// open period or at a probe's deadline.
    fn advance(&mut self, d: u64) {
        let end = self.now + d;
        let mut cuts: Vec<u64> = self
            .probes
            .iter()
            .map(|p| p.1)
            .chain([self.open_until])
            .filter(|&t| t > self.now && t < end)
            .collect();
        cuts.push(end);
        cuts.sort_unstable();
        let mut t = self.now;
        for cut in cuts {
            self.state_times[slot(self.reads(t))] += cut - t;
            t = cut;
        }
        self.now = end;
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

    /// The events the window conditions judge: the last `count_window`
    /// calls, or those within the time window.
    fn windowed(&self) -> Vec<(u64, bool, bool)> {
        match self.cfg.count_window {
            Some(n) => {
                let skip = self.events.len().saturating_sub(n as usize);
                self.events[skip..].to_vec()
            }
            None => self
                .events
                .iter()
                .copied()
                .filter(|e| self.in_window(e.0))
                .collect(),
        }
    }

    /// (calls, failures, slow) in the window now.
    fn window(&self) -> (u64, u64, u64) {
        if !self.cfg.uses_window() {
            return (0, 0, 0);
        }
        let mut c = (0, 0, 0);
        for (_, failed, slow) in self.windowed() {
            c.0 += 1;
            c.1 += u64::from(failed);
            c.2 += u64::from(slow);
        }
        c
    }

    /// When the oldest event still in a time window will have aged out.
    fn window_edge(&self) -> Option<u64> {
        if self.cfg.count_window.is_some() {
            return None;
        }
        let w = self.bucket();
        self.events
            .iter()
            .filter(|e| self.in_window(e.0))
            .map(|e| (e.0 / w + 11) * w)
            .min()
    }

    /// The end of the maintenance window the clock is in.
    fn maintenance_end(&self) -> Option<u64> {
        let (start, end, _) = self.cfg.maintenance?;
        (start <= self.now && self.now < end).then_some(end)
    }

    /// The share of calls a ramp admits now, in parts per million: from
    /// its start, rising in a straight line to all of them at its end.
    fn ramp_ppm(&self, r: &Ramp) -> u64 {
        let (lasting, k) = self.cfg.ramp.expect("a ramp runs only when configured");
        let start = u64::from(k) * MILLION / 4;
        let elapsed = self.now - r.began;
        if elapsed >= lasting {
            return MILLION;
        }
        start + (MILLION - start) * elapsed / lasting
    }

    fn enter(&mut self, to: State, why: Why) {
        self.last = Some((self.state, to, why, self.now));
        self.state = to;
        self.entered_at = self.now;
        self.probes.clear();
        self.probes_admitted = 0;
        self.probe_successes = 0;
        self.probe_failures = 0;
        self.consecutive_successes = 0;
    }

    /// min(max, base × multiplier^reopens), by repeated multiplication.
    fn nominal(&self, reopens: u32) -> u64 {
        let mut d = u128::from(self.cfg.base);
        for _ in 0..reopens {
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
        match why {
            Why::ProbeExpired => self.probe_totals.2 += 1,
            Why::ProbeStuck => self.probe_totals.4 += 1,
            _ => {}
        }
        self.open_duration = self.nominal(self.reopens);
        self.open_until = self.now + self.open_duration;
        self.enter(State::Open, why);
    }

    fn close(&mut self, why: Why) {
        self.period += 1;
        // The calls of the period that ended count for nothing now.
        self.in_flight.clear();
        self.interval_end = self.cfg.closed_interval.map_or(u64::MAX, |d| self.now + d);
        self.reopens = 0;
        self.consecutive = 0;
        self.open_duration = 0;
        self.events.clear();
        self.ramp = None;
        let now = self.now;
        if let Some(l) = &mut self.latency {
            l.clear(now);
        }
        self.enter(State::Closed, why);
    }

    /// Closed by its probes: a ramp begins, if configured.
    fn close_on_probes(&mut self) {
        let escalation = self.reopens;
        self.close(Why::ProbeSucceeded);
        if self.cfg.ramp.is_some() {
            self.ramp = Some(Ramp {
                began: self.now,
                escalation,
                credit: 0,
            });
        }
    }

    fn refuse(&mut self, state: State, retry_after: Option<u64>) -> Admission {
        self.totals.short_circuits += 1;
        Admission::Refuse(state, retry_after)
    }

    fn admit(&mut self) -> Admission {
        let admission = self.decide();
        if let Admission::Go(_) = admission {
            self.admitted += 1;
        }
        admission
    }

    fn decide(&mut self) -> Admission {
        match self.state {
            State::Closed if self.stuck_calls_trip() => {
                self.open(Why::Trip);
                self.refuse(State::Open, Some(self.open_until - self.now))
            }
            State::Closed => self.admit_closed(),
            State::ForcedOpen => self.refuse(State::ForcedOpen, None),
            State::ForcedClosed => unreachable!("the model never forces a breaker closed"),
            State::Open if self.now < self.open_until => {
                self.refuse(State::Open, Some(self.open_until - self.now))
            }
            State::Open => {
                self.enter(State::HalfOpen, Why::OpenPeriodElapsed);
                self.admit_probe()
            }
            State::HalfOpen => {
                if self.reads(self.now) == State::Open {
                    self.open(self.expiry_why());
                    self.refuse(State::Open, Some(self.open_until - self.now))
                } else {
                    self.admit_probe()
                }
            }
        }
    }

    /// Closed: refused in a maintenance window that short-circuits, and
    /// during a ramp unless the ramp's credit covers the call.
    fn admit_closed(&mut self) -> Admission {
        if let (Some(end), Some((_, _, true))) = (self.maintenance_end(), self.cfg.maintenance) {
            return self.refuse(State::Closed, Some(end - self.now));
        }
        if let Some(mut r) = self.ramp {
            let ppm = self.ramp_ppm(&r);
            if ppm >= MILLION {
                self.ramp = None;
            } else {
                r.credit += ppm;
                let admitted = r.credit >= MILLION;
                if admitted {
                    r.credit -= MILLION;
                }
                self.ramp = Some(r);
                if !admitted {
                    return self.refuse(State::Closed, None);
                }
            }
        }
        Admission::Go(Ticket::Closed {
            period: self.period,
        })
    }

    /// Half-open: a probe goes while fewer than `half_open_max_concurrent` are
    /// out and the period's cap (`half_open_max_probes`, the rate round)
    /// is not reached; else refused until the first probe's deadline.
    fn admit_probe(&mut self) -> Admission {
        let cap = [
            self.cfg.half_open_max_probes,
            self.cfg.half_open_rate.map(|r| r.0),
        ]
        .into_iter()
        .flatten()
        .min();
        let capped = cap.is_some_and(|c| self.probes_admitted >= c);
        if !capped && self.probes.len() < self.cfg.half_open_max_concurrent as usize {
            self.next_probe += 1;
            self.probes_admitted += 1;
            let id = self.next_probe;
            let mark = self.cfg.probe_stuck_after().map_or(u64::MAX, |d| d + 1);
            let stuck = mark < self.cfg.probe_budget;
            let deadline = self.now + self.cfg.probe_budget.min(mark);
            self.probes.push((id, deadline, stuck));
            Admission::Go(Ticket::Probe { id })
        } else {
            let first_deadline = self.probes.iter().map(|p| p.1 - self.now).min();
            self.refuse(State::HalfOpen, first_deadline)
        }
    }

    /// With `closed_interval`, once the interval has ended while closed:
    /// the failure run, the success run and the window start over, and the
    /// interval that holds now begins.
    fn roll_interval(&mut self) {
        let Some(d) = self.cfg.closed_interval else {
            return;
        };
        if self.state != State::Closed || self.now < self.interval_end {
            return;
        }
        while self.interval_end <= self.now {
            self.interval_end += d;
        }
        self.consecutive = 0;
        self.consecutive_successes = 0;
        self.events.clear();
    }

    /// The call admitted with `ticket` ends now, after `took`.
    fn record(&mut self, ticket: Ticket, kind: Kind, took: u64) {
        let kind = match kind {
            Kind::BadValue if self.cfg.result_classifier => Kind::Failure,
            Kind::BadValue => Kind::Success,
            k => k,
        };
        if kind == Kind::Failure && self.maintenance_end().is_some() {
            // Neutral: no counter at all. A probe gives its place back,
            // unless its round is past a deadline: then it has failed.
            self.neutral_failures += 1;
            self.give_back(ticket);
            return;
        }
        let slow = kind == Kind::Success && self.cfg.slow_call.is_some_and(|d| took > d);
        let t = &mut self.totals;
        t.calls += 1;
        match kind {
            Kind::Success => t.successes += 1,
            Kind::Failure => t.failures += 1,
            Kind::Ignore => t.ignored += 1,
            Kind::BadValue => unreachable!("judged above"),
        }
        t.slow += u64::from(slow);
        match ticket {
            Ticket::Closed { period } if self.state == State::Closed && period == self.period => {
                self.roll_interval();
                self.closed_outcome(kind, slow, took)
            }
            Ticket::Probe { id }
                if self.state == State::HalfOpen && self.probes.iter().any(|p| p.0 == id) =>
            {
                self.probe_outcome(id, kind, took)
            }
            _ => {} // stale: the lifetime totals only
        }
    }

    fn closed_outcome(&mut self, kind: Kind, slow: bool, took: u64) {
        let failed = match kind {
            Kind::Ignore | Kind::BadValue => return,
            Kind::Success => {
                self.consecutive = 0;
                self.consecutive_successes += 1;
                false
            }
            Kind::Failure => {
                // A failure ends a ramp; one before its end is a relapse,
                // and the outage's backoff goes on.
                if let Some(r) = self.ramp.take() {
                    if self.ramp_ppm(&r) < MILLION {
                        self.reopens = r.escalation;
                        self.open(Why::RampFailed);
                        return;
                    }
                }
                self.consecutive += 1;
                self.consecutive_successes = 0;
                true
            }
        };
        if self.cfg.uses_window() {
            self.events.push((self.now, failed, slow));
        }
        let now = self.now;
        let latency_trips = match (&mut self.latency, &self.cfg.latency) {
            (Some(l), Some(p)) => l.record(p, now, took, failed),
            _ => false,
        };
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
            c.trip_predicate
                .is_some_and(|(f, s)| failures >= f || self.consecutive_successes >= s),
            latency_trips,
        ];
        if conditions.contains(&true) {
            self.open(Why::Trip);
        }
    }

    fn probe_outcome(&mut self, id: u64, kind: Kind, took: u64) {
        // A probe that answers at or after its deadline has already failed,
        // and so has the round when another probe is past its own.
        let expired = (self.reads(self.now) == State::Open).then(|| self.expiry_why());
        self.probes.retain(|p| p.0 != id);
        if let Some(why) = expired {
            self.open(why);
            return;
        }
        let slow = self.cfg.probe_slow_after().is_some_and(|d| took > d);
        match kind {
            Kind::Ignore => self.probe_totals.3 += 1,
            Kind::Success if !slow => self.probe_totals.0 += 1,
            _ => self.probe_totals.1 += 1,
        }
        if kind == Kind::Ignore {
            // Gives its place back, decides nothing.
            self.probes_admitted -= 1;
            return;
        }
        if let Some((round, k)) = self.cfg.half_open_rate {
            // Decided as soon as the rest of the round cannot change it.
            if kind == Kind::Success && !slow {
                self.probe_successes += 1;
                self.consecutive_successes += 1;
            } else {
                self.probe_failures += 1;
            }
            let worst = round.saturating_sub(self.probe_successes);
            if 4 * self.probe_failures >= k * round {
                self.open(Why::ProbeFailureRate);
            } else if 4 * worst < k * round {
                self.close_on_probes();
            }
            return;
        }
        match kind {
            Kind::Failure => self.open(Why::ProbeFailed),
            Kind::Success if slow => self.open(Why::ProbeSlow),
            _ => {
                self.probe_successes += 1;
                self.consecutive_successes += 1;
                if self.probe_successes >= self.cfg.success_threshold {
                    self.close_on_probes();
                }
            }
        }
    }

    /// What a snapshot shows, taken now: it clears the closed-state counts
    /// of an interval that has ended, as a call would.
    fn observe(&mut self) -> Observed {
        self.roll_interval();
        self.observed()
    }

    /// What a snapshot shows: the state a call made now would meet.
    fn observed(&self) -> Observed {
        let mut o = Observed {
            state: self.state,
            retry_after: (self.state == State::Open)
                .then(|| self.open_until.saturating_sub(self.now)),
            open_duration: self.open_duration,
            consecutive_failures: self.consecutive,
            consecutive_successes: self.consecutive_successes,
            window: self.window(),
            probes_in_flight: self.probes.len() as u32,
            probes: self.probe_totals,
            trips: self.trips,
            reopens: self.reopens_total,
            backoff_step: self.reopens,
            state_times: self.state_times,
            totals: self.totals,
            time_in_state: self.now - self.entered_at,
            latency: self
                .latency
                .as_ref()
                .map_or((None, 0), |l| (l.last_percentile, l.breaches)),
            ramp_fraction: self
                .ramp
                .filter(|_| self.state == State::Closed)
                .map(|r| self.ramp_ppm(&r))
                .filter(|&ppm| ppm < MILLION)
                .map(|ppm| ppm as f64 / MILLION as f64),
            maintenance: self.maintenance_end().map(|end| end - self.now),
            neutral_failures: self.neutral_failures,
            calls_in_flight: match (self.cfg.count_in_flight, self.cfg.tracks_in_flight()) {
                (true, _) => {
                    Some(self.admitted - self.totals.calls - self.neutral_failures - self.cancelled)
                }
                (false, true) => Some(self.tracked().count() as u64),
                (false, false) => None,
            },
            calls_stuck: self.cfg.tracks_in_flight().then(|| {
                let mark = match self.cfg.stuck {
                    Some(_) => self.cfg.slow_call,
                    None => self.cfg.hung,
                };
                let mark = mark.expect("a mark is set");
                self.tracked().filter(|&&(_, s)| self.age(s) > mark).count() as u32
            }),
            last: self.last,
        };
        match (self.state, self.reads(self.now)) {
            (State::Open, State::HalfOpen) => {
                // The next call is the probe.
                o.state = State::HalfOpen;
                o.retry_after = None;
                o.time_in_state = self.now - self.open_until;
            }
            (State::HalfOpen, State::Open) => {
                // The next call re-opens it, for the next period of the
                // outage; it has read open since the first deadline.
                let period = self.nominal(self.reopens + 1);
                let deadline = self.probes.iter().map(|p| p.1).min();
                o.state = State::Open;
                o.retry_after = Some(period);
                o.open_duration = period;
                o.time_in_state = self.now - deadline.expect("a probe is out");
                o.probes_in_flight = 0;
            }
            _ => {}
        }
        o
    }
}

impl Model {
    /// The calls of the current period tracked in flight, by start.
    fn tracked(&self) -> impl Iterator<Item = &(u64, u64)> {
        self.in_flight.iter().filter(|c| c.0 == self.period)
    }

    /// A closed call admitted now is tracked, while fewer than 64 are.
    fn claim(&mut self, ticket: Ticket) {
        if let (true, Ticket::Closed { period }) = (self.cfg.tracks_in_flight(), ticket) {
            if period == self.period && self.tracked().count() < 64 {
                self.in_flight.push((period, self.now));
            }
        }
    }

    /// A closed call that started at `started` reports or is cancelled: a
    /// tracked value equal to its own is freed.
    fn release(&mut self, ticket: Ticket, started: u64) {
        if let Ticket::Closed { period } = ticket {
            if let Some(i) = self.in_flight.iter().position(|&c| c == (period, started)) {
                self.in_flight.remove(i);
            }
        }
    }

    /// How long a call in flight since `start` has been out, as the marks
    /// count it: from its start, or from the end of the maintenance window
    /// it was out through; 0 inside the window.
    fn age(&self, start: u64) -> u64 {
        let from = match self.cfg.maintenance {
            Some((begin, _, _)) if self.now < begin => 0,
            Some((_, end, _)) => end.min(self.now),
            None => 0,
        };
        self.now - start.max(from)
    }

    /// At a closed admission, and at a look that makes no call: whether
    /// the calls in flight open the breaker, one past `hung` or `stuck`
    /// past `slow_call`, each aged as [`age`](Self::age) says (so never
    /// inside a maintenance window).
    fn stuck_calls_trip(&self) -> bool {
        let past = |mark: u64| self.tracked().filter(|&&(_, s)| self.age(s) > mark).count();
        let hung = self.cfg.hung.is_some_and(|d| past(d) > 0);
        let stuck = self
            .cfg
            .stuck
            .zip(self.cfg.slow_call)
            .is_some_and(|(n, d)| past(d) >= n as usize);
        hung || stuck
    }

    /// Why the probes failed at the first deadline: stuck, if a probe due
    /// then was judged by its slow mark.
    fn expiry_why(&self) -> Why {
        let first = self.probes.iter().map(|p| p.1).min();
        let stuck = self.probes.iter().any(|p| Some(p.1) == first && p.2);
        if stuck {
            Why::ProbeStuck
        } else {
            Why::ProbeExpired
        }
    }

    /// A call admitted with `ticket` at `started` is cancelled now: no
    /// outcome; a probe gives its place back, unless the round is past a
    /// deadline, when it re-opens.
    #[cfg(feature = "async")]
    fn cancel(&mut self, ticket: Ticket, started: u64) {
        self.cancelled += 1;
        self.release(ticket, started);
        self.give_back(ticket);
    }

    /// A probe that ends with no outcome (cancelled, or a failure inside a
    /// maintenance window) gives its place back, unless its round is past
    /// a deadline: then it has failed and the breaker re-opens.
    fn give_back(&mut self, ticket: Ticket) {
        if let Ticket::Probe { id } = ticket {
            if let Some(i) = self.probes.iter().position(|p| p.0 == id) {
                if self.state == State::HalfOpen && self.reads(self.now) == State::Open {
                    self.open(self.expiry_why());
                    return;
                }
                self.probes.remove(i);
                self.probes_admitted = self.probes_admitted.saturating_sub(1);
            }
        }
    }

    /// A look that makes no call (`would_permit`, `state`, a snapshot):
    /// closed, the calls in flight open the breaker if the next call would
    /// open it on them. Nothing else changes.
    fn look(&mut self) {
        if self.state == State::Closed && self.stuck_calls_trip() {
            self.open(Why::Trip);
        }
    }

    /// Whether a call made now would be admitted, changing nothing (after
    /// a [`look`](Self::look)).
    fn would_admit(&self) -> bool {
        match self.state {
            State::Closed => {
                let short = matches!(self.cfg.maintenance, Some((_, _, true)));
                if short && self.maintenance_end().is_some() {
                    return false;
                }
                self.ramp.is_none_or(|r| {
                    let ppm = self.ramp_ppm(&r);
                    ppm >= MILLION || r.credit + ppm >= MILLION
                })
            }
            State::ForcedOpen => false,
            State::ForcedClosed => unreachable!("the model never forces a breaker closed"),
            State::Open => self.now >= self.open_until,
            State::HalfOpen => {
                let cap = [
                    self.cfg.half_open_max_probes,
                    self.cfg.half_open_rate.map(|r| r.0),
                ]
                .into_iter()
                .flatten()
                .min();
                self.reads(self.now) != State::Open
                    && cap.is_none_or(|c| self.probes_admitted < c)
                    && self.probes.len() < self.cfg.half_open_max_concurrent as usize
            }
        }
    }

    fn force_open(&mut self) {
        self.open_duration = 0;
        self.enter(State::ForcedOpen, Why::ForcedOpen);
    }

    fn reset(&mut self) {
        self.close(Why::Reset);
    }

    fn took(&self, took: Took) -> u64 {
        let latency = self.cfg.latency.as_ref().map(|l| l.threshold);
        let slow = self.cfg.slow_call.or(latency).unwrap_or(100 * MS);
        let latency = latency.unwrap_or(100 * MS);
        match took {
            Took::Nothing => 0,
            Took::AtSlowLimit => slow,
            Took::OverSlowLimit => slow + 1,
            Took::AtLatencyLimit => latency,
            Took::OverLatencyLimit => latency + 1,
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
            Jump::MaintenanceStart(d) => (self.cfg.maintenance.map(|m| m.0), d),
            Jump::MaintenanceEnd(d) => (self.cfg.maintenance.map(|m| m.1), d),
            Jump::RampEnd(d) => (
                self.ramp
                    .zip(self.cfg.ramp)
                    .map(|(r, (lasting, _))| r.began + lasting),
                d,
            ),
            Jump::LatencyWindowEnd(d) => (
                self.latency
                    .as_ref()
                    .zip(self.cfg.latency.as_ref())
                    .map(|(l, p)| l.started + p.window),
                d,
            ),
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

/// What holds a call out: a permit, or an async call's pending future.
enum Out<'b> {
    Permit(Permit<'b>),
    #[cfg(feature = "async")]
    Future(std::pin::Pin<Box<dyn std::future::Future<Output = Pending> + 'b>>),
}

/// What a pending async call would return.
#[cfg(feature = "async")]
type Pending = Result<u32, CallError<DepError>>;

struct Held<'b> {
    out: Out<'b>,
    ticket: Ticket,
    started: u64,
}

/// An async call to `b` that never completes, polled once: admitted and
/// out, or refused.
#[cfg(feature = "async")]
fn acquire_async(b: &Breaker) -> Result<Out<'_>, fusebox::Rejected> {
    use std::task::{Context, Poll, Waker};
    let mut call: std::pin::Pin<Box<dyn std::future::Future<Output = Pending> + '_>> =
        Box::pin(b.call_async(std::future::pending::<Result<u32, DepError>>()));
    match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Pending => Ok(Out::Future(call)),
        Poll::Ready(Err(CallError::Rejected(r))) => Err(r),
        Poll::Ready(other) => panic!("a pending call returned {other:?}"),
    }
}

/// Without the async guard, a plain permit stands in.
#[cfg(not(feature = "async"))]
fn acquire_async(b: &Breaker) -> Result<Out<'_>, fusebox::Rejected> {
    b.try_acquire().map(Out::Permit)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("fits")
}

fn real(b: &Breaker, base: quanta::Instant) -> Observed {
    let s = b.snapshot();
    let t = s.totals;
    let st = s.state_times;
    Observed {
        state: s.state,
        retry_after: s.retry_after.map(nanos),
        open_duration: nanos(s.open_duration),
        consecutive_failures: s.consecutive_failures,
        consecutive_successes: s.consecutive_successes,
        window: (s.window_calls, s.window_failures, s.window_slow_calls),
        probes_in_flight: s.probes_in_flight,
        probes: (
            s.probes.successes,
            s.probes.failures,
            s.probes.expired,
            s.probes.ignored,
            s.probes.stuck,
        ),
        trips: s.trips,
        reopens: s.reopens,
        backoff_step: s.backoff_step,
        state_times: [
            st.closed,
            st.open,
            st.half_open,
            st.forced_open,
            st.forced_closed,
        ]
        .map(nanos),
        totals: Totals {
            calls: t.calls,
            successes: t.successes,
            failures: t.failures,
            ignored: t.ignored,
            slow: t.slow,
            short_circuits: t.short_circuits,
        },
        time_in_state: nanos(s.time_in_state),
        latency: (s.latency_percentile.map(nanos), s.latency_breaches),
        ramp_fraction: s.ramp_fraction,
        maintenance: s.maintenance.map(nanos),
        neutral_failures: s.neutral_failures,
        calls_in_flight: s.calls_in_flight,
        calls_stuck: s.calls_stuck,
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
        Kind::BadValue => Ok(2),
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

/// A call made now that takes `took`, on the breaker and on the model.
fn call(
    b: &Breaker,
    mock: &quanta::Mock,
    m: &mut Model,
    step: usize,
    op: Op,
    kind: Kind,
    took: u64,
) -> Result<(), TestCaseError> {
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
                (Kind::BadValue, Ok(2)) => {}
                _ => prop_assert!(false, "step {}: {:?} returned {:?}", step, op, got),
            }
            m.claim(ticket);
            m.advance(took);
            m.release(ticket, m.now - took);
            m.record(ticket, kind, took);
        }
        Admission::Refuse(state, retry_after) => {
            prop_assert!(!invoked.get(), "step {}: {:?} should be refused", step, op);
            match &got {
                Err(CallError::Rejected(r)) => check_refusal(step, r, state, retry_after)?,
                other => prop_assert!(false, "step {}: refused, got {:?}", step, other),
            }
        }
    }
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
                call(&b, &mock, &mut m, step, op, kind, took)?;
            }
            Op::Later(jump, kind) => {
                let d = m.jump(jump);
                mock.increment(d);
                m.advance(d);
                call(&b, &mock, &mut m, step, op, kind, 0)?;
            }
            Op::Acquire | Op::AcquireAsync => match (m.admit(), acquire(&b, op)) {
                (Admission::Go(ticket), Ok(out)) => {
                    #[cfg_attr(not(feature = "async"), allow(irrefutable_let_patterns))]
                    if let Out::Permit(permit) = &out {
                        prop_assert_eq!(
                            permit.is_probe(),
                            matches!(ticket, Ticket::Probe { .. }),
                            "step {}",
                            step
                        );
                    }
                    m.claim(ticket);
                    held.push(Held {
                        out,
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
                    got.map(|_| "admitted")
                ),
            },
            Op::Settle(i, settle, took) => {
                if !held.is_empty() {
                    let h = held.remove(i % held.len());
                    let took = m.took(took);
                    mock.increment(took);
                    m.advance(took);
                    let elapsed = m.now - h.started;
                    #[cfg_attr(
                        not(feature = "async"),
                        allow(clippy::infallible_destructuring_match)
                    )]
                    let permit = match h.out {
                        Out::Permit(permit) => permit,
                        #[cfg(feature = "async")]
                        Out::Future(call) => {
                            // Dropped before it completes: cancelled.
                            drop(call);
                            m.cancel(h.ticket, h.started);
                            continue_checks(&b, &mut m, base, step, op)?;
                            continue;
                        }
                    };
                    if !matches!(settle, Settle::Forget) {
                        m.release(h.ticket, h.started);
                    }
                    match settle {
                        Settle::Report(kind) => {
                            match kind {
                                Kind::Success => permit.record(Verdict::Success),
                                Kind::Failure => permit.record(Verdict::Failure),
                                Kind::Ignore => permit.record(Verdict::Ignore),
                                Kind::BadValue => {
                                    permit.finish(&Ok::<u32, DepError>(2));
                                }
                            }
                            m.record(h.ticket, kind, elapsed);
                        }
                        Settle::Drop => {
                            drop(permit);
                            m.record(h.ticket, Kind::Failure, elapsed);
                        }
                        Settle::Forget => std::mem::forget(permit),
                    }
                }
            }
            Op::Advance(jump) => {
                let d = m.jump(jump);
                mock.increment(d);
                m.advance(d);
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
        continue_checks(&b, &mut m, base, step, op)?;
    }
    Ok(())
}

/// A call out for `op`: a permit, or for `AcquireAsync` a pending async
/// call.
fn acquire(b: &Breaker, op: Op) -> Result<Out<'_>, fusebox::Rejected> {
    match op {
        Op::AcquireAsync => acquire_async(b),
        _ => b.try_acquire().map(Out::Permit),
    }
}

/// After each step: the breaker and the model agree on everything a
/// snapshot shows.
fn continue_checks(
    b: &Breaker,
    m: &mut Model,
    base: quanta::Instant,
    step: usize,
    op: Op,
) -> Result<(), TestCaseError> {
    // The first look opens a breaker its calls in flight would open at the
    // next call; the others read what it left.
    m.look();
    prop_assert_eq!(
        b.would_permit(),
        m.would_admit(),
        "step {}: would_permit after {:?}",
        step,
        op
    );
    prop_assert_eq!(
        b.state(),
        m.observed().state,
        "step {}: state after {:?}",
        step,
        op
    );
    prop_assert_eq!(real(b, base), m.observe(), "step {}: after {:?}", step, op);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2_048,
        max_shrink_iters: 4_096,
        // The seeds of past failures, read before any new case and appended
        // to on a new failure. Named here rather than found from this file's
        // place in the tree, so that moving the file keeps its seeds.
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/proptest-regressions/model.txt"
            )),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_breaker_matches_the_reference_model(
        cfg in cfg_strategy(),
        ops in ops(),
    ) {
        run(&cfg, &ops)?;
    }
}

/// The model's own sanity: a hand-written run whose answers are known.
#[test]
fn the_model_agrees_on_a_known_outage() {
    let cfg = Cfg::plain();
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

/// The model's own sanity: a probe that hangs past its deadline leaves the
/// breaker reading open, and the time from the deadline on is open time.
#[test]
fn the_model_files_time_past_a_probes_deadline_as_open_time() {
    let cfg = Cfg::plain();
    let ops = [
        Op::Call(Kind::Failure, Took::Nothing),
        Op::Call(Kind::Failure, Took::Nothing),
        Op::Advance(Jump::Nanos(SEC)),
        Op::Acquire,
        Op::Settle(0, Settle::Forget, Took::Nothing),
        Op::Advance(Jump::Nanos(5 * SEC)),
    ];
    run(&cfg, &ops).unwrap();
    let mut m = Model::new(cfg);
    for op in ops {
        match op {
            Op::Call(kind, _) => {
                let Admission::Go(t) = m.admit() else {
                    panic!("closed")
                };
                m.record(t, kind, 0);
            }
            Op::Acquire => assert!(matches!(m.admit(), Admission::Go(Ticket::Probe { .. }))),
            Op::Advance(Jump::Nanos(n)) => m.advance(n),
            _ => {}
        }
    }
    let o = m.observed();
    assert_eq!(o.state, State::Open);
    assert_eq!(o.state_times, [0, 3 * SEC, 3 * SEC, 0, 0]);
    assert_eq!(o.time_in_state, 2 * SEC);
}
