//! Escalating open periods with seedable jitter.
//!
//! The open period after the `n`-th re-open of one outage is
//! `min(max, base × multiplier^n)`, then shortened by a random fraction of at
//! most `jitter` of itself: the period lies in `[d × (1 − jitter), d]`, so
//! `max_open_duration` stays a hard ceiling while a fleet of processes spreads
//! its probes out.

use std::time::Duration;

/// SplitMix64: a tiny, fast, seedable generator. Plenty for jitter; not for
/// anything that needs to be unpredictable to an adversary.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// A seed that differs between processes and between breakers.
    pub(crate) fn random_seed() -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        h.finish()
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The backoff policy, copied out of the validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Backoff {
    pub(crate) base: Duration,
    pub(crate) multiplier: f64,
    pub(crate) max: Duration,
    pub(crate) jitter: f64,
}

impl Backoff {
    /// The open period before jitter after `reopens` re-opens in this outage.
    pub(crate) fn nominal(&self, reopens: u32) -> Duration {
        let factor = self.multiplier.powi(reopens.min(i32::MAX as u32) as i32);
        let secs = self.base.as_secs_f64() * factor;
        if !secs.is_finite() || secs >= self.max.as_secs_f64() {
            self.max
        } else {
            Duration::from_secs_f64(secs).min(self.max)
        }
    }

    /// The open period to use, jitter applied with a draw from `rng`.
    pub(crate) fn period(&self, reopens: u32, rng: &mut Rng) -> Duration {
        let nominal = self.nominal(reopens);
        if self.jitter == 0.0 {
            return nominal;
        }
        let cut = self.jitter * rng.next_unit();
        nominal.mul_f64(1.0 - cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(jitter: f64) -> Backoff {
        Backoff {
            base: Duration::from_secs(1),
            multiplier: 2.0,
            max: Duration::from_secs(30),
            jitter,
        }
    }

    #[test]
    fn grows_by_the_multiplier_and_stops_at_max() {
        let b = policy(0.0);
        let got: Vec<u64> = (0..7).map(|n| b.nominal(n).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.nominal(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn jitter_stays_within_its_ratio() {
        let b = policy(0.25);
        let mut rng = Rng::new(7);
        for n in 0..6 {
            let nominal = b.nominal(n);
            for _ in 0..1_000 {
                let d = b.period(n, &mut rng);
                assert!(d <= nominal, "{d:?} > {nominal:?}");
                assert!(d >= nominal.mul_f64(0.75), "{d:?} below the jitter floor");
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_periods() {
        let b = policy(0.5);
        let (mut r1, mut r2) = (Rng::new(42), Rng::new(42));
        for n in 0..20 {
            assert_eq!(b.period(n % 5, &mut r1), b.period(n % 5, &mut r2));
        }
    }

    #[test]
    fn unit_draws_cover_the_interval() {
        let mut rng = Rng::new(1);
        let draws: Vec<f64> = (0..10_000).map(|_| rng.next_unit()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        assert!(draws.iter().any(|&u| u < 0.05));
        assert!(draws.iter().any(|&u| u > 0.95));
    }
}
