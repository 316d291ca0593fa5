//! The health probe: the process's probe thread tests recovery in place of
//! a live request. The breakers run on mock clocks; the probe thread and
//! the probes run in real time, so these tests wait for state changes on a
//! subscription, each for at most a few seconds.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fusebox::trading::HealthProbe;
use fusebox::{Breaker, Reason, State, StateChange, Subscription};

use crate::support::breaker::*;

/// Long enough for the probe thread to notice, short enough for a test.
const PATIENCE: Duration = Duration::from_secs(5);

/// Consecutive(1), 10 s open doubling per re-open, and `probe`.
fn with_probe(probe: HealthProbe) -> (Breaker, Arc<quanta::Mock>, Subscription) {
    let (builder, mock) = quiet("corporate-actions");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .backoff_multiplier(2.0)
        .health_probe(probe)
        .build()
        .unwrap();
    let sub = b.subscribe(64).unwrap();
    (b, mock, sub)
}

/// The next state change, waiting for it at most `PATIENCE`.
fn next(sub: &Subscription) -> StateChange {
    sub.recv_timeout(PATIENCE)
        .expect("a state change within the patience")
}

fn counting_probe(ok: bool) -> (HealthProbe, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let probe = HealthProbe::new(SEC, move || {
        c.fetch_add(1, Ordering::SeqCst);
        if ok {
            Ok(())
        } else {
            Err("status endpoint says down")
        }
    });
    (probe, calls)
}

#[test]
fn the_health_probe_closes_the_breaker_with_no_live_traffic() {
    let (probe, calls) = counting_probe(true);
    let (b, mock, sub) = with_probe(probe);
    trip(&b, 1);
    assert_eq!(next(&sub).to, State::Open);
    mock.increment(10 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    let closed = next(&sub);
    assert_eq!(closed.to, State::Closed);
    assert_eq!(closed.reason, Reason::ProbeSucceeded { successes: 1 });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        b.snapshot().totals.calls,
        2,
        "the tripping call and the probe"
    );
}

#[test]
fn live_callers_are_refused_until_the_probe_succeeds() {
    let (release, wait) = crossbeam_channel::bounded::<()>(1);
    let probe = HealthProbe::new(PATIENCE, move || wait.recv());
    let (b, mock, sub) = with_probe(probe);
    trip(&b, 1);
    next(&sub);
    mock.increment(10 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    let mut attempted = false;
    let r = refused(b.call(|| {
        attempted = true;
        Ok::<_, DepError>(1)
    }));
    assert!(!attempted, "no live request is the test case");
    assert_eq!(r.state(), State::HalfOpen);
    release.send(()).unwrap();
    assert_eq!(next(&sub).to, State::Closed);
    succeed(&b).unwrap();
}

#[test]
fn a_failing_health_probe_escalates_the_backoff() {
    let (probe, calls) = counting_probe(false);
    let (b, mock, sub) = with_probe(probe);
    trip(&b, 1);
    next(&sub);
    mock.increment(10 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    let reopened = next(&sub);
    assert_eq!(reopened.to, State::Open);
    assert_eq!(reopened.reason, Reason::ProbeFailed);
    assert_eq!(b.snapshot().open_duration, 20 * SEC);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    mock.increment(20 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    assert_eq!(next(&sub).to, State::Open);
    assert_eq!(b.snapshot().open_duration, 40 * SEC);
}

#[test]
fn a_hung_probe_is_abandoned_at_its_deadline_and_holds_nobody_else_up() {
    let (release, wait) = crossbeam_channel::bounded::<()>(1);
    let hung = HealthProbe::new(Duration::from_millis(300), move || wait.recv());
    let (b, mock, sub) = with_probe(hung);
    trip(&b, 1);
    next(&sub);
    mock.increment(10 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);

    // Meanwhile another breaker's probe is run and answered.
    let (healthy, _) = counting_probe(true);
    let (other, other_mock, other_sub) = with_probe(healthy);
    trip(&other, 1);
    next(&other_sub);
    other_mock.increment(10 * SEC);
    assert_eq!(next(&other_sub).to, State::HalfOpen);
    assert_eq!(next(&other_sub).to, State::Closed);

    let abandoned = next(&sub);
    assert_eq!(abandoned.to, State::Open);
    assert_eq!(b.snapshot().open_duration, 20 * SEC, "escalated");
    release.send(()).unwrap();
}

#[test]
fn build_refuses_a_probe_with_no_time_to_run() {
    let (builder, _mock) = quiet("corporate-actions");
    let err = builder
        .consecutive_failure_threshold(1)
        .health_probe(HealthProbe::new(Duration::ZERO, || Ok::<_, ()>(())))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "health_probe");
}

#[test]
fn would_permit_says_no_while_the_probe_thread_decides() {
    let (release, wait) = crossbeam_channel::bounded::<()>(1);
    let probe = HealthProbe::new(PATIENCE, move || wait.recv());
    let (b, mock, sub) = with_probe(probe);
    trip(&b, 1);
    next(&sub);
    mock.increment(10 * SEC);
    assert!(
        !b.would_permit(),
        "past the period, but not for a live call"
    );
    assert_eq!(next(&sub).to, State::HalfOpen);
    assert!(!b.would_permit());
    release.send(()).unwrap();
    assert_eq!(next(&sub).to, State::Closed);
    assert!(b.would_permit());
}

#[test]
fn the_probe_waits_for_the_end_of_a_maintenance_window() {
    use fusebox::trading::{MaintenanceWindow, WallClock};
    use std::time::SystemTime;

    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (probe, calls) = counting_probe(true);
    let (builder, mock) = quiet("corporate-actions");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .health_probe(probe)
        .wall_clock(WallClock::fixed(t0))
        .maintenance_window(MaintenanceWindow::once(t0 + 5 * SEC, t0 + 60 * SEC))
        .build()
        .unwrap();
    let sub = b.subscribe(64).unwrap();
    trip(&b, 1);
    next(&sub);
    mock.increment(30 * SEC); // past the open period, inside the window
    assert_eq!(b.snapshot().status(), "maintenance");
    // A few of the probe thread's passes (it looks every 20 ms).
    assert!(sub.recv_timeout(Duration::from_millis(200)).is_none());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    mock.increment(30 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    assert_eq!(next(&sub).to, State::Closed);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn would_permit_agrees_with_a_forced_closed_breaker_that_has_a_health_probe() {
    let (probe, _) = counting_probe(true);
    let (b, _mock, _sub) = with_probe(probe);
    b.force_closed("ops", "vendor confirmed healthy");
    assert!(b.would_permit(), "forced closed admits every call");
    succeed(&b).unwrap();
}

#[test]
fn would_permit_agrees_with_a_forced_open_override_past_its_expiry() {
    let (probe, _) = counting_probe(true);
    let (b, mock, _sub) = with_probe(probe);
    b.force_open_for("ops", "vendor maintenance", 10 * SEC);
    assert!(!b.would_permit());
    mock.increment(10 * SEC);
    assert!(b.would_permit(), "the next call ends the override and goes");
    succeed(&b).unwrap();
}

#[test]
fn the_probe_thread_hands_the_changes_it_causes_to_the_notifier() {
    let threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&threads);
    let (probe, _) = counting_probe(true);
    let (builder, mock) = quiet("corporate-actions");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .health_probe(probe)
        .on_state_change(move |_| {
            let name = std::thread::current().name().map(str::to_owned);
            seen.lock().unwrap().push(name);
        })
        .build()
        .unwrap();
    let sub = b.subscribe(64).unwrap();
    trip(&b, 1);
    assert_eq!(next(&sub).to, State::Open);
    mock.increment(10 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    assert_eq!(next(&sub).to, State::Closed);
    let threads = threads.lock().unwrap();
    assert_eq!(threads.len(), 3);
    assert!(
        threads[1..]
            .iter()
            .all(|t| t.as_deref() != Some("fusebox-health-probe")),
        "a callback that blocks would hold up every breaker's probes: {threads:?}"
    );
}

#[test]
fn calls_in_flight_count_the_health_probe_as_admitted() {
    let (probe, _) = counting_probe(true);
    let (builder, mock) = quiet("corporate-actions");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .count_calls_in_flight(true)
        .health_probe(probe)
        .build()
        .unwrap();
    let sub = b.subscribe(64).unwrap();
    trip(&b, 1);
    assert_eq!(next(&sub).to, State::Open);
    mock.increment(10 * SEC);
    assert_eq!(next(&sub).to, State::HalfOpen);
    assert_eq!(next(&sub).to, State::Closed);
    let _out = b.try_acquire().unwrap();
    assert_eq!(b.snapshot().calls_in_flight, Some(1));
}
