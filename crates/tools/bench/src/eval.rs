//! `gamepilot eval`'s IO: for each labelled decision point, perceive its frame as the tactical
//! thread does (PP-OCR, elements, marks), assemble the tactical prompt a fresh `run` session would send
//! for the point's goal (the same context, tools and schema), ask the model host, and score the reply
//! with `gamepilot_session::eval`.

use crate::BenchError;
use gamepilot_core::{ElementId, MonoTime, Size};
use gamepilot_model::{CancelToken, ChatRequest, HostClient};
use gamepilot_session::eval::survey_choice;
use gamepilot_session::eval::{judge, prompt_at, session_choice, DecisionPoint, PointResult};
use gamepilot_session::relevance::Focus;
use gamepilot_session::{observation_for_model, tools_for, Session, SessionConfig};
use gamepilot_session::{tactical_schema, Cadence, ObservationText, SchemaLimits, TacticalReply, ToolSet};
use gamepilot_vision::{Ocr, Perceiver};
use std::path::Path;

/// What one evaluation asks of the host.
pub struct EvalSetup<'a> {
    pub client: &'a HostClient,
    pub model_name: &'a str,
    /// The corpus's `frames/` directory.
    pub frames: &'a Path,
    pub max_tokens: u32,
    /// Write each point's prompt messages here (`<n>.txt`), to read what the model read.
    pub prompts: Option<&'a Path>,
    /// Goal-directed points as `run` decides them: where the session grounds the subgoal without a
    /// model call, its choice is scored and the model is not asked.
    pub as_run: bool,
}

/// A saved frame perceived as the tactical thread perceives it (PP-OCR, elements, stable ids).
pub fn perceive_image(path: &Path) -> Result<(gamepilot_vision::Observation, Size), BenchError> {
    let mut ocr = gamepilot_ocr::default_engine()?;
    perceive_with(&mut ocr, path)
}

fn perceive_with(
    ocr: &mut impl Ocr,
    path: &Path,
) -> Result<(gamepilot_vision::Observation, Size), BenchError> {
    perceive_next(ocr, &mut Perceiver::new(), path, MonoTime::ZERO)
}

fn perceive_next(
    ocr: &mut impl Ocr,
    perceiver: &mut Perceiver,
    path: &Path,
    at: MonoTime,
) -> Result<(gamepilot_vision::Observation, Size), BenchError> {
    let frame = gamepilot_runtime::load_image(path)?;
    let view = frame.view();
    let class = perceiver.classify_view(&view).class;
    let texts = ocr.recognize(&view, view.bounds()).unwrap_or_default();
    let obs = perceiver.observe(&view, at, class, &texts);
    Ok((obs, Size::new(frame.width, frame.height)))
}

/// Saved frames perceived in order by one perceiver, `step` apart, as consecutive tactical ticks see
/// them: an element the tracker follows keeps its id from frame to frame.
pub fn perceive_sequence(
    paths: &[std::path::PathBuf],
    step: std::time::Duration,
) -> Result<Vec<(gamepilot_vision::Observation, Size)>, BenchError> {
    let mut ocr = gamepilot_ocr::default_engine()?;
    let mut perceiver = Perceiver::new();
    let mut at = MonoTime::ZERO;
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        out.push(perceive_next(&mut ocr, &mut perceiver, p, at)?);
        at = at.plus(step);
    }
    Ok(out)
}

/// The observation text a fresh `run` session's tactical call carries (no avatar known): the elements
/// in `run`'s order for `focus`, at most the session's number of them, cut to its bound.
pub fn text_for_model(obs: &gamepilot_vision::Observation, focus: &Focus, cfg: &SessionConfig) -> String {
    let order = gamepilot_session::relevance::model_order(obs, focus, None);
    observation_for_model(
        &obs.to_text_listing(&order, cfg.limits.observation_max_elements),
        Default::default(),
        cfg.limits.observation_max_bytes,
    )
}

/// Score every point; a point whose frame cannot be read is an error, a host failure is an invalid
/// (and wrong) reply. `progress` hears each result as it is scored.
pub fn evaluate(
    setup: &EvalSetup<'_>,
    points: &[DecisionPoint],
    mut progress: impl FnMut(&PointResult),
) -> Result<Vec<PointResult>, BenchError> {
    let mut ocr = gamepilot_ocr::default_engine()?;
    let cancel = CancelToken::new();
    let mut out = Vec::with_capacity(points.len());
    let base = SessionConfig {
        postconditions: vec!["goal".into()],
        ..SessionConfig::default()
    };
    // The tools `run` offers a session of this configuration (`unsure` among them).
    let tools = ToolSet::new(&tools_for(&base))?;
    let mut perceived: Option<(String, Size, gamepilot_vision::Observation)> = None;
    for point in points {
        // Points of one frame stand together in the corpus: the frame is perceived once for all of them.
        if perceived.as_ref().is_none_or(|(name, _, _)| *name != point.frame) {
            let (obs, size) = perceive_with(&mut ocr, &setup.frames.join(&point.frame))?;
            perceived = Some((point.frame.clone(), size, obs));
        }
        let Some((_, size, seen)) = perceived.as_ref() else {
            continue;
        };
        let mut placed;
        let obs = if point.layers.is_empty() {
            seen
        } else {
            placed = seen.clone();
            placed.place_layers(&point.layers);
            &placed
        };
        // The context of a fresh session for this goal: the prefix `run` sends, byte for byte.
        let cfg = SessionConfig {
            goal: point.goal.clone(),
            ..base.clone()
        };
        let subgoal = point.before.as_ref().map_or("", |b| b.subgoal.as_str());
        let text = text_for_model(obs, &Focus::new(point.goal.clone(), subgoal), &cfg);
        let session = Session::new(cfg, MonoTime::ZERO).map_err(|e| BenchError::Eval(e.to_string()))?;
        let prompt = match &point.before {
            // A goal-directed point: the plan and the actions tried, each named from its own frame.
            Some(before) => {
                let at = before.tried.last().map_or(MonoTime::ZERO, |t| {
                    MonoTime((t.at_s.max(0.0) * 1e6) as u64).plus(std::time::Duration::from_secs(1))
                });
                let mut tried_on = Vec::with_capacity(before.tried.len());
                for t in &before.tried {
                    tried_on.push(perceive_with(&mut ocr, &setup.frames.join(&t.frame))?.0);
                }
                let chosen = setup
                    .as_run
                    .then(|| session_choice(before, obs, &tried_on))
                    .flatten();
                if let Some(reply) = chosen {
                    let result = PointResult {
                        id: point.id.clone(),
                        kind: point.kind.clone(),
                        valid: true,
                        correct: judge(&reply, obs, point),
                        latency_ms: 0.0,
                        prompt_tokens: 0,
                        cached_tokens: 0,
                        reply: format!("session, no model call: {}", reply_text(&reply)),
                        by_session: true,
                    };
                    progress(&result);
                    out.push(result);
                    continue;
                }
                prompt_at(&session, before, &tried_on, &ObservationText::new(at, text))
            }
            None => session.context().assemble(
                Cadence::Tactical,
                &ObservationText::new(MonoTime::ZERO, text),
                None,
            ),
        };
        let marks: Vec<ElementId> = obs.elements.iter().map(|e| e.id).collect();
        let schema = tactical_schema(&tools, &marks, *size, &SchemaLimits::default())?;
        let chat = ChatRequest::from_prompt(setup.model_name, &prompt, setup.max_tokens);
        if let Some(dir) = setup.prompts {
            write_prompt(dir, out.len(), &point.id, &chat)?;
        }
        let result = match setup.client.chat_structured(&chat, &schema, &cancel) {
            Ok(r) => {
                let t = &r.reply.timings;
                let mut parsed = TacticalReply::parse(&r.value, &schema);
                let mut reply = r.reply.content.clone();
                // As run decides: an unsure model's screen is explored, its first try the choice.
                if setup.as_run && parsed.as_ref().is_ok_and(|p| *p == TacticalReply::Unsure) {
                    let subgoal = point.before.as_ref().map_or("", |b| b.subgoal.as_str());
                    if let Some(tried) = survey_choice(&point.goal, subgoal, obs) {
                        reply = format!("{reply} -> the session explores: {}", reply_text(&tried));
                        parsed = Ok(tried);
                    }
                }
                PointResult {
                    id: point.id.clone(),
                    kind: point.kind.clone(),
                    valid: parsed.is_ok(),
                    correct: parsed.as_ref().is_ok_and(|reply| judge(reply, obs, point)),
                    latency_ms: t.wall_ms,
                    prompt_tokens: t.prompt_tokens.unwrap_or(0),
                    cached_tokens: t.cached_tokens.unwrap_or(0),
                    reply,
                    by_session: false,
                }
            }
            Err(e) => PointResult {
                id: point.id.clone(),
                kind: point.kind.clone(),
                valid: false,
                correct: false,
                latency_ms: 0.0,
                prompt_tokens: 0,
                cached_tokens: 0,
                reply: format!("error: {e}"),
                by_session: false,
            },
        };
        progress(&result);
        out.push(result);
    }
    Ok(out)
}

/// A choice the session made, as the reply column shows it.
fn reply_text(reply: &TacticalReply) -> String {
    match reply {
        TacticalReply::ClickMark { mark, .. } => format!("click_mark {mark}"),
        TacticalReply::Act(a) => serde_json::to_string(a).unwrap_or_default(),
        TacticalReply::Note { text } => format!("note {text}"),
        TacticalReply::MoveTo { mark } => format!("move_to {mark}"),
        TacticalReply::Unsure => "unsure".into(),
    }
}

/// One point's prompt as text: the point's id, then each message's role and content.
fn write_prompt(dir: &Path, index: usize, id: &str, chat: &ChatRequest) -> Result<(), BenchError> {
    let mut text = format!("# {id}\n");
    for m in &chat.messages {
        let role = m.get("role").and_then(|r| r.as_str()).unwrap_or("?");
        let content = match m.get("content") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        text.push_str(&format!("--- {role}\n{content}\n"));
    }
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join(format!("{index:03}.txt")), text))
        .map_err(|e| BenchError::Eval(format!("writing the prompt of {id} to {}: {e}", dir.display())))
}

/// Score every declaration point the way `run` declares a goal check with no `--goal-check`: a fresh
/// declaring session perceives the point's first frame, its start pass asks the host, the session
/// resolves the reply into the sensors and goal check it hands the reflex; that check is then evaluated
/// on the first frame (templates cut from it, as the reflex cuts them) and on the frame with the goal
/// done — right when it reads false, then true. A host failure or a reply with no usable goal check is
/// wrong; the reply column says what was declared and what it read.
pub fn evaluate_declarations(
    setup: &EvalSetup<'_>,
    points: &[gamepilot_session::eval::DeclarationPoint],
    mut progress: impl FnMut(&PointResult),
) -> Result<Vec<PointResult>, BenchError> {
    use gamepilot_session::{Effect, Input, Perception, PlanOutcome, ReflexCommand};
    let mut ocr = gamepilot_ocr::default_engine()?;
    let mut digits = gamepilot_runtime::sensor_worker::SensorWorker::spawn(
        gamepilot_runtime::sensor_worker::OcrDigits::new,
    )?;
    let cancel = CancelToken::new();
    let mut out = Vec::with_capacity(points.len());
    for point in points {
        let before_path = setup.frames.join(&point.before);
        let (obs, size) = perceive_with(&mut ocr, &before_path)?;
        let before = gamepilot_runtime::load_image(&before_path)?;
        let after = gamepilot_runtime::load_image(&setup.frames.join(&point.after))?;
        let cfg = SessionConfig {
            goal: point.goal.clone(),
            postconditions: Vec::new(),
            declare: Some(gamepilot_session::declare::DeclareConfig {
                sensor_source: String::new(),
                declared_size: size,
                goal_check_given: false,
            }),
            ..SessionConfig::default()
        };
        let mut session = Session::new(cfg, MonoTime::ZERO).map_err(|e| BenchError::Eval(e.to_string()))?;
        // The first screen is perceived (no model call), then the start pass is composed from it.
        let mut effects = session.step(Input::Start, MonoTime::ZERO);
        let tick = effects.iter().find_map(|e| match e {
            Effect::StartTactical(job) => Some(job.tick),
            _ => None,
        });
        let at = MonoTime(100_000);
        if let Some(tick) = tick {
            effects = session.step(
                Input::Perceived(Box::new(Perception {
                    tick,
                    started: at,
                    observation: obs.clone(),
                    moves: Vec::new(),
                })),
                at,
            );
        }
        let job = effects.into_iter().find_map(|e| match e {
            Effect::StartDeliberation(job) => Some(job),
            _ => None,
        });
        let Some(job) = job else {
            return Err(BenchError::Eval(format!(
                "{}: the declaring session composed no start pass",
                point.id
            )));
        };
        let request = gamepilot_runtime::deliberative::DeliberationRequest { job, image: None };
        if let Some(dir) = setup.prompts {
            let chat = ChatRequest::from_prompt(setup.model_name, &request.job.prompt, 256);
            write_prompt(dir, out.len(), &point.id, &chat)?;
        }
        let post = gamepilot_runtime::deliberative::Postconditions { sources: Vec::new() };
        let mut d = gamepilot_runtime::deliberative::deliberate(
            setup.client,
            setup.model_name,
            &post,
            &request,
            &cancel,
        );
        if d.value.is_none() {
            // A host that did not answer (a cold first prompt on a busy machine) is asked once more: the
            // point scores the model's choice, not the host's start.
            d = gamepilot_runtime::deliberative::deliberate(
                setup.client,
                setup.model_name,
                &post,
                &request,
                &cancel,
            );
        }
        let valid = d.value.is_some();
        let host_error = d.plan.as_ref().err().filter(|_| !valid).cloned();
        let effects = session.step(
            Input::Plan(PlanOutcome {
                pass: d.pass,
                plan: d.plan,
                latency_ms: d.latency_ms,
                research: d.research,
                reply: d.value,
                first_id: d.first_id,
            }),
            MonoTime(200_000),
        );
        let handed = effects.into_iter().find_map(|e| match e {
            Effect::Reflex(ReflexCommand::Sensors {
                source,
                goal: Some(goal),
                templates,
                ..
            }) => Some((source, goal, templates)),
            _ => None,
        });
        let (correct, said) = match handed {
            None => match host_error {
                Some(e) => (false, format!("host: {e}")),
                None => (false, format!("no goal check: {}", d.reply_text)),
            },
            Some((source, goal, templates)) => {
                let (b, a) = read_check(&source, &goal, &templates, size, &before, &after, &mut digits)?;
                (
                    gamepilot_session::eval::judge_declaration(b, a),
                    format!("`{goal}`: before {b:?}, after {a:?}"),
                )
            }
        };
        let result = PointResult {
            id: point.id.clone(),
            kind: format!("declare/{}", point.kind),
            valid,
            correct,
            latency_ms: d.latency_ms,
            prompt_tokens: 0,
            cached_tokens: 0,
            reply: said,
            by_session: false,
        };
        progress(&result);
        out.push(result);
    }
    Ok(out)
}

/// The goal check over the declared sensors, read on `before` (whose templates it cuts first) and on
/// `after`, each in one evaluation that waits for digit recognition (as `sensor eval` does).
fn read_check(
    source: &str,
    goal: &str,
    templates: &[(String, gamepilot_core::Rect)],
    declared: Size,
    before: &gamepilot_core::Frame,
    after: &gamepilot_core::Frame,
    digits: &mut gamepilot_runtime::sensor_worker::SensorWorker,
) -> Result<(Option<bool>, Option<bool>), BenchError> {
    let compiled = gamepilot_runtime::declared::compile(source, Some(goal), &[])
        .map_err(|e| BenchError::Eval(format!("the declared sensors do not compile: {e}")))?;
    let Some(expr) = compiled.goal else {
        return Ok((None, None));
    };
    let mut atlas = gamepilot_sensor::Atlas::new();
    let chain_of = |f: &gamepilot_core::Frame| {
        gamepilot_core::TransformChain::new(gamepilot_core::Point::new(0, 0), Size::new(f.width, f.height))
    };
    for note in gamepilot_runtime::declared::cut_templates(
        &mut atlas,
        Some(before),
        templates,
        Some(chain_of(before)),
        declared,
    ) {
        eprintln!("eval: {note}");
    }
    let mut ev = gamepilot_sensor::Evaluator::new(compiled.program, declared);
    let mut read = |frame: &gamepilot_core::Frame| -> Option<bool> {
        let mut cache = gamepilot_sensor::RecognitionCache::default();
        let mut ctx = gamepilot_sensor::EvalContext {
            frame: frame.view(),
            chain: chain_of(frame),
            atlas: &atlas,
            recognition: &mut cache,
        };
        ev.tick(&mut ctx);
        if ctx.recognition.queued() > 0 {
            digits.submit(ctx.recognition);
            if digits.wait(ctx.recognition, std::time::Duration::from_secs(20)) {
                ev.recompute(&mut ctx);
            }
        }
        match ev.evaluate(&expr, &mut ctx) {
            gamepilot_sensor::Value::Bool(b) => Some(b),
            _ => None,
        }
    };
    let b = read(before);
    let a = read(after);
    Ok((b, a))
}
