//! Figures drawn from a recording: frames, actions with their verdicts, the failure-attribution histogram,
//! cadence timing, model latency, deliberative windows, stuck signals and escalations.

use crate::reader::Recording;
use gamepilot_grounding::{ActionId, FailureCause, FailureHistogram, Verdict};
use gamepilot_planner::{Command, Event};
use gamepilot_recording::Record;
use serde_json::Value;
use std::collections::BTreeMap;

/// One tick of a cadence, from a `timing` record.
#[derive(Debug, Clone, PartialEq)]
pub struct TimingTick {
    pub tick: u64,
    pub scheduled_us: u64,
    pub started_us: u64,
    pub duration_us: u64,
    pub held: Vec<String>,
}

/// A written frame.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameRef {
    pub frame: u64,
    pub file: String,
    pub t_us: u64,
    pub marked: bool,
    pub change: String,
}

/// An executed action and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRow {
    pub t_us: u64,
    pub action: ActionId,
    pub subgoal: u32,
    pub summary: String,
    pub verdict: Option<Verdict>,
    pub cause: Option<FailureCause>,
}

/// A deliberative pass: when it started and, if it did, ended.
#[derive(Debug, Clone, PartialEq)]
pub struct PassWindow {
    pub pass: u64,
    pub trigger: String,
    pub start_us: u64,
    pub end_us: Option<u64>,
}

/// A timestamped label (stuck signal, rung, interlock, stop).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub t_us: u64,
    pub label: String,
}

/// Everything the report shows.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    pub goal: String,
    pub duration_us: u64,
    pub frames: Vec<FrameRef>,
    pub actions: Vec<ActionRow>,
    pub verdicts: BTreeMap<&'static str, u64>,
    pub histogram: FailureHistogram,
    pub reflex: Vec<TimingTick>,
    /// (time, latency ms) of tactical replies.
    pub tactical_latency: Vec<(u64, f64)>,
    /// (time, latency ms) of deliberative replies.
    pub deliberative_latency: Vec<(u64, f64)>,
    pub passes: Vec<PassWindow>,
    pub stuck: Vec<Mark>,
    pub escalations: Vec<Mark>,
    pub interlocks: Vec<Mark>,
    pub compactions: Vec<Mark>,
    pub stop: Option<Mark>,
}

/// A one-line description of an action payload: `{"action":"key","key":"Up"}` → `key key=Up`.
fn summary(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => {
            let mut parts: Vec<String> = Vec::new();
            if let Some(Value::String(kind)) = m.get("action") {
                parts.push(kind.clone());
            }
            for (k, val) in m {
                if k != "action" {
                    match val {
                        Value::String(s) => parts.push(format!("{k}={s}")),
                        other => parts.push(format!("{k}={other}")),
                    }
                }
            }
            parts.join(" ")
        }
        other => other.to_string(),
    }
}

fn snake(v: &impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

impl Analysis {
    pub fn of(rec: &Recording) -> Analysis {
        let mut a = Analysis {
            goal: rec.header().map(|h| h.goal.clone()).unwrap_or_default(),
            ..Default::default()
        };
        let has_decisions = rec
            .lines
            .iter()
            .any(|l| matches!(l.record, Record::Decision { .. }));
        let mut proposed: BTreeMap<ActionId, String> = BTreeMap::new();
        let mut event_of: BTreeMap<u64, Event> = BTreeMap::new();
        let mut verdicts: BTreeMap<ActionId, (Verdict, Option<FailureCause>)> = BTreeMap::new();
        let mut rows: Vec<ActionRow> = Vec::new();
        let mut executed: Vec<ActionRow> = Vec::new();
        for l in &rec.lines {
            a.duration_us = a.duration_us.max(l.t_us);
            match &l.record {
                Record::Frame {
                    frame,
                    file,
                    marked,
                    change,
                    ..
                } => a.frames.push(FrameRef {
                    frame: *frame,
                    file: file.clone(),
                    t_us: l.t_us,
                    marked: *marked,
                    change: change.clone(),
                }),
                Record::Action {
                    action,
                    subgoal,
                    payload,
                    ..
                } => rows.push(ActionRow {
                    t_us: l.t_us,
                    action: *action,
                    subgoal: *subgoal,
                    summary: summary(payload),
                    verdict: None,
                    cause: None,
                }),
                Record::Verdict {
                    action,
                    verdict,
                    cause,
                } if !has_decisions => {
                    verdicts.insert(*action, (*verdict, *cause));
                    if let Some(c) = cause {
                        a.histogram.record(*c);
                    }
                }
                // Failures the session core attributes itself (no action: action choice over a streak);
                // the loop logic's own are counted from its decisions.
                Record::Failure {
                    action: None, cause, ..
                } => a.histogram.record(*cause),
                Record::Timing {
                    cadence,
                    tick,
                    scheduled_us,
                    started_us,
                    duration_us,
                    held,
                } if cadence == "reflex" => a.reflex.push(TimingTick {
                    tick: *tick,
                    scheduled_us: *scheduled_us,
                    started_us: *started_us,
                    duration_us: *duration_us,
                    held: held.clone(),
                }),
                Record::Reply {
                    cadence, latency_ms, ..
                } => {
                    if cadence == "tactical" {
                        a.tactical_latency.push((l.t_us, *latency_ms));
                    } else if cadence == "deliberative" {
                        a.deliberative_latency.push((l.t_us, *latency_ms));
                    }
                }
                Record::Interlock { interlock, detail } => a.interlocks.push(Mark {
                    t_us: l.t_us,
                    label: format!("{}: {detail}", interlock.name()),
                }),
                Record::Compaction {
                    before_tokens,
                    after_tokens,
                    ..
                } => a.compactions.push(Mark {
                    t_us: l.t_us,
                    label: format!("{before_tokens} → {after_tokens} tokens"),
                }),
                Record::LoopEvent { event } => {
                    if let Ok(ev) = serde_json::from_value::<Event>(event.clone()) {
                        match &ev {
                            Event::ActionProposed { action, key, .. } => {
                                proposed.insert(*action, key.clone());
                            }
                            Event::DeliberationDone { pass, .. } | Event::DeliberationFailed { pass, .. } => {
                                if let Some(w) = a
                                    .passes
                                    .iter_mut()
                                    .find(|w| w.pass == *pass && w.end_us.is_none())
                                {
                                    w.end_us = Some(l.t_us);
                                }
                            }
                            _ => {}
                        }
                        event_of.insert(l.seq, ev);
                    }
                }
                Record::Decision { command, .. } => {
                    let Ok(cmd) = serde_json::from_value::<Command>(command.clone()) else {
                        continue;
                    };
                    match cmd {
                        Command::StartDeliberation { pass, trigger } => a.passes.push(PassWindow {
                            pass,
                            trigger: snake(&trigger),
                            start_us: l.t_us,
                            end_us: None,
                        }),
                        Command::Verdict { action, verdict } => {
                            verdicts.insert(action, (verdict, None));
                        }
                        Command::Failure { action, cause } => {
                            a.histogram.record(cause);
                            if let Some(v) = action.and_then(|id| verdicts.get_mut(&id)) {
                                v.1 = Some(cause);
                            }
                        }
                        Command::Execute { action, subgoal } => executed.push(ActionRow {
                            t_us: l.t_us,
                            action,
                            subgoal: subgoal.0,
                            summary: proposed.get(&action).cloned().unwrap_or_default(),
                            verdict: None,
                            cause: None,
                        }),
                        Command::Stuck { signal } => a.stuck.push(Mark {
                            t_us: l.t_us,
                            label: snake(&signal),
                        }),
                        Command::Escalate { rung } => a.escalations.push(Mark {
                            t_us: l.t_us,
                            label: snake(&rung),
                        }),
                        Command::Stop { reason } => {
                            a.stop = Some(Mark {
                                t_us: l.t_us,
                                label: snake(&reason),
                            })
                        }
                        _ => {}
                    }
                }
                Record::SessionEnd { reason, .. } if a.stop.is_none() => {
                    a.stop = Some(Mark {
                        t_us: l.t_us,
                        label: reason.clone(),
                    })
                }
                _ => {}
            }
        }
        // Actions without an `action` record (a recording of the loop logic alone) come from the decisions.
        for e in executed {
            if !rows.iter().any(|r| r.action == e.action) {
                rows.push(e);
            }
        }
        rows.sort_by_key(|r| (r.t_us, r.action));
        for r in &mut rows {
            if let Some((v, c)) = verdicts.get(&r.action) {
                r.verdict = Some(*v);
                r.cause = *c;
            }
        }
        for (v, _) in verdicts.values() {
            *a.verdicts.entry(v.as_str()).or_default() += 1;
        }
        a.actions = rows;
        a
    }

    /// Reflex start lateness (started − scheduled) of every tick, µs.
    pub fn reflex_lateness_us(&self) -> Vec<u64> {
        self.reflex
            .iter()
            .map(|t| t.started_us.saturating_sub(t.scheduled_us))
            .collect()
    }

    /// The longest gap between consecutive reflex tick starts within [from, to], µs (`None` with fewer
    /// than two ticks there).
    pub fn max_reflex_gap_us(&self, from_us: u64, to_us: u64) -> Option<u64> {
        let starts: Vec<u64> = self
            .reflex
            .iter()
            .map(|t| t.started_us)
            .filter(|s| *s >= from_us && *s <= to_us)
            .collect();
        starts.windows(2).map(|w| w[1].saturating_sub(w[0])).max()
    }

    /// The reflex ticks that started within [from, to].
    pub fn reflex_ticks_between(&self, from_us: u64, to_us: u64) -> Vec<&TimingTick> {
        self.reflex
            .iter()
            .filter(|t| t.started_us >= from_us && t.started_us <= to_us)
            .collect()
    }
}

/// The `p`-th percentile (0..=100, nearest rank) of `values`; `None` when empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let rank = ((p.clamp(0.0, 100.0) / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_summary() {
        let v = serde_json::json!({"action": "click", "x": 3, "y": 4, "button": "left"});
        assert_eq!(summary(&v), "click button=left x=3 y=4");
        assert_eq!(summary(&serde_json::json!("key Up")), "key Up");
    }

    #[test]
    fn percentile_nearest_rank() {
        assert_eq!(percentile(&[], 50.0), None);
        let v: Vec<f64> = (1..=100).map(|i| i as f64).collect();
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&[3.0], 0.0), Some(3.0));
    }
}
