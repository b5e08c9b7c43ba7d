//! The gamepilot binary.
fn main() {}
