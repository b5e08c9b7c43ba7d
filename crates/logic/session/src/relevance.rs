//! The order a small model reads the elements in: each element is scored against the
//! current subgoal (twice) and the goal — a label the text names whole, label words sharing a stem with
//! the text's words (action verbs and function words aside), a grid cell whose row and column the text
//! names — best first; once the avatar is known, the places `move_to` may go lead, nearest first.

use crate::selfid::move_targets;
use gamepilot_core::ElementId;
use gamepilot_grounding::AvatarModel;
use gamepilot_vision::grid::{grid_cells, GridCell};
use gamepilot_vision::{Element, ElementSource, Observation};
use serde::{Deserialize, Serialize};

/// What the elements are ordered toward: the current subgoal (weighs double) and the session's goal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Focus {
    pub goal: String,
    pub subgoal: String,
}

impl Focus {
    pub fn new(goal: impl Into<String>, subgoal: impl Into<String>) -> Focus {
        Focus {
            goal: goal.into(),
            subgoal: subgoal.into(),
        }
    }
}

/// Words that say how to act or join a sentence, never what to act on: they match nothing.
const UNSPECIFIC: &[&str] = &[
    "click", "press", "tap", "select", "choose", "pick", "then", "the", "and", "from", "with", "for", "into",
    "onto", "button", "around", "that", "this", "your",
];

/// The words of `text` worth matching (lower case, three letters or more).
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// Whether two words share a stem (their first four letters, or all of a shorter one).
pub(crate) fn same_stem(a: &str, b: &str) -> bool {
    let n = a.chars().count().min(b.chars().count()).min(4);
    a.chars().take(n).eq(b.chars().take(n))
}

/// The numbers that follow `word` in `text` ("row 3, column 9" → row: [3]).
fn numbers_after(text: &str, word: &[&str]) -> Vec<u32> {
    let tokens: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    tokens
        .windows(2)
        .filter(|w| word.contains(&w[0].as_str()))
        .filter_map(|w| w[1].parse().ok())
        .collect()
}

/// One focus text read once for all the elements it is matched against.
struct FocusText {
    words: Vec<String>,
    /// Its words that name something (not an action verb or a function word).
    specific: Vec<String>,
    rows: Vec<u32>,
    columns: Vec<u32>,
}

impl FocusText {
    fn new(text: &str) -> FocusText {
        let words = words(text);
        let specific = words
            .iter()
            .filter(|w| !UNSPECIFIC.contains(&w.as_str()))
            .cloned()
            .collect();
        FocusText {
            words,
            specific,
            rows: numbers_after(text, &["row"]),
            columns: numbers_after(text, &["column", "col"]),
        }
    }

    /// How strongly this text points at an element: 4 when it names the whole label (as words), one per
    /// label word sharing a stem with a specific word of the text, 6 for a cell at a row and column the
    /// text names.
    fn score(&self, e: &Element, cell: Option<&GridCell>) -> u32 {
        let mut s = 0;
        if let Some(label) = e.label.as_deref() {
            let label_words = words(label);
            if !label_words.is_empty() && self.words.windows(label_words.len()).any(|w| w == label_words) {
                s += 4;
            }
            s += label_words
                .iter()
                .filter(|l| !UNSPECIFIC.contains(&l.as_str()))
                .filter(|l| self.specific.iter().any(|w| same_stem(l, w)))
                .count() as u32;
        }
        if let Some(c) = cell {
            if self.rows.contains(&c.row) && self.columns.contains(&c.column) {
                s += 6;
            }
        }
        s
    }
}

/// The elements in reading order for a small model: those the focus points at, best first (a button
/// before plain text at equal score, otherwise the perceiver's order); with the avatar known, the places
/// `move_to` may go come before them, nearest the avatar first. The elements of the game's open popup
/// or dialog lead them all, then the selected item of a list. Elements not returned follow in their own order.
pub fn model_order(obs: &Observation, focus: &Focus, avatar: Option<&AvatarModel>) -> Vec<ElementId> {
    // What the game shows on top (an open menu, a dialog) is what a person reads first, then where a
    // menu's cursor rests.
    let mut out = focus_order(obs, focus, avatar);
    let leading = |e: &Element| e.layer.is_some() || e.selected;
    let more: Vec<ElementId> = obs
        .elements
        .iter()
        .filter(|e| leading(e) && !out.contains(&e.id))
        .map(|e| e.id)
        .collect();
    out.extend(more);
    out.sort_by_key(|id| match obs.element(*id) {
        Some(e) if e.layer.is_some() => 0,
        Some(e) if e.selected => 1,
        _ => 2,
    });
    out
}

/// The elements the focus points at (its words name them), best first.
pub(crate) fn pointed_at(obs: &Observation, focus: &Focus) -> Vec<ElementId> {
    focus_order(obs, focus, None)
}

fn focus_order(obs: &Observation, focus: &Focus, avatar: Option<&AvatarModel>) -> Vec<ElementId> {
    let cells = grid_cells(&obs.elements);
    let (subgoal, goal) = (FocusText::new(&focus.subgoal), FocusText::new(&focus.goal));
    let mut scored: Vec<(u32, bool, usize, ElementId)> = obs
        .elements
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let cell = cells.iter().find(|c| c.id == e.id);
            let s = 2 * subgoal.score(e, cell) + goal.score(e, cell);
            let plain_text = e.source == ElementSource::Text;
            (s > 0).then_some((s, plain_text, i, e.id))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let scored: Vec<ElementId> = scored.into_iter().map(|(.., id)| id).collect();
    let Some(a) = avatar else {
        return scored;
    };
    // With the avatar known, the places it can go lead, nearest first: the labels the focus points at
    // on a play view are mostly its HUD ("0 Coins"), read but not walked to.
    let c = a.bbox.center();
    let mut targets: Vec<(i64, ElementId)> = move_targets(obs, a)
        .into_iter()
        .filter_map(|id| {
            let p = obs.element(id)?.bbox.center();
            Some((i64::from(p.x - c.x).pow(2) + i64::from(p.y - c.y).pow(2), id))
        })
        .collect();
    targets.sort();
    let mut out: Vec<ElementId> = targets.into_iter().map(|(_, id)| id).collect();
    out.extend(
        scored
            .into_iter()
            .filter(|id| !out.contains(id))
            .collect::<Vec<_>>(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{MonoTime, Rect, Size};
    use gamepilot_vision::FrameChange;

    fn element(id: u32, source: ElementSource, label: Option<&str>, x: i32, y: i32) -> Element {
        Element {
            id: ElementId(id),
            bbox: Rect::new(x, y, 40, 40),
            confidence: 1.0,
            source,
            label: label.map(str::to_string),
            looks: None,
            layer: None,
            selected: false,
        }
    }

    fn obs(elements: Vec<Element>) -> Observation {
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(1280, 720),
            class: FrameChange::Scene,
            texts: vec![],
            elements,
        }
    }

    #[test]
    fn a_label_the_goal_names_whole_comes_before_labels_that_merely_share_words() {
        // The practice menu: the subtitle shares "collect" and "coin" with the goal, the hint shares
        // "click"; the goal names "Play" whole. The demo once clicked the title and the subtitle.
        let o = obs(vec![
            element(1, ElementSource::Text, Some("PRACTICEARENA"), 600, 120),
            element(
                2,
                ElementSource::Text,
                Some("Collect coins, dodge spikes"),
                500,
                200,
            ),
            element(4, ElementSource::Rect, Some("Play"), 600, 300),
            element(5, ElementSource::Rect, Some("Options"), 600, 400),
            element(
                7,
                ElementSource::Text,
                Some("Hover over a button, then click"),
                500,
                680,
            ),
        ]);
        let goal = "Start the game from the menu (click Play), then walk around and collect a coin.";
        assert_eq!(
            model_order(&o, &Focus::new(goal, ""), None),
            [ElementId(4), ElementId(2)]
        );
        // The subgoal weighs double: once it is about coins, the subtitle leads.
        assert_eq!(
            model_order(&o, &Focus::new(goal, "Collect a coin"), None),
            [ElementId(2), ElementId(4)]
        );
        assert_eq!(
            model_order(&o, &Focus::new("Click \"Options\".", ""), None),
            [ElementId(5)]
        );
    }

    #[test]
    fn an_open_popups_items_lead_the_listing() {
        // FR-PERC-006: the game's menu, open over its window, is read first; a goal word still ranks
        // within the popup and on the window below it.
        let mut e = vec![
            element(1, ElementSource::Text, Some("Type"), 60, 2),
            element(2, ElementSource::Text, Some("Help"), 108, 2),
            element(3, ElementSource::Text, Some("5x5"), 80, 30),
            element(4, ElementSource::Text, Some("9x9"), 80, 80),
        ];
        for p in &mut e[2..] {
            p.layer = Some(gamepilot_core::WindowLayer::Popup);
        }
        let o = obs(e);
        assert_eq!(
            model_order(
                &o,
                &Focus::new("Choose the 9x9 board from the Type menu", ""),
                None
            ),
            [ElementId(4), ElementId(3), ElementId(1)]
        );
    }

    #[test]
    fn a_cell_whose_row_and_column_the_goal_names_comes_first() {
        let mut e = vec![element(1, ElementSource::Text, Some("Game"), 0, 0)];
        let mut id = 10;
        for y in [100, 144, 188] {
            for x in [100, 144, 188] {
                e.push(element(id, ElementSource::Grid, None, x, y));
                id += 1;
            }
        }
        let o = obs(e);
        let goal = "Click the grid cell in row 2, column 3 (counted from the top left) of the 3x3 grid.";
        assert_eq!(model_order(&o, &Focus::new(goal, ""), None), [ElementId(15)]);
        assert!(model_order(&o, &Focus::new("Click the cell in row 4, column 1.", ""), None).is_empty());
    }
}
