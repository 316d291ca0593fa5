//! Every way the breaker moves between Closed, Open and HalfOpen, and every
//! trip condition on its own.

use std::cell::Cell;
use std::time::Duration;

use fusebox::{Reason, State, Verdict};

use crate::support::breaker::*;

fn last_reason(b: &fusebox::Breaker) -> Reason {
    b.snapshot()
        .last_transition
        .expect("a state change was recorded")
        .reason
}

#[test]
fn opens_after_consecutive_failures() {
    let (b, _mock) = consecutive(3);
    for _ in 0..2 {
        assert!(fail(&b).is_err());
        assert_eq!(b.state(), State::Closed);
    }
    assert!(matches!(fail(&b), Err(fusebox::CallError::Failed(_))));
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ConsecutiveFailures { count: 3 });
    let s = b.snapshot();
    assert_eq!(s.trips, 1);
    assert_eq!(s.retry_after, Some(10 * SEC));
    assert_eq!(s.open_duration, 10 * SEC);
}

#[test]
fn a_success_between_failures_keeps_it_closed() {
    let (b, _mock) = consecutive(3);
    for _ in 0..10 {
        fail(&b).unwrap_err();
        fail(&b).unwrap_err();
        assert_eq!(b.snapshot().consecutive_failures, 2);
        succeed(&b).unwrap();
        assert_eq!(b.snapshot().consecutive_failures, 0);
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().totals.failures, 20);
    trip(&b, 3);
}

#[test]
fn opens_on_failures_within_the_window_even_between_successes() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .failure_window(10 * SEC)
        .window_failure_threshold(3)
        .build()
        .unwrap();
    for _ in 0..2 {
        fail(&b).unwrap_err();
        succeed(&b).unwrap();
        mock.increment(SEC);
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().window_failures, 2);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::FailuresInWindow { failures: 3 });
}

#[test]
fn failures_older_than_the_window_no_longer_count() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .failure_window(10 * SEC)
        .window_failure_threshold(2)
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().window_failures, 1);
    // An event ages out at most a tenth (one bucket) of the window after it
    // leaves; by then it is gone for good.
    mock.increment(12 * SEC);
    assert_eq!(b.snapshot().window_failures, 0);
    assert_eq!(b.snapshot().window_calls, 0);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "the first failure aged out");
    assert_eq!(b.snapshot().window_failures, 1);
    mock.increment(SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_failure_just_inside_the_window_still_counts() {
    // Whatever the bucket boundaries, a failure less than `failure_window`
    // ago is inside the window.
    for offset_ms in [0u64, 1, 250, 500, 999] {
        let (builder, mock) = quiet("refdata");
        let b = builder
            .failure_window(10 * SEC)
            .window_failure_threshold(2)
            .build()
            .unwrap();
        mock.increment(Duration::from_millis(offset_ms));
        fail(&b).unwrap_err();
        mock.increment(10 * SEC - NS);
        assert_eq!(
            b.snapshot().window_failures,
            1,
            "a failure {:?} old fell out of a 10 s window (offset {offset_ms} ms)",
            10 * SEC - NS
        );
        fail(&b).unwrap_err();
        assert_eq!(
            b.state(),
            State::Open,
            "two failures within 10 s (offset {offset_ms} ms)"
        );
    }
}

#[test]
fn failure_rate_is_judged_only_once_minimum_calls_are_in_the_window() {
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(0.5)
        .minimum_calls(4)
        .build()
        .unwrap();
    for _ in 0..3 {
        fail(&b).unwrap_err();
    }
    assert_eq!(
        b.state(),
        State::Closed,
        "100% of 3 calls, but 4 are needed"
    );
    assert_eq!(b.snapshot().failure_rate, 1.0);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        last_reason(&b),
        Reason::FailureRate {
            rate: 1.0,
            calls: 4
        }
    );
}

#[test]
fn failure_rate_opens_at_the_threshold_not_below() {
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(0.5)
        .minimum_calls(4)
        .build()
        .unwrap();
    for _ in 0..3 {
        succeed(&b).unwrap();
    }
    fail(&b).unwrap_err(); // 1 of 4
    fail(&b).unwrap_err(); // 2 of 5
    assert_eq!(b.state(), State::Closed);
    fail(&b).unwrap_err(); // 3 of 6
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        last_reason(&b),
        Reason::FailureRate {
            rate: 0.5,
            calls: 6
        }
    );
}

#[test]
fn ignored_calls_do_not_count_toward_minimum_calls() {
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(0.5)
        .minimum_calls(3)
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    for _ in 0..10 {
        business(&b).unwrap_err();
    }
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().window_calls, 2);
    assert_eq!(b.state(), State::Closed);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn old_successes_age_out_of_the_failure_rate() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .failure_window(10 * SEC)
        .failure_rate_threshold(0.5)
        .minimum_calls(2)
        .build()
        .unwrap();
    for _ in 0..20 {
        succeed(&b).unwrap();
    }
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "2 of 22 is a low rate");
    mock.increment(20 * SEC);
    assert_eq!(b.snapshot().window_calls, 0);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open, "2 of 2 once the successes aged out");
}

#[test]
fn slow_calls_trip_on_the_slow_call_rate() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .slow_call_duration(100 * MS)
        .slow_call_rate_threshold(0.5)
        .minimum_calls(4)
        .build()
        .unwrap();
    // Exactly the limit is not slow.
    for _ in 0..4 {
        succeed_after(&b, &mock, 100 * MS).unwrap();
    }
    assert_eq!(b.snapshot().window_slow_calls, 0);
    let slow = 100 * MS + NS;
    succeed_after(&b, &mock, slow).unwrap(); // 1 of 5
    succeed_after(&b, &mock, slow).unwrap(); // 2 of 6
    assert_eq!(b.state(), State::Closed);
    let s = b.snapshot();
    assert_eq!((s.window_slow_calls, s.totals.slow), (2, 2));
    assert_eq!(s.consecutive_failures, 0, "a slow success is a success");
    succeed_after(&b, &mock, slow).unwrap(); // 3 of 7
    succeed_after(&b, &mock, slow).unwrap(); // 4 of 8
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        last_reason(&b),
        Reason::SlowCallRate {
            rate: 0.5,
            calls: 8
        }
    );
}

#[test]
fn slow_calls_wait_for_minimum_calls_too() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .slow_call_duration(100 * MS)
        .slow_call_rate_threshold(0.5)
        .minimum_calls(5)
        .build()
        .unwrap();
    for _ in 0..4 {
        succeed_after(&b, &mock, SEC).unwrap();
    }
    assert_eq!(b.state(), State::Closed, "100% slow, but only 4 calls");
    succeed_after(&b, &mock, SEC).unwrap();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn refuses_without_invoking_the_closure_while_open() {
    let (b, mock) = consecutive(2);
    trip(&b, 2);
    let invoked = Cell::new(0);
    for i in 0..100u64 {
        let r = b.call(|| {
            invoked.set(invoked.get() + 1);
            Ok::<_, DepError>(())
        });
        let rej = refused(r);
        assert_eq!(rej.breaker(), "refdata");
        assert_eq!(rej.state(), State::Open);
        assert_eq!(rej.retry_after(), Some(10 * SEC - Duration::from_millis(i)));
        mock.increment(MS);
    }
    assert_eq!(invoked.get(), 0);
    assert_eq!(b.snapshot().totals.short_circuits, 100);
    let rej = refused(succeed(&b));
    assert!(rej.to_string().contains("refdata"), "{rej}");
}

#[test]
fn open_becomes_half_open_on_the_first_call_after_the_open_period() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    // Nothing has asked yet, but the next call would be the probe: the
    // state reads half-open, with no probe out yet.
    assert_eq!(b.state(), State::HalfOpen);
    let s = b.snapshot();
    assert_eq!(
        (s.state, s.retry_after, s.probes_in_flight),
        (State::HalfOpen, None, 0)
    );
    assert_eq!(last_reason(&b), Reason::ConsecutiveFailures { count: 1 });
    let permit = b.try_acquire().expect("the probe is admitted");
    assert!(permit.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(last_reason(&b), Reason::OpenPeriodElapsed);
    assert_eq!(b.snapshot().probes_in_flight, 1);
    permit.record(Verdict::Success);
}

#[test]
fn a_successful_probe_closes_it() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    assert_eq!(succeed(&b).unwrap(), 7);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(last_reason(&b), Reason::ProbeSucceeded { successes: 1 });
    let s = b.snapshot();
    assert_eq!(s.retry_after, None);
    assert_eq!(s.open_duration, Duration::ZERO);
    assert_eq!(s.consecutive_failures, 0);
}

#[test]
fn a_failed_probe_reopens_it() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ProbeFailed);
    // One outage: the failed probe re-opens it, it does not trip it again.
    let s = b.snapshot();
    assert_eq!((s.trips, s.reopens, s.probes.failures), (1, 1, 1));
}

#[test]
fn a_slow_probe_reopens_it() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .slow_call_duration(100 * MS)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    trip(&b, 1);
    mock.increment(10 * SEC);
    assert_eq!(succeed_after(&b, &mock, 100 * MS + NS).unwrap(), 7);
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        last_reason(&b),
        Reason::ProbeSlow {
            elapsed: 100 * MS + NS
        }
    );
}

#[test]
fn a_probe_at_exactly_the_slow_limit_closes_it() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .slow_call_duration(100 * MS)
        .build()
        .unwrap();
    trip(&b, 1);
    mock.increment(b.snapshot().open_duration);
    succeed_after(&b, &mock, 100 * MS).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn an_expired_probe_reopens_it() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .max_probe_duration(5 * SEC)
        .build()
        .unwrap();
    trip(&b, 1);
    mock.increment(10 * SEC);
    std::mem::forget(b.try_acquire().unwrap());
    mock.increment(5 * SEC);
    let rej = refused(succeed(&b));
    assert_eq!(rej.state(), State::Open);
    assert_eq!(b.state(), State::Open);
    assert_eq!(last_reason(&b), Reason::ProbeExpired);
}

#[test]
fn every_trip_condition_is_independent() {
    // With consecutive failures off, a long run of failures still opens it
    // through the window.
    let (builder, _mock) = quiet("refdata");
    let b = builder.window_failure_threshold(4).build().unwrap();
    for _ in 0..3 {
        fail(&b).unwrap_err();
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 3);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);

    // And with the window off, consecutive failures alone open it.
    let (b, _mock) = consecutive(4);
    assert_eq!(b.snapshot().window_calls, 0, "no window is kept");
    trip(&b, 4);
}

#[test]
fn a_failure_counts_for_the_whole_window_and_at_most_a_tenth_longer() {
    for offset_ms in [0u64, 1, 500, 999] {
        let (builder, mock) = quiet("refdata");
        let b = builder
            .failure_window(10 * SEC)
            .window_failure_threshold(5)
            .build()
            .unwrap();
        mock.increment(Duration::from_millis(offset_ms));
        fail(&b).unwrap_err();
        mock.increment(10 * SEC);
        assert_eq!(
            b.snapshot().window_failures,
            1,
            "exactly one window old (offset {offset_ms} ms)"
        );
        mock.increment(SEC);
        assert_eq!(
            b.snapshot().window_failures,
            0,
            "a tenth of the window later (offset {offset_ms} ms)"
        );
    }
}

#[test]
fn a_success_that_brings_the_window_to_minimum_calls_opens_it_on_the_failure_rate() {
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(0.5)
        .minimum_calls(10)
        .build()
        .unwrap();
    for _ in 0..5 {
        fail(&b).unwrap_err();
    }
    for _ in 0..4 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.state(), State::Closed, "5 of 9: not enough calls yet");
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Open, "5 of 10 once the tenth call is in");
    assert_eq!(
        last_reason(&b),
        Reason::FailureRate {
            rate: 0.5,
            calls: 10
        }
    );
}

#[test]
fn a_fast_call_that_brings_the_window_to_minimum_calls_opens_it_on_the_slow_call_rate() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .slow_call_duration(100 * MS)
        .slow_call_rate_threshold(0.5)
        .minimum_calls(5)
        .build()
        .unwrap();
    for _ in 0..3 {
        succeed_after(&b, &mock, SEC).unwrap();
    }
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed, "3 slow of 4: not enough calls");
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Open, "3 slow of 5");
    assert_eq!(
        last_reason(&b),
        Reason::SlowCallRate {
            rate: 0.6,
            calls: 5
        }
    );
}

#[test]
fn a_failure_rate_raised_by_old_successes_ageing_out_opens_it_on_the_next_call() {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(0.5)
        .minimum_calls(2)
        .failure_window(10 * SEC)
        .build()
        .unwrap();
    for _ in 0..3 {
        succeed(&b).unwrap();
    }
    mock.increment(5 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Closed, "1 of 4");
    mock.increment(6 * SEC);
    // The three successes have aged out: one failure in one call, but
    // minimum_calls is 2. The next call, a success, makes it 1 of 2.
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        last_reason(&b),
        Reason::FailureRate {
            rate: 0.5,
            calls: 2
        }
    );
}
