//! Operator overrides: force_open holds the breaker open and never probes;
//! reset closes it, clears its counters and returns the backoff to base.

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::{Breaker, Reason, State, StateChange, Verdict};

use crate::support::breaker::*;

fn recorded() -> (
    impl Fn(&StateChange) + Send + Sync + 'static,
    Arc<Mutex<Vec<StateChange>>>,
) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&log);
    (
        move |c: &StateChange| sink.lock().unwrap().push(c.clone()),
        log,
    )
}

fn breaker_with_log() -> (Breaker, Arc<quanta::Mock>, Arc<Mutex<Vec<StateChange>>>) {
    let (cb, log) = recorded();
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .window_failure_threshold(5)
        .open_duration(SEC)
        .on_state_change(cb)
        .build()
        .unwrap();
    (b, mock, log)
}

#[test]
fn force_open_from_every_state_refuses_everything_and_never_probes() {
    for from in [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::ForcedClosed,
    ] {
        let (b, mock, log) = breaker_with_log();
        let held_probe = match from {
            State::Closed => None,
            State::Open => {
                trip(&b, 1);
                None
            }
            State::HalfOpen => {
                trip(&b, 1);
                mock.increment(SEC);
                Some(b.try_acquire().unwrap())
            }
            State::ForcedOpen => {
                b.force_open("ops", "first");
                None
            }
            State::ForcedClosed => {
                b.force_closed("ops", "first");
                None
            }
        };
        assert_eq!(b.state(), from);
        b.force_open("alice", "vendor announced maintenance");
        assert_eq!(b.state(), State::ForcedOpen);
        let last = log.lock().unwrap().last().cloned().unwrap();
        assert_eq!((last.from, last.to), (from, State::ForcedOpen));
        assert_eq!(
            last.reason,
            Reason::ForcedOpen {
                actor: "alice".into(),
                note: "vendor announced maintenance".into()
            }
        );
        assert_eq!(last.reason.actor(), Some("alice"));
        // A probe that was out when it was forced open decides nothing.
        if let Some(p) = held_probe {
            p.record(Verdict::Success);
        }
        let invoked = Cell::new(0);
        for _ in 0..5 {
            // Long after any open period or probe deadline would have ended.
            mock.increment(Duration::from_secs(86_400));
            let rej = refused(b.call(|| {
                invoked.set(invoked.get() + 1);
                Ok::<_, DepError>(())
            }));
            assert_eq!(rej.state(), State::ForcedOpen);
            assert_eq!(rej.retry_after(), None, "an operator decides when");
            assert!(b.try_acquire().is_err());
        }
        assert_eq!(invoked.get(), 0);
        assert_eq!(b.state(), State::ForcedOpen);
        let s = b.snapshot();
        assert_eq!(s.retry_after, None);
        assert_eq!(s.probes_in_flight, 0);
        assert_eq!(
            s.last_transition.unwrap().reason.actor(),
            Some("alice"),
            "the snapshot says who forced it open ({from:?})"
        );
    }
}

#[test]
fn reset_closes_clears_the_counters_and_records_who_asked() {
    let (b, mock, log) = breaker_with_log();
    trip(&b, 1);
    mock.increment(SEC);
    fail(&b).unwrap_err();
    let before = b.snapshot();
    assert_eq!(before.open_duration, 2 * SEC);
    b.reset("bob", "vendor confirmed recovery");
    assert_eq!(b.state(), State::Closed);
    let s = b.snapshot();
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!((s.window_calls, s.window_failures), (0, 0));
    assert_eq!(s.retry_after, None);
    assert_eq!(s.open_duration, Duration::ZERO);
    assert_eq!(s.probes_in_flight, 0);
    // Lifetime totals survive.
    assert_eq!(s.totals, before.totals);
    assert_eq!(s.trips, before.trips);
    let last = log.lock().unwrap().last().cloned().unwrap();
    assert_eq!((last.from, last.to), (State::Open, State::Closed));
    assert_eq!(
        last.reason,
        Reason::Reset {
            actor: "bob".into(),
            note: "vendor confirmed recovery".into()
        }
    );
    succeed(&b).unwrap();
}

#[test]
fn reset_leaves_forced_open() {
    let (b, mock, _log) = breaker_with_log();
    b.force_open("alice", "maintenance");
    mock.increment(Duration::from_secs(3_600));
    b.reset("alice", "maintenance over");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(succeed(&b).unwrap(), 7);
}

#[test]
fn reset_returns_the_open_period_to_base() {
    let (b, mock, _log) = breaker_with_log();
    trip(&b, 1);
    for expected in [1u32, 2, 4, 8] {
        assert_eq!(b.snapshot().open_duration, expected * SEC);
        mock.increment(expected * SEC);
        fail(&b).unwrap_err();
    }
    assert_eq!(b.snapshot().open_duration, 16 * SEC);
    b.reset("bob", "enough");
    trip(&b, 1);
    assert_eq!(b.snapshot().open_duration, SEC);
    assert_eq!(b.snapshot().retry_after, Some(SEC));
}

#[test]
fn reset_after_force_open_mid_outage_returns_the_open_period_to_base() {
    let (b, mock, _log) = breaker_with_log();
    trip(&b, 1);
    mock.increment(SEC);
    fail(&b).unwrap_err();
    b.force_open("alice", "hold");
    assert_eq!(b.snapshot().open_duration, Duration::ZERO);
    b.reset("alice", "release");
    trip(&b, 1);
    assert_eq!(b.snapshot().open_duration, SEC);
}

#[test]
fn stragglers_from_before_a_reset_decide_nothing() {
    let (b, mock, _log) = breaker_with_log();
    let closed_permit = b.try_acquire().unwrap();
    trip(&b, 1);
    mock.increment(SEC);
    let probe = b.try_acquire().unwrap();
    b.reset("bob", "manual");
    probe.record(Verdict::Failure);
    closed_permit.record(Verdict::Failure);
    assert_eq!(b.state(), State::Closed, "stale failures do not re-open it");
    let s = b.snapshot();
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.window_failures, 0);
    assert_eq!(s.totals.failures, 3, "but the lifetime totals count them");
}

#[test]
fn reset_when_closed_clears_a_run_of_failures() {
    let (builder, _mock) = quiet("refdata");
    let b = builder.consecutive_failure_threshold(3).build().unwrap();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    b.reset("bob", "known blip");
    assert_eq!(b.state(), State::Closed);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}
