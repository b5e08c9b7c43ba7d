//! The tactical tick inside the session, in two phases. The tactical thread perceives the frame
//! ([`Perception`], `Input::Perceived`); the session composes what the model reads — which elements, in
//! what order, which `move_to` places, the observation text, the prompt and this tick's output schema
//! (FR-MODEL-003, FR-GND-003) — and asks for one call ([`ModelCall`], `Effect::CallModel`); the thread
//! carries the call, reads the reply as the call says ([`read_reply`]) and hands it back
//! (`Input::Replied`). A two-stage tick (FR-GND-005) asks first for a localising call over the whole frame
//! downscaled, then for a perception of the region around its point (`Effect::PerceiveCrop` →
//! [`CropPerception`]), then for the acting call on that region magnified. Every prompt is composed
//! here from typed inputs, so a replay re-derives it byte for byte.

use crate::input::{FailureKind, ModelReply, TacticalFailure};
use gamepilot_context::{
    localise_schema, parse_localise, tactical_schema, tactical_schema_with_targets, Context, ImagePart,
    ObservationText, Prompt, SchemaLimits, TacticalReply, TacticalTail, ToolSet,
};
use gamepilot_core::action::Action;
use gamepilot_core::{CoordConvention, CoordSpace, ElementId, MonoTime, Point, Size};
use gamepilot_grounding::{scale_rect, Crop};
use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};

/// Linear downscale of the whole frame for a two-stage tick's localising pass.
pub const CHEAP_DIVISOR: u32 = 4;

/// What the tactical thread perceived for a tick: the frame's observation and, after a probe hold of
/// self-identification, how each element of the previous frame moved (its pixels found again nearby).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Perception {
    pub tick: u64,
    /// When the tick captured its frame.
    pub started: MonoTime,
    pub observation: Observation,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<Option<(f64, f64)>>,
}

/// The region around a localising pass's point, perceived again at its own resolution (FR-GND-005).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CropPerception {
    pub tick: u64,
    pub crop: Crop,
    /// The size the region is shown at (magnified within the visual budget).
    pub size: Size,
    /// Its observation in its own coordinates: what the model is shown.
    pub in_crop: Observation,
    /// The same observation in capture space: what grounding resolves the reply's marks against.
    pub in_capture: Observation,
}

/// Which picture goes with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Picture {
    /// The tick's frame with its marks drawn.
    Frame,
    /// The two-stage tick's region, magnified, with its marks drawn.
    Crop,
}

/// The image a call carries: which picture, resized to fit `pixels` (FR-MODEL-002's visual budget), which
/// makes it `size`. The prompt holds its place with empty data; the thread encodes the picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageWanted {
    pub picture: Picture,
    pub pixels: u64,
    pub size: Size,
}

impl ImageWanted {
    fn of(picture: Picture, size: Size, pixels: u64) -> ImageWanted {
        ImageWanted {
            picture,
            pixels,
            size: size.fit_within(pixels),
        }
    }
}

/// How a call's reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "reading", rename_all = "snake_case")]
pub enum Reading {
    /// An action over the schema, coordinates in `space` (mapped to capture space).
    Act { space: CoordSpace },
    /// An action over the schema in the two-stage tick's region of `size`, mapped through `crop`.
    ActInCrop { crop: Crop, size: Size },
    /// A two-stage tick's localising pass: a point in the downscaled frame of `cheap`.
    Localise { cheap: Size },
}

/// One model call as the session composed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCall {
    pub tick: u64,
    pub prompt: Prompt,
    pub schema: serde_json::Value,
    pub image: Option<ImageWanted>,
    pub reading: Reading,
}

/// A call's reply, read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum ModelAnswer {
    /// The acting call's action, in capture space.
    Act(ModelReply),
    /// The localising call's point in the downscaled frame, and what the call cost.
    Localised { point: Point, figures: ModelReply },
}

/// What a reply says under `reading`: an action in capture space, or the localising point (the figures
/// are the caller's to fill).
pub enum Read {
    Act(TacticalReply),
    Point(Point),
}

/// Read a schema-checked reply `value` as `reading` says (the tactical thread calls this; the session
/// decided the schema and the reading).
pub fn read_reply(
    value: &serde_json::Value,
    schema: &serde_json::Value,
    reading: &Reading,
) -> Result<Read, String> {
    match reading {
        Reading::Act { space } => TacticalReply::parse_in(value, schema, space)
            .map(Read::Act)
            .map_err(|e| e.to_string()),
        Reading::ActInCrop { crop, size } => {
            let reply = TacticalReply::parse_in(value, schema, &CoordSpace::capture(*size))
                .map_err(|e| e.to_string())?;
            reply_to_capture(crop, *size, reply).map(Read::Act)
        }
        Reading::Localise { .. } => parse_localise(value, schema)
            .map(Read::Point)
            .map_err(|e| format!("localise pass: {e}")),
    }
}

/// The size of the downscaled whole frame a localising pass answers in.
pub fn cheap_size(frame: Size) -> Size {
    Size::new((frame.w / CHEAP_DIVISOR).max(1), (frame.h / CHEAP_DIVISOR).max(1))
}

/// The whole-frame observation in the localising pass's coordinates.
pub fn cheap_observation(observation: &Observation, cheap: Size) -> Observation {
    let from = observation.frame_size;
    observation.remapped(cheap, |r| scale_rect(r, from, cheap))
}

/// The text block of the localising pass.
pub fn cheap_prompt_text(cheap: &Observation) -> String {
    format!(
        "Stage 1 of 2 (localise): the whole frame downscaled to {}x{}. ModelAnswer only the point {{x, y}} in \
         this downscaled frame where the target of your next action is; stage 2 shows that region magnified.\n{}",
        cheap.frame_size.w,
        cheap.frame_size.h,
        cheap.to_text()
    )
}

/// The text block the acting pass of a two-stage tick reads, headed by where the region is and how it was
/// magnified.
pub fn crop_prompt_text(c: &CropPerception) -> String {
    let r = c.crop.region;
    format!(
        "Stage 2 of 2 (act): region [{}, {}, {}, {}] of the {}x{} frame around the point you chose, \
         magnified to {}x{}. Marks and coordinates below, and in your answer, are in this magnified region.\n{}",
        r.x,
        r.y,
        r.w,
        r.h,
        c.in_capture.frame_size.w,
        c.in_capture.frame_size.h,
        c.size.w,
        c.size.h,
        c.in_crop.to_text()
    )
}

/// The acting pass's reply in capture space: coordinates through the crop; a mark stays a mark (of the
/// crop's capture-space observation). Actions without a target pass through unchanged.
pub fn reply_to_capture(crop: &Crop, size: Size, mut reply: TacticalReply) -> Result<TacticalReply, String> {
    if let TacticalReply::Act(
        Action::Click { x, y, .. }
        | Action::DoubleClick { x, y, .. }
        | Action::MovePointer { x, y, .. }
        | Action::Scroll {
            x: Some(x),
            y: Some(y),
            ..
        },
    ) = &mut reply
    {
        let p = crop
            .to_capture(Point::new(*x, *y), size)
            .map_err(|e| format!("expensive pass answered outside its crop: {e}"))?;
        (*x, *y) = (p.x, p.y);
    }
    Ok(reply)
}

/// What a composed call leaves the session to keep until its reply: the prompt's tail (the host's cache
/// state, committed when the reply arrives).
pub struct Composed {
    pub call: ModelCall,
    pub tail: TacticalTail,
}

/// The prompt of one call: the context with `text` as this tick's observation and the image's place held.
fn prompt_of(
    context: &Context,
    started: MonoTime,
    text: String,
    image: Option<ImageWanted>,
) -> (Prompt, TacticalTail) {
    let part = image.map(|i| ImagePart {
        mime: "image/png".into(),
        width: i.size.w,
        height: i.size.h,
        data_base64: String::new(),
    });
    context.assemble_tactical(&ObservationText::new(started, text), part)
}

fn schema_failure(e: impl std::fmt::Display) -> TacticalFailure {
    TacticalFailure {
        kind: FailureKind::Host,
        message: e.to_string(),
        latency_ms: 0.0,
    }
}

/// What the session decided for an acting call on the whole frame.
pub struct ActPlan<'a> {
    pub tools: &'a ToolSet,
    /// Marks the model may answer (suppressed ones are left out, FR-GND-007).
    pub present: &'a [ElementId],
    /// Places `move_to` may name, nearest the avatar first.
    pub move_targets: &'a [ElementId],
    /// The image's budget in pixels when the model sees images.
    pub visual_pixels: Option<u64>,
    pub coords: CoordConvention,
    pub limits: &'a SchemaLimits,
}

/// The acting call on the whole frame. A model that sees the image answers in its family's convention over
/// the image actually sent, and the observation's boxes are written in the same numbers (the text the
/// model reads is then returned beside the call).
pub fn compose_act(
    context: &Context,
    tick: u64,
    perception: &Perception,
    observation_text: &str,
    scaled_listing: impl FnOnce(&Observation, &CoordSpace) -> String,
    plan: &ActPlan<'_>,
) -> Result<(Composed, Option<String>), TacticalFailure> {
    let capture = perception.observation.frame_size;
    let image = plan
        .visual_pixels
        .map(|pixels| ImageWanted::of(Picture::Frame, capture, pixels));
    let space = match image {
        Some(i) => CoordSpace::new(plan.coords, i.size, capture),
        None => CoordSpace::capture(capture),
    };
    let model_text = (space.convention != CoordConvention::CapturePixels).then(|| {
        let scaled = cheap_observation(&perception.observation, space.text_size());
        scaled_listing(&scaled, &space)
    });
    let schema =
        tactical_schema_with_targets(plan.tools, plan.present, plan.move_targets, &space, plan.limits)
            .map_err(schema_failure)?;
    let text = model_text.clone().unwrap_or_else(|| observation_text.to_string());
    let (prompt, tail) = prompt_of(context, perception.started, text, image);
    Ok((
        Composed {
            call: ModelCall {
                tick,
                prompt,
                schema,
                image,
                reading: Reading::Act { space },
            },
            tail,
        },
        model_text,
    ))
}

/// A two-stage tick's localising call: the whole frame downscaled, a quarter of the visual budget.
pub fn compose_localise(
    context: &Context,
    tick: u64,
    perception: &Perception,
    visual_pixels: Option<u64>,
) -> Result<Composed, TacticalFailure> {
    let capture = perception.observation.frame_size;
    let cheap = cheap_size(capture);
    let schema = localise_schema(cheap).map_err(schema_failure)?;
    let image = visual_pixels.map(|pixels| ImageWanted::of(Picture::Frame, capture, pixels / 4));
    let text = cheap_prompt_text(&cheap_observation(&perception.observation, cheap));
    let (prompt, tail) = prompt_of(context, perception.started, text, image);
    Ok(Composed {
        call: ModelCall {
            tick,
            prompt,
            schema,
            image,
            reading: Reading::Localise { cheap },
        },
        tail,
    })
}

/// A two-stage tick's acting call on the perceived region.
pub fn compose_crop_act(
    context: &Context,
    started: MonoTime,
    crop: &CropPerception,
    tools: &ToolSet,
    visual_pixels: Option<u64>,
    limits: &SchemaLimits,
) -> Result<Composed, TacticalFailure> {
    let marks: Vec<ElementId> = crop.in_crop.elements.iter().map(|e| e.id).collect();
    let schema = tactical_schema(tools, &marks, crop.size, limits).map_err(schema_failure)?;
    let image = visual_pixels.map(|pixels| ImageWanted::of(Picture::Crop, crop.size, pixels));
    let (prompt, tail) = prompt_of(context, started, crop_prompt_text(crop), image);
    Ok(Composed {
        call: ModelCall {
            tick: crop.tick,
            prompt,
            schema,
            image,
            reading: Reading::ActInCrop {
                crop: crop.crop,
                size: crop.size,
            },
        },
        tail,
    })
}
