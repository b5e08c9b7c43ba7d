//! The replay driver: feeds a recording's session inputs through a fresh `gamepilot_session::Session` with
//! the recorded configuration, at the recorded times, and diffs every effect against the recorded ones
//! (so every loop decision is replayed, not only the loop logic's). Recordings from before the session
//! core (loop events only) replay through a fresh `LoopState` the same way.

use crate::reader::Recording;
use crate::ReplayError;
use gamepilot_core::MonoTime;
use gamepilot_planner::{Command, Event, LoopConfig, LoopState};
use gamepilot_recording::Record;
use gamepilot_session::{Effect, Input, Session, SessionConfig, SessionRecord};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One input where the replayed decisions differ from the recorded ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// The `seq` of the loop event (or of an orphan decision's claimed input).
    pub input: u64,
    pub t_us: u64,
    pub event: Value,
    pub recorded: Vec<Value>,
    pub replayed: Vec<Value>,
}

/// What a replay found.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    pub inputs: usize,
    pub recorded_decisions: usize,
    /// Every replayed decision with the `seq` and time of its input.
    pub decisions: Vec<(u64, u64, Command)>,
    pub divergences: Vec<Divergence>,
    /// The logic's state at the end of the replay.
    pub state: LoopState,
    /// Session inputs replayed (0 for a recording from before the session core).
    pub session_inputs: usize,
    /// The effects the session returned for each session input, by the input's `seq` (what blessing a
    /// committed recording writes back).
    pub replayed: BTreeMap<u64, Value>,
}

impl ReplayOutcome {
    pub fn matches(&self) -> bool {
        self.divergences.is_empty()
    }

    /// How much of each tactical prompt the replayed session composed is new against the one before it
    /// — what a host's prefix cache must evaluate again — measured in bytes of the prompt's messages,
    /// with no model (the latency of a new screen is mostly this).
    pub fn prompt_reuse(&self) -> PromptReuse {
        let mut reuse = PromptReuse::default();
        let mut before = String::new();
        for (seq, effects) in &self.replayed {
            let Some(effects) = effects.as_array() else {
                continue;
            };
            for e in effects.iter().filter(|e| e["effect"] == "call_model") {
                let text = e["prompt"]["messages"].to_string();
                let new = text.len() - shared_prefix(&before, &text);
                reuse.calls.push((*seq, text.len(), new));
                before = text;
            }
        }
        reuse
    }
}

/// The tactical prompts of a replay: per call, the input's `seq`, the prompt's bytes and the bytes not
/// shared with the call before (the first call's are all new).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PromptReuse {
    pub calls: Vec<(u64, usize, usize)>,
}

impl PromptReuse {
    pub fn bytes(&self) -> usize {
        self.calls.iter().map(|c| c.1).sum()
    }

    pub fn new_bytes(&self) -> usize {
        self.calls.iter().map(|c| c.2).sum()
    }

    /// The share of all prompt bytes a prefix cache had to evaluate again (0 with no calls).
    pub fn new_share(&self) -> f64 {
        self.new_bytes() as f64 / self.bytes().max(1) as f64
    }
}

/// The bytes `a` and `b` begin with alike, at a character boundary.
fn shared_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map(|((i, _), _)| i)
        .unwrap_or_else(|| a.len().min(b.len()))
}

/// The loop configuration recorded in the header (`null` or `{}` give the defaults).
pub fn recorded_config(rec: &Recording) -> Result<LoopConfig, ReplayError> {
    match rec.header().map(|h| &h.config) {
        None | Some(Value::Null) => Ok(LoopConfig::default()),
        Some(v) => match v.get("session") {
            Some(s) => Ok(session_config(s)?.loop_cfg),
            None => serde_json::from_value(v.clone()).map_err(|e| ReplayError::BadConfig(e.to_string())),
        },
    }
}

fn session_config(v: &Value) -> Result<SessionConfig, ReplayError> {
    serde_json::from_value(v.clone()).map_err(|e| ReplayError::BadConfig(e.to_string()))
}

/// A session recording's configuration, its start, and its inputs each at its recorded time (µs).
pub type SessionInputs = (SessionConfig, MonoTime, Vec<(u64, Input)>);

/// A session-level recording's configuration, start time and inputs in order, each at its recorded time
/// (what `bench model --scenes` replays against real hosts). `None` for a recording made before the
/// session core recorded its inputs.
pub fn session_inputs(rec: &Recording) -> Result<Option<SessionInputs>, ReplayError> {
    let Some(config) = rec.header().map(|h| &h.config) else {
        return Ok(None);
    };
    let Some(session) = config.get("session") else {
        return Ok(None);
    };
    let cfg = session_config(session)?;
    let start = MonoTime(config.get("start_us").and_then(Value::as_u64).unwrap_or(0));
    let mut inputs = Vec::new();
    for l in &rec.lines {
        if let Record::SessionInput { now_us, input } = &l.record {
            let parsed: Input = serde_json::from_value(input.clone()).map_err(|e| ReplayError::BadEvent {
                seq: l.seq,
                message: e.to_string(),
            })?;
            inputs.push((*now_us, parsed));
        }
    }
    Ok(Some((cfg, start, inputs)))
}

/// Replay a recording written by the session core: every `session_input` through `Session::step` at its
/// recorded time, each input's effects diffed against its `session_effects`.
fn replay_session(rec: &Recording, config: &Value) -> Result<ReplayOutcome, ReplayError> {
    let cfg = session_config(config.get("session").unwrap_or(&Value::Null))?;
    let start = MonoTime(config.get("start_us").and_then(Value::as_u64).unwrap_or(0));
    let mut session = Session::new(cfg, start).map_err(|e| ReplayError::BadConfig(e.to_string()))?;
    let mut recorded: BTreeMap<u64, Value> = BTreeMap::new();
    for l in &rec.lines {
        if let Record::SessionEffects { input, effects } = &l.record {
            recorded.insert(*input, effects.clone());
        }
    }
    let ended = rec
        .lines
        .iter()
        .any(|l| matches!(l.record, Record::SessionEnd { .. }));
    let mut out = ReplayOutcome {
        inputs: 0,
        recorded_decisions: 0,
        decisions: Vec::new(),
        divergences: Vec::new(),
        state: session.loop_state().clone(),
        session_inputs: 0,
        replayed: BTreeMap::new(),
    };
    for l in &rec.lines {
        let Record::SessionInput { now_us, input } = &l.record else {
            continue;
        };
        out.session_inputs += 1;
        let parsed: Input = serde_json::from_value(input.clone()).map_err(|e| ReplayError::BadEvent {
            seq: l.seq,
            message: e.to_string(),
        })?;
        let effects = session.step(parsed, MonoTime(*now_us));
        let replayed = serde_json::to_value(&effects).unwrap_or(Value::Null);
        out.replayed.insert(l.seq, replayed.clone());
        let want = recorded.remove(&l.seq);
        // A session that did not end cleanly may have lost its last input's effects.
        let cut_short = !ended && want.is_none();
        for e in &effects {
            if let Effect::Record(SessionRecord::LoopStep { commands, .. }) = e {
                out.inputs += 1;
                out.decisions
                    .extend(commands.iter().cloned().map(|c| (l.seq, l.t_us, c)));
            }
        }
        if want.as_ref() != Some(&replayed) && !cut_short {
            let as_list = |v: Option<Value>| match v {
                Some(Value::Array(a)) => a,
                Some(other) => vec![other],
                None => Vec::new(),
            };
            out.divergences.push(Divergence {
                input: l.seq,
                t_us: *now_us,
                event: input.clone(),
                recorded: as_list(want),
                replayed: as_list(Some(replayed)),
            });
        }
    }
    out.recorded_decisions = rec
        .lines
        .iter()
        .filter(|l| matches!(l.record, Record::Decision { .. }))
        .count();
    out.state = session.loop_state().clone();
    Ok(out)
}

/// Replay `rec` and diff. Deterministic: the logic reads no clock, only the recorded times.
pub fn replay(rec: &Recording) -> Result<ReplayOutcome, ReplayError> {
    if let Some(config) = rec
        .header()
        .map(|h| &h.config)
        .filter(|c| c.get("session").is_some())
    {
        if rec
            .lines
            .iter()
            .any(|l| matches!(l.record, Record::SessionInput { .. }))
        {
            return replay_session(rec, config);
        }
    }
    let cfg = recorded_config(rec)?;
    let mut recorded: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    let mut recorded_count = 0;
    for l in &rec.lines {
        if let Record::Decision { input, command } = &l.record {
            recorded.entry(*input).or_default().push(command.clone());
            recorded_count += 1;
        }
    }
    // A session that did not end cleanly may have lost the tail of its last input's decisions.
    let ended = rec
        .lines
        .iter()
        .any(|l| matches!(l.record, Record::SessionEnd { .. }));
    let last_input = rec
        .lines
        .iter()
        .rev()
        .find(|l| matches!(l.record, Record::LoopEvent { .. }))
        .map(|l| l.seq);
    let mut state = LoopState::new(cfg);
    let mut decisions = Vec::new();
    let mut divergences = Vec::new();
    let mut inputs = 0;
    for l in &rec.lines {
        let Record::LoopEvent { event } = &l.record else {
            continue;
        };
        inputs += 1;
        let ev: Event = serde_json::from_value(event.clone()).map_err(|e| ReplayError::BadEvent {
            seq: l.seq,
            message: e.to_string(),
        })?;
        let out = state.step(ev, MonoTime(l.t_us));
        let replayed: Vec<Value> = out
            .iter()
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect();
        let want = recorded.remove(&l.seq).unwrap_or_default();
        let cut_short = !ended && Some(l.seq) == last_input && replayed.starts_with(&want);
        if want != replayed && !cut_short {
            divergences.push(Divergence {
                input: l.seq,
                t_us: l.t_us,
                event: event.clone(),
                recorded: want,
                replayed: replayed.clone(),
            });
        }
        decisions.extend(out.into_iter().map(|c| (l.seq, l.t_us, c)));
    }
    // Decisions that name an input the recording does not hold.
    for (input, want) in recorded {
        divergences.push(Divergence {
            input,
            t_us: 0,
            event: Value::Null,
            recorded: want,
            replayed: Vec::new(),
        });
    }
    Ok(ReplayOutcome {
        inputs,
        recorded_decisions: recorded_count,
        decisions,
        divergences,
        state,
        session_inputs: 0,
        replayed: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_prefix_stops_at_the_first_difference_on_a_character_boundary() {
        assert_eq!(shared_prefix("", "abc"), 0);
        assert_eq!(shared_prefix("abc", "abd"), 2);
        assert_eq!(shared_prefix("abc", "abcdef"), 3);
        assert_eq!(shared_prefix("abcdef", "abc"), 3);
        // "é" and "è" share their first byte; the prefix ends before the character.
        assert_eq!(shared_prefix("café", "cafè"), 3);
        let reuse = PromptReuse {
            calls: vec![(1, 100, 100), (2, 120, 30)],
        };
        assert_eq!((reuse.bytes(), reuse.new_bytes()), (220, 130));
        assert!((reuse.new_share() - 130.0 / 220.0).abs() < 1e-9);
        assert_eq!(PromptReuse::default().new_share(), 0.0);
    }
}
