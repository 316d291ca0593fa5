//! The operators' side of fleet mode: read the state of a fleet's breakers,
//! override them in every process at once, watch their changes and read
//! the audit stream. `fusebox-ctl` is a thin shell over this; tests use it
//! too.
//!
//! An override is written to Redis with one atomic script (one round trip)
//! that records it in the breaker's hash, appends it to the breaker's audit
//! stream and announces it on the fleet's channel; every process's agent
//! then applies it to its local breaker (`docs/fleet.md`, "Overrides and
//! fusebox-ctl"). Times are the Redis server's.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, TrySendError};
use redis::{Connection, RedisError};

use crate::fleet::link::{Link, Topology};

use crate::fleet::scripts::{self, ActionKind, Cause, Keys, Script, View};
use crate::fleet::url::RedisUrl;
use crate::{ConfigError, State};

/// The longest actor accepted, in bytes.
pub(crate) const MAX_ACTOR_LEN: usize = 64;
/// The longest reason accepted, in bytes.
pub(crate) const MAX_REASON_LEN: usize = 512;
/// The longest override expiry accepted: a year.
pub(crate) const MAX_OVERRIDE: Duration = Duration::from_secs(365 * 24 * 3600);

/// What went wrong talking to a fleet. No variant ever holds the Redis URL
/// (which may hold a password).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetAdminError {
    /// A bad argument: a breaker name against the crate's rules, an actor
    /// or reason empty, too long or with control characters, a bad prefix,
    /// timeout, expiry or count. Nothing was sent.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// The URL is not one the redis crate accepts.
    #[error("the Redis URL is not a valid redis:// URL (not shown: it may hold a password)")]
    Url,
    /// Redis could not be reached, or did not answer within the timeout.
    #[error("Redis unavailable: {0}")]
    Unavailable(String),
    /// Redis answered with an error.
    #[error("Redis refused the command: {0}")]
    Redis(String),
    /// Redis answered something this version does not understand (keys
    /// written by another program under the prefix?).
    #[error("unexpected answer from Redis: {0}")]
    Answer(String),
    /// An override of a breaker that no process has written under the
    /// prefix (a typo?), and the admin does not
    /// [create](FleetAdmin::create_unknown) one. Nothing was written.
    #[error(
        "no process has written a breaker `{0}` under this prefix (a typo?): nothing was written"
    )]
    Unknown(String),
    /// `forget` of a breaker that processes serve now, without `force`.
    /// Nothing was deleted.
    #[error("{members} process(es) serve breaker `{name}` now: nothing was deleted")]
    Served {
        /// The breaker's name.
        name: String,
        /// How many agents serve it.
        members: u64,
    },
}

impl FleetAdminError {
    /// The same error with the URL's password (should a text ever hold it)
    /// replaced by `***`.
    fn scrub(self, url: &RedisUrl) -> FleetAdminError {
        match self {
            FleetAdminError::Unavailable(t) => FleetAdminError::Unavailable(url.scrub(t)),
            FleetAdminError::Redis(t) => FleetAdminError::Redis(url.scrub(t)),
            FleetAdminError::Answer(t) => FleetAdminError::Answer(url.scrub(t)),
            other => other,
        }
    }
}

impl From<RedisError> for FleetAdminError {
    fn from(err: RedisError) -> FleetAdminError {
        if err.is_timeout() {
            FleetAdminError::Unavailable("timed out".into())
        } else if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            FleetAdminError::Unavailable(format!("connection failed: {err}"))
        } else if err.kind() == redis::ErrorKind::Parse {
            FleetAdminError::Answer(err.to_string())
        } else {
            FleetAdminError::Redis(err.to_string())
        }
    }
}

/// A breaker of the fleet as Redis holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerStatus {
    /// The breaker's name.
    pub name: String,
    /// The fleet's state: `Closed`, `Open` (in its cool-down), `HalfOpen`
    /// (the cool-down is over: a probe lease is to be taken or is out),
    /// `ForcedOpen` or `ForcedClosed` (an operator's override is in force).
    pub state: State,
    /// While the fleet's open period runs: how much of it is left.
    pub open_for: Option<Duration>,
    /// The period's number, raised by every trip, re-open, close and
    /// operator action.
    pub epoch: u64,
    /// The backoff step the last trip reported.
    pub step: u64,
    /// The probe lease, while one is out.
    pub lease: Option<ProbeLease>,
    /// The operator's override, while one is in force.
    pub forced: Option<FleetOverride>,
    /// How many agents serve the breaker now (each renews its presence at
    /// every read of it; see [`FleetBuilder::presence`]).
    ///
    /// [`FleetBuilder::presence`]: crate::fleet::FleetBuilder::presence
    pub members: u64,
    /// How many of those members have tripped the breaker locally within
    /// the quorum window while the fleet was closed (see
    /// [`FleetBuilder::min_members`]): each is open in its own process
    /// only, until a quorum opens the fleet. Zero once the fleet opens.
    ///
    /// [`FleetBuilder::min_members`]: crate::fleet::FleetBuilder::min_members
    pub tripped: u64,
    /// What holds the fleet open, while it is open (or forced open).
    pub opened_by: Option<OpenedBy>,
}

/// What opened a breaker in every process of the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    any(feature = "serde", feature = "admin"),
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum OpenedBy {
    /// A quorum of members tripped it locally
    /// ([`FleetBuilder::min_members`]), or a breaker that one process
    /// serves tripped.
    ///
    /// [`FleetBuilder::min_members`]: crate::fleet::FleetBuilder::min_members
    Quorum,
    /// The fleet's recent-failures window reached its threshold
    /// ([`FleetBuilder::failure_window`]).
    ///
    /// [`FleetBuilder::failure_window`]: crate::fleet::FleetBuilder::failure_window
    FailureWindow,
    /// An operator forced it open.
    Operator,
}

impl OpenedBy {
    /// What holds the fleet open in `view`, if anything: an operator's
    /// force-open, else what opened it (a view from before causes were
    /// recorded: a trip).
    pub(crate) fn of(view: &View) -> Option<OpenedBy> {
        match view.action.kind {
            ActionKind::Open => Some(OpenedBy::Operator),
            ActionKind::Closed => None,
            _ if !view.open => None,
            _ if view.cause == Cause::Window => Some(OpenedBy::FailureWindow),
            _ => Some(OpenedBy::Quorum),
        }
    }

    /// `quorum`, `failure_window` or `operator`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OpenedBy::Quorum => "quorum",
            OpenedBy::FailureWindow => "failure_window",
            OpenedBy::Operator => "operator",
        }
    }
}

/// `quorum`, `failure_window` or `operator`, as the metrics label it.
impl fmt::Display for OpenedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A probe lease that one process's agent holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProbeLease {
    /// The agent that holds it (`pid-n-salt`).
    pub holder: String,
    /// How long it lasts if the holder does not answer.
    pub expires_in: Duration,
}

/// An operator's override in force in the fleet, as [`BreakerStatus::forced`]
/// shows it (a registry's `Override` is the request that sets one on a
/// local breaker).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetOverride {
    /// `ForcedOpen` or `ForcedClosed`.
    pub state: State,
    /// Who set it.
    pub actor: String,
    /// Why.
    pub reason: String,
    /// Time left before it expires, or `None` for one until a reset.
    pub expires_in: Option<Duration>,
}

/// What an audit entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuditKind {
    /// `force-open`.
    ForceOpen,
    /// `force-closed`.
    ForceClosed,
    /// `reset`.
    Reset,
    /// An override reached its expiry (recorded by the first script to
    /// notice it: an agent's read or an operator's).
    Expired,
    /// `forget`: the breaker's keys were deleted (but this stream).
    Forget,
}

impl AuditKind {
    /// `force-open`, `force-closed`, `reset`, `expired` or `forget`.
    fn as_str(self) -> &'static str {
        match self {
            AuditKind::ForceOpen => "force-open",
            AuditKind::ForceClosed => "force-closed",
            AuditKind::Reset => "reset",
            AuditKind::Expired => "expired",
            AuditKind::Forget => "forget",
        }
    }

    fn parse(s: &str) -> Option<AuditKind> {
        match s {
            "open" => Some(AuditKind::ForceOpen),
            "closed" => Some(AuditKind::ForceClosed),
            "reset" => Some(AuditKind::Reset),
            "expired" => Some(AuditKind::Expired),
            "forget" => Some(AuditKind::Forget),
            _ => None,
        }
    }
}

/// `force-open`, `force-closed`, `reset`, `expired` or `forget`.
impl fmt::Display for AuditKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One entry of a breaker's audit stream (`{prefix:name}:audit`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditEntry {
    /// The breaker's name.
    pub name: String,
    /// The stream entry's id (`ms-seq`).
    pub id: String,
    /// When, on the Redis server's clock (microseconds).
    pub time: SystemTime,
    /// What happened.
    pub kind: AuditKind,
    /// Who (for an expiry: who set the override that expired).
    pub actor: String,
    /// Why.
    pub reason: String,
    /// The override's expiry on the server's clock, if it had one.
    pub expires: Option<SystemTime>,
}

/// A change of a fleet breaker seen by [`FleetWatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetTransition {
    /// The state the watch last saw the breaker in (`None` for a breaker
    /// it had not seen).
    pub from: Option<State>,
    /// The breaker after the change.
    pub status: BreakerStatus,
}

/// A connection to a fleet's Redis for operators: status, overrides, watch
/// and audit. Each call is one round trip (a listing, one per page of its
/// scan and one for the states).
pub struct FleetAdmin {
    topology: Arc<Topology>,
    /// The URL, only to scrub its password from error texts.
    url: RedisUrl,
    con: Link,
    prefix: String,
    channel: String,
    timeout: Duration,
    /// The expiry given to a state hash an override creates.
    idle_expiry: Duration,
    /// Whether an override may name a breaker no process has written.
    create: bool,
    /// When every call must have answered by, if set.
    deadline: Option<Instant>,
    /// Whether the connection failed: the next call connects afresh (to
    /// the new master, after a failover).
    broken: bool,
}

impl fmt::Debug for FleetAdmin {
    // The client is left out: its connection info may hold a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetAdmin")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl FleetAdmin {
    /// Connects with a client built from a checked URL and TLS settings.
    pub(crate) fn with_client(
        topology: Topology,
        url: RedisUrl,
        prefix: &str,
        timeout: Duration,
        idle_expiry: Duration,
    ) -> Result<Self, FleetAdminError> {
        super::check_prefix(prefix)?;
        if timeout.is_zero() {
            return Err(invalid("timeout", "must be above zero", "0s".into()));
        }
        let con = topology
            .connect(timeout, Some(Instant::now() + timeout))
            .map_err(|e| FleetAdminError::from(e).scrub(&url))?;
        Ok(FleetAdmin {
            topology: Arc::new(topology),
            url,
            con,
            prefix: prefix.to_owned(),
            channel: scripts::channel(prefix),
            timeout,
            idle_expiry,
            create: false,
            deadline: None,
            broken: false,
        })
    }

    /// Lets [`force_open`](Self::force_open),
    /// [`force_closed`](Self::force_closed) and [`reset`](Self::reset)
    /// write a breaker that no process has written under the prefix (one
    /// no agent has served within its idle expiry). Off by default: such a
    /// name is most likely a typo, and the override would reach nobody;
    /// they return [`FleetAdminError::Unknown`] and write nothing.
    pub fn create_unknown(&mut self, create: bool) -> &mut Self {
        self.create = create;
        self
    }

    /// Bounds every later call by `deadline` (`None`: each round trip by
    /// the timeout alone): each round trip, a connection it makes again
    /// included, is done within the timeout or the time left, whichever is
    /// shorter, or fails with [`FleetAdminError::Unavailable`] ("timed
    /// out"), and a call made after it fails at once. This holds whatever
    /// the Redis: a Cluster's call, which may reach several nodes in turn
    /// and retry, runs on the admin's connection thread
    /// (`fusebox-cluster`), and one not done in time is left to end there,
    /// its connection dropped (the next call connects afresh). A
    /// command-line tool sets it to its start plus its timeout, so that the
    /// timeout bounds the whole command, connection included.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) -> &mut Self {
        self.deadline = deadline;
        self
    }

    /// Before a round trip: it must be done (the connection's, if it
    /// connects again, included) within the timeout, or what is left before
    /// the deadline; an error once that has passed.
    fn arm(&mut self) -> Result<(), FleetAdminError> {
        let now = Instant::now();
        let wait = match self.deadline {
            None => self.timeout,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(now);
                if left.is_zero() {
                    return Err(FleetAdminError::Unavailable("timed out".into()));
                }
                left.min(self.timeout)
            }
        };
        if self.broken {
            self.con = self.topology.connect(wait, Some(now + wait))?;
            self.broken = false;
        }
        self.con.set_deadline(Some(now + wait));
        self.con.set_timeout(wait)?;
        Ok(())
    }

    /// A call's result, its error scrubbed of the URL's password; after a
    /// failed connection, the next call connects again. A call is never
    /// sent twice: an override whose answer was lost may have been written.
    fn settle<T>(&mut self, result: Result<T, FleetAdminError>) -> Result<T, FleetAdminError> {
        if let Err(FleetAdminError::Unavailable(_)) = &result {
            self.broken = true;
        }
        result.map_err(|e| e.scrub(&self.url))
    }

    /// The fleet's state of the breaker `name` (closed, with epoch 0, for a
    /// name no process has written). Notices an override past its expiry.
    ///
    /// # Errors
    ///
    /// [`FleetAdminError::Invalid`] for a name against the breaker-name
    /// rules, or a Redis error.
    pub fn status(&mut self, name: &str) -> Result<BreakerStatus, FleetAdminError> {
        let status = self.peek(name);
        self.settle(status)
    }

    fn peek(&mut self, name: &str) -> Result<BreakerStatus, FleetAdminError> {
        crate::name::check(name)?;
        self.arm()?;
        let view: View = self.con.query(&self.script(Script::Peek, name, &[]))?;
        Ok(status_of(name, &view))
    }

    /// Every breaker under the prefix that a process or an operator has
    /// written, by name. The names come from `SCAN` over the state keys
    /// (never `KEYS`), their states from one pipeline.
    ///
    /// # Errors
    ///
    /// A Redis error.
    pub fn list(&mut self) -> Result<Vec<BreakerStatus>, FleetAdminError> {
        let all = self.list_all();
        self.settle(all)
    }

    fn list_all(&mut self) -> Result<Vec<BreakerStatus>, FleetAdminError> {
        let names = self.names("state")?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let pipe: Vec<redis::Cmd> = names
            .iter()
            .map(|name| self.script(Script::Peek, name, &[]))
            .collect();
        self.arm()?;
        let views: Vec<View> = self.con.pipeline(pipe)?;
        Ok(names
            .iter()
            .zip(&views)
            .map(|(name, view)| status_of(name, view))
            .collect())
    }

    /// Forces the breaker `name` open in every process of the fleet, for
    /// `lasting` (server time) or until a reset. Records it in the audit
    /// stream and announces it. Returns the fleet's state after.
    ///
    /// # Errors
    ///
    /// [`FleetAdminError::Invalid`] for a bad name, actor, reason or
    /// expiry (nothing is written), or a Redis error.
    pub fn force_open(
        &mut self,
        name: &str,
        actor: &str,
        reason: &str,
        lasting: Option<Duration>,
    ) -> Result<BreakerStatus, FleetAdminError> {
        self.act(name, "open", actor, reason, lasting)
    }

    /// Forces the breaker `name` closed in every process of the fleet, for
    /// `lasting` or until a reset; as [`force_open`](Self::force_open).
    ///
    /// # Errors
    ///
    /// As [`force_open`](Self::force_open).
    pub fn force_closed(
        &mut self,
        name: &str,
        actor: &str,
        reason: &str,
        lasting: Option<Duration>,
    ) -> Result<BreakerStatus, FleetAdminError> {
        self.act(name, "closed", actor, reason, lasting)
    }

    /// Lifts the fleet's override of `name` and closes the breaker in every
    /// process (a new closed period: a probe out is fenced off), except in
    /// a process whose own operator has overridden its local breaker since.
    ///
    /// # Errors
    ///
    /// As [`force_open`](Self::force_open).
    pub fn reset(
        &mut self,
        name: &str,
        actor: &str,
        reason: &str,
    ) -> Result<BreakerStatus, FleetAdminError> {
        self.act(name, "reset", actor, reason, None)
    }

    /// The last `count` entries of `name`'s audit stream, or of every
    /// breaker's under the prefix (`None`), oldest first.
    ///
    /// # Errors
    ///
    /// [`FleetAdminError::Invalid`] for a bad name or a `count` of zero, or
    /// a Redis error.
    pub fn audit(
        &mut self,
        name: Option<&str>,
        count: usize,
    ) -> Result<Vec<AuditEntry>, FleetAdminError> {
        let entries = self.read_audit(name, count);
        self.settle(entries)
    }

    fn read_audit(
        &mut self,
        name: Option<&str>,
        count: usize,
    ) -> Result<Vec<AuditEntry>, FleetAdminError> {
        if count == 0 {
            return Err(invalid("count", "must be above zero", "0".into()));
        }
        let names = match name {
            Some(name) => {
                crate::name::check(name)?;
                vec![name.to_owned()]
            }
            None => self.names("audit")?.into_iter().collect(),
        };
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let pipe = names.iter().map(|name| {
            let mut cmd = redis::cmd("XREVRANGE");
            cmd.arg(Keys::new(&self.prefix, name).audit)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(count);
            cmd
        });
        let pipe: Vec<redis::Cmd> = pipe.collect();
        self.arm()?;
        let streams: Vec<Vec<(String, Vec<String>)>> = self.con.pipeline(pipe)?;
        let mut entries = Vec::new();
        for (name, stream) in names.iter().zip(streams) {
            for (id, fields) in stream {
                entries.push(entry(name, id, &fields)?);
            }
        }
        // Several streams merge by the server's clock; one stream's entries
        // keep their order.
        entries.sort_by(|a, b| {
            (a.time, stream_id(&a.id), &a.name).cmp(&(b.time, stream_id(&b.id), &b.name))
        });
        let skip = entries.len().saturating_sub(count);
        Ok(entries.split_off(skip))
    }

    /// Watches the fleet's changes: every trip, re-open, close and operator
    /// action announced on the fleet's channel, with the breaker's state
    /// after it. Opens two connections of its own.
    ///
    /// # Errors
    ///
    /// A Redis error.
    pub fn watch(&self) -> Result<FleetWatch, FleetAdminError> {
        self.start_watch().map_err(|e| e.scrub(&self.url))
    }

    fn start_watch(&self) -> Result<FleetWatch, FleetAdminError> {
        // Its set-up keeps this admin's deadline; its reads after do not.
        let wait = match self.deadline {
            Some(d) => d
                .saturating_duration_since(Instant::now())
                .min(self.timeout),
            None => self.timeout,
        };
        if wait.is_zero() {
            return Err(FleetAdminError::Unavailable("timed out".into()));
        }
        let con = self.topology.connect(wait, Some(Instant::now() + wait))?;
        let sub = self.topology.pubsub(&con, wait)?;
        let admin = FleetAdmin {
            topology: Arc::clone(&self.topology),
            url: self.url.clone(),
            con,
            prefix: self.prefix.clone(),
            channel: self.channel.clone(),
            timeout: self.timeout,
            idle_expiry: self.idle_expiry,
            create: false,
            deadline: self.deadline,
            broken: false,
        };
        let (tx, rx) = crossbeam_channel::bounded(FleetWatch::CAPACITY);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let missed = Arc::new(AtomicU64::new(0));
        let dropped = Arc::clone(&missed);
        let channel = self.channel.clone();
        let thread = std::thread::Builder::new()
            .name("fusebox-ctl-watch".into())
            .spawn(move || listen(sub, &channel, &tx, &stopped, &dropped))
            .map_err(|e| FleetAdminError::Unavailable(format!("no watch thread: {e}")))?;
        let mut watch = FleetWatch {
            admin,
            names: rx,
            last: HashMap::new(),
            stop,
            missed,
            thread: Some(thread),
        };
        // Subscribed first, so that no change after this call is missed.
        match watch.names.recv_timeout(wait) {
            Ok(Ok(subscribed)) if subscribed.is_empty() => {}
            Ok(Err(e)) => return Err(e),
            _ => return Err(FleetAdminError::Unavailable("timed out".into())),
        }
        // The states before any change, to tell what each change changed.
        watch.last = watch
            .admin
            .list()?
            .into_iter()
            .map(|s| (s.name, s.state))
            .collect();
        watch.admin.deadline = None;
        Ok(watch)
    }

    fn act(
        &mut self,
        name: &str,
        kind: &str,
        actor: &str,
        reason: &str,
        lasting: Option<Duration>,
    ) -> Result<BreakerStatus, FleetAdminError> {
        crate::name::check(name)?;
        check_text("actor", actor)?;
        check_text("reason", reason)?;
        let for_ms = match lasting {
            None => 0,
            Some(d) if d < Duration::from_millis(1) || d > MAX_OVERRIDE => {
                return Err(invalid(
                    "for",
                    "must be from 1ms to 8760h (365 days)",
                    crate::duration::display(d).to_string(),
                ))
            }
            Some(d) => d.as_millis() as u64,
        };
        let args = [
            kind.to_owned(),
            actor.to_owned(),
            reason.to_owned(),
            for_ms.to_string(),
            self.channel.clone(),
            name.to_owned(),
            u8::from(self.create).to_string(),
            self.idle_expiry.as_millis().to_string(),
        ];
        let view = self.eval(Script::Override, name, &args)?;
        if !view.applied {
            return Err(FleetAdminError::Unknown(name.to_owned()));
        }
        Ok(status_of(name, &view))
    }

    /// Deletes the keys of the breaker `name` (its fleet state, override,
    /// lease, failure window and members) and records it in its audit
    /// stream, which is kept (within its own bounds). Refused with
    /// [`FleetAdminError::Served`] while an agent serves the breaker,
    /// unless `force`: then every serving process reads it afresh, closed
    /// and without an override, as after a Redis restarted empty, and its
    /// agents write its keys again at their next read.
    ///
    /// # Errors
    ///
    /// [`FleetAdminError::Invalid`] for a bad name, actor or reason (nothing
    /// is deleted), [`FleetAdminError::Served`], or a Redis error.
    pub fn forget(
        &mut self,
        name: &str,
        actor: &str,
        reason: &str,
        force: bool,
    ) -> Result<BreakerStatus, FleetAdminError> {
        crate::name::check(name)?;
        check_text("actor", actor)?;
        check_text("reason", reason)?;
        let args = [
            actor.to_owned(),
            reason.to_owned(),
            u8::from(force).to_string(),
            self.channel.clone(),
            name.to_owned(),
        ];
        let view = self.eval(Script::Forget, name, &args)?;
        if !view.applied {
            return Err(FleetAdminError::Served {
                name: name.to_owned(),
                members: view.members,
            });
        }
        Ok(status_of(name, &view))
    }

    /// Runs `script` on `name`'s keys: one round trip, the error scrubbed.
    fn eval(
        &mut self,
        script: Script,
        name: &str,
        args: &[String],
    ) -> Result<View, FleetAdminError> {
        let cmd = self.script(script, name, args);
        let view = self
            .arm()
            .and_then(|()| self.con.query::<View>(&cmd).map_err(FleetAdminError::from));
        self.settle(view)
    }

    /// An `EVAL` of `script` on `name`'s keys. The source goes with every
    /// call: an operator's tool is short-lived, and a restarted Redis needs
    /// no reload.
    fn script(&self, script: Script, name: &str, args: &[String]) -> redis::Cmd {
        let keys = Keys::new(&self.prefix, name);
        let mut cmd = keys.eval("EVAL", &scripts::sources()[script as usize]);
        cmd.arg(args);
        cmd
    }

    /// The names of the breakers with a key `{prefix:name}:suffix`, from
    /// `SCAN`, sorted.
    fn names(&mut self, suffix: &str) -> Result<BTreeSet<String>, FleetAdminError> {
        let head = format!("{{{}:", self.prefix);
        let tail = format!("}}:{suffix}");
        let pattern = format!("{}*{}", glob_escape(&head), glob_escape(&tail));
        self.arm()?;
        let keys = self.con.scan(&pattern)?;
        Ok(keys
            .iter()
            .filter_map(|key| {
                key.strip_prefix(head.as_str())
                    .and_then(|k| k.strip_suffix(tail.as_str()))
            })
            .filter(|name| crate::name::check(name).is_ok())
            .map(str::to_owned)
            .collect())
    }
}

/// A live feed of a fleet's changes ([`FleetAdmin::watch`]). Dropping it
/// unsubscribes.
pub struct FleetWatch {
    admin: FleetAdmin,
    names: Receiver<Result<String, FleetAdminError>>,
    last: HashMap<String, State>,
    stop: Arc<AtomicBool>,
    missed: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for FleetWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetWatch")
            .field("prefix", &self.admin.prefix)
            .finish_non_exhaustive()
    }
}

impl FleetWatch {
    /// How many announcements a watch holds before they are read; beyond
    /// that they are dropped and counted in [`missed`](Self::missed).
    pub(crate) const CAPACITY: usize = 1024;

    /// Announcements dropped because 1,024 of them
    /// were waiting to be read. A dropped one loses no state: the next
    /// change of that breaker shows its state then.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    /// The next change, waiting at most `wait` (`None`: as long as it
    /// takes); `Ok(None)` when none came in time.
    ///
    /// # Errors
    ///
    /// A Redis error (the subscription was lost, or a read failed).
    pub fn next(
        &mut self,
        wait: Option<Duration>,
    ) -> Result<Option<FleetTransition>, FleetAdminError> {
        let change = self.next_change(wait);
        change.map_err(|e| e.scrub(&self.admin.url))
    }

    fn next_change(
        &mut self,
        wait: Option<Duration>,
    ) -> Result<Option<FleetTransition>, FleetAdminError> {
        let name = match wait {
            Some(wait) => match self.names.recv_timeout(wait) {
                Ok(name) => name?,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => return Err(gone()),
            },
            None => self.names.recv().map_err(|_| gone())??,
        };
        let status = self.admin.status(&name)?;
        let from = self.last.insert(name, status.state);
        Ok(Some(FleetTransition { from, status }))
    }
}

impl Drop for FleetWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn gone() -> FleetAdminError {
    FleetAdminError::Unavailable("the watch's subscription ended".into())
}

/// How often the watch's thread looks whether it is to stop.
const LISTEN_POLL: Duration = Duration::from_millis(100);

/// The watch's thread: subscribes (and says so with an empty name), then
/// forwards each announced breaker name.
fn listen(
    mut sub: Connection,
    channel: &str,
    tx: &crossbeam_channel::Sender<Result<String, FleetAdminError>>,
    stop: &AtomicBool,
    missed: &AtomicU64,
) {
    let mut pubsub = sub.as_pubsub();
    let subscribed = pubsub
        .subscribe(channel)
        .and_then(|()| pubsub.set_read_timeout(Some(LISTEN_POLL)));
    if tx
        .send(subscribed.map(|()| String::new()).map_err(Into::into))
        .is_err()
    {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match pubsub.get_message() {
            Ok(msg) => {
                if let Ok(name) = std::str::from_utf8(msg.get_payload_bytes()) {
                    if crate::name::check(name).is_ok() {
                        match tx.try_send(Ok(name.to_owned())) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => {
                                missed.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(TrySendError::Disconnected(_)) => return,
                        }
                    }
                }
            }
            Err(e) if e.is_timeout() => {}
            Err(e) => {
                // A full buffer drops the error too: the thread ends, and the
                // reader sees the subscription gone.
                let _ = tx.try_send(Err(e.into()));
                return;
            }
        }
    }
}

fn invalid(field: &'static str, rule: &'static str, value: String) -> FleetAdminError {
    FleetAdminError::Invalid(ConfigError::Invalid { field, rule, value })
}

/// Checks a breaker name against the crate's rules (as
/// [`Breaker::builder`](crate::Breaker::builder)'s `build()` does), for
/// `fusebox-ctl`, which checks its arguments before it connects.
///
/// # Errors
///
/// [`ConfigError::Invalid`] naming `name` and the rule.
pub fn check_name(name: &str) -> Result<(), ConfigError> {
    crate::name::check(name)
}

/// Checks an override's actor: not blank, at most 64 bytes,
/// no control characters (so that it can forge no log line or table row).
///
/// # Errors
///
/// [`ConfigError::Invalid`] naming `actor` and the rule.
pub fn check_actor(actor: &str) -> Result<(), ConfigError> {
    check_text("actor", actor)
}

/// Checks an override's reason: as [`check_actor`], at most
/// 512 bytes.
///
/// # Errors
///
/// [`ConfigError::Invalid`] naming `reason` and the rule.
pub fn check_reason(reason: &str) -> Result<(), ConfigError> {
    check_text("reason", reason)
}

/// An actor or reason: not blank, at most its maximum in bytes, no control
/// characters (so that it cannot forge a log line or a table row).
fn check_text(field: &'static str, text: &str) -> Result<(), ConfigError> {
    let (max, too_long) = if field == "actor" {
        (MAX_ACTOR_LEN, "must be at most 64 bytes")
    } else {
        (MAX_REASON_LEN, "must be at most 512 bytes")
    };
    let rule = if text.trim().is_empty() {
        "must not be empty"
    } else if text.len() > max {
        too_long
    } else if text.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Err(ConfigError::Invalid {
        field,
        rule,
        value: format!("{:?}", &text[..end]),
    })
}

/// `s` with the characters `SCAN MATCH` treats as a pattern escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A stream id `ms-seq` as numbers, for ordering entries of several streams.
fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

fn entry(name: &str, id: String, fields: &[String]) -> Result<AuditEntry, FleetAdminError> {
    let field = |key: &str| {
        fields
            .chunks(2)
            .find(|kv| kv[0] == key)
            .and_then(|kv| kv.get(1))
            .map(String::as_str)
    };
    let bad = || FleetAdminError::Answer(format!("audit entry {id} of `{name}`"));
    let kind = field("kind").and_then(AuditKind::parse).ok_or_else(bad)?;
    let time_us: u64 = field("time_us")
        .and_then(|t| t.parse().ok())
        .ok_or_else(bad)?;
    let expires_ms = field("expires")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|&t| t > 0);
    Ok(AuditEntry {
        name: name.to_owned(),
        kind,
        time: UNIX_EPOCH + Duration::from_micros(time_us),
        actor: field("actor").unwrap_or_default().to_owned(),
        reason: field("reason").unwrap_or_default().to_owned(),
        expires: expires_ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        id,
    })
}

fn status_of(name: &str, view: &View) -> BreakerStatus {
    let left = |until: i64| Duration::from_millis((until - view.now).max(0) as u64);
    let action = &view.action;
    let forced = action.kind.in_force().then(|| FleetOverride {
        state: if action.kind == ActionKind::Open {
            State::ForcedOpen
        } else {
            State::ForcedClosed
        },
        actor: action.actor.clone(),
        reason: action.reason.clone(),
        expires_in: (action.until > 0).then(|| left(action.until)),
    });
    let state = match &forced {
        Some(o) => o.state,
        None if !view.open => State::Closed,
        None if view.now < view.open_until => State::Open,
        None => State::HalfOpen,
    };
    let lease = (!view.lease.is_empty()).then(|| ProbeLease {
        holder: view
            .lease
            .splitn(3, ':')
            .nth(2)
            .unwrap_or_default()
            .to_owned(),
        expires_in: Duration::from_millis(view.lease_ttl.max(0) as u64),
    });
    BreakerStatus {
        name: name.to_owned(),
        state,
        open_for: (state == State::Open).then(|| left(view.open_until)),
        epoch: view.epoch.max(0) as u64,
        step: u64::from(view.step),
        lease,
        forced,
        members: view.members,
        tripped: view.tripped,
        opened_by: OpenedBy::of(view),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_text_holding_the_password_is_scrubbed() {
        let url = RedisUrl::new("redis://ops:s3cret-pw@127.0.0.1:6379/".into());
        for e in [
            FleetAdminError::Unavailable("auth s3cret-pw failed".into()),
            FleetAdminError::Redis("NOPERM s3cret-pw".into()),
            FleetAdminError::Answer("s3cret-pw".into()),
        ] {
            let shown = e.scrub(&url).to_string();
            assert!(!shown.contains("s3cret-pw"), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    }

    #[test]
    fn a_prefix_with_pattern_characters_is_matched_literally() {
        assert_eq!(glob_escape("{a*b?:"), "{a\\*b\\?:");
        assert_eq!(glob_escape("[x]\\"), "\\[x\\]\\\\");
    }

    #[test]
    fn stream_ids_order_by_time_then_sequence() {
        assert!(stream_id("10-2") < stream_id("11-0"));
        assert!(stream_id("10-2") > stream_id("10-1"));
        assert!(stream_id("9-9") < stream_id("10-0"));
    }

    #[test]
    fn an_actor_or_reason_must_be_short_printable_text() {
        assert!(check_text("actor", "alice").is_ok());
        assert!(check_text("actor", " ").is_err());
        assert!(check_text("actor", &"a".repeat(65)).is_err());
        assert!(check_text("reason", "line\nforged").is_err());
        assert!(check_text("reason", "vendor down \u{1b}[2K").is_err());
        assert!(check_text("reason", "vendor «down» — per status page").is_ok());
    }
}
