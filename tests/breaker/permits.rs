//! Permits for code that is not one closure: an owned permit that moves to
//! another thread, `finish` that applies the classifier to a result, and
//! `would_permit`, which asks without taking anything.

use std::thread;

use fusebox::{Breaker, OwnedPermit, State, Verdict};

use crate::support::breaker::*;

fn assert_send_static<T: Send + 'static>(_: &T) {}

#[test]
fn an_owned_permit_moves_to_another_thread_and_reports_there() {
    let (b, _mock) = consecutive(2);
    let permits: Vec<OwnedPermit> = (0..2).map(|_| b.try_acquire_owned().unwrap()).collect();
    assert_send_static(&permits[0]);
    let workers: Vec<_> = permits
        .into_iter()
        .map(|permit| {
            thread::spawn(move || {
                let answer: Result<u32, DepError> = Err(DepError::Outage(Outage));
                permit.finish(&answer)
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), Verdict::Failure);
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_owned_permit_outlives_the_breaker_handle_it_came_from() {
    let (b, _mock) = consecutive(1);
    let watcher = b.clone();
    let permit = {
        let handle = b;
        handle.try_acquire_owned().unwrap()
    };
    permit.record(Verdict::Failure);
    assert_eq!(watcher.state(), State::Open);
}

#[test]
fn an_owned_permit_dropped_without_an_outcome_counts_as_a_failure() {
    let (b, _mock) = consecutive(1);
    let permit = b.try_acquire_owned().unwrap();
    thread::spawn(move || drop(permit)).join().unwrap();
    assert_eq!(b.snapshot().totals.failures, 1);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_owned_probe_decides_the_half_open_state() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let probe = b.try_acquire_owned().unwrap();
    assert!(probe.is_probe());
    assert!(refused(succeed(&b)).state() == State::HalfOpen);
    thread::spawn(move || probe.record(Verdict::Success))
        .join()
        .unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn finish_applies_the_classifier_so_the_callers_own_errors_do_not_count() {
    let (b, _mock) = consecutive(2);
    /// The vendor answered; the caller's parse then fails.
    fn fetch_and_parse(b: &Breaker) -> Result<u32, Box<dyn std::error::Error>> {
        let permit = b.try_acquire()?;
        let body: Result<&str, DepError> = Ok("not a number");
        permit.finish(&body);
        Ok(body?.parse()?)
    }
    for _ in 0..5 {
        fetch_and_parse(&b).unwrap_err();
    }
    let s = b.snapshot();
    assert_eq!((s.totals.successes, s.totals.failures), (5, 0));
    assert_eq!(s.state, State::Closed);
}

#[test]
fn finish_counts_what_the_classifier_says() {
    let (b, _mock) = consecutive(2);
    let business: Result<(), DepError> = Err(DepError::Business(Business));
    assert_eq!(b.try_acquire().unwrap().finish(&business), Verdict::Ignore);
    let outage: Result<(), DepError> = Err(DepError::Outage(Outage));
    assert_eq!(b.try_acquire().unwrap().finish(&outage), Verdict::Failure);
    assert_eq!(
        b.try_acquire().unwrap().finish(&Ok::<_, DepError>(1)),
        Verdict::Success
    );
    let s = b.snapshot();
    assert_eq!(
        (s.totals.successes, s.totals.failures, s.totals.ignored),
        (1, 1, 1)
    );
}

#[test]
fn finish_any_takes_errors_that_are_not_std_errors() {
    let (builder, _mock) = quiet("vendor");
    let b = builder
        .classifier(fusebox::Classifier::for_type(|e: &String| {
            if e == "timeout" {
                Verdict::Failure
            } else {
                Verdict::Ignore
            }
        }))
        .consecutive_failure_threshold(1)
        .build()
        .unwrap();
    let bad_input: Result<(), String> = Err("bad input".into());
    assert_eq!(
        b.try_acquire().unwrap().finish_any(&bad_input),
        Verdict::Ignore
    );
    let timeout: Result<(), String> = Err("timeout".into());
    let owned = b.try_acquire_owned().unwrap();
    assert_eq!(owned.finish_any(&timeout), Verdict::Failure);
    assert_eq!(b.state(), State::Open);
}

// --- would_permit ----------------------------------------------------

#[test]
fn would_permit_answers_for_each_state() {
    let (b, mock) = consecutive(1);
    assert!(b.would_permit(), "closed");
    trip(&b, 1);
    assert!(!b.would_permit(), "open");
    mock.increment(10 * SEC);
    assert!(
        b.would_permit(),
        "open, period elapsed: the next call probes"
    );
    let probe = b.try_acquire().unwrap();
    assert!(!b.would_permit(), "half-open, the one probe is out");
    probe.record(Verdict::Success);
    assert!(b.would_permit(), "closed again");
    b.force_open("ops", "maintenance");
    assert!(!b.would_permit(), "forced open");
}

#[test]
fn would_permit_never_consumes_a_probe_nor_moves_the_state() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    let before = b.snapshot();
    for _ in 0..100 {
        assert!(b.would_permit());
    }
    // The state reads as a call made now would meet it: a probe would go.
    assert_eq!(b.state(), State::HalfOpen);
    let after = b.snapshot();
    assert_eq!(after.probes_in_flight, 0, "but asking took no probe");
    assert_eq!(counters(&after), counters(&before));
    let probe = b.try_acquire().expect("the probe is still there");
    assert!(probe.is_probe());
    probe.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn would_permit_counts_no_refusal() {
    let (b, _mock) = consecutive(1);
    trip(&b, 1);
    for _ in 0..10 {
        assert!(!b.would_permit());
    }
    assert_eq!(b.snapshot().totals.short_circuits, 0);
}

#[test]
fn would_permit_is_false_once_a_probe_has_overstayed() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .max_probe_duration(5 * SEC)
        .half_open_max_concurrent(2)
        .build()
        .unwrap();
    trip(&b, 1);
    mock.increment(10 * SEC);
    let hung = b.try_acquire().unwrap();
    let reopens = b.snapshot().reopens;
    assert!(b.would_permit(), "a second probe slot is free");
    mock.increment(5 * SEC);
    assert!(
        !b.would_permit(),
        "the next call would find the hung probe and reopen"
    );
    // It reads as the next call would meet it (open again), but asking
    // reopened nothing and took no probe.
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().reopens, reopens, "asking reopened nothing");
    assert!(
        b.try_acquire().is_err(),
        "the next call finds the hung probe"
    );
    let s = b.snapshot();
    assert_eq!(s.reopens, reopens + 1, "and that call reopens it");
    assert_eq!(
        (s.trips, s.probes.expired),
        (1, 1),
        "one outage, one expired probe"
    );
    drop(hung);
}

/// A breaker whose callback holds `token`: the breaker's memory is freed
/// when the token's count falls back to one.
fn holding(token: &std::sync::Arc<()>) -> Breaker {
    let held = std::sync::Arc::clone(token);
    let (builder, _mock) = quiet("refdata");
    builder
        .consecutive_failure_threshold(100)
        .on_state_change(move |_| {
            let _ = &held;
        })
        .build()
        .unwrap()
}

#[test]
fn an_owned_permit_that_reports_lets_the_breaker_be_freed() {
    let token = std::sync::Arc::new(());
    let b = holding(&token);
    b.try_acquire_owned().unwrap().record(Verdict::Success);
    b.try_acquire_owned().unwrap().record(Verdict::Failure);
    b.try_acquire_owned().unwrap().record(Verdict::Ignore);
    let answer: Result<u32, DepError> = Err(DepError::Outage(Outage));
    b.try_acquire_owned().unwrap().finish(&answer);
    b.try_acquire_owned().unwrap().finish_any(&answer);
    b.try_acquire_owned().unwrap().record(Verdict::Success);
    drop(b.try_acquire_owned().unwrap());
    drop(b);
    assert_eq!(
        std::sync::Arc::strong_count(&token),
        1,
        "the breaker leaked"
    );
}
