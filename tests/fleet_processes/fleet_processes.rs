//! Fleet mode across OS processes: this test binary runs itself N times as
//! children (each one process with its own agent and breaker) against one
//! real `redis-server`, and the parent, one more member of the fleet,
//! trips its breaker.
//!
//! Checked: every child's breaker opens through the fleet, and when the
//! open period ends exactly one process of the fleet holds the probe
//! lease and would let a call probe. (`harness = false`: the parent and the
//! children are the same `main`, told apart by an environment variable.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Instant;

use fusebox::fleet::Fleet;
use fusebox::{Breaker, Reason, State};

use crate::support::breaker::{fail, quiet, MS, SEC};
use crate::support::redis_server::{wait_for, RedisServer};

const CHILDREN: usize = 5;
const CHILD_ENV: &str = "FUSEBOX_FLEET_CHILD_URL";

pub fn main() {
    match std::env::var(CHILD_ENV) {
        Ok(url) => child(&url),
        Err(_) => parent(),
    }
}

fn member(url: &str) -> (Fleet, Breaker) {
    let fleet = Fleet::builder(url)
        .prefix("procs")
        // One child's trip opens every process (no quorum): the test is of
        // the lease across processes.
        .min_members(1)
        .member_ratio(0.0)
        .tick(2 * MS)
        .refresh(20 * MS)
        // Exclusivity is under test: the holder keeps its unused lease
        // while every process reports.
        .probe_lease(600 * SEC)
        .lease_idle(300 * SEC)
        .build()
        .expect("fleet settings");
    let (b, _mock) = quiet("vendor");
    let breaker = b
        .consecutive_failure_threshold(1)
        .open_duration(300 * MS)
        .max_probe_duration(60 * SEC)
        .build()
        .expect("valid configuration");
    fleet.join(&breaker).expect("join");
    wait_for("the agent to connect", || {
        let s = fleet.snapshot();
        s.connected && s.reads > 0
    });
    (fleet, breaker)
}

/// Once the lease is issued and the agent has read the fleet twice more:
/// `leases_won would_permit`.
fn lease_report(url: &str, fleet: &Fleet, breaker: &Breaker) -> String {
    let mut con = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("connect");
    wait_for("a lease to be issued", || {
        redis::cmd("HGET")
            .arg("{procs:vendor}:state")
            .arg("leases")
            .query::<Option<u64>>(&mut con)
            .unwrap()
            .is_some()
    });
    let reads = fleet.snapshot().reads;
    wait_for("two more reads", || fleet.snapshot().reads >= reads + 2);
    format!(
        "{} {}",
        fleet.snapshot().leases_won,
        u8::from(breaker.would_permit())
    )
}

fn child(url: &str) {
    let (fleet, breaker) = member(url);
    println!("ready");
    wait_for("the fleet to open this breaker", || {
        breaker.state() == State::Open
    });
    let reason = breaker.snapshot().last_transition.map(|c| c.reason);
    assert_eq!(reason, Some(Reason::Fleet));
    println!("open");
    println!("{}", lease_report(url, &fleet, &breaker));
    // Stay in the fleet until the parent has every report.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

struct Kid {
    process: Child,
    out: BufReader<ChildStdout>,
}

impl Kid {
    fn line(&mut self) -> String {
        let mut line = String::new();
        self.out
            .read_line(&mut line)
            .expect("read a child's report");
        assert!(
            !line.is_empty(),
            "a child exited early: {:?}",
            self.process.try_wait()
        );
        line.trim().to_owned()
    }
}

fn parent() {
    let redis = RedisServer::start();
    let url = redis.url();
    let exe = std::env::current_exe().expect("this test binary");
    let mut kids: Vec<Kid> = (0..CHILDREN)
        .map(|_| {
            let mut process = Command::new(&exe)
                .env(CHILD_ENV, &url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a child process");
            let out = BufReader::new(process.stdout.take().unwrap());
            Kid { process, out }
        })
        .collect();
    let (fleet, breaker) = member(&url);
    for k in &mut kids {
        assert_eq!(k.line(), "ready");
    }

    let tripped = Instant::now();
    assert!(fail(&breaker).is_err());
    let mut seen = Vec::new();
    for k in &mut kids {
        assert_eq!(k.line(), "open");
        seen.push(tripped.elapsed());
    }
    println!("fleet_processes: the last of {CHILDREN} child processes reported its breaker open {:?} after the trip", seen.last().unwrap());

    let mut leases = 0;
    let mut permitting = 0;
    let mine = lease_report(&url, &fleet, &breaker);
    for report in std::iter::once(mine).chain(kids.iter_mut().map(Kid::line)) {
        let (won, permits) = report.split_once(' ').expect("a lease report");
        leases += won.parse::<u64>().unwrap();
        permitting += permits.parse::<u32>().unwrap();
    }
    for k in &mut kids {
        let _ = k.process.stdin.take().unwrap().write_all(b"done\n");
        assert!(k.process.wait().unwrap().success(), "a child failed");
    }
    assert_eq!(
        leases,
        1,
        "one probe lease in the fleet of {} processes",
        CHILDREN + 1
    );
    assert_eq!(permitting, 1, "one process lets a call probe");
    println!("fleet_processes: 1 passed, 0 failed");
}
