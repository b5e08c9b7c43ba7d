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
    /// More boxes a right click may land in (a move any of several tiles makes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_accept: Vec<Rect>,
    /// Keys a right reply may tap or hold instead (`Escape` closes a dialog, an arrow moves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_keys: Vec<String>,
    /// The game's popups and dialogs the frame shows (their boxes, as capture composed them): what is
    /// in a menu is listed `in popup` as `run` lists it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<gamepilot_core::LayerRegion>,
    /// A goal-directed point: where the session stood when it had to choose (`goal` is then the
    /// user's goal in words, as `run` was given it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<PointHistory>,
}

/// What a goal-directed point's session had done before it, taken from a real-game recording: its
/// plan and the actions it tried, each with the frame it was taken on and the verdict it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointHistory {
    /// Plan steps already done, in order.
    #[serde(default)]
    pub done: Vec<String>,
    /// The subgoal being pursued at the point.
    pub subgoal: String,
    /// Plan steps after it.
    #[serde(default)]
    pub pending: Vec<String>,
    #[serde(default)]
    pub tried: Vec<TriedAction>,
}

/// One action a goal-directed point's session took before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriedAction {
    /// As the executor ran it (`{"action":"click","x":77,"y":14,"button":"left"}`).
    pub action: Action,
    /// The frame it was taken on (under the corpus's `frames/`): what it clicked is read from it.
    pub frame: String,
    /// Its verdict: `confirmed`, `refuted` or `inconclusive`.
    pub verdict: String,
    /// Seconds into the session it was taken.
    pub at_s: f64,
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
    /// The session chose without a model call (`eval --as-run`): no latency of its own.
    #[serde(default)]
    pub by_session: bool,
}

/// The tactical prompt `run` would have sent at a goal-directed point: the fresh session's context for
/// the user's goal (`session`, built from that goal), holding the point's plan and the actions it tried
/// — each named as the session names an action it took, from the observation `tried_on` it was taken
/// on — with `observation` as block 7.
pub fn prompt_at(
    session: &crate::Session,
    before: &PointHistory,
    tried_on: &[Observation],
    observation: &gamepilot_context::ObservationText,
) -> gamepilot_context::Prompt {
    use gamepilot_context::{HistoryEntry, PlanBlock, PlanStep, StepStatus};
    let mut context = session.context().clone();
    let steps = (before
        .done
        .iter()
        .map(|s| PlanStep::new(s.as_str(), StepStatus::Done)))
    .chain(std::iter::once(PlanStep::new(
        before.subgoal.as_str(),
        StepStatus::Active,
    )))
    .chain(
        before
            .pending
            .iter()
            .map(|s| PlanStep::new(s.as_str(), StepStatus::Pending)),
    )
    .collect();
    context.set_plan(PlanBlock {
        steps,
        subgoal: Some(before.subgoal.clone()),
    });
    for (tried, obs) in before.tried.iter().zip(tried_on) {
        let at = gamepilot_core::MonoTime((tried.at_s.max(0.0) * 1e6) as u64);
        let label = crate::session::action_label(&tried.action, None, obs);
        context.record(HistoryEntry::new(at, label, tried.verdict.as_str()));
    }
    context.assemble(gamepilot_context::Cadence::Tactical, observation, None)
}

/// What `run` does when the model answers `unsure` on `obs`: the survey's first move (`crate::survey`) —
/// its first try, the untried element the goal and step point at most, or Escape for an open menu that
/// names nothing of the goal; `None` when there is nothing to try.
pub fn survey_choice(goal: &str, subgoal: &str, obs: &Observation) -> Option<TacticalReply> {
    let here = crate::safe_state::ScreenPrint::of(obs, crate::scene::scene_kind(obs));
    let mut survey = crate::survey::Survey::default();
    let focus = crate::relevance::Focus::new(goal, subgoal);
    survey.unsure(obs, here.clone(), &focus);
    let click = |mark| TacticalReply::ClickMark {
        mark,
        button: gamepilot_core::MouseButton::Left,
    };
    match survey.next(obs, here.as_ref(), &focus, &[])? {
        crate::survey::Move::Try { mark, .. } => Some(click(mark)),
        crate::survey::Move::Back(crate::safe_state::Step::Click(mark, _)) => Some(click(mark)),
        crate::survey::Move::Back(crate::safe_state::Step::Press(key)) => Some(TacticalReply::Act(key)),
        _ => None,
    }
}

/// What `run`'s session does at a goal-directed point before any model call: the element the subgoal
/// names or whose whole label its words hold (not one the tried clicks already landed on), clicked
/// without a model call, or Escape when the subgoal closes what is open and nothing is labelled so
/// (`crate::direct`). `None`: the model chooses. `tried_on` are the frames the tried actions were taken
/// on, perceived.
pub fn session_choice(
    before: &PointHistory,
    obs: &Observation,
    tried_on: &[Observation],
) -> Option<TacticalReply> {
    let clicked = before
        .tried
        .iter()
        .zip(tried_on)
        .filter_map(|(t, on)| match t.action {
            Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. } => on
                .labelled_at(Point::new(x, y))
                .and_then(|e| e.label.as_deref())
                .map(crate::direct::normalise),
            _ => None,
        })
        .collect();
    let aim = crate::direct::DirectAim {
        name: crate::direct::named_element(&before.subgoal),
        words: crate::direct::clickable_words(&before.subgoal),
        clicked,
    };
    if let Some((mark, _)) = aim.target(obs, &[]) {
        return Some(TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        });
    }
    aim.dismisses(obs, &[])
        .then(|| TacticalReply::Act(Action::Key { key: "Escape".into() }))
}

/// Score a valid reply at `point`: a click in one of its boxes, or one of its keys tapped or held.
pub fn judge(reply: &TacticalReply, obs: &Observation, point: &DecisionPoint) -> bool {
    if let TacticalReply::Act(Action::Key { key } | Action::HoldKey { key, .. }) = reply {
        return point.accept_keys.iter().any(|k| k.eq_ignore_ascii_case(key));
    }
    click_point(reply, obs)
        .is_some_and(|p| point.accept.contains(p) || point.also_accept.iter().any(|b| b.contains(p)))
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
    /// Points the session decided without a model call (`eval --as-run`).
    #[serde(default)]
    pub by_session: usize,
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
        let mut lat: Vec<f64> = results
            .iter()
            .filter(|r| r.valid && !r.by_session)
            .map(|r| r.latency_ms)
            .collect();
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
            by_session: results.iter().filter(|r| r.by_session).count(),
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
        let mut s = String::from("kind            points  correct  accuracy\n");
        for (k, t) in &self.per_kind {
            s.push_str(&format!(
                "{k:<14} {:>7} {:>8} {:>9.3}\n",
                t.points,
                t.correct,
                t.accuracy()
            ));
        }
        s.push_str(&format!(
            "{:<14} {:>7} {:>8} {:>9.3}\nschema-valid replies {:.3}; latency p50 {:.0} ms, p95 {:.0} ms; prefix cache {:.3}\n",
            "all",
            self.overall.points,
            self.overall.correct,
            self.overall.accuracy(),
            self.schema_valid,
            self.latency_p50_ms,
            self.latency_p95_ms,
            self.prefix_cache_ratio
        ));
        if self.by_session > 0 {
            s.push_str(&format!(
                "decided by the session without a model call: {} of {} (latency is the model's calls only)\n",
                self.by_session, self.overall.points
            ));
        }
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
            also_accept: Vec::new(),
            accept_keys: Vec::new(),
            layers: Vec::new(),
            before: None,
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
    fn a_goal_directed_point_takes_any_of_its_boxes_or_keys_and_reads_from_json() {
        let (o, mut p) = (obs(), point());
        p.accept = Rect::new(0, 0, 10, 10);
        p.also_accept = vec![Rect::new(460, 288, 360, 84)];
        p.accept_keys = vec!["Escape".into()];
        let mark4 = TacticalReply::ClickMark {
            mark: ElementId(4),
            button: MouseButton::Left,
        };
        assert!(judge(&mark4, &o, &p), "the second box");
        let key = |k: &str| TacticalReply::Act(Action::Key { key: k.into() });
        assert!(judge(&key("escape"), &o, &p));
        assert!(!judge(&key("Return"), &o, &p));
        p.accept_keys.clear();
        assert!(
            !judge(&key("Escape"), &o, &p),
            "a key where only clicks are right"
        );
        let corpus: DecisionCorpus = serde_json::from_str(
            r#"{"version": 2, "points": [{"id": "a", "frame": "f.png", "kind": "goal/menu_item",
                "goal": "Choose the 9x9 board", "accept": [1, 2, 3, 4],
                "before": {"subgoal": "Choose the 9x9 board", "tried": [{"action":
                  {"action": "click", "x": 77, "y": 14, "button": "left"}, "frame": "e.png",
                  "verdict": "confirmed", "at_s": 12.9}]}}]}"#,
        )
        .unwrap();
        let before = corpus.points[0].before.as_ref().unwrap();
        assert_eq!(before.tried[0].frame, "e.png");
        assert!(before.done.is_empty() && corpus.points[0].accept_keys.is_empty());
    }

    fn text(id: u32, label: &str, bbox: Rect, layer: Option<gamepilot_core::WindowLayer>) -> Element {
        Element {
            id: ElementId(id),
            bbox,
            confidence: 0.9,
            source: ElementSource::Text,
            label: Some(label.into()),
            looks: None,
            layer,
            selected: false,
        }
    }

    /// sgt-mines' first screen, and the same with its Type menu open.
    fn mines(menu_open: bool) -> Observation {
        let mut elements = vec![
            text(1, "Game", Rect::new(8, 4, 40, 18), None),
            text(3, "Type", Rect::new(62, 4, 32, 18), None),
            text(4, "Help", Rect::new(110, 4, 30, 18), None),
        ];
        if menu_open {
            let popup = Some(gamepilot_core::WindowLayer::Popup);
            elements.push(text(12, "9x9, 10 mines", Rect::new(84, 28, 100, 18), popup));
            elements.push(text(13, "16x16, 40 mines", Rect::new(84, 78, 110, 18), popup));
        }
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(240, 302),
            class: FrameChange::Scene,
            texts: Vec::new(),
            elements,
        }
    }

    fn after_type() -> PointHistory {
        PointHistory {
            done: Vec::new(),
            subgoal: "Switch to the 16x16 board with 40 mines using the Type menu".into(),
            pending: vec!["Start playing".into()],
            tried: vec![TriedAction {
                action: Action::Click {
                    x: 77,
                    y: 13,
                    button: MouseButton::Left,
                },
                frame: "rg-mines-0.png".into(),
                verdict: "confirmed".into(),
                at_s: 12.5,
            }],
        }
    }

    #[test]
    fn a_goal_directed_prompt_holds_the_plan_and_names_what_each_tried_click_landed_on() {
        let cfg = crate::SessionConfig {
            goal: "Switch to the 16x16 board with 40 mines using the Type menu".into(),
            postconditions: vec!["goal".into()],
            ..crate::SessionConfig::default()
        };
        let session = crate::Session::new(cfg, MonoTime::ZERO).unwrap();
        let obs = gamepilot_context::ObservationText::new(MonoTime::from_millis(13_500), "frame 240x302");
        let text = prompt_at(&session, &after_type(), &[mines(false)], &obs).render();
        assert!(
            text.contains(
                r#"t+12.500s {"action":"click","x":77,"y":13,"button":"left"} on "Type" -> confirmed"#
            ),
            "{text}"
        );
        assert!(text.contains("1. [>] Switch to the 16x16 board"), "{text}");
        assert!(text.contains("2. [ ] Start playing"), "{text}");
    }

    #[test]
    fn the_session_opens_the_named_menu_then_clicks_the_item_its_words_name_then_leaves_it_to_the_model() {
        let mut first = after_type();
        first.tried.clear();
        let click = |mark| {
            Some(TacticalReply::ClickMark {
                mark: ElementId(mark),
                button: MouseButton::Left,
            })
        };
        assert_eq!(session_choice(&first, &mines(false), &[]), click(3));
        assert_eq!(
            session_choice(&after_type(), &mines(true), &[mines(false)]),
            click(13),
            "with the menu open, only its items; \"Type\" was clicked already"
        );
        let mut vague = after_type();
        vague.subgoal = "Make a first move".into();
        assert_eq!(session_choice(&vague, &mines(true), &[mines(false)]), None);
        let mut close = after_type();
        close.subgoal = "close it".into();
        assert_eq!(
            session_choice(&close, &mines(true), &[mines(false)]),
            Some(TacticalReply::Act(Action::Key { key: "Escape".into() })),
            "an open menu and nothing labelled 'close'"
        );
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
            by_session: false,
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
