//! When the fleet agent wakes: at once for a local change, a breaker that
//! joins and an announcement, without waiting for its tick; that its
//! threads (the agent and the session's pub/sub reader) end when the
//! `Fleet` is dropped, even with Redis hung; and that a pub/sub connection
//! that silently stops delivering is caught by the agent's heartbeat.
//!
//! The agents here tick once a minute, so anything that waited for a tick
//! would outlast `PATIENCE`. Local time comes from mock clocks that never
//! move; waits poll, bounded by `PATIENCE`, and no test asserts how long
//! anything took.
#![cfg(feature = "redis")]

use std::time::{Duration, Instant};

use fusebox::fleet::{Fleet, FleetBuilder};
use fusebox::{Breaker, Reason, State};

use crate::support::breaker::{fail, succeed, MS, SEC};
use crate::support::fleet_kit::{vendor, Proxy};
use crate::support::log_capture;
use crate::support::redis_server::RedisServer;

/// How long a test waits for the fleet to do what it must before failing.
const PATIENCE: Duration = Duration::from_secs(10);

/// The fleet threads' names, as the OS shows them.
const AGENT_THREAD: &str = "fusebox-fleet";
const READER_THREAD: &str = "fusebox-pubsub";

/// Held by each test: the thread count is the process's.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    crate::support::process::alone()
}

/// Polls `cond` every millisecond until it holds; fails the test after
/// `PATIENCE`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(MS);
    }
}

/// An agent that ticks and reads each breaker once a minute.
fn sleepy(redis: &RedisServer, prefix: &str) -> FleetBuilder {
    Fleet::builder(redis.url())
        .prefix(prefix)
        // One process's trip reaches the other (no quorum): the test is of
        // how soon it does.
        .min_members(1)
        .member_ratio(0.0)
        .tick(60 * SEC)
        .refresh(60 * SEC)
        .hold_margin(SEC)
        .reconnect_backoff(5 * MS, 50 * MS)
}

/// This process's threads named `name` (Linux: `/proc/self/task`).
fn threads(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// Drops `fleet` on another thread and waits, bounded, for the drop to
/// return.
fn drop_within_patience(fleet: Fleet) {
    let (done, dropped) = crossbeam_channel::bounded(1);
    let dropper = std::thread::spawn(move || {
        drop(fleet);
        let _ = done.send(());
    });
    dropped
        .recv_timeout(PATIENCE)
        .expect("the fleet's drop returned");
    dropper.join().unwrap();
}

#[test]
fn a_local_trip_is_written_and_applied_elsewhere_without_waiting_for_a_tick() {
    let _one = one_at_a_time();
    let redis = RedisServer::start();
    let (fa, fb) = (
        sleepy(&redis, "wake-trip").build().unwrap(),
        sleepy(&redis, "wake-trip").build().unwrap(),
    );
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to read their breaker", || {
        fa.snapshot().reads > 0 && fb.snapshot().reads > 0
    });

    // A's agent wakes on its breaker's change and writes the trip; B's
    // wakes on the announcement and reads it.
    assert!(fail(&a).is_err());
    assert_eq!(a.state(), State::Open);
    wait_for("A's trip to be written", || fa.snapshot().published == 1);
    wait_for("the trip to open B", || b.state() == State::Open);
    assert_eq!(
        b.snapshot().last_transition.expect("B opened").reason,
        Reason::Fleet
    );
    assert!(fb.snapshot().messages >= 1);
    assert!(succeed(&b).unwrap_err().rejected().is_some());
}

#[test]
fn a_breaker_that_joins_a_connected_agent_is_read_at_once() {
    let _one = one_at_a_time();
    let redis = RedisServer::start();
    let fleet = sleepy(&redis, "wake-join").build().unwrap();
    wait_for("the agent to connect", || fleet.snapshot().connected);
    let b = vendor();
    fleet.join(&b).unwrap();
    wait_for("the breaker to be read", || {
        let s = fleet.snapshot();
        s.breakers == 1 && s.reads == 1
    });
}

#[test]
fn dropping_a_fleet_ends_its_agent_and_pub_sub_threads_even_with_redis_hung() {
    let _one = one_at_a_time();
    let redis = RedisServer::start();
    // A new thread shows its parent's name until it has set its own, and
    // an ended one may show a moment after it was joined: the counts are
    // polled.
    let counts = || (threads(AGENT_THREAD), threads(READER_THREAD));
    for hung in [false, true] {
        wait_for("no fleet thread", || counts() == (0, 0));
        let fleet = sleepy(&redis, "wake-drop")
            .timeout(60 * SEC)
            .build()
            .unwrap();
        let b = vendor();
        fleet.join(&b).unwrap();
        wait_for("the agent to read its breaker", || {
            fleet.snapshot().reads > 0
        });
        wait_for("an agent and a reader", || counts() == (1, 1));
        if hung {
            redis.pause();
        }
        drop_within_patience(fleet);
        wait_for("both threads to end", || counts() == (0, 0));
        if hung {
            redis.resume();
        }
    }
}

#[test]
fn a_failed_pub_sub_connection_is_one_outage_and_announcements_resume() {
    let _one = one_at_a_time();
    log_capture::install();
    let redis = RedisServer::start();
    let fast = |f: FleetBuilder| f.tick(5 * MS).build().unwrap();
    let (fa, fb) = (
        fast(sleepy(&redis, "wake-kill")),
        sleepy(&redis, "wake-kill").build().unwrap(),
    );
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to read their breaker", || {
        fa.snapshot().reads > 0 && fb.snapshot().reads > 0
    });

    // Redis closes every subscribed connection, and nothing else.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(
            &mut redis::Client::open(redis.url())
                .and_then(|c| c.get_connection())
                .expect("connect to the test redis"),
        )
        .expect("CLIENT KILL");
    assert_eq!(killed, 2);
    wait_for("both sessions to end and start again", || {
        [&fa, &fb].iter().all(|f| {
            let s = f.snapshot();
            s.outages == 1 && s.connected
        })
    });
    wait_for("a new reader in each agent", || threads(READER_THREAD) == 2);
    let warned = log_capture::lines("fleet `wake-kill`")
        .iter()
        .filter(|l| l.contains("unavailable"))
        .count();
    assert_eq!(warned, 2, "one warning per agent");

    // B's new reader hears A's trip.
    assert!(fail(&a).is_err());
    wait_for("the trip to open B", || b.state() == State::Open);
    assert_eq!(fa.snapshot().outages, 1);
    assert_eq!(fb.snapshot().outages, 1);
}

/// Two processes sharing breaker `vendor`, each read once: A's agent talks
/// to Redis directly; B's through a proxy, sweeping every 50 ms and
/// waiting `timeout` for Redis. Then B's subscribed connection is silenced:
/// it stays open and delivers nothing. Any member's trip opens the fleet.
struct Silenced {
    _redis: RedisServer,
    fa: Fleet,
    fb: Fleet,
    a: Breaker,
    b: Breaker,
}

fn silenced(prefix: &str, timeout: Duration) -> Silenced {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.port());
    let fa = sleepy(&redis, prefix).build().unwrap();
    let fb = Fleet::builder(proxy.url())
        .prefix(prefix)
        .min_members(1)
        .member_ratio(0.0)
        .refresh(50 * MS)
        .timeout(timeout)
        .reconnect_backoff(5 * MS, 50 * MS)
        .build()
        .unwrap();
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to read their breaker", || {
        fa.snapshot().reads > 0 && fb.snapshot().reads > 0
    });
    assert_eq!(proxy.silence_subscribers(&redis), 1);
    Silenced {
        _redis: redis,
        fa,
        fb,
        a,
        b,
    }
}

#[test]
fn a_pub_sub_connection_that_silently_delivers_nothing_is_caught_by_the_heartbeat() {
    let _one = one_at_a_time();
    // A timeout longer than the test: B's session does not end, the
    // heartbeat alone catches what it missed.
    let Silenced {
        _redis,
        fa,
        fb,
        a,
        b,
    } = silenced("silent", 60 * SEC);

    // A's trip is announced; B's reader never hears it, nor B's heartbeat,
    // and B's agent reads every breaker.
    assert!(fail(&a).is_err());
    wait_for("the trip to open B", || b.state() == State::Open);
    assert_eq!(
        b.snapshot().last_transition.expect("B opened").reason,
        Reason::Fleet
    );
    let s = fb.snapshot();
    assert!(s.catch_ups >= 1, "{s:?}");
    assert_eq!((s.messages, s.outages), (0, 0), "{s:?}");
    assert_eq!(fa.snapshot().published, 1);
}

#[test]
fn a_pub_sub_connection_silent_for_the_timeout_ends_the_session() {
    let _one = one_at_a_time();
    let Silenced {
        _redis,
        fa,
        fb,
        a,
        b,
    } = silenced("silent-end", 500 * MS);
    // No heartbeat comes back for the timeout: the session ends as for a
    // failed connection, and the next one subscribes afresh.
    wait_for("the session to end and start again", || {
        let s = fb.snapshot();
        s.outages == 1 && s.connected
    });
    // B's new reader hears A's trip.
    assert!(fail(&a).is_err());
    wait_for("the trip to open B", || b.state() == State::Open);
    assert!(fb.snapshot().messages >= 1);
    assert_eq!(fa.snapshot().outages, 0);
}
