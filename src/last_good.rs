//! The last-known-good store: the last good answer per key, with its age,
//! served only while younger than a bound. One store for the whole crate:
//! a chain's cache link reads it, and the HTTP integration's
//! `http::LastKnownGood` is this store keyed by
//! request (features `chain` or `http`).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// The last good answer to each lookup, bounded in entries and bytes, aged
/// on a `quanta` clock, and served only while younger than `max_staleness`.
///
/// A chain (feature `chain`) files every fresh answer of its providers
/// here and reads it back through a cache link (`ChainBuilder::cache`); a
/// guarded HTTP request (feature `http`) files its 2xx answers in one keyed
/// by request, `http::LastKnownGood`, through
/// `call_or_stale`; an application can also [`file`](Self::file) and
/// [`get`](Self::get) by hand. Cheap to clone: the clones share one store.
///
/// An answer too old to serve is kept (until a fresh one replaces it or the
/// bound pushes it out), so that its age stays known: [`get`](Self::get)
/// then says how old it is ([`Kept::TooOld`]), which tells "never had
/// data" from "had data, 4 s ago".
///
/// ```
/// use fusebox::last_good::{Kept, LastGood};
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
/// | `max_bytes` | 64 MiB, of what the HTTP integration weighs (below) |
/// | `clock` | a real `quanta::Clock` |
///
/// # Cost
///
/// One lock round trip and one clock read per `file` or `get`. Filing
/// under a key already kept replaces the value in place (no allocation
/// beyond the value's own clone); a new key allocates its owned copy, and
/// over a bound, making room scans the entries for the oldest, so keep
/// `max_entries` in the thousands, not millions.
pub struct LastGood<K, V> {
    inner: Arc<Inner<K, V>>,
}

struct Inner<K, V> {
    max_staleness: Duration,
    max_entries: usize,
    max_bytes: usize,
    clock: quanta::Clock,
    store: Mutex<Store<K, V>>,
}

struct Store<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// The weights of the entries kept.
    bytes: usize,
    /// Filing order, so that the oldest entry is well defined even when the
    /// clock has not moved (a mock clock).
    filed: u64,
}

struct Entry<V> {
    value: V,
    stored_at: quanta::Instant,
    /// What the filer said it weighs: a response's key, headers and body;
    /// zero for a value filed with `file`.
    size: usize,
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
                max_bytes: 64 << 20,
                clock: quanta::Clock::new(),
                store: Mutex::new(Store {
                    entries: HashMap::new(),
                    bytes: 0,
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

    /// The most bytes kept, as the filer weighs its values: an HTTP answer
    /// filed by `call_or_stale` weighs its key, headers and body, and one
    /// heavier than this on its own is not kept; a value filed with
    /// [`file`](Self::file) weighs nothing (bound those with
    /// [`max_entries`](Self::max_entries)). The oldest go first. Set it
    /// before cloning the store.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.max_bytes = bytes;
        }
        self
    }

    /// The clock ages are read from: the clock half of `quanta::Clock::mock()`
    /// in tests (the breaker's). Set it before cloning the store.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.clock = clock;
        }
        self
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
            let size = std::mem::take(&mut entry.size);
            entry.filed = filed;
            store.bytes -= size;
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
                size: 0,
                filed,
            },
        );
    }

    /// Files `value`, which weighs `size` bytes, under `key`: the HTTP
    /// integration's filing, with the byte bound. A value heavier than
    /// `max_bytes` on its own is not kept, nor is an older value under the
    /// same key, which is no longer the last known good one.
    // Only the HTTP integration weighs what it files.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn file_weighed(&self, key: K, value: V, size: usize) {
        let inner = &*self.inner;
        let now = inner.clock.now();
        let mut store = inner.store.lock();
        if size > inner.max_bytes || inner.max_entries == 0 {
            store.remove(&key);
            return;
        }
        store.filed += 1;
        let entry = Entry {
            value,
            stored_at: now,
            size,
            filed: store.filed,
        };
        store.bytes += size;
        if let Some(old) = store.entries.insert(key, entry) {
            store.bytes -= old.size;
        }
        while store.entries.len() > inner.max_entries || store.bytes > inner.max_bytes {
            store.evict_oldest();
        }
    }

    /// How long ago the value kept for `key` was filed, served or not.
    // Only the HTTP integration asks for an age without the value.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn age_of<Q>(&self, key: &Q) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.inner.clock.now();
        let store = self.inner.store.lock();
        let entry = store.entries.get(key)?;
        Some(now.saturating_duration_since(entry.stored_at))
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

    /// How many bytes the values kept weigh, as counted against
    /// [`max_bytes`](Self::max_bytes).
    pub fn bytes(&self) -> usize {
        self.inner.store.lock().bytes
    }

    /// Forgets every value.
    pub fn clear(&self) {
        let mut store = self.inner.store.lock();
        store.entries.clear();
        store.bytes = 0;
    }
}

impl<K: Hash + Eq, V> Store<K, V> {
    /// Drops the entry filed first: filing numbers are unique, so a retain
    /// on it removes exactly one entry and needs no clone of the key.
    fn evict_oldest(&mut self) {
        if let Some(oldest) = self.entries.values().map(|e| e.filed).min() {
            let mut freed = 0;
            self.entries.retain(|_, e| {
                let keep = e.filed != oldest;
                if !keep {
                    freed = e.size;
                }
                keep
            });
            self.bytes -= freed;
        }
    }

    /// Drops the entry under `key`, if there is one.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    fn remove<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(e) = self.entries.remove(key) {
            self.bytes -= e.size;
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
            .field("max_bytes", &self.inner.max_bytes)
            .field("entries", &self.inner.store.lock().entries.len())
            .finish_non_exhaustive()
    }
}
