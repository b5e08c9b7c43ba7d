//! Test support: an Xvfb (or nested Xephyr) test bed that launches the practice game, finds its window and
//! cleans up every process it started, even when a test fails (Drop kills them).

pub mod arena;
pub mod dbus;
pub mod xserver;

pub use arena::{Arena, ArenaOptions};
pub use dbus::SessionBus;
pub use xserver::{TestBed, TestBedError};
