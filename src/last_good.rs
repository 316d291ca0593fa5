//! The last-known-good store: the last good answer per key, with its age,
//! served only while younger than a bound.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// The last good answer to each lookup, bounded in entries, aged on a
/// `quanta` clock, and served only while younger than `max_staleness`.
///
/// A [`Chain`](crate::chain::Chain) files every fresh answer of its
/// providers here and reads it back through a cache link
/// ([`ChainBuilder::cache`](crate::chain::ChainBuilder::cache)); an
/// application can also [`file`](Self::file) and [`get`](Self::get) by
/// hand. Cheap to clone: the clones share one store.
///
/// An answer too old to serve is kept (until a fresh one replaces it or the
/// bound pushes it out), so that its age stays known: [`get`](Self::get)
/// then says how old it is ([`Kept::TooOld`]), which tells "never had
/// data" from "had data, 4 s ago".
///
/// ```
/// use fusebox::chain::{Kept, LastGood};
/// use std::time::Duration;
///
/// let (clock, time) = quanta::Clock::mock();
/// let store: LastGood<String, f64> = LastGood::new(Duration::from_secs(30)).clock(clock);
/// store.file("EURUSD", &1.0842);
/// time.increment(Duration::from_secs(5));
/// assert_eq!(store.get("EURUSD"), Kept::Fresh { value: 1.0842, age: Duration::from_secs(5) });
/// time.increment(Duration::from_secs(60));
/// assert_eq!(store.get("EURUSD"), Kept::TooOld { age: Duration::from_secs(65) });
/// assert_eq!(store.get("GBPUSD"), Kept::Missing);
/// ```
///
/// # Default
///
/// | setting | default |
/// |---|---|
/// | `max_staleness` | required, in [`new`](Self::new) |
/// | `max_entries` | 1024 |
/// | `clock` | a real `quanta::Clock` |
///
/// # Cost
///
/// One lock round trip and one clock read per `file` or `get`. Filing
/// under a key already kept replaces the value in place (no allocation
/// beyond the value's own clone); a new key allocates its owned copy, and
/// over the bound, making room scans the entries for the oldest, so keep
/// `max_entries` in the thousands, not millions.
pub struct LastGood<K, V> {
    inner: Arc<Inner<K, V>>,
}

struct Inner<K, V> {
    max_staleness: Duration,
    max_entries: usize,
    clock: quanta::Clock,
    store: Mutex<Store<K, V>>,
}

struct Store<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Filing order, so that the oldest entry is well defined even when the
    /// clock has not moved (a mock clock).
    filed: u64,
}

struct Entry<V> {
    value: V,
    stored_at: quanta::Instant,
    filed: u64,
}

/// What a [`LastGood`] store holds for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept<V> {
    /// A value young enough to serve, and how long ago it was filed.
    Fresh {
        /// The value, cloned out of the store.
        value: V,
        /// Time since it was filed, on the store's clock.
        age: Duration,
    },
    /// A value is kept but is older than `max_staleness`: never served.
    TooOld {
        /// Time since it was filed.
        age: Duration,
    },
    /// Nothing is kept for this key.
    Missing,
}

impl<K: Hash + Eq, V: Clone> LastGood<K, V> {
    /// An empty store that never serves a value older than `max_staleness`.
    /// Zero means nothing is ever served, not even a value filed this
    /// instant; values are still filed, so that their age stays known.
    pub fn new(max_staleness: Duration) -> Self {
        LastGood {
            inner: Arc::new(Inner {
                max_staleness,
                max_entries: 1024,
                clock: quanta::Clock::new(),
                store: Mutex::new(Store {
                    entries: HashMap::new(),
                    filed: 0,
                }),
            }),
        }
    }

    /// The most values kept; the oldest go first. Zero keeps none. Set it
    /// before cloning the store: it changes only a store not yet shared.
    pub fn max_entries(mut self, entries: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.max_entries = entries;
        }
        self
    }

    /// The clock ages are read from: the clock half of `quanta::Clock::mock()`
    /// in tests. Set it before cloning the store.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.clock = clock;
        }
        self
    }

    /// The longest a value may have been kept and still be served.
    pub fn max_staleness(&self) -> Duration {
        self.inner.max_staleness
    }

    /// Files `value` as the last good answer for `key`, replacing the one
    /// kept (in place, when the key is already kept).
    pub fn file<Q>(&self, key: &Q, value: &V)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let inner = &*self.inner;
        if inner.max_entries == 0 {
            return;
        }
        let now = inner.clock.now();
        let mut store = inner.store.lock();
        store.filed += 1;
        let filed = store.filed;
        if let Some(entry) = store.entries.get_mut(key) {
            entry.value.clone_from(value);
            entry.stored_at = now;
            entry.filed = filed;
            return;
        }
        while store.entries.len() >= inner.max_entries {
            store.evict_oldest();
        }
        store.entries.insert(
            key.to_owned(),
            Entry {
                value: value.clone(),
                stored_at: now,
                filed,
            },
        );
    }

    /// The value kept for `key`, if young enough to serve, with its age.
    pub fn get<Q>(&self, key: &Q) -> Kept<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let inner = &*self.inner;
        let now = inner.clock.now();
        let store = inner.store.lock();
        let Some(entry) = store.entries.get(key) else {
            return Kept::Missing;
        };
        let age = now.saturating_duration_since(entry.stored_at);
        // Zero staleness serves nothing, not even a value aged zero (a mock
        // clock that has not moved).
        if !inner.max_staleness.is_zero() && age <= inner.max_staleness {
            Kept::Fresh {
                value: entry.value.clone(),
                age,
            }
        } else {
            Kept::TooOld { age }
        }
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.inner.store.lock().entries.len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every value.
    pub fn clear(&self) {
        self.inner.store.lock().entries.clear();
    }
}

impl<K: Hash + Eq, V> Store<K, V> {
    /// Drops the entry filed first: filing numbers are unique, so a retain
    /// on it removes exactly one entry and needs no clone of the key.
    fn evict_oldest(&mut self) {
        if let Some(oldest) = self.entries.values().map(|e| e.filed).min() {
            self.entries.retain(|_, e| e.filed != oldest);
        }
    }
}

impl<K, V> Clone for LastGood<K, V> {
    fn clone(&self) -> Self {
        LastGood {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K, V> fmt::Debug for LastGood<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LastGood")
            .field("max_staleness", &self.inner.max_staleness)
            .field("max_entries", &self.inner.max_entries)
            .field("entries", &self.inner.store.lock().entries.len())
            .finish_non_exhaustive()
    }
}
