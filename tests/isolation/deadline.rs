//! The deadline pool: a caller never waits past its deadline, a hung
//! dependency never holds more than the pool's threads, and the breaker
//! counts the failure at the deadline, while the call still hangs.
//!
//! The subject here is a real thread pool and a real deadline, so these
//! tests use real time, bounded generously: they assert what only a defect
//! could break (a caller returned, a count stayed under its bound), never
//! how fast something ran.
#![cfg(feature = "isolation")]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use fusebox::isolation::{BuildError, Bulkhead, DeadlinePool, Isolated, IsolationError, Layer};
use fusebox::{ConfigError, State};

use crate::support::breaker::*;

/// Long enough that an answer ready at once is never late on a loaded
/// 2-core machine; every wait it bounds is a hang, never a healthy call.
const DEADLINE: Duration = Duration::from_millis(200);

fn pool(threads: usize) -> DeadlinePool {
    DeadlinePool::builder("vendor-sdk")
        .threads(threads)
        .deadline(DEADLINE)
        .build()
        .expect("valid pool")
}

/// `breaker`, then `pool`: the one way a call reaches a deadline pool.
fn guarded(breaker: &fusebox::Breaker, pool: &DeadlinePool) -> Isolated {
    Isolated::new(breaker.clone()).with_deadline_pool(pool.clone())
}

/// A dependency that hangs until the test ends (drops the sender), and
/// counts what it saw: calls inside at once, and the threads it ran on.
#[derive(Clone)]
struct Hang {
    release: Receiver<()>,
    inside: Arc<AtomicUsize>,
    most_inside: Arc<AtomicUsize>,
    threads: Arc<Mutex<HashSet<thread::ThreadId>>>,
}

impl Hang {
    fn new() -> (Hang, Sender<()>) {
        let (tx, rx) = crossbeam_channel::bounded(0);
        let hang = Hang {
            release: rx,
            inside: Arc::default(),
            most_inside: Arc::default(),
            threads: Arc::default(),
        };
        (hang, tx)
    }

    fn call(self) -> Result<u32, DepError> {
        let n = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_inside.fetch_max(n, Ordering::SeqCst);
        self.threads.lock().unwrap().insert(thread::current().id());
        // "Forever": until the test drops the sender.
        let _ = self.release.recv();
        self.inside.fetch_sub(1, Ordering::SeqCst);
        Ok(7)
    }
}

/// Waits (bounded) until every abandoned call has returned.
fn until_idle(pool: &DeadlinePool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while pool.snapshot().busy > 0 {
        assert!(Instant::now() < give_up, "pool threads never came back");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_dependency_that_hangs_forever_never_blocks_a_caller_beyond_its_deadline() {
    let (breaker, _mock) = consecutive(1_000);
    let pool = pool(3);
    let (hang, release) = Hang::new();

    // 8 racing callers against 3 threads, 4 calls each.
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (breaker, pool, hang) = (breaker.clone(), pool.clone(), hang.clone());
            thread::spawn(move || {
                let mut outcomes = Vec::new();
                for _ in 0..4 {
                    let started = Instant::now();
                    let hang = hang.clone();
                    let r = guarded(&breaker, &pool).call(move || hang.call());
                    outcomes.push((started.elapsed(), r));
                }
                outcomes
            })
        })
        .collect();
    let outcomes: Vec<_> = callers
        .into_iter()
        .flat_map(|c| c.join().expect("caller"))
        .collect();

    let mut timed_out = 0;
    for (took, r) in &outcomes {
        // Generous: 25 deadlines. Only a caller blocked on the hung call
        // could take longer.
        assert!(*took < DEADLINE * 25, "a caller waited {took:?}");
        match r {
            Err(IsolationError::TimedOut(t)) => {
                assert!(*took >= t.deadline(), "gave up before its deadline");
                timed_out += 1;
            }
            Err(IsolationError::Full(f)) => assert_eq!(f.layer(), Layer::DeadlinePool),
            other => panic!("a hung call cannot answer: {other:?}"),
        }
    }
    // The first three calls took the three threads and never came back;
    // every later one was refused at once.
    assert_eq!(timed_out, 3);
    let snap = pool.snapshot();
    assert_eq!(snap.threads, 3);
    assert_eq!((snap.busy, snap.abandoned, snap.timed_out), (3, 3, 3));
    assert_eq!(snap.refusals, 29);
    assert!(hang.most_inside.load(Ordering::SeqCst) <= 3);
    assert!(
        hang.threads.lock().unwrap().len() <= 3,
        "a call ran on a fourth thread"
    );

    // Released, the abandoned calls return and free their threads.
    drop(release);
    until_idle(&pool);
    let snap = pool.snapshot();
    assert_eq!((snap.abandoned, snap.returned_late), (0, 3));
    assert_eq!(
        guarded(&breaker, &pool)
            .call(|| Ok::<_, DepError>(8))
            .unwrap(),
        8
    );
    assert!(hang.threads.lock().unwrap().len() <= 3);
}

#[test]
fn the_breaker_opens_at_the_deadline_while_calls_still_hang() {
    let (breaker, _mock) = consecutive(2);
    let pool = pool(4);
    let (hang, release) = Hang::new();
    for _ in 0..2 {
        let hang = hang.clone();
        let r = guarded(&breaker, &pool).call(move || hang.call());
        assert!(matches!(r, Err(IsolationError::TimedOut(_))), "{r:?}");
    }
    // Open, with both calls still inside the dependency.
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(hang.inside.load(Ordering::SeqCst), 2);
    assert_eq!(pool.snapshot().abandoned, 2);
    assert_eq!(breaker.snapshot().totals.failures, 2);
    // The open breaker refuses before the pool is asked.
    let r = guarded(&breaker, &pool).call(|| Ok::<_, DepError>(1));
    assert!(r.expect_err("open").rejected().is_some());
    assert_eq!(pool.snapshot().refusals, 0);

    drop(release);
    until_idle(&pool);
    // Their late answers change nothing.
    assert_eq!(breaker.snapshot().totals.successes, 0);
}

#[test]
fn a_full_pool_refuses_at_once_and_the_breaker_does_not_count_it() {
    let (breaker, _mock) = consecutive(1);
    let pool = DeadlinePool::builder("vendor-sdk")
        .threads(1)
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap();
    let (hang, release) = Hang::new();
    // Hold the only thread from another caller, with a long deadline.
    let holder = {
        let (isolated, hang) = (guarded(&breaker, &pool), hang.clone());
        thread::spawn(move || isolated.call(move || hang.call()))
    };
    let give_up = Instant::now() + Duration::from_secs(10);
    while hang.inside.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < give_up);
        thread::sleep(Duration::from_millis(1));
    }
    let r = guarded(&breaker, &pool).call(|| Ok::<_, DepError>(1));
    let Err(IsolationError::Full(full)) = r else {
        panic!("refused for want of a thread: {r:?}")
    };
    assert_eq!((full.limit(), full.waited()), (1, Duration::ZERO));
    let s = breaker.snapshot();
    assert_eq!((s.state, s.totals.failures), (State::Closed, 0));

    drop(release);
    assert_eq!(holder.join().unwrap().unwrap(), 7);
    assert_eq!(breaker.snapshot().totals.successes, 1, "only the held call");
}

#[test]
fn answers_within_the_deadline_are_returned_and_classified() {
    let (breaker, _mock) = consecutive(2);
    let pool = DeadlinePool::builder("vendor-sdk")
        .threads(2)
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap();
    assert_eq!(
        guarded(&breaker, &pool)
            .call(|| Ok::<_, DepError>(5))
            .unwrap(),
        5
    );
    let r = guarded(&breaker, &pool).call(|| Err::<u32, _>(DepError::Business(Business)));
    assert!(matches!(
        r,
        Err(IsolationError::Failed(DepError::Business(_)))
    ));
    for _ in 0..2 {
        let r = guarded(&breaker, &pool).call(|| Err::<u32, _>(DepError::Outage(Outage)));
        assert!(matches!(
            r,
            Err(IsolationError::Failed(DepError::Outage(_)))
        ));
    }
    let s = breaker.snapshot();
    assert_eq!(s.state, State::Open);
    assert_eq!(
        (s.totals.successes, s.totals.ignored, s.totals.failures),
        (1, 1, 2)
    );
    assert_eq!(pool.snapshot().completed, 4);
}

#[test]
fn a_panic_on_a_pool_thread_reaches_the_caller_and_the_thread_lives_on() {
    let (breaker, _mock) = consecutive(1);
    let pool = DeadlinePool::builder("vendor-sdk")
        .threads(1)
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        guarded(&breaker, &pool).call(|| -> Result<u32, DepError> { panic!("sdk bug") })
    }));
    assert!(r.is_err(), "the panic resumes in the caller");
    assert_eq!(breaker.state(), State::Open, "and counts as a failure");
    breaker.reset("test", "next");
    assert_eq!(
        guarded(&breaker, &pool)
            .call(|| Ok::<_, DepError>(3))
            .unwrap(),
        3
    );
}

#[test]
fn the_three_layers_compose_breaker_then_bulkhead_then_pool() {
    let (breaker, _mock) = consecutive(1_000);
    let isolated = Isolated::new(breaker.clone())
        .with_bulkhead(
            Bulkhead::builder("vendor-sdk")
                .max_concurrent(1)
                .build()
                .unwrap(),
        )
        .with_deadline_pool(
            DeadlinePool::builder("vendor-sdk")
                .threads(4)
                .deadline(DEADLINE)
                .build()
                .unwrap(),
        );
    let (hang, release) = Hang::new();
    // One caller waits on a hung call, holding the bulkhead's only slot.
    let waiter = {
        let (isolated, hang) = (isolated.clone(), hang.clone());
        thread::spawn(move || isolated.call_within(Duration::from_secs(30), move || hang.call()))
    };
    let give_up = Instant::now() + Duration::from_secs(10);
    while hang.inside.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < give_up);
        thread::sleep(Duration::from_millis(1));
    }
    // A second caller is refused by the bulkhead, not queued on the pool.
    let r = isolated.call(|| Ok::<_, DepError>(1));
    let Err(IsolationError::Full(full)) = r else {
        panic!("bulkhead full: {r:?}")
    };
    assert_eq!(full.layer(), Layer::Bulkhead);
    assert_eq!(isolated.deadline_pool().unwrap().snapshot().busy, 1);
    drop(release);
    assert_eq!(waiter.join().unwrap().unwrap(), 7);

    // With the slot free, a hung call is abandoned at the pool's deadline
    // and gives the bulkhead slot back then, though the pool thread stays.
    let (hang, release) = Hang::new();
    let r = isolated.call(move || hang.call());
    assert!(matches!(r, Err(IsolationError::TimedOut(_))), "{r:?}");
    assert_eq!(isolated.bulkhead().unwrap().snapshot().in_use, 0);
    assert_eq!(isolated.deadline_pool().unwrap().snapshot().abandoned, 1);
    assert_eq!(breaker.snapshot().totals.failures, 1);
    drop(release);
}

#[test]
fn a_pool_without_threads_or_deadline_is_refused_at_build() {
    let err = DeadlinePool::builder("x")
        .threads(0)
        .deadline(DEADLINE)
        .build();
    assert!(matches!(
        err,
        Err(BuildError::Config(ConfigError::Invalid {
            field: "threads",
            ..
        }))
    ));
    let err = DeadlinePool::builder("x")
        .threads(1)
        .deadline(Duration::ZERO)
        .build();
    assert!(matches!(
        err,
        Err(BuildError::Config(ConfigError::Invalid {
            field: "deadline",
            ..
        }))
    ));
    let err = DeadlinePool::builder("x").deadline(DEADLINE).build();
    assert!(matches!(
        err,
        Err(BuildError::Config(ConfigError::Missing {
            field: "threads",
            ..
        }))
    ));
    let err = DeadlinePool::builder("x").threads(1).build();
    assert!(matches!(
        err,
        Err(BuildError::Config(ConfigError::Missing {
            field: "deadline",
            ..
        }))
    ));
}

#[test]
fn the_counts_balance_when_answers_race_the_deadline() {
    // A 1 ms deadline against a 1 ms answer: some callers give up first,
    // some get the answer, some find it there just as they give up. Either
    // way every call is counted once and every slot comes back.
    let (breaker, _mock) = consecutive(u32::MAX);
    let pool = pool(2);
    const CALLS: u64 = 300;
    let (mut answered, mut abandoned) = (0, 0);
    for _ in 0..CALLS {
        let r = guarded(&breaker, &pool).call_within(Duration::from_millis(1), || {
            thread::sleep(Duration::from_millis(1));
            Ok::<_, DepError>(1)
        });
        match r {
            Ok(1) => answered += 1,
            Err(IsolationError::TimedOut(_)) => abandoned += 1,
            // Both threads still busy with calls abandoned a moment ago.
            Err(IsolationError::Full(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    until_idle(&pool);
    let snap = pool.snapshot();
    assert_eq!(snap.completed, answered);
    assert_eq!(snap.timed_out, abandoned);
    assert_eq!(
        snap.returned_late, abandoned,
        "every abandoned call came back"
    );
    assert_eq!(snap.abandoned, 0);
    assert_eq!(snap.completed + snap.timed_out + snap.refusals, CALLS);
    let totals = breaker.snapshot().totals;
    assert_eq!((totals.successes, totals.failures), (answered, abandoned));
}
