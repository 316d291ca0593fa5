//! A point-in-time view of a breaker, for metrics gauges and dashboards.

use std::sync::Arc;
use std::time::Duration;

use crate::{CallDurations, State, StateChange};

/// Lifetime counts. They never go down (not even on
/// [`reset`](crate::Breaker::reset)), so they map straight onto monotonic
/// counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Totals {
    /// Calls that reported an outcome.
    pub calls: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Calls that failed in a way that counts against the dependency.
    pub failures: u64,
    /// Calls whose error the classifier ignored.
    pub ignored: u64,
    /// Successful calls slower than `slow_call_duration`.
    pub slow: u64,
    /// Calls refused without being attempted: the number of times the
    /// caller had to take its fallback.
    pub short_circuits: u64,
    /// Calls admitted and dropped before they finished: an async caller's
    /// future cancelled (a `select!` that took another branch, a timeout
    /// around the guarded future, a task aborted). Neither a success nor a
    /// failure, and not in [`calls`](Self::calls): nothing is known of how
    /// the dependency would have answered.
    pub cancelled: u64,
}

/// Half-open probes by outcome, over the breaker's life. Like [`Totals`]
/// they never go down.
///
/// A probe counts once, when it settles the question it was sent for: a
/// probe that reports after the breaker has left that half-open period
/// (it re-opened on another probe, or an operator stepped in) counts in
/// [`Totals`] only, and so does a failure made neutral by a maintenance
/// window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProbeTotals {
    /// Probes that succeeded in time.
    pub successes: u64,
    /// Probes that failed, or succeeded slower than `slow_call_duration` (or
    /// the latency policy's threshold): either way the breaker re-opens.
    pub failures: u64,
    /// Half-open periods ended by a probe out past `max_probe_duration`:
    /// one each, whichever call or report found it.
    pub expired: u64,
    /// Half-open periods ended by a probe out past its slow mark, with
    /// `stuck_call_threshold` or `hung_call_duration` set
    /// ([`Reason::ProbeStuck`](crate::Reason::ProbeStuck)), before
    /// `max_probe_duration`: one each, whichever call, report or look
    /// found it. Not in `expired`.
    pub stuck: u64,
    /// Probes whose error the classifier ignored: they give their place
    /// back and decide nothing.
    pub ignored: u64,
}

/// Time spent in each state over the breaker's life, read from the
/// instants of its state changes (nothing is timed on the hot path). Each
/// maps onto a monotonic counter: "time open per provider per day" is one
/// `increase()` of `fusebox_breaker_state_seconds_total{state="open"}`.
///
/// The current state's time runs to the instant the snapshot read the
/// clock, and the snapshot files it there: a call that read the clock
/// before that instant and changes the state after the snapshot moves
/// nothing back, so each state's time never reads lower in a later
/// snapshot, whatever the order of racing readers.
///
/// The time is assigned as [`Snapshot::state`] reads it: once an open
/// period has ended with no call to probe, the time after its end is
/// half-open time; once a half-open probe is past `max_probe_duration`,
/// the time after its deadline is open time; once an override has expired
/// with nothing to end it, closed time. The call that makes such a change
/// real moves no time back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateTimes {
    /// Time closed.
    pub closed: Duration,
    /// Time open.
    pub open: Duration,
    /// Time half-open.
    pub half_open: Duration,
    /// Time forced open by an operator.
    pub forced_open: Duration,
    /// Time forced closed by an operator.
    pub forced_closed: Duration,
}

impl StateTimes {
    /// The time spent in `state`.
    // Only the Prometheus exposition reads the times by state.
    #[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
    pub(crate) fn get(&self, state: State) -> Duration {
        match state {
            State::Closed => self.closed,
            State::Open => self.open,
            State::HalfOpen => self.half_open,
            State::ForcedOpen => self.forced_open,
            State::ForcedClosed => self.forced_closed,
        }
    }

    /// From nanoseconds in the states' order ([`State::index`]).
    pub(crate) fn from_nanos(n: [u64; 5]) -> Self {
        let at = |state: State| Duration::from_nanos(n[state.index()]);
        StateTimes {
            closed: at(State::Closed),
            open: at(State::Open),
            half_open: at(State::HalfOpen),
            forced_open: at(State::ForcedOpen),
            forced_closed: at(State::ForcedClosed),
        }
    }
}

/// A consistent view of a breaker at one instant.
///
/// **It shows the state a call made at that instant would meet**, so that a
/// gauge that only reads snapshots sees the truth while the breaker is idle:
///
/// - an open breaker whose period has ended reads [`State::HalfOpen`], with
///   no probe in flight and no `retry_after`: the next call is the probe;
/// - a half-open breaker with a probe past `max_probe_duration` reads
///   [`State::Open`], with the `retry_after` and `open_duration` of the
///   period the next call would start (the breaker's next jitter draw
///   included) and no probe in flight.
///
/// Taking a snapshot makes no call. `trips`, `totals` and
/// `last_transition` say what has happened, so they move when a call (or
/// an override) makes the transition, with two exceptions, transitions
/// that are due with nobody to make them, which the snapshot makes: an
/// override past its expiry ends, and calls in flight that the next call
/// would open the breaker on (`stuck_call_threshold`,
/// `hung_call_duration`) open it, as they would at that call, the change
/// delivered as any other. [`Breaker::state`] and
/// [`Breaker::would_permit`] read the same state.
///
/// The fields are consistent with each other: the counters are read under
/// the breaker's lock after every success counted without it has been
/// handed over, so `totals` and the window counts describe the same calls.
///
/// Taking one locks the breaker once and copies a few dozen bytes (and, for
/// a breaker that times its calls, its call-duration histogram: one
/// allocation); polling every second from a metrics thread costs nothing
/// measurable.
///
/// With the `serde` feature (or `admin`, which serves it) a snapshot
/// implements `serde::Serialize`, for logging or shipping it as is: keys are
/// the fields' names, durations are seconds (a float) under the field's name
/// with `_seconds` added (`maintenance` as `maintenance_seconds_left`),
/// states are their names as they print, a [`Reason`](crate::Reason) is
/// its message, [`status`](Self::status) is added, and a
/// [`StateChange`] leaves out its process-local `at`.
///
/// [`Breaker::state`]: crate::Breaker::state
/// [`Breaker::would_permit`]: crate::Breaker::would_permit
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Snapshot {
    /// The breaker's name.
    pub name: Arc<str>,
    /// When it was taken, on the breaker's clock: `taken_at - change.at`
    /// is how long ago a state change in `recent_changes` happened.
    pub taken_at: quanta::Instant,
    /// The state a call made now would meet (see above).
    pub state: State,
    /// The current run of consecutive failures.
    pub consecutive_failures: u32,
    /// Calls (successes and failures, not ignored) in the sliding window.
    /// Zero when no window condition is configured.
    pub window_calls: u64,
    /// Failures in the sliding window.
    pub window_failures: u64,
    /// Slow calls in the sliding window.
    pub window_slow_calls: u64,
    /// `window_failures / window_calls`, or 0 with no calls.
    pub failure_rate: f64,
    /// `window_slow_calls / window_calls`, or 0 with no calls.
    pub slow_call_rate: f64,
    /// While open, how long a call made now would be refused for.
    pub retry_after: Option<Duration>,
    /// The length of the current open period (zero when closed).
    pub open_duration: Duration,
    /// How many outages the breaker has opened for on its own: openings
    /// from closed (a trip condition). Re-opens after a failed probe are
    /// counted apart, in [`reopens`](Self::reopens).
    pub trips: u64,
    /// How many times an outage's open period was renewed: a probe failed,
    /// was slow or ran past `max_probe_duration`, a `half_open_rate` round
    /// failed, or a call failed during a ramp-up after recovery (the
    /// outage's backoff goes on). Each lengthens the backoff.
    pub reopens: u64,
    /// Half-open probes by outcome.
    pub probes: ProbeTotals,
    /// Time spent in each state, this one included up to now.
    pub state_times: StateTimes,
    /// With call timing (`slow_call_duration` or a latency policy), the
    /// durations of the calls that reported, as a histogram over
    /// `call_duration_buckets`; `None` for a breaker that does not time its
    /// calls. Copying it is a snapshot's one allocation, for such a breaker
    /// only.
    pub call_durations: Option<CallDurations>,
    /// The last state changes, oldest first: at most `event_log_capacity`
    /// (16 unless configured). Shared, not copied: taking a snapshot adds
    /// a reference.
    pub recent_changes: Arc<[StateChange]>,
    /// Lifetime counts.
    pub totals: Totals,
    /// How long the breaker has been in its current state, as
    /// [`state`](Self::state) reads it: for an open breaker past its
    /// period, since the period ended; for a half-open one whose probe is
    /// past its deadline, since that deadline; for an expired override,
    /// since it expired.
    pub time_in_state: Duration,
    /// Probes admitted and not yet reported.
    pub probes_in_flight: u32,
    /// Successes in a row in the current state (gobreaker's
    /// `ConsecutiveSuccesses`): since the last failure, or since the state
    /// last changed.
    pub consecutive_successes: u64,
    /// With `count_calls_in_flight`: calls admitted and not yet reported,
    /// probes included; exact while no call races the snapshot. Without
    /// it, with `stuck_call_threshold` or `hung_call_duration`: the calls
    /// admitted in the last closed period that the breaker tracks in
    /// flight (at most 64; no probes). `None` when neither counts them.
    pub calls_in_flight: Option<u64>,
    /// With `stuck_call_threshold`: the tracked calls in flight for longer
    /// than `slow_call_duration` now; with only `hung_call_duration`, for
    /// longer than that. Time inside a maintenance window is not counted:
    /// 0 inside one, and a call out through one is aged from its end.
    /// `None` without either.
    pub calls_stuck: Option<u32>,
    /// What opened the breaker, while it is open or half-open (see
    /// [`Breaker::last_failure`](crate::Breaker::last_failure)).
    pub opened_by: Option<Arc<crate::FailureCause>>,
    /// The latency policy's percentile in its last full window, if it has one.
    pub latency_percentile: Option<Duration>,
    /// The latency policy's current run of breaching windows.
    pub latency_breaches: u32,
    /// The most recent state change, with its reason and, for overrides,
    /// who asked.
    pub last_transition: Option<StateChange>,
    /// State changes never delivered because 1 024 were waiting already
    /// (the oldest waiting one is dropped).
    pub dropped_changes: u64,
    /// How many times in a row the open period has grown (0 on the first
    /// open period of an outage).
    pub backoff_step: u32,
    /// While an operator override with an expiry holds the breaker, how
    /// long until it returns to normal operation by itself. Who asked, why
    /// and since when are in `last_transition`.
    pub override_remaining: Option<Duration>,
    /// Whether `flapping_trips` trips happened within the last
    /// `flapping_window`.
    pub flapping: bool,
    /// While a [`RampUp`](crate::RampUp) runs after recovery, the fraction
    /// of calls a closed breaker admits now; `None` otherwise.
    pub ramp_fraction: Option<f64>,
    /// Inside a declared [`MaintenanceWindow`], the time left in it:
    /// failures are neutral meanwhile, and [`status`](Self::status) reads
    /// `maintenance` whatever the state.
    ///
    /// [`MaintenanceWindow`]: crate::trading::MaintenanceWindow
    pub maintenance: Option<Duration>,
    /// Failures made neutral by a maintenance window: counted nowhere else,
    /// not in `totals` nor any trip condition.
    pub neutral_failures: u64,
}

impl Snapshot {
    /// What a dashboard or a metrics gauge shows: `maintenance` inside a
    /// maintenance window (rather than `open`), otherwise the state's name
    /// (as [`State`] prints).
    pub fn status(&self) -> &'static str {
        if self.maintenance.is_some() {
            "maintenance"
        } else {
            self.state.as_str()
        }
    }

    /// [`status`](Self::status) as a number, for a gauge or a state
    /// timeline; the crate's one numbering of states, which the exported
    /// `fusebox_breaker_state` metric uses too:
    ///
    /// | value | status |
    /// |---|---|
    /// | 0 | closed |
    /// | 1 | open |
    /// | 2 | half-open |
    /// | 3 | forced open |
    /// | 4 | forced closed |
    /// | 5 | maintenance: inside a declared window, whatever the state |
    ///
    /// The numbers are stable: a later release may add values, never
    /// renumber these.
    pub fn status_gauge(&self) -> u8 {
        if self.maintenance.is_some() {
            return 5;
        }
        self.state.index() as u8
    }
}

pub(crate) fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}
