//! Compaction (FR-CTX-004): when a prompt nears the configured fraction of the model's context, the
//! deliberative cadence rewrites the context — goal, plan and notes preserved (plan's finished steps
//! collapsed, notes de-duplicated), history summarised, observations discarded, research reduced to
//! the conclusions used with their sources — and the act is returned as an event for the recording.

use crate::assemble::Context;
use crate::history::HistoryEntry;
use crate::research::ResearchExcerpt;
use gamepilot_core::MonoTime;
use serde::Serialize;
use std::collections::BTreeMap;

/// What the deliberative model supplies for a compaction; absent parts fall back to a deterministic
/// reduction (so compaction never fails for want of a model reply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionInput {
    /// The model's summary of the action history: what was attempted, what worked, what did not.
    pub history_summary: Option<String>,
    /// The model's rewrite of the notes (duplicates merged, facts the plan moved past dropped).
    pub notes: Option<Vec<String>>,
}

/// The record of one compaction (written to the session recording by the caller).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionEvent {
    pub at: MonoTime,
    /// The prompt size that triggered it (host-reported or estimated) and the threshold it crossed.
    pub tokens_before: u32,
    pub threshold_tokens: u32,
    /// Estimated size of the compacted context (text only).
    pub tokens_after_estimate: u32,
    pub history_entries_summarised: usize,
    pub observations_dropped: usize,
    pub research_before: usize,
    pub research_after: usize,
    pub notes_before: usize,
    pub notes_after: usize,
    pub plan_steps_before: usize,
    pub plan_steps_after: usize,
    /// The history summary now in the context.
    pub summary: String,
}

/// A deterministic history summary: counts per action kind and outcome, and the last outcome of each.
pub fn summarise_history(previous: Option<&str>, entries: &[HistoryEntry]) -> String {
    let mut per_kind: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for e in entries {
        let kind = action_kind(&e.action);
        let outcome = e
            .outcome
            .split([':', ','])
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        *per_kind.entry(kind).or_default().entry(outcome).or_default() += 1;
    }
    let mut parts: Vec<String> = Vec::new();
    if let Some(p) = previous {
        parts.push(p.trim_end_matches('.').to_string());
    }
    if !entries.is_empty() {
        let body: Vec<String> = per_kind
            .iter()
            .map(|(k, outs)| {
                let o: Vec<String> = outs.iter().map(|(o, n)| format!("{n} {o}")).collect();
                format!("{k}: {}", o.join(", "))
            })
            .collect();
        parts.push(format!("{} actions ({})", entries.len(), body.join("; ")));
    }
    if parts.is_empty() {
        "nothing yet".into()
    } else {
        parts.join(". ") + "."
    }
}

/// Longest history summary kept, in bytes (about 300 tokens at 4 bytes a token). Every compaction and
/// every history fold appends to the summary, so over an hour it would only grow; past the bound its
/// oldest parts are cut (at a sentence boundary, marked with a leading "…"). Lasting facts
/// belong in the note block, which compaction keeps whole.
pub const MAX_HISTORY_SUMMARY_BYTES: usize = 1200;

/// `summary` within [`MAX_HISTORY_SUMMARY_BYTES`]: the newest part, cut after a ". " where it can be.
pub(crate) fn bounded_summary(summary: String) -> String {
    if summary.len() <= MAX_HISTORY_SUMMARY_BYTES {
        return summary;
    }
    const MARK: &str = "… ";
    let budget = MAX_HISTORY_SUMMARY_BYTES - MARK.len();
    let mut start = summary.len() - budget;
    while !summary.is_char_boundary(start) {
        start += 1;
    }
    let tail = &summary[start..];
    let tail = match tail.find(". ") {
        Some(i) if i + 2 < tail.len() => &tail[i + 2..],
        _ => tail,
    };
    format!("{MARK}{tail}")
}

fn action_kind(action: &str) -> String {
    if let Some(rest) = action.strip_prefix("note:") {
        let _ = rest;
        return "note".into();
    }
    serde_json::from_str::<serde_json::Value>(action)
        .ok()
        .and_then(|v| v.get("action").and_then(|a| a.as_str()).map(str::to_string))
        .unwrap_or_else(|| action.split_whitespace().next().unwrap_or("other").to_string())
}

impl Context {
    /// Compacts the context in place and returns the event. `tokens_before` is the prompt size that
    /// triggered it (see [`Context::needs_compaction`]).
    pub fn compact(&mut self, input: CompactionInput, tokens_before: u32, now: MonoTime) -> CompactionEvent {
        let cap = self.config().note_cap;
        let threshold_tokens =
            (self.config().compaction_fraction as f64 * self.config().context_tokens as f64) as u32;
        let notes_before = self.notes.len();
        let research_before = self.research.len();
        let plan_steps_before = self.plan.steps.len();

        // Notes: preserved; the model's rewrite if given (still capped and de-duplicated).
        let notes = input.notes.unwrap_or_else(|| self.notes.notes().to_vec());
        self.notes.replace_all(notes, cap);

        // Research: only excerpts a decision used survive, reduced to the conclusion, source kept.
        self.research = std::mem::take(&mut self.research)
            .into_iter()
            .filter_map(|e| {
                let c = e.used_conclusion.clone()?;
                Some(ResearchExcerpt {
                    text: c.clone(),
                    used_conclusion: Some(c),
                    ..e
                })
            })
            .collect();

        // Plan: preserved, finished steps collapse to one line.
        self.plan = self.plan.collapsed();

        // History: summarised.
        let summarised = self.history.len();
        let summary = bounded_summary(match input.history_summary {
            Some(s) if !s.trim().is_empty() => crate::history::one_line(&s),
            _ => summarise_history(self.history_summary.as_deref(), &self.history),
        });
        self.history_summary = Some(summary.clone());
        self.history.clear();

        // Observations: discarded.
        let observations_dropped = self.past_observations.len();
        self.past_observations.clear();

        CompactionEvent {
            at: now,
            tokens_before,
            threshold_tokens,
            tokens_after_estimate: self.estimate_tokens(),
            history_entries_summarised: summarised,
            observations_dropped,
            research_before,
            research_after: self.research.len(),
            notes_before,
            notes_after: self.notes.len(),
            plan_steps_before,
            plan_steps_after: self.plan.steps.len(),
            summary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ObservationText;
    use crate::plan::{PlanBlock, PlanStep, StepStatus};
    use crate::prompt::{Block, Cadence};
    use crate::schema::ToolSet;
    use crate::ContextConfig;

    fn busy_context() -> Context {
        let cfg = ContextConfig {
            context_tokens: 2048,
            compaction_fraction: 0.5,
            ..ContextConfig::default()
        };
        let mut c = Context::new(cfg, &ToolSet::all(), "Clear level 1", MonoTime::ZERO).unwrap();
        c.note("Jump with space", MonoTime::from_millis(1)).unwrap();
        c.note("Coins are worth 10 points", MonoTime::from_millis(2))
            .unwrap();
        c.add_research(
            ResearchExcerpt::new(
                "https://a.example/wiki",
                "2026-09-12T14:02Z",
                &"long page text ".repeat(50),
            )
            .unwrap(),
        );
        c.add_research(
            ResearchExcerpt::new(
                "https://b.example/forum",
                "2026-09-12T14:05Z",
                "irrelevant chatter",
            )
            .unwrap(),
        );
        c.mark_research_used(0, "The exit is behind the waterfall")
            .unwrap();
        c.set_plan(PlanBlock {
            steps: vec![
                PlanStep::new("Find the key", StepStatus::Done),
                PlanStep::new("Open the gate", StepStatus::Done),
                PlanStep::new("Reach the waterfall", StepStatus::Active),
            ],
            subgoal: Some("Reach the waterfall".into()),
        });
        for i in 0..120u64 {
            let (a, o) = if i % 3 == 0 {
                (
                    r#"{"action":"hold_key","key":"d","duration_ms":800}"#,
                    "confirmed",
                )
            } else {
                (r#"{"action":"click_mark","mark":4}"#, "refuted: no change")
            };
            c.record(HistoryEntry::new(MonoTime::from_millis(100 + i * 500), a, o));
            c.end_tick(ObservationText::new(
                MonoTime::from_millis(100 + i * 500),
                format!("marks: [4] lever; tick {i}"),
            ));
        }
        c
    }

    #[test]
    fn compaction_triggers_at_the_configured_fraction() {
        // FR-CTX-004: threshold = fraction of the model's context
        let c = busy_context();
        assert!(!c.needs_compaction(1023));
        assert!(c.needs_compaction(1024));
        // FR-MODEL-004: a smaller context (degrade ladder) moves the threshold with it
        let mut c = c;
        c.set_context_tokens(1024).unwrap();
        assert!(c.needs_compaction(512) && !c.needs_compaction(511));
        assert!(c.set_context_tokens(10).is_err());
    }

    #[test]
    fn compaction_preserves_goal_plan_notes_and_reduces_the_rest() {
        // FR-CTX-004
        let mut c = busy_context();
        let before = c.assemble(
            Cadence::Deliberative,
            &ObservationText::new(MonoTime::from_millis(70_000), "now"),
            None,
        );
        let tokens_before = before.estimate_tokens(4.0, 0);
        let ev = c.compact(
            CompactionInput::default(),
            tokens_before,
            MonoTime::from_millis(70_000),
        );
        let after = c.assemble(
            Cadence::Deliberative,
            &ObservationText::new(MonoTime::from_millis(70_000), "now"),
            None,
        );

        assert_eq!(before.block_text(Block::System), after.block_text(Block::System));
        assert_eq!(before.block_text(Block::Goal), after.block_text(Block::Goal));
        assert_eq!(c.notes().len(), 2);
        let plan = after.block_text(Block::Plan).unwrap();
        assert!(
            plan.contains("Done earlier: Find the key; Open the gate"),
            "{plan}"
        );
        assert!(plan.contains("[>] Reach the waterfall"), "{plan}");
        let research = after.block_text(Block::Research).unwrap();
        assert!(
            research.contains("source=\"https://a.example/wiki\""),
            "{research}"
        );
        assert!(
            research.contains("The exit is behind the waterfall"),
            "{research}"
        );
        assert!(
            !research.contains("long page text") && !research.contains("b.example"),
            "{research}"
        );
        let hist = after.block_text(Block::History).unwrap();
        assert!(hist.contains("122 actions"), "{hist}");
        assert!(hist.contains("click_mark: 80 refuted"), "{hist}");
        let obs = after.block_text(Block::Observation).unwrap();
        assert!(!obs.contains("tick"), "{obs}");

        assert_eq!(ev.history_entries_summarised, 122);
        assert_eq!(ev.observations_dropped, 16);
        assert_eq!((ev.research_before, ev.research_after), (2, 1));
        assert_eq!((ev.plan_steps_before, ev.plan_steps_after), (3, 2));
        assert_eq!(ev.threshold_tokens, 1024);
        assert!(
            ev.tokens_after_estimate < tokens_before,
            "{} < {}",
            ev.tokens_after_estimate,
            tokens_before
        );
        assert!(serde_json::to_string(&ev)
            .unwrap()
            .contains("\"observations_dropped\":16"));
    }

    #[test]
    fn model_summary_and_note_rewrite_are_used_and_capped() {
        // FR-CTX-004, FR-CTX-005
        let mut c = busy_context();
        let input = CompactionInput {
            history_summary: Some("Tried the lever 80 times,\nit never moved; walking right works.".into()),
            notes: Some(vec![
                "Jump with space".into(),
                "jump with SPACE!".into(),
                "Lever 4 is decorative".into(),
            ]),
        };
        let ev = c.compact(input, 1500, MonoTime::from_millis(1));
        assert_eq!(
            ev.summary,
            "Tried the lever 80 times, it never moved; walking right works."
        );
        assert_eq!(
            c.notes().notes(),
            &["Jump with space".to_string(), "Lever 4 is decorative".to_string()]
        );
        // a second compaction folds the earlier summary in
        c.record(HistoryEntry::new(
            MonoTime::from_millis(5),
            r#"{"action":"wait","duration_ms":100}"#,
            "confirmed",
        ));
        let ev2 = c.compact(CompactionInput::default(), 1500, MonoTime::from_millis(6));
        assert!(ev2.summary.starts_with("Tried the lever"), "{}", ev2.summary);
        assert!(
            ev2.summary.contains("1 actions (wait: 1 confirmed)"),
            "{}",
            ev2.summary
        );
    }

    #[test]
    fn the_history_summary_is_bounded_across_compactions() {
        // FR-CTX-004: every compaction appends to the summary; it keeps its newest part.
        let mut c = busy_context();
        for round in 0..200u64 {
            for i in 0..5u64 {
                c.record(HistoryEntry::new(
                    MonoTime::from_millis(round * 1000 + i),
                    format!(r#"{{"action":"key","key":"r{round}"}}"#),
                    "confirmed",
                ));
            }
            let ev = c.compact(
                CompactionInput::default(),
                1500,
                MonoTime::from_millis(round * 1000 + 999),
            );
            assert!(
                ev.summary.len() <= MAX_HISTORY_SUMMARY_BYTES,
                "{}",
                ev.summary.len()
            );
        }
        let s = c.history_summary().unwrap();
        assert!(s.starts_with("… "), "{s}");
        assert!(s.ends_with("5 actions (key: 5 confirmed)."), "{s}");
        assert_eq!(bounded_summary("short.".into()), "short.");
        let multibyte = "é. ".repeat(2000);
        assert!(bounded_summary(multibyte).len() <= MAX_HISTORY_SUMMARY_BYTES);
    }
}
