//! Fallback chains' counters held by a registry, so that metrics and the
//! admin endpoint find them beside the breakers.

use std::collections::BTreeMap;
use std::fmt;

use parking_lot::RwLock;

use super::{Registry, RegistryError};
use crate::chain::{Chain, ChainSnapshot, ChainStats};

/// The chains a registry reports on.
#[derive(Default)]
pub(super) struct Chains(RwLock<BTreeMap<String, ChainStats>>);

impl fmt::Debug for Chains {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chains")
            .field("chains", &self.0.read().len())
            .finish()
    }
}

impl Registry {
    /// Adds a chain's counters under the chain's name, for metrics:
    /// answers and skips by reason, per link. The registry keeps the
    /// counters only, not the chain and its providers.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Conflict`] if a chain by that name is registered.
    pub fn register_chain<Q: ?Sized, T, E, L>(
        &self,
        chain: &Chain<Q, T, E, L>,
    ) -> Result<(), RegistryError> {
        let chain = chain.stats();
        let mut all = self.inner.chains.0.write();
        if all.contains_key(chain.name()) {
            return Err(RegistryError::Conflict {
                name: chain.name().to_owned(),
                existing: "a chain already registered".into(),
                requested: "outside the registry".into(),
            });
        }
        all.insert(chain.name().to_owned(), chain);
        Ok(())
    }

    /// A snapshot of every registered chain, in name order.
    pub fn chain_snapshots(&self) -> Vec<ChainSnapshot> {
        let all: Vec<ChainStats> = self.inner.chains.0.read().values().cloned().collect();
        all.iter().map(ChainStats::snapshot).collect()
    }
}
