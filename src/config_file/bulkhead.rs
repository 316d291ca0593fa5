//! Bulkheads in a file (feature `isolation`): `[bulkheads.NAME]` with
//! `max_concurrent`, `max_wait`, `adaptive` (a table of the
//! [`AdaptiveLimit`] settings, `{}` for the defaults), `lanes` (a list of
//! `{ name, share }`, the first one the bulkhead's own) and `shed_last`.

use serde::Deserialize;

use super::duration::Human;
use crate::isolation::{AdaptiveLimit, Bulkhead};
use crate::ConfigError;

/// One `[bulkheads.NAME]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BulkheadSettings {
    max_concurrent: Option<usize>,
    max_wait: Option<Human>,
    adaptive: Option<Adaptive>,
    #[serde(default)]
    lanes: Vec<Lane>,
    shed_last: Option<String>,
}

/// `adaptive = { floor = 2, tolerance = 1.5, min_samples = 10,
/// baseline_window = "1m" }`, each optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Adaptive {
    floor: Option<usize>,
    tolerance: Option<f64>,
    min_samples: Option<usize>,
    baseline_window: Option<Human>,
}

/// `{ name = "intraday", share = 0.8 }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Lane {
    name: String,
    share: f64,
}

impl BulkheadSettings {
    /// The bulkhead called `name`, checked by the same `build()` as in
    /// code, timed on `clock` if one is given.
    pub(super) fn build(
        &self,
        name: &str,
        clock: Option<&quanta::Clock>,
    ) -> Result<Bulkhead, ConfigError> {
        let mut b = Bulkhead::builder(name);
        if let Some(n) = self.max_concurrent {
            b = b.max_concurrent(n);
        }
        if let Some(Human(d)) = self.max_wait {
            b = b.max_wait(d);
        }
        if let Some(a) = &self.adaptive {
            let mut limit = AdaptiveLimit::new();
            if let Some(n) = a.floor {
                limit = limit.floor(n);
            }
            if let Some(t) = a.tolerance {
                limit = limit.tolerance(t);
            }
            if let Some(n) = a.min_samples {
                limit = limit.min_samples(n);
            }
            if let Some(Human(d)) = a.baseline_window {
                limit = limit.baseline_window(d);
            }
            b = b.adaptive(limit);
        }
        for lane in &self.lanes {
            b = b.lane(lane.name.as_str(), lane.share);
        }
        if let Some(lane) = &self.shed_last {
            b = b.shed_last(lane.as_str());
        }
        if let Some(clock) = clock {
            b = b.clock(clock.clone());
        }
        b.build()
    }
}
