//! A registry's templates and breakers from a configuration file: TOML, or
//! anything serde reads.
//!
//! Every setting of [`BreakerBuilder`] that is a value can be given by its
//! name, durations as text in the crate's one grammar ([`crate::duration`]:
//! `"250ms"`, `"4.1s"`, `"1m30s"`, `"1h 30m"`, `"PT30S"`), a setting that
//! can be off as `"off"`, [`delivery`](BreakerBuilder::delivery) as
//! `"caller"` or `"notifier"`, [`half_open_rate`](BreakerBuilder::half_open_rate)
//! as a table `{ probes = 10, failure_rate_threshold = 0.5 }`. The settings
//! that are code are not in a file: a classifier is named, and the
//! application hands it to the [`Loader`] under that name;
//! `result_classifier`, `trip_predicate`, `open_period`, `on_state_change`,
//! `health_probe` and the clocks are set in code (on a template's
//! [`BreakerConfig`] builder, or the loader's `clock` and `wall_clock`).
//! Unknown fields are an error, and every value is checked by the same
//! `build()` as in code; an error names the template or breaker, the field
//! and the rule, and a file with any error adds nothing to the registry.
//!
//! ```
//! use fusebox::registry::Registry;
//! use fusebox::config_file::Loader;
//! use fusebox::Classifier;
//!
//! let registry = Registry::new();
//! Loader::new()
//!     .classifier("transport", Classifier::every_error_is_a_failure())
//!     .load_toml(r#"
//!         [templates.vendor]
//!         call_path = "alt_data"
//!         classifier = "transport"
//!         consecutive_failure_threshold = 3
//!         failure_rate_threshold = "off"
//!         open_duration = "30s"
//!
//!         [breakers.news]
//!         template = "vendor"
//!         critical = true
//!
//!         [breakers.satellite]
//!         template = "vendor"
//!         open_duration = "2m"
//!         max_open_duration = "10m"
//!     "#, &registry)?;
//! assert_eq!(registry.len(), 2);
//! assert!(registry.is_critical("news"));
//! # Ok::<(), fusebox::config_file::FileError>(())
//! ```
//!
//! With the `isolation` feature a file also declares bulkheads,
//! `[bulkheads.NAME]` (`max_concurrent`, `max_wait`, `adaptive` as a table
//! of [`AdaptiveLimit`](crate::isolation::AdaptiveLimit)'s settings,
//! `lanes` as a list of `{ name, share }`, `shed_last`), registered with
//! the registry under their names.
//!
//! `examples/ops.toml` is a documented example; `examples/trading.toml`
//! documents the trading-aware settings (`ramp_up`, `maintenance_window`,
//! `deadlines`, `probe_lead`, `short_circuit_in_maintenance`), with
//! instants in RFC 3339 and, under the `calendar` feature, weekly windows
//! and daily deadlines in a named time zone.

#[cfg(feature = "isolation")]
mod bulkhead;
mod duration;
mod error;
mod trading;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;

pub use error::FileError;

use crate::registry::{Registry, RegistryError};
use crate::trading::WallClock;
use crate::{
    BreakerBuilder, BreakerConfig, CallPath, Classifier, ConfigError, Delivery, HalfOpenRate,
    LatencyTrip,
};
use duration::{Human, OrOff};

/// A configuration file's contents, as serde reads them.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryFile {
    /// Named templates, from which breakers are made.
    #[serde(default)]
    templates: BTreeMap<String, Settings>,
    /// Named breakers, each from a template, with a setting or two changed.
    #[serde(default)]
    breakers: BTreeMap<String, Settings>,
    /// Named bulkheads (feature `isolation`).
    #[cfg(feature = "isolation")]
    #[serde(default)]
    bulkheads: BTreeMap<String, bulkhead::BulkheadSettings>,
}

/// Every builder setting, each optional: the builder's default applies to
/// what is left out.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// Breakers only: the template it is made from.
    template: Option<String>,
    /// Breakers only: whether `/health` depends on it.
    critical: Option<bool>,
    call_path: Option<String>,
    classifier: Option<String>,
    consecutive_failure_threshold: Option<OrOff<u32>>,
    failure_window: Option<Human>,
    window_failure_threshold: Option<OrOff<u32>>,
    failure_rate_threshold: Option<OrOff<f64>>,
    minimum_calls: Option<u32>,
    slow_call_duration: Option<OrOff<Human>>,
    slow_call_rate_threshold: Option<OrOff<f64>>,
    latency_trip: Option<Latency>,
    open_duration: Option<Human>,
    backoff_multiplier: Option<f64>,
    max_open_duration: Option<Human>,
    jitter: Option<f64>,
    jitter_seed: Option<u64>,
    half_open_max_concurrent: Option<u32>,
    half_open_success_threshold: Option<u32>,
    max_probe_duration: Option<Human>,
    flapping_trips: Option<OrOff<u32>>,
    flapping_window: Option<Human>,
    count_window: Option<OrOff<u32>>,
    closed_interval: Option<OrOff<Human>>,
    half_open_max_probes: Option<OrOff<u32>>,
    half_open_rate: Option<Rate>,
    count_calls_in_flight: Option<bool>,
    stuck_call_threshold: Option<OrOff<u32>>,
    hung_call_duration: Option<OrOff<Human>>,
    call_duration_buckets: Option<Vec<Human>>,
    event_log_capacity: Option<usize>,
    delivery: Option<DeliveryName>,
    ramp_up: Option<trading::Ramp>,
    /// Added to the template's windows, if any.
    maintenance_window: Option<Vec<trading::Window>>,
    short_circuit_in_maintenance: Option<bool>,
    /// Added to the template's deadlines, if any.
    deadlines: Option<Vec<trading::Deadline>>,
    probe_lead: Option<Human>,
}

/// `half_open_rate`: a round of probes judged by their failure rate.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rate {
    probes: u32,
    failure_rate_threshold: f64,
}

/// `delivery`, by name.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum DeliveryName {
    Caller,
    Notifier,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Latency {
    percentile: Option<f64>,
    threshold: Option<Human>,
    window: Option<Human>,
    consecutive_windows: Option<u32>,
    error_rate: Option<OrOff<f64>>,
    minimum_samples: Option<u32>,
    capacity: Option<usize>,
}

/// Loads configuration files into registries, with the classifiers (and,
/// in tests, the clock) that a file cannot hold.
#[derive(Clone, Default)]
pub struct Loader {
    classifiers: HashMap<String, Classifier>,
    clock: Option<quanta::Clock>,
    wall_clock: Option<WallClock>,
}

impl fmt::Debug for Loader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader")
            .field("classifiers", &self.known())
            .finish_non_exhaustive()
    }
}

impl Loader {
    /// A loader that knows no classifier yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `classifier` available to files as `classifier = "name"`.
    pub fn classifier(
        mut self,
        name: impl Into<String>,
        classifier: impl Into<Classifier>,
    ) -> Self {
        self.classifiers.insert(name.into(), classifier.into());
        self
    }

    /// Gives every template and bulkhead this clock (`quanta::Clock::mock()`
    /// in tests).
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Gives every template this wall clock, which maintenance windows and
    /// deadlines are scheduled by (`WallClock::fixed` in tests).
    pub fn wall_clock(mut self, clock: WallClock) -> Self {
        self.wall_clock = Some(clock);
        self
    }

    fn known(&self) -> String {
        let mut names: Vec<&str> = self.classifiers.keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// Adds what the TOML text describes to `registry` (a new one is
    /// `Registry::new()`; one that holds breakers made in code takes the
    /// file's beside them).
    ///
    /// # Errors
    ///
    /// A [`FileError`] naming the table, the field and the rule (a TOML
    /// syntax error with its line and column); nothing is added on error.
    pub fn load_toml(&self, text: &str, registry: &Registry) -> Result<(), FileError> {
        let file: RegistryFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        self.load(file, registry)
    }

    /// Adds a file read by any serde format to `registry`.
    ///
    /// # Errors
    ///
    /// A [`FileError`] naming the template or breaker, the field and the
    /// rule; nothing is added on error.
    pub fn load(&self, file: RegistryFile, registry: &Registry) -> Result<(), FileError> {
        // Everything is built and checked before anything is added.
        let mut templates = BTreeMap::new();
        for (name, settings) in &file.templates {
            let entry = format!("template `{name}`");
            for (field, given) in [
                ("template", settings.template.is_some()),
                ("critical", settings.critical.is_some()),
            ] {
                if given {
                    return Err(FileError::Config {
                        entry,
                        source: ConfigError::Invalid {
                            field,
                            rule: "is a setting of breakers, not of templates",
                            value: "given".into(),
                        },
                    });
                }
            }
            if registry.template(name).is_some() {
                return Err(RegistryError::DuplicateTemplate {
                    template: name.clone(),
                }
                .into());
            }
            let mut builder = BreakerConfig::builder();
            if let Some(clock) = &self.clock {
                builder = builder.clock(clock.clone());
            }
            if let Some(clock) = &self.wall_clock {
                builder = builder.wall_clock(clock.clone());
            }
            let config = self
                .apply(&entry, settings, builder)?
                .build()
                .map_err(|source| FileError::Config { entry, source })?;
            templates.insert(name.clone(), config);
        }
        let mut breakers = Vec::new();
        for (name, b) in &file.breakers {
            let entry = format!("breaker `{name}`");
            let template = b.template.as_deref().ok_or_else(|| FileError::Config {
                entry: entry.clone(),
                source: ConfigError::Missing {
                    field: "template",
                    why: "name the template the breaker is made from",
                },
            })?;
            let config =
                match templates.get(template) {
                    Some(config) => config.clone(),
                    None => registry.template(template).ok_or_else(|| {
                        RegistryError::UnknownTemplate {
                            template: template.to_owned(),
                        }
                    })?,
                };
            if registry.get(name).is_some() {
                return Err(RegistryError::Conflict {
                    name: name.clone(),
                    existing: "a breaker already in the registry".into(),
                    requested: "the file".into(),
                }
                .into());
            }
            let breaker = self
                .apply(&entry, b, config.to_builder(name.as_str()))?
                .build()
                .map_err(|source| FileError::Config {
                    entry: entry.clone(),
                    source,
                })?;
            breakers.push((breaker, template, b));
        }
        #[cfg(feature = "isolation")]
        let bulkheads = self.bulkheads(&file, registry)?;
        for (name, config) in templates {
            registry.add_template(name, config)?;
        }
        for (breaker, template, b) in breakers {
            let name = breaker.name().to_owned();
            registry.register_from_template(breaker, template, b.changes_any())?;
            if b.critical == Some(true) {
                registry.set_critical(&name, true)?;
            }
        }
        #[cfg(feature = "isolation")]
        for bulkhead in bulkheads {
            registry.register_bulkhead(bulkhead)?;
        }
        Ok(())
    }

    /// The file's bulkheads, built and checked against the registry's.
    #[cfg(feature = "isolation")]
    fn bulkheads(
        &self,
        file: &RegistryFile,
        registry: &Registry,
    ) -> Result<Vec<crate::isolation::Bulkhead>, FileError> {
        let mut built = Vec::new();
        for (name, settings) in &file.bulkheads {
            let entry = format!("bulkhead `{name}`");
            let bulkhead = settings
                .build(name, self.clock.as_ref())
                .map_err(|source| FileError::Config { entry, source })?;
            if registry.bulkhead(name).is_some() {
                return Err(RegistryError::Conflict {
                    name: name.clone(),
                    existing: "a bulkhead already in the registry".into(),
                    requested: "the file".into(),
                }
                .into());
            }
            built.push(bulkhead);
        }
        Ok(built)
    }

    fn apply<T>(
        &self,
        entry: &str,
        s: &Settings,
        mut b: BreakerBuilder<T>,
    ) -> Result<BreakerBuilder<T>, FileError> {
        if let Some(path) = &s.call_path {
            b = b.call_path(call_path(path));
        }
        if let Some(name) = &s.classifier {
            let classifier =
                self.classifiers
                    .get(name)
                    .ok_or_else(|| FileError::UnknownClassifier {
                        entry: entry.to_owned(),
                        name: name.clone(),
                        known: self.known(),
                    })?;
            b = b.classifier(classifier.clone());
        }
        if let Some(v) = s.consecutive_failure_threshold {
            b = b.consecutive_failure_threshold(v.into_option());
        }
        if let Some(Human(d)) = s.failure_window {
            b = b.failure_window(d);
        }
        if let Some(v) = s.window_failure_threshold {
            b = b.window_failure_threshold(v.into_option());
        }
        if let Some(v) = s.failure_rate_threshold {
            b = b.failure_rate_threshold(v.into_option());
        }
        if let Some(n) = s.minimum_calls {
            b = b.minimum_calls(n);
        }
        if let Some(v) = s.slow_call_duration {
            b = b.slow_call_duration(v.into_option().map(|h| h.0));
        }
        if let Some(v) = s.slow_call_rate_threshold {
            b = b.slow_call_rate_threshold(v.into_option());
        }
        if let Some(l) = &s.latency_trip {
            b = b.latency_trip(l.policy());
        }
        if let Some(Human(d)) = s.open_duration {
            b = b.open_duration(d);
        }
        if let Some(m) = s.backoff_multiplier {
            b = b.backoff_multiplier(m);
        }
        if let Some(Human(d)) = s.max_open_duration {
            b = b.max_open_duration(d);
        }
        if let Some(j) = s.jitter {
            b = b.jitter(j);
        }
        if let Some(seed) = s.jitter_seed {
            b = b.jitter_seed(seed);
        }
        if let Some(n) = s.half_open_max_concurrent {
            b = b.half_open_max_concurrent(n);
        }
        if let Some(n) = s.half_open_success_threshold {
            b = b.half_open_success_threshold(n);
        }
        if let Some(Human(d)) = s.max_probe_duration {
            b = b.max_probe_duration(d);
        }
        if let Some(v) = s.flapping_trips {
            b = b.flapping_trips(v.into_option());
        }
        if let Some(Human(d)) = s.flapping_window {
            b = b.flapping_window(d);
        }
        if let Some(v) = s.count_window {
            b = b.count_window(v.into_option());
        }
        if let Some(v) = s.closed_interval {
            b = b.closed_interval(v.into_option().map(|h| h.0));
        }
        if let Some(v) = s.half_open_max_probes {
            b = b.half_open_max_probes(v.into_option());
        }
        if let Some(r) = s.half_open_rate {
            b = b.half_open_rate(HalfOpenRate {
                probes: r.probes,
                failure_rate_threshold: r.failure_rate_threshold,
            });
        }
        if let Some(yes) = s.count_calls_in_flight {
            b = b.count_calls_in_flight(yes);
        }
        if let Some(v) = s.stuck_call_threshold {
            b = b.stuck_call_threshold(v.into_option());
        }
        if let Some(v) = s.hung_call_duration {
            b = b.hung_call_duration(v.into_option().map(|h| h.0));
        }
        if let Some(bounds) = &s.call_duration_buckets {
            b = b.call_duration_buckets(bounds.iter().map(|h| h.0).collect::<Vec<_>>());
        }
        if let Some(n) = s.event_log_capacity {
            b = b.event_log_capacity(n);
        }
        if let Some(d) = s.delivery {
            b = b.delivery(match d {
                DeliveryName::Caller => Delivery::Caller,
                DeliveryName::Notifier => Delivery::Notifier,
            });
        }
        let config = |source| FileError::Config {
            entry: entry.to_owned(),
            source,
        };
        if let Some(r) = &s.ramp_up {
            b = b.ramp_up(r.ramp());
        }
        for w in s.maintenance_window.iter().flatten() {
            b = b.maintenance_window(w.window().map_err(config)?);
        }
        if let Some(yes) = s.short_circuit_in_maintenance {
            b = b.short_circuit_in_maintenance(yes);
        }
        for d in s.deadlines.iter().flatten() {
            b = b.deadlines(d.deadlines().map_err(config)?);
        }
        if let Some(Human(d)) = s.probe_lead {
            b = b.probe_lead(d);
        }
        Ok(b)
    }
}

impl Settings {
    /// Whether any setting is given (a breaker entry that changes its
    /// template).
    fn changes_any(&self) -> bool {
        let Settings {
            template: _,
            critical: _,
            call_path,
            classifier,
            consecutive_failure_threshold,
            failure_window,
            window_failure_threshold,
            failure_rate_threshold,
            minimum_calls,
            slow_call_duration,
            slow_call_rate_threshold,
            latency_trip,
            open_duration,
            backoff_multiplier,
            max_open_duration,
            jitter,
            jitter_seed,
            half_open_max_concurrent,
            half_open_success_threshold,
            max_probe_duration,
            flapping_trips,
            flapping_window,
            count_window,
            closed_interval,
            half_open_max_probes,
            half_open_rate,
            count_calls_in_flight,
            stuck_call_threshold,
            hung_call_duration,
            call_duration_buckets,
            event_log_capacity,
            delivery,
            ramp_up,
            maintenance_window,
            short_circuit_in_maintenance,
            deadlines,
            probe_lead,
        } = self;
        call_path.is_some()
            || classifier.is_some()
            || consecutive_failure_threshold.is_some()
            || failure_window.is_some()
            || window_failure_threshold.is_some()
            || failure_rate_threshold.is_some()
            || minimum_calls.is_some()
            || slow_call_duration.is_some()
            || slow_call_rate_threshold.is_some()
            || latency_trip.is_some()
            || open_duration.is_some()
            || backoff_multiplier.is_some()
            || max_open_duration.is_some()
            || jitter.is_some()
            || jitter_seed.is_some()
            || half_open_max_concurrent.is_some()
            || half_open_success_threshold.is_some()
            || max_probe_duration.is_some()
            || flapping_trips.is_some()
            || flapping_window.is_some()
            || count_window.is_some()
            || closed_interval.is_some()
            || half_open_max_probes.is_some()
            || half_open_rate.is_some()
            || count_calls_in_flight.is_some()
            || stuck_call_threshold.is_some()
            || hung_call_duration.is_some()
            || call_duration_buckets.is_some()
            || event_log_capacity.is_some()
            || delivery.is_some()
            || ramp_up.is_some()
            || maintenance_window.is_some()
            || short_circuit_in_maintenance.is_some()
            || deadlines.is_some()
            || probe_lead.is_some()
    }
}

impl Latency {
    fn policy(&self) -> LatencyTrip {
        let mut p = LatencyTrip::new();
        if let Some(v) = self.percentile {
            p = p.percentile(v);
        }
        if let Some(Human(d)) = self.threshold {
            p = p.threshold(d);
        }
        if let Some(Human(d)) = self.window {
            p = p.window(d);
        }
        if let Some(n) = self.consecutive_windows {
            p = p.consecutive_windows(n);
        }
        if let Some(r) = self.error_rate {
            p = p.error_rate(r.into_option());
        }
        if let Some(n) = self.minimum_samples {
            p = p.minimum_samples(n);
        }
        if let Some(n) = self.capacity {
            p = p.capacity(n);
        }
        p
    }
}

/// A call path by its label; any label not of the crate's own is custom.
fn call_path(label: &str) -> CallPath {
    match label {
        "reference_data" => CallPath::ReferenceData,
        "historical_data" => CallPath::HistoricalData,
        "alt_data" => CallPath::AltData,
        "enrichment" => CallPath::Enrichment,
        "order_submission" => CallPath::OrderSubmission,
        "order_cancel" => CallPath::OrderCancel,
        "kill_switch" => CallPath::KillSwitch,
        "risk_check" => CallPath::RiskCheck,
        other => CallPath::Custom(Arc::from(other)),
    }
}

/// A TOML error, with the `[table]` it happened in.
fn toml_error(text: &str, err: &toml::de::Error) -> FileError {
    let table = err.span().and_then(|span| {
        text[..span.start.min(text.len())]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(str::to_owned)
    });
    let message = match table {
        Some(table) => format!("in {table}: {err}"),
        None => err.to_string(),
    };
    // The parser's lines quote the file: each is shown escaped and bounded,
    // the line breaks between them kept.
    let message: Vec<String> = message
        .trim_end()
        .lines()
        .map(|line| crate::text::shown(line).to_string())
        .collect();
    FileError::Parse {
        message: message.join("\n"),
    }
}
