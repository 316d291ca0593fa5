//! The breaker: its shared state and how it is built, and the hot path: a
//! call's admission, its outcome (a quiet success counted without the
//! lock, or recorded under it), and the locked operations around the pure
//! machine (`src/machine.rs`) that publish its gate and queue its changes.
//!
//! Around it, each in a file of its own: delivering the changes
//! (`delivery.rs`), reading the breaker without a call (`view.rs`), an
//! operator's overrides (`overrides.rs`), the wall clock read again
//! (`wall.rs`), and what the capabilities above the core reach it through
//! (`seam.rs`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::backoff::Rng;
use crate::cause::{FailureCause, LastNote, Note};
use crate::clock::Time;
use crate::delivery::{Courier, Outbox, Pending};
use crate::events::{Callback, Delivery, Subscribers};
use crate::gate::{Gate, Published, Word};
use crate::in_flight::InFlight;
use crate::machine::{Admit, Machine, Ticket, Transition};
use crate::notifier;
use crate::recovery::health_probe::HealthProbe;
use crate::recovery::Recovery;
use crate::settings::Settings;
use crate::wall::{watch_from, Wall};
use crate::{CallPath, Classifier, Rejected, ResultClassifier, State, StateChange, Verdict};

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
///     .consecutive_failure_threshold(3)
///     .build()?;
///
/// let answer: Result<u32, _> = breaker.call(|| Ok::<_, io::Error>(42));
/// assert_eq!(answer.unwrap(), 42);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Breaker {
    pub(crate) inner: Arc<Inner>,
}

/// What a breaker is built from, as a [`BreakerBuilder`] collects it
/// (`src/config.rs`): `build()` checks it and hands it to
/// [`Breaker::from_parts`].
///
/// [`BreakerBuilder`]: crate::BreakerBuilder
#[derive(Clone)]
pub(crate) struct Parts {
    pub(crate) name: String,
    pub(crate) call_path: Option<CallPath>,
    pub(crate) classifier: Option<Classifier>,
    pub(crate) clock: Option<quanta::Clock>,
    pub(crate) on_state_change: Option<Callback>,
    pub(crate) delivery: Delivery,
    pub(crate) jitter_seed: Option<u64>,
    pub(crate) result_classifier: Option<ResultClassifier>,
    /// Shared with the builders and configurations cloned from this one
    /// until one of them changes a setting.
    pub(crate) settings: Arc<Settings>,
    /// Ramp-up, maintenance windows, deadlines (`src/trading/`): read once
    /// at build, into the machine's `Recovering`, and not kept.
    pub(crate) recovery: Recovery,
    /// What has the process's health-probe thread watch the breaker built
    /// with a health probe: set with the probe by
    /// `BreakerBuilder::health_probe` (`src/trading/`), and handed to
    /// the breaker at build, so that the breaker does not import the
    /// thread's module. False if the thread cannot take the breaker.
    pub(crate) probe_thread: Option<fn(&Breaker, HealthProbe) -> bool>,
}

impl Parts {
    /// The defaults, for a breaker called `name`.
    pub(crate) fn new(name: String) -> Parts {
        Parts {
            name,
            call_path: None,
            classifier: None,
            clock: None,
            on_state_change: None,
            delivery: Delivery::Caller,
            jitter_seed: None,
            result_classifier: None,
            settings: Arc::default(),
            recovery: Recovery::default(),
            probe_thread: None,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) name: Arc<str>,
    /// From when a call to a closed breaker takes the lock to be checked
    /// against a maintenance window; read only when `Hot::times_calls` (and
    /// by `would_permit`), and stored only when it changes.
    pub(crate) watch_from: AtomicU64,
    call_path: CallPath,
    /// The state in one word, for the lock-free part of the hot path, and
    /// the successes counted without the lock (`src/gate.rs`). Written only
    /// under the lock, but for those counts. Refusals and admissions are
    /// counted in the gate's per-thread lines too. What the hot path reads
    /// beside the word rides on its line ([`Hot`]).
    pub(crate) gate: Gate<Hot>,
    /// The wall clock, if it is read again as the breaker runs.
    pub(crate) wall: Option<Box<Wall>>,
    pub(crate) core: Mutex<Core>,
    /// Who delivers its state changes (`src/delivery.rs`).
    courier: Courier,
    classifier: Classifier,
    result_classifier: Option<ResultClassifier>,
    on_change: Option<Callback>,
    /// Made at the first subscription: a breaker nobody subscribes to
    /// keeps an empty cell.
    pub(crate) subscribers: OnceLock<Arc<Subscribers>>,
}

/// What a call reads besides the gate's word, on the word's line: a
/// refusal or a quiet success reads that line and its thread's count line,
/// no other. Set at build and never written.
pub(crate) struct Hot {
    pub(crate) time: Time,
    /// The name as a refusal carries it.
    inline_name: crate::name::Inline,
    times_calls: bool,
    /// Whether a closed admission does more than take a permit: read the
    /// clock (`times_calls`) or count the call in flight (`counts_admitted`).
    admits_slowly: bool,
    /// With `count_calls_in_flight`, calls admitted are counted (in the
    /// gate's lines), for the calls in flight (admitted less reported) in a
    /// snapshot.
    pub(crate) counts_admitted: bool,
    has_window: bool,
    /// Whether `Inner::result_classifier` is set: a copy here, so that a
    /// success checks it on the line it reads already.
    judges_values: bool,
    /// With `stuck_call_threshold` or `hung_call_duration`: the closed
    /// calls in flight (`src/in_flight.rs`), which claim a word of it when
    /// admitted and free it when they report. Here, on the line every call
    /// reads, so that a breaker without it checks a pointer it has read
    /// already.
    pub(crate) in_flight: Option<Box<InFlight>>,
}

impl Inner {
    #[inline(always)]
    pub(crate) fn hot(&self) -> &Hot {
        self.gate.hot()
    }
}

/// A breaker's state changes, from its first.
struct Changes {
    /// The last change.
    last: StateChange,
    /// Changes waiting for delivery.
    pending: Pending<StateChange>,
}

/// What the lock guards.
pub(crate) struct Core {
    pub(crate) machine: Machine,
    /// What the gate last published, so it is stored again only on a change.
    published: Published,
    /// Boxed at the first change and reused: a breaker that never changes
    /// state keeps a pointer.
    changes: Option<Box<Changes>>,
    /// The last `event_log_capacity` changes, oldest first; replaced whole
    /// at each change, so that a snapshot shares it.
    pub(crate) recent: Arc<[StateChange]>,
    /// The last failure with an error to show since the last state change.
    recent_failure: LastNote,
    /// What opened the breaker, while it is not closed.
    pub(crate) opened_by: Option<Arc<FailureCause>>,
}

/// The empty list of recent changes, one per process: a breaker that never
/// changes state shares it.
fn no_changes() -> Arc<[StateChange]> {
    static NONE: OnceLock<Arc<[StateChange]>> = OnceLock::new();
    Arc::clone(NONE.get_or_init(|| Arc::new([])))
}

impl Core {
    /// The `seq` of the last change (0: none yet).
    pub(crate) fn seq(&self) -> u64 {
        self.changes.as_ref().map_or(0, |c| c.last.seq)
    }

    /// The last change, if there was one.
    pub(crate) fn last_change(&self) -> Option<StateChange> {
        self.changes.as_ref().map(|c| c.last.clone())
    }

    /// The changes dropped from a full queue.
    pub(crate) fn dropped_changes(&self) -> u64 {
        self.changes.as_ref().map_or(0, |c| c.pending.dropped())
    }
}

impl Breaker {
    /// A breaker built from `parts`, which `build()` has checked.
    pub(crate) fn from_parts(b: Parts) -> Breaker {
        let mut b = b;
        let time = Time::new(b.clock.take());
        let seed = b.jitter_seed.unwrap_or_else(Rng::random_seed);
        let wall = b.recovery.anchor(time.now());
        let watches = b.recovery.watches_calls();
        let health_probe = b.recovery.health_probe();
        let probe_thread = b.probe_thread;
        let count_in_flight = b.settings.count_in_flight;
        let tracks_in_flight = b.settings.tracks_in_flight();
        let machine = Machine::new(b.settings, &b.recovery, seed, time.now());
        let wall = wall.map(|clock| Box::new(Wall::new(clock, &machine, time.now())));
        let watch = match tracks_in_flight {
            true => 0,
            false => watch_from(&machine, time.now(), wall.as_deref()),
        };
        let hot = Hot {
            times_calls: machine.times_calls() || watches,
            admits_slowly: machine.times_calls() || watches || count_in_flight,
            counts_admitted: count_in_flight,
            has_window: machine.quiet_until() != u64::MAX,
            judges_values: b.result_classifier.is_some(),
            in_flight: tracks_in_flight.then(|| Box::new(InFlight::new())),
            inline_name: crate::name::Inline::new(&b.name),
            time,
        };
        let (gate, published) = Gate::new(
            machine.gate(),
            machine.quiet_until(),
            hot.time.quiet_deadline(machine.quiet_until()),
            hot,
        );
        let classifier = b
            .classifier
            .expect("build() checked that a classifier is set");
        let breaker = Breaker {
            inner: Arc::new(Inner {
                name: Arc::from(b.name.as_str()),
                watch_from: AtomicU64::new(watch),
                call_path: b
                    .call_path
                    .expect("build() checked that a call path is set"),
                gate,
                wall,
                core: Mutex::new(Core {
                    published,
                    machine,
                    changes: None,
                    recent: no_changes(),
                    recent_failure: LastNote::default(),
                    opened_by: None,
                }),
                courier: Courier::new(b.delivery),
                classifier,
                result_classifier: b.result_classifier,
                on_change: b.on_state_change,
                subscribers: OnceLock::new(),
            }),
        };
        if let Some(p) = health_probe {
            if !probe_thread.is_some_and(|watch| watch(&breaker, p)) {
                breaker.inner.core.lock().machine.probe_live();
            }
        }
        breaker
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Now, on the breaker's clock.
    #[inline(always)]
    pub(crate) fn now(&self) -> u64 {
        self.inner.hot().time.now()
    }

    /// The call path it was declared for.
    pub fn call_path(&self) -> CallPath {
        self.inner.call_path.clone()
    }

    /// The classifier it uses.
    pub(crate) fn classifier(&self) -> &Classifier {
        &self.inner.classifier
    }

    /// Admission: the whole decision whether a call may go, and if it may,
    /// its ticket and when it started (0 if calls are not timed). What
    /// admits a call ([`try_acquire`](Self::try_acquire), `call`) wraps
    /// them in a permit, whose outcome goes to [`settle`](Self::settle).
    #[inline(always)]
    pub(crate) fn admit(&self) -> Result<(Ticket, u64), Rejected> {
        // The hot path. Closed: one atomic load (plus a clock read when calls
        // are timed). Open: one atomic load and one clock read, then the
        // refusal. Everything else takes the lock in `acquire_locked`.
        match self.inner.gate.word() {
            Word::Closed { generation, .. } => {
                if let Some(started) = self.start(generation) {
                    return Ok((Ticket::Closed { generation }, started));
                }
            }
            Word::ForcedOpen { until } => {
                // Forced open until a reset, or until an expiry.
                if until.is_none_or(|until| self.now() < until) {
                    return Err(self.refuse(State::ForcedOpen, None));
                }
            }
            Word::Open { until } => {
                let now = self.now();
                if now < until {
                    return Err(self.refuse(State::Open, Some(until - now)));
                }
            }
            Word::Locked => {}
        }
        self.acquire_locked()
    }

    /// The verdict on an `Ok` result: the result classifier's, or a success.
    /// `call` and its siblings test for a result classifier themselves and
    /// call `Permit::judged_value` only with one, so that the success they
    /// report without one stays a constant the inlined settle folds away.
    #[inline]
    pub(crate) fn judge_ok<T: 'static>(&self, value: &T) -> Verdict {
        match &self.inner.result_classifier {
            None => Verdict::Success,
            Some(c) => c.classify(value),
        }
    }

    /// Whether a result classifier judges `Ok` results.
    #[inline(always)]
    pub(crate) fn has_result_classifier(&self) -> bool {
        self.inner.hot().judges_values
    }

    #[cold]
    fn acquire_locked(&self) -> Result<(Ticket, u64), Rejected> {
        let now = self.now();
        let (admit, changed) = {
            let mut core = self.lock();
            // Calls stuck since the last scan open the breaker before this
            // one is judged.
            let stuck = self.settle_in_flight(&mut core, now);
            let (admit, transition) = core.machine.admit(now);
            let changed = match transition {
                Some(t) => {
                    self.publish(&mut core, t);
                    true
                }
                // A ramp may have ended.
                None => self.sync_gate(&mut core),
            };
            self.store_watch_from(&core, now);
            (admit, u64::from(changed) + u64::from(stuck))
        };
        if changed > 0 {
            self.inner.dispatch(changed);
        }
        match admit {
            Admit::Go(ticket) => {
                if self.inner.hot().counts_admitted {
                    self.inner.gate.counts().add_admitted();
                }
                if let Ticket::Closed { generation } = ticket {
                    self.claim_in_flight(generation, now);
                }
                Ok((ticket, now))
            }
            Admit::Refuse { state, retry_after } => Err(self.refuse(state, retry_after)),
        }
    }

    #[inline(always)]
    fn refuse(&self, state: State, retry_after: Option<u64>) -> Rejected {
        self.inner.gate.counts().add_refusal();
        Rejected::new(self.inner.hot().inline_name, state, retry_after)
    }

    /// When a call admitted by a closed gate in `generation` starts (0 if
    /// calls are not timed); `None` if it must take the lock, to be checked
    /// against a maintenance window or to scan the calls in flight.
    #[inline]
    fn start(&self, generation: u64) -> Option<u64> {
        if self.inner.hot().admits_slowly {
            self.start_slowly(generation)
        } else {
            Some(0)
        }
    }

    /// A closed admission that reads the clock (for call timing, to check
    /// it against the next maintenance window or the next call in flight
    /// to cross a mark) or counts the call in flight. `None` sends the call
    /// to the locked path, which counts it there.
    fn start_slowly(&self, generation: u64) -> Option<u64> {
        let started = if self.inner.hot().times_calls {
            let now = self.now();
            if now >= self.inner.watch_from.load(Ordering::Relaxed) {
                return None;
            }
            now
        } else {
            0
        };
        if self.inner.hot().counts_admitted {
            self.inner.gate.counts().add_admitted();
        }
        self.claim_in_flight(generation, started);
        Some(started)
    }

    /// Records the outcome of a permit. Called once per permit.
    #[inline]
    pub(crate) fn settle(&self, ticket: Ticket, started: u64, outcome: Verdict) {
        self.settle_noted(ticket, started, outcome, None);
    }

    /// [`settle`](Self::settle), with the note of the error a failure
    /// returned, kept in case the breaker opens on it.
    #[inline]
    pub(crate) fn settle_noted(
        &self,
        ticket: Ticket,
        started: u64,
        outcome: Verdict,
        note: Option<&Note>,
    ) {
        if let (Ticket::Closed { generation }, Verdict::Success) = (ticket, outcome) {
            // Still closed in the same generation, with nothing a success
            // would change but counts: count it without the lock, in the
            // period the gate names or not at all (`src/gate.rs`).
            let time = &self.inner.hot().time;
            if self
                .inner
                .gate
                .count_quiet(generation, self.inner.hot().has_window, || time.quiet_now())
            {
                return;
            }
        }
        self.settle_locked(ticket, started, outcome, note);
    }

    fn settle_locked(&self, ticket: Ticket, started: u64, outcome: Verdict, note: Option<&Note>) {
        if self.record_locked(ticket, started, outcome, note) {
            self.inner.dispatch(1);
        }
    }

    /// Records an outcome under the lock; whether it queued a change.
    pub(crate) fn record_locked(
        &self,
        ticket: Ticket,
        started: u64,
        outcome: Verdict,
        note: Option<&Note>,
    ) -> bool {
        let now = self.now();
        let elapsed = if self.inner.hot().times_calls || matches!(ticket, Ticket::Probe { .. }) {
            now.saturating_sub(started)
        } else {
            0
        };
        let mut core = self.lock();
        // Out of flight before it is recorded (a breaker that tracks calls
        // in flight records every outcome here: none is quiet).
        self.release_in_flight(ticket, started);
        let transition = core.machine.record(now, ticket, outcome, elapsed);
        if let Some(note) = note {
            core.recent_failure.set(note);
        }
        self.conclude(&mut core, transition)
    }

    /// Records that a call admitted with `ticket` was cancelled: it ended
    /// with no outcome to judge (an async caller's future dropped before it
    /// finished, `src/future.rs`). One lock round trip, like any report
    /// that is not a quiet success.
    #[cold]
    pub(crate) fn cancel(&self, ticket: Ticket, started: u64) {
        let now = self.now();
        let changed = {
            let mut core = self.lock();
            self.release_in_flight(ticket, started);
            let transition = core.machine.cancel(now, ticket);
            self.conclude(&mut core, transition)
        };
        if changed {
            self.inner.dispatch(1);
        }
    }

    /// Under the lock, after a report: publishes the transition it caused,
    /// or the gate if the machine's has changed; whether a change was
    /// queued.
    fn conclude(&self, core: &mut Core, transition: Option<Transition>) -> bool {
        // A transition leaves the machine out of the closed period any
        // late quiet success was counted in, so at most one of the two
        // queues a change.
        match transition {
            Some(t) => {
                self.publish(core, t);
                true
            }
            None => self.sync_gate(core),
        }
    }

    /// Under the lock: make the new state visible to the hot path and queue
    /// the change for delivery, dropping the oldest waiting change if
    /// `Delivery::PENDING_CAPACITY` are waiting already.
    pub(crate) fn publish(&self, core: &mut Core, t: Transition) {
        self.sync_gate(core);
        let seq = core.seq() + 1;
        let cause = remember_cause(core, &t);
        let change = StateChange {
            cause,
            breaker: Arc::clone(&self.inner.name),
            from: t.from,
            to: t.to,
            reason: t.reason,
            at: self.inner.hot().time.instant(t.at),
            seq,
        };
        let changes = match &mut core.changes {
            Some(changes) => {
                changes.last = change.clone();
                changes
            }
            None => core.changes.insert(Box::new(Changes {
                last: change.clone(),
                pending: Pending::default(),
            })),
        };
        let keep = core.machine.settings().event_log_capacity;
        if keep > 0 {
            let skip = (core.recent.len() + 1).saturating_sub(keep);
            core.recent = core.recent[skip..]
                .iter()
                .cloned()
                .chain(std::iter::once(change.clone()))
                .collect();
        }
        changes.pending.push(change);
    }

    /// Under the lock: publish the gate if the machine's has changed,
    /// sealing off the successes counted without the lock in the period it
    /// ends and recording those that landed after the last take
    /// (`src/gate.rs`). Returns whether they caused a state change, which is
    /// then queued.
    #[inline]
    pub(crate) fn sync_gate(&self, core: &mut Core) -> bool {
        let Core {
            machine, published, ..
        } = core;
        let late = self.inner.gate.publish(
            published,
            machine,
            |m| (m.gate(), m.quiet_until()),
            |m, n, generation| m.late_successes(self.now(), generation, n),
            |until| self.inner.hot().time.quiet_deadline(until),
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
    /// it, so that every locked operation sees every success before it; and
    /// a fresh wall-clock reading, when one is due.
    #[inline]
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, Core> {
        let wall = self
            .inner
            .wall
            .as_ref()
            .and_then(|w| w.reading(|| self.now()));
        let mut core = self.inner.core.lock();
        if let Some((wall, now)) = wall {
            core.machine.reanchor(wall, now);
        }
        let n = self.inner.gate.take_quiet(&core.published);
        if n != 0 {
            core.machine.absorb_quiet_successes(n);
        }
        core
    }

    /// Under the lock: stores from when a closed call takes the lock to be
    /// checked against a maintenance window, or to scan the calls in
    /// flight.
    pub(crate) fn store_watch_from(&self, core: &Core, now: u64) {
        let due = self
            .inner
            .hot()
            .in_flight
            .as_ref()
            .map_or(u64::MAX, |t| t.due());
        let from = watch_from(&core.machine, now, self.inner.wall.as_deref()).min(due);
        // Stored only on a change: the line is the one every call reads.
        let watch = &self.inner.watch_from;
        if watch.load(Ordering::Relaxed) != from {
            watch.store(from, Ordering::Relaxed);
        }
    }
}

/// Under the lock, as `t` is published: what opened the breaker, if `t`
/// opens it after a failure that showed its error. A state change starts a
/// new period: the failures of the last one are forgotten.
fn remember_cause(core: &mut Core, t: &Transition) -> Option<Arc<FailureCause>> {
    let recent = core.recent_failure.take();
    match t.to {
        State::Open => {
            let cause = recent.map(|n| Arc::new(n.cause()));
            if cause.is_some() {
                core.opened_by.clone_from(&cause);
            }
            cause
        }
        State::HalfOpen => None,
        State::Closed | State::ForcedOpen | State::ForcedClosed => {
            core.opened_by = None;
            None
        }
    }
}

/// What delivery (`src/delivery.rs`) needs of the breaker: its courier,
/// its queue, and the user's code each change runs.
impl Outbox for Inner {
    type Change = StateChange;

    fn courier(&self) -> &Courier {
        &self.courier
    }

    fn pop(&self) -> Option<StateChange> {
        let mut core = self.core.lock();
        core.changes.as_mut().and_then(|c| c.pending.pop())
    }

    fn deliver(&self, change: &StateChange) {
        let flapping = || {
            let now = self.hot().time.now();
            self.core.lock().machine.flapping_rule(now)
        };
        crate::events::run(
            change,
            flapping,
            self.on_change.as_ref(),
            self.subscribers.get().map(|s| &**s),
        );
    }

    fn schedule(this: Weak<Self>) -> bool {
        notifier::schedule(this)
    }
}

/// The instant `lasting` after `now`, in clock nanoseconds.
pub(crate) fn until(now: u64, lasting: Duration) -> u64 {
    now.saturating_add(crate::check::nanos(lasting))
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &&*self.inner.name)
            .field("call_path", &self.inner.call_path)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod layout {
    use super::{Gate, Hot};
    use std::mem::size_of;

    #[test]
    fn what_a_call_reads_beside_the_word_fits_on_the_words_line() {
        // The gate's word and quiet deadline take 16 bytes of their line;
        // `Hot` must fit in the rest, or every call reads a line more.
        assert_eq!(size_of::<Gate<Hot>>(), size_of::<Gate>());
    }

    #[test]
    fn the_shared_state_takes_at_most_eleven_lines() {
        // The word's line, a count line per thread slot, and six lines of
        // the rest: a field that adds one should be weighed.
        let size = size_of::<super::Inner>();
        assert!(size <= 11 * 128, "{size} bytes");
    }
}
