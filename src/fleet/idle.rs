//! A probe lease its process does not use goes back to the fleet.
//!
//! The lease goes to whichever agent reads first after the cool-down,
//! whether or not its process calls the vendor. An agent whose breaker was
//! let probe under the lease, and took no probe within `lease_idle`, holds
//! its breaker open again and gives the lease back (the `RETURN` script),
//! so that a process with traffic takes it at once instead of after
//! `probe_lease`. An agent that gave the lease back takes none again in
//! that open period unless its breaker refuses a call since: idle agents
//! do not pass the lease around.

use std::time::{Duration, Instant};

/// What the agent knows of one breaker's use of the probe lease. Pure: the
/// member feeds it what it reads, with the agent's `now`.
#[derive(Debug, Default)]
pub(crate) struct LeaseUse {
    /// The lease the local breaker is let probe under, and since when the
    /// agent knows it.
    released: Option<(String, Instant)>,
    /// Whether the local breaker took a probe under that lease.
    probed: bool,
    /// The open period (`epoch`) whose lease this agent gave back, and the
    /// breaker's refusals then.
    returned: Option<(i64, u64)>,
}

impl LeaseUse {
    /// The local breaker is let probe under `token` at `now`, or under no
    /// lease (`None`). The same token again keeps its start.
    pub(crate) fn released(&mut self, token: Option<&str>, now: Instant) {
        match token {
            Some(t) if self.released.as_ref().is_some_and(|(r, _)| r == t) => {}
            Some(t) => {
                self.released = Some((t.to_owned(), now));
                self.probed = false;
            }
            None => {
                self.released = None;
                self.probed = false;
            }
        }
    }

    /// The local breaker took a probe (open to half-open on a call).
    pub(crate) fn probe_taken(&mut self) {
        if self.released.is_some() {
            self.probed = true;
        }
    }

    /// The lease to give back at `now`: the breaker has been let probe under
    /// it for `idle` or more, and took no probe.
    pub(crate) fn idle(&self, now: Instant, idle: Duration) -> Option<&str> {
        if self.probed {
            return None;
        }
        let (token, since) = self.released.as_ref()?;
        (now.saturating_duration_since(*since) >= idle).then_some(token.as_str())
    }

    /// When the lease the breaker is let probe under is to be given back,
    /// if it takes no probe before: `idle` after the breaker was let probe.
    pub(crate) fn idle_at(&self, idle: Duration) -> Option<Instant> {
        match &self.released {
            Some((_, since)) if !self.probed => Some(*since + idle),
            _ => None,
        }
    }

    /// The lease of open period `epoch` is being given back, when the
    /// breaker had refused `refusals` calls in its life.
    pub(crate) fn give_back(&mut self, epoch: i64, refusals: u64) {
        self.released = None;
        self.probed = false;
        self.returned = Some((epoch, refusals));
    }

    /// The fleet's open period is `epoch`: a give-back of another period no
    /// longer keeps the agent from the lease.
    pub(crate) fn period(&mut self, epoch: i64) {
        if self.returned.is_some_and(|(e, _)| e != epoch) {
            self.returned = None;
        }
    }

    /// Whether the agent gave back this period's lease and has seen no
    /// demand since.
    pub(crate) fn gave_back(&self) -> bool {
        self.returned.is_some()
    }

    /// The breaker has refused `refusals` calls in its life: a refusal
    /// since the give-back is demand, and lets the agent take the lease
    /// again. Returns whether it did just now.
    pub(crate) fn demand(&mut self, refusals: u64) -> bool {
        match self.returned {
            Some((_, then)) if refusals > then => {
                self.returned = None;
                true
            }
            _ => false,
        }
    }

    /// Whether the agent may take the lease: it gave none back this period,
    /// or its breaker refused a call since.
    pub(crate) fn may_take(&self) -> bool {
        self.returned.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_millis(500);

    #[test]
    fn a_lease_unused_for_the_idle_time_is_to_be_given_back() {
        let t0 = Instant::now();
        let mut u = LeaseUse::default();
        assert_eq!(u.idle(t0 + IDLE, IDLE), None, "no lease");
        u.released(Some("3:1:a"), t0);
        assert_eq!(u.idle(t0 + IDLE / 2, IDLE), None, "not idle yet");
        // Seeing the same lease again keeps its start.
        u.released(Some("3:1:a"), t0 + IDLE / 2);
        assert_eq!(u.idle(t0 + IDLE, IDLE), Some("3:1:a"));
    }

    #[test]
    fn a_lease_under_which_a_probe_went_is_kept() {
        let t0 = Instant::now();
        let mut u = LeaseUse::default();
        u.released(Some("3:1:a"), t0);
        u.probe_taken();
        assert_eq!(u.idle(t0 + 10 * IDLE, IDLE), None);
        // A new lease starts unused, with its own start.
        u.released(Some("4:2:a"), t0 + IDLE);
        assert_eq!(u.idle(t0 + IDLE, IDLE), None);
        assert_eq!(u.idle(t0 + 2 * IDLE, IDLE), Some("4:2:a"));
        u.released(None, t0 + 2 * IDLE);
        assert_eq!(u.idle(t0 + 10 * IDLE, IDLE), None, "no lease");
    }

    #[test]
    fn after_a_give_back_the_lease_is_taken_again_only_on_demand_or_in_a_new_period() {
        let t0 = Instant::now();
        let mut u = LeaseUse::default();
        u.released(Some("3:1:a"), t0);
        u.give_back(3, 7);
        assert!(!u.may_take() && u.gave_back());
        assert_eq!(u.idle(t0 + 10 * IDLE, IDLE), None);
        u.period(3);
        assert!(!u.demand(7), "no refusal since");
        assert!(!u.may_take());
        assert!(u.demand(8), "a refused call");
        assert!(u.may_take() && !u.gave_back());

        u.give_back(3, 8);
        u.period(4);
        assert!(u.may_take(), "a new open period");
        assert!(!u.demand(100), "nothing to lift");
    }
}
