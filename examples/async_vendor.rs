//! A pricing vendor called from tokio through a tower stack with a breaker
//! in it: the vendor answers, then fails with 503s, then hangs, then
//! recovers, while a quote loop asks it every 100 ms and a shutdown signal
//! ends the loop mid-call.
//!
//! The vendor is a real HTTP server on a loopback port, started here on the
//! same runtime. The client is a `tower::service_fn` over a `TcpStream`
//! (where an application would have hyper or reqwest), wrapped in
//! `ServiceBuilder::new().layer(BreakerLayer::new(..)).timeout(..)`.
//!
//! ```sh
//! cargo run --example async_vendor --features async,tower
//! ```
//!
//! What to look for:
//!
//! - A 503 is a response, not an error: the breaker's result classifier
//!   counts it as the vendor's failure, and three in a row open the breaker.
//!   The quotes after that are the last known price, served at once, and the
//!   vendor sees no request until the open period is over.
//! - While the vendor hangs, the timeout inside the breaker's layer is the
//!   call's error: a failed probe, and the breaker opens again, for longer.
//! - The shutdown signal wins a `select!` against a call in flight: the call
//!   is dropped, and the breaker counts it as cancelled, not as a failure.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fusebox::http::HttpClassifier;
use fusebox::tower::BreakerLayer;
use fusebox::{Breaker, CallPath, Rejected, ResultClassifier, Verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// What the vendor does with each request.
const HEALTHY: u8 = 0;
const FAILING: u8 = 1;
const HANGING: u8 = 2;

type Response = http::Response<String>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let started = Instant::now();
    let (vendor, mode) = start_vendor().await?;

    // One breaker for the vendor: three failures in a row open it for
    // 500 ms, then longer after a failed probe. A 5xx response is a
    // failure, a 4xx the caller's business; a transport error or a
    // timeout is a failure (the HTTP classifier).
    let breaker = Breaker::builder("pricing-vendor")
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .result_classifier(ResultClassifier::for_type(|r: &Response| {
            match r.status().as_u16() {
                ..400 => Verdict::Success,
                status => HttpClassifier::new().verdict_for_status(status, None),
            }
        }))
        .consecutive_failure_threshold(3)
        .open_duration(Duration::from_millis(500))
        .on_state_change(move |change| {
            let at = started.elapsed().as_secs_f64();
            println!(
                "{at:5.1}s  breaker {} -> {} ({})",
                change.from, change.to, change.reason
            );
        })
        .build()?;

    // The breaker outside the timeout: an elapsed timeout is the vendor's
    // failure. (Outside it, the timeout would cancel the call instead.)
    let mut quotes = ServiceBuilder::new()
        .layer(BreakerLayer::new(breaker.clone()))
        .timeout(Duration::from_millis(200))
        .service_fn(move |symbol: &'static str| get(vendor, symbol));

    // The vendor's story, on the side.
    tokio::spawn(async move {
        for (after, next, what) in [
            (700, FAILING, "answers 503"),
            (1_200, HANGING, "hangs"),
            (1_800, HEALTHY, "recovers"),
        ] {
            tokio::time::sleep(Duration::from_millis(after)).await;
            mode.store(next, Ordering::SeqCst);
            println!("{:5.1}s  vendor {what}", started.elapsed().as_secs_f64());
        }
    });
    let (shutdown, mut stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5_050)).await;
        let _ = shutdown.send(true);
    });

    let mut last_known: Option<String> = None;
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    loop {
        ticks.tick().await;
        let call = quotes.ready().await?.call("EURUSD");
        let answer = tokio::select! {
            answer = call => answer,
            _ = stopping.changed() => {
                println!("{:5.1}s  shutting down: the call in flight is dropped", started.elapsed().as_secs_f64());
                break;
            }
        };
        let at = started.elapsed().as_secs_f64();
        match answer {
            Ok(r) if r.status().is_success() => {
                println!("{at:5.1}s  EURUSD {}", r.body());
                last_known = Some(r.into_body());
            }
            Ok(r) => println!("{at:5.1}s  vendor answered {}", r.status()),
            // Nothing was sent: the fallback, at once.
            Err(e) if e.is::<Rejected>() => match &last_known {
                Some(px) => println!("{at:5.1}s  EURUSD {px} (last known: {e})"),
                None => println!("{at:5.1}s  no price ({e})"),
            },
            Err(e) => println!("{at:5.1}s  vendor failed: {e}"),
        }
    }

    let t = breaker.snapshot().totals;
    println!(
        "\ncalls {}: {} successes, {} failures; {} refused without a request; {} cancelled",
        t.calls, t.successes, t.failures, t.short_circuits, t.cancelled
    );
    Ok(())
}

/// Starts the vendor on a loopback port: its address, and the switch of
/// what it does.
async fn start_vendor() -> std::io::Result<(std::net::SocketAddr, Arc<AtomicU8>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mode = Arc::new(AtomicU8::new(HEALTHY));
    let serving = Arc::clone(&mode);
    tokio::spawn(async move {
        let mut price = 1.0840_f64;
        while let Ok((mut conn, _)) = listener.accept().await {
            price += 0.0001;
            let mode = serving.load(Ordering::SeqCst);
            tokio::spawn(async move {
                let mut request = [0_u8; 1024];
                let _ = conn.read(&mut request).await;
                let (status, body) = match mode {
                    HEALTHY => ("200 OK", format!("{price:.4}")),
                    FAILING => ("503 Service Unavailable", String::new()),
                    // Holds the connection until the client gives up.
                    _ => return tokio::time::sleep(Duration::from_secs(5)).await,
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all((head + &body).as_bytes()).await;
            });
        }
    });
    Ok((addr, mode))
}

/// The vendor's client: `GET /quote/SYMBOL` on a connection of its own.
async fn get(vendor: std::net::SocketAddr, symbol: &str) -> Result<Response, BoxError> {
    let mut conn = TcpStream::connect(vendor).await?;
    let request =
        format!("GET /quote/{symbol} HTTP/1.1\r\nHost: {vendor}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or("no end of head")?;
    let status: u16 = head.split(' ').nth(1).ok_or("no status")?.parse()?;
    Ok(http::Response::builder()
        .status(status)
        .body(body.to_owned())?)
}
