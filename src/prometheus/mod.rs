//! Prometheus metrics for a [`Registry`], on the `prometheus-client` crate.
//!
//! The metrics are read from each breaker's [`Snapshot`] when the registry
//! is scraped: nothing is counted twice, and the hot path carries no metric
//! of its own. Every series is labelled with `breaker` (the name) and
//! `call_path`; a breaker writes 33 series, one more each with a latency
//! policy (once its first window is full) or an expiring override, 20
//! more if it times its calls (the histogram with its 16 default buckets,
//! and the slow-call ratio), one with `count_calls_in_flight`, and three
//! with `stuck_call_threshold` or `hung_call_duration` (the calls in
//! flight, those stuck, and the probes stuck).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `fusebox_breaker_state` | gauge | the status as [`Snapshot::status_gauge`] numbers it (the states 0 to 4, 5 inside a maintenance window) |
//! | `fusebox_breaker_in_state{state}` | gauge | 1 for the current state, 0 for the others (a state set) |
//! | `fusebox_breaker_critical` | gauge | 1 for a breaker the registry marks critical (`/health` depends on it), else 0 |
//! | `fusebox_breaker_in_maintenance` | gauge | 1 inside a declared maintenance window, else 0 |
//! | `fusebox_breaker_calls_total{outcome}` | counter | calls by outcome: `success`, `failure`, `ignored` |
//! | `fusebox_breaker_cancelled_calls_total` | counter | calls admitted and dropped before they finished (an async caller's future cancelled): neither success nor failure ([`Totals::cancelled`](crate::Totals::cancelled)) |
//! | `fusebox_breaker_slow_calls_total` | counter | successful calls slower than `slow_call_duration` |
//! | `fusebox_breaker_short_circuits_total` | counter | calls refused without being attempted |
//! | `fusebox_breaker_trips_total` | counter | outages the breaker opened for on its own: openings from closed ([`Snapshot::trips`]) |
//! | `fusebox_breaker_reopens_total` | counter | open periods renewed within an outage ([`Snapshot::reopens`]) |
//! | `fusebox_breaker_probes_total{outcome}` | counter | half-open probes by outcome: `success`, `failure`, `expired` (past `max_probe_duration`), `ignored`, and `stuck` (past its slow mark, [`ProbeTotals::stuck`](crate::ProbeTotals::stuck); only breakers that track calls in flight) ([`Snapshot::probes`]) |
//! | `fusebox_breaker_state_seconds_total{state}` | counter | time spent in each state ([`Snapshot::state_times`]), never below what an earlier scrape of the registry exported |
//! | `fusebox_breaker_call_duration_seconds` | histogram | durations of the calls that reported, for breakers that time their calls ([`Snapshot::call_durations`]) |
//! | `fusebox_breaker_window_slow_call_ratio` | gauge | slow calls over calls in the sliding window (only breakers that time their calls) |
//! | `fusebox_breaker_probes_in_flight` | gauge | half-open probes out |
//! | `fusebox_breaker_calls_in_flight` | gauge | calls admitted and not yet reported ([`Snapshot::calls_in_flight`]; only breakers that count or track them) |
//! | `fusebox_breaker_calls_stuck` | gauge | tracked calls in flight past `slow_call_duration`, or past `hung_call_duration` without `stuck_call_threshold` ([`Snapshot::calls_stuck`]; only breakers that track them) |
//! | `fusebox_breaker_open_duration_seconds` | gauge | length of the current open period (0 when closed) |
//! | `fusebox_breaker_backoff_step` | gauge | times in a row the open period has grown (0 on an outage's first) |
//! | `fusebox_breaker_retry_after_seconds` | gauge | while open, time until a probe may go (0 otherwise) |
//! | `fusebox_breaker_time_in_state_seconds` | gauge | time in the current state, as `fusebox_breaker_in_state` reads it ([`Snapshot::time_in_state`]) |
//! | `fusebox_breaker_consecutive_failures` | gauge | the current run of failures |
//! | `fusebox_breaker_window_failure_ratio` | gauge | failures over calls in the sliding window |
//! | `fusebox_breaker_flapping` | gauge | 1 while `flapping_trips` trips lie within `flapping_window` |
//! | `fusebox_breaker_override_remaining_seconds` | gauge | while an override with an expiry holds it, time until it ends (only such breakers) |
//! | `fusebox_breaker_latency_percentile_seconds` | gauge | the latency policy's percentile in its last full window (only breakers that have one) |
//!
//! With the `isolation` feature, the bulkheads, deadline pools
//! (`Registry::register_deadline_pool`) and dead-letter buffers registered
//! with the registry are scraped too:
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `fusebox_bulkhead_in_use{bulkhead}` | gauge | slots in use |
//! | `fusebox_bulkhead_max_concurrent{bulkhead}` | gauge | `max_concurrent`: the limit, or the most an adaptive one grows to |
//! | `fusebox_bulkhead_limit{bulkhead}` | gauge | the limit now |
//! | `fusebox_bulkhead_peak{bulkhead}` | gauge | the most slots ever in use at once |
//! | `fusebox_bulkhead_refusals_total{bulkhead}` | counter | callers refused for want of a slot |
//! | `fusebox_bulkhead_limit_floor{bulkhead}` | gauge | the least an adaptive limit falls to (adaptive bulkheads only) |
//! | `fusebox_bulkhead_window_latency_seconds{bulkhead}` | gauge | the last judged window's latency (adaptive bulkheads, once one is judged) |
//! | `fusebox_bulkhead_baseline_latency_seconds{bulkhead}` | gauge | the baseline an adaptive limit judges windows against (the same) |
//! | `fusebox_bulkhead_lane_in_use{bulkhead,lane}` | gauge | a lane's calls in flight (bulkheads with lanes) |
//! | `fusebox_bulkhead_lane_guaranteed{bulkhead,lane}` | gauge | the slots a lane is guaranteed at the limit now |
//! | `fusebox_bulkhead_lane_refusals_total{bulkhead,lane}` | counter | a lane's callers refused |
//! | `fusebox_deadline_pool_threads{pool}` | gauge | the deadline pool's worker threads |
//! | `fusebox_deadline_pool_in_flight{pool}` | gauge | slots held: calls queued or running, abandoned ones included |
//! | `fusebox_deadline_pool_abandoned{pool}` | gauge | calls abandoned at their deadline that still hold a thread |
//! | `fusebox_deadline_pool_timed_out_total{pool}` | counter | calls abandoned at their deadline |
//! | `fusebox_deadline_pool_refusals_total{pool}` | counter | callers refused because every slot was held |
//! | `fusebox_dead_letter_depth{buffer,priority}` | gauge | emits held, per priority |
//! | `fusebox_dead_letter_capacity{buffer}` | gauge | the buffer's capacity |
//! | `fusebox_dead_letter_emits_total{buffer,priority,fate}` | counter | emits by fate: `stored`, `shed`, `refused`, `replayed` |
//!
//! With the `chain` feature, the fallback chains registered with the
//! registry (`Registry::register_chain`) are scraped too, labelled with
//! the `chain` and the `link`:
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `fusebox_chain_answers_total{chain,link}` | counter | lookups the link answered |
//! | `fusebox_chain_declined_total{chain,link}` | counter | lookups the link ended with a deterministic "no" |
//! | `fusebox_chain_skips_total{chain,link,reason}` | counter | lookups that went past the link, by reason: `refused`, `full`, `deadline`, `not_cached`, `too_old`, `failed`, `timed_out`, `declined` |
//! | `fusebox_chain_exhausted_total{chain}` | counter | lookups no link answered |
//!
//! With the `redis` feature, the fleet agents registered with the registry
//! (`Registry::register_fleet`) are scraped too, labelled with their
//! `prefix`:
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `fusebox_fleet_connected{prefix}` | gauge | 1 while the agent holds a working connection to Redis |
//! | `fusebox_fleet_breakers{prefix}` | gauge | breakers the agent serves |
//! | `fusebox_fleet_outages_total{prefix}` | counter | Redis outages seen (one log line each) |
//! | `fusebox_fleet_errors_total{prefix}` | counter | Redis errors and timeouts |
//! | `fusebox_fleet_published_total{prefix}` | counter | local trips, re-opens and closes that changed the fleet's state |
//! | `fusebox_fleet_applied_total{prefix}` | counter | fleet states applied to local breakers that changed them |
//! | `fusebox_fleet_leases_won_total{prefix}` | counter | probe leases won |
//! | `fusebox_fleet_leases_returned_total{prefix}` | counter | probe leases given back unused (no probe within `lease_idle`) |
//! | `fusebox_fleet_fenced_total{prefix}` | counter | probe results refused by the fence |
//! | `fusebox_fleet_messages_total{prefix}` | counter | announcements received over pub/sub |
//! | `fusebox_fleet_reads_total{prefix}` | counter | reads of a breaker's fleet state |
//! | `fusebox_fleet_round_trips_total{prefix}` | counter | round trips to Redis begun: each one pipeline of writes, reads and renewals |
//! | `fusebox_fleet_catch_ups_total{prefix}` | counter | reads of every breaker served because announcements may have been lost (a heartbeat not back within `refresh`, a reader behind) |
//! | `fusebox_fleet_failures_published_total{prefix}` | counter | local failures written to the recent-failures windows |
//! | `fusebox_fleet_window_trips_total{prefix}` | counter | fleet trips made by the recent-failures window |
//! | `fusebox_fleet_lone_trips_total{prefix}` | counter | local trips that found no quorum: open in their process only |
//! | `fusebox_fleet_members{prefix,breaker}` | gauge | members serving the breaker, as the agent last read it |
//! | `fusebox_fleet_tripped_members{prefix,breaker}` | gauge | members whose local trip counts towards the quorum now |
//! | `fusebox_fleet_alone{prefix,breaker}` | gauge | 1 while this process's breaker is open by a trip that found no quorum |
//! | `fusebox_fleet_opened_by{prefix,breaker,by}` | gauge | 1 for what holds the fleet open (`quorum`, `failure_window`, `operator`), else 0 |
//!
//! `prometheus-client` has no state-set type, so the state set is the usual
//! gauge per state.
//!
//! # `prometheus-client` in the public API
//!
//! [`RegistryCollector`] implements `prometheus-client`'s `Collector` trait,
//! registered with the application's own
//! `prometheus_client::registry::Registry`: the point of this module is to join a
//! registry the application already has, so its types are not wrapped.
//! `prometheus-client` is a 0.x crate, so the version is a commitment: every
//! fusebox 0.1 release depends on `prometheus-client` 0.26 (any 0.26.x), and
//! moving to a later line is a breaking change of fusebox, made only in a
//! breaking release. It is re-exported as
//! [`fusebox::prometheus::prometheus_client`](prometheus_client), so an
//! application can name the very version fusebox uses. [`encode`] needs no
//! `prometheus-client` type at all.
//!
//! ```
//! use fusebox::prometheus::prometheus_client; // the version fusebox uses
//! use fusebox::prometheus::RegistryCollector;
//! use fusebox::registry::Registry;
//! use fusebox::{BreakerConfig, CallPath, Classifier};
//!
//! let registry = Registry::new();
//! registry.add_template("vendor", BreakerConfig::builder()
//!     .call_path(CallPath::AltData)
//!     .classifier(Classifier::every_error_is_a_failure())
//!     .build()?)?;
//! registry.breaker("news", "vendor")?;
//!
//! // Into an application's own prometheus-client registry:
//! let mut metrics = prometheus_client::registry::Registry::default();
//! metrics.register_collector(Box::new(RegistryCollector::new(registry.clone())));
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &metrics)?;
//! assert!(text.contains(r#"fusebox_breaker_state{breaker="news",call_path="alt_data"} 0"#));
//! // Or on its own, as the admin endpoint serves it:
//! assert!(fusebox::prometheus::encode(&registry).ends_with("# EOF\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "redis")]
mod fleet;

/// The `prometheus-client` crate fusebox builds on (0.26), for naming its
/// types at the version [`RegistryCollector`] implements.
pub use prometheus_client;

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use crate::registry::Registry;
use crate::{Snapshot, State};

/// A `prometheus-client` collector that reads a [`Registry`]'s snapshots at
/// each scrape. Register it with
/// `prometheus_client::registry::Registry::register_collector`.
#[derive(Clone)]
pub struct RegistryCollector {
    registry: Registry,
}

impl RegistryCollector {
    /// A collector for `registry`: breakers added later are scraped too.
    pub fn new(registry: Registry) -> Self {
        RegistryCollector { registry }
    }
}

impl fmt::Debug for RegistryCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryCollector")
            .field("breakers", &self.registry.len())
            .finish()
    }
}

/// The registry's metrics alone, in the OpenMetrics text format (ending in
/// `# EOF`), as served at `/metrics`.
pub fn encode(registry: &Registry) -> String {
    let mut metrics = prometheus_client::registry::Registry::default();
    metrics.register_collector(Box::new(RegistryCollector::new(registry.clone())));
    let mut text = String::new();
    // Writing into a String cannot fail, and the collector itself returns
    // only the writer's errors.
    let _ = prometheus_client::encoding::text::encode(&mut text, &metrics);
    text
}

/// One breaker at the scrape: its labels and its snapshot.
struct Row {
    call_path: String,
    critical: bool,
    snap: Snapshot,
}

impl Row {
    fn labels(&self) -> [(&'static str, &str); 2] {
        [("breaker", &self.snap.name), ("call_path", &self.call_path)]
    }
}

fn family<'a>(
    encoder: &'a mut DescriptorEncoder<'_>,
    name: &'a str,
    help: &str,
    unit: Option<&'a Unit>,
    kind: MetricType,
) -> Result<MetricEncoder<'a>, fmt::Error> {
    encoder.encode_descriptor(name, help, unit, kind)
}

fn gauges(
    encoder: &mut DescriptorEncoder<'_>,
    rows: &[Row],
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: impl Fn(&Snapshot) -> Option<f64>,
) -> Result<(), fmt::Error> {
    if rows.iter().all(|r| value(&r.snap).is_none()) {
        return Ok(());
    }
    let mut m = family(encoder, name, help, unit, MetricType::Gauge)?;
    for row in rows {
        if let Some(v) = value(&row.snap) {
            m.encode_family(&row.labels())?.encode_gauge(&v)?;
        }
    }
    Ok(())
}

fn counters(
    encoder: &mut DescriptorEncoder<'_>,
    rows: &[Row],
    name: &str,
    help: &str,
    value: impl Fn(&Snapshot) -> u64,
) -> Result<(), fmt::Error> {
    let mut m = family(encoder, name, help, None, MetricType::Counter)?;
    for row in rows {
        m.encode_family(&row.labels())?
            .encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(
                &value(&row.snap),
                None,
            )?;
    }
    Ok(())
}

/// The breakers' families.
fn breakers(registry: &Registry, encoder: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
    // One snapshot per breaker, each under its own lock only.
    let rows: Vec<Row> = registry
        .breakers_marked()
        .iter()
        .map(|(b, critical)| Row {
            call_path: crate::text::shown(b.call_path().as_str()).to_string(),
            critical: *critical,
            snap: b.snapshot(),
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let e = encoder;
    let secs = Unit::Seconds;
    gauges(
        e,
        &rows,
        "fusebox_breaker_state",
        "Breaker status: 0 closed, 1 open, 2 half-open, 3 forced open, 4 forced closed, \
         5 inside a maintenance window whatever the state (fusebox_breaker_in_state has the state).",
        None,
        |s| Some(f64::from(s.status_gauge())),
    )?;
    {
        let mut m = family(
            e,
            "fusebox_breaker_critical",
            "1 for a breaker the registry marks critical (readiness depends on it), else 0.",
            None,
            MetricType::Gauge,
        )?;
        for row in &rows {
            m.encode_family(&row.labels())?
                .encode_gauge(&i64::from(row.critical))?;
        }
    }
    gauges(
        e,
        &rows,
        "fusebox_breaker_in_maintenance",
        "1 inside a declared maintenance window (failures are neutral), else 0.",
        None,
        |s| Some(if s.maintenance.is_some() { 1.0 } else { 0.0 }),
    )?;
    {
        let mut m = family(
            e,
            "fusebox_breaker_in_state",
            "1 for the breaker's current state, 0 for the others.",
            None,
            MetricType::Gauge,
        )?;
        for row in &rows {
            for state in State::ALL {
                let [b, p] = row.labels();
                let labels = [b, p, ("state", state.as_str())];
                m.encode_family(&labels)?
                    .encode_gauge(&i64::from(row.snap.state == state))?;
            }
        }
    }
    {
        let mut m = family(
            e,
            "fusebox_breaker_calls",
            "Calls that reported an outcome, by outcome.",
            None,
            MetricType::Counter,
        )?;
        for row in &rows {
            let t = &row.snap.totals;
            for (outcome, n) in [
                ("success", t.successes),
                ("failure", t.failures),
                ("ignored", t.ignored),
            ] {
                let [b, p] = row.labels();
                let labels = [b, p, ("outcome", outcome)];
                m.encode_family(&labels)?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(&n, None)?;
            }
        }
    }
    counters(
        e,
        &rows,
        "fusebox_breaker_slow_calls",
        "Successful calls slower than slow_call_duration.",
        |s| s.totals.slow,
    )?;
    counters(
        e,
        &rows,
        "fusebox_breaker_cancelled_calls",
        "Calls admitted and dropped before they finished (an async caller's future cancelled): \
         neither success nor failure.",
        |s| s.totals.cancelled,
    )?;
    counters(
        e,
        &rows,
        "fusebox_breaker_short_circuits",
        "Calls refused without being attempted.",
        |s| s.totals.short_circuits,
    )?;
    counters(
        e,
        &rows,
        "fusebox_breaker_trips",
        "Outages the breaker opened for on its own: openings from closed.",
        |s| s.trips,
    )?;
    counters(
        e,
        &rows,
        "fusebox_breaker_reopens",
        "Open periods renewed within an outage: a failed, slow, expired or stuck probe, \
         or a failure during the ramp-up after recovery.",
        |s| s.reopens,
    )?;
    {
        let mut m = family(
            e,
            "fusebox_breaker_probes",
            "Half-open probes by outcome: success, failure (slow included), expired, \
             ignored, and stuck for breakers that track their calls in flight.",
            None,
            MetricType::Counter,
        )?;
        for row in &rows {
            let p = &row.snap.probes;
            // Only a breaker that tracks its calls in flight (the one whose
            // snapshot counts them stuck) judges a probe stuck.
            let stuck = row.snap.calls_stuck.map(|_| ("stuck", p.stuck));
            let outcomes = [
                ("success", p.successes),
                ("failure", p.failures),
                ("expired", p.expired),
                ("ignored", p.ignored),
            ];
            for (outcome, n) in outcomes.into_iter().chain(stuck) {
                let [b, c] = row.labels();
                let labels = [b, c, ("outcome", outcome)];
                m.encode_family(&labels)?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(&n, None)?;
            }
        }
    }
    {
        let mut m = family(
            e,
            "fusebox_breaker_state",
            "Time spent in each state (as fusebox_breaker_in_state reads it).",
            Some(&secs),
            MetricType::Counter,
        )?;
        for row in &rows {
            for state in State::ALL {
                let [b, c] = row.labels();
                let labels = [b, c, ("state", state.as_str())];
                let seconds = row.snap.state_times.get(state).as_secs_f64();
                m.encode_family(&labels)?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(
                        &seconds, None,
                    )?;
            }
        }
    }
    if rows.iter().any(|r| r.snap.call_durations.is_some()) {
        let mut m = family(
            e,
            // The unit is in the name, without a UNIT line: strict
            // OpenMetrics parsers refuse one on a histogram.
            "fusebox_breaker_call_duration_seconds",
            "Durations of the calls that reported, for breakers that time their calls.",
            None,
            MetricType::Histogram,
        )?;
        let mut buckets = Vec::new();
        for row in &rows {
            if let Some(h) = &row.snap.call_durations {
                buckets.clear();
                buckets.extend(h.per_bucket_seconds());
                m.encode_family(&row.labels())?
                    .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                        h.sum().as_secs_f64(),
                        h.count(),
                        &buckets,
                        None,
                    )?;
            }
        }
    }
    gauges(
        e,
        &rows,
        "fusebox_breaker_probes_in_flight",
        "Half-open probes admitted and not yet reported.",
        None,
        |s| Some(f64::from(s.probes_in_flight)),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_calls_in_flight",
        "Calls admitted and not yet reported (count_calls_in_flight), or the closed calls \
         tracked in flight (stuck_call_threshold, hung_call_duration).",
        None,
        |s| s.calls_in_flight.map(|n| n as f64),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_calls_stuck",
        "Tracked calls in flight past slow_call_duration (or hung_call_duration without \
         stuck_call_threshold).",
        None,
        |s| s.calls_stuck.map(f64::from),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_open_duration",
        "Length of the current open period (0 when closed).",
        Some(&secs),
        |s| Some(s.open_duration.as_secs_f64()),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_backoff_step",
        "Times in a row the open period has grown.",
        None,
        |s| Some(f64::from(s.backoff_step)),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_flapping",
        "1 while flapping_trips trips lie within flapping_window.",
        None,
        |s| Some(f64::from(u8::from(s.flapping))),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_override_remaining",
        "Time until an operator override with an expiry ends.",
        Some(&secs),
        |s| s.override_remaining.map(|d| d.as_secs_f64()),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_retry_after",
        "While open, time until a probe may go (0 otherwise).",
        Some(&secs),
        |s| Some(s.retry_after.unwrap_or_default().as_secs_f64()),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_time_in_state",
        "Time since the breaker's last state change.",
        Some(&secs),
        |s| Some(s.time_in_state.as_secs_f64()),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_consecutive_failures",
        "The current run of consecutive failures.",
        None,
        |s| Some(f64::from(s.consecutive_failures)),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_window_failure_ratio",
        "Failures over calls in the sliding window (0 with no window or no calls).",
        None,
        |s| Some(s.failure_rate),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_window_slow_call_ratio",
        "Slow calls over calls in the sliding window (breakers that time their calls; 0 with no window).",
        None,
        |s| s.call_durations.as_ref().map(|_| s.slow_call_rate),
    )?;
    gauges(
        e,
        &rows,
        "fusebox_breaker_latency_percentile",
        "The latency policy's percentile in its last full window.",
        Some(&secs),
        |s| s.latency_percentile.map(|d| d.as_secs_f64()),
    )?;
    Ok(())
}

impl Collector for RegistryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        breakers(&self.registry, &mut encoder)?;
        #[cfg(feature = "isolation")]
        isolation(&self.registry, &mut encoder)?;
        #[cfg(feature = "chain")]
        chains(&self.registry, &mut encoder)?;
        #[cfg(feature = "redis")]
        fleet::fleets(&self.registry, &mut encoder)?;
        Ok(())
    }
}

/// The fallback chains' families.
#[cfg(feature = "chain")]
fn chains(registry: &Registry, e: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
    use prometheus_client::encoding::NoLabelSet;

    let chains = registry.chain_snapshots();
    if chains.is_empty() {
        return Ok(());
    }
    link_counters(
        e,
        &chains,
        "fusebox_chain_answers",
        "Lookups the chain's link answered.",
        |l| l.answers,
    )?;
    link_counters(
        e,
        &chains,
        "fusebox_chain_declined",
        "Lookups the link ended with a deterministic no.",
        |l| l.declined,
    )?;
    let mut m = family(
        e,
        "fusebox_chain_skips",
        "Lookups that went past the link, by reason.",
        None,
        MetricType::Counter,
    )?;
    for c in &chains {
        for l in &c.links {
            for (reason, n) in l.skips.iter() {
                m.encode_family(&[
                    ("chain", &*c.name),
                    ("link", &*l.name),
                    ("reason", reason.as_str()),
                ])?
                .encode_counter::<NoLabelSet, _, f64>(&n, None)?;
            }
        }
    }
    let mut m = family(
        e,
        "fusebox_chain_exhausted",
        "Lookups no link of the chain answered.",
        None,
        MetricType::Counter,
    )?;
    for c in &chains {
        m.encode_family(&[("chain", &*c.name)])?
            .encode_counter::<NoLabelSet, _, f64>(&c.exhausted, None)?;
    }
    Ok(())
}

/// One counter family with a series per chain and link.
#[cfg(feature = "chain")]
fn link_counters(
    e: &mut DescriptorEncoder<'_>,
    chains: &[crate::chain::ChainSnapshot],
    name: &str,
    help: &str,
    value: fn(&crate::chain::LinkSnapshot) -> u64,
) -> Result<(), fmt::Error> {
    use prometheus_client::encoding::NoLabelSet;

    let mut m = family(e, name, help, None, MetricType::Counter)?;
    for c in chains {
        for l in &c.links {
            m.encode_family(&[("chain", &*c.name), ("link", &*l.name)])?
                .encode_counter::<NoLabelSet, _, f64>(&value(l), None)?;
        }
    }
    Ok(())
}

/// How a bulkhead gauge is read from its snapshot: `None` leaves the
/// bulkhead out of the family.
#[cfg(feature = "isolation")]
type BulkheadGauge = fn(&crate::isolation::BulkheadSnapshot) -> Option<f64>;

/// The bulkheads' families: every bulkhead's limit and slots, an adaptive
/// limit's floor and latencies, and each lane's.
#[cfg(feature = "isolation")]
fn bulkhead_families(
    e: &mut DescriptorEncoder<'_>,
    bulkheads: &[crate::isolation::BulkheadSnapshot],
) -> Result<(), fmt::Error> {
    use prometheus_client::encoding::NoLabelSet;

    let secs = Unit::Seconds;
    let gauges: [(&str, &str, Option<&Unit>, BulkheadGauge); 7] = [
        ("fusebox_bulkhead_in_use", "Bulkhead slots in use.", None, |b| {
            Some(b.in_use as f64)
        }),
        (
            "fusebox_bulkhead_max_concurrent",
            "The bulkhead's max_concurrent: its limit, or the most an adaptive limit grows to.",
            None,
            |b| Some(b.max_concurrent as f64),
        ),
        (
            "fusebox_bulkhead_limit",
            "The bulkhead's limit now.",
            None,
            |b| Some(b.limit as f64),
        ),
        (
            "fusebox_bulkhead_peak",
            "The most bulkhead slots ever in use at once.",
            None,
            |b| Some(b.peak as f64),
        ),
        (
            "fusebox_bulkhead_limit_floor",
            "The least an adaptive limit falls to.",
            None,
            |b| b.adaptive.map(|a| a.floor as f64),
        ),
        (
            "fusebox_bulkhead_window_latency",
            "The latency of the adaptive limit's last judged window: the median of its returned calls and of the ages of the calls then in flight.",
            Some(&secs),
            |b| b.adaptive.and_then(|a| a.latency).map(|d| d.as_secs_f64()),
        ),
        (
            "fusebox_bulkhead_baseline_latency",
            "The baseline an adaptive limit judges its windows against.",
            Some(&secs),
            |b| b.adaptive.and_then(|a| a.baseline).map(|d| d.as_secs_f64()),
        ),
    ];
    for (name, help, unit, value) in gauges {
        if bulkheads.iter().all(|b| value(b).is_none()) {
            continue;
        }
        let mut m = family(e, name, help, unit, MetricType::Gauge)?;
        for b in bulkheads {
            if let Some(v) = value(b) {
                m.encode_family(&[("bulkhead", &*b.name)])?
                    .encode_gauge(&v)?;
            }
        }
    }
    let mut m = family(
        e,
        "fusebox_bulkhead_refusals",
        "Callers refused for want of a bulkhead slot.",
        None,
        MetricType::Counter,
    )?;
    for b in bulkheads {
        m.encode_family(&[("bulkhead", &*b.name)])?
            .encode_counter::<NoLabelSet, _, f64>(&b.refusals, None)?;
    }
    if bulkheads.iter().all(|b| b.lanes.is_empty()) {
        return Ok(());
    }
    type LaneValue = fn(&crate::isolation::LaneSnapshot) -> i64;
    let lane_gauges: [(&str, &str, LaneValue); 2] = [
        (
            "fusebox_bulkhead_lane_in_use",
            "A bulkhead lane's calls in flight.",
            |l| l.in_use as i64,
        ),
        (
            "fusebox_bulkhead_lane_guaranteed",
            "The slots a bulkhead lane is guaranteed at the limit now.",
            |l| l.guaranteed as i64,
        ),
    ];
    for (name, help, value) in lane_gauges {
        let mut m = family(e, name, help, None, MetricType::Gauge)?;
        for b in bulkheads {
            for l in &b.lanes {
                m.encode_family(&[("bulkhead", &*b.name), ("lane", &*l.name)])?
                    .encode_gauge(&value(l))?;
            }
        }
    }
    let mut m = family(
        e,
        "fusebox_bulkhead_lane_refusals",
        "A bulkhead lane's callers refused for want of a slot.",
        None,
        MetricType::Counter,
    )?;
    for b in bulkheads {
        for l in &b.lanes {
            m.encode_family(&[("bulkhead", &*b.name), ("lane", &*l.name)])?
                .encode_counter::<NoLabelSet, _, f64>(&l.refusals, None)?;
        }
    }
    Ok(())
}

/// The bulkheads' and dead-letter buffers' families.
#[cfg(feature = "isolation")]
fn isolation(registry: &Registry, e: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
    use prometheus_client::encoding::NoLabelSet;

    let bulkheads = registry.bulkhead_snapshots();
    if !bulkheads.is_empty() {
        bulkhead_families(e, &bulkheads)?;
    }
    let pools = registry.deadline_pool_snapshots();
    if !pools.is_empty() {
        type PoolGauge = fn(&crate::isolation::DeadlinePoolSnapshot) -> i64;
        let gauges: [(&str, &str, PoolGauge); 3] = [
            (
                "fusebox_deadline_pool_threads",
                "The deadline pool's worker threads.",
                |p| p.threads as i64,
            ),
            (
                "fusebox_deadline_pool_in_flight",
                "Deadline pool slots held: calls queued or running, abandoned ones included.",
                |p| p.busy as i64,
            ),
            (
                "fusebox_deadline_pool_abandoned",
                "Calls abandoned at their deadline that still hold a thread.",
                |p| p.abandoned as i64,
            ),
        ];
        for (name, help, value) in gauges {
            let mut m = family(e, name, help, None, MetricType::Gauge)?;
            for p in &pools {
                m.encode_family(&[("pool", &*p.name)])?
                    .encode_gauge(&value(p))?;
            }
        }
        for (name, help, value) in [
            (
                "fusebox_deadline_pool_timed_out",
                "Calls abandoned at their deadline.",
                (|p| p.timed_out) as fn(&crate::isolation::DeadlinePoolSnapshot) -> u64,
            ),
            (
                "fusebox_deadline_pool_refusals",
                "Callers refused because every slot was held.",
                |p| p.refusals,
            ),
        ] {
            let mut m = family(e, name, help, None, MetricType::Counter)?;
            for p in &pools {
                m.encode_family(&[("pool", &*p.name)])?
                    .encode_counter::<NoLabelSet, _, f64>(&value(p), None)?;
            }
        }
    }
    let buffers = registry.dead_letter_snapshots();
    if !buffers.is_empty() {
        let mut m = family(
            e,
            "fusebox_dead_letter_capacity",
            "The dead-letter buffer's capacity.",
            None,
            MetricType::Gauge,
        )?;
        for d in &buffers {
            m.encode_family(&[("buffer", &*d.name)])?
                .encode_gauge(&(d.capacity as i64))?;
        }
        let mut m = family(
            e,
            "fusebox_dead_letter_depth",
            "Emits held in the dead-letter buffer, per priority.",
            None,
            MetricType::Gauge,
        )?;
        for d in &buffers {
            for p in &d.priorities {
                let priority = p.priority.to_string();
                m.encode_family(&[("buffer", &*d.name), ("priority", &priority)])?
                    .encode_gauge(&(p.depth as i64))?;
            }
        }
        let mut m = family(
            e,
            "fusebox_dead_letter_emits",
            "Emits by fate: stored, shed, refused, replayed.",
            None,
            MetricType::Counter,
        )?;
        for d in &buffers {
            for p in &d.priorities {
                let priority = p.priority.to_string();
                for (fate, n) in [
                    ("stored", p.stored),
                    ("shed", p.shed),
                    ("refused", p.refused),
                    ("replayed", p.replayed),
                ] {
                    m.encode_family(&[
                        ("buffer", &*d.name),
                        ("priority", &priority),
                        ("fate", fate),
                    ])?
                    .encode_counter::<NoLabelSet, _, f64>(&n, None)?;
                }
            }
        }
    }
    Ok(())
}
