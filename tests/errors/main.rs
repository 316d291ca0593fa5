//! What counts against the dependency and what a caller is told: the
//! classifier, error types that are not `std::error::Error`, each error
//! message printed once, and `build()`'s refusals of invalid configuration.

#[path = "../support/mod.rs"]
mod support;

mod classification;
mod config;
mod error_messages;
mod error_types;
