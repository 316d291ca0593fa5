//! One test at a time, for the tests that change or count something of the
//! whole process (its environment, its threads, quanta's shared time, a
//! fork): each holds [`alone`] from start to end, so that no other test of
//! its binary runs beside it.

use std::sync::{Mutex, MutexGuard};

static ALONE: Mutex<()> = Mutex::new(());

/// Held for the whole of a test; a test that failed while holding it does
/// not stop the next.
pub fn alone() -> MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}
