//! Pure logic: verification verdicts, suppression of refuted targets, failure attribution, grounding path
//! statistics, the two-stage refinement planner, and self-identification with the steering controller.
//!
//! Nothing here touches X11, threads, files or the clock; time arrives as [`gamepilot_core::MonoTime`] and
//! ticks as counters, so every decision is deterministic and replayable.

pub mod attribution;
pub mod paths;
pub mod refine;
pub mod steer;
pub mod suppress;
pub mod verify;

pub use attribution::{attribute, FailureCause, FailureFacts, FailureHistogram};
pub use paths::{GroundingPath, PathCounts, PathStats};
pub use refine::{plan_crop, plan_crop_box, scale_rect, Crop, RefineConfig};
pub use steer::{
    identify, AvatarModel, DirectionKeys, ProbeSample, SeenElement, SelfIdError, SteerController, SteerEnd,
    SteerPlan, SteerStep,
};
pub use suppress::{Suppressor, Target};
pub use verify::{
    verdict_for, ActionId, ChangeDirection, Evidence, ExpectedChange, PendingCheck, Verdict, Verifier,
};

/// Errors of the grounding logic. Bad input yields one of these, never a panic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GroundingError {
    #[error("evidence of kind `{got}` cannot verify an expected change of kind `{expected}`")]
    EvidenceMismatch {
        expected: &'static str,
        got: &'static str,
    },
    #[error("action {0} is not awaiting verification")]
    UnknownAction(u64),
    #[error("action {0} is already awaiting verification")]
    DuplicateAction(u64),
    #[error("point ({x}, {y}) lies outside the {w}x{h} image it was said to come from")]
    PointOutsideImage { x: i32, y: i32, w: u32, h: u32 },
    #[error("image size {w}x{h} is degenerate")]
    DegenerateImage { w: u32, h: u32 },
    #[error("no grounding path was offered")]
    NoPathOffered,
}
