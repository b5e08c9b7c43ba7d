//! `gamepilot eval`'s IO: for each labelled decision point, perceive its frame as the tactical
//! thread does (PP-OCR, elements, marks), assemble the tactical prompt a fresh `run` session would send
//! for the point's goal (the same context, tools and schema), ask the model host, and score the reply
//! with `gamepilot_session::eval`.

use crate::RuntimeError;
use gamepilot_core::{ElementId, MonoTime, Size};
use gamepilot_model::{CancelToken, ChatRequest, HostClient};
use gamepilot_session::eval::{judge, DecisionPoint, PointResult};
use gamepilot_session::relevance::Focus;
use gamepilot_session::{observation_for_model, session_tools, Session, SessionConfig};
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
}

/// A saved frame perceived as the tactical thread perceives it (PP-OCR, elements, stable ids).
pub fn perceive_image(path: &Path) -> Result<(gamepilot_vision::Observation, Size), RuntimeError> {
    let mut ocr = gamepilot_ocr::default_engine()?;
    perceive_with(&mut ocr, path)
}

fn perceive_with(
    ocr: &mut impl Ocr,
    path: &Path,
) -> Result<(gamepilot_vision::Observation, Size), RuntimeError> {
    perceive_next(ocr, &mut Perceiver::new(), path, MonoTime::ZERO)
}

fn perceive_next(
    ocr: &mut impl Ocr,
    perceiver: &mut Perceiver,
    path: &Path,
    at: MonoTime,
) -> Result<(gamepilot_vision::Observation, Size), RuntimeError> {
    let frame = crate::load_image(path)?;
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
) -> Result<Vec<(gamepilot_vision::Observation, Size)>, RuntimeError> {
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
        &obs.to_text_listing(&order, cfg.observation_max_elements),
        Default::default(),
        cfg.observation_max_bytes,
    )
}

/// Score every point; a point whose frame cannot be read is an error, a host failure is an invalid
/// (and wrong) reply. `progress` hears each result as it is scored.
pub fn evaluate(
    setup: &EvalSetup<'_>,
    points: &[DecisionPoint],
    mut progress: impl FnMut(&PointResult),
) -> Result<Vec<PointResult>, RuntimeError> {
    let mut ocr = gamepilot_ocr::default_engine()?;
    let tools = ToolSet::new(&session_tools(false))?;
    let cancel = CancelToken::new();
    let mut out = Vec::with_capacity(points.len());
    let base = SessionConfig {
        postconditions: vec!["goal".into()],
        ..SessionConfig::default()
    };
    let mut perceived: Option<(String, Size, gamepilot_vision::Observation)> = None;
    for point in points {
        // Points of one frame stand together in the corpus: the frame is perceived once for all of them.
        if perceived.as_ref().is_none_or(|(name, _, _)| *name != point.frame) {
            let (obs, size) = perceive_with(&mut ocr, &setup.frames.join(&point.frame))?;
            perceived = Some((point.frame.clone(), size, obs));
        }
        let Some((_, size, obs)) = perceived.as_ref() else {
            continue;
        };
        // The context of a fresh session for this goal: the prefix `run` sends, byte for byte.
        let cfg = SessionConfig {
            goal: point.goal.clone(),
            ..base.clone()
        };
        let text = text_for_model(obs, &Focus::new(point.goal.clone(), ""), &cfg);
        let session = Session::new(cfg, MonoTime::ZERO).map_err(|e| RuntimeError::Eval(e.to_string()))?;
        let prompt = session.context().assemble(
            Cadence::Tactical,
            &ObservationText::new(MonoTime::ZERO, text),
            None,
        );
        let marks: Vec<ElementId> = obs.elements.iter().map(|e| e.id).collect();
        let schema = tactical_schema(&tools, &marks, *size, &SchemaLimits::default())?;
        let chat = ChatRequest::from_prompt(setup.model_name, &prompt, setup.max_tokens);
        if let Some(dir) = setup.prompts {
            write_prompt(dir, out.len(), &point.id, &chat)?;
        }
        let result = match setup.client.chat_structured(&chat, &schema, &cancel) {
            Ok(r) => {
                let t = &r.reply.timings;
                let parsed = TacticalReply::parse(&r.value, &schema);
                PointResult {
                    id: point.id.clone(),
                    kind: point.kind.clone(),
                    valid: parsed.is_ok(),
                    correct: parsed.as_ref().is_ok_and(|reply| judge(reply, obs, point)),
                    latency_ms: t.wall_ms,
                    prompt_tokens: t.prompt_tokens.unwrap_or(0),
                    cached_tokens: t.cached_tokens.unwrap_or(0),
                    reply: r.reply.content.clone(),
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
            },
        };
        progress(&result);
        out.push(result);
    }
    Ok(out)
}

/// One point's prompt as text: the point's id, then each message's role and content.
fn write_prompt(dir: &Path, index: usize, id: &str, chat: &ChatRequest) -> Result<(), RuntimeError> {
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
        .map_err(|e| RuntimeError::Eval(format!("writing the prompt of {id} to {}: {e}", dir.display())))
}
