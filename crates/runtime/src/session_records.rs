//! The session's records into the recording: each `SessionRecord` as its recording entry, and what a
//! tactical tick or a deliberative pass saw and sent. The recording is written, never read back by the
//! agent (INV-CTX-002).

use crate::deliberative::DeliberationResult;
use crate::tactical::TacticalResult;
use crate::RuntimeError;
use gamepilot_core::{Frame, MonoTime};
use gamepilot_recording::{Record, Recorder, RecordingError};
use gamepilot_session::SessionRecord;

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

/// What a tactical tick saw and sent (frames, observation, prompt, reply); the session gets the typed
/// outcome. Returns the marked frame it recorded, if any.
pub fn record_tactical(
    rec: &mut Recorder,
    t: MonoTime,
    r: &TacticalResult,
) -> Result<Option<Frame>, RuntimeError> {
    let mut marked = None;
    let scene = r.outcome.observation.class.as_str();
    let frame_no = match r.frame.as_ref() {
        Some(f) => rec.frame(t, &f.view(), false, scene)?,
        None => None,
    };
    if let Some(m) = r.marked.as_ref() {
        if let Some(mf) = Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), t) {
            rec.frame(t, &mf.view(), true, scene)?;
            marked = Some(mf);
        }
    }
    rec.record(
        t,
        Record::Observation {
            frame: frame_no,
            scene: gamepilot_session::scene_kind(&r.outcome.observation)
                .as_str()
                .into(),
            signature: gamepilot_session::observation_signature(&r.outcome.observation),
            marks: serde_json::to_value(&r.outcome.observation.elements).map_err(RecordingError::from)?,
            text: serde_json::to_value(&r.outcome.observation.texts).map_err(RecordingError::from)?,
            sensors: serde_json::Value::Null,
        },
    )?;
    rec.record(
        t,
        Record::Prompt {
            cadence: "tactical".into(),
            call: r.outcome.tick,
            prefix_bytes: r.prefix_bytes,
            messages: serde_json::json!({"request": r.prompt_json, "schema": r.schema}),
        },
    )?;
    if let Some(rf) = r.refinement.as_ref() {
        crate::tactical::record_refinement(rec, t, r.outcome.tick, rf)?;
    }
    let (latency_ms, tokens_in, tokens_out, text) = match &r.outcome.reply {
        Ok(m) => (m.latency_ms, m.tokens_in, m.tokens_out, m.text.clone()),
        Err(f) => (f.latency_ms, 0, 0, format!("error ({:?}): {}", f.kind, f.message)),
    };
    rec.record(
        t,
        Record::Reply {
            cadence: "tactical".into(),
            call: r.outcome.tick,
            latency_ms,
            tokens_in,
            tokens_out,
            text,
        },
    )?;
    Ok(marked)
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
