//! Lock-free protocols under the loom model checker (the gate, delivery,
//! the table of calls in flight); built only under
//! `RUSTFLAGS="--cfg loom"` (`scripts/check` runs it).

#[cfg(feature = "isolation")]
mod bulkhead;
mod delivery;
mod gate;
mod in_flight;
