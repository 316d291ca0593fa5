//! What fleet mode costs a trading thread: a closed success, a refusal and
//! a recorded failure on a breaker joined to a fleet (its agent running
//! against a real `redis-server` on loopback), against the same call on a
//! breaker alone, in alternating runs of equal length in one process.
//!
//! Plain timing loops, no Criterion: each figure is the median over the
//! runs of the mean time per call, and the report prints fleet / local.
//!
//! Needs `redis-server` on the PATH (`scripts/test` installs it). Run with
//! `cargo bench -p fusebox-benches --bench fleet`.

use std::hint::black_box;
use std::io;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fusebox::fleet::Fleet;
use fusebox::{Breaker, CallPath, Classifier, State};

const RUNS: usize = 21;
const CALLS: u32 = 1_000_000;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis() -> (Server, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server on the PATH (scripts/test installs it)");
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), format!("redis://127.0.0.1:{port}/"))
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
    let (_server, url) = redis();
    let fleet = Fleet::builder(url).prefix("bench").build().expect("fleet");
    let wait = |cond: &dyn Fn() -> bool| {
        let t = Instant::now();
        while !cond() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the fleet did not answer"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait(&|| fleet.snapshot().connected);

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
    wait(&|| fleet.snapshot().published >= 1);
    assert_eq!((local.state(), shared.state()), (State::Open, State::Open));
    paired("refusal", &local, &shared, ok);
    println!("fleet agent: {:?}", fleet.snapshot());
}
