//! Reads session recordings and replays them through the loop logic, diffing the decisions (the spec's
//! Replay method); analyses and renders them for `gamepilot report`.
//!
//! Only the binary's `replay` and `report` commands use this crate: recordings are write-only from the
//! agent's perspective (INV-CTX-002), which `cargo xtask lint` enforces.

pub mod analysis;
pub mod driver;
pub mod reader;
pub mod report;
pub mod stuck;

pub use analysis::{Analysis, TimingTick};
pub use driver::{replay, session_inputs, Divergence, PromptReuse, ReplayOutcome};
pub use reader::{CorruptLine, Recording};
pub use report::{render_html, write_report};

/// Errors of reading and replaying a recording.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a recording line: {message}")]
    BadLine {
        path: std::path::PathBuf,
        line: usize,
        message: String,
    },
    #[error("{0}: the recording is empty or does not start with session_start")]
    NoHeader(std::path::PathBuf),
    #[error("{path}: schema version {found} is not supported (this build reads version {supported})")]
    Schema {
        path: std::path::PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("line seq {seq}: the loop event cannot be read: {message}")]
    BadEvent { seq: u64, message: String },
    #[error("the recorded loop configuration cannot be read: {0}")]
    BadConfig(String),
    #[error("{0:?} is not a frame file name the recorder writes; refusing to read it")]
    BadFrameName(String),
    #[error("{path} is larger than {limit} bytes; refusing to read it")]
    FrameTooLarge { path: std::path::PathBuf, limit: u64 },
    #[error("{path} is a symlink (to {to}); refusing to write through it")]
    SymlinkOutput { path: std::path::PathBuf, to: String },
}
