//! Replay of recorded calls (feature `replay`): the line format, a run of
//! one configuration on the mock clock, a sweep, the timeline picture, and
//! the `fusebox-replay` binary over a configuration file.

mod binary;
mod replay;
