//! What a session decides: typed effects for the wiring to carry out (reflex commands, cadence jobs, the
//! tactical tick's model calls, recording records, the stop). Serialisable for the recording: a replay
//! diffs every effect, the tactical and deliberative prompts the session composed included.

use gamepilot_context::{CompactionEvent, Tool};
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::FrameHealth;
use gamepilot_core::{ElementId, Rect, SubgoalId};
use gamepilot_grounding::{ActionId, FailureCause, GroundingPath, Target, Verdict};
use gamepilot_planner::{Command, Event, StopReason, Trigger};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One thing for the wiring to do.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    Reflex(ReflexCommand),
    /// Perceive a frame for a tactical tick; the perception comes back as [`crate::Input::Perceived`].
    StartTactical(Box<TacticalJob>),
    /// Make one model call of the tactical tick in flight; the reply comes back as
    /// [`crate::Input::Replied`].
    CallModel(Box<crate::tactical::ModelCall>),
    /// Perceive the region around a two-stage tick's localising point (FR-GND-005); it comes back as
    /// [`crate::Input::CropPerceived`].
    PerceiveCrop(PerceiveCrop),
    StartDeliberation(DeliberationJob),
    /// Have the tactical host evaluate this prompt's prefix while it is idle (one token asked, the reply
    /// unread): the session's invariant blocks are then in its prefix cache before the first screen that
    /// needs a model call (FR-CTX-002). Nothing waits for it.
    WarmUp(gamepilot_context::Prompt),
    StartResearch(ResearchJob),
    /// Show the destructive-action hold to the user (overlay, terminal) and report the answer as
    /// [`crate::Input::Confirmation`] (FR-SAFE-005).
    AskConfirmation(ConfirmationJob),
    /// Write a record to the session recording (INV-CTX-002: written, never read back by the agent).
    Record(SessionRecord),
    /// The session is over: release everything, end the cadences, write the summary.
    Stop(SessionStop),
}

/// Commands to the reflex thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum ReflexCommand {
    /// Hand an intention to the executor; `generation` is the transform chain it was grounded in.
    Submit {
        action: ActionId,
        intention: Intention,
        generation: u64,
    },
    /// Watch the region (capture space) or the whole frame for change after the action.
    Watch {
        action: ActionId,
        region: Option<Rect>,
        settle_ms: u64,
    },
    /// Release what a subgoal owns (ADR-0035 ownership).
    CancelOwner { subgoal: SubgoalId },
    /// The active subgoal and the index of its postcondition among the session's postconditions.
    Subgoal { active: Option<(SubgoalId, usize)> },
    /// Pause the executor (everything released, nothing delivered) while an action awaits the user.
    Pause { paused: bool },
    /// The session's sensors, replaced after the agent declared some: the whole sensor source (the
    /// user's lines, then the agent's), the goal check, every postcondition a subgoal may name (only ever
    /// appended to, so `Subgoal`'s index stays valid), and the templates to cut from the current frame
    /// for `template_present`, by name, with their boxes in the declared capture space.
    Sensors {
        source: String,
        goal: Option<String>,
        postconditions: Vec<String>,
        templates: Vec<(String, Rect)>,
    },
    /// Steer the steering action `action` (just submitted) toward its target (`move_to`).
    Steer {
        action: ActionId,
        plan: gamepilot_grounding::SteerPlan,
    },
}

/// The region of a two-stage tick to perceive again: around `point` of the localising pass's downscaled
/// frame of size `cheap`, shown within `pixels`; elements overlapping `excluded` (capture-space boxes of
/// suppressed targets, FR-GND-007) left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerceiveCrop {
    pub tick: u64,
    pub point: gamepilot_core::Point,
    pub cheap: gamepilot_core::Size,
    pub pixels: u64,
    pub excluded: Vec<Rect>,
}

/// A tactical tick: what the session plans for it when it starts. The tactical thread perceives the
/// frame (it reads `tick`, `perceive_only` and `keep_frame`); the rest decides, once the perception is
/// back, what the model is asked.
#[derive(Debug, Clone, Serialize)]
pub struct TacticalJob {
    pub tick: u64,
    /// Marks grounding suppressed this tick (FR-GND-007).
    pub excluded_marks: Vec<ElementId>,
    /// The tools this tick offers (the grounding path narrows them, FR-GND-004).
    pub tools: Vec<Tool>,
    pub path: Option<GroundingPath>,
    /// Ground in two stages (FR-GND-005).
    pub two_stage: bool,
    /// How the observation is shown: the image, its budget, the coordinates, the text's cuts.
    #[serde(flatten)]
    pub shape: ObservationShape,
    /// The transform-chain generation when the tick started; its actions are grounded in it.
    pub generation: u64,
    /// The frame's health when the tick started (FR-PERC-009): a black, frozen or occluded frame is
    /// named in the observation the model reads.
    pub health: FrameHealth,
    /// Only perceive: no model call (self-identification's frames after each probe hold).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub perceive_only: bool,
    /// Read the frame's text (OCR). A probe hold's tick does not: it only measures how the previous
    /// frame's boxes moved, and full-frame OCR is most of a perception's cost (the four holds took 1.3 s
    /// each with it); what the screen says stays as the last tick that read it.
    #[serde(skip_serializing_if = "is_true")]
    pub read_text: bool,
    /// Keep this tick's frame for a perceive-only tick that may follow (self-identification enabled and
    /// the avatar not yet known); otherwise the tactical thread holds no copy of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_frame: bool,
    /// The goal and current subgoal: the elements they point at are listed first
    /// (`gamepilot_session::relevance::model_order`).
    #[serde(default)]
    pub focus: crate::relevance::Focus,
    /// The avatar self-identification found: `move_to` may name only places in the world, listed
    /// nearest it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<gamepilot_grounding::AvatarModel>,
    /// The element the current subgoal names, or the step's words, when the session grounds them
    /// itself (`crate::direct`): when one element answers, the tick perceives only and the session
    /// clicks it without a model call.
    #[serde(flatten)]
    pub aim: crate::direct::DirectAim,
    /// The sensors' line of the observation (`crate::sensors_line`), when there are sensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensors: Option<String>,
}

/// Written into the recording only when false (the usual tick reads its text).
fn is_true(b: &bool) -> bool {
    *b
}

/// How a tactical tick's observation is shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationShape {
    pub with_image: bool,
    pub visual_pixels: u64,
    /// How the model answers coordinates when it sees the image; capture pixels otherwise.
    #[serde(default, skip_serializing_if = "is_capture_pixels")]
    pub coords: gamepilot_core::CoordConvention,
    /// The observation text is cut to this many bytes before it enters the prompt.
    pub observation_max_bytes: usize,
    /// It lists at most this many elements (the focus's first).
    pub observation_max_elements: usize,
}

fn is_capture_pixels(c: &gamepilot_core::CoordConvention) -> bool {
    *c == gamepilot_core::CoordConvention::CapturePixels
}

/// A deliberative pass to run: the prompt the session composed (FR-LOOP-004), the plan schema over this
/// session's postconditions, the picture to attach.
#[derive(Debug, Clone, Serialize)]
pub struct DeliberationJob {
    pub pass: u64,
    pub trigger: Trigger,
    pub prompt: gamepilot_context::Prompt,
    pub schema: serde_json::Value,
    /// The latest marked frame at the deliberative budget (FR-MODEL-002), when the model sees images.
    pub image: Option<crate::tactical::ImageWanted>,
    /// The first subgoal id this pass may use (ids are never reused in a session).
    pub first_id: u32,
}

/// A research to run (the ladder's research rung).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResearchJob {
    pub goal: String,
    /// The question a deliberative reply wrote; `None`: the query is built from the goal and inferences.
    pub question: Option<String>,
    pub inferences: Vec<String>,
    /// Deep research (several sources, cross-checked, a brief) rather than search-and-fetch.
    pub deep: bool,
    /// The latest observation text (the research crate keeps screen text out of queries).
    pub screen: String,
}

/// A destructive-action hold to put to the user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfirmationJob {
    pub hold: u64,
    /// The action in JSON.
    pub label: String,
    pub pattern: String,
    pub text: String,
}

/// A record for the session recording.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum SessionRecord {
    /// One step of the loop logic: its input and its decisions (`loop_event` + `decision` records).
    LoopStep {
        event: Event,
        commands: Vec<Command>,
    },
    /// An action handed to the executor.
    Action {
        action: ActionId,
        subgoal: SubgoalId,
        payload: Action,
        target: Option<Target>,
        path: Option<GroundingPath>,
    },
    /// An action the executor or the session refused: recorded as rejected, never as executed.
    Rejected {
        action: ActionId,
        reason: String,
    },
    Verdict {
        action: ActionId,
        verdict: Verdict,
        cause: Option<FailureCause>,
    },
    /// A failure attributed without a verdict (plan, action choice) or to an action after its verdict.
    Failure {
        action: Option<ActionId>,
        cause: FailureCause,
        evidence: String,
    },
    Interlock {
        interlock: gamepilot_core::Safeguard,
        detail: String,
    },
    Compaction(CompactionEvent),
    /// One reflex report's timing (the reflex keeps ticking during deliberation, NFR-LOOP-001).
    ReflexTiming {
        tick: u64,
        late_us: u64,
        ticks_since: u64,
        held: u32,
    },
    Note {
        text: String,
    },
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum SessionStop {
    /// The loop logic stopped (goal met, budgets, no progress, window closed, user stop).
    Loop {
        reason: StopReason,
        /// The interlock behind a user stop, in words.
        #[serde(default)]
        by: Option<String>,
    },
    /// The host kept refusing the prompt as too large even after compaction (FR-CTX-004).
    PromptTooLarge { detail: String },
    /// Capture failed past its retry bound (FR-PERC-009).
    CaptureFailed { detail: String },
    /// The model host stopped answering (killed, crashed) and did not come back.
    ModelHostGone { detail: String },
    /// A signal or a dead worker.
    External { detail: String },
    /// With no `--goal-check`, the model declared no usable check of the goal in its passes: the
    /// session could never tell that the goal was met.
    NoGoalCheck { detail: String },
}

impl SessionStop {
    /// The goal was met: the only stop that is a success.
    pub fn goal_met(&self) -> bool {
        matches!(
            self,
            SessionStop::Loop {
                reason: StopReason::GoalMet,
                ..
            }
        )
    }

    /// The process's exit status for this stop: 0 when the goal was met, else 4 (a stop by a signal
    /// exits 128 + the signal's number instead, decided where the signal is known).
    pub fn exit_code(&self) -> i32 {
        if self.goal_met() {
            0
        } else {
            4
        }
    }
}

impl fmt::Display for SessionStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionStop::Loop { reason, by: Some(by) } => write!(f, "{reason:?} ({by})"),
            SessionStop::Loop { reason, by: None } => write!(f, "{reason:?}"),
            SessionStop::PromptTooLarge { detail } => write!(f, "PromptTooLarge ({detail})"),
            SessionStop::CaptureFailed { detail } => write!(f, "CaptureFailed ({detail})"),
            SessionStop::ModelHostGone { detail } => write!(f, "ModelHostGone ({detail})"),
            SessionStop::External { detail } => write!(f, "Stopped ({detail})"),
            SessionStop::NoGoalCheck { detail } => write!(f, "NoGoalCheck ({detail})"),
        }
    }
}
