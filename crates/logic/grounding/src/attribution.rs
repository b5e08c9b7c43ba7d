//! Failure attribution (FR-GND-008): every failure gets exactly one cause among grounding, action choice,
//! perception, plan, execution and the game, and the causes are kept as a histogram the user can see.

use serde::{Deserialize, Serialize};

/// The attributed cause of one failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCause {
    /// The action landed on the wrong place or element.
    Grounding,
    /// The right place, the wrong action: the target reacted, not as expected.
    ActionChoice,
    /// The agent could not see well enough to judge (undefined sensors, unreadable screen).
    Perception,
    /// The actions worked but the subgoal did not advance the goal within its budget.
    Plan,
    /// The input never reached the game as intended (denied, interlocked, executor error).
    Execution,
    /// The game changed on its own (a cutscene, a load, a death) and invalidated the action.
    Game,
}

impl FailureCause {
    pub const ALL: [FailureCause; 6] = [
        FailureCause::Grounding,
        FailureCause::ActionChoice,
        FailureCause::Perception,
        FailureCause::Plan,
        FailureCause::Execution,
        FailureCause::Game,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureCause::Grounding => "grounding",
            FailureCause::ActionChoice => "action_choice",
            FailureCause::Perception => "perception",
            FailureCause::Plan => "plan",
            FailureCause::Execution => "execution",
            FailureCause::Game => "game",
        }
    }

    fn index(self) -> usize {
        match self {
            FailureCause::Grounding => 0,
            FailureCause::ActionChoice => 1,
            FailureCause::Perception => 2,
            FailureCause::Plan => 3,
            FailureCause::Execution => 4,
            FailureCause::Game => 5,
        }
    }
}

/// What is known about a failure. `None` means not observed; rules only use what is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FailureFacts {
    /// The executor reported that the input was not delivered (denied, interlocked, focus lost, error).
    pub execution_failed: bool,
    /// The scene changed without the agent causing it (cutscene, load screen, death).
    pub unprompted_scene_change: bool,
    /// The owning subgoal's budget ran out even though its actions were confirmed.
    pub subgoal_budget_exhausted: bool,
    /// The evidence could not be read (undefined sensors, occluded element).
    pub evidence_undefined: bool,
    /// Whether the grounded target existed where the action went.
    pub target_present: Option<bool>,
    /// Whether the pixels around the target changed after the action.
    pub target_region_changed: Option<bool>,
    /// Whether something away from the target changed after the action.
    pub changed_elsewhere: Option<bool>,
}

/// Attribute one failure. The rules are ordered, first match wins:
///
/// 1. input not delivered → execution;
/// 2. unprompted scene change → game;
/// 3. subgoal budget ran out with working actions → plan;
/// 4. evidence unreadable → perception;
/// 5. no target where the action went → grounding;
/// 6. the target reacted, not as expected → action choice;
/// 7. the target did not react (whether or not something else did) → grounding;
/// 8. nothing known → grounding (the most common cause in practice, and the one suppression addresses).
pub fn attribute(f: &FailureFacts) -> FailureCause {
    if f.execution_failed {
        FailureCause::Execution
    } else if f.unprompted_scene_change {
        FailureCause::Game
    } else if f.subgoal_budget_exhausted {
        FailureCause::Plan
    } else if f.evidence_undefined {
        FailureCause::Perception
    } else if f.target_present == Some(false) {
        FailureCause::Grounding
    } else if f.target_region_changed == Some(true) {
        FailureCause::ActionChoice
    } else {
        FailureCause::Grounding
    }
}

/// Counts of attributed failures per cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FailureHistogram {
    counts: [u64; 6],
}

impl FailureHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn record(&mut self, cause: FailureCause) {
        self.counts[cause.index()] = self.counts[cause.index()].saturating_add(1);
    }

    pub fn count(&self, cause: FailureCause) -> u64 {
        self.counts[cause.index()]
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(cause, count)` for every cause, in a fixed order (zeros included).
    pub fn entries(&self) -> Vec<(FailureCause, u64)> {
        FailureCause::ALL.iter().map(|c| (*c, self.count(*c))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_reachable_and_ordered() {
        // FR-GND-008
        let base = FailureFacts::default();
        assert_eq!(
            attribute(&FailureFacts {
                execution_failed: true,
                unprompted_scene_change: true,
                ..base
            }),
            FailureCause::Execution
        );
        assert_eq!(
            attribute(&FailureFacts {
                unprompted_scene_change: true,
                evidence_undefined: true,
                ..base
            }),
            FailureCause::Game
        );
        assert_eq!(
            attribute(&FailureFacts {
                subgoal_budget_exhausted: true,
                evidence_undefined: true,
                ..base
            }),
            FailureCause::Plan
        );
        assert_eq!(
            attribute(&FailureFacts {
                evidence_undefined: true,
                target_present: Some(false),
                ..base
            }),
            FailureCause::Perception
        );
        assert_eq!(
            attribute(&FailureFacts {
                target_present: Some(false),
                target_region_changed: Some(true),
                ..base
            }),
            FailureCause::Grounding
        );
        assert_eq!(
            attribute(&FailureFacts {
                target_present: Some(true),
                target_region_changed: Some(true),
                ..base
            }),
            FailureCause::ActionChoice
        );
        assert_eq!(
            attribute(&FailureFacts {
                target_region_changed: Some(false),
                changed_elsewhere: Some(true),
                ..base
            }),
            FailureCause::Grounding
        );
        assert_eq!(attribute(&base), FailureCause::Grounding);
    }

    #[test]
    fn histogram_counts_every_cause() {
        // FR-GND-008
        let mut h = FailureHistogram::new();
        for c in FailureCause::ALL {
            h.record(c);
        }
        h.record(FailureCause::Grounding);
        assert_eq!(h.count(FailureCause::Grounding), 2);
        assert_eq!(h.count(FailureCause::Game), 1);
        assert_eq!(h.total(), 7);
        assert_eq!(h.entries().len(), 6);
        let json = serde_json::to_string(&FailureCause::ActionChoice).unwrap();
        assert_eq!(json, "\"action_choice\"");
    }
}
