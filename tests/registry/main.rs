//! The registry of named breakers (feature `registry`), configuration files
//! (feature `serde`), trading settings in them, and the one grammar of
//! durations a person types.

#[path = "../support/mod.rs"]
mod support;

mod config_file;
mod config_trading;
mod duration;
mod registry;
