//! The deadline pool: calls that cannot time themselves out run on a few
//! worker threads, and the caller waits at most its deadline.

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::error::{at_least_one, settle, BuildError, Full, IsolationError, Layer, TimedOut};
use crate::{ConfigError, Permit, Verdict};

/// A few worker threads for one dependency whose calls cannot be timed out
/// themselves (a vendor SDK with no timeout), so that the caller waits at
/// most its deadline.
///
/// - The threads are started by [`build`](DeadlinePoolBuilder::build); no
///   thread is created per call.
/// - A call holds one of the pool's slots from submission until it really
///   returns, even after its caller has given up on it. The pool therefore
///   bounds how many threads a hung vendor can hold, and a pool whose slots
///   are all held refuses at once with [`Full`].
/// - At the deadline the caller gets [`IsolationError::TimedOut`], and the
///   breaker counts the failure then, not when the call returns: a breaker
///   can open while calls still hang.
///
/// Calls go through an [`Isolated`](super::Isolated), which asks the
/// breaker (and a bulkhead, if it has one) first:
///
/// ```
/// use fusebox::isolation::{DeadlinePool, Isolated};
/// use fusebox::{Breaker, CallPath, Classifier};
/// use std::time::Duration;
///
/// let sentiment = Isolated::new(
///     Breaker::builder("vendor-sdk")
///         .call_path(CallPath::AltData)
///         .classifier(Classifier::every_error_is_a_failure())
///         .build()?,
/// )
/// .with_deadline_pool(
///     DeadlinePool::builder("vendor-sdk")
///         .threads(4)
///         .deadline(Duration::from_millis(250))
///         .build()?,
/// );
///
/// let score = sentiment.call(|| Ok::<_, std::io::Error>(0.7));
/// assert_eq!(score.unwrap(), 0.7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Cheap to clone (the clones share one pool). When the last clone is
/// dropped, the threads end after their current call; a thread stuck in a
/// call that never returns stays stuck, as it would anywhere.
///
/// # Cost
///
/// Per call: two allocations (the job and its reply channel), one send on
/// the pool's channel, a thread wake-up, and one receive with a timeout.
/// Microseconds, against the milliseconds of the calls it is meant for.
#[derive(Clone)]
pub struct DeadlinePool {
    inner: Arc<Inner>,
}

struct Inner {
    name: crate::name::Inline,
    threads: usize,
    deadline: Duration,
    jobs: Sender<Job>,
    shared: Arc<Shared>,
}

/// What the worker threads share with the callers. The threads hold this,
/// not the job sender, so that dropping the pool ends them.
#[derive(Default)]
struct Shared {
    busy: AtomicUsize,
    peak_busy: AtomicUsize,
    abandoned: AtomicUsize,
    completed: AtomicU64,
    timed_out: AtomicU64,
    returned_late: AtomicU64,
    refusals: AtomicU64,
}

type Job = Box<dyn FnOnce() + Send>;

/// Settings for a [`DeadlinePool`], checked by [`build`](Self::build).
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `threads` | required |
/// | `deadline` | required |
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until build() is called"]
pub struct DeadlinePoolBuilder {
    name: String,
    threads: Option<usize>,
    deadline: Option<Duration>,
}

impl DeadlinePoolBuilder {
    /// How many worker threads, and so how many calls (abandoned ones
    /// included) may be in flight at once. Required; at least 1.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// How long a caller waits for a call before abandoning it. Required;
    /// more than zero. [`Isolated::call_within`](super::Isolated::call_within)
    /// overrides it per call.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Checks the settings and starts the threads.
    ///
    /// # Errors
    ///
    /// [`BuildError::Config`] for a missing or invalid setting, naming it;
    /// [`BuildError::Spawn`] if the system refuses a thread.
    pub fn build(self) -> Result<DeadlinePool, BuildError> {
        // The same rules as a breaker's name: it goes into refusals and logs.
        crate::name::check(&self.name)?;
        let threads = self.threads.ok_or(ConfigError::Missing {
            field: "threads",
            why: "the pool bounds how many threads a hung dependency can hold",
        })?;
        if threads == 0 {
            return Err(at_least_one("threads", threads).into());
        }
        let deadline = self.deadline.ok_or(ConfigError::Missing {
            field: "deadline",
            why: "how long a caller can wait is the caller's to say",
        })?;
        if deadline.is_zero() {
            return Err(ConfigError::Invalid {
                field: "deadline",
                rule: "must be more than zero",
                value: crate::duration::display(deadline).to_string(),
            }
            .into());
        }
        // Never more queued than there are threads: a slot is taken before
        // a job is sent and given back only after it has run.
        let (jobs, queue) = crossbeam_channel::bounded::<Job>(threads);
        let shared = Arc::new(Shared::default());
        for i in 0..threads {
            let queue = queue.clone();
            thread::Builder::new()
                .name(format!("{}-{i}", self.name))
                .spawn(move || work(&queue))
                .map_err(|source| BuildError::Spawn {
                    name: self.name.clone(),
                    source,
                })?;
        }
        Ok(DeadlinePool {
            inner: Arc::new(Inner {
                name: crate::name::Inline::new(&self.name),
                threads,
                deadline,
                jobs,
                shared,
            }),
        })
    }
}

fn work(queue: &Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        job();
    }
}

/// A point-in-time view of a [`DeadlinePool`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(any(feature = "serde", feature = "admin"), derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeadlinePoolSnapshot {
    /// The pool's name.
    pub name: std::sync::Arc<str>,
    /// Its worker threads, started at build; the pool never starts more.
    pub threads: usize,
    /// Slots held now: calls queued or running, abandoned ones included.
    pub busy: usize,
    /// The most slots ever held at once.
    pub peak_busy: usize,
    /// Calls abandoned at their deadline that have not returned yet, each
    /// holding a thread.
    pub abandoned: usize,
    /// Calls whose caller got their answer.
    pub completed: u64,
    /// Calls abandoned at their deadline.
    pub timed_out: u64,
    /// Abandoned calls that have since returned (and freed their thread).
    pub returned_late: u64,
    /// Callers refused because every slot was held.
    pub refusals: u64,
}

impl DeadlinePool {
    /// Starts building a pool called `name`, which also names its threads.
    pub fn builder(name: impl Into<String>) -> DeadlinePoolBuilder {
        DeadlinePoolBuilder {
            name: name.into(),
            threads: None,
            deadline: None,
        }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        self.inner.name.as_str()
    }

    /// The deadline callers wait for by default.
    pub(crate) fn deadline(&self) -> Duration {
        self.inner.deadline
    }

    /// The pool's half of a guarded call, once the breaker has admitted it:
    /// a full pool hands the breaker's permit back unused (not the
    /// dependency's failure); at the deadline the permit is settled as a
    /// failure while `f` goes on holding its thread until it returns; a
    /// panic in `f` counts as a failure and resumes unwinding in the caller.
    pub(super) fn run_with_permit<T, E, F>(
        &self,
        permit: Permit<'_>,
        deadline: Duration,
        f: F,
    ) -> Result<T, IsolationError<E>>
    where
        F: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: StdError + Send + 'static,
    {
        let pending = match self.submit(f) {
            Ok(pending) => pending,
            Err(full) => {
                permit.record(Verdict::Ignore);
                return Err(IsolationError::Full(full));
            }
        };
        match pending.wait(deadline) {
            Waited::Returned(result) => settle(permit, result),
            Waited::Panicked(payload) => {
                permit.record(Verdict::Failure);
                resume_unwind(payload)
            }
            Waited::TimedOut(t) => {
                // Known to be slow now, before it returns.
                permit.record(Verdict::Failure);
                Err(IsolationError::TimedOut(t))
            }
        }
    }

    /// Takes a slot and hands `f` to a worker thread.
    fn submit<T, E, F>(&self, f: F) -> Result<Pending<T, E>, Full>
    where
        F: FnOnce() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let inner = &*self.inner;
        let shared = &*inner.shared;
        let mut current = shared.busy.load(Ordering::Relaxed);
        loop {
            if current >= inner.threads {
                return Err(self.refuse());
            }
            match shared.busy.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        shared.peak_busy.fetch_max(current + 1, Ordering::Relaxed);

        let (tx, rx) = crossbeam_channel::bounded(1);
        let state = Arc::new(AtomicU8::new(PENDING));
        let job_state = Arc::clone(&state);
        let job_shared = Arc::clone(&inner.shared);
        let job: Job = Box::new(move || {
            let result = catch_unwind(AssertUnwindSafe(f));
            // The call has returned: its slot is free before its answer is
            // sent, so a caller that calls again at once finds it free.
            job_shared.busy.fetch_sub(1, Ordering::AcqRel);
            // The caller may be gone: then nobody wants the answer.
            let _ = tx.send(result);
            if job_state
                .compare_exchange(PENDING, DONE, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                // Abandoned at its deadline: it has returned at last.
                job_shared.abandoned.fetch_sub(1, Ordering::Relaxed);
                job_shared.returned_late.fetch_add(1, Ordering::Relaxed);
            }
        });
        if inner.jobs.try_send(job).is_err() {
            // Cannot happen while the pool is alive (the queue holds as many
            // jobs as there are slots), but refuse rather than assume.
            shared.busy.fetch_sub(1, Ordering::AcqRel);
            return Err(self.refuse());
        }
        Ok(Pending {
            rx,
            state,
            shared: Arc::clone(&inner.shared),
            name: inner.name,
        })
    }

    #[cold]
    fn refuse(&self) -> Full {
        self.inner.shared.refusals.fetch_add(1, Ordering::Relaxed);
        Full {
            name: self.inner.name,
            lane: None,
            layer: Layer::DeadlinePool,
            limit: self.inner.threads,
            waited: Duration::ZERO,
        }
    }

    /// Threads, slots held, abandoned calls and the lifetime counts. No
    /// lock: a few atomic loads.
    pub fn snapshot(&self) -> DeadlinePoolSnapshot {
        let name = std::sync::Arc::from(self.inner.name.as_str());
        self.inner.shared.snapshot(name, self.inner.threads)
    }

    /// What reads the pool's snapshots without keeping it alive: the
    /// registry's hold, so that dropping the pool still ends its threads.
    // Read by the registry only.
    #[allow(dead_code)]
    pub(crate) fn watch(&self) -> impl Fn() -> DeadlinePoolSnapshot + Send + Sync + 'static {
        let name: std::sync::Arc<str> = std::sync::Arc::from(self.inner.name.as_str());
        let threads = self.inner.threads;
        let shared = Arc::clone(&self.inner.shared);
        move || shared.snapshot(Arc::clone(&name), threads)
    }
}

impl Shared {
    fn snapshot(&self, name: std::sync::Arc<str>, threads: usize) -> DeadlinePoolSnapshot {
        let s = self;
        DeadlinePoolSnapshot {
            name,
            threads,
            busy: s.busy.load(Ordering::Relaxed),
            peak_busy: s.peak_busy.load(Ordering::Relaxed),
            abandoned: s.abandoned.load(Ordering::Relaxed),
            completed: s.completed.load(Ordering::Relaxed),
            timed_out: s.timed_out.load(Ordering::Relaxed),
            returned_late: s.returned_late.load(Ordering::Relaxed),
            refusals: s.refusals.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for DeadlinePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlinePool")
            .field("name", &self.inner.name)
            .field("threads", &self.inner.threads)
            .field("deadline", &self.inner.deadline)
            .finish_non_exhaustive()
    }
}

const PENDING: u8 = 0;
const DONE: u8 = 1;
const ABANDONED: u8 = 2;

type Answer<T, E> = std::thread::Result<Result<T, E>>;

/// A call handed to a worker, from the caller's side.
struct Pending<T, E> {
    rx: Receiver<Answer<T, E>>,
    state: Arc<AtomicU8>,
    shared: Arc<Shared>,
    name: crate::name::Inline,
}

enum Waited<T, E> {
    Returned(Result<T, E>),
    Panicked(Box<dyn Any + Send>),
    TimedOut(TimedOut),
}

impl<T, E> Pending<T, E> {
    fn wait(self, deadline: Duration) -> Waited<T, E> {
        let answer = match self.rx.recv_timeout(deadline) {
            Ok(answer) => answer,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                // Counted before the state says so, so that a late return
                // never takes the count below zero.
                self.shared.abandoned.fetch_add(1, Ordering::Relaxed);
                if self
                    .state
                    .compare_exchange(PENDING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.shared.timed_out.fetch_add(1, Ordering::Relaxed);
                    return Waited::TimedOut(TimedOut {
                        name: self.name,
                        deadline,
                    });
                }
                // It returned just as the deadline passed: its answer is
                // already in the channel.
                self.shared.abandoned.fetch_sub(1, Ordering::Relaxed);
                match self.rx.try_recv() {
                    Ok(answer) => answer,
                    Err(_) => {
                        self.shared.timed_out.fetch_add(1, Ordering::Relaxed);
                        return Waited::TimedOut(TimedOut {
                            name: self.name,
                            deadline,
                        });
                    }
                }
            }
        };
        self.shared.completed.fetch_add(1, Ordering::Relaxed);
        match answer {
            Ok(result) => Waited::Returned(result),
            Err(payload) => Waited::Panicked(payload),
        }
    }
}
