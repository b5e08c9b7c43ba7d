//! Unit tests of the loop logic: triggers, signals, rungs, stop conditions, plan ownership.

use super::*;
use crate::plan::{Budget, PostconditionRef, SubgoalSpec};
use gamepilot_core::ElementId;

struct H {
    s: LoopState,
    t: u64,
    tick: u64,
    next_action: u64,
}

fn sg(id: u32) -> SubgoalSpec {
    SubgoalSpec {
        id: SubgoalId(id),
        description: format!("subgoal {id}"),
        postcondition: PostconditionRef {
            source: format!("done_{id}"),
            handle: id as u64,
        },
        budget: Budget {
            max_time_ms: Some(600_000),
            max_actions: Some(1000),
        },
    }
}

fn plan(ids: &[u32]) -> PlanSpec {
    PlanSpec {
        subgoals: ids.iter().map(|i| sg(*i)).collect(),
    }
}

impl H {
    fn new(cfg: LoopConfig) -> H {
        H {
            s: LoopState::new(cfg),
            t: 0,
            tick: 0,
            next_action: 1,
        }
    }

    /// Started, with plan [1, 2] adopted from pass 1.
    fn ready(cfg: LoopConfig) -> H {
        let mut h = H::new(cfg);
        let c = h.ev(Event::Start { goal: "win".into() });
        assert_eq!(
            c,
            vec![Command::StartDeliberation {
                pass: 1,
                trigger: Trigger::Start
            }]
        );
        let c = h.ev(Event::DeliberationDone {
            pass: 1,
            plan: Some(plan(&[1, 2])),
        });
        assert_eq!(
            c,
            vec![
                Command::PlanAdopted {
                    plan: PlanId(1),
                    subgoals: vec![SubgoalId(1), SubgoalId(2)]
                },
                Command::SubgoalStarted {
                    subgoal: SubgoalId(1)
                }
            ]
        );
        h.ev(Event::Observation {
            scene: "world".into(),
            signature: 7,
        });
        // The first frame, which the start pass was composed from.
        h.tick(FrameChange::Scene, 0);
        h
    }

    fn at(&mut self, ms: u64) -> &mut Self {
        self.t = ms;
        self
    }

    fn ev(&mut self, e: Event) -> Vec<Command> {
        self.s.step(e, MonoTime::from_millis(self.t))
    }

    fn tick(&mut self, change: FrameChange, held: u32) -> Vec<Command> {
        self.tick += 1;
        self.ev(Event::ReflexTick {
            tick: self.tick,
            change,
            signature: 1,
            held,
            progress: None,
            goal_met: Some(false),
            subgoal: None,
        })
    }

    fn propose(&mut self, key: &str, target: Option<Target>) -> (ActionId, Vec<Command>) {
        let a = ActionId(self.next_action);
        self.next_action += 1;
        let c = self.ev(Event::ActionProposed {
            action: a,
            key: key.into(),
            target,
            path: Some(GroundingPath::Mark),
            expected: ExpectedChange::Postcondition { source: "x".into() },
            settle_ms: Some(200),
        });
        (a, c)
    }

    fn evidence(&mut self, a: ActionId, value: Option<bool>) -> Vec<Command> {
        self.ev(Event::Evidence {
            action: a,
            evidence: Evidence::Postcondition { value },
            facts: FailureFacts::default(),
        })
    }
}

fn has(c: &[Command], want: &Command) -> bool {
    c.contains(want)
}

fn mark(id: u32) -> Option<Target> {
    Some(Target::Mark {
        element: ElementId(id),
    })
}

fn no_timer() -> LoopConfig {
    LoopConfig {
        deliberation_interval_ms: u64::MAX / 4,
        rung_timeout_ms: u64::MAX / 4,
        ..Default::default()
    }
}

#[test]
fn only_the_pass_in_flight_may_revise_the_plan() {
    // FR-LOOP-003, INV-LOOP-001
    let mut h = H::ready(no_timer());
    // no pass in flight: a plan cannot be pushed in
    let c = h.at(100).ev(Event::DeliberationDone {
        pass: 1,
        plan: Some(plan(&[9])),
    });
    assert!(matches!(c.as_slice(), [Command::PlanRejected { pass: 1, .. }]));
    assert_eq!(h.s.plan().unwrap().id, PlanId(1));
    // a scene change starts pass 2; a stale id is refused, the right one adopted
    let c = h.tick(FrameChange::Scene, 0);
    assert!(has(
        &c,
        &Command::StartDeliberation {
            pass: 2,
            trigger: Trigger::SceneChange
        }
    ));
    let c = h.ev(Event::DeliberationDone {
        pass: 1,
        plan: Some(plan(&[9])),
    });
    assert!(matches!(c.as_slice(), [Command::PlanRejected { pass: 1, .. }]));
    let c = h.ev(Event::DeliberationDone {
        pass: 2,
        plan: Some(plan(&[3, 4])),
    });
    assert_eq!(
        c,
        vec![
            Command::CancelSubgoal {
                subgoal: SubgoalId(1)
            }, // INV-LOOP-002: its inputs are released
            Command::PlanAdopted {
                plan: PlanId(2),
                subgoals: vec![SubgoalId(3), SubgoalId(4)]
            },
            Command::SubgoalStarted {
                subgoal: SubgoalId(3)
            },
        ]
    );
    // one plan only
    assert_eq!(h.s.plan().unwrap().subgoals.len(), 2);
    assert_eq!(h.s.active_subgoal(), Some(SubgoalId(3)));
}

#[test]
fn invalid_plan_is_rejected_and_the_old_one_kept() {
    // FR-LOOP-004, INV-LOOP-001
    let mut h = H::ready(no_timer());
    h.tick(FrameChange::Scene, 0);
    let mut bad = plan(&[5]);
    bad.subgoals[0].budget = Budget::default();
    let c = h.ev(Event::DeliberationDone {
        pass: 2,
        plan: Some(bad),
    });
    assert!(matches!(c.as_slice(), [Command::PlanRejected { pass: 2, .. }]));
    assert_eq!(h.s.active_subgoal(), Some(SubgoalId(1)));
    // keeping the plan is also an answer
    h.at(5000).tick(FrameChange::Scene, 0);
    let c = h.ev(Event::DeliberationDone { pass: 3, plan: None });
    assert_eq!(c, vec![Command::PlanKept { pass: 3 }]);
}

#[test]
fn actions_keep_executing_on_the_previous_plan_during_a_pass() {
    // NFR-LOOP-001, FR-LOOP-002: nothing waits for the deliberative pass
    let mut h = H::ready(no_timer());
    let c = h.at(1000).tick(FrameChange::Scene, 1);
    assert!(has(
        &c,
        &Command::StartDeliberation {
            pass: 2,
            trigger: Trigger::SceneChange
        }
    ));
    assert_eq!(h.s.deliberating(), Some(2));
    for i in 0..30u64 {
        h.at(1000 + i * 16);
        let c = h.tick(FrameChange::Local, 1);
        assert!(c.iter().all(|c| !matches!(c, Command::PlanAdopted { .. })));
    }
    let (a, c) = h.propose("press right", None);
    assert_eq!(
        c,
        vec![Command::Execute {
            action: a,
            subgoal: SubgoalId(1)
        }]
    );
    h.at(3000);
    let c = h.ev(Event::DeliberationDone {
        pass: 2,
        plan: Some(plan(&[1, 2])),
    });
    // subgoal 1 is in the new plan: it is not cancelled
    assert!(!c.iter().any(|c| matches!(c, Command::CancelSubgoal { .. })));
}

#[test]
fn deliberative_triggers_scene_subgoal_stuck_timer() {
    // FR-LOOP-007
    let cfg = LoopConfig {
        deliberation_interval_ms: 10_000,
        scene_debounce_ms: 500,
        ..no_timer()
    };
    let mut h = H::ready(cfg);
    // scene change
    let c = h.at(100).tick(FrameChange::Scene, 0);
    assert!(has(
        &c,
        &Command::StartDeliberation {
            pass: 2,
            trigger: Trigger::SceneChange
        }
    ));
    h.ev(Event::DeliberationDone { pass: 2, plan: None });
    // debounced
    let c = h.at(300).tick(FrameChange::Scene, 0);
    assert!(!c.iter().any(|c| matches!(c, Command::StartDeliberation { .. })));
    // subgoal completion
    h.at(700);
    h.tick += 1;
    let c = h.ev(Event::ReflexTick {
        tick: h.tick,
        change: FrameChange::Local,
        signature: 1,
        held: 0,
        progress: None,
        goal_met: Some(false),
        subgoal: Some(SubgoalCheck {
            subgoal: SubgoalId(1),
            met: Some(true),
        }),
    });
    assert_eq!(
        c,
        vec![
            Command::SubgoalCompleted {
                subgoal: SubgoalId(1)
            },
            Command::SubgoalStarted {
                subgoal: SubgoalId(2)
            },
            Command::StartDeliberation {
                pass: 3,
                trigger: Trigger::SubgoalCompleted
            }
        ]
    );
    h.ev(Event::DeliberationDone { pass: 3, plan: None });
    // stuck (three refutations in a row)
    h.at(800);
    let mut last = Vec::new();
    for i in 0..3 {
        let (a, _) = h.propose(&format!("k{i}"), None);
        last = h.evidence(a, Some(false));
        h.at(1100 + i * 300);
        last.extend(h.evidence(a, Some(false)));
    }
    assert!(has(
        &last,
        &Command::Stuck {
            signal: StuckSignal::RefutationStreak
        }
    ));
    assert!(has(
        &last,
        &Command::StartDeliberation {
            pass: 4,
            trigger: Trigger::Stuck
        }
    ));
    h.ev(Event::DeliberationDone { pass: 4, plan: None });
    // timer: 10 s after the last pass ended
    let end = h.t;
    h.at(end + 9_999);
    assert!(!h
        .tick(FrameChange::Local, 0)
        .iter()
        .any(|c| matches!(c, Command::StartDeliberation { .. })));
    h.at(end + 10_000);
    assert!(has(
        &h.tick(FrameChange::Local, 0),
        &Command::StartDeliberation {
            pass: 5,
            trigger: Trigger::Timer
        }
    ));
}

#[test]
fn triggers_during_a_pass_coalesce_into_one_follow_up() {
    // FR-LOOP-007, INV-LOOP-001 (one pass at a time, one plan)
    let mut h = H::ready(LoopConfig {
        scene_debounce_ms: 0,
        ..no_timer()
    });
    h.at(10).tick(FrameChange::Scene, 0);
    h.at(20).tick(FrameChange::Scene, 0);
    h.at(30).tick(FrameChange::Scene, 0);
    let c = h.ev(Event::DeliberationDone { pass: 2, plan: None });
    assert_eq!(
        c,
        vec![
            Command::PlanKept { pass: 2 },
            Command::StartDeliberation {
                pass: 3,
                trigger: Trigger::SceneChange
            }
        ]
    );
    let c = h.ev(Event::DeliberationDone { pass: 3, plan: None });
    assert_eq!(c, vec![Command::PlanKept { pass: 3 }]);
}

#[test]
fn refuted_target_is_suppressed_for_bounded_ticks_and_not_retried() {
    // FR-GND-007, FR-GND-006, FR-GND-008
    let mut h = H::ready(LoopConfig {
        suppress_ticks: 2,
        ..no_timer()
    });
    let (a, c) = h.at(100).propose("click 5", mark(5));
    assert_eq!(
        c,
        vec![Command::Execute {
            action: a,
            subgoal: SubgoalId(1)
        }]
    );
    assert!(h.evidence(a, Some(false)).is_empty()); // refutation waits for the settle window
    let c = h.at(300).evidence(a, Some(false));
    assert_eq!(
        c,
        vec![
            Command::Verdict {
                action: a,
                verdict: Verdict::Refuted
            },
            Command::Failure {
                action: Some(a),
                cause: FailureCause::Grounding
            },
            Command::Suppress {
                target: Target::Mark {
                    element: ElementId(5)
                },
                until_tick: 3
            },
        ]
    );
    // the next tactical tick leaves mark 5 out, and a proposal of it is refused
    let c = h.ev(Event::Observation {
        scene: "world".into(),
        signature: 8,
    });
    assert_eq!(
        c,
        vec![Command::Exclude {
            targets: vec![Target::Mark {
                element: ElementId(5)
            }]
        }]
    );
    let (b, c) = h.propose("click 5", mark(5));
    assert_eq!(
        c,
        vec![Command::Reject {
            action: b,
            reason: Refusal::Suppressed
        }]
    );
    let (d, c) = h.propose("click 6", mark(6));
    assert_eq!(
        c,
        vec![Command::Execute {
            action: d,
            subgoal: SubgoalId(1)
        }]
    );
    // bounded: allowed again once the bound passes
    assert!(h
        .ev(Event::Observation {
            scene: "world".into(),
            signature: 9
        })
        .is_empty());
    let (e, c) = h.propose("click 5", mark(5));
    assert_eq!(
        c,
        vec![Command::Execute {
            action: e,
            subgoal: SubgoalId(1)
        }]
    );
    assert_eq!(h.s.histogram().count(FailureCause::Grounding), 1);
}

#[test]
fn undefined_evidence_is_inconclusive_and_undelivered_input_is_execution() {
    // INV-GND-001, FR-GND-008
    let mut h = H::ready(no_timer());
    let (a, _) = h.at(100).propose("click 2", mark(2));
    h.evidence(a, None);
    let c = h.at(400).tick(FrameChange::Local, 0);
    assert_eq!(
        c,
        vec![Command::Verdict {
            action: a,
            verdict: Verdict::Inconclusive
        }]
    );
    assert!(!h.s.is_suppressed(&Target::Mark {
        element: ElementId(2)
    }));
    let (b, _) = h.propose("click 3", mark(3));
    let c = h.ev(Event::ActionFailed {
        action: b,
        reason: "focus lost".into(),
    });
    assert_eq!(
        c,
        vec![
            Command::Verdict {
                action: b,
                verdict: Verdict::Inconclusive
            },
            Command::Failure {
                action: Some(b),
                cause: FailureCause::Execution
            }
        ]
    );
    assert_eq!(h.s.histogram().count(FailureCause::Execution), 1);
    assert_eq!(h.s.verdict_counts().inconclusive, 2);
}

#[test]
fn grounding_path_follows_confirmation_rates() {
    // FR-GND-004
    let mut h = H::ready(LoopConfig {
        path_min_trials: 1,
        ..no_timer()
    });
    let offered = vec![GroundingPath::Mark, GroundingPath::Coordinate];
    for (path, value) in [
        (GroundingPath::Mark, Some(false)),
        (GroundingPath::Coordinate, Some(true)),
    ] {
        let a = ActionId(h.next_action);
        h.next_action += 1;
        h.ev(Event::ActionProposed {
            action: a,
            key: format!("{path:?}"),
            target: None,
            path: Some(path),
            expected: ExpectedChange::Postcondition { source: "x".into() },
            settle_ms: Some(0),
        });
        h.evidence(a, value);
    }
    let c = h.ev(Event::GroundingRequest {
        request: 1,
        scene: "world".into(),
        offered: offered.clone(),
    });
    assert_eq!(
        c,
        vec![Command::UsePath {
            request: 1,
            path: Some(GroundingPath::Coordinate)
        }]
    );
    let c = h.ev(Event::GroundingRequest {
        request: 2,
        scene: "menu".into(),
        offered,
    });
    assert_eq!(
        c,
        vec![Command::UsePath {
            request: 2,
            path: Some(GroundingPath::Mark)
        }]
    );
}

fn first_stuck(c: &[Command]) -> Option<StuckSignal> {
    c.iter().find_map(|c| match c {
        Command::Stuck { signal } => Some(*signal),
        _ => None,
    })
}

#[test]
fn stasis_signal_escalates_to_retry_and_requests_a_pass() {
    // FR-LOOP-005 (perceptual stasis), FR-LOOP-006, FR-LOOP-007
    let mut h = H::ready(LoopConfig {
        signals: SignalConfig {
            stasis_ms: 1000,
            ..Default::default()
        },
        ..no_timer()
    });
    let mut fired = None;
    for i in 0..=70u64 {
        h.at(100 + i * 16);
        let c = h.tick(FrameChange::Unchanged, 1);
        if first_stuck(&c).is_some() {
            assert_eq!(
                c,
                vec![
                    Command::Stuck {
                        signal: StuckSignal::PerceptualStasis
                    },
                    Command::Escalate { rung: Rung::Retry },
                    Command::StartDeliberation {
                        pass: 2,
                        trigger: Trigger::Stuck
                    },
                ]
            );
            fired = Some(h.t);
            break;
        }
    }
    assert_eq!(fired, Some(100 + 63 * 16)); // first tick at or after 1000 ms of stasis
}

#[test]
fn progress_stall_signal() {
    // FR-LOOP-005 (stalled progress sensor)
    let mut h = H::ready(LoopConfig {
        signals: SignalConfig {
            progress_stall_ms: 2000,
            ..Default::default()
        },
        ..no_timer()
    });
    let mut got = None;
    for i in 0..40u64 {
        h.at(100 + i * 100);
        h.tick += 1;
        let c = h.ev(Event::ReflexTick {
            tick: h.tick,
            change: FrameChange::Motion,
            signature: i,
            held: 1,
            progress: Some(if i < 5 { i as f64 } else { 4.0 }),
            goal_met: None,
            subgoal: None,
        });
        if let Some(s) = first_stuck(&c) {
            got = Some((s, h.t));
            break;
        }
    }
    assert_eq!(got, Some((StuckSignal::ProgressStalled, 2500)));
}

#[test]
fn repeating_cycle_signal() {
    // FR-LOOP-005 (repeating cycle of screen and action)
    let mut h = H::ready(no_timer());
    let mut got = None;
    for i in 0..6u64 {
        h.ev(Event::Observation {
            scene: "world".into(),
            signature: 100 + i % 2,
        });
        let (_, c) = h.propose(if i % 2 == 0 { "open" } else { "close" }, None);
        if let Some(s) = first_stuck(&c) {
            got = Some((s, i));
        }
    }
    // open/close/open/close: period 2 seen twice (the default cycle_repeats, docs/stuck-thresholds.md)
    assert_eq!(got, Some((StuckSignal::RepeatingCycle, 3)));
}

#[test]
fn unverified_rate_signal() {
    // FR-LOOP-005 (elevated rate of unverified actions), INV-GND-001
    let cfg = LoopConfig {
        signals: SignalConfig {
            unverified_window: 4,
            ..Default::default()
        },
        ..no_timer()
    };
    let mut h = H::ready(cfg);
    let mut got = Vec::new();
    for i in 0..4u64 {
        h.ev(Event::Observation {
            scene: "world".into(),
            signature: i,
        });
        let (a, _) = h.propose(&format!("k{i}"), None);
        let v = if i % 2 == 0 { None } else { Some(true) };
        got.extend(h.evidence(a, v));
        h.at(h.t + 250);
        got.extend(h.tick(FrameChange::Local, 0));
    }
    assert_eq!(first_stuck(&got), Some(StuckSignal::UnverifiedRate), "{got:?}");
}

/// Answer every deliberative pass in flight with "keep the plan".
fn settle_passes(h: &mut H) {
    while let Some(pass) = h.s.deliberating() {
        h.ev(Event::DeliberationDone { pass, plan: None });
    }
}

/// Drive stasis until the next stuck signal; returns the commands of that tick.
fn stall(h: &mut H) -> Vec<Command> {
    for _ in 0..1000 {
        h.t += 50;
        let c = h.tick(FrameChange::Unchanged, 1);
        if first_stuck(&c).is_some() || c.iter().any(|c| matches!(c, Command::Stop { .. })) {
            return c;
        }
    }
    panic!("no stuck signal");
}

#[test]
fn ladder_climbs_rung_by_rung_only_on_failure_then_stops() {
    // FR-LOOP-006, FR-LOOP-008 (stop and notify)
    let mut h = H::ready(LoopConfig {
        signals: SignalConfig {
            stasis_ms: 500,
            ..Default::default()
        },
        ..no_timer()
    });
    let c = stall(&mut h);
    assert!(has(&c, &Command::Escalate { rung: Rung::Retry }));
    assert_eq!(h.s.rung(), Some(Rung::Retry));
    settle_passes(&mut h);
    // the retry fails: the same action on the same screen is proposed, executed, and we stall again
    let (_, c) = h.propose("press up", None);
    assert!(matches!(c[0], Command::Execute { .. }));
    let c = stall(&mut h);
    assert!(has(
        &c,
        &Command::Escalate {
            rung: Rung::AlternativeAction
        }
    ));
    settle_passes(&mut h);
    // on the alternative rung the action that failed is refused (and said, for the model), another is allowed
    assert_eq!(h.s.refused_action(), Some("press up"));
    let (a, c) = h.propose("press up", None);
    assert_eq!(
        c,
        vec![Command::Reject {
            action: a,
            reason: Refusal::NeedAlternative
        }]
    );
    let (b, c) = h.propose("press down", None);
    assert_eq!(
        c,
        vec![Command::Execute {
            action: b,
            subgoal: SubgoalId(1)
        }]
    );
    let c = stall(&mut h);
    assert!(has(&c, &Command::Escalate { rung: Rung::Replan }));
    let pass = match c.iter().find(|c| matches!(c, Command::StartDeliberation { .. })) {
        Some(Command::StartDeliberation {
            pass,
            trigger: Trigger::Replan,
        }) => *pass,
        other => panic!("replan rung must start a replan pass: {other:?}"),
    };
    // the replan keeps the same plan: the rung failed
    let c = h.ev(Event::DeliberationDone { pass, plan: None });
    assert!(has(&c, &Command::Escalate { rung: Rung::Research }));
    let c = h.ev(Event::RungFailed {
        rung: Rung::Research,
        reason: "no results".into(),
    });
    assert!(has(
        &c,
        &Command::Escalate {
            rung: Rung::SafeState
        }
    ));
    // a RungFailed for a rung we are not on changes nothing
    assert!(h
        .ev(Event::RungFailed {
            rung: Rung::Research,
            reason: "late".into()
        })
        .is_empty());
    let c = stall(&mut h);
    assert!(has(
        &c,
        &Command::Escalate {
            rung: Rung::StopAndNotify
        }
    ));
    assert!(has(
        &c,
        &Command::Stop {
            reason: StopReason::NoProgress
        }
    ));
    let (z, c) = h.propose("press up", None);
    assert_eq!(
        c,
        vec![Command::Reject {
            action: z,
            reason: Refusal::Stopped
        }]
    );
}

#[test]
fn progress_resets_the_ladder() {
    // FR-LOOP-006: advance only when the previous rung failed
    let mut h = H::ready(LoopConfig {
        signals: SignalConfig {
            stasis_ms: 500,
            ..Default::default()
        },
        ..no_timer()
    });
    stall(&mut h);
    assert_eq!(h.s.rung(), Some(Rung::Retry));
    let (a, _) = h.propose("press up", None);
    let c = h.evidence(a, Some(true));
    assert!(has(&c, &Command::LadderReset { rung: Rung::Retry }));
    assert_eq!(h.s.rung(), None);
    let c = stall(&mut h);
    assert!(has(&c, &Command::Escalate { rung: Rung::Retry }));
}

#[test]
fn rung_times_out_without_progress() {
    // FR-LOOP-006
    let cfg = LoopConfig {
        rung_timeout_ms: 3000,
        signals: SignalConfig {
            stasis_ms: 500,
            ..Default::default()
        },
        ..no_timer()
    };
    let mut h = H::ready(cfg);
    stall(&mut h);
    let since = h.t;
    h.at(since + 2999);
    assert!(!has(
        &h.tick(FrameChange::Local, 0),
        &Command::Escalate {
            rung: Rung::AlternativeAction
        }
    ));
    h.at(since + 3000);
    assert!(has(
        &h.tick(FrameChange::Local, 0),
        &Command::Escalate {
            rung: Rung::AlternativeAction
        }
    ));
}

#[test]
fn stop_conditions() {
    // FR-LOOP-008: goal met, budget exhausted (time, actions), window closed, user stop
    let mut h = H::ready(no_timer());
    h.tick += 1;
    let c = h.ev(Event::ReflexTick {
        tick: h.tick,
        change: FrameChange::Local,
        signature: 0,
        held: 0,
        progress: None,
        goal_met: Some(true),
        subgoal: None,
    });
    assert_eq!(
        c,
        vec![Command::Stop {
            reason: StopReason::GoalMet
        }]
    );
    assert!(h.tick(FrameChange::Scene, 0).is_empty()); // stopped: nothing more

    // goal undefined is not met
    let mut h = H::ready(no_timer());
    h.tick += 1;
    let c = h.ev(Event::ReflexTick {
        tick: 1,
        change: FrameChange::Local,
        signature: 0,
        held: 0,
        progress: None,
        goal_met: None,
        subgoal: None,
    });
    assert!(c.is_empty());

    let mut h = H::ready(LoopConfig {
        session_max_ms: 10_000,
        ..no_timer()
    });
    assert!(h.at(9_999).tick(FrameChange::Local, 0).is_empty());
    assert_eq!(
        h.at(10_000).tick(FrameChange::Local, 0),
        vec![Command::Stop {
            reason: StopReason::TimeBudget
        }]
    );

    let mut h = H::ready(LoopConfig {
        session_max_actions: Some(2),
        ..no_timer()
    });
    h.propose("a", None);
    h.ev(Event::Observation {
        scene: "w".into(),
        signature: 2,
    });
    h.propose("b", None);
    let (c3, c) = h.propose("c", None);
    assert_eq!(
        c,
        vec![
            Command::Stop {
                reason: StopReason::ActionBudget
            },
            Command::Reject {
                action: c3,
                reason: Refusal::Stopped
            }
        ]
    );

    let mut h = H::ready(no_timer());
    assert_eq!(
        h.ev(Event::WindowClosed),
        vec![Command::Stop {
            reason: StopReason::WindowClosed
        }]
    );
    let mut h = H::ready(no_timer());
    assert_eq!(
        h.ev(Event::UserStop),
        vec![Command::Stop {
            reason: StopReason::UserStop
        }]
    );
    assert_eq!(h.s.stopped(), Some(StopReason::UserStop));
}

#[test]
fn subgoal_budget_abandons_and_replans() {
    // FR-LOOP-004, FR-GND-008 (plan), FR-LOOP-007
    let mut h = H::new(no_timer());
    h.ev(Event::Start { goal: "g".into() });
    let mut p = plan(&[1, 2]);
    p.subgoals[0].budget = Budget {
        max_time_ms: None,
        max_actions: Some(1),
    };
    p.subgoals[1].budget = Budget {
        max_time_ms: Some(1000),
        max_actions: None,
    };
    h.ev(Event::DeliberationDone {
        pass: 1,
        plan: Some(p),
    });
    let (_, c) = h.propose("a", None);
    assert!(matches!(c[0], Command::Execute { .. }));
    let (b, c) = h.at(10).propose("b", None);
    assert_eq!(
        c,
        vec![
            Command::SubgoalAbandoned {
                subgoal: SubgoalId(1),
                budget: BudgetKind::Actions
            },
            Command::CancelSubgoal {
                subgoal: SubgoalId(1)
            },
            Command::Failure {
                action: None,
                cause: FailureCause::Plan
            },
            Command::SubgoalStarted {
                subgoal: SubgoalId(2)
            },
            Command::StartDeliberation {
                pass: 2,
                trigger: Trigger::SubgoalBudget
            },
            Command::Reject {
                action: b,
                reason: Refusal::SubgoalBudget
            },
        ]
    );
    let c = h.at(1010).tick(FrameChange::Local, 0);
    assert!(has(
        &c,
        &Command::SubgoalAbandoned {
            subgoal: SubgoalId(2),
            budget: BudgetKind::Time
        }
    ));
    assert_eq!(h.s.active_subgoal(), None);
    let (d, c) = h.propose("d", None);
    assert_eq!(
        c,
        vec![Command::Reject {
            action: d,
            reason: Refusal::NoActiveSubgoal
        }]
    );
    assert_eq!(h.s.histogram().count(FailureCause::Plan), 2);
}

#[test]
fn same_events_same_decisions() {
    // Replay precondition: the logic is deterministic.
    let run = || {
        let mut h = H::ready(LoopConfig {
            signals: SignalConfig {
                stasis_ms: 300,
                ..Default::default()
            },
            ..no_timer()
        });
        let mut all = Vec::new();
        for i in 0..200u64 {
            h.at(100 + i * 16);
            all.extend(h.tick(
                if i % 50 == 0 {
                    FrameChange::Local
                } else {
                    FrameChange::Unchanged
                },
                1,
            ));
            if i % 20 == 0 {
                let (a, c) = h.propose(&format!("k{}", i % 3), mark((i % 4) as u32));
                all.extend(c);
                all.extend(h.evidence(a, if i % 40 == 0 { Some(false) } else { None }));
            }
        }
        all
    };
    let a = run();
    assert!(!a.is_empty());
    assert_eq!(a, run());
    let json = serde_json::to_string(&a).unwrap();
    let back: Vec<Command> = serde_json::from_str(&json).unwrap();
    assert_eq!(a, back);
}

#[test]
fn evidence_of_the_wrong_kind_is_reported_not_judged() {
    // INV-GND-001: a sample that cannot be judged never becomes confirmed or refuted
    let mut h = H::ready(no_timer());
    let (a, _) = h.at(100).propose("click 2", mark(2));
    let c = h.ev(Event::Evidence {
        action: a,
        evidence: Evidence::ElementChanged { changed: Some(true) },
        facts: FailureFacts::default(),
    });
    assert!(matches!(c.as_slice(), [Command::BadEvidence { action, .. }] if *action == a));
    // late evidence for an unknown action is ignored quietly
    assert!(h.evidence(ActionId(999), Some(true)).is_empty());
    let c = h.at(400).tick(FrameChange::Local, 0);
    assert_eq!(
        c,
        vec![Command::Verdict {
            action: a,
            verdict: Verdict::Inconclusive
        }]
    );
}

#[test]
fn status_snapshot_reports_plan_ladder_and_signals() {
    // FR-LOOP-005, FR-LOOP-006 (visible to the user), FR-GND-008
    let mut h = H::ready(LoopConfig {
        signals: SignalConfig {
            stasis_ms: 500,
            ..Default::default()
        },
        ..no_timer()
    });
    let st = h.s.status();
    assert_eq!(st.plan, Some(PlanId(1)));
    assert_eq!(st.subgoal, Some(SubgoalId(1)));
    assert_eq!(st.subgoal_description.as_deref(), Some("subgoal 1"));
    assert_eq!(st.rung, None);
    stall(&mut h);
    let st = h.s.status();
    assert_eq!(st.rung, Some(Rung::Retry));
    assert_eq!(st.recent_stuck.len(), 1);
    assert_eq!(st.recent_stuck[0].1, StuckSignal::PerceptualStasis);
    assert_eq!(st.deliberating, Some(2));
}

/// Climb to the research rung: retry and alternative action fail by stasis, the replan keeps the plan.
fn to_research(cfg: LoopConfig) -> H {
    let mut h = H::ready(LoopConfig {
        signals: SignalConfig {
            stasis_ms: 500,
            ..Default::default()
        },
        ..cfg
    });
    stall(&mut h);
    settle_passes(&mut h);
    stall(&mut h);
    settle_passes(&mut h);
    let c = stall(&mut h);
    assert!(has(&c, &Command::Escalate { rung: Rung::Replan }));
    settle_passes(&mut h);
    assert_eq!(h.s.rung(), Some(Rung::Research));
    assert_eq!(h.s.deliberating(), None);
    h
}

fn research_pass(c: &[Command]) -> Option<u64> {
    c.iter().find_map(|c| match c {
        Command::StartDeliberation {
            pass,
            trigger: Trigger::Research,
        } => Some(*pass),
        _ => None,
    })
}

#[test]
fn research_found_triggers_a_replan_that_uses_it() {
    // FR-LOOP-006 (research rung produces something), FR-LOOP-007 (research result triggers a pass)
    let mut h = to_research(LoopConfig {
        rung_timeout_ms: 3000,
        ..no_timer()
    });
    let climbed = h.t;
    h.at(climbed + 2500);
    let c = h.ev(Event::ResearchDone {
        found: true,
        summary: "note: the bridge lowers with the lever (source: http://guide.example/river)".into(),
    });
    let pass = research_pass(&c).expect("research found starts a research pass");
    assert!(!c.iter().any(|c| matches!(c, Command::Escalate { .. })));
    // the rung produced something: it is timed again from the research result, not from the climb
    h.at(climbed + 3000);
    assert!(!h
        .tick(FrameChange::Local, 0)
        .iter()
        .any(|c| matches!(c, Command::Escalate { .. })));
    assert_eq!(h.s.rung(), Some(Rung::Research));
    // the pass replans with the new knowledge: the new plan replaces the old one (INV-LOOP-001)
    let c = h.ev(Event::DeliberationDone {
        pass,
        plan: Some(plan(&[7])),
    });
    assert!(has(
        &c,
        &Command::PlanAdopted {
            plan: PlanId(2),
            subgoals: vec![SubgoalId(7)]
        }
    ));
    assert!(has(
        &c,
        &Command::CancelSubgoal {
            subgoal: SubgoalId(1)
        }
    ));
    assert_eq!(h.s.active_subgoal(), Some(SubgoalId(7)));
    // progress on the new plan: the research rung worked
    let (a, _) = h.propose("pull lever", None);
    let c = h.evidence(a, Some(true));
    assert!(has(&c, &Command::LadderReset { rung: Rung::Research }));
    assert_eq!(h.s.rung(), None);
}

#[test]
fn research_rung_times_out_a_full_period_after_the_result() {
    // FR-LOOP-006
    let mut h = to_research(LoopConfig {
        rung_timeout_ms: 3000,
        ..no_timer()
    });
    let found_at = h.t + 2000;
    h.at(found_at);
    let c = h.ev(Event::ResearchDone {
        found: true,
        summary: "note: x".into(),
    });
    let pass = research_pass(&c).expect("a research pass");
    h.ev(Event::DeliberationDone {
        pass,
        plan: Some(plan(&[4])),
    });
    h.at(found_at + 2999);
    assert!(!has(
        &h.tick(FrameChange::Local, 0),
        &Command::Escalate {
            rung: Rung::SafeState
        }
    ));
    h.at(found_at + 3000);
    assert!(has(
        &h.tick(FrameChange::Local, 0),
        &Command::Escalate {
            rung: Rung::SafeState
        }
    ));
}

#[test]
fn research_found_but_plan_kept_fails_the_rung() {
    // FR-LOOP-006: the research pass exists to replan; keeping the plan (or failing) is a failed rung
    let mut h = to_research(no_timer());
    let c = h.ev(Event::ResearchDone {
        found: true,
        summary: "note: y".into(),
    });
    let pass = research_pass(&c).expect("a research pass");
    let c = h.ev(Event::DeliberationDone { pass, plan: None });
    assert!(has(&c, &Command::PlanKept { pass }));
    assert!(has(
        &c,
        &Command::Escalate {
            rung: Rung::SafeState
        }
    ));

    let mut h = to_research(no_timer());
    let pass = research_pass(&h.ev(Event::ResearchDone {
        found: true,
        summary: "note: y".into(),
    }))
    .expect("a research pass");
    let c = h.ev(Event::DeliberationFailed {
        pass,
        reason: "model timeout".into(),
    });
    assert!(has(
        &c,
        &Command::Escalate {
            rung: Rung::SafeState
        }
    ));
}

#[test]
fn a_safe_state_reached_returns_the_ladder_to_idle() {
    // FR-LOOP-006: the safe-state rung's success is verified arrival, whatever the last step's verdict
    let mut h = to_research(no_timer());
    h.ev(Event::RungFailed {
        rung: Rung::Research,
        reason: "nothing found".into(),
    });
    assert_eq!(h.s.rung(), Some(Rung::SafeState));
    let late = h.ev(Event::RungDone {
        rung: Rung::Research,
        evidence: "not the current rung".into(),
    });
    assert!(late.is_empty());
    let c = h.ev(Event::RungDone {
        rung: Rung::SafeState,
        evidence: "back on the menu".into(),
    });
    assert!(
        has(
            &c,
            &Command::LadderReset {
                rung: Rung::SafeState
            }
        ),
        "{c:?}"
    );
    assert_eq!(h.s.rung(), None);
}

#[test]
fn a_second_return_to_the_safe_state_without_progress_fails_and_the_ladder_stops() {
    // FR-LOOP-006, FR-LOOP-008: the safe state worked once; stuck again with no progress since, going
    // back again repeats the cycle: arriving there a second time fails the rung, and the ladder stops.
    let mut h = to_research(no_timer());
    h.ev(Event::RungFailed {
        rung: Rung::Research,
        reason: "nothing found".into(),
    });
    h.ev(Event::RungDone {
        rung: Rung::SafeState,
        evidence: "back on the menu".into(),
    });
    assert_eq!(h.s.rung(), None);
    for _ in 0..8 {
        if h.s.rung() == Some(Rung::Research) {
            break;
        }
        stall(&mut h);
        settle_passes(&mut h);
    }
    assert_eq!(h.s.rung(), Some(Rung::Research));
    h.ev(Event::RungFailed {
        rung: Rung::Research,
        reason: "nothing found".into(),
    });
    assert_eq!(h.s.rung(), Some(Rung::SafeState));
    // A step back that worked is not the end of this rung: arrival is.
    let (a, _) = h.propose("Escape", None);
    h.evidence(a, Some(true));
    assert_eq!(h.s.rung(), Some(Rung::SafeState));
    let c = h.ev(Event::RungDone {
        rung: Rung::SafeState,
        evidence: "back on the menu again".into(),
    });
    assert!(
        has(
            &c,
            &Command::Escalate {
                rung: Rung::StopAndNotify
            }
        ),
        "{c:?}"
    );
    assert!(c.iter().any(|c| matches!(c, Command::Stop { .. })), "{c:?}");
}

#[test]
fn research_nothing_found_fails_the_rung_like_rung_failed() {
    // FR-LOOP-006: "research unavailable" / nothing found moves the ladder on and never fakes an answer
    let mut h = to_research(no_timer());
    let c = h.ev(Event::ResearchDone {
        found: false,
        summary: "research found nothing usable".into(),
    });
    assert_eq!(
        c,
        vec![Command::Escalate {
            rung: Rung::SafeState
        }]
    );
    assert_eq!(research_pass(&c), None);
    // a second (late) empty result for a rung we are no longer on changes nothing
    assert!(h
        .ev(Event::ResearchDone {
            found: false,
            summary: "late".into()
        })
        .is_empty());
    assert_eq!(h.s.rung(), Some(Rung::SafeState));
}

#[test]
fn late_research_still_informs_a_pass_without_moving_the_ladder() {
    // FR-LOOP-007: new knowledge triggers a pass even after the ladder moved on
    let mut h = to_research(no_timer());
    h.ev(Event::RungFailed {
        rung: Rung::Research,
        reason: "rung timed out".into(),
    });
    assert_eq!(h.s.rung(), Some(Rung::SafeState));
    settle_passes(&mut h);
    let c = h.ev(Event::ResearchDone {
        found: true,
        summary: "note: late".into(),
    });
    let pass = research_pass(&c).expect("a research pass");
    assert!(!c.iter().any(|c| matches!(c, Command::Escalate { .. })));
    // its plan kept is not a failure of the safe-state rung
    let c = h.ev(Event::DeliberationDone { pass, plan: None });
    assert_eq!(c, vec![Command::PlanKept { pass }]);
    assert_eq!(h.s.rung(), Some(Rung::SafeState));
}

#[test]
fn research_during_a_pass_is_the_follow_up_pass() {
    // FR-LOOP-007, NFR-LOOP-001: never waits for the pass in flight; coalesced, and research wins over
    // ordinary triggers
    let mut h = to_research(no_timer());
    h.t += 50;
    let c = h.tick(FrameChange::Scene, 1);
    let scene = c
        .iter()
        .find_map(|c| match c {
            Command::StartDeliberation { pass, .. } => Some(*pass),
            _ => None,
        })
        .expect("scene change starts a pass");
    let c = h.ev(Event::ResearchDone {
        found: true,
        summary: "note: z".into(),
    });
    assert_eq!(research_pass(&c), None);
    h.t += 2000;
    h.tick(FrameChange::Scene, 1); // another scene change while the pass runs: research stays pending
    let c = h.ev(Event::DeliberationDone {
        pass: scene,
        plan: None,
    });
    let pass = research_pass(&c).expect("the research pass follows");
    assert_eq!(h.s.deliberating(), Some(pass));
}

#[test]
fn a_users_pause_spends_no_budget_and_fires_no_stuck_signal() {
    // FR-SAFE-002, FR-LOOP-008: the time the user held the game is not the session's
    let mut h = H::ready(LoopConfig {
        session_max_ms: 10_000,
        ..no_timer()
    });
    assert!(h.at(4_000).tick(FrameChange::Local, 0).is_empty());
    // Paused from 4 s to 12 s; without the shift the budget is gone at 10 s.
    h.s.resume_after_pause(Duration::from_millis(8_000));
    let c = h.at(12_500).tick(FrameChange::Local, 0);
    assert!(!c.iter().any(|c| matches!(c, Command::Stop { .. })), "{c:?}");
    assert!(first_stuck(&c).is_none(), "{c:?}");
    assert_eq!(
        h.at(18_000).tick(FrameChange::Local, 0),
        vec![Command::Stop {
            reason: StopReason::TimeBudget
        }],
        "the budget is spent at 10 s of session time, 18 s of wall-clock time"
    );
}

#[test]
fn the_goal_is_acted_on_while_the_first_plan_is_made_and_the_plan_replaces_it() {
    // FR-LOOP-003: a pass in flight never stops the tactical cadence; only the pass's plan replaces
    let mut h = H::new(no_timer());
    h.ev(Event::Start { goal: "win".into() });
    // The first frame is the screen the start pass is composed from, not a change of scene.
    let c = h.at(500).tick(FrameChange::Scene, 0);
    assert!(
        !c.iter().any(|c| matches!(c, Command::StartDeliberation { .. })),
        "{c:?}"
    );
    let c = h.ev(Event::Provisional { plan: plan(&[50]) });
    assert_eq!(
        c,
        vec![
            Command::PlanAdopted {
                plan: PlanId(1),
                subgoals: vec![SubgoalId(50)]
            },
            Command::SubgoalStarted {
                subgoal: SubgoalId(50)
            }
        ]
    );
    assert_eq!(h.s.active_subgoal(), Some(SubgoalId(50)));
    // With a subgoal active, another provisional plan is ignored.
    assert!(h.ev(Event::Provisional { plan: plan(&[51]) }).is_empty());
    let c = h.at(4_000).ev(Event::DeliberationDone {
        pass: 1,
        plan: Some(plan(&[1, 2])),
    });
    assert!(
        !c.iter().any(|c| matches!(c, Command::CancelSubgoal { .. })),
        "what was done toward the goal meanwhile ends as it would: {c:?}"
    );
    assert_eq!(h.s.active_subgoal(), Some(SubgoalId(1)));
    // A later scene is a change again.
    let c = h.at(9_000).tick(FrameChange::Scene, 0);
    assert!(
        c.iter().any(|c| matches!(c, Command::StartDeliberation { .. })),
        "{c:?}"
    );
}

#[test]
fn with_no_pass_in_flight_a_provisional_plan_is_not_adopted() {
    let mut h = H::new(no_timer());
    assert!(h.ev(Event::Provisional { plan: plan(&[7]) }).is_empty());
    assert_eq!(h.s.active_subgoal(), None);
}

#[test]
fn recordings_without_the_field_keep_a_pass_for_the_first_frame() {
    let old: LoopConfig = serde_json::from_str(r#"{"scene_debounce_ms": 1000}"#).unwrap();
    assert!(!old.start_pass_sees_first_screen);
    assert!(LoopConfig::default().start_pass_sees_first_screen);
    let mut h = H::new(old);
    h.ev(Event::Start { goal: "win".into() });
    let c = h.ev(Event::DeliberationFailed {
        pass: 1,
        reason: "timeout".into(),
    });
    assert!(c.is_empty(), "{c:?}");
    let c = h.at(500).tick(FrameChange::Scene, 0);
    assert!(
        c.iter().any(|c| matches!(c, Command::StartDeliberation { .. })),
        "{c:?}"
    );
}
