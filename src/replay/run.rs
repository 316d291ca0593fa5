//! One configuration run over a recording, on the mock clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::time::{Duration, SystemTime};

use super::recording::{Outcome, Recording};
use crate::trading::WallClock;
use crate::{BreakerBuilder, ConfigError, Delivery, OwnedPermit, Reason, State, Verdict};

/// One state change of a replayed breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// Time from the recording's first call.
    pub at: Duration,
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// Whether the breaker was flapping once it entered `to`.
    pub flapping: bool,
}

/// What one configuration would have done over a recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The candidate's name (the breaker's).
    pub name: String,
    /// Every state change, in order.
    pub changes: Vec<Change>,
    /// Calls in the recording.
    pub calls: u64,
    /// Calls this configuration would have refused.
    pub refused: u64,
    /// Calls this configuration would have admitted that the live breaker
    /// refused: their outcome is unknown, so they count as ignored (they
    /// decide nothing, a probe among them gives its place back).
    pub unknown: u64,
    /// Times it would have opened.
    pub trips: u64,
    /// Trips it would have made while flapping (by its own
    /// `flapping_trips` and `flapping_window`).
    pub flapping_trips: u64,
    /// Time it would have spent open (forced open included), and half-open.
    pub open: Duration,
    /// Time it would have spent half-open.
    pub half_open: Duration,
    /// The recording's span, first start to last end.
    pub span: Duration,
    /// When the recording's outage began, from its first call
    /// ([`Recording::outage_from`]).
    pub outage_from: Option<Duration>,
}

impl Run {
    /// When it would have opened first, from the recording's first call.
    pub fn first_trip(&self) -> Option<Duration> {
        self.changes
            .iter()
            .find(|c| c.to == State::Open)
            .map(|c| c.at)
    }

    /// From the outage's start ([`Recording::outage_from`]) to the first
    /// trip at or after it: how long an outage runs before this
    /// configuration stops calling.
    pub fn time_to_trip(&self) -> Option<Duration> {
        let from = self.outage_from?;
        let trip = self
            .changes
            .iter()
            .find(|c| c.to == State::Open && c.at >= from)?;
        Some(trip.at - from)
    }
}

/// Runs `candidate` over `recording` on a mock clock of its own and says
/// what it would have done. The breaker is built from `candidate` with the
/// mock clock, a wall clock fixed at the first call's start, changes
/// delivered on the replaying thread and its jitter seeded with `seed`, so
/// the same recording, candidate and seed give the same run. Each call is
/// admitted (or refused) at its start and reports its recorded outcome at
/// its end; calls overlap as they did.
///
/// # Errors
///
/// A [`ConfigError`] if `candidate` does not build.
///
/// ```
/// use fusebox::replay::{self, Recording};
/// use fusebox::{Breaker, CallPath, Classifier, State};
///
/// let mut text = String::new();
/// for s in 0..10 {
///     let outcome = if s < 5 { "success" } else { "failure" };
///     text += &format!("2026-12-07T14:30:{s:02}Z 100ms {outcome}\n");
/// }
/// let recording = Recording::parse(&text)?;
/// let candidate = Breaker::builder("vendor")
///     .call_path(CallPath::AltData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .consecutive_failure_threshold(3);
/// let run = replay::run(&recording, candidate, 7)?;
/// assert_eq!(run.trips, 1);
/// assert_eq!(run.first_trip(), Some(std::time::Duration::from_millis(7_100)));
/// assert_eq!(run.refused, 2);
/// assert_eq!(run.changes[0].to, State::Open);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run(
    recording: &Recording,
    candidate: BreakerBuilder,
    seed: u64,
) -> Result<Run, ConfigError> {
    let (clock, mock) = quanta::Clock::mock();
    let calls = recording.calls();
    let t0 = calls.first().map_or(SystemTime::UNIX_EPOCH, |c| c.start);
    let breaker = candidate
        .clock(clock.clone())
        .wall_clock(WallClock::fixed(t0))
        .delivery(Delivery::Caller)
        .jitter_seed(seed)
        .build()?;
    let began = clock.now();
    let changes = breaker.subscribe(1024)?;
    let mut run = Run {
        name: breaker.name().to_owned(),
        changes: Vec::new(),
        calls: calls.len() as u64,
        refused: 0,
        unknown: 0,
        trips: 0,
        flapping_trips: 0,
        open: Duration::ZERO,
        half_open: Duration::ZERO,
        span: recording.span(),
        outage_from: recording
            .outage_from()
            .map(|at| at.duration_since(t0).unwrap_or_default()),
    };
    let mut now = Duration::ZERO;
    let advance = |to: Duration, now: &mut Duration| {
        if to > *now {
            mock.increment(to - *now);
            *now = to;
        }
    };
    let drain = |run: &mut Run| {
        while let Some(c) = changes.try_recv() {
            let flapping = c.to == State::Open && breaker.snapshot().flapping;
            run.changes.push(Change {
                at: c.at.duration_since(began),
                from: c.from,
                to: c.to,
                reason: c.reason,
                flapping,
            });
        }
    };
    // Calls out, by when they end; the index keeps equal ends in order.
    let mut out: BinaryHeap<Reverse<(Duration, usize)>> = BinaryHeap::new();
    let mut permits: Vec<Option<(OwnedPermit, Verdict)>> = Vec::new();
    let finish = |until: Option<Duration>,
                  now: &mut Duration,
                  out: &mut BinaryHeap<Reverse<(Duration, usize)>>,
                  permits: &mut Vec<Option<(OwnedPermit, Verdict)>>,
                  run: &mut Run| {
        while let Some(Reverse((end, i))) = out.peek().copied() {
            if until.is_some_and(|u| end > u) {
                break;
            }
            out.pop();
            advance(end, now);
            if let Some((permit, verdict)) = permits[i].take() {
                permit.record(verdict);
            }
            drain(run);
        }
    };
    for call in calls {
        let start = call.start.duration_since(t0).unwrap_or_default();
        finish(Some(start), &mut now, &mut out, &mut permits, &mut run);
        advance(start, &mut now);
        match breaker.try_acquire_owned() {
            Ok(permit) if call.outcome == Outcome::Refused => {
                run.unknown += 1;
                permit.record(Verdict::Ignore);
            }
            Ok(permit) => {
                let verdict = match call.outcome {
                    Outcome::Success => Verdict::Success,
                    Outcome::Failure => Verdict::Failure,
                    Outcome::Ignored | Outcome::Refused => Verdict::Ignore,
                };
                out.push(Reverse((start + call.duration, permits.len())));
                permits.push(Some((permit, verdict)));
            }
            Err(_) => run.refused += 1,
        }
        drain(&mut run);
    }
    finish(None, &mut now, &mut out, &mut permits, &mut run);
    // Times run to the recording's end: the last call's, refused or not.
    advance(run.span, &mut now);
    let snap = breaker.snapshot();
    drain(&mut run);
    run.trips = snap.trips;
    run.flapping_trips = run
        .changes
        .iter()
        .filter(|c| c.to == State::Open && c.flapping)
        .count() as u64;
    run.open = snap.state_times.open + snap.state_times.forced_open;
    run.half_open = snap.state_times.half_open;
    Ok(run)
}

impl fmt::Display for Run {
    /// A summary line, then the timeline: one line per state change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = crate::duration::display;
        let share = |part: Duration| {
            if self.span.is_zero() {
                0.0
            } else {
                100.0 * part.as_secs_f64() / self.span.as_secs_f64()
            }
        };
        writeln!(
            f,
            "{}: {} trips ({} while flapping), {} of {} calls refused, open {} ({:.1}%), \
             half-open {}, {} outcomes unknown",
            self.name,
            self.trips,
            self.flapping_trips,
            self.refused,
            self.calls,
            d(self.open),
            share(self.open),
            d(self.half_open),
            self.unknown,
        )?;
        for c in &self.changes {
            writeln!(
                f,
                "  +{:<14} {:>13} -> {:<13} {}{}",
                d(c.at).to_string(),
                c.from,
                c.to,
                c.reason,
                if c.flapping { " (flapping)" } else { "" }
            )?;
        }
        Ok(())
    }
}
