//! The practice game.
fn main() {}
