//! A corporate-actions vendor that a desk must have loaded before the 09:30
//! New York open, and that is down for maintenance every Sunday from 02:00
//! to 06:00 New York time.
//!
//! The week is simulated: the breaker runs on a mock clock that the example
//! moves a minute at a time, from Sunday 01:00 to Monday 09:45, and the
//! vendor's health follows the simulated time. The health-probe thread runs
//! for real: when an open period ends, the example waits for its verdict.
//!
//! What it shows:
//! - Sunday's maintenance: the vendor fails every call, the failures are
//!   neutral, the breaker never opens, and the status reads `maintenance`;
//! - Monday 08:40 the vendor goes down until 09:22; the open period
//!   escalates (10, 30, then 90 minutes, which would probe at 10:50), but
//!   is cut so that the health probe runs at 09:25, five minutes before the
//!   open, with no live request spent on it;
//! - after recovery a five-minute ramp admits a rising share of the desk's
//!   calls.
//!
//! ```sh
//! cargo run --example corporate_actions --features calendar
//! ```

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fusebox::trading::jiff::civil::{date, time, Weekday};
use fusebox::trading::jiff::tz::TimeZone;
use fusebox::trading::jiff::{Timestamp, Zoned};
use fusebox::trading::{Deadlines, HealthProbe, MaintenanceWindow, WallClock, MONDAY_TO_FRIDAY};
use fusebox::{Breaker, CallError, CallPath, Classifier, RampUp, State, StateChange};

const ZONE: &str = "America/New_York";
const MINUTE: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct VendorDown;

impl std::fmt::Display for VendorDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("corporate-actions vendor unavailable")
    }
}

impl std::error::Error for VendorDown {}

/// The simulated vendor: its health as a function of the simulated minute.
#[derive(Clone)]
struct Vendor {
    /// Minutes since Sunday 01:00.
    minute: Arc<AtomicI64>,
}

impl Vendor {
    fn up(&self) -> bool {
        let m = self.minute.load(Ordering::SeqCst);
        let sunday_maintenance = (60..300).contains(&m);
        // Monday 08:40 to 09:22 is 31 h 40 min to 32 h 22 min after Sunday 01:00.
        let monday_outage = (31 * 60 + 40..32 * 60 + 22).contains(&m);
        !(sunday_maintenance || monday_outage)
    }

    fn lookup(&self, isin: &str) -> Result<String, VendorDown> {
        if self.up() {
            Ok(format!("{isin}: 2-for-1 split, ex-date 2026-11-16"))
        } else {
            Err(VendorDown)
        }
    }
}

/// Prints a state change, and when an open breaker will probe.
fn report(stamp: &str, change: &StateChange, breaker: &Breaker, now: &Zoned) {
    println!("{stamp}  {change}");
    if change.to == State::Open {
        let s = breaker.snapshot();
        if let Some(wait) = s.retry_after {
            let at = now.timestamp().as_second() + wait.as_secs() as i64;
            let at = Timestamp::from_second(at).map(|t| t.to_zoned(now.time_zone().clone()));
            if let Ok(at) = at {
                println!(
                    "{stamp}    open for {} min: the health probe runs at {}",
                    s.open_duration.as_secs() / 60,
                    at.strftime("%H:%M")
                );
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tz = TimeZone::get(ZONE)?;
    let start = tz.to_timestamp(date(2026, 11, 8).at(1, 0, 0, 0))?;
    let vendor = Vendor {
        minute: Arc::new(AtomicI64::new(0)),
    };
    let (clock, mock) = fusebox::quanta::Clock::mock();
    let probe_vendor = vendor.clone();
    let breaker = Breaker::builder("corporate-actions")
        .call_path(CallPath::ReferenceData)
        .classifier(Classifier::failures_of::<VendorDown>())
        .clock(clock)
        .wall_clock(WallClock::fixed(SystemTime::from(start)))
        .consecutive_failure_threshold(3)
        .failure_rate_threshold(None)
        .open_duration(10 * MINUTE)
        .backoff_multiplier(3.0)
        .max_open_duration(120 * MINUTE)
        .jitter(0.0)
        .deadlines(Deadlines::daily(
            ZONE,
            [time(9, 30, 0, 0)],
            MONDAY_TO_FRIDAY,
            [date(2026, 11, 26), date(2026, 12, 25)],
        ))
        .probe_lead(5 * MINUTE)
        .maintenance_window(MaintenanceWindow::weekly(
            ZONE,
            Weekday::Sunday,
            time(2, 0, 0, 0),
            4 * 60 * MINUTE,
        ))
        .health_probe(HealthProbe::new(Duration::from_secs(1), move || {
            probe_vendor.lookup("US0378331005")
        }))
        .ramp_up(RampUp::linear(5 * MINUTE, 0.25))
        .build()?;
    let changes = breaker.subscribe(64)?;

    let end = 32 * 60 + 45; // Monday 09:45
    let mut last_status = String::new();
    for minute in 0..=end {
        vendor.minute.store(minute, Ordering::SeqCst);
        let now = Timestamp::from_second(start.as_second() + minute * 60)?.to_zoned(tz.clone());
        let stamp = now.strftime("%a %H:%M %Z").to_string();
        // Past an open period: wait for the probe thread's verdict.
        while breaker.state() == State::HalfOpen {
            match changes.recv_timeout(Duration::from_secs(5)) {
                Some(change) => report(&stamp, &change, &breaker, &now),
                None => break,
            }
        }
        // The desk asks for eight records a minute.
        let (mut served, mut refused, mut failed) = (0, 0, 0);
        for _ in 0..8 {
            match breaker.call(|| vendor.lookup("US0378331005")) {
                Ok(_) => served += 1,
                Err(CallError::Rejected(_)) => refused += 1,
                Err(CallError::Failed(_)) => failed += 1,
            }
        }
        while let Some(change) = changes.try_recv() {
            report(&stamp, &change, &breaker, &now);
        }
        let s = breaker.snapshot();
        let status = format!(
            "{} (served {served}, failed {failed}, refused {refused}{}{})",
            s.status(),
            s.ramp_fraction
                .map(|f| format!(", ramp admits {:.0}%", f * 100.0))
                .unwrap_or_default(),
            if s.neutral_failures > 0 {
                format!(", neutral failures so far {}", s.neutral_failures)
            } else {
                String::new()
            },
        );
        let key = format!("{} {served} {failed} {refused}", s.status());
        if key != last_status || s.ramp_fraction.is_some() {
            println!("{stamp}  {status}");
            last_status = key;
        }
        mock.increment(MINUTE);
    }
    let s = breaker.snapshot();
    println!(
        "\ntrips {}, failures counted {}, failures neutral (maintenance) {}, short-circuited {}",
        s.trips, s.totals.failures, s.neutral_failures, s.totals.short_circuits
    );
    Ok(())
}
