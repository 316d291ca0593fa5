//! Async callers (features `async`, `tower`, `isolation`): a future through
//! the breaker, through a bulkhead, and a breaker as a tower layer, on
//! tokio, against loopback servers where a vendor is called.

#[path = "../support/mod.rs"]
mod support;

/// Counts each thread's allocations: `guard` checks that a guarded closed
/// success allocates nothing.
#[global_allocator]
static GLOBAL: support::counting_alloc::Counting = support::counting_alloc::Counting;

mod guard;
mod isolation;
mod tower;
