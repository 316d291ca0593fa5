//! Fallback chains (feature `chain`), on the mock clock and over real HTTP
//! vendors on loopback, and the retry policy (feature `retry`) above a
//! breaker or a chain.

#[path = "../support/mod.rs"]
mod support;

/// Counts each thread's allocations: `chain` checks that a healthy lookup
/// allocates nothing. The count is per thread, so the other tests do not
/// show up in it.
#[global_allocator]
static GLOBAL: support::counting_alloc::Counting = support::counting_alloc::Counting;

mod chain;
mod http;
mod retry;
