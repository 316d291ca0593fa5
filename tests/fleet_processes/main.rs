//! Fleet mode across OS processes (`harness = false`): this binary runs
//! itself as children.

#[path = "../support/mod.rs"]
mod support;

mod fleet_processes;

fn main() {
    fleet_processes::main();
}
