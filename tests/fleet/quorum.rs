//! The fleet's quorum, against a real `redis-server` on a free loopback
//! port, with one `Fleet` (agent) per member standing for one process: a
//! member's local trip alone opens only its own breaker, which probes for
//! itself; the fleet opens when enough members trip within the quorum
//! window, or when the recent-failures window reaches its threshold; an
//! operator's override still reaches every member at once; a member that
//! stops renewing its presence leaves the count.
//!
//! Local time comes from mock clocks, moved only where a test says so. The
//! fleet's time is the Redis server's: tests wait for it by polling,
//! bounded by `PATIENCE`, and mark "later" by counting the agents' reads,
//! never by how long anything took.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use fusebox::fleet::{Fleet, FleetAdmin, FleetBuilder, OpenedBy};
use fusebox::{Breaker, ConfigError, Reason, State};

use crate::support::breaker::{fail, quiet, succeed, MS, SEC};
use crate::support::fleet_kit::{connected, quorum_fleet, redis_conn};
use crate::support::redis_server::{wait_for, RedisServer};

/// A breaker `vendor` that opens on its first failure for 200 ms of its
/// mock clock, and the clock's handle.
fn vendor() -> (Breaker, Arc<quanta::Mock>) {
    vendor_open(200 * MS)
}

/// As [`vendor`], open for `open` (which is also the fleet's open period
/// when its trip opens the fleet).
fn vendor_open(open: Duration) -> (Breaker, Arc<quanta::Mock>) {
    let (b, mock) = quiet("vendor");
    let b = b
        .consecutive_failure_threshold(1)
        .open_duration(open)
        .max_probe_duration(60 * SEC)
        .build()
        .expect("valid configuration");
    (b, mock)
}

struct Member {
    fleet: Fleet,
    breaker: Breaker,
    clock: Arc<quanta::Mock>,
}

/// `n` members under `prefix`, each built by `build`, every one connected
/// and counted among the breaker's members.
fn members(
    redis: &RedisServer,
    prefix: &str,
    n: usize,
    build: impl Fn(FleetBuilder) -> FleetBuilder,
) -> Vec<Member> {
    members_open(redis, prefix, n, 200 * MS, build)
}

/// As [`members`], with breakers open for `open` when they trip.
fn members_open(
    redis: &RedisServer,
    prefix: &str,
    n: usize,
    open: Duration,
    build: impl Fn(FleetBuilder) -> FleetBuilder,
) -> Vec<Member> {
    let all: Vec<Member> = (0..n)
        .map(|_| {
            let fleet = build(quorum_fleet(redis, prefix)).build().unwrap();
            let (breaker, clock) = vendor_open(open);
            fleet.join(&breaker).unwrap();
            Member {
                fleet,
                breaker,
                clock,
            }
        })
        .collect();
    wait_for("every agent to connect", || {
        all.iter().all(|m| connected(&m.fleet))
    });
    let mut ops = admin(redis, prefix);
    wait_for("every member to be counted", || {
        ops.status("vendor").unwrap().members == n as u64
    });
    // A session's trips are judged once it is `presence` old (a second
    // here): while nothing happens, an agent makes at most two round trips
    // a sweep (its renewals, its heartbeat), a sweep every 20 ms refresh,
    // so 160 round trips take at least 80 sweeps, a second and a half.
    wait_for("every agent's session to settle", || {
        all.iter().all(|m| m.fleet.snapshot().round_trips >= 160)
    });
    all
}

fn admin(redis: &RedisServer, prefix: &str) -> FleetAdmin {
    Fleet::builder(redis.url())
        .prefix(prefix)
        .timeout(10 * SEC)
        .admin()
        .unwrap()
}

/// Waits until `fleet`'s agent has read the fleet `n` more times.
fn reads_more(fleet: &Fleet, n: u64) {
    let from = fleet.snapshot().reads;
    wait_for("more reads", || fleet.snapshot().reads >= from + n);
}

/// Waits until `fleet`'s agent has made `n` more round trips: with nothing
/// in motion it reads nothing, but sweeps every refresh, and would apply a
/// view that changed.
fn rounds_more(fleet: &Fleet, n: u64) {
    let from = fleet.snapshot().round_trips;
    wait_for("more round trips", || {
        fleet.snapshot().round_trips >= from + n
    });
}

/// Calls that reached the vendor (its closure ran) out of `n`.
fn calls_made(b: &Breaker, n: u32) -> u32 {
    let mut made = 0;
    for _ in 0..n {
        let _ = b.call(|| {
            made += 1;
            Ok::<_, std::io::Error>(())
        });
    }
    made
}

/// Each of `m` calls its vendor once a round until every one's agent has
/// made `rounds` more round trips (bounded by `PATIENCE`): the calls that
/// reached the vendor, out of those tried.
fn calls_while_agents_sweep(m: &[Member], rounds: u64) -> (u32, u32) {
    let from: Vec<u64> = m.iter().map(|x| x.fleet.snapshot().round_trips).collect();
    let (mut tried, mut made) = (0u32, 0u32);
    wait_for("the agents to sweep again", || {
        for x in m {
            tried += 1;
            made += calls_made(&x.breaker, 1);
        }
        m.iter()
            .zip(&from)
            .all(|(x, r)| x.fleet.snapshot().round_trips >= r + rounds)
    });
    (made, tried)
}

fn leases_issued(redis: &RedisServer, prefix: &str) -> i64 {
    let leases: Option<i64> = redis::cmd("HGET")
        .arg(format!("{{{prefix}:vendor}}:state"))
        .arg("leases")
        .query(&mut redis_conn(redis))
        .unwrap();
    leases.unwrap_or(0)
}

/// Once the fleet's open period ends on the server's clock: one lease, one
/// member let probe (every other refuses), whose success closes the fleet
/// everywhere. Leases must outlast the test.
fn one_probe_closes_every_member(m: &[Member]) {
    // The open period ends on the server's clock: one lease, one member let
    // probe, whose success closes the fleet everywhere.
    wait_for("one agent to win the lease", || {
        m.iter().map(|x| x.fleet.snapshot().leases_won).sum::<u64>() == 1
    });
    for x in m {
        reads_more(&x.fleet, 3);
        // Each local clock moves past its own open period: only the lease
        // decides who may probe.
        x.clock.increment(SEC);
    }
    let winners: Vec<&Member> = m
        .iter()
        .filter(|x| x.fleet.snapshot().leases_won == 1)
        .collect();
    assert_eq!(winners.len(), 1);
    for x in m {
        if x.fleet.snapshot().leases_won == 0 {
            assert_eq!(calls_made(&x.breaker, 5), 0, "only the holder probes");
        }
    }
    assert!(succeed(&winners[0].breaker).is_ok(), "the fleet's probe");
    wait_for("the close to reach every member", || {
        m.iter().all(|x| x.breaker.state() == State::Closed)
    });
}

#[test]
fn one_members_trip_among_three_opens_only_its_own_breaker() {
    let redis = RedisServer::start();
    let m = members(&redis, "one-sick", 3, |b| b);
    let mut ops = admin(&redis, "one-sick");

    // Member 0's own closure fails (its host is sick); the vendor is fine.
    assert!(fail(&m[0].breaker).is_err());
    assert_eq!(m[0].breaker.state(), State::Open);
    wait_for("the lone trip to be written", || {
        m[0].fleet.snapshot().lone_trips == 1
    });
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.state, State::Closed, "{status:?}");
    assert_eq!((status.members, status.tripped), (3, 1), "{status:?}");
    assert_eq!(status.opened_by, None);

    // Every agent sweeps several times after the trip: the other two stay
    // closed and call the vendor, the sick one stays open.
    for x in &m {
        rounds_more(&x.fleet, 5);
    }
    for x in &m[1..] {
        assert_eq!(x.breaker.state(), State::Closed);
        assert_eq!(calls_made(&x.breaker, 20), 20, "the vendor is called");
    }
    assert_eq!(m[0].breaker.state(), State::Open, "its own trip holds");
    assert_eq!(
        calls_made(&m[0].breaker, 20),
        0,
        "its own calls are refused"
    );
    assert_eq!(ops.status("vendor").unwrap().state, State::Closed);
    assert_eq!(leases_issued(&redis, "one-sick"), 0);

    // Each agent's snapshot shows the breaker as it last read it: the sick
    // one at its trip's answer; a healthy one before the trip, which was
    // not announced (its next read, at most a keep-alive later, counts
    // it).
    let seen = |f: &Fleet| f.snapshot().quorum;
    let sick = seen(&m[0].fleet);
    assert_eq!(sick.len(), 1);
    let (q, healthy) = (&sick[0], &seen(&m[1].fleet)[0]);
    assert_eq!(q.name, "vendor");
    assert_eq!(
        (q.members, q.tripped, q.opened_by, q.alone),
        (3, 1, None, true)
    );
    assert_eq!((healthy.tripped, healthy.alone), (0, false));
}

/// The scenario: one member of five whose own calls all fail (its
/// host is sick; the vendor is fine) opens only itself, and the four
/// others keep calling the vendor; three of five open all five, with one
/// probe. Prints the healthy members' calls and the time from the third
/// trip to every member open (not asserted: a figure for docs/fleet.md).
#[test]
fn one_sick_member_of_five_opens_only_itself_and_three_open_all_five() {
    let redis = RedisServer::start();
    let m = members(&redis, "five", 5, |b| {
        b.probe_lease(600 * SEC).lease_idle(300 * SEC)
    });
    let mut ops = admin(&redis, "five");

    assert!(fail(&m[0].breaker).is_err());
    wait_for("the lone trip to be written", || {
        m[0].fleet.snapshot().lone_trips == 1
    });
    // The healthy four call the vendor while each of their agents makes 25
    // more round trips (a quarter to half a second of 20 ms sweeps).
    let (made, tried) = calls_while_agents_sweep(&m[1..], 25);
    assert_eq!(
        made, tried,
        "every call of the healthy four reached the vendor"
    );
    assert_eq!(
        calls_made(&m[0].breaker, 10),
        0,
        "the sick one refuses its own"
    );
    assert!(m[1..].iter().all(|x| x.breaker.state() == State::Closed));
    assert_eq!(ops.status("vendor").unwrap().tripped, 1);
    eprintln!("one sick member of five: the healthy four made {made} of {tried} calls");

    // A second member trips: two of five is under half.
    assert!(fail(&m[1].breaker).is_err());
    wait_for("the second lone trip", || {
        m[1].fleet.snapshot().lone_trips == 1
    });
    for x in &m[2..] {
        rounds_more(&x.fleet, 3);
        assert_eq!(x.breaker.state(), State::Closed);
    }
    // A third: the quorum.
    let third = std::time::Instant::now();
    assert!(fail(&m[2].breaker).is_err());
    wait_for("every member to open", || {
        m[3..].iter().all(|x| x.breaker.state() == State::Open)
    });
    eprintln!(
        "three of five: every member open {:?} after the third trip",
        third.elapsed()
    );
    assert_eq!(
        ops.status("vendor").unwrap().opened_by,
        Some(OpenedBy::Quorum)
    );
    one_probe_closes_every_member(&m);
    assert_eq!(leases_issued(&redis, "five"), 1);
}

/// Today's rule kept on purpose (`min_members(1)`, `member_ratio(0.0)`):
/// the one sick member's trip opens the other four, which refuse their
/// calls to a healthy vendor. Prints the calls they made, beside the
/// figure above.
#[test]
fn with_any_member_tripping_one_sick_member_stops_the_other_four() {
    let redis = RedisServer::start();
    // An open period longer than the test: no probe closes it meanwhile.
    let m = members_open(&redis, "any", 5, 120 * SEC, |b| {
        b.min_members(1)
            .member_ratio(0.0)
            .probe_lease(600 * SEC)
            .lease_idle(300 * SEC)
    });
    assert!(fail(&m[0].breaker).is_err());
    wait_for("the other four to open", || {
        m[1..].iter().all(|x| x.breaker.state() == State::Open)
    });
    let (made, tried) = calls_while_agents_sweep(&m[1..], 25);
    assert_eq!(made, 0, "the healthy four refuse every call");
    assert_eq!(m[0].fleet.snapshot().lone_trips, 0);
    eprintln!("any member trips: the healthy four made {made} of {tried} calls");
}

#[test]
fn two_of_three_members_tripped_open_the_fleet_with_one_probe() {
    let redis = RedisServer::start();
    // Leases that neither run out nor go back unused within the test.
    let m = members(&redis, "two-of-three", 3, |b| {
        b.probe_lease(600 * SEC).lease_idle(300 * SEC)
    });
    let mut ops = admin(&redis, "two-of-three");

    assert!(fail(&m[0].breaker).is_err());
    wait_for("the first trip to be written", || {
        ops.status("vendor").unwrap().tripped == 1
    });
    assert_eq!(m[2].breaker.state(), State::Closed);
    assert!(fail(&m[1].breaker).is_err());
    wait_for("the quorum to open the third member", || {
        m[2].breaker.state() == State::Open
    });
    let last = m[2].breaker.snapshot().last_transition.unwrap();
    assert_eq!(last.reason, Reason::Fleet);
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.opened_by, Some(OpenedBy::Quorum), "{status:?}");
    assert_eq!(status.tripped, 0, "a new period starts the count afresh");
    wait_for("the first member's snapshot to show the fleet open", || {
        let q = &m[0].fleet.snapshot().quorum[0];
        q.opened_by == Some(OpenedBy::Quorum) && !q.alone
    });
    assert_eq!(m[0].fleet.snapshot().lone_trips, 1);
    assert_eq!(m[1].fleet.snapshot().lone_trips, 0);

    one_probe_closes_every_member(&m);
    assert_eq!(leases_issued(&redis, "two-of-three"), 1);
    assert_eq!(ops.status("vendor").unwrap().state, State::Closed);
}

#[test]
fn a_fleet_of_one_opens_at_its_first_trip_with_the_defaults() {
    let redis = RedisServer::start();
    let m = members(&redis, "alone", 1, |b| b);
    let mut ops = admin(&redis, "alone");
    assert!(fail(&m[0].breaker).is_err());
    wait_for("the fleet to open", || {
        ops.status("vendor").unwrap().state != State::Closed
    });
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.opened_by, Some(OpenedBy::Quorum), "{status:?}");
    assert_eq!(m[0].fleet.snapshot().lone_trips, 0);

    // A process that starts now follows the fleet, as before quorums.
    let late = quorum_fleet(&redis, "alone").build().unwrap();
    let (b, _clock) = vendor();
    late.join(&b).unwrap();
    wait_for("the new member to be held open", || {
        b.state() == State::Open
    });
}

#[test]
fn the_failure_window_opens_the_fleet_without_a_quorum() {
    let redis = RedisServer::start();
    let m = members(&redis, "window", 3, |b| b.failure_window(4, 10 * SEC));
    let mut ops = admin(&redis, "window");
    // Breakers that never trip on their own: only the window opens them.
    let quiet_breakers: Vec<Breaker> = m
        .iter()
        .map(|x| {
            let (b, _) = quiet("quiet-vendor");
            let b = b
                .consecutive_failure_threshold(100)
                .open_duration(SEC)
                .build()
                .unwrap();
            x.fleet.join(&b).unwrap();
            b
        })
        .collect();
    for b in &quiet_breakers[..2] {
        for _ in 0..2 {
            assert!(fail(b).is_err());
        }
    }
    wait_for("the window to open the third member", || {
        quiet_breakers[2].state() == State::Open
    });
    let status = ops.status("quiet-vendor").unwrap();
    assert_eq!(
        status.opened_by,
        Some(OpenedBy::FailureWindow),
        "{status:?}"
    );
    assert!(m.iter().all(|x| x.fleet.snapshot().lone_trips == 0));
}

#[test]
fn an_operators_force_open_still_reaches_every_member_at_once() {
    let redis = RedisServer::start();
    let m = members(&redis, "ops", 3, |b| b);
    let mut ops = admin(&redis, "ops");
    ops.force_open("vendor", "alice", "vendor maintenance", None)
        .unwrap();
    wait_for("every member to be forced open", || {
        m.iter().all(|x| x.breaker.state() == State::ForcedOpen)
    });
    let status = ops.status("vendor").unwrap();
    assert_eq!(status.opened_by, Some(OpenedBy::Operator), "{status:?}");
    ops.reset("vendor", "alice", "done").unwrap();
    wait_for("every member to be closed", || {
        m.iter().all(|x| x.breaker.state() == State::Closed)
    });
    assert_eq!(ops.status("vendor").unwrap().opened_by, None);
}

#[test]
fn a_member_tripped_alone_probes_for_itself_and_its_flapping_leaves_the_fleet_closed() {
    let redis = RedisServer::start();
    let m = members(&redis, "flap", 3, |b| b);
    let mut ops = admin(&redis, "flap");
    let epoch = ops.status("vendor").unwrap().epoch;
    let sick = &m[0];

    // It flaps: trips, and each probe of its own fails, three times.
    assert!(fail(&sick.breaker).is_err());
    wait_for("the lone trip", || sick.fleet.snapshot().lone_trips == 1);
    for _ in 0..3 {
        rounds_more(&sick.fleet, 3);
        assert_eq!(sick.breaker.state(), State::Open, "the fleet left it open");
        sick.clock.increment(10 * SEC); // past its own open period
        assert!(fail(&sick.breaker).is_err(), "its own probe, failing");
        assert_eq!(sick.breaker.state(), State::Open);
    }
    for x in &m[1..] {
        rounds_more(&x.fleet, 3);
        assert_eq!(x.breaker.state(), State::Closed);
        assert_eq!(calls_made(&x.breaker, 5), 5);
    }
    let status = ops.status("vendor").unwrap();
    assert_eq!((status.state, status.epoch), (State::Closed, epoch));
    assert_eq!(status.tripped, 1);

    // Its probe succeeds: it closes on its own, and no longer counts.
    rounds_more(&sick.fleet, 3);
    sick.clock.increment(60 * SEC);
    assert!(succeed(&sick.breaker).is_ok(), "its own probe");
    assert_eq!(sick.breaker.state(), State::Closed);
    wait_for("its trip to stop counting", || {
        ops.status("vendor").unwrap().tripped == 0
    });
    assert_eq!(leases_issued(&redis, "flap"), 0, "it held no fleet lease");
    assert_eq!(ops.status("vendor").unwrap().epoch, epoch);
    assert_eq!(sick.fleet.snapshot().lone_trips, 1, "one lone outage");
}

#[test]
fn a_member_that_stops_renewing_leaves_the_count_with_its_trip() {
    let redis = RedisServer::start();
    let short = |b: FleetBuilder| b.presence(300 * MS);
    let mut m = members(&redis, "killed", 3, short);
    let mut ops = admin(&redis, "killed");

    assert!(fail(&m[0].breaker).is_err());
    wait_for("the first trip to count", || {
        ops.status("vendor").unwrap().tripped == 1
    });
    // Its process dies: its agent stops and its presence runs out.
    let dead = m.remove(0);
    drop(dead.fleet);
    wait_for("the dead member to leave the count", || {
        let s = ops.status("vendor").unwrap();
        s.members == 2 && s.tripped == 0
    });

    // One more trip: one of the two live members, not a quorum, though two
    // members have tripped within the window.
    assert!(fail(&m[0].breaker).is_err());
    wait_for("the second lone trip", || {
        m[0].fleet.snapshot().lone_trips == 1
    });
    rounds_more(&m[1].fleet, 5);
    assert_eq!(m[1].breaker.state(), State::Closed);
    let status = ops.status("vendor").unwrap();
    assert_eq!((status.state, status.tripped), (State::Closed, 1));

    // A member rejoins and trips: two of three live members, the quorum.
    let fleet = short(quorum_fleet(&redis, "killed")).build().unwrap();
    let (breaker, _clock) = vendor();
    fleet.join(&breaker).unwrap();
    wait_for("three members", || {
        ops.status("vendor").unwrap().members == 3
    });
    assert!(fail(&breaker).is_err());
    wait_for("the quorum to open the last member", || {
        m[1].breaker.state() == State::Open
    });
}

/// Members come and go while the fleet is open: one leaves (and goes on
/// alone), one joins and is held open; the fleet still issues one lease,
/// and the probe's success closes every member that serves it.
#[test]
fn members_that_join_and_leave_in_an_open_period_keep_one_probe() {
    let redis = RedisServer::start();
    // A five-second open period: the comings and goings fall inside it,
    // even on a busy machine.
    let mut m = members_open(&redis, "churn", 3, 5 * SEC, |b| {
        b.probe_lease(600 * SEC).lease_idle(300 * SEC)
    });
    let mut ops = admin(&redis, "churn");
    assert!(fail(&m[0].breaker).is_err());
    assert!(fail(&m[1].breaker).is_err());
    wait_for("the quorum to open the third member", || {
        m[2].breaker.state() == State::Open
    });
    let gone = m.remove(2);
    assert!(gone.fleet.leave(&gone.breaker));
    // The agent writes the leave at its next round trip, not at the call.
    wait_for("the member that left to leave the count", || {
        ops.status("vendor").unwrap().members == 2
    });
    let fleet = quorum_fleet(&redis, "churn")
        .probe_lease(600 * SEC)
        .lease_idle(300 * SEC)
        .build()
        .unwrap();
    let (breaker, clock) = vendor_open(5 * SEC);
    fleet.join(&breaker).unwrap();
    wait_for("the new member to be held open", || {
        breaker.state() == State::Open
    });
    m.push(Member {
        fleet,
        breaker,
        clock,
    });
    wait_for("two stayed, one joined", || {
        ops.status("vendor").unwrap().members == 3
    });
    let status = ops.status("vendor").unwrap();
    assert_ne!(status.state, State::Closed, "{status:?}");
    one_probe_closes_every_member(&m);
    assert_eq!(leases_issued(&redis, "churn"), 1);
    assert_eq!(gone.fleet.snapshot().leases_won, 0);
}

/// Redis restarted empty: the members key is gone, and the first agent back
/// would be a fleet of one. Its trip, written again at reconnection, is
/// only recorded until its session is `presence` old; by then the others
/// are back, and one trip of three is no quorum.
#[test]
fn after_redis_restarted_empty_the_first_member_back_does_not_open_the_fleet_alone() {
    let mut redis = RedisServer::start();
    let m: Vec<Member> = (0..3)
        .map(|i| {
            // Member 0 reconnects within 50 ms, the others after 400 ms.
            let backoff = if i == 0 { 5 * MS } else { 400 * MS };
            let fleet = quorum_fleet(&redis, "restart")
                .reconnect_backoff(backoff, backoff.max(50 * MS))
                .build()
                .unwrap();
            let (breaker, clock) = vendor();
            fleet.join(&breaker).unwrap();
            Member {
                fleet,
                breaker,
                clock,
            }
        })
        .collect();
    wait_for("every agent to connect", || {
        m.iter().all(|x| connected(&x.fleet))
    });
    redis.kill();
    wait_for("every agent to count the outage", || {
        m.iter().all(|x| x.fleet.snapshot().outages >= 1)
    });
    assert!(fail(&m[0].breaker).is_err(), "a trip on local state");
    redis.restart();
    wait_for("every agent back", || {
        m.iter().all(|x| x.fleet.snapshot().connected)
    });
    wait_for("the trip to be judged, with no quorum", || {
        m[0].fleet.snapshot().lone_trips == 1
    });
    for x in &m[1..] {
        rounds_more(&x.fleet, 5);
        assert_eq!(x.breaker.state(), State::Closed);
    }
    let status = admin(&redis, "restart").status("vendor").unwrap();
    assert_eq!(
        (status.state, status.members, status.tripped),
        (State::Closed, 3, 1),
        "{status:?}"
    );
}

/// The same restart with one member: once its session is settled, its
/// trip is judged, and a fleet of one opens at it.
#[test]
fn after_redis_restarted_empty_a_fleet_of_one_opens_at_its_trip_once_settled() {
    let mut redis = RedisServer::start();
    let m = members(&redis, "restart-one", 1, |b| b);
    redis.kill();
    wait_for("the outage", || m[0].fleet.snapshot().outages >= 1);
    assert!(fail(&m[0].breaker).is_err(), "a trip on local state");
    redis.restart();
    let mut ops = admin(&redis, "restart-one");
    wait_for("the fleet to open", || {
        ops.status("vendor").unwrap().opened_by == Some(OpenedBy::Quorum)
    });
    assert_eq!(m[0].fleet.snapshot().lone_trips, 0);
}

/// A configuration reload: a process's breaker is dropped, a new one of its
/// name joins and trips at once, before its agent has read the fleet for
/// it. The agent is held inside a round trip by a slow Redis (`DEBUG
/// SLEEP`) while that happens, so its next round trip carries both the
/// join's read and the trip. The trip finds no quorum (two members): the
/// breaker stays open on its own trip, and the fleet's closed view, read in
/// the same round trip, does not close it.
///
/// The agents read nothing on their own for a minute: the only round trip
/// is the one the dropped breaker asks for, begun while Redis sleeps.
#[test]
fn a_breaker_that_trips_before_its_first_read_stays_open_on_its_own_trip() {
    let redis = RedisServer::start();
    let agent = || {
        quorum_fleet(&redis, "reload")
            .tick(60 * SEC)
            .refresh(60 * SEC)
            .presence(120 * SEC)
            // Longer than the sleep: the agent waits Redis out, as for a
            // slow answer, rather than counting an outage (whose
            // reconnection would read the trip afresh).
            .timeout(60 * SEC)
            .build()
            .unwrap()
    };
    let (fa, fb) = (agent(), agent());
    let (old, _) = vendor();
    let (other, _) = vendor();
    fa.join(&old).unwrap();
    fb.join(&other).unwrap();
    let mut ops = admin(&redis, "reload");
    wait_for("both members to be counted", || {
        connected(&fa) && connected(&fb) && ops.status("vendor").unwrap().members == 2
    });
    let (fresh, _clock) = vendor_open(20 * SEC);
    let changes = fresh.subscribe(16).unwrap();

    let sleeper = {
        let url = redis.url();
        std::thread::spawn(move || {
            let mut con = redis::Client::open(url)
                .and_then(|c| c.get_connection())
                .expect("connect to the test redis");
            redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(SLEEP_S)
                .query::<()>(&mut con)
                .expect("DEBUG SLEEP (the server allows DEBUG from loopback)");
        })
    };
    let mut probe = redis_conn(&redis);
    probe.set_read_timeout(Some(50 * MS)).unwrap();
    wait_for("Redis to sleep", || {
        redis::cmd("PING").query::<String>(&mut probe).is_err()
    });
    // The dropped breaker wakes the agent, whose round trip (its last
    // write) now waits for the sleep to end.
    let begun = fa.snapshot().round_trips;
    drop(old);
    wait_for("the agent to begin a round trip", || {
        fa.snapshot().round_trips > begun
    });
    fa.join(&fresh).unwrap();
    assert!(fail(&fresh).is_err());
    assert_eq!(fresh.state(), State::Open);
    assert!(
        fa.snapshot().round_trips == begun + 1 && !sleeper.is_finished(),
        "the join and the trip came while the agent waited for Redis"
    );
    sleeper.join().unwrap();

    wait_for("the agent to read its trip's answer", || {
        fa.snapshot().quorum.first().is_some_and(|q| q.alone)
    });
    let seen: Vec<_> = std::iter::from_fn(|| changes.try_recv())
        .map(|c| (c.from, c.to, c.reason == Reason::Fleet))
        .collect();
    assert_eq!(
        seen,
        [(State::Closed, State::Open, false)],
        "only its own trip"
    );
    assert_eq!(fresh.state(), State::Open, "open on its own trip");
    let status = ops.status("vendor").unwrap();
    assert_eq!((status.state, status.tripped), (State::Closed, 1));
}

/// How long `DEBUG SLEEP` holds Redis, in seconds: long beside the agents'
/// 20 ms refresh and a loaded machine's scheduling.
const SLEEP_S: u32 = 2;

#[test]
fn build_refuses_a_quorum_it_cannot_apply_naming_the_field() {
    let refused = |b: FleetBuilder, field: &str| match b.build() {
        Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field),
        other => panic!("{field}: {other:?}"),
    };
    let b = || Fleet::builder("redis://127.0.0.1:1/");
    refused(b().min_members(0), "min_members");
    for ratio in [f64::NAN, -0.1, 1.5, f64::INFINITY] {
        refused(b().member_ratio(ratio), "member_ratio");
    }
    refused(b().quorum_window(Duration::ZERO), "quorum_window");
    refused(b().quorum_window(25 * 3_600 * SEC), "quorum_window");
    assert!(b().min_members(1).member_ratio(0.0).build().is_ok());
    assert!(b().min_members(5).member_ratio(1.0).build().is_ok());
}
