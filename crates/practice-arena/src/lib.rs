//! The practice game as a library: the pure game state machine, the software renderer, the state lines and
//! the X11 glue. The binary (main.rs) wires them together; benches and tests use them directly.

pub mod clock;
pub mod game;
pub mod render;
pub mod state;
pub mod x;

/// Errors of the practice game.
#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    #[error("font {path}: {reason}")]
    Font { path: String, reason: String },
    #[error("X11: {0}")]
    X11(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("bad argument: {0}")]
    Args(String),
    #[error("{0}")]
    Other(String),
}
