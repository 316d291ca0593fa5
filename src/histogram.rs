//! Call durations as a histogram, for a breaker that already times its
//! calls (slow-call detection or a latency policy): the duration it measured
//! for its own rules is filed here too, with no clock read of its own.

use std::sync::Arc;
use std::time::Duration;

/// The bucket bounds a breaker files its call durations under unless
/// `call_duration_buckets` says otherwise: 100 µs to 10 s, three to a
/// decade (1, 2.5, 5).
pub(crate) const DEFAULT_BUCKETS: [Duration; 16] = [
    Duration::from_micros(100),
    Duration::from_micros(250),
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_micros(2_500),
    Duration::from_millis(5),
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_millis(2_500),
    Duration::from_secs(5),
    Duration::from_secs(10),
];

/// The most bucket bounds `call_duration_buckets` takes.
pub(crate) const MAX_BUCKETS: usize = 64;

/// The durations of a breaker's timed calls: how many took at most each
/// bucket's bound, their count and their sum, as a Prometheus histogram
/// reads them (`fusebox_breaker_call_duration_seconds`).
///
/// Every call that reports an outcome is filed (successes, failures and
/// ignored errors, probes included), with the duration the breaker measured
/// from admission to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallDurations {
    /// The bounds, in nanoseconds, strictly increasing.
    bounds: Arc<[u64]>,
    /// Calls per bucket (not cumulative); the last one holds those above
    /// every bound.
    counts: Box<[u64]>,
    sum: u64,
}

impl CallDurations {
    /// An empty histogram over `bounds` (checked at `build()`: 1 to 64
    /// bounds, strictly increasing, none zero).
    pub(crate) fn new(bounds: &[Duration]) -> Self {
        let bounds: Arc<[u64]> = bounds
            .iter()
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .collect();
        CallDurations {
            counts: vec![0; bounds.len() + 1].into_boxed_slice(),
            bounds,
            sum: 0,
        }
    }

    /// Files a call that took `nanos`.
    #[inline]
    pub(crate) fn observe(&mut self, nanos: u64) {
        let i = self.bounds.partition_point(|&b| b < nanos);
        self.counts[i] += 1;
        self.sum = self.sum.saturating_add(nanos);
    }

    /// Each bucket's bound with the calls that took at most that long
    /// (cumulative, as Prometheus's `le` buckets), in increasing order. The
    /// `+Inf` bucket is [`count`](Self::count).
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.bounds
            .iter()
            .zip(self.counts.iter())
            .scan(0, |seen, (&b, &n)| {
                *seen += n;
                Some((Duration::from_nanos(b), *seen))
            })
    }

    /// Each bucket's bound in seconds with the calls in it alone (not
    /// cumulative), the last one `+Inf`: what `prometheus-client` encodes.
    // Read by the Prometheus exposition only.
    #[allow(dead_code)]
    pub(crate) fn per_bucket_seconds(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let bounds = self.bounds.iter().map(|&b| b as f64 / 1e9);
        bounds
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.counts.iter().copied())
    }

    /// The calls filed.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The time they took together.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_on_a_bound_falls_in_that_bucket_and_the_rest_above_every_bound_in_none() {
        let ms = Duration::from_millis;
        let mut h = CallDurations::new(&[ms(1), ms(10)]);
        for n in [500_000, 1_000_000, 1_000_001, 50_000_000] {
            h.observe(n);
        }
        let b: Vec<_> = h.buckets().collect();
        assert_eq!(b, vec![(ms(1), 2), (ms(10), 3)]);
        assert_eq!(h.count(), 4);
        assert_eq!(h.sum(), Duration::from_nanos(52_500_001));
    }
}
