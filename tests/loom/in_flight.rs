//! The table of calls in flight (`src/in_flight.rs`) under a model checker:
//! claims against each other and against a scan under the lock, releases
//! by value, and the reclaim of words a call of an earlier period left.
#![cfg(loom)]

use fusebox::loom_in_flight::{InFlight, SLOTS};
use loom::sync::Arc;
use loom::thread;

/// Marks of 50 (stuck) and 500 (hung) nanoseconds.
const STUCK: u64 = 50;
const HUNG: u64 = 500;

#[test]
fn two_calls_claiming_at_once_each_hold_a_word_and_every_word_is_freed() {
    loom::model(|| {
        let t = Arc::new(InFlight::new());
        let calls: Vec<_> = (0..2u64)
            .map(|_| {
                let t = t.clone();
                thread::spawn(move || {
                    // Both look at the same word first (same start).
                    assert!(t.claim(1, 10), "two words, two calls");
                    t.release(1, 10);
                })
            })
            .collect();
        // A scan racing both sees each at most once.
        let (tracked, stuck, hung) = t.scan(1, 100, STUCK, HUNG);
        assert!(tracked <= 2 && stuck == tracked && hung == 0);
        for c in calls {
            c.join().unwrap();
        }
        assert_eq!(t.scan(1, 100, STUCK, HUNG), (0, 0, 0), "every word free");
    });
}

#[test]
fn a_scan_racing_a_claim_and_a_release_counts_the_call_at_most_once() {
    loom::model(|| {
        let t = Arc::new(InFlight::new());
        assert!(t.claim(4, 20));
        let call = {
            let t = t.clone();
            thread::spawn(move || {
                t.release(4, 20);
                assert!(t.claim(4, 60));
            })
        };
        // Under the lock: each call at most once, the one of 20 or the one
        // of 60 or both, never a third.
        let (tracked, stuck, _) = t.scan(4, 100, STUCK, HUNG);
        assert!(tracked <= 2);
        assert!(stuck <= 1, "only the call of 20 is past 50 at 100");
        call.join().unwrap();
        assert_eq!(t.scan(4, 100, STUCK, HUNG), (1, 0, 0));
    });
}

#[test]
fn a_word_left_by_an_earlier_period_is_reclaimed_and_never_counted() {
    loom::model(|| {
        let t = Arc::new(InFlight::new());
        // A call of period 1 that never reports fills one word; the rest
        // are held by calls of period 2.
        assert!(t.claim(1, 5));
        for k in 1..SLOTS as u64 {
            assert!(t.claim(2, 10 + k));
        }
        let late = {
            let t = t.clone();
            // A straggler of period 1 releasing, and a call of period 2
            // claiming: the claim takes the stale word or finds it emptied
            // by the scan.
            thread::spawn(move || {
                t.release(1, 5);
                assert!(t.claim(2, 40), "the stale word is free to period 2");
            })
        };
        let (tracked, _, _) = t.scan(2, 100, STUCK, HUNG);
        assert!(tracked as usize <= SLOTS, "period 1's call never counts");
        late.join().unwrap();
        assert_eq!(t.scan(2, 100, STUCK, HUNG).0 as usize, SLOTS);
        // A claim of an older period takes nothing from a newer one.
        assert!(!t.claim(1, 50));
    });
}

#[test]
fn a_claim_of_a_period_that_ended_never_displaces_a_call_of_the_next() {
    loom::model(|| {
        let t = Arc::new(InFlight::new());
        let old = {
            let t = t.clone();
            // Read the gate before the period ended.
            thread::spawn(move || t.claim(1, 7))
        };
        let new = {
            let t = t.clone();
            thread::spawn(move || t.claim(2, 8))
        };
        let old = old.join().unwrap();
        assert!(new.join().unwrap(), "the new period's call is tracked");
        let (tracked, stuck, _) = t.scan(2, 100, STUCK, HUNG);
        assert_eq!((tracked, stuck), (1, 1));
        // The old call's word, if it got one, is gone after the scan.
        let _ = old;
        assert_eq!(t.scan(2, 100, STUCK, HUNG).0, 1);
        assert!(t.claim(2, 9), "a word is free again");
    });
}
