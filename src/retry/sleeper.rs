//! The wait between attempts, behind a seam that tests replace.

use std::fmt;
use std::time::Duration;

/// How a [`RetryPolicy`](super::RetryPolicy) waits between attempts.
///
/// Production uses `std::thread::sleep` (any `Fn(Duration)` is a sleeper,
/// `std::thread::sleep` included). A test passes
/// a closure that moves the mock clock instead, so that a retry loop runs
/// on the mock clock without sleeping and every attempt's time is exact:
///
/// ```
/// use fusebox::retry::Sleeper;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let (_clock, time) = quanta::Clock::mock();
/// let time = Arc::new(time);
/// let sleeper = {
///     let time = Arc::clone(&time);
///     move |d: Duration| time.increment(d)
/// };
/// sleeper.sleep(Duration::from_millis(250));
/// ```
pub trait Sleeper: Send + Sync {
    /// Waits `duration`.
    fn sleep(&self, duration: Duration);
}

/// Sleeps the calling thread with `std::thread::sleep`: the default.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ThreadSleeper;

impl Sleeper for ThreadSleeper {
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl<F: Fn(Duration) + Send + Sync> Sleeper for F {
    fn sleep(&self, duration: Duration) {
        self(duration);
    }
}

/// A sleeper, boxed for the policy.
pub(super) struct Boxed(pub(super) Box<dyn Sleeper>);

impl fmt::Debug for Boxed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sleeper(..)")
    }
}
