//! The dead-letter buffer: what it sheds when full, what it refuses, and
//! replay through the breaker once it closes, at a bounded rate, losing
//! and duplicating nothing. Time comes from the mock clock.
#![cfg(feature = "isolation")]

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use fusebox::isolation::{DeadLetters, Emitted, RefusedBecause, ReplayStop};
use fusebox::{Breaker, CallPath, Classifier, ConfigError, State};
use quanta::{Clock, Mock};

use crate::support::breaker::*;

fn buffer(capacity: usize, priorities: u8, never_shed: &[u8]) -> DeadLetters<&'static str> {
    let mut b = DeadLetters::builder("fills")
        .capacity(capacity)
        .priorities(priorities);
    for &p in never_shed {
        b = b.never_shed(p);
    }
    b.build().expect("valid buffer")
}

fn shed_counts<T>(d: &DeadLetters<T>) -> Vec<u64> {
    d.snapshot().priorities.iter().map(|p| p.shed).collect()
}

#[test]
fn when_full_the_lowest_priority_is_shed_first_and_oldest_first_within_it() {
    let d = buffer(4, 3, &[]);
    for (p, item) in [(0, "a"), (1, "b"), (0, "c"), (2, "d")] {
        assert!(d.push(p, item).unwrap().is_none(), "room for {item}");
    }
    let shed = |p, item| {
        let s = d.push(p, item).unwrap().expect("full: something is shed");
        (s.priority, s.item)
    };
    assert_eq!(shed(1, "e"), (0, "a"), "the oldest of the lowest priority");
    assert_eq!(shed(1, "f"), (0, "c"));
    assert_eq!(
        shed(1, "g"),
        (1, "b"),
        "then the next priority up, oldest first"
    );
    assert_eq!(
        shed(0, "h"),
        (0, "h"),
        "an emit outranked by everything held is itself shed"
    );
    let snap = d.snapshot();
    assert_eq!(snap.depth, 4);
    assert_eq!(shed_counts(&d), [3, 1, 0]);
    let depths: Vec<_> = snap.priorities.iter().map(|p| p.depth).collect();
    assert_eq!(depths, [0, 3, 1]);
}

#[test]
fn a_never_shed_emit_is_refused_loudly_when_only_never_shed_emits_are_held() {
    let d = buffer(2, 2, &[1]);
    d.push(1, "x").unwrap();
    d.push(1, "y").unwrap();
    let refused = d.push(1, "z").expect_err("no room and nothing to shed");
    assert_eq!(refused.because, RefusedBecause::Full);
    assert_eq!(refused.item, "z", "the emit is handed back");
    assert!(refused.to_string().contains("never-shed"));
    // A sheddable emit in the same spot is shed, and says so.
    let shed = d.push(0, "w").unwrap().expect("shed");
    assert_eq!((shed.priority, shed.item), (0, "w"));
    let snap = d.snapshot();
    assert_eq!(snap.priorities[1].refused, 1);
    assert_eq!(snap.priorities[0].shed, 1);
    assert_eq!(snap.depth, 2);
}

#[test]
fn never_shed_emits_are_never_displaced_and_displace_any_other() {
    let d = buffer(3, 3, &[0]);
    d.push(0, "keep").unwrap();
    d.push(2, "high-1").unwrap();
    d.push(2, "high-2").unwrap();
    // A higher sheddable priority cannot displace the never-shed one...
    let s = d.push(2, "high-3").unwrap().expect("shed");
    assert_eq!((s.priority, s.item), (2, "high-1"));
    // ...and a never-shed emit displaces even a higher sheddable one.
    let s = d.push(0, "keep-2").unwrap().expect("shed");
    assert_eq!((s.priority, s.item), (2, "high-2"));
    let depths: Vec<_> = d.snapshot().priorities.iter().map(|p| p.depth).collect();
    assert_eq!(depths, [2, 0, 1]);
}

#[test]
fn an_unknown_priority_is_refused_with_its_emit() {
    let d = buffer(2, 2, &[]);
    let refused = d.push(2, "x").expect_err("priorities are 0 and 1");
    assert_eq!(
        (refused.because, refused.item),
        (RefusedBecause::UnknownPriority, "x")
    );
    let (breaker, _mock) = consecutive(1);
    let sent = RefCell::new(0);
    let r = d.emit(&breaker, 9, "y", |_| {
        *sent.borrow_mut() += 1;
        Ok::<_, DepError>(())
    });
    assert_eq!(
        r.expect_err("unknown").because,
        RefusedBecause::UnknownPriority
    );
    assert_eq!(
        *sent.borrow(),
        0,
        "nothing is sent for an emit that could not be kept"
    );
}

/// A breaker (3 consecutive failures open it for 10 s) and a buffer
/// (capacity 100, priorities 0 to 2, 2 never-shed) on one mock clock.
fn on_mock(rate: f64, burst: u32) -> (Breaker, DeadLetters<u32>, Arc<Mock>) {
    let (clock, mock) = Clock::mock();
    mock.increment(1_000 * SEC);
    let breaker = Breaker::builder("audit")
        .call_path(CallPath::Enrichment)
        .classifier(Classifier::failures_of::<Outage>())
        .clock(clock.clone())
        .jitter(0.0)
        .consecutive_failure_threshold(3)
        .failure_rate_threshold(None)
        .open_duration(10 * SEC)
        .build()
        .expect("valid breaker");
    let d = DeadLetters::builder("audit")
        .capacity(100)
        .priorities(3)
        .never_shed(2)
        .replay_rate(rate)
        .replay_burst(burst)
        .clock(clock)
        .build()
        .expect("valid buffer");
    (breaker, d, mock)
}

#[test]
fn replay_waits_for_the_breaker_to_close() {
    let (breaker, _mock) = consecutive(1);
    let d = buffer(4, 1, &[]);
    let _ = fail(&breaker);
    let r = d.emit(&breaker, 0, "fill", |_| Ok::<_, DepError>(()));
    assert!(matches!(r, Ok(Emitted::Buffered { ref cause, .. }) if cause.rejected().is_some()));
    let report = d.replay(&breaker, |_| Ok::<_, DepError>(()));
    assert!(matches!(report.stopped, ReplayStop::NotClosed(State::Open)));
    assert_eq!((report.sent, report.remaining), (0, 1));
}

#[test]
fn replay_after_recovery_loses_nothing_and_duplicates_nothing() {
    let (breaker, d, mock) = on_mock(10.0, 5);
    // 30 emits while the consumer is down: the first three fail (and open
    // the breaker), the rest are diverted without being attempted.
    let mut attempts = 0;
    for n in 0..30u32 {
        let r = d.emit(&breaker, (n % 3) as u8, n, |_| {
            attempts += 1;
            Err::<(), _>(DepError::Outage(Outage))
        });
        assert!(matches!(r, Ok(Emitted::Buffered { shed: None, .. })));
    }
    assert_eq!(attempts, 3);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(d.snapshot().depth, 30);

    // Recovery: the open period passes and a probe closes the breaker.
    mock.increment(10 * SEC);
    assert!(succeed(&breaker).is_ok());
    assert_eq!(breaker.state(), State::Closed);

    // Replay, a second of mock time between rounds; the 8th send fails once.
    let mut received = Vec::new();
    let mut sends = 0;
    let mut rounds = 0;
    loop {
        let report = d.replay(&breaker, |&n| {
            sends += 1;
            if sends == 8 {
                return Err(DepError::Outage(Outage));
            }
            received.push(n);
            Ok(())
        });
        rounds += 1;
        match report.stopped {
            ReplayStop::Drained => break,
            ReplayStop::Throttled | ReplayStop::Failed(_) => mock.increment(SEC),
            other => panic!("unexpected stop: {other:?}"),
        }
        assert!(rounds < 100, "replay never drained");
    }
    // Highest priority first, oldest first within one; each exactly once,
    // the one whose send failed included.
    let expected: Vec<u32> = [2u32, 1, 0]
        .iter()
        .flat_map(|&p| (0..30).filter(move |n| n % 3 == p))
        .collect();
    assert_eq!(received, expected);
    assert_eq!(sends, 31);
    let snap = d.snapshot();
    assert_eq!(snap.depth, 0);
    assert_eq!(snap.priorities.iter().map(|p| p.replayed).sum::<u64>(), 30);
    assert_eq!(snap.priorities.iter().map(|p| p.shed).sum::<u64>(), 0);
}

#[test]
fn replay_goes_no_faster_than_its_rate() {
    let (breaker, d, mock) = on_mock(10.0, 5);
    for n in 0..50 {
        d.push(1, n).unwrap();
    }
    let replay = || {
        let r = d.replay(&breaker, |_| Ok::<_, DepError>(()));
        assert!(matches!(r.stopped, ReplayStop::Throttled));
        r.sent
    };
    assert_eq!(replay(), 5, "a burst to start with");
    assert_eq!(replay(), 0, "then nothing until time passes");
    mock.increment(Duration::from_millis(100));
    assert_eq!(replay(), 1, "one per 100 ms at 10 a second");
    mock.increment(Duration::from_millis(250));
    assert_eq!(replay(), 2);
    mock.increment(60 * SEC);
    assert_eq!(replay(), 5, "never more than the burst after a pause");
    assert_eq!(d.snapshot().depth, 50 - 13);
}

#[test]
fn a_send_refused_during_replay_goes_back_to_the_front() {
    let (breaker, d, _mock) = on_mock(1_000.0, 100);
    for n in 0..3 {
        d.push(0, n).unwrap();
    }
    // The breaker opens during the replay: the replay stops, nothing lost.
    let r = d.replay(&breaker, |&n| {
        if n == 1 {
            breaker.force_open("ops", "mid-replay");
        }
        Ok::<_, DepError>(())
    });
    assert!(matches!(r.stopped, ReplayStop::Rejected(_)));
    assert_eq!(r.sent, 2);
    assert_eq!(r.remaining, 1);
    let r = d.replay(&breaker, |_| Ok::<_, DepError>(()));
    assert!(matches!(
        r.stopped,
        ReplayStop::NotClosed(State::ForcedOpen)
    ));
    breaker.reset("ops", "back");
    let mut rest = Vec::new();
    let r = d.replay(&breaker, |&n| {
        rest.push(n);
        Ok::<_, DepError>(())
    });
    assert!(matches!(r.stopped, ReplayStop::Drained));
    assert_eq!(rest, [2]);
}

/// A closed breaker and a buffer of `capacity` (priorities 0 to 2, 2
/// never-shed) on one mock clock, replaying without a rate limit to speak
/// of.
fn replaying(capacity: usize) -> (Breaker, DeadLetters<&'static str>) {
    let (breaker, _mock) = consecutive(3);
    let d = DeadLetters::builder("audit")
        .capacity(capacity)
        .priorities(3)
        .never_shed(2)
        .replay_rate(1_000.0)
        .replay_burst(100)
        .build()
        .expect("valid buffer");
    (breaker, d)
}

#[test]
fn a_never_shed_emit_displaces_a_sheddable_one_out_for_replay() {
    let (breaker, d) = replaying(1);
    d.push(0, "low").unwrap();
    // While "low" is out, the buffer holds nothing but it: a never-shed
    // emit takes its place instead of being refused as full.
    let mut during = None;
    let r = d.replay(&breaker, |&item| {
        if item == "low" {
            during = Some(d.push(2, "must-keep"));
            assert_eq!(d.snapshot().depth, 1, "still within the capacity");
            assert_eq!(d.snapshot().priorities[2].depth, 1);
            return Ok(());
        }
        // The next round of the same replay: the never-shed emit.
        assert_eq!(item, "must-keep");
        Err(DepError::Outage(Outage))
    });
    assert!(matches!(during, Some(Ok(None))), "{during:?}");
    // "low" was sent after all: nothing lost, counted replayed, not shed.
    assert_eq!(r.sent, 1);
    assert!(r.shed.is_none());
    let snap = d.snapshot();
    assert_eq!(snap.depth, 1);
    assert_eq!(
        (snap.priorities[0].replayed, snap.priorities[0].shed),
        (1, 0)
    );
    assert_eq!(snap.priorities[2].depth, 1);
}

#[test]
fn a_displaced_emit_whose_send_fails_is_shed_and_handed_back_by_the_replay() {
    let (breaker, d) = replaying(2);
    d.push(0, "low").unwrap();
    d.push(1, "mid").unwrap();
    // "mid" goes out first; a priority-1 push finds the buffer full while
    // "low" (priority 0) is held: "low" is shed, not the new emit.
    let r = d.replay(&breaker, |&item| {
        assert_eq!(item, "mid");
        let shed = d.push(1, "new").unwrap().expect("full");
        assert_eq!((shed.priority, shed.item), (0, "low"));
        // Full again, with "mid" out and "new" held: a priority-2 push
        // displaces "mid", the lowest sheddable emit held.
        assert!(d.push(2, "top").unwrap().is_none());
        Err::<(), _>(DepError::Outage(Outage))
    });
    assert!(matches!(r.stopped, ReplayStop::Failed(_)));
    let shed = r.shed.expect("the displaced emit comes back");
    assert_eq!((shed.priority, shed.item), (1, "mid"));
    let snap = d.snapshot();
    assert_eq!(snap.depth, 2);
    let held: Vec<_> = snap.priorities.iter().map(|p| p.depth).collect();
    assert_eq!(held, [0, 1, 1]);
    assert_eq!(shed_counts(&d), [1, 1, 0]);
    // What is left replays in order: "top", then "new".
    let mut sent = Vec::new();
    let r = d.replay(&breaker, |&item| {
        sent.push(item);
        Ok::<_, DepError>(())
    });
    assert!(matches!(r.stopped, ReplayStop::Drained));
    assert_eq!(sent, ["top", "new"]);
}

#[test]
fn a_never_shed_emit_out_for_replay_still_fills_the_buffer() {
    let (breaker, d) = replaying(1);
    d.push(2, "kept").unwrap();
    let r = d.replay(&breaker, |_| {
        let refused = d.push(2, "more").expect_err("full of never-shed emits");
        assert_eq!(refused.because, RefusedBecause::Full);
        let shed = d.push(1, "less").unwrap().expect("shed itself");
        assert_eq!(shed.item, "less");
        Err::<(), _>(DepError::Outage(Outage))
    });
    assert!(r.shed.is_none());
    assert_eq!(r.remaining, 1, "back at the front of its priority");
}

#[test]
fn a_bad_buffer_is_refused_at_build() {
    let field = |b: fusebox::isolation::DeadLettersBuilder| match b.build::<u8>() {
        Err(e @ ConfigError::Invalid { .. }) | Err(e @ ConfigError::Missing { .. }) => e.field(),
        other => panic!("expected a configuration error, got {other:?}"),
    };
    let base = || DeadLetters::builder("x").capacity(4);
    assert_eq!(field(DeadLetters::builder("x")), "capacity");
    assert_eq!(field(base().capacity(0)), "capacity");
    assert_eq!(field(base().priorities(0)), "priorities");
    assert_eq!(field(base().priorities(65)), "priorities");
    assert_eq!(field(base().priorities(2).never_shed(2)), "never_shed");
    assert_eq!(field(base().replay_rate(0.0)), "replay_rate");
    assert_eq!(field(base().replay_rate(f64::NAN)), "replay_rate");
    assert_eq!(field(base().replay_burst(0)), "replay_burst");
}
