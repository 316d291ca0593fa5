//! A replay's timeline as an SVG picture.

use std::fmt::Write;
use std::time::Duration;

use super::recording::{Outcome, Recording};
use super::run::Run;
use crate::State;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 160.0;
const LANE: f64 = 26.0;
const BUCKETS: usize = 240;

fn colour(state: State) -> &'static str {
    match state {
        State::Closed => "#4caf50",
        State::Open => "#e53935",
        State::HalfOpen => "#ffb300",
        State::ForcedOpen => "#6d4c41",
        State::ForcedClosed => "#90a4ae",
    }
}

/// The timeline of `runs` over `recording`: on top, the recording's
/// failures as a share of its calls over time; below, one lane per run,
/// coloured by state (closed green, open red, half-open amber, forced open
/// brown, forced closed grey). Deterministic: the same runs draw the same
/// text.
pub fn svg(recording: &Recording, runs: &[Run]) -> String {
    let span = recording.span().max(Duration::from_nanos(1));
    let plot = WIDTH - LEFT - 10.0;
    let x = |at: Duration| LEFT + plot * (at.as_secs_f64() / span.as_secs_f64()).min(1.0);
    let height = 20.0 + LANE * (runs.len() as f64 + 1.0) + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" font-size="12">"#
    );
    // The recording: failures over calls, per bucket.
    let mut calls = [0u32; BUCKETS];
    let mut failures = [0u32; BUCKETS];
    let t0 = recording.calls().first().map(|c| c.start);
    for c in recording.calls() {
        let at = t0
            .and_then(|t0| c.start.duration_since(t0).ok())
            .unwrap_or_default();
        let b = ((at.as_secs_f64() / span.as_secs_f64()) * BUCKETS as f64) as usize;
        let b = b.min(BUCKETS - 1);
        calls[b] += 1;
        failures[b] += u32::from(c.outcome == Outcome::Failure);
    }
    let top = 20.0;
    let _ = writeln!(s, r#"<text x="4" y="{}">failures</text>"#, top + 16.0);
    for b in 0..BUCKETS {
        if calls[b] == 0 {
            continue;
        }
        let share = f64::from(failures[b]) / f64::from(calls[b]);
        let w = plot / BUCKETS as f64;
        let h = (LANE - 4.0) * share;
        let _ = writeln!(
            s,
            r##"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="#e53935"/>"##,
            LEFT + w * b as f64,
            top + LANE - 2.0 - h,
            w,
            h
        );
    }
    for (i, r) in runs.iter().enumerate() {
        let y = top + LANE * (i as f64 + 1.0);
        let _ = writeln!(
            s,
            r#"<text x="4" y="{}">{}</text>"#,
            y + 16.0,
            escape(&r.name)
        );
        let mut from = Duration::ZERO;
        let mut state = State::Closed;
        for c in r
            .changes
            .iter()
            .map(|c| (c.at, c.to))
            .chain([(span, state)])
        {
            let (at, to) = c;
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"/>"#,
                x(from),
                y + 2.0,
                (x(at) - x(from)).max(0.5),
                LANE - 4.0,
                colour(state)
            );
            from = at;
            state = to;
        }
    }
    let y = top + LANE * (runs.len() as f64 + 1.0) + 16.0;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{y}">0</text><text x="{}" y="{y}" text-anchor="end">{}</text>"#,
        WIDTH - 10.0,
        crate::duration::display(span)
    );
    s.push_str("</svg>\n");
    s
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
