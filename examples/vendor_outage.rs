//! A reference-data vendor goes slow, then down, then recovers, while three
//! trading threads keep asking it for instrument data through a guarded
//! client with a last-known-good fallback.
//!
//! The vendor is a real HTTP server on a loopback port, started here. The
//! timeline shows each breaker transition with its reason, the calls that
//! were short-circuited (and never reached the vendor), the stale answers
//! served with their age, the single probe, and recovery.
//!
//! ```sh
//! cargo run --example vendor_outage
//! ```
//!
//! What to look for:
//!
//! - While the vendor is slow, its answers are fresh but slow; half of the
//!   window's calls slow open the breaker, and the traders get the last
//!   good answer, marked stale, without waiting.
//! - The first probe is answered, slowly: its caller gets the fresh data,
//!   and the breaker opens again, for twice as long, because a slow probe
//!   counts against the vendor.
//! - Once the vendor is down, a probe fails to connect. A refused
//!   connection never reaches the vendor, so the vendor counts one request
//!   fewer than the breaker let through.
//! - A stale answer is served up to 4 s old. The symbol whose data came
//!   from that slow probe holds data about a second younger than the
//!   others' (compare `as_of`), so it is still served when the other two
//!   have gone to NO DATA.
//!
//! It needs nothing but fusebox (ureq is `fusebox::http::ureq`): it
//! compiles as it is in an application that depends on fusebox alone.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fusebox::http::{ureq, Error, GuardedClient, LastKnownGood, Served, StaleReason, Unavailable};
use fusebox::{Breaker, CallError, CallPath, State};

/// How long the vendor takes to answer while slow.
const SLOW: Duration = Duration::from_millis(250);
/// A call slower than this is slow, to the breaker.
const SLOW_MARK: Duration = Duration::from_millis(150);
/// The trading threads' pace.
const PACE: Duration = Duration::from_millis(100);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let timeline = Timeline::new();
    let vendor = Vendor::start(Arc::clone(&timeline))?;

    // One breaker per vendor, built once. Half the calls of the last 500 ms
    // slow, or three failures in a row, open it for 1 s, then 2 s after a
    // failed probe; one probe at a time tests recovery. (A real vendor would
    // get a longer window and open period; this one has 10 s to live.)
    let log = Arc::clone(&timeline);
    let breaker = Breaker::builder("refdata-vendor")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .consecutive_failure_threshold(3)
        .slow_call_duration(SLOW_MARK)
        .slow_call_rate_threshold(0.5)
        .failure_window(Duration::from_millis(500))
        .minimum_calls(3)
        .open_duration(Duration::from_secs(1))
        .max_open_duration(Duration::from_secs(2))
        .jitter(0.0)
        .on_state_change(move |c| {
            log.line(
                "BREAKER",
                format_args!("{} -> {}: {}", c.from, c.to, c.reason),
            )
        })
        .build()?;

    // The agent must bound the whole call: the breaker only hears of a
    // failure when the call returns.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(400)))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let client = GuardedClient::new(agent, breaker)?;
    vendor.watch(client.breaker().clone());

    // Stale reference data is fine for a while, not forever.
    let cache = LastKnownGood::new(Duration::from_secs(4));

    println!(
        "vendor on {}: healthy for 2 s, slow for 2 s, down for 3 s, then healthy",
        vendor.addr
    );
    println!("   time  who        what");
    let running = AtomicBool::new(true);
    let stats = Stats::default();
    thread::scope(|s| {
        for symbol in ["ES", "NQ", "CL"] {
            let (client, cache, timeline, running, stats) =
                (&client, &cache, &timeline, &running, &stats);
            let url = format!("http://{}/refdata/{symbol}", vendor.addr);
            s.spawn(move || trader(symbol, &url, client, cache, timeline, running, stats));
        }
        s.spawn(|| stats.report_every_second(&timeline, &vendor, &running));

        vendor.set(Mode::Healthy);
        thread::sleep(Duration::from_secs(2));
        vendor.set(Mode::Slow);
        thread::sleep(Duration::from_secs(2));
        vendor.set(Mode::Down);
        thread::sleep(Duration::from_secs(3));
        vendor.set(Mode::Healthy);
        thread::sleep(Duration::from_millis(2_500));
        running.store(false, Ordering::Release);
    });
    vendor.set(Mode::Stopped);

    let snap = client.breaker().snapshot();
    let t = &snap.totals;
    println!();
    println!(
        "done in {:.1}s: breaker {}, opened {} time(s)",
        timeline.start.elapsed().as_secs_f64(),
        snap.state,
        snap.trips,
    );
    println!(
        "the breaker let {} calls through ({} answered, {} of them slow; {} failed) and \
         short-circuited {} without sending anything",
        t.calls, t.successes, t.slow, t.failures, t.short_circuits,
    );
    println!(
        "the vendor received {} requests: a refused connection never reaches it",
        vendor.requests.load(Ordering::Relaxed),
    );
    println!(
        "the traders got {} fresh answers, {} stale (the oldest {:.1}s old) and {} times no data",
        stats.fresh.load(Ordering::Relaxed),
        stats.stale.load(Ordering::Relaxed),
        stats.oldest_ms.load(Ordering::Relaxed) as f64 / 1000.0,
        stats.unavailable.load(Ordering::Relaxed),
    );
    Ok(())
}

/// One trading thread: ask for `symbol`'s reference data every 100 ms and
/// say so whenever the kind of answer changes.
fn trader(
    symbol: &str,
    url: &str,
    client: &GuardedClient,
    cache: &LastKnownGood,
    timeline: &Timeline,
    running: &AtomicBool,
    stats: &Stats,
) {
    let who = format!("trader-{symbol}");
    let mut last = Kind::None;
    // The last answer served, fresh or stale, to say which one ran out.
    let mut last_good = String::new();
    while running.load(Ordering::Acquire) {
        let asked = Instant::now();
        let answer = client.get(url).call_or_stale(cache);
        let took = asked.elapsed();
        let kind = Kind::of(&answer, took);
        stats.count(&answer);
        if kind != last {
            match &answer {
                Ok(a) if kind == Kind::FreshButSlow => timeline.line(
                    &who,
                    format_args!(
                        "fresh but slow ({} ms, over the {} ms mark: counted against the vendor): {}",
                        took.as_millis(),
                        SLOW_MARK.as_millis(),
                        body(a)
                    ),
                ),
                Ok(a) if a.is_fresh() => timeline.line(&who, format_args!("fresh: {}", body(a))),
                Ok(a) => timeline.line(
                    &who,
                    format_args!(
                        "STALE by {:.1}s ({}): {}",
                        a.age().as_secs_f64(),
                        reason(a),
                        body(a)
                    ),
                ),
                Err(e) => timeline.line(
                    &who,
                    format_args!("NO DATA, stop quoting: {}", why(e, &last_good)),
                ),
            }
            last = kind;
        }
        if let Ok(a) = &answer {
            last_good = body(a);
        }
        thread::sleep(PACE);
    }
}

fn body(a: &Served) -> String {
    String::from_utf8_lossy(a.body()).into_owned()
}

fn reason(a: &Served) -> String {
    match a.stale_reason() {
        Some(StaleReason::BreakerOpen(r)) => match r.retry_after() {
            Some(d) => format!(
                "short-circuited, breaker {} for {:.1}s more",
                r.state(),
                d.as_secs_f64()
            ),
            None => format!("short-circuited, breaker {}: the probe is out", r.state()),
        },
        Some(StaleReason::ProviderError(e)) => format!("vendor failed: {}", what_failed(e)),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn why(e: &Unavailable, last_good: &str) -> String {
    match (e.stale_age(), e.error()) {
        (Some(age), _) => format!(
            "the last good answer ({last_good}) is {:.1}s old, over the 4s limit",
            age.as_secs_f64()
        ),
        (None, CallError::Rejected(r)) => format!("{r}, nothing on file"),
        // Anything else: the whole chain, "call failed: transport failed: ...".
        (None, err) => report(err),
    }
}

/// What went wrong with a guarded call, in a few words: the status, or the
/// socket's own error (ureq's error around it says only "io").
fn what_failed(e: &Error) -> String {
    match e {
        Error::Transport(ureq::Error::Io(io)) => io.to_string(),
        Error::Transport(ureq::Error::Timeout(_)) => "timed out".to_string(),
        other => match other.status() {
            Some(status) => format!("answered {status}"),
            None => report(other),
        },
    }
}

/// An error and its sources, each message once: "call failed: transport
/// failed: ...". (With anyhow, `format!("{err:#}")` prints the same.)
fn report(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        text = format!("{text}: {e}");
        source = e.source();
    }
    text
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    None,
    Fresh,
    FreshButSlow,
    StaleSkipped,
    StaleFailed,
    Unavailable,
}

impl Kind {
    fn of(answer: &Result<Served, Unavailable>, took: Duration) -> Kind {
        match answer {
            Ok(a) => match a.stale_reason() {
                None if took > SLOW_MARK => Kind::FreshButSlow,
                None => Kind::Fresh,
                Some(StaleReason::BreakerOpen(_)) => Kind::StaleSkipped,
                Some(_) => Kind::StaleFailed,
            },
            Err(_) => Kind::Unavailable,
        }
    }
}

#[derive(Default)]
struct Stats {
    fresh: AtomicU64,
    stale: AtomicU64,
    unavailable: AtomicU64,
    oldest_ms: AtomicU64,
}

impl Stats {
    fn count(&self, answer: &Result<Served, Unavailable>) {
        match answer {
            Ok(a) if a.is_fresh() => self.fresh.fetch_add(1, Ordering::Relaxed),
            Ok(a) => {
                let ms = a.age().as_millis() as u64;
                self.oldest_ms.fetch_max(ms, Ordering::Relaxed);
                self.stale.fetch_add(1, Ordering::Relaxed)
            }
            Err(_) => self.unavailable.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// A line per second: what the traders got and what reached the vendor.
    fn report_every_second(&self, timeline: &Timeline, vendor: &Vendor, running: &AtomicBool) {
        let mut prev = [0u64; 4];
        let mut next = timeline.start + Duration::from_secs(1);
        while running.load(Ordering::Acquire) {
            thread::sleep(next.saturating_duration_since(Instant::now()));
            next += Duration::from_secs(1);
            let now = [
                self.fresh.load(Ordering::Relaxed),
                self.stale.load(Ordering::Relaxed),
                self.unavailable.load(Ordering::Relaxed),
                vendor.requests.load(Ordering::Relaxed),
            ];
            let d: Vec<u64> = now.iter().zip(prev).map(|(n, p)| n - p).collect();
            prev = now;
            timeline.line(
                "--",
                format_args!(
                    "last second: {} fresh, {} stale, {} no data; {} request(s) reached the vendor",
                    d[0], d[1], d[2], d[3]
                ),
            );
        }
    }
}

/// Timestamped lines from every thread, one at a time.
struct Timeline {
    start: Instant,
    out: Mutex<()>,
}

impl Timeline {
    fn new() -> Arc<Timeline> {
        Arc::new(Timeline {
            start: Instant::now(),
            out: Mutex::new(()),
        })
    }

    fn line(&self, who: &str, what: std::fmt::Arguments<'_>) {
        let _one_at_a_time = self.out.lock().unwrap();
        let t = self.start.elapsed().as_secs_f64();
        println!("{t:>6.2}s  {who:<9}  {what}");
    }
}

// --- the vendor: a real HTTP server on a loopback port -------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    Healthy,
    Slow,
    Down,
    Stopped,
}

struct Vendor {
    addr: SocketAddr,
    mode: Arc<AtomicU8>,
    requests: Arc<AtomicU64>,
    breaker: Arc<Mutex<Option<Breaker>>>,
    timeline: Arc<Timeline>,
}

impl Vendor {
    fn start(timeline: Arc<Timeline>) -> std::io::Result<Vendor> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let vendor = Vendor {
            addr: listener.local_addr()?,
            mode: Arc::new(AtomicU8::new(Mode::Healthy as u8)),
            requests: Arc::new(AtomicU64::new(0)),
            breaker: Arc::new(Mutex::new(None)),
            timeline,
        };
        let (addr, mode, requests, breaker, timeline) = (
            vendor.addr,
            Arc::clone(&vendor.mode),
            Arc::clone(&vendor.requests),
            Arc::clone(&vendor.breaker),
            Arc::clone(&vendor.timeline),
        );
        thread::spawn(move || {
            let mut listener = Some(listener);
            loop {
                let current = mode_of(&mode);
                if current == Mode::Stopped {
                    return;
                }
                if current == Mode::Down {
                    // Not listening: connections are refused.
                    listener = None;
                    thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let l = match listener.take() {
                    Some(l) => l,
                    None => match TcpListener::bind(addr) {
                        Ok(l) => l,
                        Err(_) => {
                            thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    },
                };
                if let Ok((stream, _)) = l.accept() {
                    if mode_of(&mode) == Mode::Healthy || mode_of(&mode) == Mode::Slow {
                        let (mode, requests, breaker, timeline) = (
                            Arc::clone(&mode),
                            Arc::clone(&requests),
                            Arc::clone(&breaker),
                            Arc::clone(&timeline),
                        );
                        thread::spawn(move || {
                            answer(stream, &mode, &requests, &breaker, &timeline)
                        });
                    }
                }
                listener = Some(l);
            }
        });
        Ok(vendor)
    }

    /// Lets the vendor point out the requests that arrive while the
    /// breaker is not closed: the probes.
    fn watch(&self, breaker: Breaker) {
        *self.breaker.lock().unwrap() = Some(breaker);
    }

    fn set(&self, to: Mode) {
        let from = mode_of(&self.mode);
        self.mode.store(to as u8, Ordering::Release);
        // Wake the accept loop so that it sees the change.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(50));
        let what = match to {
            Mode::Healthy if from == Mode::Healthy => return,
            Mode::Healthy => "healthy again".to_string(),
            Mode::Slow => format!("slow: {} ms per answer", SLOW.as_millis()),
            Mode::Down => "down: connections refused".to_string(),
            Mode::Stopped => return,
        };
        self.timeline.line("VENDOR", format_args!("{what}"));
    }
}

fn mode_of(mode: &AtomicU8) -> Mode {
    match mode.load(Ordering::Acquire) {
        0 => Mode::Healthy,
        1 => Mode::Slow,
        2 => Mode::Down,
        _ => Mode::Stopped,
    }
}

fn answer(
    mut stream: TcpStream,
    mode: &AtomicU8,
    requests: &AtomicU64,
    breaker: &Mutex<Option<Breaker>>,
    timeline: &Timeline,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return, // a wake-up connection, or a client that left
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    requests.fetch_add(1, Ordering::Relaxed);
    let line = String::from_utf8_lossy(&head);
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let symbol = path.rsplit('/').next().unwrap_or("?").to_owned();
    if let Some(b) = breaker.lock().unwrap().as_ref() {
        if b.state() == State::HalfOpen {
            timeline.line("VENDOR", format_args!("received GET {path}: the one probe"));
        }
    }
    if mode_of(mode) == Mode::Slow {
        thread::sleep(SLOW);
    }
    let t = timeline.start.elapsed().as_secs_f64();
    let body = format!("{symbol} tick=0.25 as_of={t:.1}s");
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
