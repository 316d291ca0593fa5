//! A breaker's calls in flight, judged (`stuck_call_threshold`,
//! `hung_call_duration`): the claim at a closed admission, the release where
//! the outcome is recorded, the scan under the lock when one is due, and the
//! looks that make no call (`state`, `would_permit`, `snapshot`,
//! `last_failure`, the check a full bulkhead makes before it refuses),
//! which act on them as the next admission would. The table itself, and
//! why its accesses are exact, is `src/in_flight.rs`; the rule is the
//! machine's (`Machine::judge_in_flight`).

use crate::breaker::{Breaker, Core};
use crate::delivery::Outbox;
use crate::machine::{Machine, Ticket, Transition};
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
    /// may cross it, nor than the end of a maintenance window `now` is in.
    /// The transition the machine made of them, if any.
    pub(crate) fn scan_in_flight(&self, core: &mut Core, now: u64) -> Option<Transition> {
        let table = self.inner.hot().in_flight.as_deref()?;
        if now < table.due() || core.machine.state() != State::Closed {
            return None;
        }
        let marks = core.machine.in_flight_marks();
        let from = core.machine.in_flight_aged_from(now);
        let scan = table.scan(core.machine.generation(), now, marks, from);
        let unseen = now.saturating_add(marks.stuck.min(marks.hung).saturating_add(1));
        // Time inside a maintenance window counts for nothing: at its end
        // the calls still out start to age.
        let end = core.machine.maintenance_end(now).unwrap_or(u64::MAX);
        table.set_due(scan.next.min(unseen).min(end));
        core.machine.judge_in_flight(now, &scan)
    }

    /// Under the lock: what the next admission would make of the calls in
    /// flight at `now`, made now. When their scan is due, they are scanned
    /// and judged and a trip is published; from when the next closed call
    /// takes the lock is stored either way. Whether a change was queued.
    ///
    /// The one place the breaker acts on its calls in flight: a closed
    /// admission under the lock, and every look that makes no call
    /// ([`look`](Self::look): `state`, `would_permit`, `snapshot`,
    /// `last_failure`, a full bulkhead's check). A look applies the trip rather than reporting
    /// it, so that what it reads is what the next call meets, and the trip
    /// is a change like any other (`docs/design.md`, "Calls in flight").
    pub(crate) fn settle_in_flight(&self, core: &mut Core, now: u64) -> bool {
        let changed = match self.scan_in_flight(core, now) {
            Some(t) => {
                self.publish(core, t);
                true
            }
            None => false,
        };
        self.store_watch_from(core, now);
        changed
    }

    /// A look at the breaker that makes no call, under the lock: `read` of
    /// what the lock guards at `now` once the calls in flight are settled
    /// ([`settle_in_flight`](Self::settle_in_flight)); a change that made
    /// is delivered after the lock is let go.
    pub(crate) fn look<R>(&self, now: u64, read: impl FnOnce(&Core) -> R) -> R {
        let (read, changed) = {
            let mut core = self.lock();
            let changed = self.settle_in_flight(&mut core, now);
            (read(&core), changed)
        };
        if changed {
            self.inner.dispatch(1);
        }
        read
    }

    /// With calls in flight tracked and their scan due: [`look`](Self::look)
    /// at now. `None` otherwise, after one clock read and one atomic load
    /// (a pointer already on the line every call reads, without them).
    #[inline]
    pub(crate) fn look_if_due<R>(&self, read: impl FnOnce(&Machine, u64) -> R) -> Option<R> {
        let table = self.inner.hot().in_flight.as_deref()?;
        let now = self.now();
        // A relaxed load outside the lock: the instant only moves forward
        // (each scan sets it from its own `now` on), so a stale one is
        // earlier and costs a lock round trip, never a missed scan.
        if now < table.due() {
            return None;
        }
        Some(self.look(now, |core| read(&core.machine, now)))
    }

    /// Checks the calls in flight when their scan is due, without asking
    /// for admission: what a full bulkhead in front of the breaker calls
    /// before refusing, so that the calls it holds can still open the
    /// breaker. One clock read and one atomic load unless a scan is due.
    // Only the bulkhead (feature `isolation`) checks from outside.
    #[cfg_attr(not(feature = "isolation"), allow(dead_code))]
    #[cold]
    pub(crate) fn check_in_flight(&self) {
        self.look_if_due(|_, _| ());
    }
}
