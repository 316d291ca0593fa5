//! Twenty OS processes racing for the fleet's probe lease
//! (`harness = false`): this binary runs itself as children.

#[path = "../support/mod.rs"]
mod support;

mod fleet_lease_race;

fn main() {
    fleet_lease_race::main();
}
