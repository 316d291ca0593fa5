//! The dead-letter buffer: fire-and-forget emits a breaker diverted, kept
//! (bounded, by priority) and replayed once the breaker closes.

use std::error::Error as StdError;
use std::fmt;

use parking_lot::Mutex;

use super::lanes::Lanes;
use crate::{Breaker, CallError, ConfigError, Rejected, State};

/// A bounded buffer of emits that could not be sent (the breaker refused
/// them, or the send failed), kept by priority and replayed through the
/// breaker once it closes.
///
/// - **Priorities** are `0..priorities`; a higher number is more important.
/// - **When full**, a new emit displaces the oldest emit of the lowest
///   priority present, if that priority is at most its own; otherwise the
///   new emit itself is shed. Either way the shed emit is handed back to the
///   caller ([`Shed`]), logged and counted: nothing is dropped silently.
/// - A priority marked **never-shed** is never displaced, and a never-shed
///   emit is refused with [`Refused`], an error the caller must handle,
///   only when every emit the buffer holds is never-shed.
/// - **Replay** ([`replay`](Self::replay)) sends emits through the breaker
///   while it is closed, highest priority first and oldest first within a
///   priority, at most `replay_rate` a second (with bursts of
///   `replay_burst`). An emit whose send fails goes back to the front of its
///   priority: replay loses nothing and, as long as a failed send did not in
///   fact deliver, duplicates nothing.
/// - The emit **out for replay** is still held: it counts in the depth,
///   and it is the oldest of its priority. A push into a full buffer may
///   displace it as it would any emit of that priority; the push goes
///   ahead at once, and the displaced emit's fate is its send's: sent, it
///   is counted replayed; failed, it is shed and handed back in the
///   [`Replay`] report instead of going back to the front.
/// - **Memory** is bounded by the capacity whatever the mix of priorities:
///   the priorities share one store of at most `capacity` slots, and an
///   emit's own memory is freed when it leaves.
///
/// ```
/// use fusebox::isolation::{DeadLetters, Emitted};
/// use fusebox::{Breaker, CallPath, Classifier};
///
/// let breaker = Breaker::builder("audit")
///     .call_path(CallPath::Enrichment)
///     .classifier(Classifier::every_error_is_a_failure())
///     .build()?;
/// let letters = DeadLetters::builder("audit")
///     .capacity(10_000)
///     .priorities(3)
///     .never_shed(2)
///     .replay_rate(200.0)
///     .build::<String>()?;
///
/// breaker.force_open("ops", "vendor maintenance");
/// let sent = letters.emit(&breaker, 1, "fill 42".to_string(), |msg| {
///     Ok::<_, std::io::Error>(println!("{msg}"))
/// });
/// assert!(matches!(sent, Ok(Emitted::Buffered { .. })));
/// assert_eq!(letters.snapshot().depth, 1);
///
/// breaker.reset("ops", "vendor back");
/// let report = letters.replay(&breaker, |msg| Ok::<_, std::io::Error>(println!("{msg}")));
/// assert_eq!(report.sent, 1);
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
///
/// # Cost
///
/// One lock round trip per push; a push into a full buffer scans the
/// priorities (at most 64) for the one to shed. Replay takes the lock twice
/// per emit, never while sending. The store grows as emits arrive, up to
/// `capacity` slots of `size_of::<T>()` and two words each.
pub struct DeadLetters<T> {
    name: crate::name::Inline,
    capacity: usize,
    never_shed: u64,
    rate: f64,
    burst: f64,
    clock: quanta::Clock,
    store: Mutex<Store<T>>,
    replaying: Mutex<()>,
}

struct Store<T> {
    lanes: Lanes<T>,
    counts: Vec<Counts>,
    /// Emits held: those in the lanes, and the one out for replay unless a
    /// push displaced it.
    depth: usize,
    /// The emit out for replay, while its send runs.
    out: Option<Out>,
    tokens: f64,
    refilled: Option<quanta::Instant>,
}

/// The emit out for replay: its priority, and whether a push displaced it
/// (it no longer counts in the depth, and is shed if its send fails).
#[derive(Clone, Copy)]
struct Out {
    priority: usize,
    displaced: bool,
}

impl<T> Store<T> {
    /// Emits of `priority` held, the one out for replay included.
    fn held(&self, priority: usize) -> usize {
        let out = self
            .out
            .is_some_and(|o| o.priority == priority && !o.displaced);
        self.lanes.len(priority) + usize::from(out)
    }
}

#[derive(Clone, Copy, Default)]
struct Counts {
    stored: u64,
    shed: u64,
    refused: u64,
    replayed: u64,
}

/// The most priorities a buffer can have.
pub(crate) const MAX_PRIORITIES: u8 = 64;

/// Settings for [`DeadLetters`], checked by [`build`](Self::build).
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `capacity` | required |
/// | `priorities` | 1 |
/// | `never_shed` | none |
/// | `replay_rate` | 100 a second |
/// | `replay_burst` | 10 |
/// | `clock` | a real `quanta::Clock` |
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until build() is called"]
pub struct DeadLettersBuilder {
    name: String,
    capacity: Option<usize>,
    priorities: u8,
    never_shed: Vec<u8>,
    rate: f64,
    burst: u32,
    clock: Option<quanta::Clock>,
}

impl DeadLettersBuilder {
    /// The most emits held, across priorities. Required; at least 1.
    pub fn capacity(mut self, n: usize) -> Self {
        self.capacity = Some(n);
        self
    }

    /// How many priorities, `0..n`; a higher number is more important.
    /// From 1 to 64.
    pub fn priorities(mut self, n: u8) -> Self {
        self.priorities = n;
        self
    }

    /// Marks `priority` never-shed: its emits are never displaced, and one
    /// that finds no room is refused with an error instead of dropped. May
    /// be called for several priorities.
    pub fn never_shed(mut self, priority: u8) -> Self {
        self.never_shed.push(priority);
        self
    }

    /// The most emits replayed a second, on average. Finite and above zero.
    pub fn replay_rate(mut self, per_second: f64) -> Self {
        self.rate = per_second;
        self
    }

    /// The most emits replayed at once after a pause. At least 1.
    pub fn replay_burst(mut self, n: u32) -> Self {
        self.burst = n;
        self
    }

    /// The clock the replay rate is measured on. Pass the clock half of
    /// `quanta::Clock::mock()` in tests.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Checks the settings and builds an empty buffer.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the setting at fault.
    pub fn build<T>(self) -> Result<DeadLetters<T>, ConfigError> {
        // The same rules as a breaker's name: it goes into refusals and logs.
        crate::name::check(&self.name)?;
        let capacity = self.capacity.ok_or(ConfigError::Missing {
            field: "capacity",
            why: "how much to keep while a dependency is down is the application's choice",
        })?;
        let invalid = |field, rule, value: String| ConfigError::Invalid { field, rule, value };
        if capacity == 0 {
            return Err(invalid("capacity", "must be at least 1", "0".into()));
        }
        if self.priorities == 0 || self.priorities > MAX_PRIORITIES {
            return Err(invalid(
                "priorities",
                "must be from 1 to 64",
                self.priorities.to_string(),
            ));
        }
        let mut never_shed = 0u64;
        for &p in &self.never_shed {
            if p >= self.priorities {
                return Err(invalid(
                    "never_shed",
                    "must name a priority below `priorities`",
                    p.to_string(),
                ));
            }
            never_shed |= 1 << p;
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(invalid(
                "replay_rate",
                "must be finite and above zero",
                self.rate.to_string(),
            ));
        }
        if self.burst == 0 {
            return Err(invalid("replay_burst", "must be at least 1", "0".into()));
        }
        let levels = usize::from(self.priorities);
        Ok(DeadLetters {
            name: crate::name::Inline::new(&self.name),
            capacity,
            never_shed,
            rate: self.rate,
            burst: f64::from(self.burst),
            clock: self.clock.unwrap_or_default(),
            store: Mutex::new(Store {
                lanes: Lanes::new(levels, capacity),
                counts: vec![Counts::default(); levels],
                depth: 0,
                out: None,
                tokens: f64::from(self.burst),
                refilled: None,
            }),
            replaying: Mutex::new(()),
        })
    }
}

/// An emit shed to make room, handed back so that it is not lost silently.
#[derive(Debug)]
#[non_exhaustive]
pub struct Shed<T> {
    /// Its priority.
    pub priority: u8,
    /// The emit. It may be the one just pushed, when everything held
    /// outranks it.
    pub item: T,
}

/// Why an emit was not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusedBecause {
    /// A never-shed emit found the buffer full of never-shed emits.
    Full,
    /// The priority is not below the buffer's `priorities`.
    UnknownPriority,
}

/// An emit the buffer would not keep, handed back: a never-shed emit with no
/// room, or an unknown priority. The caller must deal with it.
#[non_exhaustive]
pub struct Refused<T> {
    /// The buffer's name.
    pub buffer: std::sync::Arc<str>,
    /// The emit's priority.
    pub priority: u8,
    /// Why.
    pub because: RefusedBecause,
    /// The emit.
    pub item: T,
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("buffer", &self.buffer)
            .field("priority", &self.priority)
            .field("because", &self.because)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.because {
            RefusedBecause::Full => write!(
                f,
                "dead-letter buffer `{}` is full of never-shed emits: priority {} refused",
                self.buffer, self.priority
            ),
            RefusedBecause::UnknownPriority => write!(
                f,
                "dead-letter buffer `{}` has no priority {}",
                self.buffer, self.priority
            ),
        }
    }
}

impl<T> StdError for Refused<T> {}

/// What [`DeadLetters::emit`] did with an emit.
#[derive(Debug)]
#[non_exhaustive]
pub enum Emitted<T, E> {
    /// Sent through the breaker.
    Sent,
    /// Not sent (refused by the breaker, or failed) and kept for replay.
    Buffered {
        /// Why it was not sent.
        cause: CallError<E>,
        /// The emit shed to make room, if one was.
        shed: Option<Shed<T>>,
    },
}

/// What one [`DeadLetters::replay`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct Replay<T, E> {
    /// Emits sent and removed from the buffer.
    pub sent: usize,
    /// Emits still held.
    pub remaining: usize,
    /// Why it stopped.
    pub stopped: ReplayStop<E>,
    /// The emit whose send failed after a push into the full buffer had
    /// displaced it while it was out: shed, and handed back here as a push
    /// hands back what it sheds.
    pub shed: Option<Shed<T>>,
}

/// Why a replay stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayStop<E> {
    /// The buffer is empty.
    Drained,
    /// The replay rate is used up for now; call again later.
    Throttled,
    /// The breaker is not closed; nothing was sent.
    NotClosed(State),
    /// Another thread is replaying this buffer.
    Busy,
    /// The breaker refused a send; the emit is back at the front.
    Rejected(Rejected),
    /// A send failed; the emit is back at the front.
    Failed(E),
}

/// A point-in-time view of one priority of a [`DeadLetters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct PrioritySnapshot {
    /// The priority.
    pub priority: u8,
    /// Whether it is never-shed.
    pub never_shed: bool,
    /// Emits held now, the one out for replay included.
    pub depth: usize,
    /// Emits kept, over the buffer's life.
    pub stored: u64,
    /// Emits shed (displaced, or not kept for want of room).
    pub shed: u64,
    /// Never-shed emits refused for want of room.
    pub refused: u64,
    /// Emits replayed successfully.
    pub replayed: u64,
}

/// A point-in-time view of a [`DeadLetters`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeadLetterSnapshot {
    /// The buffer's name.
    pub name: std::sync::Arc<str>,
    /// Its capacity.
    pub capacity: usize,
    /// Emits held now, the one out for replay included unless a push
    /// displaced it.
    pub depth: usize,
    /// Each priority, lowest first.
    pub priorities: Vec<PrioritySnapshot>,
}

impl DeadLetters<()> {
    /// Starts building a buffer called `name` (used in errors and logs).
    pub fn builder(name: impl Into<String>) -> DeadLettersBuilder {
        DeadLettersBuilder {
            name: name.into(),
            capacity: None,
            priorities: 1,
            never_shed: Vec::new(),
            rate: 100.0,
            burst: 10,
            clock: None,
        }
    }
}

impl<T> DeadLetters<T> {
    /// The buffer's name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    fn is_never_shed(&self, priority: usize) -> bool {
        self.never_shed & (1 << priority) != 0
    }

    /// Keeps `item` at `priority`, shedding to make room if the buffer is
    /// full (see the type's docs for the order).
    ///
    /// # Errors
    ///
    /// [`Refused`], with the item, for a never-shed emit when every emit
    /// held is never-shed, or for an unknown priority.
    pub fn push(&self, priority: u8, item: T) -> Result<Option<Shed<T>>, Refused<T>> {
        let p = usize::from(priority);
        let mut guard = self.store.lock();
        let store = &mut *guard;
        if p >= store.lanes.lanes() {
            drop(guard);
            return Err(self.refused(priority, RefusedBecause::UnknownPriority, item));
        }
        let mut shed = None;
        if store.depth >= self.capacity {
            // Full: room is made by the oldest emit of the lowest sheddable
            // priority held (the one out for replay included), if this
            // emit may displace it.
            let never_shed = self.is_never_shed(p);
            let victim = (0..store.lanes.lanes())
                .find(|&q| !self.is_never_shed(q) && store.held(q) > 0 && (q <= p || never_shed));
            match (victim, &mut store.out) {
                // The emit out for replay is the oldest of its priority: it
                // no longer counts, and its send decides its fate.
                (Some(q), Some(out)) if out.priority == q && !out.displaced => {
                    out.displaced = true;
                    store.depth -= 1;
                }
                (Some(q), _) => {
                    if let Some(item) = store.lanes.pop_front(q) {
                        store.counts[q].shed += 1;
                        store.depth -= 1;
                        shed = Some(Shed {
                            priority: q as u8,
                            item,
                        });
                    }
                }
                (None, _) if !never_shed => {
                    store.counts[p].shed += 1;
                    drop(guard);
                    return Ok(Some(self.shed_one(Shed { priority, item })));
                }
                (None, _) => {
                    store.counts[p].refused += 1;
                    drop(guard);
                    return Err(self.refused(priority, RefusedBecause::Full, item));
                }
            }
        }
        store.lanes.push_back(p, item);
        store.counts[p].stored += 1;
        store.depth += 1;
        drop(guard);
        Ok(shed.map(|s| self.shed_one(s)))
    }

    /// Logs `shed`, already counted, and hands it back.
    fn shed_one(&self, shed: Shed<T>) -> Shed<T> {
        log::warn!(
            "dead-letter buffer `{}` is full ({}): shed an emit of priority {}",
            self.name,
            self.capacity,
            shed.priority
        );
        shed
    }

    fn refused(&self, priority: u8, because: RefusedBecause, item: T) -> Refused<T> {
        let refused = Refused {
            buffer: std::sync::Arc::from(self.name.as_str()),
            priority,
            because,
            item,
        };
        log::error!("{refused}");
        refused
    }

    /// Sends `item` through `breaker` with `send`, and keeps it for replay
    /// if the breaker refuses or the send fails.
    ///
    /// # Errors
    ///
    /// [`Refused`], with the item, when it was not sent and could not be
    /// kept (see [`push`](Self::push)); an unknown priority is refused
    /// before anything is sent.
    pub fn emit<E, F>(
        &self,
        breaker: &Breaker,
        priority: u8,
        item: T,
        send: F,
    ) -> Result<Emitted<T, E>, Refused<T>>
    where
        F: FnOnce(&T) -> Result<(), E>,
        E: StdError + 'static,
    {
        if usize::from(priority) >= self.store.lock().lanes.lanes() {
            return Err(self.refused(priority, RefusedBecause::UnknownPriority, item));
        }
        match breaker.call(|| send(&item)) {
            Ok(()) => Ok(Emitted::Sent),
            Err(cause) => {
                let shed = self.push(priority, item)?;
                Ok(Emitted::Buffered { cause, shed })
            }
        }
    }

    /// Sends held emits through `breaker` with `send` while the breaker is
    /// closed and the replay rate allows: highest priority first, oldest
    /// first within a priority. Returns at once; call it again (from a
    /// timer, or on the breaker's state changes) until it reports
    /// [`ReplayStop::Drained`].
    ///
    /// An emit leaves the buffer only when its send succeeds. One whose send
    /// fails or is refused goes back to the front of its priority, and the
    /// replay stops there; unless a push displaced it while it was out, in
    /// which case it is shed and handed back in [`Replay::shed`].
    pub fn replay<E, F>(&self, breaker: &Breaker, mut send: F) -> Replay<T, E>
    where
        F: FnMut(&T) -> Result<(), E>,
        E: StdError + 'static,
    {
        let mut sent = 0;
        let mut shed = None;
        let stopped = 'replay: {
            let state = breaker.state();
            if state != State::Closed {
                break 'replay ReplayStop::NotClosed(state);
            }
            let Some(_replaying) = self.replaying.try_lock() else {
                break 'replay ReplayStop::Busy;
            };
            loop {
                let (p, item) = {
                    let mut store = self.store.lock();
                    let Some(p) = (0..store.lanes.lanes())
                        .rev()
                        .find(|&q| store.lanes.len(q) > 0)
                    else {
                        break 'replay ReplayStop::Drained;
                    };
                    if !self.take_token(&mut store) {
                        break 'replay ReplayStop::Throttled;
                    }
                    let Some(item) = store.lanes.pop_front(p) else {
                        break 'replay ReplayStop::Drained;
                    };
                    // Still counted in `depth` while it is out.
                    store.out = Some(Out {
                        priority: p,
                        displaced: false,
                    });
                    (p, item)
                };
                let result = breaker.call(|| send(&item));
                let mut store = self.store.lock();
                let displaced = store.out.take().is_some_and(|o| o.displaced);
                match result {
                    Ok(()) => {
                        // A displaced emit no longer counts in `depth`.
                        if !displaced {
                            store.depth -= 1;
                        }
                        store.counts[p].replayed += 1;
                        sent += 1;
                    }
                    Err(err) => {
                        if displaced {
                            store.counts[p].shed += 1;
                            drop(store);
                            shed = Some(self.shed_one(Shed {
                                priority: p as u8,
                                item,
                            }));
                        } else {
                            store.lanes.push_front(p, item);
                        }
                        break 'replay match err {
                            CallError::Rejected(r) => ReplayStop::Rejected(r),
                            CallError::Failed(e) => ReplayStop::Failed(e),
                        };
                    }
                }
            }
        };
        Replay {
            sent,
            remaining: self.store.lock().depth,
            stopped,
            shed,
        }
    }

    /// Refills the token bucket from the clock and takes one token.
    fn take_token(&self, store: &mut Store<T>) -> bool {
        let now = self.clock.now();
        if let Some(last) = store.refilled {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            store.tokens = (store.tokens + elapsed * self.rate).min(self.burst);
        }
        store.refilled = Some(now);
        if store.tokens >= 1.0 {
            store.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Depth, and per priority what was kept, shed, refused and replayed.
    pub fn snapshot(&self) -> DeadLetterSnapshot {
        let store = self.store.lock();
        DeadLetterSnapshot {
            name: std::sync::Arc::from(self.name.as_str()),
            capacity: self.capacity,
            depth: store.depth,
            priorities: store
                .counts
                .iter()
                .enumerate()
                .map(|(p, c)| PrioritySnapshot {
                    priority: p as u8,
                    never_shed: self.is_never_shed(p),
                    depth: store.held(p),
                    stored: c.stored,
                    shed: c.shed,
                    refused: c.refused,
                    replayed: c.replayed,
                })
                .collect(),
        }
    }
}

impl<T> fmt::Debug for DeadLetters<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetters")
            .field("name", &self.name)
            .field("capacity", &self.capacity)
            .field("depth", &self.store.lock().depth)
            .finish_non_exhaustive()
    }
}

impl<T> Drop for DeadLetters<T> {
    fn drop(&mut self) {
        let depth = self.store.get_mut().depth;
        if depth > 0 {
            log::warn!(
                "dead-letter buffer `{}` dropped with {depth} emits never replayed",
                self.name
            );
        }
    }
}
