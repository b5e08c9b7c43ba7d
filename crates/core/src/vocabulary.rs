//! The words every crate and channel shares for what happens in a session: how a frame changed and how
//! healthy it is, a verification's verdict, which safety interlock acted and what halted input, and which
//! worker thread spoke. Each is defined here once; `cargo xtask lint` refuses a second public type of the
//! same name in another crate, so no mapper between look-alike types can creep back.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How the frame changed since the previous one (FR-PERC-003), from frame classification without a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameChange {
    Unchanged,
    Local,
    Motion,
    Scene,
}

impl FrameChange {
    pub fn as_str(self) -> &'static str {
        match self {
            FrameChange::Unchanged => "unchanged",
            FrameChange::Local => "local",
            FrameChange::Motion => "motion",
            FrameChange::Scene => "scene",
        }
    }

    pub fn parse(s: &str) -> Option<FrameChange> {
        match s.trim().to_ascii_lowercase().as_str() {
            "unchanged" => Some(FrameChange::Unchanged),
            "local" | "locally_changed" => Some(FrameChange::Local),
            "motion" | "continuous_motion" => Some(FrameChange::Motion),
            "scene" | "scene_change" => Some(FrameChange::Scene),
            _ => None,
        }
    }
}

impl fmt::Display for FrameChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a capture gave no usable frame (FR-PERC-009).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameProblem {
    /// Unsupported: the window is not mapped (hidden, withdrawn).
    Unmapped,
    /// Unsupported: the window is minimised (iconic).
    Minimised,
    /// Unsupported: exclusive fullscreen that bypasses Composite; the pixmap holds nothing.
    FullscreenBypass,
    /// Unsupported: a GL window whose named pixmap stays black while the screen shows content.
    BlackGlPixmap,
    /// Transient: the window was busy (resizing, not yet drawn, a failed request); retry.
    Transient,
    /// The window no longer exists.
    Gone,
}

impl FrameProblem {
    /// A mode capture cannot work in until the user changes something.
    pub fn is_unsupported(self) -> bool {
        matches!(
            self,
            FrameProblem::Unmapped
                | FrameProblem::Minimised
                | FrameProblem::FullscreenBypass
                | FrameProblem::BlackGlPixmap
        )
    }
}

/// The captured frame's health (FR-PERC-009), judged by the reflex on every tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameHealth {
    /// A usable frame.
    #[default]
    Ok,
    /// Black (not drawn yet, or a mode whose diagnosis is still within its grace period).
    Black,
    /// Unchanged for longer than the frozen bound (a hung or paused game).
    Frozen,
    /// Another window covers part of the target's client area: clicks there would land on it.
    Occluded,
    /// Capture failed on this tick; retried with back-off.
    CaptureError,
    /// A window mode capture cannot work in until the user changes something.
    Unsupported { problem: FrameProblem },
}

impl FrameHealth {
    /// The stable snake_case name written to recordings and JSON lines.
    pub fn name(self) -> &'static str {
        match self {
            FrameHealth::Ok => "ok",
            FrameHealth::Black => "black",
            FrameHealth::Frozen => "frozen",
            FrameHealth::Occluded => "occluded",
            FrameHealth::CaptureError => "capture_error",
            FrameHealth::Unsupported { .. } => "unsupported",
        }
    }

    /// Evidence read from such a frame says nothing about the game.
    pub fn unreadable(self) -> bool {
        !matches!(self, FrameHealth::Ok)
    }
}

impl fmt::Display for FrameHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameHealth::Unsupported { problem } => write!(f, "unsupported ({problem:?})"),
            FrameHealth::CaptureError => f.write_str("capture error"),
            s => f.write_str(s.name()),
        }
    }
}

/// The outcome of verifying an action or checking a postcondition: exactly one of three (INV-GND-001;
/// an outcome that cannot be determined is inconclusive, never refuted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Confirmed,
    Refuted,
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Confirmed => "confirmed",
            Verdict::Refuted => "refuted",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What halted input (INV-SAFE-002).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HaltCause {
    /// The panic chord, seen by the guardian (FR-SAFE-001).
    Panic,
    /// The guardian found the heartbeat stale (a hung or stopped core).
    StaleHeartbeat,
    /// The guardian saw the core die (only another process can report this one).
    CoreDied,
    /// The guardian was told to stop (SIGTERM) and released everything before it exited; input must not
    /// stay armed without it.
    GuardianStopped,
    /// The session's wall-clock budget is spent (FR-SAFE-004).
    BudgetSpent,
    /// The halt flag was set with a cause this build does not know.
    Unknown,
}

/// A safety interlock that acted, with what it needs to be understood; the words beside it in a message
/// are for people only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "interlock", rename_all = "snake_case")]
pub enum Interlock {
    /// Real-device input: paused and everything released (FR-SAFE-002).
    UserInput,
    /// Halted (INV-SAFE-002).
    Halt { cause: HaltCause },
    /// The guardian process exited or stopped beating: input is disarmed (FR-SAFE-003).
    GuardianGone,
    /// The target is not in the foreground (INV-ACT-001): input is withheld, the session goes on.
    FocusLost,
    /// The target is in the foreground again.
    FocusBack,
    /// A denied chord was about to form at execution time and the action was stopped (INV-ACT-003).
    DeniedKey,
    /// A key or button reached the max hold and was released (FR-SAFE-004).
    MaxHold,
    /// The frame's health changed (FR-PERC-009).
    FrameHealth { health: FrameHealth },
    /// The window moved, resized or changed scale or monitor; the chain is now `generation` (FR-PERC-002).
    WindowChanged { generation: u64 },
    /// Capture kept failing past its retry bound, or the window is in a mode that cannot be captured.
    CaptureFailed { problem: Option<FrameProblem> },
    /// The held record and the server disagreed; resolved by releasing (INV-ACT-002).
    HeldDivergence,
}

impl Interlock {
    /// The stable snake_case name written to recordings and `act`'s JSON lines.
    pub fn name(&self) -> &'static str {
        match self {
            Interlock::UserInput => "user_input",
            Interlock::Halt { .. } => "halt",
            Interlock::GuardianGone => "guardian_gone",
            Interlock::FocusLost => "focus_lost",
            Interlock::FocusBack => "focus_back",
            Interlock::DeniedKey => "denied_key",
            Interlock::MaxHold => "max_hold",
            Interlock::FrameHealth { .. } => "frame_health",
            Interlock::WindowChanged { .. } => "window_changed",
            Interlock::CaptureFailed { .. } => "capture_failed",
            Interlock::HeldDivergence => "held_divergence",
        }
    }

    /// Whether the session cannot go on after it (input halted or disarmed, or the session cannot see).
    /// The user's input pauses a session until their resume instead (FR-SAFE-002).
    pub fn stops_session(&self) -> bool {
        matches!(
            self,
            Interlock::Halt { .. } | Interlock::GuardianGone | Interlock::CaptureFailed { .. }
        )
    }
}

/// A thread of the session (FR-LOOP-001's cadences and their helpers): who reported, who died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Worker {
    Reflex,
    Tactical,
    Deliberative,
    Research,
}

impl Worker {
    pub fn as_str(self) -> &'static str {
        match self {
            Worker::Reflex => "reflex",
            Worker::Tactical => "tactical",
            Worker::Deliberative => "deliberative",
            Worker::Research => "research",
        }
    }
}

impl fmt::Display for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
