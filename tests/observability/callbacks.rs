//! State-change delivery: the callback's arguments and order, callbacks that
//! call the breaker back or panic, which thread delivers, the bound on
//! changes waiting, and bounded subscriptions.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::{self, ThreadId};
use std::time::Duration;

use fusebox::{
    Breaker, BreakerBuilder, CallPath, Classifier, ConfigError, Delivery, Reason, State,
    StateChange,
};
use quanta::{Clock, Mock};

use crate::support::breaker::*;

type Log = Arc<Mutex<Vec<StateChange>>>;

fn base(clock: Clock) -> BreakerBuilder {
    named("refdata", clock)
}

fn named(name: &str, clock: Clock) -> BreakerBuilder {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::failures_of::<Outage>())
        .clock(clock)
        .jitter(0.0)
        .failure_rate_threshold(None)
        .consecutive_failure_threshold(1)
        .open_duration(SEC)
}

fn transitions(log: &Log) -> Vec<(State, State)> {
    log.lock().unwrap().iter().map(|c| (c.from, c.to)).collect()
}

#[test]
fn the_callback_gets_name_from_to_reason_and_when_for_every_change_in_order() {
    let (clock, mock) = Clock::mock();
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    let b = base(clock.clone())
        .on_state_change(move |c| sink.lock().unwrap().push(c.clone()))
        .build()
        .unwrap();
    let mut expected_at = Vec::new();
    let mut mark = || expected_at.push(clock.now());

    fail(&b).unwrap_err();
    mark();
    mock.increment(SEC);
    mark();
    fail(&b).unwrap_err(); // half-open, probe fails
    mark();
    mock.increment(2 * SEC);
    mark();
    succeed(&b).unwrap(); // half-open, probe closes
    mark();
    mock.increment(SEC);
    b.force_open("alice", "maintenance");
    mark();
    mock.increment(SEC);
    b.reset("bob", "done");
    mark();

    let log = log.lock().unwrap();
    let got: Vec<_> = log
        .iter()
        .map(|c| (c.from, c.to, c.reason.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                State::Closed,
                State::Open,
                Reason::ConsecutiveFailures { count: 1 }
            ),
            (State::Open, State::HalfOpen, Reason::OpenPeriodElapsed),
            (State::HalfOpen, State::Open, Reason::ProbeFailed),
            (State::Open, State::HalfOpen, Reason::OpenPeriodElapsed),
            (
                State::HalfOpen,
                State::Closed,
                Reason::ProbeSucceeded { successes: 1 }
            ),
            (
                State::Closed,
                State::ForcedOpen,
                Reason::ForcedOpen {
                    actor: "alice".into(),
                    note: "maintenance".into()
                }
            ),
            (
                State::ForcedOpen,
                State::Closed,
                Reason::Reset {
                    actor: "bob".into(),
                    note: "done".into()
                }
            ),
        ]
    );
    assert!(log.iter().all(|c| &*c.breaker == "refdata"));
    assert_eq!(
        log.iter().map(|c| c.seq).collect::<Vec<_>>(),
        (1..=7).collect::<Vec<_>>()
    );
    assert_eq!(log.iter().map(|c| c.at).collect::<Vec<_>>(), expected_at);
    assert_eq!(b.snapshot().last_transition.as_ref(), log.last());
}

/// A breaker whose callback can reach the breaker itself.
fn reentrant(
    react: impl Fn(&Breaker, &StateChange) + Send + Sync + 'static,
) -> (Breaker, Arc<Mock>, Log) {
    let (clock, mock) = Clock::mock();
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    let me: Arc<OnceLock<Breaker>> = Arc::default();
    let me_in_callback = Arc::clone(&me);
    let b = base(clock)
        .on_state_change(move |c| {
            sink.lock().unwrap().push(c.clone());
            let b = me_in_callback.get().expect("set right after build");
            react(b, c);
        })
        .build()
        .unwrap();
    me.set(b.clone()).unwrap();
    (b, mock, log)
}

#[test]
fn a_callback_can_read_the_breaker_it_is_called_for() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_in_callback = Arc::clone(&seen);
    let (b, mock, _log) = reentrant(move |b, c| {
        let s = b.snapshot();
        seen_in_callback
            .lock()
            .unwrap()
            .push((c.to, b.state(), s.state, s.trips));
    });
    fail(&b).unwrap_err();
    mock.increment(SEC);
    succeed(&b).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (State::Open, State::Open, State::Open, 1),
            (State::HalfOpen, State::HalfOpen, State::HalfOpen, 1),
            (State::Closed, State::Closed, State::Closed, 1),
        ]
    );
}

#[test]
fn a_callback_can_force_open_and_reset_the_breaker_it_is_called_for() {
    let (b, _mock, log) = reentrant(|b, c| match c.to {
        State::Open => b.force_open("auto", "opened: hold for an operator"),
        State::ForcedOpen if c.reason.actor() == Some("auto") => b.reset("auto", "released"),
        _ => {}
    });
    fail(&b).unwrap_err();
    assert_eq!(
        transitions(&log),
        vec![
            (State::Closed, State::Open),
            (State::Open, State::ForcedOpen),
            (State::ForcedOpen, State::Closed),
        ]
    );
    assert_eq!(b.state(), State::Closed);
    assert_eq!(succeed(&b).unwrap(), 7);
    let seqs: Vec<u64> = log.lock().unwrap().iter().map(|c| c.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
}

#[test]
fn a_callback_can_make_calls_through_the_breaker_it_is_called_for() {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&answers);
    let (b, mock, log) = reentrant(move |b, c| {
        if c.to == State::Open {
            sink.lock()
                .unwrap()
                .push(succeed(b).map_err(|e| e.rejected().is_some()));
        }
        if c.to == State::HalfOpen {
            // The probe is out (held by the caller that moved it here).
            sink.lock()
                .unwrap()
                .push(succeed(b).map_err(|e| e.rejected().is_some()));
        }
    });
    fail(&b).unwrap_err();
    mock.increment(SEC);
    fail(&b).unwrap_err();
    assert_eq!(
        *answers.lock().unwrap(),
        vec![Err(true), Err(true), Err(true)]
    );
    assert_eq!(
        transitions(&log),
        vec![
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Open),
        ]
    );
}

#[test]
fn a_panicking_callback_changes_nothing() {
    let (clock, mock) = Clock::mock();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let panicky = base(clock.clone())
        .on_state_change(move |c| {
            seen.fetch_add(1, Ordering::SeqCst);
            panic!("alerting is down ({c})");
        })
        .build()
        .unwrap();
    let plain = base(clock).build().unwrap();
    let events = panicky.subscribe(64).unwrap();

    type Step<'a> = Box<dyn Fn(&Breaker) + 'a>;
    let script: Vec<Step> = vec![
        Box::new(|b| drop(fail(b))),
        Box::new(|b| drop(succeed(b))),
        Box::new(|_| mock.increment(SEC)),
        Box::new(|b| drop(fail(b))),
        Box::new(|_| mock.increment(2 * SEC)),
        Box::new(|b| drop(succeed(b))),
        Box::new(|b| drop(succeed(b))),
        Box::new(|b| b.force_open("alice", "x")),
        Box::new(|b| drop(succeed(b))),
        Box::new(|b| b.reset("alice", "y")),
        Box::new(|b| drop(fail(b))),
    ];
    for step in &script {
        step(&panicky);
        step(&plain);
        assert_eq!(counters(&panicky.snapshot()), counters(&plain.snapshot()));
    }
    // It was called for every change, and every change still reached the
    // subscriber after the panic.
    let delivered: Vec<_> = std::iter::from_fn(|| events.try_recv()).collect();
    assert_eq!(delivered.len(), 8);
    assert_eq!(calls.load(Ordering::SeqCst), 8);
    assert_eq!(panicky.state(), State::Open);
}

#[test]
fn a_callback_that_panics_while_a_wrapped_call_unwinds_lets_the_first_panic_through() {
    let (clock, _mock) = Clock::mock();
    let b = base(clock)
        .on_state_change(|_| panic!("callback panic"))
        .build()
        .unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| {
        let _ = b.call(|| -> Result<(), DepError> { panic!("call panic") });
    }))
    .unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"call panic"));
    assert_eq!(b.state(), State::Open);
    assert!(refused(succeed(&b)).retry_after().is_some());
}

/// Long enough for any delivery handed to the notifier thread to arrive;
/// a bound on a wait that a working breaker ends at once, not a pace.
const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn a_callback_that_blocks_does_not_block_other_callers() {
    let (clock, _mock) = Clock::mock();
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (closed_tx, closed_rx) = mpsc::channel::<ThreadId>();
    let release_rx = Mutex::new(release_rx);
    let entered_tx = Mutex::new(entered_tx);
    let closed_tx = Mutex::new(closed_tx);
    let b = base(clock)
        .on_state_change(move |c| {
            sink.lock().unwrap().push(c.clone());
            if c.to == State::Open {
                entered_tx.lock().unwrap().send(()).unwrap();
                release_rx.lock().unwrap().recv().unwrap();
            }
            if c.to == State::Closed {
                closed_tx
                    .lock()
                    .unwrap()
                    .send(thread::current().id())
                    .unwrap();
            }
        })
        .build()
        .unwrap();
    std::thread::scope(|s| {
        let tripper = s.spawn(|| fail(&b).unwrap_err());
        entered_rx.recv().unwrap();
        // The tripping thread is inside the callback. Everyone else carries on.
        assert_eq!(refused(succeed(&b)).state(), State::Open);
        let _ = b.snapshot();
        b.reset("bob", "while the alert hangs");
        assert_eq!(succeed(&b).unwrap(), 7);
        assert_eq!(transitions(&log), vec![(State::Closed, State::Open)]);
        release_tx.send(()).unwrap();
        let tripper = tripper.thread().id();
        // The change made meanwhile is delivered after the first, and not by
        // the thread that was delivering: it delivers only its own.
        let closer = closed_rx.recv_timeout(PATIENCE).expect("delivered");
        assert_ne!(closer, tripper);
        assert_ne!(closer, thread::current().id());
    });
    assert_eq!(
        transitions(&log),
        vec![(State::Closed, State::Open), (State::Open, State::Closed)]
    );
}

/// A breaker whose callback records which thread delivered each change,
/// holds the first change until `release` is sent, and reports on `done`
/// when change `last` is delivered.
struct Held {
    b: Breaker,
    entered: mpsc::Receiver<()>,
    release: mpsc::Sender<()>,
    done: mpsc::Receiver<()>,
    deliveries: Arc<Mutex<Vec<(ThreadId, u64)>>>,
}

fn held(clock: Clock, delivery: Delivery, last: u64) -> Held {
    let deliveries: Arc<Mutex<Vec<(ThreadId, u64)>>> = Arc::default();
    let sink = Arc::clone(&deliveries);
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let (done_tx, done) = mpsc::channel();
    let (entered_tx, release_rx, done_tx) = (
        Mutex::new(entered_tx),
        Mutex::new(release_rx),
        Mutex::new(done_tx),
    );
    let b = base(clock)
        .delivery(delivery)
        .on_state_change(move |c| {
            sink.lock().unwrap().push((thread::current().id(), c.seq));
            if c.seq == 1 {
                // A slow alerting call, held until the test lets it go.
                entered_tx.lock().unwrap().send(()).unwrap();
                release_rx.lock().unwrap().recv().unwrap();
            }
            if c.seq == last {
                done_tx.lock().unwrap().send(()).unwrap();
            }
        })
        .build()
        .unwrap();
    Held {
        b,
        entered,
        release,
        done,
        deliveries,
    }
}

impl Held {
    fn delivered_on(&self, thread: ThreadId) -> Vec<u64> {
        let deliveries = self.deliveries.lock().unwrap();
        deliveries
            .iter()
            .filter(|(t, _)| *t == thread)
            .map(|(_, seq)| *seq)
            .collect()
    }

    fn delivered(&self) -> Vec<u64> {
        let deliveries = self.deliveries.lock().unwrap();
        deliveries.iter().map(|(_, seq)| *seq).collect()
    }
}

#[test]
fn a_caller_delivers_no_more_than_the_changes_its_own_call_caused() {
    const WORKERS: usize = 4;
    const FLIPS: usize = 20;
    // The trip, then each worker's force_open and reset, FLIPS times.
    let last = 1 + (WORKERS * FLIPS * 2) as u64;
    let (clock, _mock) = Clock::mock();
    let h = held(clock, Delivery::Caller, last);
    let b = &h.b;
    thread::scope(|s| {
        let tripper = s.spawn(|| fail(b).unwrap_err());
        h.entered.recv().unwrap();
        // The tripping caller is inside a slow callback; a flapping breaker
        // piles changes up behind it.
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                s.spawn(|| {
                    for _ in 0..FLIPS {
                        b.force_open("ops", "flap");
                        b.reset("ops", "flap");
                    }
                })
            })
            .collect();
        let workers: Vec<ThreadId> = workers
            .into_iter()
            .map(|w| {
                let id = w.thread().id();
                w.join().unwrap();
                id
            })
            .collect();
        let tripper_id = tripper.thread().id();
        h.release.send(()).unwrap();
        tripper.join().unwrap();
        h.done
            .recv_timeout(PATIENCE)
            .expect("every change is delivered");
        assert_eq!(
            h.delivered_on(tripper_id),
            vec![1],
            "the tripping call delivered its own change and nothing else"
        );
        for worker in workers {
            assert!(h.delivered_on(worker).len() <= 2 * FLIPS);
        }
        assert_eq!(h.delivered_on(thread::current().id()), Vec::<u64>::new());
    });
    assert_eq!(
        h.delivered(),
        (1..=last).collect::<Vec<_>>(),
        "each change delivered once, in order"
    );
    assert_eq!(b.snapshot().dropped_changes, 0);
}

#[test]
fn changes_waiting_beyond_the_bound_are_dropped_oldest_first_and_counted() {
    // 1 024 changes wait at most (`Delivery::PENDING_CAPACITY`).
    const MADE: u64 = 1_024 + 76;
    let last = 1 + MADE;
    let (clock, _mock) = Clock::mock();
    let h = held(clock, Delivery::Caller, last);
    let b = &h.b;
    thread::scope(|s| {
        let tripper = s.spawn(|| fail(b).unwrap_err());
        h.entered.recv().unwrap();
        for i in 0..MADE {
            if i % 2 == 0 {
                b.force_open("ops", "flap");
            } else {
                b.reset("ops", "flap");
            }
        }
        assert_eq!(b.snapshot().dropped_changes, 76);
        h.release.send(()).unwrap();
        tripper.join().unwrap();
        h.done
            .recv_timeout(PATIENCE)
            .expect("the newest change is delivered");
    });
    let mut expected = vec![1];
    expected.extend(2 + 76..=last);
    assert_eq!(h.delivered(), expected);
    let snap = b.snapshot();
    assert_eq!(snap.dropped_changes, 76);
    assert_eq!(snap.last_transition.unwrap().seq, last);
}

#[test]
fn with_notifier_delivery_no_caller_runs_the_callback() {
    let (clock, mock) = Clock::mock();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let b = base(clock)
        .delivery(Delivery::Notifier)
        .on_state_change(move |c| {
            let me = thread::current();
            let seen = (me.id(), me.name().map(String::from), c.seq, c.to);
            tx.lock().unwrap().send(seen).unwrap();
        })
        .build()
        .unwrap();
    let events = b.subscribe(16).unwrap();
    fail(&b).unwrap_err();
    mock.increment(SEC);
    succeed(&b).unwrap();
    b.force_open("ops", "maintenance");
    let got: Vec<_> = (0..4)
        .map(|_| rx.recv_timeout(PATIENCE).expect("delivered"))
        .collect();
    for (thread, name, ..) in &got {
        assert_ne!(*thread, thread::current().id());
        assert_eq!(name.as_deref(), Some("fusebox-notifier"));
    }
    assert_eq!(
        got.iter().map(|g| (g.2, g.3)).collect::<Vec<_>>(),
        vec![
            (1, State::Open),
            (2, State::HalfOpen),
            (3, State::Closed),
            (4, State::ForcedOpen)
        ]
    );
    let streamed: Vec<u64> = (0..4)
        .map(|_| events.recv_timeout(PATIENCE).expect("sent").seq)
        .collect();
    assert_eq!(streamed, vec![1, 2, 3, 4]);
}

#[test]
fn with_notifier_delivery_a_callback_can_still_change_the_breaker() {
    let (clock, _mock) = Clock::mock();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let me: Arc<OnceLock<Breaker>> = Arc::default();
    let me_in_callback = Arc::clone(&me);
    let b = base(clock)
        .delivery(Delivery::Notifier)
        .on_state_change(move |c| {
            let b = me_in_callback.get().expect("set right after build");
            if c.to == State::Open {
                b.force_open("auto", "hold for an operator");
            }
            tx.lock().unwrap().send((c.seq, c.to)).unwrap();
        })
        .build()
        .unwrap();
    me.set(b.clone()).unwrap();
    fail(&b).unwrap_err();
    let got: Vec<_> = (0..2)
        .map(|_| rx.recv_timeout(PATIENCE).expect("delivered"))
        .collect();
    assert_eq!(got, vec![(1, State::Open), (2, State::ForcedOpen)]);
    assert_eq!(b.state(), State::ForcedOpen);
}

#[test]
fn an_absurd_subscription_capacity_is_refused_with_a_typed_error() {
    let (clock, _mock) = Clock::mock();
    let b = base(clock).build().unwrap();
    // The most a subscription may buffer: 65 536 changes.
    const MAX_CAPACITY: usize = 1 << 16;
    for capacity in [0, MAX_CAPACITY + 1, 1 << 40, usize::MAX] {
        match b.subscribe(capacity) {
            Err(ConfigError::Invalid { field, value, .. }) => {
                assert_eq!(field, "capacity");
                assert_eq!(value, capacity.to_string());
            }
            other => panic!("subscribe({capacity}) gave {other:?}"),
        }
    }
    assert!(b.subscribe(1).is_ok());
    assert!(b.subscribe(MAX_CAPACITY).is_ok());
}

#[test]
fn a_subscription_is_read_until_its_breaker_is_gone() {
    let (clock, _mock) = Clock::mock();
    let b = base(clock).build().unwrap();
    let events = b.subscribe(8).unwrap();
    let reader = thread::spawn(move || {
        std::iter::from_fn(|| events.recv())
            .map(|c| c.to)
            .collect::<Vec<_>>()
    });
    let waiting = b.subscribe(8).unwrap();
    fail(&b).unwrap_err();
    b.reset("ops", "retry");
    assert_eq!(
        std::iter::from_fn(|| waiting.try_recv())
            .map(|c| c.seq)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        std::iter::from_fn(|| waiting.try_recv()).count(),
        0,
        "never blocks"
    );
    drop(b);
    assert_eq!(reader.join().unwrap(), vec![State::Open, State::Closed]);
    assert_eq!(waiting.recv(), None);
}

#[test]
fn a_slow_subscriber_loses_changes_rather_than_blocking_callers() {
    let (clock, mock) = Clock::mock();
    let b = base(clock).build().unwrap();
    let slow = b.subscribe(2).unwrap();
    let fast = b.subscribe(64).unwrap();
    for _ in 0..5 {
        fail(&b).unwrap_err(); // Closed -> Open
        b.reset("ops", "again"); // Open -> Closed
    }
    assert_eq!(slow.dropped(), 8);
    assert_eq!(fast.dropped(), 0);
    let kept: Vec<_> = std::iter::from_fn(|| slow.try_recv()).collect();
    assert_eq!(
        kept.iter().map(|c| c.seq).collect::<Vec<_>>(),
        vec![1, 2],
        "the oldest are kept"
    );
    assert_eq!(std::iter::from_fn(|| fast.try_recv()).count(), 10);
    // Once drained, it receives again.
    fail(&b).unwrap_err();
    let next = slow.try_recv().unwrap();
    assert_eq!((next.to, next.seq), (State::Open, 11));
    // A subscriber that hung up is forgotten without disturbing anyone.
    drop(fast);
    mock.increment(SEC);
    succeed(&b).unwrap();
    assert_eq!(slow.try_recv().unwrap().to, State::HalfOpen);
    assert_eq!(slow.try_recv().unwrap().to, State::Closed);
}

/// A log sink that panics on every record about the breaker it names, as a
/// logger that writes with `eprintln!` to a closed stderr does.
struct BrokenSink;

const BROKEN_SINK_BREAKER: &str = "behind-a-broken-log-sink";

impl log::Log for BrokenSink {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.args().to_string().contains(BROKEN_SINK_BREAKER) {
            panic!("log sink down");
        }
    }

    fn flush(&self) {}
}

#[test]
fn a_panicking_log_sink_neither_reaches_the_caller_nor_stops_later_deliveries() {
    // The only test in this binary that installs a logger.
    log::set_logger(&BrokenSink).expect("no other logger in this test binary");
    log::set_max_level(log::LevelFilter::Trace);
    let (clock, _mock) = Clock::mock();
    let seen: Log = Arc::default();
    let sink = Arc::clone(&seen);
    let b = named(BROKEN_SINK_BREAKER, clock)
        .on_state_change(move |c| sink.lock().unwrap().push(c.clone()))
        .build()
        .unwrap();
    let events = b.subscribe(16).unwrap();
    // The trip is logged, the sink panics: the caller still gets its answer.
    let answer = catch_unwind(AssertUnwindSafe(|| fail(&b)));
    assert!(
        matches!(answer, Ok(Err(fusebox::CallError::Failed(_)))),
        "the caller sees the dependency's error, not the log sink's panic"
    );
    assert_eq!(b.state(), State::Open);
    b.reset("ops", "retry");
    b.force_open("ops", "hold");
    assert_eq!(
        transitions(&seen),
        vec![
            (State::Closed, State::Open),
            (State::Open, State::Closed),
            (State::Closed, State::ForcedOpen),
        ],
        "every change still reaches the callback"
    );
    assert_eq!(std::iter::from_fn(|| events.try_recv()).count(), 3);
    // And a wrapped call that panics while the sink panics too does not
    // abort the process: the call's own panic reaches the caller.
    b.reset("ops", "again");
    let payload = catch_unwind(AssertUnwindSafe(|| {
        let _ = b.call(|| -> Result<(), DepError> { panic!("call panic") });
    }))
    .unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"call panic"));
    assert_eq!(b.state(), State::Open);
}
