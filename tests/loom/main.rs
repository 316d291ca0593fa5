//! Lock-free protocols under the loom model checker; built only under
//! `RUSTFLAGS="--cfg loom"` (`scripts/check` runs it).

#[cfg(feature = "isolation")]
mod bulkhead;
mod delivery;
mod gate;
