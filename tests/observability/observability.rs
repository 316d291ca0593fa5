//! What a breaker tells about an incident afterwards: its probes by
//! outcome, the time it spent in each state, its call durations and its
//! last state changes.

use std::time::Duration;

use fusebox::{ConfigError, Reason, State, Verdict};

use crate::support::breaker::*;
use crate::time_in;

/// A breaker that opens on two failures for 10 s, probes within 5 s.
fn outage_breaker() -> (fusebox::Breaker, std::sync::Arc<quanta::Mock>) {
    let (b, mock) = quiet("vendor");
    let b = b
        .consecutive_failure_threshold(2)
        .open_duration(10 * SEC)
        .backoff_multiplier(1.0)
        .max_probe_duration(5 * SEC)
        .build()
        .unwrap();
    (b, mock)
}

#[test]
fn probes_are_counted_by_outcome_expired_and_ignored_included() {
    let (b, mock) = outage_breaker();
    trip(&b, 2);
    // An ignored probe gives its place back and decides nothing.
    mock.increment(10 * SEC);
    let _ = business(&b);
    assert_eq!(b.state(), State::HalfOpen);
    // A probe that hangs past max_probe_duration: the next call re-opens.
    let hung = b.try_acquire().expect("the probe goes");
    mock.increment(5 * SEC);
    refused(succeed(&b));
    drop(hung);
    // A failed probe, then a successful one.
    mock.increment(10 * SEC);
    fail(&b).unwrap_err();
    mock.increment(10 * SEC);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);

    let s = b.snapshot();
    let p = s.probes;
    assert_eq!(
        (p.successes, p.failures, p.expired, p.ignored),
        (1, 1, 1, 1)
    );
    // One outage, re-opened by the hung probe and the failed one.
    assert_eq!((s.trips, s.reopens), (1, 2));
    // The hung probe, reporting late, counted in the totals only.
    assert_eq!(s.totals.calls, 2 + 1 + 1 + 1 + 1);
}

#[test]
fn time_in_state_follows_the_state_a_snapshot_reads() {
    let (b, mock) = outage_breaker();
    mock.increment(7 * SEC);
    trip(&b, 2);
    // Open for its 10 s, then 4 s more with no call to probe: half-open
    // time, as the snapshot reads the state.
    mock.increment(14 * SEC);
    let s = b.snapshot();
    assert_eq!(s.state, State::HalfOpen);
    let t = s.state_times;
    assert_eq!(
        (t.closed, t.open, t.half_open),
        (7 * SEC, 10 * SEC, 4 * SEC)
    );
    // The probe that comes later does not move time back to open.
    mock.increment(SEC);
    succeed(&b).unwrap();
    mock.increment(2 * SEC);
    let t = b.snapshot().state_times;
    assert_eq!(
        (t.closed, t.open, t.half_open),
        (9 * SEC, 10 * SEC, 5 * SEC)
    );

    // An override that expires with nothing to end it: closed from then.
    b.force_open_for("alice", "vendor maintenance", 30 * SEC);
    mock.increment(45 * SEC);
    let t = b.snapshot().state_times;
    assert_eq!(t.forced_open, 30 * SEC);
    assert_eq!(t.closed, 9 * SEC + 15 * SEC);
}

#[test]
fn time_past_a_probes_deadline_is_open_time_as_the_state_reads() {
    let (b, mock) = outage_breaker();
    mock.increment(SEC);
    trip(&b, 2);
    mock.increment(10 * SEC);
    std::mem::forget(b.try_acquire().unwrap());
    // The probe hangs: at its deadline (5 s) the breaker reads open.
    mock.increment(5 * SEC - NS);
    assert_eq!(b.state(), State::HalfOpen);
    mock.increment(NS);
    assert_eq!(b.state(), State::Open);
    mock.increment(3 * SEC);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    let t = s.state_times;
    assert_eq!(
        (t.closed, t.open, t.half_open),
        (SEC, 13 * SEC, 5 * SEC),
        "open from the probe's deadline on"
    );
    assert_eq!(s.time_in_state, 3 * SEC, "open since the deadline");
    // The call that makes the re-opening real moves no time back.
    refused(succeed(&b));
    let t = b.snapshot().state_times;
    assert_eq!((t.closed, t.open, t.half_open), (SEC, 13 * SEC, 5 * SEC));
    mock.increment(2 * SEC);
    let t = b.snapshot().state_times;
    assert_eq!((t.closed, t.open, t.half_open), (SEC, 15 * SEC, 5 * SEC));
}

#[test]
fn a_probe_reporting_after_its_deadline_moves_no_open_time_back() {
    let (b, mock) = outage_breaker();
    trip(&b, 2);
    mock.increment(10 * SEC);
    let probe = b.try_acquire().unwrap();
    mock.increment(6 * SEC);
    let t = b.snapshot().state_times;
    assert_eq!((t.open, t.half_open), (11 * SEC, 5 * SEC));
    // Its success comes a second after its deadline: it re-opens the
    // breaker, which has read open since the deadline.
    probe.record(Verdict::Success);
    let s = b.snapshot();
    assert_eq!(s.last_transition.unwrap().reason, Reason::ProbeExpired);
    let t = s.state_times;
    assert_eq!((t.open, t.half_open), (11 * SEC, 5 * SEC));
}

/// Something done to a breaker.
type Step = dyn Fn(&fusebox::Breaker);

#[test]
fn time_in_state_never_goes_down_between_snapshots() {
    let (b, mock) = outage_breaker();
    let mut before = b.snapshot().state_times;
    let steps: [(Duration, &Step); 8] = [
        (3 * SEC, &|b| trip(b, 2)),
        (12 * SEC, &|_| {}),
        (SEC, &|b| drop(fail(b))),
        (11 * SEC, &|b| drop(succeed(b))),
        (SEC, &|b| {
            b.force_closed_for("bob", "known transient", 5 * SEC)
        }),
        (9 * SEC, &|_| {}),
        (SEC, &|b| drop(succeed(b))),
        (SEC, &|b| b.reset("bob", "done")),
    ];
    let mut elapsed = Duration::ZERO;
    for (i, (wait, act)) in steps.iter().enumerate() {
        mock.increment(*wait);
        elapsed += *wait;
        act(&b);
        let now = b.snapshot().state_times;
        for state in [
            State::Closed,
            State::Open,
            State::HalfOpen,
            State::ForcedOpen,
            State::ForcedClosed,
        ] {
            assert!(
                time_in(&now, state) >= time_in(&before, state),
                "step {i}: {state} went from {:?} to {:?}",
                time_in(&before, state),
                time_in(&now, state)
            );
        }
        let total = now.closed + now.open + now.half_open + now.forced_open + now.forced_closed;
        assert_eq!(total, elapsed, "step {i}: every nanosecond in one state");
        before = now;
    }
    assert_eq!(before.forced_closed, 5 * SEC);
}

#[test]
fn the_event_log_keeps_the_last_changes_oldest_first() {
    let (b, mock) = quiet("vendor");
    let b = b
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .event_log_capacity(3)
        .build()
        .unwrap();
    assert!(b.snapshot().recent_changes.is_empty());
    fail(&b).unwrap_err(); // closed -> open
    mock.increment(10 * SEC);
    succeed(&b).unwrap(); // -> half-open -> closed
    b.force_open("alice", "drill"); // -> forced open
    mock.increment(SEC);
    let s = b.snapshot();
    let seen: Vec<(State, State, u64)> = s
        .recent_changes
        .iter()
        .map(|c| (c.from, c.to, c.seq))
        .collect();
    assert_eq!(
        seen,
        vec![
            (State::Open, State::HalfOpen, 2),
            (State::HalfOpen, State::Closed, 3),
            (State::Closed, State::ForcedOpen, 4),
        ]
    );
    let last = s.recent_changes.last().unwrap();
    assert_eq!(last.reason.actor(), Some("alice"));
    assert!(matches!(last.reason, Reason::ForcedOpen { .. }));
    assert_eq!(s.taken_at - last.at, SEC, "how long ago");
}

#[test]
fn an_event_log_of_zero_keeps_nothing_and_one_too_large_is_refused() {
    let (b, _mock) = quiet("vendor");
    let b0 = b
        .clone()
        .consecutive_failure_threshold(1)
        .event_log_capacity(0)
        .build()
        .unwrap();
    fail(&b0).unwrap_err();
    assert!(b0.snapshot().recent_changes.is_empty());
    assert!(b0.snapshot().last_transition.is_some());
    let err = b
        .consecutive_failure_threshold(1)
        .event_log_capacity(1025)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Invalid {
                field: "event_log_capacity",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_breaker_that_does_not_time_its_calls_keeps_no_histogram() {
    let (b, _mock) = consecutive(3);
    succeed(&b).unwrap();
    assert!(b.snapshot().call_durations.is_none());
}

#[test]
fn call_durations_fall_in_the_configured_buckets() {
    let (b, mock) = quiet("vendor");
    let b = b
        .consecutive_failure_threshold(100)
        .slow_call_duration(SEC)
        .call_duration_buckets(vec![10 * MS, 100 * MS])
        .build()
        .unwrap();
    succeed_after(&b, &mock, 5 * MS).unwrap();
    succeed_after(&b, &mock, 10 * MS).unwrap();
    fail_after(&b, &mock, 50 * MS).unwrap_err();
    let _ = b.call(|| {
        mock.increment(2 * SEC);
        Err::<u32, _>(DepError::Business(Business))
    });
    let h = b.snapshot().call_durations.expect("timed");
    let buckets: Vec<_> = h.buckets().collect();
    assert_eq!(buckets, vec![(10 * MS, 2), (100 * MS, 3)]);
    assert_eq!(h.count(), 4);
    assert_eq!(h.sum(), 5 * MS + 10 * MS + 50 * MS + 2 * SEC);
}

#[test]
fn bad_call_duration_buckets_are_refused_naming_the_field() {
    let refused = |bounds: Vec<Duration>| {
        let (b, _mock) = quiet("vendor");
        b.consecutive_failure_threshold(1)
            .call_duration_buckets(bounds)
            .build()
            .unwrap_err()
    };
    for (bounds, rule) in [
        (vec![], "1 to 64"),
        (vec![MS; 65], "1 to 64"),
        (vec![10 * MS, 10 * MS], "increase strictly"),
        (vec![10 * MS, 5 * MS], "increase strictly"),
        (vec![Duration::ZERO, MS], "zero"),
    ] {
        let err = refused(bounds.clone());
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    field: "call_duration_buckets",
                    ..
                }
            ),
            "{bounds:?}: {err}"
        );
        assert!(err.to_string().contains(rule), "{bounds:?}: {err}");
    }
}
