//! The admin endpoint (feature `admin`) over real sockets on loopback, with
//! well-behaved and hostile clients, and the alerting rules and dashboard in
//! `ops/` against the real `promtool` and Prometheus.

#[path = "../support/mod.rs"]
mod support;

mod admin;
mod alerts;
mod hostile;
