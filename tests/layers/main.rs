//! The crate's floors: the import graph of `src/` has no circle, and no
//! file of the core imports a capability.

mod layers;
