//! Plans and subgoals (FR-LOOP-003, FR-LOOP-004): each subgoal carries a machine-checkable postcondition
//! (sensor-language source plus the caller's opaque compiled handle) and a budget of time and actions.

use crate::PlannerError;
use gamepilot_core::{MonoTime, SubgoalId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A postcondition in the sensor language. The planner never evaluates it: the reflex cadence does, with
/// the compiled program it registered under `handle`, and reports the tri-state value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostconditionRef {
    pub source: String,
    /// Opaque handle of the caller's compiled program.
    pub handle: u64,
}

/// A subgoal's budget; at least one bound must be set (FR-LOOP-004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_actions: Option<u32>,
}

/// Which bound of a budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    Time,
    Actions,
}

/// One subgoal as a deliberative pass proposes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubgoalSpec {
    pub id: SubgoalId,
    pub description: String,
    pub postcondition: PostconditionRef,
    pub budget: Budget,
}

/// A plan as a deliberative pass proposes it: an ordered list of subgoals.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlanSpec {
    pub subgoals: Vec<SubgoalSpec>,
}

impl PlanSpec {
    /// A plan is valid when it has subgoals with unique ids, non-empty postconditions and a budget each.
    pub fn validate(&self) -> Result<(), PlannerError> {
        if self.subgoals.is_empty() {
            return Err(PlannerError::EmptyPlan);
        }
        for (i, s) in self.subgoals.iter().enumerate() {
            if self.subgoals[..i].iter().any(|o| o.id == s.id) {
                return Err(PlannerError::DuplicateSubgoal(s.id.0));
            }
            if s.postcondition.source.trim().is_empty() {
                return Err(PlannerError::MissingPostcondition(s.id.0));
            }
            let b = s.budget;
            if b.max_time_ms.is_none() && b.max_actions.is_none()
                || b.max_time_ms == Some(0)
                || b.max_actions == Some(0)
            {
                return Err(PlannerError::MissingBudget(s.id.0));
            }
        }
        Ok(())
    }
}

/// Identifies an adopted plan within a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct PlanId(pub u64);

/// Where a subgoal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubgoalStatus {
    Pending,
    Active,
    Done,
    Abandoned,
}

/// A subgoal of the active plan with its progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subgoal {
    pub spec: SubgoalSpec,
    pub status: SubgoalStatus,
    pub started_at: Option<MonoTime>,
    pub actions: u32,
}

impl Subgoal {
    /// Which bound of the budget is exhausted at `now`, if any. `pending_action` counts the action about
    /// to be executed.
    pub fn exhausted(&self, now: MonoTime, pending_action: bool) -> Option<BudgetKind> {
        let b = self.spec.budget;
        if let (Some(max), Some(start)) = (b.max_time_ms, self.started_at) {
            if now.since(start) >= Duration::from_millis(max) {
                return Some(BudgetKind::Time);
            }
        }
        if let Some(max) = b.max_actions {
            if self.actions + u32::from(pending_action) > max {
                return Some(BudgetKind::Actions);
            }
        }
        None
    }
}

/// The one active plan (INV-LOOP-001): subgoals in order, the first not done or abandoned is active.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub id: PlanId,
    pub subgoals: Vec<Subgoal>,
}

impl Plan {
    pub(crate) fn from_spec(id: PlanId, spec: PlanSpec) -> Plan {
        Plan {
            id,
            subgoals: spec
                .subgoals
                .into_iter()
                .map(|spec| Subgoal {
                    spec,
                    status: SubgoalStatus::Pending,
                    started_at: None,
                    actions: 0,
                })
                .collect(),
        }
    }

    pub fn active(&self) -> Option<&Subgoal> {
        self.subgoals.iter().find(|s| s.status == SubgoalStatus::Active)
    }

    pub(crate) fn active_mut(&mut self) -> Option<&mut Subgoal> {
        self.subgoals
            .iter_mut()
            .find(|s| s.status == SubgoalStatus::Active)
    }

    /// Activate the first pending subgoal; returns its id.
    pub(crate) fn activate_next(&mut self, now: MonoTime) -> Option<SubgoalId> {
        let s = self
            .subgoals
            .iter_mut()
            .find(|s| s.status == SubgoalStatus::Pending)?;
        s.status = SubgoalStatus::Active;
        s.started_at = Some(now);
        Some(s.spec.id)
    }

    pub fn contains(&self, id: SubgoalId) -> bool {
        self.subgoals.iter().any(|s| s.spec.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sg(id: u32, time: Option<u64>, actions: Option<u32>) -> SubgoalSpec {
        SubgoalSpec {
            id: SubgoalId(id),
            description: format!("subgoal {id}"),
            postcondition: PostconditionRef {
                source: format!("done_{id}"),
                handle: id as u64,
            },
            budget: Budget {
                max_time_ms: time,
                max_actions: actions,
            },
        }
    }

    #[test]
    fn every_subgoal_needs_a_postcondition_and_a_budget() {
        // FR-LOOP-004
        assert_eq!(PlanSpec::default().validate(), Err(PlannerError::EmptyPlan));
        let ok = PlanSpec {
            subgoals: vec![sg(1, Some(1000), None), sg(2, None, Some(3))],
        };
        assert_eq!(ok.validate(), Ok(()));
        let mut no_post = ok.clone();
        no_post.subgoals[1].postcondition.source = "  ".into();
        assert_eq!(no_post.validate(), Err(PlannerError::MissingPostcondition(2)));
        let no_budget = PlanSpec {
            subgoals: vec![sg(1, None, None)],
        };
        assert_eq!(no_budget.validate(), Err(PlannerError::MissingBudget(1)));
        let zero = PlanSpec {
            subgoals: vec![sg(1, Some(0), Some(4))],
        };
        assert_eq!(zero.validate(), Err(PlannerError::MissingBudget(1)));
        let dup = PlanSpec {
            subgoals: vec![sg(1, Some(5), None), sg(1, Some(5), None)],
        };
        assert_eq!(dup.validate(), Err(PlannerError::DuplicateSubgoal(1)));
    }

    #[test]
    fn budget_exhaustion_by_time_and_actions() {
        // FR-LOOP-004
        let mut p = Plan::from_spec(
            PlanId(1),
            PlanSpec {
                subgoals: vec![sg(1, Some(1000), Some(2))],
            },
        );
        let t0 = MonoTime::from_millis(100);
        assert_eq!(p.activate_next(t0), Some(SubgoalId(1)));
        let s = p.active_mut().unwrap();
        assert_eq!(s.exhausted(MonoTime::from_millis(1099), false), None);
        assert_eq!(
            s.exhausted(MonoTime::from_millis(1100), false),
            Some(BudgetKind::Time)
        );
        s.actions = 2;
        assert_eq!(s.exhausted(t0, false), None);
        assert_eq!(s.exhausted(t0, true), Some(BudgetKind::Actions));
        assert_eq!(p.activate_next(t0), None);
    }
}
