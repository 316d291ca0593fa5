//! Half-open: exactly the configured number of probes, what decides, and
//! probes that never report back.

use std::sync::mpsc;

use fusebox::{Breaker, Reason, State, Verdict};

use crate::support::breaker::*;

/// Consecutive(1), 10 s open, probes expire after 5 s.
fn breaker(
    configure: impl FnOnce(fusebox::BreakerBuilder) -> fusebox::BreakerBuilder,
) -> (Breaker, std::sync::Arc<quanta::Mock>) {
    let (builder, mock) = quiet("refdata");
    let b = configure(
        builder
            .consecutive_failure_threshold(1)
            .open_duration(10 * SEC)
            .backoff_multiplier(2.0)
            .max_probe_duration(5 * SEC),
    )
    .build()
    .unwrap();
    (b, mock)
}

fn last_reason(b: &Breaker) -> Reason {
    b.snapshot().last_transition.unwrap().reason
}

#[test]
fn refuses_the_probe_one_nanosecond_early_and_admits_it_on_time() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC - NS);
    let rej = b.try_acquire().unwrap_err();
    assert_eq!(rej.state(), State::Open);
    assert_eq!(rej.retry_after(), Some(NS));
    assert_eq!(b.state(), State::Open);
    mock.increment(NS);
    let probe = b.try_acquire().expect("admitted at exactly open_duration");
    assert!(probe.is_probe());
    probe.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn refuses_second_probe_while_first_is_out() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let probe = b.try_acquire().unwrap();
    for i in 0..10 {
        let rej = refused(succeed(&b));
        assert_eq!(rej.state(), State::HalfOpen);
        assert_eq!(
            rej.retry_after(),
            Some(5 * SEC - i * 100 * MS),
            "the probe out decides by its deadline at the latest"
        );
        mock.increment(100 * MS);
    }
    assert_eq!(b.snapshot().probes_in_flight, 1);
    probe.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
    succeed(&b).unwrap();
}

#[test]
fn admits_half_open_max_concurrent_probes_at_once() {
    let (b, mock) = breaker(|b| b.half_open_max_concurrent(3));
    trip(&b, 1);
    mock.increment(10 * SEC);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    assert_eq!(b.try_acquire().unwrap_err().state(), State::HalfOpen);
    let mut probes = probes.into_iter();
    probes.next().unwrap().record(Verdict::Ignore);
    // The freed slot takes one more probe, and only one.
    let fourth = b.try_acquire().unwrap();
    assert!(b.try_acquire().is_err());
    fourth.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
    // The others are stale now: their failures decide nothing.
    for p in probes {
        p.record(Verdict::Failure);
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 0);
}

#[test]
fn needs_success_threshold_probe_successes_in_a_row() {
    let (b, mock) = breaker(|b| b.half_open_success_threshold(3));
    trip(&b, 1);
    mock.increment(10 * SEC);
    for _ in 0..2 {
        succeed(&b).unwrap();
        assert_eq!(b.state(), State::HalfOpen);
    }
    // An ignored probe neither breaks the run nor extends it.
    business(&b).unwrap_err();
    assert_eq!(b.state(), State::HalfOpen);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(last_reason(&b), Reason::ProbeSucceeded { successes: 3 });
}

#[test]
fn one_probe_failure_undoes_earlier_probe_successes() {
    let (b, mock) = breaker(|b| b.half_open_success_threshold(2));
    trip(&b, 1);
    mock.increment(10 * SEC);
    succeed(&b).unwrap();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    mock.increment(20 * SEC);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::HalfOpen, "the count starts again");
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn an_ignored_probe_frees_the_slot_without_deciding() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let before = b.snapshot();
    business(&b).unwrap_err();
    let after = b.snapshot();
    assert_eq!(after.state, State::HalfOpen);
    assert_eq!(after.probes_in_flight, 0);
    assert_eq!(after.trips, before.trips);
    assert_eq!(after.totals.ignored, 1);
    // The next caller is the probe.
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_probe_permit_dropped_without_an_outcome_counts_as_failed() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    drop(b.try_acquire().unwrap());
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ProbeFailed);
}

#[test]
fn a_leaked_probe_expires_after_max_probe_duration() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    std::mem::forget(b.try_acquire().unwrap());
    mock.increment(5 * SEC - NS);
    assert_eq!(refused(succeed(&b)).state(), State::HalfOpen);
    mock.increment(NS);
    // Noticed by the next admission attempt: it re-opens (with a longer
    // wait, as for a failed probe) and refuses.
    let rej = refused(succeed(&b));
    assert_eq!(rej.state(), State::Open);
    assert_eq!(rej.retry_after(), Some(20 * SEC));
    assert_eq!(last_reason(&b), Reason::ProbeExpired);
    // The slot is free: after the new open period, a new probe goes.
    mock.increment(20 * SEC);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_probe_held_by_a_hung_thread_expires_and_its_late_answer_decides_nothing() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let (admitted_tx, admitted_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let shared = &b;
        let hung = s.spawn(move || {
            let probe = shared.try_acquire().unwrap();
            admitted_tx.send(probe.is_probe()).unwrap();
            // Hangs until the test lets it go, then reports success.
            release_rx.recv().unwrap();
            probe.record(Verdict::Success);
        });
        assert!(admitted_rx.recv().unwrap(), "the thread holds the probe");
        assert_eq!(refused(succeed(&b)).state(), State::HalfOpen);
        mock.increment(5 * SEC);
        assert_eq!(refused(succeed(&b)).state(), State::Open);
        mock.increment(20 * SEC);
        // A new probe is out when the hung one finally answers.
        let probe = b.try_acquire().unwrap();
        assert!(probe.is_probe());
        release_tx.send(()).unwrap();
        hung.join().unwrap();
        assert_eq!(b.snapshot().totals.successes, 1);
        assert_eq!(
            b.state(),
            State::HalfOpen,
            "the late success decided nothing"
        );
        assert_eq!(b.snapshot().probes_in_flight, 1);
        probe.record(Verdict::Failure);
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.snapshot().retry_after, Some(40 * SEC));
    });
}

#[test]
fn a_probe_that_answers_after_max_probe_duration_counts_as_failed() {
    // Nobody asked for admission while it was out, so nothing noticed the
    // expiry before it answered; its late answer must still not close the
    // breaker.
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let probe = b.try_acquire().unwrap();
    mock.increment(5 * SEC);
    probe.record(Verdict::Success);
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ProbeExpired);
    assert_eq!(b.snapshot().retry_after, Some(20 * SEC));
}

#[test]
fn a_probe_that_answers_just_in_time_decides() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let probe = b.try_acquire().unwrap();
    mock.increment(5 * SEC - NS);
    probe.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_stale_closed_permit_does_not_decide_in_half_open() {
    let (b, mock) = breaker(|b| b);
    let early = b.try_acquire().unwrap();
    assert!(!early.is_probe());
    trip(&b, 1);
    mock.increment(10 * SEC);
    let probe = b.try_acquire().unwrap();
    early.record(Verdict::Success);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.snapshot().probes_in_flight, 1);
    let totals = b.snapshot().totals;
    assert_eq!((totals.calls, totals.successes), (2, 1));
    probe.record(Verdict::Failure);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_panicking_probe_counts_as_failed() {
    let (b, mock) = breaker(|b| b);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = b.call(|| -> Result<(), DepError> { panic!("probe blew up") });
    }));
    assert!(r.is_err());
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ProbeFailed);
    assert_eq!(b.snapshot().retry_after, Some(20 * SEC));
}

#[test]
fn an_on_time_probe_does_not_close_it_while_another_probe_is_past_its_deadline() {
    let (b, mock) = breaker(|b| b.half_open_max_concurrent(2));
    trip(&b, 1);
    mock.increment(10 * SEC);
    std::mem::forget(b.try_acquire().unwrap());
    mock.increment(4 * SEC);
    let second = b.try_acquire().unwrap();
    mock.increment(SEC);
    // The first probe has now been out for max_probe_duration: it failed.
    second.record(Verdict::Success);
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ProbeExpired);
}
