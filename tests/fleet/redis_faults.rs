//! Fleet mode while Redis is slow or gone, with trading threads calling the
//! whole time: against a real `redis-server` on a free loopback port, each
//! `Fleet` standing in for one process.
//!
//! Local time comes from mock clocks that never move. Nothing here asserts
//! how long anything took: the tests count the calls completed between two
//! markers (Redis seen asleep or down by an agent, and Redis answering
//! again) and check the breakers' states and the agents' counters.
#![cfg(feature = "redis")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use fusebox::fleet::Fleet;
use fusebox::{Breaker, Reason, State};

use crate::support::breaker::{DepError, Outage, MS, SEC};
use crate::support::fleet_kit::{connected, fleet, vendor};
use crate::support::redis_server::{wait_for, RedisServer};

/// How long `DEBUG SLEEP` keeps Redis from answering anyone, in seconds:
/// far longer than the few calls, trips and reads checked while it sleeps.
const SLEEP_SECS: u64 = 2;

/// A trading thread: calls its breaker in a loop until stopped, counting
/// every call that returned (a success, a failure or a refusal). The
/// vendor fails while `down` is set.
struct Trader {
    calls: Arc<AtomicU64>,
    down: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Trader {
    fn start(breaker: &Breaker) -> Trader {
        let calls = Arc::new(AtomicU64::new(0));
        let down = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (b, calls, down, stop) = (
                breaker.clone(),
                Arc::clone(&calls),
                Arc::clone(&down),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = b.call(|| {
                        if down.load(Ordering::Relaxed) {
                            Err(DepError::Outage(Outage))
                        } else {
                            Ok(7)
                        }
                    });
                    calls.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                }
            })
        };
        Trader {
            calls,
            down,
            stop,
            thread: Some(thread),
        }
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn vendor_fails(&self) {
        self.down.store(true, Ordering::Relaxed);
    }
}

impl Drop for Trader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let panicked = t.join().is_err();
            if !std::thread::panicking() {
                assert!(!panicked, "a trading thread panicked");
            }
        }
    }
}

#[test]
fn trading_threads_keep_calling_and_trip_locally_while_redis_sleeps() {
    let redis = RedisServer::start();
    // A's agent would wait a minute for an answer: it stays stuck in its
    // round trip for the whole sleep. B's gives up after 50 ms, and its
    // outage is the marker that Redis has stopped answering.
    let fa = fleet(&redis, "sleep").timeout(60 * SEC).build().unwrap();
    let fb = fleet(&redis, "sleep").timeout(50 * MS).build().unwrap();
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });
    let traders = [Trader::start(&a), Trader::start(&a)];
    wait_for("both trading threads to be calling", || {
        traders.iter().all(|t| t.calls() > 0)
    });

    let awake = Arc::new(AtomicBool::new(false));
    let sleeper = {
        let (awake, url) = (Arc::clone(&awake), redis.url());
        let counters: Vec<Arc<AtomicU64>> = traders.iter().map(|t| Arc::clone(&t.calls)).collect();
        std::thread::spawn(move || {
            let mut con = redis::Client::open(url)
                .and_then(|c| c.get_connection())
                .expect("connect to the test redis");
            let slept: redis::RedisResult<()> = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(SLEEP_SECS)
                .query(&mut con);
            // The end marker: Redis answers again.
            let at_end: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            awake.store(true, Ordering::Relaxed);
            slept.expect("DEBUG SLEEP (the server allows DEBUG from loopback)");
            at_end
        })
    };

    // The start marker: an agent has found Redis not answering.
    wait_for("B's agent to give up on the sleeping Redis", || {
        fb.snapshot().outages == 1
    });
    let at_start: Vec<u64> = traders.iter().map(Trader::calls).collect();
    assert!(!awake.load(Ordering::Relaxed), "Redis still sleeps");

    // The vendor fails: A trips on its own and refuses, with Redis asleep
    // and A's agent stuck waiting on it.
    traders[0].vendor_fails();
    traders[1].vendor_fails();
    wait_for("A to trip on local state", || a.state() == State::Open);
    let refusals = a.snapshot().totals.short_circuits;
    wait_for("A to refuse calls", || {
        a.snapshot().totals.short_circuits > refusals + 100
    });
    assert!(a.snapshot().trips >= 1);
    assert_eq!(b.state(), State::Closed, "B cannot hear of it yet");
    assert!(
        fa.snapshot().connected,
        "A's agent is still waiting on its round trip"
    );
    assert!(
        !awake.load(Ordering::Relaxed),
        "the trip and the refusals came only once Redis answered again: a caller waited on it"
    );

    let at_end = sleeper.join().expect("the sleeper");
    for (i, (start, end)) in at_start.iter().zip(&at_end).enumerate() {
        assert!(
            end > start,
            "trading thread {i} completed no call while Redis slept ({start} -> {end})"
        );
    }

    // Redis is back: A's agent gets its answer and writes the trip; B's
    // reconnects and follows the fleet.
    wait_for("A's trip to reach B", || b.state() == State::Open);
    assert_eq!(b.snapshot().last_transition.unwrap().reason, Reason::Fleet);
    wait_for("B's agent to reconnect", || fb.snapshot().connected);
    assert_eq!(fb.snapshot().outages, 1);
    assert_eq!(fa.snapshot().outages, 0, "A's agent never gave up");
}

#[test]
fn trading_threads_keep_calling_through_a_redis_kill_and_a_trip_after_the_restart_reaches_the_other_process(
) {
    let mut redis = RedisServer::start();
    let (fa, fb) = (
        fleet(&redis, "kill").build().unwrap(),
        fleet(&redis, "kill").build().unwrap(),
    );
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });
    let (ta, tb) = (Trader::start(&a), Trader::start(&b));
    wait_for("both trading threads to be calling", || {
        ta.calls() > 0 && tb.calls() > 0
    });

    redis.kill();
    let down = |f: &Fleet| {
        let s = f.snapshot();
        !s.connected && s.outages == 1
    };
    wait_for("both agents to see the outage", || down(&fa) && down(&fb));
    let at_start = [ta.calls(), tb.calls()];
    // Several reconnection attempts fail while the threads call.
    let errors = fa.snapshot().errors;
    wait_for("a few failed reconnections", || {
        fa.snapshot().errors >= errors + 3
    });
    let at_end = [ta.calls(), tb.calls()];
    assert!(
        at_end[0] > at_start[0] && at_end[1] > at_start[1],
        "calls completed while Redis was down: {at_start:?} -> {at_end:?}"
    );
    assert_eq!((a.state(), b.state()), (State::Closed, State::Closed));
    assert_eq!((fa.snapshot().outages, fb.snapshot().outages), (1, 1));

    // Redis returns on the same port, empty; the same agents reconnect.
    redis.restart();
    wait_for("both agents to reconnect", || {
        connected(&fa) && connected(&fb)
    });
    let reads = fa.snapshot().reads;
    wait_for("A's agent to read the fleet again", || {
        fa.snapshot().reads > reads
    });

    // A trip in B after the restart reaches A through the fleet.
    tb.vendor_fails();
    wait_for("B to trip", || b.state() == State::Open);
    wait_for("B's trip to reach A", || a.state() == State::Open);
    let change = a.snapshot().last_transition.unwrap();
    assert_eq!((change.from, change.reason), (State::Closed, Reason::Fleet));
    let refusals = a.snapshot().totals.short_circuits;
    wait_for("A's trading thread to be refused", || {
        a.snapshot().totals.short_circuits > refusals
    });
    assert_eq!(a.snapshot().totals.failures, 0, "A never failed a call");
    assert_eq!((fa.snapshot().outages, fb.snapshot().outages), (1, 1));
    wait_for("B's agent to count its write", || {
        fb.snapshot().published == 1
    });
}
