//! The tactical cadence's thread: transport for the session's two-phase tick. On a job it captures the
//! frame (with the game's own popups and dialogs), perceives it (OCR, elements, marks, the accessibility
//! tree, FR-PERC-010) and reports the perception; on a call it attaches the picture the call names at
//! the size the session chose, sends the session's prompt with its schema (FR-MODEL-003), and reads the
//! reply as the call says; for a two-stage tick it perceives the region around the localising point
//! (FR-GND-005). What the model reads, and every prompt, is the session's (`gamepilot_session::tactical`).

use crate::now;
use crate::refine;
use crate::worker::Inbox;
use crate::RuntimeError;
use gamepilot_core::{Frame, FrameView, MonoTime, Size};
use gamepilot_model::{CancelToken, ChatRequest, HostClient, ModelError};
use gamepilot_session::tactical::{read_reply, Read};
use gamepilot_session::Prompt;
use gamepilot_session::{
    CropPerception, FailureKind, Input, ModelAnswer, ModelCall, ModelReply, PerceiveCrop, Perception,
    Picture, Reading, TacticalFailure, TacticalJob,
};
use gamepilot_vision::{MarkRenderer, Observation, Ocr, Perceiver, TextLine, Thumb};
use gamepilot_x11::{WindowCapturer, X11};
use std::sync::mpsc::{Receiver, SyncSender};

/// What the session's loop asks of the tactical thread.
pub enum TacticalRequest {
    /// Capture and perceive a tick's frame.
    Perceive(Box<TacticalJob>),
    /// Make one model call of the tick just perceived.
    Call(Box<ModelCall>),
    /// Perceive the region around a two-stage tick's localising point.
    Crop(PerceiveCrop),
}

/// What the tactical thread reports: the session's input, and what the recording keeps beside it.
pub struct TacticalReport {
    pub input: Input,
    pub keep: Kept,
}

/// What the recording keeps of a report (the session never reads it back).
pub enum Kept {
    /// The frame a tick perceived and its marked version.
    Frame {
        frame: Option<Frame>,
        marked: Option<image::RgbaImage>,
    },
    /// A call as sent (the request body, the schema, the system prompt's bytes) and its reply's text.
    Call {
        reading: Reading,
        prompt_json: serde_json::Value,
        prefix_bytes: u64,
        schema: serde_json::Value,
        reply_text: String,
    },
    /// A two-stage tick's region with its marks.
    Crop { marked: Option<image::RgbaImage> },
}

pub struct TacticalSetup {
    /// The session's template atlas (the one the reflex's `template_present` reads): its templates are
    /// proposed as elements wherever they are found.
    pub templates: std::sync::Arc<gamepilot_sensor::Atlas>,
    pub display: Option<String>,
    pub window: u32,
    pub client: HostClient,
    pub model_name: String,
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

fn failure(kind: FailureKind, message: String) -> TacticalFailure {
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

/// How far a perceive-only tick looks for each element of the frame before (a 300 ms probe hold at
/// 200 px/s moves the practice game's world 60 px).
const PROBE_SEARCH_PX: u32 = 90;

/// The tick being served: its frame and what perception made of it, kept for its calls and its crop.
struct Served {
    tick: u64,
    started: MonoTime,
    frame: Frame,
    marked: Option<image::RgbaImage>,
    texts: Vec<TextLine>,
    observation: Observation,
    /// A two-stage tick's region and its marked picture, once perceived.
    crop: Option<(refine::CropView, Option<image::RgbaImage>)>,
}

/// The game's window as the tactical thread sees it: its frame (with the game's own popups and
/// dialogs), where those lie, the accessibility tree's elements over it, and its dialogs brought over it.
/// `run` uses the X server's ([`X11Window`]); tests use frames made or loaded in memory.
pub trait GameWindow {
    /// Capture the window now; an error is this tick's, and the next capture starts afresh.
    fn capture(&mut self, at: MonoTime) -> Result<Frame, String>;
    /// Where the game's popups and dialogs lie in the last capture.
    fn layers(&self) -> Vec<gamepilot_core::LayerRegion>;
    /// The accessibility tree's elements over a capture of `capture`'s size (FR-PERC-010).
    fn accessibility(&mut self, capture: Size) -> Vec<gamepilot_vision::Candidate>;
    /// Ask for the game's dialogs placed away from its window to be moved over it; their titles.
    fn bring_dialogs_over(&mut self) -> Vec<String>;
}

/// The game's window on the X server.
pub struct X11Window {
    x: X11,
    window: u32,
    capturer: WindowCapturer,
    a11y: AccessibilityFeed,
    /// The game's dialogs asked to move over its window, each once.
    moved: Vec<u32>,
}

impl X11Window {
    pub fn open(display: Option<&str>, window: u32) -> Result<X11Window, RuntimeError> {
        let x = X11::connect(display)?;
        let capturer = WindowCapturer::new(&x, window)?;
        Ok(X11Window {
            x,
            window,
            capturer,
            a11y: AccessibilityFeed::start(window),
            moved: Vec::new(),
        })
    }

    fn close(self) {
        self.capturer.close(&self.x);
    }
}

impl GameWindow for X11Window {
    fn capture(&mut self, at: MonoTime) -> Result<Frame, String> {
        self.capturer.capture(&self.x, at).map_err(|e| {
            if let Ok(c) = WindowCapturer::new(&self.x, self.window) {
                std::mem::replace(&mut self.capturer, c).close(&self.x);
            }
            e.to_string()
        })
    }

    fn layers(&self) -> Vec<gamepilot_core::LayerRegion> {
        self.capturer.layers()
    }

    fn accessibility(&mut self, capture: Size) -> Vec<gamepilot_vision::Candidate> {
        self.a11y.candidates(&self.x, capture)
    }

    fn bring_dialogs_over(&mut self) -> Vec<String> {
        let mut titles = Vec::new();
        for d in self.x.stray_dialogs(self.window).unwrap_or_default() {
            if !self.moved.contains(&d) && self.x.centre_over(d, self.window).is_ok() {
                self.moved.push(d);
                titles.push(format!("\"{}\" (0x{d:x})", self.x.window_title(d)));
            }
        }
        titles
    }
}

/// The tactical thread's state between requests.
struct Tactical<W: GameWindow> {
    setup: TacticalSetup,
    window: W,
    perceiver: Perceiver,
    ocr: gamepilot_ocr::OcrEngine,
    marks: Option<MarkRenderer>,
    /// The previous tick's frame and element boxes: a perceive-only tick measures how they moved.
    previous: Option<(Frame, Vec<gamepilot_core::Rect>)>,
    served: Option<Served>,
}

/// Serve the session's tactical requests until the channel closes or `cancel` is set.
pub fn run(
    setup: TacticalSetup,
    rx: Receiver<TacticalRequest>,
    tx: SyncSender<Inbox>,
    cancel: CancelToken,
) -> Result<(), RuntimeError> {
    let window = X11Window::open(setup.display.as_deref(), setup.window)?;
    let mut perceiver = Perceiver::new();
    perceiver.atlas = setup.templates.clone();
    // No OCR, no screen text: the destructive-action hold would never see a dialogue (FR-SAFE-005), so the
    // thread ends, named, rather than perceive without it.
    let ocr = gamepilot_ocr::default_engine()?;
    let mut t = Tactical {
        setup,
        window,
        perceiver,
        ocr,
        marks: mark_font(),
        previous: None,
        served: None,
    };
    while let Ok(request) = rx.recv() {
        if cancel.is_cancelled() {
            break;
        }
        let report = match request {
            TacticalRequest::Perceive(job) => t.perceive(&job),
            TacticalRequest::Call(call) => t.call(*call, &cancel),
            TacticalRequest::Crop(c) => t.crop(&c),
        };
        if tx.send(Inbox::Tactical(Box::new(report))).is_err() {
            break;
        }
    }
    t.window.close();
    Ok(())
}

/// The report of a tick that could not go on: the session ends the tick with this failure.
fn failed(tick: u64, f: TacticalFailure) -> TacticalReport {
    TacticalReport {
        input: Input::Replied { tick, answer: Err(f) },
        keep: Kept::Frame {
            frame: None,
            marked: None,
        },
    }
}

impl<W: GameWindow> Tactical<W> {
    /// Capture and perceive the tick's frame.
    fn perceive(&mut self, job: &TacticalJob) -> TacticalReport {
        self.served = None;
        // A dialog of the game placed away from its window is outside capture space: the window manager
        // is asked to move it over the game, where the agent (and the person watching) sees it.
        for title in self.window.bring_dialogs_over() {
            crate::say!("moved the game's dialog {title} over its window, where capture sees it");
        }
        let started = now();
        // A capture error is this tick's failure, never the thread's end: the session hears of it and the
        // next tick captures again.
        let frame = match self.window.capture(started) {
            Ok(f) => f,
            Err(e) => {
                return failed(
                    job.tick,
                    failure(FailureKind::Perception, format!("capture failed: {e}")),
                )
            }
        };
        let view = frame.view();
        let class = self.perceiver.classify_thumb(Thumb::from_view(&view, 160)).class;
        // A recognition that fails is this tick's named failure: acting on a screen read as empty could
        // answer a dialogue nobody read.
        let read = if job.read_text {
            self.ocr.recognize(&view, view.bounds())
        } else {
            Ok(Vec::new())
        };
        let texts = match read {
            Ok(texts) => texts,
            Err(e) => {
                return failed(
                    job.tick,
                    failure(FailureKind::Perception, format!("OCR failed: {e}")),
                )
            }
        };
        // FR-PERC-010: the accessibility tree's elements, where the target exposes one, replace the visual
        // boxes of the same elements; the probe runs on its own thread and this tick waits for it at most
        // its bound (never the reflex).
        let tree = self.window.accessibility(Size::new(frame.width, frame.height));
        let mut observation = if job.read_text {
            self.perceiver
                .observe_with_accessibility(&view, started, class, &texts, &tree)
        } else {
            self.perceiver.observe_unread(&view, started, class, &tree)
        };
        observation.place_layers(&self.window.layers());
        // A frame whose text was not read is never shown to a model: no marks drawn on it (nor a marked copy
        // encoded into the recording).
        let marked = self
            .marks
            .as_ref()
            .filter(|_| job.read_text)
            .map(|m| m.render(&view, &observation.elements).0);
        // The frame (3.7 MB at 1280x720) is copied only while self-identification may still probe.
        let before = if job.keep_frame {
            let mut boxes: Vec<gamepilot_core::Rect> = observation.elements.iter().map(|e| e.bbox).collect();
            boxes.push(gamepilot_vision::track::view_centre_box(observation.frame_size));
            self.previous.replace((frame.clone(), boxes))
        } else {
            self.previous.take()
        };
        // Self-identification's frame after a probe hold: each element of the previous frame searched for
        // nearby in this one.
        let moves = match (&before, job.perceive_only) {
            (Some((f, b)), true) if f.width == frame.width && f.height == frame.height => {
                gamepilot_vision::track::moves(&f.view(), b, &view, PROBE_SEARCH_PX)
            }
            _ => Vec::new(),
        };
        let perception = Perception {
            tick: job.tick,
            started,
            observation: observation.clone(),
            moves,
        };
        self.served = Some(Served {
            tick: job.tick,
            started,
            frame: frame.clone(),
            marked: marked.clone(),
            texts,
            observation,
            crop: None,
        });
        TacticalReport {
            input: Input::Perceived(Box::new(perception)),
            keep: Kept::Frame {
                frame: Some(frame),
                marked,
            },
        }
    }

    /// The picture a call names, encoded at exactly the size the session chose.
    fn picture(
        &self,
        wanted: &gamepilot_session::ImageWanted,
    ) -> Result<gamepilot_session::ImagePart, String> {
        let size = wanted.size;
        let served = self
            .served
            .as_ref()
            .ok_or("no frame was perceived for this call")?;
        let (marked, plain) = match wanted.picture {
            Picture::Frame => (served.marked.as_ref(), &served.frame),
            Picture::Crop => {
                let (cv, marked) = served
                    .crop
                    .as_ref()
                    .ok_or("no region was perceived for this call")?;
                (marked.as_ref(), &cv.frame)
            }
        };
        let marked =
            marked.and_then(|m| Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), served.started));
        let view: FrameView<'_> = marked.as_ref().map(|f| f.view()).unwrap_or(plain.view());
        let image =
            gamepilot_model::budget::encode_for_budget(&view, wanted.pixels).map_err(|e| e.to_string())?;
        if (image.width, image.height) != (size.w, size.h) {
            return Err(format!(
                "the picture came out {}x{}, not the {}x{} the call was composed for",
                image.width, image.height, size.w, size.h
            ));
        }
        Ok(image)
    }

    /// Make one of the session's calls and read its reply as the call says.
    fn call(&mut self, call: ModelCall, cancel: &CancelToken) -> TacticalReport {
        let picture = call.image.map(|wanted| self.picture(&wanted));
        carry_call(
            &self.setup.client,
            &self.setup.model_name,
            self.setup.max_tokens,
            call,
            picture,
            cancel,
        )
    }

    /// Perceive the region around a two-stage tick's localising point.
    fn crop(&mut self, c: &PerceiveCrop) -> TacticalReport {
        let Some(served) = self.served.as_mut().filter(|s| s.tick == c.tick) else {
            return failed(
                c.tick,
                failure(
                    FailureKind::Perception,
                    "no frame was perceived for this crop".into(),
                ),
            );
        };
        let whole = refine::WholeFrame {
            view: served.frame.view(),
            lines: &served.texts,
            observation: &served.observation,
        };
        let cv = match refine::observe_crop(
            &whole,
            c.point,
            c.cheap,
            c.pixels,
            &mut self.ocr,
            &c.excluded,
            served.started,
        ) {
            Ok(cv) => cv,
            Err(e) => return failed(c.tick, failure(FailureKind::Perception, e)),
        };
        let marked = self
            .marks
            .as_ref()
            .map(|m| m.render(&cv.frame.view(), &cv.in_crop.elements).0);
        let perception = CropPerception {
            tick: c.tick,
            crop: cv.crop,
            size: cv.size(),
            in_crop: cv.in_crop.clone(),
            in_capture: cv.in_capture.clone(),
        };
        served.crop = Some((cv, marked.clone()));
        TacticalReport {
            input: Input::CropPerceived(Box::new(perception)),
            keep: Kept::Crop { marked },
        }
    }
}

/// Carry one of the session's calls: the picture (when the call names one) into the place its prompt
/// held, the prompt and schema to the host, the reply read as the call says (an action in capture space,
/// or a localising point) with what it cost. No X server is involved: the picture comes encoded.
pub fn carry_call(
    client: &HostClient,
    model_name: &str,
    max_tokens: u32,
    call: ModelCall,
    picture: Option<Result<gamepilot_session::ImagePart, String>>,
    cancel: &CancelToken,
) -> TacticalReport {
    let ModelCall {
        tick,
        mut prompt,
        schema,
        reading,
        ..
    } = call;
    let keep = |prompt_json, prefix_bytes, reply_text| Kept::Call {
        reading,
        prompt_json,
        prefix_bytes,
        schema: schema.clone(),
        reply_text,
    };
    match picture {
        Some(Ok(part)) => attach(&mut prompt, Some(part)),
        Some(Err(e)) => {
            return TacticalReport {
                input: Input::Replied {
                    tick,
                    answer: Err(failure(
                        FailureKind::Perception,
                        format!("the call's picture: {e}"),
                    )),
                },
                keep: keep(serde_json::Value::Null, 0, String::new()),
            }
        }
        None => {}
    }
    let prefix_bytes = prompt
        .messages
        .first()
        .map(|m| m.joined_text().len() as u64)
        .unwrap_or(0);
    let chat = ChatRequest::from_prompt(model_name, &prompt, max_tokens);
    let prompt_json = chat.body_for(client.kind());
    let answer = match client.chat_structured(&chat, &schema, cancel) {
        Err(e) => Err(failure_of(&e, 0.0)),
        Ok(r) => {
            let t = &r.reply.timings;
            let figures = ModelReply {
                reply: gamepilot_session::TacticalReply::Note { text: String::new() },
                text: r.reply.content.clone(),
                latency_ms: t.wall_ms,
                tokens_in: t.prompt_tokens.unwrap_or(0),
                tokens_out: t.completion_tokens.unwrap_or(0),
                cached_tokens: t.cached_tokens.unwrap_or(0),
            };
            match read_reply(&r.value, &schema, &reading) {
                Ok(Read::Act(reply)) => Ok(ModelAnswer::Act(ModelReply { reply, ..figures })),
                Ok(Read::Point(point)) => Ok(ModelAnswer::Localised { point, figures }),
                Err(e) => Err(TacticalFailure {
                    kind: FailureKind::SchemaBroken,
                    message: e,
                    latency_ms: figures.latency_ms,
                }),
            }
        }
    };
    let reply_text = match &answer {
        Ok(ModelAnswer::Act(m)) => m.text.clone(),
        Ok(ModelAnswer::Localised { point, figures }) => {
            format!("{} -> point [{}, {}]", figures.text, point.x, point.y)
        }
        Err(f) => format!("error ({:?}): {}", f.kind, f.message),
    };
    TacticalReport {
        input: Input::Replied { tick, answer },
        keep: keep(prompt_json, prefix_bytes, reply_text),
    }
}

/// The picture into the place the session's prompt held for it; with none to give, the place goes.
pub fn attach(prompt: &mut Prompt, image: Option<gamepilot_session::ImagePart>) {
    for m in prompt.messages.iter_mut() {
        match image.clone() {
            Some(image) => {
                for p in m.parts.iter_mut() {
                    if let gamepilot_session::Part::Image { image: held } = p {
                        *held = image;
                        return;
                    }
                }
            }
            None => m
                .parts
                .retain(|p| !matches!(p, gamepilot_session::Part::Image { .. })),
        }
    }
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

#[cfg(test)]
mod tests {
    //! The tactical thread's transport without an X server: the session's composed call carried to a
    //! scripted model host over HTTP and its reply read as the call says.
    use super::*;
    use gamepilot_core::{CoordConvention, ElementId, MonoTime, Rect};
    use gamepilot_session::tactical::{compose_act, compose_localise, ActPlan};
    use gamepilot_session::{ObservationShape, Session, SessionConfig, ToolSet};
    use gamepilot_testbed::{HostConfig, ReceivedChat, Reply, ScriptedHost};
    use gamepilot_vision::{Element, ElementSource};
    use serde_json::json;

    fn perception() -> Perception {
        let button = |id: u32, label: &str, y: i32| Element {
            id: ElementId(id),
            bbox: Rect::new(560, y, 160, 48),
            confidence: 0.9,
            source: ElementSource::Text,
            label: Some(label.into()),
            looks: None,
            layer: None,
            selected: false,
        };
        Perception {
            tick: 4,
            started: MonoTime(1000),
            observation: Observation {
                at: MonoTime(1000),
                frame_size: Size::new(1280, 720),
                class: gamepilot_vision::FrameChange::Scene,
                texts: Vec::new(),
                elements: vec![button(1, "Play", 300), button(2, "Options", 380)],
            },
            moves: Vec::new(),
        }
    }

    /// A fresh session, for its context.
    fn session() -> Session {
        let cfg = SessionConfig {
            goal: "start the game".into(),
            postconditions: vec!["goal".into()],
            ..SessionConfig::default()
        };
        Session::new(cfg, MonoTime::ZERO).unwrap()
    }

    /// The call a session composes for `perception` (capture pixels unless `image` gives a budget).
    fn composed(image: Option<u64>) -> ModelCall {
        let session = session();
        let tools = ToolSet::new(&gamepilot_session::session_tools(false)).unwrap();
        let p = perception();
        let plan = ActPlan {
            tools: &tools,
            present: &[ElementId(1), ElementId(2)],
            move_targets: &[],
            visual_pixels: image,
            coords: CoordConvention::ImagePixels,
            limits: &gamepilot_session::SchemaLimits::default(),
        };
        let (c, _) = compose_act(
            session.context(),
            4,
            &p,
            "frame 1280x720",
            |_, _| "scaled".into(),
            &plan,
        )
        .unwrap();
        c.call
    }

    fn client(host: &ScriptedHost) -> HostClient {
        HostClient::new(&host.base_url(), gamepilot_model::HostTimeouts::default()).unwrap()
    }

    /// The game window as frames loaded from the corpus, one per capture (an error when they run out),
    /// with a dialog layer and an accessibility element, and a stray dialog brought over it once.
    struct Frames {
        frames: Vec<Frame>,
        strays: Vec<String>,
    }

    impl GameWindow for Frames {
        fn capture(&mut self, at: MonoTime) -> Result<Frame, String> {
            if self.frames.is_empty() {
                return Err("the window is busy".into());
            }
            let mut f = self.frames.remove(0);
            f.captured_at = at;
            Ok(f)
        }
        fn layers(&self) -> Vec<gamepilot_core::LayerRegion> {
            Vec::new()
        }
        fn accessibility(&mut self, _capture: Size) -> Vec<gamepilot_vision::Candidate> {
            Vec::new()
        }
        fn bring_dialogs_over(&mut self) -> Vec<String> {
            std::mem::take(&mut self.strays)
        }
    }

    fn corpus_frame(name: &str) -> Frame {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../corpus/frames")
            .join(name);
        crate::load_image(&path).unwrap()
    }

    fn tactical(frames: Vec<Frame>, host: &ScriptedHost) -> Tactical<Frames> {
        let mut perceiver = Perceiver::new();
        perceiver.atlas = std::sync::Arc::default();
        Tactical {
            setup: TacticalSetup {
                templates: std::sync::Arc::default(),
                display: None,
                window: 0,
                client: client(host),
                model_name: "m".into(),
                max_tokens: 64,
            },
            window: Frames {
                frames,
                strays: vec!["\"Net configuration\" (0x42)".into()],
            },
            perceiver,
            ocr: gamepilot_ocr::default_engine().expect("scripts/setup-ocr.sh run"),
            marks: mark_font(),
            previous: None,
            served: None,
        }
    }

    fn job(tick: u64, perceive_only: bool, keep_frame: bool) -> TacticalJob {
        TacticalJob {
            tick,
            excluded_marks: Vec::new(),
            tools: gamepilot_session::session_tools(false),
            path: None,
            two_stage: false,
            shape: ObservationShape {
                with_image: true,
                visual_pixels: 448 * 252,
                coords: CoordConvention::CapturePixels,
                observation_max_bytes: 3000,
                observation_max_elements: 40,
            },
            generation: 0,
            health: gamepilot_core::FrameHealth::Ok,
            perceive_only,
            // A perceive-only tick here is a probe hold's: its text is not read.
            read_text: !perceive_only,
            keep_frame,
            focus: Default::default(),
            avatar: None,
            aim: Default::default(),
            sensors: None,
        }
    }

    #[test]
    fn the_tactical_thread_perceives_a_frame_and_carries_the_call_composed_on_it_without_an_x_server() {
        // FR-PERC-004..007 (OCR, elements, ids, marks) and FR-MODEL-002 (the marked frame in the call) on
        // a real frame of the practice game's menu, through the thread's own code, with no X server
        let host = ScriptedHost::start(HostConfig::new(), |_: &ReceivedChat| {
            Reply::json(&json!({"action": "click_mark", "mark": 1}))
        })
        .unwrap();
        let menu = corpus_frame("arena-menu-0.png");
        let mut t = tactical(vec![menu.clone(), menu], &host);
        let r = t.perceive(&job(1, false, true));
        let Input::Perceived(p) = &r.input else {
            panic!("a perception: {:?}", r.input)
        };
        let labels: Vec<&str> = p
            .observation
            .elements
            .iter()
            .filter_map(|e| e.label.as_deref())
            .collect();
        assert!(labels.contains(&"Play"), "{labels:?}");
        assert!(
            matches!(
                &r.keep,
                Kept::Frame {
                    frame: Some(_),
                    marked: Some(_)
                }
            ),
            "the frame and its marks kept"
        );
        // The session composes the call on this perception; the thread attaches the marked frame.
        let session = session();
        let tools = ToolSet::new(&gamepilot_session::session_tools(false)).unwrap();
        let present: Vec<ElementId> = p.observation.elements.iter().map(|e| e.id).collect();
        let plan = ActPlan {
            tools: &tools,
            present: &present,
            move_targets: &[],
            visual_pixels: Some(448 * 252),
            coords: CoordConvention::ImagePixels,
            limits: &gamepilot_session::SchemaLimits::default(),
        };
        let (c, _) = compose_act(session.context(), 1, p, "listing", |_, _| "scaled".into(), &plan).unwrap();
        let r = t.call(c.call, &CancelToken::new());
        assert!(matches!(answer(&r), Ok(ModelAnswer::Act(_))), "{:?}", answer(&r));
        let images = host.chat_requests()[0].images().unwrap();
        let sent = image::load_from_memory(&images[0].bytes).unwrap();
        assert_eq!(
            (sent.width(), sent.height()),
            (448, 252),
            "the marked frame at the budget's size"
        );
        // A probe hold's tick after a kept frame measures how each element moved, reading no text.
        let r = t.perceive(&job(2, true, false));
        let Input::Perceived(p2) = &r.input else {
            panic!("a perception")
        };
        assert!(p2.observation.texts.is_empty(), "{:?}", p2.observation.texts);
        assert!(
            matches!(
                &r.keep,
                Kept::Frame {
                    frame: Some(_),
                    marked: None
                }
            ),
            "the frame kept, no marks drawn on it"
        );
        assert!(
            p2.observation
                .elements
                .iter()
                .all(|e| e.source != ElementSource::Text),
            "no text element without text read"
        );
        assert_eq!(
            p2.moves.len(),
            p.observation.elements.len() + 1,
            "each element and the view's centre"
        );
        // The window gone busy: the tick's named perception failure, and the thread goes on.
        let r = t.perceive(&job(3, false, false));
        assert!(
            matches!(&r.input, Input::Replied { answer: Err(f), .. } if f.kind == FailureKind::Perception && f.message.contains("busy"))
        );
    }

    fn answer(r: &TacticalReport) -> &Result<ModelAnswer, TacticalFailure> {
        match &r.input {
            Input::Replied { answer, .. } => answer,
            other => panic!("a reply: {other:?}"),
        }
    }

    #[test]
    fn a_composed_call_is_sent_as_composed_and_its_reply_read_in_capture_space() {
        // FR-MODEL-003: the session's prompt and schema go to the host unchanged; the reply comes back typed
        let host = ScriptedHost::start(HostConfig::new(), |_: &ReceivedChat| {
            Reply::json(&json!({"action": "click_mark", "mark": 2}))
        })
        .unwrap();
        let call = composed(None);
        let sent_text = call.prompt.messages[1].joined_text();
        let r = carry_call(&client(&host), "m", 64, call, None, &CancelToken::new());
        match answer(&r) {
            Ok(ModelAnswer::Act(m)) => assert_eq!(
                m.reply,
                gamepilot_session::TacticalReply::ClickMark {
                    mark: ElementId(2),
                    button: gamepilot_core::action::MouseButton::Left
                }
            ),
            other => panic!("an action: {other:?}"),
        }
        let chats = host.chat_requests();
        assert_eq!(chats.len(), 1);
        assert!(
            chats[0].prompt_text().contains(sent_text.trim()),
            "{}",
            chats[0].prompt_text()
        );
        assert!(matches!(r.keep, Kept::Call { prefix_bytes, .. } if prefix_bytes > 0));
    }

    #[test]
    fn the_picture_fills_the_place_the_prompt_held_and_a_missing_one_fails_the_call_unsent() {
        // FR-MODEL-002: the image the session sized goes in its place; no picture, no call
        let host = ScriptedHost::start(HostConfig::new(), |_: &ReceivedChat| {
            Reply::json(&json!({"action": "click", "x": 100, "y": 50}))
        })
        .unwrap();
        let call = composed(Some(448 * 252));
        let wanted = call.image.expect("a picture is wanted");
        assert_eq!(wanted.size, Size::new(448, 252));
        let frame = Frame::from_rgba(1280, 720, vec![90; 1280 * 720 * 4], MonoTime::ZERO).unwrap();
        let part = gamepilot_model::budget::encode_for_budget(&frame.view(), wanted.pixels).unwrap();
        let r = carry_call(
            &client(&host),
            "m",
            64,
            call.clone(),
            Some(Ok(part)),
            &CancelToken::new(),
        );
        match answer(&r) {
            // The click in the 448x252 image's pixels, back in capture space.
            Ok(ModelAnswer::Act(m)) => assert!(
                matches!(m.reply, gamepilot_session::TacticalReply::Act(gamepilot_core::action::Action::Click { x, y, .. }) if (x - 286).abs() <= 2 && (y - 143).abs() <= 2),
                "{:?}",
                m.reply
            ),
            other => panic!("an action: {other:?}"),
        }
        assert_eq!(
            host.chat_requests()[0].image_urls().len(),
            1,
            "the picture was sent"
        );
        let r = carry_call(
            &client(&host),
            "m",
            64,
            call,
            Some(Err("no frame".into())),
            &CancelToken::new(),
        );
        assert!(matches!(answer(&r), Err(f) if f.kind == FailureKind::Perception));
        assert_eq!(
            host.chat_requests().len(),
            1,
            "a call without its picture is not sent"
        );
    }

    #[test]
    fn a_localising_call_answers_a_point_and_a_refused_prompt_is_a_context_overflow() {
        // FR-GND-005 (the localising pass), FR-CTX-004 (the host's refusal is told apart)
        let session = session();
        let call = compose_localise(session.context(), 4, &perception(), None)
            .unwrap()
            .call;
        let host = ScriptedHost::start(HostConfig::new(), |_: &ReceivedChat| {
            Reply::json(&json!({"x": 160, "y": 95}))
        })
        .unwrap();
        let r = carry_call(&client(&host), "m", 64, call.clone(), None, &CancelToken::new());
        assert!(
            matches!(answer(&r), Ok(ModelAnswer::Localised { point, .. }) if *point == gamepilot_core::Point::new(160, 95)),
            "{:?}",
            answer(&r)
        );
        let full = ScriptedHost::start(HostConfig::new(), |_: &ReceivedChat| {
            Reply::context_exceeded(9000, 4096)
        })
        .unwrap();
        let r = carry_call(&client(&full), "m", 64, call, None, &CancelToken::new());
        assert!(
            matches!(answer(&r), Err(f) if f.kind == FailureKind::ContextOverflow),
            "{:?}",
            answer(&r)
        );
    }
}
