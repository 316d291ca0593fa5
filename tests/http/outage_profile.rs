//! A small, fast outage profile against real HTTP servers on loopback.
//!
//! A caller fans triggers to "pricing" and "compliance" through a bounded
//! pool of worker threads. Pricing slows from ~5 ms to ~300 ms, and one call
//! in ten takes 2 s, beyond the breakers' 1.5 s timeout: no error can be
//! seen before 1.5 s into the outage, while the latency policy (P99 above
//! 100 ms for three windows of 200 ms) can trip after ~1 s. The four
//! configurations of `benches/examples/outage_profile.rs` run side by side,
//! each against its own pair of servers, and the test asserts the order of
//! events only, never a wall-clock figure:
//!
//! - the latency-primary breaker trips during the outage, and before the
//!   error-only breaker (which, with a timeout the slow calls mostly fit
//!   under, may never trip at all);
//! - the caller's P99 during the outage is worst with no breaker.
//!
//! With the `isolation` feature, a fifth run puts all three layers on
//! pricing (an error-only breaker, a bulkhead and a 50 ms deadline pool, the
//! agent given no timeout of its own) and checks that its breaker opens
//! while the slow calls it abandoned are still hanging.
#![cfg(feature = "http")]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fusebox::{
    Breaker, BreakerBuilder, CallError, CallPath, Classifier, LatencyTrip, State, Verdict,
};

const RATE: u32 = 50;
const WORKERS: usize = 32;
const HEALTHY: Duration = Duration::from_millis(300);
const OUTAGE: Duration = Duration::from_secs(2);
const AFTER: Duration = Duration::from_millis(200);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// When a server's outage starts and ends.
#[derive(Clone, Copy)]
struct Outage {
    from: Instant,
    to: Instant,
}

/// A keep-alive HTTP/1.1 server on 127.0.0.1 that answers `200 ok` after
/// the delay `delay` picks for the `n`-th request it receives.
fn serve(delay: impl Fn(u64) -> Duration + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    let delay = Arc::new(delay);
    let count = Arc::new(AtomicU64::new(0));
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let delay = Arc::clone(&delay);
            let count = Arc::clone(&count);
            thread::spawn(move || {
                let _ = answer(stream, |n| delay(n), &count);
            });
        }
    });
    addr
}

fn answer(
    stream: TcpStream,
    delay: impl Fn(u64) -> Duration,
    count: &AtomicU64,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = String::new();
    loop {
        // The request line and headers, up to the blank line (GETs only).
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" {
                break;
            }
        }
        thread::sleep(delay(count.fetch_add(1, Ordering::Relaxed)));
        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")?;
    }
}

fn pricing(outage: Outage) -> SocketAddr {
    serve(move |n| {
        let now = Instant::now();
        if now < outage.from || now >= outage.to {
            ms(5)
        } else if n % 10 == 9 {
            ms(2000)
        } else {
            ms(300)
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Guard {
    NoBreaker,
    TimeoutOnly,
    ErrorOnly,
    LatencyPrimary,
    /// The error-only breaker, a bulkhead and a deadline pool.
    #[cfg(feature = "isolation")]
    Layered,
}

impl Guard {
    fn timeout(self) -> Duration {
        match self {
            Guard::NoBreaker => Duration::from_secs(5),
            Guard::TimeoutOnly => ms(100),
            Guard::ErrorOnly | Guard::LatencyPrimary => ms(1500),
            // As if the client had no timeout: only the deadline bounds it.
            #[cfg(feature = "isolation")]
            Guard::Layered => Duration::from_secs(5),
        }
    }

    fn breaker(self, name: &'static str) -> Option<BreakerBuilder> {
        let common = || {
            Breaker::builder(name)
                .call_path(CallPath::custom(name))
                .classifier(Classifier::new(|e| match e.downcast_ref::<ureq::Error>() {
                    Some(ureq::Error::Timeout(_) | ureq::Error::Io(_)) => Verdict::Failure,
                    _ => Verdict::Ignore,
                }))
                .open_duration(ms(500))
                .jitter(0.0)
        };
        match self {
            Guard::NoBreaker | Guard::TimeoutOnly => None,
            #[cfg(feature = "isolation")]
            Guard::Layered => Guard::ErrorOnly.breaker(name),
            Guard::ErrorOnly => Some(
                common()
                    .consecutive_failure_threshold(5)
                    .failure_window(Duration::from_secs(1))
                    .failure_rate_threshold(0.5)
                    .minimum_calls(10),
            ),
            Guard::LatencyPrimary => Some(
                common()
                    .consecutive_failure_threshold(None)
                    .failure_rate_threshold(None)
                    .slow_call_duration(ms(100))
                    .latency_trip(
                        LatencyTrip::new()
                            .threshold(ms(100))
                            .window(ms(200))
                            .consecutive_windows(3)
                            .minimum_samples(3),
                    ),
            ),
        }
    }
}

struct Client {
    url: String,
    agent: ureq::Agent,
    breaker: Option<Breaker>,
    #[cfg(feature = "isolation")]
    layers: Option<fusebox::isolation::Isolated>,
}

impl Client {
    fn new(addr: SocketAddr, timeout: Duration, breaker: Option<Breaker>) -> Client {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .max_idle_connections(WORKERS * 2)
            .max_idle_connections_per_host(WORKERS)
            .build();
        Client {
            url: format!("http://{addr}/"),
            agent: ureq::Agent::new_with_config(config),
            breaker,
            #[cfg(feature = "isolation")]
            layers: None,
        }
    }

    /// One emit; an error or a refusal means the caller takes its fallback.
    fn emit(&self) {
        let get = || -> Result<(), ureq::Error> {
            self.agent
                .get(&self.url)
                .call()?
                .body_mut()
                .read_to_string()?;
            Ok(())
        };
        #[cfg(feature = "isolation")]
        if let Some(layers) = &self.layers {
            let (agent, url) = (self.agent.clone(), self.url.clone());
            let _ = layers.call(move || -> Result<(), ureq::Error> {
                agent.get(&url).call()?.body_mut().read_to_string()?;
                Ok(())
            });
            return;
        }
        let _ = match &self.breaker {
            Some(b) => b.call(get),
            None => get().map_err(CallError::Failed),
        };
    }
}

struct Profile {
    guard: Guard,
    /// The caller's P99 over triggers due during the outage: from when a
    /// trigger was due until both of its emits were done.
    p99: Duration,
    /// When the pricing breaker first opened after the outage began.
    tripped: Option<Instant>,
    outage: Outage,
    /// With the deadline pool: calls abandoned at their deadline and still
    /// hanging when the pricing breaker first opened in the outage.
    // Read only by the `isolation` test.
    #[cfg_attr(not(feature = "isolation"), allow(dead_code))]
    hanging_at_trip: Option<usize>,
}

fn profile(guard: Guard, start: Instant) -> Profile {
    let outage = Outage {
        from: start + HEALTHY,
        to: start + HEALTHY + OUTAGE,
    };
    let opened = Arc::new(Mutex::new(Vec::new()));
    #[cfg(feature = "isolation")]
    let deadline_pool = (guard == Guard::Layered).then(|| {
        fusebox::isolation::DeadlinePool::builder("pricing")
            .threads(8)
            .deadline(ms(50))
            .build()
            .expect("valid pool")
    });
    let hanging = Arc::new(Mutex::new(Vec::new()));
    let pricing_breaker = guard.breaker("pricing").map(|b| {
        let opened = Arc::clone(&opened);
        let hanging = Arc::clone(&hanging);
        #[cfg(feature = "isolation")]
        let pool = deadline_pool.clone();
        b.on_state_change(move |c| {
            if c.to == State::Open {
                opened.lock().unwrap().push(Instant::now());
                #[cfg(feature = "isolation")]
                if let Some(pool) = &pool {
                    hanging.lock().unwrap().push(pool.snapshot().abandoned);
                }
                // Without `isolation`, nothing is recorded.
                let _ = &hanging;
            }
        })
        .build()
        .expect("valid configuration")
    });
    let compliance_breaker = guard
        .breaker("compliance")
        .map(|b| b.build().expect("valid configuration"));
    #[allow(unused_mut)] // Without `isolation` nothing changes it.
    let mut pricing_client = Client::new(pricing(outage), guard.timeout(), pricing_breaker);
    #[cfg(feature = "isolation")]
    if let Some(pool) = deadline_pool {
        let breaker = pricing_client.breaker.take().expect("a breaker");
        let bulkhead = fusebox::isolation::Bulkhead::builder("pricing")
            .max_concurrent(8)
            .build()
            .expect("valid bulkhead");
        pricing_client.layers = Some(
            fusebox::isolation::Isolated::new(breaker)
                .with_bulkhead(bulkhead)
                .with_deadline_pool(pool),
        );
    }
    let clients = Arc::new([
        pricing_client,
        Client::new(serve(|_| ms(2)), Duration::from_secs(1), compliance_breaker),
    ]);

    let (tx, rx) = sync_channel::<(usize, usize)>(4096);
    let rx = Arc::new(Mutex::new(rx));
    let end = outage.to + AFTER;
    let period = Duration::from_secs(1) / RATE;
    let due: Vec<Instant> = (0..)
        .map(|i| start + period * i)
        .take_while(|t| *t < end)
        .collect();
    let done: Arc<Vec<AtomicU64>> = Arc::new(due.iter().map(|_| AtomicU64::new(0)).collect());
    let pool: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (rx, clients, done) = (Arc::clone(&rx), Arc::clone(&clients), Arc::clone(&done));
            thread::spawn(move || loop {
                let job = rx.lock().unwrap().recv();
                let Ok((trigger, consumer)) = job else { return };
                clients[consumer].emit();
                let at = start.elapsed().as_nanos() as u64;
                done[trigger].fetch_max(at, Ordering::Relaxed);
            })
        })
        .collect();
    for (trigger, at) in due.iter().enumerate() {
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        for consumer in 0..2 {
            tx.send((trigger, consumer)).expect("workers are alive");
        }
    }
    drop(tx);
    for worker in pool {
        worker.join().expect("worker");
    }

    let mut latencies: Vec<Duration> = due
        .iter()
        .zip(done.iter())
        .filter(|(at, _)| **at >= outage.from && **at < outage.to)
        .map(|(at, done)| {
            (start + Duration::from_nanos(done.load(Ordering::Relaxed)))
                .saturating_duration_since(*at)
        })
        .collect();
    latencies.sort_unstable();
    let rank = (latencies.len() as f64 * 0.99).ceil() as usize;
    let opened = opened.lock().unwrap();
    let first = opened.iter().position(|t| *t >= outage.from);
    let hanging_at_trip = first.and_then(|i| hanging.lock().unwrap().get(i).copied());
    Profile {
        guard,
        p99: latencies[rank - 1],
        tripped: first.map(|i| opened[i]),
        outage,
        hanging_at_trip,
    }
}

#[test]
fn latency_primary_trips_first_and_no_breaker_has_the_worst_tail() {
    let start = Instant::now() + ms(100);
    let runs: Vec<Profile> = [
        Guard::NoBreaker,
        Guard::TimeoutOnly,
        Guard::ErrorOnly,
        Guard::LatencyPrimary,
    ]
    .into_iter()
    .map(|guard| thread::spawn(move || profile(guard, start)))
    .collect::<Vec<_>>()
    .into_iter()
    .map(|h| h.join().expect("profile run"))
    .collect();
    let [none, timeout, errors, latency] = &runs[..] else {
        unreachable!()
    };
    let summary = runs
        .iter()
        .map(|r| {
            let trip = r.tripped.map(|t| t - r.outage.from);
            format!("{:?}: P99 {:?}, tripped after {trip:?}", r.guard, r.p99)
        })
        .collect::<Vec<_>>()
        .join("; ");
    eprintln!("{summary}");

    let tripped = latency
        .tripped
        .unwrap_or_else(|| panic!("the latency-primary breaker did not trip: {summary}"));
    assert!(
        tripped < latency.outage.to,
        "it tripped after the outage ended: {summary}"
    );
    if let Some(error_trip) = errors.tripped {
        assert!(
            tripped - latency.outage.from < error_trip - errors.outage.from,
            "the error-only breaker tripped first: {summary}"
        );
    }
    for other in [timeout, errors, latency] {
        assert!(
            none.p99 > other.p99,
            "{:?} has a worse P99 than no breaker: {summary}",
            other.guard
        );
    }
}

#[cfg(feature = "isolation")]
#[test]
fn with_a_deadline_the_breaker_opens_while_abandoned_calls_still_hang() {
    let run = profile(Guard::Layered, Instant::now() + ms(100));
    let summary = format!(
        "P99 {:?}, tripped after {:?}, {:?} calls hanging then",
        run.p99,
        run.tripped.map(|t| t - run.outage.from),
        run.hanging_at_trip
    );
    eprintln!("Layered: {summary}");
    let tripped = run
        .tripped
        .unwrap_or_else(|| panic!("the breaker did not open: {summary}"));
    assert!(
        tripped < run.outage.to,
        "it opened after the outage: {summary}"
    );
    // Opened on timeouts counted at the deadline, not on answers: the
    // calls it gave up on had not returned yet.
    assert!(
        run.hanging_at_trip.is_some_and(|n| n > 0),
        "no abandoned call was still hanging when it opened: {summary}"
    );
}
