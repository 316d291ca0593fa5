//! Trading-aware recovery: ramp-up after close, maintenance windows,
//! recovery before a deadline, and the health probe that tests recovery in
//! place of a live request.

#[path = "../support/mod.rs"]
mod support;

mod deadlines;
mod health_probe;
mod maintenance;
mod ramp;
