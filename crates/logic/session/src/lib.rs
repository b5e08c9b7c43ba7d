//! The session core of `gamepilot run` (pure logic): typed inputs from the cadences in, typed effects out.
//! No IO, threads or clock — time is an argument — so `gamepilot replay` drives the very same decisions
//! from a recording.

pub mod bench_context;
pub mod declare;
pub mod destructive;
pub mod direct;
pub mod effect;
pub mod eval;
mod explore;
pub mod fresh;
pub mod goal_steps;
mod host_health;
pub mod input;
mod ledger;
pub mod plan;
mod reflex_feed;
pub mod relevance;
pub mod safe_state;
pub mod scene;
pub mod selfid;
mod session;
mod survey;
pub mod tactical;

pub use effect::{
    ConfirmationJob, DeliberationJob, Effect, ObservationShape, PerceiveCrop, ReflexCommand, ResearchJob,
    SessionRecord, SessionStop, TacticalJob,
};
pub use input::{
    ConfirmationAnswer, ExternalStop, FailureKind, HostRestart, Input, ModelReply, PlanOutcome, ReflexReport,
    ReflexStats, ResearchFindings, TacticalFailure,
};
pub use scene::{scene_kind, SceneKind};

// The pure crates' types that cross the session's boundary — in its inputs, effects and configuration, and
// in the share of the work its threads carry (the reflex's steering, the tactical thread's region and
// calls, `eval` and `bench model`): the runtime reaches the logic through the session only.
pub use gamepilot_context::{
    tactical_schema, validate, Cadence, ContextError, ImagePart, ObservationText, Part, Prompt, SchemaLimits,
    TacticalReply, ToolSet,
};
pub use gamepilot_grounding::{
    plan_crop, scale_rect, Crop, GroundingPath, RefineConfig, SteerController, SteerEnd, SteerPlan,
};
pub use gamepilot_planner::{LoopConfig, PlanSpec, SubgoalCheck};
pub use reflex_feed::{observation_signature, ReflexFeed};
pub use selfid::{SelfId, SelfIdStep, SteeringConfig};
pub use session::{
    bound_text, observation_for_model, sensors_line, session_tools, tools_for, tools_for_path, ActionCounts,
    Behaviours, FrameNumbers, ModelCallCounts, PromptLimits, Session, SessionConfig, SessionNumbers, Waits,
    TOOLS,
};
pub use tactical::{CropPerception, ImageWanted, ModelAnswer, ModelCall, Perception, Picture, Reading};

/// Why a session could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no machine-checkable postcondition: pass --goal-check EXPR or a --sensors file with a boolean sensor (FR-LOOP-004)")]
    NoPostcondition,
    #[error(transparent)]
    Context(#[from] gamepilot_context::ContextError),
    #[error("the sensors do not compile:\n{0}")]
    Sensors(String),
}

#[cfg(test)]
mod tests;
