//! The atomics the lock-free paths use: the standard library's, or the model
//! checker's under `--cfg loom` (see `tests/loom/gate.rs` and
//! `tests/loom/delivery.rs`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
