//! The bulkhead: at most N calls to one dependency at a time, N fixed or
//! adaptive, shared by lanes or not.

use std::error::Error as StdError;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::adaptive::{Adaptive, AdaptiveLimit, Timed};
use super::error::{at_least_one, settle, Full, IsolationError, Layer};
use super::shares::{field, guarantees, total, Look, Shares, MAX_LANES, MAX_LIMIT};
use crate::name::Inline;
use crate::{Breaker, ConfigError, Permit, State};

/// At most `max_concurrent` calls to one dependency at a time, so that a
/// slow dependency cannot hold every thread of the process; with
/// [`adaptive`](BulkheadBuilder::adaptive), a limit that falls when the
/// dependency slows down and grows back when it recovers; with
/// [`lane`](BulkheadBuilder::lane)s, a guaranteed share of the limit for
/// each kind of call, one of them shed last.
///
/// A caller beyond the limit is refused at once, or (with a fixed limit)
/// after waiting at most `max_wait` for a slot, with [`Full`]: nothing was
/// attempted, and the refusal is never counted as the dependency's failure.
/// A call that panics counts as the breaker's failure and gives its slot
/// back; the panic unwinds to the caller.
///
/// Cheap to clone (the clones share one bulkhead), `Send + Sync`. A clone
/// made by [`lane`](Self::lane) calls in that lane.
///
/// ```
/// use fusebox::isolation::Bulkhead;
/// use fusebox::{Breaker, CallPath, Classifier};
///
/// let breaker = Breaker::builder("pricing")
///     .call_path(CallPath::ReferenceData)
///     .classifier(Classifier::every_error_is_a_failure())
///     .build()?;
/// let bulkhead = Bulkhead::builder("pricing").max_concurrent(16).build()?;
///
/// let price = bulkhead.call(&breaker, || Ok::<_, std::io::Error>(101.5));
/// assert_eq!(price.unwrap(), 101.5);
/// assert_eq!(bulkhead.snapshot().peak, 1);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// # Cost
///
/// Admission is one compare-and-swap on the counts of slots in use (one
/// line shared by every caller of this bulkhead) after a load of the limit,
/// and one relaxed load of the peak; release is one atomic subtraction and
/// one load of the waiter count. No lock and no allocation unless a caller
/// waits. An adaptive bulkhead adds a per-thread count to each admission,
/// and times one admission in `2^k` (two clock reads, and a word of its
/// table of calls in flight), `k` following the call rate; every admission
/// once it is a quarter full (`docs/isolation.md`). A refusal with a closed
/// breaker is two atomic loads and a relaxed increment; with a breaker in
/// any other state the breaker is asked first, and a permit it grants is
/// handed back unused (one lock round trip in the breaker). A caller that
/// waits takes a lock and parks on a condition variable; a release then
/// takes the same lock to wake one waiter.
#[derive(Clone)]
pub struct Bulkhead {
    inner: Arc<Inner>,
    /// The lane this handle's calls take: 0, the first, unless made by
    /// [`lane`](Self::lane).
    lane: usize,
}

struct Inner {
    slots: Slots,
    name: Inline,
    max_concurrent: usize,
    max_wait: Duration,
    /// Empty without lanes.
    lanes: Box<[Lane]>,
    /// Each lane's share, in lane order (empty without lanes).
    shares: Box<[f64]>,
    shed_last: usize,
    refusals: [AtomicU64; MAX_LANES],
    /// Boxed: a fixed bulkhead keeps one word for it, and its hot line stays
    /// among small neighbours.
    adaptive: Option<Box<Adaptive>>,
    lock: Mutex<()>,
    freed: Condvar,
}

struct Lane {
    name: Inline,
    share: f64,
}

/// What every admission and release touches, on a line of its own.
#[repr(align(128))]
struct Slots {
    shares: Shares,
    peak: AtomicUsize,
    waiters: AtomicUsize,
}

/// Settings for a [`Bulkhead`], checked by [`build`](Self::build).
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `max_concurrent` | required |
/// | `max_wait` | zero: a caller beyond the limit is refused at once |
/// | `adaptive` | none: the limit is `max_concurrent` |
/// | `lane` | none: every call shares the whole limit |
/// | `shed_last` | required with lanes |
/// | `clock` | quanta's monotonic clock |
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until build() is called"]
pub struct BulkheadBuilder {
    name: String,
    max_concurrent: Option<usize>,
    max_wait: Duration,
    adaptive: Option<AdaptiveLimit>,
    lanes: Vec<(String, f64)>,
    shed_last: Option<String>,
    clock: Option<quanta::Clock>,
}

impl BulkheadBuilder {
    /// The most calls in flight at once: the limit, or with
    /// [`adaptive`](Self::adaptive) the most it grows to (and where it
    /// starts). Required; 1 to 16,384.
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = Some(n);
        self
    }

    /// How long a caller beyond a fixed limit may wait for a slot before
    /// it is refused. Zero (the default) refuses at once, which is what a
    /// thread with its own deadline usually wants; an adaptive limit
    /// always refuses at once.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// Moves the limit with the dependency's latency, between the floor of
    /// `limit` and `max_concurrent` ([`AdaptiveLimit`]).
    pub fn adaptive(mut self, limit: AdaptiveLimit) -> Self {
        self.adaptive = Some(limit);
        self
    }

    /// Adds a lane: calls made through [`Bulkhead::lane`]`(name)` are
    /// guaranteed `share` of the limit (rounded down; the lane named by
    /// [`shed_last`](Self::shed_last) gets the rest), and may borrow what
    /// other lanes leave idle. The bulkhead `build` returns calls in the
    /// first lane added. At most 3 lanes, with names that follow the rules
    /// of a breaker's name; each share within (0, 1], together at most 1.
    pub fn lane(mut self, name: impl Into<String>, share: f64) -> Self {
        self.lanes.push((name.into(), share));
        self
    }

    /// The lane that keeps its guarantee longest as the limit falls: it is
    /// guaranteed whatever the others' shares leave. Required with lanes.
    pub fn shed_last(mut self, lane: impl Into<String>) -> Self {
        self.shed_last = Some(lane.into());
        self
    }

    /// The clock an adaptive limit times calls on (`quanta::Clock::mock()`
    /// in tests).
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Checks the settings and builds the bulkhead.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Missing`] without `max_concurrent`, or with lanes and
    /// no `shed_last`; [`ConfigError::Invalid`] naming the setting that
    /// breaks a rule above.
    pub fn build(self) -> Result<Bulkhead, ConfigError> {
        // The same rules as a breaker's name: it goes into refusals and logs.
        crate::name::check(&self.name)?;
        let limit = self.max_concurrent.ok_or(ConfigError::Missing {
            field: "max_concurrent",
            why: "how many calls a dependency may hold at once depends on the process's threads",
        })?;
        if limit == 0 {
            return Err(at_least_one("max_concurrent", limit));
        }
        crate::check::check(
            "max_concurrent",
            limit <= MAX_LIMIT,
            "must be at most 16384",
            limit,
        )?;
        let adaptive = match &self.adaptive {
            Some(a) => {
                crate::check::check(
                    "max_wait",
                    self.max_wait.is_zero(),
                    "must be zero with an adaptive limit, which refuses at once",
                    crate::duration::display(self.max_wait),
                )?;
                let settings = a.check(limit)?;
                Some(Box::new(Adaptive::new(
                    settings,
                    a.floor_value(),
                    self.clock.clone(),
                )))
            }
            None => None,
        };
        let (lanes, shed_last) = self.check_lanes()?;
        let shares: Box<[f64]> = lanes.iter().map(|l| l.share).collect();
        Ok(Bulkhead {
            inner: Arc::new(Inner {
                slots: Slots {
                    shares: Shares::new(guarantees(limit, &shares, shed_last)),
                    peak: AtomicUsize::new(0),
                    waiters: AtomicUsize::new(0),
                },
                name: Inline::new(&self.name),
                max_concurrent: limit,
                max_wait: self.max_wait,
                lanes,
                shares,
                shed_last,
                refusals: std::array::from_fn(|_| AtomicU64::new(0)),
                adaptive,
                lock: Mutex::new(()),
                freed: Condvar::new(),
            }),
            lane: 0,
        })
    }

    /// The lanes, checked, and the index of the one shed last.
    fn check_lanes(&self) -> Result<(Box<[Lane]>, usize), ConfigError> {
        use crate::check::check;
        check(
            "lane",
            self.lanes.len() <= MAX_LANES,
            "at most 3 lanes",
            self.lanes.len(),
        )?;
        let mut sum = 0.0;
        for (i, (name, share)) in self.lanes.iter().enumerate() {
            crate::name::check(name).map_err(|e| match e {
                ConfigError::Invalid { rule, value, .. } => ConfigError::Invalid {
                    field: "lane",
                    rule,
                    value,
                },
                other => other,
            })?;
            check(
                "lane",
                !self.lanes[..i].iter().any(|(n, _)| n == name),
                "names must differ",
                crate::text::shown(name),
            )?;
            crate::check::check_rate("lane", *share)?;
            sum += share;
        }
        check(
            "lane",
            sum <= 1.0 + 1e-9,
            "shares must add up to at most 1",
            sum,
        )?;
        let shed_last = match (&self.shed_last, self.lanes.is_empty()) {
            (None, true) => 0,
            (None, false) => {
                return Err(ConfigError::Missing {
                    field: "shed_last",
                    why: "with lanes, one is shed last: name the one whose calls matter most",
                })
            }
            (Some(lane), _) => self
                .lanes
                .iter()
                .position(|(n, _)| n == lane)
                .ok_or_else(|| ConfigError::Invalid {
                    field: "shed_last",
                    rule: "must name a lane",
                    value: crate::text::shown(lane).to_string(),
                })?,
        };
        let lanes = self
            .lanes
            .iter()
            .map(|(name, share)| Lane {
                name: Inline::new(name),
                share: *share,
            })
            .collect();
        Ok((lanes, shed_last))
    }
}

/// A point-in-time view of a [`Bulkhead`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct BulkheadSnapshot {
    /// The bulkhead's name.
    pub name: std::sync::Arc<str>,
    /// Its `max_concurrent`: the limit, or the most an adaptive limit grows
    /// to.
    pub max_concurrent: usize,
    /// The limit now (`max_concurrent` unless adaptive).
    pub limit: usize,
    /// Slots in use now.
    pub in_use: usize,
    /// The most slots ever in use at once.
    pub peak: usize,
    /// Callers refused for want of a slot, over the bulkhead's life.
    pub refusals: u64,
    /// What moves an adaptive limit; `None` for a fixed one.
    pub adaptive: Option<AdaptiveSnapshot>,
    /// Each lane, in the order they were added; empty without lanes.
    pub lanes: Vec<LaneSnapshot>,
}

/// What moves an adaptive limit, as a [`BulkheadSnapshot`] shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct AdaptiveSnapshot {
    /// The least the limit falls to.
    pub floor: usize,
    /// The last judged window's latency: the median of its returned calls
    /// and of the ages of the calls then in flight. `None` before the first.
    #[cfg_attr(
        any(feature = "serde", feature = "admin"),
        serde(rename = "latency_seconds", serialize_with = "seconds")
    )]
    pub latency: Option<Duration>,
    /// The baseline the windows are judged against. `None` before the
    /// first window.
    #[cfg_attr(
        any(feature = "serde", feature = "admin"),
        serde(rename = "baseline_seconds", serialize_with = "seconds")
    )]
    pub baseline: Option<Duration>,
}

/// One lane of a [`BulkheadSnapshot`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct LaneSnapshot {
    /// The lane's name.
    pub name: std::sync::Arc<str>,
    /// Its share of the limit.
    pub share: f64,
    /// Whether it is the lane shed last.
    pub shed_last: bool,
    /// The slots it is guaranteed at the limit now.
    pub guaranteed: usize,
    /// Its calls in flight now.
    pub in_use: usize,
    /// Its callers refused, over the bulkhead's life.
    pub refusals: u64,
}

/// A duration as seconds, as the crate's snapshots serialize.
#[cfg(any(feature = "serde", feature = "admin"))]
fn seconds<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

impl Bulkhead {
    /// Starts building a bulkhead called `name` (used in refusals and logs).
    pub fn builder(name: impl Into<String>) -> BulkheadBuilder {
        BulkheadBuilder {
            name: name.into(),
            max_concurrent: None,
            max_wait: Duration::ZERO,
            adaptive: None,
            lanes: Vec::new(),
            shed_last: None,
            clock: None,
        }
    }

    /// The bulkhead's name.
    pub fn name(&self) -> &str {
        self.inner.name.as_str()
    }

    /// This bulkhead, calling in lane `name`: `None` if it has no lane of
    /// that name. Cheap: a clone of the handle.
    pub fn lane(&self, name: &str) -> Option<Bulkhead> {
        let lane = self
            .inner
            .lanes
            .iter()
            .position(|l| l.name.as_str() == name)?;
        Some(Bulkhead {
            inner: Arc::clone(&self.inner),
            lane,
        })
    }

    /// Takes a slot, waiting at most `max_wait` for one. The slot is given
    /// back when the returned [`Slot`] is dropped.
    ///
    /// # Errors
    ///
    /// [`Full`] when no slot came free in time.
    #[inline]
    pub fn try_enter(&self) -> Result<Slot<'_>, Full> {
        match self.enter_now() {
            Ok(slot) => Ok(slot),
            Err(guarantees) => self.enter_waiting(guarantees),
        }
    }

    /// Runs `f` through `breaker`, then this bulkhead, on the caller's
    /// thread.
    ///
    /// The breaker is asked first, so that a call it refuses never takes a
    /// slot. When the bulkhead is full, the breaker's permit is handed back
    /// unused: the refusal is not the dependency's failure. A caller that
    /// waits for a slot asks the breaker again once it has one, so that the
    /// wait is not timed as the dependency's latency and a probe is not
    /// held while nothing is being probed.
    ///
    /// A panic in `f` counts as the breaker's failure (its permit is
    /// dropped without an outcome), gives the slot back, and unwinds to the
    /// caller.
    ///
    /// # Errors
    ///
    /// [`IsolationError::Rejected`] or [`IsolationError::Full`] when nothing
    /// was attempted; [`IsolationError::Failed`] with `f`'s error otherwise.
    #[inline]
    pub fn call<T, E, F>(&self, breaker: &Breaker, f: F) -> Result<T, IsolationError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        T: 'static,
        E: StdError + 'static,
    {
        let (permit, _slot) = self.admit(breaker).map_err(Refusal::into_error)?;
        settle(permit, f())
    }

    /// A breaker permit and a slot, in that order (see [`call`](Self::call)).
    #[inline]
    pub(super) fn admit<'a>(
        &'a self,
        breaker: &'a Breaker,
    ) -> Result<(Permit<'a>, Slot<'a>), Refusal> {
        if self.inner.max_wait.is_zero() {
            return self.admit_at_once(breaker);
        }
        let seen = self.inner.slots.shares.look();
        let permit = breaker.try_acquire().map_err(Refusal::Rejected)?;
        let guarantees = match self.enter_from(seen) {
            Ok(slot) => return Ok((permit, slot)),
            Err(guarantees) => guarantees,
        };
        // Full: the permit goes back unused, whatever happens next.
        permit.record(crate::Verdict::Ignore);
        let slot = self.enter_waiting(guarantees).map_err(Refusal::Full)?;
        let permit = breaker.try_acquire().map_err(Refusal::Rejected)?;
        Ok((permit, slot))
    }

    /// [`admit`](Self::admit) without waiting for a slot, whatever
    /// `max_wait` says: what a caller that must not block gets (a future,
    /// `src/isolation/future.rs`), and what every caller gets with no
    /// `max_wait`.
    #[inline]
    pub(super) fn admit_at_once<'a>(
        &'a self,
        breaker: &'a Breaker,
    ) -> Result<(Permit<'a>, Slot<'a>), Refusal> {
        let seen = self.inner.slots.shares.look();
        if !seen.admits(self.lane) {
            if let Some(full) = self.full_before_the_breaker(breaker, seen) {
                return Err(Refusal::Full(full));
            }
        }
        let permit = breaker.try_acquire().map_err(Refusal::Rejected)?;
        match self.enter_from(seen) {
            Ok(slot) => Ok((permit, slot)),
            Err(guarantees) => {
                // Full: the permit goes back unused.
                permit.record(crate::Verdict::Ignore);
                Err(Refusal::Full(self.refuse(Duration::ZERO, guarantees, true)))
            }
        }
    }

    /// A refusal without asking the breaker, when the bulkhead is full and
    /// the breaker would admit: its permit would only be handed back, and
    /// handing back a closed permit takes the breaker's lock, which
    /// saturated callers would then contend on. Out of line, off the path
    /// of an admitted call. The breaker still judges the calls the
    /// bulkhead holds, if it tracks its calls in flight and a check is due
    /// (`stuck_call_threshold`): a bulkhead full of stuck calls opens it.
    #[cold]
    #[inline(never)]
    fn full_before_the_breaker(&self, breaker: &Breaker, seen: Look) -> Option<Full> {
        breaker.check_in_flight();
        (breaker.state() == State::Closed)
            .then(|| self.refuse(Duration::ZERO, seen.guarantees, true))
    }

    /// A slot if one is free now, or the guarantees it was refused under.
    #[inline(always)]
    fn enter_now(&self) -> Result<Slot<'_>, u64> {
        self.enter_from(self.inner.slots.shares.look())
    }

    /// [`enter_now`](Self::enter_now), judging first on `seen`.
    #[inline(always)]
    fn enter_from(&self, seen: Look) -> Result<Slot<'_>, u64> {
        let inner = &*self.inner;
        let (counts, guarantees) = inner.slots.shares.take_from(self.lane, seen)?;
        let n = total(counts);
        if n as usize > inner.slots.peak.load(Ordering::Relaxed) {
            inner.slots.peak.fetch_max(n as usize, Ordering::Relaxed);
        }
        let timed = match &inner.adaptive {
            Some(adaptive) => adaptive.admitted(n, total(guarantees)),
            None => Timed::NONE,
        };
        Ok(Slot {
            bulkhead: self,
            timed,
        })
    }

    #[cold]
    fn enter_waiting(&self, guarantees: u64) -> Result<Slot<'_>, Full> {
        let inner = &*self.inner;
        if inner.max_wait.is_zero() {
            return Err(self.refuse(Duration::ZERO, guarantees, true));
        }
        let start = Instant::now();
        // A wait too long to represent is a wait without end.
        let deadline = start.checked_add(inner.max_wait);
        let mut guard = inner.lock.lock();
        inner.slots.waiters.fetch_add(1, Ordering::SeqCst);
        let slot = loop {
            if let Ok(slot) = self.enter_now() {
                break Some(slot);
            }
            match deadline {
                Some(deadline) => {
                    if inner.freed.wait_until(&mut guard, deadline).timed_out() {
                        break self.enter_now().ok();
                    }
                }
                None => inner.freed.wait(&mut guard),
            }
        };
        inner.slots.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        slot.ok_or_else(|| {
            let guarantees = inner.slots.shares.guarantees();
            self.refuse(start.elapsed(), guarantees, false)
        })
    }

    #[cold]
    #[inline(never)]
    fn refuse(&self, waited: Duration, guarantees: u64, at_once: bool) -> Full {
        let inner = &*self.inner;
        inner.refusals[self.lane].fetch_add(1, Ordering::Relaxed);
        if let (Some(adaptive), true) = (&inner.adaptive, at_once) {
            // A bulkhead whose calls have stopped returning is judged by
            // the callers it refuses (those its tick counts in).
            if adaptive.tick().is_some() {
                adaptive.look(inner.name, |limit| self.publish(limit));
            }
        }
        Full {
            name: inner.name,
            lane: inner.lanes.get(self.lane).map(|l| l.name),
            layer: Layer::Bulkhead,
            limit: total(guarantees) as usize,
            waited,
        }
    }

    /// Shares a new limit out between the lanes.
    fn publish(&self, limit: usize) {
        let inner = &*self.inner;
        inner
            .slots
            .shares
            .publish(guarantees(limit, &inner.shares, inner.shed_last));
    }

    #[inline(always)]
    fn release(&self) {
        let inner = &*self.inner;
        inner.slots.shares.give_back(self.lane);
        // A waiter registers in `waiters` and then tries to take a slot,
        // both SeqCst, under the lock. If this load sees no waiter, the
        // waiter's attempt comes after the subtraction above and succeeds;
        // if it sees one, taking the lock here means the waiter is either
        // parked (and woken) or has not tried yet (and will succeed).
        if inner.slots.waiters.load(Ordering::SeqCst) != 0 {
            self.wake_one();
        }
    }

    /// Wakes a caller waiting for a slot. Out of line, with everything
    /// else a release rarely does, so that a slot's drop stays small
    /// enough to be inlined where it is dropped.
    #[cold]
    #[inline(never)]
    fn wake_one(&self) {
        let _guard = self.inner.lock.lock();
        self.inner.freed.notify_one();
    }

    /// A timed call returned.
    #[cold]
    #[inline(never)]
    fn finish(&self, timed: Timed) {
        if let Some(adaptive) = &self.inner.adaptive {
            adaptive.finish(timed, self.inner.name, |limit| self.publish(limit));
        }
    }

    /// The limit, the slots in use, the peak and the refusals, and each
    /// lane's. A few atomic loads; with an adaptive limit, also its lock
    /// (which callers only ever try: none waits for a snapshot).
    pub fn snapshot(&self) -> BulkheadSnapshot {
        let inner = &*self.inner;
        let counts = inner.slots.shares.counts();
        let guarantees = inner.slots.shares.guarantees();
        let refusals: [u64; MAX_LANES] =
            std::array::from_fn(|i| inner.refusals[i].load(Ordering::Relaxed));
        BulkheadSnapshot {
            name: std::sync::Arc::from(inner.name.as_str()),
            max_concurrent: inner.max_concurrent,
            limit: total(guarantees) as usize,
            in_use: total(counts) as usize,
            peak: inner.slots.peak.load(Ordering::Relaxed),
            refusals: refusals.iter().sum(),
            adaptive: inner.adaptive.as_ref().map(|a| {
                let seen = a.seen();
                AdaptiveSnapshot {
                    floor: seen.floor,
                    latency: seen.latency,
                    baseline: seen.baseline,
                }
            }),
            lanes: inner
                .lanes
                .iter()
                .enumerate()
                .map(|(i, lane)| LaneSnapshot {
                    name: std::sync::Arc::from(lane.name.as_str()),
                    share: lane.share,
                    shed_last: i == inner.shed_last,
                    guaranteed: field(guarantees, i) as usize,
                    in_use: field(counts, i) as usize,
                    refusals: refusals[i],
                })
                .collect(),
        }
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        let mut d = f.debug_struct("Bulkhead");
        d.field("name", &inner.name)
            .field("max_concurrent", &inner.max_concurrent)
            .field("max_wait", &inner.max_wait);
        if let Some(lane) = inner.lanes.get(self.lane) {
            d.field("lane", &lane.name);
        }
        if let Some(adaptive) = &inner.adaptive {
            d.field("adaptive", adaptive);
        }
        d.finish_non_exhaustive()
    }
}

/// One slot of a [`Bulkhead`], given back when dropped.
#[must_use = "the slot is given back as soon as it is dropped"]
pub struct Slot<'a> {
    bulkhead: &'a Bulkhead,
    /// Set when an adaptive limit times this call.
    timed: Timed,
}

impl Drop for Slot<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.bulkhead.release();
        if self.timed.is_timed() {
            self.bulkhead.finish(self.timed);
        }
    }
}

impl fmt::Debug for Slot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("bulkhead", &self.bulkhead.inner.name)
            .field("timed", &self.timed.is_timed())
            .finish()
    }
}

/// Why [`Bulkhead::admit`] let nothing through.
pub(super) enum Refusal {
    Rejected(crate::Rejected),
    Full(Full),
}

impl Refusal {
    pub(super) fn into_error<E>(self) -> IsolationError<E> {
        match self {
            Refusal::Rejected(r) => IsolationError::Rejected(r),
            Refusal::Full(f) => IsolationError::Full(f),
        }
    }
}
