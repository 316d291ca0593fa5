//! Fleet mode (feature `redis`) against real `redis-server`s on loopback:
//! each `Fleet` is one agent, standing in for one process. Its lease, quorum,
//! window, overrides, life, security, metrics, failover and faults, and
//! `fusebox-ctl` (feature `ctl`) run as an operator would; Sentinel and
//! Cluster over TLS with passwords.

#[path = "../support/mod.rs"]
mod support;

mod ctl;
mod failover;
mod fleet;
mod lease_idle;
mod life;
mod metrics;
mod overrides;
mod quorum;
mod redis_faults;
mod secured;
mod security;
mod window;
