//! The health probe: a cheap, idempotent call that a background thread makes
//! in place of a live request when a breaker's open period ends.
//!
//! One thread per process, `fusebox-health-probe`, watches every breaker
//! built with a probe. It starts the first time such a breaker is built and
//! runs for the rest of the process. It holds weak references only, in a list bounded by
//! [`CAPACITY`] and pruned of dropped breakers on every pass, so memory does
//! not grow with breakers made and dropped.
//!
//! Every [`TICK`] it looks at each breaker's gate without the lock; one whose
//! open period has ended is moved to half-open and given to a short-lived
//! worker thread, `fusebox-probe`, that runs the probe function. The watcher never runs a
//! probe itself: it waits for the answer until the probe's deadline, then
//! abandons the worker (a hung probe keeps only its own thread, and at most
//! [`MAX_RUNNING`] run at once) and records the probe as failed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::recovery::health_probe::{HealthProbe, ProbeFn};
use crate::seam::{ProbeOut, Seam, WeakBreaker};
use crate::{Breaker, Verdict};

/// Breakers watched, at most; a breaker built beyond it probes with a live
/// call, as without a probe function.
const CAPACITY: usize = 4096;
/// How often the watcher looks at the breakers.
const TICK: Duration = Duration::from_millis(20);
/// Probe threads alive at once, at most, hung ones included.
const MAX_RUNNING: usize = 64;

struct Watched {
    breaker: WeakBreaker,
    probe: HealthProbe,
}

/// A probe out on a worker thread.
struct Running {
    breaker: WeakBreaker,
    out: ProbeOut,
    deadline: Instant,
    answer: Receiver<bool>,
}

static WATCHER: OnceLock<Option<Sender<Watched>>> = OnceLock::new();
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// Breakers queued for the watcher or watched by it: at most `CAPACITY`.
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Has the health-probe thread watch `breaker`, starting the thread if it
/// has not started. False if it cannot: the thread could not be started or
/// its queue is full.
///
/// The builder's [`health_probe`](crate::BreakerBuilder::health_probe) setter
/// hands it to the breaker, which calls it once, when it is built.
pub(crate) fn watch(breaker: &Breaker, probe: HealthProbe) -> bool {
    let tx = WATCHER.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::bounded(CAPACITY);
        thread::Builder::new()
            .name("fusebox-health-probe".into())
            .spawn(move || run(&rx))
            .ok()
            .map(|_| tx)
    });
    let Some(tx) = tx else {
        return false;
    };
    if WATCHED.fetch_add(1, Ordering::AcqRel) >= CAPACITY {
        WATCHED.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    let watched = Watched {
        breaker: breaker.downgrade(),
        probe,
    };
    let sent = tx.try_send(watched).is_ok();
    if !sent {
        WATCHED.fetch_sub(1, Ordering::AcqRel);
    }
    sent
}

fn run(rx: &Receiver<Watched>) {
    let mut watched: Vec<Watched> = Vec::new();
    let mut running: Vec<Running> = Vec::new();
    loop {
        let now = Instant::now();
        let wait = running
            .iter()
            .map(|r| r.deadline.saturating_duration_since(now))
            .fold(TICK, Duration::min);
        match rx.recv_timeout(wait) {
            Ok(w) => {
                watched.push(w);
                watched.extend(rx.try_iter());
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        running.retain(|r| match r.answer.try_recv() {
            Ok(ok) => finish(r, ok),
            Err(TryRecvError::Empty) if Instant::now() < r.deadline => true,
            // Hung past its deadline: abandoned. Or its thread is gone.
            Err(_) => finish(r, false),
        });
        let before = watched.len();
        watched.retain(|w| w.breaker.is_alive());
        WATCHED.fetch_sub(before - watched.len(), Ordering::AcqRel);
        for w in &watched {
            if running.iter().any(|r| r.breaker.same(&w.breaker))
                || RUNNING.load(Ordering::Acquire) >= MAX_RUNNING
            {
                continue;
            }
            let Some(breaker) = w.breaker.upgrade() else {
                continue;
            };
            if let Some(out) = breaker.begin_health_probe() {
                let r = Running {
                    breaker: w.breaker.clone(),
                    out,
                    deadline: Instant::now() + w.probe.deadline,
                    answer: spawn(&w.probe.f),
                };
                running.push(r);
            }
        }
    }
}

/// Runs `f` on a thread of its own; its answer arrives on the receiver
/// (which disconnects without one if it panics or cannot start).
fn spawn(f: &ProbeFn) -> Receiver<bool> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let f = Arc::clone(f);
    RUNNING.fetch_add(1, Ordering::AcqRel);
    let spawned = thread::Builder::new()
        .name("fusebox-probe".into())
        .spawn(move || {
            let ok = catch_unwind(AssertUnwindSafe(|| f())).unwrap_or(false);
            let _ = tx.send(ok);
            RUNNING.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
    rx
}

/// Records the probe's answer on its breaker, if the breaker is still
/// there. Returns false, for `retain`.
fn finish(r: &Running, ok: bool) -> bool {
    if let Some(b) = r.breaker.upgrade() {
        let verdict = if ok {
            Verdict::Success
        } else {
            Verdict::Failure
        };
        b.end_health_probe(r.out, verdict);
    }
    false
}
