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

/// What a recording's `interlock` record says acted: an [`Interlock`] of the reflex, or one of the
/// session's own holds and waits. Written in snake_case (`focus_lost`, `destructive_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Safeguard {
    UserInput,
    Halt,
    GuardianGone,
    FocusLost,
    FocusBack,
    DeniedKey,
    MaxHold,
    FrameHealth,
    WindowChanged,
    CaptureFailed,
    HeldDivergence,
    /// The escalation ladder climbed a rung.
    Escalate,
    /// A destructive action was held, answered, dropped or left unexecuted (FR-SAFE-005).
    DestructiveAction,
    /// The user resumed a session their input paused (FR-SAFE-002).
    UserResume,
    /// The game is not in front: the session waits (no model calls, verdicts or ladder).
    NotInFront,
    /// The game is in front again.
    InFront,
}

impl Safeguard {
    /// The snake_case name, as serde writes it.
    pub fn name(self) -> &'static str {
        match self {
            Safeguard::UserInput => "user_input",
            Safeguard::Halt => "halt",
            Safeguard::GuardianGone => "guardian_gone",
            Safeguard::FocusLost => "focus_lost",
            Safeguard::FocusBack => "focus_back",
            Safeguard::DeniedKey => "denied_key",
            Safeguard::MaxHold => "max_hold",
            Safeguard::FrameHealth => "frame_health",
            Safeguard::WindowChanged => "window_changed",
            Safeguard::CaptureFailed => "capture_failed",
            Safeguard::HeldDivergence => "held_divergence",
            Safeguard::Escalate => "escalate",
            Safeguard::DestructiveAction => "destructive_action",
            Safeguard::UserResume => "user_resume",
            Safeguard::NotInFront => "not_in_front",
            Safeguard::InFront => "in_front",
        }
    }
}

impl Interlock {
    /// Which kind of interlock it is, without its data.
    pub fn kind(&self) -> Safeguard {
        match self {
            Interlock::UserInput => Safeguard::UserInput,
            Interlock::Halt { .. } => Safeguard::Halt,
            Interlock::GuardianGone => Safeguard::GuardianGone,
            Interlock::FocusLost => Safeguard::FocusLost,
            Interlock::FocusBack => Safeguard::FocusBack,
            Interlock::DeniedKey => Safeguard::DeniedKey,
            Interlock::MaxHold => Safeguard::MaxHold,
            Interlock::FrameHealth { .. } => Safeguard::FrameHealth,
            Interlock::WindowChanged { .. } => Safeguard::WindowChanged,
            Interlock::CaptureFailed { .. } => Safeguard::CaptureFailed,
            Interlock::HeldDivergence => Safeguard::HeldDivergence,
        }
    }

    /// The stable snake_case name written to recordings and `act`'s JSON lines.
    pub fn name(&self) -> &'static str {
        self.kind().name()
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

/// A step of the model hosts' GPU-memory ladder (FR-MODEL-004): what the hosts and the session change.
/// The ladder decides it, the host keeper restarts hosts for it, and the session sends smaller prompts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum DegradeCommand {
    ReduceContext {
        to_tokens: u32,
    },
    ReduceVisualBudget {
        factor: f64,
    },
    /// Restart the deliberative host with no GPU layers.
    MoveDeliberativeOffGpu,
    RestoreDeliberativeGpu,
    RestoreVisualBudget,
    RestoreContext {
        to_tokens: u32,
    },
}

impl DegradeCommand {
    /// The visual budget it sets, as a fraction of the configured one (1.0 restores it).
    pub fn visual_factor(&self) -> Option<f64> {
        match self {
            DegradeCommand::ReduceVisualBudget { factor } => Some(*factor),
            DegradeCommand::RestoreVisualBudget => Some(1.0),
            _ => None,
        }
    }

    /// The context size in tokens it sets.
    pub fn context_tokens(&self) -> Option<u32> {
        match self {
            DegradeCommand::ReduceContext { to_tokens } | DegradeCommand::RestoreContext { to_tokens } => {
                Some(*to_tokens)
            }
            _ => None,
        }
    }

    /// Its snake_case name, as serde writes it.
    pub fn name(&self) -> &'static str {
        match self {
            DegradeCommand::ReduceContext { .. } => "reduce_context",
            DegradeCommand::ReduceVisualBudget { .. } => "reduce_visual_budget",
            DegradeCommand::MoveDeliberativeOffGpu => "move_deliberative_off_gpu",
            DegradeCommand::RestoreDeliberativeGpu => "restore_deliberative_gpu",
            DegradeCommand::RestoreVisualBudget => "restore_visual_budget",
            DegradeCommand::RestoreContext { .. } => "restore_context",
        }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_interlock_kind_and_a_degrade_command_are_written_by_the_names_they_give() {
        // INV-CTX-002 (an open, documented format): docs/recording-format.md lists these names
        use Safeguard as K;
        for k in [
            K::UserInput,
            K::Halt,
            K::GuardianGone,
            K::FocusLost,
            K::FocusBack,
            K::DeniedKey,
            K::MaxHold,
            K::FrameHealth,
            K::WindowChanged,
            K::CaptureFailed,
            K::HeldDivergence,
            K::Escalate,
            K::DestructiveAction,
            K::UserResume,
            K::NotInFront,
            K::InFront,
        ] {
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.name()));
            let back: Safeguard = serde_json::from_str(&format!("\"{}\"", k.name())).unwrap();
            assert_eq!(back, k);
        }
        assert_eq!(
            Interlock::Halt {
                cause: HaltCause::Panic
            }
            .kind(),
            K::Halt
        );
        for c in [
            DegradeCommand::ReduceContext { to_tokens: 2048 },
            DegradeCommand::ReduceVisualBudget { factor: 0.5 },
            DegradeCommand::MoveDeliberativeOffGpu,
            DegradeCommand::RestoreDeliberativeGpu,
            DegradeCommand::RestoreVisualBudget,
            DegradeCommand::RestoreContext { to_tokens: 8192 },
        ] {
            let v = serde_json::to_value(c).unwrap();
            assert_eq!(v["command"], c.name(), "{v}");
            assert_eq!(serde_json::from_value::<DegradeCommand>(v).unwrap(), c);
        }
        assert_eq!(DegradeCommand::RestoreVisualBudget.visual_factor(), Some(1.0));
        assert_eq!(
            DegradeCommand::ReduceContext { to_tokens: 2048 }.context_tokens(),
            Some(2048)
        );
    }
}
