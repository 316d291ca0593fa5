//! Fleet mode against a real `redis-server` on a free loopback port: each
//! `Fleet` is one agent, standing in for one process.
//!
//! Local time comes from mock clocks that never move, so every local open
//! period ends only when the fleet says so. The fleet's time is the Redis
//! server's, which is real: the tests wait for it by polling, bounded by
//! `PATIENCE`, and never assert on how long anything took.
#![cfg(feature = "redis")]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use fusebox::fleet::{Fleet, FleetSnapshot};
use fusebox::{Breaker, ConfigError, Reason, State, Verdict};

use crate::support::breaker::{fail, quiet, succeed, MS, SEC};
use crate::support::fleet_kit::{connected, fleet, redis_conn, vendor};
use crate::support::redis_server::{wait_for, RedisServer, PATIENCE};

#[test]
fn a_trip_in_one_process_opens_the_breaker_in_the_other_through_pub_sub() {
    let redis = RedisServer::start();
    // Refreshes are a minute apart: only the announcement can arrive in time.
    let slow_refresh = |f: fusebox::fleet::FleetBuilder| f.refresh(60 * SEC).build().unwrap();
    let (fa, fb) = (
        slow_refresh(fleet(&redis, "trip")),
        slow_refresh(fleet(&redis, "trip")),
    );
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });
    let changes = b.subscribe(16).unwrap();

    assert!(fail(&a).is_err());
    assert_eq!(a.state(), State::Open);
    let took = wait_for("the other process to open", || b.state() == State::Open);
    println!("staleness: B opened {took:?} after A tripped");

    // The change is delivered to subscribers just after the new state shows.
    let mut change = None;
    wait_for("B's change to reach its subscriber", || {
        change = changes.try_recv();
        change.is_some()
    });
    let change = change.expect("B's breaker changed state");
    assert_eq!((change.from, change.to), (State::Closed, State::Open));
    assert_eq!(change.reason, Reason::Fleet);
    let refused = succeed(&b).unwrap_err();
    assert_eq!(refused.rejected().expect("refused").state(), State::Open);
    wait_for("A's agent to count its write", || {
        fa.snapshot().published == 1
    });
    assert!(fb.snapshot().messages >= 1);
}

#[test]
fn exactly_one_of_many_racers_wins_the_probe_lease_when_the_cool_down_ends() {
    const RACERS: usize = 8;
    let redis = RedisServer::start();
    let fleets: Vec<Fleet> = (0..RACERS)
        // Exclusivity is under test: the holder keeps its unused lease.
        .map(|_| {
            fleet(&redis, "race")
                .probe_lease(600 * SEC)
                .lease_idle(300 * SEC)
                .build()
                .unwrap()
        })
        .collect();
    let breakers: Vec<Breaker> = (0..RACERS).map(|_| vendor()).collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).unwrap();
    }
    wait_for("every agent to connect", || fleets.iter().all(connected));

    assert!(fail(&breakers[0]).is_err());
    wait_for("every racer to open", || {
        breakers.iter().all(|b| b.state() == State::Open)
    });
    let won = || fleets.iter().map(|f| f.snapshot().leases_won).sum::<u64>();
    wait_for("the cool-down to end and a lease to be won", || won() >= 1);

    // Every agent reads the fleet's state twice more after that: each had
    // its chance at the lease.
    let reads: Vec<u64> = fleets.iter().map(|f| f.snapshot().reads).collect();
    wait_for("every agent to read the fleet again", || {
        fleets
            .iter()
            .zip(&reads)
            .all(|(f, r)| f.snapshot().reads >= r + 2)
    });
    assert_eq!(won(), 1, "one lease for the fleet");
    let issued: u64 = redis::cmd("HGET")
        .arg("{race:vendor}:state")
        .arg("leases")
        .query(&mut redis_conn(&redis))
        .unwrap();
    assert_eq!(issued, 1, "one lease issued in Redis");

    // And exactly one of the racers' callers, all at once, probes.
    let barrier = Arc::new(Barrier::new(RACERS));
    let admitted: usize = breakers
        .iter()
        .map(|b| {
            let (b, barrier) = (b.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                b.try_acquire_owned().is_ok()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| usize::from(t.join().unwrap()))
        .sum();
    assert_eq!(admitted, 1, "one probe in the fleet");
}

#[test]
fn a_stale_probers_success_is_fenced_off() {
    let redis = RedisServer::start();
    // A's lease runs out a second after A wins it, its probe still out (an
    // agent whose probe is out never gives its lease back). B's lasts a
    // minute: B probes under it however slow the machine.
    let fa = fleet(&redis, "fence")
        .probe_lease(SEC)
        .lease_idle(999 * MS)
        .build()
        .unwrap();
    let a = vendor();
    fa.join(&a).unwrap();
    wait_for("A's agent to connect", || connected(&fa));

    // A trips, wins the lease after the cool-down, and its probe goes out.
    assert!(fail(&a).is_err());
    wait_for("A to win the lease", || fa.snapshot().leases_won == 1);
    let stale_probe = a
        .try_acquire_owned()
        .expect("A's breaker lets its probe go");
    assert_eq!(a.state(), State::HalfOpen);

    // A's lease runs out; B takes the next one, probes, and fails.
    let fb = fleet(&redis, "fence")
        .probe_lease(60 * SEC)
        .lease_idle(30 * SEC)
        .build()
        .unwrap();
    let b = vendor();
    fb.join(&b).unwrap();
    wait_for("B to win the lease", || fb.snapshot().leases_won == 1);
    assert!(fail(&b).is_err());
    wait_for("B's failed probe to re-open the fleet", || {
        fb.snapshot().published == 1
    });

    // A's probe answers late, with a success: fenced off, and A follows
    // the fleet, open again.
    stale_probe.record(Verdict::Success);
    wait_for("A's close to be fenced off", || fa.snapshot().fenced == 1);
    wait_for("A to be held open by the fleet", || {
        a.state() == State::Open
    });
    assert_eq!(fa.snapshot().published, 1, "A's trip only");
    assert_eq!(b.state(), State::Open);
    let state: String = redis::cmd("HGET")
        .arg("{fence:vendor}:state")
        .arg("state")
        .query(&mut redis_conn(&redis))
        .unwrap();
    assert_eq!(state, "open");
}

#[test]
fn calls_run_on_local_state_while_redis_is_down_and_sharing_resumes_when_it_returns() {
    let mut redis = RedisServer::start();
    let (fa, fb) = (
        fleet(&redis, "outage").build().unwrap(),
        fleet(&redis, "outage").build().unwrap(),
    );
    let (a, b) = (vendor(), vendor());
    fa.join(&a).unwrap();
    fb.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&fa) && connected(&fb)
    });

    redis.kill();
    let down = |f: &Fleet| {
        let s = f.snapshot();
        !s.connected && s.outages == 1
    };
    wait_for("both agents to see the outage", || down(&fa) && down(&fb));

    // Local state: successes, a trip, refusals; nothing shared.
    for _ in 0..1_000 {
        succeed(&a).unwrap();
        succeed(&b).unwrap();
    }
    assert!(fail(&a).is_err());
    assert_eq!(
        succeed(&a).unwrap_err().rejected().unwrap().state(),
        State::Open
    );
    assert_eq!(b.state(), State::Closed);
    assert_eq!(a.snapshot().totals.successes, 1_000);

    // Several reconnection attempts fail, and still one outage each.
    let errors = fa.snapshot().errors;
    wait_for("a few failed reconnections", || {
        fa.snapshot().errors >= errors + 3
    });
    assert_eq!(fa.snapshot().outages, 1);

    redis.restart();
    wait_for("both agents to reconnect", || {
        fa.snapshot().connected && fb.snapshot().connected
    });
    wait_for("A's trip to reach B", || b.state() == State::Open);
    assert_eq!(b.snapshot().last_transition.unwrap().reason, Reason::Fleet);
    // A's agent counts its write when the answer comes back, which may be
    // after B has heard of it.
    wait_for("A's agent to count its write", || {
        fa.snapshot().published == 1
    });
    let s: FleetSnapshot = fa.snapshot();
    assert_eq!((s.outages, s.published), (1, 1));
}

#[test]
fn build_refuses_a_bad_url_or_prefix_without_showing_the_url() {
    let err = Fleet::builder("http://user:s3cret@host/")
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "url");
    assert!(!err.to_string().contains("s3cret"), "{err}");
    for prefix in ["", "a{b", "a b"] {
        let err = Fleet::builder("redis://127.0.0.1:1/")
            .prefix(prefix)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid {
                    field: "prefix",
                    ..
                }
            ),
            "{err}"
        );
    }
    let err = Fleet::builder("redis://127.0.0.1:1/")
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "timeout");
}

#[test]
fn a_second_live_breaker_of_the_same_name_cannot_join_one_fleet() {
    let f = Fleet::builder("redis://127.0.0.1:1/").build().unwrap();
    let first = vendor();
    f.join(&first).unwrap();
    assert_eq!(f.join(&vendor()).unwrap_err().field(), "breaker");
    assert_eq!(f.join(&first).unwrap_err().field(), "breaker", "twice");
    // Once it has left, or is dropped, its name is free.
    assert!(f.leave(&first));
    assert!(!f.leave(&first), "left already");
    let second = vendor();
    f.join(&second).unwrap();
    assert!(!f.leave(&first), "another breaker of the name");
    drop(second);
    f.join(&vendor()).unwrap();
}

#[test]
fn a_hung_redis_never_stalls_a_caller_and_counts_as_one_outage() {
    let redis = RedisServer::start();
    // One agent that would wait a minute for Redis, one that gives up
    // after 50 ms.
    let patient = fleet(&redis, "hung").timeout(60 * SEC).build().unwrap();
    let brisk = fleet(&redis, "hung").timeout(50 * MS).build().unwrap();
    let (a, b) = (vendor(), vendor());
    patient.join(&a).unwrap();
    brisk.join(&b).unwrap();
    wait_for("both agents to connect", || {
        connected(&patient) && connected(&brisk)
    });

    redis.pause();
    // Every kind of call, on a trading thread, while the patient agent is
    // stuck on Redis: had any of them waited on Redis, it would still be
    // waiting a minute from now.
    let (done, finished) = crossbeam_channel::bounded(1);
    let caller = {
        let a = a.clone();
        std::thread::spawn(move || {
            for _ in 0..1_000 {
                succeed(&a).unwrap();
            }
            assert!(fail(&a).unwrap_err().rejected().is_none(), "a failure");
            for _ in 0..1_000 {
                assert!(succeed(&a).unwrap_err().rejected().is_some(), "a refusal");
            }
            done.send(()).unwrap();
        })
    };
    finished
        .recv_timeout(PATIENCE)
        .expect("calls finished while Redis hung");
    caller.join().unwrap();
    assert_eq!(a.snapshot().totals.short_circuits, 1_000);

    let down = wait_for("the brisk agent to give up on Redis", || {
        brisk.snapshot().outages == 1
    });
    println!("outage seen after {down:?}");
    assert!(!brisk.snapshot().connected);
    assert!(patient.snapshot().connected, "still waiting on its answer");

    redis.resume();
    wait_for("the brisk agent to reconnect", || {
        brisk.snapshot().connected
    });
    wait_for("A's trip to reach B", || b.state() == State::Open);
    assert_eq!(brisk.snapshot().outages, 1);
}

#[test]
fn a_hundred_races_of_twenty_agents_each_issue_exactly_one_lease() {
    const AGENTS: usize = 20;
    const RACES: usize = 100;
    let redis = RedisServer::start();
    let fleets: Vec<Fleet> = (0..AGENTS)
        .map(|_| {
            // Exclusivity is under test: the holders keep their unused
            // leases, and no lease runs out however slow the machine.
            fleet(&redis, "races")
                .refresh(100 * MS)
                .probe_lease(600 * SEC)
                .lease_idle(300 * SEC)
                .build()
                .unwrap()
        })
        .collect();
    // One breaker per race and agent: race `r` is breaker `vendor-r`.
    let breakers: Vec<Vec<Breaker>> = fleets
        .iter()
        .map(|f| {
            (0..RACES)
                .map(|r| {
                    let (b, _mock) = quiet(&format!("vendor-{r}"));
                    let b = b
                        .consecutive_failure_threshold(1)
                        .open_duration(300 * MS)
                        .max_probe_duration(60 * SEC)
                        .build()
                        .unwrap();
                    f.join(&b).unwrap();
                    b
                })
                .collect()
        })
        .collect();
    wait_for("every agent to connect", || fleets.iter().all(connected));

    let reads: Vec<u64> = fleets.iter().map(|f| f.snapshot().reads).collect();
    for b in &breakers[0] {
        assert!(fail(b).is_err());
    }
    // Nothing closes them before the races end, but a winner's breaker is
    // let probe (half-open) once its race is won: on a loaded machine that
    // may come before the last breaker opens.
    wait_for("every breaker of every agent to open", || {
        breakers
            .iter()
            .flatten()
            .all(|b| b.state() != State::Closed)
    });
    let mut con = redis_conn(&redis);
    let mut issued = |r: usize| -> Option<u64> {
        redis::cmd("HGET")
            .arg(format!("{{races:vendor-{r}}}:state"))
            .arg("leases")
            .query(&mut con)
            .unwrap()
    };
    wait_for("every race to issue a lease", || {
        (0..RACES).all(|r| issued(r).is_some())
    });
    // Each agent reads every breaker at least twice after the trips (the
    // announced open period, and its end): every agent has had its chance
    // in the races.
    wait_for("every agent to read every breaker twice more", || {
        fleets
            .iter()
            .zip(&reads)
            .all(|(f, r)| f.snapshot().reads >= r + 2 * RACES as u64)
    });
    for r in 0..RACES {
        assert_eq!(issued(r), Some(1), "race {r}");
        let permitting = breakers.iter().filter(|bs| bs[r].would_permit()).count();
        assert_eq!(permitting, 1, "race {r}: one agent lets a call probe");
    }
    let won: u64 = fleets.iter().map(|f| f.snapshot().leases_won).sum();
    assert_eq!(won, RACES as u64);
}
