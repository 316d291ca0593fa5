//! The breaker: the state machine behind a lock, the clock, and the delivery
//! of state changes.
//!
//! Everything that touches the lock, the clock or a callback is in this file.

use std::collections::VecDeque;
use std::error::Error as StdError;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::backoff::Rng;
use crate::clock::Time;
use crate::config::{BreakerBuilder, Callback};
use crate::counter::Counter;
use crate::events::{publish, Subscriber, Subscription};
use crate::gate::{Gate, Published};
use crate::machine::{
    Admit, Machine, Ticket, Transition, GATE_CLOSED, GATE_FORCED, GATE_GENERATION_SHIFT,
    GATE_HALF_OPEN, GATE_OPEN,
};
use crate::snapshot::{rate, Snapshot, Totals};
use crate::{CallError, CallPath, Classifier, Outcome, Permit, Rejected, State, StateChange};

/// A circuit breaker for one independently failing dependency.
///
/// Cheap to clone (the clones share one breaker), `Send + Sync`, and meant to
/// live as long as the process: a breaker built per call remembers nothing.
///
/// ```
/// use fusebox::{Breaker, CallPath, Classifier, Verdict};
/// use std::io;
///
/// let breaker = Breaker::builder("corporate-actions")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::new(|e| match e.downcast_ref::<io::Error>() {
///         Some(e) if e.kind() == io::ErrorKind::TimedOut => Verdict::Failure,
///         _ => Verdict::Ignore,
///     }))
///     .failure_threshold(3)
///     .build()?;
///
/// let answer: Result<u32, _> = breaker.call(|| Ok::<_, io::Error>(42));
/// assert_eq!(answer.unwrap(), 42);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Breaker {
    inner: Arc<Inner>,
}

struct Inner {
    name: crate::name::Name,
    call_path: CallPath,
    /// The state in one word, for the lock-free part of the hot path, and
    /// the successes counted without the lock (`src/gate.rs`). Written only
    /// under the lock, but for those counts.
    gate: Gate,
    short_circuits: Counter,
    time: Time,
    times_calls: bool,
    has_window: bool,
    core: Mutex<Core>,
    dispatching: AtomicBool,
    classifier: Classifier,
    on_change: Option<Callback>,
    subscribers: Mutex<Vec<Subscriber>>,
}

/// What the lock guards.
struct Core {
    machine: Machine,
    /// What the gate last published, so it is stored again only on a change.
    published: Published,
    /// Outcomes recorded under the lock, to sample the clock check.
    settled: u64,
    queue: VecDeque<StateChange>,
    last: Option<StateChange>,
    seq: u64,
}

impl Breaker {
    /// Starts building a breaker called `name` (used in errors, logs and
    /// metrics). See [`BreakerBuilder`] for the settings and their defaults.
    pub fn builder(name: impl Into<String>) -> BreakerBuilder {
        BreakerBuilder::new(name)
    }

    pub(crate) fn from_builder(b: BreakerBuilder) -> Breaker {
        let time = match b.clock {
            Some(clock) => Time::clock(clock),
            None => Time::recent(),
        };
        let seed = b.jitter_seed.unwrap_or_else(Rng::random_seed);
        let machine = Machine::new(b.settings, seed, time.now());
        let (gate, published) = Gate::new(machine.gate(), machine.quiet_until());
        let classifier = b
            .classifier
            .expect("build() checked that a classifier is set");
        Breaker {
            inner: Arc::new(Inner {
                name: crate::name::intern(&b.name),
                call_path: b
                    .call_path
                    .expect("build() checked that a call path is set"),
                gate,
                short_circuits: Counter::default(),
                times_calls: machine.times_calls(),
                has_window: machine.quiet_until() != u64::MAX,
                time,
                core: Mutex::new(Core {
                    published,
                    settled: 0,
                    machine,
                    queue: VecDeque::new(),
                    last: None,
                    seq: 0,
                }),
                dispatching: AtomicBool::new(false),
                classifier,
                on_change: b.on_state_change,
                subscribers: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The breaker's name.
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    /// The call path it was declared for.
    pub fn call_path(&self) -> CallPath {
        self.inner.call_path
    }

    /// The classifier it uses.
    pub fn classifier(&self) -> &Classifier {
        &self.inner.classifier
    }

    /// Runs `f` through the breaker.
    ///
    /// If the breaker refuses, `f` is not invoked and the result is
    /// [`CallError::Rejected`]. Otherwise `f` runs with no lock held; an `Err`
    /// is classified, counted if it is a failure, and returned unchanged in
    /// [`CallError::Failed`]. A panic in `f` counts as a failure and resumes
    /// unwinding to the caller.
    ///
    /// Cost of a success on a healthy closed breaker: two loads of the gate,
    /// `f`, and one compare-and-swap on the thread's own counter line (plus
    /// a clock read with a window), no lock and no allocation. A failure, a probe, or a call timed for
    /// slow-call or latency detection takes one lock round trip and one or
    /// two clock reads. A refusal: one atomic load, one clock read, one
    /// relaxed increment. `docs/design.md` has the details,
    /// `docs/performance.md` the measurements.
    ///
    /// Always inlined, so that the result never makes a round trip through
    /// memory on its way back to the caller.
    #[inline(always)]
    pub fn call<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        E: StdError + 'static,
    {
        let permit = self.try_acquire().map_err(CallError::Rejected)?;
        match f() {
            Ok(value) => {
                permit.success();
                Ok(value)
            }
            Err(err) => {
                let verdict = self.inner.classifier.classify(&err);
                permit.record(verdict.into());
                Err(CallError::Failed(err))
            }
        }
    }

    /// Wraps `f` once so it can be called many times through this breaker.
    ///
    /// ```
    /// # use fusebox::{Breaker, CallPath, Classifier};
    /// # let breaker = Breaker::builder("fx").call_path(CallPath::ReferenceData)
    /// #     .classifier(Classifier::every_error_is_a_failure()).build().unwrap();
    /// let lookup = breaker.decorate(|sym: &str| Ok::<_, std::io::Error>(sym.len()));
    /// assert_eq!(lookup.call("EURUSD").unwrap(), 6);
    /// ```
    pub fn decorate<F>(&self, f: F) -> Decorated<F> {
        Decorated {
            breaker: self.clone(),
            f,
        }
    }

    /// Asks to make one call, for code that is not a single closure.
    ///
    /// On success, report the outcome on the returned [`Permit`]. A refusal
    /// means nothing should be attempted.
    ///
    /// # Errors
    ///
    /// [`Rejected`] when the breaker is open, forced open, or half-open with
    /// its probes already out.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        // The hot path. Closed: one atomic load (plus a clock read when calls
        // are timed). Open: one atomic load and one clock read, then the
        // refusal. Everything else takes the lock in `acquire_locked`.
        let gate = self.inner.gate.word();
        match gate & 3 {
            GATE_CLOSED => {
                let generation = gate >> GATE_GENERATION_SHIFT;
                return Ok(Permit::new(
                    self,
                    Ticket::Closed { generation },
                    self.start(),
                ));
            }
            GATE_FORCED => return Err(self.refuse(State::ForcedOpen, None)),
            GATE_OPEN => {
                let now = self.inner.time.now();
                let until = gate >> 2;
                if now < until {
                    return Err(self.refuse(State::Open, Some(until - now)));
                }
            }
            _ => debug_assert_eq!(gate, GATE_HALF_OPEN),
        }
        self.acquire_locked()
    }

    #[cold]
    fn acquire_locked(&self) -> Result<Permit<'_>, Rejected> {
        self.inner.time.check_fresh();
        let now = self.inner.time.now();
        let (admit, changed) = {
            let mut core = self.lock();
            let (admit, transition) = core.machine.admit(now);
            let changed = transition.is_some();
            if let Some(t) = transition {
                self.publish(&mut core, t);
            }
            (admit, changed)
        };
        if changed {
            self.dispatch();
        }
        match admit {
            Admit::Go(ticket) => Ok(Permit::new(self, ticket, now)),
            Admit::Refuse { state, retry_after } => Err(self.refuse(state, retry_after)),
        }
    }

    #[inline(always)]
    fn refuse(&self, state: State, retry_after: Option<u64>) -> Rejected {
        let refused = self.inner.short_circuits.add_one();
        if refused % 1024 == 1023 {
            self.inner.time.check_fresh();
        }
        Rejected::new(self.inner.name, state, retry_after)
    }

    #[inline]
    fn start(&self) -> u64 {
        if self.inner.times_calls {
            self.inner.time.now()
        } else {
            0
        }
    }

    /// Records the outcome of a permit. Called once per permit.
    #[inline]
    pub(crate) fn settle(&self, ticket: Ticket, started: u64, outcome: Outcome) {
        if let (Ticket::Closed { generation }, Outcome::Success) = (ticket, outcome) {
            // Still closed in the same generation, with nothing a success
            // would change but counts: count it without the lock, in the
            // period the gate names or not at all (`src/gate.rs`).
            let time = &self.inner.time;
            if self
                .inner
                .gate
                .count_quiet(generation, self.inner.has_window, || time.now())
            {
                return;
            }
        }
        self.settle_locked(ticket, started, outcome);
    }

    fn settle_locked(&self, ticket: Ticket, started: u64, outcome: Outcome) {
        let now = self.inner.time.now();
        let elapsed = if self.inner.times_calls || matches!(ticket, Ticket::Probe { .. }) {
            now.saturating_sub(started)
        } else {
            0
        };
        let (changed, sample) = {
            let mut core = self.lock();
            core.settled = core.settled.wrapping_add(1);
            let sample = core.settled % 1024 == 0;
            let transition = core.machine.record(now, ticket, outcome, elapsed);
            // A transition leaves the machine out of the closed period any
            // late quiet success was counted in, so at most one of the two
            // queues a change.
            let changed = match transition {
                Some(t) => {
                    self.publish(&mut core, t);
                    true
                }
                None => self.sync_gate(&mut core),
            };
            (changed, sample)
        };
        if changed {
            self.dispatch();
        }
        if sample {
            self.inner.time.check_fresh();
        }
    }

    /// The state a call made now would meet, as [`Snapshot::state`] reads
    /// it: an open breaker whose period has ended reads `HalfOpen` (the next
    /// call is the probe), and a half-open one with a probe past its
    /// deadline reads `Open` (the next call re-opens it).
    ///
    /// Closed and forced open: one atomic load. Open: one clock read more.
    /// Half-open: one lock round trip.
    pub fn state(&self) -> State {
        let gate = self.inner.gate.word();
        match gate & 3 {
            GATE_CLOSED => State::Closed,
            GATE_FORCED => State::ForcedOpen,
            GATE_OPEN if self.inner.time.now() < gate >> 2 => State::Open,
            GATE_OPEN => State::HalfOpen,
            _ => {
                let now = self.inner.time.now();
                self.lock().machine.state_at(now)
            }
        }
    }

    /// A consistent view of the breaker's counters and state, as a call made
    /// now would meet it (see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        self.inner.time.check_fresh();
        let now = self.inner.time.now();
        let (v, last, changed) = {
            let mut core = self.lock();
            core.machine.slide(now);
            let changed = self.sync_gate(&mut core);
            (core.machine.view(now), core.last.clone(), changed)
        };
        if changed {
            self.dispatch();
        }
        Snapshot {
            name: self.inner.name,
            state: v.state,
            consecutive_failures: v.consecutive_failures,
            window_calls: v.window_calls,
            window_failures: v.window_failures,
            window_slow_calls: v.window_slow,
            failure_rate: rate(v.window_failures, v.window_calls),
            slow_call_rate: rate(v.window_slow, v.window_calls),
            retry_after: v.retry_after.map(Duration::from_nanos),
            open_duration: Duration::from_nanos(v.open_period),
            trips: v.trips,
            totals: Totals {
                calls: v.totals.calls,
                successes: v.totals.successes,
                failures: v.totals.failures,
                ignored: v.totals.ignored,
                slow: v.totals.slow,
                short_circuits: self.inner.short_circuits.sum(),
            },
            time_in_state: Duration::from_nanos(v.in_state),
            probes_in_flight: v.probes_in_flight,
            latency_percentile: v.latency_percentile,
            latency_breaches: v.latency_breaches,
            last_transition: last,
        }
    }

    /// Opens the breaker until [`reset`](Self::reset): every call is refused
    /// and nothing probes. `actor` and `note` say who asked and why; they are
    /// in the state change and the snapshot.
    pub fn force_open(&self, actor: &str, note: &str) {
        self.manual(|m, now| m.force_open(now, actor.into(), note.into()));
    }

    /// Closes the breaker, clears its trip counters and returns the open
    /// period to its base. Lifetime totals are kept.
    pub fn reset(&self, actor: &str, note: &str) {
        self.manual(|m, now| m.reset(now, actor.into(), note.into()));
    }

    fn manual(&self, op: impl FnOnce(&mut Machine, u64) -> Transition) {
        let now = self.inner.time.now();
        {
            let mut core = self.lock();
            let t = op(&mut core.machine, now);
            self.publish(&mut core, t);
        }
        self.dispatch();
    }

    /// A bounded stream of this breaker's state changes. A subscriber that
    /// falls more than `capacity` changes behind loses the newer ones
    /// (counted by [`Subscription::dropped`]); callers never wait for it.
    pub fn subscribe(&self, capacity: usize) -> Subscription {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        self.inner.subscribers.lock().push(Subscriber {
            tx,
            dropped: Arc::clone(&dropped),
        });
        Subscription { rx, dropped }
    }

    /// Under the lock: make the new state visible to the hot path and queue
    /// the change for delivery.
    fn publish(&self, core: &mut Core, t: Transition) {
        self.sync_gate(core);
        core.seq += 1;
        let change = StateChange {
            breaker: self.inner.name,
            from: t.from,
            to: t.to,
            reason: t.reason,
            at: self.inner.time.instant(t.at),
            seq: core.seq,
        };
        core.last = Some(change.clone());
        core.queue.push_back(change);
    }

    /// Under the lock: publish the gate if the machine's has changed,
    /// sealing off the successes counted without the lock in the period it
    /// ends and recording those that landed after the last take
    /// (`src/gate.rs`). Returns whether they caused a state change, which is
    /// then queued.
    #[inline]
    fn sync_gate(&self, core: &mut Core) -> bool {
        let Core {
            machine, published, ..
        } = core;
        let late = self.inner.gate.publish(
            published,
            machine,
            |m| (m.gate(), m.quiet_until()),
            |m, n, generation| m.late_successes(self.inner.time.now(), generation, n),
        );
        match late {
            Some(t) => {
                self.publish(core, t);
                true
            }
            None => false,
        }
    }

    /// Takes the lock and hands the machine the successes counted without
    /// it, so that every locked operation sees every success before it.
    #[inline]
    fn lock(&self) -> parking_lot::MutexGuard<'_, Core> {
        let mut core = self.inner.core.lock();
        let n = self.inner.gate.take_quiet(&core.published);
        if n != 0 {
            core.machine.absorb_quiet_successes(n);
        }
        core
    }

    /// Outside the lock: deliver queued changes, in order, exactly once.
    ///
    /// One thread at a time delivers; a change queued while another thread
    /// is delivering (including from inside a callback) is delivered by that
    /// thread before it stops.
    fn dispatch(&self) {
        let inner = &*self.inner;
        while inner
            .dispatching
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            loop {
                let next = inner.core.lock().queue.pop_front();
                match next {
                    Some(change) => self.deliver(&change),
                    None => break,
                }
            }
            inner.dispatching.store(false, Ordering::Release);
            if inner.core.lock().queue.is_empty() {
                return;
            }
        }
    }

    /// Runs the user's code for one change: the log sink, then the callback.
    /// A panic in either is caught, so that it never reaches the caller and
    /// never leaves `dispatching` set (which would end every later delivery).
    fn deliver(&self, change: &StateChange) {
        let _ = catch_unwind(AssertUnwindSafe(|| match change.to {
            State::Open | State::ForcedOpen => log::warn!("{change}"),
            State::Closed | State::HalfOpen => log::info!("{change}"),
        }));
        if let Some(cb) = &self.inner.on_change {
            if catch_unwind(AssertUnwindSafe(|| cb(change))).is_err() {
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    log::error!(
                        "breaker `{}`: on_state_change panicked on {} -> {}; the breaker is unaffected",
                        change.breaker,
                        change.from,
                        change.to
                    )
                }));
            }
        }
        publish(&self.inner.subscribers, change);
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.inner.name)
            .field("call_path", &self.inner.call_path)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// A function wrapped once by [`Breaker::decorate`], called many times.
#[derive(Clone, Debug)]
pub struct Decorated<F> {
    breaker: Breaker,
    f: F,
}

impl<F> Decorated<F> {
    /// Calls the wrapped function with `arg` through the breaker.
    #[inline]
    pub fn call<A, T, E>(&self, arg: A) -> Result<T, CallError<E>>
    where
        F: Fn(A) -> Result<T, E>,
        E: StdError + 'static,
    {
        self.breaker.call(|| (self.f)(arg))
    }

    /// The breaker, for snapshots and overrides.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}
