//! Exploration without a model call, wired into the session: the like of a click that changed nothing
//! (`explore.rs`), and the survey for a model that answers `unsure` (`survey.rs`); Escape for a step that
//! closes what is open.

use super::*;

impl Session {
    /// Exploration's next try on `obs`: the nearest untried element like the one whose click changed
    /// nothing, clicked without a model call (a retry of the same click waits behind it). False when
    /// there is none to try: the model is asked as usual.
    pub(super) fn explore_next(
        &mut self,
        obs: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> bool {
        let Some((mark, label, kind)) = self.explore.siblings.next(obs, &self.tactical.excluded) else {
            return false;
        };
        let reply = TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        };
        let Some(mut grounded) = self.ground(&reply, obs, false, generation, now) else {
            return false;
        };
        grounded.label = format!("{EXPLORE_LABEL} {label} (mark {}), {}", mark.0, grounded.label);
        self.tactical.retry = None;
        self.numbers.actions.direct_groundings += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!(
                "exploring without a model call (try {} of at most {}): the last click changed nothing, {label} (mark {}) is the nearest untried element {kind}",
                self.explore.siblings.tries(),
                crate::explore::MAX_TRIES,
                mark.0
            ),
        }));
        self.act_on(grounded, obs, generation, now, out);
        true
    }

    /// The model answered `unsure`: a survey starts from this screen, or the way back starts from the
    /// screen a survey's try opened, or nothing is explored and the model is asked again as usual.
    pub(super) fn on_unsure(
        &mut self,
        obs: &Observation,
        scene: SceneKind,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let focus = self.survey_focus();
        let (outcome, note) = match self
            .explore
            .survey
            .unsure(obs, ScreenPrint::of(obs, scene), &focus)
        {
            crate::survey::Unsure::Began(home) => (
                "exploring: the agent tries the likely elements itself".to_string(),
                format!("the model is unsure: exploring from {home}"),
            ),
            crate::survey::Unsure::GoBack(what) => (
                "exploring: going back to try the next element".to_string(),
                format!("the model is unsure here too ({what}): going back"),
            ),
            crate::survey::Unsure::Refused(why) => (
                format!("nothing explored: {why}"),
                format!("the model is unsure; nothing explored: {why}"),
            ),
        };
        self.context.record(HistoryEntry::new(now, "unsure", outcome));
        out.push(Effect::Record(SessionRecord::Note { text: note }));
    }

    /// What a survey's tries are ordered toward: the goal and the plan's current step.
    pub(super) fn survey_focus(&self) -> crate::relevance::Focus {
        crate::relevance::Focus::new(
            self.cfg.goal.clone(),
            self.context.plan().subgoal.as_deref().unwrap_or(""),
        )
    }

    /// The survey's move on a fresh observation: a try or a step back, clicked or pressed without a model
    /// call and verified like any action; what a try opened, noted (the context is the only memory); or
    /// the survey's end. A try the destructive check holds for the user ends the survey there.
    pub(super) fn survey_step(
        &mut self,
        obs: &Observation,
        scene: SceneKind,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let focus = self.survey_focus();
        let here = ScreenPrint::of(obs, scene);
        let Some(step) = self
            .explore
            .survey
            .next(obs, here.as_ref(), &focus, &self.tactical.excluded)
        else {
            return;
        };
        let left = |mark| TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        };
        let (reply, what) = match step {
            crate::survey::Move::Look(found) => {
                if let Err(e) = self.context.note(&found, now) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("exploration note refused: {e}"),
                    }));
                }
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("exploring: {found}; the model looks at it"),
                }));
                return;
            }
            crate::survey::Move::Done(why) => {
                self.context
                    .record(HistoryEntry::new(now, "exploring", why.clone()));
                out.push(Effect::Record(SessionRecord::Note { text: why }));
                return;
            }
            crate::survey::Move::Try { mark, label, n } => (
                left(mark),
                format!(
                    "'{label}' (mark {}, try {n} of at most {})",
                    mark.0,
                    crate::survey::MAX_TRIES
                ),
            ),
            crate::survey::Move::Back(SafeStep::Click(mark, label)) => {
                (left(mark), format!("back by '{label}'"))
            }
            crate::survey::Move::Back(SafeStep::Press(action)) => {
                (TacticalReply::Act(action), "back by Escape".to_string())
            }
            crate::survey::Move::Back(_) => return,
        };
        let Some(mut grounded) = self.ground(&reply, obs, false, generation, now) else {
            return;
        };
        grounded.label = format!("{SURVEY_LABEL} {what}, {}", grounded.label);
        self.numbers.actions.direct_groundings += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("{} (without a model call)", grounded.label),
        }));
        self.act_on(grounded, obs, generation, now, out);
        if self.gates.held.is_some() {
            if let Some(note) = self
                .explore
                .survey
                .abandon("a destructive action is held for the user")
            {
                out.push(Effect::Record(SessionRecord::Note { text: note }));
            }
        }
    }

    /// What a click's verdict teaches exploration: one that changed nothing makes its like worth trying;
    /// an exploration click that changed something is noted (the context is the only memory).
    pub(super) fn explored(
        &mut self,
        a: &GroundedAction,
        verdict: gamepilot_grounding::Verdict,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        if a.label.starts_with(SURVEY_LABEL) {
            // A survey's own click: the survey judges it on the next perception, not the sibling search.
            self.explore
                .survey
                .verdict(verdict == gamepilot_grounding::Verdict::Refuted);
            return;
        }
        let Action::Click { x, y, .. } = a.intention.action else {
            return;
        };
        match verdict {
            gamepilot_grounding::Verdict::Refuted if self.cfg.behaviours.explore_siblings => {
                self.explore.siblings.refuted(gamepilot_core::Point { x, y })
            }
            gamepilot_grounding::Verdict::Confirmed => {
                self.explore.siblings.confirmed();
                if a.label.starts_with(EXPLORE_LABEL) {
                    let tried = self.explore.siblings.tried();
                    let before = tried[..tried.len().saturating_sub(1)].join(", ");
                    let what = tried.last().cloned().unwrap_or_default();
                    let text = if before.is_empty() {
                        format!("clicking {what} changed the screen where the click before it did not")
                    } else {
                        format!("clicking {what} changed the screen; {before} did not")
                    };
                    if let Err(e) = self.context.note(&text, now) {
                        out.push(Effect::Record(SessionRecord::Note {
                            text: format!("exploration note refused: {e}"),
                        }));
                    }
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("exploration: {text}"),
                    }));
                }
            }
            _ => {}
        }
    }

    /// The subgoal asks to close the dialog or menu that is open and nothing on screen is labelled so:
    /// tap Escape without a model call, once per subgoal, verified like any action.
    pub(super) fn dismiss_with_escape(
        &mut self,
        obs: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let step = self
            .state
            .status()
            .subgoal_description
            .unwrap_or_else(|| self.step_focus().to_string());
        let key = crate::direct::step_key(&step);
        if !self.tactical.clicked(key, "escape".into()) {
            return;
        }
        let reply = TacticalReply::Act(Action::Key { key: "Escape".into() });
        if let Some(grounded) = self.ground(&reply, obs, false, generation, now) {
            self.numbers.actions.direct_groundings += 1;
            out.push(Effect::Record(SessionRecord::Note {
                text: "grounded without a model call: the subgoal closes what is open and nothing on screen is labelled so: Escape".into(),
            }));
            self.act_on(grounded, obs, generation, now, out);
        }
    }
}
