//! Maintenance windows declared on a running breaker, by an operator or the
//! admin endpoint: one-off windows added to the schedule under the
//! breaker's lock, converted to the monotonic clock through the same
//! [`Anchor`] as the windows given to the builder.

use std::time::{Duration, SystemTime};

use super::schedule::{Anchor, MaintenanceWindow};
use super::{Plan, Recovering};
use crate::check::check;
use crate::ConfigError;

/// The most maintenance windows a breaker holds: those given to the builder
/// and those declared since, less the ones that have ended.
pub(crate) const MAX_WINDOWS: usize = 64;

/// Where a maintenance window declared on a running breaker ends (see
/// [`Breaker::declare_maintenance`](crate::Breaker::declare_maintenance)).
///
/// Non-exhaustive: a later release may add ways to end a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowEnd {
    /// This long after the window starts.
    After(Duration),
    /// At this wall-clock instant.
    At(SystemTime),
}

impl Recovering {
    /// Adds a one-off window from `start` (`None`: `now`) to `end`, and
    /// returns it in wall-clock time. Windows that have ended are dropped.
    pub(crate) fn declare(
        &mut self,
        now: u64,
        start: Option<SystemTime>,
        end: WindowEnd,
    ) -> Result<(SystemTime, SystemTime), ConfigError> {
        // Set at build, for every breaker: the one wall-clock reading.
        let anchor: Anchor = self.anchor.ok_or(ConfigError::Missing {
            field: "maintenance_window",
            why: "a window can be declared only on a built breaker",
        })?;
        let wall_now = anchor.to_wall(now);
        let start = start.unwrap_or(wall_now);
        let end = match end {
            WindowEnd::At(end) => end,
            WindowEnd::After(lasting) => {
                check(
                    "maintenance_window",
                    !lasting.is_zero(),
                    "must last longer than zero",
                    "0s",
                )?;
                start.checked_add(lasting).ok_or(ConfigError::Invalid {
                    field: "maintenance_window",
                    rule: "must end within the range of the system clock",
                    value: format!("{} after {start:?}", crate::duration::display(lasting)),
                })?
            }
        };
        MaintenanceWindow::once(start, end).validate()?;
        check(
            "maintenance_window",
            end > wall_now,
            "must end after now",
            format_args!("{end:?}"),
        )?;
        let plan = self.plan.get_or_insert_with(|| {
            Box::new(Plan {
                anchor,
                windows: Vec::new(),
                deadlines: Vec::new(),
                lead: 0,
                ended: None,
            })
        });
        // The windows that have ended are dropped; the last end is kept,
        // from which a call out through it is aged (`Plan::last_end`).
        let ended = plan
            .windows
            .iter()
            .filter(|w| w.around_or_after(wall_now).is_none())
            .filter_map(|w| w.ended_by(wall_now))
            .max();
        plan.ended = plan.ended.max(ended);
        plan.windows
            .retain(|w| w.around_or_after(wall_now).is_some());
        check(
            "maintenance_window",
            plan.windows.len() < MAX_WINDOWS,
            "a breaker holds at most 64 windows that have not ended",
            plan.windows.len(),
        )?;
        plan.windows.push(MaintenanceWindow::once(start, end));
        Ok((start, end))
    }
}
