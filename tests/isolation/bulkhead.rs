//! The bulkhead: its limit holds under racing threads, its refusals are
//! distinct from the breaker's and never count against the dependency, and
//! it composes with the breaker in the right order.
#![cfg(feature = "isolation")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use fusebox::isolation::{Bulkhead, IsolationError, Layer};
use fusebox::{ConfigError, State};

use crate::support::breaker::*;
use crate::support::counting_alloc;

fn bulkhead(n: usize) -> Bulkhead {
    Bulkhead::builder("pricing")
        .max_concurrent(n)
        .build()
        .expect("valid bulkhead")
}

#[test]
fn peak_never_exceeds_the_limit_under_32_racing_threads() {
    const THREADS: usize = 32;
    const CALLS: usize = 100;
    let (breaker, _mock) = consecutive(1_000_000);
    let bulkhead = bulkhead(4);
    let inside = Arc::new(AtomicUsize::new(0));
    let most_inside = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (breaker, bulkhead) = (breaker.clone(), bulkhead.clone());
            let (inside, most_inside, start) = (inside.clone(), most_inside.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let (mut ok, mut full) = (0, 0);
                for _ in 0..CALLS {
                    let r = bulkhead.call(&breaker, || {
                        let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most_inside.fetch_max(n, Ordering::SeqCst);
                        thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, DepError>(())
                    });
                    match r {
                        Ok(()) => ok += 1,
                        Err(IsolationError::Full(f)) => {
                            assert_eq!(f.layer(), Layer::Bulkhead);
                            full += 1
                        }
                        Err(other) => panic!("unexpected {other:?}"),
                    }
                }
                (ok, full)
            })
        })
        .collect();
    let (ok, full) = handles
        .into_iter()
        .map(|h| h.join().expect("caller thread"))
        .fold((0u64, 0u64), |a, b| (a.0 + b.0, a.1 + b.1));

    let snap = bulkhead.snapshot();
    assert!(
        most_inside.load(Ordering::SeqCst) <= 4,
        "more than 4 calls ran at once"
    );
    assert!(snap.peak <= 4, "peak {} over the limit", snap.peak);
    assert!(snap.peak >= 1);
    assert_eq!(snap.in_use, 0, "every slot was given back");
    assert_eq!(ok + full, (THREADS * CALLS) as u64);
    assert_eq!(snap.refusals, full, "every refusal is counted");
    let totals = breaker.snapshot().totals;
    assert_eq!(
        totals.successes, ok,
        "only admitted calls reach the breaker's counts"
    );
    assert_eq!(totals.failures, 0);
}

#[test]
fn a_bulkhead_refusal_never_counts_against_the_breaker() {
    // A breaker that opens on the first failure: one counted refusal would
    // open it.
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    let held = bulkhead.try_enter().expect("a free slot");
    for _ in 0..5 {
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
        let full = r.expect_err("the only slot is held");
        assert!(full.is_refused());
        assert!(
            full.rejected().is_none(),
            "a bulkhead refusal is not a breaker refusal"
        );
        assert_eq!(full.full().map(|f| f.limit()), Some(1));
    }
    drop(held);
    let s = breaker.snapshot();
    assert_eq!(s.state, State::Closed);
    assert_eq!(s.totals.failures, 0);
    assert_eq!(s.consecutive_failures, 0);
    // With the breaker closed, a full bulkhead refuses without asking it:
    // nothing is recorded there at all (no permit taken and handed back).
    assert_eq!((s.totals.calls, s.totals.ignored), (0, 0));
    assert_eq!(bulkhead.snapshot().refusals, 5);
    assert_eq!(bulkhead.call(&breaker, || Ok::<_, DepError>(7)).unwrap(), 7);
}

#[test]
fn a_breaker_refusal_takes_no_slot_and_comes_first() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    breaker.force_open("test", "maintenance");
    let entered = AtomicUsize::new(0);
    let r = bulkhead.call(&breaker, || {
        entered.fetch_add(1, Ordering::SeqCst);
        Ok::<_, DepError>(7)
    });
    assert!(r.expect_err("forced open").rejected().is_some());
    // With the bulkhead full too, the breaker's refusal is the one reported,
    // and the bulkhead counts nothing.
    let _held = bulkhead.try_enter().expect("a free slot");
    let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
    assert!(r.expect_err("forced open").rejected().is_some());
    let snap = bulkhead.snapshot();
    assert_eq!((snap.refusals, snap.peak), (0, 1));
    assert_eq!(entered.load(Ordering::SeqCst), 0);
}

#[test]
fn a_probe_refused_by_the_bulkhead_is_handed_back_undecided() {
    let (breaker, mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    let _ = fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    mock.increment(10 * SEC);
    {
        let _held = bulkhead.try_enter().expect("a free slot");
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
        assert!(r.expect_err("bulkhead full").full().is_some());
        // The probe was not counted as failed: the breaker did not re-open.
        assert_ne!(breaker.state(), State::Open);
    }
    // And its slot is free again: the next call probes and closes it.
    assert_eq!(bulkhead.call(&breaker, || Ok::<_, DepError>(7)).unwrap(), 7);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().trips, 1);
}

#[test]
fn the_dependencys_errors_are_classified_as_by_the_breaker() {
    let (breaker, _mock) = consecutive(2);
    let bulkhead = bulkhead(2);
    let r = bulkhead.call(&breaker, || Err::<(), _>(DepError::Business(Business)));
    assert!(matches!(
        r,
        Err(IsolationError::Failed(DepError::Business(_)))
    ));
    assert_eq!(breaker.snapshot().totals.ignored, 1);
    for _ in 0..2 {
        let r = bulkhead.call(&breaker, || Err::<(), _>(DepError::Outage(Outage)));
        assert!(matches!(
            r,
            Err(IsolationError::Failed(DepError::Outage(_)))
        ));
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(bulkhead.snapshot().in_use, 0);
}

#[test]
fn a_panicking_call_gives_its_slot_back_and_counts_as_a_failure() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bulkhead.call(&breaker, || -> Result<(), DepError> {
            panic!("vendor sdk")
        })
    }));
    assert!(r.is_err());
    assert_eq!(bulkhead.snapshot().in_use, 0);
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_waiting_caller_takes_the_slot_freed_within_its_wait() {
    waits_for_the_freed_slot(Duration::from_secs(30));
}

#[test]
fn a_wait_too_long_to_represent_is_a_wait_without_end_not_a_panic() {
    waits_for_the_freed_slot(Duration::MAX);
}

fn waits_for_the_freed_slot(max_wait: Duration) {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(1)
        .max_wait(max_wait)
        .build()
        .unwrap();
    let holder = {
        let bulkhead = bulkhead.clone();
        let (entered_tx, entered_rx) = crossbeam_channel::bounded(0);
        let h = thread::spawn(move || {
            let _slot = bulkhead.try_enter().expect("a free slot");
            entered_tx.send(()).unwrap();
            thread::sleep(Duration::from_millis(20));
        });
        entered_rx.recv().unwrap();
        h
    };
    let waited = Instant::now();
    assert_eq!(bulkhead.call(&breaker, || Ok::<_, DepError>(7)).unwrap(), 7);
    // Woken by the release, long before the 30 s wait ran out.
    assert!(waited.elapsed() < Duration::from_secs(10));
    holder.join().unwrap();
    assert_eq!(bulkhead.snapshot().refusals, 0);
    assert_eq!(bulkhead.snapshot().in_use, 0);
}

#[test]
fn a_waiting_caller_is_refused_once_its_wait_runs_out() {
    let (breaker, _mock) = consecutive(1);
    let wait = Duration::from_millis(20);
    let bulkhead = Bulkhead::builder("pricing")
        .max_concurrent(1)
        .max_wait(wait)
        .build()
        .unwrap();
    let _held = bulkhead.try_enter().expect("a free slot");
    let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
    let full = *r
        .expect_err("the slot stays held")
        .full()
        .expect("a bulkhead refusal");
    assert!(
        full.waited() >= wait,
        "refused before its wait: {:?}",
        full.waited()
    );
    assert!(full.waited() < wait * 250, "waited far past its wait");
    assert_eq!(breaker.snapshot().totals.failures, 0);
}

#[test]
fn a_guarded_closed_success_does_not_allocate() {
    let (breaker, _mock) = consecutive(1);
    let bulkhead = bulkhead(4);
    let run = || {
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(std::hint::black_box(7)));
        std::hint::black_box(r.unwrap());
    };
    for _ in 0..100 {
        run();
    }
    assert_eq!(
        counting_alloc::allocations_in(|| (0..1_000).for_each(|_| run())),
        0
    );
    let _held: Vec<_> = (0..4).map(|_| bulkhead.try_enter().unwrap()).collect();
    let refuse = || {
        std::hint::black_box(bulkhead.try_enter().unwrap_err());
        let r = bulkhead.call(&breaker, || Ok::<_, DepError>(7));
        std::hint::black_box(r.unwrap_err());
    };
    refuse();
    assert_eq!(
        counting_alloc::allocations_in(|| (0..1_000).for_each(|_| {
            refuse();
        })),
        0
    );
}

#[test]
fn a_limit_of_zero_or_none_is_refused_at_build() {
    let err = Bulkhead::builder("x")
        .max_concurrent(0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_concurrent");
    assert!(matches!(err, ConfigError::Invalid { .. }));
    let err = Bulkhead::builder("x").build().unwrap_err();
    assert!(matches!(
        err,
        ConfigError::Missing {
            field: "max_concurrent",
            ..
        }
    ));
}

#[test]
fn a_bulkhead_name_follows_the_breaker_name_rules() {
    for bad in ["", "a\nforged log line", "back`tick", &"x".repeat(33)] {
        let err = Bulkhead::builder(bad)
            .max_concurrent(1)
            .build()
            .expect_err("a name that could forge a log line or grow an error is refused");
        assert_eq!(err.field(), "name", "{bad:?}");
    }
    let ok = Bulkhead::builder("refdata-bulkhead")
        .max_concurrent(1)
        .build()
        .unwrap();
    assert_eq!(ok.name(), "refdata-bulkhead");
    assert_eq!(&*ok.snapshot().name, "refdata-bulkhead");
}

#[test]
fn a_call_through_the_bulkhead_is_judged_by_the_result_classifier() {
    let (builder, _mock) = quiet("quotes");
    let breaker = builder
        .consecutive_failure_threshold(1)
        .result_classifier(fusebox::ResultClassifier::for_type(|price: &f64| {
            if *price > 0.0 {
                fusebox::Verdict::Success
            } else {
                fusebox::Verdict::Failure
            }
        }))
        .build()
        .unwrap();
    let zero = bulkhead(1).call(&breaker, || Ok::<f64, DepError>(0.0));
    assert_eq!(zero.unwrap(), 0.0, "returned unchanged");
    assert_eq!(breaker.state(), State::Open, "a zero price is a failure");
}

#[test]
fn a_failure_through_the_bulkhead_is_what_opened_the_breaker() {
    let (breaker, _mock) = consecutive(1);
    bulkhead(1)
        .call(&breaker, || Err::<u32, _>(DepError::Outage(Outage)))
        .unwrap_err();
    assert_eq!(breaker.state(), State::Open);
    assert!(breaker.last_failure().is_some(), "the failure is kept");
}
