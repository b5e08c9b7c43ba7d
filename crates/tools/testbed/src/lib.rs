//! The practice game on a private display: an Xvfb (or nested Xephyr) bed that launches the practice
//! game, finds its window and cleans up every process it started, even when a test fails (Drop kills
//! them) — what `gamepilot demo` runs on. With the `test-harness` feature (turned on by the crates'
//! dev-dependencies only, so the shipping binary holds none of it): a private D-Bus session bus, a
//! scripted OpenAI-compatible model host ([`ScriptedHost`]) that answers gamepilot's model calls from a
//! test's policy and records them, the practice game's policies, and a real run's session kept as a
//! committed recording.

pub mod arena;
#[cfg(feature = "test-harness")]
pub mod arena_policy;
#[cfg(feature = "test-harness")]
pub mod dbus;
#[cfg(feature = "test-harness")]
pub mod host;
#[cfg(feature = "test-harness")]
pub mod keep;
pub mod xserver;

pub use arena::{Arena, ArenaOptions};
#[cfg(feature = "test-harness")]
pub use arena_policy::{arena_policy, ArenaMove, ArenaPolicy};
#[cfg(feature = "test-harness")]
pub use dbus::SessionBus;
#[cfg(feature = "test-harness")]
pub use host::{
    by_substring, message_text, plan_reply, plan_value, sequence, DataImage, HostConfig, ImitatedHost,
    ReceivedChat, RecordedRequest, Reply, ScriptedHost,
};
#[cfg(feature = "test-harness")]
pub use keep::{keep_session, session_fixtures, session_stream};
pub use xserver::{TestBed, TestBedError};
