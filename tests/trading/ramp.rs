//! Ramp-up after close: a rising fraction of calls for a while after the
//! breaker closes on a probe, refusals for the rest, and a relapse that
//! re-opens with the outage's backoff.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fusebox::{Breaker, CallError, RampUp, Reason, State};

use crate::support::breaker::*;

/// Consecutive(1), 10 s open doubling per re-open, a 10 s ramp from 20 %.
fn ramping() -> (Breaker, Arc<quanta::Mock>) {
    let (builder, mock) = quiet("vendor");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .backoff_multiplier(2.0)
        .max_open_duration(600 * SEC)
        .ramp_up(RampUp::linear(10 * SEC, 0.2))
        .build()
        .unwrap();
    (b, mock)
}

/// Trips `b`, waits out the open period and closes it with a probe.
fn recover(b: &Breaker, mock: &quanta::Mock, failures: u32) {
    trip(b, failures);
    mock.increment(b.snapshot().retry_after.unwrap());
    succeed(b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

/// Calls offered by 16 threads at once, `per_thread` each; each admitted
/// call runs `vendor`. Returns how many were admitted.
fn offer_from_16_threads(
    b: &Breaker,
    per_thread: u64,
    vendor: impl Fn() -> Result<u32, DepError> + Sync,
) -> u64 {
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                for _ in 0..per_thread {
                    match b.call(&vendor) {
                        Err(CallError::Rejected(r)) => {
                            assert_ne!(r.state(), State::ForcedOpen, "{r}");
                        }
                        _ => {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    admitted.into_inner()
}

#[test]
fn admits_the_documented_fraction_under_16_threads() {
    let (b, mock) = ramping();
    recover(&b, &mock, 1);
    mock.increment(5 * SEC);
    // Halfway: 0.2 + 0.8 * 0.5.
    assert_eq!(b.snapshot().ramp_fraction, Some(0.6));
    let admitted = offer_from_16_threads(&b, 1000, || Ok(1));
    assert_eq!(b.state(), State::Closed, "every refusal was the ramp's");
    let expected = 0.6 * 16_000.0;
    assert!(
        (admitted as f64 - expected).abs() <= 16_000.0 * 0.01,
        "admitted {admitted} of 16000, expected {expected}"
    );
    assert_eq!(b.snapshot().totals.short_circuits, 16_000 - admitted);
}

#[test]
fn a_refusal_during_the_ramp_says_closed_and_attempts_nothing() {
    let (b, mock) = ramping();
    recover(&b, &mock, 1);
    // The probe was the first call at 20 %: the next four are refused.
    let mut attempted = 0;
    let refusals: Vec<_> = (0..4)
        .map(|_| {
            b.call(|| {
                attempted += 1;
                Ok::<_, DepError>(1)
            })
        })
        .filter(Result::is_err)
        .map(refused)
        .collect();
    assert_eq!(refusals.len(), 4);
    assert_eq!(attempted, 0);
    for r in refusals {
        assert_eq!(r.state(), State::Closed);
        assert_eq!(r.retry_after(), None);
        assert_eq!(r.to_string(), "breaker `vendor` is ramping up");
    }
}

#[test]
fn after_the_ramp_every_call_is_admitted_again() {
    let (b, mock) = ramping();
    recover(&b, &mock, 1);
    mock.increment(10 * SEC);
    for _ in 0..100 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.snapshot().ramp_fraction, None);
    assert_eq!(b.snapshot().totals.short_circuits, 0);
}

#[test]
fn a_failure_during_the_ramp_reopens_with_the_escalated_backoff() {
    let (b, mock) = ramping();
    trip(&b, 1); // 10 s
    mock.increment(10 * SEC);
    fail(&b).unwrap_err(); // probe failed: 20 s
    mock.increment(20 * SEC);
    succeed(&b).unwrap(); // closed, ramping
    mock.increment(SEC);
    // The first call the ramp admits fails.
    let refusals = (0..10)
        .take_while(|_| matches!(fail(&b), Err(CallError::Rejected(_))))
        .count();
    assert!(refusals < 10);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(s.last_transition.unwrap().reason, Reason::RampFailed);
    assert_eq!(s.open_duration, 40 * SEC, "the third period, not the base");
}

#[test]
fn a_reset_does_not_ramp() {
    let (b, _mock) = ramping();
    trip(&b, 1);
    b.reset("ops", "vendor confirmed up");
    for _ in 0..10 {
        succeed(&b).unwrap();
    }
    assert_eq!(b.snapshot().ramp_fraction, None);
}

/// A vendor coming back from an outage: in each 100 ms tick it serves at
/// most `capacity` of the calls it gets, and fails the rest (overloaded).
/// Its capacity recovers from 30 % of the load to all of it over 8 s.
struct RecoveringVendor {
    load: u64,
    since: Duration,
    served: AtomicU64,
}

impl RecoveringVendor {
    fn capacity(&self) -> u64 {
        let f = (0.3 + 0.7 * self.since.as_secs_f64() / 8.0).min(1.0);
        (f * self.load as f64) as u64
    }

    fn call(&self) -> Result<u32, DepError> {
        if self.served.fetch_add(1, Ordering::Relaxed) < self.capacity() {
            Ok(1)
        } else {
            Err(DepError::Outage(Outage))
        }
    }
}

/// Runs 12 s of 100 ms ticks after the breaker closes, 16 threads each
/// offering 20 calls a tick. Returns the trips after recovery.
fn trips_after_recovery(b: &Breaker, mock: &quanta::Mock) -> u64 {
    recover(b, mock, 3);
    let before = b.snapshot().trips;
    for tick in 0..120u64 {
        let vendor = RecoveringVendor {
            load: 16 * 20,
            since: Duration::from_millis(100 * tick),
            served: AtomicU64::new(0),
        };
        offer_from_16_threads(b, 20, || vendor.call());
        mock.increment(100 * MS);
    }
    b.snapshot().trips - before
}

#[test]
fn a_ramp_lets_a_gradually_recovering_vendor_recover() {
    let with_ramp = {
        let (builder, mock) = quiet("vendor");
        let b = builder
            .consecutive_failure_threshold(3)
            .open_duration(SEC)
            .ramp_up(RampUp::linear(10 * SEC, 0.2))
            .build()
            .unwrap();
        trips_after_recovery(&b, &mock)
    };
    let without = {
        let (builder, mock) = quiet("vendor");
        let b = builder
            .consecutive_failure_threshold(3)
            .open_duration(SEC)
            .build()
            .unwrap();
        trips_after_recovery(&b, &mock)
    };
    assert_eq!(with_ramp, 0, "the ramp stays under the vendor's capacity");
    assert!(without >= 3, "without it the herd re-trips it: {without}");
}

#[test]
fn build_refuses_a_ramp_that_starts_at_nothing() {
    let (builder, _mock) = quiet("vendor");
    let err = builder
        .consecutive_failure_threshold(1)
        .ramp_up(RampUp::linear(10 * SEC, 0.0))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "ramp_up");
    let (builder, _mock) = quiet("vendor");
    let err = builder
        .consecutive_failure_threshold(1)
        .ramp_up(RampUp::linear(Duration::ZERO, 0.5))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "ramp_up");
}

#[test]
fn build_refuses_a_ramp_that_starts_at_every_call() {
    // From all of the calls there is nothing to ramp: it would build and
    // never ramp.
    let (builder, _mock) = quiet("vendor");
    let err = builder
        .consecutive_failure_threshold(1)
        .ramp_up(RampUp::linear(10 * SEC, 1.0))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "ramp_up");
    assert!(err.to_string().contains("(0, 1)"), "{err}");
    let (builder, _mock) = quiet("vendor");
    builder
        .consecutive_failure_threshold(1)
        .ramp_up(RampUp::linear(10 * SEC, 0.999))
        .build()
        .expect("just short of every call ramps");
}

#[test]
fn a_half_open_rate_round_that_closes_starts_the_ramp() {
    let (builder, mock) = quiet("vendor");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(10 * SEC)
        .half_open_max_concurrent(2u32)
        .half_open_rate(fusebox::HalfOpenRate {
            probes: 2,
            failure_rate_threshold: 0.5,
        })
        .ramp_up(RampUp::linear(10 * SEC, 0.2))
        .build()
        .unwrap();
    trip(&b, 1);
    mock.increment(10 * SEC);
    succeed(&b).unwrap();
    succeed(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        b.snapshot().ramp_fraction,
        Some(0.2),
        "the ramp starts on close"
    );
}

#[test]
fn would_permit_answers_as_the_ramp_would_decide() {
    let (b, mock) = ramping();
    recover(&b, &mock, 1);
    for _ in 0..20 {
        let predicted = b.would_permit();
        let admitted = succeed(&b).is_ok();
        assert_eq!(predicted, admitted);
    }
}
