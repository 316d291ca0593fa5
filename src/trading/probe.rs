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

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::breaker::WeakBreaker;
use crate::machine::Ticket;
use crate::{Breaker, ConfigError, Verdict};

/// Breakers watched, at most; a breaker built beyond it probes with a live
/// call, as without a probe function.
const CAPACITY: usize = 4096;
/// How often the watcher looks at the breakers.
const TICK: Duration = Duration::from_millis(20);
/// Probe threads alive at once, at most, hung ones included.
const MAX_RUNNING: usize = 64;

type ProbeFn = Arc<dyn Fn() -> bool + Send + Sync>;

/// A breaker's health probe: a cheap, idempotent call (a tiny
/// reference-data lookup, a vendor's status endpoint) and how long it may
/// take.
///
/// When the open period ends, the process's health-probe thread
/// (`fusebox-health-probe`, one per process, started with the first
/// breaker built with a probe) runs it, on a short-lived thread of its own
/// (`fusebox-probe`), instead of letting a live request be the probe: recovery does not wait
/// for traffic, and live callers are refused (state
/// [`State::HalfOpen`](crate::State::HalfOpen)) until it succeeds. A probe
/// that fails, panics or outlives its deadline re-opens the breaker with
/// the next, longer open period. Its own `max_probe_duration` still bounds
/// it on the breaker's clock too.
///
/// ```
/// use fusebox::trading::HealthProbe;
/// use fusebox::{Breaker, CallPath, Classifier};
/// use std::time::Duration;
///
/// # fn status_endpoint() -> Result<(), std::io::Error> { Ok(()) }
/// let breaker = Breaker::builder("corporate-actions")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .health_probe(HealthProbe::new(Duration::from_secs(2), status_endpoint))
///     .build()?;
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct HealthProbe {
    f: ProbeFn,
    deadline: Duration,
}

impl HealthProbe {
    /// A probe that calls `f`, which succeeds with `Ok`, and may take up to
    /// `deadline` (more than zero; `build()` checks).
    pub fn new<T, E>(
        deadline: Duration,
        f: impl Fn() -> Result<T, E> + Send + Sync + 'static,
    ) -> Self {
        HealthProbe {
            f: Arc::new(move || f().is_ok()),
            deadline,
        }
    }

    /// How long the probe may take before it is abandoned as failed.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        crate::config::check(
            "health_probe",
            !self.deadline.is_zero(),
            "must have a deadline longer than zero",
            format_args!("{:?}", self.deadline),
        )
    }
}

impl fmt::Debug for HealthProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthProbe")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

struct Watched {
    breaker: WeakBreaker,
    probe: HealthProbe,
}

/// A probe out on a worker thread.
struct Running {
    breaker: WeakBreaker,
    ticket: Ticket,
    started: u64,
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
            if let Some((ticket, started)) = breaker.begin_health_probe() {
                let r = Running {
                    breaker: w.breaker.clone(),
                    ticket,
                    started,
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
        b.end_health_probe(r.ticket, r.started, verdict);
    }
    false
}
