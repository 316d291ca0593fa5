//! Delivery of state changes, outside the lock: which thread runs the log
//! line, the callback and the subscribers for each change, and when.
//!
//! Every change is queued under the breaker's lock ([`Pending::push`]) and
//! delivered by popping the queue's head while holding the [`BUSY`] bit of
//! the breaker's [`Courier`]: one deliverer at a time, so changes go out in
//! `seq` order, each once. Each change is a credit held by the thread that
//! caused it:
//!
//! - With [`Delivery::Caller`], that thread takes `BUSY` and delivers as
//!   many changes as it holds credits (plus those its own callbacks cause
//!   meanwhile, counted in a thread-local, never delivered inside the
//!   callback), then lets go. If `BUSY` is taken, it adds its credits to
//!   the courier's word and returns at once; the deliverer, when it lets
//!   go, sees them in the same atomic operation and hands them to the
//!   notifier thread.
//! - With [`Delivery::Notifier`], and for a thread that must not run user
//!   code (the health-probe thread), every credit goes to the notifier
//!   ([`Outbox::hand_off`]), which delivers them unless a caller is
//!   delivering (that caller hands them back when it lets go).
//!
//! The queue never holds more changes than there are credits, so no change
//! is left with nobody to deliver it. `tests/loom/delivery.rs` checks the
//! protocol under the model checker: every change delivered exactly once,
//! in `seq` order, by one thread at a time, and none left behind, with
//! either delivery and with a callback that causes a change.
//!
//! A notifier queue that is full (4,096 breakers waiting) refuses the
//! hand-off: the changes stay queued, and the breaker's next change hands
//! them off again.

// Public only for the model checker's test, under `--cfg loom`
// (`tests/loom/delivery.rs`, through `lib.rs`'s `loom_delivery`); crate
// items otherwise.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use crate::events::Delivery;
use crate::notifier::Handoff;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// Set in the courier's word while a thread delivers.
const BUSY: u64 = 1;
/// One change handed off, in the courier's word.
const CREDIT: u64 = 2;

#[cfg(not(loom))]
std::thread_local! {
    /// The outbox this thread is delivering for (its address, or 0), and
    /// the changes that the callbacks it runs have caused meanwhile.
    static DELIVERING: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

#[cfg(loom)]
loom::thread_local! {
    static DELIVERING: Cell<(usize, u64)> = Cell::new((0, 0));
}

/// Who delivers a breaker's changes: the busy bit and the credits handed
/// off, in one word, and whether the notifier has the breaker queued.
#[derive(Debug)]
pub struct Courier {
    /// Bit 0 ([`BUSY`]) is set while a thread delivers; above it, in units
    /// of [`CREDIT`], the changes handed off to the notifier.
    word: AtomicU64,
    /// Whether the notifier has the breaker in its queue.
    scheduled: AtomicBool,
    mode: Delivery,
}

impl Courier {
    /// A courier for changes delivered as `mode` says.
    pub fn new(mode: Delivery) -> Courier {
        Courier {
            word: AtomicU64::new(0),
            scheduled: AtomicBool::new(false),
            mode,
        }
    }
}

/// Changes waiting for delivery, at most [`Delivery::PENDING_CAPACITY`]:
/// one more drops the oldest, and counts it.
#[derive(Debug)]
pub struct Pending<C> {
    queue: VecDeque<C>,
    dropped: u64,
}

impl<C> Default for Pending<C> {
    fn default() -> Self {
        Pending {
            queue: VecDeque::new(),
            dropped: 0,
        }
    }
}

impl<C> Pending<C> {
    /// Queues `change`, under the breaker's lock, dropping the oldest if
    /// the queue is full.
    pub fn push(&mut self, change: C) {
        if self.queue.len() >= Delivery::PENDING_CAPACITY {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(change);
    }

    /// The oldest change, under the breaker's lock.
    pub fn pop(&mut self) -> Option<C> {
        let next = self.queue.pop_front();
        if self.queue.is_empty() && self.queue.capacity() > 64 {
            // A backlog is over: give its memory back.
            self.queue.shrink_to(16);
        }
        next
    }

    /// The changes dropped from a full queue.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// A breaker as delivery sees it: its courier, its queue, and the user's
/// code a change runs. The protocol is in the provided methods.
pub trait Outbox: Send + Sync + Sized + 'static {
    /// What is delivered.
    type Change;

    /// The busy bit and the credits.
    fn courier(&self) -> &Courier;

    /// Takes the breaker's lock and pops the head of its queue.
    fn pop(&self) -> Option<Self::Change>;

    /// Runs the user's code for one change, outside every lock. Must not
    /// unwind: a panic that left `BUSY` set would end every later delivery.
    fn deliver(&self, change: &Self::Change);

    /// Puts the breaker in the notifier's queue; false if it could not be
    /// queued.
    fn schedule(this: Weak<Self>) -> bool;

    /// After the lock is released: delivers, or hands off, the `n` changes
    /// this thread's operation caused.
    fn dispatch(self: &Arc<Self>, n: u64) {
        let me = address(&**self);
        let reentrant = DELIVERING.with(|d| {
            let (who, extra) = d.get();
            let inside = who == me;
            if inside {
                // A callback this thread is running caused it: delivered by
                // this thread, after the current change.
                d.set((who, extra + n));
            }
            inside
        });
        if reentrant {
            return;
        }
        let courier = self.courier();
        if courier.mode == Delivery::Notifier {
            self.hand_off(n);
            return;
        }
        let mut word = courier.word.load(Ordering::SeqCst);
        loop {
            let busy = word & BUSY != 0;
            let next = if busy { word + n * CREDIT } else { word | BUSY };
            match courier
                .word
                .compare_exchange_weak(word, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                // Another thread is delivering: handed off, no waiting.
                Ok(_) if busy => return,
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        deliver_up_to(&**self, n);
        let_go(self);
    }

    /// Hands the `n` changes a thread caused to the notifier, whatever the
    /// delivery mode: for a thread that must not run user code.
    fn hand_off(self: &Arc<Self>, n: u64) {
        self.courier().word.fetch_add(n * CREDIT, Ordering::SeqCst);
        schedule(self);
    }

    /// On the notifier thread: delivers the changes handed off, unless a
    /// caller is delivering (it hands them back when it lets go).
    fn deliver_handed_off(self: Arc<Self>) {
        let courier = self.courier();
        courier.scheduled.store(false, Ordering::SeqCst);
        let mut word = courier.word.load(Ordering::SeqCst);
        let credits = loop {
            if word & BUSY != 0 || word < CREDIT {
                return;
            }
            match courier
                .word
                .compare_exchange_weak(word, BUSY, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break word / CREDIT,
                Err(now) => word = now,
            }
        };
        deliver_up_to(&*self, credits);
        let_go(&self);
    }
}

/// The notifier reaches every outbox through this.
impl<O: Outbox> Handoff for O {
    fn deliver_handed_off(self: Arc<Self>) {
        Outbox::deliver_handed_off(self);
    }
}

/// Delivers up to `n` changes from the head of the queue, plus those the
/// callbacks cause meanwhile. The caller holds `BUSY`.
fn deliver_up_to<O: Outbox>(outbox: &O, mut n: u64) {
    let saved = DELIVERING.with(|d| d.replace((address(outbox), 0)));
    while n > 0 {
        let Some(change) = outbox.pop() else { break };
        outbox.deliver(&change);
        n -= 1;
        n += DELIVERING.with(|d| {
            let (who, extra) = d.get();
            d.set((who, 0));
            extra
        });
    }
    DELIVERING.with(|d| d.set(saved));
}

/// Clears `BUSY`; changes handed off meanwhile go to the notifier.
fn let_go<O: Outbox>(outbox: &Arc<O>) {
    let before = outbox.courier().word.fetch_sub(BUSY, Ordering::SeqCst);
    if before >= CREDIT {
        schedule(outbox);
    }
}

/// Puts the outbox in the notifier's queue, unless it is there.
fn schedule<O: Outbox>(outbox: &Arc<O>) {
    let scheduled = &outbox.courier().scheduled;
    if scheduled.swap(true, Ordering::SeqCst) {
        return;
    }
    if !O::schedule(Arc::downgrade(outbox)) {
        // The notifier's queue is full (or its thread could not start):
        // the changes stay queued, and the next change tries again.
        scheduled.store(false, Ordering::SeqCst);
    }
}

fn address<O>(outbox: &O) -> usize {
    std::ptr::from_ref(outbox) as usize
}
