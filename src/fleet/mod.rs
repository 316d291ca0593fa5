//! Fleet mode (feature `redis`): breakers of the same name in many
//! processes share one view through Redis, and the fleet sends one probe
//! per open period, without a trading thread ever waiting on Redis.
//!
//! A [`Fleet`] is one agent thread, the only code that talks to Redis. A
//! breaker [joined](Fleet::join) to it keeps deciding every call from its
//! own local state, as any breaker does: a closed success, a refusal and a
//! recorded failure cost the caller no network I/O. The agent reads the
//! breaker's state changes from a subscription, writes trips and probe
//! results to Redis with atomic scripts, and applies the fleet's state to
//! the local breaker (its changes carry [`Reason::Fleet`]).
//!
//! When the fleet's open period ends, exactly one agent takes the probe
//! lease (`SET NX PX`, with a token naming the open period); its breaker
//! lets the next call probe, every other process's breaker stays open. A
//! probe result under a lease of an older period is fenced off. A holder
//! whose process takes no probe within [`FleetBuilder::lease_idle`] gives
//! the lease back, so that a process with traffic probes instead. The backoff
//! step is the fleet's: a failed probe re-opens at the fleet's step plus
//! one, whichever process made it, and a close resets it.
//!
//! A local trip opens the breaker in every process only with a quorum: at
//! least [`min_members`](FleetBuilder::min_members) live members, and
//! [`member_ratio`](FleetBuilder::member_ratio) of them, tripped within
//! [`quorum_window`](FleetBuilder::quorum_window) (by default two, and half;
//! a fleet of one opens at its trip). A member that trips alone stays open
//! in its own process and probes for itself, and the others keep calling:
//! one sick host does not stop the fleet.
//!
//! With [`FleetBuilder::failure_window`], the breakers' failures also add up
//! across processes in a window in Redis, which opens the breaker
//! everywhere when it reaches its threshold.
//!
//! A breaker [leaves](Fleet::leave) its fleet, or is dropped (the fleet
//! does not keep it alive), and a new one of its name may join. Every agent
//! renews its presence among each breaker's members (one `ZADD` every
//! quarter of [`presence`](FleetBuilder::presence)), and a breaker's keys
//! expire [`idle_expiry`](FleetBuilder::idle_expiry) after the last read.
//!
//! An idle breaker costs next to nothing: it is not read on a timer (its
//! changes are announced), and a heartbeat through the agent's own pub/sub
//! channel, one per [`refresh`](FleetBuilder::refresh) whatever the number
//! of breakers, catches an announcement that was lost. Redis may be one server, the master Redis Sentinel names
//! ([`Fleet::sentinel_builder`]) or a Redis Cluster
//! ([`Fleet::cluster_builder`]).
//!
//! If Redis is unavailable or slower than [`FleetBuilder::timeout`], the
//! breakers simply run on local state; the agent logs once per outage,
//! counts it in [`FleetSnapshot::outages`], and reconnects with its own
//! backoff. `docs/fleet.md` has the keys, the scripts, the staleness bound,
//! the failure window, the shared backoff and the failure modes.
//!
//! Operators override a breaker in every process at once with
//! [`FleetAdmin`] (or the `fusebox-ctl` command, feature `ctl`): force it
//! open or closed, with an actor, a reason and an expiry on the Redis
//! server's clock, or reset it. Each action is one atomic script that also
//! appends it to the breaker's audit stream; every agent applies it to its
//! local breaker with the breaker's own `force_open_for`, `force_closed`,
//! `reset`. An override set through a breaker's own API stays local.
//!
//! ```no_run
//! use fusebox::fleet::Fleet;
//! use fusebox::{Breaker, CallPath, Classifier};
//!
//! // One per process, kept for its life.
//! let fleet = Fleet::builder("redis://127.0.0.1:6379/").prefix("prod").build()?;
//! let breaker = Breaker::builder("corporate-actions")
//!     .call_path(CallPath::ReferenceData)
//!     .classifier(Classifier::every_error_is_a_failure())
//!     .build()?;
//! fleet.join(&breaker)?;
//! # Ok::<(), fusebox::ConfigError>(())
//! ```
//!
//! [`Reason::Fleet`]: crate::Reason::Fleet

mod admin;
mod agent;
mod idle;
mod link;
mod member;
mod presence;
mod scripts;
mod snapshot;
mod tls;
mod url;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;
use parking_lot::Mutex;

pub use admin::{
    AuditEntry, AuditKind, BreakerStatus, FleetAdmin, FleetAdminError, FleetOverride,
    FleetTransition, FleetWatch, OpenedBy, ProbeLease,
};
pub use snapshot::{FleetBreaker, FleetSnapshot};

use crate::seam::{Seam, WeakBreaker};
use crate::{Breaker, ConfigError};
use agent::{Agent, Control};
use link::Topology;
use member::Member;
use snapshot::Stats;
use tls::TlsSettings;
use url::RedisUrl;

/// What the `fusebox-ctl` binary (feature `ctl`) takes from the crate's
/// own rules and printing, so that a bad argument is a usage error before
/// anything connects and text from Redis prints as the crate prints it
/// elsewhere. Not part of the API: no semver promise.
#[doc(hidden)]
pub mod ctl {
    use std::time::SystemTime;

    pub use super::admin::{check_actor, check_name, check_reason};

    /// `t` as a UTC date, `2026-11-30T15:04:05.123Z` (RFC 3339,
    /// milliseconds), as the admin endpoint prints its audit records.
    pub fn utc_date(t: SystemTime) -> String {
        crate::utc::rfc3339(t)
    }

    /// Text from Redis as a terminal shows it: control characters and
    /// invisible formatting characters escaped, so that nothing written
    /// there can move the cursor, forge a row or read other than it is.
    pub fn printable(text: &str) -> String {
        crate::text::Shown::cut(text, usize::MAX).to_string()
    }
}

/// The Rust example of `docs/fleet.md`, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../docs/fleet.md")]
pub struct FleetGuideDoctests;

/// How long a lease holder's breaker may go without a probe, by default
/// ([`FleetBuilder::lease_idle`]).
const DEFAULT_LEASE_IDLE: Duration = Duration::from_millis(500);

/// How many state changes a joined breaker may queue for the agent.
const CHANGES_CAPACITY: usize = 256;

/// How long a member stays counted among a breaker's members after its
/// agent's last read, by default ([`FleetBuilder::presence`]), or four
/// refreshes if that is longer.
const DEFAULT_PRESENCE: Duration = Duration::from_secs(5);

/// How often an idle breaker is read at most, to renew its keys' expiries
/// and count its members again (or every quarter of `idle_expiry`, if that
/// is shorter).
const KEEP_ALIVE: Duration = Duration::from_secs(60);

/// How long a breaker's keys outlive the last agent that reads them, by
/// default ([`FleetBuilder::idle_expiry`]).
pub(crate) const DEFAULT_IDLE_EXPIRY: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The settings an agent runs with, checked by [`FleetBuilder::build`].
pub(crate) struct Settings {
    /// Where Redis is: one server, Sentinel's master, or a Cluster.
    pub(crate) topology: Topology,
    /// The URL (or URLs), for log lines and `Debug`: no password shows.
    pub(crate) redis: RedisUrl,
    pub(crate) prefix: String,
    pub(crate) channel: String,
    /// This agent's name in lease tokens.
    pub(crate) agent: String,
    pub(crate) timeout: Duration,
    pub(crate) tick: Duration,
    pub(crate) refresh: Duration,
    pub(crate) hold_margin: Duration,
    pub(crate) lease: Duration,
    /// How long a lease holder's breaker may go without a probe before the
    /// agent gives the lease back.
    pub(crate) lease_idle: Duration,
    pub(crate) reconnect_min: Duration,
    pub(crate) reconnect_max: Duration,
    /// The fleet's recent-failures window, if it has one.
    pub(crate) window: Option<FailureWindow>,
    /// How long this agent counts among a breaker's members after a read.
    pub(crate) presence: Duration,
    /// How long a breaker's keys outlive the agents' last read.
    pub(crate) idle_expiry: Duration,
    /// How often an idle breaker is read: its keys' expiries renewed, and
    /// its members counted again.
    pub(crate) keep_alive: Duration,
    /// This agent's own channel: its heartbeats, which prove that its
    /// pub/sub connection still delivers.
    pub(crate) heartbeat: String,
    /// How many members' local trips open the fleet.
    pub(crate) quorum: Quorum,
}

/// How many members' local trips open the fleet's breaker
/// ([`FleetBuilder::min_members`], [`FleetBuilder::member_ratio`],
/// [`FleetBuilder::quorum_window`]), as the TRIP script takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quorum {
    /// Distinct live members tripped (or every live member, in a fleet
    /// smaller than this).
    pub(crate) min_members: u32,
    /// The share of the live members tripped, in parts per million.
    pub(crate) ratio_ppm: u32,
    /// How long a member's trip counts, in server milliseconds.
    pub(crate) window_ms: u64,
}

impl Quorum {
    /// Two members, half of the live members, within a minute.
    pub(crate) const DEFAULT: Quorum = Quorum {
        min_members: 2,
        ratio_ppm: 500_000,
        window_ms: 60_000,
    };
    /// Whether any one member's trip opens the fleet, however many members
    /// there are (`min_members(1)`, `member_ratio(0.0)`).
    pub(crate) fn counts_any(&self) -> bool {
        self.min_members <= 1 && self.ratio_ppm == 0
    }

    /// The shortest and longest quorum window.
    const WINDOW_MIN: Duration = Duration::from_millis(10);
    const WINDOW_MAX: Duration = Duration::from_secs(24 * 60 * 60);
}

/// The fleet's recent-failures window ([`FleetBuilder::failure_window`]),
/// as the WINDOW script takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailureWindow {
    /// Failures in the window that open the fleet's breaker.
    pub(crate) threshold: u32,
    /// The width of one bucket, in server milliseconds.
    pub(crate) bucket_ms: u64,
}

impl FailureWindow {
    /// Buckets per window.
    pub(crate) const BUCKETS: u64 = 10;
    /// The shortest window: one millisecond per bucket.
    const MIN: Duration = Duration::from_millis(Self::BUCKETS);
    /// The longest window.
    const MAX: Duration = Duration::from_secs(24 * 60 * 60);
}

impl fmt::Debug for Settings {
    // The client is left out: its connection info holds the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("redis", &self.redis)
            .field("prefix", &self.prefix)
            .field("agent", &self.agent)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// One process's agent for fleet mode: a thread that shares the state of
/// every breaker [joined](Fleet::join) to it through Redis.
///
/// Build one per process (and prefix) and keep it: dropping it stops the
/// agent, and its breakers go on alone, on local state.
pub struct Fleet {
    settings: Arc<Settings>,
    stats: Arc<Stats>,
    /// The breakers joined, by name, held without keeping them alive: a
    /// dropped one's name is free again.
    names: Mutex<HashMap<String, WeakBreaker>>,
    control: Option<Sender<Control>>,
    thread: Option<JoinHandle<()>>,
}

impl Fleet {
    /// Starts building a fleet agent for the Redis at `url`:
    /// `redis://[user:password@]host:port/db`, or `rediss://` for TLS.
    ///
    /// The password (of an ACL user, or of the default user) never shows:
    /// `Debug` of the builder and of the fleet, errors and log lines print
    /// the URL as `rediss://user:***@host:port/db`.
    pub fn builder(url: impl Into<String>) -> FleetBuilder {
        FleetBuilder::new(RedisUrl::new(url.into()), Kind::Server)
    }

    /// Starts building a fleet agent for the Redis master that Redis
    /// Sentinel names `service`, asking the sentinels at `sentinels`
    /// (`redis://[user:password@]host:port/`, each with its own password
    /// if the sentinels ask for one; with
    /// [`tls_ca`](FleetBuilder::tls_ca) or
    /// [`tls_client_auth`](FleetBuilder::tls_client_auth), one user and
    /// password for all). The master's own user and password, if it has
    /// them, are [`master_auth`](FleetBuilder::master_auth). With
    /// `rediss://` URLs the master is reached over TLS too, with the same
    /// TLS settings.
    ///
    /// The agent asks the sentinels for the master at every connection:
    /// after a failover, its connection to the old master fails (or is
    /// closed by Sentinel), and it reconnects to the new one, as after any
    /// outage. Database 0.
    pub fn sentinel_builder<I, S>(service: impl Into<String>, sentinels: I) -> FleetBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls: Vec<RedisUrl> = sentinels
            .into_iter()
            .map(|u| RedisUrl::new(u.into()))
            .collect();
        let service = service.into();
        let shown = RedisUrl::listed(&format!("sentinel master `{service}` at"), &urls);
        FleetBuilder::new(shown, Kind::Sentinel { service, urls })
    }

    /// Starts building a fleet agent for the Redis Cluster whose seed nodes
    /// are at `nodes` (`redis://[user:password@]host:port/`, or `rediss://`
    /// for TLS, one user and password for all; the TLS settings apply to
    /// every node). Each breaker's keys live in one slot; the agent's round
    /// trip sends each script to its slot's master, and it subscribes to
    /// the fleet's channel on a seed node (a publication reaches every
    /// node). Database 0.
    pub fn cluster_builder<I, S>(nodes: I) -> FleetBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls: Vec<RedisUrl> = nodes.into_iter().map(|u| RedisUrl::new(u.into())).collect();
        let shown = RedisUrl::listed("cluster at", &urls);
        FleetBuilder::new(shown, Kind::Cluster { urls })
    }

    /// Shares `breaker`'s state with every process whose agent has a
    /// breaker of the same name under the same prefix.
    ///
    /// Returns at once: the agent reads the fleet's state for it at its
    /// next round trip. The breaker's callers never wait on Redis.
    ///
    /// The fleet does not keep the breaker alive: once every handle of it is
    /// dropped, the agent stops serving it (as [`leave`](Self::leave)
    /// would), and a new breaker of the same name may join, as a
    /// configuration reload builds one.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming `breaker` when another live breaker
    /// of that name is in this fleet (this one again included).
    pub fn join(&self, breaker: &Breaker) -> Result<(), ConfigError> {
        let mut names = self.names.lock();
        if names.get(breaker.name()).is_some_and(WeakBreaker::is_alive) {
            return Err(ConfigError::Invalid {
                field: "breaker",
                rule: "must not share its name with a breaker already in the fleet",
                value: breaker.name().to_owned(),
            });
        }
        let changes = breaker.subscribe(CHANGES_CAPACITY)?;
        names.insert(breaker.name().to_owned(), breaker.downgrade());
        let member = Member::new(breaker, changes, &self.settings);
        if let Some(control) = &self.control {
            // The agent only stops when this handle is dropped.
            let _ = control.send(Control::Join(Box::new(member)));
        }
        Ok(())
    }

    /// Stops sharing `breaker`'s state: the agent stops reading it, ends
    /// its presence among the breaker's members and gives back a probe
    /// lease it holds for it, at its next round trip. The breaker keeps its
    /// state and goes on alone, as with Redis away; it may join again.
    ///
    /// Returns whether `breaker` (this breaker, not another of its name)
    /// was in the fleet.
    pub fn leave(&self, breaker: &Breaker) -> bool {
        let mut names = self.names.lock();
        let joined = names
            .get(breaker.name())
            .is_some_and(|w| w.same(&breaker.downgrade()));
        if joined {
            names.remove(breaker.name());
            if let Some(control) = &self.control {
                let _ = control.send(Control::Leave(
                    breaker.name().to_owned(),
                    member::Held(breaker.downgrade()),
                ));
            }
        }
        joined
    }

    /// What the agent has done so far, and whether Redis is reachable.
    pub fn snapshot(&self) -> FleetSnapshot {
        self.stats.snapshot()
    }

    /// The prefix of this fleet's keys.
    // Only a registry (feature `registry`) names its fleets.
    #[cfg_attr(not(feature = "registry"), allow(dead_code))]
    pub(crate) fn prefix(&self) -> &str {
        &self.settings.prefix
    }

    /// Reads this agent's counters for as long as it runs (for a registry's
    /// metrics), without keeping it alive.
    #[cfg(feature = "registry")]
    pub(crate) fn snapshot_source(&self) -> impl Fn() -> Option<FleetSnapshot> + Send + Sync {
        let stats = Arc::downgrade(&self.stats);
        move || stats.upgrade().map(|s| s.snapshot())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.control.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("redis", &self.settings.redis)
            .field("prefix", &self.settings.prefix)
            .field("agent", &self.settings.agent)
            .field("snapshot", &self.snapshot())
            .finish_non_exhaustive()
    }
}

/// Settings for a [`Fleet`].
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `prefix` | `"fusebox"` |
/// | `timeout` | 1 s |
/// | `tick` | 5 ms |
/// | `refresh` | 250 ms |
/// | `hold_margin` | 1 s |
/// | `probe_lease` | 5 s |
/// | `lease_idle` | 500 ms, or half of `probe_lease` if that is shorter |
/// | `reconnect_backoff` | 10 ms, doubling to 2 s |
/// | `presence` | 5 s, or four refreshes if that is longer |
/// | `idle_expiry` | 7 days |
/// | `tls_ca` | none: a `rediss://` URL trusts the system's roots |
/// | `tls_client_auth` | none: no client certificate |
/// | `failure_window` | off |
/// | `min_members` | 2 (a fleet of one: that one) |
/// | `member_ratio` | 0.5 |
/// | `quorum_window` | 60 s |
#[derive(Clone)]
pub struct FleetBuilder {
    /// The URL of a single server; of the others, their URLs as shown.
    url: RedisUrl,
    kind: Kind,
    /// The master's user and password, with Sentinel.
    master_auth: Option<(Option<String>, tls::Secret)>,
    tls: TlsSettings,
    prefix: String,
    timeout: Duration,
    tick: Duration,
    refresh: Duration,
    hold_margin: Duration,
    lease: Duration,
    lease_idle: Option<Duration>,
    reconnect_min: Duration,
    reconnect_max: Duration,
    window: Option<(u32, Duration)>,
    presence: Option<Duration>,
    idle_expiry: Duration,
    min_members: u32,
    member_ratio: f64,
    quorum_window: Duration,
}

impl fmt::Debug for FleetBuilder {
    // The URL shows without its password; of the TLS settings, only
    // whether each is given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBuilder")
            .field("redis", &self.url)
            .field("tls_ca", &self.tls.ca.is_some())
            .field("tls_client_auth", &self.tls.client.is_some())
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Which kind of Redis a builder is for.
#[derive(Clone, Debug)]
enum Kind {
    Server,
    Sentinel {
        service: String,
        urls: Vec<RedisUrl>,
    },
    Cluster {
        urls: Vec<RedisUrl>,
    },
}

impl FleetBuilder {
    fn new(url: RedisUrl, kind: Kind) -> FleetBuilder {
        FleetBuilder {
            url,
            kind,
            master_auth: None,
            tls: TlsSettings::default(),
            prefix: "fusebox".into(),
            timeout: Duration::from_secs(1),
            tick: Duration::from_millis(5),
            refresh: Duration::from_millis(250),
            hold_margin: Duration::from_secs(1),
            lease: Duration::from_secs(5),
            lease_idle: None,
            reconnect_min: Duration::from_millis(10),
            reconnect_max: Duration::from_secs(2),
            window: None,
            presence: None,
            idle_expiry: DEFAULT_IDLE_EXPIRY,
            min_members: Quorum::DEFAULT.min_members,
            member_ratio: f64::from(Quorum::DEFAULT.ratio_ppm) / 1e6,
            quorum_window: Duration::from_millis(Quorum::DEFAULT.window_ms),
        }
    }

    /// With [`Fleet::sentinel_builder`]: the user (`None`: the default user)
    /// and password the master asks for (`requirepass`, or an ACL user),
    /// when they are not the sentinels'. Never shown.
    pub fn master_auth(mut self, user: Option<&str>, password: impl Into<String>) -> Self {
        let password = password.into();
        self.url = self.url.with_secret(password.clone());
        self.master_auth = Some((
            user.map(str::to_owned),
            tls::Secret::new(password.into_bytes()),
        ));
        self
    }

    /// The prefix of every key and of the channel: one per environment
    /// (`prod`, `uat`), so that fleets never see each other.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The certificate(s) of the CA that signed the Redis server's
    /// certificate, in PEM: trusted instead of the system's roots, for a
    /// server with a certificate of a private CA. Only with `rediss://`
    /// URLs. With Sentinel, for the sentinels and the master; with a
    /// Cluster, for every node.
    ///
    /// Without it, a `rediss://` URL verifies the server against the
    /// system's roots (as `rustls-native-certs` finds them).
    pub fn tls_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(pem.into());
        self
    }

    /// A client certificate (PEM, the chain from the leaf) and its private
    /// key (PEM: PKCS#8, PKCS#1 or SEC1), for a Redis that asks clients for
    /// one (`tls-auth-clients yes`). Only with `rediss://` URLs. With
    /// Sentinel, shown to the sentinels and the master; with a Cluster, to
    /// every node.
    ///
    /// The key is never shown: not in `Debug`, not in errors.
    pub fn tls_client_auth(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.set_client(cert_pem.into(), key_pem.into());
        self
    }

    /// How long the agent waits for Redis (to connect, to send, to answer)
    /// before it counts an outage and runs its breakers on local state.
    ///
    /// It bounds how long a hung Redis holds up the agent, never a caller
    /// (callers do not wait on Redis). With a Cluster it bounds each wait,
    /// and a round trip may make several (the redis crate connects to the
    /// nodes it needs, in turn, and retries once). Keep it well above Redis's answer
    /// time on a busy host: on a loaded machine the agent, Redis and every
    /// other process wait for a core, and a timeout of a few tens of
    /// milliseconds turns that wait into outages, each one a reconnection
    /// and a fresh read of every breaker, which load Redis further.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The shortest time between two of the agent's timed rounds: reads due
    /// at a set time (an open period's or a lease's end, an override's
    /// expiry) that fall within a tick of each other go in one round trip,
    /// and breakers' failures are written to the
    /// [`failure_window`](Self::failure_window) at most this often. A local
    /// state change, an announcement or a breaker that joins wakes the
    /// agent at once; with nothing due it sleeps until its next sweep
    /// ([`refresh`](Self::refresh)).
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// How often the agent sweeps: it publishes a heartbeat on its own
    /// channel, which its pub/sub connection must deliver back, and reads
    /// every breaker if one did not come back, so that an announcement
    /// lost on the way is read within three refreshes; and it renews its
    /// presence among the members of the breakers due for it. A breaker
    /// whose fleet state is in motion (its probe lease held, or given back)
    /// is read this often too. A closed breaker is not read on a timer but
    /// once a minute, to keep its keys alive: its changes are announced.
    ///
    /// One round trip per sweep, whatever the number of breakers.
    pub fn refresh(mut self, refresh: Duration) -> Self {
        self.refresh = refresh;
        self
    }

    /// How much longer than the fleet's open period a local breaker is
    /// held open, to leave time for the probe lease to be taken and
    /// announced. If Redis is gone, the local breaker probes on its own
    /// after this.
    pub fn hold_margin(mut self, margin: Duration) -> Self {
        self.hold_margin = margin;
        self
    }

    /// How long a probe lease lasts: if the process that took it dies or
    /// never probes, another takes it after this. Make it longer than the
    /// breakers' `max_probe_duration`.
    pub fn probe_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long the lease holder's breaker may go without a probe before
    /// its agent gives the lease back: it holds the breaker open again,
    /// returns the lease (announcing it, so that another process takes it
    /// at once), and takes none again in that open period unless its
    /// breaker refuses a call since.
    ///
    /// The lease goes to whichever agent reads first after the cool-down,
    /// whether or not its process is calling; without a give-back, a
    /// holder whose process makes no call would delay the fleet's probe by
    /// `probe_lease`. Make it longer than the gap between a busy process's
    /// calls (a process that calls less often may give the lease back and
    /// take it again at its next refused call) and shorter than
    /// `probe_lease`. The default, 500 ms (two refreshes,
    /// a tenth of the lease), keeps the lease with a process that calls
    /// twice a second, and bounds the delay an idle holder adds to about
    /// half a second.
    pub fn lease_idle(mut self, idle: Duration) -> Self {
        self.lease_idle = Some(idle);
        self
    }

    /// The agent's wait before reconnecting, doubling from `first` to
    /// `max`.
    pub fn reconnect_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.reconnect_min = first;
        self.reconnect_max = max;
        self
    }

    /// A fleet-wide recent-failures window: every agent adds its breakers'
    /// failures to a window of the last `window` in Redis, per breaker
    /// name, and when the failures there reach `threshold` the fleet's
    /// breaker opens everywhere, even if no process had enough failures to
    /// trip on its own. The open period is the breaker's `open_duration`,
    /// as for a local trip.
    ///
    /// Off by default: a good threshold depends on how many processes share
    /// the breaker and how many calls each makes. Give every process of the
    /// fleet the same setting: each write judges the window with the
    /// writer's.
    ///
    /// Time is the Redis server's, in ten buckets of `window / 10`: a
    /// failure counts for between nine tenths of `window` and all of it,
    /// never longer. The window counts within one closed period of the
    /// fleet: a trip (any) starts it afresh, and failures while the fleet
    /// is open do not count. An agent reads its breakers' failure counts
    /// every twentieth of `window` (or every tick, if that is longer) and
    /// writes what grew in that round trip; failures while Redis
    /// was unavailable are not written later.
    pub fn failure_window(mut self, threshold: u32, window: Duration) -> Self {
        self.window = Some((threshold, window));
        self
    }

    /// How long this agent counts among the members serving each of its
    /// breakers after it last renewed its presence: every read renews it,
    /// and between reads one `ZADD` per breaker every quarter of this, at
    /// the first sweep after it is due. A process that dies, or loses
    /// Redis, leaves the count after this; one that [leaves](Fleet::leave)
    /// or drops a breaker, at once. [`BreakerStatus::members`] and
    /// `fusebox-ctl status` show the count, and `forget` refuses a breaker
    /// with a member.
    ///
    /// Give every process the same setting. At least two refreshes.
    pub fn presence(mut self, presence: Duration) -> Self {
        self.presence = Some(presence);
        self
    }

    /// How long a breaker's keys outlive the last agent that serves it:
    /// every agent's read keeps its state hash and its members key alive
    /// that much longer (an agent reads each breaker at least every minute,
    /// or every quarter of this if that is shorter), so
    /// the state of a name no process serves any more (a breaker renamed or
    /// retired) expires after this, an operator's override with it. The
    /// audit stream has bounds of its own (about the last thousand entries,
    /// none older than 90 days).
    ///
    /// Give every process the same setting. At least `presence`.
    pub fn idle_expiry(mut self, idle: Duration) -> Self {
        self.idle_expiry = idle;
        self
    }

    /// How many distinct members must have tripped a breaker locally for
    /// the fleet to open it everywhere: a local trip alone opens only its
    /// own process's breaker, which probes for itself when its open period
    /// ends, while the other processes keep calling. The fleet opens when,
    /// within [`quorum_window`](Self::quorum_window), at least
    /// `min_members` live members **and** at least
    /// [`member_ratio`](Self::member_ratio) of the live members have
    /// tripped it (a member is live while its presence lasts, see
    /// [`presence`](Self::presence)), or when the
    /// [`failure_window`](Self::failure_window) reaches its threshold.
    ///
    /// A fleet with fewer live members than `min_members` needs every one
    /// of them: a breaker served by one process trips the fleet as soon as
    /// it trips. The default, 2 with a ratio of 0.5, never lets one
    /// member's trip open a fleet of two or more. `min_members(1)` with
    /// `member_ratio(0.0)` makes any member's trip open the fleet (the rule
    /// before quorums). Operators' overrides act on every process at once,
    /// whatever the quorum.
    ///
    /// For the first [`presence`](Self::presence) of each session with
    /// Redis, a trip is recorded but not judged: after a Redis restarted
    /// empty, or at a fleet's start, the members have not all renewed their
    /// presence yet, and the first one back would count as a fleet of one.
    /// A breaker still open by such a trip is written again, and judged,
    /// once the session is that old.
    ///
    /// Give every process the same setting: each trip is judged by its
    /// writer's.
    pub fn min_members(mut self, members: u32) -> Self {
        self.min_members = members;
        self
    }

    /// The share of a breaker's live members (0.0 to 1.0) whose local trip
    /// within [`quorum_window`](Self::quorum_window) opens the fleet, with
    /// at least [`min_members`](Self::min_members) of them: 0.5 (the
    /// default) opens a fleet of five at its third tripped member.
    pub fn member_ratio(mut self, ratio: f64) -> Self {
        self.member_ratio = ratio;
        self
    }

    /// How long a member's local trip counts towards the quorum, from the
    /// trip on the Redis server's clock (each re-open of a breaker tripped
    /// alone counts again from then). A member whose breaker closes again
    /// on its own, or that leaves, stops counting at once; one that stops
    /// renewing its presence, after [`presence`](Self::presence).
    pub fn quorum_window(mut self, window: Duration) -> Self {
        self.quorum_window = window;
        self
    }

    /// Connects an operators' [`FleetAdmin`] to this fleet: the same Redis
    /// (one server, Sentinel's master or a Cluster), TLS settings, prefix
    /// and `timeout` (for the connection and every answer), and
    /// `idle_expiry` for a breaker an override creates; the agent's other
    /// settings do not apply. Every call of the admin is done within
    /// `timeout` as a whole, whatever the Redis ([`FleetAdmin::set_deadline`]).
    /// Starts no thread but, with Sentinel, the lookup's, and with a
    /// Cluster, its connection's.
    ///
    /// # Errors
    ///
    /// [`FleetAdminError::Url`] for a URL the redis crate does not accept,
    /// [`FleetAdminError::Invalid`] for a TLS setting, prefix or timeout
    /// [`build`](Self::build) would refuse, or
    /// [`FleetAdminError::Unavailable`].
    pub fn admin(&self) -> Result<FleetAdmin, FleetAdminError> {
        let topology = self.topology().map_err(|e| match e {
            ConfigError::Invalid {
                field: "url", rule, ..
            } if rule == tls::URL_RULE => FleetAdminError::Url,
            e => FleetAdminError::Invalid(e),
        })?;
        FleetAdmin::with_client(
            topology,
            self.url.clone(),
            &self.prefix,
            self.timeout,
            self.idle_expiry,
        )
    }

    /// Checks the settings and starts the agent thread. Does not wait for
    /// Redis: the agent connects in the background.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the field: `url` that the redis
    /// crate does not accept or that turns the certificate check off
    /// (`#insecure`; the URL is not shown, it may hold a password);
    /// the seed nodes of a Cluster with different users or passwords, or
    /// sentinels with different ones together with a TLS setting;
    /// `tls_ca` or `tls_client_auth` with a plain `redis://` URL, or whose
    /// PEM holds no certificate, a certificate rustls refuses, or a key
    /// that does not parse or is not the certificate's (never shown); an
    /// empty `prefix` or one with `{`, `}` or whitespace, a
    /// zero `timeout`, `tick`, `refresh` or `probe_lease`, a `lease_idle`
    /// that is zero or not below `probe_lease`, or a
    /// `reconnect_backoff` whose first wait is zero or above its max, or a
    /// `failure_window` whose threshold is zero or whose window is not
    /// between 10 ms and 24 h, a `presence` under two refreshes, an
    /// `idle_expiry` under `presence`, a `min_members` of zero, a
    /// `member_ratio` that is not a number between 0.0 and 1.0, or a
    /// `quorum_window` not between 10 ms and 24 h.
    pub fn build(self) -> Result<Fleet, ConfigError> {
        let invalid = |field, rule, value: String| ConfigError::Invalid { field, rule, value };
        let topology = self.topology()?;
        check_prefix(&self.prefix)?;
        for (field, d) in [
            ("timeout", self.timeout),
            ("tick", self.tick),
            ("refresh", self.refresh),
            ("probe_lease", self.lease),
            ("reconnect_backoff", self.reconnect_min),
        ] {
            if d.is_zero() {
                return Err(invalid(
                    field,
                    "must be above zero",
                    crate::duration::display(d).to_string(),
                ));
            }
        }
        let lease_idle = self
            .lease_idle
            .unwrap_or_else(|| DEFAULT_LEASE_IDLE.min(self.lease / 2));
        if lease_idle.is_zero() || lease_idle >= self.lease {
            return Err(invalid(
                "lease_idle",
                "must be above zero and below probe_lease",
                crate::duration::display(lease_idle).to_string(),
            ));
        }
        if self.reconnect_min > self.reconnect_max {
            return Err(invalid(
                "reconnect_backoff",
                "first wait must not exceed the max",
                format!(
                    "{} > {}",
                    crate::duration::display(self.reconnect_min),
                    crate::duration::display(self.reconnect_max)
                ),
            ));
        }
        let presence = self
            .presence
            .unwrap_or_else(|| DEFAULT_PRESENCE.max(4 * self.refresh));
        if presence < 2 * self.refresh {
            return Err(invalid(
                "presence",
                "must be at least two refreshes",
                format!("{presence:?}"),
            ));
        }
        if self.idle_expiry < presence {
            return Err(invalid(
                "idle_expiry",
                "must be at least presence",
                format!("{:?}", self.idle_expiry),
            ));
        }
        let window = match self.window {
            None => None,
            Some((0, _)) => {
                return Err(invalid(
                    "failure_window",
                    "threshold must be above zero",
                    "0".into(),
                ))
            }
            Some((_, w)) if w < FailureWindow::MIN || w > FailureWindow::MAX => {
                return Err(invalid(
                    "failure_window",
                    "window must be between 10ms and 24h",
                    crate::duration::display(w).to_string(),
                ))
            }
            Some((threshold, w)) => Some(FailureWindow {
                threshold,
                bucket_ms: (w.as_millis() as u64) / FailureWindow::BUCKETS,
            }),
        };
        let quorum = self.quorum()?;
        let channel = scripts::channel(&self.prefix);
        let agent = agent_name();
        let settings = Arc::new(Settings {
            topology,
            redis: self.url,
            heartbeat: format!("{channel}:{agent}"),
            channel,
            prefix: self.prefix,
            agent,
            timeout: self.timeout,
            tick: self.tick,
            refresh: self.refresh,
            hold_margin: self.hold_margin,
            lease: self.lease,
            lease_idle,
            reconnect_min: self.reconnect_min,
            reconnect_max: self.reconnect_max,
            window,
            presence,
            idle_expiry: self.idle_expiry,
            keep_alive: KEEP_ALIVE.min(self.idle_expiry / 4),
            quorum,
        });
        let stats = Arc::new(Stats::default());
        let (tx, rx) = crossbeam_channel::unbounded();
        let agent = Agent {
            settings: Arc::clone(&settings),
            control: rx,
            stats: Arc::clone(&stats),
            members: Vec::new(),
            by_name: Default::default(),
            leaving: Vec::new(),
            unsettled_until: std::time::Instant::now(),
        };
        let thread = std::thread::Builder::new()
            .name("fusebox-fleet".into())
            .spawn(move || agent.run())
            .map_err(|e| invalid("thread", "could not be started", e.to_string()))?;
        Ok(Fleet {
            settings,
            stats,
            names: Mutex::default(),
            control: Some(tx),
            thread: Some(thread),
        })
    }
}

impl FleetBuilder {
    /// The quorum settings, checked.
    fn quorum(&self) -> Result<Quorum, ConfigError> {
        let invalid = |field, rule, value: String| ConfigError::Invalid { field, rule, value };
        if self.min_members == 0 {
            return Err(invalid("min_members", "must be at least 1", "0".into()));
        }
        if !(0.0..=1.0).contains(&self.member_ratio) {
            return Err(invalid(
                "member_ratio",
                "must be a number from 0.0 to 1.0",
                self.member_ratio.to_string(),
            ));
        }
        let w = self.quorum_window;
        if !(Quorum::WINDOW_MIN..=Quorum::WINDOW_MAX).contains(&w) {
            return Err(invalid(
                "quorum_window",
                "must be between 10ms and 24h",
                crate::duration::display(w).to_string(),
            ));
        }
        Ok(Quorum {
            min_members: self.min_members,
            // Rounded up: a ratio never asks for less than it says.
            ratio_ppm: (self.member_ratio * 1e6).ceil() as u32,
            window_ms: w.as_millis() as u64,
        })
    }

    /// The Redis this builder is for, its URLs and TLS settings checked.
    fn topology(&self) -> Result<Topology, ConfigError> {
        let urls = match &self.kind {
            Kind::Server => {
                let info = self.url.connection_info().map_err(|_| tls::url_refused())?;
                return Ok(Topology::Server(tls::client(info, &self.tls)?));
            }
            Kind::Sentinel { urls, .. } | Kind::Cluster { urls } => urls,
        };
        if urls.is_empty() {
            return Err(ConfigError::Invalid {
                field: "url",
                rule: "must name at least one sentinel or node",
                value: "none".into(),
            });
        }
        // Each URL with the same checks as one server's (`#insecure`
        // refused, TLS settings only with rediss://, a crypto provider
        // installed), and its client: a sentinel's, or a node's to
        // subscribe on.
        let mut clients = Vec::with_capacity(urls.len());
        for url in urls {
            let info = url.connection_info().map_err(|_| tls::url_refused())?;
            clients.push(tls::client(info, &self.tls)?);
        }
        let infos: Vec<redis::ConnectionInfo> = clients
            .iter()
            .map(|c| c.get_connection_info().clone())
            .collect();
        let certificates = tls::certificates(&self.tls)?;
        let refused = |_| tls::url_refused();
        match &self.kind {
            Kind::Server => unreachable!("returned above"),
            Kind::Sentinel { service, .. } => {
                let client = match certificates {
                    None => self.sentinel_client(service, infos)?,
                    Some(certificates) => {
                        self.sentinel_client_with_certificates(service, &infos, certificates)?
                    }
                };
                let sentinel =
                    link::Sentinel::start(client, clients, self.timeout).map_err(|e| {
                        ConfigError::Invalid {
                            field: "thread",
                            rule: "could not be started",
                            value: e.to_string(),
                        }
                    })?;
                Ok(Topology::Sentinel(sentinel))
            }
            Kind::Cluster { .. } => {
                let mut builder = redis::cluster::ClusterClientBuilder::new(
                    same_credentials(
                        &infos,
                        "every seed node of a cluster must have the same user and password",
                    )?
                    .to_vec(),
                )
                .connection_timeout(self.timeout)
                .response_timeout(self.timeout)
                // The agent has its own backoff: a failed round trip is an
                // outage, not a wait inside the redis crate.
                .retries(1)
                .min_retry_wait(1)
                .max_retry_wait(10);
                if let Some(certificates) = certificates {
                    builder = builder.certs(certificates);
                }
                let client = builder.build().map_err(refused)?;
                Ok(Topology::Cluster {
                    client,
                    nodes: clients,
                })
            }
        }
    }

    /// The master's user and password (`master_auth`), to connect to it.
    fn master_settings(&self) -> redis::RedisConnectionInfo {
        let mut master = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some((user, password)) = &self.master_auth {
            if let Some(user) = user {
                master = master.set_username(user);
            }
            master = master.set_password(password.text());
        }
        master
    }

    /// The redis crate's Sentinel client for the sentinels at `infos`, each
    /// with its own user and password; the master trusts the system's roots
    /// if the sentinels' URLs are `rediss://`.
    fn sentinel_client(
        &self,
        service: &str,
        infos: Vec<redis::ConnectionInfo>,
    ) -> Result<redis::sentinel::SentinelClient, ConfigError> {
        let tls = infos
            .iter()
            .any(|i| matches!(i.addr(), redis::ConnectionAddr::TcpTls { .. }));
        let mut node = redis::sentinel::SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(self.master_settings());
        if tls {
            node = node.set_tls_mode(redis::TlsMode::Secure);
        }
        redis::sentinel::SentinelClient::build(
            infos,
            service,
            Some(node),
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(|_| tls::url_refused())
    }

    /// The same with `tls_ca` or `tls_client_auth`: the redis crate takes
    /// certificates for the master only through its `SentinelClientBuilder`,
    /// which gives every sentinel one user and password. The sentinels'
    /// addresses carry the certificates already (`infos` are of the clients
    /// [`tls::client`] made).
    fn sentinel_client_with_certificates(
        &self,
        service: &str,
        infos: &[redis::ConnectionInfo],
        certificates: redis::TlsCertificates,
    ) -> Result<redis::sentinel::SentinelClient, ConfigError> {
        let infos = same_credentials(
            infos,
            "every sentinel must have the same user and password with tls_ca or tls_client_auth",
        )?;
        let settings = infos[0].redis_settings().clone();
        let mut builder = redis::sentinel::SentinelClientBuilder::new(
            infos.iter().map(|i| i.addr().clone()),
            service,
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(|_| tls::url_refused())?
        .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
        .set_client_to_redis_certificates(certificates);
        if let Some(user) = settings.username() {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = settings.password() {
            builder = builder.set_client_to_sentinel_password(password);
        }
        let master = self.master_settings();
        if let Some(user) = master.username() {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = master.password() {
            builder = builder.set_client_to_redis_password(password);
        }
        builder.build().map_err(|_| tls::refused(&self.tls))
    }
}

/// `infos`, if every one has the first one's user and password; otherwise
/// an error naming `url` with `rule` (and showing neither).
fn same_credentials<'a>(
    infos: &'a [redis::ConnectionInfo],
    rule: &'static str,
) -> Result<&'a [redis::ConnectionInfo], ConfigError> {
    let credentials = |i: &redis::ConnectionInfo| {
        let s = i.redis_settings();
        (
            s.username().map(str::to_owned),
            s.password().map(str::to_owned),
        )
    };
    let first = infos.first().map(credentials);
    if infos.iter().any(|i| Some(credentials(i)) != first) {
        return Err(ConfigError::Invalid {
            field: "url",
            rule,
            value: "(not shown, they hold passwords)".into(),
        });
    }
    Ok(infos)
}

/// A key prefix: non-empty, without braces (the hash tag's) or whitespace.
fn check_prefix(prefix: &str) -> Result<(), ConfigError> {
    if prefix.is_empty()
        || prefix
            .chars()
            .any(|c| c == '{' || c == '}' || c.is_whitespace() || c.is_control())
    {
        return Err(ConfigError::Invalid {
            field: "prefix",
            rule: "must be non-empty, without braces or whitespace",
            value: format!("{prefix:?}"),
        });
    }
    Ok(())
}

/// A name for this agent in lease tokens, unique across processes and
/// agents: the process id, a count, and the start time's low bits (used
/// only to tell restarts apart, never to decide anything).
fn agent_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let salt = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}-{n}-{salt:x}", std::process::id())
}
