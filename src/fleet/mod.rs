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
//! With [`FleetBuilder::failure_window`], the breakers' failures also add up
//! across processes in a window in Redis, which opens the breaker
//! everywhere when it reaches its threshold.
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
mod member;
mod scripts;
mod snapshot;
mod tls;
mod url;

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;
use parking_lot::Mutex;

pub use admin::utc_date;
pub use admin::{
    check_actor, check_name, check_reason, AuditEntry, AuditKind, BreakerStatus, FleetAdmin,
    FleetAdminError, FleetTransition, FleetWatch, Override, ProbeLease, MAX_ACTOR_LEN,
    MAX_OVERRIDE, MAX_REASON_LEN,
};
pub use snapshot::FleetSnapshot;

use crate::{Breaker, ConfigError};
use agent::{Agent, Control};
use member::Member;
use snapshot::Stats;
use tls::TlsSettings;
use url::RedisUrl;

/// The Rust example of `docs/fleet.md`, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../docs/fleet.md")]
pub struct FleetGuideDoctests;

/// How long a lease holder's breaker may go without a probe, by default
/// ([`FleetBuilder::lease_idle`]).
const DEFAULT_LEASE_IDLE: Duration = Duration::from_millis(500);

/// How many state changes a joined breaker may queue for the agent.
const CHANGES_CAPACITY: usize = 256;

/// The settings an agent runs with, checked by [`FleetBuilder::build`].
pub(crate) struct Settings {
    pub(crate) client: redis::Client,
    /// The URL, for log lines and `Debug`: its password never shows.
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
    names: Mutex<HashSet<String>>,
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
        FleetBuilder::new(url.into())
    }

    /// Shares `breaker`'s state with every process whose agent has a
    /// breaker of the same name under the same prefix.
    ///
    /// Returns at once: the agent reads the fleet's state for it at its
    /// next tick. The breaker's callers never wait on Redis.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming `breaker` when a breaker of that
    /// name has joined this fleet already.
    pub fn join(&self, breaker: &Breaker) -> Result<(), ConfigError> {
        if !self.names.lock().insert(breaker.name().to_owned()) {
            return Err(ConfigError::Invalid {
                field: "breaker",
                rule: "must not share its name with a breaker already in the fleet",
                value: breaker.name().to_owned(),
            });
        }
        let changes = breaker.subscribe(CHANGES_CAPACITY)?;
        let member = Member::new(
            breaker.clone(),
            changes,
            &self.settings.prefix,
            self.settings.window.is_some(),
        );
        if let Some(control) = &self.control {
            // The agent only stops when this handle is dropped.
            let _ = control.send(Control::Join(Box::new(member)));
        }
        Ok(())
    }

    /// What the agent has done so far, and whether Redis is reachable.
    pub fn snapshot(&self) -> FleetSnapshot {
        self.stats.snapshot()
    }

    /// The prefix of this fleet's keys.
    pub fn prefix(&self) -> &str {
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
/// | `timeout` | 50 ms |
/// | `tick` | 5 ms |
/// | `refresh` | 250 ms |
/// | `hold_margin` | 1 s |
/// | `probe_lease` | 5 s |
/// | `lease_idle` | 500 ms, or half of `probe_lease` if that is shorter |
/// | `reconnect_backoff` | 10 ms, doubling to 2 s |
/// | `tls_ca` | none: a `rediss://` URL trusts the system's roots |
/// | `tls_client_auth` | none: no client certificate |
/// | `failure_window` | off |
#[derive(Clone)]
pub struct FleetBuilder {
    url: RedisUrl,
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

impl FleetBuilder {
    fn new(url: String) -> FleetBuilder {
        FleetBuilder {
            url: RedisUrl::new(url),
            tls: TlsSettings::default(),
            prefix: "fusebox".into(),
            timeout: Duration::from_millis(50),
            tick: Duration::from_millis(5),
            refresh: Duration::from_millis(250),
            hold_margin: Duration::from_secs(1),
            lease: Duration::from_secs(5),
            lease_idle: None,
            reconnect_min: Duration::from_millis(10),
            reconnect_max: Duration::from_secs(2),
            window: None,
        }
    }

    /// The prefix of every key and of the channel: one per environment
    /// (`prod`, `uat`), so that fleets never see each other.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The certificate(s) of the CA that signed the Redis server's
    /// certificate, in PEM: trusted instead of the system's roots, for a
    /// server with a certificate of a private CA. Only with a `rediss://`
    /// URL.
    ///
    /// Without it, a `rediss://` URL verifies the server against the
    /// system's roots (as `rustls-native-certs` finds them).
    pub fn tls_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca = Some(pem.into());
        self
    }

    /// A client certificate (PEM, the chain from the leaf) and its private
    /// key (PEM: PKCS#8, PKCS#1 or SEC1), for a Redis that asks clients for
    /// one (`tls-auth-clients yes`). Only with a `rediss://` URL.
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
    /// before it runs its breakers on local state.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest the agent waits between two ticks: how often it checks
    /// for refresh reads that are due and writes failures to the
    /// [`failure_window`](Self::failure_window). A local state change, an
    /// announcement or a breaker that joins wakes it at once.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// How often each breaker's fleet state is read, as a backstop to
    /// pub/sub.
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
    /// `probe_lease`. The default, 500 ms (a hundred ticks, two refreshes,
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
    /// writes what grew in that tick's one round trip; failures while Redis
    /// was unavailable are not written later.
    pub fn failure_window(mut self, threshold: u32, window: Duration) -> Self {
        self.window = Some((threshold, window));
        self
    }

    /// Connects an operators' [`FleetAdmin`] to this fleet: the same URL,
    /// TLS settings, prefix and `timeout` (for the connection and every
    /// answer); the agent's other settings do not apply. Starts no thread.
    ///
    /// # Errors
    ///
    /// [`FleetAdminError::Url`] for a URL the redis crate does not accept,
    /// [`FleetAdminError::Invalid`] for a TLS setting, prefix or timeout
    /// [`build`](Self::build) would refuse, or
    /// [`FleetAdminError::Unavailable`].
    pub fn admin(&self) -> Result<FleetAdmin, FleetAdminError> {
        let info = self
            .url
            .connection_info()
            .map_err(|_| FleetAdminError::Url)?;
        let client = tls::client(info, &self.tls)?;
        FleetAdmin::with_client(client, self.url.clone(), &self.prefix, self.timeout)
    }

    /// Checks the settings and starts the agent thread. Does not wait for
    /// Redis: the agent connects in the background.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] naming the field: `url` that the redis
    /// crate does not accept or that turns the certificate check off
    /// (`#insecure`; the URL is not shown, it may hold a password);
    /// `tls_ca` or `tls_client_auth` with a plain `redis://` URL, or whose
    /// PEM holds no certificate, a certificate rustls refuses, or a key
    /// that does not parse or is not the certificate's (never shown); an
    /// empty `prefix` or one with `{`, `}` or whitespace, a
    /// zero `timeout`, `tick`, `refresh` or `probe_lease`, a `lease_idle`
    /// that is zero or not below `probe_lease`, or a
    /// `reconnect_backoff` whose first wait is zero or above its max, or a
    /// `failure_window` whose threshold is zero or whose window is not
    /// between 10 ms and 24 h.
    pub fn build(self) -> Result<Fleet, ConfigError> {
        let invalid = |field, rule, value: String| ConfigError::Invalid { field, rule, value };
        let info = self.url.connection_info().map_err(|_| tls::url_refused())?;
        let client = tls::client(info, &self.tls)?;
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
        let settings = Arc::new(Settings {
            client,
            redis: self.url,
            channel: scripts::channel(&self.prefix),
            prefix: self.prefix,
            agent: agent_name(),
            timeout: self.timeout,
            tick: self.tick,
            refresh: self.refresh,
            hold_margin: self.hold_margin,
            lease: self.lease,
            lease_idle,
            reconnect_min: self.reconnect_min,
            reconnect_max: self.reconnect_max,
            window,
        });
        let stats = Arc::new(Stats::default());
        let (tx, rx) = crossbeam_channel::unbounded();
        let agent = Agent {
            settings: Arc::clone(&settings),
            control: rx,
            stats: Arc::clone(&stats),
            members: Vec::new(),
            by_name: Default::default(),
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
