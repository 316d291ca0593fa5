//! Bulkheads, deadline pools and dead-letter buffers held by a registry,
//! so that metrics and the admin endpoint find them beside the breakers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use super::{Registry, RegistryError};
use crate::isolation::{
    Bulkhead, BulkheadSnapshot, DeadLetterSnapshot, DeadLetters, DeadlinePool, DeadlinePoolSnapshot,
};

type Source = Arc<dyn Fn() -> DeadLetterSnapshot + Send + Sync>;
type PoolSource = Arc<dyn Fn() -> DeadlinePoolSnapshot + Send + Sync>;

/// What a registry holds besides breakers.
#[derive(Default)]
pub(super) struct Isolation {
    bulkheads: RwLock<BTreeMap<String, Bulkhead>>,
    dead_letters: RwLock<BTreeMap<String, Source>>,
    deadline_pools: RwLock<BTreeMap<String, PoolSource>>,
}

impl fmt::Debug for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Isolation")
            .field("bulkheads", &self.bulkheads.read().len())
            .field("dead_letters", &self.dead_letters.read().len())
            .field("deadline_pools", &self.deadline_pools.read().len())
            .finish()
    }
}

fn taken(name: &str, what: &str) -> RegistryError {
    RegistryError::Conflict {
        name: name.to_owned(),
        existing: format!("a {what} already registered"),
        requested: "outside the registry".into(),
    }
}

impl Registry {
    /// Adds a bulkhead under its own name, for metrics.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Conflict`] if a bulkhead by that name is registered.
    pub fn register_bulkhead(&self, bulkhead: Bulkhead) -> Result<(), RegistryError> {
        let mut all = self.inner.isolation.bulkheads.write();
        if all.contains_key(bulkhead.name()) {
            return Err(taken(bulkhead.name(), "bulkhead"));
        }
        all.insert(bulkhead.name().to_owned(), bulkhead);
        Ok(())
    }

    /// The bulkhead called `name`, if it is registered.
    pub fn bulkhead(&self, name: &str) -> Option<Bulkhead> {
        self.inner.isolation.bulkheads.read().get(name).cloned()
    }

    /// A snapshot of every registered bulkhead, in name order.
    pub fn bulkhead_snapshots(&self) -> Vec<BulkheadSnapshot> {
        let all: Vec<Bulkhead> = self
            .inner
            .isolation
            .bulkheads
            .read()
            .values()
            .cloned()
            .collect();
        all.iter().map(Bulkhead::snapshot).collect()
    }

    /// Adds a dead-letter buffer under its own name, for metrics.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Conflict`] if a buffer by that name is registered.
    pub fn register_dead_letters<T: Send + 'static>(
        &self,
        buffer: Arc<DeadLetters<T>>,
    ) -> Result<(), RegistryError> {
        let name = buffer.snapshot().name.to_string();
        let mut all = self.inner.isolation.dead_letters.write();
        if all.contains_key(&name) {
            return Err(taken(&name, "dead-letter buffer"));
        }
        all.insert(name, Arc::new(move || buffer.snapshot()));
        Ok(())
    }

    /// A snapshot of every registered dead-letter buffer, in name order.
    pub fn dead_letter_snapshots(&self) -> Vec<DeadLetterSnapshot> {
        let all: Vec<Source> = self
            .inner
            .isolation
            .dead_letters
            .read()
            .values()
            .cloned()
            .collect();
        all.iter().map(|s| s()).collect()
    }

    /// Adds a deadline pool under its own name, for metrics: its calls in
    /// flight, the abandoned ones still holding a thread, and those
    /// abandoned at their deadline. The registry reads the pool's counts
    /// without keeping it alive: dropping the pool still ends its threads
    /// (its metrics then stay at their last values).
    ///
    /// # Errors
    ///
    /// [`RegistryError::Conflict`] if a pool by that name is registered.
    pub fn register_deadline_pool(&self, pool: &DeadlinePool) -> Result<(), RegistryError> {
        let mut all = self.inner.isolation.deadline_pools.write();
        if all.contains_key(pool.name()) {
            return Err(taken(pool.name(), "deadline pool"));
        }
        all.insert(pool.name().to_owned(), Arc::new(pool.watch()));
        Ok(())
    }

    /// A snapshot of every registered deadline pool, in name order.
    pub fn deadline_pool_snapshots(&self) -> Vec<DeadlinePoolSnapshot> {
        let all: Vec<PoolSource> = self
            .inner
            .isolation
            .deadline_pools
            .read()
            .values()
            .cloned()
            .collect();
        all.iter().map(|s| s()).collect()
    }
}
