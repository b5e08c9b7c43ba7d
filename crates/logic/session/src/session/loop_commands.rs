//! The loop logic's commands applied in the session: a plan adopted, a subgoal started or completed, a rung
//! reached, an action executed or judged, a stop — each turned into effects, records and the context's plan
//! block.

use super::*;

impl Session {
    pub(super) fn apply(&mut self, commands: Vec<Command>, now: MonoTime, out: &mut Vec<Effect>) {
        for c in commands {
            match c {
                Command::StartDeliberation { pass, trigger } => {
                    self.numbers.calls.deliberative_passes += 1;
                    self.deliberation.running = Some((pass, trigger, false));
                    // A second look or a step's check waiting for the deliberative host goes first: the
                    // host serves one request at a time, and a plan asked meanwhile held the demo's look
                    // back until its time was spent (the look's answer may make the plan moot).
                    if trigger != Trigger::Start && self.host_wanted() {
                        self.deliberation.deferred_pass = Some((pass, trigger));
                        continue;
                    }
                    // The start pass plans from the first screen: with the goal acted on meanwhile, its
                    // job is composed once that screen is perceived (a tactical tick away).
                    if trigger == Trigger::Start
                        && (self.act_on_goal_meanwhile(now, out) || self.needs_first_screen())
                    {
                        self.deliberation.start_pass_waiting = Some(now);
                    } else {
                        out.push(Effect::StartDeliberation(
                            self.deliberation_job(pass, trigger, now),
                        ));
                    }
                }
                // A step back that worked resets the ladder but not the way back: only arrival, giving
                // up, a new rung or a subgoal reached ends it.
                Command::SubgoalCompleted { .. } => {
                    self.ladder.safe.abandon();
                    // A survey outlives a replan (each screen its tries open is a scene change, and a
                    // scene change replans); a step reached ends it.
                    self.explore.survey.reset();
                    self.refresh_plan_block();
                }
                Command::PlanAdopted { .. } | Command::SubgoalAbandoned { .. } => self.refresh_plan_block(),
                Command::SubgoalStarted { subgoal } => {
                    self.explore.siblings.reset();
                    self.refresh_plan_block();
                    let handle = self
                        .state
                        .plan()
                        .and_then(|p| p.subgoals.iter().find(|s| s.spec.id == subgoal))
                        .map(|s| s.spec.postcondition.handle as usize)
                        .filter(|h| *h < self.cfg.postconditions.len());
                    out.push(Effect::Reflex(ReflexCommand::Subgoal {
                        active: handle.map(|h| (subgoal, h)),
                    }));
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("subgoal {subgoal} started"),
                    }));
                }
                Command::CancelSubgoal { subgoal } => {
                    out.push(Effect::Reflex(ReflexCommand::CancelOwner { subgoal }));
                }
                Command::Execute { action, subgoal } => {
                    if let Some(a) = self.actions.execute(action, subgoal) {
                        self.tactical.chosen_in_menu |= a.in_menu;
                        // The key map was learned under the old heading.
                        if matches!(
                            a.intention.action,
                            Action::Camera { .. } | Action::CameraDegrees { .. }
                        ) {
                            self.avatar.selfid.camera_turned();
                        }
                        self.seen.freshness.submitted(action, now);
                        out.push(Effect::Reflex(ReflexCommand::Submit {
                            action,
                            intention: a.intention.clone(),
                            generation: a.generation,
                        }));
                        match &a.steer {
                            Some(plan) => out.push(Effect::Reflex(ReflexCommand::Steer {
                                action,
                                plan: plan.clone(),
                            })),
                            None => out.push(Effect::Reflex(ReflexCommand::Watch {
                                action,
                                region: a.region,
                                settle_ms: self.cfg.loop_cfg.settle_ms,
                            })),
                        }
                    }
                }
                Command::Reject { action, reason } => {
                    if self.avatar.probe_running == Some(action) {
                        self.avatar.probe_running = None;
                        self.avatar.selfid.probe_lost();
                    }
                    self.numbers.actions.rejected += 1;
                    if let Some(a) = self.actions.settle(action) {
                        let why = match reason {
                            Refusal::NeedAlternative => {
                                "not executed: this action did not help; choose a different one".to_string()
                            }
                            other => format!("not executed: {other:?}"),
                        };
                        out.push(Effect::Record(SessionRecord::Rejected {
                            action,
                            reason: why.clone(),
                        }));
                        self.context.record(HistoryEntry::new(now, a.label, why));
                    }
                }
                Command::Verdict { action, verdict } => {
                    out.push(Effect::Record(SessionRecord::Verdict {
                        action,
                        verdict,
                        cause: None,
                    }));
                    if let Some(a) = self.actions.settle(action) {
                        self.explored(&a, verdict, now, out);
                        if verdict == gamepilot_grounding::Verdict::Confirmed {
                            if let Some(p) = a.screen {
                                self.ladder.safe.confirmed_on(p);
                            }
                        }
                        // A probe's holds are told in one line when the probe ends (see `probe_told`).
                        match (&a.intention.action, a.label.starts_with(PROBE_LABEL)) {
                            (Action::HoldKey { key, .. }, true) => {
                                self.avatar.probe_holds.push((key.clone(), verdict))
                            }
                            _ => self
                                .context
                                .record(HistoryEntry::new(now, a.label, verdict.as_str())),
                        }
                    }
                    if verdict == gamepilot_grounding::Verdict::Confirmed {
                        self.ladder.confirmed_since_progress += 1;
                    }
                }
                Command::Failure { action, cause } => {
                    out.push(Effect::Record(SessionRecord::Failure {
                        action,
                        cause,
                        evidence: String::from("attributed by the loop logic"),
                    }));
                }
                Command::Exclude { targets } => {
                    self.tactical.excluded = targets
                        .iter()
                        .filter_map(|t| match t {
                            Target::Mark { element } => Some(*element),
                            Target::Point { .. } => None,
                        })
                        .collect();
                }
                Command::Escalate { rung } => {
                    self.numbers
                        .escalations
                        .push((rung, now.since(self.run.began).as_secs_f64()));
                    out.push(Effect::Record(SessionRecord::Interlock {
                        interlock: Safeguard::Escalate,
                        detail: rung.as_str().into(),
                    }));
                    self.ladder.safe.abandon();
                    match rung {
                        // FR-LOOP-006: the same intention once more, grounded on a fresh observation (new
                        // marks, new coordinates) without a model call.
                        Rung::Retry => self.tactical.retry = self.tactical.last_reply.clone(),
                        // FR-LOOP-006: the model is told, before it proposes again, what is refused now.
                        Rung::AlternativeAction => {
                            if let Some(key) = self.state.refused_action() {
                                self.context.record(HistoryEntry::new(
                                    now,
                                    "escalation: alternative action".to_string(),
                                    format!(
                                        "`{key}` did not help and is refused now: choose a different action"
                                    ),
                                ));
                            }
                        }
                        // FR-LOOP-006, FR-SKILL-003/004: the question the planner wrote (the session's own
                        // from the goal and subgoal when it wrote none); the second research rung of a
                        // session is deep research.
                        Rung::Research => {
                            self.ladder.research_rungs += 1;
                            let mut inferences = Vec::new();
                            if let Some(d) = self.state.status().subgoal_description {
                                inferences.push(format!("how to {d}"));
                            }
                            out.push(Effect::StartResearch(ResearchJob {
                                goal: self.cfg.goal.clone(),
                                question: self.ladder.research_question.take(),
                                inferences,
                                screen: self.seen.observation.clone(),
                                deep: self.ladder.research_rungs >= 2,
                            }));
                        }
                        // FR-LOOP-006: release what the subgoal holds, then go back to the latest screen an
                        // action of this session was confirmed on.
                        Rung::SafeState => {
                            if let Some(subgoal) = self.state.active_subgoal() {
                                out.push(Effect::Reflex(ReflexCommand::CancelOwner { subgoal }));
                            }
                            self.begin_safe_return(now, out);
                        }
                        // The replan rung's pass is the loop logic's own `StartDeliberation`; the last
                        // rung's stop arrives as its `Stop`.
                        Rung::Replan | Rung::StopAndNotify => {}
                    }
                }
                // FR-GND-008: actions that worked, many in a row, with no progress are the wrong actions,
                // not wrongly grounded ones.
                Command::Stuck { signal } if self.ladder.confirmed_since_progress >= ACTION_CHOICE_STREAK => {
                    self.ladder.extra_failures.record(FailureCause::ActionChoice);
                    out.push(Effect::Record(SessionRecord::Failure {
                        action: None,
                        cause: FailureCause::ActionChoice,
                        evidence: format!(
                            "{} confirmed actions and no progress ({signal:?})",
                            self.ladder.confirmed_since_progress
                        ),
                    }));
                    self.ladder.confirmed_since_progress = 0;
                }
                Command::Stop { reason } => {
                    let by = if reason == StopReason::UserStop {
                        self.run.stopped_by.clone()
                    } else {
                        None
                    };
                    self.finish(SessionStop::Loop { reason, by }, out);
                }
                // Each of these is recorded with the step that produced it (`SessionRecord::LoopStep`) and
                // acts no further here: a kept or refused plan leaves the plan block as it is (a refusal's
                // reason reaches the model through the re-asked pass), the grounding path is read where
                // the tick starts, suppression is the loop logic's own (its `Exclude` is what the tick
                // uses), a stuck signal without a streak of confirmed actions is the ladder's to answer, a
                // reset ladder has nothing to undo here, and evidence the verifier could not use was
                // already ignored by it.
                Command::PlanKept { .. }
                | Command::PlanRejected { .. }
                | Command::UsePath { .. }
                | Command::Suppress { .. }
                | Command::Stuck { .. }
                | Command::LadderReset { .. }
                | Command::BadEvidence { .. } => {}
            }
        }
    }

    /// The context's plan block from the loop logic's plan: every subgoal with its status (FR-CTX-001).
    pub(super) fn refresh_plan_block(&mut self) {
        let Some(plan) = self.state.plan() else {
            self.context.set_plan(CtxPlan::default());
            return;
        };
        let active = self.state.active_subgoal();
        let steps = plan
            .subgoals
            .iter()
            .map(|s| {
                let status = match s.status {
                    SubgoalStatus::Done => StepStatus::Done,
                    SubgoalStatus::Abandoned => StepStatus::Abandoned,
                    _ if Some(s.spec.id) == active => StepStatus::Active,
                    _ => StepStatus::Pending,
                };
                PlanStep::new(
                    format!(
                        "{} (done when: {})",
                        s.spec.description, s.spec.postcondition.source
                    ),
                    status,
                )
            })
            .collect();
        // The model reads the active subgoal in words (its id alone said nothing).
        let subgoal = active.and_then(|a| {
            plan.subgoals
                .iter()
                .find(|s| s.spec.id == a)
                .map(|s| s.spec.description.clone())
        });
        self.context.set_plan(CtxPlan { steps, subgoal });
    }

    pub(super) fn finish(&mut self, stop: SessionStop, out: &mut Vec<Effect>) {
        if self.run.stop.is_some() {
            return;
        }
        if let Some(h) = self.gates.held.take() {
            self.numbers.actions.rejected += 1;
            out.push(Effect::Record(SessionRecord::Interlock {
                interlock: Safeguard::DestructiveAction,
                detail: format!(
                    "{}: still held when the session stopped; not executed",
                    h.grounded.label
                ),
            }));
        }
        self.run.stop = Some(stop.clone());
        out.push(Effect::Stop(stop));
    }
}
