//! A registry of named breakers, for the people who run the process: every
//! breaker in one place, found by name, read, exported and steered, with an
//! audit trail of every override.
//!
//! ```
//! use fusebox::registry::{Override, Registry};
//! use fusebox::{BreakerConfig, CallPath, Classifier, State};
//!
//! let registry = Registry::new();
//! registry.add_template(
//!     "vendor",
//!     BreakerConfig::builder()
//!         .call_path(CallPath::AltData)
//!         .classifier(Classifier::every_error_is_a_failure())
//!         .build()?,
//! )?;
//! let news = registry.breaker("news", "vendor")?;
//! // The same name and template: the same breaker.
//! let again = registry.breaker("news", "vendor")?;
//! registry.force_open("news", &Override::new("alice", "vendor maintenance"))?;
//! assert_eq!(again.state(), State::ForcedOpen);
//! assert_eq!(news.state(), State::ForcedOpen);
//! assert_eq!(registry.audit()[0].actor.as_ref(), "alice");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A registry is cheap to clone; the clones share one set of breakers, so an
//! admin thread and the application can hold the same registry.

mod audit;
#[cfg(feature = "chain")]
mod chain;
#[cfg_attr(not(any(feature = "serde", feature = "admin")), allow(dead_code))]
mod error;
#[cfg(feature = "redis")]
mod fleet;
#[cfg(feature = "isolation")]
mod isolation;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};

pub use audit::{Action, AuditRecord};
pub use error::RegistryError;

use crate::seam::Seam;
use crate::trading::WindowEnd;
use crate::{Breaker, BreakerConfig, Snapshot};
use audit::Trail;

/// How many overrides a registry remembers by default.
const DEFAULT_AUDIT_CAPACITY: usize = 256;

/// A set of named breakers, made from named templates or registered from
/// outside. See the [module docs](self).
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    templates: RwLock<HashMap<String, BreakerConfig>>,
    breakers: RwLock<BTreeMap<String, Entry>>,
    trail: Mutex<Trail>,
    #[cfg(feature = "isolation")]
    isolation: isolation::Isolation,
    #[cfg(feature = "chain")]
    chains: chain::Chains,
    #[cfg(feature = "redis")]
    fleets: fleet::Fleets,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            templates: RwLock::default(),
            breakers: RwLock::default(),
            trail: Mutex::new(Trail::new(DEFAULT_AUDIT_CAPACITY)),
            #[cfg(feature = "isolation")]
            isolation: isolation::Isolation::default(),
            #[cfg(feature = "chain")]
            chains: chain::Chains::default(),
            #[cfg(feature = "redis")]
            fleets: fleet::Fleets::default(),
        }
    }
}

#[derive(Clone)]
struct Entry {
    breaker: Breaker,
    origin: Origin,
    critical: bool,
}

impl Entry {
    fn new(breaker: Breaker, origin: Origin) -> Entry {
        Entry {
            breaker,
            origin,
            critical: false,
        }
    }
}

/// Where a registered breaker came from: what a second request for the same
/// name must match.
#[derive(Clone, PartialEq, Eq)]
enum Origin {
    Template(String),
    /// From a template, with settings changed.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    Changed(String),
    Outside,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Template(t) => write!(f, "template `{t}`"),
            Origin::Changed(t) => write!(f, "template `{t}` with changed settings"),
            Origin::Outside => f.write_str("outside the registry"),
        }
    }
}

/// An operator's request to override a breaker: who asks, why, and for how
/// long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    actor: Arc<str>,
    reason: Arc<str>,
    expires_after: Option<Duration>,
}

impl Override {
    /// An override asked for by `actor`, for `reason`. Both go into the
    /// breaker's state change, its snapshot and the audit trail.
    pub fn new(actor: impl Into<Arc<str>>, reason: impl Into<Arc<str>>) -> Self {
        Override {
            actor: actor.into(),
            reason: reason.into(),
            expires_after: None,
        }
    }

    /// Ends a forced state by itself after `lasting` (on the breaker's
    /// clock): the breaker returns to normal operation, closed with cleared
    /// counters. Without it, a forced state lasts until the next override.
    /// A reset ignores it.
    pub fn expires_after(mut self, lasting: Duration) -> Self {
        self.expires_after = Some(lasting);
        self
    }
}

impl Registry {
    /// An empty registry that remembers the last 256 overrides.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry that remembers the last `capacity` overrides.
    pub fn with_audit_capacity(capacity: usize) -> Self {
        Registry {
            inner: Arc::new(Inner {
                trail: Mutex::new(Trail::new(capacity)),
                ..Inner::default()
            }),
        }
    }

    /// Adds a named template from which [`breaker`](Self::breaker) makes
    /// breakers.
    ///
    /// # Errors
    ///
    /// [`RegistryError::DuplicateTemplate`] if the name is taken: a template
    /// in use does not change under its breakers.
    pub fn add_template(
        &self,
        name: impl Into<String>,
        config: BreakerConfig,
    ) -> Result<(), RegistryError> {
        let name = name.into();
        let mut templates = self.inner.templates.write();
        if templates.contains_key(&name) {
            return Err(RegistryError::DuplicateTemplate { template: name });
        }
        templates.insert(name, config);
        Ok(())
    }

    /// The template called `name`, if there is one.
    pub fn template(&self, name: &str) -> Option<BreakerConfig> {
        self.inner.templates.read().get(name).cloned()
    }

    /// The breaker called `name`, made from `template` the first time it is
    /// asked for and returned as it is afterwards.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownTemplate`]; [`RegistryError::Conflict`] if
    /// `name` exists from another template or from outside the registry;
    /// [`RegistryError::Config`] if the name is not a valid breaker name.
    pub fn breaker(&self, name: &str, template: &str) -> Result<Breaker, RegistryError> {
        let origin = Origin::Template(template.to_owned());
        if let Some(entry) = self.inner.breakers.read().get(name) {
            return Self::same_origin(name, entry, &origin);
        }
        let config = self
            .template(template)
            .ok_or_else(|| RegistryError::UnknownTemplate {
                template: template.to_owned(),
            })?;
        let mut breakers = self.inner.breakers.write();
        // Another thread may have made it while the lock was released.
        if let Some(entry) = breakers.get(name) {
            return Self::same_origin(name, entry, &origin);
        }
        let breaker = config
            .breaker(name)
            .map_err(|source| RegistryError::Config {
                name: name.to_owned(),
                source,
            })?;
        breakers.insert(name.to_owned(), Entry::new(breaker.clone(), origin));
        Ok(breaker)
    }

    fn same_origin(name: &str, entry: &Entry, origin: &Origin) -> Result<Breaker, RegistryError> {
        if entry.origin == *origin {
            Ok(entry.breaker.clone())
        } else {
            Err(RegistryError::Conflict {
                name: name.to_owned(),
                existing: entry.origin.to_string(),
                requested: origin.to_string(),
            })
        }
    }

    /// Adds a breaker built outside the registry, under its own name.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Conflict`] if a breaker by that name is registered.
    pub fn register(&self, breaker: Breaker) -> Result<(), RegistryError> {
        self.insert(breaker, Origin::Outside)
    }

    /// Adds a breaker made from `template`, with settings changed when
    /// `changed` (as a configuration file does).
    #[cfg(feature = "serde")]
    pub(crate) fn register_from_template(
        &self,
        breaker: Breaker,
        template: &str,
        changed: bool,
    ) -> Result<(), RegistryError> {
        let origin = if changed {
            Origin::Changed(template.to_owned())
        } else {
            Origin::Template(template.to_owned())
        };
        self.insert(breaker, origin)
    }

    fn insert(&self, breaker: Breaker, origin: Origin) -> Result<(), RegistryError> {
        let name = breaker.name();
        let mut breakers = self.inner.breakers.write();
        if let Some(entry) = breakers.get(name) {
            return Err(RegistryError::Conflict {
                name: name.to_owned(),
                existing: entry.origin.to_string(),
                requested: origin.to_string(),
            });
        }
        breakers.insert(name.to_owned(), Entry::new(breaker, origin));
        Ok(())
    }

    /// The breaker called `name`, if it is registered.
    pub fn get(&self, name: &str) -> Option<Breaker> {
        self.inner
            .breakers
            .read()
            .get(name)
            .map(|e| e.breaker.clone())
    }

    /// How many breakers are registered.
    pub fn len(&self) -> usize {
        self.inner.breakers.read().len()
    }

    /// Whether no breaker is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every registered breaker, in name order. The list is a copy taken
    /// under the registry's lock, which is released before it returns.
    pub fn breakers(&self) -> Vec<Breaker> {
        self.inner
            .breakers
            .read()
            .values()
            .map(|e| e.breaker.clone())
            .collect()
    }

    /// Every registered breaker with whether it is critical, in name
    /// order, copied under the registry's lock (for readiness and the
    /// Prometheus exposition).
    #[cfg_attr(not(any(feature = "admin", feature = "prometheus")), allow(dead_code))]
    pub(crate) fn breakers_marked(&self) -> Vec<(Breaker, bool)> {
        self.inner
            .breakers
            .read()
            .values()
            .map(|e| (e.breaker.clone(), e.critical))
            .collect()
    }

    /// A snapshot of every registered breaker, in name order.
    ///
    /// Each breaker's lock is taken once, on its own, for its own snapshot:
    /// no lock is held across breakers, and the registry's lock only while
    /// the list is copied.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        self.breakers().iter().map(Breaker::snapshot).collect()
    }

    /// Marks the breaker called `name` as critical (or not): while a critical
    /// breaker refuses calls, [`unready`](Self::unready) names it, and the
    /// admin endpoint's `/health` answers 503.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`].
    pub fn set_critical(&self, name: &str, critical: bool) -> Result<(), RegistryError> {
        match self.inner.breakers.write().get_mut(name) {
            Some(entry) => {
                entry.critical = critical;
                Ok(())
            }
            None => Err(RegistryError::UnknownBreaker {
                name: name.to_owned(),
            }),
        }
    }

    /// Whether the breaker called `name` is marked critical.
    pub fn is_critical(&self, name: &str) -> bool {
        self.inner
            .breakers
            .read()
            .get(name)
            .is_some_and(|e| e.critical)
    }

    /// The critical breakers that are refusing calls (open, half-open or
    /// forced open; forced closed admits every call), in name order: empty
    /// when the process is ready.
    pub fn unready(&self) -> Vec<String> {
        let critical: Vec<Breaker> = self
            .inner
            .breakers
            .read()
            .values()
            .filter(|e| e.critical)
            .map(|e| e.breaker.clone())
            .collect();
        critical
            .iter()
            .filter(|b| refuses_calls(b.state()))
            .map(|b| b.name().to_owned())
            .collect()
    }

    /// Forces the breaker called `name` open (see [`Breaker::force_open`])
    /// and records who asked and why in the audit trail.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`]; nothing changes.
    pub fn force_open(&self, name: &str, request: &Override) -> Result<AuditRecord, RegistryError> {
        self.apply(name, Action::ForceOpen, request)
    }

    /// Forces the breaker called `name` closed (see
    /// [`Breaker::force_closed`]) and records who asked and why in the audit
    /// trail.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`]; nothing changes.
    pub fn force_closed(
        &self,
        name: &str,
        request: &Override,
    ) -> Result<AuditRecord, RegistryError> {
        self.apply(name, Action::ForceClosed, request)
    }

    /// Returns the breaker called `name` to normal operation, closed with
    /// its counters cleared (see [`Breaker::reset`]), and records who asked
    /// and why in the audit trail.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`]; nothing changes.
    pub fn reset(&self, name: &str, request: &Override) -> Result<AuditRecord, RegistryError> {
        self.apply(name, Action::Reset, request)
    }

    /// Declares a one-off maintenance window on the breaker called `name`,
    /// from `start` (`None`: now) to `end` (see
    /// [`Breaker::declare_maintenance`]), and records who asked and why in
    /// the audit trail, like an override.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`], or [`RegistryError::Config`] for a
    /// window the breaker refuses; nothing changes.
    pub fn declare_maintenance(
        &self,
        name: &str,
        request: &Override,
        start: Option<SystemTime>,
        end: WindowEnd,
    ) -> Result<AuditRecord, RegistryError> {
        let breaker = self
            .get(name)
            .ok_or_else(|| RegistryError::UnknownBreaker {
                name: name.to_owned(),
            })?;
        let wall_time = SystemTime::now();
        let window = breaker
            .declare_maintenance(start, end, &request.actor, &request.reason)
            .map_err(|source| RegistryError::Config {
                name: name.to_owned(),
                source,
            })?;
        Ok(self.record(
            &breaker,
            Action::Maintenance,
            request,
            None,
            Some(window),
            (wall_time, breaker.clock_now()),
        ))
    }

    /// Takes the breaker called `name` out of the registry, and records who
    /// asked and why in the audit trail.
    ///
    /// A breaker still in use goes on as before wherever it is held: a
    /// trading thread's clone keeps its state, its counters and its
    /// overrides, and whatever else serves it (a fleet agent, the
    /// health-probe thread) keeps serving it while it lives. Only the
    /// registry lets go: it is no longer in [`breakers`](Self::breakers),
    /// the metrics, [`unready`](Self::unready) or the admin endpoint, an
    /// override by name no longer reaches it, and
    /// [`breaker`](Self::breaker) makes a new, separate breaker under the
    /// name. Its critical mark goes with it.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`]; nothing changes.
    pub fn remove(&self, name: &str, request: &Override) -> Result<AuditRecord, RegistryError> {
        let wall_time = SystemTime::now();
        let entry = self.inner.breakers.write().remove(name).ok_or_else(|| {
            RegistryError::UnknownBreaker {
                name: name.to_owned(),
            }
        })?;
        let at = entry.breaker.clock_now();
        let record = self.record(
            &entry.breaker,
            Action::Remove,
            request,
            None,
            None,
            (wall_time, at),
        );
        log::warn!("{record}");
        Ok(record)
    }

    /// Puts `breaker` in the place of the registered breaker of the same
    /// name, keeping that name's critical mark, and records who asked and
    /// why in the audit trail: for a configuration reload that changes a
    /// breaker's settings. The new breaker counts as registered from
    /// outside the registry ([`register`](Self::register)).
    ///
    /// The breaker replaced goes on as a [removed](Self::remove) one does:
    /// whoever still holds a clone of it (a trading thread that has not
    /// asked the registry again) calls through it, with its own state,
    /// until it lets go; the registry, its metrics, its overrides and the
    /// admin endpoint see only the new one. Nothing carries over between
    /// the two: the new breaker starts closed, with its own counters.
    ///
    /// # Errors
    ///
    /// [`RegistryError::UnknownBreaker`] if no breaker of that name is
    /// registered; nothing changes.
    pub fn replace(
        &self,
        breaker: Breaker,
        request: &Override,
    ) -> Result<AuditRecord, RegistryError> {
        let wall_time = SystemTime::now();
        let old = {
            let mut breakers = self.inner.breakers.write();
            let entry =
                breakers
                    .get_mut(breaker.name())
                    .ok_or_else(|| RegistryError::UnknownBreaker {
                        name: breaker.name().to_owned(),
                    })?;
            entry.origin = Origin::Outside;
            std::mem::replace(&mut entry.breaker, breaker)
        };
        let at = old.clock_now();
        let record = self.record(&old, Action::Replace, request, None, None, (wall_time, at));
        log::warn!("{record}");
        Ok(record)
    }

    /// Appends a record of `action` on `breaker` to the audit trail, with
    /// the next sequence number, and returns it.
    fn record(
        &self,
        breaker: &Breaker,
        action: Action,
        request: &Override,
        expires_after: Option<Duration>,
        window: Option<(SystemTime, SystemTime)>,
        (wall_time, at): (SystemTime, quanta::Instant),
    ) -> AuditRecord {
        let mut trail = self.inner.trail.lock();
        let record = AuditRecord {
            seq: trail.next_seq(),
            breaker: Arc::from(breaker.name()),
            action,
            actor: Arc::clone(&request.actor),
            reason: Arc::clone(&request.reason),
            expires_after,
            window,
            wall_time,
            at,
        };
        trail.push(record.clone());
        record
    }

    fn apply(
        &self,
        name: &str,
        action: Action,
        request: &Override,
    ) -> Result<AuditRecord, RegistryError> {
        let breaker = self
            .get(name)
            .ok_or_else(|| RegistryError::UnknownBreaker {
                name: name.to_owned(),
            })?;
        let wall_time = SystemTime::now();
        let (actor, reason) = (&request.actor, &request.reason);
        let expires_after = match action {
            Action::Reset => None,
            _ => request.expires_after,
        };
        match (action, expires_after) {
            (Action::ForceOpen, None) => breaker.force_open(actor, reason),
            (Action::ForceOpen, Some(d)) => breaker.force_open_for(actor, reason, d),
            (Action::ForceClosed, None) => breaker.force_closed(actor, reason),
            (Action::ForceClosed, Some(d)) => breaker.force_closed_for(actor, reason, d),
            (Action::Reset, _) => breaker.reset(actor, reason),
            // Each has a method of its own, never applied here.
            (Action::Maintenance | Action::Remove | Action::Replace, _) => {}
        }
        // The override's own instant on the breaker's clock, as its state
        // change recorded it.
        let at = breaker
            .snapshot()
            .last_transition
            .map_or_else(|| breaker.clock_now(), |c| c.at);
        let record = self.record(
            &breaker,
            action,
            request,
            expires_after,
            None,
            (wall_time, at),
        );
        log::warn!("{record}");
        Ok(record)
    }

    /// The audit trail: the last overrides made through this registry,
    /// oldest first.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.inner.trail.lock().records()
    }
}

/// Whether a breaker in `state` refuses (most) calls.
/// Whether a breaker in `state` makes the process unready: it refuses
/// calls (open, half-open or forced open).
pub(crate) fn refuses_calls(state: crate::State) -> bool {
    !matches!(state, crate::State::Closed | crate::State::ForcedClosed)
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("templates", &self.inner.templates.read().len())
            .field("breakers", &self.len())
            .finish_non_exhaustive()
    }
}
