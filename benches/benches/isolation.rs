//! What the isolation layers cost, beside the breaker alone, in one run:
//!
//! - `isolation_closed_success`: one successful call through a closed
//!   breaker, alone and inside a bulkhead (default and cheapest breaker
//!   configurations), and a bulkhead's refusal;
//! - a paired ratio of the same two closed successes, in alternating rounds;
//! - paired ratios of an adaptive bulkhead against a fixed one: a slot taken
//!   and given back, alone and around a breaker's closed success (the rows
//!   `scripts/bench-limits` checks);
//! - a paired ratio of a 1 ms loopback HTTP request made through a deadline
//!   pool against the same request made directly, both through a breaker.
//!
//! Run with `cargo bench -p fusebox-benches --bench isolation`.

use std::hint::black_box;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use fusebox::isolation::{AdaptiveLimit, Bulkhead, DeadlinePool, Isolated};
use fusebox::{Breaker, CallPath, Classifier};

const HOUR: Duration = Duration::from_secs(3600);

#[inline]
fn work() -> Result<u64, io::Error> {
    Ok(black_box(1))
}

fn default_breaker() -> Breaker {
    Breaker::builder("bench")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(HOUR)
        .max_open_duration(HOUR)
        .build()
        .expect("valid config")
}

fn cheapest_breaker() -> Breaker {
    Breaker::builder("bench-cheapest")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(HOUR)
        .max_open_duration(HOUR)
        .consecutive_failure_threshold(5)
        .failure_rate_threshold(None)
        .build()
        .expect("valid config")
}

fn bulkhead() -> Bulkhead {
    Bulkhead::builder("bench")
        .max_concurrent(64)
        .build()
        .expect("valid config")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("isolation_closed_success");
    for (label, breaker) in [
        ("default", default_breaker()),
        ("cheapest", cheapest_breaker()),
    ] {
        let bulkhead = bulkhead();
        g.bench_function(format!("breaker_alone/{label}"), |b| {
            b.iter(|| black_box(breaker.call(work).unwrap()))
        });
        g.bench_function(format!("bulkhead_and_breaker/{label}"), |b| {
            b.iter(|| black_box(bulkhead.call(&breaker, work).unwrap()))
        });
    }
    let full = Bulkhead::builder("full").max_concurrent(1).build().unwrap();
    let _held = full.try_enter().unwrap();
    let breaker = cheapest_breaker();
    g.bench_function("bulkhead_refusal/cheapest", |b| {
        b.iter(|| black_box(full.call(&breaker, work).unwrap_err()))
    });
    g.finish();
}

/// What [`paired`] measured.
struct Paired {
    /// Median, first and third quartiles of the per-round ratios `b / a`.
    median: f64,
    q1: f64,
    q3: f64,
    /// `a`'s and `b`'s median times per call, in seconds.
    a_median: f64,
    b_median: f64,
    /// The fastest round of `b` over the fastest round of `a`: on a loaded
    /// machine, interference only ever adds time, so the fastest rounds are
    /// the ones it touched least.
    fastest: f64,
    /// `a`'s fastest time per call, in seconds.
    a_fastest: f64,
}

/// Times `a` and `b` in alternating rounds of `calls` calls each, so that
/// drift in the machine's load hits both alike.
fn paired(rounds: usize, calls: usize, a: &dyn Fn(), b: &dyn Fn()) -> Paired {
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..calls {
            f();
        }
        start.elapsed().as_secs_f64() / calls as f64
    };
    for _ in 0..calls {
        a();
        b();
    }
    let mut ratios = Vec::with_capacity(rounds);
    let mut a_times = Vec::with_capacity(rounds);
    let mut b_times = Vec::with_capacity(rounds);
    let mut b_fastest = f64::INFINITY;
    for round in 0..rounds {
        let (ta, tb) = if round % 2 == 0 {
            let ta = time(a);
            (ta, time(b))
        } else {
            let tb = time(b);
            (time(a), tb)
        };
        ratios.push(tb / ta);
        a_times.push(ta);
        b_times.push(tb);
        b_fastest = b_fastest.min(tb);
    }
    ratios.sort_by(f64::total_cmp);
    a_times.sort_by(f64::total_cmp);
    b_times.sort_by(f64::total_cmp);
    Paired {
        median: ratios[rounds / 2],
        q1: ratios[rounds / 4],
        q3: ratios[3 * rounds / 4],
        a_median: a_times[rounds / 2],
        b_median: b_times[rounds / 2],
        fastest: b_fastest / a_times[0],
        a_fastest: a_times[0],
    }
}

fn paired_closed_success() {
    for (label, breaker) in [
        ("default", default_breaker()),
        ("cheapest", cheapest_breaker()),
    ] {
        let bulkhead = bulkhead();
        let p = paired(
            201,
            100_000,
            &|| {
                black_box(breaker.call(work).unwrap());
            },
            &|| {
                black_box(bulkhead.call(&breaker, work).unwrap());
            },
        );
        println!(
            "isolation paired ({label}): bulkhead + breaker / breaker alone = {:.2} \
             (median of 201 rounds of 100000 calls; quartiles {:.2} to {:.2}); \
             fastest rounds {:.2}; breaker alone median {:.1} ns, fastest {:.1} ns",
            p.median,
            p.q1,
            p.q3,
            p.fastest,
            p.a_median * 1e9,
            p.a_fastest * 1e9,
        );
    }
}

/// An adaptive bulkhead's admission and release against a fixed one's, both
/// of 64 slots (one thread calls, so the adaptive one times one call in
/// 2^k, k following the rate), alone and around a breaker's closed success.
/// Printed as the table `scripts/bench-limits` reads.
fn paired_adaptive() {
    let fixed = bulkhead();
    let adaptive = Bulkhead::builder("bench-adaptive")
        .max_concurrent(64)
        .adaptive(AdaptiveLimit::new())
        .build()
        .expect("valid config");
    let breaker = cheapest_breaker();
    println!("\n## Paired ratios, adaptive bulkhead (201 alternating rounds of 100000 calls)\n");
    println!("| fusebox | against | ratio | fusebox ns | other ns |");
    println!("|---|---|---:|---:|---:|");
    let row = |what: &str, against: &str, p: Paired| {
        println!(
            "| {what} | {against} | {:.2} | {:.2} | {:.2} |",
            p.median,
            p.b_median * 1e9,
            p.a_median * 1e9
        );
    };
    row(
        "adaptive bulkhead, admission and release",
        "fixed bulkhead",
        paired(
            201,
            100_000,
            &|| drop(black_box(fixed.try_enter().unwrap())),
            &|| drop(black_box(adaptive.try_enter().unwrap())),
        ),
    );
    row(
        "adaptive bulkhead + breaker, cheapest",
        "fixed bulkhead + breaker, cheapest",
        paired(
            201,
            100_000,
            &|| {
                black_box(fixed.call(&breaker, work).unwrap());
            },
            &|| {
                black_box(adaptive.call(&breaker, work).unwrap());
            },
        ),
    );
    let snap = adaptive.snapshot();
    assert_eq!(snap.limit, 64, "a healthy limit stays at its ceiling");
    assert!(
        snap.adaptive.and_then(|a| a.latency).is_some(),
        "windows were judged"
    );
}

// ---------------------------------------------------------- loopback HTTP

/// Answers every request on a kept-alive connection with a small 200 after
/// `delay`.
fn serve(stream: TcpStream, delay: Duration) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    let mut line = String::new();
    loop {
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        std::thread::sleep(delay);
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

fn start_server(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream, delay));
        }
    });
    format!("http://{addr}/price")
}

fn get(agent: &ureq::Agent, url: &str) -> Result<Vec<u8>, ureq::Error> {
    let mut response = agent.get(url).call()?;
    response.body_mut().read_to_vec()
}

fn paired_deadline_pool() {
    const ROUNDS: usize = 101;
    const CALLS: usize = 10;
    let url: Arc<str> = start_server(Duration::from_millis(1)).into();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .into();
    let breaker = Breaker::builder("bench-http")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .build()
        .expect("valid config");
    let pool = Isolated::new(breaker.clone()).with_deadline_pool(
        DeadlinePool::builder("bench-http")
            .threads(4)
            .deadline(Duration::from_secs(2))
            .build()
            .expect("valid pool"),
    );
    let direct = || {
        black_box(breaker.call(|| get(&agent, &url)).expect("loopback call"));
    };
    let pooled = || {
        let (agent, url) = (agent.clone(), Arc::clone(&url));
        black_box(pool.call(move || get(&agent, &url)).expect("loopback call"));
    };
    let p = paired(ROUNDS, CALLS, &direct, &pooled);
    println!(
        "isolation paired: 1 ms loopback request through the deadline pool / direct = \
         {:.3} (median of {ROUNDS} rounds of {CALLS} calls; quartiles {:.3} to {:.3}); \
         fastest rounds {:.3}; direct median {:.0} us",
        p.median,
        p.q1,
        p.q3,
        p.fastest,
        p.a_median * 1e6
    );
}

fn main() {
    let _upkeep = quanta::Upkeep::new(Duration::from_millis(1))
        .start()
        .expect("start quanta upkeep thread");
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    paired_closed_success();
    paired_adaptive();
    paired_deadline_pool();
}
