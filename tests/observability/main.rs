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

/// The time `times` says a breaker spent in `state`.
fn time_in(times: &fusebox::StateTimes, state: fusebox::State) -> std::time::Duration {
    use fusebox::State;
    match state {
        State::Closed => times.closed,
        State::Open => times.open,
        State::HalfOpen => times.half_open,
        State::ForcedOpen => times.forced_open,
        State::ForcedClosed => times.forced_closed,
    }
}
