//! The session's records into the recording: each `SessionRecord` as its recording entry, and what a
//! tactical tick or a deliberative pass saw and sent. The recording is written, never read back by the
//! agent (INV-CTX-002).

use crate::deliberative::DeliberationResult;
use crate::tactical::{Kept, TacticalReport};
use crate::RuntimeError;
use gamepilot_core::{Frame, MonoTime};
use gamepilot_recording::{Record, Recorder, RecordingError};
use gamepilot_session::{Input, ModelAnswer, Reading, SessionRecord};

/// One session record into the recording (a loop step as its event and decisions).
pub fn record_session(rec: &mut Recorder, t: MonoTime, r: SessionRecord) -> Result<(), RuntimeError> {
    let record = match r {
        SessionRecord::LoopStep { event, commands } => {
            let seq = rec.loop_event(t, &event)?;
            rec.decisions(t, seq, &commands)?;
            return Ok(());
        }
        SessionRecord::Action {
            action,
            subgoal,
            payload,
            target,
            path,
        } => Record::Action {
            action,
            subgoal: subgoal.0,
            payload: serde_json::to_value(&payload).map_err(RecordingError::from)?,
            target,
            path,
        },
        SessionRecord::Rejected { action, reason } => Record::Rejected { action, reason },
        SessionRecord::Verdict {
            action,
            verdict,
            cause,
        } => Record::Verdict {
            action,
            verdict,
            cause,
        },
        SessionRecord::Failure {
            action,
            cause,
            evidence,
        } => Record::Failure {
            action,
            cause,
            evidence,
        },
        SessionRecord::Interlock { interlock, detail } => Record::Interlock { interlock, detail },
        SessionRecord::Compaction(ev) => Record::Compaction {
            before_tokens: u64::from(ev.tokens_before),
            after_tokens: u64::from(ev.tokens_after_estimate),
            summary: ev.summary,
        },
        SessionRecord::ReflexTiming {
            tick,
            late_us,
            ticks_since,
            held,
        } => Record::Timing {
            cadence: "reflex".into(),
            tick,
            scheduled_us: t.0.saturating_sub(late_us),
            started_us: t.0,
            duration_us: 0,
            held: vec![format!("{held} held; {ticks_since} ticks since the last report")],
        },
        SessionRecord::Note { text } => Record::Note { text },
    };
    rec.record(t, record)?;
    Ok(())
}

/// The observation record of what a tick (or a two-stage tick's region) perceived.
fn record_observation(
    rec: &mut Recorder,
    t: MonoTime,
    frame: Option<u64>,
    observation: &gamepilot_vision::Observation,
) -> Result<(), RuntimeError> {
    rec.record(
        t,
        Record::Observation {
            frame,
            scene: gamepilot_session::scene_kind(observation).as_str().into(),
            signature: gamepilot_session::observation_signature(observation),
            marks: serde_json::to_value(&observation.elements).map_err(RecordingError::from)?,
            text: serde_json::to_value(&observation.texts).map_err(RecordingError::from)?,
            sensors: serde_json::Value::Null,
        },
    )?;
    Ok(())
}

/// A marked picture as a marked frame of the recording.
fn record_marked(
    rec: &mut Recorder,
    t: MonoTime,
    marked: Option<&image::RgbaImage>,
    scene: &str,
) -> Result<Option<Frame>, RuntimeError> {
    let Some(m) = marked else { return Ok(None) };
    let Some(mf) = Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), t) else {
        return Ok(None);
    };
    rec.frame(t, &mf.view(), true, scene)?;
    Ok(Some(mf))
}

/// What the tactical thread reported, as the recording keeps it: a perceived frame (plain and marked) and
/// its observation; a call's request, schema and reply (a two-stage tick's localising call under the
/// cadence `tactical_localise`); a two-stage tick's region. Returns the marked frame it recorded, if any.
pub fn record_tactical(
    rec: &mut Recorder,
    t: MonoTime,
    r: &TacticalReport,
) -> Result<Option<Frame>, RuntimeError> {
    match (&r.input, &r.keep) {
        (Input::Perceived(p), Kept::Frame { frame, marked }) => {
            let scene = p.observation.class.as_str();
            let frame_no = match frame.as_ref() {
                Some(f) => rec.frame(t, &f.view(), false, scene)?,
                None => None,
            };
            let marked = record_marked(rec, t, marked.as_ref(), scene)?;
            record_observation(rec, t, frame_no, &p.observation)?;
            Ok(marked)
        }
        (Input::CropPerceived(c), Kept::Crop { marked }) => {
            record_marked(rec, t, marked.as_ref(), "crop")?;
            record_observation(rec, t, None, &c.in_capture)?;
            Ok(None)
        }
        (
            Input::Replied { tick, answer },
            Kept::Call {
                reading,
                prompt_json,
                prefix_bytes,
                schema,
                reply_text,
            },
        ) => {
            let cadence = match reading {
                Reading::Localise { .. } => "tactical_localise",
                Reading::Act { .. } | Reading::ActInCrop { .. } => "tactical",
            };
            rec.record(
                t,
                Record::Prompt {
                    cadence: cadence.into(),
                    call: *tick,
                    prefix_bytes: *prefix_bytes,
                    messages: serde_json::json!({"request": prompt_json, "schema": schema, "reading": reading}),
                },
            )?;
            let (latency_ms, tokens_in, tokens_out) = match answer {
                Ok(ModelAnswer::Act(m)) | Ok(ModelAnswer::Localised { figures: m, .. }) => {
                    (m.latency_ms, m.tokens_in, m.tokens_out)
                }
                Err(f) => (f.latency_ms, 0, 0),
            };
            rec.record(
                t,
                Record::Reply {
                    cadence: cadence.into(),
                    call: *tick,
                    latency_ms,
                    tokens_in,
                    tokens_out,
                    text: reply_text.clone(),
                },
            )?;
            Ok(None)
        }
        // A tick that could not be perceived: its failure, as the reply it never got.
        (Input::Replied { tick, answer: Err(f) }, _) => {
            rec.record(
                t,
                Record::Reply {
                    cadence: "tactical".into(),
                    call: *tick,
                    latency_ms: 0.0,
                    tokens_in: 0,
                    tokens_out: 0,
                    text: format!("error ({:?}): {}", f.kind, f.message),
                },
            )?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// A deliberative pass's prompt and reply.
pub fn record_deliberation(
    rec: &mut Recorder,
    t: MonoTime,
    d: &DeliberationResult,
) -> Result<(), RuntimeError> {
    rec.record(
        t,
        Record::Prompt {
            cadence: "deliberative".into(),
            call: d.pass,
            prefix_bytes: 0,
            messages: d.prompt_json.clone(),
        },
    )?;
    rec.record(
        t,
        Record::Reply {
            cadence: "deliberative".into(),
            call: d.pass,
            latency_ms: d.latency_ms,
            tokens_in: 0,
            tokens_out: 0,
            text: d.reply_text.clone(),
        },
    )?;
    Ok(())
}
