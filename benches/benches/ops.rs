//! The ops surface, measured beside the core figures:
//!
//! - `scrape`: one Prometheus scrape of a registry of 1,000 breakers (of
//!   the default configuration, then timing their calls)
//!   (`fusebox::prometheus::encode`), against its floor in the same run: one
//!   `snapshot()` of each of the 1,000 breakers, which every scrape must take.
//! - `flood`: a trading thread's call latency through a closed breaker while
//!   the admin endpoint takes a 10,000-request flood, paired against the
//!   same thread with no flood, in alternating runs of equal length.
//!
//! Plain timing loops, no Criterion: each figure is a median (and tail) over
//! many samples, and the report prints ratios against the baseline taken in
//! the same run.
//!
//! Run with `cargo bench -p fusebox-benches --bench ops` (`-- scrape` for
//! the scrapes alone: of default breakers, and of breakers that time their
//! calls).

use std::hint::black_box;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fusebox::admin::{Admin, AdminConfig};
use fusebox::registry::Registry;
use fusebox::{BreakerConfig, CallPath, Classifier};

/// `n` breakers of the default configuration, or with `timed` a
/// `slow_call_duration`, so that each times its calls (and, since the
/// call-duration histogram, writes one).
fn registry_of(n: usize, timed: bool) -> Registry {
    let registry = Registry::new();
    let mut builder = BreakerConfig::builder()
        .call_path(CallPath::AltData)
        .classifier(Classifier::every_error_is_a_failure());
    if timed {
        builder = builder.slow_call_duration(Duration::from_millis(100));
    }
    let config = builder.build().expect("valid config");
    registry
        .add_template("vendor", config)
        .expect("new template");
    for i in 0..n {
        let b = registry
            .breaker(&format!("vendor-{i:04}"), "vendor")
            .expect("new breaker");
        // Some traffic, so that every counter has a value to print.
        for _ in 0..(i % 7) {
            let _ = b.call(|| Ok::<_, io::Error>(()));
        }
    }
    registry
}

fn registry(n: usize) -> Registry {
    registry_of(n, false)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    // Nearest rank over a sorted sample.
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn scrape(timed: bool) {
    const BREAKERS: usize = 1_000;
    const ROUNDS: usize = 200;
    let registry = registry_of(BREAKERS, timed);
    let breakers = registry.breakers();
    let mut scrapes = Vec::with_capacity(ROUNDS);
    let mut floors = Vec::with_capacity(ROUNDS);
    let mut bytes = 0;
    for round in 0..ROUNDS + 20 {
        let t = Instant::now();
        let text = fusebox::prometheus::encode(&registry);
        let scrape = t.elapsed();
        bytes = text.len();
        black_box(text);
        let t = Instant::now();
        for b in &breakers {
            black_box(b.snapshot());
        }
        let floor = t.elapsed();
        if round >= 20 {
            scrapes.push(scrape);
            floors.push(floor);
        }
    }
    scrapes.sort();
    floors.sort();
    let (s50, f50) = (percentile(&scrapes, 0.5), percentile(&floors, 0.5));
    let kind = if timed {
        "timing their calls"
    } else {
        "default"
    };
    println!(
        "scrape of {BREAKERS} breakers, {kind} ({bytes} bytes of exposition), {ROUNDS} rounds:"
    );
    println!(
        "  scrape   median {:8.1} us   p90 {:8.1} us",
        us(s50),
        us(percentile(&scrapes, 0.9))
    );
    println!(
        "  floor    median {:8.1} us   p90 {:8.1} us   (1,000 snapshots alone)",
        us(f50),
        us(percentile(&floors, 0.9))
    );
    println!(
        "  ratio scrape / floor: {:.2}",
        s50.as_secs_f64() / f50.as_secs_f64()
    );
}

/// Call latencies: exact to the nanosecond below 4,096 ns, then 64 buckets
/// per power of two. Every call of a run is counted, with no allocation
/// while the run lasts.
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

const EXACT: u64 = 4096;
const SUB: u64 = 64;

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: vec![0; (EXACT + 64 * SUB) as usize],
            total: 0,
            max: 0,
        }
    }

    fn index(ns: u64) -> usize {
        if ns < EXACT {
            return ns as usize;
        }
        let power = 63 - u64::from(ns.leading_zeros()); // >= 12
        let sub = (ns >> (power - 6)) & (SUB - 1);
        (EXACT + (power - 12) * SUB + sub) as usize
    }

    fn lower_bound(i: usize) -> u64 {
        let i = i as u64;
        if i < EXACT {
            return i;
        }
        let power = (i - EXACT) / SUB + 12;
        let sub = (i - EXACT) % SUB;
        (1 << power) + (sub << (power - 6))
    }

    fn record(&mut self, ns: u64) {
        self.counts[Self::index(ns)] += 1;
        self.total += 1;
        self.max = self.max.max(ns);
    }

    fn percentile(&self, p: f64) -> u64 {
        let rank = ((self.total as f64 - 1.0) * p).round() as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Self::lower_bound(i);
            }
        }
        self.max
    }
}

/// Calls through `breaker` until `stop`, timing every call.
fn trade(breaker: &fusebox::Breaker, stop: &AtomicBool) -> Histogram {
    let mut h = Histogram::new();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let r = breaker.call(|| Ok::<_, io::Error>(black_box(1u64)));
        let d = t.elapsed();
        black_box(r).expect("closed");
        h.record(d.as_nanos() as u64);
    }
    h
}

fn get(addr: SocketAddr, path: &str) -> u16 {
    let Ok(mut conn) = TcpStream::connect(addr) else {
        return 0;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    if conn
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .is_err()
    {
        return 0;
    }
    let mut text = Vec::new();
    let _ = conn.read_to_end(&mut text);
    std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

struct Run {
    samples: Histogram,
    wall: Duration,
    answered: u64,
    shed: u64,
}

/// One run: the trading thread calls for `length`, or for as long as a
/// flood of `requests` takes.
fn run(registry: &Registry, addr: SocketAddr, requests: usize, length: Duration) -> Run {
    let breaker = registry.get("trading").expect("registered");
    let stop = Arc::new(AtomicBool::new(false));
    let trader = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || trade(&breaker, &stop))
    };
    let answered = Arc::new(AtomicU64::new(0));
    let shed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    if requests == 0 {
        thread::sleep(length);
    } else {
        const CLIENTS: usize = 4;
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (answered, shed) = (Arc::clone(&answered), Arc::clone(&shed));
                thread::spawn(move || {
                    for j in 0..requests / CLIENTS {
                        let path =
                            ["/breakers/trading", "/health", "/metrics", "/audit"][(i + j) % 4];
                        match get(addr, path) {
                            200 => answered.fetch_add(1, Ordering::Relaxed),
                            _ => shed.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().expect("client");
        }
    }
    let wall = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let samples = trader.join().expect("trader");
    Run {
        samples,
        wall,
        answered: answered.load(Ordering::Relaxed),
        shed: shed.load(Ordering::Relaxed),
    }
}

fn flood() {
    const REQUESTS: usize = 10_000;
    const PAIRS: usize = 3;
    let registry = registry(100);
    let config = BreakerConfig::builder()
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .build()
        .expect("valid config");
    registry
        .register(config.breaker("trading").expect("name"))
        .expect("new");
    let admin = Admin::start(
        &registry,
        AdminConfig::new("bench-token-0123456789abcdef").bind("127.0.0.1:0".parse().unwrap()),
    )
    .expect("admin starts");
    let addr = admin.addr();
    println!("\ntrading-thread call latency, {PAIRS} pairs of runs (no flood, then a {REQUESTS}-request flood of the same length):");
    println!(
        "  run        calls    p50 ns   p99 ns  p99.9 ns     max us   wall ms  answered  shed"
    );
    let mut ratios = Vec::new();
    // Each quiet run lasts as long as the flood before it (the first, as
    // long as a warm-up flood).
    let mut length = run(&registry, addr, REQUESTS, Duration::ZERO).wall;
    for pair in 0..PAIRS {
        let quiet = run(&registry, addr, 0, length);
        let flood = run(&registry, addr, REQUESTS, Duration::ZERO);
        length = flood.wall;
        for (label, r) in [("quiet", &quiet), ("flood", &flood)] {
            println!(
                "  {label}-{pair} {:>10} {:>9.0} {:>8.0} {:>9.0} {:>10.1} {:>9.0} {:>9} {:>5}",
                r.samples.total,
                r.samples.percentile(0.5) as f64,
                r.samples.percentile(0.99) as f64,
                r.samples.percentile(0.999) as f64,
                r.samples.max as f64 / 1e3,
                r.wall.as_secs_f64() * 1e3,
                r.answered,
                r.shed
            );
        }
        let ratio =
            |p: f64| flood.samples.percentile(p) as f64 / quiet.samples.percentile(p) as f64;
        ratios.push((ratio(0.5), ratio(0.99), ratio(0.999)));
    }
    for (i, (p50, p99, p999)) in ratios.iter().enumerate() {
        println!("  pair {i}: flood / quiet  p50 {p50:.2}  p99 {p99:.2}  p99.9 {p999:.2}");
    }
    admin.stop();
}

/// `-- scrape` runs the scrapes alone.
fn main() {
    let scrape_only = std::env::args().skip(1).any(|a| a == "scrape");
    scrape(false);
    scrape(true);
    if !scrape_only {
        flood();
    }
}
