//! Lock-free protocols under the loom model checker; built only under
//! `RUSTFLAGS="--cfg loom"` (`scripts/check` runs it).

mod delivery;
mod gate;
