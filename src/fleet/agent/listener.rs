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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use redis::{Connection, ErrorKind, RedisError, RedisResult};

use crate::fleet::snapshot::Stats;

/// How many announcements wait for the agent. Beyond that the newest are
/// dropped, and the agent reads every breaker instead (see [`Listener::lost`]).
pub(crate) const CAPACITY: usize = 1024;

/// The reader's socket read timeout: how long it takes at most to see that
/// the session ended (rounded up to kernel ticks), and so what a `Fleet`'s
/// drop waits for it; twice that with Redis hung, as it unsubscribes on its
/// way out.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(10);

/// One session's reader thread and the announcements it forwards.
#[derive(Debug)]
pub(crate) struct Listener {
    /// Announced breaker names. Disconnected once the thread has ended.
    pub(crate) names: Receiver<Vec<u8>>,
    /// Set by the thread when an announcement found the channel full.
    lost: Arc<AtomicBool>,
    /// Set when the session ends: the thread stops.
    stop: Arc<AtomicBool>,
    /// The thread; it returns its connection's error, if that ended it.
    thread: Option<JoinHandle<Option<RedisError>>>,
}

impl Listener {
    /// Starts reading `sub`, a connection already subscribed to the
    /// fleet's channel.
    pub(crate) fn start(sub: Connection, stats: Arc<Stats>) -> RedisResult<Listener> {
        sub.set_read_timeout(Some(STOP_POLL))?;
        let (tx, names) = crossbeam_channel::bounded(CAPACITY);
        let lost = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (lost, stop) = (Arc::clone(&lost), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("fusebox-pubsub".into())
                .spawn(move || listen(sub, &tx, &lost, &stop, &stats))?
        };
        Ok(Listener {
            names,
            lost,
            stop,
            thread: Some(thread),
        })
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

/// The thread: forwards announcements until the session stops or the
/// connection fails (its error is returned).
fn listen(
    mut sub: Connection,
    tx: &Sender<Vec<u8>>,
    lost: &AtomicBool,
    stop: &AtomicBool,
    stats: &Stats,
) -> Option<RedisError> {
    let mut pubsub = sub.as_pubsub();
    while !stop.load(Ordering::Relaxed) {
        match pubsub.get_message() {
            Ok(msg) => {
                Stats::add(&stats.messages);
                if !forward(tx, msg.get_payload_bytes(), lost) {
                    return None;
                }
            }
            Err(e) if e.is_timeout() => {}
            Err(e) => return Some(e),
        }
    }
    None
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
        let listener = Listener {
            names,
            lost: Arc::default(),
            stop: Arc::default(),
            thread: None,
        };
        (tx, listener)
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
