//! The notifier: one thread per process that delivers state changes handed
//! to it, so that a caller never delivers more than its own changes.
//!
//! It starts the first time a breaker hands it work: a breaker built with
//! [`Delivery::Notifier`](crate::Delivery::Notifier) on its first state
//! change, or a breaker delivering on its callers when a caller finds
//! another thread still delivering (see `docs/design.md`). It runs for the
//! rest of the process, blocked on its channel when idle.
//!
//! The channel is bounded and carries weak references: a breaker with work
//! waiting appears in it at most once, and a breaker dropped meanwhile is
//! skipped. So memory does not grow with breakers made and dropped.

use std::sync::{Arc, OnceLock, Weak};
use std::thread;

use crossbeam_channel::{Receiver, Sender};

/// A breaker with changes handed off to the notifier.
pub(crate) trait Handoff: Send + Sync {
    /// Delivers the changes handed off so far, on the notifier thread.
    fn deliver_handed_off(self: Arc<Self>);
}

/// Breakers waiting for the notifier, at most.
const CAPACITY: usize = 4096;

static NOTIFIER: OnceLock<Option<Sender<Weak<dyn Handoff>>>> = OnceLock::new();

/// Queues `breaker` for the notifier, starting it if it has not started.
///
/// False if it could not be queued: the channel is full, or the thread could
/// not be started. The caller keeps the work pending and tries again at its
/// next change.
pub(crate) fn schedule(breaker: Weak<dyn Handoff>) -> bool {
    let tx = NOTIFIER.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::bounded(CAPACITY);
        thread::Builder::new()
            .name("fusebox-notifier".into())
            .spawn(move || run(&rx))
            .ok()
            .map(|_| tx)
    });
    match tx {
        Some(tx) => tx.try_send(breaker).is_ok(),
        None => false,
    }
}

fn run(rx: &Receiver<Weak<dyn Handoff>>) {
    for breaker in rx {
        if let Some(breaker) = breaker.upgrade() {
            breaker.deliver_handed_off();
        }
    }
}
