//! What counts against the dependency: failures, ignored business errors,
//! panics, throttling, and refusals by inner breakers.

use std::cell::Cell;
use std::error::Error as StdError;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use fusebox::{Breaker, CallError, Classifier, Rejected, State, Verdict};

use crate::support::breaker::*;

/// A breaker with every counter in play: consecutive failures, the window,
/// both rates, slow calls.
fn busy() -> (Breaker, std::sync::Arc<quanta::Mock>) {
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(3)
        .window_failure_threshold(10)
        .failure_rate_threshold(0.9)
        .minimum_calls(10)
        .slow_call_duration(100 * MS)
        .slow_call_rate_threshold(0.9)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    (b, mock)
}

#[test]
fn a_business_error_passes_through_unchanged_and_moves_no_counter() {
    let (b, mock) = busy();
    succeed(&b).unwrap();
    succeed_after(&b, &mock, SEC).unwrap();
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    let before = b.snapshot();
    assert_eq!(before.consecutive_failures, 2);
    assert_eq!(
        (
            before.window_calls,
            before.window_failures,
            before.window_slow_calls
        ),
        (4, 2, 1)
    );
    for _ in 0..50 {
        match business(&b) {
            Err(CallError::Failed(e)) => assert_eq!(e, DepError::Business(Business)),
            other => panic!("the business error should come back as it was: {other:?}"),
        }
    }
    let mut after = b.snapshot();
    // The snapshot documents `totals.calls` as every call that reported an
    // outcome and `totals.ignored` as the ignored ones: lifetime totals, the
    // only fields an ignored call moves.
    assert_eq!(after.totals.calls, before.totals.calls + 50);
    assert_eq!(after.totals.ignored, before.totals.ignored + 50);
    after.totals.calls = before.totals.calls;
    after.totals.ignored = before.totals.ignored;
    // A breaker that times its calls files every call's duration, ignored
    // ones included.
    let count = |s: &fusebox::Snapshot| s.call_durations.as_ref().map(|h| h.count());
    assert_eq!(count(&after), count(&before).map(|n| n + 50));
    after.call_durations = before.call_durations.clone();
    assert_eq!(counters(&after), counters(&before));
    // The run of two failures is intact: one more opens it.
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_business_error_in_half_open_moves_no_counter_and_frees_the_probe() {
    let (b, mock) = busy();
    trip(&b, 3);
    mock.increment(10 * SEC);
    let before = b.snapshot();
    business(&b).unwrap_err();
    let mut after = b.snapshot();
    assert_eq!(after.state, State::HalfOpen);
    assert_eq!(after.probes_in_flight, 0);
    after.totals.calls -= 1;
    after.totals.ignored -= 1;
    // The probe counts as an ignored one, and its duration is filed.
    assert_eq!(after.probes.ignored, before.probes.ignored + 1);
    after.probes = before.probes;
    after.call_durations = before.call_durations.clone();
    // Entering half-open is a state change; compare from there.
    let mut before = before;
    before.state = State::HalfOpen;
    before.retry_after = None;
    before.last_transition = after.last_transition.clone();
    before.recent_changes = after.recent_changes.clone();
    assert_eq!(counters(&after), counters(&before));
}

#[test]
fn a_failed_call_returns_the_dependencys_own_error() {
    let (b, _mock) = busy();
    match fail(&b) {
        Err(CallError::Failed(e)) => assert_eq!(e, DepError::Outage(Outage)),
        other => panic!("{other:?}"),
    }
    let err = fail(&b).unwrap_err();
    assert!(err.rejected().is_none());
    assert!(err.rejected().is_none());
    assert_eq!(err.into_failed(), Some(DepError::Outage(Outage)));
}

#[test]
fn a_refusal_is_distinct_from_the_dependencys_error_and_carries_name_state_and_retry_after() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(4 * SEC);
    let invoked = Cell::new(false);
    let err = b
        .call(|| {
            invoked.set(true);
            Err::<(), _>(DepError::Outage(Outage))
        })
        .unwrap_err();
    assert!(!invoked.get(), "the closure was not invoked");
    assert!(err.rejected().is_some());
    let rej = *err.rejected().unwrap();
    assert_eq!(rej.breaker(), "refdata");
    assert_eq!(rej.state(), State::Open);
    assert_eq!(rej.retry_after(), Some(6 * SEC));
    assert!(err.into_failed().is_none());
    let text = rej.to_string();
    assert!(text.contains("refdata") && text.contains("open"), "{text}");
    // Found by type anywhere in a chain, without string matching.
    let wrapped = CallError::<DepError>::Rejected(rej);
    assert!(Rejected::in_chain(&wrapped));
}

#[test]
fn a_panic_in_the_wrapped_call_counts_as_a_failure_and_is_re_raised() {
    let (b, _mock) = consecutive(3);
    fail(&b).unwrap_err();
    let payload = catch_unwind(AssertUnwindSafe(|| {
        let _ = b.call(|| -> Result<(), DepError> { panic!("vendor SDK bug") });
    }))
    .expect_err("the panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"vendor SDK bug"));
    let s = b.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(s.consecutive_failures, 2);
    assert_eq!((s.totals.calls, s.totals.failures), (2, 2));
    // Still consistent: it works, and one more failure opens it.
    succeed(&b).unwrap();
    trip(&b, 3);
    assert_eq!(b.snapshot().totals.failures, 5);
}

#[test]
fn panicking_calls_alone_open_it() {
    let (b, _mock) = consecutive(3);
    for _ in 0..3 {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = b.call(|| -> Result<(), DepError> { panic!("boom") });
        }));
        assert!(r.is_err());
    }
    assert_eq!(b.state(), State::Open);
    assert!(refused(succeed(&b)).retry_after().is_some());
}

#[test]
fn a_permit_dropped_without_an_outcome_counts_as_a_failure() {
    let (b, _mock) = consecutive(2);
    fn early_return(b: &Breaker) -> Result<(), DepError> {
        let _permit = b.try_acquire().unwrap();
        Err(DepError::Outage(Outage))?;
        Ok(())
    }
    early_return(&b).unwrap_err();
    assert_eq!(b.snapshot().totals.failures, 1);
    early_return(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn the_classifier_decides_and_a_throttled_answer_sets_a_minimum_open_period() {
    let (builder, mock) = quiet("fx");
    let b = builder
        .classifier(Classifier::new(|e| match e.downcast_ref::<DepError>() {
            Some(DepError::Outage(_)) => Verdict::Throttled(Duration::from_secs(120)),
            _ => Verdict::Ignore,
        }))
        .consecutive_failure_threshold(2)
        .open_duration(10 * SEC)
        .build()
        .unwrap();
    fail(&b).unwrap_err();
    business(&b).unwrap_err();
    assert_eq!(b.snapshot().consecutive_failures, 1);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().retry_after, Some(120 * SEC));
    mock.increment(120 * SEC - NS);
    assert_eq!(refused(succeed(&b)).state(), State::Open);
    mock.increment(NS);
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn failures_of_finds_the_type_anywhere_in_the_source_chain() {
    let c = Classifier::failures_of::<Outage>();
    assert_eq!(c.classify(&Outage), Verdict::Failure);
    assert_eq!(c.classify(&DepError::Outage(Outage)), Verdict::Failure);
    assert_eq!(c.classify(&DepError::Business(Business)), Verdict::Ignore);
    let every = Classifier::every_error_is_a_failure();
    assert_eq!(every.classify(&Business), Verdict::Failure);
}

/// The caller's own error type, wrapping what the inner breaker returned.
#[derive(Debug)]
struct AppError(CallError<DepError>);

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pricing failed: {}", self.0)
    }
}

impl StdError for AppError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.0)
    }
}

fn nested() -> (Breaker, Breaker, std::sync::Arc<quanta::Mock>) {
    let (inner, mock) = consecutive(2);
    let (builder, _outer_mock) = quiet("pricing");
    // The outer breaker counts every error it sees: only the refusal rule
    // keeps the inner breaker's refusals out.
    let outer = builder
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(1)
        .build()
        .unwrap();
    (inner, outer, mock)
}

#[test]
fn an_inner_refusal_wrapped_in_the_callers_error_does_not_trip_the_outer_breaker() {
    let (inner, outer, _mock) = nested();
    trip(&inner, 2);
    let invoked = Cell::new(0);
    for _ in 0..20 {
        let r = outer.call(|| {
            inner
                .call(|| {
                    invoked.set(invoked.get() + 1);
                    Ok::<u32, DepError>(1)
                })
                .map_err(AppError)
        });
        match r {
            Err(CallError::Failed(AppError(CallError::Rejected(rej)))) => {
                assert_eq!(rej.breaker(), "refdata");
            }
            other => panic!("the inner refusal comes through the outer breaker: {other:?}"),
        }
    }
    assert_eq!(invoked.get(), 0);
    assert_eq!(outer.state(), State::Closed);
    let s = outer.snapshot();
    assert_eq!((s.totals.failures, s.totals.ignored), (0, 20));
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(
        s.totals.short_circuits, 0,
        "the outer breaker refused nothing"
    );
}

#[test]
fn an_inner_refusal_returned_as_is_does_not_trip_the_outer_breaker() {
    let (inner, outer, _mock) = nested();
    trip(&inner, 2);
    for _ in 0..5 {
        let r: Result<u32, CallError<CallError<DepError>>> = outer.call(|| succeed(&inner));
        assert!(matches!(r, Err(CallError::Failed(CallError::Rejected(_)))));
    }
    assert_eq!(outer.state(), State::Closed);
}

#[test]
fn an_inner_failure_still_counts_against_the_outer_breaker() {
    let (inner, outer, _mock) = nested();
    let r = outer.call(|| fail(&inner).map_err(AppError));
    assert!(matches!(
        r,
        Err(CallError::Failed(AppError(CallError::Failed(_))))
    ));
    assert_eq!(outer.state(), State::Open, "the dependency really failed");
}

#[test]
fn a_straggler_throttled_before_a_reset_does_not_lengthen_the_next_outage() {
    let (b, _mock) = consecutive(1);
    let straggler = b.try_acquire().unwrap();
    b.reset("ops", "vendor fixed");
    straggler.record(Verdict::Throttled(Duration::from_secs(3_600)));
    assert_eq!(b.state(), State::Closed, "a stale answer decides nothing");
    assert_eq!(b.snapshot().totals.failures, 1, "but it is in the totals");
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().retry_after, Some(10 * SEC));
}

#[test]
fn a_straggler_throttled_while_open_does_not_lengthen_the_next_open_period() {
    let (b, mock) = consecutive(1);
    let straggler = b.try_acquire().unwrap();
    trip(&b, 1);
    straggler.record(Verdict::Throttled(Duration::from_secs(3_600)));
    assert_eq!(b.snapshot().retry_after, Some(10 * SEC));
    mock.increment(10 * SEC);
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().retry_after, Some(20 * SEC));
}

#[test]
fn a_throttled_probe_holds_the_breaker_open_for_the_time_asked() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    b.try_acquire()
        .unwrap()
        .record(Verdict::Throttled(Duration::from_secs(200)));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().retry_after, Some(200 * SEC));
}
