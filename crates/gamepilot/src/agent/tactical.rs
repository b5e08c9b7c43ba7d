//! The tactical cadence of `gamepilot run`: observe (full frame on demand, OCR, elements, marks), assemble
//! the context, build this tick's output schema from the marks present now (FR-MODEL-003, FR-GND-003),
//! call the model, and hand back one schema-checked reply. Runs on its own thread.

use crate::cmd::common::now;
use gamepilot_context::{
    tactical_schema, Cadence, Context, ObservationText, SchemaLimits, TacticalReply, ToolSet,
};
use gamepilot_core::{ElementId, Frame, MonoTime, Size};
use gamepilot_model::{CancelToken, ChatRequest, HostClient};
use gamepilot_vision::{MarkRenderer, Observation, Ocr, Perceiver, Thumb};
use gamepilot_x11::{WindowCapturer, X11};
use std::sync::mpsc::{Receiver, Sender};

/// One tactical tick's request from the loop thread.
pub struct TacticalRequest {
    pub tick: u64,
    /// A copy of the session context (blocks 1–7) as of now.
    pub context: Context,
    /// Marks that grounding suppressed this tick (refuted recently, FR-GND-007).
    pub excluded_marks: Vec<ElementId>,
    pub with_image: bool,
    pub visual_pixels: u64,
    /// The tools this tick offers: the grounding path chosen for the scene (FR-GND-004) narrows them.
    pub tools: Option<ToolSet>,
}

/// What a tactical tick produced.
pub struct TacticalResult {
    pub tick: u64,
    pub observation: Observation,
    pub observation_text: String,
    /// The frame the tick observed and its marked version (for the recording).
    pub frame: Frame,
    pub marked: Option<image::RgbaImage>,
    pub prompt_json: serde_json::Value,
    pub prefix_bytes: u64,
    pub schema: serde_json::Value,
    pub reply: Result<(TacticalReply, String), String>,
    pub latency_ms: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cached_tokens: u64,
    pub started: MonoTime,
}

pub struct TacticalSetup {
    pub display: Option<String>,
    pub window: u32,
    pub client: HostClient,
    pub model_name: String,
    pub tools: ToolSet,
    pub limits: SchemaLimits,
    pub max_tokens: u32,
}

fn mark_font() -> Option<MarkRenderer> {
    let path = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";
    std::fs::read(path)
        .ok()
        .and_then(|b| MarkRenderer::from_font_bytes(b).ok())
}

/// Serve tactical requests until the channel closes or `cancel` is set.
pub fn run(
    setup: TacticalSetup,
    rx: Receiver<TacticalRequest>,
    tx: Sender<TacticalResult>,
    cancel: CancelToken,
) -> anyhow::Result<()> {
    let x = X11::connect(setup.display.as_deref())?;
    let mut capturer = WindowCapturer::new(&x, setup.window)?;
    let mut perceiver = Perceiver::new();
    let mut ocr = gamepilot_ocr::TesseractOcr::new().ok();
    let marks = mark_font();
    while let Ok(req) = rx.recv() {
        if cancel.is_cancelled() {
            break;
        }
        let started = now();
        let frame = capturer.capture(&x, started)?;
        let view = frame.view();
        let class = perceiver.classify_thumb(Thumb::from_view(&view, 160)).class;
        let texts = match ocr.as_mut() {
            Some(o) => o.recognize(&view, view.bounds()).unwrap_or_default(),
            None => Vec::new(),
        };
        let observation = perceiver.observe(&view, started, class, &texts);
        let marked = marks.as_ref().map(|m| m.render(&view, &observation.elements).0);
        let present: Vec<ElementId> = observation
            .elements
            .iter()
            .map(|e| e.id)
            .filter(|id| !req.excluded_marks.contains(id))
            .collect();
        let observation_text = observation.to_text();
        let result = (|| -> Result<TacticalResultParts, String> {
            let schema = tactical_schema(
                req.tools.as_ref().unwrap_or(&setup.tools),
                &present,
                Size::new(frame.width, frame.height),
                &setup.limits,
            )
            .map_err(|e| e.to_string())?;
            let image = if req.with_image {
                let img_frame = marked
                    .as_ref()
                    .and_then(|m| Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), started));
                let src = img_frame.as_ref().map(|f| f.view()).unwrap_or(view);
                gamepilot_model::budget::encode_for_budget(&src, req.visual_pixels).ok()
            } else {
                None
            };
            let prompt = req.context.assemble(
                Cadence::Tactical,
                &ObservationText::new(started, observation_text.clone()),
                image,
            );
            let prefix_bytes = prompt
                .messages
                .first()
                .map(|m| m.joined_text().len() as u64)
                .unwrap_or(0);
            let chat = ChatRequest::from_prompt(&setup.model_name, &prompt, setup.max_tokens);
            let prompt_json = chat.body();
            let reply = setup.client.chat_structured(&chat, &schema, &cancel);
            Ok(TacticalResultParts {
                schema,
                prompt_json,
                prefix_bytes,
                reply: reply.map_err(|e| e.to_string()),
            })
        })();
        let (schema, prompt_json, prefix_bytes, reply, latency_ms, tokens_in, tokens_out, cached) =
            match result {
                Ok(parts) => match parts.reply {
                    Ok(r) => {
                        let t = r.reply.timings.clone();
                        let parsed = TacticalReply::parse(&r.value, &parts.schema)
                            .map(|p| (p, r.reply.content.clone()))
                            .map_err(|e| e.to_string());
                        (
                            parts.schema,
                            parts.prompt_json,
                            parts.prefix_bytes,
                            parsed,
                            t.wall_ms,
                            t.prompt_tokens.unwrap_or(0),
                            t.completion_tokens.unwrap_or(0),
                            t.cached_tokens.unwrap_or(0),
                        )
                    }
                    Err(e) => (
                        parts.schema,
                        parts.prompt_json,
                        parts.prefix_bytes,
                        Err(e),
                        0.0,
                        0,
                        0,
                        0,
                    ),
                },
                Err(e) => (
                    serde_json::Value::Null,
                    serde_json::Value::Null,
                    0,
                    Err(e),
                    0.0,
                    0,
                    0,
                    0,
                ),
            };
        let out = TacticalResult {
            tick: req.tick,
            observation,
            observation_text,
            frame,
            marked,
            prompt_json,
            prefix_bytes,
            schema,
            reply,
            latency_ms,
            tokens_in,
            tokens_out,
            cached_tokens: cached,
            started,
        };
        if tx.send(out).is_err() {
            break;
        }
    }
    capturer.close(&x);
    Ok(())
}

struct TacticalResultParts {
    schema: serde_json::Value,
    prompt_json: serde_json::Value,
    prefix_bytes: u64,
    reply: Result<gamepilot_model::StructuredReply, String>,
}
