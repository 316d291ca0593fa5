//! What fleet mode costs a trading thread, and how stale a process's view
//! of the fleet gets, against a real `redis-server` on loopback, in one run:
//!
//! 1. **Caller cost**: a closed success, a refusal and a recorded failure
//!    on a breaker joined to a fleet against the same call on a breaker
//!    alone, in alternating runs of equal length. Each figure is the median
//!    over the runs of the mean time per call; the report prints fleet /
//!    local.
//! 2. **Staleness**: two agents (two `Fleet`s, standing for two processes),
//!    each with a breaker of the same name; one trips, and the time from its
//!    trip to the other breaker's change to `Open` is taken from the two
//!    changes' timestamps (one shared monotonic clock). Sampled many times
//!    with the process idle, then with caller threads hammering both
//!    breakers (the agents' default 5 ms tick), and idle with a 1 ms tick;
//!    p50 / p99 / max, and loaded / idle. Beside them, the floor: one raw
//!    `PUBLISH` reaching a thread blocked on a subscribed socket. Each row
//!    also counts the two agents' outages (a Redis round trip slower than
//!    the agents' 50 ms timeout on the loaded machine is one).
//! 3. **Calls during a Redis outage**: Redis is killed; every call of a
//!    breaker joined to the fleet (its agent retrying the connection) and of
//!    a breaker alone is timed one by one, in alternating blocks; p50 / p99
//!    / p99.9 / max per kind of call, and fleet / local. The timer's own
//!    cost is in both sides.
//! 4. **Churn**: an agent serving one breaker, then a thousand more joined
//!    and dropped: its reads and its thread's CPU time a second, before,
//!    with the thousand, and after (back to the baseline, as a ratio); the
//!    keys left in Redis, how many without an expiry, and how many once a
//!    short `idle_expiry` has passed.
//! 5. **Failover**: three agents sharing a breaker tripped open (12 s, the
//!    real clock) on a master, a replica and three sentinels, and on a
//!    Cluster of three masters with a replica each; the master holding
//!    the breaker's keys is killed in the open period. The time from the
//!    kill to every agent reading the new master, the probes the processes
//!    let go during the failover and after it (one per open period
//!    without a failover), and the longest call, over several failovers.
//! 6. **Idle cost**: one agent serving 1, 100, 1,000 and 10,000 breakers
//!    that joined and then sat closed with no calls: over a minute (a
//!    keep-alive period) after the first presence period, Redis's commands a second (those its scripts
//!    run included, as `INFO`'s `total_commands_processed` counts them),
//!    Redis's CPU time, the process's CPU time, and how often the agent
//!    and its pub/sub reader woke; each also per breaker. Then 1,000
//!    breakers against a Cluster of three masters, per node.
//! 7. **Capacity**: a large fleet simulated by many agents in a few
//!    processes (this bench run again as child processes), every agent
//!    serving the same breakers with the default settings: Redis's
//!    commands and CPU, and the processes' CPU, idle (a second's worth)
//!    and through a fleet-wide outage (every breaker trips in every
//!    process, opens by quorum, and closes after its open period through
//!    one probe), each also per breaker each agent serves. Sized by
//!    `FUSEBOX_FLEET_CAPACITY` (`PROCESSESxAGENTSxBREAKERS`, `4x25x100` by
//!    default).
//!
//! Plain timing loops, not Criterion: the figures wanted are paired ratios
//! and percentiles of single calls and single propagations, which
//! Criterion's estimates do not give.
//!
//! Needs `redis-server` and `redis-cli` on the PATH (`scripts/test`
//! installs them). Run with `cargo bench -p fusebox-benches --bench fleet`;
//! name sections to run only those (`-- churn failover`: `cost`,
//! `staleness`, `outage`, `churn`, `failover`, `idle`, `capacity`).

#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

use std::hint::black_box;
use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fusebox::fleet::{Fleet, FleetBuilder};
use fusebox::{Breaker, CallPath, Classifier, Reason, State};
use parking_lot::Mutex;
use redis_server::{cli_at, RedisCluster, RedisSentinels, RedisServer, SERVICE};

const RUNS: usize = 21;
const CALLS: u32 = 1_000_000;

/// A real `redis-server` on a free loopback port (the tests' own harness),
/// and its URL.
fn redis() -> (RedisServer, String) {
    let server = RedisServer::start();
    let url = server.url();
    (server, url)
}

/// Polls `cond` every millisecond, for at most ten seconds.
fn wait(what: &str, cond: &dyn Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "waited 10 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn breaker(name: &str, threshold: u32) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(threshold)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_secs(3_000))
        .max_open_duration(Duration::from_secs(3_000))
        .build()
        .expect("valid config")
}

/// Mean nanoseconds per call of `op` over `CALLS` calls.
fn run(op: &dyn Fn()) -> f64 {
    let t = Instant::now();
    for _ in 0..CALLS {
        op();
    }
    t.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn paired(what: &str, local: &Breaker, fleet: &Breaker, op: fn(&Breaker)) {
    let (mut l, mut f) = (Vec::new(), Vec::new());
    for i in 0..RUNS + 2 {
        let (a, b) = if i % 2 == 0 {
            (run(&|| op(local)), run(&|| op(fleet)))
        } else {
            let b = run(&|| op(fleet));
            (run(&|| op(local)), b)
        };
        if i >= 2 {
            l.push(a);
            f.push(b);
        }
    }
    let (l, f) = (median(l), median(f));
    println!(
        "{what:<16} local {l:6.1} ns   fleet {f:6.1} ns   fleet/local {:.2}",
        f / l
    );
}

fn ok(b: &Breaker) {
    black_box(b.call(|| Ok::<u32, io::Error>(black_box(7)))).ok();
}

fn err(b: &Breaker) {
    black_box(b.call(|| Err::<u32, _>(io::Error::other("down")))).ok();
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        return fleet_process(&spec);
    }
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |section: &str| only.is_empty() || only.iter().any(|o| o == section);
    let (mut server, url) = redis();
    if run("cost") {
        caller_cost(&url);
    }
    if run("staleness") {
        staleness(&url);
    }
    if run("churn") {
        churn(&url);
    }
    if run("outage") {
        outage(&mut server, &url);
    }
    if run("failover") {
        failover();
    }
    if run("idle") {
        idle(&url);
    }
    if run("capacity") {
        capacity();
    }
}

fn caller_cost(url: &str) {
    let fleet = Fleet::builder(url).prefix("bench").build().expect("fleet");
    wait("the agent to connect", &|| fleet.snapshot().connected);

    println!("== caller cost, Redis up: fleet vs local (median of {RUNS} runs of {CALLS} calls)");
    // Closed successes and (non-tripping) failures.
    let (local, shared) = (breaker("closed", u32::MAX), breaker("closed", u32::MAX));
    fleet.join(&shared).expect("join");
    paired("closed success", &local, &shared, ok);
    paired("failure", &local, &shared, err);

    // Refusals: each opened by one failure; the fleet's holds it open.
    let (local, shared) = (breaker("open", 1), breaker("open", 1));
    fleet.join(&shared).expect("join");
    err(&local);
    err(&shared);
    wait("the trip to be written", &|| {
        fleet.snapshot().published >= 1
    });
    assert_eq!((local.state(), shared.state()), (State::Open, State::Open));
    paired("refusal", &local, &shared, ok);
    println!("fleet agent: {:?}", fleet.snapshot());
}

/// Breakers joined and dropped.
const CHURN: usize = 1_000;

/// The agent thread's CPU time, from `/proc/self/task/*/schedstat`
/// (nanoseconds on a CPU): the one thread named `fusebox-fleet` of the
/// agent `fleet` (the bench runs one agent at a time here).
fn agent_cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc") {
        let path = task.expect("a task").path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim() != "fusebox-fleet" {
            continue;
        }
        let schedstat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        total += schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// Reads a second and agent CPU milliseconds a second, over `d`.
fn agent_rate(fleet: &Fleet, d: Duration) -> (f64, f64) {
    let (reads, cpu, t) = (fleet.snapshot().reads, agent_cpu(), Instant::now());
    std::thread::sleep(d);
    let secs = t.elapsed().as_secs_f64();
    (
        (fleet.snapshot().reads - reads) as f64 / secs,
        (agent_cpu() - cpu).as_secs_f64() * 1_000.0 / secs,
    )
}

/// Keys under `prefix`, and how many have no expiry (`PTTL` -1; -2 is a key
/// gone since the scan).
fn keys(url: &str, prefix: &str) -> (usize, usize) {
    let mut con = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("connect");
    let keys: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("MATCH")
        .arg(format!("{{{prefix}:*"))
        .arg("COUNT")
        .arg(1000)
        .clone()
        .iter(&mut con)
        .expect("scan")
        .map(|k| k.expect("a key"))
        .collect();
    let immortal = keys
        .iter()
        .filter(|k| {
            redis::cmd("PTTL")
                .arg(k.as_str())
                .query::<i64>(&mut con)
                .expect("pttl")
                == -1
        })
        .count();
    (keys.len(), immortal)
}

/// An agent serving one breaker, before, with, and after a thousand more.
fn churn(url: &str) {
    const IDLE: Duration = Duration::from_secs(3);
    println!(
        "\n== churn: {CHURN} breakers joined and dropped (refresh 250 ms, idle_expiry {IDLE:?})"
    );
    let fleet = Fleet::builder(url)
        .prefix("churn")
        .presence(Duration::from_secs(1))
        .idle_expiry(IDLE)
        .build()
        .expect("fleet");
    let steady = breaker("steady", u32::MAX);
    fleet.join(&steady).expect("join");
    wait("the agent to connect", &|| fleet.snapshot().reads > 0);
    let window = Duration::from_secs(10);
    let (r0, c0) = agent_rate(&fleet, window);
    let churned: Vec<Breaker> = (0..CHURN)
        .map(|i| breaker(&format!("c{i}"), u32::MAX))
        .collect();
    for b in &churned {
        fleet.join(b).expect("join");
    }
    wait("every breaker to be read", &|| {
        fleet.snapshot().reads > (CHURN as u64) * 2
    });
    let (r1, c1) = agent_rate(&fleet, window);
    drop(churned);
    wait("the agent to serve one breaker again", &|| {
        fleet.snapshot().breakers == 1
    });
    let (left, immortal) = keys(url, "churn");
    let (r2, c2) = agent_rate(&fleet, window);
    println!("{:<34} {:>10} {:>16}", "", "reads/s", "agent CPU ms/s");
    println!("{:<34} {r0:>10.1} {c0:>16.2}", "1 breaker (baseline)");
    println!("{:<34} {r1:>10.1} {c1:>16.2}", "1,001 breakers");
    println!("{:<34} {r2:>10.1} {c2:>16.2}", "1 breaker again");
    println!(
        "after / baseline: reads {:.2}, agent CPU {}",
        r2 / r0,
        if c0 > 0.0 {
            format!("{:.2}", c2 / c0)
        } else {
            format!("{c2:.2} against {c0:.2} ms/s")
        }
    );
    println!("keys left as the last breaker left: {left}, of them without an expiry: {immortal}");
    drop(steady);
    drop(fleet);
    std::thread::sleep(IDLE + Duration::from_secs(1));
    let (left, _) = keys(url, "churn");
    println!("keys left once idle_expiry has passed with nothing served: {left}");
}

/// Failovers measured per topology.
const FAILOVERS: usize = 5;

/// A breaker on the real clock, opening on one failure for 12 s.
fn real_clock(name: &str) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(1)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_secs(12))
        .max_open_duration(Duration::from_secs(12))
        .build()
        .expect("valid config")
}

/// Waits until every replica of the master at `port` has all it had been
/// sent.
fn wait_for_replicas(port: u16) {
    let offsets = || {
        let info = cli_at(port, &["INFO", "replication"]);
        let master: u64 = info
            .lines()
            .find_map(|l| l.trim().strip_prefix("master_repl_offset:"))
            .and_then(|v| v.parse().ok())
            .expect("an offset");
        let replicas: Vec<u64> = info
            .lines()
            .filter(|l| l.starts_with("slave"))
            .filter_map(|l| {
                l.split(',')
                    .find_map(|kv| kv.strip_prefix("offset="))
                    .and_then(|v| v.parse().ok())
            })
            .collect();
        (master, replicas)
    };
    let (sent, _) = offsets();
    wait("the replicas to catch up", &|| {
        let (_, r) = offsets();
        !r.is_empty() && r.iter().all(|&o| o >= sent)
    });
}

/// One failover: three agents made by `fleet` share breaker `vendor`,
/// which trips; a second into its open period `kill` kills the master
/// holding its keys and returns when; the vendor is back at once. Returns
/// the time to every agent reading the new master, the probes during and
/// after, and the longest call.
fn one_failover(
    fleet: &dyn Fn() -> Fleet,
    kill: &mut dyn FnMut() -> Instant,
) -> (Duration, usize, usize, Duration) {
    let fleets: Vec<Fleet> = (0..3).map(|_| fleet()).collect();
    let breakers: Vec<Breaker> = (0..3).map(|_| real_clock("vendor")).collect();
    for (f, b) in fleets.iter().zip(&breakers) {
        f.join(b).expect("join");
    }
    wait("the agents to connect", &|| {
        fleets
            .iter()
            .all(|f| f.snapshot().connected && f.snapshot().reads > 2)
    });
    let up = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let worst = Arc::new(Mutex::new(Duration::ZERO));
    let subs: Vec<_> = breakers
        .iter()
        .map(|b| b.subscribe(1024).expect("subscribe"))
        .collect();
    let probes = || {
        subs.iter()
            .map(|s| {
                std::iter::from_fn(|| s.try_recv())
                    .filter(|c| {
                        c.from == State::Open
                            && c.to == State::HalfOpen
                            && c.reason != Reason::Fleet
                    })
                    .count()
            })
            .sum::<usize>()
    };
    let callers: Vec<_> = breakers
        .iter()
        .map(|b| {
            let (b, up, stop, worst) = (
                b.clone(),
                Arc::clone(&up),
                Arc::clone(&stop),
                Arc::clone(&worst),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let _ = b.call(|| {
                        if up.load(Ordering::Relaxed) {
                            Ok(())
                        } else {
                            Err(io::Error::other("down"))
                        }
                    });
                    let took = t.elapsed();
                    let mut w = worst.lock();
                    *w = (*w).max(took);
                    drop(w);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect();
    wait("every process to open", &|| {
        breakers.iter().all(|b| b.state() == State::Open)
    });
    probes();
    let outages: Vec<u64> = fleets.iter().map(|f| f.snapshot().outages).collect();
    std::thread::sleep(Duration::from_secs(1));
    let killed = kill();
    wait("every agent to reconnect", &|| {
        fleets.iter().zip(&outages).all(|(f, &o)| {
            let s = f.snapshot();
            s.connected && s.outages > o
        })
    });
    let reads: Vec<u64> = fleets.iter().map(|f| f.snapshot().reads).collect();
    wait("every agent to read again", &|| {
        fleets
            .iter()
            .zip(&reads)
            .all(|(f, &r)| f.snapshot().reads > r + 4)
    });
    let took = killed.elapsed();
    let during = probes();
    up.store(true, Ordering::Relaxed);
    wait_long("the fleet to close", &|| {
        breakers.iter().all(|b| b.state() == State::Closed)
    });
    let after = probes();
    stop.store(true, Ordering::Relaxed);
    callers.into_iter().for_each(|t| t.join().expect("caller"));
    let worst = *worst.lock();
    (took, during, after, worst)
}

/// As [`wait`], for up to a minute (an open period runs out first).
fn wait_long(what: &str, cond: &dyn Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "waited 60 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn quick(b: FleetBuilder, prefix: &str) -> Fleet {
    b.prefix(prefix)
        // One process's trip opens the fleet (no quorum), as when these
        // figures were measured.
        .min_members(1)
        .member_ratio(0.0)
        .tick(Duration::from_millis(2))
        .refresh(Duration::from_millis(20))
        .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(100))
        .build()
        .expect("fleet")
}

fn failover() {
    println!("\n== failover in an open period: 3 agents, the master holding the breaker's keys killed (SIGKILL)");
    for topology in ["sentinel", "cluster"] {
        let mut rows = Vec::new();
        for i in 0..FAILOVERS {
            let prefix = format!("fo{i}");
            let row = if topology == "sentinel" {
                let mut group = RedisSentinels::start();
                let urls = group.urls();
                let old = group.master.port();
                let master_now = |g: &RedisSentinels| g.master_port();
                one_failover(
                    &|| quick(Fleet::sentinel_builder(SERVICE, urls.clone()), &prefix),
                    &mut || {
                        wait_for_replicas(old);
                        let t = Instant::now();
                        group.master.kill();
                        wait("the sentinels to promote the replica", &|| {
                            master_now(&group).is_some_and(|p| p != old)
                        });
                        t
                    },
                )
            } else {
                let mut cluster = RedisCluster::start();
                let urls = cluster.urls();
                let key = format!("{{{prefix}:vendor}}:state");
                let master = cluster.master_of(&key).expect("a master");
                one_failover(
                    &|| quick(Fleet::cluster_builder(urls.clone()), &prefix),
                    &mut || {
                        wait_for_replicas(master);
                        let t = Instant::now();
                        cluster.kill(master);
                        wait("a replica to take over", &|| {
                            cluster.master_of(&key).is_some_and(|m| m != master)
                        });
                        t
                    },
                )
            };
            println!(
                "{topology:<9} failover {i}: kill -> every agent reading the new master {:7.3} s; probes during {}, after {}; longest call {:.2} ms",
                row.0.as_secs_f64(),
                row.1,
                row.2,
                row.3.as_secs_f64() * 1_000.0
            );
            rows.push(row);
        }
        let mut times: Vec<f64> = rows.iter().map(|r| r.0.as_secs_f64()).collect();
        times.sort_by(f64::total_cmp);
        println!(
            "{topology:<9} over {FAILOVERS}: failover {:.2} s median ({:.2} to {:.2}); probes during {}, after {} (one per failover: {})",
            times[times.len() / 2],
            times[0],
            times[times.len() - 1],
            rows.iter().map(|r| r.1).sum::<usize>(),
            rows.iter().map(|r| r.2).sum::<usize>(),
            FAILOVERS
        );
    }
}

/// Staleness samples per condition.
const SAMPLES: usize = 200;
/// Threads calling the breakers in the loaded condition.
const HAMMERS: usize = 2;

/// A breaker on `clock` that records when it last opened on its own
/// account (`local`) or through the fleet (`fleet`).
fn stamped(name: &str, clock: &quanta::Clock, opened: &Arc<Opened>) -> Breaker {
    let opened = Arc::clone(opened);
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(1)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_millis(20))
        .max_open_duration(Duration::from_millis(20))
        .jitter(0.0)
        .clock(clock.clone())
        .on_state_change(move |c| {
            if c.to == State::Open {
                let slot = if c.reason == Reason::Fleet {
                    &opened.fleet
                } else {
                    &opened.local
                };
                *slot.lock() = Some(c.at);
            }
        })
        .build()
        .expect("valid config")
}

#[derive(Default)]
struct Opened {
    local: Mutex<Option<quanta::Instant>>,
    fleet: Mutex<Option<quanta::Instant>>,
}

/// The time from a trip in agent A's breaker to agent B's breaker opening
/// through the fleet, `SAMPLES` times, idle and under load.
fn staleness(url: &str) {
    println!("\n== staleness: trip in agent A -> agent B's breaker Open (refresh 250 ms)");
    let floor = publish_delivery(url);
    println!(
        "{:<44} {SAMPLES} samples   p50 {:5.2} ms   p99 {:5.2} ms   max {:5.2} ms",
        "floor: one PUBLISH to a subscriber thread",
        pct(&floor, 0.5),
        pct(&floor, 0.99),
        floor[floor.len() - 1]
    );
    let clock = quanta::Clock::new();
    let mut idle = Vec::new();
    let default_tick = Duration::from_millis(5);
    for (load, tick, name) in [
        (0, default_tick, "stale-idle"),
        (HAMMERS, default_tick, "stale-loaded"),
        (0, Duration::from_millis(1), "stale-idle-1ms"),
    ] {
        let agent = || {
            Fleet::builder(url)
                .prefix("bench")
                // A's trip reaches B (no quorum): staleness is measured.
                .min_members(1)
                .member_ratio(0.0)
                .tick(tick)
                .build()
                .expect("fleet")
        };
        let (fa, fb) = (agent(), agent());
        let (a_opened, b_opened) = (Arc::new(Opened::default()), Arc::new(Opened::default()));
        let a = stamped(name, &clock, &a_opened);
        let b = stamped(name, &clock, &b_opened);
        fa.join(&a).expect("join");
        fb.join(&b).expect("join");
        wait("both agents to connect", &|| {
            fa.snapshot().connected && fb.snapshot().connected
        });
        let stop = Arc::new(AtomicBool::new(false));
        let hammers: Vec<_> = (0..load)
            .map(|i| {
                let (b, stop) = (
                    if i % 2 == 0 { b.clone() } else { a.clone() },
                    Arc::clone(&stop),
                );
                std::thread::spawn(move || {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        ok(&b);
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        let mut lags = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            // Both closed, the fleet too: probe whichever agent holds the
            // lease until the fleet closes.
            wait("the fleet to close", &|| {
                ok(&a);
                ok(&b);
                a.state() == State::Closed && b.state() == State::Closed
            });
            *b_opened.fleet.lock() = None;
            *a_opened.local.lock() = None;
            err(&a);
            let t = Instant::now();
            while b_opened.fleet.lock().is_none() {
                // Not expected: say what everything was when it happened.
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "the trip did not reach B in 10 s\nA {:?}\nB {:?}\nagent A {:?}\nagent B {:?}\nredis: {}",
                    a.snapshot().last_transition,
                    b.snapshot().last_transition,
                    fa.snapshot(),
                    fb.snapshot(),
                    raw(url, &format!("HGETALL {{bench:{name}}}:state\r\nPTTL {{bench:{name}}}:lease\r\n"))
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let tripped = a_opened.local.lock().expect("A tripped");
            let seen = b_opened.fleet.lock().expect("B opened");
            lags.push(seen.saturating_duration_since(tripped).as_secs_f64() * 1e3);
        }
        stop.store(true, Ordering::Relaxed);
        let calls: u64 = hammers.into_iter().map(|h| h.join().unwrap()).sum();
        lags.sort_by(f64::total_cmp);
        let (p50, p99, max) = (pct(&lags, 0.50), pct(&lags, 0.99), lags[lags.len() - 1]);
        let what = if load == 0 {
            format!("tick {tick:?}, idle")
        } else {
            format!("tick {tick:?}, {load} callers, {calls} calls")
        };
        let (sa, sb) = (fa.snapshot(), fb.snapshot());
        println!(
            "{:<44} {SAMPLES} samples   p50 {p50:5.2} ms   p99 {p99:5.2} ms   max {max:5.2} ms   outages {}/{}",
            what, sa.outages, sb.outages
        );
        if load == 0 && tick == default_tick {
            idle = vec![p50, p99, max];
        } else if load > 0 {
            println!(
                "{:<44} p50 {:.2}   p99 {:.2}   max {:.2}",
                "loaded / idle",
                p50 / idle[0],
                p99 / idle[1],
                max / idle[2]
            );
        }
    }
}

/// The floor under staleness: one `PUBLISH` written on one connection
/// until a thread blocked reading a subscribed connection has it, in
/// milliseconds, `SAMPLES` times. Raw RESP over loopback sockets, no fleet.
fn publish_delivery(url: &str) -> Vec<f64> {
    use std::io::{Read, Write};
    let addr = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let mut sub = TcpStream::connect(&addr).expect("connect");
    let mut publisher = TcpStream::connect(&addr).expect("connect");
    sub.set_nodelay(true).unwrap();
    publisher.set_nodelay(true).unwrap();
    sub.write_all(b"SUBSCRIBE floor\r\n").unwrap();
    let mut buf = [0u8; 256];
    let _ = sub.read(&mut buf).expect("subscribed");
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 256];
        while sub.read(&mut buf).is_ok_and(|n| n > 0) {
            if tx.send(Instant::now()).is_err() {
                return;
            }
        }
    });
    let mut lags = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let t = Instant::now();
        publisher.write_all(b"PUBLISH floor x\r\n").unwrap();
        let got = rx.recv().expect("the message");
        let _ = publisher.read(&mut buf).expect("the count");
        lags.push(got.duration_since(t).as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(publisher);
    drop(rx);
    let _ = reader;
    lags.sort_by(f64::total_cmp);
    lags
}

/// Raw RESP commands' answers, for a diagnostic.
fn raw(url: &str, cmds: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(cmds.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).replace("\r\n", " ")
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Calls timed one by one per block, alternating sides.
const BLOCK: usize = 10_000;
const BLOCKS: usize = 100;

/// Every call of `op` timed alone, in alternating blocks: (local, fleet)
/// nanoseconds, sorted.
fn single_calls(local: &Breaker, fleet: &Breaker, op: fn(&Breaker)) -> (Vec<f64>, Vec<f64>) {
    let (mut l, mut f) = (
        Vec::with_capacity(BLOCK * BLOCKS),
        Vec::with_capacity(BLOCK * BLOCKS),
    );
    let block = |b: &Breaker, into: &mut Vec<f64>| {
        for _ in 0..BLOCK {
            let t = Instant::now();
            op(b);
            into.push(t.elapsed().as_nanos() as f64);
        }
    };
    // One block each to warm up, then alternate who goes first.
    block(local, &mut Vec::with_capacity(BLOCK));
    block(fleet, &mut Vec::with_capacity(BLOCK));
    for i in 0..BLOCKS {
        if i % 2 == 0 {
            block(local, &mut l);
            block(fleet, &mut f);
        } else {
            block(fleet, &mut f);
            block(local, &mut l);
        }
    }
    l.sort_by(f64::total_cmp);
    f.sort_by(f64::total_cmp);
    (l, f)
}

/// Redis killed: every call timed, a breaker whose agent keeps trying to
/// reconnect against one alone.
fn outage(server: &mut RedisServer, url: &str) {
    let fleet = Fleet::builder(url)
        .prefix("bench")
        // Retries every 5 to 20 ms: the agent stays busy through the run.
        .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(20))
        .build()
        .expect("fleet");
    let (closed, open) = (breaker("down-closed", u32::MAX), breaker("down-open", 1));
    fleet.join(&closed).expect("join");
    fleet.join(&open).expect("join");
    wait("the agent to connect", &|| {
        let s = fleet.snapshot();
        s.connected && s.reads >= 2
    });
    server.kill();
    wait("the agent to see the outage", &|| {
        fleet.snapshot().outages == 1
    });
    err(&open);
    let (local_closed, local_open) = (breaker("down-closed", u32::MAX), breaker("down-open", 1));
    err(&local_open);
    assert_eq!(
        (open.state(), local_open.state()),
        (State::Open, State::Open)
    );
    let errors = fleet.snapshot().errors;

    println!(
        "\n== calls with Redis killed: fleet (agent reconnecting) vs local, each call timed ({} calls per side, timer included)",
        BLOCK * BLOCKS
    );
    for (what, local, shared, op) in [
        ("closed success", &local_closed, &closed, ok as fn(&Breaker)),
        ("failure", &local_closed, &closed, err),
        ("refusal", &local_open, &open, ok),
    ] {
        let (l, f) = single_calls(local, shared, op);
        let row = |v: &[f64]| {
            format!(
                "p50 {:5.0}  p99 {:6.0}  p99.9 {:6.0}  max {:8.0} ns",
                pct(v, 0.50),
                pct(v, 0.99),
                pct(v, 0.999),
                v[v.len() - 1]
            )
        };
        println!("{what:<16} local  {}", row(&l));
        println!("{what:<16} fleet  {}", row(&f));
        println!(
            "{what:<16} fleet/local  p50 {:.2}  p99 {:.2}  p99.9 {:.2}",
            pct(&f, 0.50) / pct(&l, 0.50),
            pct(&f, 0.99) / pct(&l, 0.99),
            pct(&f, 0.999) / pct(&l, 0.999)
        );
    }
    let s = fleet.snapshot();
    println!(
        "fleet agent during the outage: connected {}, outages {}, failed reconnections {}",
        s.connected,
        s.outages,
        s.errors - errors
    );
}

/// The CPU time of the threads of process `pid` (`self` for this one), in
/// seconds, from `/proc/PID/task/*/schedstat` (nanoseconds on a CPU); and
/// the context switches of its threads named `fusebox-fleet` and
/// `fusebox-pubsub` (how often the agents and their readers woke).
fn threads_of(pid: &str) -> (f64, u64, u64) {
    let (mut ns, mut agent, mut reader) = (0u64, 0u64, 0u64);
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0.0, 0, 0);
    };
    for task in tasks.flatten() {
        let path = task.path();
        let schedstat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        ns += schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let wakes = || -> u64 {
            std::fs::read_to_string(path.join("status"))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        };
        match comm.trim() {
            "fusebox-fleet" => agent += wakes(),
            "fusebox-pubsub" => reader += wakes(),
            _ => {}
        }
    }
    (ns as f64 / 1e9, agent, reader)
}

/// What the Redis servers and the fleet's processes have used so far.
#[derive(Clone)]
struct Usage {
    /// Per server: commands run (its scripts' own included, as `INFO`'s
    /// `total_commands_processed` counts them), and CPU seconds (user and
    /// system).
    servers: Vec<(u64, f64)>,
    /// CPU seconds of this process and of the child processes.
    processes: f64,
    /// Context switches of the agent threads, and of the pub/sub readers.
    agent_wakes: u64,
    reader_wakes: u64,
    at: Instant,
}

/// A second's worth of [`Usage`].
struct Rates {
    /// Per server: commands and CPU milliseconds.
    servers: Vec<(f64, f64)>,
    /// The processes' CPU milliseconds.
    processes: f64,
    agent_wakes: f64,
    reader_wakes: f64,
}

impl Rates {
    fn commands(&self) -> f64 {
        self.servers.iter().map(|s| s.0).sum()
    }

    fn redis_ms(&self) -> f64 {
        self.servers.iter().map(|s| s.1).sum()
    }
}

impl Usage {
    /// Now, on `servers`, in this process and in `children`.
    fn now(servers: &mut [redis::Connection], children: &[u32]) -> Usage {
        let servers = servers
            .iter_mut()
            .map(|con| {
                let info: String = redis::cmd("INFO")
                    .arg("stats")
                    .arg("cpu")
                    .query(con)
                    .expect("INFO");
                let field = |name: &str| -> f64 {
                    info.lines()
                        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or_else(|| panic!("INFO has no {name}"))
                };
                (
                    field("total_commands_processed") as u64,
                    field("used_cpu_user") + field("used_cpu_sys"),
                )
            })
            .collect();
        let (mut processes, mut agent_wakes, mut reader_wakes) = threads_of("self");
        for pid in children {
            let (cpu, a, r) = threads_of(&pid.to_string());
            processes += cpu;
            agent_wakes += a;
            reader_wakes += r;
        }
        Usage {
            servers,
            processes,
            agent_wakes,
            reader_wakes,
            at: Instant::now(),
        }
    }

    /// A second's worth of what was used since `before`.
    fn rate_since(&self, before: &Usage) -> Rates {
        let secs = self.at.duration_since(before.at).as_secs_f64();
        Rates {
            servers: self
                .servers
                .iter()
                .zip(&before.servers)
                .map(|(now, then)| {
                    (
                        // The INFO of `before` itself is not the fleet's.
                        (now.0 - then.0).saturating_sub(1) as f64 / secs,
                        (now.1 - then.1) * 1e3 / secs,
                    )
                })
                .collect(),
            processes: (self.processes - before.processes) * 1e3 / secs,
            agent_wakes: (self.agent_wakes - before.agent_wakes) as f64 / secs,
            reader_wakes: (self.reader_wakes - before.reader_wakes) as f64 / secs,
        }
    }
}

/// How long idle costs are measured: a whole keep-alive period (a minute),
/// in which every breaker is read once besides its presence renewals.
const IDLE_OVER: Duration = Duration::from_secs(60);

/// Breakers an agent serves, idle, per row (0: Redis alone, no agent).
const IDLE_SIZES: [usize; 5] = [0, 1, 100, 1_000, 10_000];

/// One agent (default settings but the prefix) serving `m` closed breakers
/// nobody calls, over `over` after the first presence period: what it cost.
fn idle_row(
    fleet: impl Fn() -> Fleet,
    m: usize,
    servers: &mut [redis::Connection],
    over: Duration,
) -> Rates {
    let fleet = (m > 0).then(fleet);
    let breakers: Vec<Breaker> = (0..m)
        .map(|i| breaker(&format!("b{i}"), u32::MAX))
        .collect();
    if let Some(fleet) = &fleet {
        for b in &breakers {
            fleet.join(b).expect("join");
        }
        wait_long("every breaker to be read", &|| {
            fleet.snapshot().reads >= m as u64
        });
    }
    // The first presence period (5 s by default) is over.
    std::thread::sleep(Duration::from_secs(5));
    let before = Usage::now(servers, &[]);
    std::thread::sleep(over);
    Usage::now(servers, &[]).rate_since(&before)
}

/// One agent serving M closed breakers nobody calls, against one server,
/// then 1,000 against a Cluster of three masters.
fn idle(url: &str) {
    const OVER: Duration = IDLE_OVER;
    println!(
        "\n== idle: one agent (default settings) serving M closed breakers, no calls, over {OVER:?} after the first presence period"
    );
    let header = || {
        println!(
            "{:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>14} {:>14} {:>14}",
            "M",
            "commands/s",
            "Redis ms/s",
            "proc ms/s",
            "agent w/s",
            "reader w/s",
            "cmds/breaker/s",
            "Redis us/b/s",
            "proc us/b/s"
        );
    };
    let row = |label: &str, m: usize, r: &Rates| {
        let per = m.max(1) as f64;
        println!(
            "{label:>8} {:>12.0} {:>10.2} {:>10.2} {:>10.1} {:>10.1} {:>14.3} {:>14.3} {:>14.3}",
            r.commands(),
            r.redis_ms(),
            r.processes,
            r.agent_wakes,
            r.reader_wakes,
            r.commands() / per,
            r.redis_ms() * 1e3 / per,
            r.processes * 1e3 / per
        );
    };
    header();
    let mut con = vec![redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("connect")];
    for m in IDLE_SIZES {
        let _: () = redis::cmd("FLUSHALL").query(&mut con[0]).expect("FLUSHALL");
        let prefix = format!("idle{m}");
        let r = idle_row(
            || Fleet::builder(url).prefix(&prefix).build().expect("fleet"),
            m,
            &mut con,
            OVER,
        );
        row(&m.to_string(), m, &r);
    }

    const CLUSTERED: usize = 1_000;
    println!("\n== idle: no agent, then one agent serving {CLUSTERED} closed breakers, on a Cluster of three masters (a replica each), per node");
    let cluster = RedisCluster::start();
    let mut nodes: Vec<redis::Connection> = cluster
        .urls()
        .iter()
        .map(|u| {
            redis::Client::open(u.as_str())
                .and_then(|c| c.get_connection())
                .expect("connect to a node")
        })
        .collect();
    header();
    for m in [0, CLUSTERED] {
        let r = idle_row(
            || {
                Fleet::cluster_builder(cluster.urls())
                    .prefix("idlec")
                    .build()
                    .expect("fleet")
            },
            m,
            &mut nodes,
            OVER,
        );
        row(&format!("cluster {m}"), m, &r);
        for (url, (cmds, ms)) in cluster.urls().iter().zip(&r.servers) {
            println!("    node {url}: {cmds:>8.0} commands/s {ms:>8.2} ms/s");
        }
    }
}

/// Set in a child process of the capacity section: its Redis URL, agents
/// and breakers.
const CHILD: &str = "FUSEBOX_FLEET_BENCH_CHILD";

/// The capacity section's size.
const CAPACITY: &str = "FUSEBOX_FLEET_CAPACITY";

/// A breaker of the capacity section: trips on one failure and stays open
/// 2 s of the real clock, every time.
fn vendor_breaker(name: &str) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .consecutive_failure_threshold(1)
        .failure_rate_threshold(None)
        .open_duration(Duration::from_secs(2))
        .max_open_duration(Duration::from_secs(2))
        .jitter(0.0)
        .build()
        .expect("valid config")
}

/// A child process of the capacity section (`spec`: `URL AGENTS
/// BREAKERS`): its agents, each serving the same breakers, driven by lines
/// on stdin (`down`, `up`, `report`, `quit`), and answering on stdout:
/// `ready` once every agent has read every breaker, `open` once every
/// breaker is open after `down`, `closed` once every one is closed after
/// `up`, and a `report` line of its agents' counters.
fn fleet_process(spec: &str) {
    use std::io::{BufRead, Write};
    let mut parts = spec.split(' ');
    let url = parts.next().expect("a URL").to_owned();
    let agents: usize = parts.next().and_then(|a| a.parse().ok()).expect("agents");
    let count: usize = parts.next().and_then(|b| b.parse().ok()).expect("breakers");
    let fleets: Vec<Fleet> = (0..agents)
        .map(|_| Fleet::builder(&url).prefix("cap").build().expect("fleet"))
        .collect();
    let breakers: Arc<Vec<Breaker>> = Arc::new(
        fleets
            .iter()
            .flat_map(|f| {
                (0..count).map(move |i| {
                    let b = vendor_breaker(&format!("v{i}"));
                    f.join(&b).expect("join");
                    b
                })
            })
            .collect(),
    );
    wait_long("every agent to read every breaker", &|| {
        fleets.iter().all(|f| f.snapshot().reads >= count as u64)
    });
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    say("ready");
    let up = Arc::new(AtomicBool::new(true));
    let stop = Arc::new(AtomicBool::new(false));
    let mut caller = None;
    for line in std::io::stdin().lock().lines() {
        match line.expect("stdin").as_str() {
            "down" => {
                up.store(false, Ordering::Relaxed);
                // Every breaker is called every 100 ms from now on: each
                // trips at its first call, and the lease holder's probes.
                let (b, up, stop) = (Arc::clone(&breakers), Arc::clone(&up), Arc::clone(&stop));
                caller = Some(std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        for b in b.iter() {
                            let ok = up.load(Ordering::Relaxed);
                            let _ = b.call(|| {
                                if ok {
                                    Ok(())
                                } else {
                                    Err(io::Error::other("down"))
                                }
                            });
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }));
                wait_long("every breaker to open", &|| {
                    breakers.iter().all(|b| b.state() != State::Closed)
                });
                say("open");
            }
            "up" => {
                up.store(true, Ordering::Relaxed);
                wait_long("every breaker to close", &|| {
                    breakers.iter().all(|b| b.state() == State::Closed)
                });
                say("closed");
            }
            "report" => {
                let sum = |f: fn(&fusebox::fleet::FleetSnapshot) -> u64| -> u64 {
                    fleets.iter().map(|x| f(&x.snapshot())).sum()
                };
                say(&format!(
                    "report outages {} catch_ups {} leases {} reads {} round_trips {} lone_trips {}",
                    sum(|s| s.outages),
                    sum(|s| s.catch_ups),
                    sum(|s| s.leases_won),
                    sum(|s| s.reads),
                    sum(|s| s.round_trips),
                    sum(|s| s.lone_trips),
                ));
            }
            _ => break,
        }
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(caller) = caller {
        caller.join().expect("caller");
    }
}

/// The child processes of the capacity section, and their answers.
struct Children {
    procs: Vec<std::process::Child>,
    lines: std::sync::mpsc::Receiver<(usize, String)>,
}

impl Children {
    fn start(url: &str, processes: usize, agents: usize, breakers: usize) -> Children {
        use std::io::BufRead;
        let exe = std::env::current_exe().expect("this bench");
        let (tx, lines) = std::sync::mpsc::channel();
        let procs = (0..processes)
            .map(|i| {
                let mut child = std::process::Command::new(&exe)
                    .env(CHILD, format!("{url} {agents} {breakers}"))
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .expect("a child process");
                let out = child.stdout.take().expect("its stdout");
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for line in std::io::BufReader::new(out).lines() {
                        let Ok(line) = line else { return };
                        if tx.send((i, line)).is_err() {
                            return;
                        }
                    }
                });
                child
            })
            .collect();
        Children { procs, lines }
    }

    fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(std::process::Child::id).collect()
    }

    /// Sends `line` to every child.
    fn tell(&mut self, line: &str) {
        use std::io::Write;
        for c in &mut self.procs {
            let stdin = c.stdin.as_mut().expect("its stdin");
            writeln!(stdin, "{line}").expect("tell a child");
            stdin.flush().expect("tell a child");
        }
    }

    /// Waits (five minutes at most) for every child to answer a line that
    /// starts with `word`; the lines.
    fn answers(&self, word: &str) -> Vec<String> {
        let mut got = vec![None; self.procs.len()];
        let deadline = Instant::now() + Duration::from_secs(300);
        while got.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (i, line) = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("every child to say {word}"));
            if line.starts_with(word) {
                got[i] = Some(line);
            }
        }
        got.into_iter().flatten().collect()
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.tell("quit");
        for c in &mut self.procs {
            let _ = c.wait();
        }
    }
}

/// Many agents in a few processes sharing the same breakers: idle, and
/// through a fleet-wide outage.
fn capacity() {
    let size = std::env::var(CAPACITY).unwrap_or_else(|_| "4x25x100".into());
    let dims: Vec<usize> = size.split('x').filter_map(|n| n.parse().ok()).collect();
    let [processes, agents, breakers] = dims[..] else {
        panic!("{CAPACITY} is PROCESSESxAGENTSxBREAKERS, not {size}");
    };
    let memberships = (processes * agents * breakers) as f64;
    println!(
        "\n== capacity: {processes} processes x {agents} agents, each agent serving the same {breakers} breakers ({memberships} memberships), default settings"
    );
    let (_server, url) = redis();
    let mut con = vec![redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("connect")];
    let mut children = Children::start(&url, processes, agents, breakers);
    let pids = children.pids();
    children.answers("ready");
    // The first presence period is over.
    std::thread::sleep(Duration::from_secs(5));
    const OVER: Duration = IDLE_OVER;
    let before = Usage::now(&mut con, &pids);
    std::thread::sleep(OVER);
    let r = Usage::now(&mut con, &pids).rate_since(&before);
    println!(
        "idle, over {OVER:?}: Redis {:.0} commands/s, {:.2} ms/s of CPU; the processes {:.2} ms/s; per membership: {:.3} commands/s, {:.3} us/s of Redis CPU, {:.3} us/s of process CPU",
        r.commands(),
        r.redis_ms(),
        r.processes,
        r.commands() / memberships,
        r.redis_ms() * 1e3 / memberships,
        r.processes * 1e3 / memberships
    );

    let before = Usage::now(&mut con, &pids);
    children.tell("down");
    children.answers("open");
    let opened = Usage::now(&mut con, &pids);
    children.tell("up");
    children.answers("closed");
    let after = Usage::now(&mut con, &pids);
    for (what, from, to) in [
        ("trips, until every breaker is open", &before, &opened),
        ("open period, probe and close", &opened, &after),
        ("the whole outage", &before, &after),
    ] {
        let secs = to.at.duration_since(from.at).as_secs_f64();
        let r = to.rate_since(from);
        let (commands, redis_s, procs_s) = (
            r.commands() * secs,
            r.redis_ms() * secs / 1e3,
            r.processes * secs / 1e3,
        );
        println!(
            "outage, {what}: {secs:.2} s; Redis {commands:.0} commands, {redis_s:.3} s of CPU ({:.0}% of a core); the processes {procs_s:.3} s; per membership: {:.2} commands, {:.1} us of Redis CPU",
            redis_s / secs * 100.0,
            commands / memberships,
            redis_s * 1e6 / memberships
        );
    }
    children.tell("report");
    for line in children.answers("report") {
        println!("  agents of one process: {line}");
    }
}
