//! What of the reflex reaches the session: each tick's report folded into one every few ticks (at once on
//! a scene change, the goal check or the subgoal turning, the focus moving), and the observation signature.

use crate::input::{Input, ReflexReport};
use gamepilot_planner::FrameChange;
use gamepilot_vision::Observation;

/// A perceptual signature of an observation's layout (element count and boxes).
pub fn observation_signature(obs: &Observation) -> u64 {
    obs.elements.iter().fold(obs.elements.len() as u64, |h, e| {
        h.wrapping_mul(31)
            .wrapping_add(((e.bbox.x as u64) << 16) ^ e.bbox.y as u64)
    })
}

/// The wiring's feed of reflex ticks: every tick's figures go in, a report comes out every `every`-th
/// tick and at once on a scene change or a goal change, carrying the strongest change since the previous
/// report (so a change on an unreported tick never reads as stasis, FR-LOOP-005) and the worst lateness.
#[derive(Debug, Clone)]
pub struct ReflexFeed {
    every: u64,
    strongest: FrameChange,
    worst_late_us: u64,
    ticks: u64,
    last_goal_met: Option<bool>,
    /// The subgoal check last reported: a change (a postcondition true for a single tick) is reported at
    /// once, so no transition is lost between reports.
    last_subgoal: Option<gamepilot_planner::SubgoalCheck>,
    last_foreground: bool,
}

fn rank(c: FrameChange) -> u8 {
    match c {
        FrameChange::Unchanged => 0,
        FrameChange::Local => 1,
        FrameChange::Motion => 2,
        FrameChange::Scene => 3,
    }
}

impl ReflexFeed {
    pub fn new(every: u64) -> ReflexFeed {
        ReflexFeed {
            every: every.max(1),
            strongest: FrameChange::Unchanged,
            worst_late_us: 0,
            ticks: 0,
            last_goal_met: None,
            last_subgoal: None,
            last_foreground: true,
        }
    }

    /// One input from the reflex: its ticks through [`ReflexFeed::tick`], everything else at once.
    pub fn pass(&mut self, input: Input) -> Option<Input> {
        match input {
            Input::Reflex(report) => self.tick(report).map(Input::Reflex),
            other => Some(other),
        }
    }

    /// One reflex tick; `Some` when it is to be reported. `report.change` and `report.late_us` are this
    /// tick's; the returned report has the aggregates.
    pub fn tick(&mut self, mut report: ReflexReport) -> Option<ReflexReport> {
        if rank(report.change) > rank(self.strongest) {
            self.strongest = report.change;
        }
        self.worst_late_us = self.worst_late_us.max(report.late_us);
        self.ticks += 1;
        let due = report.tick.is_multiple_of(self.every)
            || report.change == FrameChange::Scene
            || report.goal_met != self.last_goal_met
            || report.subgoal != self.last_subgoal
            || report.foreground != self.last_foreground;
        if !due {
            return None;
        }
        self.last_goal_met = report.goal_met;
        self.last_subgoal = report.subgoal;
        self.last_foreground = report.foreground;
        report.change = std::mem::replace(&mut self.strongest, FrameChange::Unchanged);
        report.late_us = std::mem::take(&mut self.worst_late_us);
        report.ticks_since = std::mem::take(&mut self.ticks);
        Some(report)
    }
}
