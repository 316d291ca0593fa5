//! The agent: one thread that talks to Redis for every fleet breaker of a
//! [`Fleet`](crate::fleet::Fleet), so that no trading thread ever does.
//!
//! Each tick it turns the breakers' local changes (read from their
//! subscriptions) into script calls, adds a read for each breaker whose
//! change was announced or whose read is due at a set time (an open
//! period's or a lease's end), sends them all in one pipeline, and applies
//! the answers to the local breakers. It wakes at once when a breaker joins,
//! when a joined breaker changes state (its subscription receives the
//! change), or when an announcement arrives (forwarded by the session's
//! pub/sub reader thread, [`listener`]); otherwise it sleeps until the
//! next thing due, and at least every `refresh` it sweeps: it publishes a
//! heartbeat on its own channel, reads every breaker if the last one did
//! not come back, and renews the presence of the breakers whose renewal is
//! due. So an idle agent costs a round trip per sweep and a renewal per
//! breaker every quarter of `presence`, whatever else it serves.

mod listener;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Select, TryRecvError};
use redis::{FromRedisValue, RedisError, RedisResult, Value};

use crate::fleet::link::Link;
use crate::fleet::member::{Held, Member, Op};
use crate::fleet::scripts::{Keys, View};
use crate::fleet::snapshot::Stats;
use crate::fleet::url::RedisUrl;
use crate::fleet::{FailureWindow, Settings};
use listener::{Beat, Listener};

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
        // No deadline: each wait is bounded by the timeout (a Cluster's
        // round trip may make several, see `FleetBuilder::timeout`).
        let mut con = s.topology.connect(s.timeout, None)?;
        let shas = con.load_scripts()?;
        let mut sub = s.topology.pubsub(&con, s.timeout)?;
        // SUBSCRIBE as a command, so that a refusal (an ACL user without
        // the channels, `NOPERM`) is an error here: `PubSub::subscribe`
        // ignores the server's answer, and the agent would run without
        // announcements. The second channel's confirmation is left for the
        // reader, which skips it.
        redis::cmd("SUBSCRIBE")
            .arg(&s.channel)
            .arg(&s.heartbeat)
            .query::<Value>(&mut sub)?;
        // Stopped and joined when this session ends, however it ends.
        let mut listener = Listener::start(sub, &s.heartbeat, Arc::clone(&self.stats))?;

        self.drop_gone();
        self.unsettled_until = Instant::now() + s.presence;
        for m in &mut self.members {
            if let Some(b) = m.breaker() {
                m.resync(&b);
            }
        }
        let mut next_sweep = Instant::now();
        loop {
            if !self.take_control() {
                return Ok(());
            }
            let now = Instant::now();
            let sweep = now >= next_sweep;
            if sweep {
                match listener.check(now, s.timeout) {
                    Beat::Back => {}
                    Beat::Late => self.catch_up(),
                    Beat::Dead => return Err(no_heartbeat()),
                }
            }
            let beat = sweep.then(|| {
                next_sweep = now + s.refresh;
                listener.beat(now)
            });
            self.tick(&mut con, &shas, now, beat)?;
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
            let due = self.members.iter().filter_map(|m| m.due(s)).min();
            // Timed work gathers into one round trip a tick at most: a
            // thousand open periods that end within a tick cost one wake.
            let deadline = due.map_or(next_sweep, |d| d.max(now + s.tick).min(next_sweep));
            self.wait(&mut listener, deadline)?;
        }
    }

    /// Announcements may have been lost: every breaker is read at the next
    /// tick.
    fn catch_up(&mut self) {
        Stats::add(&self.stats.catch_ups);
        self.members.iter_mut().for_each(Member::sync_now);
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
            self.catch_up();
        }
        Ok(())
    }

    /// One round trip: the last writes of breakers that left, then every
    /// breaker's writes and due reads, pipelined; at a sweep (with its
    /// heartbeat's number, `beat`), the presence renewals and keep-alive
    /// reads that are due too, and the heartbeat last.
    fn tick(
        &mut self,
        con: &mut Link,
        shas: &[String],
        now: Instant,
        beat: Option<u64>,
    ) -> RedisResult<()> {
        let sweep = beat.is_some();
        self.drop_gone();
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
            if sweep {
                m.sweep(now, s);
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
        let heartbeat = beat.map(|n| {
            let mut cmd = redis::cmd("PUBLISH");
            cmd.arg(&s.heartbeat).arg(n);
            cmd
        });
        if sent.is_empty() && heartbeat.is_none() {
            return Ok(());
        }
        // A cluster pipeline takes no PUBLISH: the heartbeat goes alone, to
        // any node (a publication reaches every node).
        let alone = match heartbeat {
            Some(cmd) if con.is_cluster() => Some(cmd),
            Some(cmd) => {
                pipe.push(cmd);
                None
            }
            None => None,
        };
        if !pipe.is_empty() {
            Stats::add(&self.stats.round_trips);
            let mut answers: Vec<Value> = con.pipeline(pipe)?;
            // The heartbeat's answer, if it was sent, is the last one.
            answers.truncate(sent.len());
            self.answer(&sent, answers, now)?;
        }
        if let Some(cmd) = alone {
            Stats::add(&self.stats.round_trips);
            con.query::<Value>(&cmd)?;
        }
        Ok(())
    }

    /// Applies the `answers` to what was `sent` at `now`, in order.
    fn answer(
        &mut self,
        sent: &[(Option<usize>, Op)],
        answers: Vec<Value>,
        now: Instant,
    ) -> RedisResult<()> {
        let s = &self.settings;
        for ((i, op), answer) in sent.iter().zip(answers) {
            let Some(m) = i.map(|i| &mut self.members[i]) else {
                continue;
            };
            if let Op::Renew { .. } = op {
                m.renewal(i64::from_redis_value(answer)? == 1, now);
                continue;
            }
            let view = View::from_redis_value(answer)?;
            if let Some(b) = m.breaker() {
                m.apply(&b, op, &view, &s.agent, s, &self.stats);
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

    /// Waits `wait` without Redis, taking in breakers, then drops the
    /// changes there is nobody to tell (the next session reads each
    /// breaker afresh). False once the handle is gone.
    fn idle(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            match self.control.recv_deadline(deadline) {
                Ok(c) => self.handle(c),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
        self.drop_gone();
        // Nobody to tell: their presence ends by itself.
        self.leaving.clear();
        for m in &mut self.members {
            if let Some(b) = m.breaker() {
                m.forget_changes(&b);
            }
        }
        true
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
    let Some(script) = op.script() else {
        let mut cmd = redis::cmd("ZADD");
        if let Op::Renew { score } = op {
            cmd.arg(&keys.members)
                .arg("XX")
                .arg("CH")
                .arg(score)
                .arg(&s.agent);
        }
        return cmd;
    };
    let mut cmd = keys.eval("EVALSHA", &shas[script as usize]);
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
                .arg(u8::from(*judge))
                .arg(s.idle_expiry.as_millis() as u64);
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
        Op::Renew { .. } => {}
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

/// The pub/sub connection delivered no heartbeat for the agent's timeout:
/// the session ends, as for a connection that failed.
fn no_heartbeat() -> RedisError {
    RedisError::from(std::io::Error::other(
        "no heartbeat came back over the pub/sub connection within the timeout",
    ))
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
            let mut m = Member::new(&b, b.subscribe(16).unwrap(), &agent.settings);
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
