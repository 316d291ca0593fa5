//! Isolation around a breaker (feature `isolation`): the bulkhead, the
//! deadline pool and the dead-letter buffer.

#[path = "../support/mod.rs"]
mod support;

/// Counts each thread's allocations: `bulkhead` checks that a guarded
/// closed success and a refusal allocate nothing. The count is per thread,
/// so the other tests do not show up in it.
#[global_allocator]
static GLOBAL: support::counting_alloc::Counting = support::counting_alloc::Counting;

mod bulkhead;
mod dead_letter;
mod deadline;
