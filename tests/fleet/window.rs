//! The fleet's recent-failures window and its shared backoff, against a
//! real `redis-server` on a free loopback port: each `Fleet` is one agent,
//! standing in for one process.
//!
//! Local time comes from mock clocks that never move, so every local open
//! period ends only when the fleet says so. The fleet's time is the Redis
//! server's, which is real: the tests wait for it by polling, bounded by
//! `PATIENCE`, and never assert on how long anything took.
#![cfg(feature = "redis")]

use std::time::Duration;

use fusebox::fleet::Fleet;
use fusebox::{Breaker, Reason, State};

use crate::support::breaker::{fail, quiet, succeed, MS, SEC};
use crate::support::fleet_kit::{connected, fleet, redis_conn};
use crate::support::redis_server::{wait_for, RedisServer};

/// A breaker on a mock clock that opens after `threshold` failures in a
/// row, for `open_duration` doubling at each re-open, without jitter.
fn vendor(threshold: u32, open_duration: Duration) -> Breaker {
    let (b, _mock) = quiet("vendor");
    b.consecutive_failure_threshold(threshold)
        .open_duration(open_duration)
        .backoff_multiplier(2.0)
        .max_open_duration(60 * SEC)
        .max_probe_duration(60 * SEC)
        .build()
        .expect("valid configuration")
}

/// The Redis server's clock, in milliseconds.
fn server_ms(con: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1_000 + micros / 1_000
}

/// The fleet's state of breaker `vendor` under `prefix`, as Redis holds it.
#[derive(Debug, PartialEq, Eq)]
struct Stored {
    open: bool,
    epoch: u64,
    step: u32,
    /// The open period's length in milliseconds (0 when closed).
    period: u64,
}

fn stored(con: &mut redis::Connection, prefix: &str) -> Stored {
    let (state, epoch, step, period): (Option<String>, Option<u64>, Option<u32>, Option<u64>) =
        redis::cmd("HMGET")
            .arg(format!("{{{prefix}:vendor}}:state"))
            .arg("state")
            .arg("epoch")
            .arg("step")
            .arg("period")
            .query(con)
            .unwrap();
    Stored {
        open: state.as_deref() == Some("open"),
        epoch: epoch.unwrap_or(0),
        step: step.unwrap_or(0),
        period: period.unwrap_or(0),
    }
}

/// Fails one call through `b`, which must be attempted, not refused.
#[track_caller]
fn failure(b: &Breaker) {
    let err = fail(b).unwrap_err();
    assert!(err.rejected().is_none(), "the call was attempted: {err}");
}

#[test]
fn failures_spread_over_processes_each_below_its_threshold_open_every_one() {
    let redis = RedisServer::start();
    let fleets: Vec<Fleet> = (0..3)
        .map(|_| {
            fleet(&redis, "spread")
                .failure_window(6, 60 * SEC)
                .build()
                .unwrap()
        })
        .collect();
    // Each would open on its own after 5 failures in a row.
    let breakers: Vec<Breaker> = (0..3).map(|_| vendor(5, 30 * SEC)).collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).unwrap();
    }
    wait_for("every agent to connect", || fleets.iter().all(connected));

    for b in &breakers {
        failure(b);
        failure(b);
        assert_eq!(b.state(), State::Closed, "2 failures are not 5");
    }
    wait_for("every process to open", || {
        breakers.iter().all(|b| b.state() == State::Open)
    });
    for b in &breakers {
        let snap = b.snapshot();
        assert_eq!(snap.trips, 0, "no process tripped on its own");
        assert_eq!(snap.last_transition.unwrap().reason, Reason::Fleet);
        assert!(succeed(b).unwrap_err().rejected().is_some(), "refused");
    }
    wait_for("every agent to count its failures", || {
        fleets
            .iter()
            .map(|f| f.snapshot().failures_published)
            .sum::<u64>()
            == 6
    });
    let trips: u64 = fleets.iter().map(|f| f.snapshot().window_trips).sum();
    assert_eq!(trips, 1, "one fleet trip");
    // The breaker's first open period, as a local trip would have it.
    let s = stored(&mut redis_conn(&redis), "spread");
    assert_eq!((s.open, s.step, s.period), (true, 0, 30_000));
}

#[test]
fn failures_older_than_the_window_do_not_count() {
    let redis = RedisServer::start();
    let mut con = redis_conn(&redis);
    // 300 ms of server time, in buckets of 30 ms; 4 failures open it.
    let window = |_| {
        fleet(&redis, "old")
            .failure_window(4, 300 * MS)
            .build()
            .unwrap()
    };
    let fleets: Vec<Fleet> = (0..3).map(window).collect();
    let breakers: Vec<Breaker> = (0..3).map(|_| vendor(100, 30 * SEC)).collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).unwrap();
    }
    wait_for("every agent to connect", || fleets.iter().all(connected));
    let written = |i: usize, n: u64| {
        wait_for("the failures to be written", || {
            fleets[i].snapshot().failures_published == n
        })
    };

    // Two failures, then one half a window later, which keeps the
    // window's key alive past the first two's time.
    failure(&breakers[0]);
    failure(&breakers[0]);
    written(0, 2);
    let first = server_ms(&mut con);
    wait_for("half a window of server time", || {
        server_ms(&mut con) >= first + 150
    });
    failure(&breakers[1]);
    written(1, 1);
    wait_for("the first two to leave the window", || {
        server_ms(&mut con) >= first + 300
    });
    // A fourth failure: two in the window, not four.
    failure(&breakers[2]);
    written(2, 1);
    assert!(!stored(&mut con, "old").open, "the fleet stays closed");
    assert!(breakers.iter().all(|b| b.state() == State::Closed));
    assert_eq!(fleets[2].snapshot().window_trips, 0);

    // Four within the window do open it.
    for _ in 0..3 {
        failure(&breakers[2]);
    }
    wait_for("every process to open", || {
        breakers.iter().all(|b| b.state() == State::Open)
    });
    assert_eq!(fleets[2].snapshot().window_trips, 1);
}

#[test]
fn the_window_key_expires_once_failures_stop() {
    let redis = RedisServer::start();
    let mut con = redis_conn(&redis);
    let f = fleet(&redis, "ttl")
        .failure_window(100, 2 * SEC)
        .build()
        .unwrap();
    let b = vendor(100, 30 * SEC);
    f.join(&b).unwrap();
    wait_for("the agent to connect", || connected(&f));

    failure(&b);
    wait_for("the failure to be written", || {
        f.snapshot().failures_published == 1
    });
    let key = "{ttl:vendor}:window";
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut con).unwrap();
    // At most the window and one bucket (-1 would be no expiry, -2 gone).
    assert!(ttl > 0 && ttl <= 2_200, "PTTL {ttl}");
    wait_for("the window's key to expire", || {
        let exists: bool = redis::cmd("EXISTS").arg(key).query(&mut con).unwrap();
        !exists
    });
}

/// The index of the breaker its fleet lets probe, once there is one: past
/// its open period (it reads half-open), with no probe out yet.
fn prober(breakers: &[Breaker]) -> usize {
    let mut found = None;
    wait_for("a process to win the probe lease", || {
        found = breakers
            .iter()
            .position(|b| b.state() == State::HalfOpen && b.would_permit());
        found.is_some()
    });
    found.unwrap()
}

#[test]
fn backoff_escalates_across_processes_when_each_failed_probe_is_anothers() {
    let redis = RedisServer::start();
    let mut con = redis_conn(&redis);
    let mut fleets: Vec<Fleet> = (0..3)
        .map(|_| fleet(&redis, "escalate").build().unwrap())
        .collect();
    // 100 ms, then 200, 400, 800 when the same process probes every time.
    let mut breakers: Vec<Breaker> = (0..3).map(|_| vendor(1, 100 * MS)).collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).unwrap();
    }
    wait_for("every agent to connect", || fleets.iter().all(connected));

    failure(&breakers[0]);
    wait_for("the trip to reach the fleet", || {
        stored(&mut con, "escalate").open
    });
    assert_eq!(stored(&mut con, "escalate").period, 100);

    for step in 1..=3u32 {
        // Whoever wins the lease probes and fails, then leaves the fleet:
        // the next probe is always another process's.
        let i = prober(&breakers);
        let (f, b) = (fleets.remove(i), breakers.remove(i));
        let before = stored(&mut con, "escalate").epoch;
        failure(&b);
        wait_for("the failed probe to re-open the fleet", || {
            stored(&mut con, "escalate").epoch > before
        });
        let s = stored(&mut con, "escalate");
        assert_eq!((s.open, s.step), (true, step), "after {step} failed probes");
        assert_eq!(s.period, 100 << step, "at step {step}");
        drop(f);
        if breakers.is_empty() {
            break;
        }
        // The others hold the fleet's step, ready to escalate from it.
        wait_for("the others to adopt the fleet's step", || {
            breakers.iter().all(|b| b.snapshot().backoff_step == step)
        });
    }
}

#[test]
fn a_fleet_close_resets_the_backoff_step() {
    let redis = RedisServer::start();
    let mut con = redis_conn(&redis);
    let fleets: Vec<Fleet> = (0..2)
        .map(|_| fleet(&redis, "reset").build().unwrap())
        .collect();
    let breakers: Vec<Breaker> = (0..2).map(|_| vendor(1, 100 * MS)).collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).unwrap();
    }
    wait_for("every agent to connect", || fleets.iter().all(connected));

    // A trip, a failed probe: step 1.
    failure(&breakers[0]);
    wait_for("the trip to reach the fleet", || {
        stored(&mut con, "reset").open
    });
    let i = prober(&breakers);
    let before = stored(&mut con, "reset").epoch;
    failure(&breakers[i]);
    wait_for("the failed probe to re-open the fleet", || {
        stored(&mut con, "reset").epoch > before
    });
    assert_eq!(stored(&mut con, "reset").step, 1);

    // The next probe succeeds: closed everywhere, at step 0.
    let i = prober(&breakers);
    succeed(&breakers[i]).expect("the probe goes and succeeds");
    wait_for("every process to close", || {
        breakers.iter().all(|b| b.state() == State::Closed)
    });
    let s = stored(&mut con, "reset");
    assert_eq!((s.open, s.step, s.period), (false, 0, 0));
    assert!(breakers.iter().all(|b| b.snapshot().backoff_step == 0));

    // A new outage starts from the first period, and its first failed
    // probe is step 1 again.
    let other = 1 - i;
    failure(&breakers[other]);
    wait_for("the new trip to reach the fleet", || {
        stored(&mut con, "reset").open
    });
    let s = stored(&mut con, "reset");
    assert_eq!((s.step, s.period), (0, 100));
    let i = prober(&breakers);
    let before = stored(&mut con, "reset").epoch;
    failure(&breakers[i]);
    wait_for("the failed probe to re-open the fleet", || {
        stored(&mut con, "reset").epoch > before
    });
    let s = stored(&mut con, "reset");
    assert_eq!((s.step, s.period), (1, 200));
}

#[test]
fn build_refuses_a_failure_window_without_a_threshold_or_too_short() {
    for (threshold, window) in [(0, SEC), (5, 9 * MS), (5, Duration::from_secs(86_401))] {
        let err = Fleet::builder("redis://127.0.0.1:1/")
            .failure_window(threshold, window)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "failure_window", "{threshold} in {window:?}");
    }
    assert!(Fleet::builder("redis://127.0.0.1:1/")
        .failure_window(1, 10 * MS)
        .build()
        .is_ok());
}
