//! The agent: one thread that talks to Redis for every fleet breaker of a
//! [`Fleet`](crate::fleet::Fleet), so that no trading thread ever does.
//!
//! Each tick it turns the breakers' local changes (read from their
//! subscriptions) into script calls, adds a read for each breaker whose
//! refresh is due or whose change was announced, sends them all in one
//! pipeline, and applies the answers to the local breakers. Between ticks
//! it waits for at most one tick, and wakes at once when a breaker joins,
//! when a joined breaker changes state (its subscription receives the
//! change), or when an announcement arrives (forwarded by the session's
//! pub/sub reader thread, [`listener`]).

mod listener;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Select, TryRecvError};
use redis::{RedisError, RedisResult};

use crate::fleet::link::Link;
use crate::fleet::member::{Held, Member, Op};
use crate::fleet::scripts::{Keys, View};
use crate::fleet::snapshot::Stats;
use crate::fleet::url::RedisUrl;
use crate::fleet::{FailureWindow, Settings};
use listener::Listener;

/// What the handle sends the agent.
#[derive(Debug)]
pub(crate) enum Control {
    /// A breaker joined; it replaces one of its name the agent still has
    /// (dropped, or left).
    Join(Box<Member>),
    /// The breaker of this name, and this one only, leaves.
    Leave(String, Held),
}

#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) settings: Arc<Settings>,
    pub(crate) control: Receiver<Control>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) members: Vec<Member>,
    /// Member index by breaker name, for announcements.
    pub(crate) by_name: HashMap<String, usize>,
    /// The last writes of breakers the agent no longer serves (`LEAVE`),
    /// sent with the next round trip; dropped if there is no Redis to
    /// tell (their presence then ends by itself).
    pub(crate) leaving: Vec<(Keys, String, Op)>,
    /// Until when this session's trips are only recorded, not judged:
    /// `presence` after it started, time for every member to renew its
    /// presence (after a Redis restarted empty, or a fleet's start, the
    /// members key is rebuilt by their reads).
    pub(crate) unsettled_until: Instant,
}

/// Why a session with Redis ended.
enum Ended {
    /// The fleet handle was dropped.
    Stop,
    /// Redis failed; whether the session had been established first.
    Lost(RedisError, bool),
}

impl Agent {
    pub(crate) fn run(mut self) {
        let s = Arc::clone(&self.settings);
        let mut backoff = s.reconnect_min;
        let mut outage: Option<Instant> = None;
        loop {
            match self.session(&mut outage) {
                Ended::Stop => return,
                Ended::Lost(err, established) => {
                    self.stats.connected.store(false, Ordering::Relaxed);
                    Stats::add(&self.stats.errors);
                    if established {
                        backoff = s.reconnect_min;
                    }
                    if outage.is_none() {
                        outage = Some(Instant::now());
                        Stats::add(&self.stats.outages);
                        log::warn!(
                            "fleet `{}`: Redis at {} unavailable ({}); breakers run on local state until it returns",
                            s.prefix,
                            s.redis,
                            describe(&err, &s.redis)
                        );
                    }
                }
            }
            if !self.idle(backoff) {
                return;
            }
            backoff = (backoff * 2).min(s.reconnect_max);
        }
    }

    fn session(&mut self, outage: &mut Option<Instant>) -> Ended {
        let s = Arc::clone(&self.settings);
        let mut established = false;
        match self.connected(&s, outage, &mut established) {
            Ok(()) => Ended::Stop,
            Err(err) => Ended::Lost(err, established),
        }
    }

    fn connected(
        &mut self,
        s: &Settings,
        outage: &mut Option<Instant>,
        established: &mut bool,
    ) -> RedisResult<()> {
        let mut con = s.topology.connect(s.timeout)?;
        let shas = con.load_scripts()?;
        let mut sub = s.topology.pubsub(&con, s.timeout)?;
        // SUBSCRIBE as a command, so that a refusal (an ACL user without
        // the channel, `NOPERM`) is an error here: `PubSub::subscribe`
        // ignores the server's answer, and the agent would run without
        // announcements.
        redis::cmd("SUBSCRIBE")
            .arg(&s.channel)
            .query::<redis::Value>(&mut sub)?;
        // Stopped and joined when this session ends, however it ends.
        let mut listener = Listener::start(sub, Arc::clone(&self.stats))?;

        self.drop_gone();
        self.unsettled_until = Instant::now() + s.presence;
        for m in &mut self.members {
            if let Some(b) = m.breaker() {
                m.resync(&b);
            }
        }
        loop {
            if !self.take_control() {
                return Ok(());
            }
            self.tick(&mut con, &shas)?;
            if !*established {
                // Redis is back once it has answered a whole tick (the
                // first reads every breaker and writes its own trips): a
                // server that accepts connections but refuses the scripts
                // (`NOPERM`, `OOM`) stays one outage, with one log line.
                *established = true;
                self.stats.connected.store(true, Ordering::Relaxed);
                if let Some(since) = outage.take() {
                    log::info!(
                        "fleet `{}`: Redis reachable again after {}; breakers follow the fleet",
                        s.prefix,
                        crate::duration::display(since.elapsed())
                    );
                }
            }
            self.wait(&mut listener, Instant::now() + s.tick)?;
        }
    }

    /// Waits until `deadline`, or less: until a breaker joins or the handle
    /// is dropped, a joined breaker changes state, or an announcement
    /// arrives. Marks the announced breakers (every breaker, if some
    /// announcements were lost) for a read. An error when the pub/sub
    /// connection failed.
    fn wait(&mut self, listener: &mut Listener, deadline: Instant) -> RedisResult<()> {
        {
            let mut select = Select::new();
            select.recv(&self.control);
            select.recv(&listener.names);
            for m in &self.members {
                select.recv(m.changes());
            }
            // Whatever is ready is taken by the next tick: the control
            // messages by `take_control`, the changes by `Member::collect`,
            // the announcements below.
            let _ = select.ready_deadline(deadline);
        }
        let (members, by_name) = (&mut self.members, &self.by_name);
        listener.take(|name| {
            if let Some(&i) = std::str::from_utf8(name)
                .ok()
                .and_then(|name| by_name.get(name))
            {
                members[i].sync_now();
            }
        })?;
        if listener.lost() {
            self.members.iter_mut().for_each(Member::sync_now);
        }
        Ok(())
    }

    /// One round trip: the last writes of breakers that left, then every
    /// breaker's writes and due reads, pipelined.
    fn tick(&mut self, con: &mut Link, shas: &[String]) -> RedisResult<()> {
        self.drop_gone();
        let now = Instant::now();
        let s = &self.settings;
        // Any member's trip opens a fleet whose quorum is one member and
        // no share: the count of members does not matter to it.
        let settled = s.quorum.counts_any() || now >= self.unsettled_until;
        let mut pipe = Vec::new();
        // Which member each command is for (`None`: one that left).
        let mut sent: Vec<(Option<usize>, Op)> = Vec::new();
        for (keys, name, op) in self.leaving.drain(..) {
            pipe.push(command(s, shas, &keys, name.as_str(), &op, false));
            sent.push((None, op));
        }
        for (i, m) in self.members.iter_mut().enumerate() {
            let Some(b) = m.breaker() else { continue };
            m.collect(&b, now, s, &self.stats);
            if settled {
                m.judge_again(&b);
            }
            // Asked only of a breaker about to be read.
            let want = m.read && m.wants_lease(&b);
            for mut op in m.round() {
                if matches!(op, Op::Window { .. }) && s.window.is_none() {
                    // Queued only by a fleet with a window.
                    continue;
                }
                if let Op::Trip { judge, .. } = &mut op {
                    *judge = settled;
                }
                pipe.push(command(s, shas, &m.keys, m.name(), &op, want));
                sent.push((Some(i), op));
            }
        }
        if sent.is_empty() {
            return Ok(());
        }
        Stats::add(&self.stats.round_trips);
        let views: Vec<View> = con.pipeline(pipe)?;
        for ((i, op), view) in sent.iter().zip(&views) {
            let Some(m) = i.map(|i| &mut self.members[i]) else {
                continue;
            };
            if let Some(b) = m.breaker() {
                m.apply(&b, op, view, &s.agent, s, &self.stats);
            }
        }
        Ok(())
    }

    /// Stops serving the breakers whose every handle is gone: their last
    /// write is queued for the next round trip.
    fn drop_gone(&mut self) {
        let mut i = 0;
        while i < self.members.len() {
            if self.members[i].dropped() {
                self.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Stops serving member `i`, queueing its last write (`LEAVE`).
    fn remove(&mut self, i: usize) {
        let m = self.members.swap_remove(i);
        self.by_name.remove(m.name());
        self.stats.forget(m.name());
        if let Some(moved) = self.members.get(i) {
            self.by_name.insert(moved.name().to_owned(), i);
        }
        self.stats
            .breakers
            .store(self.members.len(), Ordering::Relaxed);
        let (op, name) = (m.leave(), m.name().to_owned());
        self.leaving.push((m.keys, name, op));
    }

    /// Takes in breakers that joined. False once the handle is gone.
    fn take_control(&mut self) -> bool {
        loop {
            match self.control.try_recv() {
                Ok(c) => self.handle(c),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
    }

    fn handle(&mut self, c: Control) {
        match c {
            Control::Join(m) => {
                if let Some(&old) = self.by_name.get(m.name()) {
                    // A breaker of this name the handle has seen dropped.
                    self.remove(old);
                }
                self.by_name.insert(m.name().to_owned(), self.members.len());
                self.members.push(*m);
                self.stats
                    .breakers
                    .store(self.members.len(), Ordering::Relaxed);
            }
            Control::Leave(name, breaker) => {
                if let Some(&i) = self.by_name.get(&name) {
                    if self.members[i].serves(&breaker) {
                        self.remove(i);
                    }
                }
            }
        }
    }

    /// Waits `wait` without Redis, taking in breakers and dropping the
    /// changes there is nobody to tell (the next session reads each
    /// breaker afresh). False once the handle is gone.
    fn idle(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            self.drop_gone();
            // Nobody to tell: their presence ends by itself.
            self.leaving.clear();
            for m in &mut self.members {
                if let Some(b) = m.breaker() {
                    m.forget_changes(&b);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match self.control.recv_timeout(left.min(self.settings.tick)) {
                Ok(c) => self.handle(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }
}

/// The `EVALSHA` of `op` on a breaker's keys; `want` is a read's wish for
/// the probe lease.
fn command(
    s: &Settings,
    shas: &[String],
    keys: &Keys,
    name: &str,
    op: &Op,
    want: bool,
) -> redis::Cmd {
    let mut cmd = keys.eval("EVALSHA", &shas[op.script() as usize]);
    match op {
        Op::Trip {
            open_ms,
            step,
            judge,
        } => {
            let q = &s.quorum;
            cmd.arg(open_ms)
                .arg(step)
                .arg(&s.channel)
                .arg(name)
                .arg(&s.agent)
                .arg(q.min_members)
                .arg(q.ratio_ppm)
                .arg(q.window_ms)
                .arg(s.presence.as_millis() as u64)
                .arg(u8::from(*judge));
        }
        Op::Recover => {
            cmd.arg(&s.agent);
        }
        Op::Reopen {
            token,
            open_ms,
            step,
        } => {
            cmd.arg(token)
                .arg(open_ms)
                .arg(step)
                .arg(&s.channel)
                .arg(name);
        }
        Op::Close { token } | Op::Return { token } => {
            cmd.arg(token).arg(&s.channel).arg(name);
        }
        Op::Leave { token } => {
            cmd.arg(&s.agent).arg(token).arg(&s.channel).arg(name);
        }
        Op::Sync => {
            cmd.arg(&s.agent)
                .arg(s.lease.as_millis() as u64)
                .arg(u8::from(want))
                .arg(s.presence.as_millis() as u64)
                .arg(s.idle_expiry.as_millis() as u64);
        }
        Op::Window { failures, open_ms } => {
            if let Some(w) = &s.window {
                cmd.arg(failures)
                    .arg(w.bucket_ms)
                    .arg(FailureWindow::BUCKETS)
                    .arg(w.threshold)
                    .arg(open_ms)
                    .arg(&s.channel)
                    .arg(name);
            }
        }
    }
    cmd
}

/// The longest error text a log line carries (a pipeline's error lists
/// every failed command).
const DESCRIBE_MAX: usize = 240;

/// An error as a log line shows it: "timed out", or what the redis crate,
/// the OS, rustls or the server said (a refused password, a missing ACL
/// permission, a certificate the server did not accept). None of these
/// hold the URL; should one ever echo the password, [`RedisUrl::scrub`]
/// removes it.
fn describe(err: &RedisError, url: &RedisUrl) -> String {
    let text = if err.is_timeout() {
        "timed out".into()
    } else if err.is_io_error() || err.is_connection_dropped() {
        format!("connection failed: {err}")
    } else {
        err.to_string()
    };
    let mut text = url.scrub(text);
    if text.len() > DESCRIBE_MAX {
        let mut end = DESCRIBE_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::member::tests::{settings, vendor};
    use crate::fleet::scripts::Action;
    use crate::Breaker;
    use redis::ErrorKind;

    /// An agent with breakers `names`, each read a moment ago (its next
    /// read due in an hour), and the handle's end of its control channel.
    /// The breakers are returned too: the agent does not keep them alive.
    #[allow(clippy::type_complexity)] // a test helper's three parts
    fn agent(names: &[&str]) -> (Agent, crossbeam_channel::Sender<Control>, Vec<Breaker>) {
        let (tx, control) = crossbeam_channel::unbounded();
        let mut settings = settings();
        settings.refresh = Duration::from_secs(3_600);
        let mut agent = Agent {
            settings: Arc::new(settings),
            control,
            stats: Arc::default(),
            members: Vec::new(),
            by_name: HashMap::new(),
            leaving: Vec::new(),
            unsettled_until: Instant::now(),
        };
        let closed = View {
            open: false,
            epoch: 1,
            open_until: 0,
            now: 1_000,
            lease: String::new(),
            lease_ttl: -2,
            applied: false,
            step: 0,
            action: Action::default(),
            members: 1,
            tripped: 0,
            cause: Default::default(),
        };
        let mut held = Vec::new();
        for name in names {
            let b = vendor(name);
            let mut m = Member::new(&b, b.subscribe(16).unwrap(), "test", false);
            m.round();
            m.apply(&b, &Op::Sync, &closed, "x", &agent.settings, &agent.stats);
            agent.handle(Control::Join(Box::new(m)));
            held.push(b);
        }
        (agent, tx, held)
    }

    /// Which breakers the next tick reads.
    fn reads(agent: &mut Agent) -> Vec<String> {
        let now = Instant::now();
        let mut read = Vec::new();
        for m in &mut agent.members {
            let b = m.breaker().expect("the test holds its breakers");
            m.collect(&b, now, &agent.settings, &agent.stats);
            if m.round().contains(&Op::Sync) {
                read.push(m.name().to_owned());
            }
        }
        read
    }

    #[test]
    fn an_announcement_marks_its_breaker_for_a_read() {
        let (mut agent, _handle, _breakers) = agent(&["fx", "rates"]);
        let (announce, mut listener) = Listener::detached();
        assert_eq!(reads(&mut agent), Vec::<String>::new());
        announce.send(b"rates".to_vec()).unwrap();
        announce.send(b"not-joined".to_vec()).unwrap();
        agent
            .wait(&mut listener, Instant::now() + Duration::from_secs(60))
            .unwrap();
        assert_eq!(reads(&mut agent), ["rates"]);
    }

    #[test]
    fn lost_announcements_mark_every_breaker_for_a_read() {
        let (mut agent, _handle, _breakers) = agent(&["fx", "rates"]);
        let (_announce, mut listener) = Listener::detached();
        listener.lose_one();
        agent.wait(&mut listener, Instant::now()).unwrap();
        assert_eq!(reads(&mut agent), ["fx", "rates"]);
    }

    #[test]
    fn a_local_change_or_a_dropped_handle_ends_the_wait_at_once() {
        let (mut agent, handle, breakers) = agent(&["fx"]);
        let (_announce, mut listener) = Listener::detached();
        let (done, finished) = crossbeam_channel::bounded(1);
        // Each wait is for an hour unless something ends it.
        let waiter = std::thread::spawn(move || {
            let in_an_hour = || Instant::now() + Duration::from_secs(3_600);
            breakers[0].force_open("ops", "test");
            agent.wait(&mut listener, in_an_hour()).unwrap();
            reads(&mut agent); // takes the change in
            drop(handle);
            agent.wait(&mut listener, in_an_hour()).unwrap();
            done.send(agent.take_control()).unwrap();
        });
        let running = finished
            .recv_timeout(Duration::from_secs(10))
            .expect("both waits ended");
        assert!(!running, "the agent stops");
        waiter.join().unwrap();
    }

    #[test]
    fn a_pub_sub_reader_that_ended_ends_the_session() {
        let (mut agent, _handle, _breakers) = agent(&["fx"]);
        let (announce, mut listener) = Listener::detached();
        announce.send(b"fx".to_vec()).unwrap();
        drop(announce);
        assert!(agent.wait(&mut listener, Instant::now()).is_err());
        assert_eq!(reads(&mut agent), ["fx"], "what came first is taken");
    }

    #[test]
    fn an_error_that_echoes_the_password_is_logged_without_it() {
        let url = RedisUrl::new("rediss://fleet:s3cret-pw@127.0.0.1:6380/".into());
        for err in [
            RedisError::from((
                ErrorKind::Io,
                "connect",
                "to fleet:s3cret-pw@host".to_owned(),
            )),
            RedisError::from((ErrorKind::Client, "AUTH", "AUTH fleet s3cret-pw".to_owned())),
            RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Password authentication failed",
            )),
        ] {
            let line = describe(&err, &url);
            assert!(!line.contains("s3cret-pw"), "{line}");
            assert!(!line.is_empty());
        }
    }

    #[test]
    fn a_long_error_is_cut_on_a_character_boundary() {
        let url = RedisUrl::new("redis://127.0.0.1/".into());
        let err = RedisError::from((ErrorKind::Client, "long", "é".repeat(400)));
        let line = describe(&err, &url);
        assert!(line.len() <= DESCRIBE_MAX + 3, "{}", line.len());
        assert!(line.ends_with("..."));
    }
}
