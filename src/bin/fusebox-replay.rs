//! `fusebox-replay`: what the breakers of a configuration file would have
//! done over recorded calls, and a sweep of their settings (feature
//! `replay`; docs/tuning.md, "Replay before you deploy").
//!
//! ```text
//! fusebox-replay --config fusebox.toml [--template NAME]... RECORDING
//! fusebox-replay --config fusebox.toml --template NAME --outage OUTAGE \
//!     --vary SETTING=V1,V2,... [--vary ...] HEALTHY
//! ```

use std::process::ExitCode;
use std::time::Duration;

use fusebox::config_file::Loader;
use fusebox::registry::Registry;
use fusebox::replay::{self, Recording, Run};
use fusebox::{BreakerBuilder, Classifier};

const USAGE: &str = "\
usage: fusebox-replay --config FILE [--template NAME]... [--seed N] [--svg FILE] RECORDING
       fusebox-replay --config FILE --template NAME --outage OUTAGE
                      --vary SETTING=V1,V2,... [--vary ...] [--seed N] HEALTHY

Replays recorded calls (one per line: start duration outcome; see the docs of
fusebox::replay::Recording) through the templates of a configuration file, on a
mock clock, and prints what each would have done: trips with their reasons,
probes, closes, calls refused, time open, trips while flapping. With --vary, a
sweep: every combination of the values given, over a healthy and an outage
recording, printed as a table of false trips against time to trip.

  --config FILE          the configuration file (the TOML fusebox::config_file reads)
  --template NAME        a template to replay (repeat for several; default: all)
  --outage FILE          the outage recording of a sweep (RECORDING is the healthy one)
  --vary SETTING=VALUES  a setting of the sweep and its values, comma-separated;
                         SETTING is one of consecutive_failure_threshold,
                         window_failure_threshold, failure_rate_threshold,
                         minimum_calls, failure_window, count_window,
                         slow_call_duration, slow_call_rate_threshold,
                         open_duration; \"off\" switches a threshold off
  --seed N               the jitter's seed (default 1): the same seed, the same output
  --svg FILE             also write the timelines as an SVG picture
";

#[derive(Default)]
struct Args {
    config: Option<String>,
    templates: Vec<String>,
    outage: Option<String>,
    vary: Vec<(String, Vec<String>)>,
    seed: u64,
    svg: Option<String>,
    recording: Option<String>,
}

fn main() -> ExitCode {
    match parse_args(std::env::args().skip(1)).and_then(|a| replay_with(&a)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fusebox-replay: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        seed: 1,
        ..Args::default()
    };
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--config" => a.config = Some(value("--config")?),
            "--template" => a.templates.push(value("--template")?),
            "--outage" => a.outage = Some(value("--outage")?),
            "--svg" => a.svg = Some(value("--svg")?),
            "--seed" => {
                let v = value("--seed")?;
                a.seed = v
                    .parse()
                    .map_err(|_| format!("--seed: `{v}` is not a whole number"))?;
            }
            "--vary" => {
                let v = value("--vary")?;
                let (setting, values) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--vary: `{v}` is not SETTING=V1,V2,..."))?;
                let values: Vec<String> = values.split(',').map(|s| s.trim().to_owned()).collect();
                if values.iter().any(String::is_empty) {
                    return Err(format!("--vary {setting}: an empty value in `{v}`"));
                }
                a.vary.push((setting.to_owned(), values));
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}\n\n{USAGE}")),
            _ if a.recording.is_some() => return Err(format!("one recording only\n\n{USAGE}")),
            _ => a.recording = Some(arg),
        }
    }
    if a.config.is_none() || a.recording.is_none() {
        return Err(USAGE.to_owned());
    }
    if !a.vary.is_empty() && (a.outage.is_none() || a.templates.len() != 1) {
        return Err(format!(
            "a sweep (--vary) needs --outage and exactly one --template\n\n{USAGE}"
        ));
    }
    Ok(a)
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
}

fn recording(path: &str) -> Result<Recording, String> {
    Recording::parse(&read(path)?).map_err(|e| format!("{path}: {e}"))
}

/// The file's templates, by name: each classifier the file names is one
/// that counts every error (the recording holds the verdicts already).
fn templates(path: &str) -> Result<Vec<(String, fusebox::BreakerConfig)>, String> {
    let text = read(path)?;
    let value: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("{path}: {e}"))?;
    let mut loader = Loader::new();
    for section in ["templates", "breakers"] {
        for entry in value
            .get(section)
            .and_then(|t| t.as_table())
            .into_iter()
            .flatten()
        {
            if let Some(name) = entry.1.get("classifier").and_then(|c| c.as_str()) {
                loader = loader.classifier(name, Classifier::every_error_is_a_failure());
            }
        }
    }
    let registry = Registry::new();
    loader
        .load_toml(&text, &registry)
        .map_err(|e| format!("{path}: {e}"))?;
    let mut names: Vec<String> = value
        .get("templates")
        .and_then(|t| t.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let config = registry
                .template(&n)
                .ok_or_else(|| format!("{path}: no template {n}"))?;
            Ok((n, config))
        })
        .collect()
}

fn replay_with(a: &Args) -> Result<String, String> {
    let config = a.config.as_deref().unwrap_or_default();
    let mut all = templates(config)?;
    if !a.templates.is_empty() {
        for t in &a.templates {
            if !all.iter().any(|(n, _)| n == t) {
                let known: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "{config}: no template {t} (the file has {})",
                    known.join(", ")
                ));
            }
        }
        all.retain(|(n, _)| a.templates.contains(n));
    }
    let healthy = recording(a.recording.as_deref().unwrap_or_default())?;
    if let Some(outage) = &a.outage {
        let outage = recording(outage)?;
        let (name, config) = &all[0];
        let candidates = grid(&a.vary)
            .into_iter()
            .map(|point| {
                let mut b = config.to_builder(name.as_str());
                for (setting, v) in &point {
                    b = vary(b, setting, v)?;
                }
                let label: Vec<String> = point.iter().map(|(s, v)| format!("{s}={v}")).collect();
                Ok((label.join(" "), b))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let sweep = replay::sweep(&healthy, &outage, candidates, a.seed)
            .map_err(|e| format!("a point of the sweep does not build: {e}"))?;
        return Ok(sweep.to_string());
    }
    let runs = all
        .iter()
        .map(|(name, config)| replay::run(&healthy, config.to_builder(name.as_str()), a.seed))
        .collect::<Result<Vec<Run>, _>>()
        .map_err(|e| e.to_string())?;
    if let Some(svg) = &a.svg {
        std::fs::write(svg, replay::svg(&healthy, &runs)).map_err(|e| format!("{svg}: {e}"))?;
    }
    Ok(runs.iter().map(ToString::to_string).collect())
}

/// Every combination of the values, the first setting varying slowest.
fn grid(vary: &[(String, Vec<String>)]) -> Vec<Vec<(String, String)>> {
    let mut points = vec![Vec::new()];
    for (setting, values) in vary {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((setting.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    points
}

fn vary(b: BreakerBuilder, setting: &str, value: &str) -> Result<BreakerBuilder, String> {
    let bad = |what: &str| format!("--vary {setting}: `{value}` is not {what}");
    let count = || -> Result<Option<u32>, String> {
        match value {
            "off" => Ok(None),
            v => v
                .parse()
                .map(Some)
                .map_err(|_| bad("a whole number or off")),
        }
    };
    let ratio = || -> Result<Option<f64>, String> {
        match value {
            "off" => Ok(None),
            v => v.parse().map(Some).map_err(|_| bad("a number or off")),
        }
    };
    let duration = || -> Result<Duration, String> {
        fusebox::duration::parse(value).map_err(|e| format!("--vary {setting}: {e}"))
    };
    Ok(match setting {
        "consecutive_failure_threshold" => b.consecutive_failure_threshold(count()?),
        "window_failure_threshold" => b.window_failure_threshold(count()?),
        "failure_rate_threshold" => b.failure_rate_threshold(ratio()?),
        "minimum_calls" => b.minimum_calls(count()?.ok_or_else(|| bad("a whole number"))?),
        "failure_window" => b.failure_window(duration()?),
        "count_window" => b.count_window(count()?),
        "slow_call_duration" => b.slow_call_duration(match value {
            "off" => None,
            _ => Some(duration()?),
        }),
        "slow_call_rate_threshold" => b.slow_call_rate_threshold(ratio()?),
        "open_duration" => b.open_duration(duration()?),
        _ => {
            return Err(format!(
                "--vary: `{setting}` is not a setting a sweep varies\n\n{USAGE}"
            ))
        }
    })
}
