//! Fleet mode on a Redis that fails over, against real servers on
//! loopback: a master, a replica and three sentinels (`Fleet::sentinel_builder`),
//! and a Cluster of three masters with a replica each
//! (`Fleet::cluster_builder`). In the middle of an open period the master
//! that holds the breaker's keys is killed (SIGKILL), and its replica takes
//! over. Through it: callers never wait, the fleet's view resumes, at most
//! one extra probe, and the override the new master holds stays in force.
//!
//! The breakers run on the real clock here (an outage longer than their
//! hold would let each probe on its own, which the count of probes would
//! show). Waits are bounded by `PATIENCE`; the figures printed are the
//! ones `docs/fleet.md` reports.
#![cfg(feature = "redis")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fusebox::fleet::{Fleet, FleetAdmin, FleetBuilder};
use fusebox::{Breaker, CallPath, Classifier, Reason, State};

use crate::support::breaker::{MS, SEC};
use crate::support::redis_server::{cli_at, wait_for, RedisCluster, RedisSentinels, SERVICE};

const PROCESSES: usize = 3;
/// The fleet's open period: the failover happens within it.
const OPEN: Duration = Duration::from_secs(12);

/// A breaker `name` on the real clock: opens on its first failure, for
/// [`OPEN`].
fn breaker(name: &str) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(1)
        .failure_rate_threshold(None)
        .open_duration(OPEN)
        .max_open_duration(OPEN)
        .max_probe_duration(60 * SEC)
        .build()
        .unwrap()
}

/// What the test's callers saw.
#[derive(Default)]
struct Calls {
    /// The vendor answers (once the failover is over).
    vendor_up: AtomicBool,
    /// The longest call, in microseconds.
    worst_us: AtomicU64,
    stop: AtomicBool,
}

/// One caller thread per breaker, calling it every 2 ms and timing each
/// call.
fn callers(breakers: &[Breaker], calls: &Arc<Calls>) -> Vec<std::thread::JoinHandle<()>> {
    breakers
        .iter()
        .map(|b| {
            let (b, calls) = (b.clone(), Arc::clone(calls));
            std::thread::spawn(move || {
                while !calls.stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let _ = b.call(|| {
                        if calls.vendor_up.load(Ordering::Relaxed) {
                            Ok(())
                        } else {
                            Err(std::io::Error::other("vendor down"))
                        }
                    });
                    let us = t.elapsed().as_micros() as u64;
                    calls.worst_us.fetch_max(us, Ordering::Relaxed);
                    std::thread::sleep(2 * MS);
                }
            })
        })
        .collect()
}

/// Probes the local breakers let go since `sub` was made: open to
/// half-open on a call, not by the fleet's hand.
fn probes(subs: &[fusebox::Subscription]) -> usize {
    let mut n = 0;
    for sub in subs {
        while let Some(c) = sub.try_recv() {
            if c.from == State::Open && c.to == State::HalfOpen && c.reason != Reason::Fleet {
                n += 1;
            }
        }
    }
    n
}

/// Quick agents: a 2 ms tick, a 20 ms refresh, a quick reconnection.
fn quick(b: FleetBuilder, prefix: &str) -> Fleet {
    b.prefix(prefix)
        // One process's trip opens the fleet (no quorum): the test is of the
        // open period and its probe through a failover.
        .min_members(1)
        .member_ratio(0.0)
        .tick(2 * MS)
        .refresh(20 * MS)
        .reconnect_backoff(5 * MS, 100 * MS)
        .build()
        .unwrap()
}

/// Waits until every replica of the master at `port` has all it had been
/// sent when this was called.
fn wait_for_replicas(port: u16) {
    let (sent, _) = offsets(port);
    wait_for("the replicas to have every write", || {
        let (_, replicas) = offsets(port);
        !replicas.is_empty() && replicas.iter().all(|&o| o >= sent)
    });
}

/// The master's replication offset, and each replica's.
fn offsets(port: u16) -> (u64, Vec<u64>) {
    let info = cli_at(port, &["INFO", "replication"]);
    let field = |line: &str, key: &str| {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let master = info
        .lines()
        .find_map(|l| field(l, "master_repl_offset:"))
        .expect("a master's offset");
    let replicas: Vec<u64> = info
        .lines()
        .filter(|l| l.starts_with("slave"))
        .filter_map(|l| field(l.split_once(':')?.1, "offset="))
        .collect();
    (master, replicas)
}

/// The failover scenario, on agents made by `fleet` and an operator's
/// `admin`: `fail_over` kills the master that holds the keys of `vendor`
/// and of `ovr` (the breaker an operator forces open) once its replica has
/// all of them, and returns once the replica has taken over.
fn through_a_failover(
    what: &str,
    ovr: &str,
    fleet: impl Fn() -> Fleet,
    mut admin: FleetAdmin,
    fail_over: impl FnOnce() -> Instant,
) {
    let fleets: Vec<Fleet> = (0..PROCESSES).map(|_| fleet()).collect();
    let breakers: Vec<Breaker> = (0..PROCESSES).map(|_| breaker("vendor")).collect();
    let forced: Vec<Breaker> = (0..PROCESSES).map(|_| breaker(ovr)).collect();
    for (f, (b, o)) in fleets.iter().zip(breakers.iter().zip(&forced)) {
        f.join(b).unwrap();
        f.join(o).unwrap();
    }
    wait_for("every agent to connect", || {
        fleets.iter().all(|f| f.snapshot().connected)
    });
    wait_for("every agent to serve both breakers", || {
        admin.status("vendor").unwrap().members == PROCESSES as u64
            && admin.status(ovr).unwrap().members == PROCESSES as u64
    });
    admin.force_open(ovr, "alice", "drill", None).unwrap();
    wait_for("the override to reach every process", || {
        forced.iter().all(|b| b.state() == State::ForcedOpen)
    });

    let calls = Arc::new(Calls::default());
    let subs: Vec<_> = breakers
        .iter()
        .map(|b| b.subscribe(1024).unwrap())
        .collect();
    let threads = callers(&breakers, &calls);
    wait_for("the trip to open every process", || {
        breakers.iter().all(|b| b.state() == State::Open)
    });
    probes(&subs);
    let outages: Vec<u64> = fleets.iter().map(|f| f.snapshot().outages).collect();

    // In the middle of the open period.
    std::thread::sleep(SEC);
    let reads: Vec<u64> = fleets.iter().map(|f| f.snapshot().reads).collect();
    let killed = fail_over();
    let resumed = |f: &Fleet, before: u64| {
        let s = f.snapshot();
        s.connected && s.outages > before
    };
    wait_for("every agent to reconnect to the new master", || {
        fleets.iter().zip(&outages).all(|(f, &o)| resumed(f, o))
    });
    // A new session reads each of its two breakers afresh.
    wait_for("every agent to read the fleet again", || {
        fleets
            .iter()
            .zip(&reads)
            .all(|(f, &r)| f.snapshot().reads >= r + 2)
    });
    let failover = killed.elapsed();
    let during = probes(&subs);
    assert!(
        breakers.iter().all(|b| b.state() == State::Open),
        "held open through the failover"
    );
    assert!(
        forced.iter().all(|b| b.state() == State::ForcedOpen),
        "the override stands"
    );
    // The operator's connection to the old master failed: its next call
    // connects to the new one.
    let mut status = None;
    wait_for("the operator to read the new master", || {
        status = admin.status(ovr).ok();
        status.is_some()
    });
    let status = status.unwrap();
    assert_eq!(status.state, State::ForcedOpen, "the new master holds it");

    // The vendor is back: the open period ends with one probe, and its
    // success closes every process.
    calls.vendor_up.store(true, Ordering::Relaxed);
    wait_for("the fleet's probe to close every process", || {
        breakers.iter().all(|b| b.state() == State::Closed)
    });
    let after = probes(&subs);
    calls.stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let worst = Duration::from_micros(calls.worst_us.load(Ordering::Relaxed));
    println!(
        "{what}: failover (kill to every agent reading the new master) {failover:?}; \
         probes during it {during}, after it {after}; worst call {worst:?}"
    );
    assert_eq!(
        during, 0,
        "no process probed on its own during the failover"
    );
    assert!(
        (1..=2).contains(&after),
        "one probe, at most one extra: {after}"
    );
    // A caller that waited on Redis would have waited through the
    // failover, seconds; a preempted thread on a loaded machine, tens of
    // milliseconds, rarely hundreds.
    assert!(worst < SEC, "a call took {worst:?}");

    // The fleet view works on the new master: an operator's reset reaches
    // every process.
    admin.reset(ovr, "alice", "drill over").unwrap();
    wait_for("the reset to reach every process", || {
        forced.iter().all(|b| b.state() == State::Closed)
    });
}

#[test]
fn through_a_sentinel_failover_in_an_open_period_callers_never_wait_and_the_fleet_resumes() {
    let mut group = RedisSentinels::start();
    let urls = group.urls();
    let builder = || Fleet::sentinel_builder(SERVICE, urls.clone());
    let admin = builder().prefix("sf").admin().unwrap();
    let old = group.master.port();
    through_a_failover(
        "sentinel",
        "ovr",
        || quick(builder(), "sf"),
        admin,
        || {
            wait_for_replicas(old);
            let killed = Instant::now();
            group.master.kill();
            wait_for("the sentinels to promote the replica", || {
                group.master_port().is_some_and(|p| p != old)
            });
            killed
        },
    );
}

#[test]
fn through_a_cluster_failover_in_an_open_period_callers_never_wait_and_the_fleet_resumes() {
    let mut cluster = RedisCluster::start();
    let urls = cluster.urls();
    let builder = || Fleet::cluster_builder(urls.clone());
    // Both breakers' keys on one master: the one killed.
    let master = cluster.master_of("{cf:vendor}:state").expect("a master");
    let ovr = (0..)
        .map(|i| format!("ovr{i}"))
        .find(|n| cluster.master_of(&format!("{{cf:{n}}}:state")) == Some(master))
        .unwrap();
    let admin = builder().prefix("cf").admin().unwrap();
    through_a_failover(
        "cluster",
        &ovr,
        || quick(builder(), "cf"),
        admin,
        || {
            wait_for_replicas(master);
            let killed = Instant::now();
            cluster.kill(master);
            wait_for("a replica to take over the slots", || {
                cluster
                    .master_of("{cf:vendor}:state")
                    .is_some_and(|m| m != master)
            });
            killed
        },
    );
}

#[test]
fn list_covers_every_master_of_a_cluster() {
    let cluster = RedisCluster::start();
    let mut admin = Fleet::cluster_builder(cluster.urls())
        .prefix("cl")
        .admin()
        .unwrap();
    admin.create_unknown(true);
    let names: Vec<String> = (0..30).map(|i| format!("b{i}")).collect();
    for n in &names {
        admin.force_open(n, "alice", "spread", None).unwrap();
    }
    let masters: std::collections::BTreeSet<u16> = names
        .iter()
        .filter_map(|n| cluster.master_of(&format!("{{cl:{n}}}:state")))
        .collect();
    assert_eq!(masters.len(), 3, "the names spread over every master");
    let mut listed: Vec<String> = admin.list().unwrap().into_iter().map(|s| s.name).collect();
    listed.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(admin.audit(None, 100).unwrap().len(), 30);
}
