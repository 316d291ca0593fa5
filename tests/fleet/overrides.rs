//! Operator overrides in fleet mode, against a real `redis-server` on a free
//! loopback port: each `Fleet` is one agent, standing in for one process,
//! and a `FleetAdmin` is the operator's tool.
//!
//! Local time comes from mock clocks that never move, so a local override
//! with an expiry never ends by itself here: when one ends, the fleet ended
//! it. The fleet's time is the Redis server's: the tests wait for it by
//! polling, bounded by `PATIENCE`, and never assert on how long anything
//! took.
#![cfg(feature = "redis")]

use std::time::{Duration, Instant};

use fusebox::fleet::{AuditKind, Fleet, FleetAdmin, FleetAdminError};
use fusebox::{Breaker, ConfigError, Reason, State};

use crate::support::breaker::{fail, quiet, succeed, MS, SEC};
use crate::support::fleet_kit::{fleet, redis_conn};
use crate::support::redis_server::{wait_for, RedisServer, PATIENCE};

/// `n` agents (processes) under `prefix`, each with a breaker `vendor`
/// that opens on its first failure, for 200 ms of its mock clock.
fn processes(redis: &RedisServer, prefix: &str, n: usize) -> (Vec<Fleet>, Vec<Breaker>) {
    let fleets: Vec<Fleet> = (0..n)
        .map(|_| fleet(redis, prefix).build().unwrap())
        .collect();
    let breakers: Vec<Breaker> = (0..n)
        .map(|_| {
            let (b, _mock) = quiet("vendor");
            b.consecutive_failure_threshold(1)
                .open_duration(200 * MS)
                .max_probe_duration(60 * SEC)
                .build()
                .unwrap()
        })
        .collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).unwrap();
    }
    wait_for("every agent to connect and read", || {
        fleets.iter().all(|f| {
            let s = f.snapshot();
            s.connected && s.reads > 0
        })
    });
    (fleets, breakers)
}

fn admin(redis: &RedisServer, prefix: &str) -> FleetAdmin {
    Fleet::builder(redis.url())
        .prefix(prefix)
        .timeout(SEC)
        .admin()
        .unwrap()
}

fn all_in(breakers: &[Breaker], state: State) -> bool {
    breakers.iter().all(|b| b.snapshot().state == state)
}

fn last_reason(b: &Breaker) -> Reason {
    b.snapshot()
        .last_transition
        .expect("the breaker changed state")
        .reason
        .clone()
}

/// Waits until every agent has made two more round trips: each has
/// written what a local change asks of it (at its next round trip), and
/// read what was announced since.
fn every_agent_sweeps_again(fleets: &[Fleet]) {
    let rounds: Vec<u64> = fleets.iter().map(|f| f.snapshot().round_trips).collect();
    wait_for("every agent to make two more round trips", || {
        fleets
            .iter()
            .zip(&rounds)
            .all(|(f, r)| f.snapshot().round_trips >= r + 2)
    });
}

#[test]
fn a_fleet_override_reaches_every_process_with_its_actor_and_reason() {
    let redis = RedisServer::start();
    let (_fleets, breakers) = processes(&redis, "ovr", 3);
    let mut ops = admin(&redis, "ovr");

    let status = ops
        .force_open("vendor", "alice", "vendor maintenance", None)
        .unwrap();
    assert_eq!(status.state, State::ForcedOpen);
    wait_for("every process to be forced open", || {
        all_in(&breakers, State::ForcedOpen)
    });
    for b in &breakers {
        assert_eq!(
            last_reason(b),
            Reason::ForcedOpen {
                actor: "alice".into(),
                note: "vendor maintenance".into()
            }
        );
        assert!(succeed(b).unwrap_err().rejected().is_some());
        assert_eq!(b.snapshot().override_remaining, None, "no expiry");
    }

    ops.force_closed("vendor", "bob", "status page says green", Some(60 * SEC))
        .unwrap();
    wait_for("every process to be forced closed", || {
        all_in(&breakers, State::ForcedClosed)
    });
    for b in &breakers {
        assert_eq!(
            last_reason(b),
            Reason::ForcedClosed {
                actor: "bob".into(),
                note: "status page says green".into()
            }
        );
        let left = b.snapshot().override_remaining.expect("an expiry");
        assert!(left > Duration::ZERO && left <= 60 * SEC, "{left:?}");
        assert!(fail(b).is_err(), "the call fails, the breaker stays");
        assert_eq!(b.state(), State::ForcedClosed);
    }
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.state, State::ForcedClosed);
    let forced = status.forced.expect("an override in force");
    assert_eq!(
        (forced.actor.as_str(), forced.reason.as_str()),
        ("bob", "status page says green")
    );
    assert!(forced.expires_in.is_some_and(|d| d <= 60 * SEC));

    // A process that starts now gets the override at its first read.
    let (_late_fleet, late) = processes(&redis, "ovr", 1);
    wait_for("the new process to be forced closed", || {
        late[0].state() == State::ForcedClosed
    });
    assert_eq!(
        last_reason(&late[0]),
        Reason::ForcedClosed {
            actor: "bob".into(),
            note: "status page says green".into()
        }
    );
}

#[test]
fn an_expiring_override_ends_in_every_process_on_the_servers_clock() {
    let redis = RedisServer::start();
    let (_fleets, breakers) = processes(&redis, "expiry", 3);
    let mut ops = admin(&redis, "expiry");

    ops.force_open("vendor", "alice", "failover drill", Some(200 * MS))
        .unwrap();
    wait_for("every process to be forced open", || {
        all_in(&breakers, State::ForcedOpen)
    });
    // The local clocks never move: only the fleet can end the override.
    wait_for("the override to end in every process", || {
        all_in(&breakers, State::Closed)
    });
    for b in &breakers {
        assert_eq!(
            last_reason(b),
            Reason::Reset {
                actor: "fleet".into(),
                note: "the fleet's override expired".into()
            }
        );
        assert!(succeed(b).is_ok());
    }
    let status = ops.status("vendor").unwrap();
    assert_eq!((status.state, status.forced), (State::Closed, None));
    let kinds: Vec<AuditKind> = ops
        .audit(Some("vendor"), 10)
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [AuditKind::ForceOpen, AuditKind::Expired],
        "one expiry recorded"
    );
}

#[test]
fn a_reset_lifts_the_override_everywhere_and_closes_and_the_fleet_does_not_fight_it() {
    let redis = RedisServer::start();
    let (fleets, breakers) = processes(&redis, "reset", 3);
    let mut ops = admin(&redis, "reset");

    // A trip in one process opens the fleet.
    assert!(fail(&breakers[0]).is_err());
    let trip = wait_for("every process to open", || all_in(&breakers, State::Open));

    ops.force_closed("vendor", "alice", "known-good vendor", None)
        .unwrap();
    let forced = wait_for("every process to be forced closed", || {
        all_in(&breakers, State::ForcedClosed)
    });
    // Printed, never asserted: both travel by pub/sub and one read.
    println!("staleness: a trip reached every process in {trip:?}, an override in {forced:?}");
    let epoch = ops.status("vendor").unwrap().epoch;
    // Process 0's own operator resets its breaker, which then trips on its
    // own: the fleet's state does not change under the override.
    breakers[0].reset("carol", "local check");
    assert!(fail(&breakers[0]).is_err());
    assert_eq!(breakers[0].state(), State::Open);
    every_agent_sweeps_again(&fleets);
    every_agent_sweeps_again(&fleets);
    let status = ops.status("vendor").unwrap();
    assert_eq!((status.state, status.epoch), (State::ForcedClosed, epoch));
    assert_eq!(status.lease, None);
    let underlying: String = redis::cmd("HGET")
        .arg("{reset:vendor}:state")
        .arg("state")
        .query(&mut redis_conn(&redis))
        .unwrap();
    assert_eq!(underlying, "closed");
    assert!(all_in(&breakers[1..], State::ForcedClosed));
    assert_eq!(
        fleets.iter().map(|f| f.snapshot().leases_won).sum::<u64>(),
        0
    );

    let status = ops.reset("vendor", "bob", "vendor back").unwrap();
    assert_eq!((status.state, status.forced), (State::Closed, None));
    wait_for("every process to close", || {
        all_in(&breakers, State::Closed)
    });
    for b in &breakers {
        assert_eq!(
            last_reason(b),
            Reason::Reset {
                actor: "bob".into(),
                note: "vendor back".into()
            }
        );
    }
}

#[test]
fn a_reset_closes_a_breaker_the_fleet_holds_open() {
    let redis = RedisServer::start();
    let (_fleets, breakers) = processes(&redis, "reopen", 2);
    let mut ops = admin(&redis, "reopen");

    assert!(fail(&breakers[0]).is_err());
    wait_for("every process to open", || all_in(&breakers, State::Open));
    assert_eq!(ops.status("vendor").unwrap().state, State::Open);

    ops.reset("vendor", "bob", "vendor fixed").unwrap();
    wait_for("every process to close", || {
        all_in(&breakers, State::Closed)
    });
    assert_eq!(ops.status("vendor").unwrap().state, State::Closed);
    for b in &breakers {
        assert_eq!(
            last_reason(b),
            Reason::Reset {
                actor: "bob".into(),
                note: "vendor fixed".into()
            }
        );
        assert!(succeed(b).is_ok());
    }
}

#[test]
fn a_local_operators_later_override_is_not_undone_and_not_shared() {
    let redis = RedisServer::start();
    let (fleets, breakers) = processes(&redis, "local", 3);
    let mut ops = admin(&redis, "local");

    ops.force_open("vendor", "alice", "vendor down", None)
        .unwrap();
    wait_for("every process to be forced open", || {
        all_in(&breakers, State::ForcedOpen)
    });

    // Process 1's own operator closes its breaker, through its own API.
    breakers[1].force_closed("carol", "checking from this host");
    every_agent_sweeps_again(&fleets);
    assert_eq!(
        breakers[1].state(),
        State::ForcedClosed,
        "the agent does not re-apply"
    );
    let status = ops.status("vendor").unwrap();
    assert_eq!(
        status.state,
        State::ForcedOpen,
        "a local override stays local"
    );
    assert_eq!(status.forced.unwrap().actor, "alice");

    ops.reset("vendor", "bob", "vendor back").unwrap();
    wait_for("the other processes to close", || {
        breakers[0].state() == State::Closed && breakers[2].state() == State::Closed
    });
    every_agent_sweeps_again(&fleets);
    assert_eq!(breakers[1].state(), State::ForcedClosed);
    assert_eq!(
        last_reason(&breakers[1]),
        Reason::ForcedClosed {
            actor: "carol".into(),
            note: "checking from this host".into()
        }
    );
}

#[test]
fn the_audit_stream_holds_every_action_in_order() {
    let redis = RedisServer::start();
    let mut ops = admin(&redis, "audit");
    // No process serves these breakers.
    ops.create_unknown(true);

    ops.force_open("vendor", "alice", "one", None).unwrap();
    ops.force_closed("vendor", "bob", "two", Some(200 * MS))
        .unwrap();
    wait_for("the override to expire", || {
        ops.status("vendor").unwrap().forced.is_none()
    });
    ops.reset("vendor", "carol", "three").unwrap();
    ops.force_open("other", "dave", "four", Some(SEC)).unwrap();

    let entries = ops.audit(Some("vendor"), 10).unwrap();
    let seen: Vec<(AuditKind, &str, &str)> = entries
        .iter()
        .map(|e| (e.kind, e.actor.as_str(), e.reason.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (AuditKind::ForceOpen, "alice", "one"),
            (AuditKind::ForceClosed, "bob", "two"),
            (AuditKind::Expired, "bob", "two"),
            (AuditKind::Reset, "carol", "three"),
        ]
    );
    assert_eq!(entries[0].expires, None);
    let expires = entries[1].expires.expect("an expiry");
    assert!(expires > entries[1].time);
    assert!(entries[2].time >= expires, "noticed at or after the expiry");
    assert_eq!(entries[2].expires, Some(expires));
    assert!(entries.windows(2).all(|w| w[0].time <= w[1].time));

    // Every breaker's, merged in order; the last `count`.
    let all = ops.audit(None, 10).unwrap();
    assert_eq!(all.len(), 5);
    assert_eq!(
        (all[4].name.as_str(), all[4].kind),
        ("other", AuditKind::ForceOpen)
    );
    let last_two: Vec<String> = ops
        .audit(None, 2)
        .unwrap()
        .into_iter()
        .map(|e| e.actor)
        .collect();
    assert_eq!(last_two, ["carol", "dave"]);
}

#[test]
fn the_audit_stream_stays_bounded() {
    let redis = RedisServer::start();
    let mut ops = admin(&redis, "bounded");
    ops.create_unknown(true);
    for i in 0..1500 {
        ops.force_closed("vendor", "alice", &format!("action {i}"), None)
            .unwrap();
    }
    let len: u64 = redis::cmd("XLEN")
        .arg("{bounded:vendor}:audit")
        .query(&mut redis_conn(&redis))
        .unwrap();
    // `MAXLEN ~ 1000` trims whole nodes of 100 entries.
    assert!((1000..1100).contains(&len), "{len} entries");
    let last = ops.audit(Some("vendor"), 1).unwrap();
    assert_eq!(last[0].reason, "action 1499");
}

#[test]
fn list_and_status_show_each_breakers_fleet_state() {
    let redis = RedisServer::start();
    let (fleets, breakers) = processes(&redis, "list", 2);
    let mut ops = admin(&redis, "list");
    // A breaker under another prefix is not listed.
    admin(&redis, "lis")
        .create_unknown(true)
        .force_open("vendor", "x", "y", None)
        .unwrap();

    assert!(fail(&breakers[0]).is_err());
    wait_for("the trip to reach Redis", || {
        ops.status("vendor").unwrap().state == State::Open
    });
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.epoch, 1);
    assert!(status
        .open_for
        .is_some_and(|d| d > Duration::ZERO && d <= 200 * MS));
    // No process serves `quotes`.
    ops.create_unknown(true)
        .force_open("quotes", "alice", "vendor down", Some(60 * SEC))
        .unwrap();

    let listed = ops.list().unwrap();
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["quotes", "vendor"]);
    assert_eq!(listed[0].state, State::ForcedOpen);

    // After the cool-down one process holds the probe lease.
    wait_for("a lease to be won", || {
        fleets.iter().map(|f| f.snapshot().leases_won).sum::<u64>() == 1
    });
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.state, State::HalfOpen);
    let lease = status.lease.expect("a lease out");
    assert!(!lease.holder.is_empty());
    assert!(lease.expires_in > Duration::ZERO);
}

#[test]
fn watch_yields_each_change_with_the_state_before_it() {
    let redis = RedisServer::start();
    let (_fleets, breakers) = processes(&redis, "watch", 1);
    let mut ops = admin(&redis, "watch");
    let mut watch = ops.watch().unwrap();

    assert!(fail(&breakers[0]).is_err());
    let t = watch.next(Some(PATIENCE)).unwrap().expect("the trip");
    // The agent's first read wrote the breaker, closed.
    assert_eq!((t.from, t.status.state), (Some(State::Closed), State::Open));
    assert_eq!(t.status.name, "vendor");

    ops.force_open("vendor", "alice", "drill", None).unwrap();
    let t = watch.next(Some(PATIENCE)).unwrap().expect("the override");
    assert_eq!(
        (t.from, t.status.state),
        (Some(State::Open), State::ForcedOpen)
    );
    assert_eq!(t.status.forced.unwrap().actor, "alice");

    ops.reset("vendor", "bob", "done").unwrap();
    let t = watch.next(Some(PATIENCE)).unwrap().expect("the reset");
    assert_eq!(
        (t.from, t.status.state),
        (Some(State::ForcedOpen), State::Closed)
    );
    assert_eq!(watch.next(Some(50 * MS)).unwrap(), None, "nothing else");
}

#[test]
fn a_watch_left_unread_drops_and_counts_announcements_beyond_its_capacity() {
    let redis = RedisServer::start();
    let ops = admin(&redis, "flood");
    let mut watch = ops.watch().unwrap();
    let extra = 100;
    let n = 1_024 + extra; // what a watch holds before it drops

    let mut con = redis_conn(&redis);
    let mut pipe = redis::pipe();
    for _ in 0..n {
        pipe.cmd("PUBLISH")
            .arg("flood:fleet")
            .arg("vendor")
            .ignore();
    }
    let () = pipe.query(&mut con).unwrap();
    let start = Instant::now();
    while watch.missed() < extra as u64 {
        assert!(start.elapsed() < PATIENCE, "missed {}", watch.missed());
        std::thread::sleep(MS);
    }
    assert_eq!(watch.missed(), extra as u64);
    // What was kept is still read, and the watch goes on.
    let t = watch.next(Some(PATIENCE)).unwrap().expect("a kept one");
    assert_eq!(t.status.name, "vendor");
}

#[test]
fn bad_names_and_text_are_refused_before_anything_is_written() {
    let redis = RedisServer::start();
    let mut ops = admin(&redis, "bad");
    let field = |e: FleetAdminError| match e {
        FleetAdminError::Invalid(ConfigError::Invalid { field, .. }) => field,
        other => panic!("not an invalid argument: {other}"),
    };
    assert_eq!(
        field(ops.force_open("a`b", "alice", "x", None).unwrap_err()),
        "name"
    );
    assert_eq!(field(ops.status(&"n".repeat(33)).unwrap_err()), "name");
    assert_eq!(
        field(ops.force_open("vendor", "", "x", None).unwrap_err()),
        "actor"
    );
    assert_eq!(
        field(ops.reset("vendor", "alice\nroot", "x").unwrap_err()),
        "actor"
    );
    assert_eq!(
        field(
            ops.force_closed("vendor", "alice", &"x".repeat(513), None)
                .unwrap_err()
        ),
        "reason"
    );
    assert_eq!(
        field(
            ops.force_open("vendor", "alice", "x", Some(Duration::ZERO))
                .unwrap_err()
        ),
        "for"
    );
    assert_eq!(field(ops.audit(None, 0).unwrap_err()), "count");
    assert!(ops.list().unwrap().is_empty(), "nothing was written");
    assert!(ops.audit(None, 10).unwrap().is_empty());
}

#[test]
fn an_unreachable_redis_is_reported_at_once_without_the_password() {
    let redis = RedisServer::start();
    let port: u16 = redis
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    drop(redis);
    let url = format!("redis://ops:s3cret-pw@127.0.0.1:{port}/");
    let err = Fleet::builder(&url)
        .prefix("prod")
        .timeout(SEC)
        .admin()
        .unwrap_err();
    assert!(matches!(err, FleetAdminError::Unavailable(_)), "{err:?}");
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    let err = Fleet::builder("http://ops:s3cret-pw@host/")
        .prefix("prod")
        .timeout(SEC)
        .admin()
        .unwrap_err();
    assert!(matches!(err, FleetAdminError::Url), "{err:?}");
    assert!(!err.to_string().contains("s3cret"));
    let err = Fleet::builder(&url)
        .prefix("pr{od")
        .timeout(SEC)
        .admin()
        .unwrap_err();
    assert!(matches!(err, FleetAdminError::Invalid(_)), "{err:?}");
}

#[test]
fn a_local_reset_of_the_fleets_prober_stays_local() {
    let redis = RedisServer::start();
    let (fleets, breakers) = processes(&redis, "probe", 2);
    let mut ops = admin(&redis, "probe");

    assert!(fail(&breakers[0]).is_err());
    wait_for("a lease to be won", || {
        fleets.iter().map(|f| f.snapshot().leases_won).sum::<u64>() == 1
    });
    let prober = usize::from(fleets[1].snapshot().leases_won == 1);
    let probe = breakers[prober]
        .try_acquire_owned()
        .expect("the lease holder's breaker lets its probe go");
    assert_eq!(breakers[prober].state(), State::HalfOpen);

    // Its local operator resets it while the probe is out: the fleet is
    // not closed by that, the other process stays open.
    breakers[prober].reset("carol", "local check");
    every_agent_sweeps_again(&fleets);
    every_agent_sweeps_again(&fleets);
    let status = ops.status("vendor").unwrap();
    assert_eq!(
        status.state,
        State::HalfOpen,
        "the fleet still waits for its probe"
    );
    assert!(status.lease.is_some());
    assert_eq!(breakers[1 - prober].state(), State::Open);
    assert_eq!(fleets[prober].snapshot().published, u64::from(prober == 0));
    drop(probe);
}
