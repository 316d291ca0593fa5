//! Snapshots show the state a call made now would meet, without anyone
//! calling, and their counters agree with each other.

use fusebox::{Reason, State};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::breaker::*;

#[test]
fn an_open_breaker_past_its_period_reads_half_open_with_no_probe_out() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC - NS);
    let s = b.snapshot();
    assert_eq!((s.state, s.retry_after), (State::Open, Some(NS)));
    mock.increment(NS);
    let s = b.snapshot();
    assert_eq!(s.state, State::HalfOpen, "the next call would be the probe");
    assert_eq!(s.retry_after, None);
    assert_eq!(s.probes_in_flight, 0);
    assert_eq!(s.open_duration, 10 * SEC, "the period that just ended");
    assert_eq!(b.state(), State::HalfOpen);
    mock.increment(3 * SEC);
    assert_eq!(
        b.snapshot().time_in_state,
        3 * SEC,
        "half-open since the period ended"
    );
    // Reading changed nothing: the call that comes is the probe.
    assert_eq!(
        b.snapshot().last_transition.unwrap().reason,
        Reason::ConsecutiveFailures { count: 1 }
    );
    assert!(b.try_acquire().unwrap().is_probe());
}

#[test]
fn a_half_open_breaker_whose_probe_expired_reads_open_for_the_next_period() {
    let (b, mock) = consecutive(1);
    trip(&b, 1);
    mock.increment(10 * SEC);
    std::mem::forget(b.try_acquire().unwrap());
    assert_eq!(b.snapshot().probes_in_flight, 1);
    // The default max_probe_duration is 30 s.
    mock.increment(30 * SEC);
    let s = b.snapshot();
    assert_eq!(s.state, State::Open, "the next call would re-open it");
    assert_eq!(s.probes_in_flight, 0);
    assert_eq!(s.retry_after, Some(20 * SEC), "the outage's second period");
    assert_eq!(s.open_duration, 20 * SEC);
    assert_eq!(b.state(), State::Open);
    // And that is what the next call meets.
    let rej = refused(succeed(&b));
    assert_eq!(
        (rej.state(), rej.retry_after()),
        (State::Open, Some(20 * SEC))
    );
    assert_eq!(
        b.snapshot().last_transition.unwrap().reason,
        Reason::ProbeExpired
    );
}

#[test]
fn totals_and_window_agree_in_every_snapshot_under_load() {
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(0.5)
        .minimum_calls(u32::MAX)
        .failure_window(3_600 * SEC)
        .build()
        .unwrap();
    let stop = AtomicBool::new(false);
    let mut disagreements = 0;
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        succeed(&b).unwrap();
                    }
                }
            });
        }
        for _ in 0..100_000 {
            let snap = b.snapshot();
            if snap.totals.calls != snap.window_calls {
                disagreements += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(
        disagreements, 0,
        "snapshots where totals and window disagree"
    );
    let snap = b.snapshot();
    assert_eq!(snap.totals.calls, snap.window_calls);
    assert!(snap.totals.calls > 0);
}
