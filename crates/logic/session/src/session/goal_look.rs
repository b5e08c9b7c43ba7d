//! The agent's own goal check in the session: read as the goal's steps, judged when it reads true, confirmed
//! by a second look on a frame perceived after, and the next step's check asked for.

use super::*;

impl Session {
    /// The goal's value the loop logic may stop on. A user's check is taken as it reads; an agent's only
    /// once it was seen false after its declaration (one already true is refused and a new one asked
    /// for) and an action of this session came after that; with no check accepted yet, none.
    pub(super) fn judge_agent_goal(
        &mut self,
        reads: Option<bool>,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> Option<bool> {
        if self.goal.declarations.is_none() {
            return reads;
        }
        let g = self.goal.agent_goal.as_mut()?;
        // A second look agreed the goal was done on a frame after the check read true: the next report
        // ends it, whatever the check reads (sgt-pegs' "Type gone" read false again once the menu that
        // chose the Octagon board had closed, and the run went on clicking pegs until its time was spent;
        // on a board that changed size the template reads undefined).
        if let Some(why) = g.confirmed.clone() {
            if self.goal.step + 1 < self.goal.steps.len() {
                self.next_goal_step(&why, now, out);
                return Some(false);
            }
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "goal met: agent-declared check `{}` (pass {}) turned true after an action of this session, confirmed by a second look ({why})",
                    g.source, g.pass
                ),
            }));
            return Some(true);
        }
        match reads {
            Some(false) => {
                g.seen_false = true;
                Some(false)
            }
            Some(true) if !g.seen_false => {
                let (source, pass) = (g.source.clone(), g.pass);
                self.goal.agent_goal = None;
                out.push(Effect::Record(SessionRecord::Failure {
                    action: None,
                    cause: FailureCause::Plan,
                    evidence: format!(
                        "goal check `{source}` of pass {pass} refused: already true when declared"
                    ),
                }));
                self.context.record(HistoryEntry::new(
                    now,
                    format!("goal check `{source}`"),
                    "refused: it is already true; declare one that is false now and true once the goal is done",
                ));
                self.hand_sensors(false, out);
                // Asked again at once, on this screen: the plan may go on meanwhile.
                self.ask_step_check(now, out);
                None
            }
            Some(true) if self.state.actions_executed() > g.actions_before => {
                let actions = self.state.actions_executed();
                if self.goal.look.is_none() && self.goal.look_wanted.is_none() && g.looked_at != Some(actions)
                {
                    g.looked_at = Some(actions);
                    // The look reads a frame perceived after this reading, not the one the action was
                    // chosen on (the demo's look was shown the menu its click had just left).
                    self.goal.look_wanted = Some(now);
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!(
                            "the goal check `{}` reads true: a second look is asked on the next frame",
                            g.source
                        ),
                    }));
                }
                Some(false)
            }
            // True, but not by anything this session did since the check was declared.
            Some(true) => Some(false),
            None => None,
        }
    }

    /// The step of the goal the agent's check is for, as the model reads it ("the goal", or "step 2 of
    /// 2 of the goal, \"collect a coin\"").
    pub(super) fn step_words(&self) -> String {
        match self.goal.steps.get(self.goal.step) {
            Some(step) if self.goal.steps.len() > 1 => format!(
                "step {} of {} of the goal, {step:?}",
                self.goal.step + 1,
                self.goal.steps.len()
            ),
            _ => "the goal".into(),
        }
    }

    /// A plan must carry the goal's check: none accepted yet for the goal's first step. A later step's
    /// check is asked for by its own question; a plan may still give it, but is not refused without it
    /// (a planner refused for it meanwhile spent the deliberative host's time twice).
    pub(super) fn plan_owes_goal_check(&self) -> bool {
        self.goal.agent_goal.is_none() && self.goal.step == 0 && self.goal.step_check.is_none()
    }

    /// What the goal acted on meanwhile says: the current step's words when the agent checks the goal step
    /// by step (once the game has started, "click Play" is not the step), the goal's otherwise.
    pub(super) fn goal_plan_words(&self) -> &str {
        match self.goal.declarations {
            Some(_) => self.step_focus(),
            None => self.cfg.goal.as_str(),
        }
    }

    /// The words of the step whose check is wanted (the whole goal when it is one step).
    pub(super) fn step_focus(&self) -> &str {
        self.goal
            .steps
            .get(self.goal.step)
            .map_or(self.cfg.goal.as_str(), String::as_str)
    }

    /// A frame perceived at `seen` (after the goal check read true) releases the second look it waits for
    /// — unless that frame shows the goal unfinished: an element the goal's words name and no action of
    /// this session clicked yet ("Start Game" after "New Game" opened a game's setup menu; the board size
    /// in the menu "Type" opened), whose aim is returned to be clicked first, or one of the game's menus
    /// still open (a menu is a way to a goal, never its end). A small model's check that a clicked item
    /// is gone reads true on both; its second look agreed every time we measured.
    pub(super) fn release_goal_look(
        &mut self,
        seen: MonoTime,
        obs: &Observation,
        out: &mut Vec<Effect>,
        now: MonoTime,
    ) -> Option<crate::direct::DirectAim> {
        let since = self.goal.look_wanted?;
        if seen < since || self.goal.look.is_some() {
            return None;
        }
        self.goal.look_wanted = None;
        let source = self.goal.agent_goal.as_ref().map(|g| g.source.clone())?;
        let aim = crate::direct::DirectAim {
            name: None,
            words: crate::direct::clickable_words(self.step_focus()),
            clicked: self.tactical.clicked_at_all(),
        };
        if let Some((mark, label)) = aim.target(obs, &self.tactical.excluded) {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true, but the screen still offers '{label}' (mark {mark}), which the goal's words name: not done yet, clicked first"
                ),
            }));
            return Some(aim);
        }
        if obs
            .elements
            .iter()
            .any(|e| e.layer == Some(gamepilot_core::WindowLayer::Popup))
        {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true with one of the game's menus open: not done yet (asked again after the next action)"
                ),
            }));
            return None;
        }
        // A dialog open is a way to the goal too (sgt-fifteen's Custom dialog, still to fill, was judged
        // "met" by the look), unless opening it is what the step asks ("Open the About box").
        if obs
            .elements
            .iter()
            .any(|e| e.layer == Some(gamepilot_core::WindowLayer::Dialog))
            && !crate::direct::asks_to_open(self.step_focus())
        {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true with one of the game's dialogs open: not done yet (asked again after the next action)"
                ),
            }));
            return None;
        }
        // A goal that names a menu ("from the Type menu") is a choice in it: a check that reads true
        // before any click landed in one of the game's menus read something else (sgt-fifteen's "Type"
        // label redrawn under the pointer read as gone, and the look agreed, with no board chosen).
        if let Some(menu) =
            crate::direct::named_menu(self.step_focus()).filter(|_| !self.tactical.chosen_in_menu)
        {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true, but the goal names the {menu} menu and nothing was chosen in one of the game's menus yet: not done"
                ),
            }));
            return None;
        }
        self.start_goal_look(&source, now, out);
        None
    }

    /// Ask one more deliberative look at the current observation (and picture, where the host sees
    /// images) whether the goal (or its current step) is done, now that the agent's own check reads true.
    pub(super) fn start_goal_look(&mut self, source: &str, now: MonoTime, out: &mut Vec<Effect>) {
        self.run.goal_looks += 1;
        let pass = GOAL_LOOK_PASS + self.run.goal_looks;
        self.goal.look = Some(pass);
        let step = self.step_words();
        let question = format!(
            "Question: the check `{source}` you declared for {step} now reads true. Look at the current observation: is {step} done? Say what on the screen shows it, then met true or false."
        );
        let (prompt, image) = self.deliberative_prompt(&question, now);
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("the goal check `{source}` reads true: a second look asked (pass {pass})"),
        }));
        out.push(Effect::StartDeliberation(DeliberationJob {
            pass,
            trigger: Trigger::SubgoalCompleted,
            prompt,
            schema: crate::plan::goal_look_schema(),
            image,
            // A look plans nothing: no subgoal id is spent on it.
            first_id: self.run.next_subgoal,
        }));
    }

    /// The second look's answer: agreed, the goal check may end the session on its next true reading;
    /// not agreed (or no answer), the session goes on and asks again after its next action.
    pub(super) fn on_goal_look(&mut self, p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        self.goal.look = None;
        self.judge_look(p, now, out);
        self.release_deferred_pass(now, out);
    }

    pub(super) fn judge_look(&mut self, p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        let answer = p.reply.as_ref().and_then(crate::plan::goal_look_answer);
        let Some(g) = self.goal.agent_goal.as_mut() else {
            return;
        };
        match answer {
            Some((true, why)) => {
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("second look at the goal check `{}`: met ({why})", g.source),
                }));
                g.confirmed = Some(why);
            }
            Some((false, why)) => {
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("second look at the goal check `{}`: not met ({why})", g.source),
                }));
                self.context.record(HistoryEntry::new(
                    now,
                    format!("goal check `{}`", g.source),
                    format!("reads true, but a second look says the goal is not met: {why}"),
                ));
            }
            None => out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "second look at the goal check `{}` gave no answer ({}); asked again after the next action",
                    g.source,
                    p.plan.err().unwrap_or_default()
                ),
            })),
        }
    }

    /// The agent's check for a step before the last was confirmed: that step is done, and the next
    /// one's check is asked for on the screen as it is now.
    pub(super) fn next_goal_step(&mut self, why: &str, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(g) = self.goal.agent_goal.take() else {
            return;
        };
        let done = self.step_words();
        self.goal.step += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!(
                "{done} done: agent-declared check `{}` (pass {}) turned true after an action of this session, confirmed by a second look ({why})",
                g.source, g.pass
            ),
        }));
        self.context.record(HistoryEntry::new(
            now,
            format!("goal check `{}`", g.source),
            format!("{done} is done; the next step needs its own check"),
        ));
        self.hand_sensors(false, out);
        self.ask_step_check(now, out);
    }

    /// Ask a deliberative pass for the current step's check alone (no plan) — the next step's, or
    /// again after one was refused — bounded: past [`STEP_CHECK_ATTEMPTS`] the session stops, named.
    pub(super) fn ask_step_check(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if self.goal.step_check.is_some() || self.goal.agent_goal.is_some() {
            return;
        }
        if self.run.step_checks >= STEP_CHECK_ATTEMPTS {
            self.finish(
                SessionStop::NoGoalCheck {
                    detail: format!(
                        "{STEP_CHECK_ATTEMPTS} questions for the check of {} got none that could be used; give one with --goal-check",
                        self.step_words()
                    ),
                },
                out,
            );
            return;
        }
        self.run.step_checks += 1;
        let pass = STEP_CHECK_PASS + self.run.step_checks;
        self.goal.step_check = Some(pass);
        let ask = format!(
            "Question: {} needs its check.{}",
            self.step_words(),
            self.declaring_lines()
        );
        let (prompt, image) = self.deliberative_prompt(&ask, now);
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("the check of {} is asked for (pass {pass})", self.step_words()),
        }));
        let schema = self
            .declaring_schema()
            .map(|s| crate::plan::without_subgoals(&s))
            .unwrap_or_default();
        out.push(Effect::StartDeliberation(DeliberationJob {
            pass,
            trigger: Trigger::SubgoalCompleted,
            prompt,
            schema,
            image,
            // A question for a check plans nothing: no subgoal id is spent on it.
            first_id: self.run.next_subgoal,
        }));
    }

    /// The answer to a question for a step's check: its declarations taken like a plan's; with no
    /// usable goal check, asked again (bounded).
    pub(super) fn on_step_check(&mut self, p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        self.goal.step_check = None;
        match p.reply.as_ref() {
            Some(reply) => {
                let (changed, said) = self.declare_checks_and_goal(reply, p.pass, out);
                // With the step's check known, the step is acted on while the planner still plans.
                if self.goal.agent_goal.is_some() && self.state.active_subgoal().is_none() {
                    self.act_on_goal_meanwhile(now, out);
                }
                if changed {
                    self.hand_sensors(true, out);
                }
                if !said.is_empty() {
                    self.context.record(HistoryEntry::new(
                        now,
                        format!("pass {} checks", p.pass),
                        said.join("; "),
                    ));
                }
            }
            None => out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the question for the check of {} got no answer ({})",
                    self.step_words(),
                    p.plan.err().unwrap_or_default()
                ),
            })),
        }
        self.ask_step_check(now, out);
        self.release_deferred_pass(now, out);
    }

    /// While a pass plans and no subgoal is active, the goal itself is the subgoal (the tactical
    /// cadence never waits for a plan; a goal that names its first step — "click Play, then …" — is
    /// grounded without a model call). True when a subgoal is active afterwards.
    pub(super) fn act_on_goal_meanwhile(&mut self, now: MonoTime, out: &mut Vec<Effect>) -> bool {
        self.adopt_goal_as_subgoal(false, now, out)
    }

    /// [`Self::act_on_goal_meanwhile`]; `unfinished` when the goal's check reads true on a screen that
    /// still offers what the goal names: the check's own postcondition is then taken though it reads
    /// true (no other is false), so the session's click on it belongs to a subgoal.
    pub(super) fn adopt_goal_as_subgoal(
        &mut self,
        unfinished: bool,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> bool {
        if !self.cfg.behaviours.act_while_planning {
            return false;
        }
        if self.state.active_subgoal().is_some() {
            return true;
        }
        let Some((pass, _, _)) = self.deliberation.running else {
            return false;
        };
        let id = gamepilot_core::SubgoalId(self.run.next_subgoal);
        let budget = gamepilot_planner::Budget {
            max_time_ms: Some(GOAL_PLAN_TIME_MS),
            max_actions: Some(GOAL_PLAN_ACTIONS),
        };
        let Some(plan) = crate::plan::goal_plan(
            self.goal_plan_words(),
            &self.cfg.postconditions,
            id,
            budget,
            |s| {
                if unfinished {
                    None
                } else {
                    self.postcondition_value(s)
                }
            },
        ) else {
            return false;
        };
        self.feed(Event::Provisional { plan }, now, out);
        let adopted = self.state.active_subgoal() == Some(id);
        if adopted {
            self.run.next_subgoal += 1;
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("acting on the goal itself while pass {pass} plans"),
            }));
        }
        adopted
    }
}
