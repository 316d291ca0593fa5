//! State changes: what happened, why, who asked, and when; where they are
//! delivered; and subscriptions.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;

use crate::check::check;
use crate::text::shown;
use crate::{ConfigError, State};

/// Why a breaker changed state.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Reason {
    /// `count` consecutive failures reached `consecutive_failure_threshold`.
    ConsecutiveFailures {
        /// The length of the run.
        count: u32,
    },
    /// `failures` in the window reached `window_failure_threshold`.
    FailuresInWindow {
        /// Failures in the window.
        failures: u32,
    },
    /// The failure rate over the window reached `failure_rate_threshold`.
    FailureRate {
        /// Failures over calls in the window.
        rate: f64,
        /// Calls in the window.
        calls: u32,
    },
    /// The slow-call rate over the window reached `slow_call_rate_threshold`.
    SlowCallRate {
        /// Slow calls over calls in the window.
        rate: f64,
        /// Calls in the window.
        calls: u32,
    },
    /// The latency policy saw its percentile above threshold for
    /// `consecutive_windows` windows in a row.
    LatencyBreach {
        /// The percentile measured in the last window.
        observed: Duration,
        /// Breaching windows in a row.
        consecutive_windows: u32,
    },
    /// The latency policy saw an error rate above its ratio in one window.
    WindowErrorRate {
        /// Failures over calls in that window.
        rate: f64,
        /// Calls in that window.
        calls: u32,
    },
    /// A custom [`TripPredicate`](crate::TripPredicate) held.
    TripPredicate {
        /// The predicate's name.
        name: Arc<str>,
        /// Calls in the window.
        calls: u64,
        /// Failures in the window.
        failures: u64,
    },
    /// The open period ended; probes may go.
    OpenPeriodElapsed,
    /// Enough probes succeeded in a row.
    ProbeSucceeded {
        /// Consecutive successful probes.
        successes: u32,
    },
    /// A probe failed.
    ProbeFailed,
    /// A probe succeeded but took longer than `slow_call_duration`.
    ProbeSlow {
        /// How long it took.
        elapsed: Duration,
    },
    /// The probes of a [`HalfOpenRate`](crate::HalfOpenRate) round failed
    /// at or above its rate.
    ProbeFailureRate {
        /// Failed probes over decided probes.
        rate: f64,
        /// Probes decided.
        probes: u32,
    },
    /// A probe did not report back within `max_probe_duration`.
    ProbeExpired,
    /// Calls admitted while closed were still in flight after `over`:
    /// `count` of them past `slow_call_duration` reached
    /// `stuck_call_threshold`, or one was past `hung_call_duration`, and
    /// not both (that is [`StuckAndHungCalls`](Self::StuckAndHungCalls)).
    /// None of them had to return.
    StuckCalls {
        /// Calls in flight past `over` when the breaker opened.
        count: u32,
        /// The mark they were past: `slow_call_duration` or
        /// `hung_call_duration`.
        over: Duration,
    },
    /// Both rules of calls in flight held at once: `stuck` calls past
    /// `slow_call_duration` reached `stuck_call_threshold`, and `hung` of
    /// them were past `hung_call_duration` (always the longer mark, so
    /// the hung calls are among the stuck ones).
    StuckAndHungCalls {
        /// Calls in flight past `stuck_over` when the breaker opened.
        stuck: u32,
        /// `slow_call_duration`.
        stuck_over: Duration,
        /// Of those, the calls in flight past `hung_over`.
        hung: u32,
        /// `hung_call_duration`.
        hung_over: Duration,
    },
    /// A probe was still in flight after `over`, its slow mark (the shorter
    /// of `slow_call_duration` and the latency policy's threshold, or
    /// `hung_call_duration` without either), with `stuck_call_threshold` or
    /// `hung_call_duration` set: it re-opens without waiting for
    /// `max_probe_duration`.
    ProbeStuck {
        /// The probe's slow mark.
        over: Duration,
    },
    /// A call failed during the ramp-up after recovery
    /// ([`RampUp`](crate::RampUp)): the breaker re-opens with the outage's
    /// escalated open period.
    RampFailed,
    /// An operator forced the breaker open.
    ForcedOpen {
        /// Who asked.
        actor: Arc<str>,
        /// Why.
        note: Arc<str>,
    },
    /// An operator forced the breaker closed.
    ForcedClosed {
        /// Who asked.
        actor: Arc<str>,
        /// Why.
        note: Arc<str>,
    },
    /// An operator override (forced open or closed) reached the end of the
    /// time it was given, and the breaker returned to normal operation.
    OverrideExpired,
    /// An operator reset the breaker.
    Reset {
        /// Who asked.
        actor: Arc<str>,
        /// Why.
        note: Arc<str>,
    },
    /// The fleet's shared state (feature `redis`, `docs/fleet.md`): another
    /// process tripped or closed the breaker, or holds the fleet's probe.
    Fleet,
}

impl Reason {
    /// The operator who caused the change, for manual overrides.
    pub fn actor(&self) -> Option<&str> {
        match self {
            Reason::ForcedOpen { actor, .. }
            | Reason::ForcedClosed { actor, .. }
            | Reason::Reset { actor, .. } => Some(actor),
            _ => None,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::ConsecutiveFailures { count } => write!(f, "{count} consecutive failures"),
            Reason::FailuresInWindow { failures } => write!(f, "{failures} failures in the window"),
            Reason::FailureRate { rate, calls } => {
                write!(f, "failure rate {:.0}% over {calls} calls", rate * 100.0)
            }
            Reason::SlowCallRate { rate, calls } => {
                write!(f, "slow-call rate {:.0}% over {calls} calls", rate * 100.0)
            }
            Reason::LatencyBreach {
                observed,
                consecutive_windows,
            } => write!(
                f,
                "latency {} above threshold for {consecutive_windows} windows",
                crate::duration::display(*observed)
            ),
            Reason::WindowErrorRate { rate, calls } => {
                write!(
                    f,
                    "error rate {:.0}% over {calls} calls in one window",
                    rate * 100.0
                )
            }
            Reason::TripPredicate {
                name,
                calls,
                failures,
            } => write!(
                f,
                "trip predicate `{}` held ({failures} failures in {calls} calls)",
                shown(name)
            ),
            Reason::ProbeFailureRate { rate, probes } => {
                write!(
                    f,
                    "probe failure rate {:.0}% over {probes} probes",
                    rate * 100.0
                )
            }
            Reason::OpenPeriodElapsed => f.write_str("open period elapsed"),
            Reason::ProbeSucceeded { successes } => write!(f, "{successes} probe(s) succeeded"),
            Reason::ProbeFailed => f.write_str("probe failed"),
            Reason::ProbeSlow { elapsed } => {
                write!(f, "probe was slow ({})", crate::duration::display(*elapsed))
            }
            Reason::ProbeExpired => f.write_str("probe did not report back in time"),
            Reason::StuckCalls { count, over } => {
                let calls = if *count == 1 { "call" } else { "calls" };
                write!(
                    f,
                    "{count} {calls} in flight for over {}",
                    crate::duration::display(*over)
                )
            }
            Reason::StuckAndHungCalls {
                stuck,
                stuck_over,
                hung,
                hung_over,
            } => {
                let (stuck_over, hung_over) = (
                    crate::duration::display(*stuck_over),
                    crate::duration::display(*hung_over),
                );
                match stuck {
                    1 => write!(f, "1 call in flight for over {hung_over}, past {stuck_over} too"),
                    _ => write!(
                        f,
                        "{stuck} calls in flight for over {stuck_over}, {hung} of them for over {hung_over}"
                    ),
                }
            }
            Reason::ProbeStuck { over } => write!(
                f,
                "probe in flight for over {}",
                crate::duration::display(*over)
            ),
            Reason::RampFailed => f.write_str("a call failed during the ramp-up"),
            Reason::ForcedOpen { actor, note } => {
                write!(f, "forced open by {}: {}", shown(actor), shown(note))
            }
            Reason::ForcedClosed { actor, note } => {
                write!(f, "forced closed by {}: {}", shown(actor), shown(note))
            }
            Reason::OverrideExpired => f.write_str("the operator override expired"),
            Reason::Reset { actor, note } => {
                write!(f, "reset by {}: {}", shown(actor), shown(note))
            }
            Reason::Fleet => f.write_str("the fleet's shared state"),
        }
    }
}

/// The `on_state_change` callback a breaker runs for each change.
pub(crate) type Callback = Arc<dyn Fn(&StateChange) + Send + Sync>;

/// One state change, as given to `on_state_change` and to subscribers.
///
/// Non-exhaustive: a later release may add fields (as it added `cause` and
/// `seq`); read the fields, and match with `..`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StateChange {
    /// The breaker's name.
    pub breaker: Arc<str>,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// When, on the breaker's monotonic clock.
    pub at: quanta::Instant,
    /// For a change to open on the breaker's own account: the last failure
    /// recorded before it, when that call showed its error (see
    /// [`FailureCause`](crate::FailureCause)).
    pub cause: Option<Arc<crate::FailureCause>>,
    /// Position in this breaker's sequence of changes, from 1. Callbacks and
    /// subscribers see changes in this order. A gap means changes were
    /// dropped because too many were waiting for delivery
    /// ([`Snapshot::dropped_changes`](crate::Snapshot::dropped_changes)).
    pub seq: u64,
}

impl fmt::Display for StateChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "breaker `{}`: {} -> {} ({})",
            self.breaker, self.from, self.to, self.reason
        )?;
        match &self.cause {
            Some(cause) => write!(f, " after `{cause}`"),
            None => Ok(()),
        }
    }
}

/// Which thread runs a breaker's `on_state_change` callback, its
/// subscribers' sends and its transition log lines.
///
/// Either way, every change is delivered once, in `seq` order, with no lock
/// of the breaker held, and never more than
/// 1 024 changes wait: when more pile up, the
/// oldest waiting one is dropped and counted in
/// [`Snapshot::dropped_changes`](crate::Snapshot::dropped_changes).
/// `docs/design.md` says what runs where in detail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// The thread whose call caused a change delivers it, after releasing
    /// the lock and before its call returns; it delivers at most as many
    /// changes as its call caused. If another thread is delivering for the
    /// same breaker at that moment, it does not wait: it hands its change to
    /// the process's notifier thread and returns at once.
    #[default]
    Caller,
    /// One notifier thread per process delivers every change of every
    /// breaker built this way: no caller ever runs alerting code. Changes
    /// reach the callback a little later, on another thread. The thread
    /// starts with the first change it is given. It is shared: a callback
    /// that blocks holds up the deliveries of every breaker it serves.
    Notifier,
}

impl Delivery {
    /// The most changes that wait for delivery, per breaker.
    pub(crate) const PENDING_CAPACITY: usize = 1024;
}

/// A bounded stream of a breaker's state changes, for an alerting thread.
///
/// Made by [`Breaker::subscribe`](crate::Breaker::subscribe). A subscriber
/// that falls behind loses the newest changes rather than slowing callers;
/// [`Subscription::dropped`] counts what it lost. Dropping the subscription
/// unsubscribes at once and frees its buffer.
///
/// ```
/// # use fusebox::{Breaker, CallPath, Classifier, State};
/// # let breaker = Breaker::builder("fx").call_path(CallPath::ReferenceData)
/// #     .classifier(Classifier::every_error_is_a_failure()).build().unwrap();
/// let changes = breaker.subscribe(64)?;
/// breaker.force_open("ops", "vendor maintenance");
/// let change = changes.try_recv().unwrap();
/// assert_eq!((change.from, change.to), (State::Closed, State::ForcedOpen));
/// // An alerting thread would block instead: `while let Some(change) = changes.recv() { .. }`.
/// # Ok::<(), fusebox::ConfigError>(())
/// ```
pub struct Subscription {
    rx: Receiver<StateChange>,
    dropped: Arc<AtomicU64>,
    subscribers: Weak<Subscribers>,
    id: u64,
}

impl Subscription {
    /// The largest buffer a subscription may ask for, in changes. The buffer
    /// is allocated up front (about 100 bytes a change).
    pub(crate) const MAX_CAPACITY: usize = 1 << 16;

    /// Waits for the next change. `None` once the breaker (every clone of
    /// it) is gone and every change sent has been received.
    pub fn recv(&self) -> Option<StateChange> {
        self.rx.recv().ok()
    }

    /// The next change, if one is waiting.
    pub fn try_recv(&self) -> Option<StateChange> {
        self.rx.try_recv().ok()
    }

    /// Waits up to `timeout` for the next change. `None` if none came in
    /// time, or the breaker is gone.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<StateChange> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// The underlying channel, for the fleet agent to wait on beside its
    /// other channels. Not public: crossbeam-channel stays out of the API.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn receiver(&self) -> &Receiver<StateChange> {
        &self.rx
    }

    /// How many changes this subscriber lost because its buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("waiting", &self.rx.len())
            .field("capacity", &self.rx.capacity())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(subscribers) = self.subscribers.upgrade() {
            subscribers.list.lock().retain(|s| s.id != self.id);
        }
    }
}

/// Runs the user's code for one change, outside every lock: the log line
/// (`warn` for open and forced, `info` otherwise, and for a trip from
/// closed a warning if `flapping()` gives the rule the breaker's trips
/// broke), then the `on_state_change` callback, then the subscribers. A
/// panic in any of them is caught and logged, so that it never reaches the
/// thread delivering, which must let go of delivery after it
/// (`src/delivery.rs`).
pub(crate) fn run(
    change: &StateChange,
    flapping: impl FnOnce() -> Option<(u32, Duration)>,
    on_change: Option<&Callback>,
    subscribers: Option<&Subscribers>,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| match change.to {
        State::Open | State::ForcedOpen | State::ForcedClosed => log::warn!("{change}"),
        State::Closed | State::HalfOpen => log::info!("{change}"),
    }));
    if change.from == State::Closed && change.to == State::Open {
        if let Some((trips, window)) = flapping() {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                log::warn!(
                    "breaker `{}` is flapping: {trips} trips within {} (docs/tuning.md says what to change)",
                    change.breaker,
                    crate::duration::display(window)
                )
            }));
        }
    }
    if let Some(cb) = on_change {
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
    if let Some(subscribers) = subscribers {
        subscribers.publish(change);
    }
}

/// A breaker's subscribers. Each [`Subscription`] holds a weak reference to
/// take itself out when dropped.
#[derive(Default)]
pub(crate) struct Subscribers {
    list: Mutex<Vec<Subscriber>>,
    next_id: AtomicU64,
}

struct Subscriber {
    id: u64,
    tx: Sender<StateChange>,
    dropped: Arc<AtomicU64>,
}

impl Subscribers {
    /// A new subscription with room for `capacity` changes, which
    /// [`check_capacity`] has passed.
    pub(crate) fn subscribe(self: &Arc<Self>, capacity: usize) -> Subscription {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.list.lock().push(Subscriber {
            id,
            tx,
            dropped: Arc::clone(&dropped),
        });
        Subscription {
            rx,
            dropped,
            subscribers: Arc::downgrade(self),
            id,
        }
    }

    /// Sends `change` to every subscriber without blocking, counting losses.
    pub(crate) fn publish(&self, change: &StateChange) {
        let mut subs = self.list.lock();
        // A subscription takes itself out when dropped; one that is being
        // dropped right now is disconnected already and goes here.
        subs.retain(|s| match s.tx.try_send(change.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                s.dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.lock().len()
    }
}

/// Refuses a subscription's capacity outside 1 to
/// [`Subscription::MAX_CAPACITY`], naming the field.
pub(crate) fn check_capacity(capacity: usize) -> Result<(), ConfigError> {
    check(
        "capacity",
        (1..=Subscription::MAX_CAPACITY).contains(&capacity),
        "must be between 1 and 65536",
        capacity,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_note_cannot_forge_a_log_line() {
        let reason = Reason::ForcedOpen {
            actor: "ops\nbreaker `x`: closed -> open".into(),
            note: "vendor down\r\u{1b}[2K".into(),
        };
        let line = reason.to_string();
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert_eq!(
            line,
            "forced open by ops\\nbreaker `x`: closed -> open: vendor down\\r\\u{1b}[2K"
        );
    }

    #[test]
    fn a_dropped_subscription_leaves_at_once() {
        let subscribers = Arc::new(Subscribers::default());
        let subs: Vec<_> = (0..3).map(|_| subscribers.subscribe(8)).collect();
        assert_eq!(subscribers.len(), 3);
        drop(subs);
        assert_eq!(subscribers.len(), 0);
    }

    #[test]
    fn a_timeout_and_a_hang_up_both_read_as_none() {
        let subscribers = Arc::new(Subscribers::default());
        let sub = subscribers.subscribe(1);
        assert_eq!(sub.recv_timeout(Duration::from_millis(1)), None);
        drop(subscribers);
        assert_eq!(sub.recv(), None);
    }
}
