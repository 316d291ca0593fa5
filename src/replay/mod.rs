//! Replay of recorded calls (feature `replay`): what a configuration
//! would have done on a team's own traffic, learned before it is deployed.
//!
//! A [`Recording`] is a list of call outcomes (start, duration, success,
//! failure, ignored or refused) in a line format a team can also produce
//! from its own logs. [`run`] replays one configuration over it on the
//! quanta mock clock and says what it would have done: every trip with its
//! reason, probes and closes, the calls it would have refused, the time it
//! would have spent open, trips made while flapping. [`sweep`] runs a grid
//! of configurations over a healthy recording (every trip a false one) and
//! an outage recording (how soon it trips), so that a threshold is chosen
//! against the call rate; [`svg`] draws the timelines.
//!
//! The same recording, configuration and seed give the same output: the
//! breaker runs on a mock clock, delivers its changes on the replaying
//! thread and seeds its jitter.
//!
//! What a replay cannot know: the outcome of a call the live breaker
//! refused (the recording says `refused`; nothing was sent). A candidate
//! that would have admitted it counts it as ignored, and the run says how
//! many such calls there were ([`Run::unknown`]). Nor does it know how the
//! vendor would have answered had it been called less: a breaker that
//! opens sooner spares a sick vendor load the recording still holds.
//!
//! The `fusebox-replay` binary runs it from a shell over the team's own
//! configuration file (docs/tuning.md, "Replay before you deploy").
//!
//! ```
//! use fusebox::replay::{self, Recording};
//! use fusebox::{Breaker, CallPath, Classifier};
//! use std::time::Duration;
//!
//! // One call a second for a minute; the vendor fails from second 30 on.
//! let mut healthy = String::new();
//! let mut outage = String::new();
//! for s in 0..60 {
//!     let bad = if s >= 30 { "failure" } else { "success" };
//!     healthy += &format!("2026-12-07T14:30:{s:02}Z 40ms success\n");
//!     outage += &format!("2026-12-07T14:30:{s:02}Z 40ms {bad}\n");
//! }
//! let (healthy, outage) = (Recording::parse(&healthy)?, Recording::parse(&outage)?);
//! let candidates = [3, 10].map(|n| {
//!     let b = Breaker::builder("vendor")
//!         .call_path(CallPath::AltData)
//!         .classifier(Classifier::every_error_is_a_failure())
//!         .consecutive_failure_threshold(n);
//!     (format!("consecutive_failure_threshold={n}"), b)
//! });
//! let sweep = replay::sweep(&healthy, &outage, candidates, 1)?;
//! assert_eq!(sweep.rows[0].healthy.trips, 0);
//! assert_eq!(sweep.rows[0].outage.time_to_trip(), Some(Duration::from_millis(2_040)));
//! assert_eq!(sweep.rows[1].outage.time_to_trip(), Some(Duration::from_millis(9_040)));
//! println!("{sweep}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod recording;
mod run;
mod svg;
mod sweep;

pub use recording::{Outcome, RecordedCall, Recording, RecordingError};
pub use run::{run, Change, Run};
pub use svg::svg;
pub use sweep::{sweep, Sweep, SweepRow};
