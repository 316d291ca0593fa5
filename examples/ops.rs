//! A trading process as its operators see it: a registry of breakers loaded
//! from `examples/ops.toml`, two alt-data vendors and a reference-data
//! service called by worker threads, and the admin endpoint on loopback.
//!
//! ```sh
//! cargo run --example ops --features admin,serde             # runs for 5 seconds
//! cargo run --example ops --features admin,serde -- 600      # or as long as you say
//! FUSEBOX_ADMIN_TOKEN=... cargo run --example ops --features admin,serde -- forever
//! ```
//!
//! While it runs, the curl lines it prints (and docs/ops.md) read and steer
//! it. The `sentiment` vendor has bursts of timeouts, so it trips now and
//! then; `news` is healthy; `instruments` is critical, so forcing it open
//! turns `/health` to 503.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fusebox::admin::{Admin, AdminConfig};
use fusebox::config_file::Loader;
use fusebox::registry::Registry;
use fusebox::{Breaker, Classifier, Verdict};

const CONFIG: &str = include_str!("ops.toml");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run_for = match std::env::args().nth(1).as_deref() {
        None => Some(Duration::from_secs(5)),
        Some("forever") => None,
        Some(secs) => Some(Duration::from_secs(secs.parse()?)),
    };
    // Timeouts and refused connections are the vendors' failures; anything
    // else is the caller's business.
    let transport = Classifier::new(|e| match e.downcast_ref::<io::Error>() {
        Some(e)
            if matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Verdict::Failure
        }
        _ => Verdict::Ignore,
    });
    let registry = Registry::new();
    Loader::new()
        .classifier("transport", transport)
        .load_toml(CONFIG, &registry)?;

    let token = std::env::var("FUSEBOX_ADMIN_TOKEN").unwrap_or_else(|_| example_token());
    let admin = Admin::start(
        &registry,
        AdminConfig::new(&token).bind("127.0.0.1:0".parse()?),
    )?;
    let base = format!("http://{}", admin.addr());
    println!("admin endpoint on {base}");
    println!("  curl -s {base}/breakers | jq .");
    println!("  curl -s {base}/metrics");
    println!("  curl -s -o /dev/null -w '%{{http_code}}\\n' {base}/health");
    println!("  curl -s {base}/health/readiness | jq .");
    println!("  curl -s {base}/breakers/news/events | jq .");
    println!(
        "  curl -s -X POST -H 'Authorization: Bearer {token}' \\\n       -d '{{\"actor\":\"alice\",\"reason\":\"vendor maintenance\"}}' {base}/breakers/instruments/force-open"
    );
    println!("  curl -s {base}/audit | jq .");

    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = ["news", "sentiment", "instruments"]
        .into_iter()
        .map(|name| {
            let breaker = registry.get(name).expect("in ops.toml");
            let stop = Arc::clone(&stop);
            thread::spawn(move || worker(&breaker, &stop))
        })
        .collect();

    let started = Instant::now();
    while run_for.is_none_or(|d| started.elapsed() < d) {
        thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    for s in registry.snapshots() {
        println!(
            "{:<12} {:<12} calls {:>5}  failures {:>4}  short-circuits {:>5}  trips {}",
            s.name, s.state, s.totals.calls, s.totals.failures, s.totals.short_circuits, s.trips
        );
    }
    admin.stop();
    Ok(())
}

/// Calls the breaker's vendor every 10 ms; `sentiment` times out on ten
/// calls in a row out of every fifty, so it trips and recovers now and then.
fn worker(breaker: &Breaker, stop: &AtomicBool) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let flaky = breaker.name() == "sentiment" && n % 50 < 10;
        let _ = breaker.call(|| {
            if flaky {
                Err(io::Error::from(io::ErrorKind::TimedOut))
            } else {
                Ok(n)
            }
        });
        thread::sleep(Duration::from_millis(10));
    }
}

/// A token for a local demonstration only; a real process reads its token
/// from the environment or a secrets file.
fn example_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("example-{:x}-{:x}", nanos, std::process::id())
}
