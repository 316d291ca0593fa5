//! A member's presence among a breaker's members, and its keys' expiries,
//! kept alive at a cost that does not grow with time spent idle.
//!
//! A read (`SYNC`) renews both: the agent's score in the members key and
//! the expiry of the breaker's state hash and members key. It is a script
//! of a dozen commands, so an idle breaker is not read to stay alive: its
//! presence is renewed by one plain command, `ZADD members XX CH score
//! agent`, every quarter of `presence`, and it is read only every
//! keep-alive (a minute, or a quarter of `idle_expiry` if that is shorter),
//! which renews the keys' expiries and the agent's view of the members.
//!
//! The score is a server instant (when the presence ends). No host clock
//! is compared with Redis's: the member keeps the server's `now` from the
//! last answer for this breaker and the local instant that answer came, and
//! a renewal's score is that `now`, plus the local time since, plus
//! `presence`. The answer came after the script ran, so the score is early
//! by at most a round trip: the presence is that much shorter, never
//! longer. `XX` renews an entry and never makes one: a renewal that finds
//! no entry (the members key expired or was deleted, or the entry was
//! dropped after a stall longer than `presence`) answers 0, and the breaker
//! is read, which writes it again with the keys' expiries.
//!
//! Pure: the member feeds it what it reads, with the agent's `now`.

use std::time::{Duration, Instant};

/// Renewals per `presence`: a member stays counted through a stall of
/// three quarters of it.
const RENEWALS: u32 = 4;

/// What keeping a breaker's presence and keys alive asks for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing yet.
    Nothing,
    /// Renew the presence alone, with this score (server milliseconds).
    Renew(i64),
    /// Read the breaker: its keys' expiries are due (or the presence is,
    /// and no answer has told the server's clock yet).
    Read,
}

#[derive(Debug)]
pub(crate) struct Presence {
    /// The server's clock in milliseconds at the last answer for this
    /// breaker, and the local instant that answer came.
    server: Option<(i64, Instant)>,
    /// When the presence was last written: by a read or a renewal.
    renewed: Instant,
    /// When the breaker was last read.
    read: Instant,
    /// How long after a read the next keep-alive read is due.
    keep_alive: Duration,
}

impl Presence {
    /// A breaker about to be read, kept alive by a read every `keep_alive`
    /// less up to a quarter, by `spread` (0 to 1): breakers that joined
    /// together are not all read in the same round trip ever after.
    pub(crate) fn new(keep_alive: Duration, spread: f64, now: Instant) -> Presence {
        Presence {
            server: None,
            renewed: now,
            read: now,
            keep_alive: keep_alive.mul_f64(1.0 - spread.clamp(0.0, 1.0) / 4.0),
        }
    }

    /// An answer for this breaker came at `at`, with the server's `now`;
    /// `read` when it was a read (`SYNC`), which renewed the presence and
    /// the keys' expiries.
    pub(crate) fn answered(&mut self, now: i64, at: Instant, read: bool) {
        self.server = Some((now, at));
        if read {
            self.renewed = at;
            self.read = at;
        }
    }

    /// A renewal sent at `at` found this agent's entry and renewed it.
    pub(crate) fn renewed(&mut self, at: Instant) {
        self.renewed = at;
    }

    /// What is due at `now` for a member whose presence lasts `presence`.
    pub(crate) fn due(&self, now: Instant, presence: Duration) -> Due {
        if now.saturating_duration_since(self.read) >= self.keep_alive {
            return Due::Read;
        }
        if now.saturating_duration_since(self.renewed) < presence / RENEWALS {
            return Due::Nothing;
        }
        match self.server {
            Some((server, at)) => {
                let since = now.saturating_duration_since(at) + presence;
                Due::Renew(server.saturating_add(since.as_millis() as i64))
            }
            None => Due::Read,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRESENCE: Duration = Duration::from_secs(5);
    const KEEP: Duration = Duration::from_secs(60);

    #[test]
    fn presence_is_renewed_every_quarter_with_the_servers_clock_moved_on() {
        let t0 = Instant::now();
        let mut p = Presence::new(KEEP, 0.0, t0);
        p.answered(1_000_000, t0, true);
        assert_eq!(p.due(t0 + PRESENCE / 8, PRESENCE), Due::Nothing);
        let at = t0 + PRESENCE / 4;
        // The server's now at the answer, the local time since, the presence.
        assert_eq!(p.due(at, PRESENCE), Due::Renew(1_000_000 + 1_250 + 5_000));
        p.renewed(at);
        assert_eq!(p.due(at + PRESENCE / 8, PRESENCE), Due::Nothing);
    }

    #[test]
    fn the_keys_are_kept_alive_by_a_read_spread_over_a_quarter() {
        let t0 = Instant::now();
        let mut p = Presence::new(KEEP, 1.0, t0);
        p.answered(0, t0, true);
        assert_eq!(p.due(t0 + KEEP * 3 / 4, PRESENCE), Due::Read);
        // A read renews everything.
        let later = t0 + KEEP;
        p.answered(60_000, later, true);
        assert_eq!(p.due(later, PRESENCE), Due::Nothing);
        // Another script's answer tells the clock, and renews nothing.
        p.answered(70_000, later + PRESENCE, false);
        assert!(matches!(p.due(later + PRESENCE, PRESENCE), Due::Renew(_)));
    }

    #[test]
    fn a_presence_with_no_answer_yet_is_renewed_by_a_read() {
        let t0 = Instant::now();
        let p = Presence::new(KEEP, 0.0, t0);
        assert_eq!(p.due(t0 + PRESENCE, PRESENCE), Due::Read);
    }
}
