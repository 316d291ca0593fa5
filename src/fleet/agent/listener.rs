//! The pub/sub reader of one session: a thread that blocks on the
//! subscribed connection and forwards each announcement (a breaker's name)
//! to the agent through a bounded channel, so that the agent waits on
//! channels (a futex, with the timer's precision) instead of a socket read
//! timeout, which Linux counts in kernel ticks (about 12 ms for a 5 ms
//! timeout at `CONFIG_HZ=250`).
//!
//! The thread ends when its connection fails (the agent gets the error,
//! and the session ends as for any Redis error) or when the session ends
//! ([`Listener`] is dropped: the thread sees it at its next read timeout,
//! [`STOP_POLL`], and is joined).
//!
//! The connection is also subscribed to the agent's own channel, on which
//! the agent publishes a numbered heartbeat at every sweep. The thread
//! records the last one it read, and does not wake the agent for it. A
//! heartbeat that came back proves that every announcement published before
//! it on its way (the same server, and in a Cluster the same bus link) came
//! back too: Redis writes a subscriber's messages in the order it publishes
//! them. One that has not come back two sweeps after it was sent means
//! announcements may have been lost ([`Listener::check`]); two sweeps
//! rather than one, so that a reader that is only slow (its process short
//! of CPU) does not make the agent read every breaker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use redis::{Connection, ErrorKind, RedisError, RedisResult};

use crate::fleet::snapshot::Stats;

/// How many announcements wait for the agent. Beyond that the newest are
/// dropped, and the agent reads every breaker instead (see [`Listener::lost`]).
pub(crate) const CAPACITY: usize = 1024;

/// The reader's socket read timeout: how long it takes at most to see that
/// the session ended (rounded up to kernel ticks), and so what a `Fleet`'s
/// drop waits for it; twice that with Redis hung, as it unsubscribes on its
/// way out. An announcement or a heartbeat wakes it at once; with nothing
/// to read it wakes ten times a second.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(100);

/// One session's reader thread and the announcements it forwards.
#[derive(Debug)]
pub(crate) struct Listener {
    /// Announced breaker names. Disconnected once the thread has ended.
    pub(crate) names: Receiver<Vec<u8>>,
    /// Set by the thread when an announcement found the channel full.
    lost: Arc<AtomicBool>,
    /// Set when the session ends: the thread stops.
    stop: Arc<AtomicBool>,
    /// The number of the last heartbeat the thread read.
    heard: Arc<AtomicU64>,
    /// The number of the last heartbeat sent, and when; and of the one
    /// before it.
    sent: (u64, Instant),
    before: (u64, Instant),
    /// Since when the last heartbeat sent has been missing, if it is: the
    /// send time of the oldest one not back.
    late_since: Option<Instant>,
    /// The thread; it returns its connection's error, if that ended it.
    thread: Option<JoinHandle<Option<RedisError>>>,
}

impl Listener {
    /// Starts reading `sub`, a connection already subscribed to the
    /// fleet's channel and to the agent's own, `heartbeat`.
    pub(crate) fn start(
        sub: Connection,
        heartbeat: &str,
        stats: Arc<Stats>,
    ) -> RedisResult<Listener> {
        sub.set_read_timeout(Some(STOP_POLL))?;
        let (tx, names) = crossbeam_channel::bounded(CAPACITY);
        let mut listener = Listener::with(names);
        let thread = {
            let reader = Reader {
                tx,
                lost: Arc::clone(&listener.lost),
                stop: Arc::clone(&listener.stop),
                heard: Arc::clone(&listener.heard),
                heartbeat: heartbeat.to_owned(),
                stats,
            };
            std::thread::Builder::new()
                .name("fusebox-pubsub".into())
                .spawn(move || reader.listen(sub))?
        };
        listener.thread = Some(thread);
        Ok(listener)
    }

    /// A listener of `names`, with no thread yet.
    fn with(names: Receiver<Vec<u8>>) -> Listener {
        Listener {
            names,
            lost: Arc::default(),
            stop: Arc::default(),
            heard: Arc::default(),
            sent: (0, Instant::now()),
            before: (0, Instant::now()),
            late_since: None,
            thread: None,
        }
    }

    /// The number of the next heartbeat, sent at `now`.
    pub(crate) fn beat(&mut self, now: Instant) -> u64 {
        self.before = self.sent;
        self.sent = (self.sent.0 + 1, now);
        self.sent.0
    }

    /// At a sweep, `now`: whether the heartbeat sent two sweeps ago came
    /// back. A late one means announcements may have been lost; one late
    /// for `timeout` means the connection delivers nothing, and the
    /// session ends.
    pub(crate) fn check(&mut self, now: Instant, timeout: Duration) -> Beat {
        let (sent, at) = self.before;
        if self.heard.load(Ordering::Relaxed) >= sent {
            self.late_since = None;
            return Beat::Back;
        }
        let since = *self.late_since.get_or_insert(at);
        if now.saturating_duration_since(since) >= timeout {
            Beat::Dead
        } else {
            Beat::Late
        }
    }

    /// Takes the announcements waiting now, calling `announced` with each
    /// name. An error once the thread has ended: its connection's.
    pub(crate) fn take(&mut self, mut announced: impl FnMut(&[u8])) -> RedisResult<()> {
        loop {
            match self.names.try_recv() {
                Ok(name) => announced(&name),
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => return Err(self.finish()),
            }
        }
    }

    /// Whether announcements were dropped (the channel was full) since the
    /// last call: then any breaker may have changed.
    pub(crate) fn lost(&self) -> bool {
        self.lost.swap(false, Ordering::Relaxed)
    }

    /// Stops the thread and waits for it; what ended it.
    fn finish(&mut self) -> RedisError {
        self.stop.store(true, Ordering::Relaxed);
        let ended = self.thread.take().map(JoinHandle::join);
        match ended {
            Some(Ok(Some(err))) => err,
            _ => RedisError::from((ErrorKind::Io, "the pub/sub connection closed")),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether the heartbeats come back ([`Listener::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beat {
    /// The last one sent came back (or none was sent yet).
    Back,
    /// The last one sent has not come back: announcements may be lost.
    Late,
    /// None has come back for the agent's timeout.
    Dead,
}

/// The thread's side of a [`Listener`].
struct Reader {
    tx: Sender<Vec<u8>>,
    lost: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    heard: Arc<AtomicU64>,
    /// The agent's own channel.
    heartbeat: String,
    stats: Arc<Stats>,
}

impl Reader {
    /// Forwards announcements, and records heartbeats, until the session
    /// stops or the connection fails (its error is returned).
    fn listen(self, mut sub: Connection) -> Option<RedisError> {
        let mut pubsub = sub.as_pubsub();
        while !self.stop.load(Ordering::Relaxed) {
            match pubsub.get_message() {
                Ok(msg) if msg.get_channel_name() == self.heartbeat => {
                    let n = std::str::from_utf8(msg.get_payload_bytes())
                        .ok()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    self.heard.fetch_max(n, Ordering::Relaxed);
                }
                Ok(msg) => {
                    Stats::add(&self.stats.messages);
                    if !forward(&self.tx, msg.get_payload_bytes(), &self.lost) {
                        return None;
                    }
                }
                Err(e) if e.is_timeout() => {}
                Err(e) => return Some(e),
            }
        }
        None
    }
}

/// Hands one announcement to the agent without waiting: when the channel
/// is full, it is dropped and `lost` is set (the agent, behind, then reads
/// every breaker). False once the agent is gone.
fn forward(tx: &Sender<Vec<u8>>, name: &[u8], lost: &AtomicBool) -> bool {
    match tx.try_send(name.to_vec()) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            lost.store(true, Ordering::Relaxed);
            true
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

#[cfg(test)]
impl Listener {
    /// A listener without a thread: the test announces through the sender,
    /// and ends the "thread" by dropping it.
    pub(crate) fn detached() -> (Sender<Vec<u8>>, Listener) {
        let (tx, names) = crossbeam_channel::bounded(CAPACITY);
        (tx, Listener::with(names))
    }

    /// As the thread does when it reads heartbeat `n`.
    pub(crate) fn hear(&self, n: u64) {
        self.heard.fetch_max(n, Ordering::Relaxed);
    }

    /// As the thread does when the channel is full.
    pub(crate) fn lose_one(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_missing_two_sweeps_on_is_late_and_by_the_timeout_dead() {
        let (_tx, mut l) = Listener::detached();
        let t0 = Instant::now();
        let sweep = Duration::from_millis(250);
        let timeout = Duration::from_secs(1);
        let at = |n: u32| t0 + sweep * n;
        assert_eq!(l.check(at(0), timeout), Beat::Back, "none sent yet");
        let first = l.beat(at(0));
        l.hear(first);
        assert_eq!(l.check(at(1), timeout), Beat::Back);
        let second = l.beat(at(1));
        // A sweep later it may still be on its way.
        assert_eq!(l.check(at(2), timeout), Beat::Back);
        l.beat(at(2));
        assert_eq!(l.check(at(3), timeout), Beat::Late);
        l.beat(at(3));
        assert_eq!(l.check(at(4), timeout), Beat::Late);
        // Late since the first one missing was sent.
        assert_eq!(l.check(at(1) + timeout, timeout), Beat::Dead);
        // One heard late still proves the older ones came back.
        l.hear(second + 1);
        assert_eq!(l.check(at(1) + timeout, timeout), Beat::Back);
    }

    #[test]
    fn an_announcement_that_finds_the_channel_full_is_dropped_and_counted_as_lost() {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let lost = AtomicBool::new(false);
        assert!(forward(&tx, b"fx", &lost));
        assert!(!lost.load(Ordering::Relaxed));
        assert!(forward(&tx, b"rates", &lost));
        assert!(lost.load(Ordering::Relaxed));
        assert_eq!(rx.try_recv().unwrap(), b"fx");
        assert!(rx.try_recv().is_err());
        drop(rx);
        assert!(!forward(&tx, b"fx", &lost), "the agent is gone");
    }
}
