//! The delivery protocol under a model checker: every interleaving (up to
//! five preemptions, see `model`) of the threads that cause state changes,
//! the thread that delivers them and the notifier thread, with the courier's busy/credit word, the thread-local
//! of the thread delivering and the notifier's hand-off as the breaker has
//! them (`src/delivery.rs`).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --test loom --release`.
//! The breaker is a small stand-in with the same queue: a change is numbered
//! and queued under its lock, then dispatched. Each model checks that every
//! change is delivered exactly once, in `seq` order, by one thread at a
//! time, and that none is left with nobody to deliver it.
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex as StdMutex, Weak};

use fusebox::loom_delivery::{Courier, Outbox, Pending};
use fusebox::Delivery;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Condvar, Mutex};
use loom::thread::{self, ThreadId};

/// The process's notifier thread, reduced to its queue of breakers.
#[derive(Default)]
struct Notifier {
    /// Breakers handed off, and whether the model is over.
    queue: Mutex<(VecDeque<Weak<Breaker>>, bool)>,
    ready: Condvar,
}

impl Notifier {
    /// The notifier thread: delivers for each breaker handed to it, until
    /// the model is over and nothing is left.
    fn run(&self) {
        loop {
            let next = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    if let Some(b) = q.0.pop_front() {
                        break Some(b);
                    }
                    if q.1 {
                        break None;
                    }
                    q = self.ready.wait(q).unwrap();
                }
            };
            let Some(b) = next else { return };
            // A breaker dropped meanwhile is skipped.
            if let Some(b) = b.upgrade() {
                b.deliver_handed_off();
            }
        }
    }

    fn close(&self) {
        self.queue.lock().unwrap().1 = true;
        self.ready.notify_all();
    }
}

/// What the lock guards.
struct Core {
    seq: u64,
    pending: Pending<u64>,
}

/// The breaker, reduced to its queue of changes and the user's code. What
/// the checks record is kept in the standard library's mutexes, which the
/// model checker does not schedule around: no model operation runs while
/// one is held.
struct Breaker {
    courier: Courier,
    core: Mutex<Core>,
    notifier: Arc<Notifier>,
    /// The thread the notifier runs on.
    notifier_thread: StdMutex<Option<ThreadId>>,
    /// The changes delivered, in the order delivered, with the thread that
    /// delivered each.
    delivered: StdMutex<Vec<(u64, ThreadId)>>,
    /// Set while a thread runs a change's user code.
    delivering: AtomicBool,
    /// Whether the callback of the first change calls the breaker back and
    /// causes one more change, and the thread it ran on.
    reentrant: bool,
    reentered_on: StdMutex<Option<ThreadId>>,
    /// The breaker itself, for that callback, as a callback holds a clone.
    me: Weak<Breaker>,
}

impl Breaker {
    fn new(mode: Delivery, reentrant: bool, notifier: &Arc<Notifier>) -> Arc<Breaker> {
        Arc::new_cyclic(|me| Breaker {
            courier: Courier::new(mode),
            core: Mutex::new(Core {
                seq: 0,
                pending: Pending::default(),
            }),
            notifier: Arc::clone(notifier),
            notifier_thread: StdMutex::new(None),
            delivered: StdMutex::new(Vec::new()),
            delivering: AtomicBool::new(false),
            reentrant,
            reentered_on: StdMutex::new(None),
            me: me.clone(),
        })
    }

    /// Starts the notifier thread.
    fn start_notifier(self: &Arc<Self>) -> thread::JoinHandle<()> {
        let n = Arc::clone(&self.notifier);
        let handle = thread::spawn(move || n.run());
        *self.notifier_thread.lock().unwrap() = Some(handle.thread().id());
        handle
    }

    /// Whether `t` is the notifier's thread.
    fn is_notifier(&self, t: ThreadId) -> bool {
        *self.notifier_thread.lock().unwrap() == Some(t)
    }

    /// An operation that changes the state: the change numbered and queued
    /// under the lock, then dispatched after it, as `Breaker::publish` and
    /// `dispatch` do.
    fn change(self: &Arc<Self>) {
        self.queue_one();
        self.dispatch(1);
    }

    /// The same change caused on the health-probe thread, which hands it
    /// to the notifier whatever the delivery mode.
    fn change_handed_off(self: &Arc<Self>) {
        self.queue_one();
        self.hand_off(1);
    }

    /// Under the lock: the next change, numbered and queued.
    fn queue_one(&self) {
        let mut core = self.core.lock().unwrap();
        core.seq += 1;
        let seq = core.seq;
        core.pending.push(seq);
    }

    /// Ends the model: the notifier is told that no more changes come and
    /// has delivered what was handed to it; then every change must be
    /// delivered, each once, in order.
    fn check(&self, notifier: thread::JoinHandle<()>) -> Vec<(u64, ThreadId)> {
        self.notifier.close();
        notifier.join().unwrap();
        let made = self.core.lock().unwrap().seq;
        let delivered = self.delivered.lock().unwrap().clone();
        let seqs: Vec<u64> = delivered.iter().map(|d| d.0).collect();
        assert_eq!(
            seqs,
            (1..=made).collect::<Vec<_>>(),
            "every change delivered exactly once, in seq order"
        );
        assert!(
            self.core.lock().unwrap().pending.pop().is_none(),
            "no change left with nobody to deliver it"
        );
        delivered
    }
}

impl Outbox for Breaker {
    type Change = u64;

    fn courier(&self) -> &Courier {
        &self.courier
    }

    fn pop(&self) -> Option<u64> {
        self.core.lock().unwrap().pending.pop()
    }

    fn deliver(&self, change: &u64) {
        assert!(
            !self.delivering.swap(true, Ordering::SeqCst),
            "two threads deliver at once, or one inside a callback"
        );
        let me = thread::current().id();
        self.delivered.lock().unwrap().push((*change, me));
        if self.reentrant && *change == 1 {
            // The callback calls the breaker back (`force_open`, say): the
            // change it causes is delivered by this thread, after this
            // one, never inside this callback.
            *self.reentered_on.lock().unwrap() = Some(me);
            self.me.upgrade().expect("alive").change();
        }
        self.delivering.store(false, Ordering::SeqCst);
    }

    fn schedule(this: Weak<Self>) -> bool {
        let Some(b) = this.upgrade() else {
            return false;
        };
        b.notifier.queue.lock().unwrap().0.push_back(this);
        b.notifier.ready.notify_one();
        true
    }
}

/// Runs `f` in every interleaving with at most five preemptions (the
/// threads switched at a point other than a blocking one): unbounded, the
/// models with three threads run for minutes; the gate's model runs
/// unbounded (`tests/loom/gate.rs`).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(5);
    }
    builder.check(f);
}

/// What a model checks after the common checks: the breaker, what it
/// delivered (by `seq`, with the thread), and the main thread.
type Then = fn(&Breaker, &[(u64, ThreadId)], ThreadId);

/// A model: a breaker delivering as `mode` says, with its notifier thread;
/// the main thread makes a change, raced by `other` on a second thread if
/// there is one. Then every change must have been delivered exactly once,
/// in order, one at a time, and `then` checks the rest.
fn race(mode: Delivery, reentrant: bool, other: Option<fn(&Arc<Breaker>)>, then: Then) {
    model(move || {
        let b = Breaker::new(mode, reentrant, &Arc::new(Notifier::default()));
        let notifier = b.start_notifier();
        let other = other.map(|f| {
            let b = Arc::clone(&b);
            thread::spawn(move || f(&b))
        });
        b.change();
        if let Some(other) = other {
            other.join().unwrap();
        }
        let delivered = b.check(notifier);
        then(&b, &delivered, thread::current().id());
    });
}

#[test]
fn two_callers_changes_are_delivered_once_each_in_order() {
    race(Delivery::Caller, false, Some(|b| b.change()), |_, _, _| {});
}

#[test]
fn with_notifier_delivery_only_the_notifier_delivers() {
    race(
        Delivery::Notifier,
        false,
        Some(|b| b.change()),
        |b, delivered, _| {
            assert!(
                delivered.iter().all(|d| b.is_notifier(d.1)),
                "a caller ran user code"
            );
        },
    );
}

#[test]
fn a_change_handed_off_by_the_probe_thread_races_a_caller_delivering() {
    race(
        Delivery::Caller,
        false,
        Some(|b| b.change_handed_off()),
        |_, _, _| {},
    );
}

#[test]
fn a_lone_caller_delivers_its_own_change_before_it_returns() {
    race(Delivery::Caller, false, None, |_, delivered, main| {
        assert_eq!(
            delivered,
            [(1, main)],
            "delivered by the call that caused it"
        );
    });
}

#[test]
fn a_change_a_callback_causes_is_delivered_after_it_by_the_same_thread() {
    race(
        Delivery::Caller,
        true,
        Some(|b| b.change()),
        |b, delivered, _| {
            let on = b.reentered_on.lock().unwrap().expect("the callback ran");
            let at = delivered.iter().position(|d| d.0 == 1).unwrap();
            // The thread that ran the first change's callback also
            // delivered a later change: the one its callback caused (or,
            // had another thread's change come between, that one, in seq
            // order, the callback's going to that thread).
            assert!(
                delivered[at + 1..].iter().any(|d| d.1 == on),
                "the callback's change went to another thread"
            );
        },
    );
}

#[test]
fn with_notifier_delivery_a_callbacks_change_stays_on_the_notifier() {
    race(Delivery::Notifier, true, None, |b, delivered, _| {
        assert_eq!(delivered.len(), 2);
        assert!(delivered.iter().all(|d| b.is_notifier(d.1)));
    });
}
