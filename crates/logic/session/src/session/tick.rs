//! The tactical tick in the session: when one starts and what it offers, the perception (what the model
//! reads, whether it is asked at all), the call, and the reply.

use super::*;

impl Session {
    /// Start a tactical tick when none is running, nothing awaits verification or the user, a subgoal is
    /// active and the interval has passed.
    pub(super) fn maybe_start_tactical(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        let due = self.tactical.due(now, self.cfg.tactical_interval_ms);
        if self.tactical.in_flight.is_some()
            // While a second look judges whether the goal is done, or the next step's check is being
            // declared, nothing is acted on: the goal may be met; a step's check must be false when
            // declared (a coin collected meanwhile made the demo's `coins > 0` already true); and the
            // deliberative host, niced below the tactical one, answered neither within its 30 s while the
            // tactical host's calls took the 2 cores.
            || self.goal.look.is_some()
            || self.goal.step_check.is_some()
            || self.gates.held.is_some()
            || self.gates.waiting().is_some()
            || self.host.restarting
            || !self.actions.is_idle()
            || (self.cfg.behaviours.fresh_frames && !self.seen.freshness.ready_for_frame(now))
            || self.avatar.probe_running.is_some()
            || (self.state.active_subgoal().is_none()
                && !self.needs_first_screen()
                && self.goal.look_wanted.is_none())
            || !due
        {
            return;
        }
        self.run.tactical_tick += 1;
        self.tactical.last_start = Some(now);
        // FR-CTX-004: compact before the prompt reaches the host's context.
        let estimate = self.estimate_prompt_tokens(now);
        if self.context.needs_compaction(estimate) {
            self.compact(estimate, now, out);
        }
        let scene = self.seen.scene.unwrap_or(SceneKind::Play).as_str().to_string();
        let commands = self.state.step(
            Event::GroundingRequest {
                request: self.run.tactical_tick,
                scene: scene.clone(),
                offered: self.cfg.grounding_paths.clone(),
            },
            now,
        );
        let path = commands.iter().find_map(|c| match c {
            Command::UsePath { path, .. } => *path,
            _ => None,
        });
        out.push(Effect::Record(SessionRecord::LoopStep {
            event: Event::GroundingRequest {
                request: self.run.tactical_tick,
                scene,
                offered: self.cfg.grounding_paths.clone(),
            },
            commands: commands.clone(),
        }));
        self.apply(commands, now, out);
        let mut tools = tools_for_path(path, self.cfg.camera_calibrated);
        if self.avatar.selfid.avatar().is_some() {
            // With the avatar known, a place in the world is reached by steering, not by a
            // click at a pixel (the demo's model clicked the HUD's column instead of walking to a coin);
            // marks stay clickable, for the buttons a play view carries.
            tools.retain(|t| *t != Tool::Click);
            tools.push(Tool::MoveTo);
        }
        if self.cfg.behaviours.explore_unsure && tools.contains(&Tool::ClickMark) {
            tools.push(Tool::Unsure);
        }
        let probing = self.avatar.selfid.probing();
        let perceive_for_session = self.tactical.retry.is_some()
            || self.explore.siblings.wanted()
            || self.explore.survey.wanted()
            || self.tactical.recheck.is_some()
            || self.ladder.safe.returning()
            || self.goal.look_wanted.is_some()
            || self.state.active_subgoal().is_none();
        let perceive_only = probing || perceive_for_session;
        // A subgoal that names an element is clicked without a model call when exactly one
        // element carries that label — once per subgoal and name, so a click that did not finish the
        // subgoal leaves the next choice to the model.
        let direct = match (
            self.state.active_subgoal(),
            self.state.status().subgoal_description,
        ) {
            // A path the user forced is every action's path; otherwise a named element is a mark.
            (Some(_), Some(d))
                if !perceive_only
                    && tools.contains(&Tool::ClickMark)
                    && (self.cfg.grounding_paths.len() > 1 || path == Some(GroundingPath::Mark)) =>
            {
                let key = crate::direct::step_key(&d);
                let clicked = self.tactical.clicked_for(&key);
                crate::direct::DirectAim {
                    name: crate::direct::named_element(&d).filter(|name| !clicked.contains(name)),
                    words: self
                        .cfg
                        .behaviours
                        .direct_by_words
                        .then(|| crate::direct::clickable_words(&d))
                        .flatten(),
                    clicked: if self.cfg.behaviours.direct_by_words {
                        clicked
                    } else {
                        Vec::new()
                    },
                }
            }
            _ => crate::direct::DirectAim::default(),
        };
        let job = TacticalJob {
            tick: self.run.tactical_tick,
            excluded_marks: self.tactical.excluded.clone(),
            tools,
            path,
            two_stage: path == Some(GroundingPath::TwoStage) && !perceive_only,
            shape: crate::effect::ObservationShape {
                with_image: self.cfg.limits.with_image,
                visual_pixels: self.cfg.limits.visual_pixels,
                coords: if self.cfg.limits.with_image {
                    self.cfg.coord_convention
                } else {
                    gamepilot_core::CoordConvention::CapturePixels
                },
                observation_max_bytes: self.cfg.limits.observation_max_bytes,
                observation_max_elements: self.cfg.limits.observation_max_elements,
            },
            generation: self.seen.generation,
            health: self.seen.health,
            perceive_only,
            // Only a probe hold's frame goes unread: anything else perceived is acted on or judged.
            read_text: !probing || perceive_for_session,
            keep_frame: self.avatar.selfid.enabled() && self.avatar.selfid.avatar().is_none(),
            focus: crate::relevance::Focus::new(
                self.cfg.goal.clone(),
                self.context.plan().subgoal.as_deref().unwrap_or(""),
            ),
            avatar: self.avatar.selfid.avatar().cloned(),
            aim: direct.clone(),
            sensors: sensors_line(&self.numbers.sensors, &self.tactical.sensors_at_last_call),
        };
        self.tactical.in_flight = Some(TacticalInFlight {
            tick: self.run.tactical_tick,
            generation: self.seen.generation,
            direct: direct.is_some().then(|| (direct, self.tactical.excluded.clone())),
            job: job.clone(),
            asking: None,
        });
        out.push(Effect::StartTactical(Box::new(job)));
        self.tactical.sensors_at_last_call = self.numbers.sensors.clone();
    }

    /// A tactical prompt's size estimate: the context over the last observation, plus an image.
    pub(super) fn estimate_prompt_tokens(&self, now: MonoTime) -> u32 {
        let obs = ObservationText::new(now, self.seen.observation.clone());
        let p = self.context.assemble(Cadence::Tactical, &obs, None);
        let image = if self.cfg.limits.with_image {
            self.cfg.limits.image_tokens
        } else {
            0
        };
        p.estimate_tokens(self.context.config().bytes_per_token, 0) + image
    }

    pub(super) fn compact(&mut self, tokens_before: u32, now: MonoTime, out: &mut Vec<Effect>) {
        let event = self
            .context
            .compact(CompactionInput::default(), tokens_before, now);
        self.numbers.calls.compactions += 1;
        out.push(Effect::Record(SessionRecord::Compaction(event)));
    }

    /// The tactical tick in flight when it is `tick`; otherwise a note that a late report was ignored.
    pub(super) fn tick_in_flight(
        &mut self,
        tick: u64,
        what: &str,
        out: &mut Vec<Effect>,
    ) -> Option<&mut TacticalInFlight> {
        if self.tactical.in_flight.as_ref().is_some_and(|f| f.tick == tick) {
            return self.tactical.in_flight.as_mut();
        }
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("{what} for tick {tick} ignored: not the tick in flight"),
        }));
        None
    }

    /// A tick's frame is perceived: decide what the model reads (element order, `move_to` places, the
    /// observation text) and whether it is asked at all; compose the call.
    pub(super) fn on_perceived(
        &mut self,
        p: crate::tactical::Perception,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some(flight) = self.tick_in_flight(p.tick, "a perception", out) else {
            return;
        };
        let job = flight.job.clone();
        let obs = &p.observation;
        // What the model reads: goal words first, then (avatar known) places nearest it.
        let order = crate::relevance::model_order(obs, &job.focus, job.avatar.as_ref());
        let mut listing = obs.to_text_listing(&order, job.shape.observation_max_elements);
        if let Some(line) = &job.sensors {
            listing = format!("{listing}{line}\n");
        }
        let observation_text = observation_for_model(&listing, job.health, job.shape.observation_max_bytes);
        if self.deliberation.start_pass_waiting.is_some() {
            if self.goal.declarations.is_some() {
                self.seen.elements = obs.elements.clone();
            }
            self.seen.observation = bound_text(&observation_text, self.cfg.limits.observation_max_bytes);
            if obs.frame_size.area() > 0 {
                self.seen.frame_size = Some(obs.frame_size);
            }
            self.release_start_pass(now, out);
        }
        // The subgoal names the one element labelled so: the session clicks it without a model call.
        let aim = &job.aim;
        let direct = aim.target(obs, &job.excluded_marks).map(|(mark, _)| mark);
        // The subgoal asks to close what is open and nothing is labelled so: Escape, no model call.
        let dismiss = direct.is_none() && aim.dismisses(obs, &job.excluded_marks);
        // A play field that starts the self-identification probe is not shown to the model: its answer
        // would be set aside for the probe's holds (a cold prompt of seconds spent for nothing).
        let probe_first = !job.perceive_only
            && direct.is_none()
            && !dismiss
            && self
                .avatar
                .selfid
                .would_start_probing(obs, scene_kind(obs), observation_signature(obs));
        if job.perceive_only || direct.is_some() || dismiss || probe_first {
            let message = match direct {
                Some(mark) => format!("the subgoal names mark {mark}'s label: no model call"),
                None if dismiss => "the subgoal closes what is open: Escape, no model call".into(),
                None if probe_first => "the avatar is identified first (probe holds): no model call".into(),
                None => "perceive-only tick".into(),
            };
            let failure = TacticalFailure {
                kind: FailureKind::NotAsked,
                message,
                latency_ms: 0.0,
            };
            return self.end_tick(p, observation_text, None, None, Err(failure), now, out);
        }
        let tools = match ToolSet::new(&job.tools) {
            Ok(t) => t,
            Err(e) => {
                let failure = TacticalFailure {
                    kind: FailureKind::Host,
                    message: e.to_string(),
                    latency_ms: 0.0,
                };
                return self.end_tick(p, observation_text, None, None, Err(failure), now, out);
            }
        };
        let visual = job.shape.with_image.then_some(job.shape.visual_pixels);
        let composed = if job.two_stage {
            crate::tactical::compose_localise(&self.context, p.tick, &p, visual).map(|c| (c, None))
        } else {
            let present: Vec<ElementId> = obs
                .elements
                .iter()
                .map(|e| e.id)
                .filter(|id| !job.excluded_marks.contains(id))
                .collect();
            let move_targets: Vec<ElementId> = job
                .avatar
                .as_ref()
                .map(|a| crate::selfid::move_targets(obs, a))
                .unwrap_or_default();
            let (max_elements, health, max_bytes) = (
                job.shape.observation_max_elements,
                job.health,
                job.shape.observation_max_bytes,
            );
            crate::tactical::compose_act(
                &self.context,
                p.tick,
                &p,
                &observation_text,
                |scaled, space| {
                    observation_for_model(
                        &format!(
                            "{}\n{}",
                            space.describe(),
                            scaled.to_text_listing(&order, max_elements)
                        ),
                        health,
                        max_bytes,
                    )
                },
                &crate::tactical::ActPlan {
                    tools: &tools,
                    present: &present,
                    move_targets: &move_targets,
                    visual_pixels: visual,
                    coords: job.shape.coords,
                    limits: &SchemaLimits::default(),
                },
            )
        };
        match composed {
            Ok((c, model_text)) => {
                let tail = (!job.two_stage).then_some(c.tail);
                if let Some(flight) = self.tactical.in_flight.as_mut() {
                    flight.asking = Some(Asking {
                        perception: p,
                        observation_text: model_text.unwrap_or(observation_text),
                        tail,
                        crop: None,
                        localised: None,
                    });
                }
                out.push(Effect::CallModel(Box::new(c.call)));
            }
            Err(failure) => self.end_tick(p, observation_text, None, None, Err(failure), now, out),
        }
    }

    /// A model call of the tick in flight answered (or failed): a localising point asks for the region
    /// around it; an action, or a failure, ends the tick.
    pub(super) fn on_replied(
        &mut self,
        tick: u64,
        answer: Result<crate::tactical::ModelAnswer, TacticalFailure>,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some(flight) = self.tick_in_flight(tick, "a model reply", out) else {
            return;
        };
        let visual_pixels = flight.job.shape.visual_pixels;
        let excluded_marks = flight.job.excluded_marks.clone();
        let Some(mut asking) = flight.asking.take() else {
            // The frame could not be perceived (capture or OCR failed): the tick ends with nothing seen.
            let failure = match answer {
                Err(f) => f,
                Ok(_) => TacticalFailure {
                    kind: FailureKind::Perception,
                    message: "a reply came for a tick whose frame was never perceived".into(),
                    latency_ms: 0.0,
                },
            };
            let nothing = crate::tactical::Perception {
                tick,
                started: now,
                observation: Observation {
                    at: now,
                    frame_size: gamepilot_core::Size::new(0, 0),
                    class: FrameChange::Unchanged,
                    texts: Vec::new(),
                    elements: Vec::new(),
                },
                moves: Vec::new(),
            };
            let text = format!("({})", failure.message);
            return self.end_tick(nothing, text, None, None, Err(failure), now, out);
        };
        let localised_ms = asking.localised.as_ref().map_or(0.0, |l| l.latency_ms);
        let reply = match answer {
            Ok(crate::tactical::ModelAnswer::Localised { point, figures }) => {
                let observation = &asking.perception.observation;
                let excluded = excluded_marks
                    .iter()
                    .filter_map(|id| observation.element(*id).map(|e| e.bbox))
                    .collect();
                out.push(Effect::PerceiveCrop(crate::effect::PerceiveCrop {
                    tick,
                    point,
                    cheap: crate::tactical::cheap_size(observation.frame_size),
                    pixels: visual_pixels,
                    excluded,
                }));
                asking.localised = Some(figures);
                if let Some(flight) = self.tactical.in_flight.as_mut() {
                    flight.asking = Some(asking);
                }
                return;
            }
            Ok(crate::tactical::ModelAnswer::Act(mut reply)) => {
                if let Some(l) = &asking.localised {
                    reply.latency_ms += l.latency_ms;
                    reply.tokens_in += l.tokens_in;
                    reply.tokens_out += l.tokens_out;
                    reply.cached_tokens += l.cached_tokens;
                }
                Ok(reply)
            }
            Err(mut f) => {
                // The localising call of a two-stage tick is the only one asked with no tail kept.
                if asking.tail.is_none() && asking.localised.is_none() {
                    f.message = format!("localise pass: {}", f.message);
                }
                f.latency_ms += localised_ms;
                Err(f)
            }
        };
        let Asking {
            perception,
            observation_text,
            tail,
            crop,
            ..
        } = asking;
        self.end_tick(perception, observation_text, crop, tail, reply, now, out)
    }

    /// A two-stage tick's region is perceived: compose the acting call on it.
    pub(super) fn on_crop_perceived(
        &mut self,
        c: crate::tactical::CropPerception,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some(flight) = self.tick_in_flight(c.tick, "a crop perception", out) else {
            return;
        };
        let job = flight.job.clone();
        let Some(mut asking) = flight.asking.take() else {
            return;
        };
        let composed = ToolSet::new(&job.tools)
            .map_err(|e| TacticalFailure {
                kind: FailureKind::Host,
                message: e.to_string(),
                latency_ms: 0.0,
            })
            .and_then(|tools| {
                crate::tactical::compose_crop_act(
                    &self.context,
                    asking.perception.started,
                    &c,
                    &tools,
                    job.shape.with_image.then_some(job.shape.visual_pixels),
                    &SchemaLimits::default(),
                )
            });
        asking.crop = Some(c.in_capture);
        match composed {
            Ok(composed) => {
                asking.tail = Some(composed.tail);
                if let Some(flight) = self.tactical.in_flight.as_mut() {
                    flight.asking = Some(asking);
                }
                out.push(Effect::CallModel(Box::new(composed.call)));
            }
            Err(f) => {
                let Asking {
                    perception,
                    observation_text,
                    crop,
                    ..
                } = asking;
                self.end_tick(perception, observation_text, crop, None, Err(f), now, out)
            }
        }
    }

    /// The tick's outcome, once its perception and any model call are in.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn end_tick(
        &mut self,
        p: crate::tactical::Perception,
        observation_text: String,
        crop: Option<Observation>,
        tail: Option<gamepilot_context::TacticalTail>,
        reply: Result<ModelReply, TacticalFailure>,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let outcome = TacticalOutcome {
            tick: p.tick,
            started: p.started,
            observation: p.observation,
            observation_text,
            crop,
            reply,
            moves: p.moves,
            tail,
        };
        self.on_tactical(outcome, now, out)
    }

    /// A tick's observation, its text read, becomes the screen the session knows: its scene and print,
    /// the observation the model reads next, the context's tick; a second look waiting for a fresh frame
    /// is released (the step it finds unfinished is returned) and the planner hears of it.
    fn screen_read(
        &mut self,
        t: &mut TacticalOutcome,
        signature: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> (SceneKind, Option<crate::direct::DirectAim>) {
        self.seen.at = Some(t.started);
        // Only a session whose agent declares its checks names marks of a past frame.
        if self.goal.declarations.is_some() {
            self.seen.elements = t.observation.elements.clone();
        }
        let scene = scene_kind(&t.observation);
        self.seen.scene = Some(scene);
        self.seen.print = ScreenPrint::of(&t.observation, scene);
        let text = bound_text(&t.observation_text, self.cfg.limits.observation_max_bytes);
        self.seen.observation = text.clone();
        if let Some(tail) = t.tail.take() {
            self.context.commit_tactical(tail);
        }
        self.context.end_tick(ObservationText::new(t.started, text));
        let unfinished = self.release_goal_look(t.started, &t.observation, out, now);
        // The suppression list is what this observation's tick says; an absent Exclude means none
        // (FR-GND-007: suppression expires after its bound).
        self.tactical.excluded.clear();
        self.feed(
            Event::Observation {
                scene: scene.as_str().into(),
                signature,
            },
            now,
            out,
        );
        (scene, unfinished)
    }

    pub(super) fn on_tactical(&mut self, mut t: TacticalOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        let (generation, direct, read_text) = match self.tactical.in_flight.take() {
            Some(f) if f.tick == t.tick => (f.generation, f.direct, f.job.read_text),
            other => {
                self.tactical.in_flight = other;
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!(
                        "tactical result for tick {} ignored: not the tick in flight",
                        t.tick
                    ),
                }));
                return;
            }
        };
        if t.observation.frame_size.area() > 0 {
            self.seen.frame_size = Some(t.observation.frame_size);
        }
        let signature = observation_signature(&t.observation);
        // A probe hold's frame, read without its text, is self-identification's evidence only: the screen
        // the session, the model and the planner know stays the one last read, and nothing is acted on
        // from it (below).
        let (scene, unfinished) = if read_text {
            self.screen_read(&mut t, signature, now, out)
        } else {
            (
                self.seen.scene.unwrap_or_else(|| scene_kind(&t.observation)),
                None,
            )
        };
        // Self-identification: on the first play field, and after each probe hold.
        let perceived_only = matches!(&t.reply, Err(f) if f.kind == FailureKind::NotAsked);
        match self
            .avatar
            .selfid
            .on_observation(&t.observation, scene, signature, &t.moves)
        {
            crate::selfid::SelfIdStep::Hold(key) => {
                if let Ok(r) = &t.reply {
                    self.record_call(r);
                    self.context.record(HistoryEntry::new(
                        now,
                        r.text.clone(),
                        "set aside: the agent first identifies its avatar (probe holds of its direction keys)",
                    ));
                }
                self.propose_probe(key, generation, now, out);
                return;
            }
            crate::selfid::SelfIdStep::Done(result) => {
                let text = match &result {
                    Ok(m) => {
                        // The smallest sprite-sized unlabelled element under the avatar's centre is its mark.
                        let c = m.bbox.center();
                        let sprite = t
                            .observation
                            .elements
                            .iter()
                            .filter(|e| {
                                e.label.is_none() && e.bbox.contains(c) && e.bbox.w <= 96 && e.bbox.h <= 96
                            })
                            .min_by_key(|e| e.bbox.w * e.bbox.h)
                            .map(|e| (e.id.0, e.looks.as_deref()));
                        m.note(sprite)
                    }
                    Err(e) if self.avatar.selfid.failure().is_some() => {
                        format!("Self-identification found no avatar: {e}; move_to is not offered.")
                    }
                    Err(e) => format!(
                        "Self-identification found no avatar on this view: {e}; another view will be tried."
                    ),
                };
                if !self.avatar.probe_holds.is_empty() {
                    let holds = std::mem::take(&mut self.avatar.probe_holds);
                    let probe_ms = self.avatar.selfid.config().map_or(0, |c| c.probe_ms);
                    let (action, outcome) = crate::selfid::probe_told(&holds, probe_ms);
                    self.context
                        .record(HistoryEntry::new(now, format!("{PROBE_LABEL} {action}"), outcome));
                }
                // The probe's line is the act that found it: the note is not told a second time.
                if let Err(e) = self.context.note_found(&text, now) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("avatar note refused: {e}"),
                    }));
                }
                let evidence = result.as_ref().map(|m| m.evidence.as_str()).unwrap_or("");
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("self-identification: {text} Evidence: {evidence}"),
                }));
            }
            crate::selfid::SelfIdStep::Nothing => {}
        }
        // A frame whose text was not read is never acted on: a dialogue check would read no text, a step
        // back no screen. What an escalation asked for meanwhile (a retry, the step back, a survey) makes
        // the next tick read its frame in full and do it there.
        if !read_text {
            return;
        }
        // On the way back to the safe screen, a reply to a call started before the rung is set aside: the
        // step back is decided on this observation.
        if self.ladder.safe.returning() {
            if !perceived_only {
                out.push(Effect::Record(SessionRecord::Note {
                    text: "a model reply set aside: the session is going back to the safe screen".into(),
                }));
            }
            return self.step_back(&t.observation, scene, generation, now, out);
        }
        if let Some(aim) = unfinished.filter(|_| self.actions.is_idle()) {
            // The step whose check read true was completed by it: the click needs a subgoal to belong to.
            if self.adopt_goal_as_subgoal(true, now, out) {
                // The marks the aim was found among: a refuted mark stays excluded.
                let excluded = self.tactical.excluded.clone();
                return self.ground_direct(&aim, &excluded, &t.observation, generation, now, out);
            }
        }
        if perceived_only {
            if self.explore.survey.wanted() {
                return self.survey_step(&t.observation, scene, generation, now, out);
            }
            if let Some((aim, excluded)) = direct {
                if aim.dismisses(&t.observation, &excluded) {
                    return self.dismiss_with_escape(&t.observation, generation, now, out);
                }
                return self.ground_direct(&aim, &excluded, &t.observation, generation, now, out);
            }
            if self.explore.siblings.wanted() && self.explore_next(&t.observation, generation, now, out) {
                return;
            }
            if let Some(again) = self.tactical.recheck.take() {
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("{} checked again on a frame taken after the change", again.label),
                }));
                // Its own transform chain: a pointer action grounded before the window moved is stale.
                let grounded_in = again.generation;
                self.act_on(again, &t.observation, grounded_in, now, out);
                return;
            }
            if let Some(again) = self.tactical.retry.take() {
                if let Some(grounded) = self.ground(&again, &t.observation, false, generation, now) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("retry: {} grounded again on a fresh observation", grounded.label),
                    }));
                    self.act_on(grounded, &t.observation, generation, now, out);
                }
            }
            return;
        }
        let reply = match t.reply {
            Ok(r) => r,
            Err(f) => {
                self.numbers.calls.tactical_failures += 1;
                self.context.record(HistoryEntry::new(
                    now,
                    "(model call)",
                    format!("failed: {}", f.message),
                ));
                if f.kind == FailureKind::SchemaBroken {
                    self.numbers.calls.schema_violations += 1;
                }
                match self.host.failed(&f, now) {
                    HostVerdict::GoOn => {}
                    HostVerdict::Shrink => {
                        let tokens = self
                            .estimate_prompt_tokens(now)
                            .max(self.cfg.limits.context_tokens);
                        self.compact(tokens, now, out);
                        // The host's count is higher than our estimate: shrink what we send.
                        self.cfg.limits.observation_max_bytes =
                            (self.cfg.limits.observation_max_bytes / 2).max(400);
                    }
                    HostVerdict::Stop(stop) => self.finish(stop, out),
                }
                return;
            }
        };
        self.host.answered();
        self.record_call(&reply);
        if self.context.needs_compaction(reply.tokens_in as u32) {
            self.compact(reply.tokens_in as u32, now, out);
        }
        if reply.reply == TacticalReply::Unsure {
            return self.on_unsure(&t.observation, scene, now, out);
        }
        let marks = t.crop.as_ref().unwrap_or(&t.observation);
        let two_stage = t.crop.is_some();
        let Some(grounded) = self.ground(&reply.reply, marks, two_stage, generation, now) else {
            return;
        };
        self.tactical.last_reply = Some(reply.reply.clone());
        self.act_on(grounded, &t.observation, generation, now, out);
    }
}
