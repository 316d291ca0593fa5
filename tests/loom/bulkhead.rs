//! The bulkhead's lock-free parts under a model checker: admissions in
//! lanes against each other and against a falling limit
//! (`src/isolation/shares.rs`), and the adaptive limit's table of timed
//! calls (`src/isolation/tracked.rs`).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --test loom --release`.
#![cfg(loom)]

use fusebox::loom_bulkhead::{Shares, Tracked};
use loom::sync::Arc;
use loom::thread;

/// Lane 0 (shed last) and lane 1 share a limit of 2, one slot each.
const SHARES: [f64; 2] = [0.5, 0.5];

#[test]
fn a_lane_under_its_guarantee_is_admitted_however_borrowers_race_it() {
    loom::model(|| {
        let shares = Arc::new(Shares::new(2, &SHARES, 0));
        let borrowers: Vec<_> = (0..2)
            .map(|_| {
                let shares = shares.clone();
                thread::spawn(move || {
                    if let Some(total) = shares.take(1) {
                        // Borrowed or guaranteed, never past the limit
                        // and lane 0's one guaranteed slot.
                        assert!(total <= 3, "{total} in flight");
                        shares.give_back(1);
                        true
                    } else {
                        false
                    }
                })
            })
            .collect();
        let total = shares
            .take(0)
            .expect("lane 0 holds nothing: its slot is guaranteed");
        assert!(total <= 3, "{total} in flight");
        shares.give_back(0);
        let admitted = borrowers
            .into_iter()
            .map(|b| b.join().unwrap())
            .filter(|&a| a)
            .count();
        assert!(admitted >= 1, "lane 1's guaranteed slot");
        assert_eq!(shares.in_flight(), 0, "every slot given back");
    });
}

#[test]
fn a_falling_limit_never_takes_the_shed_last_lane_below_the_floor() {
    loom::model(|| {
        let shares = Arc::new(Shares::new(4, &SHARES, 0));
        let judge = {
            let shares = shares.clone();
            thread::spawn(move || shares.publish(1, &SHARES, 0))
        };
        let borrower = {
            let shares = shares.clone();
            thread::spawn(move || {
                let got = shares.take(1);
                if got.is_some() {
                    shares.give_back(1);
                }
            })
        };
        // Under either limit lane 0 is guaranteed at least one slot.
        assert!(shares.take(0).is_some());
        shares.give_back(0);
        judge.join().unwrap();
        borrower.join().unwrap();
        assert_eq!(shares.in_flight(), 0);
    });
}

#[test]
fn each_timed_call_holds_its_own_word_until_it_frees_it() {
    loom::model(|| {
        let tracked = Arc::new(Tracked::new());
        let calls: Vec<_> = (0..2)
            .map(|i| {
                let tracked = tracked.clone();
                thread::spawn(move || {
                    // Both start from the same word: one finds it taken.
                    let word = tracked.claim(0, 10 + i).expect("two words, two calls");
                    let ages = tracked.ages(100);
                    assert!(ages.contains(&(90 - i)), "its own start is seen");
                    tracked.free(word);
                    word
                })
            })
            .collect();
        let ages = tracked.ages(100);
        assert!(ages.len() <= 2 && ages.iter().all(|&a| a == 90 || a == 89));
        let words: Vec<_> = calls.into_iter().map(|c| c.join().unwrap()).collect();
        // The two may have held the same word one after the other,
        // never at once: each saw its own start while holding it.
        assert!(words.iter().all(|&w| w < 2));
        assert!(tracked.ages(100).is_empty(), "every word freed");
    });
}
