//! Many threads at once: exactly one probe at the instant the open period
//! ends, exact counts, one trip per outage, and an unbroken chain of state
//! changes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use fusebox::{Breaker, Permit, State, StateChange, Verdict};

use crate::support::breaker::*;

fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}

#[test]
fn a_breaker_is_shared_between_threads() {
    assert_send_sync_clone::<Breaker>();
    fn assert_send<T: Send>() {}
    assert_send::<Permit<'static>>();
}

#[test]
fn sixty_four_threads_at_the_end_of_the_open_period_admit_exactly_one_probe() {
    const THREADS: usize = 64;
    const ROUNDS: usize = 1_000;
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(1)
        .open_duration(SEC)
        .backoff_multiplier(1.0)
        .build()
        .unwrap();
    trip(&b, 1);
    let start = Barrier::new(THREADS + 1);
    let done = Barrier::new(THREADS + 1);
    let admitted = AtomicUsize::new(0);
    let refused_half_open = AtomicUsize::new(0);
    let refused_otherwise = AtomicUsize::new(0);
    let probe: Mutex<Option<Permit<'_>>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..ROUNDS {
                    start.wait();
                    match b.try_acquire() {
                        Ok(p) => {
                            admitted.fetch_add(1, Ordering::SeqCst);
                            assert!(p.is_probe());
                            // Held until every thread has tried.
                            *probe.lock().unwrap() = Some(p);
                        }
                        // Refused until the probe's deadline (`max_probe_duration`) at the latest.
                        Err(r)
                            if r.state() == State::HalfOpen
                                && r.retry_after() == Some(30 * SEC) =>
                        {
                            refused_half_open.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => {
                            refused_otherwise.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    done.wait();
                }
            });
        }
        for round in 0..ROUNDS {
            // One nanosecond early, nothing goes.
            mock.increment(SEC - NS);
            let early = b.try_acquire().unwrap_err();
            assert_eq!(
                (early.state(), early.retry_after()),
                (State::Open, Some(NS))
            );
            mock.increment(NS);
            start.wait();
            done.wait();
            assert_eq!(
                (
                    admitted.swap(0, Ordering::SeqCst),
                    refused_half_open.swap(0, Ordering::SeqCst),
                    refused_otherwise.swap(0, Ordering::SeqCst),
                ),
                (1, THREADS - 1, 0),
                "round {round}"
            );
            let p = probe.lock().unwrap().take().expect("the probe was held");
            if round % 2 == 0 {
                p.record(Verdict::Failure);
            } else {
                p.record(Verdict::Success);
                assert_eq!(b.state(), State::Closed);
                fail(&b).unwrap_err();
            }
            assert_eq!(b.state(), State::Open, "round {round}");
        }
    });
    let s = b.snapshot();
    // A failed probe (even rounds) re-opens; a closed breaker's failure
    // after a successful probe (odd rounds) trips anew.
    let failed_probes = ROUNDS.div_ceil(2);
    assert_eq!(s.trips as usize, 1 + ROUNDS / 2);
    assert_eq!(s.reopens as usize, failed_probes);
    assert_eq!(
        (s.probes.failures as usize, s.probes.successes as usize),
        (failed_probes, ROUNDS / 2)
    );
    assert_eq!(
        s.totals.short_circuits as usize,
        ROUNDS * THREADS,
        "63 half-open refusals and one early refusal per round"
    );
}

#[test]
fn counts_are_exact_under_contention() {
    const THREADS: u64 = 8;
    const CALLS: u64 = 5_000;
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(u32::MAX)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let b = &b;
            s.spawn(move || {
                for i in 0..CALLS {
                    match (t + i) % 3 {
                        0 => drop(succeed(b)),
                        1 => drop(fail(b)),
                        _ => drop(business(b)),
                    }
                }
            });
        }
    });
    let t = b.snapshot().totals;
    assert_eq!(t.calls, THREADS * CALLS);
    assert_eq!(t.successes + t.failures + t.ignored, THREADS * CALLS);
    let per_kind = |k: u64| {
        (0..THREADS)
            .map(|t| (0..CALLS).filter(|i| (t + i) % 3 == k).count() as u64)
            .sum::<u64>()
    };
    assert_eq!(
        (t.successes, t.failures, t.ignored),
        (per_kind(0), per_kind(1), per_kind(2))
    );
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn the_window_holds_every_call_when_successes_and_failures_race() {
    // Successes are counted without the lock while nothing else changes;
    // every one must still reach the window, whichever thread files it.
    const THREADS: u64 = 4;
    const CALLS: u64 = 20_000;
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .failure_rate_threshold(1.0)
        .minimum_calls(u32::MAX)
        .failure_window(3_600 * SEC)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let b = &b;
            s.spawn(move || {
                for i in 0..CALLS {
                    // Mostly successes, with a failure now and then on every
                    // thread, so quiet and locked counting interleave.
                    if (t + i) % 50 == 0 {
                        drop(fail(b));
                    } else {
                        drop(succeed(b));
                    }
                }
            });
        }
    });
    let snap = b.snapshot();
    let failures = (0..THREADS)
        .map(|t| (0..CALLS).filter(|i| (t + i) % 50 == 0).count() as u64)
        .sum::<u64>();
    assert_eq!(snap.totals.calls, THREADS * CALLS);
    assert_eq!(snap.window_calls, THREADS * CALLS);
    assert_eq!(snap.window_failures, failures);
    assert_eq!(snap.totals.failures, failures);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn concurrent_failures_open_it_exactly_once() {
    const THREADS: usize = 8;
    let opened = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&opened);
    let (builder, _mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(10)
        .on_state_change(move |c| {
            assert_eq!((c.from, c.to), (State::Closed, State::Open));
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let start = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                start.wait();
                for _ in 0..200 {
                    let _ = fail(&b);
                }
            });
        }
    });
    assert_eq!(b.state(), State::Open);
    assert_eq!(opened.load(Ordering::SeqCst), 1);
    let s = b.snapshot();
    assert_eq!(s.trips, 1);
    assert_eq!(
        s.totals.calls + s.totals.short_circuits,
        (THREADS * 200) as u64
    );
}

#[test]
fn refusals_are_exact_as_threads_come_and_go() {
    // Waves of threads, each wave ending before the next starts: a thread
    // that owns a counter slot gives it back when it ends, and the next
    // owner adds on from where it left off.
    const WAVES: usize = 20;
    const THREADS: usize = 5;
    const CALLS: usize = 1_000;
    let (builder, _mock) = quiet("refdata");
    let b = builder.consecutive_failure_threshold(1).build().unwrap();
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
    for _ in 0..WAVES {
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    for _ in 0..CALLS {
                        assert!(b.try_acquire().is_err());
                    }
                });
            }
        });
    }
    assert_eq!(
        b.snapshot().totals.short_circuits,
        (WAVES * THREADS * CALLS) as u64
    );
}

#[test]
fn state_changes_form_one_unbroken_chain_under_contention() {
    const THREADS: usize = 4;
    const STEPS: usize = 3_000;
    let changes: Arc<Mutex<Vec<StateChange>>> = Arc::default();
    let sink = Arc::clone(&changes);
    let (builder, mock) = quiet("refdata");
    let b = builder
        .consecutive_failure_threshold(2)
        .open_duration(MS)
        .max_open_duration(4 * MS)
        .max_probe_duration(3 * MS)
        .half_open_max_concurrent(2)
        .on_state_change(move |c| sink.lock().unwrap().push(c.clone()))
        .build()
        .unwrap();
    let subscription = b.subscribe(1 << 16).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (b, mock) = (&b, &mock);
            s.spawn(move || {
                let mut x = t as u64 + 1;
                for _ in 0..STEPS {
                    // xorshift: a cheap, deterministic per-thread sequence.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    match x % 100 {
                        0 => b.force_open("ops", "stress"),
                        1..=2 => b.reset("ops", "stress"),
                        3..=40 => mock.increment(MS / 2),
                        41..=60 => drop(succeed(b)),
                        61..=95 => drop(fail(b)),
                        _ => {
                            if let Ok(p) = b.try_acquire() {
                                std::mem::forget(p);
                            }
                        }
                    }
                }
            });
        }
    });
    // A change handed to the notifier may still be on its way: wait for the
    // last one to reach the subscriber, which hears of it after the callback.
    let last = b.snapshot().last_transition.unwrap().seq;
    let mut streamed = Vec::new();
    while streamed.last().map(|c: &StateChange| c.seq) != Some(last) {
        let next = subscription.recv_timeout(std::time::Duration::from_secs(60));
        streamed.push(next.expect("every change is delivered"));
    }
    let changes = changes.lock().unwrap();
    assert!(
        changes.len() > 100,
        "the stress produced {} changes",
        changes.len()
    );
    // More than `Delivery::PENDING_CAPACITY` changes may pile up while
    // delivery falls behind; the oldest are then dropped, and counted.
    let mut gaps = 0;
    for (i, pair) in changes.windows(2).enumerate() {
        assert!(
            pair[1].seq > pair[0].seq,
            "change {i}: delivered in order, once"
        );
        if pair[1].seq == pair[0].seq + 1 {
            assert_eq!(
                pair[1].from, pair[0].to,
                "change {i}: each starts where the last ended"
            );
        }
        gaps += pair[1].seq - pair[0].seq - 1;
    }
    assert_eq!(gaps + changes[0].seq - 1, b.snapshot().dropped_changes);
    assert_eq!(changes.last().unwrap().to, b.snapshot().state);
    assert_eq!(streamed, *changes, "subscribers see the same sequence");
}

#[test]
fn a_success_counted_without_the_lock_never_lands_in_a_later_generation() {
    // Threads report successes of calls admitted in one closed period while
    // the controller ends that period: by a reset, or by a trip and a probe
    // that closes it again. The new period admitted nothing, so its window
    // must be empty, and a single failure must not trip a rate that needs
    // two calls.
    const ROUNDS: u64 = 300;
    const WORKERS: usize = 3;
    const PERMITS: usize = 400;
    let (builder, mock) = quiet("refdata");
    let b = builder
        .window_failure_threshold(3)
        .failure_rate_threshold(0.5)
        .minimum_calls(2)
        .failure_window(3_600 * SEC)
        .open_duration(SEC)
        .build()
        .unwrap();
    let (mut filled, mut tripped) = (0, 0);
    for round in 0..ROUNDS {
        let go = Barrier::new(WORKERS + 1);
        std::thread::scope(|s| {
            for _ in 0..WORKERS {
                let (b, go) = (&b, &go);
                s.spawn(move || {
                    let permits: Vec<_> = (0..PERMITS).map(|_| b.try_acquire().unwrap()).collect();
                    go.wait();
                    for p in permits {
                        p.record(Verdict::Success);
                    }
                });
            }
            go.wait();
            for _ in 0..round % 64 {
                std::hint::spin_loop();
            }
            if round % 2 == 0 {
                b.reset("ops", "new period");
            } else {
                for _ in 0..3 {
                    drop(fail(&b));
                }
                assert_eq!(b.state(), State::Open);
                mock.increment(SEC);
                b.try_acquire().expect("the probe").record(Verdict::Success);
            }
        });
        assert_eq!(b.state(), State::Closed);
        if b.snapshot().window_calls != 0 {
            filled += 1;
        }
        drop(fail(&b));
        if b.state() != State::Closed {
            tripped += 1;
        }
        b.reset("ops", "next round");
    }
    assert_eq!(
        (filled, tripped),
        (0, 0),
        "fresh periods with a success from an earlier one, and that tripped on one failure"
    );
}
