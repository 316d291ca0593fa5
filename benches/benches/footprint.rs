//! Allocations per call and bytes per breaker, for fusebox and the peers,
//! counted by a global allocator.
//!
//! Run with `cargo bench -p fusebox-benches --bench footprint`. It prints two
//! Markdown tables. Counts are exact, not timed, so one run is enough.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use failsafe::{backoff, failure_policy};
use fusebox::{Breaker, CallPath, Classifier, State};
use recloser::Recloser;

/// Counts the allocations made by the current thread (so the quanta upkeep
/// thread's are not charged to the breaker) and the bytes live on the heap.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}
static LIVE: AtomicU64 = AtomicU64::new(0);

fn count_one() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counters are a thread-local cell and a plain atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const HOUR: Duration = Duration::from_secs(3600);
const CALLS: u64 = 100_000;

fn work() -> Result<u64, io::Error> {
    Ok(black_box(1))
}

fn fail() -> Result<u64, io::Error> {
    Err(io::Error::from(io::ErrorKind::TimedOut))
}

/// Allocations per call of `f`, after a warm-up.
fn allocs_per_call(mut f: impl FnMut()) -> f64 {
    for _ in 0..1_000 {
        f();
    }
    let before = allocs();
    for _ in 0..CALLS {
        f();
    }
    (allocs() - before) as f64 / CALLS as f64
}

/// Allocations per failed call, in a run where one call in ten fails (few
/// enough that no breaker here opens).
fn allocs_per_failure(mut call: impl FnMut(bool)) -> f64 {
    for i in 0..1_000 {
        call(i % 10 == 0);
    }
    let (mut made, mut failures) = (0, 0);
    for i in 0..CALLS {
        if i % 10 == 0 {
            let before = allocs();
            call(true);
            made += allocs() - before;
            failures += 1;
        } else {
            call(false);
        }
    }
    made as f64 / failures as f64
}

/// How many values `footprint` builds and holds at once.
const HELD: usize = 1_000;

/// [`HELD`] values `build` returns, held at once, the inline size of one,
/// and the heap bytes each holds on average: what one value holds of its
/// own (each fusebox breaker here its own settings and count lines), plus
/// its share of what several share (a classifier).
fn footprint<T>(build: impl Fn() -> T) -> (Vec<T>, usize, u64) {
    let mut values = Vec::with_capacity(HELD);
    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..HELD {
        values.push(black_box(build()));
    }
    let heap = LIVE.load(Ordering::Relaxed) - before;
    (values, std::mem::size_of::<T>(), heap / HELD as u64)
}

fn fusebox(cheapest: bool) -> Breaker {
    let b = Breaker::builder("bench")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::every_error_is_a_failure())
        .open_duration(HOUR)
        .max_open_duration(HOUR);
    let b = if cheapest {
        b.consecutive_failure_threshold(5)
            .failure_rate_threshold(None)
    } else {
        b
    };
    b.build().expect("valid config")
}

fn failsafe_consecutive() -> impl failsafe::CircuitBreaker {
    failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(HOUR),
        ))
        .build()
}

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

struct Line {
    who: &'static str,
    closed: f64,
    failed: f64,
    open: f64,
    snapshot: Option<f64>,
}

fn fusebox_line(who: &'static str, cheapest: bool) -> Line {
    let closed = fusebox(cheapest);
    let flaky = fusebox(cheapest);
    let open = fusebox(cheapest);
    for _ in 0..5 {
        let _ = open.call(fail);
    }
    assert_eq!(open.state(), State::Open);
    let line = Line {
        who,
        closed: allocs_per_call(|| {
            let _ = black_box(closed.call(work));
        }),
        failed: allocs_per_failure(|failing| {
            let _ = black_box(flaky.call(if failing { fail } else { work }));
        }),
        open: allocs_per_call(|| {
            let _ = black_box(open.call(work));
        }),
        snapshot: Some(allocs_per_call(|| {
            black_box(open.snapshot());
        })),
    };
    assert_eq!(flaky.state(), State::Closed);
    assert_eq!(open.state(), State::Open);
    line
}

fn failsafe_line<C: failsafe::CircuitBreaker>(who: &'static str, build: impl Fn() -> C) -> Line {
    let closed = build();
    let flaky = build();
    let open = build();
    for _ in 0..5 {
        let _ = open.call(fail);
    }
    assert!(!open.is_call_permitted());
    let line = Line {
        who,
        closed: allocs_per_call(|| {
            let _ = black_box(closed.call(work));
        }),
        failed: allocs_per_failure(|failing| {
            let _ = black_box(flaky.call(if failing { fail } else { work }));
        }),
        open: allocs_per_call(|| {
            let _ = black_box(open.call(work));
        }),
        snapshot: None,
    };
    assert!(flaky.is_call_permitted(), "the flaky breaker opened");
    line
}

fn recloser_line() -> Line {
    let closed = Recloser::default();
    let flaky = Recloser::default();
    let open = Recloser::custom().open_wait(HOUR).build();
    for _ in 0..=100 {
        let _ = open.call(fail);
    }
    assert!(matches!(open.call(work), Err(recloser::Error::Rejected)));
    let line = Line {
        who: "recloser",
        closed: allocs_per_call(|| {
            let _ = black_box(closed.call(work));
        }),
        failed: allocs_per_failure(|failing| {
            let _ = black_box(flaky.call(if failing { fail } else { work }));
        }),
        open: allocs_per_call(|| {
            let _ = black_box(open.call(work));
        }),
        snapshot: None,
    };
    assert!(flaky.call(work).is_ok(), "the flaky breaker opened");
    line
}

/// Allocations made by the first trip of a fresh fusebox breaker, and by a
/// later one (after a reset), to show what a state change costs.
fn fusebox_transitions() -> (u64, u64) {
    let b = fusebox(true);
    let before = allocs();
    for _ in 0..5 {
        let _ = b.call(fail);
    }
    let first = allocs() - before;
    b.reset("bench", "again");
    let before = allocs();
    for _ in 0..5 {
        let _ = b.call(fail);
    }
    let later = allocs() - before;
    (first, later)
}

fn main() {
    // Runs by `cargo bench` pass `--bench`; a filter is ignored here.
    let _upkeep = quanta::Upkeep::new(Duration::from_millis(1))
        .start()
        .expect("start quanta upkeep thread");

    println!("## Allocations per call\n");
    println!("| breaker | closed success | failed call | open rejection | snapshot |");
    println!("|---|---:|---:|---:|---:|");
    let lines = [
        fusebox_line("fusebox (default)", false),
        fusebox_line("fusebox (cheapest)", true),
        failsafe_line("failsafe (default)", || failsafe::Config::new().build()),
        failsafe_line("failsafe (consecutive)", failsafe_consecutive),
        failsafe_line("failsafe (default, open)", failsafe_default_open),
        recloser_line(),
    ];
    for l in &lines {
        let snap = l.snapshot.map_or("n/a".to_string(), |s| format!("{s}"));
        println!(
            "| {} | {} | {} | {} | {} |",
            l.who, l.closed, l.failed, l.open, snap
        );
    }
    let (first, later) = fusebox_transitions();
    println!(
        "\nfusebox state change (closed to open): {first} allocations the first time, \
         {later} after that."
    );

    println!("\n## Bytes per breaker\n");
    println!(
        "{HELD} of each held at once, each built from a builder of its own; \
         heap at build is their mean (what several share, a classifier, \
         shared out).\n"
    );
    println!("| breaker | inline (size_of) | heap at build | total |");
    println!("|---|---:|---:|---:|");
    let row = |who: &str, inline: usize, heap: u64| {
        println!("| {who} | {inline} | {heap} | {} |", inline as u64 + heap);
    };
    let (_b, i, h) = footprint(|| fusebox(false));
    row("fusebox (default)", i, h);
    let (_b, i, h) = footprint(|| fusebox(true));
    row("fusebox (cheapest)", i, h);
    let (_b, i, h) = footprint(|| failsafe::Config::new().build());
    row("failsafe (default)", i, h);
    let (_b, i, h) = footprint(failsafe_consecutive);
    row("failsafe (consecutive)", i, h);
    let (_b, i, h) = footprint(Recloser::default);
    row("recloser (default)", i, h);
}
