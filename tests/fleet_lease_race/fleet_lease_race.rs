//! Twenty OS processes race for the fleet's probe lease when the cool-down
//! ends, a hundred times over: each open period issues exactly one lease.
//!
//! This test binary runs itself as twenty children against one real
//! `redis-server`; each child is one process with its own `Fleet` and its
//! own breaker named `vendor`. The parent is not a member: it only conducts.
//! For each repetition it tells one child (in turn) to trip its breaker;
//! the fleet opens everywhere for a short period of server time, every
//! agent reads the fleet again when that period ends, and the agents race
//! to take the lease. The child whose agent won probes at once (a success,
//! which closes the fleet) and reports `won ID TOKEN` on its stdout; the
//! parent waits for the fleet's state in Redis to read closed at the next
//! epoch before the next repetition. Nothing waits a fixed time: the
//! processes follow each other through pipes and through Redis.
//!
//! Checked at the end, once every child has stopped and every line is in:
//! one winner for every open period (the epoch in the winning tokens), the
//! lease numbers in those tokens are 1 to 100 in order and Redis's lease
//! counter says 100, the children's own counts of leases won add up to 100,
//! and more than one process won (the race is real). (`harness = false`:
//! the parent and the children are the same `main`, told apart by an
//! environment variable.)

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use fusebox::fleet::Fleet;
use fusebox::{Breaker, State};

use crate::support::breaker::{fail, quiet, succeed, MS, SEC};
use crate::support::redis_server::RedisServer;

const CHILDREN: usize = 20;
const REPETITIONS: u64 = 100;
/// The fleet's open period, in server time: every repetition waits it out.
const OPEN: Duration = Duration::from_millis(25);
const PATIENCE: Duration = Duration::from_secs(20);
const URL_ENV: &str = "FUSEBOX_LEASE_RACE_URL";
const ID_ENV: &str = "FUSEBOX_LEASE_RACE_ID";
const PREFIX: &str = "lease-race";
const STATE_KEY: &str = "{lease-race:vendor}:state";
const LEASE_KEY: &str = "{lease-race:vendor}:lease";

pub fn main() {
    match (std::env::var(URL_ENV), std::env::var(ID_ENV)) {
        (Ok(url), Ok(id)) => child(&url, &id),
        _ => parent(),
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(MS);
    }
}

fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("connect to the test redis")
}

/// Lines from a reader, one per message, on a thread of their own.
fn lines_of<R: std::io::Read + Send + 'static>(
    from: R,
    tag: usize,
    to: mpsc::Sender<(usize, String)>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if to.send((tag, line)).is_err() {
                return;
            }
        }
        let _ = to.send((tag, "eof".into()));
    });
}

/// One process of the fleet: trips when told to, probes when its agent
/// wins the lease, and says so.
fn child(url: &str, id: &str) {
    let fleet = Fleet::builder(url)
        .prefix(PREFIX)
        // One process trips each period for all (no quorum): the test is
        // of the race for the lease that follows.
        .min_members(1)
        .member_ratio(0.0)
        .tick(2 * MS)
        .refresh(50 * MS)
        // This test is of the lease's exclusivity: a winner slowed by the
        // load of twenty processes must not give its lease back before it
        // probes, which would issue a second lease in the period.
        .probe_lease(600 * SEC)
        .lease_idle(300 * SEC)
        .build()
        .expect("fleet settings");
    // A mock clock that never moves: the local breaker's open periods end
    // only when the fleet says so.
    let (b, _mock) = quiet("vendor");
    let breaker = b
        .consecutive_failure_threshold(1)
        .open_duration(OPEN)
        .max_probe_duration(60 * SEC)
        .build()
        .expect("valid configuration");
    fleet.join(&breaker).expect("join");
    wait_for("the agent to connect", || {
        let s = fleet.snapshot();
        s.connected && s.reads > 0
    });
    let mut con = connect(url);
    let (tx, commands) = mpsc::channel();
    lines_of(std::io::stdin(), 0, tx);
    println!("ready");

    let mut won = 0;
    loop {
        match commands.recv_timeout(MS) {
            Ok((_, line)) if line == "trip" => trip(&breaker),
            Ok(_) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        let leases = fleet.snapshot().leases_won;
        if leases > won {
            won = leases;
            probe(&breaker, &mut con, id);
        }
    }
    println!("total {id} {won}");
}

fn trip(breaker: &Breaker) {
    wait_for("this breaker to be closed before it trips", || {
        breaker.state() == State::Closed
    });
    assert!(fail(breaker).is_err(), "the tripping call fails");
    assert_eq!(breaker.state(), State::Open);
}

/// This process's agent holds the lease: its next call is the fleet's
/// probe, and it succeeds.
fn probe(breaker: &Breaker, con: &mut redis::Connection, id: &str) {
    wait_for("the lease holder's breaker to let a call probe", || {
        breaker.would_permit()
    });
    let token: String = redis::cmd("GET")
        .arg(LEASE_KEY)
        .query(con)
        .expect("read the lease");
    succeed(breaker).expect("the probe goes and succeeds");
    println!("won {id} {token}");
}

struct Kid {
    process: Child,
    stdin: ChildStdin,
}

impl Kid {
    fn tell(&mut self, what: &str) {
        self.stdin
            .write_all(format!("{what}\n").as_bytes())
            .and_then(|()| self.stdin.flush())
            .expect("write to a child");
    }
}

/// The next line from any child, skipping nothing.
fn next(lines: &Receiver<(usize, String)>, waiting_for: &str) -> (usize, String) {
    let (id, line) = lines
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("waited {PATIENCE:?} for {waiting_for}"));
    assert_ne!(
        line, "eof",
        "child {id} exited early, waiting for {waiting_for}"
    );
    (id, line)
}

/// A winner's report: (epoch, lease number, child).
fn parse_win(line: &str) -> (u64, u64, usize) {
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("won"), "{line}");
    let id: usize = words.next().and_then(|w| w.parse().ok()).expect(line);
    let token = words.next().expect(line);
    let mut parts = token.split(':');
    let epoch = parts.next().and_then(|p| p.parse().ok()).expect(line);
    let n = parts.next().and_then(|p| p.parse().ok()).expect(line);
    (epoch, n, id)
}

fn parent() {
    let redis = RedisServer::start();
    let url = redis.url();
    let exe = std::env::current_exe().expect("this test binary");
    let (tx, lines) = mpsc::channel();
    let mut kids: Vec<Kid> = (0..CHILDREN)
        .map(|id| {
            let mut process = Command::new(&exe)
                .env(URL_ENV, &url)
                .env(ID_ENV, id.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a child process");
            lines_of(process.stdout.take().unwrap(), id, tx.clone());
            let stdin = process.stdin.take().unwrap();
            Kid { process, stdin }
        })
        .collect();
    drop(tx);
    for _ in 0..CHILDREN {
        assert_eq!(next(&lines, "every child to be ready").1, "ready");
    }

    let started = Instant::now();
    let mut con = connect(&url);
    let state = |con: &mut redis::Connection| -> (Option<String>, Option<u64>) {
        redis::cmd("HMGET")
            .arg(STATE_KEY)
            .arg("state")
            .arg("epoch")
            .query(con)
            .expect("read the fleet's state")
    };
    let mut wins = Vec::new();
    for rep in 0..REPETITIONS {
        kids[rep as usize % CHILDREN].tell("trip");
        let (_, line) = next(&lines, "a winner's report");
        wins.push(parse_win(&line));
        // The probe's success closed the fleet: the next period's epoch.
        let closed = (Some("closed".to_owned()), Some(2 * rep + 2));
        wait_for("the winner's probe to close the fleet", || {
            state(&mut con) == closed
        });
    }
    let took = started.elapsed();

    let mut totals = 0;
    for k in &mut kids {
        k.tell("done");
    }
    loop {
        match lines.recv_timeout(PATIENCE) {
            Ok((_, line)) if line.starts_with("won ") => wins.push(parse_win(&line)),
            Ok((_, line)) if line.starts_with("total ") => {
                totals += line.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
            }
            Ok((_, line)) if line == "eof" => {}
            Ok((id, line)) => panic!("child {id} said {line:?}"),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("waited {PATIENCE:?} for the children"),
        }
    }
    for k in &mut kids {
        assert!(k.process.wait().unwrap().success(), "a child failed");
    }

    let mut by_epoch: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for &(epoch, _, id) in &wins {
        by_epoch.entry(epoch).or_default().push(id);
    }
    for rep in 0..REPETITIONS {
        let epoch = 2 * rep + 1;
        let winners = by_epoch.remove(&epoch).unwrap_or_default();
        assert_eq!(winners.len(), 1, "open period {epoch}: winners {winners:?}");
    }
    assert!(
        by_epoch.is_empty(),
        "leases outside the open periods: {by_epoch:?}"
    );
    let numbers: Vec<u64> = wins.iter().map(|&(_, n, _)| n).collect();
    assert_eq!(numbers, (1..=REPETITIONS).collect::<Vec<_>>());
    let issued: u64 = redis::cmd("HGET")
        .arg(STATE_KEY)
        .arg("leases")
        .query(&mut con)
        .unwrap();
    assert_eq!(issued, REPETITIONS, "leases issued, by Redis's count");
    assert_eq!(totals, REPETITIONS, "leases won, by the agents' counts");

    let mut per_child = [0u32; CHILDREN];
    for &(_, _, id) in &wins {
        per_child[id] += 1;
    }
    let distinct = per_child.iter().filter(|&&n| n > 0).count();
    println!(
        "fleet_lease_race: {REPETITIONS} races of {CHILDREN} processes in {took:.1?}; \
         leases won per process: {per_child:?}"
    );
    assert!(distinct > 1, "one process won every race: {per_child:?}");
    println!("fleet_lease_race: 1 passed, 0 failed");
}
