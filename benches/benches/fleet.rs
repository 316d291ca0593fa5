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
//!
//! Plain timing loops, not Criterion: the figures wanted are paired ratios
//! and percentiles of single calls and single propagations, which
//! Criterion's estimates do not give.
//!
//! Needs `redis-server` on the PATH (`scripts/test` installs it). Run with
//! `cargo bench -p fusebox-benches --bench fleet`.

#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

use std::hint::black_box;
use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fusebox::fleet::Fleet;
use fusebox::{Breaker, CallPath, Classifier, Reason, State};
use parking_lot::Mutex;
use redis_server::RedisServer;

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
    let (mut server, url) = redis();
    let fleet = Fleet::builder(url.as_str())
        .prefix("bench")
        .build()
        .expect("fleet");
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

    staleness(&url);
    outage(&mut server, &url);
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
