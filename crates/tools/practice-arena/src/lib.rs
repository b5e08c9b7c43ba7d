//! The practice game as a library: the pure game state machine, the software renderer, the state lines and
//! the X11 glue. The binary (main.rs) wires them together; benches and tests use them directly.
//!
//! Command line: `practice-arena --seed N --width W --height H --state-file PATH --frame-dump PATH.png
//! [--start-screen menu|play]`. The window is "Practice Arena", WM_CLASS `practice-arena`/`PracticeArena`,
//! `_NET_WM_PID` set, fixed size. It redraws only when the picture changes, so idle frames are identical.
//!
//! `--state-file` gets one JSON object per line (see [`state::StateLine`]) when the state changes (at most
//! ~60 lines/s) and once when the window is first mapped and drawn; the file appears with that first line.
//! SIGUSR1 writes the game's own framebuffer to `--frame-dump` (PNG, temp file + rename) and then appends a
//! state line. SIGTERM/SIGINT and WM_DELETE_WINDOW end the game cleanly.
//!
//! Rules tests rely on: a button activates only on press+release over it after the pointer hovered it for
//! at least 80 ms, with the press lasting at least 30 ms (FR-ACT-005; others count in `dropped_clicks`).
//! WASD/arrows move the player at 200 px/s along the heading (= camera yaw) while held. Pointer motion turns
//! the camera by 0.25 deg/px; a jump over 50 px is ignored (`ignored_jumps`); near the edge (60 px) the game
//! warps the pointer to the centre itself and ignores that warp. Autorepeat is never a press (`repeats`).

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
