//! Calls in flight as evidence (`stuck_call_threshold`,
//! `hung_call_duration`): the breaker opens on calls that have not
//! returned, on the mock clock.

use std::time::Duration;

use fusebox::{Breaker, OwnedPermit, Reason, State};
use quanta::Mock;

use crate::support::breaker::{quiet, refused, succeed, DepError, Outage, MS, SEC};

const SLOW: Duration = Duration::from_millis(50);

/// Opens at `n` calls in flight past 50 ms, and on nothing else.
fn stuck_at(n: u32) -> (Breaker, std::sync::Arc<Mock>) {
    let (b, mock) = quiet("pricing");
    let b = b
        .slow_call_duration(SLOW)
        .stuck_call_threshold(n)
        .open_duration(10 * SEC)
        .build()
        .expect("valid configuration");
    (b, mock)
}

fn out(b: &Breaker) -> OwnedPermit {
    b.try_acquire_owned().expect("admitted")
}

fn ok(permit: OwnedPermit) {
    permit.finish(&Ok::<u32, DepError>(7));
}

/// A breaker opened by one call stuck past its slow mark, then half-open
/// with its probe out, admitted at the end of the open period.
fn probing() -> (Breaker, std::sync::Arc<Mock>, OwnedPermit) {
    let (b, mock) = stuck_at(1);
    let stuck = out(&b);
    mock.increment(SLOW + MS);
    refused(succeed(&b));
    drop(stuck);
    mock.increment(10 * SEC);
    let probe = out(&b);
    (b, mock, probe)
}

fn last_reason(b: &Breaker) -> Option<Reason> {
    b.snapshot().last_transition.map(|c| c.reason)
}

#[test]
fn opens_when_the_threshold_of_calls_is_in_flight_past_the_slow_mark_and_not_one_short() {
    let (b, mock) = stuck_at(3);
    let first = [out(&b), out(&b)];
    mock.increment(SLOW + MS);
    succeed(&b).expect("two stuck calls are one short");
    assert_eq!(b.state(), State::Closed);

    let third = out(&b);
    mock.increment(SLOW);
    // The third is 50 ms out: at the mark, not past it.
    succeed(&b).expect("not yet past the mark");
    mock.increment(MS);
    let r = refused(succeed(&b));
    assert_eq!(r.state(), State::Open, "refused by the trip it made");
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 3,
            over: SLOW
        })
    );
    assert_eq!(b.snapshot().trips, 1);
    drop(first);
    drop(third);
}

#[test]
fn calls_that_return_in_time_never_count_however_many_were_out() {
    let (b, mock) = stuck_at(2);
    for _ in 0..100 {
        let p = [out(&b), out(&b), out(&b)];
        mock.increment(SLOW);
        p.into_iter().for_each(ok);
    }
    mock.increment(SEC);
    succeed(&b).expect("closed");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().totals.successes, 301);
}

#[test]
fn one_hung_call_opens_the_breaker_without_a_threshold_or_a_slow_mark() {
    let (b, mock) = quiet("settlement");
    let b = b
        .hung_call_duration(5 * SEC)
        .build()
        .expect("valid configuration");
    let hung = out(&b);
    for _ in 0..10 {
        mock.increment(SEC / 2);
        succeed(&b).expect("closed until the call is past 5 s");
    }
    mock.increment(MS);
    refused(succeed(&b));
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 1,
            over: 5 * SEC
        })
    );
    drop(hung);
}

#[test]
fn a_hung_call_opens_the_breaker_below_the_stuck_threshold() {
    let (b, mock) = quiet("pricing");
    let b = b
        .slow_call_duration(SLOW)
        .stuck_call_threshold(6)
        .hung_call_duration(SEC)
        .build()
        .expect("valid configuration");
    let hung = out(&b);
    mock.increment(SEC + MS);
    refused(succeed(&b));
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 1,
            over: SEC
        })
    );
    drop(hung);
}

#[test]
fn a_stuck_call_that_returns_after_the_trip_counts_in_the_totals_only() {
    let (b, mock) = stuck_at(2);
    let stuck = [out(&b), out(&b)];
    mock.increment(SLOW + MS);
    refused(succeed(&b));
    let before = b.snapshot();
    // Both return: one a success, one a failure; neither touches the
    // open breaker.
    let [a, c] = stuck;
    ok(a);
    c.finish(&Err::<u32, _>(DepError::Outage(Outage)));
    let after = b.snapshot();
    assert_eq!(after.state, State::Open);
    assert_eq!(after.trips, 1);
    assert_eq!(after.open_duration, before.open_duration);
    assert_eq!(
        after.totals.calls,
        before.totals.calls + 2,
        "counted once each"
    );
    assert_eq!(after.consecutive_failures, 0);
}

#[test]
fn a_call_that_never_returns_does_not_stop_a_later_close_nor_count_after_it() {
    let (b, mock) = stuck_at(2);
    let stuck = [out(&b), out(&b)];
    mock.increment(SLOW + MS);
    refused(succeed(&b));
    // Never reported.
    std::mem::forget(stuck);
    mock.increment(10 * SEC);
    succeed(&b).expect("the probe");
    assert_eq!(b.state(), State::Closed);
    // The two are still out, long past the mark: they belong to the period
    // that ended and count for nothing now.
    for _ in 0..10 {
        mock.increment(SEC);
        succeed(&b).expect("closed");
    }
    let one = out(&b);
    mock.increment(SLOW + MS);
    succeed(&b).expect("one stuck call of this period is one short");
    assert_eq!(b.state(), State::Closed);
    let s = b.snapshot();
    assert_eq!((s.calls_in_flight, s.calls_stuck), (Some(1), Some(1)));
    ok(one);
}

#[test]
fn a_probe_in_flight_past_its_slow_mark_reopens_before_max_probe_duration() {
    let (b, mock, probe) = probing();
    assert_eq!(b.state(), State::HalfOpen);
    mock.increment(SLOW);
    let r = refused(succeed(&b));
    assert_eq!(r.state(), State::HalfOpen, "at the mark: still out");
    mock.increment(MS);
    let r = refused(succeed(&b));
    assert_eq!(r.state(), State::Open);
    assert_eq!(last_reason(&b), Some(Reason::ProbeStuck { over: SLOW }));
    let s = b.snapshot();
    assert_eq!(s.probes.expired, 1);
    assert_eq!(s.open_duration, 20 * SEC, "a re-open: the backoff grows");
    // Its late answer changes nothing.
    ok(probe);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_probe_that_answers_within_its_slow_mark_closes_the_breaker() {
    let (b, mock, probe) = probing();
    mock.increment(SLOW);
    ok(probe);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn stuck_calls_open_nothing_while_forced_closed() {
    let (b, mock) = stuck_at(1);
    b.force_closed("ops", "vendor migration");
    let p = out(&b);
    mock.increment(SEC);
    succeed(&b).expect("forced closed admits");
    assert_eq!(b.state(), State::ForcedClosed);
    drop(p);
}

#[test]
fn the_reasons_say_how_many_calls_and_past_what() {
    let r = Reason::StuckCalls {
        count: 6,
        over: SLOW,
    };
    assert_eq!(r.to_string(), "6 calls in flight for over 50ms");
    let r = Reason::StuckCalls {
        count: 1,
        over: 5 * SEC,
    };
    assert_eq!(r.to_string(), "1 call in flight for over 5s");
    let r = Reason::ProbeStuck { over: SLOW };
    assert_eq!(r.to_string(), "probe in flight for over 50ms");
}
