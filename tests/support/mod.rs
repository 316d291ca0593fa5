//! What the test binaries share: a breaker on a mock clock and calls with
//! each outcome, real servers on loopback (HTTP, Redis, Prometheus), test
//! certificates, the examples built by the cargo that runs the tests, a log
//! capture, two counting allocators, and a turn for the tests that need the
//! process to themselves.
//!
//! Each binary under `tests/` (one per area, `tests/AREA/main.rs`) reaches
//! it with `#[path = "../support/mod.rs"] mod support;`, and its modules
//! with `use crate::support::...`.
// Each binary uses its own part of it.
#![allow(dead_code)]

#[cfg(feature = "async")]
pub mod async_http;
pub mod breaker;
pub mod certs;
pub mod counting_alloc;
pub mod example;
#[cfg(feature = "redis")]
pub mod fleet_kit;
pub mod http_server;
pub mod live_bytes;
pub mod log_capture;
pub mod process;
pub mod prometheus_server;
pub mod redis_server;
