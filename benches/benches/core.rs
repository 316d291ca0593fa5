//! The hot path, measured side by side in one run: fusebox, the baselines
//! that bound it from below, and the peer crates a user already knows.
//!
//! Every scenario is one Criterion group, and every contestant in it runs in
//! the same process, one after the other:
//!
//! - `closed_success`: one successful call through a closed breaker.
//! - `open_rejection`: one call refused by an open breaker (the open period is
//!   an hour long, so the refusal has to read the clock and compare).
//! - `two_threads`: two threads calling one closed breaker; the time is the
//!   aggregate per call (wall time over calls made by both threads).
//! - `snapshot`: one `Breaker::snapshot`.
//!
//! fusebox reads its clock directly on every decision and ignores quanta's
//! recent time. The bench starts an upkeep thread before the baselines all
//! the same, so that the `floor` baseline's `quanta::Instant::recent()` is the
//! single atomic load it stands for (with no upkeep thread, quanta reads the
//! clock instead).
//!
//! After the groups, the binary reads Criterion's estimates back and prints
//! the ratio table that `docs/performance.md` holds, then measures the
//! comparisons the targets rest on as paired ratios: the two sides alternate
//! in short rounds, so a change in the machine's load hits both. A filter
//! that matches no group (`-- paired`) runs only those.
//!
//! Run with `cargo bench -p fusebox-benches --bench core`.

use std::hint::black_box;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use failsafe::{backoff, failure_policy, CircuitBreaker as _};
use fusebox::{Breaker, CallPath, Classifier, State, Verdict};
use parking_lot::Mutex;
use recloser::Recloser;

/// Long enough that an open breaker stays open through a whole benchmark.
const HOUR: Duration = Duration::from_secs(3600);

/// The work a guarded call does: nothing, opaquely.
#[inline]
fn work() -> Result<u64, io::Error> {
    Ok(black_box(1))
}

fn fail() -> Result<u64, io::Error> {
    Err(io::Error::from(io::ErrorKind::TimedOut))
}

// ---------------------------------------------------------------------------
// Contestants

/// fusebox with its default configuration (consecutive failures and the
/// failure-rate window on).
fn fusebox_default(open_duration: Duration) -> Breaker {
    default_builder(open_duration)
        .build()
        .expect("valid config")
}

fn default_builder(open_duration: Duration) -> fusebox::BreakerBuilder {
    Breaker::builder("bench")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(open_duration)
        .max_open_duration(open_duration.max(Duration::from_secs(300)))
}

/// fusebox with its cheapest configuration: consecutive failures only, no
/// window, no slow-call timing.
fn fusebox_cheapest(open_duration: Duration) -> Breaker {
    cheapest_builder(open_duration)
        .build()
        .expect("valid config")
}

fn cheapest_builder(open_duration: Duration) -> fusebox::BreakerBuilder {
    default_builder(open_duration)
        .consecutive_failure_threshold(5)
        .failure_rate_threshold(None)
}

fn tripped(breaker: Breaker) -> Breaker {
    for _ in 0..5 {
        let _ = breaker.call(fail);
    }
    assert_eq!(breaker.state(), State::Open);
    breaker
}

type FailsafeDefault = failsafe::StateMachine<
    failure_policy::OrElse<
        failure_policy::SuccessRateOverTimeWindow<backoff::EqualJittered>,
        failure_policy::ConsecutiveFailures<backoff::EqualJittered>,
    >,
    (),
>;
type FailsafeConsecutive =
    failsafe::StateMachine<failure_policy::ConsecutiveFailures<backoff::Constant>, ()>;

/// failsafe's `Config::new()`: success rate over a window, or else five
/// consecutive failures.
fn failsafe_default() -> FailsafeDefault {
    failsafe::Config::new().build()
}

/// failsafe with five consecutive failures and a constant back-off.
fn failsafe_consecutive(open_duration: Duration) -> FailsafeConsecutive {
    failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(open_duration),
        ))
        .build()
}

/// failsafe's default policy, with the back-off of both halves an hour long
/// so that it stays open through the benchmark. The open path is the same
/// code as with the default back-off.
fn failsafe_default_open() -> impl failsafe::CircuitBreaker {
    let rate = failure_policy::success_rate_over_time_window(
        0.8,
        5,
        Duration::from_secs(30),
        backoff::constant(HOUR),
    );
    let consecutive = failure_policy::consecutive_failures(5, backoff::constant(HOUR));
    failsafe::Config::new()
        .failure_policy(failure_policy::FailurePolicy::or_else(rate, consecutive))
        .build()
}

fn recloser_default() -> Recloser {
    Recloser::default()
}

/// recloser with its defaults except a long open period. It opens once its
/// ring of 100 calls is full (the 101st call) and half of them failed.
fn recloser_open() -> Recloser {
    let r = Recloser::custom().open_wait(HOUR).build();
    for _ in 0..=100 {
        let _ = r.call(fail);
    }
    assert!(
        matches!(r.call(work), Err(recloser::Error::Rejected)),
        "recloser did not open"
    );
    r
}

// ---------------------------------------------------------------------------
// Groups

fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .sample_size(60);
    g
}

/// lock + `recent()` + the closure: what any breaker that keeps its counts
/// under a lock must at least do on a successful call.
fn floor(m: &Mutex<quanta::Instant>) {
    black_box(work()).ok();
    let now = quanta::Instant::recent();
    *m.lock() = black_box(now);
}

/// The gate word of an open breaker, as the refusal floor reads it: the
/// state in the low two bits, the end of the open period above them.
const OPEN_GATE: u64 = 1;

/// One atomic load and one direct clock read, compared: what a refusal
/// that keeps time correctly must at least do. The deadline is nanoseconds
/// since `base`, as fusebox keeps it.
fn refusal_floor(gate: &AtomicU64, clock: &quanta::Clock, base: quanta::Instant) -> bool {
    let word = gate.load(Ordering::Acquire);
    let now = clock.now().duration_since(base).as_nanos() as u64;
    word & 3 == OPEN_GATE && now < word >> 2
}

/// The same with the deadline kept in the clock's raw ticks: no scaling.
fn refusal_floor_raw(gate: &AtomicU64, clock: &quanta::Clock) -> bool {
    let word = gate.load(Ordering::Acquire);
    word & 3 == OPEN_GATE && clock.raw() < word >> 2
}

/// A line of its own per thread, for the closed-success floor.
#[repr(align(128))]
struct OwnLine(AtomicU64);

/// The closure, one atomic load of a shared closed gate word, and one
/// compare-and-swap on a line the calling thread has to itself: what a
/// closed success counted without a lock, in the period it was admitted in,
/// must at least do.
fn success_floor(gate: &AtomicU64, line: &OwnLine) {
    black_box(work()).ok();
    let word = gate.load(Ordering::Acquire);
    let n = line.0.load(Ordering::Relaxed);
    if word & 3 == 0 {
        let _ = line
            .0
            .compare_exchange(n, n + 1, Ordering::Relaxed, Ordering::Relaxed);
    }
}

fn baselines(c: &mut Criterion) {
    let mut g = configure(c, "baseline");
    g.bench_function("closure", |b| b.iter(work));
    let lock = Mutex::new(0_u64);
    g.bench_function("lock", |b| {
        b.iter(|| {
            *lock.lock() += 1;
        })
    });
    g.bench_function("quanta_now", |b| b.iter(quanta::Instant::now));
    g.bench_function("quanta_recent", |b| b.iter(quanta::Instant::recent));
    let clock = quanta::Clock::new();
    g.bench_function("quanta_clock_now", |b| b.iter(|| clock.now()));
    g.bench_function("quanta_clock_raw", |b| b.iter(|| clock.raw()));
    g.bench_function("std_now", |b| b.iter(Instant::now));
    let m = Mutex::new(quanta::Instant::now());
    g.bench_function("floor", |b| b.iter(|| floor(&m)));
    // An hour from now, in nanoseconds since `base` and in raw ticks.
    let base = clock.now();
    let hour = HOUR.as_nanos() as u64;
    let gate = AtomicU64::new((hour << 2) | OPEN_GATE);
    g.bench_function("refusal_floor", |b| {
        b.iter(|| refusal_floor(&gate, &clock, base))
    });
    let raw_deadline = clock.raw() + (hour as f64 * ticks_per_nano(&clock)) as u64;
    let raw_gate = AtomicU64::new((raw_deadline << 2) | OPEN_GATE);
    g.bench_function("refusal_floor_raw", |b| {
        b.iter(|| refusal_floor_raw(&raw_gate, &clock))
    });
    assert!(refusal_floor(&gate, &clock, base) && refusal_floor_raw(&raw_gate, &clock));
    g.finish();
}

fn closed_success(c: &mut Criterion) {
    let mut g = configure(c, "closed_success");
    let d = fusebox_default(HOUR);
    g.bench_function("fusebox_default", |b| b.iter(|| d.call(work)));
    let cheap = fusebox_cheapest(HOUR);
    g.bench_function("fusebox_cheapest", |b| b.iter(|| cheap.call(work)));
    g.bench_function("fusebox_cheapest_permit", |b| {
        b.iter(|| match cheap.try_acquire() {
            Ok(permit) => permit.record(Verdict::Success),
            Err(rejected) => panic!("{rejected}"),
        })
    });
    let fd = failsafe_default();
    g.bench_function("failsafe_default", |b| b.iter(|| fd.call(work)));
    let fc = failsafe_consecutive(HOUR);
    g.bench_function("failsafe_consecutive", |b| b.iter(|| fc.call(work)));
    let r = recloser_default();
    g.bench_function("recloser", |b| b.iter(|| r.call(work)));
    assert_eq!(d.state(), State::Closed);
    assert_eq!(cheap.state(), State::Closed);
    g.finish();
}

fn open_rejection(c: &mut Criterion) {
    let mut g = configure(c, "open_rejection");
    let d = tripped(fusebox_default(HOUR));
    g.bench_function("fusebox_default", |b| b.iter(|| d.call(work)));
    let cheap = tripped(fusebox_cheapest(HOUR));
    g.bench_function("fusebox_cheapest", |b| b.iter(|| cheap.call(work)));
    let forced = fusebox_cheapest(HOUR);
    forced.force_open("bench", "forced open");
    g.bench_function("fusebox_forced_open", |b| b.iter(|| forced.call(work)));
    let fd = failsafe_default_open();
    for _ in 0..5 {
        let _ = fd.call(fail);
    }
    assert!(!fd.is_call_permitted(), "failsafe default did not open");
    g.bench_function("failsafe_default", |b| b.iter(|| fd.call(work)));
    let fc = failsafe_consecutive(HOUR);
    for _ in 0..5 {
        let _ = fc.call(fail);
    }
    assert!(!fc.is_call_permitted(), "failsafe consecutive did not open");
    g.bench_function("failsafe_consecutive", |b| b.iter(|| fc.call(work)));
    let r = recloser_open();
    g.bench_function("recloser", |b| b.iter(|| r.call(work)));
    for b in [&d, &cheap] {
        assert_eq!(b.state(), State::Open, "a breaker closed during the run");
    }
    assert!(!fd.is_call_permitted() && !fc.is_call_permitted());
    g.finish();
}

/// Runs `f` on two threads at once, `iters` times each, and reports the
/// aggregate time per call: from the moment both start until the last one
/// finishes, over the calls both made. Thread start-up is outside the timing.
fn on_two_threads<F: Fn() + Sync>(iters: u64, f: &F) -> Duration {
    let barrier = Barrier::new(2);
    let run = || {
        barrier.wait();
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        (start, Instant::now())
    };
    let ((s1, e1), (s2, e2)) = std::thread::scope(|s| {
        let other = s.spawn(run);
        let mine = run();
        (mine, other.join().expect("bench thread panicked"))
    });
    let elapsed = e1.max(e2).duration_since(s1.min(s2));
    // Criterion divides by `iters`; each iteration made two calls.
    elapsed / 2
}

fn two_threads(c: &mut Criterion) {
    let mut g = configure(c, "two_threads");
    // Equal iteration counts per sample keep the fixed cost of starting two
    // threads a negligible share of each sample.
    g.sampling_mode(SamplingMode::Flat).sample_size(30);
    let lock = Mutex::new(0_u64);
    g.bench_function("mutex", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                *lock.lock() += 1;
            })
        })
    });
    let m = Mutex::new(quanta::Instant::now());
    g.bench_function("floor", |b| {
        b.iter_custom(|n| on_two_threads(n, &|| floor(&m)))
    });
    let d = fusebox_default(HOUR);
    g.bench_function("fusebox_default", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                let _ = black_box(d.call(work));
            })
        })
    });
    let cheap = fusebox_cheapest(HOUR);
    g.bench_function("fusebox_cheapest", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                let _ = black_box(cheap.call(work));
            })
        })
    });
    let fd = Arc::new(failsafe_default());
    g.bench_function("failsafe_default", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                let _ = black_box(fd.call(work));
            })
        })
    });
    let fc = failsafe_consecutive(HOUR);
    g.bench_function("failsafe_consecutive", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                let _ = black_box(fc.call(work));
            })
        })
    });
    let r = recloser_default();
    g.bench_function("recloser", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                let _ = black_box(r.call(work));
            })
        })
    });
    let open = tripped(fusebox_cheapest(HOUR));
    g.bench_function("fusebox_open", |b| {
        b.iter_custom(|n| {
            on_two_threads(n, &|| {
                let _ = black_box(open.call(work));
            })
        })
    });
    assert_eq!(open.state(), State::Open);
    g.finish();
}

fn snapshot(c: &mut Criterion) {
    let mut g = configure(c, "snapshot");
    let fresh = fusebox_default(HOUR);
    for _ in 0..50 {
        let _ = fresh.call(work);
    }
    g.bench_function("fusebox_closed", |b| b.iter(|| fresh.snapshot()));
    let open = tripped(fusebox_default(HOUR));
    g.bench_function("fusebox_open", |b| b.iter(|| open.snapshot()));
    let reset = fusebox_default(HOUR);
    reset.force_open("ops", "maintenance window");
    reset.reset("ops", "maintenance over");
    g.bench_function("fusebox_after_reset", |b| b.iter(|| reset.snapshot()));
    g.finish();
}

// ---------------------------------------------------------------------------
// The ratio table

fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    // target/release/deps/core-<hash>
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors()
        .nth(3)
        .expect("bench binary lives under target/")
        .join("criterion")
}

/// The median time per iteration, in nanoseconds, of `group/bench` in the
/// last run.
fn median(dir: &Path, id: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(id).join("new/estimates.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

struct Row {
    what: &'static str,
    id: &'static str,
    against: &'static [&'static str],
}

const ROWS: &[Row] = &[
    Row {
        what: "closed success, default config",
        id: "closed_success/fusebox_default",
        against: &[
            "baseline/floor",
            "baseline/quanta_clock_now",
            "baseline/closure",
            "baseline/lock",
            "closed_success/recloser",
            "closed_success/failsafe_consecutive",
            "closed_success/failsafe_default",
        ],
    },
    Row {
        what: "closed success, cheapest config",
        id: "closed_success/fusebox_cheapest",
        against: &[
            "baseline/floor",
            "baseline/closure",
            "baseline/lock",
            "closed_success/recloser",
            "closed_success/failsafe_consecutive",
            "closed_success/failsafe_default",
        ],
    },
    Row {
        what: "open rejection, default config",
        id: "open_rejection/fusebox_default",
        against: &[
            "baseline/refusal_floor",
            "baseline/refusal_floor_raw",
            "baseline/quanta_clock_now",
            "baseline/lock",
            "open_rejection/recloser",
            "open_rejection/failsafe_consecutive",
            "open_rejection/failsafe_default",
        ],
    },
    Row {
        what: "open rejection, cheapest config",
        id: "open_rejection/fusebox_cheapest",
        against: &[
            "baseline/refusal_floor",
            "baseline/refusal_floor_raw",
            "baseline/quanta_clock_now",
            "baseline/lock",
            "open_rejection/recloser",
            "open_rejection/failsafe_consecutive",
            "open_rejection/failsafe_default",
        ],
    },
    Row {
        what: "two threads, default config",
        id: "two_threads/fusebox_default",
        against: &[
            "two_threads/mutex",
            "two_threads/floor",
            "two_threads/recloser",
            "two_threads/failsafe_consecutive",
            "two_threads/failsafe_default",
        ],
    },
    Row {
        what: "two threads, cheapest config",
        id: "two_threads/fusebox_cheapest",
        against: &[
            "two_threads/mutex",
            "two_threads/floor",
            "two_threads/recloser",
            "two_threads/failsafe_consecutive",
            "two_threads/failsafe_default",
        ],
    },
    Row {
        what: "snapshot, closed",
        id: "snapshot/fusebox_closed",
        against: &["baseline/lock"],
    },
    Row {
        what: "snapshot, after a reset",
        id: "snapshot/fusebox_after_reset",
        against: &["baseline/lock"],
    },
];

/// A target for the hot path: `id` at most `limit` times each of
/// `against`.
struct Target {
    what: &'static str,
    id: &'static str,
    limit: f64,
    against: &'static [&'static str],
}

const PEERS_CLOSED: &[&str] = &[
    "closed_success/recloser",
    "closed_success/failsafe_consecutive",
    "closed_success/failsafe_default",
];
const PEERS_OPEN: &[&str] = &[
    "open_rejection/recloser",
    "open_rejection/failsafe_consecutive",
    "open_rejection/failsafe_default",
];
const PEERS_TWO: &[&str] = &[
    "two_threads/recloser",
    "two_threads/failsafe_consecutive",
    "two_threads/failsafe_default",
];

const TARGETS: &[Target] = &[
    Target {
        what: "closed success <= 1.3x lock + recent() + closure",
        id: "closed_success/fusebox_cheapest",
        limit: 1.3,
        against: &["baseline/floor"],
    },
    Target {
        what: "closed success <= 1.3x lock + recent() + closure (default config)",
        id: "closed_success/fusebox_default",
        limit: 1.3,
        against: &["baseline/floor"],
    },
    Target {
        what: "closed success below every peer",
        id: "closed_success/fusebox_cheapest",
        limit: 1.0,
        against: PEERS_CLOSED,
    },
    Target {
        what: "closed success below every peer (default config)",
        id: "closed_success/fusebox_default",
        limit: 1.0,
        against: PEERS_CLOSED,
    },
    Target {
        what: "open rejection <= 1.3x one atomic load + one direct clock read",
        id: "open_rejection/fusebox_cheapest",
        limit: 1.3,
        against: &["baseline/refusal_floor"],
    },
    Target {
        what: "open rejection <= 1.3x one atomic load + one direct clock read (default config)",
        id: "open_rejection/fusebox_default",
        limit: 1.3,
        against: &["baseline/refusal_floor"],
    },
    Target {
        what: "open rejection below every peer",
        id: "open_rejection/fusebox_cheapest",
        limit: 1.0,
        against: PEERS_OPEN,
    },
    Target {
        what: "open rejection below every peer (default config)",
        id: "open_rejection/fusebox_default",
        limit: 1.0,
        against: PEERS_OPEN,
    },
    Target {
        what: "two threads <= 1.3x a contended mutex",
        id: "two_threads/fusebox_cheapest",
        limit: 1.3,
        against: &["two_threads/mutex"],
    },
    Target {
        what: "two threads <= 1.3x a contended mutex (default config)",
        id: "two_threads/fusebox_default",
        limit: 1.3,
        against: &["two_threads/mutex"],
    },
    Target {
        what: "two threads below every peer",
        id: "two_threads/fusebox_cheapest",
        limit: 1.0,
        against: PEERS_TWO,
    },
    Target {
        what: "two threads below every peer (default config)",
        id: "two_threads/fusebox_default",
        limit: 1.0,
        against: PEERS_TWO,
    },
];

const GROUPS: &[&str] = &[
    "baseline",
    "closed_success",
    "open_rejection",
    "two_threads",
    "snapshot",
];

fn print_report(dir: &Path) {
    println!("\n## Medians (ns per call)\n");
    println!("| benchmark | ns |");
    println!("|---|---:|");
    for group in GROUPS {
        let Ok(entries) = std::fs::read_dir(dir.join(group)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().join("new/estimates.json").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let id = format!("{group}/{name}");
            if let Some(ns) = median(dir, &id) {
                println!("| {id} | {ns:.2} |");
            }
        }
    }
    println!("\n## Ratios (fusebox / other; below 1.0 means fusebox is cheaper)\n");
    println!("| fusebox | ns | against | ns | ratio |");
    println!("|---|---:|---|---:|---:|");
    for row in ROWS {
        let Some(mine) = median(dir, row.id) else {
            continue;
        };
        for other in row.against {
            if let Some(theirs) = median(dir, other) {
                println!(
                    "| {} | {mine:.2} | {other} | {theirs:.2} | {:.2} |",
                    row.what,
                    mine / theirs
                );
            }
        }
    }
}

fn print_targets(dir: &Path) {
    println!("\n## Targets\n");
    println!("| target | worst ratio | against | met |");
    println!("|---|---:|---|---|");
    for t in TARGETS {
        let Some(mine) = median(dir, t.id) else {
            continue;
        };
        let worst = t
            .against
            .iter()
            .filter_map(|other| Some((mine / median(dir, other)?, *other)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((ratio, other)) = worst {
            let met = if ratio <= t.limit { "yes" } else { "no" };
            println!("| {} | {ratio:.2} | {other} | {met} |", t.what);
        }
    }
}

// ---------------------------------------------------------------------------
// Paired ratios

/// Rounds of a paired comparison, and calls per side in each round.
const ROUNDS: usize = 201;
const CALLS_PER_ROUND: u32 = 5_000;

/// Nanoseconds per call of `f`, over `CALLS_PER_ROUND` calls.
fn per_call(f: &mut impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS_PER_ROUND {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS_PER_ROUND)
}

/// `a`'s time over `b`'s, as the median of per-round ratios: the two sides
/// alternate in short rounds, so a change in the machine's load hits both.
/// Also the median time per call of each side.
fn paired(mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..20 {
        per_call(&mut a);
        per_call(&mut b);
    }
    let mut ratios = Vec::with_capacity(ROUNDS);
    let mut times_a = Vec::with_capacity(ROUNDS);
    let mut times_b = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let (ta, tb) = if round & 1 == 0 {
            let ta = per_call(&mut a);
            (ta, per_call(&mut b))
        } else {
            let tb = per_call(&mut b);
            (per_call(&mut a), tb)
        };
        ratios.push(ta / tb);
        times_a.push(ta);
        times_b.push(tb);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (
        median(&mut ratios),
        median(&mut times_a),
        median(&mut times_b),
    )
}

/// Calls per thread in each round of a two-thread paired comparison.
const TWO_THREAD_CALLS: u32 = 50_000;

/// Like [`paired`], with two threads making the calls: in each round both
/// threads start together (a barrier), each makes `TWO_THREAD_CALLS` calls of
/// the round's side, and the round's time is the span until both are done,
/// over the calls made by both.
fn paired_two(a: impl Fn() + Sync, b: impl Fn() + Sync) -> (f64, f64, f64) {
    let rounds = ROUNDS / 2;
    let barrier = Barrier::new(2);
    let run = |round: usize| {
        for _ in 0..TWO_THREAD_CALLS {
            if round & 1 == 0 {
                a();
            } else {
                b();
            }
        }
    };
    let spans = std::thread::scope(|s| {
        s.spawn(|| {
            for round in 0..2 * rounds {
                barrier.wait();
                run(round);
                barrier.wait();
            }
        });
        let mut spans = Vec::with_capacity(2 * rounds);
        for round in 0..2 * rounds {
            barrier.wait();
            let start = Instant::now();
            run(round);
            barrier.wait();
            spans.push(start.elapsed().as_nanos() as f64 / f64::from(2 * TWO_THREAD_CALLS));
        }
        spans
    });
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios = spans.chunks(2).map(|p| p[0] / p[1]).collect();
    let times_a = spans.iter().step_by(2).copied().collect();
    let times_b = spans.iter().skip(1).step_by(2).copied().collect();
    (median(ratios), median(times_a), median(times_b))
}

/// The comparisons the targets rest on, each measured as a paired ratio.
fn print_paired() {
    let clock = quanta::Clock::new();
    let base = clock.now();
    let hour = HOUR.as_nanos() as u64;
    let gate = AtomicU64::new((hour << 2) | OPEN_GATE);
    let floor = || {
        black_box(refusal_floor(&gate, &clock, base));
    };

    let open_cheap = tripped(fusebox_cheapest(HOUR));
    let open_default = tripped(fusebox_default(HOUR));
    let fc_open = failsafe_consecutive(HOUR);
    let fd_open = failsafe_default_open();
    for _ in 0..5 {
        let _ = fc_open.call(fail);
        let _ = fd_open.call(fail);
    }
    let r_open = recloser_open();

    let cheap = fusebox_cheapest(HOUR);
    let default = fusebox_default(HOUR);
    let fc = failsafe_consecutive(HOUR);
    let fd = failsafe_default();
    let r = recloser_default();

    println!("\n## Paired ratios ({ROUNDS} alternating rounds of {CALLS_PER_ROUND} calls)\n");
    println!("| fusebox | against | ratio | fusebox ns | other ns |");
    println!("|---|---|---:|---:|---:|");
    let row = |what: &str, against: &str, (ratio, a, b): (f64, f64, f64)| {
        println!("| {what} | {against} | {ratio:.2} | {a:.2} | {b:.2} |");
    };
    // Every side is a closure of its own (no dynamic call on either side).
    macro_rules! call {
        ($b:expr) => {
            || {
                let _ = black_box($b.call(work));
            }
        };
    }
    for (what, b) in [
        ("open rejection, cheapest", &open_cheap),
        ("open rejection, default", &open_default),
    ] {
        row(what, "refusal floor", paired(call!(b), floor));
        row(
            what,
            "failsafe consecutive",
            paired(call!(b), call!(fc_open)),
        );
        row(what, "failsafe default", paired(call!(b), call!(fd_open)));
        row(what, "recloser", paired(call!(b), call!(r_open)));
    }
    for (what, b) in [
        ("closed success, cheapest", &cheap),
        ("closed success, default", &default),
    ] {
        row(what, "failsafe consecutive", paired(call!(b), call!(fc)));
        row(what, "failsafe default", paired(call!(b), call!(fd)));
        row(what, "recloser", paired(call!(b), call!(r)));
    }
    let closed_gate = AtomicU64::new(0);
    let lines = [OwnLine(AtomicU64::new(0)), OwnLine(AtomicU64::new(0))];
    // The same comparisons with each side beside one neutral partner, the
    // closure alone: the ratio of the two sides' paired ratios. Neither
    // side then runs after the other's rounds, and a side's rounds can slow
    // the next rounds of other code on this machine (rounds of clock reads
    // slow any fusebox success that follows them; docs/performance.md).
    let alone = || {
        black_box(work()).ok();
    };
    let peers = [
        ("failsafe consecutive", paired(call!(fc), alone)),
        ("failsafe default", paired(call!(fd), alone)),
        ("recloser", paired(call!(r), alone)),
    ];
    for (what, b) in [
        ("closed success, cheapest", &cheap),
        ("closed success, default", &default),
    ] {
        let (ratio, ns, _) = paired(call!(b), alone);
        for (peer, (peer_ratio, peer_ns, _)) in peers {
            let against = format!("{peer}, each beside the closure alone");
            row(what, &against, (ratio / peer_ratio, ns, peer_ns));
        }
    }
    row(
        "closed success, cheapest",
        "closed-success floor",
        paired(call!(cheap), || success_floor(&closed_gate, &lines[0])),
    );
    row(
        "closed success, default",
        "one direct clock read",
        paired(call!(default), || {
            black_box(clock.now());
        }),
    );
    // Each capability configured but idle (closed, no ramp running, no
    // window or deadline near), against the cheapest configuration.
    let day = std::time::SystemTime::now() + Duration::from_secs(86_400);
    let capabilities = [
        (
            "closed success, cheapest + ramp-up",
            cheapest_builder(HOUR).ramp_up(fusebox::RampUp::linear(Duration::from_secs(60), 0.1)),
        ),
        (
            "closed success, cheapest + maintenance window (neutral)",
            cheapest_builder(HOUR).maintenance_window(fusebox::trading::MaintenanceWindow::once(
                day,
                day + Duration::from_secs(3600),
            )),
        ),
        (
            "closed success, cheapest + maintenance window (short-circuit)",
            cheapest_builder(HOUR)
                .maintenance_window(fusebox::trading::MaintenanceWindow::once(
                    day,
                    day + Duration::from_secs(3600),
                ))
                .short_circuit_in_maintenance(true),
        ),
        (
            "closed success, cheapest + deadlines",
            cheapest_builder(HOUR).deadlines(fusebox::trading::Deadlines::at([day])),
        ),
        (
            "closed success, cheapest + result classifier",
            cheapest_builder(HOUR).result_classifier(fusebox::ResultClassifier::for_type(
                |_: &u64| fusebox::Verdict::Success,
            )),
        ),
    ];
    for (what, builder) in capabilities {
        let with = builder.build().expect("valid config");
        row(what, "cheapest", paired(call!(with), call!(cheap)));
        assert_eq!(with.state(), State::Closed);
    }
    // Calls in flight tracked (`stuck_call_threshold`), against the same
    // timed breaker without: the claim and the release of a word, and a
    // scan of the table about once per slow mark.
    let slow = Duration::from_millis(50);
    let timed = cheapest_builder(HOUR)
        .slow_call_duration(slow)
        .build()
        .expect("valid config");
    let in_flight = cheapest_builder(HOUR)
        .slow_call_duration(slow)
        .stuck_call_threshold(6)
        .build()
        .expect("valid config");
    row(
        "closed success, in-flight on",
        "closed success, timed without in-flight",
        paired(call!(in_flight), call!(timed)),
    );
    assert_eq!(in_flight.state(), State::Closed);
    // A guarded future, polled once with a no-op waker (no runtime), against
    // `call` with the same work, and against the peers' async wrappers.
    macro_rules! call_async {
        ($b:expr) => {
            || {
                let _ = black_box(ready_now($b.call_async(async { work() })));
            }
        };
    }
    let fc_async = failsafe_consecutive(HOUR);
    let r_async = recloser::AsyncRecloser::from(recloser_default());
    for (what, b) in [
        ("guarded future, cheapest", &cheap),
        ("guarded future, default", &default),
    ] {
        row(what, "breaker.call", paired(call_async!(b), call!(b)));
        row(
            what,
            "failsafe consecutive future",
            paired(call_async!(b), || {
                let f = failsafe::futures::CircuitBreaker::call(&fc_async, async { work() });
                let _ = black_box(ready_now(f));
            }),
        );
        row(
            what,
            "recloser future",
            paired(call_async!(b), || {
                let _ = black_box(ready_now(r_async.call(async { work() })));
            }),
        );
    }
    let raw_deadline = clock.raw() + (hour as f64 * ticks_per_nano(&clock)) as u64;
    let raw_gate = AtomicU64::new((raw_deadline << 2) | OPEN_GATE);
    row(
        "(refusal floor, raw ticks)",
        "refusal floor",
        paired(
            || {
                black_box(refusal_floor_raw(&raw_gate, &clock));
            },
            floor,
        ),
    );
    assert_eq!(open_cheap.state(), State::Open);
    assert_eq!(open_default.state(), State::Open);
    assert_eq!(cheap.state(), State::Closed);
    assert_eq!(default.state(), State::Closed);

    println!(
        "\n## Paired ratios, two threads on one breaker ({} alternating rounds of {TWO_THREAD_CALLS} calls per thread)\n",
        ROUNDS / 2 * 2
    );
    println!("| fusebox | against | ratio | fusebox ns | other ns |");
    println!("|---|---|---:|---:|---:|");
    let lock = Mutex::new(0_u64);
    let mutex = || {
        *lock.lock() += 1;
    };
    let fc2 = failsafe_consecutive(HOUR);
    let r2 = recloser_default();
    for (what, b) in [
        ("two threads, cheapest", &cheap),
        ("two threads, default", &default),
    ] {
        row(what, "contended mutex", paired_two(call!(b), mutex));
        row(
            what,
            "failsafe consecutive",
            paired_two(call!(b), call!(fc2)),
        );
        row(what, "recloser", paired_two(call!(b), call!(r2)));
    }
    row(
        "two threads, refusals",
        "contended mutex",
        paired_two(call!(open_cheap), mutex),
    );
    // What two threads gain on this machine at best: the refusal floor
    // (nothing shared but a read-only word) on two threads, against the
    // same on one.
    row(
        "two threads, refusals",
        "two threads, refusal floor",
        paired_two(call!(open_cheap), floor),
    );
    row(
        "(two threads, refusal floor)",
        "contended mutex",
        paired_two(floor, mutex),
    );
    // The closed-success floor on two threads, each on a line of its own.
    let which = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static LINE: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    let own_line = || {
        LINE.with(|l| {
            if l.get() == usize::MAX {
                l.set(which.fetch_add(1, Ordering::Relaxed) % 2);
            }
            &lines[l.get()]
        })
    };
    row(
        "two threads, cheapest",
        "two threads, closed-success floor",
        paired_two(call!(cheap), || success_floor(&closed_gate, own_line())),
    );
    assert_eq!(open_cheap.state(), State::Open);
    assert_eq!(default.state(), State::Closed);
}

/// The output of a future that is ready at its first poll, polled with a
/// waker that does nothing, as a runtime would poll it.
#[inline(always)]
fn ready_now<F: std::future::Future>(future: F) -> F::Output {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut cx) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => unreachable!("the bench's futures are ready at once"),
    }
}

/// The clock's raw ticks per nanosecond.
fn ticks_per_nano(clock: &quanta::Clock) -> f64 {
    let ticks = 1_u64 << 40;
    ticks as f64 / clock.delta_as_nanos(0, ticks) as f64
}

fn main() {
    let dir = criterion_dir();
    let mut c = Criterion::default()
        .output_directory(&dir)
        .configure_from_args();
    // For the `floor` baseline's recent time (see the module docs).
    let _upkeep = match quanta::Upkeep::new(Duration::from_millis(1)).start() {
        Ok(handle) => Some(handle),
        Err(quanta::Error::UpkeepRunning) => None,
        Err(e) => panic!("cannot start quanta's upkeep thread: {e}"),
    };
    baselines(&mut c);
    closed_success(&mut c);
    open_rejection(&mut c);
    two_threads(&mut c);
    snapshot(&mut c);
    c.final_summary();
    print_report(&dir);
    print_targets(&dir);
    print_paired();
}
