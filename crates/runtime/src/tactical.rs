//! The tactical cadence of `gamepilot run`: observe (full frame on demand, OCR, elements, marks), assemble
//! the context, build this tick's output schema from the marks present now (FR-MODEL-003, FR-GND-003),
//! call the model, and hand back one schema-checked reply. Runs on its own thread. A two-stage tick makes
//! a cheap localising call over the downscaled frame first, then the acting call on the crop (FR-GND-005).

use crate::now;
use crate::refine;
use crate::RuntimeError;
use gamepilot_context::{
    localise_schema, parse_localise, tactical_schema, tactical_schema_with_targets, ImagePart,
    ObservationText, SchemaLimits, TacticalReply, ToolSet,
};
use gamepilot_core::{CoordConvention, CoordSpace, ElementId, Frame, FrameView, MonoTime, Point, Rect, Size};
use gamepilot_model::{CancelToken, ChatRequest, HostClient, ModelError};
use gamepilot_session::{
    observation_for_model, FailureKind, ModelReply, TacticalFailure, TacticalJob, TacticalOutcome,
};
use gamepilot_vision::{MarkRenderer, Observation, Ocr, Perceiver, Thumb};
use gamepilot_x11::{WindowCapturer, X11};
use std::sync::mpsc::{Receiver, SyncSender};

/// One tactical tick's request from the loop thread: the session's job.
pub struct TacticalRequest {
    pub job: TacticalJob,
}

/// What a tactical tick produced: the session's typed outcome, and what the recording keeps of it.
pub struct TacticalResult {
    pub outcome: TacticalOutcome,
    /// The frame the tick observed and its marked version (for the recording); `None` when capture failed.
    pub frame: Option<Frame>,
    pub marked: Option<image::RgbaImage>,
    pub prompt_json: serde_json::Value,
    pub prefix_bytes: u64,
    pub schema: serde_json::Value,
    /// Present when the tick grounded in two stages (FR-GND-005).
    pub refinement: Option<Refinement>,
}

impl TacticalResult {
    /// The result of a tick that captured `frame`, before any model call is recorded into it.
    fn seen(outcome: TacticalOutcome, frame: Frame, marked: Option<image::RgbaImage>) -> TacticalResult {
        TacticalResult {
            outcome,
            frame: Some(frame),
            marked,
            prompt_json: serde_json::Value::Null,
            prefix_bytes: 0,
            schema: serde_json::Value::Null,
            refinement: None,
        }
    }
}

pub struct TacticalSetup {
    /// The session's template atlas (the one the reflex's `template_present` reads): its templates are
    /// proposed as elements wherever they are found.
    pub templates: std::sync::Arc<gamepilot_sensor::Atlas>,
    pub display: Option<String>,
    pub window: u32,
    pub client: HostClient,
    pub model_name: String,
    pub limits: SchemaLimits,
    pub max_tokens: u32,
}

/// The session's failure kind for a model error: a host that refuses the prompt as larger than its
/// context is told apart from every other failure, so the session shrinks the prompt (FR-CTX-004).
pub fn failure_of(e: &ModelError, latency_ms: f64) -> TacticalFailure {
    let kind = match e {
        ModelError::Http { status, body, .. }
            if (*status == 400 || *status == 413)
                && (body.contains("context") || body.contains("exceed") || body.contains("too long")) =>
        {
            FailureKind::ContextOverflow
        }
        ModelError::SchemaBroken { .. } => FailureKind::SchemaBroken,
        ModelError::Timeout { .. } => FailureKind::Timeout,
        ModelError::Cancelled => FailureKind::Cancelled,
        _ => FailureKind::Host,
    };
    TacticalFailure {
        kind,
        message: e.to_string(),
        latency_ms,
    }
}

fn other_failure(kind: FailureKind, message: String) -> TacticalFailure {
    TacticalFailure {
        kind,
        message,
        latency_ms: 0.0,
    }
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
    tx: SyncSender<TacticalResult>,
    cancel: CancelToken,
) -> Result<(), RuntimeError> {
    let x = X11::connect(setup.display.as_deref())?;
    let mut capturer = WindowCapturer::new(&x, setup.window)?;
    let mut perceiver = Perceiver::new();
    perceiver.atlas = setup.templates.clone();
    // No OCR, no screen text: the destructive-action hold would never see a dialogue (FR-SAFE-005), so the
    // thread ends, named, rather than perceive without it.
    let mut ocr = gamepilot_ocr::default_engine()?;
    let marks = mark_font();
    let a11y = AccessibilityFeed::start(setup.window);
    // The previous tick's frame and element boxes: a perceive-only tick measures how they moved.
    let mut previous: Option<(Frame, Vec<gamepilot_core::Rect>)> = None;
    // The game's dialogs asked to move over its window, each once.
    let mut moved: Vec<u32> = Vec::new();
    while let Ok(TacticalRequest { job: req }) = rx.recv() {
        if cancel.is_cancelled() {
            break;
        }
        // A dialog of the game placed away from its window is outside capture space: the window manager
        // is asked to move it over the game, where the agent (and the person watching) sees it.
        for d in x.stray_dialogs(setup.window).unwrap_or_default() {
            if !moved.contains(&d) && x.centre_over(d, setup.window).is_ok() {
                moved.push(d);
                crate::say!(
                    "moved the game's dialog \"{}\" (0x{d:x}) over its window, where capture sees it",
                    x.window_title(d)
                );
            }
        }
        let started = now();
        // A capture error is this tick's failure, never the thread's end: the session hears of it and the
        // next tick captures again.
        let frame = match capturer.capture(&x, started) {
            Ok(f) => f,
            Err(e) => {
                let failed = perception_failed(req.tick, started, &format!("capture failed: {e}"));
                if tx.send(failed).is_err() {
                    break;
                }
                capturer = match WindowCapturer::new(&x, setup.window) {
                    Ok(c) => c,
                    Err(_) => continue,
                };
                continue;
            }
        };
        let view = frame.view();
        let class = perceiver.classify_thumb(Thumb::from_view(&view, 160)).class;
        // A recognition that fails is this tick's named failure: acting on a screen read as empty could
        // answer a dialogue nobody read.
        let texts = match ocr.recognize(&view, view.bounds()) {
            Ok(texts) => texts,
            Err(e) => {
                let failed = perception_failed(req.tick, started, &format!("OCR failed: {e}"));
                if tx.send(failed).is_err() {
                    break;
                }
                continue;
            }
        };
        // FR-PERC-010: the accessibility tree's elements, where the target exposes one, replace the visual
        // boxes of the same elements; the probe runs on its own thread and this tick waits for it at most
        // its bound (never the reflex).
        let tree = a11y.candidates(&x, Size::new(frame.width, frame.height));
        let mut observation = perceiver.observe_with_accessibility(&view, started, class, &texts, &tree);
        observation.place_layers(&capturer.layers());
        let marked = marks.as_ref().map(|m| m.render(&view, &observation.elements).0);
        let present: Vec<ElementId> = observation
            .elements
            .iter()
            .map(|e| e.id)
            .filter(|id| !req.excluded_marks.contains(id))
            .collect();
        // What the model reads: goal words first, then (avatar known) places nearest it.
        let order = gamepilot_session::relevance::model_order(&observation, &req.focus, req.avatar.as_ref());
        let move_targets: Vec<ElementId> = req
            .avatar
            .as_ref()
            .map(|a| gamepilot_session::selfid::move_targets(&observation, a))
            .unwrap_or_default();
        let mut listing = observation.to_text_listing(&order, req.observation_max_elements);
        if let Some(line) = &req.sensors {
            listing = format!("{listing}{line}\n");
        }
        let observation_text = observation_for_model(&listing, req.health, req.observation_max_bytes);
        // The frame (3.7 MB at 1280x720) is copied only while self-identification may still probe.
        let before = if req.keep_frame {
            let mut boxes: Vec<gamepilot_core::Rect> = observation.elements.iter().map(|e| e.bbox).collect();
            boxes.push(gamepilot_vision::track::view_centre_box(observation.frame_size));
            previous.replace((frame.clone(), boxes))
        } else {
            previous.take()
        };
        // The subgoal names the one element labelled so: the session clicks it without a model call.
        let direct = req.direct.as_deref().and_then(|name| {
            gamepilot_session::direct::direct_target(&observation, name, &req.excluded_marks)
        });
        if req.perceive_only || direct.is_some() {
            // Self-identification's frame after a probe hold (or a subgoal grounded directly): perceived,
            // no model call; each element of the previous frame searched for nearby in this one.
            let moves = match &before {
                Some((f, b)) if f.width == frame.width && f.height == frame.height => {
                    gamepilot_vision::track::moves(&f.view(), b, &view, PROBE_SEARCH_PX)
                }
                _ => Vec::new(),
            };
            let outcome = TacticalOutcome {
                tick: req.tick,
                started,
                observation,
                observation_text,
                crop: None,
                reply: Err(TacticalFailure {
                    kind: FailureKind::NotAsked,
                    message: match direct {
                        Some(mark) => format!("the subgoal names mark {mark}'s label: no model call"),
                        None => "perceive-only tick".into(),
                    },
                    latency_ms: 0.0,
                }),
                moves,
                tail: None,
            };
            if tx.send(TacticalResult::seen(outcome, frame, marked)).is_err() {
                break;
            }
            continue;
        }
        let tools = &ToolSet::new(&req.tools)?;
        let call = |text: String, image: Option<ImagePart>, schema: &serde_json::Value| -> ModelCall {
            let (prompt, tail) = req
                .context
                .assemble_tactical(&ObservationText::new(started, text), image);
            let prefix_bytes = prompt
                .messages
                .first()
                .map(|m| m.joined_text().len() as u64)
                .unwrap_or(0);
            let chat = ChatRequest::from_prompt(&setup.model_name, &prompt, setup.max_tokens);
            ModelCall {
                tail,
                prompt_json: chat.body_for(setup.client.kind()),
                prefix_bytes,
                reply: setup.client.chat_structured(&chat, schema, &cancel),
            }
        };
        let image_of = |src: Option<&image::RgbaImage>, fallback: &FrameView<'_>, pixels: u64| {
            let f = src.and_then(|m| Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), started));
            let v = f.as_ref().map(|f| f.view()).unwrap_or(*fallback);
            gamepilot_model::budget::encode_for_budget(&v, pixels).ok()
        };
        let mut refinement = None;
        let capture = Size::new(frame.width, frame.height);
        // The two-stage path maps its crop's coordinates itself; a single call answers in `space`.
        let mut space = CoordSpace::capture(capture);
        let mut model_observation_text = None;
        let outcome: Result<(serde_json::Value, ModelCall), TacticalFailure> = if req.two_stage {
            // FR-GND-005: the cheap pass localises over the whole frame downscaled (a quarter of the
            // visual budget), the expensive pass acts on the magnified crop around its point.
            let cheap = refine::cheap_size(view.size());
            let cheap_obs = refine::cheap_observation(&observation, cheap);
            (|| {
                let loc_schema =
                    localise_schema(cheap).map_err(|e| other_failure(FailureKind::Host, e.to_string()))?;
                let image = req
                    .with_image
                    .then(|| image_of(marked.as_ref(), &view, req.visual_pixels / 4))
                    .flatten();
                let first = call(refine::cheap_prompt_text(&cheap_obs), image, &loc_schema);
                let (point, first_text) = match &first.reply {
                    Ok(r) => (
                        parse_localise(&r.value, &loc_schema).map_err(|e| {
                            other_failure(FailureKind::SchemaBroken, format!("localise pass: {e}"))
                        })?,
                        r.reply.content.clone(),
                    ),
                    Err(e) => {
                        let mut f = failure_of(e, 0.0);
                        f.message = format!("localise pass: {}", f.message);
                        return Err(f);
                    }
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
                    &mut ocr,
                    &excluded,
                    started,
                )
                .map_err(|e| other_failure(FailureKind::Perception, e))?;
                let crop_marks: Vec<ElementId> = cv.in_crop.elements.iter().map(|e| e.id).collect();
                let schema = tactical_schema(tools, &crop_marks, cv.size(), &setup.limits)
                    .map_err(|e| other_failure(FailureKind::Host, e.to_string()))?;
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
            // The image is encoded first, at the visual budget; a model that sees it answers in
            // its family's convention over the image actually sent, and the observation's boxes are written
            // in the same numbers.
            let image = req
                .with_image
                .then(|| image_of(marked.as_ref(), &view, req.visual_pixels))
                .flatten();
            if let Some(img) = &image {
                space = CoordSpace::new(req.coords, Size::new(img.width, img.height), capture);
            }
            let text = if space.convention == CoordConvention::CapturePixels {
                observation_text.clone()
            } else {
                let scaled = refine::cheap_observation(&observation, space.text_size());
                let t = observation_for_model(
                    &format!(
                        "{}\n{}",
                        space.describe(),
                        scaled.to_text_listing(&order, req.observation_max_elements)
                    ),
                    req.health,
                    req.observation_max_bytes,
                );
                model_observation_text = Some(t.clone());
                t
            };
            tactical_schema_with_targets(tools, &present, &move_targets, &space, &setup.limits)
                .map_err(|e| other_failure(FailureKind::Host, e.to_string()))
                .map(|schema| {
                    let c = call(text, image, &schema);
                    (schema, c)
                })
        };
        let mut result = TacticalResult::seen(
            TacticalOutcome {
                tick: req.tick,
                started,
                observation,
                observation_text: model_observation_text.unwrap_or(observation_text),
                crop: None,
                reply: Err(other_failure(FailureKind::Host, String::new())),
                moves: Vec::new(),
                tail: None,
            },
            frame,
            marked,
        );
        let localise = refinement
            .as_ref()
            .and_then(|rf| rf.localise_timings.as_ref())
            .map(|t| {
                (
                    t.wall_ms,
                    t.prompt_tokens.unwrap_or(0),
                    t.completion_tokens.unwrap_or(0),
                    t.cached_tokens.unwrap_or(0),
                )
            })
            .unwrap_or_default();
        result.outcome.reply = match outcome {
            Err(e) => Err(e),
            Ok((schema, c)) => {
                result.prompt_json = c.prompt_json;
                result.prefix_bytes = c.prefix_bytes;
                result.outcome.tail = Some(c.tail);
                let reply = match c.reply {
                    Err(e) => Err(failure_of(&e, localise.0)),
                    Ok(r) => {
                        let t = &r.reply.timings;
                        let parsed = TacticalReply::parse_in(&r.value, &schema, &space)
                            .map_err(|e| other_failure(FailureKind::SchemaBroken, e.to_string()));
                        let parsed = match (&refinement, parsed) {
                            (Some(rf), Ok(p)) => rf
                                .crop_view
                                .reply_to_capture(p)
                                .map_err(|e| other_failure(FailureKind::SchemaBroken, e)),
                            (_, p) => p,
                        };
                        parsed.map(|reply| ModelReply {
                            reply,
                            text: r.reply.content.clone(),
                            latency_ms: t.wall_ms + localise.0,
                            tokens_in: t.prompt_tokens.unwrap_or(0) + localise.1,
                            tokens_out: t.completion_tokens.unwrap_or(0) + localise.2,
                            cached_tokens: t.cached_tokens.unwrap_or(0) + localise.3,
                        })
                    }
                };
                result.schema = schema;
                reply
            }
        };
        result.outcome.crop = refinement.as_ref().map(|rf| rf.crop_view.in_capture.clone());
        result.refinement = refinement;
        if tx.send(result).is_err() {
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
    /// The prompt's tail, committed to the session's context with the outcome.
    tail: gamepilot_context::TacticalTail,
    prompt_json: serde_json::Value,
    prefix_bytes: u64,
    reply: Result<gamepilot_model::StructuredReply, ModelError>,
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

/// How far a perceive-only tick looks for each element of the frame before (a 300 ms probe hold at
/// 200 px/s moves the practice game's world 60 px).
const PROBE_SEARCH_PX: u32 = 90;

/// A tick whose capture failed: an empty observation that says so, and a perception failure.
/// A tick whose perception failed (`detail` says how): no observation, a `Perception` failure for the session.
fn perception_failed(tick: u64, started: MonoTime, detail: &str) -> TacticalResult {
    let observation = Observation {
        at: started,
        frame_size: Size::new(0, 0),
        class: gamepilot_vision::FrameChange::Unchanged,
        texts: Vec::new(),
        elements: Vec::new(),
    };
    TacticalResult {
        outcome: TacticalOutcome {
            tick,
            started,
            observation,
            observation_text: format!("({detail})"),
            crop: None,
            reply: Err(other_failure(FailureKind::Perception, detail.to_string())),
            moves: Vec::new(),
            tail: None,
        },
        frame: None,
        marked: None,
        prompt_json: serde_json::Value::Null,
        prefix_bytes: 0,
        schema: serde_json::Value::Null,
        refinement: None,
    }
}

/// Record a two-stage tick's cheap pass and crop (FR-GND-005): the localising prompt and reply under the
/// cadence `tactical_localise`, and the marked crop as a marked frame.
pub fn record_refinement(
    rec: &mut gamepilot_recording::Recorder,
    t: MonoTime,
    tick: u64,
    rf: &Refinement,
) -> Result<(), RuntimeError> {
    use gamepilot_recording::Record;
    if let Some(m) = rf.marked_crop.as_ref() {
        if let Some(mf) = Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), t) {
            rec.frame(t, &mf.view(), true, "crop")?;
        }
    }
    rec.record(
        t,
        Record::Prompt {
            cadence: "tactical_localise".into(),
            call: tick,
            prefix_bytes: 0,
            messages: serde_json::json!({
                "request": rf.localise_prompt_json,
                "schema": rf.localise_schema,
                "cheap_size": rf.cheap_size,
                "crop": rf.crop,
                "expensive_size": rf.expensive_size,
                "crop_marks": rf.crop_view.in_capture.elements,
            }),
        },
    )?;
    let timings = rf.localise_timings.as_ref();
    rec.record(
        t,
        Record::Reply {
            cadence: "tactical_localise".into(),
            call: tick,
            latency_ms: timings.map(|t| t.wall_ms).unwrap_or(0.0),
            tokens_in: timings.and_then(|t| t.prompt_tokens).unwrap_or(0),
            tokens_out: timings.and_then(|t| t.completion_tokens).unwrap_or(0),
            text: format!(
                "{} -> point [{}, {}] of {}x{}, crop {:?}",
                rf.localise_reply,
                rf.cheap_point.x,
                rf.cheap_point.y,
                rf.cheap_size.w,
                rf.cheap_size.h,
                rf.crop
            ),
        },
    )?;
    Ok(())
}
