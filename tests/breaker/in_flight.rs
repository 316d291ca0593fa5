//! Calls in flight as evidence (`stuck_call_threshold`,
//! `hung_call_duration`): the breaker opens on calls that have not
//! returned, on the mock clock.

use std::time::{Duration, SystemTime};

use fusebox::trading::{MaintenanceWindow, WallClock};
use fusebox::{Breaker, OwnedPermit, RampUp, Reason, State};
use quanta::Mock;

use crate::support::breaker::{fail, quiet, refused, succeed, DepError, Outage, MS, NS, SEC};

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
    assert_eq!(s.probes.stuck, 1);
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
    let r = Reason::StuckAndHungCalls {
        stuck: 1,
        stuck_over: SLOW,
        hung: 1,
        hung_over: 5 * SEC,
    };
    assert_eq!(r.to_string(), "1 call in flight for over 5s, past 50ms too");
}

#[test]
fn a_stuck_probe_counts_as_stuck_and_not_as_expired() {
    let (b, mock, probe) = probing();
    mock.increment(SLOW + MS);
    let r = refused(succeed(&b));
    assert_eq!(r.state(), State::Open, "re-opened by the stuck probe");
    let p = b.snapshot().probes;
    assert_eq!(
        (p.stuck, p.expired, p.failures),
        (1, 0, 0),
        "60 ms out is far short of max_probe_duration"
    );
    drop(probe);
}

#[test]
fn a_breaker_whose_calls_are_stuck_reads_open_to_every_look_before_any_call() {
    let (b, mock) = stuck_at(2);
    let held = [out(&b), out(&b)];
    mock.increment(Duration::from_millis(60));
    // Nobody calls: each look sees what the next call would meet.
    assert!(!b.would_permit(), "the next call would be refused");
    assert_eq!(b.state(), State::Open);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(s.trips, 1);
    assert_eq!(s.retry_after, Some(10 * SEC));
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 2,
            over: SLOW
        })
    );
    // The call after the looks meets that state, and trips nothing more.
    let r = refused(succeed(&b));
    assert_eq!((r.state(), r.retry_after()), (State::Open, Some(10 * SEC)));
    assert_eq!(b.snapshot().trips, 1);
    drop(held);
}

#[test]
fn a_look_at_the_mark_reads_closed_and_one_past_it_reads_open() {
    let (b, mock) = stuck_at(1);
    let held = out(&b);
    mock.increment(SLOW);
    assert!(b.would_permit());
    assert_eq!(b.state(), State::Closed);
    let s = b.snapshot();
    assert_eq!(
        (s.state, s.trips, s.calls_stuck),
        (State::Closed, 0, Some(0))
    );
    mock.increment(NS);
    assert_eq!(b.state(), State::Open);
    assert!(!b.would_permit());
    assert_eq!(b.snapshot().trips, 1);
    drop(held);
}

#[test]
fn a_snapshot_alone_opens_the_breaker_on_a_hung_call_and_delivers_the_change() {
    let (b, mock) = quiet("settlement");
    let b = b
        .hung_call_duration(5 * SEC)
        .open_duration(10 * SEC)
        .build()
        .expect("valid configuration");
    let changes = b.subscribe(8).unwrap();
    let hung = out(&b);
    mock.increment(5 * SEC + MS);
    let s = b.snapshot();
    assert_eq!((s.state, s.trips), (State::Open, 1));
    let change = changes.try_recv().expect("the trip is delivered");
    assert_eq!((change.from, change.to), (State::Closed, State::Open));
    assert_eq!(
        change.reason,
        Reason::StuckCalls {
            count: 1,
            over: 5 * SEC
        }
    );
    assert!(changes.try_recv().is_none(), "one change");
    drop(hung);
}

#[test]
fn a_ramping_breaker_whose_calls_are_stuck_reads_open_before_any_call() {
    let (b, mock) = quiet("pricing");
    let b = b
        .consecutive_failure_threshold(1)
        .slow_call_duration(SLOW)
        .stuck_call_threshold(1)
        .open_duration(10 * SEC)
        .ramp_up(RampUp::linear(60 * SEC, 0.5))
        .build()
        .expect("valid configuration");
    fail(&b).unwrap_err();
    mock.increment(10 * SEC);
    succeed(&b).expect("the probe closes it");
    assert_eq!(b.snapshot().ramp_fraction, Some(0.5));
    // Half the calls offered: the first is refused, the second goes.
    refused(succeed(&b));
    let held = out(&b);
    mock.increment(SLOW + MS);
    assert_eq!(b.state(), State::Open);
    assert!(!b.would_permit());
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 1,
            over: SLOW
        })
    );
    drop(held);
}

#[test]
fn when_both_marks_are_passed_the_reason_names_both() {
    let (b, mock) = quiet("pricing");
    let b = b
        .slow_call_duration(SLOW)
        .stuck_call_threshold(3)
        .hung_call_duration(SEC)
        .build()
        .expect("valid configuration");
    let first = out(&b);
    mock.increment(900 * MS);
    // One call past the slow mark: short of three.
    let later = [out(&b), out(&b)];
    mock.increment(200 * MS);
    // Now three are past 50 ms, and the first is past 1 s.
    refused(succeed(&b));
    let reason = last_reason(&b).expect("a trip");
    assert_eq!(
        reason.to_string(),
        "3 calls in flight for over 50ms, 1 of them for over 1s"
    );
    assert_eq!(
        reason,
        Reason::StuckAndHungCalls {
            stuck: 3,
            stuck_over: SLOW,
            hung: 1,
            hung_over: SEC
        }
    );
    drop((first, later));
}

/// The wall-clock instant the maintenance breakers are built at.
fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// `stuck_at(1)` with a maintenance window from 10 s to 20 s after the
/// build, and a hung mark of 5 s.
fn with_window() -> (Breaker, std::sync::Arc<Mock>) {
    let (b, mock) = quiet("pricing");
    let b = b
        .slow_call_duration(SLOW)
        .stuck_call_threshold(1)
        .hung_call_duration(5 * SEC)
        .open_duration(10 * SEC)
        .wall_clock(WallClock::fixed(t0()))
        .maintenance_window(MaintenanceWindow::once(t0() + 10 * SEC, t0() + 20 * SEC))
        .build()
        .expect("valid configuration");
    (b, mock)
}

#[test]
fn a_call_admitted_inside_a_maintenance_window_ages_from_its_end() {
    let (b, mock) = with_window();
    mock.increment(15 * SEC);
    let held = out(&b);
    mock.increment(SEC);
    // Inside the window: out for 1 s, 0 of it counted.
    let s = b.snapshot();
    assert_eq!((s.state, s.calls_stuck), (State::Closed, Some(0)));
    succeed(&b).expect("inside the window, nothing opens it");
    // The window ends at 20 s: still out, it has 50 ms from there.
    mock.increment(4 * SEC + SLOW);
    let s = b.snapshot();
    assert_eq!((s.state, s.calls_stuck), (State::Closed, Some(0)));
    assert!(b.would_permit());
    mock.increment(NS);
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 1,
            over: SLOW
        })
    );
    drop(held);
}

#[test]
fn a_call_out_through_a_maintenance_window_counts_none_of_the_window() {
    let (b, mock) = quiet("settlement");
    let b = b
        .hung_call_duration(5 * SEC)
        .open_duration(10 * SEC)
        .wall_clock(WallClock::fixed(t0()))
        .maintenance_window(MaintenanceWindow::once(t0() + 10 * SEC, t0() + 20 * SEC))
        .build()
        .expect("valid configuration");
    mock.increment(8 * SEC);
    let held = out(&b);
    // Out from 2 s before the window to 5 s after it: aged from its end,
    // 5 s, at the mark and not past it.
    mock.increment(17 * SEC);
    assert_eq!(b.state(), State::Closed);
    succeed(&b).expect("5 s counted: at the mark");
    mock.increment(NS);
    refused(succeed(&b));
    assert_eq!(
        last_reason(&b),
        Some(Reason::StuckCalls {
            count: 1,
            over: 5 * SEC
        })
    );
    drop(held);
}
