//! The agent: one thread that talks to Redis for every fleet breaker of a
//! [`Fleet`](crate::fleet::Fleet), so that no trading thread ever does.
//!
//! Each tick it turns the breakers' local changes (read from their
//! subscriptions) into script calls, adds a read for each breaker whose
//! refresh is due or whose change was announced, sends them all in one
//! pipeline, and applies the answers to the local breakers. Between ticks
//! it waits on the pub/sub connection for at most one tick.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use redis::{Connection, RedisError, RedisResult};

use crate::fleet::member::{Member, Op};
use crate::fleet::scripts::{self, View};
use crate::fleet::snapshot::Stats;
use crate::fleet::Settings;
use crate::State;

/// What the handle sends the agent.
#[derive(Debug)]
pub(crate) enum Control {
    Join(Box<Member>),
}

#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) settings: Arc<Settings>,
    pub(crate) control: Receiver<Control>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) members: Vec<Member>,
    /// Member index by breaker name, for announcements.
    pub(crate) by_name: HashMap<String, usize>,
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
                            "fleet `{}`: Redis unavailable ({}); breakers run on local state until it returns",
                            s.prefix,
                            describe(&err)
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
        let mut con = s.client.get_connection_with_timeout(s.timeout)?;
        con.set_read_timeout(Some(s.timeout))?;
        con.set_write_timeout(Some(s.timeout))?;
        let shas = scripts::load(&mut con)?;
        let mut sub = s.client.get_connection_with_timeout(s.timeout)?;
        sub.set_read_timeout(Some(s.timeout))?;
        sub.set_write_timeout(Some(s.timeout))?;
        let mut pubsub = sub.as_pubsub();
        pubsub.subscribe(&s.channel)?;
        pubsub.set_read_timeout(Some(s.tick))?;

        *established = true;
        self.stats.connected.store(true, Ordering::Relaxed);
        if let Some(since) = outage.take() {
            log::info!(
                "fleet `{}`: Redis reachable again after {:.1} s; breakers follow the fleet",
                s.prefix,
                since.elapsed().as_secs_f64()
            );
        }
        self.members.iter_mut().for_each(Member::resync);
        loop {
            if !self.take_control() {
                return Ok(());
            }
            self.tick(&mut con, &shas)?;
            match pubsub.get_message() {
                Ok(msg) => {
                    Stats::add(&self.stats.messages);
                    if let Some(&i) = std::str::from_utf8(msg.get_payload_bytes())
                        .ok()
                        .and_then(|name| self.by_name.get(name))
                    {
                        self.members[i].sync_now();
                    }
                }
                Err(e) if e.is_timeout() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// One round trip: every breaker's writes and due reads, pipelined.
    fn tick(&mut self, con: &mut Connection, shas: &[String]) -> RedisResult<()> {
        let now = Instant::now();
        let s = &self.settings;
        let mut pipe = redis::pipe();
        let mut sent: Vec<(usize, Op)> = Vec::new();
        for (i, m) in self.members.iter_mut().enumerate() {
            m.collect(now);
            for op in m.ops.drain(..) {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(&shas[op.script() as usize])
                    .arg(3)
                    .arg(&m.keys.state)
                    .arg(&m.keys.lease)
                    .arg(&m.keys.audit);
                match &op {
                    Op::Trip { open_ms, step } => {
                        cmd.arg(open_ms)
                            .arg(step)
                            .arg(&s.channel)
                            .arg(m.breaker.name());
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
                            .arg(m.breaker.name());
                    }
                    Op::Close { token } => {
                        cmd.arg(token).arg(&s.channel).arg(m.breaker.name());
                    }
                    Op::Sync => {
                        // A breaker with a probe out (or let probe) takes
                        // no other lease.
                        let want = m.breaker.state() != State::HalfOpen;
                        cmd.arg(&s.agent)
                            .arg(s.lease.as_millis() as u64)
                            .arg(u8::from(want));
                    }
                }
                pipe.add_command(cmd);
                sent.push((i, op));
            }
        }
        if sent.is_empty() {
            return Ok(());
        }
        let views: Vec<View> = pipe.query(con)?;
        for ((i, op), view) in sent.iter().zip(&views) {
            self.members[*i].apply(op, view, &s.agent, s, &self.stats);
        }
        Ok(())
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
                self.by_name
                    .insert(m.breaker.name().to_owned(), self.members.len());
                self.members.push(*m);
                self.stats
                    .breakers
                    .store(self.members.len(), Ordering::Relaxed);
            }
        }
    }

    /// Waits `wait` without Redis, taking in breakers and dropping the
    /// changes there is nobody to tell (the next session reads each
    /// breaker afresh). False once the handle is gone.
    fn idle(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            self.members.iter_mut().for_each(Member::forget_changes);
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

/// An error as a log line shows it: its kind and, for I/O, the OS's words.
/// Never the URL (which may hold a password).
fn describe(err: &RedisError) -> String {
    if err.is_timeout() {
        "timed out".into()
    } else if err.is_io_error() || err.is_connection_dropped() {
        format!("connection failed: {err}")
    } else {
        format!("{:?}", err.kind())
    }
}
