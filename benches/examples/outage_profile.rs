//! The outage profile: what a slow vendor does to its caller, with and
//! without a breaker, measured against real HTTP servers on loopback.
//!
//! A caller receives triggers at a steady rate and fans each one out to two
//! consumers, "pricing" and "compliance", through one bounded pool of worker
//! threads that make blocking `ureq` calls. Pricing's latency steps from
//! ~8 ms to ~900 ms and later recovers; compliance stays healthy throughout.
//! The same traffic runs once per configuration:
//!
//! - no breaker (a 5 s timeout that never fires),
//! - a 200 ms timeout and no breaker,
//! - an error-only breaker (consecutive failures or a failure rate) with a
//!   1 s timeout,
//! - the latency-primary breaker (`LatencyTrip`: P99 above 50 ms for 3
//!   windows of 250 ms, or half a window failing) with a 1 s timeout,
//! - the error-only breaker again with a 200 ms timeout,
//! - the latency-primary breaker with a bulkhead of 16 on pricing,
//! - the error-only breaker, a bulkhead of 16 and a deadline pool (16
//!   threads, 15 ms deadline) on pricing, whose agent is given a 5 s
//!   timeout as if it had none of its own: all three layers in one call;
//! - the latency-primary breaker with an adaptive bulkhead on pricing (at
//!   most 16, floor 2), whose limit is sampled every 5 ms;
//! - the latency-primary breaker counting its calls in flight
//!   (`stuck_call_threshold` 6 past its 50 ms slow mark): alone, behind the
//!   bulkhead of 16, and with a client that has no timeout at all.
//!
//! ```text
//! cargo run --release -p fusebox-benches --example outage_profile
//! ```
//!
//! prints a table and writes it into `docs/outage-profile.md` (between the
//! `profile` markers, keeping the prose around them) with the picture
//! `docs/outage-profile.svg`. Options:
//!
//! - `--workers N` sizes the pool (128 by default); the table then goes
//!   between its own markers and the picture is
//!   `docs/outage-profile-workers-N.svg`;
//! - `--no-write` only prints;
//! - `--trace` lists each run's state changes and the emits that were late
//!   for reasons other than a slow pricing call.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use fusebox::isolation::{
    AdaptiveLimit, Bulkhead, BulkheadSnapshot, DeadlinePool, DeadlinePoolSnapshot, Isolated,
    IsolationError,
};
use fusebox::{Breaker, BreakerBuilder, CallPath, Classifier, LatencyTrip, State, Verdict};
use plotters::prelude::*;

/// Triggers per second; each one is two emits.
const RATE: u64 = 100;
/// Worker threads shared by both consumers, unless `--workers N` says
/// otherwise: enough for pricing's slow calls (100/s × 0.9 s) to fit.
const DEFAULT_WORKERS: usize = 128;

fn workers() -> usize {
    static WORKERS: OnceLock<usize> = OnceLock::new();
    *WORKERS.get_or_init(|| {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == "--workers")
            .and_then(|i| args.get(i + 1))
            .map(|n| n.parse().expect("--workers takes a number"))
            .unwrap_or(DEFAULT_WORKERS)
    })
}
/// Emits waiting for a worker before ingest blocks.
const QUEUE: usize = 4096;

/// Not measured: connections are opened and the pool warms up.
const WARMUP: Duration = Duration::from_millis(500);
/// Measured before the step, for the healthy baseline.
const HEALTHY: Duration = Duration::from_millis(1500);
/// Pricing is slow for this long from t = 0.
const OUTAGE: Duration = Duration::from_secs(5);
/// Measured after pricing recovers.
const RECOVERY: Duration = Duration::from_millis(2500);

const PRICING_HEALTHY: Duration = Duration::from_millis(8);
const PRICING_SLOW: Duration = Duration::from_millis(900);
const COMPLIANCE: Duration = Duration::from_millis(6);

/// A pricing call longer than this held its worker for an outage-sized
/// time (a healthy one takes ~8 ms).
const WAITED: Duration = Duration::from_millis(50);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------- servers

/// When pricing's outage starts, in nanoseconds since `epoch()`;
/// `u64::MAX` for none.
static STEP: AtomicU64 = AtomicU64::new(u64::MAX);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn since_epoch(t: Instant) -> u64 {
    t.duration_since(epoch()).as_nanos() as u64
}

/// ±10% around `d`, from a tiny shared generator.
fn jittered(d: Duration) -> Duration {
    static SEED: AtomicU64 = AtomicU64::new(0x5eed);
    let mut z = SEED.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let unit = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
    d.mul_f64(0.9 + 0.2 * unit)
}

fn pricing_delay() -> Duration {
    let now = since_epoch(Instant::now());
    let step = STEP.load(Ordering::Relaxed);
    let slow = now >= step && now - step < OUTAGE.as_nanos() as u64;
    jittered(if slow { PRICING_SLOW } else { PRICING_HEALTHY })
}

fn compliance_delay() -> Duration {
    jittered(COMPLIANCE)
}

/// A keep-alive HTTP/1.1 server on 127.0.0.1, a thread per connection,
/// that answers every request with `200 ok` after `delay()`.
fn serve(delay: fn() -> Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let _ = answer(stream, delay);
            });
        }
    });
    addr
}

fn answer(stream: TcpStream, delay: fn() -> Duration) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        // Headers, up to the blank line. The requests are GETs: no body.
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
        }
        thread::sleep(delay());
        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")?;
    }
}

// ---------------------------------------------------------- configurations

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guard {
    None,
    ErrorOnly,
    LatencyPrimary,
    /// The latency-primary breaker, counting its calls in flight too.
    InFlight,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    name: &'static str,
    /// The client's timeout (`None`: it waits as long as the vendor takes).
    timeout: Option<Duration>,
    guard: Guard,
    /// A bulkhead on pricing: at most this many calls at once, refused at
    /// once beyond that.
    bulkhead: Option<usize>,
    /// A deadline pool on pricing: its threads and its deadline.
    deadline: Option<(usize, Duration)>,
    /// The bulkhead's limit is adaptive, at most `bulkhead`, with this
    /// floor.
    adaptive: Option<usize>,
}

/// Pricing's bulkhead: a quarter of the 64-worker pool.
const BULKHEAD: usize = 16;
/// Pricing's deadline pool.
const POOL_THREADS: usize = 16;
const DEADLINE: Duration = Duration::from_millis(15);

const CONFIGS: [Config; 7] = [
    Config {
        name: "no breaker",
        timeout: Some(Duration::from_secs(5)),
        guard: Guard::None,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "timeout only (200 ms)",
        timeout: Some(Duration::from_millis(200)),
        guard: Guard::None,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "error-only breaker (1 s timeout)",
        timeout: Some(Duration::from_secs(1)),
        guard: Guard::ErrorOnly,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "latency-primary breaker (1 s timeout)",
        timeout: Some(Duration::from_secs(1)),
        guard: Guard::LatencyPrimary,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "error-only breaker (200 ms timeout)",
        timeout: Some(Duration::from_millis(200)),
        guard: Guard::ErrorOnly,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "latency-primary breaker + bulkhead of 16 (1 s timeout)",
        timeout: Some(Duration::from_secs(1)),
        guard: Guard::LatencyPrimary,
        bulkhead: Some(BULKHEAD),
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "error-only breaker + bulkhead of 16 + 15 ms deadline (no timeout of its own)",
        timeout: Some(Duration::from_secs(5)),
        guard: Guard::ErrorOnly,
        bulkhead: Some(BULKHEAD),
        deadline: Some((POOL_THREADS, DEADLINE)),
        adaptive: None,
    },
];

/// The latency-primary breaker counting its calls in flight: alone, behind
/// the bulkhead of 16, and with a client that has no timeout at all.
const IN_FLIGHT_CONFIGS: [Config; 3] = [
    Config {
        name: "latency-primary breaker + in-flight (1 s timeout)",
        timeout: Some(Duration::from_secs(1)),
        guard: Guard::InFlight,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "latency-primary breaker + in-flight + bulkhead of 16 (1 s timeout)",
        timeout: Some(Duration::from_secs(1)),
        guard: Guard::InFlight,
        bulkhead: Some(BULKHEAD),
        deadline: None,
        adaptive: None,
    },
    Config {
        name: "latency-primary breaker + in-flight, no timeout",
        timeout: None,
        guard: Guard::InFlight,
        bulkhead: None,
        deadline: None,
        adaptive: None,
    },
];

/// Calls in flight past the slow mark (50 ms) that open the in-flight
/// breaker: at 100 pricing calls a second, about 5 arrive per 50 ms, so
/// six out past 50 ms at once is the vendor, not jitter.
const STUCK_CALLS: u32 = 6;

/// The adaptive bulkhead's floor.
const ADAPTIVE_FLOOR: usize = 2;

/// Beside the fixed bulkhead of 16: the same breaker with an adaptive limit
/// of at most 16.
const ADAPTIVE_CONFIGS: [Config; 1] = [Config {
    name: "latency-primary breaker + adaptive bulkhead of at most 16, floor 2 (1 s timeout)",
    timeout: Some(Duration::from_secs(1)),
    guard: Guard::LatencyPrimary,
    bulkhead: Some(BULKHEAD),
    deadline: None,
    adaptive: Some(ADAPTIVE_FLOOR),
}];

/// How often the adaptive limit is sampled.
const LIMIT_EVERY: Duration = Duration::from_millis(5);

/// Timeouts, refused or reset connections and 5xx answers are the
/// consumer's failures; anything else is not.
fn classifier() -> Classifier {
    Classifier::new(|err| match err.downcast_ref::<ureq::Error>() {
        Some(
            ureq::Error::Timeout(_)
            | ureq::Error::Io(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::StatusCode(500..),
        ) => Verdict::Failure,
        _ => Verdict::Ignore,
    })
}

/// What both breakers share: a scaled-down open period (1 s, doubling per
/// failed probe up to 2 s) and three probe successes to close.
fn common(name: &'static str) -> BreakerBuilder {
    Breaker::builder(name)
        .call_path(CallPath::custom(name))
        .classifier(classifier())
        .open_duration(Duration::from_secs(1))
        .backoff_multiplier(2.0)
        .max_open_duration(Duration::from_secs(2))
        .jitter(0.1)
        .jitter_seed(7)
        .half_open_success_threshold(3)
        .max_probe_duration(Duration::from_secs(2))
}

fn breaker(guard: Guard, name: &'static str) -> Option<BreakerBuilder> {
    match guard {
        Guard::None => None,
        Guard::ErrorOnly => Some(
            common(name)
                .consecutive_failure_threshold(5)
                .failure_window(Duration::from_secs(1))
                .failure_rate_threshold(0.5)
                .minimum_calls(20),
        ),
        Guard::InFlight => {
            breaker(Guard::LatencyPrimary, name).map(|b| b.stuck_call_threshold(STUCK_CALLS))
        }
        Guard::LatencyPrimary => Some(
            common(name)
                .consecutive_failure_threshold(None)
                .failure_rate_threshold(None)
                .latency_trip(
                    LatencyTrip::new()
                        .percentile(0.99)
                        .threshold(ms(50))
                        .window(ms(250))
                        .consecutive_windows(3)
                        .error_rate(0.5)
                        .minimum_samples(10),
                )
                // A probe slower than the latency threshold re-opens it.
                .slow_call_duration(ms(50)),
        ),
    }
}

// ----------------------------------------------------------------- caller

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Consumer {
    Pricing,
    Compliance,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// The consumer answered.
    Answered,
    /// The breaker or the bulkhead refused: the fallback, with no wait.
    Refused,
    /// The call was made and failed (a timeout, or abandoned at the
    /// deadline): the fallback, after the wait.
    Failed,
}

#[derive(Clone, Copy, Debug)]
struct Emit {
    trigger: u64,
    consumer: Consumer,
    due: Instant,
    started: Instant,
    done: Instant,
    answer: Answer,
}

/// One consumer as the caller sees it.
struct Client {
    url: Arc<str>,
    agent: ureq::Agent,
    guard: Option<Isolated>,
}

impl Client {
    fn new(
        addr: SocketAddr,
        path: &str,
        timeout: Option<Duration>,
        guard: Option<Isolated>,
    ) -> Client {
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .timeout_global(timeout)
                .max_idle_connections(workers() * 2)
                .max_idle_connections_per_host(workers())
                .build(),
        );
        Client {
            url: format!("http://{addr}{path}").into(),
            agent,
            guard,
        }
    }

    fn get(agent: &ureq::Agent, url: &str) -> Result<(), ureq::Error> {
        let mut response = agent.get(url).call()?;
        response.body_mut().read_to_string()?;
        Ok(())
    }

    fn emit(&self) -> Answer {
        let result = match &self.guard {
            Some(guard) if guard.bulkhead().is_none() && guard.deadline_pool().is_none() => guard
                .breaker()
                .call(|| Client::get(&self.agent, &self.url))
                .map_err(IsolationError::from),
            Some(guard) => {
                // The call may run on a pool thread and outlive this one.
                let (agent, url) = (self.agent.clone(), Arc::clone(&self.url));
                guard.call(move || Client::get(&agent, &url))
            }
            None => Client::get(&self.agent, &self.url).map_err(IsolationError::Failed),
        };
        match result {
            Ok(()) => Answer::Answered,
            Err(e) if e.nothing_attempted() => Answer::Refused,
            Err(_) => Answer::Failed,
        }
    }
}

/// A state change of the pricing breaker, seen from the caller.
#[derive(Clone, Copy, Debug)]
struct Change {
    at: Instant,
    to: State,
}

struct Run {
    config: Config,
    start: Instant,
    step: Instant,
    emits: Vec<Emit>,
    pricing_changes: Vec<Change>,
    compliance_trips: usize,
    peak_pricing_in_flight: usize,
    bulkhead: Option<BulkheadSnapshot>,
    pool: Option<DeadlinePoolSnapshot>,
    /// An adaptive bulkhead's limit, every `LIMIT_EVERY`.
    limits: Vec<(Instant, usize)>,
}

fn run(config: Config, pricing: SocketAddr, compliance: SocketAddr) -> Run {
    let pricing_changes = Arc::new(Mutex::new(Vec::new()));
    let compliance_trips = Arc::new(AtomicUsize::new(0));
    let pricing_breaker = breaker(config.guard, "pricing").map(|b| {
        let log = Arc::clone(&pricing_changes);
        b.on_state_change(move |c| {
            log.lock().unwrap().push(Change {
                at: Instant::now(),
                to: c.to,
            })
        })
        .build()
        .expect("valid pricing breaker")
    });
    let compliance_breaker = breaker(config.guard, "compliance").map(|b| {
        let trips = Arc::clone(&compliance_trips);
        b.on_state_change(move |c| {
            if c.to == State::Open {
                trips.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build()
        .expect("valid compliance breaker")
    });
    let pricing_guard = pricing_breaker.map(|b| {
        let mut guard = Isolated::new(b);
        if let Some(n) = config.bulkhead {
            let mut bulkhead = Bulkhead::builder("pricing").max_concurrent(n);
            if let Some(floor) = config.adaptive {
                bulkhead = bulkhead.adaptive(AdaptiveLimit::new().floor(floor));
            }
            guard = guard.with_bulkhead(bulkhead.build().expect("valid bulkhead"));
        }
        if let Some((threads, deadline)) = config.deadline {
            guard = guard.with_deadline_pool(
                DeadlinePool::builder("pricing")
                    .threads(threads)
                    .deadline(deadline)
                    .build()
                    .expect("valid deadline pool"),
            );
        }
        guard
    });
    let clients = Arc::new([
        Client::new(pricing, "/price", config.timeout, pricing_guard),
        Client::new(
            compliance,
            "/check",
            Some(Duration::from_secs(1)),
            compliance_breaker.map(Isolated::new),
        ),
    ]);

    let start = Instant::now() + ms(50);
    let step = start + WARMUP + HEALTHY;
    STEP.store(since_epoch(step), Ordering::Relaxed);
    let end = step + OUTAGE + RECOVERY;

    let (tx, rx) = sync_channel::<(u64, Consumer, Instant)>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let pool: Vec<_> = (0..workers())
        .map(|_| {
            let rx = Arc::clone(&rx);
            let clients = Arc::clone(&clients);
            let in_flight = Arc::clone(&in_flight);
            let peak = Arc::clone(&peak);
            thread::spawn(move || work(&rx, &clients, &in_flight, &peak))
        })
        .collect();

    let sampler = sample_limits(&clients[0], end);

    let period = Duration::from_nanos(1_000_000_000 / RATE);
    let mut trigger = 0u64;
    loop {
        let due = start + period * trigger as u32;
        if due >= end {
            break;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        for consumer in [Consumer::Pricing, Consumer::Compliance] {
            tx.send((trigger, consumer, due))
                .expect("workers are alive");
        }
        trigger += 1;
    }
    drop(tx);
    let emits = pool
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    STEP.store(u64::MAX, Ordering::Relaxed);
    let limits = sampler.map_or_else(Vec::new, |s| s.join().expect("limit sampler"));
    let pricing_changes = pricing_changes.lock().unwrap().clone();
    let guard = clients[0].guard.as_ref();
    let bulkhead = guard.and_then(Isolated::bulkhead).map(Bulkhead::snapshot);
    let pool = guard
        .and_then(Isolated::deadline_pool)
        .map(DeadlinePool::snapshot);
    Run {
        config,
        start,
        step,
        emits,
        pricing_changes,
        compliance_trips: compliance_trips.load(Ordering::Relaxed),
        peak_pricing_in_flight: peak.load(Ordering::Relaxed),
        bulkhead,
        pool,
        limits,
    }
}

/// With an adaptive bulkhead on pricing, a thread that reads its limit
/// every `LIMIT_EVERY` until `end`.
fn sample_limits(
    pricing: &Client,
    end: Instant,
) -> Option<thread::JoinHandle<Vec<(Instant, usize)>>> {
    let bulkhead = pricing.guard.as_ref()?.bulkhead()?.clone();
    bulkhead.snapshot().adaptive?;
    Some(thread::spawn(move || {
        let mut limits = Vec::new();
        while Instant::now() < end {
            limits.push((Instant::now(), bulkhead.snapshot().limit));
            thread::sleep(LIMIT_EVERY);
        }
        limits
    }))
}

fn work(
    rx: &Mutex<Receiver<(u64, Consumer, Instant)>>,
    clients: &[Client; 2],
    in_flight: &AtomicUsize,
    peak: &AtomicUsize,
) -> Vec<Emit> {
    let mut out = Vec::new();
    loop {
        let job = rx.lock().unwrap().recv();
        let Ok((trigger, consumer, due)) = job else {
            return out;
        };
        let started = Instant::now();
        let answer = match consumer {
            Consumer::Pricing => {
                let n = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
                peak.fetch_max(n, Ordering::Relaxed);
                let answer = clients[0].emit();
                in_flight.fetch_sub(1, Ordering::Relaxed);
                answer
            }
            Consumer::Compliance => clients[1].emit(),
        };
        out.push(Emit {
            trigger,
            consumer,
            due,
            started,
            done: Instant::now(),
            answer,
        });
    }
}

// --------------------------------------------------------------- analysis

/// Nearest-rank percentile of `v` (sorted in place); zero when empty.
fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let rank = (p * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// Seconds since the step, signed.
fn rel(t: Instant, step: Instant) -> f64 {
    if t >= step {
        (t - step).as_secs_f64()
    } else {
        -(step - t).as_secs_f64()
    }
}

struct Row {
    name: &'static str,
    healthy_p99: Duration,
    outage_p50: Duration,
    outage_p99: Duration,
    after_trip_p99: Option<Duration>,
    waited_on_pricing: usize,
    time_to_trip: Option<Duration>,
    fallbacks: usize,
    compliance_healthy_p99: Duration,
    compliance_outage_p99: Duration,
    compliance_trips: usize,
    peak_pricing_in_flight: usize,
    bulkhead: Option<BulkheadSnapshot>,
    pool: Option<DeadlinePoolSnapshot>,
}

/// Per trigger: when it was due and when both of its emits were done.
fn triggers(run: &Run) -> Vec<(Instant, Instant)> {
    let mut by_trigger: HashMap<u64, (Instant, Instant)> = HashMap::new();
    for e in &run.emits {
        let entry = by_trigger.entry(e.trigger).or_insert((e.due, e.done));
        entry.1 = entry.1.max(e.done);
    }
    let mut v: Vec<_> = by_trigger.into_values().collect();
    v.sort_unstable_by_key(|t| t.0);
    v
}

fn analyse(run: &Run) -> Row {
    let healthy = run.start + WARMUP..run.step;
    let outage = run.step..run.step + OUTAGE;
    let trips: Vec<Instant> = run
        .pricing_changes
        .iter()
        .filter(|c| c.to == State::Open)
        .map(|c| c.at)
        .collect();
    let first_trip = trips.iter().copied().find(|t| *t >= run.step);

    let trigger_latency = |range: std::ops::Range<Instant>| -> Vec<Duration> {
        triggers(run)
            .into_iter()
            .filter(|(due, _)| range.contains(due))
            .map(|(due, done)| done - due)
            .collect()
    };
    let compliance = |range: std::ops::Range<Instant>| -> Vec<Duration> {
        run.emits
            .iter()
            .filter(|e| e.consumer == Consumer::Compliance && range.contains(&e.due))
            .map(|e| e.done - e.due)
            .collect()
    };
    let pricing_in_outage = run
        .emits
        .iter()
        .filter(|e| e.consumer == Consumer::Pricing && outage.contains(&e.due));

    Row {
        name: run.config.name,
        healthy_p99: percentile(&mut trigger_latency(healthy.clone()), 0.99),
        outage_p50: percentile(&mut trigger_latency(outage.clone()), 0.50),
        outage_p99: percentile(&mut trigger_latency(outage.clone()), 0.99),
        after_trip_p99: first_trip
            .filter(|t| *t < outage.end)
            .map(|t| percentile(&mut trigger_latency(t..outage.end), 0.99)),
        waited_on_pricing: pricing_in_outage
            .clone()
            .filter(|e| e.answer != Answer::Refused && e.done - e.started > WAITED)
            .count(),
        time_to_trip: first_trip.map(|t| t - run.step),
        fallbacks: pricing_in_outage
            .filter(|e| e.answer != Answer::Answered)
            .count(),
        compliance_healthy_p99: percentile(&mut compliance(healthy), 0.99),
        compliance_outage_p99: percentile(&mut compliance(outage), 0.99),
        compliance_trips: run.compliance_trips,
        peak_pricing_in_flight: run.peak_pricing_in_flight,
        bulkhead: run.bulkhead.clone(),
        pool: run.pool.clone(),
    }
}

fn show(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn table(rows: &[Row]) -> String {
    let outage_triggers = RATE * OUTAGE.as_millis() as u64 / 1000;
    let mut s = String::new();
    s.push_str(
        "| configuration | caller P50, outage | caller P99, outage | caller P99, healthy \
         | caller P99 after the trip | pricing calls that waited > 50 ms | time to trip \
         | fallbacks served | compliance P99, healthy → outage | peak workers on pricing |\n",
    );
    s.push_str("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for r in rows {
        let trip = r
            .time_to_trip
            .map_or_else(|| "did not trip".to_string(), show);
        let after = r.after_trip_p99.map_or_else(|| "–".to_string(), show);
        let compliance_note = if r.compliance_trips > 0 {
            format!(" ({} trips)", r.compliance_trips)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} of {} | {} | {} of {} | {} → {}{} | {} of {} |",
            r.name,
            show(r.outage_p50),
            show(r.outage_p99),
            show(r.healthy_p99),
            after,
            r.waited_on_pricing,
            outage_triggers,
            trip,
            r.fallbacks,
            outage_triggers,
            show(r.compliance_healthy_p99),
            show(r.compliance_outage_p99),
            compliance_note,
            r.peak_pricing_in_flight,
            workers(),
        );
    }
    s.push_str(
        "\nThe goals, each P99 over the whole outage against the same run's healthy P99 \
         (goal: within 1.5×):\n\n\
         | configuration | caller P99, outage ÷ healthy | compliance P99, outage ÷ healthy |\n\
         |---|--:|--:|\n",
    );
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {:.2}× | {:.2}× |",
            r.name,
            ratio(r.outage_p99, r.healthy_p99),
            ratio(r.compliance_outage_p99, r.compliance_healthy_p99),
        );
    }
    for r in rows {
        if let Some(b) = &r.bulkhead {
            let _ = write!(
                s,
                "\n*{}*: the bulkhead's peak was {} of {} slots, and it refused {} calls",
                r.name, b.peak, b.max_concurrent, b.refusals
            );
            if let Some(p) = &r.pool {
                let _ = write!(
                    s,
                    "; the deadline pool held at most {} of its {} threads, abandoned {} calls at \
                     the deadline ({} returned later, {} still out at the end) and refused {}",
                    p.peak_busy, p.threads, p.timed_out, p.returned_late, p.abandoned, p.refusals
                );
            }
            s.push_str(".\n");
        }
    }
    s
}

/// What an adaptive bulkhead's limit did: its healthy value, how soon it
/// fell after the slowdown, how soon it was back after the recovery, and
/// the pricing calls it refused at the healthy load.
fn adaptive_summary(run: &Run) -> Option<String> {
    if run.limits.is_empty() {
        return None;
    }
    let mut healthy: Vec<usize> = run
        .limits
        .iter()
        .filter(|(t, _)| (run.start + WARMUP..run.step).contains(t))
        .map(|&(_, l)| l)
        .collect();
    healthy.sort_unstable();
    let healthy = *healthy.get(healthy.len() / 2)?;
    let after = |from: Instant, pred: &dyn Fn(usize) -> bool| {
        run.limits
            .iter()
            .find(|&&(t, l)| t >= from && pred(l))
            .map(|&(t, _)| t - from)
    };
    let show_after = |d: Option<Duration>| d.map_or_else(|| "never".to_string(), show);
    let fell = after(run.step, &|l| l < healthy);
    let floor = after(run.step, &|l| l <= ADAPTIVE_FLOOR);
    let healed = run.step + OUTAGE;
    let back = after(healed, &|l| l as f64 >= 0.9 * healthy as f64);
    let refused_healthy = run
        .emits
        .iter()
        .filter(|e| {
            e.consumer == Consumer::Pricing
                && (run.start + WARMUP..run.step).contains(&e.due)
                && e.answer == Answer::Refused
        })
        .count();
    let lowest = run
        .limits
        .iter()
        .filter(|(t, _)| *t >= run.step)
        .map(|&(_, l)| l)
        .min()
        .unwrap_or(healthy);
    Some(format!(
        "\n*{}*: the limit read {healthy} through the healthy phase (the median of its \
         samples every {} ms) and refused {refused_healthy} pricing calls there; after the \
         slowdown it fell below {healthy} at {}, reached its floor of {ADAPTIVE_FLOOR} at {} \
         (lowest {lowest}), and was back within 10% of {healthy} {} after the vendor \
         recovered.\n",
        run.config.name,
        LIMIT_EVERY.as_millis(),
        show_after(fell),
        show_after(floor),
        show_after(back),
    ))
}

// ------------------------------------------------------------------- plot

const BUCKET: Duration = Duration::from_millis(100);

/// The slowest value in each `BUCKET` of due times, as (seconds since the
/// step, milliseconds).
fn worst_per_bucket(points: impl Iterator<Item = (f64, Duration)>) -> Vec<(f64, f64)> {
    let width = BUCKET.as_secs_f64();
    let mut buckets: HashMap<i64, f64> = HashMap::new();
    for (t, d) in points {
        let k = (t / width).floor() as i64;
        let v = buckets.entry(k).or_insert(0.0);
        *v = v.max(d.as_secs_f64() * 1e3);
    }
    let mut v: Vec<_> = buckets
        .into_iter()
        .map(|(k, ms)| ((k as f64 + 0.5) * width, ms.max(1.0)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn plot(runs: &[Run], rows: &[Row], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let height = 250 * runs.len() as u32;
    let root = SVGBackend::new(path, (960, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((runs.len(), 1));
    let x0 = -HEALTHY.as_secs_f64();
    let x1 = (OUTAGE + RECOVERY).as_secs_f64();
    let (y0, y1) = (1.0f64, 10000.0f64);
    let open = RGBColor(214, 39, 40).mix(0.18);
    let half_open = RGBColor(255, 160, 0).mix(0.30);
    let outage = BLACK.mix(0.06);
    let caller = RGBColor(31, 119, 180);
    let compliance = RGBColor(44, 160, 44);

    for (i, ((panel, run), row)) in panels.iter().zip(runs).zip(rows).enumerate() {
        let trip = row.time_to_trip.map_or_else(
            || "did not trip".to_string(),
            |d| format!("tripped at +{}", show(d)),
        );
        let caption = if run.config.guard == Guard::None {
            run.config.name.to_string()
        } else {
            format!("{} — {}", run.config.name, trip)
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(caption, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("seconds since pricing slowed down")
            .y_desc("latency, ms")
            .light_line_style(WHITE)
            .draw()?;

        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, y0), (OUTAGE.as_secs_f64(), y1)],
            outage.filled(),
        )))?;
        // Pricing breaker state as bands: red open, amber half-open.
        let mut bands = Vec::new();
        let mut current: Option<(f64, State)> = None;
        for c in &run.pricing_changes {
            let t = rel(c.at, run.step);
            if let Some((from, state)) = current.take() {
                bands.push((from, t, state));
            }
            if c.to != State::Closed {
                current = Some((t, c.to));
            }
        }
        if let Some((from, state)) = current {
            bands.push((from, x1, state));
        }
        chart.draw_series(bands.into_iter().map(|(a, b, state)| {
            let color = if state == State::HalfOpen {
                half_open
            } else {
                open
            };
            Rectangle::new([(a.max(x0), y0), (b.min(x1), y1)], color.filled())
        }))?;

        let trigger_points = triggers(run)
            .into_iter()
            .filter(|(due, _)| *due >= run.start + WARMUP)
            .map(|(due, done)| (rel(due, run.step), done - due));
        chart
            .draw_series(LineSeries::new(
                worst_per_bucket(trigger_points),
                caller.stroke_width(2),
            ))?
            .label("caller: slowest trigger / 100 ms")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], caller.stroke_width(2)));
        let compliance_points = run
            .emits
            .iter()
            .filter(|e| e.consumer == Consumer::Compliance && e.due >= run.start + WARMUP)
            .map(|e| (rel(e.due, run.step), e.done - e.due));
        chart
            .draw_series(LineSeries::new(
                worst_per_bucket(compliance_points),
                compliance.stroke_width(1),
            ))?
            .label("compliance: slowest emit / 100 ms")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], compliance));
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, 0.0), (0.0, 0.0)],
                open.filled(),
            )))?
            .label("pricing breaker open")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], open.filled()));
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, 0.0), (0.0, 0.0)],
                half_open.filled(),
            )))?
            .label("pricing breaker half-open")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 18, y + 5)], half_open.filled())
            });
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, 0.0), (0.0, 0.0)],
                outage.filled(),
            )))?
            .label("pricing slow (~900 ms)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], outage.filled()));
        // One legend, in the first panel's quiet corner.
        if i == 0 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 11))
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// With `--trace`: each run's pricing state changes, and every emit that
/// took more than 25 ms without being a pricing call that was itself slow,
/// split into the wait for a worker and the call.
fn print_trace(run: &Run) {
    eprintln!("== {}", run.config.name);
    for c in &run.pricing_changes {
        eprintln!("  pricing -> {} at {:+.3} s", c.to, rel(c.at, run.step));
    }
    let mut late: Vec<&Emit> = run
        .emits
        .iter()
        .filter(|e| e.due >= run.start + WARMUP && e.done - e.due > ms(25))
        .filter(|e| e.consumer == Consumer::Compliance || e.done - e.started <= ms(25))
        .collect();
    late.sort_by_key(|e| e.due);
    for e in &late {
        eprintln!(
            "  {:?} due {:+.3} s: waited {} for a worker, call {} ({:?})",
            e.consumer,
            rel(e.due, run.step),
            show(e.started - e.due),
            show(e.done - e.started),
            e.answer
        );
    }
}

// ------------------------------------------------------------------- main

/// `""` for the default pool, `"-workers-N"` otherwise: the name of the
/// picture and of the table's markers, so that each pool size keeps its own.
fn variant() -> String {
    if workers() == DEFAULT_WORKERS {
        String::new()
    } else {
        format!("-workers-{}", workers())
    }
}

/// Puts `table` between this variant's markers in the document at `path`,
/// keeping everything around them; appends it (after the picture) when the
/// markers are missing.
fn write_doc(path: &Path, table: &str) -> std::io::Result<()> {
    let v = variant();
    let (begin, end) = (
        format!("<!-- profile{v}:begin -->"),
        format!("<!-- profile{v}:end -->"),
    );
    let block = format!("{begin}\n{table}{end}");
    let old = match std::fs::read_to_string(path) {
        Ok(old) => old,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "# Outage profile\n".to_string(),
        Err(e) => return Err(e),
    };
    let text = match (old.find(&begin), old.find(&end)) {
        (Some(a), Some(b)) if a < b => format!("{}{}{}", &old[..a], block, &old[b + end.len()..]),
        _ => format!("{old}\n![latency and breaker state](outage-profile{v}.svg)\n\n{block}\n"),
    };
    std::fs::write(path, text)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let write = !std::env::args().any(|a| a == "--no-write");
    let trace = std::env::args().any(|a| a == "--trace");
    let _ = epoch();
    let pricing = serve(pricing_delay);
    let compliance = serve(compliance_delay);

    let began = Instant::now();
    let mut runs = Vec::new();
    for config in CONFIGS
        .into_iter()
        .chain(ADAPTIVE_CONFIGS)
        .chain(IN_FLIGHT_CONFIGS)
    {
        eprintln!("running: {}", config.name);
        let r = run(config, pricing, compliance);
        // Let the last slow answers of this run drain before the next.
        thread::sleep(ms(300));
        runs.push(r);
    }
    let rows: Vec<Row> = runs.iter().map(analyse).collect();
    if trace {
        runs.iter().for_each(print_trace);
    }
    let mut table = table(&rows);
    for line in runs.iter().filter_map(adaptive_summary) {
        table.push_str(&line);
    }
    let mut healthy: Vec<Duration> = runs
        .iter()
        .flat_map(|r| {
            triggers(r)
                .into_iter()
                .filter(|(due, _)| (r.start + WARMUP..r.step).contains(due))
                .map(|(due, done)| done - due)
        })
        .collect();
    let _ = writeln!(
        table,
        "\nHealthy baseline, all runs pooled ({} triggers before the step): caller P50 {}, P99 {}.",
        healthy.len(),
        show(percentile(&mut healthy, 0.50)),
        show(percentile(&mut healthy, 0.99)),
    );
    println!(
        "\n{RATE} triggers/s, two emits each, {} workers; pricing {} → {} for {} s; \
         ran in {:.1} s\n",
        workers(),
        show(PRICING_HEALTHY),
        show(PRICING_SLOW),
        OUTAGE.as_secs(),
        began.elapsed().as_secs_f64()
    );
    println!("{table}");

    if write {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        std::fs::create_dir_all(&docs)?;
        let svg = format!("outage-profile{}.svg", variant());
        plot(&runs, &rows, &docs.join(&svg))?;
        write_doc(&docs.join("outage-profile.md"), &table)?;
        eprintln!("wrote docs/outage-profile.md and docs/{svg}");
    }
    Ok(())
}
