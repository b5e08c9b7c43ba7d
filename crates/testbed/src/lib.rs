//! Test support: an Xvfb (or nested Xephyr) test bed that launches the practice game, finds its window and
//! cleans up every process it started, even when a test fails (Drop kills them); a private D-Bus session
//! bus; and a scripted OpenAI-compatible model host ([`ScriptedHost`]) that answers gamepilot's model
//! calls from a test's policy and records them.

pub mod arena;
pub mod arena_policy;
pub mod dbus;
pub mod host;
pub mod keep;
pub mod xserver;

pub use arena::{Arena, ArenaOptions};
pub use arena_policy::{arena_policy, ArenaMove, ArenaPolicy};
pub use dbus::SessionBus;
pub use host::{
    by_substring, message_text, plan_reply, plan_value, sequence, DataImage, HostConfig, ImitatedHost,
    ReceivedChat, RecordedRequest, Reply, ScriptedHost,
};
pub use keep::{keep_session, session_fixtures, session_stream};
pub use xserver::{TestBed, TestBedError};
