//! A probe lease its process does not use goes back to the fleet
//! (`FleetBuilder::lease_idle`), against a real `redis-server`: each
//! `Fleet` is one agent, standing in for one process.
//!
//! The probe lease lasts a minute here, far beyond `PATIENCE`: whatever
//! these tests see happen to the lease within `PATIENCE` is a give-back or
//! a take, never an expiry. Local time comes from mock clocks that move
//! only when a test moves them; the fleet's time is the Redis server's, and
//! the tests wait for it by polling, bounded by `PATIENCE`, never asserting
//! on how long anything took.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use fusebox::fleet::Fleet;
use fusebox::{Breaker, ConfigError, State};
use quanta::Mock;

use crate::support::breaker::{fail, quiet, succeed, MS, SEC};
use crate::support::fleet_kit::{connected, redis_conn};
use crate::support::redis_server::{wait_for, RedisServer, PATIENCE};

/// Far beyond `PATIENCE`: no lease expires during a test.
const LEASE: Duration = Duration::from_secs(120);

/// A fleet agent with short ticks, a two-minute lease, and a lease given
/// back after `idle` without a probe.
fn fleet(redis: &RedisServer, prefix: &str, idle: Duration) -> Fleet {
    Fleet::builder(redis.url())
        .prefix(prefix)
        // One process's trip opens the fleet (no quorum): these tests are
        // of the lease, in the periods one trip starts.
        .min_members(1)
        .member_ratio(0.0)
        .tick(2 * MS)
        .refresh(20 * MS)
        .hold_margin(SEC)
        .probe_lease(LEASE)
        .lease_idle(idle)
        .reconnect_backoff(5 * MS, 50 * MS)
        .build()
        .expect("valid fleet settings")
}

/// A breaker that opens on its first failure, for 200 ms, on a mock clock
/// that moves only when the test moves it.
fn vendor() -> (Breaker, Arc<Mock>) {
    let (b, mock) = quiet("vendor");
    let b = b
        .consecutive_failure_threshold(1)
        .open_duration(200 * MS)
        .max_probe_duration(60 * SEC)
        .build()
        .expect("valid configuration");
    (b, mock)
}

fn fleet_state(con: &mut redis::Connection, prefix: &str) -> (String, i64, u64) {
    let (state, epoch, leases): (Option<String>, Option<i64>, Option<u64>) = redis::cmd("HMGET")
        .arg(format!("{{{prefix}:vendor}}:state"))
        .arg("state")
        .arg("epoch")
        .arg("leases")
        .query(con)
        .unwrap();
    (
        state.unwrap_or_default(),
        epoch.unwrap_or(0),
        leases.unwrap_or(0),
    )
}

fn lease(con: &mut redis::Connection, prefix: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(format!("{{{prefix}:vendor}}:lease"))
        .query(con)
        .unwrap()
}

/// Waits until `f` has read the fleet's state `n` more times.
fn reads_more(f: &Fleet, n: u64) {
    let from = f.snapshot().reads;
    wait_for("more reads of the fleet's state", || {
        f.snapshot().reads >= from + n
    });
}

#[test]
fn an_idle_lease_holder_gives_the_lease_back_and_the_busy_process_probes_and_closes_the_fleet() {
    let redis = RedisServer::start();
    // A's process makes no call after its trip; A's agent, alone in the
    // fleet when the cool-down ends, wins the lease.
    let fa = fleet(&redis, "idle", 100 * MS);
    let (a, _ma) = vendor();
    fa.join(&a).unwrap();
    wait_for("A's agent to connect", || connected(&fa));
    assert!(fail(&a).is_err());
    wait_for("A's agent to win the lease", || {
        fa.snapshot().leases_won == 1
    });

    // B's process calls the vendor all the time: refused while A holds the
    // lease (a minute, without a give-back), a probe once B holds it.
    let fb = fleet(&redis, "idle", 100 * MS);
    let (b, _mb) = vendor();
    fb.join(&b).unwrap();
    wait_for("B to be held open by the fleet", || {
        b.state() == State::Open
    });
    wait_for("B's calls to probe and close the fleet", || {
        let _ = succeed(&b);
        b.state() == State::Closed
    });
    wait_for("A to follow the fleet, closed", || {
        a.state() == State::Closed
    });

    // B's agent counts its close when the answer comes back, which may be
    // after A has heard of it.
    wait_for("B's agent to count its close", || {
        fb.snapshot().published == 1
    });
    let (sa, sb) = (fa.snapshot(), fb.snapshot());
    assert_eq!((sa.leases_won, sa.leases_returned), (1, 1), "{sa:?}");
    assert_eq!((sb.leases_won, sb.leases_returned), (1, 0), "{sb:?}");
    assert_eq!(a.snapshot().totals.calls, 1, "A's process never probed");
    let mut con = redis_conn(&redis);
    let (state, _, leases) = fleet_state(&mut con, "idle");
    assert_eq!((state.to_string().as_str(), leases), ("closed", 2));
}

#[test]
fn an_agent_that_gave_the_lease_back_takes_it_again_only_when_its_breaker_refuses_a_call() {
    let redis = RedisServer::start();
    let fa = fleet(&redis, "again", 100 * MS);
    let (a, mock) = vendor();
    fa.join(&a).unwrap();
    wait_for("A's agent to connect", || connected(&fa));
    assert!(fail(&a).is_err());
    wait_for("A's agent to give its unused lease back", || {
        fa.snapshot().leases_returned == 1
    });

    // No demand: the lease stays free, read after read, and A's breaker
    // stays held open, even once its local hold would have ended (its
    // clock moves past it): it never probes without the lease.
    reads_more(&fa, 5);
    mock.increment(10 * LEASE);
    reads_more(&fa, 5);
    let mut con = redis_conn(&redis);
    assert_eq!(lease(&mut con, "again"), None, "the lease is free");
    let s = fa.snapshot();
    assert_eq!((s.leases_won, s.leases_returned), (1, 1), "{s:?}");
    assert!(!a.would_permit(), "held open while the lease is free");
    assert_eq!(a.state(), State::Open);
    assert_eq!(fleet_state(&mut con, "again").2, 1, "one lease issued");

    // A call, refused: demand. A takes the lease again and probes.
    assert!(succeed(&a).unwrap_err().rejected().is_some());
    wait_for("A's agent to take the lease again", || {
        fa.snapshot().leases_won == 2
    });
    wait_for("A's breaker to let its probe go", || a.would_permit());
    succeed(&a).unwrap();
    wait_for("the fleet to close", || {
        fleet_state(&mut con, "again").0 == "closed"
    });
    // A's agent counts its close when the answer comes back, which may be
    // after Redis reads closed.
    wait_for("A's agent to count its trip and close", || {
        fa.snapshot().published == 2
    });
}

#[test]
fn a_process_with_demand_gets_the_lease_after_every_agent_gave_it_back() {
    let redis = RedisServer::start();
    let (fa, fb) = (
        fleet(&redis, "demand", 100 * MS),
        fleet(&redis, "demand", 100 * MS),
    );
    let ((a, _ma), (b, _mb)) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });
    assert!(fail(&a).is_err());
    // Neither process calls: each agent takes the lease once and gives it
    // back, and then neither takes it again.
    wait_for("both agents to give the lease back", || {
        fa.snapshot().leases_returned == 1 && fb.snapshot().leases_returned == 1
    });
    reads_more(&fa, 5);
    reads_more(&fb, 5);
    let mut con = redis_conn(&redis);
    assert_eq!(lease(&mut con, "demand"), None);
    assert_eq!(fleet_state(&mut con, "demand").2, 2, "two leases issued");
    assert!(!a.would_permit() && !b.would_permit());

    // B's process calls: refused, and B's agent takes the lease at once.
    assert!(succeed(&b).unwrap_err().rejected().is_some());
    wait_for("B's agent to take the lease again", || {
        fb.snapshot().leases_won == 2
    });
    wait_for("B's breaker to let its probe go", || b.would_permit());
    assert!(!a.would_permit(), "A stays held open");
    succeed(&b).unwrap();
    wait_for("both breakers to close", || {
        a.state() == State::Closed && b.state() == State::Closed
    });
    assert_eq!(fa.snapshot().leases_won, 1);
}

#[test]
fn a_give_back_of_a_lease_of_an_older_period_changes_nothing() {
    let redis = RedisServer::start();
    // Refreshes a minute apart: A's agent does not read the fleet again
    // before its give-back, and gives back the token it holds.
    let fa = Fleet::builder(redis.url())
        .prefix("stale")
        // Its trip opens the fleet at once: a rule that counts members
        // would judge it only after a `presence` of four refreshes here.
        .min_members(1)
        .member_ratio(0.0)
        .tick(2 * MS)
        .refresh(LEASE)
        .probe_lease(LEASE)
        .lease_idle(3 * SEC)
        .build()
        .unwrap();
    let (a, _ma) = vendor();
    fa.join(&a).unwrap();
    wait_for("A's agent to connect", || connected(&fa));
    assert!(fail(&a).is_err());
    wait_for("A's agent to win the lease", || {
        fa.snapshot().leases_won == 1
    });
    let mut con = redis_conn(&redis);
    let token = lease(&mut con, "stale").expect("A's lease");
    assert!(a.would_permit(), "A's breaker may probe under the lease");

    // The fleet moves to another open period, unannounced: A's token (the
    // lease key is left as it was) no longer names the current one.
    let _: i64 = redis::cmd("HINCRBY")
        .arg("{stale:vendor}:state")
        .arg("epoch")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let before = fleet_state(&mut con, "stale");

    // A's process makes no call: its agent holds its breaker open again
    // and gives back its now stale lease, which the fence refuses.
    wait_for("A's agent to hold its breaker open again", || {
        !a.would_permit()
    });
    // An announcement makes A's agent read at its next tick, after the
    // give-back's answer.
    let reads = fa.snapshot().reads;
    let _: i64 = redis::cmd("PUBLISH")
        .arg("stale:fleet")
        .arg("vendor")
        .query(&mut con)
        .unwrap();
    wait_for("A's agent to read after its give-back", || {
        fa.snapshot().reads > reads
    });
    assert_eq!(fa.snapshot().leases_returned, 0, "refused by the fence");
    assert_eq!(lease(&mut con, "stale"), Some(token), "the lease stays");
    assert_eq!(fleet_state(&mut con, "stale"), before);
    assert_eq!(a.state(), State::Open);
}

#[test]
fn build_refuses_a_lease_idle_of_zero_or_not_below_the_probe_lease() {
    let builder = || Fleet::builder("redis://127.0.0.1:1/");
    for (lease, idle) in [
        (5 * SEC, Duration::ZERO),
        (5 * SEC, 5 * SEC),
        (SEC, 2 * SEC),
    ] {
        let err = builder()
            .probe_lease(lease)
            .lease_idle(idle)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    field: "lease_idle",
                    ..
                }
            ),
            "{err}"
        );
    }
    // The default fits any lease: 500 ms, or half a shorter lease.
    for lease in [MS * 2, 100 * MS, 5 * SEC] {
        assert!(builder().probe_lease(lease).build().is_ok());
    }
    assert!(builder()
        .probe_lease(SEC)
        .lease_idle(999 * MS)
        .build()
        .is_ok());
    // PATIENCE bounds every wait above; a lease outlasts it.
    assert!(LEASE > PATIENCE);
}
