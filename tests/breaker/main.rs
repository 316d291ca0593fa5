//! The breaker's behaviour through its public API, on quanta's mock clock:
//! every transition and trip condition, half-open, overrides, backoff,
//! latency trips, many threads at once, permits, names, the settings teams
//! coming from other libraries look for, flapping, and a reference model
//! that must agree with the breaker after every step.

#[path = "../support/mod.rs"]
mod support;

mod backoff;
mod concurrency;
mod flapping;
mod forced_states;
mod half_open;
mod in_flight;
mod latency;
mod model;
mod names;
mod overrides;
mod parity;
mod permits;
mod transitions;
