//! The tactical cadence of `gamepilot run`: observe (full frame on demand, OCR, elements, marks), assemble
//! the context, build this tick's output schema from the marks present now (FR-MODEL-003, FR-GND-003),
//! call the model, and hand back one schema-checked reply. Runs on its own thread. A two-stage tick makes
//! a cheap localising call over the downscaled frame first, then the acting call on the crop (FR-GND-005).

use super::refine;
use crate::cmd::common::now;
use gamepilot_context::{
    localise_schema, parse_localise, tactical_schema, Cadence, Context, ImagePart, ObservationText,
    SchemaLimits, TacticalReply, ToolSet,
};
use gamepilot_core::{ElementId, Frame, FrameView, MonoTime, Point, Rect, Size};
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
    /// Ground in two stages: localise over the downscaled frame, then act on the crop (FR-GND-005).
    pub two_stage: bool,
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
    /// Present when the tick grounded in two stages (FR-GND-005).
    pub refinement: Option<Refinement>,
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
    let mut ocr = gamepilot_ocr::default_engine().ok();
    let marks = mark_font();
    let a11y = AccessibilityFeed::start(setup.window);
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
        // FR-PERC-010: the accessibility tree's elements, where the target exposes one, replace the visual
        // boxes of the same elements; the probe runs on its own thread and this tick waits for it at most
        // its bound (never the reflex).
        let tree = a11y.candidates(&x, Size::new(frame.width, frame.height));
        let observation = perceiver.observe_with_accessibility(&view, started, class, &texts, &tree);
        let marked = marks.as_ref().map(|m| m.render(&view, &observation.elements).0);
        let present: Vec<ElementId> = observation
            .elements
            .iter()
            .map(|e| e.id)
            .filter(|id| !req.excluded_marks.contains(id))
            .collect();
        let observation_text = observation.to_text();
        let tools = req.tools.as_ref().unwrap_or(&setup.tools);
        let call = |text: String, image: Option<ImagePart>, schema: &serde_json::Value| -> ModelCall {
            let prompt = req
                .context
                .assemble(Cadence::Tactical, &ObservationText::new(started, text), image);
            let prefix_bytes = prompt
                .messages
                .first()
                .map(|m| m.joined_text().len() as u64)
                .unwrap_or(0);
            let chat = ChatRequest::from_prompt(&setup.model_name, &prompt, setup.max_tokens);
            ModelCall {
                prompt_json: chat.body(),
                prefix_bytes,
                reply: setup
                    .client
                    .chat_structured(&chat, schema, &cancel)
                    .map_err(|e| e.to_string()),
            }
        };
        let image_of = |src: Option<&image::RgbaImage>, fallback: &FrameView<'_>, pixels: u64| {
            let f = src.and_then(|m| Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), started));
            let v = f.as_ref().map(|f| f.view()).unwrap_or(*fallback);
            gamepilot_model::budget::encode_for_budget(&v, pixels).ok()
        };
        let mut refinement = None;
        let outcome: Result<(serde_json::Value, ModelCall), String> = if req.two_stage {
            // FR-GND-005: the cheap pass localises over the whole frame downscaled (a quarter of the
            // visual budget), the expensive pass acts on the magnified crop around its point.
            let cheap = refine::cheap_size(view.size());
            let cheap_obs = refine::cheap_observation(&observation, cheap);
            (|| {
                let loc_schema = localise_schema(cheap).map_err(|e| e.to_string())?;
                let image = req
                    .with_image
                    .then(|| image_of(marked.as_ref(), &view, req.visual_pixels / 4))
                    .flatten();
                let first = call(refine::cheap_prompt_text(&cheap_obs), image, &loc_schema);
                let (point, first_text) = match &first.reply {
                    Ok(r) => (
                        parse_localise(&r.value, &loc_schema).map_err(|e| format!("localise pass: {e}"))?,
                        r.reply.content.clone(),
                    ),
                    Err(e) => return Err(format!("localise pass: {e}")),
                };
                let excluded: Vec<Rect> = req
                    .excluded_marks
                    .iter()
                    .filter_map(|id| observation.element(*id).map(|e| e.bbox))
                    .collect();
                let whole = refine::WholeFrame {
                    view,
                    lines: &texts,
                    observation: &observation,
                };
                let cv = refine::observe_crop(
                    &whole,
                    point,
                    cheap,
                    req.visual_pixels,
                    ocr.as_mut(),
                    &excluded,
                    started,
                )?;
                let crop_marks: Vec<ElementId> = cv.in_crop.elements.iter().map(|e| e.id).collect();
                let schema = tactical_schema(tools, &crop_marks, cv.size(), &setup.limits)
                    .map_err(|e| e.to_string())?;
                let crop_marked = marks
                    .as_ref()
                    .map(|m| m.render(&cv.frame.view(), &cv.in_crop.elements).0);
                let image = req
                    .with_image
                    .then(|| image_of(crop_marked.as_ref(), &cv.frame.view(), req.visual_pixels))
                    .flatten();
                let second = call(cv.prompt_text(), image, &schema);
                refinement = Some(Refinement {
                    crop: cv.crop.region,
                    cheap_point: point,
                    cheap_size: cheap,
                    expensive_size: cv.size(),
                    localise_prompt_json: first.prompt_json,
                    localise_schema: loc_schema,
                    localise_reply: first_text,
                    localise_timings: first.reply.ok().map(|r| r.reply.timings),
                    marked_crop: crop_marked,
                    crop_view: cv,
                });
                Ok((schema, second))
            })()
        } else {
            tactical_schema(
                tools,
                &present,
                Size::new(frame.width, frame.height),
                &setup.limits,
            )
            .map_err(|e| e.to_string())
            .map(|schema| {
                let image = req
                    .with_image
                    .then(|| image_of(marked.as_ref(), &view, req.visual_pixels))
                    .flatten();
                let c = call(observation_text.clone(), image, &schema);
                (schema, c)
            })
        };
        let mut out = TacticalResult {
            tick: req.tick,
            observation,
            observation_text,
            frame,
            marked,
            prompt_json: serde_json::Value::Null,
            prefix_bytes: 0,
            schema: serde_json::Value::Null,
            reply: Err(String::new()),
            latency_ms: 0.0,
            tokens_in: 0,
            tokens_out: 0,
            cached_tokens: 0,
            started,
            refinement: None,
        };
        match outcome {
            Err(e) => out.reply = Err(e),
            Ok((schema, c)) => {
                out.prompt_json = c.prompt_json;
                out.prefix_bytes = c.prefix_bytes;
                match c.reply {
                    Err(e) => out.reply = Err(e),
                    Ok(r) => {
                        let t = &r.reply.timings;
                        out.latency_ms = t.wall_ms;
                        out.tokens_in = t.prompt_tokens.unwrap_or(0);
                        out.tokens_out = t.completion_tokens.unwrap_or(0);
                        out.cached_tokens = t.cached_tokens.unwrap_or(0);
                        let parsed = TacticalReply::parse(&r.value, &schema).map_err(|e| e.to_string());
                        out.reply = match (&refinement, parsed) {
                            (Some(rf), Ok(p)) => rf
                                .crop_view
                                .reply_to_capture(p)
                                .map(|p| (p, r.reply.content.clone())),
                            (_, p) => p.map(|p| (p, r.reply.content.clone())),
                        };
                    }
                }
                out.schema = schema;
            }
        }
        if let Some(rf) = &refinement {
            if let Some(t) = &rf.localise_timings {
                out.latency_ms += t.wall_ms;
                out.tokens_in += t.prompt_tokens.unwrap_or(0);
                out.tokens_out += t.completion_tokens.unwrap_or(0);
                out.cached_tokens += t.cached_tokens.unwrap_or(0);
            }
        }
        out.refinement = refinement;
        if tx.send(out).is_err() {
            break;
        }
    }
    capturer.close(&x);
    Ok(())
}

/// The accessibility probe of the target window, fed from the tactical thread (FR-PERC-010).
struct AccessibilityFeed {
    window: u32,
    worker: Option<gamepilot_a11y::A11yWorker>,
    bound: std::time::Duration,
}

impl AccessibilityFeed {
    fn start(window: u32) -> AccessibilityFeed {
        let config = gamepilot_a11y::A11yConfig::default();
        let bound = config.limits.timeout;
        AccessibilityFeed {
            window,
            // No session bus means no tree to ask: skip the worker rather than probe and fail each tick.
            worker: config
                .session_address()
                .ok()
                .and_then(|_| gamepilot_a11y::A11yWorker::spawn(config).ok()),
            bound,
        }
    }

    /// Ask for a fresh probe and wait for it at most the probe's bound; the elements of the newest report
    /// whose transform chain is still the window's current one (boxes of a moved window are dropped).
    fn candidates(&self, x: &X11, capture: Size) -> Vec<gamepilot_vision::Candidate> {
        let Some(worker) = &self.worker else {
            return Vec::new();
        };
        let Ok(target) = gamepilot_a11y::A11yTarget::from_window(x, self.window) else {
            return Vec::new();
        };
        let target = target.with_capture_size(capture);
        let Ok(seq) = worker.request_refresh(target) else {
            return Vec::new();
        };
        let deadline = std::time::Instant::now() + self.bound + std::time::Duration::from_millis(50);
        while worker.latest().is_none_or(|r| r.seq < seq) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        match worker.latest() {
            Some(r) if r.window == self.window && r.generation == target.chain.generation => {
                match &r.result {
                    Ok(snap) => snap.candidates(),
                    Err(_) => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }
}

/// One model call of a tactical tick.
struct ModelCall {
    prompt_json: serde_json::Value,
    prefix_bytes: u64,
    reply: Result<gamepilot_model::StructuredReply, String>,
}

/// The cheap pass and the crop of a two-stage tick (FR-GND-005), for grounding and the recording.
pub struct Refinement {
    pub crop: Rect,
    /// The cheap pass's answer, in the downscaled frame of `cheap_size`.
    pub cheap_point: Point,
    pub cheap_size: Size,
    pub expensive_size: Size,
    pub localise_prompt_json: serde_json::Value,
    pub localise_schema: serde_json::Value,
    pub localise_reply: String,
    pub localise_timings: Option<gamepilot_model::CallTimings>,
    /// The magnified crop with its marks (what a vision model was shown).
    pub marked_crop: Option<image::RgbaImage>,
    /// The crop's observation; `crop_view.in_capture` resolves the expensive pass's marks.
    pub crop_view: refine::CropView,
}
