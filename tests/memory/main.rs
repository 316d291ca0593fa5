//! Memory given back, measured by a global allocator that counts the
//! process's live bytes: a binary of its own, whose every test holds
//! `support::live_bytes::one_at_a_time()`.

#[path = "../support/mod.rs"]
mod support;

#[global_allocator]
static GLOBAL: support::live_bytes::Live = support::live_bytes::Live;

mod memory;
