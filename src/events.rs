//! State changes: what happened, why, who asked, and when.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TrySendError};
use parking_lot::Mutex;

use crate::State;

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
    /// A probe did not report back within `max_probe_duration`.
    ProbeExpired,
    /// An operator forced the breaker open.
    ForcedOpen {
        /// Who asked.
        actor: Arc<str>,
        /// Why.
        note: Arc<str>,
    },
    /// An operator reset the breaker.
    Reset {
        /// Who asked.
        actor: Arc<str>,
        /// Why.
        note: Arc<str>,
    },
}

impl Reason {
    /// The operator who caused the change, for manual overrides.
    pub fn actor(&self) -> Option<&str> {
        match self {
            Reason::ForcedOpen { actor, .. } | Reason::Reset { actor, .. } => Some(actor),
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
                Millis(*observed)
            ),
            Reason::WindowErrorRate { rate, calls } => {
                write!(
                    f,
                    "error rate {:.0}% over {calls} calls in one window",
                    rate * 100.0
                )
            }
            Reason::OpenPeriodElapsed => f.write_str("open period elapsed"),
            Reason::ProbeSucceeded { successes } => write!(f, "{successes} probe(s) succeeded"),
            Reason::ProbeFailed => f.write_str("probe failed"),
            Reason::ProbeSlow { elapsed } => write!(f, "probe was slow ({})", Millis(*elapsed)),
            Reason::ProbeExpired => f.write_str("probe did not report back in time"),
            Reason::ForcedOpen { actor, note } => write!(f, "forced open by {actor}: {note}"),
            Reason::Reset { actor, note } => write!(f, "reset by {actor}: {note}"),
        }
    }
}

/// A duration printed in milliseconds with one decimal, for log lines.
struct Millis(Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} ms", self.0.as_secs_f64() * 1e3)
    }
}

/// One state change, as given to `on_state_change` and to subscribers.
#[derive(Clone, Debug, PartialEq)]
pub struct StateChange {
    /// The breaker's name.
    pub breaker: &'static str,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// When, on the breaker's monotonic clock.
    pub at: quanta::Instant,
    /// Position in this breaker's sequence of changes, from 1. Callbacks and
    /// subscribers see changes in this order.
    pub seq: u64,
}

impl fmt::Display for StateChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "breaker `{}`: {} -> {} ({})",
            self.breaker, self.from, self.to, self.reason
        )
    }
}

/// A bounded stream of a breaker's state changes, for an alerting thread.
///
/// Made by [`Breaker::subscribe`](crate::Breaker::subscribe). A subscriber
/// that falls behind loses the newest changes rather than slowing callers;
/// [`Subscription::dropped`] counts what it lost.
#[derive(Debug)]
pub struct Subscription {
    pub(crate) rx: Receiver<StateChange>,
    pub(crate) dropped: Arc<AtomicU64>,
}

impl Subscription {
    /// The underlying channel, for `select!` or blocking receives.
    pub fn receiver(&self) -> &Receiver<StateChange> {
        &self.rx
    }

    /// The next change, if one is waiting.
    pub fn try_recv(&self) -> Option<StateChange> {
        self.rx.try_recv().ok()
    }

    /// Waits up to `timeout` for the next change.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<StateChange> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// How many changes this subscriber lost because its buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

pub(crate) struct Subscriber {
    pub(crate) tx: crossbeam_channel::Sender<StateChange>,
    pub(crate) dropped: Arc<AtomicU64>,
}

/// Sends `change` to every subscriber without blocking, counting losses and
/// forgetting subscribers that hung up.
pub(crate) fn publish(subscribers: &Mutex<Vec<Subscriber>>, change: &StateChange) {
    let mut subs = subscribers.lock();
    subs.retain(|s| match s.tx.try_send(change.clone()) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            s.dropped.fetch_add(1, Ordering::Relaxed);
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    });
}
