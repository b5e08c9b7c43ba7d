//! From a choice to an action in the session: grounding a reply (a mark, a point, a walk), the gates that
//! hold an action back (a stale window, the user, the game behind, a destructive dialogue), and proposal to
//! the loop.

use super::*;

impl Session {
    /// What follows grounding, for a model's reply and a retry alike: a stale pointer action is dropped, a
    /// paused session acts on nothing, a destructive dialogue holds the action for the user, and otherwise
    /// it is proposed.
    pub(super) fn act_on(
        &mut self,
        mut grounded: GroundedAction,
        observation: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        // A step back to the safe screen is not evidence that the screen it left is a safe one.
        if !self.ladder.safe.returning() {
            grounded.screen = ScreenPrint::of(observation, scene_kind(observation));
        }
        if let Action::Click { x, y, .. } = grounded.intention.action {
            grounded.in_menu = observation.elements.iter().any(|e| {
                e.layer == Some(gamepilot_core::WindowLayer::Popup) && e.bbox.contains(Point::new(x, y))
            });
        }
        // FR-PERC-002: a pointer action grounded before the window moved is stale.
        if is_pointer(&grounded.intention.action) && generation < self.seen.generation {
            let reason = RejectReason::StaleGeneration {
                grounded: generation,
                current: self.seen.generation,
            }
            .to_string();
            self.numbers.actions.rejected += 1;
            self.context.record(HistoryEntry::new(
                now,
                grounded.label,
                format!("not executed: {reason}"),
            ));
            return;
        }
        // FR-SAFE-002: a reply that comes back while the user has the game is not acted on.
        if let Some(why) = self.gates.waiting() {
            self.context.record(HistoryEntry::new(
                now,
                grounded.label,
                format!("not executed: {why}"),
            ));
            return;
        }
        if let Some(near) = destructive::answer_scope(&grounded.intention.action) {
            // FR-SAFE-005: the dialogue check reads the frame the choice was made on; a choice made before
            // the screen changed is made again on what the screen shows now.
            if let Some(seen) = self.seen.at.filter(|_| self.cfg.behaviours.fresh_frames) {
                if let crate::fresh::Judgement::Stale(why) = self.seen.freshness.judge(seen) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!(
                            "{} not sent yet, chosen on an old frame ({why}): checked again on a fresh one",
                            grounded.label
                        ),
                    }));
                    self.tactical.recheck = Some(grounded);
                    return;
                }
            }
            if let Some(found) = destructive::check(&observation.texts, near, DESTRUCTIVE_RADIUS_PX) {
                let hold = self.run.next_hold;
                self.run.next_hold += 1;
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: Safeguard::DestructiveAction,
                    detail: format!(
                        "held: {} near {:?} ({})",
                        grounded.label, found.text, found.pattern
                    ),
                }));
                out.push(Effect::Reflex(ReflexCommand::Pause { paused: true }));
                out.push(Effect::AskConfirmation(ConfirmationJob {
                    hold,
                    label: grounded.label.clone(),
                    pattern: found.pattern.clone(),
                    text: found.text.clone(),
                }));
                self.gates.held = Some(HeldAction {
                    hold,
                    grounded,
                    found,
                });
                return;
            }
        }
        self.propose(grounded, now, out);
    }

    /// The subgoal named an element and the tactical thread found exactly one labelled so: click its mark
    /// with no model call, labelled as the session's own grounding.
    pub(super) fn ground_direct(
        &mut self,
        aim: &crate::direct::DirectAim,
        excluded: &[ElementId],
        obs: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some((mark, name)) = aim.target(obs, excluded) else {
            return;
        };
        let step = self
            .state
            .status()
            .subgoal_description
            .unwrap_or_else(|| self.step_focus().to_string());
        self.tactical
            .clicked(crate::direct::step_key(&step), name.clone());
        let reply = TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        };
        if let Some(grounded) = self.ground(&reply, obs, false, generation, now) {
            self.numbers.actions.direct_groundings += 1;
            out.push(Effect::Record(SessionRecord::Note {
                text: if aim.name.as_deref() == Some(name.as_str()) {
                    format!("grounded without a model call: the subgoal names '{name}', the one element so labelled is mark {mark}")
                } else {
                    format!("grounded without a model call: the subgoal's words hold the whole label '{name}' of mark {mark}")
                },
            }));
            self.act_on(grounded, obs, generation, now, out);
        }
    }

    /// A probe hold of self-identification: a session action like any other (budgets, rate, denied keys,
    /// verification by view change), labelled as the session's own.
    pub(super) fn propose_probe(
        &mut self,
        key: String,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let probe_ms = self.avatar.selfid.config().map(|c| c.probe_ms).unwrap_or(300);
        let action = Action::HoldKey {
            key: key.clone(),
            duration_ms: Some(probe_ms),
        };
        let expected = expectation(&action, None);
        let label = format!("{PROBE_LABEL} hold {key} {probe_ms} ms");
        let grounded = GroundedAction::new(action, None, None, expected, label, generation);
        self.avatar.probe_running = Some(ActionId(self.run.next_action));
        self.propose(grounded, now, out);
    }

    /// `move_to`: the reflex steers the avatar to the marked element with the keys
    /// self-identification learned; the evidence is the avatar's box reaching the target's.
    pub(super) fn ground_move_to(
        &mut self,
        mark: ElementId,
        marks: &Observation,
        generation: u64,
        now: MonoTime,
    ) -> Option<GroundedAction> {
        let label = format!("move_to {mark}");
        let refuse = |ctx: &mut Context, why: &str| {
            ctx.record(HistoryEntry::new(now, label.clone(), why.to_string()));
            None
        };
        let (Some(model), Some(max_ms)) = (
            self.avatar.selfid.avatar().cloned(),
            self.avatar.selfid.config().map(|c| c.max_steer_ms),
        ) else {
            return refuse(&mut self.context, "not executed: the avatar is not identified");
        };
        let Some(el) = marks.element(mark) else {
            return refuse(&mut self.context, "mark not present");
        };
        let avatar = model.locate(&crate::selfid::seen(marks)).unwrap_or(model.bbox);
        if avatar.contains(el.bbox.center()) || el.bbox.contains(avatar.center()) {
            return refuse(&mut self.context, "not executed: that mark is the avatar itself");
        }
        let plan = gamepilot_grounding::SteerPlan::new(&model, avatar, el.bbox, max_ms);
        let action = Action::Steer {
            up: plan.keys.up.clone(),
            down: plan.keys.down.clone(),
            left: plan.keys.left.clone(),
            right: plan.keys.right.clone(),
            duration_ms: plan.bound_ms,
        };
        let expected = ExpectedChange::Postcondition {
            source: format!("the avatar reaches mark {mark}"),
        };
        Some(GroundedAction {
            settle_ms: Some(plan.bound_ms + 1_000),
            steer: Some(plan),
            ..GroundedAction::new(
                action,
                Some(Target::Mark { element: mark }),
                Some(GroundingPath::Mark),
                (expected, None),
                label,
                generation,
            )
        })
    }

    pub(super) fn record_call(&mut self, reply: &ModelReply) {
        self.numbers.calls.tactical_calls += 1;
        self.numbers.calls.tactical_latency_ms.push(reply.latency_ms);
        self.numbers.calls.prompt_tokens += reply.tokens_in;
        self.numbers.calls.cached_prompt_tokens += reply.cached_tokens;
    }

    /// Grounding: a mark becomes its box centre in capture space (FR-GND-001); coordinates stay as given
    /// (FR-GND-002); a note goes to the note block. `None`: nothing to execute.
    pub(super) fn ground(
        &mut self,
        reply: &TacticalReply,
        marks: &Observation,
        two_stage: bool,
        generation: u64,
        now: MonoTime,
    ) -> Option<GroundedAction> {
        let (action, mark, path, target) = match reply {
            // Exploration answers it before grounding (`on_unsure`); grounded, it executes nothing.
            TacticalReply::Unsure => return None,
            TacticalReply::Note { text } => {
                let outcome = match self.context.note(text, now) {
                    Ok(o) => format!("{o:?}"),
                    Err(e) => format!("refused: {e}"),
                };
                self.context
                    .record(HistoryEntry::new(now, format!("note: {text}"), outcome));
                return None;
            }
            TacticalReply::ClickMark { mark, button } => {
                let Some(el) = marks.element(*mark) else {
                    self.context.record(HistoryEntry::new(
                        now,
                        format!("click_mark {mark}"),
                        "mark not present",
                    ));
                    return None;
                };
                let c = el.bbox.center();
                (
                    Action::Click {
                        x: c.x,
                        y: c.y,
                        button: *button,
                    },
                    Some((*mark, el.bbox)),
                    Some(if two_stage {
                        GroundingPath::TwoStage
                    } else {
                        GroundingPath::Mark
                    }),
                    Some(Target::Mark { element: *mark }),
                )
            }
            TacticalReply::MoveTo { mark } => return self.ground_move_to(*mark, marks, generation, now),
            TacticalReply::Act(a) => {
                let target = match a {
                    Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. } => Some(Target::Point {
                        point: Point::new(*x, *y),
                    }),
                    _ => None,
                };
                let path = target.map(|_| {
                    if two_stage {
                        GroundingPath::TwoStage
                    } else {
                        GroundingPath::Coordinate
                    }
                });
                // A key that moves a list's cursor is expected to move it off the item drawn as chosen:
                // that item's pixels change (FR-GND-006), where a whole-view change would also take a
                // blinking caret or an animation for the cursor's move.
                (a.clone(), cursor_item(a, marks), path, target)
            }
        };
        let label = action_label(&action, mark.map(|(id, _)| id), marks);
        let expected = expectation(&action, mark);
        Some(GroundedAction::new(
            action, target, path, expected, label, generation,
        ))
    }

    /// Propose a grounded action to the loop logic, which executes or rejects it.
    pub(super) fn propose(&mut self, grounded: GroundedAction, now: MonoTime, out: &mut Vec<Effect>) {
        // An action chosen on what a survey's try opened (the model's, or the session's own grounding of
        // a named element) ends the survey: it found the way on.
        // Waiting is no choice: the model may wait for what a try opened to finish drawing.
        let chose = !grounded.label.starts_with(SURVEY_LABEL)
            && !matches!(grounded.intention.action, Action::Wait { .. });
        if chose {
            if let Some(note) = self.explore.survey.chosen() {
                out.push(Effect::Record(SessionRecord::Note { text: note }));
            }
        }
        let id = ActionId(self.run.next_action);
        self.run.next_action += 1;
        let event = Event::ActionProposed {
            action: id,
            key: grounded.label.clone(),
            target: grounded.target,
            path: grounded.path,
            expected: grounded.expected.clone(),
            settle_ms: Some(grounded.settle_ms.unwrap_or(self.cfg.loop_cfg.settle_ms)),
        };
        self.actions.propose(id, grounded);
        self.feed(event, now, out);
    }
}

/// The expected change of an action and the pixels to watch for it (FR-GND-006).
pub(super) fn expectation(
    action: &Action,
    mark: Option<(ElementId, Rect)>,
) -> (ExpectedChange, Option<Rect>) {
    let view_change = ExpectedChange::SensorDelta {
        sensor: "view_change".into(),
        direction: ChangeDirection::Increase,
        min_delta: 0.5,
    };
    match (mark, action) {
        (Some((id, bbox)), _) => (ExpectedChange::ElementChanged { element: id }, Some(bbox)),
        (None, Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. }) => {
            (view_change, Some(Rect::new(x - 40, y - 40, 80, 80)))
        }
        _ => (view_change, None),
    }
}

/// The one item of the observation drawn as chosen, when `action` is a key that moves a list's cursor.
pub(super) fn cursor_item(action: &Action, obs: &Observation) -> Option<(ElementId, Rect)> {
    const NAVIGATION: [&str; 6] = ["Up", "Down", "Left", "Right", "Tab", "shift+Tab"];
    let Action::Key { key } = action else {
        return None;
    };
    if !NAVIGATION.iter().any(|k| k.eq_ignore_ascii_case(key)) {
        return None;
    }
    let mut chosen = obs.elements.iter().filter(|e| e.selected);
    let first = chosen.next()?;
    // One item, perhaps read as several words: their boxes together.
    let mut bbox = first.bbox;
    for e in chosen {
        if (e.bbox.center().y - first.bbox.center().y).abs() * 2 > first.bbox.h as i32 {
            return None;
        }
        bbox = bbox.union(&e.bbox);
    }
    Some((first.id, bbox))
}

pub(super) fn is_pointer(action: &Action) -> bool {
    matches!(
        action,
        Action::Click { .. } | Action::DoubleClick { .. } | Action::MovePointer { .. }
    )
}
