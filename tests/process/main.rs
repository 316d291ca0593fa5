//! Tests that change or count something of the whole process: its
//! environment, its threads, quanta's shared time, a fork. Each holds
//! `support::process::alone()` for its whole run, so no other test of this
//! binary runs beside it.

#[path = "../support/mod.rs"]
mod support;

mod fleet_system_roots;
mod fleet_wake;
mod time_source;
