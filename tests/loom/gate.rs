//! The gate protocol under a model checker: every interleaving of a success
//! counted without the lock against the locked operations that end its
//! period (a reset, a failure), and the lock side's take and seal.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --test loom --release`.
//! The locked side is a small stand-in for the machine with the same rules:
//! a success of an earlier generation counts in the totals only.
#![cfg(loom)]

use fusebox::loom_gate::{closed, use_slot, Gate, Published};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// The machine, reduced to what the gate protocol touches.
#[derive(Debug, Default)]
struct Machine {
    generation: u64,
    consecutive: u32,
    /// Calls counted in the current generation.
    window: u64,
    /// Calls counted in all generations.
    totals: u64,
}

impl Machine {
    fn word(&self) -> u64 {
        closed(self.generation, self.consecutive == 0)
    }

    fn absorb(&mut self, n: u64) {
        self.totals += n;
        self.window += n;
    }

    fn successes(&mut self, generation: u64, n: u64) {
        self.totals += n;
        if generation == self.generation {
            self.consecutive = 0;
            self.window += n;
        }
    }

    fn failure(&mut self) {
        self.totals += 1;
        self.consecutive += 1;
        self.window += 1;
    }

    fn reset(&mut self) {
        self.generation += 1;
        self.consecutive = 0;
        self.window = 0;
    }
}

struct Core {
    machine: Machine,
    published: Published,
}

struct Breaker {
    gate: Gate,
    core: Mutex<Core>,
}

impl Breaker {
    fn new() -> Arc<Breaker> {
        let machine = Machine::default();
        let (gate, published) = Gate::new(machine.word());
        Arc::new(Breaker {
            gate,
            core: Mutex::new(Core { machine, published }),
        })
    }

    /// A locked operation as the breaker runs one: take the quiet counts,
    /// operate, publish (sealing, and recording the late successes).
    fn locked(&self, op: impl FnOnce(&mut Machine)) {
        let mut core = self.core.lock().unwrap();
        let core = &mut *core;
        let n = self.gate.take_quiet(&core.published);
        core.machine.absorb(n);
        op(&mut core.machine);
        self.gate.publish(
            &mut core.published,
            &mut core.machine,
            Machine::word,
            |m, n, generation| {
                m.successes(generation, n);
                None::<()>
            },
        );
    }

    /// A success of a call admitted in `generation`, as `Breaker::settle`
    /// reports it.
    fn success(&self, generation: u64) {
        if !self.gate.count_quiet(generation) {
            self.locked(|m| m.successes(generation, 1));
        }
    }

    fn settled(&self) -> Machine {
        self.locked(|_| {});
        std::mem::take(&mut self.core.lock().unwrap().machine)
    }
}

#[test]
fn a_success_racing_a_reset_counts_once_and_never_in_the_new_generation() {
    loom::model(|| {
        let b = Breaker::new();
        let caller = {
            let b = b.clone();
            thread::spawn(move || {
                use_slot(0);
                b.success(0);
            })
        };
        b.locked(Machine::reset);
        caller.join().unwrap();
        let m = b.settled();
        assert_eq!(m.totals, 1, "counted exactly once");
        assert_eq!(m.window, 0, "never in the generation after its own");
    });
}

#[test]
fn successes_in_two_slots_racing_a_reset_count_once_each() {
    loom::model(|| {
        let b = Breaker::new();
        let callers: Vec<_> = (0..2)
            .map(|slot| {
                let b = b.clone();
                thread::spawn(move || {
                    use_slot(slot);
                    b.success(0);
                })
            })
            .collect();
        b.locked(Machine::reset);
        for c in callers {
            c.join().unwrap();
        }
        let m = b.settled();
        assert_eq!(m.totals, 2);
        assert_eq!(m.window, 0);
    });
}

#[test]
fn a_success_racing_a_failure_is_ordered_before_or_after_it() {
    loom::model(|| {
        let b = Breaker::new();
        let caller = {
            let b = b.clone();
            thread::spawn(move || {
                use_slot(0);
                b.success(0);
            })
        };
        b.locked(Machine::failure);
        caller.join().unwrap();
        let m = b.settled();
        assert_eq!((m.totals, m.window), (2, 2));
        // Before the failure, the run of failures is 1; after it, 0. Either
        // way the gate says quiet exactly when the run is 0.
        assert!(m.consecutive <= 1);
    });
}

#[test]
fn a_success_racing_a_failure_then_a_reset_never_reaches_the_new_generation() {
    loom::model(|| {
        let b = Breaker::new();
        let caller = {
            let b = b.clone();
            thread::spawn(move || {
                use_slot(1);
                b.success(0);
            })
        };
        b.locked(Machine::failure);
        b.locked(Machine::reset);
        caller.join().unwrap();
        let m = b.settled();
        assert_eq!(m.totals, 2);
        assert_eq!(m.window, 0);
    });
}
