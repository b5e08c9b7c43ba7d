//! The recording's line format (schema version 1). Every line is `{"seq": n, "t_us": t, "kind": ..., ...}`;
//! `t_us` is the session's monotonic clock in microseconds. Payloads that other crates own (actions, loop
//! events, commands, prompts) are stored as JSON values so the format stays readable when they grow.

use gamepilot_grounding::{ActionId, FailureCause, GroundingPath, Target, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema version written in `session_start`. Readers refuse a different major version.
pub const SCHEMA_VERSION: u32 = 1;

/// The header of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStart {
    pub schema_version: u32,
    /// The program that wrote it, e.g. "gamepilot 0.1.0".
    pub tool: String,
    pub goal: String,
    /// How the target window was named (id, title, class or pid).
    pub window: String,
    /// Wall-clock start, milliseconds since the Unix epoch (informational only).
    pub started_unix_ms: u64,
    /// The loop configuration in effect (`gamepilot_planner::LoopConfig` as JSON); replay uses it.
    pub config: Value,
}

/// One record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    SessionStart(SessionStart),
    /// A frame was written to `frames/<file>` (only when it changed).
    Frame {
        frame: u64,
        file: String,
        width: u32,
        height: u32,
        /// True for a frame with Set-of-Marks drawn on it.
        marked: bool,
        /// Frame class: unchanged / local / motion / scene.
        change: String,
    },
    /// What perception produced for a tactical tick.
    Observation {
        #[serde(default)]
        frame: Option<u64>,
        scene: String,
        signature: u64,
        #[serde(default)]
        marks: Value,
        #[serde(default)]
        text: Value,
        #[serde(default)]
        sensors: Value,
    },
    /// A prompt sent to the model (images referenced by frame number, never inlined).
    Prompt {
        cadence: String,
        call: u64,
        #[serde(default)]
        prefix_bytes: u64,
        messages: Value,
    },
    /// The model's reply to a prompt.
    Reply {
        cadence: String,
        call: u64,
        latency_ms: f64,
        #[serde(default)]
        tokens_in: u64,
        #[serde(default)]
        tokens_out: u64,
        text: String,
    },
    /// An action handed to the executor, with the subgoal that owns it (INV-LOOP-002).
    Action {
        action: ActionId,
        subgoal: u32,
        payload: Value,
        #[serde(default)]
        target: Option<Target>,
        #[serde(default)]
        path: Option<GroundingPath>,
    },
    /// A verification outcome (INV-GND-001) and, for failures, its attributed cause (FR-GND-008).
    Verdict {
        action: ActionId,
        verdict: Verdict,
        #[serde(default)]
        cause: Option<FailureCause>,
    },
    /// The context was compacted (FR-CTX-004).
    Compaction {
        before_tokens: u64,
        after_tokens: u64,
        #[serde(default)]
        summary: String,
    },
    /// A safety interlock acted, or the session held or waited (`gamepilot_core::Safeguard`).
    Interlock {
        interlock: gamepilot_core::Safeguard,
        detail: String,
    },
    /// One tick of a cadence: when it was due, when it started, how long it ran, what input was held.
    Timing {
        cadence: String,
        tick: u64,
        scheduled_us: u64,
        started_us: u64,
        duration_us: u64,
        #[serde(default)]
        held: Vec<String>,
    },
    /// A research query and what came back (untrusted text).
    Research {
        query: String,
        #[serde(default)]
        results: Value,
    },
    /// An input of the loop logic (`gamepilot_planner::Event` as JSON), fed back by replay.
    LoopEvent {
        event: Value,
    },
    /// A decision of the loop logic (`gamepilot_planner::Command` as JSON) made on the input `input`
    /// (the `seq` of its `loop_event`).
    Decision {
        input: u64,
        command: Value,
    },
    /// An input of the session core (`gamepilot_session::Input` as JSON), fed back by replay; `now_us`
    /// is the time it was stepped at.
    SessionInput {
        now_us: u64,
        input: Value,
    },
    /// The effects the session core returned for the input `input` (the `seq` of its `session_input`).
    SessionEffects {
        input: u64,
        effects: Value,
    },
    /// An action refused by the executor or the session: never executed (FR-ACT-006).
    Rejected {
        action: ActionId,
        reason: String,
    },
    /// A failure attributed to a cause (FR-GND-008), with the evidence it rests on.
    Failure {
        #[serde(default)]
        action: Option<ActionId>,
        cause: FailureCause,
        #[serde(default)]
        evidence: String,
    },
    /// A free-form note for the reader of the report.
    Note {
        text: String,
    },
    /// The session ended.
    SessionEnd {
        reason: String,
        #[serde(default)]
        summary: Value,
    },
}

impl Record {
    pub fn kind(&self) -> &'static str {
        match self {
            Record::SessionStart(_) => "session_start",
            Record::Frame { .. } => "frame",
            Record::Observation { .. } => "observation",
            Record::Prompt { .. } => "prompt",
            Record::Reply { .. } => "reply",
            Record::Action { .. } => "action",
            Record::Verdict { .. } => "verdict",
            Record::Compaction { .. } => "compaction",
            Record::Interlock { .. } => "interlock",
            Record::Timing { .. } => "timing",
            Record::Research { .. } => "research",
            Record::LoopEvent { .. } => "loop_event",
            Record::Decision { .. } => "decision",
            Record::SessionInput { .. } => "session_input",
            Record::SessionEffects { .. } => "session_effects",
            Record::Rejected { .. } => "rejected",
            Record::Failure { .. } => "failure",
            Record::Note { .. } => "note",
            Record::SessionEnd { .. } => "session_end",
        }
    }
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub seq: u64,
    pub t_us: u64,
    #[serde(flatten)]
    pub record: Record,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_flat_objects_with_kind() {
        // INV-CTX-002 (an open, documented format)
        let l = Line {
            seq: 3,
            t_us: 42,
            record: Record::Interlock {
                interlock: gamepilot_core::Safeguard::FocusLost,
                detail: "x".into(),
            },
        };
        let s = serde_json::to_string(&l).unwrap();
        assert_eq!(
            s,
            r#"{"seq":3,"t_us":42,"kind":"interlock","interlock":"focus_lost","detail":"x"}"#
        );
        let back: Line = serde_json::from_str(&s).unwrap();
        assert_eq!(back, l);
        let v = Line {
            seq: 4,
            t_us: 43,
            record: Record::Verdict {
                action: ActionId(7),
                verdict: Verdict::Refuted,
                cause: Some(FailureCause::Grounding),
            },
        };
        let s = serde_json::to_string(&v).unwrap();
        assert_eq!(
            s,
            r#"{"seq":4,"t_us":43,"kind":"verdict","action":7,"verdict":"refuted","cause":"grounding"}"#
        );
    }
}
