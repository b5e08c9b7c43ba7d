//! What a session reacts to: one typed input per report of a cadence (reflex, tactical, deliberative,
//! research), the user's confirmation answers and stop requests. Serialisable, so a recording holds every
//! input and `gamepilot replay` feeds them back to [`crate::Session::step`].

use gamepilot_context::TacticalReply;
use gamepilot_core::{ActionId, FrameChange, FrameHealth, Interlock, MonoTime, Worker};
use gamepilot_executor::{ActionEnd, RejectReason};
use gamepilot_planner::{PlanSpec, SubgoalCheck};
use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Everything [`crate::Session::step`] accepts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Input {
    /// The session begins (the goal is in the configuration).
    Start,
    /// One reflex report (the reflex ticks at its full rate; the wiring feeds ~10 Hz, see
    /// [`crate::ReflexFeed`]).
    Reflex(ReflexReport),
    /// The executor accepted an action: from now on it is executed (and recorded as such).
    ActionAccepted { action: ActionId },
    /// The executor refused an action at submission (FR-ACT-006): denied key, rate, max hold, stale
    /// grounding …
    ActionRejected { action: ActionId, reason: RejectReason },
    /// The executor stopped stepping an accepted action.
    ActionEnded { action: ActionId, end: ActionEnd },
    /// One change-watch sample for an executed action: did the watched pixels change since it was issued?
    Evidence { action: ActionId, changed: Option<bool> },
    /// A `move_to` ended (the reflex's steering controller): arrived or not, and on how many ticks
    /// tracking saw the moving box.
    Steered {
        action: ActionId,
        end: gamepilot_grounding::SteerEnd,
        sightings: u32,
    },
    /// A safety interlock acted.
    Interlock { interlock: Interlock, detail: String },
    /// The target window is gone.
    WindowGone,
    /// The reflex thread ended (normally after a stop; otherwise the session stops with that reason).
    ReflexStopped(ReflexStats),
    /// A tactical tick's perception of its frame.
    Perceived(Box<crate::tactical::Perception>),
    /// The reply to the tactical tick's model call, read as the call said, or why there is none.
    Replied {
        tick: u64,
        answer: Result<crate::tactical::ModelAnswer, TacticalFailure>,
    },
    /// A two-stage tick's perception of the region around its localising point.
    CropPerceived(Box<crate::tactical::CropPerception>),
    /// A deliberative pass's result.
    Plan(PlanOutcome),
    /// A research's result (untrusted excerpts, a note).
    Research(ResearchFindings),
    /// The user's answer to a destructive-action hold (FR-SAFE-005).
    Confirmation(ConfirmationAnswer),
    /// A GPU-memory degrade step (FR-MODEL-004) the wiring's memory watch decided.
    Degrade(gamepilot_core::DegradeCommand),
    /// A model host the degrade ladder restarts: while the tactical one restarts no tactical call starts.
    HostRestart(HostRestart),
    /// A stop from outside the loop: a signal, a dead worker, the wiring's own failure.
    Stop { reason: ExternalStop },
    /// The user's explicit resume after their input paused the session (FR-SAFE-002).
    Resume,
}

/// One reflex report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReflexReport {
    pub tick: u64,
    /// The strongest frame change since the previous report.
    pub change: FrameChange,
    pub signature: u64,
    /// Inputs held now.
    pub held: u32,
    #[serde(default)]
    pub goal_met: Option<bool>,
    #[serde(default)]
    pub subgoal: Option<SubgoalCheck>,
    #[serde(default)]
    pub sensors: Vec<(String, Option<f64>)>,
    /// The worst lateness of a reflex tick since the previous report.
    #[serde(default)]
    pub late_us: u64,
    /// Reflex ticks since the previous report.
    #[serde(default)]
    pub ticks_since: u64,
    /// The transform chain's generation (FR-PERC-002).
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub health: FrameHealth,
    /// The game has the input focus (FR-SAFE-004); while it has not, the session waits.
    #[serde(default = "in_front")]
    pub foreground: bool,
}

fn in_front() -> bool {
    true
}

/// The reflex's own figures, reported when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReflexStats {
    pub ticks: u64,
    pub lateness_p50_us: u64,
    pub lateness_p99_us: u64,
    pub events: u64,
}

/// A tactical tick's result, once its perception and any model call are in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TacticalOutcome {
    pub tick: u64,
    /// When the tick captured its frame.
    pub started: MonoTime,
    pub observation: Observation,
    /// The observation as the model read it (already bounded by the job's limit).
    pub observation_text: String,
    /// A two-stage tick's crop observation, its marks in capture space (FR-GND-005).
    pub crop: Option<Observation>,
    pub reply: Result<ModelReply, TacticalFailure>,
    /// A perceive-only tick's measure of how each element of the previous tick's observation moved by
    /// this frame (its pixels found again nearby; `None`: not found), for self-identification.
    pub moves: Vec<Option<(f64, f64)>>,
    /// What the tactical prompt sent was made of, for the next one to extend (the host's cache state,
    /// not agent memory).
    pub tail: Option<gamepilot_context::TacticalTail>,
}

/// A schema-checked model reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    pub reply: TacticalReply,
    pub text: String,
    pub latency_ms: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cached_tokens: u64,
}

/// Why a tactical call produced no action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TacticalFailure {
    pub kind: FailureKind,
    pub message: String,
    #[serde(default)]
    pub latency_ms: f64,
}

/// The kinds of tactical failure the session treats differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The host refused the prompt as larger than its context (FR-CTX-004): shrink it or stop.
    ContextOverflow,
    /// The reply broke the schema after its retries.
    SchemaBroken,
    Timeout,
    /// Unreachable host, transport error, another HTTP error.
    Host,
    Cancelled,
    /// Capture or perception failed on this tick.
    Perception,
    /// The tick only perceived, as its job asked (self-identification): no model was called.
    NotAsked,
}

/// A deliberative pass's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanOutcome {
    pub pass: u64,
    pub plan: Result<PlanSpec, String>,
    #[serde(default)]
    pub latency_ms: f64,
    /// The research question the reply wrote, if any (asked when the ladder reaches research).
    #[serde(default)]
    pub research: Option<String>,
    /// The schema-valid reply itself, for a session whose agent declares its own sensors: its
    /// declarations and postconditions are compiled by the session, which knows what was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<serde_json::Value>,
    /// The first subgoal id the pass was given.
    #[serde(default)]
    pub first_id: u32,
}

/// A research's result. Excerpts are untrusted text: `(source, retrieved, text)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchFindings {
    pub query: String,
    pub excerpts: Vec<(String, String, String)>,
    pub note: String,
    pub found: bool,
}

/// The answer to a destructive-action hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmationAnswer {
    pub hold: u64,
    pub allowed: bool,
    /// Who or what decided, in words (pattern, text, overlay / terminal / timeout).
    pub reason: String,
    pub waited_ms: u64,
}

/// A model host restarted by the GPU-memory degrade ladder (FR-MODEL-004): its start and its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRestart {
    /// Which host: "tactical" or "deliberative".
    pub host: String,
    /// True from the restart's start until it ends.
    pub restarting: bool,
    /// Why the restart failed (the host is then stopped).
    #[serde(default)]
    pub failed: Option<String>,
    /// In words, for the recording.
    pub detail: String,
}

/// A stop from outside the loop logic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum ExternalStop {
    /// SIGINT, SIGTERM, SIGHUP.
    Signal { name: String },
    /// A worker thread ended or panicked.
    WorkerDied { worker: Worker, detail: String },
}

impl fmt::Display for ExternalStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternalStop::Signal { name } => write!(f, "signal {name}"),
            ExternalStop::WorkerDied { worker, detail } => write!(f, "the {worker} thread died: {detail}"),
        }
    }
}
