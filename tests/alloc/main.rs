//! The hot path does not allocate, counted by a global allocator.

#[path = "../support/mod.rs"]
mod support;

/// Counts each thread's allocations, so that tests running in parallel do
/// not see each other's.
#[global_allocator]
static GLOBAL: support::counting_alloc::Counting = support::counting_alloc::Counting;

mod alloc;
mod any;
