//! The replay driver: feeds a recording's loop events through a fresh `LoopState` with the recorded
//! configuration, at the recorded times, and diffs the decisions against the recorded ones.

use crate::reader::Recording;
use crate::ReplayError;
use gamepilot_core::MonoTime;
use gamepilot_planner::{Command, Event, LoopConfig, LoopState};
use gamepilot_recording::Record;
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
}

impl ReplayOutcome {
    pub fn matches(&self) -> bool {
        self.divergences.is_empty()
    }
}

/// The loop configuration recorded in the header (`null` or `{}` give the defaults).
pub fn recorded_config(rec: &Recording) -> Result<LoopConfig, ReplayError> {
    match rec.header().map(|h| &h.config) {
        None | Some(Value::Null) => Ok(LoopConfig::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| ReplayError::BadConfig(e.to_string())),
    }
}

/// Replay `rec` and diff. Deterministic: the logic reads no clock, only the recorded times.
pub fn replay(rec: &Recording) -> Result<ReplayOutcome, ReplayError> {
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
    })
}
