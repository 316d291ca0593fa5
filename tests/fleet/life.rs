//! Fleet mode over a process's and a fleet's life, against a real
//! `redis-server` on a free loopback port: breakers that leave (dropped, or
//! by `Fleet::leave`) and join again under their name, the members of each
//! breaker, keys that expire once no process serves them, bounded audit
//! streams, and the operators' `forget` and typo guard.
//!
//! Local time comes from mock clocks that never move. The fleet's time is
//! the Redis server's: tests wait for it by polling, bounded by `PATIENCE`.
#![cfg(feature = "redis")]

use std::time::Duration;

use fusebox::fleet::{AuditKind, Fleet, FleetAdmin, FleetAdminError};
use fusebox::{Breaker, State};

use crate::support::breaker::{fail, quiet, MS, SEC};
use crate::support::fleet_kit::{connected, fleet, redis_conn, vendor};
use crate::support::redis_server::{wait_for, RedisServer};

fn admin(redis: &RedisServer, prefix: &str) -> FleetAdmin {
    Fleet::builder(redis.url())
        .prefix(prefix)
        .timeout(10 * SEC)
        .admin()
        .unwrap()
}

/// A breaker `name` that opens on its first failure, on a mock clock that
/// never moves.
fn breaker(name: &str) -> Breaker {
    let (b, _mock) = quiet(name);
    b.consecutive_failure_threshold(1)
        .open_duration(200 * MS)
        .max_probe_duration(60 * SEC)
        .build()
        .unwrap()
}

/// The keys under `prefix`, from `SCAN`.
fn keys(redis: &RedisServer, prefix: &str) -> Vec<String> {
    let mut con = redis_conn(redis);
    let iter: redis::Iter<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("MATCH")
        .arg(format!("{{{prefix}:*"))
        .arg("COUNT")
        .arg(1000)
        .clone()
        .iter(&mut con)
        .unwrap();
    iter.map(|k| k.unwrap()).collect()
}

fn pttl(redis: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut redis_conn(redis))
        .unwrap()
}

#[test]
fn a_dropped_breaker_leaves_its_fleet_and_a_new_one_of_its_name_joins() {
    let redis = RedisServer::start();
    let (fa, fb) = (
        fleet(&redis, "reload").build().unwrap(),
        fleet(&redis, "reload").build().unwrap(),
    );
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });
    let mut ops = admin(&redis, "reload");
    wait_for("two members", || ops.status("vendor").unwrap().members == 2);

    // A configuration reload: B's breaker is dropped, and a new one of the
    // same name joins.
    drop(b);
    wait_for("B's agent to stop serving it", || {
        fb.snapshot().breakers == 0
    });
    assert_eq!(ops.status("vendor").unwrap().members, 1, "B left at once");
    let reads = fb.snapshot().reads;
    std::thread::sleep(100 * MS); // five refreshes
    assert_eq!(fb.snapshot().reads, reads, "nothing read for it any more");

    let reloaded = vendor();
    fb.join(&reloaded).unwrap();
    wait_for("two members again", || {
        ops.status("vendor").unwrap().members == 2
    });
    assert!(fail(&a).is_err());
    wait_for("A's trip to reach the new breaker", || {
        reloaded.state() == State::Open
    });
}

#[test]
fn a_breaker_that_leaves_gives_back_its_lease_and_goes_on_alone() {
    let redis = RedisServer::start();
    // Leases that never run out, nor go back unused, within a test.
    let lasting = |f: fusebox::fleet::FleetBuilder| {
        f.probe_lease(600 * SEC)
            .lease_idle(300 * SEC)
            .build()
            .unwrap()
    };
    let fa = lasting(fleet(&redis, "leave"));
    let a = vendor();
    fa.join(&a).unwrap();
    wait_for("A's agent to connect", || connected(&fa));
    assert!(fail(&a).is_err());
    wait_for("A to win the lease", || fa.snapshot().leases_won == 1);

    let fb = lasting(fleet(&redis, "leave"));
    let b = vendor();
    fb.join(&b).unwrap();
    wait_for("B to be held open by the fleet", || {
        connected(&fb) && b.state() == State::Open
    });
    assert_eq!(fb.snapshot().leases_won, 0, "A holds the lease");

    assert!(fa.leave(&a));
    wait_for("B to take the lease A gave back", || {
        fb.snapshot().leases_won == 1
    });
    let status = admin(&redis, "leave").status("vendor").unwrap();
    assert_eq!(status.members, 1);
    // A goes on alone, let probe as it was: its agent writes nothing more.
    let published = fa.snapshot().published;
    assert!(a.try_acquire_owned().is_ok(), "A's own probe");
    assert_eq!(fa.snapshot().breakers, 0);
    assert_eq!(fa.snapshot().published, published);
}

#[test]
fn the_keys_of_a_breaker_nobody_serves_expire_after_the_idle_period() {
    let redis = RedisServer::start();
    let f = fleet(&redis, "idle")
        .presence(SEC)
        .idle_expiry(2 * SEC)
        .build()
        .unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    wait_for("the agent to connect", || connected(&f));
    assert!(fail(&b).is_err());
    wait_for("the trip to reach Redis", || {
        admin(&redis, "idle").status("vendor").unwrap().state != State::Closed
    });
    // While served, every key has an expiry, renewed at every read.
    for key in keys(&redis, "idle") {
        let ttl = pttl(&redis, &key);
        assert!(ttl > 0 && ttl <= 2_000, "{key}: {ttl} ms");
    }
    std::thread::sleep(3 * SEC); // beyond the idle period, served
    assert!(!keys(&redis, "idle").is_empty(), "renewed while served");

    drop(b);
    wait_for("the keys to expire", || keys(&redis, "idle").is_empty());
}

#[test]
fn a_thousand_breakers_joined_and_dropped_leave_the_agent_as_it_was() {
    const CHURN: usize = 1_000;
    let redis = RedisServer::start();
    let f = fleet(&redis, "churn").build().unwrap();
    let steady = vendor();
    f.join(&steady).unwrap();
    wait_for("the agent to connect", || connected(&f));
    let reads_in = |d: Duration| {
        let before = f.snapshot().reads;
        std::thread::sleep(d);
        f.snapshot().reads - before
    };
    let baseline = reads_in(SEC);

    let churned: Vec<Breaker> = (0..CHURN).map(|i| breaker(&format!("c{i}"))).collect();
    for b in &churned {
        f.join(b).unwrap();
    }
    wait_for("every breaker to be read", || {
        f.snapshot().breakers == CHURN + 1
            && admin(&redis, "churn").list().unwrap().len() == CHURN + 1
    });
    drop(churned);
    wait_for("the agent to serve one breaker again", || {
        f.snapshot().breakers == 1
    });
    let after = reads_in(SEC);
    println!("reads a second: {baseline} before the churn, {after} after");
    // The steady breaker alone is read (a refresh every 20 ms), give or take
    // a loaded machine's scheduling.
    assert!(after <= 2 * baseline + 10, "{after} against {baseline}");

    let left = keys(&redis, "churn");
    // -1: no expiry (-2 is a key gone since the scan).
    let immortal: Vec<&String> = left.iter().filter(|k| pttl(&redis, k) == -1).collect();
    println!(
        "{} keys left, {} without an expiry",
        left.len(),
        immortal.len()
    );
    assert!(immortal.is_empty(), "{immortal:?}");
    let served = admin(&redis, "churn").list().unwrap();
    let members: u64 = served.iter().map(|s| s.members).sum();
    assert_eq!(members, 1, "only the steady breaker has a member");
}

#[test]
fn audit_entries_older_than_the_age_are_dropped_at_the_next_write() {
    let redis = RedisServer::start();
    let mut ops = admin(&redis, "age");
    ops.create_unknown(true);
    // An entry from 1970: far older than the age.
    let _: String = redis::cmd("XADD")
        .arg("{age:vendor}:audit")
        .arg("1000-0")
        .arg("kind")
        .arg("reset")
        .arg("actor")
        .arg("ancient")
        .arg("reason")
        .arg("x")
        .arg("expires")
        .arg(0)
        .arg("time_us")
        .arg(1_000_000)
        .query(&mut redis_conn(&redis))
        .unwrap();
    ops.force_open("vendor", "alice", "one", None).unwrap();
    ops.reset("vendor", "bob", "two").unwrap();
    let actors: Vec<String> = ops
        .audit(Some("vendor"), 10)
        .unwrap()
        .into_iter()
        .map(|e| e.actor)
        .collect();
    assert_eq!(actors, ["alice", "bob"]);
    let ttl = pttl(&redis, "{age:vendor}:audit");
    let age = 90 * 24 * 3_600 * 1_000;
    assert!(ttl > age - 60_000 && ttl <= age, "{ttl}");
}

#[test]
fn an_override_of_a_name_no_process_has_written_is_refused_unless_created() {
    let redis = RedisServer::start();
    let f = fleet(&redis, "typo").build().unwrap();
    let b = breaker("corporate-actions");
    f.join(&b).unwrap();
    wait_for("the agent to connect", || connected(&f));
    let mut ops = admin(&redis, "typo");

    let err = ops
        .force_open("corporate-actoins", "alice", "vendor down", None)
        .unwrap_err();
    assert!(
        matches!(&err, FleetAdminError::Unknown(n) if n == "corporate-actoins"),
        "{err}"
    );
    assert!(keys(&redis, "typo").iter().all(|k| !k.contains("actoins")));
    assert!(ops.audit(Some("corporate-actoins"), 10).unwrap().is_empty());

    // The served name works, and a created one is written.
    ops.force_open("corporate-actions", "alice", "vendor down", None)
        .unwrap();
    wait_for("the override to reach the process", || {
        b.state() == State::ForcedOpen
    });
    ops.create_unknown(true)
        .force_open("new-vendor", "alice", "not live yet", None)
        .unwrap();
    assert_eq!(ops.status("new-vendor").unwrap().state, State::ForcedOpen);
    let ttl = pttl(&redis, "{typo:new-vendor}:state");
    assert!(ttl > 0, "a created breaker expires too: {ttl}");
}

#[test]
fn forget_refuses_a_served_breaker_unless_forced_and_is_audited() {
    let redis = RedisServer::start();
    let f = fleet(&redis, "forget").build().unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    wait_for("the agent to connect", || connected(&f));
    assert!(fail(&b).is_err());
    let mut ops = admin(&redis, "forget");
    wait_for("the trip to reach Redis", || {
        ops.status("vendor").unwrap().state != State::Closed
    });

    let err = ops.forget("vendor", "alice", "retired", false).unwrap_err();
    assert!(
        matches!(err, FleetAdminError::Served { members: 1, .. }),
        "{err}"
    );
    assert!(ops.status("vendor").unwrap().epoch > 0, "nothing deleted");

    // Forced: the keys go, the process reads the breaker afresh (closed),
    // and its agent writes it again at its next read.
    ops.forget("vendor", "alice", "clean slate", true).unwrap();
    wait_for("the process to follow the fleet, closed", || {
        b.state() == State::Closed
    });
    let audit = ops.audit(Some("vendor"), 10).unwrap();
    let last = audit.last().unwrap();
    assert_eq!(
        (last.kind, last.actor.as_str(), last.reason.as_str()),
        (AuditKind::Forget, "alice", "clean slate")
    );

    // Once nobody serves it, it is forgotten without force, and its audit
    // stream alone is left.
    drop(b);
    wait_for("no member", || ops.status("vendor").unwrap().members == 0);
    ops.forget("vendor", "alice", "retired", false).unwrap();
    assert_eq!(keys(&redis, "forget"), ["{forget:vendor}:audit"]);
    assert!(ops.list().unwrap().is_empty());
}

#[test]
fn members_count_the_agents_that_serve_a_breaker_and_a_dead_one_leaves_after_its_presence() {
    let redis = RedisServer::start();
    let f = fleet(&redis, "members").presence(SEC).build().unwrap();
    let b = vendor();
    f.join(&b).unwrap();
    let g = fleet(&redis, "members").presence(SEC).build().unwrap();
    let c = vendor();
    g.join(&c).unwrap();
    let mut ops = admin(&redis, "members");
    wait_for("two members", || ops.status("vendor").unwrap().members == 2);
    // An agent that stops renewing (a dropped fleet stops without a word,
    // as a killed process does) leaves the count after its presence.
    drop(g);
    wait_for("the silent member to leave the count", || {
        ops.status("vendor").unwrap().members == 1
    });
    assert_eq!(c.state(), State::Closed, "its breaker goes on alone");
    drop(f);
    wait_for("none", || ops.status("vendor").unwrap().members == 0);
}
