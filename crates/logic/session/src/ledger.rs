//! The action ledger: each action the session grounded, from its proposal through the executor's taking
//! it to the loop logic's verdict, and the evidence its verification reads (FR-VER-001, FR-VER-002).

use crate::safe_state::ScreenPrint;
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::{ActionId, Rect, SubgoalId};
use gamepilot_grounding::{Evidence, ExpectedChange, FailureFacts, GroundingPath, Target};
use std::collections::BTreeMap;

/// One action from proposal to verdict, by its loop action id.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroundedAction {
    pub(crate) intention: Intention,
    pub(crate) target: Option<Target>,
    pub(crate) path: Option<GroundingPath>,
    pub(crate) expected: ExpectedChange,
    pub(crate) region: Option<Rect>,
    pub(crate) label: String,
    pub(crate) generation: u64,
    /// Handed to the executor (after the loop logic allowed it).
    pub(crate) executed: bool,
    /// The frame's health was unreadable while the action was being verified.
    pub(crate) unreadable_evidence: bool,
    /// A scene change was seen while the action was being verified.
    pub(crate) scene_changed: bool,
    /// A `move_to`: the reflex steers it and its end is the evidence.
    pub(crate) steer: Option<gamepilot_grounding::SteerPlan>,
    /// The verification window, when not the loop's default (a steering run lasts up to its bound).
    pub(crate) settle_ms: Option<u64>,
    /// What the screen showed when the action was chosen: confirmed, it becomes the safe state's target.
    pub(crate) screen: Option<ScreenPrint>,
    /// A click on an element inside one of the game's menus (a popup).
    pub(crate) in_menu: bool,
}

impl GroundedAction {
    /// A grounded action not yet executed, verified against `expected` over `region`.
    pub(crate) fn new(
        action: Action,
        target: Option<Target>,
        path: Option<GroundingPath>,
        (expected, region): (ExpectedChange, Option<Rect>),
        label: String,
        generation: u64,
    ) -> GroundedAction {
        GroundedAction {
            intention: Intention::new(action, SubgoalId(0)),
            target,
            path,
            expected,
            region,
            label,
            generation,
            executed: false,
            unreadable_evidence: false,
            scene_changed: false,
            steer: None,
            settle_ms: None,
            screen: None,
            in_menu: false,
        }
    }
}

/// The actions proposed and not yet judged. An action enters when proposed, is marked when the loop
/// logic lets the executor take it, collects what the frames showed while it is verified, and leaves
/// with its verdict, its rejection or its failure.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ActionLedger {
    open: BTreeMap<ActionId, GroundedAction>,
}

impl ActionLedger {
    /// A grounded action handed to the loop logic under `id`.
    pub(crate) fn propose(&mut self, id: ActionId, action: GroundedAction) {
        self.open.insert(id, action);
    }

    /// No action is proposed, executing or being verified.
    pub(crate) fn is_idle(&self) -> bool {
        self.open.is_empty()
    }

    pub(crate) fn is_open(&self, id: ActionId) -> bool {
        self.open.contains_key(&id)
    }

    pub(crate) fn get(&self, id: ActionId) -> Option<&GroundedAction> {
        self.open.get(&id)
    }

    /// The loop logic let the executor take it, for `subgoal`.
    pub(crate) fn execute(&mut self, id: ActionId, subgoal: SubgoalId) -> Option<&GroundedAction> {
        let a = self.open.get_mut(&id)?;
        a.intention.subgoal = subgoal;
        a.executed = true;
        Some(a)
    }

    /// The action, once the executor has it (a proposal still held by the loop logic is not).
    pub(crate) fn executed(&self, id: ActionId) -> Option<&GroundedAction> {
        self.open.get(&id).filter(|a| a.executed)
    }

    /// A frame arrived: what it showed is evidence for every action being verified.
    pub(crate) fn frame_seen(&mut self, unreadable: bool, scene_changed: bool) {
        for a in self.open.values_mut().filter(|a| a.executed) {
            a.unreadable_evidence |= unreadable;
            a.scene_changed |= scene_changed;
        }
    }

    /// The evidence and failure facts of the action's verification window, `changed` being whether its
    /// region changed (`None`: unreadable).
    pub(crate) fn evidence(&self, id: ActionId, changed: Option<bool>) -> Option<(Evidence, FailureFacts)> {
        let a = self.open.get(&id)?;
        let facts = FailureFacts {
            target_region_changed: changed,
            evidence_undefined: changed.is_none() || a.unreadable_evidence,
            unprompted_scene_change: a.scene_changed && changed == Some(false),
            ..FailureFacts::default()
        };
        Some((evidence_for(&a.expected, changed), facts))
    }

    /// The action is judged, refused or failed: it leaves the ledger.
    pub(crate) fn settle(&mut self, id: ActionId) -> Option<GroundedAction> {
        self.open.remove(&id)
    }
}

/// The evidence an expected change reads from "did the region change".
fn evidence_for(expected: &ExpectedChange, changed: Option<bool>) -> Evidence {
    match expected {
        ExpectedChange::ElementChanged { .. } => Evidence::ElementChanged { changed },
        ExpectedChange::SensorDelta { .. } => Evidence::SensorDelta {
            before: Some(0.0),
            after: changed.map(|c| if c { 1.0 } else { 0.0 }),
        },
        ExpectedChange::Postcondition { .. } => Evidence::Postcondition { value: changed },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::action::Action;
    use gamepilot_core::ElementId;

    fn click() -> GroundedAction {
        GroundedAction::new(
            Action::Key { key: "Return".into() },
            None,
            None,
            (
                ExpectedChange::ElementChanged {
                    element: ElementId(4),
                },
                None,
            ),
            "press Return".into(),
            3,
        )
    }

    #[test]
    fn an_action_goes_from_proposal_through_execution_to_its_verdict() {
        // FR-VER-001: every action is checked; the ledger holds it until its verdict.
        let mut l = ActionLedger::default();
        assert!(l.is_idle());
        l.propose(ActionId(7), click());
        assert!(l.is_open(ActionId(7)) && !l.is_idle());
        assert!(l.executed(ActionId(7)).is_none(), "proposed, not yet taken");
        // Frames seen before the executor took it are not its evidence.
        l.frame_seen(true, true);
        let a = l.execute(ActionId(7), SubgoalId(2)).unwrap();
        assert_eq!(a.intention.subgoal, SubgoalId(2));
        assert!(l.executed(ActionId(7)).is_some());
        let (evidence, facts) = l.evidence(ActionId(7), Some(true)).unwrap();
        assert_eq!(evidence, Evidence::ElementChanged { changed: Some(true) });
        assert!(!facts.evidence_undefined && !facts.unprompted_scene_change);
        assert_eq!(
            l.settle(ActionId(7)).map(|a| a.label),
            Some("press Return".into())
        );
        assert!(l.is_idle() && l.evidence(ActionId(7), Some(true)).is_none());
    }

    #[test]
    fn what_the_frames_showed_while_it_was_verified_becomes_its_failure_facts() {
        // FR-VER-002: an unreadable frame makes the evidence undefined; a scene change with the region
        // unchanged is an unprompted scene change, not our action's effect.
        let mut l = ActionLedger::default();
        l.propose(ActionId(1), click());
        l.execute(ActionId(1), SubgoalId(1));
        l.frame_seen(false, true);
        let (_, facts) = l.evidence(ActionId(1), Some(false)).unwrap();
        assert!(facts.unprompted_scene_change && !facts.evidence_undefined);
        l.frame_seen(true, false);
        let (evidence, facts) = l.evidence(ActionId(1), None).unwrap();
        assert_eq!(evidence, Evidence::ElementChanged { changed: None });
        assert!(facts.evidence_undefined);
        assert_eq!(facts.target_region_changed, None);
    }

    #[test]
    fn each_expected_change_reads_the_region_its_own_way() {
        assert_eq!(
            evidence_for(
                &ExpectedChange::Postcondition {
                    source: "coins >= 1".into()
                },
                Some(false)
            ),
            Evidence::Postcondition { value: Some(false) }
        );
        assert_eq!(
            evidence_for(
                &ExpectedChange::SensorDelta {
                    sensor: "coins".into(),
                    direction: gamepilot_grounding::ChangeDirection::Increase,
                    min_delta: 1.0,
                },
                Some(true)
            ),
            Evidence::SensorDelta {
                before: Some(0.0),
                after: Some(1.0)
            }
        );
    }
}
