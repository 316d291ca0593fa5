//! The guarded client's overhead over a bare `ureq` agent, both calling the
//! same loopback server in the same run.
//!
//! Both sides read the whole body into memory (the guarded client always
//! does), both agents keep their connection alive, and both have the same
//! configuration. The server is a plain `std::net` HTTP/1.1 responder on
//! 127.0.0.1.
//!
//! Run with `cargo bench -p fusebox-benches --bench http`.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use criterion::Criterion;
use fusebox::http::{GuardedClient, LastKnownGood};
use fusebox::{Breaker, CallPath, State};

const BODY: &[u8] = br#"{"symbol":"ESZ6","px":"5321.25"}"#;

/// Answers every request on a kept-alive connection with a small 200.
fn serve(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut writer = stream;
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        BODY.len()
    );
    let mut line = String::new();
    loop {
        // Request head: lines up to the empty one. GETs carry no body.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(BODY).is_err() {
            return;
        }
    }
}

fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    format!("http://{addr}/instruments/ESZ6")
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .http_status_as_error(false)
        .build()
        .into()
}

fn breaker(name: &str) -> Breaker {
    Breaker::builder(name)
        .call_path(CallPath::ReferenceData)
        .classifier(fusebox::http::HttpClassifier::new())
        .open_duration(Duration::from_secs(3600))
        .max_open_duration(Duration::from_secs(3600))
        .build()
        .expect("valid config")
}

fn bench(c: &mut Criterion) {
    let url = start_server();
    let bare = agent();
    let guarded = GuardedClient::new(agent(), breaker("vendor")).expect("agent has a timeout");
    let plain = agent();
    let wrapped = breaker("closure");
    let cache = LastKnownGood::new(Duration::from_secs(60));

    let mut g = c.benchmark_group("http");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    g.bench_function("bare_agent", |b| {
        b.iter(|| {
            let mut response = bare.get(&url).call().expect("loopback call");
            black_box(response.body_mut().read_to_vec().expect("body"))
        })
    });
    g.bench_function("guarded_client", |b| {
        b.iter(|| black_box(guarded.get(&url).call().expect("loopback call")))
    });
    g.bench_function("guarded_client_or_stale", |b| {
        b.iter(|| black_box(guarded.get(&url).call_or_stale(&cache).expect("served")))
    });
    g.bench_function("breaker_call_around_agent", |b| {
        b.iter(|| {
            black_box(
                wrapped
                    .call(|| {
                        let mut response = plain.get(&url).call()?;
                        response.body_mut().read_to_vec()
                    })
                    .expect("loopback call"),
            )
        })
    });
    assert_eq!(guarded.breaker().state(), State::Closed);

    // Refused: the request never leaves the process.
    let refused = GuardedClient::new(agent(), breaker("refused")).expect("agent has a timeout");
    refused.breaker().force_open("bench", "refusal cost");
    g.bench_function("guarded_client_refused", |b| {
        b.iter(|| black_box(refused.get(&url).call().unwrap_err()))
    });
    g.finish();
}

/// The guarded client's time over the bare agent's, measured in
/// alternating rounds so that drift in the machine's load hits both alike:
/// the median of the per-round ratios.
fn paired_ratio() {
    const ROUNDS: usize = 201;
    const CALLS: usize = 25;
    let url = start_server();
    let bare = agent();
    let guarded = GuardedClient::new(agent(), breaker("paired")).expect("agent has a timeout");
    let bare_call = || {
        let mut response = bare.get(&url).call().expect("loopback call");
        black_box(response.body_mut().read_to_vec().expect("body"));
    };
    let guarded_call = || {
        black_box(guarded.get(&url).call().expect("loopback call"));
    };
    let time = |f: &dyn Fn()| {
        let start = std::time::Instant::now();
        for _ in 0..CALLS {
            f();
        }
        start.elapsed().as_secs_f64() / CALLS as f64
    };
    for _ in 0..CALLS {
        bare_call();
        guarded_call();
    }
    let mut ratios = Vec::with_capacity(ROUNDS);
    let mut bare_times = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        // Alternate which side goes first.
        let (b, g) = if round % 2 == 0 {
            let b = time(&bare_call);
            (b, time(&guarded_call))
        } else {
            let g = time(&guarded_call);
            (time(&bare_call), g)
        };
        ratios.push(g / b);
        bare_times.push(b);
    }
    ratios.sort_by(f64::total_cmp);
    bare_times.sort_by(f64::total_cmp);
    println!(
        "\nhttp paired: guarded client / bare agent = {:.3} (median of {ROUNDS} rounds of \
         {CALLS} calls each; quartiles {:.3} to {:.3}); bare call median {:.1} us",
        ratios[ROUNDS / 2],
        ratios[ROUNDS / 4],
        ratios[3 * ROUNDS / 4],
        bare_times[ROUNDS / 2] * 1e6
    );
}

fn main() {
    let _upkeep = quanta::Upkeep::new(Duration::from_millis(1))
        .start()
        .expect("start quanta upkeep thread");
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    paired_ratio();
}
