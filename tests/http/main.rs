//! The HTTP integration (feature `http`) against real servers on loopback:
//! plain HTTP, HTTPS (feature `rustls`), and a small outage profile.

#[path = "../support/mod.rs"]
mod support;

/// Counts each thread's allocations: `http` checks that a guarded call
/// allocates no more than a bare request, and a refusal no more than
/// building the request. The count is per thread, so the servers' threads
/// and the other tests do not show up in it.
#[global_allocator]
static GLOBAL: support::counting_alloc::Counting = support::counting_alloc::Counting;

mod http;
mod https;
mod in_flight;
mod outage_profile;
