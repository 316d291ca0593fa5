//! The new ways in keep the hot path allocation-free: `call_any` on a
//! closed breaker and on an open one, an owned permit, a
//! permit reported with `finish`, and `would_permit`.
//!
//! The count is per thread, so tests running in parallel do not see each
//! other's allocations.

use std::hint::black_box;
use std::time::Duration;

use fusebox::{Breaker, CallError, CallPath, Classifier, State, Verdict};

use crate::support::counting_alloc;

const HOUR: Duration = Duration::from_secs(3600);

/// An application's own error type, with no `Error` impl.
#[derive(Debug)]
enum Quote {
    Timeout,
}

fn breaker() -> Breaker {
    Breaker::builder("alloc-any")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::for_type(|_: &Quote| Verdict::Failure))
        .consecutive_failure_threshold(5)
        .open_duration(HOUR)
        .max_open_duration(HOUR)
        .build()
        .unwrap()
}

fn ok() -> Result<u64, Quote> {
    Ok(black_box(7))
}

#[test]
fn the_counter_sees_an_allocation() {
    let n = counting_alloc::allocations_per_1000(|| {
        black_box(Box::new(black_box(1_u64)));
    });
    assert_eq!(n, 1_000);
}

#[test]
fn call_any_on_a_closed_breaker_allocates_nothing() {
    let b = breaker();
    assert_eq!(
        counting_alloc::allocations_per_1000(|| assert_eq!(b.call_any(ok).unwrap(), 7)),
        0
    );
    assert_eq!(b.snapshot().totals.successes, 1_100);
}

#[test]
fn call_any_refused_by_an_open_breaker_allocates_nothing() {
    let b = breaker();
    for _ in 0..5 {
        let _ = b.call_any(|| Err::<u64, _>(Quote::Timeout));
    }
    assert_eq!(b.state(), State::Open);
    let n = counting_alloc::allocations_per_1000(|| {
        assert!(matches!(b.call_any(ok), Err(CallError::Rejected(_))));
    });
    assert_eq!(n, 0);
    assert_eq!(
        counting_alloc::allocations_per_1000(|| assert!(!b.would_permit())),
        0
    );
}

#[test]
fn owned_and_finished_permits_allocate_nothing() {
    let b = breaker();
    let n = counting_alloc::allocations_per_1000(|| {
        let permit = b.try_acquire_owned().unwrap();
        permit.record(Verdict::Success);
    });
    assert_eq!(n, 0);
    let n = counting_alloc::allocations_per_1000(|| {
        let permit = b.try_acquire().unwrap();
        assert_eq!(permit.finish_any(&ok()), Verdict::Success);
    });
    assert_eq!(n, 0);
    assert_eq!(
        counting_alloc::allocations_per_1000(|| assert!(b.would_permit())),
        0
    );
}
