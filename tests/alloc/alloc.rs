//! The hot path does not allocate: a counting global allocator watches each
//! kind of call after a warm-up.
//!
//! The count is per thread, so tests running in parallel do not see each
//! other's allocations.

use std::hint::black_box;
use std::io;
use std::time::Duration;

use fusebox::{Breaker, CallError, CallPath, Classifier, State, Verdict};

use crate::support::counting_alloc;

/// Long enough that an open breaker stays open for the whole test.
const HOUR: Duration = Duration::from_secs(3600);

fn default_config() -> Breaker {
    Breaker::builder("alloc")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(HOUR)
        .max_open_duration(HOUR)
        .build()
        .unwrap()
}

/// Consecutive failures only: no window.
fn cheapest_config() -> Breaker {
    Breaker::builder("alloc")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(5)
        .failure_rate_threshold(None)
        .open_duration(HOUR)
        .max_open_duration(HOUR)
        .build()
        .unwrap()
}

fn ok() -> Result<u64, io::Error> {
    Ok(black_box(7))
}

fn timed_out() -> Result<u64, io::Error> {
    Err(io::Error::from(io::ErrorKind::TimedOut))
}

fn open(breaker: Breaker) -> Breaker {
    for _ in 0..5 {
        let _ = breaker.call(timed_out);
    }
    assert_eq!(breaker.state(), State::Open);
    breaker
}

#[test]
fn the_counter_sees_an_allocation() {
    // Guards every other test here: a counter that saw nothing would pass
    // them all.
    let n = counting_alloc::allocations_per_1000(|| {
        black_box(Box::new(black_box(1_u64)));
    });
    assert_eq!(n, 1_000);
}

#[test]
fn a_successful_call_on_a_closed_breaker_allocates_nothing() {
    for breaker in [default_config(), cheapest_config()] {
        let n = counting_alloc::allocations_per_1000(|| {
            assert_eq!(breaker.call(ok).unwrap(), 7);
        });
        assert_eq!(n, 0);
        assert_eq!(breaker.snapshot().totals.successes, 1_100);
    }
}

#[test]
fn a_call_reported_through_a_permit_allocates_nothing() {
    let breaker = cheapest_config();
    let n = counting_alloc::allocations_per_1000(|| {
        let permit = breaker.try_acquire().unwrap();
        permit.record(Verdict::Success);
    });
    assert_eq!(n, 0);
}

#[test]
fn a_failed_call_allocates_nothing() {
    for breaker in [default_config(), cheapest_config()] {
        // One call in three fails: never five in a row, and a failure rate
        // under one half, so the breaker stays closed throughout.
        let mut i = 0_u32;
        let n = counting_alloc::allocations_per_1000(|| {
            i += 1;
            let result = breaker.call(if i % 3 == 0 { timed_out } else { ok });
            assert!(matches!(result, Err(CallError::Failed(_))) == (i % 3 == 0));
        });
        assert_eq!(n, 0);
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(breaker.snapshot().totals.failures, 366);
    }
}

#[test]
fn a_refused_call_on_an_open_breaker_allocates_nothing() {
    for breaker in [open(default_config()), open(cheapest_config())] {
        let n = counting_alloc::allocations_per_1000(|| {
            let err = breaker.call(ok).unwrap_err();
            assert!(matches!(err, CallError::Rejected(_)));
        });
        assert_eq!(n, 0);
        assert_eq!(breaker.snapshot().totals.short_circuits, 1_100);
    }
}

#[test]
fn a_refused_call_on_a_forced_open_breaker_allocates_nothing() {
    let breaker = cheapest_config();
    breaker.force_open("ops", "vendor maintenance");
    let n = counting_alloc::allocations_per_1000(|| {
        assert!(breaker.call(ok).unwrap_err().rejected().is_some());
    });
    assert_eq!(n, 0);
}

#[test]
fn a_snapshot_allocates_nothing() {
    // Open, so the snapshot also copies the last state change.
    let breaker = open(default_config());
    let n = counting_alloc::allocations_per_1000(|| {
        let snap = breaker.snapshot();
        assert_eq!(snap.state, State::Open);
        assert!(snap.last_transition.is_some());
    });
    assert_eq!(n, 0);

    let breaker = cheapest_config();
    breaker.force_open("ops", "vendor maintenance");
    breaker.reset("ops", "maintenance over");
    let n = counting_alloc::allocations_per_1000(|| {
        let snap = breaker.snapshot();
        assert_eq!(snap.last_transition.unwrap().reason.actor(), Some("ops"));
    });
    assert_eq!(n, 0);
}

/// Times its calls (`slow_call_duration`), so it keeps a call-duration
/// histogram.
fn timed_config() -> Breaker {
    Breaker::builder("alloc")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(u32::MAX)
        .failure_rate_threshold(None)
        .slow_call_duration(HOUR)
        .build()
        .unwrap()
}

#[test]
fn a_timed_call_files_its_duration_without_allocating() {
    let breaker = timed_config();
    let n = counting_alloc::allocations_per_1000(|| {
        breaker.call(ok).unwrap();
    });
    assert_eq!(n, 0);
    let n = counting_alloc::allocations_per_1000(|| {
        let _ = breaker.call(timed_out);
    });
    assert_eq!(n, 0);
    let filed = breaker.snapshot().call_durations.unwrap().count();
    assert!(filed >= 2_000, "{filed} calls filed");
}

#[test]
fn a_snapshot_of_a_timed_breaker_allocates_once_for_its_histogram() {
    let breaker = timed_config();
    breaker.call(ok).unwrap();
    let n = counting_alloc::allocations_per_1000(|| {
        let snap = breaker.snapshot();
        assert!(snap.call_durations.is_some());
    });
    assert_eq!(n, 1_000);
}
