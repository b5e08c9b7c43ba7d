//! Declarations in the session: the sensors and checks the agent declares in its plan (what it may declare,
//! the lines that tell it, compiling and handing them to the reflex, refusing what cannot be adopted).

use super::*;

impl Session {
    /// A declaring session's plan schema as of now: the sensors it may name, whether the goal's check
    /// is still wanted, the marks of the latest frame and those that show a number.
    pub(super) fn declaring_schema(&self) -> Option<serde_json::Value> {
        let d = self.goal.declarations.as_ref()?;
        let named = d
            .bool_names()
            .into_iter()
            .chain(self.cfg.postconditions.iter().cloned())
            .fold(Vec::new(), |mut names, n| {
                if !names.contains(&n) {
                    names.push(n);
                }
                names
            });
        let (falling, rising): (Vec<_>, Vec<_>) =
            crate::goal_steps::relevant_counters(&self.seen.elements, self.step_focus())
                .into_iter()
                .partition(crate::goal_steps::Counter::counts_down);
        let numbers = crate::plan::Numbers {
            rising: rising.iter().map(|c| c.mark).collect(),
            falling: falling.iter().map(|c| c.mark).collect(),
        };
        // A step whose words name a number the screen shows ("collect a coin" beside "Coins 0") is
        // checked by that number rising: the marks that could be gone are not offered then (offered both,
        // the small model declared the compass's "SW" gone).
        let marks: Vec<u64> = if numbers.is_empty() {
            self.gone_candidates().iter().map(|(id, _)| *id).collect()
        } else {
            Vec::new()
        };
        Some(crate::plan::declare_schema(
            &named,
            self.plan_owes_goal_check(),
            &marks,
            &numbers,
        ))
    }

    /// The marks a check that something is `gone` may name: the labelled elements a small model reads
    /// first — an open popup's or dialog's, the selected item, those the step's words name — at most
    /// [`GONE_CANDIDATES`]. Offered every mark, the model named one by the number in its instructions'
    /// example, or the first listed, whatever its label.
    pub(super) fn gone_candidates(&self) -> Vec<(u64, String)> {
        let obs = gamepilot_vision::Observation {
            at: MonoTime::ZERO,
            frame_size: self.seen.frame_size.unwrap_or_default(),
            class: FrameChange::Unchanged,
            texts: Vec::new(),
            elements: self.seen.elements.clone(),
        };
        let focus = crate::relevance::Focus::new(self.cfg.goal.clone(), self.step_focus().to_string());
        let mut order = crate::relevance::model_order(&obs, &focus, None);
        for e in &self.seen.elements {
            if !order.contains(&e.id) {
                order.push(e.id);
            }
        }
        // A HUD counter and its name stay while the game runs: what it shows rises, it is not gone
        // (offered "Coins" first for "collect a coin", the model declared it gone).
        let counted: Vec<u64> = crate::goal_steps::counters(&self.seen.elements, "")
            .iter()
            .flat_map(|c| std::iter::once(c.mark).chain(c.label_mark))
            .collect();
        order
            .into_iter()
            .filter_map(|id| {
                let label = obs.element(id)?.label.clone()?;
                let id = u64::from(id.0);
                (!counted.contains(&id)).then_some((id, label))
            })
            .take(GONE_CANDIDATES)
            .collect()
    }

    /// The step of the goal whose check is asked for, when the goal has several (its check declared on
    /// the screen where that step shows), and the numbers the screen shows, most relevant first.
    pub(super) fn declaring_lines(&self) -> String {
        if self.goal.declarations.is_none() {
            return String::new();
        }
        let mut lines = String::new();
        if self.goal.steps.len() > 1 {
            // The planner reads which steps are done (it re-proposed a finished one), and while the
            // current step has no check, that "goal" is that step's alone.
            let listed: Vec<String> = self
                .goal
                .steps
                .iter()
                .enumerate()
                .map(|(k, step)| {
                    let done = if k < self.goal.step { " (done)" } else { "" };
                    format!("{}. {step}{done}", k + 1)
                })
                .collect();
            lines.push_str(&format!("\nThe goal's steps: {}.", listed.join(" ")));
            if self.goal.agent_goal.is_none() {
                lines.push_str(&format!(
                    " \"goal\" is the check of step {} only: what becomes of a mark on the screen now once {:?} is done.",
                    self.goal.step + 1,
                    self.step_focus()
                ));
            }
        }
        let found = crate::goal_steps::relevant_counters(&self.seen.elements, self.step_focus());
        if let Some(line) = crate::goal_steps::counters_line(&found, COUNTERS_LISTED) {
            lines.push('\n');
            lines.push_str(&line);
        }
        let gone: Vec<String> = self
            .gone_candidates()
            .iter()
            .map(|(id, label)| format!("[{id}] {label:?}"))
            .collect();
        if !gone.is_empty() && found.is_empty() {
            lines.push_str(&format!(
                "\nMarks a check {{\"mark\": N, \"then\": \"gone\"}} may name: {}",
                gone.join("; ")
            ));
        }
        lines
    }

    /// A deliberative reply of a session whose agent declares its checks: its sensors declared (each
    /// compiled with what came before; one that does not compile is said to the next pass with its
    /// diagnostics), its goal check accepted when none is yet, its postconditions compiled and added to
    /// those the reflex evaluates; then the plan, or why it cannot be adopted. A typed check over a mark
    /// declares the sensor it reads (`mark5_shown`, `mark5_number`) on the way.
    pub(super) fn declare_from(
        &mut self,
        reply: &serde_json::Value,
        pass: u64,
        first_id: u32,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> Result<gamepilot_planner::PlanSpec, String> {
        if self.goal.declarations.is_none() {
            return Err("this session takes no declarations".into());
        }
        let goal_given = self
            .goal
            .declarations
            .as_ref()
            .is_some_and(|d| d.config().goal_check_given);
        let (mut changed, mut said) = self.declare_checks_and_goal(reply, pass, out);
        let mut refused = None;
        let mut sources = Vec::new();
        for choice in crate::plan::postcondition_choices(reply) {
            let source = match choice {
                Some(c) => self.check_source(&c, pass, &mut changed, out),
                None => Err("a subgoal has no postcondition".to_string()),
            };
            match source {
                Ok(src) => {
                    if !self.cfg.postconditions.contains(&src) {
                        changed = true;
                        self.cfg.postconditions.push(src.clone());
                    }
                    sources.push(src);
                }
                Err(why) => match &self.goal.agent_goal {
                    // The step is still worth taking: it ends where the goal does.
                    Some(g) => {
                        said.push(format!(
                            "postcondition refused ({why}); the goal's check `{}` stands in",
                            g.source
                        ));
                        sources.push(g.source.clone());
                    }
                    None => {
                        refused.get_or_insert(format!("postcondition refused: {why}"));
                    }
                },
            }
        }
        if !said.is_empty() {
            self.context.record(HistoryEntry::new(
                now,
                format!("pass {pass} checks"),
                said.join("; "),
            ));
        }
        if changed {
            self.hand_sensors(true, out);
        }
        if let Some(why) = refused {
            return Err(why);
        }
        if self.plan_owes_goal_check() && !goal_given {
            return Err("no goal check: in \"goal\" name a mark that is gone (or whose number rises or falls) once the goal is done, or write an expression that is false now and true then".into());
        }
        crate::plan::plan_from_reply(
            &crate::plan::with_postconditions(reply, &sources),
            &crate::plan::Postconditions {
                sources: self.cfg.postconditions.clone(),
            },
            first_id,
        )
    }

    /// A declaring reply's sensors (`checks`) and, while none is accepted, the goal's (or the current
    /// step's) check: whether the sensors changed, and what was said of each, for the next pass.
    pub(super) fn declare_checks_and_goal(
        &mut self,
        reply: &serde_json::Value,
        pass: u64,
        out: &mut Vec<Effect>,
    ) -> (bool, Vec<String>) {
        let (checks, goal) = crate::plan::declarations_from_reply(reply);
        let mut changed = false;
        let mut said = Vec::new();
        for req in checks.iter().take(crate::declare::MAX_PER_REPLY) {
            match self.declare_sensor(req, pass, out) {
                Ok(line) => {
                    changed = true;
                    said.push(format!("declared `{line}`"));
                }
                Err(why) => said.push(format!("not declared: {why}")),
            }
        }
        let goal_given = self
            .goal
            .declarations
            .as_ref()
            .is_some_and(|d| d.config().goal_check_given);
        if let (None, Some(choice)) = (&self.goal.agent_goal, goal) {
            if goal_given {
                said.push("the user's goal check stands: no goal check declared".into());
            } else {
                match self.check_source(&choice, pass, &mut changed, out) {
                    Ok(g) => {
                        changed = true;
                        out.push(Effect::Record(SessionRecord::Note {
                            text: match self.goal.steps.len() {
                                0 | 1 => format!("pass {pass} declared the goal's check `{g}`"),
                                _ => format!("pass {pass} declared the check of {} `{g}`", self.step_words()),
                            },
                        }));
                        said.push(format!("goal check `{g}` declared"));
                        // The goal's check leads the postconditions a failed plan falls back on.
                        if !self.cfg.postconditions.contains(&g) {
                            self.cfg.postconditions.push(g.clone());
                        }
                        self.goal.agent_goal = Some(AgentGoal {
                            source: g,
                            pass,
                            actions_before: self.state.actions_executed(),
                            seen_false: false,
                            confirmed: None,
                            looked_at: None,
                        });
                    }
                    Err(why) => said.push(format!("goal check refused: {why}")),
                }
            }
        }
        (changed, said)
    }

    /// Hand the reflex the declared sensors, the agent's goal check as it stands (none while a new one
    /// is wanted) and the postconditions; with `templates`, the templates it is to cut from its frame.
    pub(super) fn hand_sensors(&self, templates: bool, out: &mut Vec<Effect>) {
        if let Some(decl) = &self.goal.declarations {
            out.push(Effect::Reflex(ReflexCommand::Sensors {
                source: decl.source(),
                goal: self.goal.agent_goal.as_ref().map(|g| g.source.clone()),
                postconditions: self.cfg.postconditions.clone(),
                templates: if templates { decl.templates() } else { Vec::new() },
            }));
        }
    }

    /// A declaring pass's plan that cannot be adopted is asked again within the same pass, its reason
    /// in the history the model reads, at most [`DECLARE_ATTEMPTS`] times; with no goal check by then
    /// the session stops, named (it could never tell the goal was met). True when handled here.
    pub(super) fn declaration_refused(
        &mut self,
        p: &PlanOutcome,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> bool {
        let Err(why) = &p.plan else {
            self.goal.declare_attempts = 0;
            return false;
        };
        let Some((pass, trigger, _)) = self.deliberation.running.filter(|(pass, ..)| *pass == p.pass) else {
            return false;
        };
        out.push(Effect::Record(SessionRecord::Failure {
            action: None,
            cause: FailureCause::Plan,
            evidence: format!("plan of pass {pass} refused: {why}"),
        }));
        self.context
            .record(HistoryEntry::new(now, "plan refused".to_string(), why.clone()));
        if self.goal.declare_attempts < DECLARE_ATTEMPTS && self.host_wanted() {
            // A second look or a step's check waiting for the host goes first (a planner asked again
            // meanwhile held the demo's look back until its time was spent): the pass is asked again
            // once they are answered, and the goal is acted on meanwhile.
            self.goal.declare_attempts += 1;
            self.deliberation.deferred_pass = Some((pass, trigger));
            self.act_on_goal_meanwhile(now, out);
            return true;
        }
        if self.goal.declare_attempts < DECLARE_ATTEMPTS {
            self.goal.declare_attempts += 1;
            // Asking again takes the host seconds: the goal itself is acted on meanwhile (the demo stood
            // idle for 50 s while a planner that re-proposed a finished step was asked again).
            self.act_on_goal_meanwhile(now, out);
            out.push(Effect::StartDeliberation(
                self.deliberation_job(pass, trigger, now),
            ));
            return true;
        }
        let goal_given = self
            .goal
            .declarations
            .as_ref()
            .is_some_and(|d| d.config().goal_check_given);
        if self.plan_owes_goal_check() && !goal_given {
            self.finish(
                SessionStop::NoGoalCheck {
                    detail: format!(
                        "{} replies declared no usable check of the goal (the last: {why}); give one with --goal-check",
                        DECLARE_ATTEMPTS + 1
                    ),
                },
                out,
            );
            return true;
        }
        self.goal.declare_attempts = 0;
        false
    }

    /// Declare one sensor against the latest frame's marks; its sensor-file line, or why not.
    pub(super) fn declare_sensor(
        &mut self,
        req: &crate::declare::SensorRequest,
        pass: u64,
        out: &mut Vec<Effect>,
    ) -> Result<String, String> {
        let decl = self
            .goal
            .declarations
            .as_mut()
            .ok_or("this session takes no declarations")?;
        let frame = self.seen.frame_size.unwrap_or(decl.config().declared_size);
        let d = decl.declare(req, &self.seen.elements, frame, pass)?;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!(
                "pass {pass} declared sensor `{}`{}",
                d.line(),
                d.mark
                    .map(|m| format!(" from mark [{}] {:?}", m.0, d.label.clone().unwrap_or_default()))
                    .unwrap_or_default()
            ),
        }));
        Ok(d.line())
    }

    /// A goal or postcondition as an expression over the session's sensors, compiled and boolean; a
    /// typed choice declares the sensor it reads first (once).
    pub(super) fn check_source(
        &mut self,
        choice: &crate::plan::CheckChoice,
        pass: u64,
        changed: &mut bool,
        out: &mut Vec<Effect>,
    ) -> Result<String, String> {
        use crate::declare::{Reads, SensorRequest};
        use crate::plan::{Becomes, CheckChoice};
        let source = match choice {
            CheckChoice::Expression(s) => s.clone(),
            CheckChoice::Typed { mark, becomes } => {
                let (name, reads) = match becomes {
                    Becomes::Gone => (format!("mark{mark}_shown"), Reads::Present),
                    Becomes::Rises | Becomes::Falls => (format!("mark{mark}_number"), Reads::Number),
                };
                let known = self
                    .goal
                    .declarations
                    .as_ref()
                    .is_some_and(|d| d.program().index_of(&name).is_some());
                if !known {
                    let req = SensorRequest {
                        name: name.clone(),
                        reads,
                        mark: Some(*mark),
                        colour: None,
                        expression: None,
                    };
                    self.declare_sensor(&req, pass, out)?;
                    *changed = true;
                }
                match becomes {
                    Becomes::Gone => format!("not {name}"),
                    Becomes::Rises => {
                        if self.cfg.progress_sensor.is_none() && self.goal.declared_progress.is_none() {
                            // A counter the agent watches rise is progress (FR-LOOP-005), said once.
                            self.goal.declared_progress = Some(name.clone());
                            out.push(Effect::Record(SessionRecord::Note {
                                text: format!(
                                    "declared counter `{name}` serves as the progress signal (no --progress-sensor)"
                                ),
                            }));
                        }
                        format!("{name} > {}", self.number_shown(*mark, "rise")?)
                    }
                    Becomes::Falls => format!("{name} < {}", self.number_shown(*mark, "fall")?),
                }
            }
        };
        let decl = self
            .goal
            .declarations
            .as_ref()
            .ok_or("this session takes no declarations")?;
        match decl.compile(&source) {
            Ok(expr) if expr.ty == gamepilot_sensor::Type::Bool => Ok(source),
            Ok(_) => Err(format!("`{source}` is a number, not true or false")),
            Err(why) => Err(format!("`{source}` does not compile:\n{why}")),
        }
    }

    /// The number mark `mark` of the latest screen shows, or why a check cannot `verb` by it.
    pub(super) fn number_shown(&self, mark: u64, verb: &str) -> Result<u64, String> {
        self.seen
            .elements
            .iter()
            .find(|e| u64::from(e.id.0) == mark)
            .and_then(|e| crate::declare::number_in(e.label.as_deref()?))
            .ok_or_else(|| format!("mark [{mark}] shows no number to {verb}"))
    }
}
