//! A grid of configurations, each run over a healthy and an outage
//! recording.

use std::fmt;

use super::recording::Recording;
use super::run::{run, Run};
use crate::{BreakerBuilder, ConfigError};

/// One configuration of a sweep, over both recordings.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    /// What the configuration varies (`failure_window=30s
    /// consecutive_failure_threshold=5`).
    pub point: String,
    /// Its run over the healthy recording: every trip is a false one.
    pub healthy: Run,
    /// Its run over the outage recording.
    pub outage: Run,
}

/// Every configuration of a sweep; prints as a table.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// One row per configuration, in the order given.
    pub rows: Vec<SweepRow>,
}

/// Runs each `(point, candidate)` over `healthy` and over `outage` (each
/// run on a mock clock of its own, jitter seeded with `seed`): how often a
/// threshold trips on the team's ordinary traffic against how soon it
/// trips in an outage, so it is chosen against the call rate.
///
/// # Errors
///
/// The [`ConfigError`] of the first candidate that does not build.
pub fn sweep(
    healthy: &Recording,
    outage: &Recording,
    candidates: impl IntoIterator<Item = (String, BreakerBuilder)>,
    seed: u64,
) -> Result<Sweep, ConfigError> {
    let rows = candidates
        .into_iter()
        .map(|(point, candidate)| {
            Ok(SweepRow {
                point,
                healthy: run(healthy, candidate.clone(), seed)?,
                outage: run(outage, candidate, seed)?,
            })
        })
        .collect::<Result<_, ConfigError>>()?;
    Ok(Sweep { rows })
}

impl fmt::Display for Sweep {
    /// A table: per configuration, the healthy recording's false trips,
    /// flapping trips and refusals, and the outage recording's time to trip
    /// (from its first failure) and refusals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = crate::duration::display;
        let width = self
            .rows
            .iter()
            .map(|r| r.point.len())
            .max()
            .unwrap_or(0)
            .max(5);
        writeln!(
            f,
            "{:<width$}  {:>11} {:>8} {:>15}  {:>12} {:>15}",
            "point", "false trips", "flapping", "healthy refused", "time to trip", "outage refused"
        )?;
        for r in &self.rows {
            let trip = r
                .outage
                .time_to_trip()
                .map_or_else(|| "never".to_owned(), |t| d(t).to_string());
            writeln!(
                f,
                "{:<width$}  {:>11} {:>8} {:>15}  {:>12} {:>15}",
                r.point,
                r.healthy.trips,
                r.healthy.flapping_trips,
                r.healthy.refused,
                trip,
                r.outage.refused
            )?;
        }
        Ok(())
    }
}
