//! The deliberative cadence in the session: the pass's job and prompt, its plan adopted or refused, passes
//! held back while the host is busy, research.

use super::*;

impl Session {
    /// A deliberative pass's job: the context as of now and fresh subgoal ids.
    pub(super) fn deliberation_job(&mut self, pass: u64, trigger: Trigger, now: MonoTime) -> DeliberationJob {
        let first_id = self.run.next_subgoal;
        self.run.next_subgoal += 3;
        let ask = format!("Deliberation trigger: {trigger:?}{}", self.declaring_lines());
        let (prompt, image) = self.deliberative_prompt(&ask, now);
        DeliberationJob {
            pass,
            trigger,
            prompt,
            schema: match self.declaring_schema() {
                Some(schema) => schema,
                None => crate::plan::plan_schema(&crate::plan::Postconditions {
                    sources: self.cfg.postconditions.clone(),
                }),
            },
            image,
            first_id,
        }
    }

    /// A deliberative prompt of the context as of now: the latest observation, then `ask`; with the
    /// latest marked frame at the deliberative budget as the last content part (FR-MODEL-002).
    pub(super) fn deliberative_prompt(
        &mut self,
        ask: &str,
        now: MonoTime,
    ) -> (gamepilot_context::Prompt, Option<crate::tactical::ImageWanted>) {
        let image = self
            .seen
            .frame_size
            .filter(|_| self.cfg.limits.with_image && self.cfg.limits.deliberative_pixels > 0)
            .map(|size| crate::tactical::ImageWanted {
                picture: crate::tactical::Picture::Frame,
                pixels: self.cfg.limits.deliberative_pixels,
                size: size.fit_within(self.cfg.limits.deliberative_pixels),
            });
        let part = image.map(|i| gamepilot_context::ImagePart {
            mime: "image/png".into(),
            width: i.size.w,
            height: i.size.h,
            data_base64: String::new(),
        });
        let prompt = self.context.assemble(
            Cadence::Deliberative,
            &ObservationText::new(now, format!("{}\n{ask}", self.seen.observation)),
            part,
        );
        (prompt, image)
    }

    /// A postcondition's value on the latest reflex tick: a boolean sensor by its name, the goal check
    /// (the one postcondition that is no sensor's name) by the goal's value.
    pub(super) fn postcondition_value(&self, source: &str) -> Option<bool> {
        if let Some(d) = &self.goal.declarations {
            let expr = d.compile(source).ok()?;
            return d.value(&expr, &self.numbers.sensors, &self.numbers.sensors);
        }
        match self.numbers.sensors.iter().find(|(n, _)| n == source) {
            Some((_, v)) => v.map(|v| v != 0.0),
            None => self.goal.last_met,
        }
    }

    pub(super) fn on_plan(&mut self, mut p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        if self.goal.look == Some(p.pass) {
            return self.on_goal_look(p, now, out);
        }
        if self.goal.step_check == Some(p.pass) {
            return self.on_step_check(p, now, out);
        }
        if self.goal.declarations.is_some() {
            if let Some(reply) = p.reply.take() {
                p.plan = self.declare_from(&reply, p.pass, p.first_id, now, out);
            }
            // A reply that could not be adopted, or none (the host failed): asked again, bounded.
            if self.state.active_subgoal().is_none() && self.declaration_refused(&p, now, out) {
                return;
            }
        }
        if let Some(q) = p.research.clone() {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("pass {} wrote a research question: {q:?}", p.pass),
            }));
            self.ladder.research_question = Some(q);
        }
        // A degenerate plan (subgoals alike, a postcondition already true) is refused with its
        // reason, which the model reads when it is asked again, once; a second degenerate answer (or the
        // first, when only one postcondition is offered) is repaired — repeats and reached subgoals
        // dropped — or, with nothing sound left, fails the pass.
        let senseless = p
            .plan
            .as_ref()
            .ok()
            .and_then(|spec| crate::plan::plan_sense(spec, |s| self.postcondition_value(s)).err());
        if let Some(reason) = senseless {
            out.push(Effect::Record(SessionRecord::Failure {
                action: None,
                cause: FailureCause::Plan,
                evidence: format!("plan of pass {} refused: {reason}", p.pass),
            }));
            self.context
                .record(HistoryEntry::new(now, "plan refused".to_string(), reason.clone()));
            // Asking again helps only when distinct states can be named: with one postcondition offered,
            // every plan of several subgoals repeats it, and a second call would only cost time.
            let can_differ = self.cfg.postconditions.len() > 1;
            match self.deliberation.running {
                Some((pass, trigger, false)) if pass == p.pass && can_differ => {
                    self.deliberation.running = Some((pass, trigger, true));
                    out.push(Effect::StartDeliberation(
                        self.deliberation_job(pass, trigger, now),
                    ));
                }
                _ => {
                    // Asked again and no better (or no better answer possible): adopt its sound part (a model that repeats one subgoal
                    // still names a step worth taking); a plan with nothing sound left fails the pass.
                    let repaired = p
                        .plan
                        .as_ref()
                        .ok()
                        .and_then(|spec| crate::plan::repair_plan(spec, |s| self.postcondition_value(s)));
                    match repaired {
                        Some(plan) => {
                            out.push(Effect::Record(SessionRecord::Note {
                                text: format!(
                                    "plan of pass {} repaired: {} sound subgoal(s) kept ({reason})",
                                    p.pass,
                                    plan.subgoals.len()
                                ),
                            }));
                            self.feed(
                                Event::DeliberationDone {
                                    pass: p.pass,
                                    plan: Some(plan),
                                },
                                now,
                                out,
                            );
                        }
                        None => match self.deliberation.running {
                            // Nothing sound is left, but a look or the next step's check is coming: the
                            // pass stays open and is asked again once they are answered, so the step
                            // can be acted on meanwhile (ended now, the demo stood idle until a timer).
                            Some((pass, trigger, _))
                                if pass == p.pass
                                    && self.host_wanted()
                                    && self.state.active_subgoal().is_none() =>
                            {
                                self.deliberation.deferred_pass = Some((pass, trigger));
                            }
                            _ => self.fail_pass(p.pass, reason, now, out),
                        },
                    }
                }
            }
            return;
        }
        match p.plan {
            Ok(plan) => self.feed(
                Event::DeliberationDone {
                    pass: p.pass,
                    plan: Some(plan),
                },
                now,
                out,
            ),
            Err(reason) => self.fail_pass(p.pass, reason, now, out),
        }
    }

    /// The agent declares its checks and no frame has been perceived yet: its first pass needs the
    /// screen's marks, so the first tactical tick only perceives.
    pub(super) fn needs_first_screen(&self) -> bool {
        self.goal.declarations.is_some() && self.seen.frame_size.is_none()
    }

    /// A second look or a question for a step's check is waiting for the deliberative host.
    pub(super) fn host_wanted(&self) -> bool {
        self.goal.look.is_some() || self.goal.look_wanted.is_some() || self.goal.step_check.is_some()
    }

    /// The planner's pass held back while the host was wanted is asked again once it no longer is.
    pub(super) fn release_deferred_pass(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if self.host_wanted() {
            return;
        }
        let Some((pass, trigger)) = self.deliberation.deferred_pass.take() else {
            return;
        };
        if self.deliberation.running.is_some_and(|(p, ..)| p == pass) {
            out.push(Effect::StartDeliberation(
                self.deliberation_job(pass, trigger, now),
            ));
        }
    }

    /// The start pass's job, held until the first screen was perceived (or, perception failing, for
    /// at most [`START_PASS_WAIT_MS`]).
    pub(super) fn release_start_pass(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if self.deliberation.start_pass_waiting.take().is_none() {
            return;
        }
        if let Some((pass, trigger, _)) = self.deliberation.running {
            out.push(Effect::StartDeliberation(
                self.deliberation_job(pass, trigger, now),
            ));
        }
    }

    /// A pass that left nothing to act on. With a subgoal still active the loop handles the failure;
    /// with none, the goal itself becomes the plan (after the demo's first subgoal was done, a
    /// planner that only re-planned it, or timed out, left the tactical cadence idle until the session
    /// stopped for no progress).
    pub(super) fn fail_pass(&mut self, pass: u64, reason: String, now: MonoTime, out: &mut Vec<Effect>) {
        let fallback = if self.state.active_subgoal().is_none() {
            let id = gamepilot_core::SubgoalId(self.run.next_subgoal);
            let budget = gamepilot_planner::Budget {
                max_time_ms: Some(GOAL_PLAN_TIME_MS),
                max_actions: Some(GOAL_PLAN_ACTIONS),
            };
            crate::plan::goal_plan(
                self.goal_plan_words(),
                &self.cfg.postconditions,
                id,
                budget,
                |s| self.postcondition_value(s),
            )
        } else {
            None
        };
        let Some(plan) = fallback else {
            self.feed(Event::DeliberationFailed { pass, reason }, now, out);
            return;
        };
        self.run.next_subgoal += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("plan of pass {pass} failed ({reason}); acting on the goal itself meanwhile"),
        }));
        self.feed(
            Event::DeliberationDone {
                pass,
                plan: Some(plan),
            },
            now,
            out,
        );
    }

    pub(super) fn on_research(&mut self, r: ResearchFindings, now: MonoTime, out: &mut Vec<Effect>) {
        for (source, retrieved, text) in r.excerpts.iter().take(self.cfg.limits.research_max_excerpts) {
            let text = bound_text(text, self.cfg.limits.research_excerpt_max_bytes);
            if let Ok(e) = ResearchExcerpt::new(source, retrieved, &text) {
                self.context.add_research(e);
            }
        }
        let summary = if r.found {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("note: {}", r.note),
            }));
            if let Err(e) = self.context.note(&r.note, now) {
                self.context
                    .record(HistoryEntry::new(now, format!("note: {}", r.note), e.to_string()));
            }
            r.note.clone()
        } else {
            format!("research on {:?} found nothing usable", r.query)
        };
        self.feed(
            Event::ResearchDone {
                found: r.found,
                summary,
            },
            now,
            out,
        );
    }
}
