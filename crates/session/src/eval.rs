//! Decision evaluation: labelled decision points — a frame, the goal a tactical call is given
//! there, the box a right click lands in — and the scoring of the model's replies: correct, schema-valid,
//! latency and prefix-cache figures per scene kind. Pure: replies and observations in, figures out.

use gamepilot_context::TacticalReply;
use gamepilot_core::{Action, Point, Rect};
use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One labelled decision point of the corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionPoint {
    /// Unique within the corpus: `FRAME/TARGET`.
    pub id: String,
    /// The frame's file name under the corpus's `frames/`.
    pub frame: String,
    /// The scene kind the point is scored under (menu, menu_bar, dialog, puzzle, play).
    pub kind: String,
    /// The goal the tactical call is given.
    pub goal: String,
    /// A reply is right when it clicks inside this box (capture pixels): on a mark whose centre lies in
    /// it, or at a point in it.
    pub accept: Rect,
}

/// The corpus file (`corpus/decisions.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionCorpus {
    pub version: u32,
    pub points: Vec<DecisionPoint>,
}

impl DecisionCorpus {
    /// Every `every`-th point from the first (`every` 0 or 1: all), at most `limit` of them.
    pub fn subset(&self, every: usize, limit: Option<usize>) -> Vec<DecisionPoint> {
        self.points
            .iter()
            .step_by(every.max(1))
            .take(limit.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }
}

/// One labelled declaration point: a goal, the frame the agent declares its check on, and a frame of
/// the game once that goal was done. A declared check is right when it reads false on the first and
/// true on the second ("which sensor tells you the game has started").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclarationPoint {
    pub id: String,
    /// The scene kind it is scored under (`declare/<kind>` in the table).
    pub kind: String,
    pub goal: String,
    /// The frame the check is declared on (under the corpus's `frames/`).
    pub before: String,
    /// A frame of the same game with the goal done.
    pub after: String,
}

/// The declaration corpus file (`corpus/declarations.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclarationCorpus {
    pub version: u32,
    pub points: Vec<DeclarationPoint>,
}

/// A declared check is right when it reads false before the goal and true after it; undefined on
/// either frame is wrong (it could never tell).
pub fn judge_declaration(before: Option<bool>, after: Option<bool>) -> bool {
    before == Some(false) && after == Some(true)
}

/// Where a reply clicks, in capture pixels: a mark's centre or the point itself; `None` when the reply
/// is no click (a key, a wait, a note) or names a mark the observation does not hold.
pub fn click_point(reply: &TacticalReply, obs: &Observation) -> Option<Point> {
    match reply {
        TacticalReply::ClickMark { mark, .. } => obs
            .elements
            .iter()
            .find(|e| e.id == *mark)
            .map(|e| e.bbox.center()),
        TacticalReply::Act(Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. }) => {
            Some(Point::new(*x, *y))
        }
        _ => None,
    }
}

/// The outcome of one decision point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub id: String,
    pub kind: String,
    /// The reply passed the schema (a host error or a broken reply is not valid).
    pub valid: bool,
    pub correct: bool,
    pub latency_ms: f64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// The reply as the model wrote it, or the error.
    pub reply: String,
}

/// Score a valid reply at `point`.
pub fn judge(reply: &TacticalReply, obs: &Observation, point: &DecisionPoint) -> bool {
    click_point(reply, obs).is_some_and(|p| point.accept.contains(p))
}

/// Right answers out of points.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Tally {
    pub correct: usize,
    pub points: usize,
}

impl Tally {
    pub fn accuracy(&self) -> f64 {
        if self.points == 0 {
            0.0
        } else {
            self.correct as f64 / self.points as f64
        }
    }
}

/// The figures of one evaluation run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    pub overall: Tally,
    pub per_kind: BTreeMap<String, Tally>,
    /// Replies that passed the schema, out of all points.
    pub schema_valid: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    /// Prompt tokens the host reused from its prefix cache, out of all prompt tokens after the first call.
    pub prefix_cache_ratio: f64,
}

/// The nearest-rank `p` quantile (0–1) of values sorted ascending; 0 for none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p.clamp(0.0, 1.0)).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `v` sorted ascending (total order: NaN last).
pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

impl EvalSummary {
    pub fn of(results: &[PointResult]) -> EvalSummary {
        let mut per_kind: BTreeMap<String, Tally> = BTreeMap::new();
        let mut overall = Tally::default();
        for r in results {
            let t = per_kind.entry(r.kind.clone()).or_default();
            t.points += 1;
            overall.points += 1;
            if r.correct {
                t.correct += 1;
                overall.correct += 1;
            }
        }
        let mut lat: Vec<f64> = results.iter().filter(|r| r.valid).map(|r| r.latency_ms).collect();
        lat.sort_by(|a, b| a.total_cmp(b));
        let (cached, prompt) = results.iter().skip(1).fold((0u64, 0u64), |(c, p), r| {
            (c + r.cached_tokens, p + r.prompt_tokens)
        });
        EvalSummary {
            overall,
            per_kind,
            schema_valid: if results.is_empty() {
                0.0
            } else {
                results.iter().filter(|r| r.valid).count() as f64 / results.len() as f64
            },
            latency_p50_ms: percentile(&lat, 0.5),
            latency_p95_ms: percentile(&lat, 0.95),
            prefix_cache_ratio: if prompt == 0 {
                0.0
            } else {
                cached as f64 / prompt as f64
            },
        }
    }

    /// The printed table: accuracy per scene kind, then the call figures.
    pub fn table(&self) -> String {
        let mut s = String::from("kind          points  correct  accuracy\n");
        for (k, t) in &self.per_kind {
            s.push_str(&format!(
                "{k:<12} {:>7} {:>8} {:>9.3}\n",
                t.points,
                t.correct,
                t.accuracy()
            ));
        }
        s.push_str(&format!(
            "{:<12} {:>7} {:>8} {:>9.3}\nschema-valid replies {:.3}; latency p50 {:.0} ms, p95 {:.0} ms; prefix cache {:.3}\n",
            "all",
            self.overall.points,
            self.overall.correct,
            self.overall.accuracy(),
            self.schema_valid,
            self.latency_p50_ms,
            self.latency_p95_ms,
            self.prefix_cache_ratio
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{ElementId, MonoTime, MouseButton, Size};
    use gamepilot_vision::{Element, ElementSource, FrameChange};

    fn obs() -> Observation {
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(1280, 720),
            class: FrameChange::Scene,
            texts: Vec::new(),
            elements: vec![Element {
                id: ElementId(4),
                bbox: Rect::new(500, 300, 200, 60),
                confidence: 0.9,
                source: ElementSource::Text,
                label: Some("Play".into()),
                looks: None,
                layer: None,
                selected: false,
            }],
        }
    }

    fn point() -> DecisionPoint {
        DecisionPoint {
            id: "arena-menu-0/Play".into(),
            frame: "arena-menu-0.png".into(),
            kind: "menu".into(),
            goal: "Click the \"Play\" button.".into(),
            accept: Rect::new(460, 288, 360, 84),
        }
    }

    #[test]
    fn a_click_inside_the_box_is_right_by_mark_or_by_point_anything_else_is_wrong() {
        let (o, p) = (obs(), point());
        let mark = |id| TacticalReply::ClickMark {
            mark: ElementId(id),
            button: MouseButton::Left,
        };
        assert!(judge(&mark(4), &o, &p));
        assert!(!judge(&mark(9), &o, &p), "a mark the observation lacks");
        let at = |x, y| {
            TacticalReply::Act(Action::Click {
                x,
                y,
                button: MouseButton::Left,
            })
        };
        assert!(judge(&at(600, 330), &o, &p));
        assert!(!judge(&at(10, 10), &o, &p));
        assert!(!judge(&TacticalReply::Note { text: "Play".into() }, &o, &p));
    }

    #[test]
    fn the_summary_counts_per_kind_validity_latency_and_the_cache() {
        let r = |kind: &str, valid, correct, ms, cached| PointResult {
            id: String::new(),
            kind: kind.into(),
            valid,
            correct,
            latency_ms: ms,
            prompt_tokens: 100,
            cached_tokens: cached,
            reply: String::new(),
        };
        let s = EvalSummary::of(&[
            r("menu", true, true, 100.0, 0),
            r("menu", true, false, 300.0, 90),
            r("puzzle", false, false, 0.0, 0),
            r("puzzle", true, true, 200.0, 80),
        ]);
        assert_eq!(
            s.overall,
            Tally {
                correct: 2,
                points: 4
            }
        );
        assert_eq!(s.per_kind["menu"].accuracy(), 0.5);
        assert_eq!(s.per_kind["puzzle"].correct, 1);
        assert_eq!(s.schema_valid, 0.75);
        assert_eq!(s.latency_p50_ms, 200.0);
        assert!((s.prefix_cache_ratio - 170.0 / 300.0).abs() < 1e-9);
        assert!(s.table().contains("all"));
        let corpus = DecisionCorpus {
            version: 1,
            points: (0..10).map(|_| point()).collect(),
        };
        assert_eq!(corpus.subset(3, None).len(), 4);
        assert_eq!(corpus.subset(1, Some(2)).len(), 2);
    }
}

#[cfg(test)]
mod declaration_tests {
    use super::*;

    #[test]
    fn a_declared_check_is_right_only_false_before_and_true_after() {
        // sensor-expressions.md "Declaration and lifetime": a goal check must be false when declared
        assert!(judge_declaration(Some(false), Some(true)));
        assert!(!judge_declaration(Some(true), Some(true)), "already true");
        assert!(!judge_declaration(Some(false), Some(false)), "never turns");
        assert!(!judge_declaration(None, Some(true)), "undefined before");
        assert!(!judge_declaration(Some(false), None), "undefined after");
        let corpus: DeclarationCorpus = serde_json::from_str(
            r#"{"version": 1, "points": [{"id": "a", "kind": "menu", "goal": "g", "before": "b.png", "after": "c.png"}]}"#,
        )
        .unwrap();
        assert_eq!(corpus.points[0].after, "c.png");
    }
}
