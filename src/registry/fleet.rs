//! Fleet agents held by a registry, so that metrics find them beside the
//! breakers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use super::{Registry, RegistryError};
use crate::fleet::{Fleet, FleetSnapshot};

/// Reads a fleet agent's counters, or `None` once the fleet is dropped.
type Source = Arc<dyn Fn() -> Option<FleetSnapshot> + Send + Sync>;

/// The fleet agents of a registry, by prefix.
#[derive(Default)]
pub(super) struct Fleets {
    all: RwLock<BTreeMap<String, Source>>,
}

impl fmt::Debug for Fleets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleets")
            .field("fleets", &self.all.read().len())
            .finish()
    }
}

impl Registry {
    /// Adds a fleet agent under its prefix, for metrics. The registry does
    /// not keep the agent running: once the [`Fleet`] is dropped, its
    /// figures are no longer reported.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Conflict`] if a fleet with that prefix is
    /// registered and still running.
    pub fn register_fleet(&self, fleet: &Fleet) -> Result<(), RegistryError> {
        let mut all = self.inner.fleets.all.write();
        if all.get(fleet.prefix()).is_some_and(|s| s().is_some()) {
            return Err(RegistryError::Conflict {
                name: fleet.prefix().to_owned(),
                existing: "a fleet already registered".into(),
                requested: "outside the registry".into(),
            });
        }
        all.insert(fleet.prefix().to_owned(), Arc::new(fleet.snapshot_source()));
        Ok(())
    }

    /// The prefix and counters of every registered fleet agent still
    /// running, in prefix order.
    pub fn fleet_snapshots(&self) -> Vec<(String, FleetSnapshot)> {
        let all: Vec<(String, Source)> = self
            .inner
            .fleets
            .all
            .read()
            .iter()
            .map(|(p, s)| (p.clone(), Arc::clone(s)))
            .collect();
        all.into_iter()
            .filter_map(|(p, s)| s().map(|snap| (p, snap)))
            .collect()
    }
}
