//! The settings a team coming from Resilience4j, Polly or gobreaker looks
//! for: a result classifier, a trip predicate, an open-period function, a
//! count window, a closed-state interval, what opened the breaker, runs of
//! successes, a cap on probes per half-open period, half-open judged by a
//! rate, and the hint a half-open refusal gives.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::{
    Breaker, HalfOpenRate, OpenPeriod, OpenPeriodInput, Reason, ResultClassifier, State,
    StateChange, TripPredicate, Verdict, WindowCounts,
};

use crate::support::breaker::*;

fn reason(b: &Breaker) -> Reason {
    b.snapshot().last_transition.expect("a change").reason
}

// --- Classification ---------------------------------------------------------

#[derive(Debug, PartialEq)]
struct Quote {
    price: f64,
}

fn zero_price_is_a_failure() -> ResultClassifier {
    ResultClassifier::for_type(|q: &Quote| {
        if q.price > 0.0 {
            Verdict::Success
        } else {
            Verdict::Failure
        }
    })
}

#[test]
fn an_ok_result_judged_a_failure_counts_against_the_dependency_and_is_returned() {
    let (b, _mock) = quiet("quotes");
    let b = b
        .consecutive_failure_threshold(3)
        .result_classifier(zero_price_is_a_failure())
        .build()
        .unwrap();
    for _ in 0..2 {
        let q = b.call(|| Ok::<_, DepError>(Quote { price: 0.0 }));
        assert_eq!(q.unwrap(), Quote { price: 0.0 }, "the caller still gets it");
    }
    assert_eq!(b.snapshot().consecutive_failures, 2);
    b.call(|| Ok::<_, DepError>(Quote { price: 101.5 }))
        .unwrap();
    assert_eq!(
        b.snapshot().consecutive_failures,
        0,
        "a good quote ends the run"
    );
    for _ in 0..3 {
        b.call_any(|| Ok::<_, String>(Quote { price: 0.0 }))
            .unwrap();
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(reason(&b), Reason::ConsecutiveFailures { count: 3 });
}

#[test]
fn a_result_classifier_sees_a_permits_finish_and_passes_other_types_as_successes() {
    let (b, _mock) = quiet("quotes");
    let b = b
        .consecutive_failure_threshold(1)
        .result_classifier(zero_price_is_a_failure())
        .build()
        .unwrap();
    assert_eq!(b.call(|| Ok::<u32, DepError>(0)).unwrap(), 0);
    assert_eq!(b.state(), State::Closed, "a u32 is not a Quote");
    let permit = b.try_acquire().unwrap();
    let verdict = permit.finish(&Ok::<_, DepError>(Quote { price: -1.0 }));
    assert_eq!(verdict, Verdict::Failure);
    assert_eq!(b.state(), State::Open);
}

// --- Trip and break policies as functions ----------------------------------

#[test]
fn a_trip_predicate_opens_the_breaker_and_is_named_in_the_reason() {
    let (b, _mock) = quiet("gobreaker-style");
    let b = b
        .minimum_calls(100)
        .trip_predicate(TripPredicate::new(
            "60% of more than 4",
            |c: &WindowCounts| c.calls > 4 && c.failure_rate() >= 0.6,
        ))
        .build()
        .unwrap();
    for _ in 0..2 {
        succeed(&b).unwrap();
    }
    for _ in 0..2 {
        fail(&b).unwrap_err();
    }
    assert_eq!(b.state(), State::Closed, "4 calls: not more than 4");
    fail(&b).unwrap_err();
    assert_eq!(
        b.state(),
        State::Open,
        "3 of 5, without waiting for minimum_calls"
    );
    assert_eq!(
        reason(&b),
        Reason::TripPredicate {
            name: "60% of more than 4".into(),
            calls: 5,
            failures: 3
        }
    );
}

#[test]
fn a_success_that_makes_a_trip_predicate_true_trips_on_the_spot() {
    // A success must take the lock while a predicate is set: the breaker
    // cannot foresee which counts an arbitrary predicate holds for, and a
    // success counted without the lock would never be judged.
    let (b, _mock) = quiet("predicate");
    let b = b
        .trip_predicate(TripPredicate::new(
            "five to eight calls",
            |c: &WindowCounts| (5..=8).contains(&c.calls),
        ))
        .build()
        .unwrap();
    for _ in 0..4 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.state(), State::Closed);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn the_trip_predicate_sees_the_runs_of_failures_and_successes() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let (b, _mock) = quiet("runs");
    let b = b
        .trip_predicate(TripPredicate::new("never", move |c: &WindowCounts| {
            log.lock()
                .unwrap()
                .push((c.consecutive_failures, c.consecutive_successes));
            false
        }))
        .build()
        .unwrap();
    succeed(&b).unwrap();
    succeed(&b).unwrap();
    fail(&b).unwrap_err();
    assert_eq!(*seen.lock().unwrap(), vec![(0, 1), (0, 2), (1, 0)]);
}

#[test]
fn an_open_period_function_decides_each_period_under_the_ceiling() {
    let inputs = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&inputs);
    let (b, mock) = quiet("linear");
    let b = b
        .consecutive_failure_threshold(1)
        .max_open_duration(12 * SEC)
        .open_duration(SEC)
        .jitter(0.5)
        .open_period(OpenPeriod::new(move |i: &OpenPeriodInput| {
            log.lock().unwrap().push(*i);
            5 * SEC * (i.reopens + 1)
        }))
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    assert_eq!(
        b.snapshot().retry_after,
        Some(5 * SEC),
        "no jitter: the function's period"
    );
    mock.increment(5 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().retry_after, Some(10 * SEC));
    mock.increment(10 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(
        b.snapshot().retry_after,
        Some(12 * SEC),
        "cut to max_open_duration"
    );
    let inputs = inputs.lock().unwrap();
    let periods: Vec<_> = inputs.iter().map(|i| (i.reopens, i.last_period)).collect();
    assert_eq!(
        periods,
        vec![(0, Duration::ZERO), (1, 5 * SEC), (2, 10 * SEC)]
    );
    assert!(inputs.iter().all(|i| i.failure_rate.is_none()), "no window");
}

#[test]
fn an_open_period_function_is_told_the_windows_failure_rate() {
    let rates = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&rates);
    let (b, _mock) = quiet("by-rate");
    let b = b
        .failure_rate_threshold(0.5)
        .minimum_calls(4)
        .open_period(OpenPeriod::new(move |i: &OpenPeriodInput| {
            log.lock().unwrap().push(i.failure_rate);
            Duration::from_secs_f64(60.0 * i.failure_rate.unwrap_or(1.0))
        }))
        .build()
        .unwrap();
    succeed(&b).unwrap();
    for _ in 0..3 {
        fail(&b).unwrap_err();
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(*rates.lock().unwrap(), vec![Some(0.75)]);
    assert_eq!(b.snapshot().open_duration, 45 * SEC);
}

// --- Windows ----------------------------------------------------------------

#[test]
fn a_count_window_judges_the_last_n_calls_however_old() {
    let (b, mock) = quiet("count");
    let b = b
        .failure_window(60 * SEC)
        .count_window(10)
        .minimum_calls(10)
        .failure_rate_threshold(0.5)
        .build()
        .unwrap();
    for _ in 0..5 {
        fail(&b).unwrap_err();
        mock.increment(Duration::from_secs(3600));
    }
    for _ in 0..4 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.state(), State::Closed, "9 calls: below minimum_calls");
    assert_eq!(b.snapshot().window_calls, 9, "hours old, still counted");
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Open, "5 of the last 10, by a success");
    assert_eq!(
        reason(&b),
        Reason::FailureRate {
            rate: 0.5,
            calls: 10
        }
    );
}

#[test]
fn the_oldest_call_leaves_a_full_count_window() {
    let (b, _mock) = quiet("count");
    let b = b
        .count_window(10)
        .minimum_calls(10)
        .failure_rate_threshold(0.5)
        .build()
        .unwrap();
    for _ in 0..4 {
        fail(&b).unwrap_err();
    }
    for _ in 0..10 {
        succeed(&b).unwrap();
    }
    let s = b.snapshot();
    assert_eq!(
        (s.window_calls, s.window_failures),
        (10, 0),
        "the failures left"
    );
    for _ in 0..4 {
        fail(&b).unwrap_err();
    }
    assert_eq!(b.state(), State::Closed, "4 of 10");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "5 of 10");
}

#[test]
fn closed_interval_clears_the_closed_state_counts_each_period() {
    let (b, mock) = quiet("per-minute");
    let b = b
        .consecutive_failure_threshold(3)
        .window_failure_threshold(4)
        .closed_interval(60 * SEC)
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    mock.increment(59 * SEC);
    assert_eq!(b.snapshot().window_failures, 2);
    mock.increment(SEC);
    let s = b.snapshot();
    assert_eq!(
        (s.consecutive_failures, s.window_failures),
        (0, 0),
        "a new minute"
    );
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "two in this minute");
    // Into the minute that starts at 180 s: the boundaries stay on the minute.
    mock.increment(179 * SEC);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    mock.increment(SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().consecutive_failures, 1, "the minute at 240 s");
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "three in one minute");
}

#[test]
fn closed_interval_keeps_lock_free_successes_in_the_interval_they_were_counted_in() {
    // No window: successes are counted without the lock until the interval
    // ends, and none counted after it may land in the one before.
    let (b, mock) = quiet("per-minute");
    let b = b
        .consecutive_failure_threshold(3)
        .closed_interval(60 * SEC)
        .build()
        .unwrap();
    for _ in 0..3 {
        succeed(&b).unwrap();
    }
    mock.increment(60 * SEC);
    for _ in 0..2 {
        succeed(&b).unwrap();
    }
    let s = b.snapshot();
    assert_eq!(
        s.consecutive_successes, 2,
        "this interval's successes, and only those"
    );
    assert_eq!(s.totals.successes, 5);
}

// --- What the breaker remembers --------------------------------------------

#[test]
fn the_error_that_opened_the_breaker_is_in_the_change_the_snapshot_and_behind_a_refusal() {
    let changes = Arc::new(Mutex::new(Vec::<StateChange>::new()));
    let log = Arc::clone(&changes);
    let (b, mock) = quiet("refdata");
    let b = b
        .consecutive_failure_threshold(2)
        .open_duration(10 * SEC)
        .on_state_change(move |c| log.lock().unwrap().push(c.clone()))
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    b.call(|| Err::<u32, _>(std::io::Error::other("feed stale\nsince 09:30")))
        .unwrap_err();
    assert_eq!(b.state(), State::Closed, "an io::Error is not an Outage");
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);

    let opening = changes.lock().unwrap()[0].clone();
    let cause = opening.cause.clone().expect("the failure that opened it");
    assert_eq!(cause.message(), "dependency unavailable");
    assert!(
        cause.type_name().ends_with("DepError"),
        "{}",
        cause.type_name()
    );
    let line = opening.to_string();
    assert!(line.contains("after `dependency unavailable ("), "{line}");

    let rej = refused(succeed(&b));
    assert_eq!(rej.state(), State::Open);
    assert_eq!(
        b.last_failure(),
        Some(cause.clone()),
        "what a refused caller can show"
    );
    assert_eq!(b.snapshot().opened_by, Some(cause));

    mock.increment(10 * SEC);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.last_failure(), None, "closed: nothing broken");
    assert_eq!(changes.lock().unwrap()[2].cause, None);
}

#[test]
fn a_failed_probe_carries_its_own_error() {
    let (b, mock) = quiet("refdata");
    let b = b
        .consecutive_failure_threshold(1)
        .classifier(fusebox::Classifier::every_error_is_a_failure())
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    b.call(|| Err::<u32, _>(std::io::Error::other("first")))
        .unwrap_err();
    mock.increment(10 * SEC);
    b.call(|| Err::<u32, _>(std::io::Error::other("the probe's")))
        .unwrap_err();
    assert_eq!(reason(&b), Reason::ProbeFailed);
    assert_eq!(b.last_failure().unwrap().message(), "the probe's");
}

#[test]
fn the_snapshot_counts_successes_in_a_row() {
    let (b, _mock) = quiet("runs");
    let b = b.consecutive_failure_threshold(5).build().unwrap();
    for _ in 0..3 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.snapshot().consecutive_successes, 3, "quiet ones included");
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().consecutive_successes, 0);
    succeed(&b).unwrap();
    assert_eq!(b.snapshot().consecutive_successes, 1);
}

// --- Half-open variants -----------------------------------------------------

fn tripped(
    configure: impl FnOnce(fusebox::BreakerBuilder) -> fusebox::BreakerBuilder,
) -> (Breaker, Arc<quanta::Mock>) {
    let (b, mock) = quiet("probes");
    let b = configure(
        b.consecutive_failure_threshold(1)
            .open_duration(10 * SEC)
            .max_probe_duration(5 * SEC),
    )
    .build()
    .unwrap();
    fail(&b).unwrap_err();
    mock.increment(10 * SEC);
    (b, mock)
}

#[test]
fn half_open_max_probes_caps_the_probes_of_a_whole_half_open_period() {
    let (b, mock) = tripped(|b| {
        b.half_open_max_concurrent(3)
            .half_open_success_threshold(2)
            .half_open_max_probes(2)
    });
    let first = b.try_acquire().unwrap();
    first.record(Verdict::Ignore);
    let p1 = b
        .try_acquire()
        .expect("an ignored probe gives its place back");
    let p2 = b.try_acquire().unwrap();
    mock.increment(SEC);
    let rej = b.try_acquire().unwrap_err();
    assert_eq!(
        rej.state(),
        State::HalfOpen,
        "two probes this period, one slot free"
    );
    assert_eq!(rej.retry_after(), Some(4 * SEC));
    assert!(!b.would_permit());
    p1.record(Verdict::Success);
    let rej = b.try_acquire().unwrap_err();
    assert_eq!(
        rej.state(),
        State::HalfOpen,
        "a decided probe does not give its place back"
    );
    p2.record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn half_open_judged_by_a_rate_closes_below_it() {
    let (b, _mock) = tripped(|b| {
        b.half_open_max_concurrent(4).half_open_rate(HalfOpenRate {
            probes: 4,
            failure_rate_threshold: 0.5,
        })
    });
    let probes: Vec<_> = (0..4).map(|_| b.try_acquire().unwrap()).collect();
    assert!(b.try_acquire().is_err(), "the round is four probes");
    let mut probes = probes.into_iter();
    probes.next().unwrap().record(Verdict::Failure);
    probes.next().unwrap().record(Verdict::Success);
    probes.next().unwrap().record(Verdict::Success);
    assert_eq!(b.state(), State::HalfOpen, "2 of 4 could still fail");
    probes.next().unwrap().record(Verdict::Success);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(reason(&b), Reason::ProbeSucceeded { successes: 3 });
}

#[test]
fn half_open_judged_by_a_rate_reopens_as_soon_as_the_rate_is_certain() {
    let (b, _mock) = tripped(|b| {
        b.half_open_max_concurrent(4).half_open_rate(HalfOpenRate {
            probes: 4,
            failure_rate_threshold: 0.5,
        })
    });
    let probes: Vec<_> = (0..4).map(|_| b.try_acquire().unwrap()).collect();
    let mut probes = probes.into_iter();
    probes.next().unwrap().record(Verdict::Success);
    probes.next().unwrap().record(Verdict::Failure);
    assert_eq!(b.state(), State::HalfOpen);
    probes.next().unwrap().record(Verdict::Failure);
    assert_eq!(
        b.state(),
        State::Open,
        "2 of 4 failed: at the rate whatever the last says"
    );
    assert_eq!(
        reason(&b),
        Reason::ProbeFailureRate {
            rate: 2.0 / 3.0,
            probes: 3
        }
    );
}

#[test]
fn a_half_open_refusal_says_when_the_probe_out_reaches_its_deadline() {
    let (b, mock) = tripped(|b| b);
    let probe = b.try_acquire().unwrap();
    mock.increment(2 * SEC);
    let rej = b.try_acquire().unwrap_err();
    assert_eq!(rej.state(), State::HalfOpen);
    assert_eq!(rej.retry_after(), Some(3 * SEC));
    probe.record(Verdict::Success);
}

#[test]
fn counted_calls_in_flight_are_those_admitted_and_not_reported() {
    let (b, mock) = quiet("in-flight");
    let b = b
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .count_calls_in_flight(true)
        .build()
        .unwrap();
    let a = b.try_acquire().unwrap();
    let c = b.try_acquire_owned().unwrap();
    succeed(&b).unwrap();
    assert_eq!(b.snapshot().calls_in_flight, Some(2));
    a.record(Verdict::Success);
    assert_eq!(
        b.snapshot().calls_in_flight,
        Some(1),
        "a success reports under the lock"
    );
    c.record(Verdict::Failure);
    assert_eq!(b.state(), State::Open);
    refused(succeed(&b));
    assert_eq!(
        b.snapshot().calls_in_flight,
        Some(0),
        "a refusal is never in flight"
    );
    mock.increment(10 * SEC);
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.snapshot().calls_in_flight, Some(1), "the probe");
    drop(probe);
    assert_eq!(b.snapshot().calls_in_flight, Some(0));
}

#[test]
fn calls_in_flight_are_not_counted_by_default() {
    let (b, _mock) = quiet("default");
    let b = b.consecutive_failure_threshold(3).build().unwrap();
    let _p = b.try_acquire().unwrap();
    assert_eq!(b.snapshot().calls_in_flight, None);
}

#[test]
fn a_trip_predicate_that_panics_holds_no_breaker_up() {
    let (b, _mock) = quiet("predicate");
    let b = b
        .consecutive_failure_threshold(2)
        .trip_predicate(TripPredicate::new("panics", |c: &WindowCounts| {
            assert!(c.failures == 0, "a bug in the predicate");
            false
        }))
        .build()
        .unwrap();
    succeed(&b).unwrap();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "the built-in condition still trips");
    assert_eq!(b.snapshot().totals.failures, 2);
}

#[test]
fn an_open_period_function_that_panics_falls_back_to_the_backoff() {
    let (b, mock) = quiet("period");
    let b = b
        .consecutive_failure_threshold(1)
        .open_duration(7 * SEC)
        .open_period(OpenPeriod::new(|_: &OpenPeriodInput| -> Duration {
            panic!("a bug in the period function")
        }))
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().retry_after, Some(7 * SEC));
    mock.increment(7 * SEC);
    assert_eq!(b.state(), State::HalfOpen);
}
