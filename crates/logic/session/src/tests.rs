//! Unit tests of `Session::step`: each drives the session with typed inputs at given times and reads
//! the effects and the context, the way the wiring and a replay do.

use super::*;
use crate::tactical::{ModelAnswer, Perception};
use gamepilot_context::{Cadence, ObservationText, TacticalReply};
use gamepilot_core::action::{Action, MouseButton};
use gamepilot_core::{ActionId, ElementId, FrameHealth, Interlock, MonoTime, Rect, Size, SubgoalId};
use gamepilot_executor::{ActionEnd, CancelReason, RejectReason};
use gamepilot_grounding::{FailureCause, Verdict};
use gamepilot_planner::{
    Budget, FrameChange, LoopConfig, PlanSpec, PostconditionRef, SubgoalCheck, SubgoalSpec,
};
use gamepilot_vision::{Element, ElementSource, Observation, TextItem};

fn ms(v: u64) -> MonoTime {
    MonoTime(v * 1000)
}

fn config() -> SessionConfig {
    SessionConfig {
        goal: "click Play, then collect a coin".into(),
        loop_cfg: LoopConfig {
            deliberation_interval_ms: 600_000,
            ..LoopConfig::default()
        },
        postconditions: vec!["coins >= 1".into(), "playing".into()],
        tactical_interval_ms: 0,
        behaviours: Behaviours {
            // Most tests drive the plan themselves; acting while planning has tests of its own.
            act_while_planning: false,
            // Most tests script the model's choice; grounding by a step's words has tests of its own.
            direct_by_words: false,
            explore_siblings: false,
            ..Behaviours::default()
        },
        ..SessionConfig::default()
    }
}

/// The tests' configuration with other behaviours.
pub(crate) fn with_behaviours(behaviours: Behaviours) -> SessionConfig {
    SessionConfig {
        behaviours,
        ..config()
    }
}

fn subgoal(id: u32, handle: u64, source: &str, description: &str) -> SubgoalSpec {
    SubgoalSpec {
        id: SubgoalId(id),
        description: description.into(),
        postcondition: PostconditionRef {
            source: source.into(),
            handle,
        },
        budget: Budget {
            max_time_ms: Some(120_000),
            max_actions: Some(40),
        },
    }
}

fn two_step_plan() -> PlanSpec {
    PlanSpec {
        subgoals: vec![
            subgoal(1, 1, "playing", "start the game"),
            subgoal(2, 0, "coins >= 1", "collect a coin"),
        ],
    }
}

fn tactical_jobs(effects: &[Effect]) -> Vec<&TacticalJob> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::StartTactical(j) => Some(&**j),
            _ => None,
        })
        .collect()
}

fn submits(effects: &[Effect]) -> Vec<(ActionId, Action, u64)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Reflex(ReflexCommand::Submit {
                action,
                intention,
                generation,
            }) => Some((*action, intention.action.clone(), *generation)),
            _ => None,
        })
        .collect()
}

fn records(effects: &[Effect]) -> Vec<&SessionRecord> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Record(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// The executor's report that an action's input was sent in full.
fn ended(s: &mut Session, action: ActionId, at: MonoTime) -> Vec<Effect> {
    s.step(
        Input::ActionEnded {
            action,
            end: ActionEnd::Finished,
        },
        at,
    )
}

/// A new session whose reflex has reported its first frame (a tactical tick waits for it, FR-SAFE-005).
pub(crate) fn reported(mut s: Session) -> Session {
    let mut first = reflex(1);
    first.goal_met = None;
    s.step(Input::Reflex(first), MonoTime::ZERO);
    s
}

fn reflex(tick: u64) -> ReflexReport {
    ReflexReport {
        tick,
        change: FrameChange::Local,
        signature: tick,
        held: 0,
        goal_met: Some(false),
        subgoal: None,
        sensors: Vec::new(),
        late_us: 50,
        ticks_since: 6,
        generation: 0,
        health: FrameHealth::Ok,
        foreground: true,
    }
}

fn menu() -> Observation {
    let button = |id: u32, label: &str, y: i32| Element {
        id: ElementId(id),
        bbox: Rect::new(560, y, 160, 48),
        confidence: 0.9,
        source: ElementSource::Text,
        label: Some(label.into()),
        looks: None,
        layer: None,
        selected: false,
    };
    let text = |s: &str, y: i32| TextItem {
        text: s.into(),
        bbox: Rect::new(580, y + 10, 100, 28),
        confidence: 0.9,
    };
    Observation {
        at: MonoTime::ZERO,
        frame_size: Size::new(1280, 720),
        class: FrameChange::Scene,
        texts: vec![text("Play", 300), text("Options", 380), text("Shop", 460)],
        elements: vec![
            button(1, "Play", 300),
            button(2, "Options", 380),
            button(3, "Shop", 460),
        ],
    }
}

/// A tactical tick's frame as perceived, and the reply its model call gets.
struct Outcome {
    tick: u64,
    obs: Observation,
    reply: Result<ModelReply, TacticalFailure>,
}

fn outcome(tick: u64, obs: Observation, reply: Result<ModelReply, TacticalFailure>) -> Outcome {
    Outcome { tick, obs, reply }
}

/// Steps a tactical tick the way the tactical thread reports it: its perception, then — when the session
/// asks for a call — the reply. The effects of both.
trait Answering {
    fn answer(&mut self, o: Outcome, now: MonoTime) -> Vec<Effect>;
}

impl Answering for Session {
    fn answer(&mut self, o: Outcome, now: MonoTime) -> Vec<Effect> {
        let perception = Perception {
            tick: o.tick,
            started: now,
            observation: o.obs,
            moves: Vec::new(),
        };
        let mut fx = self.step(Input::Perceived(Box::new(perception)), now);
        let asked = fx
            .iter()
            .any(|e| matches!(e, Effect::CallModel(c) if c.tick == o.tick));
        if asked {
            fx.extend(self.step(
                Input::Replied {
                    tick: o.tick,
                    answer: o.reply.map(ModelAnswer::Act),
                },
                now,
            ));
        }
        fx
    }
}

fn reply(r: TacticalReply) -> Result<ModelReply, TacticalFailure> {
    Ok(ModelReply {
        text: format!("{r:?}"),
        reply: r,
        latency_ms: 100.0,
        tokens_in: 500,
        tokens_out: 20,
        cached_tokens: 400,
    })
}

fn click_mark(id: u32) -> Result<ModelReply, TacticalFailure> {
    reply(TacticalReply::ClickMark {
        mark: ElementId(id),
        button: MouseButton::Left,
    })
}

/// A session with its plan adopted and the first subgoal active; returns the effects of the adoption.
fn planned() -> (Session, Vec<Effect>) {
    let mut s = reported(Session::new(config(), MonoTime::ZERO).unwrap());
    let start = s.step(Input::Start, ms(0));
    assert!(start
        .iter()
        .any(|e| matches!(e, Effect::StartDeliberation(j) if j.pass == 1)));
    let adopted = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: None,
            pass: 1,
            plan: Ok(two_step_plan()),
            latency_ms: 10.0,
        }),
        ms(100),
    );
    assert_eq!(s.loop_state().active_subgoal(), Some(SubgoalId(1)));
    (s, adopted)
}

/// A session for `cfg` that started and adopted `plan` (pass 1) at 10 ms, with the adoption's effects.
fn started_with(cfg: SessionConfig, plan: PlanSpec) -> (Session, Vec<Effect>) {
    let mut s = reported(Session::new(cfg, MonoTime::ZERO).unwrap());
    s.step(Input::Start, ms(0));
    let fx = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: None,
            pass: 1,
            plan: Ok(plan),
            latency_ms: 1.0,
        }),
        ms(10),
    );
    (s, fx)
}

fn plan_block(s: &Session) -> String {
    s.context()
        .assemble(Cadence::Tactical, &ObservationText::new(MonoTime::ZERO, ""), None)
        .render()
}

#[test]
fn a_subgoal_completed_shows_done_and_the_next_active_in_the_plan_block() {
    // FR-CTX-001, FR-LOOP-004: the plan block follows the plan, not only its adoption
    let (mut s, adopted) = planned();
    assert!(adopted.iter().any(|e| matches!(
        e,
        Effect::Reflex(ReflexCommand::Subgoal {
            active: Some((SubgoalId(1), 1))
        })
    )));
    let before = plan_block(&s);
    assert!(before.contains("[>] start the game"), "{before}");
    assert!(before.contains("[ ] collect a coin"), "{before}");
    let mut r = reflex(6);
    r.subgoal = Some(SubgoalCheck {
        subgoal: SubgoalId(1),
        met: Some(true),
    });
    let fx = s.step(Input::Reflex(r), ms(500));
    assert_eq!(s.loop_state().active_subgoal(), Some(SubgoalId(2)));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Reflex(ReflexCommand::Subgoal {
            active: Some((SubgoalId(2), 0))
        })
    )));
    let after = plan_block(&s);
    assert!(after.contains("[x] start the game"), "{after}");
    assert!(after.contains("[>] collect a coin"), "{after}");
}

#[test]
fn a_mark_is_grounded_to_its_centre_executed_and_verified_under_one_id() {
    // FR-GND-001, FR-GND-006, INV-GND-001
    let (mut s, adopted) = planned();
    let job = tactical_jobs(&adopted)[0].tick;
    let fx = s.answer(outcome(job, menu(), click_mark(1)), ms(300));
    let sub = submits(&fx);
    assert_eq!(sub.len(), 1, "{fx:?}");
    let (id, action, _) = &sub[0];
    assert_eq!(
        *action,
        Action::Click {
            x: 640,
            y: 324,
            button: MouseButton::Left
        }
    );
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Reflex(ReflexCommand::Watch { action, region: Some(r), .. }) if action == id && *r == Rect::new(560, 300, 160, 48)
    )));
    // No new tactical tick while the action awaits its verdict.
    assert!(tactical_jobs(&fx).is_empty());
    ended(&mut s, *id, ms(440));
    let fx = s.step(
        Input::Evidence {
            action: *id,
            changed: Some(true),
        },
        ms(600),
    );
    assert!(records(&fx).iter().any(|r| matches!(
        r,
        SessionRecord::Verdict { action, verdict: Verdict::Confirmed, .. } if *action == *id
    )));
    assert_eq!(tactical_jobs(&fx).len(), 1, "the next tick starts once verified");
    assert!(plan_block(&s).contains("confirmed"));
    // What the click landed on is named in the history the model reads, not only its coordinates.
    assert!(
        plan_block(&s)
            .contains(r#"{"action":"click","x":640,"y":324,"button":"left"} on "Play" -> confirmed"#),
        "{}",
        plan_block(&s)
    );
}

#[test]
fn a_key_that_moves_a_lists_cursor_is_verified_on_the_item_drawn_as_chosen() {
    // FR-GND-006, FR-PERC-006: with "Options" drawn as chosen, Down is expected to move the cursor off
    // it (its box is watched); where no item is chosen, any change in the view counts.
    let key = |k: &str| reply(TacticalReply::Act(Action::Key { key: k.into() }));
    let watched = |fx: &[Effect]| {
        fx.iter()
            .find_map(|e| match e {
                Effect::Reflex(ReflexCommand::Watch { region, .. }) => Some(*region),
                _ => None,
            })
            .expect("a watch")
    };
    let (mut s, adopted) = planned();
    let job = tactical_jobs(&adopted)[0].tick;
    let mut obs = menu();
    obs.elements[1].selected = true;
    let fx = s.answer(outcome(job, obs.clone(), key("Down")), ms(300));
    assert_eq!(watched(&fx), Some(Rect::new(560, 380, 160, 48)), "{fx:?}");
    let (mut s, adopted) = planned();
    let job = tactical_jobs(&adopted)[0].tick;
    let fx = s.answer(outcome(job, obs, key("Return")), ms(300));
    assert_eq!(watched(&fx), None, "Return is not a cursor move");
    let (mut s, adopted) = planned();
    let job = tactical_jobs(&adopted)[0].tick;
    let fx = s.answer(outcome(job, menu(), key("Down")), ms(300));
    assert_eq!(watched(&fx), None, "no item chosen: the whole view");
}

#[test]
fn suppression_of_a_refuted_mark_expires_after_its_bound() {
    // FR-GND-007: a refuted target is left out for suppress_ticks tactical ticks, then offered again
    let (mut s, adopted) = planned();
    let mut tick = tactical_jobs(&adopted)[0].tick;
    let mut t = 300;
    let fx = s.answer(outcome(tick, menu(), click_mark(2)), ms(t));
    let (id, _, _) = submits(&fx)[0].clone();
    ended(&mut s, id, ms(t + 50));
    t += 100;
    let fx = s.step(
        Input::Evidence {
            action: id,
            changed: Some(false),
        },
        ms(t),
    );
    // Refuted only when the settle window closes.
    let _ = fx;
    t += 2000;
    let mut fx = s.step(Input::Reflex(reflex(12)), ms(t));
    assert!(records(&fx).iter().any(|r| matches!(
        r,
        SessionRecord::Verdict {
            verdict: Verdict::Refuted,
            ..
        }
    )));
    let bound = config().loop_cfg.suppress_ticks;
    let mut excluded_ticks = 0;
    for _ in 0..(bound + 3) {
        let job = tactical_jobs(&fx)[0];
        tick = job.tick;
        if job.excluded_marks.contains(&ElementId(2)) {
            excluded_ticks += 1;
        }
        t += 50;
        // The model waits; the tick ends without an action.
        fx = s.answer(
            outcome(
                tick,
                menu(),
                reply(TacticalReply::Note {
                    text: "waiting".into(),
                }),
            ),
            ms(t),
        );
    }
    assert!(excluded_ticks >= 1, "suppressed at first");
    assert!(
        excluded_ticks <= bound as usize,
        "suppressed {excluded_ticks} ticks, bound {bound}"
    );
    let last = tactical_jobs(&fx)[0];
    assert!(
        !last.excluded_marks.contains(&ElementId(2)),
        "suppression expired"
    );
}

#[test]
fn a_click_that_changed_nothing_is_followed_by_its_nearest_like_without_a_model_call_and_noted() {
    // Exploration: sgt-fifteen's model clicked a tile that cannot slide and asked again for
    // 15 s a call until the ladder stopped the run; a person tries the next tile.
    let cfg = with_behaviours(Behaviours {
        explore_siblings: true,
        ..config().behaviours
    });
    let (mut s, adopted) = started_with(cfg, two_step_plan());
    let tick = tactical_jobs(&adopted)[0].tick;
    let mut t = 300;
    // The model clicks Options (mark 2): nothing changes.
    let fx = s.answer(outcome(tick, menu(), click_mark(2)), ms(t));
    let (id, _, _) = submits(&fx)[0].clone();
    ended(&mut s, id, ms(t + 50));
    t += 100;
    s.step(
        Input::Evidence {
            action: id,
            changed: Some(false),
        },
        ms(t),
    );
    t += 2000;
    let fx = s.step(Input::Reflex(reflex(12)), ms(t));
    let job = tactical_jobs(&fx)
        .first()
        .map(|j| (*j).clone())
        .expect("the next tick");
    assert!(job.perceive_only, "no model call: the session explores");
    t += 100;
    let fx = s.answer(outcome(job.tick, menu(), not_asked()), ms(t));
    assert!(calls(&fx).is_empty());
    let clicks = submits(&fx);
    assert_eq!(clicks.len(), 1, "{fx:#?}");
    // The nearest button like Options: Play above it or Shop below, both 80 px away; never Options.
    assert!(
        matches!(
            clicks[0].1,
            Action::Click {
                x: 640,
                y: 324 | 484,
                ..
            }
        ),
        "{:?}",
        clicks[0].1
    );
    assert!(notes(&fx)
        .iter()
        .any(|n| n.starts_with("exploring without a model call (try 1 of at most 3)")));
    // It changes the screen: the note block tells the model what worked and what did not.
    let explored = clicks[0].0;
    t += 50;
    ended(&mut s, explored, ms(t));
    t += 50;
    let fx = s.step(
        Input::Evidence {
            action: explored,
            changed: Some(true),
        },
        ms(t),
    );
    assert!(
        notes(&fx).iter().any(|n| n.starts_with("exploration: clicking '")
            && n.contains("changed the screen where the click before it did not")),
        "{fx:#?}"
    );
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(t), ""), None)
        .render();
    assert!(
        prompt.contains("changed the screen where the click before it did not"),
        "{prompt}"
    );
}

#[test]
fn an_executor_rejection_reaches_the_next_prompt_with_its_reason() {
    // FR-ACT-006: denied key → the model's history says why; recorded as rejected, not as a verdict
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let fx = s.answer(
        outcome(
            tick,
            menu(),
            reply(TacticalReply::Act(Action::Key { key: "alt+F4".into() })),
        ),
        ms(300),
    );
    let (id, _, _) = submits(&fx)[0].clone();
    let fx = s.step(
        Input::ActionRejected {
            action: id,
            reason: RejectReason::DeniedChord {
                chord: "alt+F4".into(),
            },
        },
        ms(310),
    );
    assert!(records(&fx)
        .iter()
        .any(|r| matches!(r, SessionRecord::Rejected { action, reason } if *action == id && reason.contains("alt+F4 is on the denied list"))));
    assert_eq!(tactical_jobs(&fx).len(), 1, "the next tick starts");
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(310), ""), None)
        .render();
    assert!(
        prompt.contains("rejected by the executor: alt+F4 is on the denied list"),
        "{prompt}"
    );
    assert_eq!(s.numbers().actions.rejected, 1);
    assert_eq!(s.numbers().failures, vec![(FailureCause::Execution, 1)]);
}

#[test]
fn compaction_is_triggered_near_the_hosts_context_and_recorded() {
    // FR-CTX-004: a long history and a large screen text push the estimate past the threshold
    let mut cfg = config();
    cfg.limits.context_tokens = 1024;
    let (mut s, mut fx) = started_with(cfg, two_step_plan());
    let mut big = menu();
    for i in 0..60 {
        big.texts.push(TextItem {
            text: format!("HIGH SCORE {i:02} ........ {}", 1000 * i),
            bbox: Rect::new(100, 10 * i, 400, 10),
            confidence: 0.9,
        });
    }
    let mut compacted = false;
    let mut t = 20;
    for _ in 0..12 {
        let Some(job) = tactical_jobs(&fx).first().map(|j| j.tick) else {
            break;
        };
        t += 100;
        fx = s.answer(
            outcome(
                job,
                big.clone(),
                reply(TacticalReply::Note {
                    text: format!("tick {t}"),
                }),
            ),
            ms(t),
        );
        compacted |= records(&fx)
            .iter()
            .any(|r| matches!(r, SessionRecord::Compaction(_)));
    }
    assert!(compacted, "compaction was triggered");
    assert!(s.numbers().calls.compactions >= 1);
    // The observation the context keeps is bounded.
    let shown = plan_block(&s);
    assert!(
        shown.len() < 4 * 1024,
        "prompt stays bounded: {} bytes",
        shown.len()
    );
}

#[test]
fn a_host_that_keeps_refusing_the_prompt_size_stops_the_session_with_a_named_reason() {
    // FR-CTX-004: HTTP 400 "exceeds the available context size" shrinks the prompt, then stops; never loops
    let (mut s, adopted) = planned();
    let overflow = || {
        Err(TacticalFailure {
            kind: FailureKind::ContextOverflow,
            message: "HTTP 400: the request exceeds the available context size".into(),
            latency_ms: 5.0,
        })
    };
    let tick = tactical_jobs(&adopted)[0].tick;
    let fx = s.answer(outcome(tick, menu(), overflow()), ms(300));
    assert!(records(&fx)
        .iter()
        .any(|r| matches!(r, SessionRecord::Compaction(_))));
    assert!(s.stopped().is_none());
    let tick = tactical_jobs(&fx)[0].tick;
    let fx = s.answer(outcome(tick, menu(), overflow()), ms(400));
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Stop(SessionStop::PromptTooLarge { .. }))));
    assert!(matches!(s.stopped(), Some(SessionStop::PromptTooLarge { .. })));
    assert!(
        s.step(Input::Reflex(reflex(60)), ms(500)).is_empty(),
        "a stopped session does nothing"
    );
}

#[test]
fn a_window_move_drops_an_action_grounded_before_it() {
    // FR-PERC-002, INV-GND-002: the click was grounded in generation 0; the window moved (generation 1)
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    assert_eq!(tactical_jobs(&adopted)[0].generation, 0);
    let mut r = reflex(6);
    r.generation = 1;
    s.step(Input::Reflex(r), ms(200));
    let fx = s.answer(outcome(tick, menu(), click_mark(1)), ms(300));
    assert!(submits(&fx).is_empty(), "stale click not submitted: {fx:?}");
    let job = tactical_jobs(&fx)[0];
    assert_eq!(job.generation, 1);
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(300), ""), None)
        .render();
    assert!(
        prompt.contains("the window moved since the action was grounded"),
        "{prompt}"
    );
    // A key is not grounded in the window's geometry: it goes through.
    let fx = s.answer(
        outcome(
            job.tick,
            menu(),
            reply(TacticalReply::Act(Action::Key { key: "space".into() })),
        ),
        ms(400),
    );
    assert_eq!(submits(&fx).len(), 1);
    assert_eq!(submits(&fx)[0].2, 1);
}

#[test]
fn a_destructive_dialogue_holds_the_click_until_the_user_answers() {
    // FR-SAFE-005: held → pause → ask; rejected → reason in history; no tactical tick meanwhile
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let mut dialogue = menu();
    dialogue.texts = vec![
        TextItem {
            text: "Spend 100 gold?".into(),
            bbox: Rect::new(520, 250, 240, 30),
            confidence: 0.9,
        },
        TextItem {
            text: "Yes".into(),
            bbox: Rect::new(580, 310, 60, 28),
            confidence: 0.9,
        },
    ];
    let fx = s.answer(outcome(tick, dialogue, click_mark(1)), ms(300));
    assert!(submits(&fx).is_empty());
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Reflex(ReflexCommand::Pause { paused: true }))));
    let hold = fx
        .iter()
        .find_map(|e| match e {
            Effect::AskConfirmation(j) => Some(j.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(hold.pattern, "spend");
    let fx = s.step(Input::Reflex(reflex(12)), ms(400));
    assert!(tactical_jobs(&fx).is_empty(), "no tick while held");
    let fx = s.step(
        Input::Confirmation(ConfirmationAnswer {
            hold: hold.hold,
            allowed: false,
            reason: "rejected by the user on the overlay".into(),
            waited_ms: 900,
        }),
        ms(1300),
    );
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Reflex(ReflexCommand::Pause { paused: false }))));
    assert!(submits(&fx).is_empty());
    assert_eq!(tactical_jobs(&fx).len(), 1, "the next tick starts");
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(1300), ""), None)
        .render();
    assert!(prompt.contains("rejected by the user on the overlay"), "{prompt}");
}

#[test]
fn a_key_on_a_destructive_dialogue_is_held_like_a_click() {
    // FR-SAFE-005: Return (or y, or space) confirms "Spend 100 gold?" as surely as clicking Yes
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let mut dialogue = menu();
    dialogue.texts = vec![TextItem {
        text: "Spend 100 gold?".into(),
        bbox: Rect::new(520, 250, 240, 30),
        confidence: 0.9,
    }];
    let fx = s.answer(
        outcome(
            tick,
            dialogue,
            reply(TacticalReply::Act(Action::Key { key: "Return".into() })),
        ),
        ms(300),
    );
    assert!(submits(&fx).is_empty(), "the key is not sent unasked");
    let hold = fx
        .iter()
        .find_map(|e| match e {
            Effect::AskConfirmation(j) => Some(j.clone()),
            _ => None,
        })
        .expect("the user is asked");
    assert_eq!(hold.pattern, "spend");
    let fx = s.step(
        Input::Confirmation(ConfirmationAnswer {
            hold: hold.hold,
            allowed: true,
            reason: "allowed by the user".into(),
            waited_ms: 700,
        }),
        ms(1000),
    );
    assert_eq!(submits(&fx).len(), 1, "allowed, the key goes out");
}

#[test]
fn a_key_chosen_before_the_click_that_opened_a_dialogue_ended_is_not_sent() {
    // FR-SAFE-005: the click on Shop is confirmed by its hover before its release opens "Spend 100
    // gold?"; the next tick waits for the click's input to end, and a key chosen on the menu's frame
    // after that is made again on the dialogue's frame, where it is held for the user.
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let fx = s.answer(outcome(tick, menu(), click_mark(1)), ms(300));
    let (click, _, _) = submits(&fx)[0].clone();
    s.step(Input::ActionAccepted { action: click }, ms(310));
    // The hover redraws the button: the click is confirmed while its button is still down.
    let fx = s.step(
        Input::Evidence {
            action: click,
            changed: Some(true),
        },
        ms(400),
    );
    assert!(
        tactical_jobs(&fx).is_empty(),
        "no frame is taken while our click is being sent"
    );
    let fx = s.step(Input::Reflex(reflex(30)), ms(500));
    assert!(tactical_jobs(&fx).is_empty(), "still being sent");
    s.step(
        Input::ActionEnded {
            action: click,
            end: ActionEnd::Finished,
        },
        ms(520),
    );
    let fx = s.step(Input::Reflex(reflex(31)), ms(560));
    assert!(
        tactical_jobs(&fx).is_empty(),
        "the game has not drawn its answer yet"
    );
    let fx = s.step(Input::Reflex(reflex(32)), ms(700));
    let next = tactical_jobs(&fx)[0].tick;
    // A frame captured before the game drew the dialogue (a tick the old code started at once).
    let stale_perception = Perception {
        tick: next,
        started: ms(600),
        observation: menu(),
        moves: Vec::new(),
    };
    s.step(Input::Perceived(Box::new(stale_perception)), ms(700));
    let fx = s.step(
        Input::Replied {
            tick: next,
            answer: reply(TacticalReply::Act(Action::Key { key: "Return".into() })).map(ModelAnswer::Act),
        },
        ms(800),
    );
    assert!(
        submits(&fx).is_empty(),
        "the key chosen on the old frame is not sent: {fx:#?}"
    );
    assert!(records(&fx)
        .iter()
        .any(|r| matches!(r, SessionRecord::Note { text } if text.contains("chosen on an old frame"))));
    // Checked again, with no model call, on the next frame (the dialogue's): held for the user.
    let again = tactical_jobs(&fx)[0].clone();
    assert!(
        again.perceive_only,
        "the model's choice stands; only the frame is new"
    );
    let mut dialogue = menu();
    dialogue.texts = vec![TextItem {
        text: "Spend 100 gold?".into(),
        bbox: Rect::new(520, 250, 240, 30),
        confidence: 0.9,
    }];
    let fx = s.answer(outcome(again.tick, dialogue, not_asked()), ms(1000));
    assert!(submits(&fx).is_empty());
    assert!(
        fx.iter().any(|e| matches!(e, Effect::AskConfirmation(_))),
        "{fx:#?}"
    );
}

/// Drive one executed action to its verdict with the given evidence and reflex reports in between.
fn verdict_with(
    s: &mut Session,
    fx: &[Effect],
    t: &mut u64,
    action: Result<ModelReply, TacticalFailure>,
    between: &[ReflexReport],
    changed: Option<bool>,
) -> Vec<Effect> {
    verdict_on(s, fx, t, menu(), action, between, changed)
}

/// [`verdict_with`] with the tactical tick observing `obs`.
fn verdict_on(
    s: &mut Session,
    fx: &[Effect],
    t: &mut u64,
    obs: Observation,
    action: Result<ModelReply, TacticalFailure>,
    between: &[ReflexReport],
    changed: Option<bool>,
) -> Vec<Effect> {
    // A perceive-only tick (the ladder's retry) asks no model: it is answered and the next tick taken,
    // until one submits. The latest tick started is the one in flight.
    // A tick starts once the previous input has ended and the game has drawn it.
    let mut job = match tactical_jobs(fx).last() {
        Some(j) => (*j).clone(),
        None => next_job(s, t),
    };
    let mut all = Vec::new();
    let id = loop {
        *t += 100;
        let got = s.answer(outcome(job.tick, obs.clone(), action.clone()), ms(*t));
        all.extend(got.iter().cloned());
        match submits(&got).first() {
            Some((id, _, _)) => break *id,
            None if job.perceive_only => job = tactical_jobs(&got)[0].clone(),
            None => panic!("no submit: {got:#?}"),
        }
    };
    // The input is sent and ends (a click takes a few hundred ms); a frame after it shows its effect.
    all.extend(s.step(
        Input::ActionEnded {
            action: id,
            end: ActionEnd::Finished,
        },
        ms(*t),
    ));
    for r in between {
        *t += 100;
        all.extend(s.step(Input::Reflex(r.clone()), ms(*t)));
    }
    *t += 100;
    all.extend(s.step(Input::Evidence { action: id, changed }, ms(*t)));
    *t += 2000;
    all.extend(s.step(Input::Reflex(reflex(*t / 100)), ms(*t)));
    all
}

#[test]
fn all_six_failure_causes_are_reachable_from_the_sessions_evidence() {
    // FR-GND-008: execution, game, plan, perception, grounding, action choice
    let mut cfg = config();
    cfg.loop_cfg.signals.stasis_ms = 600_000;
    cfg.progress_sensor = Some("coins".into());
    let mut plan = two_step_plan();
    plan.subgoals[0].budget.max_actions = Some(30);
    let (mut s, mut fx) = started_with(cfg, plan);
    let mut t = 10;
    // Execution: the executor did not deliver it.
    let tick = tactical_jobs(&fx)[0].tick;
    t += 100;
    let sub = s.answer(
        outcome(
            tick,
            menu(),
            reply(TacticalReply::Act(Action::Key { key: "x".into() })),
        ),
        ms(t),
    );
    let (id, _, _) = submits(&sub)[0].clone();
    t += 100;
    fx = s.step(
        Input::ActionEnded {
            action: id,
            end: ActionEnd::Cancelled {
                reason: CancelReason::FocusLost,
            },
        },
        ms(t),
    );
    // Grounding: the marked element did not react.
    fx = verdict_with(&mut s, &fx, &mut t, click_mark(1), &[], Some(false));
    // Game: a scene change happened meanwhile, not where we clicked.
    let mut scene = reflex(1);
    scene.change = FrameChange::Scene;
    fx = verdict_with(&mut s, &fx, &mut t, click_mark(2), &[scene], Some(false));
    // Perception: the frame went black while the action was verified.
    let mut black = reflex(2);
    black.health = FrameHealth::Black;
    let ok = reflex(3);
    fx = verdict_with(&mut s, &fx, &mut t, click_mark(3), &[black, ok], Some(false));
    // Action choice: confirmed actions, many, and the progress sensor never rises.
    for _ in 0..12 {
        if s.numbers()
            .failures
            .iter()
            .any(|(c, _)| *c == FailureCause::ActionChoice)
        {
            break;
        }
        let mut r = reflex(4);
        r.sensors = vec![("coins".into(), Some(0.0))];
        fx = verdict_with(
            &mut s,
            &fx,
            &mut t,
            reply(TacticalReply::Act(Action::Key { key: "d".into() })),
            &[r],
            Some(true),
        );
    }
    // Plan: the subgoal's time budget runs out.
    t += 130_000;
    s.step(Input::Reflex(reflex(t)), ms(t));
    let causes: Vec<FailureCause> = s.numbers().failures.iter().map(|(c, _)| *c).collect();
    for want in [
        FailureCause::Execution,
        FailureCause::Grounding,
        FailureCause::Game,
        FailureCause::Perception,
        FailureCause::ActionChoice,
        FailureCause::Plan,
    ] {
        assert!(causes.contains(&want), "{want:?} missing from {causes:?}");
    }
}

#[test]
fn the_grounding_path_is_chosen_per_scene_kind_and_narrows_the_tools() {
    // FR-GND-004: the scene kind of the observation (menu), not the frame-change class
    let mut cfg = config();
    cfg.grounding_paths = vec![GroundingPathAlias::Mark];
    let (mut s, fx) = started_with(cfg, two_step_plan());
    let job = tactical_jobs(&fx)[0];
    assert!(!job.tools.contains(&gamepilot_context::Tool::Click));
    let fx = s.answer(
        outcome(job.tick, menu(), reply(TacticalReply::Note { text: "hm".into() })),
        ms(100),
    );
    assert_eq!(s.numbers().frame.scene, Some(SceneKind::Menu));
    let grounding = records(&fx)
        .into_iter()
        .filter_map(|r| match r {
            SessionRecord::LoopStep {
                event: gamepilot_planner::Event::GroundingRequest { scene, .. },
                ..
            } => Some(scene.clone()),
            _ => None,
        })
        .next();
    assert_eq!(grounding.as_deref(), Some("menu"));
}

use gamepilot_grounding::GroundingPath as GroundingPathAlias;

#[test]
fn the_reflex_feed_reports_the_strongest_change_and_worst_lateness_since_the_last_report() {
    // FR-LOOP-005: a change on an unreported tick is not lost
    let mut feed = ReflexFeed::new(6);
    let mut out = Vec::new();
    for tick in 1..=6 {
        let mut r = reflex(tick);
        r.change = if tick == 2 {
            FrameChange::Motion
        } else {
            FrameChange::Unchanged
        };
        r.late_us = if tick == 3 { 900 } else { 10 };
        r.goal_met = None;
        out.extend(feed.tick(r));
    }
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].change, FrameChange::Motion);
    assert_eq!(out[0].late_us, 900);
    assert_eq!(out[0].ticks_since, 6);
}

#[test]
fn the_model_sees_what_the_sensors_see_and_what_changed() {
    // FR-PERC-007 / sensor-expressions.md: the observation's text includes the sensors' values
    let now = vec![
        ("lines".to_string(), Some(3.0)),
        ("menu".to_string(), None),
        ("x".to_string(), Some(1.0)),
    ];
    let before = vec![
        ("lines".to_string(), Some(2.0)),
        ("menu".to_string(), Some(1.0)),
        ("x".to_string(), Some(1.0)),
    ];
    assert_eq!(
        crate::sensors_line(&now, &before).as_deref(),
        Some("Sensors: lines = 3 (was 2), menu = undefined (was 1), x = 1")
    );
    assert_eq!(crate::sensors_line(&[], &before), None);
    // Through the session: the job carries the line, "was" being the previous call's values.
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let mut r = reflex(6);
    r.sensors = vec![("coins".to_string(), Some(0.0))];
    s.step(Input::Reflex(r), ms(200));
    let fx = s.answer(
        outcome(tick, menu(), reply(TacticalReply::Note { text: "a".into() })),
        ms(300),
    );
    let job = tactical_jobs(&fx)[0];
    assert_eq!(job.sensors.as_deref(), Some("Sensors: coins = 0"));
    let mut r = reflex(12);
    r.sensors = vec![("coins".to_string(), Some(1.0))];
    s.step(Input::Reflex(r), ms(400));
    let fx = s.answer(
        outcome(job.tick, menu(), reply(TacticalReply::Note { text: "b".into() })),
        ms(500),
    );
    assert_eq!(
        tactical_jobs(&fx)[0].sensors.as_deref(),
        Some("Sensors: coins = 1 (was 0)")
    );
}

#[test]
fn the_time_from_a_new_screen_to_the_first_action_is_measured() {
    // The latency a player feels, from the session's start and from each scene change
    let (mut s, fx) = planned();
    let tick = tactical_jobs(&fx)[0].tick;
    let sub = s.answer(outcome(tick, menu(), click_mark(1)), ms(900));
    let (id, _, _) = submits(&sub)[0].clone();
    s.step(Input::ActionAccepted { action: id }, ms(1000));
    assert_eq!(s.numbers().calls.first_action_ms, vec![1000.0]);
    // The scene change the action itself causes is its effect, not a new screen to decide on.
    let mut r = reflex(6);
    r.change = FrameChange::Scene;
    s.step(Input::Reflex(r.clone()), ms(1100));
    let fx = s.step(
        Input::Evidence {
            action: id,
            changed: Some(true),
        },
        ms(1200),
    );
    let mut t = 1200;
    let next = match tactical_jobs(&fx).first() {
        Some(j) => (*j).clone(),
        None => next_job(&mut s, &mut t),
    };
    let mut r2 = reflex(t / 100);
    r2.change = FrameChange::Scene;
    let screen_at = t + 100;
    s.step(Input::Reflex(r2), ms(screen_at));
    let sub = s.answer(outcome(next.tick, menu(), click_mark(2)), ms(screen_at + 400));
    let (id2, _, _) = submits(&sub)[0].clone();
    s.step(Input::ActionAccepted { action: id2 }, ms(screen_at + 500));
    assert_eq!(s.numbers().calls.first_action_ms, vec![1000.0, 500.0]);
}

#[test]
fn a_postcondition_true_for_a_single_tick_reaches_the_session() {
    // FR-LOOP-004 (postconditions checked every reflex tick): `x > @x` is true on the one tick x rises; a
    // feed that reported every sixth tick's check only would lose it
    let mut feed = ReflexFeed::new(6);
    let check = |met: bool| {
        Some(gamepilot_planner::SubgoalCheck {
            subgoal: SubgoalId(1),
            met: Some(met),
        })
    };
    let mut out = Vec::new();
    for tick in 1..=12 {
        let mut r = reflex(tick);
        r.subgoal = check(tick == 3);
        out.extend(feed.tick(r));
    }
    assert!(
        out.iter().any(|r| r.tick == 3 && r.subgoal == check(true)),
        "{out:?}"
    );
    assert!(out.iter().any(|r| r.tick == 4 && r.subgoal == check(false)));
    // Unchanged checks are not reported more often than before.
    assert_eq!(out.iter().filter(|r| r.tick % 6 != 0).count(), 3, "{out:?}");
}

#[test]
fn inputs_and_effects_serialise_for_the_recording() {
    // INV-CTX-002: every input is recorded and replayable
    let input = Input::Perceived(Box::new(Perception {
        tick: 3,
        started: ms(10),
        observation: menu(),
        moves: vec![Some((1.0, -2.0)), None],
    }));
    let text = serde_json::to_string(&input).unwrap();
    let back: Input = serde_json::from_str(&text).unwrap();
    assert_eq!(back, input);
    let (_, adopted) = planned();
    let v = serde_json::to_value(&adopted).unwrap();
    assert!(v.to_string().contains("\"effect\":\"start_tactical\""));
}

#[test]
fn a_black_frame_is_named_in_the_status_the_recording_and_the_models_observation() {
    // FR-PERC-009
    let (mut s, _) = planned();
    let mut r = reflex(6);
    r.health = FrameHealth::Black;
    let fx = s.step(Input::Reflex(r), ms(200));
    assert!(records(&fx).iter().any(|r| matches!(
        r,
        SessionRecord::Interlock { interlock, detail } if *interlock == gamepilot_core::Safeguard::FrameHealth && detail.contains("black")
    )));
    assert_eq!(s.numbers().frame.health, FrameHealth::Black);
    let text = observation_for_model("frame 1280x720 (scene)\n", FrameHealth::Black, 3000);
    assert!(text.starts_with("frame health: black"), "{text}");
    assert_eq!(observation_for_model("x", FrameHealth::Ok, 3000), "x");
    let long = "line of screen text\n".repeat(500);
    let cut = bound_text(&long, 1000);
    assert!(
        cut.len() <= 1000 && cut.contains("more bytes of observation left out"),
        "{}",
        cut.len()
    );
}

#[test]
fn a_gpu_memory_degrade_step_shrinks_the_next_ticks_visual_budget_and_context() {
    // FR-MODEL-004: the ladder's command reaches what the session sends
    let (mut s, adopted) = planned();
    let before = tactical_jobs(&adopted)[0].shape.visual_pixels;
    let tick = tactical_jobs(&adopted)[0].tick;
    s.step(
        Input::Degrade(gamepilot_core::DegradeCommand::ReduceVisualBudget { factor: 0.5 }),
        ms(150),
    );
    s.step(
        Input::Degrade(gamepilot_core::DegradeCommand::ReduceContext { to_tokens: 2048 }),
        ms(200),
    );
    let fx = s.answer(
        outcome(tick, menu(), reply(TacticalReply::Note { text: "x".into() })),
        ms(300),
    );
    let job = tactical_jobs(&fx)[0];
    assert_eq!(job.shape.visual_pixels, before / 2);
    assert_eq!(s.context().config().context_tokens, 2048);
    // A restore to more than the host's own context restores the host's.
    let host = config().limits.context_tokens;
    let tick = job.tick;
    s.step(
        Input::Degrade(gamepilot_core::DegradeCommand::RestoreContext { to_tokens: host * 4 }),
        ms(400),
    );
    let fx = s.answer(
        outcome(tick, menu(), reply(TacticalReply::Note { text: "y".into() })),
        ms(500),
    );
    assert!(!tactical_jobs(&fx).is_empty());
    assert_eq!(s.context().config().context_tokens, host);
}

#[test]
fn no_tactical_call_starts_while_the_tactical_host_restarts_and_a_failed_restart_stops_named() {
    // FR-MODEL-004 (a host reshaped while the session runs), FR-LOOP-008 (a named stop)
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let restart = |restarting: bool, failed: Option<&str>| {
        Input::HostRestart(crate::HostRestart {
            host: "tactical".into(),
            restarting,
            failed: failed.map(str::to_string),
            detail: "GPU memory degrade: restarting the tactical host".into(),
        })
    };
    s.step(restart(true, None), ms(200));
    let fx = s.answer(
        outcome(tick, menu(), reply(TacticalReply::Note { text: "x".into() })),
        ms(300),
    );
    assert!(tactical_jobs(&fx).is_empty(), "no call while the host restarts");
    let fx = s.step(Input::Reflex(reflex(5)), ms(500));
    assert!(tactical_jobs(&fx).is_empty());
    let fx = s.step(restart(false, None), ms(600));
    assert_eq!(tactical_jobs(&fx).len(), 1, "calls resume once it serves");
    let tick = tactical_jobs(&fx)[0].tick;
    s.answer(
        outcome(tick, menu(), reply(TacticalReply::Note { text: "z".into() })),
        ms(700),
    );
    s.step(restart(true, None), ms(800));
    s.step(restart(false, Some("port taken")), ms(900));
    let stop = s.stopped().expect("stopped");
    assert!(
        format!("{stop:?}").contains("did not come back from a GPU-memory restart: port taken"),
        "{stop:?}"
    );
}

#[test]
fn a_calibrated_camera_is_offered_to_the_model_in_degrees() {
    // FR-ACT-004: once `run --calibrate-camera` measured the camera, the model's camera tool takes
    // degrees (the executor converts them); before that it takes relative counts.
    use gamepilot_context::Tool;
    for (calibrated, offered, absent, described) in [
        (false, Tool::Camera, Tool::CameraDegrees, "\"camera\",\"dx\""),
        (
            true,
            Tool::CameraDegrees,
            Tool::Camera,
            "\"camera_degrees\",\"yaw_deg\"",
        ),
    ] {
        let mut cfg = config();
        cfg.camera_calibrated = calibrated;
        let (s, fx) = started_with(cfg, two_step_plan());
        let job = tactical_jobs(&fx)[0];
        assert!(job.tools.contains(&offered), "{calibrated}: {:?}", job.tools);
        assert!(!job.tools.contains(&absent), "{calibrated}: {:?}", job.tools);
        assert!(plan_block(&s).contains(described), "block 1 describes the tool");
    }
}

#[test]
fn a_model_host_that_stays_unreachable_stops_the_session_with_a_named_reason() {
    // A killed host is a named stop, not an idle session until its budget; a host that answers
    // again in between resets the count
    let (mut s, adopted) = planned();
    let gone = || {
        Err(TacticalFailure {
            kind: FailureKind::Host,
            message: "transport error: connection refused".into(),
            latency_ms: 1.0,
        })
    };
    let mut tick = tactical_jobs(&adopted)[0].tick;
    let mut t = 1_000;
    // Three failures, then an answer: the streak starts again.
    for _ in 0..3 {
        let fx = s.answer(outcome(tick, menu(), gone()), ms(t));
        tick = tactical_jobs(&fx)[0].tick;
        t += 2_000;
    }
    let fx = s.answer(
        outcome(tick, menu(), reply(TacticalReply::Note { text: "back".into() })),
        ms(t),
    );
    tick = tactical_jobs(&fx)[0].tick;
    for i in 0..4 {
        t += 2_000;
        let fx = s.answer(outcome(tick, menu(), gone()), ms(t));
        if i < 3 {
            assert!(s.stopped().is_none(), "failure {i} of the new streak");
            tick = tactical_jobs(&fx)[0].tick;
        }
    }
    match s.stopped() {
        Some(SessionStop::ModelHostGone { detail }) => {
            assert!(detail.contains("4 tactical calls in a row"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_degenerate_plan_is_refused_asked_again_once_with_the_reason_then_repaired() {
    // Identical subgoals, then a postcondition that is already true.
    let mut s = reported(Session::new(config(), MonoTime::ZERO).unwrap());
    s.step(Input::Start, ms(0));
    let twice = PlanSpec {
        subgoals: vec![
            subgoal(1, 1, "playing", "start the game"),
            subgoal(2, 1, "playing", "start the game again"),
        ],
    };
    let fx = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: None,
            pass: 1,
            plan: Ok(twice),
            latency_ms: 1.0,
        }),
        ms(10),
    );
    let again: Vec<&DeliberationJob> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::StartDeliberation(j) => Some(j),
            _ => None,
        })
        .collect();
    assert_eq!(again.len(), 1, "asked again: {fx:?}");
    assert_eq!(again[0].pass, 1, "the same pass");
    assert!(again[0].first_id > 3, "fresh subgoal ids");
    let prompt = again[0].prompt.render();
    assert!(
        prompt.contains("both end at \"playing\""),
        "the reason reaches the model: {prompt}"
    );
    assert!(records(&fx).iter().any(|r| matches!(r, SessionRecord::Failure { cause: FailureCause::Plan, evidence, .. } if evidence.contains("refused"))));
    assert_eq!(s.loop_state().active_subgoal(), None, "nothing adopted");
    // The playing sensor reads true now: the answer asked again starts by reaching it, so it is degenerate
    // too; no third ask: its sound part (the coin) is adopted and the repair noted.
    let mut tick = reflex(1);
    tick.sensors = vec![("playing".into(), Some(1.0))];
    s.step(Input::Reflex(tick), ms(20));
    let fx = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: None,
            pass: 1,
            plan: Ok(two_step_plan()),
            latency_ms: 1.0,
        }),
        ms(30),
    );
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::StartDeliberation(j) if j.pass == 1)),
        "{fx:?}"
    );
    assert!(records(&fx)
        .iter()
        .any(|r| matches!(r, SessionRecord::Failure { evidence, .. } if evidence.contains("already true"))));
    assert!(records(&fx)
        .iter()
        .any(|r| matches!(r, SessionRecord::Note { text } if text.contains("repaired"))));
    assert_eq!(
        s.loop_state().active_subgoal(),
        Some(SubgoalId(2)),
        "the coin subgoal"
    );
}

#[test]
fn a_plan_asked_again_with_nothing_sound_left_falls_back_to_the_goal_itself() {
    // With nothing sound left and no subgoal active, the goal itself becomes the one subgoal,
    // ending at the first offered postcondition not yet true, so the tactical cadence keeps acting.
    let mut s = reported(Session::new(config(), MonoTime::ZERO).unwrap());
    s.step(Input::Start, ms(0));
    let mut tick = reflex(1);
    tick.sensors = vec![("playing".into(), Some(1.0))];
    s.step(Input::Reflex(tick), ms(5));
    let reached = || PlanSpec {
        subgoals: vec![subgoal(1, 1, "playing", "start the game")],
    };
    for (at, asks_again) in [(10, true), (20, false)] {
        let fx = s.step(
            Input::Plan(PlanOutcome {
                reply: None,
                first_id: 0,
                research: None,
                pass: 1,
                plan: Ok(reached()),
                latency_ms: 1.0,
            }),
            ms(at),
        );
        let again = fx
            .iter()
            .any(|e| matches!(e, Effect::StartDeliberation(j) if j.pass == 1));
        assert_eq!(again, asks_again, "{fx:?}");
        if !asks_again {
            assert!(records(&fx).iter().any(|r| matches!(
                r,
                SessionRecord::Note { text } if text.contains("acting on the goal itself")
            )));
            assert!(!records(&fx).iter().any(|r| matches!(
                r,
                SessionRecord::LoopStep {
                    event: gamepilot_planner::Event::DeliberationFailed { .. },
                    ..
                }
            )));
        }
    }
    let status = s.loop_state().status();
    assert!(s.loop_state().active_subgoal().is_some());
    assert_eq!(
        status.subgoal_description.as_deref(),
        Some("click Play, then collect a coin")
    );
}

#[test]
fn with_one_postcondition_offered_a_repeating_plan_is_repaired_at_once() {
    // Every plan of two subgoals repeats the one postcondition, so asking again cannot
    // help; the sound part is adopted without a second call.
    let cfg = SessionConfig {
        postconditions: vec!["coins >= 1".into()],
        ..config()
    };
    let mut s = reported(Session::new(cfg, MonoTime::ZERO).unwrap());
    s.step(Input::Start, ms(0));
    let fx = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: None,
            pass: 1,
            plan: Ok(PlanSpec {
                subgoals: vec![
                    subgoal(1, 0, "coins >= 1", "find a coin"),
                    subgoal(2, 0, "coins >= 1", "collect the coin"),
                ],
            }),
            latency_ms: 1.0,
        }),
        ms(10),
    );
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::StartDeliberation(_))),
        "{fx:?}"
    );
    assert_eq!(s.loop_state().active_subgoal(), Some(SubgoalId(1)));
}

#[test]
fn the_tactical_prompt_sent_is_committed_and_the_next_tick_extends_it() {
    // FR-CTX-002: the session keeps the tail of the prompt its tactical tick sent
    let (mut s, adopted) = planned();
    let job = tactical_jobs(&adopted)[0];
    // A frame that is no scene change (a scene change is a new baseline).
    let mut still = menu();
    still.class = gamepilot_core::FrameChange::Unchanged;
    let perceived = |tick: u64, at: u64| {
        Input::Perceived(Box::new(Perception {
            tick,
            started: ms(at),
            observation: still.clone(),
            moves: Vec::new(),
        }))
    };
    let call = |fx: &[Effect]| {
        fx.iter()
            .find_map(|e| match e {
                Effect::CallModel(c) => Some(c.prompt.clone()),
                _ => None,
            })
            .expect("a model call")
    };
    let first = call(&s.step(perceived(job.tick, 200), ms(200)));
    let fx = s.step(
        Input::Replied {
            tick: job.tick,
            answer: click_mark(1).map(ModelAnswer::Act),
        },
        ms(300),
    );
    assert!(
        s.context().tactical_tail().is_some(),
        "the prompt sent is committed"
    );
    let id = submits(&fx)[0].0;
    ended(&mut s, id, ms(440));
    let fx = s.step(
        Input::Evidence {
            action: id,
            changed: Some(true),
        },
        ms(600),
    );
    let next = tactical_jobs(&fx)[0];
    let second = call(&s.step(perceived(next.tick, 700), ms(700)));
    let (a, b) = (first.messages[1].joined_text(), second.messages[1].joined_text());
    assert!(b.starts_with(&a), "{b}");
    assert!(b[a.len()..].contains("-> confirmed"), "{}", &b[a.len()..]);
}

#[test]
fn the_users_input_pauses_the_session_until_their_resume() {
    // FR-SAFE-002: paused, not stopped; nothing judged or started meanwhile; resumed on the user's word
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let fx = s.step(
        Input::Interlock {
            interlock: Interlock::UserInput,
            detail: "paused by Xephyr virtual keyboard".into(),
        },
        ms(300),
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::Stop(_))), "{fx:?}");
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Reflex(ReflexCommand::Pause { paused: true }))));
    assert!(s.numbers().waiting.paused_by_user);
    assert!(s.numbers().status_line(false, 1.0).contains("PAUSED"));
    // The tick in flight comes back: nothing is proposed while paused.
    let fx = s.answer(outcome(tick, menu(), click_mark(1)), ms(400));
    assert!(submits(&fx).is_empty(), "nothing is sent while paused");
    let fx = s.step(Input::Reflex(reflex(50)), ms(60_000));
    assert!(tactical_jobs(&fx).is_empty(), "no tick while paused");
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Stop(_))),
        "no budget runs out while paused"
    );
    let fx = s.step(Input::Resume, ms(61_000));
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Reflex(ReflexCommand::Pause { paused: false }))));
    assert!(!s.numbers().waiting.paused_by_user);
    assert_eq!(
        tactical_jobs(&fx).len(),
        1,
        "ticks start again with the resume: {fx:?}"
    );
}

#[test]
fn on_the_alternative_rung_the_model_is_told_what_is_refused() {
    // FR-LOOP-006: the alternative-action rung refuses the action that did not help, and says so first
    let (s, fx, t) = refuted_until(gamepilot_planner::Rung::AlternativeAction);
    assert_eq!(
        s.loop_state().rung(),
        Some(gamepilot_planner::Rung::AlternativeAction)
    );
    let refused = s
        .loop_state()
        .refused_action()
        .expect("an action is refused")
        .to_string();
    // The ladder's history, as the summary prints it (stop and notify).
    let climbed: Vec<_> = s.numbers().escalations.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        climbed,
        vec![
            gamepilot_planner::Rung::Retry,
            gamepilot_planner::Rung::AlternativeAction
        ]
    );
    assert_eq!(tactical_jobs(&fx).len(), 1, "the next tick starts");
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(t), ""), None)
        .render();
    assert!(
        prompt.contains(&format!("`{refused}` did not help and is refused now")),
        "{prompt}"
    );
}

#[test]
fn the_retry_rung_grounds_the_last_intention_again_without_the_model_once() {
    // FR-LOOP-006: retry = the same intention, grounded on a fresh observation, once
    let (mut s, fx, mut t) = refuted_until(gamepilot_planner::Rung::Retry);
    assert_eq!(s.loop_state().rung(), Some(gamepilot_planner::Rung::Retry));
    let job = tactical_jobs(&fx)[0].clone();
    assert!(job.perceive_only, "the retry tick asks no model");
    t += 100;
    let not_asked = Err(TacticalFailure {
        kind: FailureKind::NotAsked,
        message: "perceive only".into(),
        latency_ms: 0.0,
    });
    let fx = s.answer(outcome(job.tick, menu(), not_asked), ms(t));
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert_eq!(sent[0].1, Action::Key { key: "x".into() });
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Record(SessionRecord::Note { text }) if text.starts_with("retry: "))));
    // Once: the following tick asks the model again.
    let (id, _, _) = sent[0].clone();
    ended(&mut s, id, ms(t + 50));
    t += 100;
    let mut after = s.step(
        Input::Evidence {
            action: id,
            changed: Some(true),
        },
        ms(t),
    );
    t += 2000;
    after.extend(s.step(Input::Reflex(reflex(t / 100)), ms(t)));
    let next = tactical_jobs(&after);
    assert!(!next.is_empty() && !next[0].perceive_only, "{after:?}");
}

/// A planned session whose tactical ticks keep proposing key `x`, each refuted, until the ladder is on `rung`
/// (at most twelve actions): the session, the last effects and the time reached (ms).
fn refuted_until(rung: gamepilot_planner::Rung) -> (Session, Vec<Effect>, u64) {
    let (mut s, fx) = planned();
    let (fx, t) = refute_until(&mut s, fx, 10, rung);
    (s, fx, t)
}

/// Refutes the session's actions until the ladder is on `rung` (at most twenty): key `x` until the
/// alternative-action rung refuses it, then other keys. The last effects and the time reached (ms).
fn refute_until(
    s: &mut Session,
    mut fx: Vec<Effect>,
    mut t: u64,
    rung: gamepilot_planner::Rung,
) -> (Vec<Effect>, u64) {
    for i in 0..20 {
        if s.loop_state().rung() == Some(rung) {
            break;
        }
        let key = match s.loop_state().refused_action() {
            None => "x".to_string(),
            Some(_) => ["y", "z", "a", "b", "c", "d", "e", "f"][i % 8].to_string(),
        };
        fx = verdict_with(
            s,
            &fx,
            &mut t,
            reply(TacticalReply::Act(Action::Key { key })),
            &[],
            Some(false),
        );
    }
    assert_eq!(
        s.loop_state().rung(),
        Some(rung),
        "the ladder never reached {rung:?}"
    );
    (fx, t)
}

fn research_jobs(effects: &[Effect]) -> Vec<&crate::ResearchJob> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::StartResearch(j) => Some(j),
            _ => None,
        })
        .collect()
}

#[test]
fn the_research_rung_asks_the_planners_question_and_the_second_goes_deep() {
    // FR-LOOP-006 (research rung), FR-SKILL-003 (the first: search and fetch), FR-SKILL-004 (the second:
    // deep research)
    let mut s = reported(Session::new(config(), MonoTime::ZERO).unwrap());
    s.step(Input::Start, ms(0));
    let fx = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: Some("how do I start a game".into()),
            pass: 1,
            plan: Ok(two_step_plan()),
            latency_ms: 1.0,
        }),
        ms(10),
    );
    // A confirmed action on the menu: the safe-state rung has a screen to return to.
    let mut t = 10;
    let fx = verdict_on(&mut s, &fx, &mut t, menu(), click_mark(2), &[], Some(true));
    let (fx, mut t) = refute_until(&mut s, fx, t, gamepilot_planner::Rung::Research);
    let jobs = research_jobs(&fx);
    assert_eq!(jobs.len(), 1, "{fx:?}");
    assert_eq!(jobs[0].question.as_deref(), Some("how do I start a game"));
    assert_eq!(jobs[0].inferences, vec!["how to start the game".to_string()]);
    assert!(!jobs[0].deep);
    // Research found nothing: the rung failed, the ladder is on safe state.
    t += 100;
    s.step(
        Input::Research(crate::ResearchFindings {
            query: "how do I start a game".into(),
            excerpts: Vec::new(),
            note: String::new(),
            found: false,
        }),
        ms(t),
    );
    assert_eq!(s.loop_state().rung(), Some(gamepilot_planner::Rung::SafeState));
    // Progress (a confirmed action) returns the ladder to idle; stuck again, the next research is deep.
    let tick = match tactical_jobs(&fx).first() {
        Some(j) => j.tick,
        None => tactical_jobs_after(&mut s, &mut t),
    };
    t += 100;
    let sub = s.answer(
        outcome(
            tick,
            menu(),
            reply(TacticalReply::Act(Action::Key { key: "g".into() })),
        ),
        ms(t),
    );
    let (id, _, _) = submits(&sub)[0].clone();
    t += 100;
    let fx = s.step(
        Input::Evidence {
            action: id,
            changed: Some(true),
        },
        ms(t),
    );
    assert_eq!(s.loop_state().rung(), None);
    let (fx, _) = refute_until(&mut s, fx, t, gamepilot_planner::Rung::Research);
    let jobs = research_jobs(&fx);
    assert_eq!(jobs.len(), 1, "{fx:?}");
    assert!(jobs[0].deep, "the second research rung is deep research");
    assert_eq!(jobs[0].question, None, "a question is asked once");
}

/// The settings screen the safe-state test gets lost on: other texts, a Back button.
fn settings() -> Observation {
    let mut o = menu();
    o.texts = ["Volume", "Music", "Back"]
        .iter()
        .enumerate()
        .map(|(i, t)| TextItem {
            text: t.to_string(),
            bbox: Rect::new(580, 310 + 80 * i as i32, 100, 28),
            confidence: 0.9,
        })
        .collect();
    for (e, l) in o.elements.iter_mut().zip(["Volume", "Music", "Back"]) {
        e.label = Some(l.into());
    }
    o
}

fn not_asked() -> Result<ModelReply, TacticalFailure> {
    Err(TacticalFailure {
        kind: FailureKind::NotAsked,
        message: "perceive only".into(),
        latency_ms: 0.0,
    })
}

fn notes(effects: &[Effect]) -> Vec<&str> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Record(SessionRecord::Note { text }) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_safe_state_rung_goes_back_to_the_confirmed_screen_and_knows_it_arrived() {
    // FR-LOOP-006 (return to a safe state): Escape, then the Back element, verified by the screen itself
    let (mut s, fx) = planned();
    let mut t = 10;
    // An action confirmed on the menu makes the menu the safe screen.
    let fx = verdict_on(&mut s, &fx, &mut t, menu(), click_mark(2), &[], Some(true));
    // Lost on the settings screen: everything refuted until the safe-state rung.
    let mut fx = fx;
    for i in 0..24 {
        if s.loop_state().rung() == Some(gamepilot_planner::Rung::SafeState) {
            break;
        }
        if tactical_jobs(&fx).is_empty() {
            t += 500;
            fx = s.step(Input::Reflex(reflex(t / 100)), ms(t));
            continue;
        }
        let key = ["y", "z", "a", "b", "c", "d", "e", "f"][i % 8].to_string();
        // A perceive-only tick (the retry rung's) is answered as the wiring answers it: no model call.
        let answer = match tactical_jobs(&fx)[0].perceive_only {
            true => not_asked(),
            false => reply(TacticalReply::Act(Action::Key { key })),
        };
        fx = verdict_on(&mut s, &fx, &mut t, settings(), answer, &[], Some(false));
        if s.loop_state().rung() == Some(gamepilot_planner::Rung::Research) {
            t += 100;
            fx.extend(s.step(
                Input::Research(crate::ResearchFindings {
                    query: "q".into(),
                    excerpts: Vec::new(),
                    note: String::new(),
                    found: false,
                }),
                ms(t),
            ));
        }
    }
    assert_eq!(s.loop_state().rung(), Some(gamepilot_planner::Rung::SafeState));
    assert!(
        notes(&fx)
            .iter()
            .any(|n| n.starts_with("safe state: going back to the menu showing 'options', 'play', 'shop'")),
        "{:?}",
        notes(&fx)
    );
    // Step 1: Escape, on the next observation (a reply to a call started before the rung is set aside).
    let (tick, answer) = match tactical_jobs(&fx).first() {
        Some(j) if !j.perceive_only => (j.tick, reply(TacticalReply::Act(Action::Key { key: "q".into() }))),
        Some(j) => (j.tick, not_asked()),
        None => (tactical_jobs_after(&mut s, &mut t), not_asked()),
    };
    t += 100;
    let fx = s.answer(outcome(tick, settings(), answer), ms(t));
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert_eq!(sent[0].1, Action::Key { key: "Escape".into() });
    // Escape changed nothing; step 2 clicks the Back element (mark 3 on the settings screen).
    t += 100;
    let tick = evidence_then_job(&mut s, &mut t, sent[0].0, Some(false)).tick;
    t += 100;
    let fx = s.answer(outcome(tick, settings(), not_asked()), ms(t));
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    let back = settings().elements[2].bbox.center();
    assert!(
        matches!(sent[0].1, Action::Click { x, y, .. } if (x, y) == (back.x, back.y)),
        "{:?}",
        sent[0].1
    );
    t += 100;
    // The menu is back: arrived, said to the model, and the next tick asks the model again.
    let tick = evidence_then_job(&mut s, &mut t, sent[0].0, Some(true)).tick;
    t += 100;
    let fx = s.answer(outcome(tick, menu(), not_asked()), ms(t));
    assert!(
        notes(&fx)
            .iter()
            .any(|n| n.starts_with("safe state: back on the menu")),
        "{:?}",
        notes(&fx)
    );
    let next = tactical_jobs(&fx)[0];
    assert!(
        next.tick > tick && !next.perceive_only,
        "the model is asked again"
    );
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(t), ""), None)
        .render();
    assert!(prompt.contains("safe state: back on the menu"), "{prompt}");
}

#[test]
fn with_no_confirmed_screen_the_safe_state_rung_fails_at_once_and_the_session_stops_named() {
    // FR-LOOP-006: safe state with nothing to return to fails; stop and notify follows, with the ladder
    let (mut s, fx, mut t) = refuted_until(gamepilot_planner::Rung::Research);
    drop(fx);
    t += 100;
    let fx = s.step(
        Input::Research(crate::ResearchFindings {
            query: "q".into(),
            excerpts: Vec::new(),
            note: String::new(),
            found: false,
        }),
        ms(t),
    );
    assert!(
        notes(&fx).contains(&"safe state: no screen of this session had a confirmed action to return to"),
        "{:?}",
        notes(&fx)
    );
    assert_eq!(
        s.loop_state().rung(),
        Some(gamepilot_planner::Rung::StopAndNotify)
    );
    assert!(s.stopped().is_some());
    let climbed: Vec<_> = s.numbers().escalations.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        climbed,
        [
            "retry",
            "alternative_action",
            "replan",
            "research",
            "safe_state",
            "stop_and_notify"
        ]
    );
}

#[test]
fn while_the_game_is_not_in_front_the_session_waits_and_says_so() {
    // FR-SAFE-004 (input withheld while another window has the focus): no model call, no verdict, no
    // ladder; the wait spends no budget, and the session resumes when the game is in front again
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let behind = |t: u64| ReflexReport {
        foreground: false,
        ..reflex(t)
    };
    let fx = s.step(Input::Reflex(behind(2)), ms(200));
    assert!(fx.iter().any(|e| matches!(e, Effect::Record(SessionRecord::Interlock { interlock, .. }) if *interlock == gamepilot_core::Safeguard::NotInFront)));
    assert!(s.numbers().waiting.waiting_for_front);
    assert!(s
        .numbers()
        .status_line(false, 1.0)
        .starts_with("[WAITING: the game is not in front]"));
    // The reply of a call started before is not acted on, and nothing new is asked.
    let fx = s.answer(
        outcome(
            tick,
            menu(),
            reply(TacticalReply::Act(Action::Key { key: "x".into() })),
        ),
        ms(300),
    );
    assert!(submits(&fx).is_empty() && tactical_jobs(&fx).is_empty(), "{fx:?}");
    // A minute behind: no stuck signal, no climb, no budget spent.
    let mut t = 300;
    for i in 0..120 {
        t += 500;
        let fx = s.step(Input::Reflex(behind(10 + i)), ms(t));
        assert!(tactical_jobs(&fx).is_empty());
    }
    assert_eq!(s.loop_state().rung(), None);
    assert!(s.stopped().is_none());
    t += 500;
    let fx = s.step(Input::Reflex(reflex(200)), ms(t));
    assert!(fx.iter().any(|e| matches!(e, Effect::Record(SessionRecord::Interlock { interlock, detail }) if *interlock == gamepilot_core::Safeguard::InFront && detail.contains("after 60.6 s"))), "{fx:?}");
    assert!(!s.numbers().waiting.waiting_for_front);
    assert_eq!(tactical_jobs(&fx).len(), 1, "the model is asked again");
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(t), ""), None)
        .render();
    assert!(
        prompt.contains("not executed: the game is not in front"),
        "{prompt}"
    );
}

#[test]
fn a_subgoal_naming_a_visible_element_is_clicked_without_a_model_call_once() {
    // Grounding without guessing, FR-GND-001 (a mark's centre), FR-GND-006 (verified)
    let plan = PlanSpec {
        subgoals: vec![
            subgoal(1, 1, "playing", "click 'Options'"),
            subgoal(2, 0, "coins >= 1", "collect a coin"),
        ],
    };
    let (mut s, fx) = started_with(config(), plan);
    let job = tactical_jobs(&fx)[0].clone();
    assert_eq!(job.aim.name.as_deref(), Some("options"));
    assert!(
        !job.perceive_only,
        "the tactical thread asks the model unless the name is on screen once"
    );
    let mut t = 100;
    let fx = s.answer(outcome(job.tick, menu(), not_asked()), ms(t));
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    let options = menu().elements[1].bbox.center();
    assert!(matches!(sent[0].1, Action::Click { x, y, .. } if (x, y) == (options.x, options.y)));
    assert!(notes(&fx)
        .iter()
        .any(|n| n.starts_with("grounded without a model call: the subgoal names 'options'")));
    assert_eq!(s.numbers().actions.direct_groundings, 1);
    // Executed and verified like any action; the subgoal is still open, and the next choice is the model's.
    t += 100;
    let next = evidence_then_job(&mut s, &mut t, sent[0].0, Some(true));
    assert_eq!(next.aim.name, None, "once per subgoal and name");
}

#[test]
fn a_step_that_closes_an_open_dialog_with_no_button_so_labelled_taps_escape_without_a_model_call() {
    // FR-GND-001: sgt-mines' About box is taller than its window and capture is clipped to the window, so
    // its Close button is never seen; "then close it" is Escape, as a person would press.
    let plan = PlanSpec {
        subgoals: vec![
            subgoal(1, 1, "playing", "close it"),
            subgoal(2, 0, "coins >= 1", "collect a coin"),
        ],
    };
    let cfg = with_behaviours(Behaviours {
        direct_by_words: true,
        ..config().behaviours
    });
    let (mut s, fx) = started_with(cfg.clone(), plan.clone());
    let job = tactical_jobs(&fx)[0].clone();
    let mut about = menu();
    for e in &mut about.elements {
        e.layer = Some(gamepilot_core::WindowLayer::Dialog);
    }
    let fx = s.answer(outcome(job.tick, about, not_asked()), ms(100));
    assert!(calls(&fx).is_empty(), "no model call");
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "{fx:#?}");
    assert_eq!(sent[0].1, Action::Key { key: "Escape".into() });
    assert!(notes(&fx)
        .iter()
        .any(|n| n.contains("the subgoal closes what is open") && n.ends_with("Escape")));
    // With nothing open, the same words leave the choice to the model.
    let (mut s, fx) = started_with(cfg, plan);
    let job = tactical_jobs(&fx)[0].clone();
    let perceived = Perception {
        tick: job.tick,
        started: ms(100),
        observation: menu(),
        moves: Vec::new(),
    };
    let fx = s.step(Input::Perceived(Box::new(perceived)), ms(100));
    assert!(submits(&fx).is_empty(), "{fx:#?}");
    assert_eq!(calls(&fx).len(), 1, "the model is asked: {fx:#?}");
}

/// The evidence for `action` at `t`, then the next tactical call the session starts (in that step, or on
/// a later reflex tick).
fn evidence_then_job(s: &mut Session, t: &mut u64, action: ActionId, changed: Option<bool>) -> TacticalJob {
    ended(s, action, ms(*t));
    let fx = s.step(Input::Evidence { action, changed }, ms(*t));
    match tactical_jobs(&fx).first() {
        Some(j) => (*j).clone(),
        None => next_job(s, t),
    }
}

/// Steps reflex ticks until the session starts a tactical call; its tick.
fn tactical_jobs_after(s: &mut Session, t: &mut u64) -> u64 {
    next_job(s, t).tick
}

/// Steps reflex ticks until the session starts a tactical call; its job.
fn next_job(s: &mut Session, t: &mut u64) -> TacticalJob {
    for _ in 0..50 {
        *t += 500;
        let fx = s.step(Input::Reflex(reflex(*t / 100)), ms(*t));
        if let Some(j) = tactical_jobs(&fx).first() {
            return (*j).clone();
        }
    }
    panic!(
        "no tactical call started; rung {:?}, stopped {:?}",
        s.loop_state().rung(),
        s.stopped()
    );
}

/// The model calls among `fx`.
fn calls(fx: &[Effect]) -> Vec<&crate::tactical::ModelCall> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::CallModel(c) => Some(c.as_ref()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_session_composes_the_tactical_prompt_and_schema_from_the_perception() {
    // FR-MODEL-003, FR-GND-003, FR-CTX-001: the prompt and this tick's schema are the session's, from the
    // perceived marks; the image's place is held at the visual budget's size, in the model's coordinates
    let mut cfg = config();
    cfg.limits.with_image = true;
    cfg.limits.visual_pixels = 448 * 252;
    cfg.coord_convention = gamepilot_core::CoordConvention::Normalized1000;
    cfg.grounding_paths = vec![GroundingPathAlias::Mark];
    let (mut s, fx) = started_with(cfg, two_step_plan());
    let job = tactical_jobs(&fx)[0].clone();
    let perceived = |obs: Observation| {
        Input::Perceived(Box::new(Perception {
            tick: job.tick,
            started: ms(100),
            observation: obs,
            moves: Vec::new(),
        }))
    };
    let fx = s.step(perceived(menu()), ms(100));
    let c = calls(&fx);
    assert_eq!(c.len(), 1, "{fx:?}");
    let call = c[0];
    assert_eq!(call.tick, job.tick);
    let image = call.image.expect("the model sees the frame");
    assert_eq!(image.picture, crate::tactical::Picture::Frame);
    assert_eq!(image.size, Size::new(448, 252));
    let crate::tactical::Reading::Act { space } = call.reading else {
        panic!("an acting call: {:?}", call.reading)
    };
    assert_eq!(space.image, Size::new(448, 252));
    let text = call.prompt.messages[1].joined_text();
    assert!(text.contains("Options"), "the marks are listed: {text}");
    let marks = call.schema.to_string();
    assert!(marks.contains('3'), "this tick's marks are the schema's: {marks}");
    // The same perception composes the same prompt, byte for byte (what a replay diffs).
    let (mut again, fx) = {
        let mut cfg = config();
        cfg.limits.with_image = true;
        cfg.limits.visual_pixels = 448 * 252;
        cfg.coord_convention = gamepilot_core::CoordConvention::Normalized1000;
        cfg.grounding_paths = vec![GroundingPathAlias::Mark];
        started_with(cfg, two_step_plan())
    };
    assert_eq!(tactical_jobs(&fx)[0].tick, job.tick);
    let fx2 = again.step(perceived(menu()), ms(100));
    assert_eq!(calls(&fx2)[0].prompt, call.prompt);
    // A reply to a tick not in flight is set aside, named.
    let fx = s.step(
        Input::Replied {
            tick: job.tick + 7,
            answer: click_mark(1).map(ModelAnswer::Act),
        },
        ms(150),
    );
    assert!(records(&fx)
        .iter()
        .any(|r| matches!(r, SessionRecord::Note { text } if text.contains("not the tick in flight"))));
}

#[test]
fn a_two_stage_tick_localises_perceives_the_region_then_acts_on_it_in_capture_space() {
    // FR-GND-005: localise over the downscaled frame, perceive the region, act on it; the reply's mark is
    // resolved against the region's capture-space marks and both calls' costs are counted
    let mut cfg = config();
    cfg.grounding_paths = vec![GroundingPathAlias::TwoStage];
    let (mut s, fx) = started_with(cfg, two_step_plan());
    let job = tactical_jobs(&fx)[0].clone();
    assert!(job.two_stage);
    let fx = s.step(
        Input::Perceived(Box::new(Perception {
            tick: job.tick,
            started: ms(100),
            observation: menu(),
            moves: Vec::new(),
        })),
        ms(100),
    );
    let localise = calls(&fx)[0].clone();
    assert!(matches!(
        localise.reading,
        crate::tactical::Reading::Localise { cheap } if cheap == Size::new(320, 180)
    ));
    assert!(localise.prompt.messages[1].joined_text().contains("Stage 1 of 2"));
    let figures = ModelReply {
        reply: TacticalReply::Note { text: String::new() },
        text: "{\"x\":160,\"y\":85}".into(),
        latency_ms: 50.0,
        tokens_in: 300,
        tokens_out: 8,
        cached_tokens: 0,
    };
    let fx = s.step(
        Input::Replied {
            tick: job.tick,
            answer: Ok(ModelAnswer::Localised {
                point: gamepilot_core::Point::new(160, 85),
                figures,
            }),
        },
        ms(200),
    );
    let crop = fx
        .iter()
        .find_map(|e| match e {
            Effect::PerceiveCrop(c) => Some(c.clone()),
            _ => None,
        })
        .expect("the region is asked for");
    assert_eq!(crop.point, gamepilot_core::Point::new(160, 85));
    assert!(calls(&fx).is_empty(), "no call before the region is perceived");
    // The region: the Options button at capture (560, 380), shown magnified 2x with its own mark 1.
    let region = Rect::new(480, 300, 320, 180);
    let mut in_capture = menu();
    in_capture.elements.retain(|e| e.id == ElementId(2));
    in_capture.elements[0].id = ElementId(1);
    let mut in_crop = in_capture.clone();
    in_crop.frame_size = Size::new(640, 360);
    in_crop.elements[0].bbox = Rect::new(160, 160, 320, 96);
    let fx = s.step(
        Input::CropPerceived(Box::new(crate::tactical::CropPerception {
            tick: job.tick,
            crop: gamepilot_grounding::Crop {
                region,
                cheap_point: gamepilot_core::Point::new(640, 340),
            },
            size: Size::new(640, 360),
            in_crop,
            in_capture,
        })),
        ms(300),
    );
    let act = calls(&fx)[0].clone();
    assert!(matches!(act.reading, crate::tactical::Reading::ActInCrop { .. }));
    assert!(act.prompt.messages[1].joined_text().contains("Stage 2 of 2"));
    let fx = s.step(
        Input::Replied {
            tick: job.tick,
            answer: click_mark(1).map(ModelAnswer::Act),
        },
        ms(400),
    );
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert!(
        matches!(sent[0].1, Action::Click { x, y, .. } if (560..720).contains(&x) && (380..428).contains(&y)),
        "the region's mark 1 is the Options button in capture space: {:?}",
        sent[0].1
    );
    assert_eq!(s.numbers().calls.tactical_latency_ms.last().copied(), Some(150.0));
}

#[test]
fn a_frame_that_could_not_be_perceived_ends_its_tick_and_the_next_one_starts() {
    // FR-PERC-009: a capture or OCR failure is the tick's named failure, never a stuck loop
    let (mut s, adopted) = planned();
    let tick = tactical_jobs(&adopted)[0].tick;
    let fx = s.step(
        Input::Replied {
            tick,
            answer: Err(TacticalFailure {
                kind: FailureKind::Perception,
                message: "capture failed: the window is busy".into(),
                latency_ms: 0.0,
            }),
        },
        ms(300),
    );
    assert_eq!(s.numbers().calls.tactical_failures, 1);
    assert_eq!(tactical_jobs(&fx).len(), 1, "the next tick starts: {fx:?}");
}

fn deliberations(effects: &[Effect]) -> Vec<&DeliberationJob> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::StartDeliberation(j) => Some(j),
            _ => None,
        })
        .collect()
}

#[test]
fn while_the_first_plan_is_made_the_goal_is_acted_on_and_the_plan_is_made_from_the_first_screen() {
    // FR-LOOP-002/003: nothing waits for the deliberative pass; a goal naming its first step is grounded
    // without a model call (FR-GND-001), and the start pass is composed from the first screen.
    let cfg = with_behaviours(Behaviours {
        act_while_planning: true,
        ..config().behaviours
    });
    let mut s = reported(Session::new(cfg, MonoTime::ZERO).unwrap());
    let fx = s.step(Input::Start, ms(0));
    assert!(
        deliberations(&fx).is_empty(),
        "the start pass waits for the first screen: {fx:?}"
    );
    assert!(
        notes(&fx).contains(&"acting on the goal itself while pass 1 plans"),
        "{fx:?}"
    );
    let job = tactical_jobs(&fx)[0].clone();
    assert_eq!(
        job.aim.name.as_deref(),
        Some("play"),
        "the goal names its first step"
    );
    let fx = s.answer(outcome(job.tick, menu(), not_asked()), ms(400));
    let passes = deliberations(&fx);
    assert_eq!(passes.len(), 1, "{fx:?}");
    assert_eq!(passes[0].pass, 1);
    let prompt = passes[0].prompt.render();
    assert!(
        prompt.contains("\"Options\""),
        "planned from the first screen: {prompt}"
    );
    assert!(!prompt.contains("nothing observed yet"), "{prompt}");
    let sent = submits(&fx);
    assert_eq!(sent.len(), 1, "Play clicked with no model call: {fx:?}");
    let play = menu().elements[0].bbox.center();
    assert!(matches!(sent[0].1, Action::Click { x, y, .. } if (x, y) == (play.x, play.y)));
    // The first frame is the screen the start pass sees: no second pass for it.
    let fx = s.step(
        Input::Reflex(ReflexReport {
            change: FrameChange::Scene,
            ..reflex(1)
        }),
        ms(450),
    );
    assert!(deliberations(&fx).is_empty(), "{fx:?}");
    // The pass's plan replaces the goal-as-subgoal.
    let fx = s.step(
        Input::Plan(PlanOutcome {
            reply: None,
            first_id: 0,
            research: None,
            pass: 1,
            plan: Ok(two_step_plan()),
            latency_ms: 1.0,
        }),
        ms(3_000),
    );
    assert!(
        records(&fx)
            .iter()
            .any(|r| matches!(r, SessionRecord::LoopStep { commands, .. }
                if commands.iter().any(|c| matches!(c, gamepilot_planner::Command::PlanAdopted { .. })))),
        "{fx:?}"
    );
    assert_eq!(s.loop_state().active_subgoal(), Some(SubgoalId(1)));
}

/// The tests' configuration with self-identification on (w, s, a, d).
fn steering_config() -> SessionConfig {
    SessionConfig {
        steering: crate::selfid::SteeringConfig::from_keys(&["w".into(), "s".into(), "a".into(), "d".into()]),
        ..config()
    }
}

/// A small unlabelled element of a play field.
fn sprite(id: u32, x: i32, y: i32, looks: &str) -> Element {
    Element {
        id: ElementId(id),
        bbox: Rect::new(x, y, 24, 24),
        confidence: 0.3,
        source: ElementSource::Component,
        label: None,
        looks: Some(looks.into()),
        layer: None,
        selected: false,
    }
}

#[test]
fn a_play_field_that_starts_the_probe_is_not_shown_to_the_model() {
    // A model call whose answer the probe would set aside is not made (the new screen's first action is
    // the probe's first hold).
    let cfg = steering_config();
    let (mut s, fx) = started_with(cfg, two_step_plan());
    let job = tactical_jobs(&fx)[0].clone();
    let field = Observation {
        at: MonoTime::ZERO,
        frame_size: Size::new(1280, 720),
        class: FrameChange::Scene,
        texts: Vec::new(),
        elements: vec![
            sprite(1, 628, 348, "white square"),
            sprite(2, 100, 400, "yellow round"),
            sprite(3, 580, 520, "yellow round"),
            sprite(4, 190, 540, "red square"),
        ],
    };
    let perception = Perception {
        tick: job.tick,
        started: MonoTime::ZERO,
        observation: field,
        moves: Vec::new(),
    };
    let fx = s.step(Input::Perceived(Box::new(perception)), ms(100));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::CallModel(_))),
        "no model call on the probe's screen: {fx:?}"
    );
    let sent = submits(&fx);
    assert!(
        matches!(&sent[..], [(_, Action::HoldKey { key, .. }, _)] if key == "w"),
        "the probe's first hold instead: {sent:?}"
    );
}

#[test]
fn a_probe_holds_frame_is_read_without_text_and_the_screen_as_last_read_stays() {
    // A probe hold's tick only measures how the boxes moved: its text is not read (full-frame OCR was most
    // of each hold's 1.3 s), and its text-free observation is no new screen for the planner or the model.
    let cfg = steering_config();
    let (mut s, fx) = started_with(cfg, two_step_plan());
    let first = tactical_jobs(&fx)[0].clone();
    assert!(first.read_text, "the play field's first tick reads its text");
    let field = |shift: i32| Observation {
        elements: vec![
            sprite(1, 628, 348, "white square"),
            sprite(2, 100 + shift, 400, "yellow round"),
            sprite(3, 580 + shift, 520, "yellow round"),
            sprite(4, 190 + shift, 540, "red square"),
        ],
        ..play_view()
    };
    let fx = s.answer(outcome(first.tick, field(0), not_asked()), ms(100));
    let hold = |fx: &[Effect]| match &submits(fx)[..] {
        [(id, Action::HoldKey { key, .. }, _)] => (*id, key.clone()),
        other => panic!("one probe hold: {other:?}"),
    };
    let (w, key) = hold(&fx);
    assert_eq!(key, "w");
    let mut t = 100;
    let probe_tick = evidence_then_job(&mut s, &mut t, w, Some(true));
    assert!(
        probe_tick.perceive_only && !probe_tick.read_text,
        "{probe_tick:?}"
    );
    let mut unread = field(-12);
    unread.texts.clear();
    let perception = Perception {
        tick: probe_tick.tick,
        started: ms(t),
        observation: unread,
        moves: world_moved(0.0, 12.0),
    };
    let fx = s.step(Input::Perceived(Box::new(perception)), ms(t));
    let (mut held, key) = hold(&fx);
    assert_eq!(key, "s", "the probe goes on");
    assert!(
        !records(&fx).iter().any(|r| matches!(
            r,
            SessionRecord::LoopStep {
                event: gamepilot_planner::Event::Observation { .. },
                ..
            }
        )),
        "the planner hears of no new screen: {fx:?}"
    );
    // The other three holds, each frame read without text: the world moved against each key.
    let mut after = None;
    for (next, (dx, dy)) in [
        (Some("a"), (0.0, -12.0)),
        (Some("d"), (12.0, 0.0)),
        (None, (-12.0, 0.0)),
    ] {
        let tick = evidence_then_job(&mut s, &mut t, held, Some(true));
        assert!(tick.perceive_only && !tick.read_text, "{tick:?}");
        let mut unread = field(0);
        unread.texts.clear();
        let perception = Perception {
            tick: tick.tick,
            started: ms(t),
            observation: unread,
            moves: world_moved(dx, dy),
        };
        let fx = s.step(Input::Perceived(Box::new(perception)), ms(t));
        match next {
            Some(k) => {
                let (id, key) = hold(&fx);
                assert_eq!(key, k);
                held = id;
            }
            None => {
                assert!(
                    submits(&fx).is_empty(),
                    "nothing acted on from a frame not read: {fx:?}"
                );
                after = tactical_jobs(&fx).first().map(|j| (*j).clone());
            }
        }
    }
    assert!(
        s.context()
            .notes()
            .notes()
            .iter()
            .any(|n| n.starts_with("I am the white square")),
        "identified on frames read without text: {:?}",
        s.context().notes().notes()
    );
    let after = after.unwrap_or_else(|| next_job(&mut s, &mut t));
    assert!(
        after.read_text && !after.perceive_only,
        "the play field read in full next: {after:?}"
    );
}

/// How the four sprites of a probe test's play field moved: the avatar (first) stayed, the world moved by
/// (dx, dy).
fn world_moved(dx: f64, dy: f64) -> Vec<Option<(f64, f64)>> {
    vec![Some((0.0, 0.0)), Some((dx, dy)), Some((dx, dy)), Some((dx, dy))]
}

#[test]
fn the_tactical_host_is_warmed_with_what_the_first_call_will_begin_with() {
    // FR-CTX-002: blocks 1-6 as they stand; only the invariant blocks 1-2 when self-identification's note
    // will change block 3 before the first call on a play field
    let warmed = |steering: Option<crate::selfid::SteeringConfig>| {
        let cfg = SessionConfig {
            steering,
            behaviours: Behaviours {
                act_while_planning: true,
                ..config().behaviours
            },
            ..config()
        };
        let mut s = reported(Session::new(cfg, MonoTime::ZERO).unwrap());
        let fx = s.step(Input::Start, ms(0));
        fx.iter()
            .find_map(|e| match e {
                Effect::WarmUp(p) => Some(p.block_order()),
                _ => None,
            })
            .expect("the tactical host is warmed while the first plan is made")
    };
    use gamepilot_context::Block;
    let plain = warmed(None);
    assert!(
        plain.contains(&Block::Notes) && plain.contains(&Block::Plan),
        "{plain:?}"
    );
    assert_eq!(
        warmed(crate::selfid::SteeringConfig::from_keys(&[
            "w".into(),
            "s".into(),
            "a".into(),
            "d".into()
        ])),
        vec![Block::System, Block::Goal]
    );
}

#[path = "tests_declare.rs"]
mod declare;

/// The view a menu's first button opened: a score and a coin counter.
fn play_view() -> Observation {
    let text = |s: &str, x: i32| TextItem {
        text: s.into(),
        bbox: Rect::new(x, 20, 120, 28),
        confidence: 0.9,
    };
    Observation {
        at: MonoTime::ZERO,
        frame_size: Size::new(1280, 720),
        class: FrameChange::Scene,
        texts: vec![text("Score 0", 20), text("Coins 0", 300), text("Lives 3", 600)],
        elements: Vec::new(),
    }
}

#[test]
fn an_unsure_model_is_answered_by_a_survey_that_tries_notes_goes_back_and_tries_the_next() {
    // FR-LOOP-002 (exploration like a person), FR-CTX-004 (what a try opened is noted): the model answers
    // `unsure`; the session clicks the first element without a model call, notes the view it opened, lets
    // the model look; unsure there too, it presses Escape, and back on the menu tries the next element.
    let cfg = SessionConfig {
        goal: "change how the game looks".into(),
        ..config()
    };
    let (mut s, adopted) = started_with(cfg, two_step_plan());
    let job = tactical_jobs(&adopted)[0].clone();
    assert!(
        job.tools.contains(&gamepilot_context::Tool::Unsure),
        "offered beside marks"
    );
    let mut t = 300;
    let fx = s.answer(outcome(job.tick, menu(), reply(TacticalReply::Unsure)), ms(t));
    assert!(submits(&fx).is_empty());
    assert!(
        notes(&fx)
            .iter()
            .any(|n| n.starts_with("the model is unsure: exploring from the menu showing")),
        "{fx:#?}"
    );
    // The next tick only perceives: the survey's first try, in reading order (nothing is named).
    // The tick that follows `fx`: started by it, or by the next reflex report.
    let next_tick = |s: &mut Session, t: &mut u64, fx: &[Effect]| {
        if let Some(j) = tactical_jobs(fx).first() {
            return (*j).clone();
        }
        *t += 2000;
        let fx = s.step(Input::Reflex(reflex(*t)), ms(*t));
        tactical_jobs(&fx)
            .first()
            .map(|j| (*j).clone())
            .unwrap_or_else(|| panic!("the next tick at {t}: {fx:#?}"))
    };
    let job = next_tick(&mut s, &mut t, &fx);
    assert!(job.perceive_only, "no model call: the session explores");
    let fx = s.answer(outcome(job.tick, menu(), not_asked()), ms(t));
    let clicks = submits(&fx);
    assert!(
        matches!(clicks[..], [(_, Action::Click { x: 640, y: 324, .. }, _)]),
        "Play: {clicks:?}"
    );
    assert!(notes(&fx)
        .iter()
        .any(|n| n.starts_with("exploring (unsure): 'Play' (mark 1, try 1 of at most 4)")));
    let tried = clicks[0].0;
    ended(&mut s, tried, ms(t + 50));
    let fx = s.step(
        Input::Evidence {
            action: tried,
            changed: Some(true),
        },
        ms(t + 100),
    );
    // What it opened is noted, and the model looks at it.
    let job = next_tick(&mut s, &mut t, &fx);
    assert!(job.perceive_only);
    let fx = s.answer(outcome(job.tick, play_view(), not_asked()), ms(t));
    assert!(submits(&fx).is_empty());
    assert!(
        notes(&fx)
            .iter()
            .any(|n| n.starts_with("exploring: 'play' opens another view showing 'coins 0'")),
        "{fx:#?}"
    );
    let job = next_tick(&mut s, &mut t, &fx);
    assert!(!job.perceive_only, "the model looks at what opened");
    let prompt = s
        .context()
        .assemble(Cadence::Tactical, &ObservationText::new(ms(t), ""), None)
        .render();
    assert!(prompt.contains("'play' opens another view showing"), "{prompt}");
    // Unsure there too: Escape, verified by the menu showing again, then the next element.
    let fx = s.answer(
        outcome(job.tick, play_view(), reply(TacticalReply::Unsure)),
        ms(t),
    );
    assert!(notes(&fx).iter().any(|n| n.contains("going back")), "{fx:#?}");
    let job = next_tick(&mut s, &mut t, &fx);
    let fx = s.answer(outcome(job.tick, play_view(), not_asked()), ms(t));
    let back = submits(&fx);
    assert!(
        matches!(&back[..], [(_, Action::Key { key }, _)] if key == "Escape"),
        "{back:?}"
    );
    ended(&mut s, back[0].0, ms(t + 50));
    let fx = s.step(
        Input::Evidence {
            action: back[0].0,
            changed: Some(true),
        },
        ms(t + 100),
    );
    let job = next_tick(&mut s, &mut t, &fx);
    let fx = s.answer(outcome(job.tick, menu(), not_asked()), ms(t));
    assert!(
        matches!(submits(&fx)[..], [(_, Action::Click { x: 640, y: 404, .. }, _)]),
        "Options next: {fx:#?}"
    );
    assert_eq!(
        s.numbers().calls.tactical_calls,
        2,
        "two model calls, both unsure"
    );
}
