//! What a breaker tells: snapshots, the record of an incident, state-change
//! delivery to callbacks and subscribers, the Prometheus exposition
//! (feature `prometheus`) and serialized snapshots (feature `serde`).

#[path = "../support/mod.rs"]
mod support;

mod callbacks;
mod metrics;
mod observability;
mod serialize;
mod snapshot;
