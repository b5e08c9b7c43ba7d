//! Pure logic: plan and subgoals, deliberative triggers, no-progress signals, the escalation ladder, stop
//! conditions — driven as `step(&mut LoopState, Event, now) -> Vec<Command>`.
//!
//! No X11, threads, files or clock: time arrives as [`gamepilot_core::MonoTime`]. Postconditions are
//! evaluated by the caller's sensor program and arrive as tri-state `Option<bool>` values.

pub mod ladder;
pub mod plan;
pub mod signals;
pub mod state;

pub use ladder::{Ladder, Rung};
pub use plan::{
    Budget, BudgetKind, Plan, PlanId, PlanSpec, PostconditionRef, Subgoal, SubgoalSpec, SubgoalStatus,
};
pub use signals::{Detectors, SignalConfig, SignalLevels, StuckSignal};
pub use state::{
    step, Command, Event, FrameChange, LoopConfig, LoopState, LoopStatus, Refusal, StopReason, SubgoalCheck,
    Trigger, VerdictCounts,
};

/// Errors of the planner logic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlannerError {
    #[error("a plan needs at least one subgoal")]
    EmptyPlan,
    #[error("subgoal {0} appears twice in the plan")]
    DuplicateSubgoal(u32),
    #[error("subgoal {0} has no postcondition expression")]
    MissingPostcondition(u32),
    #[error("subgoal {0} has no budget (a time or action bound, greater than zero)")]
    MissingBudget(u32),
}
