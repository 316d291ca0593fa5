//! A recording of call outcomes: its line format, read and written.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

/// What happened to one recorded call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call answered and the classifier counted it a success.
    Success,
    /// The call failed and the classifier counted it against the dependency.
    Failure,
    /// The call ended with an outcome the classifier ignored (the caller's
    /// own error, a deterministic "no"): it decides nothing.
    Ignored,
    /// The breaker in front of the dependency refused the call: nothing was
    /// sent, so its outcome is unknown.
    Refused,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
            Outcome::Refused => "refused",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Outcome {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "success" => Ok(Outcome::Success),
            "failure" => Ok(Outcome::Failure),
            "ignored" => Ok(Outcome::Ignored),
            "refused" => Ok(Outcome::Refused),
            _ => Err(()),
        }
    }
}

/// One recorded call: when it started, how long it took, how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    /// When the call started (or was refused).
    pub start: SystemTime,
    /// How long it took; zero for a refusal.
    pub duration: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

/// Call outcomes in the order they started, read from the line format a
/// replay runs on.
///
/// # The line format
///
/// One call per line, three fields separated by spaces or tabs:
///
/// ```text
/// # fusebox recording: start duration outcome
/// 2026-12-07T14:30:00.125Z 85ms success
/// 2026-12-07T14:30:00.190Z 1.2s failure
/// 2026-12-07T14:30:00.204Z 0s refused
/// ```
///
/// - `start`: an RFC 3339 timestamp (any offset; `Z` for UTC), to the
///   nanosecond;
/// - `duration`: in the crate's one grammar of durations (`85ms`, `1.2s`,
///   `1m30s`, ISO 8601 `PT0.085S`; [`duration`](crate::duration));
/// - `outcome`: `success`, `failure` (counted against the dependency),
///   `ignored` (decides nothing) or `refused` (the breaker in front refused
///   it; nothing was sent).
///
/// Blank lines and lines starting with `#` are skipped, but for one: a
/// line `# outage-from <start>` marks when the outage of an outage
/// recording began, which a run's time to trip is measured from
/// ([`Run::time_to_trip`](super::Run::time_to_trip); without it, from the
/// first failure). Lines need not be
/// in order: the calls are sorted by start (a stable sort, so equal starts
/// keep the file's order). A team can produce the format from its own
/// access logs with one line of `awk`; [`Recording`]'s `Display` writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    calls: Vec<RecordedCall>,
    outage_from: Option<SystemTime>,
}

/// A line of a recording that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("recording line {line}, {field}: {why} (found `{found}`)")]
pub struct RecordingError {
    /// The line, from 1.
    pub line: usize,
    /// `start`, `duration`, `outcome` or `line` (a wrong number of fields).
    pub field: &'static str,
    /// The rule the line broke.
    pub why: String,
    /// What the field held, escaped and bounded.
    pub found: String,
}

impl Recording {
    /// The calls, sorted by start.
    pub fn new(mut calls: Vec<RecordedCall>) -> Self {
        calls.sort_by_key(|c| c.start);
        Recording {
            calls,
            outage_from: None,
        }
    }

    /// Marks when the outage began (`# outage-from` in the line format).
    pub fn with_outage_from(mut self, at: SystemTime) -> Self {
        self.outage_from = Some(at);
        self
    }

    /// When the outage began: the mark, or else the first failure.
    pub fn outage_from(&self) -> Option<SystemTime> {
        self.outage_from.or_else(|| {
            self.calls
                .iter()
                .find(|c| c.outcome == Outcome::Failure)
                .map(|c| c.start)
        })
    }

    /// Reads the line format.
    ///
    /// # Errors
    ///
    /// A [`RecordingError`] naming the first line that breaks the format,
    /// its field and the rule.
    ///
    /// ```
    /// use fusebox::replay::{Outcome, Recording};
    ///
    /// let recording = Recording::parse(
    ///     "2026-12-07T14:30:00Z 80ms success\n2026-12-07T14:30:01Z 2s failure\n",
    /// )?;
    /// assert_eq!(recording.calls().len(), 2);
    /// assert_eq!(recording.calls()[1].outcome, Outcome::Failure);
    /// let err = Recording::parse("2026-12-07T14:30:00Z 80ms maybe").unwrap_err();
    /// assert_eq!((err.line, err.field), (1, "outcome"));
    /// # Ok::<(), fusebox::replay::RecordingError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, RecordingError> {
        let mut calls = Vec::new();
        let mut outage_from = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if let Some(at) = line.strip_prefix("# outage-from ") {
                outage_from = Some(timestamp(i + 1, at.trim())?);
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            calls.push(read_line(i + 1, line)?);
        }
        let recording = Recording::new(calls);
        Ok(match outage_from {
            Some(at) => recording.with_outage_from(at),
            None => recording,
        })
    }

    /// The calls, sorted by start.
    pub fn calls(&self) -> &[RecordedCall] {
        &self.calls
    }

    /// From the first call's start to the last call's end.
    pub fn span(&self) -> Duration {
        let (Some(first), Some(end)) = (self.calls.first(), self.end()) else {
            return Duration::ZERO;
        };
        end.duration_since(first.start).unwrap_or_default()
    }

    /// When the last call to end ended.
    fn end(&self) -> Option<SystemTime> {
        self.calls.iter().map(|c| c.start + c.duration).max()
    }
}

impl fmt::Display for Recording {
    /// The line format, one call per line, times in UTC.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# fusebox recording: start duration outcome")?;
        if let Some(at) = self.outage_from {
            let at = jiff::Timestamp::try_from(at).map_err(|_| fmt::Error)?;
            writeln!(f, "# outage-from {at}")?;
        }
        for c in &self.calls {
            let start = jiff::Timestamp::try_from(c.start).map_err(|_| fmt::Error)?;
            writeln!(
                f,
                "{start} {} {}",
                crate::duration::display(c.duration),
                c.outcome
            )?;
        }
        Ok(())
    }
}

fn error(line: usize, field: &'static str, why: &str, found: &str) -> RecordingError {
    RecordingError {
        line,
        field,
        why: why.to_owned(),
        found: crate::text::shown(found).to_string(),
    }
}

fn timestamp(line: usize, text: &str) -> Result<SystemTime, RecordingError> {
    text.parse::<jiff::Timestamp>()
        .map(SystemTime::from)
        .map_err(|_| error(line, "start", "must be an RFC 3339 timestamp", text))
}

fn read_line(line: usize, text: &str) -> Result<RecordedCall, RecordingError> {
    let err = |field, why: &str, found: &str| error(line, field, why, found);
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [start, duration, outcome] = fields[..] else {
        return Err(err(
            "line",
            "needs three fields: start, duration and outcome",
            text,
        ));
    };
    let start = timestamp(line, start)?;
    let duration =
        crate::duration::parse(duration).map_err(|e| err("duration", &e.to_string(), duration))?;
    let outcome = outcome.parse().map_err(|()| {
        err(
            "outcome",
            "must be success, failure, ignored or refused",
            outcome,
        )
    })?;
    Ok(RecordedCall {
        start,
        duration,
        outcome,
    })
}
