//! A breaker's calls in flight, judged (`stuck_call_threshold`,
//! `hung_call_duration`): the claim at a closed admission, the release where
//! the outcome is recorded, the scan under the lock when one is due, and the
//! check a full bulkhead makes before it refuses. The table itself, and why
//! its accesses are exact, is `src/in_flight.rs`; the rule is the machine's
//! (`Machine::judge_in_flight`).

use std::sync::atomic::Ordering;

use crate::breaker::{Breaker, Core};
use crate::delivery::Outbox;
use crate::machine::{Ticket, Transition};
use crate::State;

impl Breaker {
    /// With calls in flight tracked: a closed call admitted in `generation`
    /// at `started` takes a word of the table, if one is free.
    #[inline(always)]
    pub(crate) fn claim_in_flight(&self, generation: u64, started: u64) {
        if let Some(table) = &self.inner.hot().in_flight {
            table.claim(generation, started);
        }
    }

    /// Under the lock, with calls in flight tracked: the call admitted with
    /// `ticket` at `started` has reported, or was cancelled; its word is
    /// freed (`src/in_flight.rs`).
    #[inline(always)]
    pub(crate) fn release_in_flight(&self, ticket: Ticket, started: u64) {
        if let (Some(table), Ticket::Closed { generation }) = (&self.inner.hot().in_flight, ticket)
        {
            table.release(generation, started);
        }
    }

    /// Under the lock, with calls in flight tracked and their scan due at
    /// `now`: scans them, judges them, and sets when the next scan is due,
    /// the first instant a call seen crosses a mark, and no later than one
    /// mark from now, by when a call not seen (admitted as the scan ran)
    /// may cross it. The transition the machine made of them, if any.
    pub(crate) fn scan_in_flight(&self, core: &mut Core, now: u64) -> Option<Transition> {
        let table = self.inner.hot().in_flight.as_deref()?;
        if now < table.due() || core.machine.state() != State::Closed {
            return None;
        }
        let marks = core.machine.in_flight_marks();
        let scan = table.scan(core.machine.generation(), now, marks);
        let unseen = now.saturating_add(marks.stuck.min(marks.hung).saturating_add(1));
        // Inside a maintenance window stuck calls open nothing; at its end
        // they may.
        let end = core.machine.maintenance_end(now).unwrap_or(u64::MAX);
        table.set_due(scan.next.min(unseen).min(end));
        core.machine.judge_in_flight(now, &scan)
    }

    /// Checks the calls in flight when their scan is due, without asking
    /// for admission: what a full bulkhead in front of the breaker calls
    /// before refusing, so that the calls it holds can still open the
    /// breaker. One clock read and one atomic load unless a scan is due.
    // Only the bulkhead (feature `isolation`) checks from outside.
    #[cfg_attr(not(feature = "isolation"), allow(dead_code))]
    #[cold]
    pub(crate) fn check_in_flight(&self) {
        if self.inner.hot().in_flight.is_none() {
            return;
        }
        let now = self.now();
        if now < self.inner.watch_from.load(Ordering::Relaxed) {
            return;
        }
        let changed = {
            let mut core = self.lock();
            let stuck = self.scan_in_flight(&mut core, now);
            let changed = match stuck {
                Some(t) => {
                    self.publish(&mut core, t);
                    true
                }
                None => false,
            };
            self.store_watch_from(&core, now);
            changed
        };
        if changed {
            self.inner.dispatch(1);
        }
    }
}
