//! Operator overrides with an expiry, and the forced-closed state: time
//! comes from the mock clock, never from sleeping.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::{Breaker, Reason, State, StateChange};

use crate::support::breaker::*;

type Log = Arc<Mutex<Vec<StateChange>>>;

fn breaker() -> (Breaker, Arc<quanta::Mock>, Log) {
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(2)
        .open_duration(SEC)
        .on_state_change(move |c| sink.lock().unwrap().push(c.clone()))
        .build()
        .unwrap();
    (b, mock, log)
}

fn last(log: &Log) -> StateChange {
    log.lock().unwrap().last().cloned().unwrap()
}

#[test]
fn a_forced_open_with_an_expiry_refuses_until_then_and_then_closes_by_itself() {
    let (b, mock, log) = breaker();
    b.force_open_for("alice", "vendor maintenance", 30 * SEC);
    let s = b.snapshot();
    assert_eq!(s.state, State::ForcedOpen);
    assert_eq!(s.override_remaining, Some(30 * SEC));
    assert_eq!(s.last_transition.unwrap().reason.actor(), Some("alice"));

    mock.increment(30 * SEC - NS);
    let rej = refused(succeed(&b));
    assert_eq!(rej.state(), State::ForcedOpen);
    assert_eq!(rej.retry_after(), None);
    assert!(!b.would_permit());
    assert_eq!(b.snapshot().override_remaining, Some(NS));

    mock.increment(NS);
    assert!(b.would_permit());
    assert_eq!(
        succeed(&b).unwrap(),
        7,
        "the first call after the expiry goes"
    );
    assert_eq!(b.state(), State::Closed);
    let change = last(&log);
    assert_eq!(
        (change.from, change.to, change.reason),
        (State::ForcedOpen, State::Closed, Reason::OverrideExpired)
    );
    let s = b.snapshot();
    assert_eq!(s.override_remaining, None);
    assert_eq!(s.time_in_state, Duration::ZERO);
    // Normal operation: two failures open it again.
    trip(&b, 2);
}

#[test]
fn a_snapshot_ends_an_expired_override_without_any_call() {
    let (b, mock, log) = breaker();
    let events = b.subscribe(8).unwrap();
    b.force_open_for("alice", "drill", 10 * SEC);
    mock.increment(10 * SEC);
    assert_eq!(b.snapshot().state, State::Closed);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(last(&log).reason, Reason::OverrideExpired);
    assert_eq!(events.try_recv().unwrap().to, State::ForcedOpen);
    assert_eq!(events.try_recv().unwrap().reason, Reason::OverrideExpired);
}

#[test]
fn a_reset_or_a_new_override_replaces_the_expiry() {
    let (b, mock, log) = breaker();
    b.force_open_for("alice", "drill", 10 * SEC);
    b.reset("bob", "done early");
    mock.increment(20 * SEC);
    assert_eq!(b.snapshot().state, State::Closed);
    assert_eq!(
        last(&log).reason.actor(),
        Some("bob"),
        "no expiry after a reset"
    );

    b.force_open_for("alice", "drill", 10 * SEC);
    b.force_open("carol", "until further notice");
    mock.increment(Duration::from_secs(86_400));
    assert!(succeed(&b).is_err());
    let s = b.snapshot();
    assert_eq!(s.state, State::ForcedOpen);
    assert_eq!(s.override_remaining, None);
}

#[test]
fn forced_closed_admits_every_call_and_counts_no_failure_against_the_dependency() {
    let (b, mock, log) = breaker();
    trip(&b, 2);
    assert!(succeed(&b).is_err());
    b.force_closed("alice", "vendor status page is green");
    assert_eq!(b.state(), State::ForcedClosed);
    let change = last(&log);
    assert_eq!((change.from, change.to), (State::Open, State::ForcedClosed));
    assert_eq!(change.reason.actor(), Some("alice"));
    for _ in 0..10 {
        assert!(fail(&b).unwrap_err().into_failed().is_some(), "attempted");
        mock.increment(SEC);
    }
    assert_eq!(succeed(&b).unwrap(), 7);
    let s = b.snapshot();
    assert_eq!(s.state, State::ForcedClosed);
    assert_eq!(s.status_gauge(), 4);
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.totals.failures, 12, "lifetime totals still count");
    assert_eq!(s.trips, 1);
    assert_eq!(s.override_remaining, None);
    assert!(b.would_permit());

    b.reset("bob", "back to normal");
    assert_eq!(b.state(), State::Closed);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "the run started afresh");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn forced_closed_with_an_expiry_returns_to_normal_operation() {
    let (b, mock, log) = breaker();
    b.force_closed_for("alice", "known transient", 5 * SEC);
    assert_eq!(b.snapshot().override_remaining, Some(5 * SEC));
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::ForcedClosed);
    mock.increment(5 * SEC);
    // The call that finds the expiry ends it when it asks to go, and is
    // then the first call of normal operation: its failure counts.
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(last(&log).reason, Reason::OverrideExpired);
    let s = b.snapshot();
    assert_eq!(s.consecutive_failures, 1);
    assert_eq!(s.totals.failures, 3);
    trip(&b, 1);
}

#[test]
fn force_open_and_force_closed_replace_each_other() {
    let (b, _mock, _log) = breaker();
    b.force_closed("alice", "a");
    b.force_open("bob", "b");
    assert!(succeed(&b).is_err());
    b.force_closed("carol", "c");
    assert_eq!(succeed(&b).unwrap(), 7);
    assert_eq!(State::ForcedClosed.to_string(), "forced_closed");
}
