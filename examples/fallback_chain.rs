//! A fallback chain for one kind of lookup: two reference-data vendors, each
//! behind its own breaker, then a last-known-good cache.
//!
//! Both vendors are real HTTP servers on loopback ports, started here. The
//! primary slows past its timeout and trips; the chain serves from the
//! secondary, skipping the primary without calling it; the secondary goes
//! down too, and the chain serves the cached answer with its age; then the
//! primary recovers through one probe. Each answer prints its source and,
//! for every link skipped before it, why.
//!
//! ```sh
//! cargo run --example fallback_chain --features chain
//! ```
//!
//! What to look for:
//!
//! - "refused (breaker `primary` is open, retry after ...)": nothing was
//!   sent to the primary, which is what tells an incident (the vendor was
//!   skipped because it is sick) from a coverage gap in a review.
//! - The cached answer carries its age; past the cache's `max_staleness` it
//!   would not be served at all.
//! - The primary's recovery costs one request: the probe.
//!
//! It needs nothing but fusebox (ureq is `fusebox::http::ureq`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use fusebox::chain::{Answer, Chain, LookupError, Origin, SkipReason};
use fusebox::http::{ureq, Error, GuardedClient};
use fusebox::last_good::LastGood;
use fusebox::{Breaker, CallPath, State};

/// The agents' whole-call timeout: a slow primary is a timed-out one.
const TIMEOUT: Duration = Duration::from_millis(200);
/// How long a tripped vendor is left alone before one probe.
const OPEN: Duration = Duration::from_millis(800);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let primary_vendor = Vendor::start("primary", "101.25")?;
    let secondary_vendor = Vendor::start("secondary", "101.30")?;

    let primary = client("primary")?;
    let secondary = client("secondary")?;
    let cache: LastGood<String, String> = LastGood::new(Duration::from_secs(60));

    let chain: Chain<str, String, Error> = Chain::builder("instrument-price")
        .guarded("primary", primary.breaker(), get(&primary, &primary_vendor))
        .guarded(
            "secondary",
            secondary.breaker(),
            get(&secondary, &secondary_vendor),
        )
        .cache("last-good", cache)
        .build()?;

    println!("-- both vendors healthy");
    show(chain.lookup("AAPL"));

    println!("-- the primary slows past its {TIMEOUT:?} timeout");
    primary_vendor.set(Mode::Slow);
    for _ in 0..3 {
        show(chain.lookup("AAPL"));
    }

    println!("-- the secondary goes down (503)");
    secondary_vendor.set(Mode::Down);
    for _ in 0..3 {
        show(chain.lookup("AAPL"));
    }

    println!("-- the primary recovers; its open period ends");
    primary_vendor.set(Mode::Healthy);
    thread::sleep(OPEN + Duration::from_millis(50));
    let before = primary_vendor.requests();
    show(chain.lookup("AAPL"));
    println!(
        "   primary: {} request(s) for the recovery, breaker {}",
        primary_vendor.requests() - before,
        primary.breaker().state()
    );
    assert_eq!(primary.breaker().state(), State::Closed);

    let snap = chain.snapshot();
    for link in &snap.links {
        println!(
            "   {:<10} answers {:>2}, refused {}, failed {}",
            link.name,
            link.answers,
            link.skips.get(SkipReason::Refused),
            link.skips.get(SkipReason::Failed),
        );
    }
    Ok(())
}

/// A guarded client whose breaker opens after two failures in a row.
fn client(name: &str) -> Result<GuardedClient, Box<dyn std::error::Error>> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let breaker = Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .consecutive_failure_threshold(2)
        .failure_rate_threshold(None)
        .open_duration(OPEN)
        .max_probe_duration(Duration::from_secs(1))
        .jitter(0.0)
        .build()?;
    Ok(GuardedClient::new(agent, breaker)?)
}

/// The link's call: GET the vendor's price for a symbol, as text.
fn get(
    client: &GuardedClient,
    vendor: &Vendor,
) -> impl Fn(&str) -> Result<String, fusebox::CallError<Error>> + Send + Sync + 'static {
    let (client, base) = (client.clone(), vendor.url.clone());
    move |symbol: &str| {
        client
            .get(format!("{base}/px/{symbol}"))
            .call()
            .map(|r| String::from_utf8_lossy(r.body()).into_owned())
    }
}

fn show(result: Result<Answer<String, Error>, LookupError<Error>>) {
    match result {
        Ok(answer) => {
            let source = match answer.origin() {
                Origin::Cache { age } => format!("{} (cached, {age:.1?} old)", answer.link()),
                _ => answer.link().to_owned(),
            };
            println!("   {:<14} from {source}", answer.value());
            for skipped in answer.skipped() {
                println!("      skipped {skipped}");
            }
        }
        Err(err) => println!("   NO ANSWER: {err}"),
    }
}

// ------------------------------------------------------------ the vendors

#[derive(Clone, Copy)]
enum Mode {
    Healthy = 0,
    Slow = 1,
    Down = 2,
}

/// A small HTTP server on loopback that answers `price` (and its name), a
/// second late, or 503, as its mode says.
struct Vendor {
    url: String,
    mode: Arc<AtomicU8>,
    requests: Arc<AtomicU64>,
}

impl Vendor {
    fn start(name: &'static str, price: &'static str) -> std::io::Result<Vendor> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}", listener.local_addr()?);
        let mode = Arc::new(AtomicU8::new(Mode::Healthy as u8));
        let requests = Arc::new(AtomicU64::new(0));
        let (m, r) = (Arc::clone(&mode), Arc::clone(&requests));
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (m, r) = (Arc::clone(&m), Arc::clone(&r));
                thread::spawn(move || answer(stream, &m, &r, name, price));
            }
        });
        Ok(Vendor {
            url,
            mode,
            requests,
        })
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

fn answer(mut stream: TcpStream, mode: &AtomicU8, requests: &AtomicU64, name: &str, price: &str) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let (status, body) = match mode.load(Ordering::SeqCst) {
        0 => ("200 OK", format!("{price} {name}")),
        1 => {
            thread::sleep(Duration::from_secs(1));
            ("200 OK", format!("{price} {name}"))
        }
        _ => ("503 Service Unavailable", String::new()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}
