//! The timeline of a vendor outage seen by a fleet: several processes, each
//! with its own breaker of the same name, in front of one vendor that fails
//! for a while and then recovers.
//!
//! A real `redis-server` is started on a free loopback port. Each process
//! is a thread standing for one (its own `Fleet` agent, its own breaker);
//! process 0 is busy, calling the vendor every 2 ms, the others quieter,
//! each 20 ms slower than the one before. The vendor is in-process: every call
//! fails from `DOWN_FROM` to `DOWN_UNTIL` after the start, and succeeds
//! otherwise. Every breaker reads one shared monotonic clock, so the
//! processes' events line up. The same scenario then runs again with the
//! breakers alone (no fleet), for comparison.
//!
//! ```text
//! cargo run -p fusebox-benches --example fleet_timeline
//! ```
//!
//! prints, for each run, one lane per process (a column is a slice of
//! time; `.` closed, `#` open, `h` half-open, and a letter where something
//! happened: `T` tripped on its own failures, `F` learned of the fleet's
//! open period, `L` won the fleet's probe lease, `P` let a probe go, `X`
//! the probe failed, `C` the probe succeeded and closed it, `c` learned of
//! the fleet's close), the event list, and the vendor calls each process
//! made while the vendor was down. `docs/fleet.md` holds one run's output.

#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::fleet::Fleet;
use fusebox::{Breaker, CallPath, Classifier, Reason, State};
use redis_server::RedisServer;

const PROCESSES: usize = 5;
const DOWN_FROM: Duration = Duration::from_millis(200);
const DOWN_UNTIL: Duration = Duration::from_millis(1_300);
const RUN: Duration = Duration::from_millis(2_200);

/// How often process `p` calls the vendor: 2, 22, 42, ... ms.
fn call_every(p: usize) -> Duration {
    Duration::from_millis(2 + 20 * p as u64)
}
/// One column of the lanes.
const COLUMN: Duration = Duration::from_millis(20);

/// A real `redis-server` on a free loopback port (the tests' own harness),
/// and its URL.
fn redis() -> (RedisServer, String) {
    let server = RedisServer::start();
    let url = server.url();
    (server, url)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Tripped,
    Learned,
    Lease,
    Probe,
    ProbeFailed,
    Closed,
    LearnedClosed,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Tripped => 'T',
            Kind::Learned => 'F',
            Kind::Lease => 'L',
            Kind::Probe => 'P',
            Kind::ProbeFailed => 'X',
            Kind::Closed => 'C',
            Kind::LearnedClosed => 'c',
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::Tripped => "tripped on its own failures",
            Kind::Learned => "learned of the fleet's open period",
            Kind::Lease => "won the fleet's probe lease",
            Kind::Probe => "let a probe go (half-open)",
            Kind::ProbeFailed => "probe failed: open again",
            Kind::Closed => "probe succeeded: closed",
            Kind::LearnedClosed => "learned of the fleet's close",
        }
    }

    /// The state after the event, when it changes one.
    fn state(self) -> Option<State> {
        match self {
            Kind::Tripped | Kind::Learned | Kind::ProbeFailed => Some(State::Open),
            Kind::Probe => Some(State::HalfOpen),
            Kind::Closed | Kind::LearnedClosed => Some(State::Closed),
            Kind::Lease => None,
        }
    }

    fn of(from: State, to: State, reason: &Reason) -> Option<Kind> {
        let fleet = *reason == Reason::Fleet;
        Some(match (from, to) {
            (_, State::Open) if fleet => Kind::Learned,
            (State::HalfOpen, State::Open) => Kind::ProbeFailed,
            (_, State::Open) => Kind::Tripped,
            (_, State::HalfOpen) => Kind::Probe,
            (_, State::Closed) if fleet => Kind::LearnedClosed,
            (_, State::Closed) => Kind::Closed,
            _ => return None,
        })
    }
}

struct Event {
    at: Duration,
    process: usize,
    kind: Kind,
}

type Log = Arc<Mutex<Vec<Event>>>;

/// One run of the scenario: the events, and each process's vendor calls
/// while the vendor was down.
fn run(url: Option<&str>, prefix: &str) -> (Vec<Event>, Vec<u64>) {
    let clock = quanta::Clock::new();
    let log: Log = Arc::default();
    let start = Arc::new(Mutex::new(clock.now()));
    let mut members = Vec::new();
    for p in 0..PROCESSES {
        let (log, start) = (Arc::clone(&log), Arc::clone(&start));
        let breaker = Breaker::builder("vendor")
            .call_path(CallPath::ReferenceData)
            .classifier(Classifier::every_error_is_a_failure())
            .consecutive_failure_threshold(3)
            .failure_rate_threshold(None)
            .open_duration(Duration::from_millis(250))
            .max_open_duration(Duration::from_secs(1))
            .clock(clock.clone())
            .on_state_change(move |c| {
                if let Some(kind) = Kind::of(c.from, c.to, &c.reason) {
                    let at = c.at.saturating_duration_since(*start.lock().unwrap());
                    log.lock().unwrap().push(Event {
                        at,
                        process: p,
                        kind,
                    });
                }
            })
            .build()
            .expect("valid config");
        let fleet = url.map(|url| {
            let f = Fleet::builder(url)
                .prefix(prefix)
                // Any process's trip opens the fleet (no quorum), as when
                // the timeline in docs/fleet.md was drawn.
                .min_members(1)
                .member_ratio(0.0)
                .hold_margin(Duration::from_millis(200))
                .build()
                .expect("fleet");
            f.join(&breaker).expect("join");
            Arc::new(f)
        });
        members.push((breaker, fleet));
    }
    for (_, fleet) in &members {
        if let Some(f) = fleet {
            let t = std::time::Instant::now();
            while !(f.snapshot().connected && f.snapshot().reads > 0) {
                assert!(t.elapsed() < Duration::from_secs(10), "agent connects");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    *start.lock().unwrap() = clock.now();
    let t0 = clock.now();
    let down_calls: Vec<Arc<AtomicU64>> = (0..PROCESSES).map(|_| Arc::default()).collect();
    // Lease wins, as each agent counts them, read every half millisecond.
    let fleets: Vec<Arc<Fleet>> = members.iter().filter_map(|(_, f)| f.clone()).collect();
    let watcher = {
        let (clock, log) = (clock.clone(), Arc::clone(&log));
        std::thread::spawn(move || {
            let mut won = vec![0; fleets.len()];
            while clock.now().saturating_duration_since(t0) < RUN {
                for (p, f) in fleets.iter().enumerate() {
                    let leases = f.snapshot().leases_won;
                    if leases > won[p] {
                        won[p] = leases;
                        log.lock().unwrap().push(Event {
                            at: clock.now().saturating_duration_since(t0),
                            process: p,
                            kind: Kind::Lease,
                        });
                    }
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        })
    };
    let threads: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(p, (breaker, fleet))| {
            let (clock, down_calls) = (clock.clone(), Arc::clone(&down_calls[p]));
            std::thread::spawn(move || {
                loop {
                    let now = clock.now().saturating_duration_since(t0);
                    if now >= RUN {
                        break;
                    }
                    let _ = breaker.call(|| {
                        let now = clock.now().saturating_duration_since(t0);
                        if (DOWN_FROM..DOWN_UNTIL).contains(&now) {
                            down_calls.fetch_add(1, Ordering::Relaxed);
                            Err(std::io::Error::other("vendor down"))
                        } else {
                            Ok(())
                        }
                    });
                    std::thread::sleep(call_every(p));
                }
                drop(fleet);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a process thread");
    }
    watcher.join().expect("the lease watcher");
    let mut events = std::mem::take(&mut *log.lock().unwrap());
    events.sort_by_key(|e| e.at);
    let calls = down_calls
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    (events, calls)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print(title: &str, events: &[Event], down_calls: &[u64]) {
    let columns = (RUN.as_millis() / COLUMN.as_millis()) as usize;
    let col = |d: Duration| ((d.as_millis() / COLUMN.as_millis()) as usize).min(columns - 1);
    println!("{title}");
    println!(
        "one column = {} ms; vendor down from {} ms to {} ms",
        COLUMN.as_millis(),
        DOWN_FROM.as_millis(),
        DOWN_UNTIL.as_millis()
    );
    let mut axis = String::new();
    for c in 0..columns {
        let t = c as u128 * COLUMN.as_millis();
        if t.is_multiple_of(500) {
            let label = format!("|{t}");
            axis.push_str(&label);
        } else if axis.len() <= c {
            axis.push(' ');
        }
    }
    println!("{:<10}{axis}", "ms");
    let vendor: String = (0..columns)
        .map(|c| {
            let t = COLUMN * c as u32;
            if (DOWN_FROM..DOWN_UNTIL).contains(&t) {
                'x'
            } else {
                '-'
            }
        })
        .collect();
    println!("{:<10}{vendor}", "vendor");
    for p in 0..PROCESSES {
        let mut lane = vec![' '; columns];
        let mut state = State::Closed;
        let mine: Vec<&Event> = events.iter().filter(|e| e.process == p).collect();
        let mut next = 0;
        for (c, cell) in lane.iter_mut().enumerate() {
            let mut letter = None;
            while next < mine.len() && col(mine[next].at) == c {
                let e = mine[next];
                if let Some(s) = e.kind.state() {
                    state = s;
                }
                // A column shows its first change of state (else the
                // lease); its state is the last one.
                if letter.is_none() || (letter == Some('L') && e.kind != Kind::Lease) {
                    letter = Some(e.kind.letter());
                }
                next += 1;
            }
            *cell = letter.unwrap_or(match state {
                State::Closed => '.',
                State::HalfOpen => 'h',
                _ => '#',
            });
        }
        println!(
            "{:<10}{}",
            format!("process {p}"),
            lane.iter().collect::<String>()
        );
    }
    println!();
    for e in events {
        println!(
            "{:>8.1} ms  process {}  {}  {}",
            ms(e.at),
            e.process,
            e.kind.letter(),
            e.kind.words()
        );
    }
    println!(
        "vendor calls while it was down, per process: {down_calls:?} (total {})",
        down_calls.iter().sum::<u64>()
    );
    println!();
}

fn main() {
    let (_server, url) = redis();
    let (events, calls) = run(Some(&url), "timeline");
    print(
        &format!("== fleet: {PROCESSES} processes sharing one breaker through Redis"),
        &events,
        &calls,
    );
    let (events, calls) = run(None, "timeline-local");
    print(
        &format!("== alone: the same {PROCESSES} processes, breakers not in a fleet"),
        &events,
        &calls,
    );
}
