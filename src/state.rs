//! The breaker's states.

use std::fmt;

/// Where a breaker stands.
///
/// ```text
///            trip condition                 open period elapsed
///   Closed ─────────────────────▶ Open ─────────────────────────▶ HalfOpen
///     ▲                            ▲                                  │
///     │                            └──── probe failed / slow / hung ──┤
///     └──────────────── enough probe successes ───────────────────────┘
///
///   any state ── force_open ───▶ ForcedOpen ──┐
///   any state ── force_closed ─▶ ForcedClosed ┴─ reset, or the override's expiry ──▶ Closed
/// ```
///
/// Exhaustive, as a commitment: these five states are the machine, and code
/// that decides per state (serve, fall back, page someone) should be told by
/// the compiler when that changes. A new state comes only in a breaking
/// release. (Maintenance windows are a status over the states, not a state:
/// [`Snapshot::status`](crate::Snapshot::status).)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls go through; outcomes are counted against the trip conditions.
    Closed,
    /// Calls are refused without being attempted until the open period ends.
    Open,
    /// A limited number of probes test recovery; everything else is refused.
    HalfOpen,
    /// Opened by an operator: every call is refused and nothing probes until
    /// [`reset`](crate::Breaker::reset) or the override's expiry.
    ForcedOpen,
    /// Closed by an operator (for a dependency known to be good): every call
    /// is admitted and no failure counts towards opening, until
    /// [`reset`](crate::Breaker::reset) or the override's expiry.
    ForcedClosed,
}

impl State {
    /// Whether the breaker refuses every call in this state: `Open` or
    /// `ForcedOpen`. `HalfOpen` is not open (it admits its probes), and
    /// `s == State::Open` alone misses an operator's `ForcedOpen`.
    ///
    /// ```
    /// use fusebox::State;
    ///
    /// assert!(State::Open.is_open());
    /// assert!(State::ForcedOpen.is_open());
    /// assert!(!State::HalfOpen.is_open());
    /// assert!(!State::Closed.is_open() && !State::ForcedClosed.is_open());
    /// ```
    pub const fn is_open(self) -> bool {
        matches!(self, State::Open | State::ForcedOpen)
    }

    /// A short lowercase name, as used in log lines and metrics labels.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::ForcedClosed => "forced_closed",
        }
    }

    /// Every state, in the crate's one numbering of them: `ALL[s.index()]`
    /// is `s`.
    // Only the Prometheus exposition walks every state.
    #[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
    pub(crate) const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::ForcedClosed,
    ];

    /// The state's number, 0 to 4: its place in [`ALL`](Self::ALL), the
    /// time-per-state counters' order and
    /// [`Snapshot::status_gauge`](crate::Snapshot::status_gauge)'s value.
    pub(crate) const fn index(self) -> usize {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::ForcedClosed => 4,
        }
    }

    /// Whether an operator override holds the breaker in this state.
    pub(crate) const fn is_forced(self) -> bool {
        matches!(self, State::ForcedOpen | State::ForcedClosed)
    }
}

/// A short lowercase name, as used in log lines and metrics labels:
/// `closed`, `open`, `half_open`, `forced_open`, `forced_closed`.
impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
