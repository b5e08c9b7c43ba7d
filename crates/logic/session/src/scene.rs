//! The scene kind of an observation — menu, dialogue or play view — from its texts and elements, without
//! a model. Grounding paths are chosen per scene kind (FR-GND-004), not per frame-change class.

use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};

/// What kind of screen an observation shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SceneKind {
    /// A question with answer buttons (confirmations, pop-ups).
    Dialogue,
    /// A list of labelled choices (title screen, pause panel, settings).
    Menu,
    /// Everything else: the game itself.
    Play,
}

impl SceneKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SceneKind::Dialogue => "dialogue",
            SceneKind::Menu => "menu",
            SceneKind::Play => "play",
        }
    }
}

const ANSWERS: &[&str] = &[
    "yes", "no", "ok", "cancel", "confirm", "accept", "decline", "continue",
];

fn is_answer(text: &str) -> bool {
    let t = text.trim().trim_end_matches(['!', '.']).to_lowercase();
    ANSWERS.contains(&t.as_str())
}

/// Classify an observation. Dialogue: a question (a text ending in `?`) beside at least one answer
/// button. Menu: at least three short texts (≤ 24 characters, ≤ 3 words) stacked in one column (centres
/// within a tenth of the frame's width), or at least three labelled button elements. Otherwise play.
pub fn scene_kind(obs: &Observation) -> SceneKind {
    let question = obs.texts.iter().any(|t| t.text.trim_end().ends_with('?'));
    let answers = obs.texts.iter().filter(|t| is_answer(&t.text)).count()
        + obs
            .elements
            .iter()
            .filter(|e| e.label.as_deref().is_some_and(is_answer))
            .count();
    if question && answers > 0 {
        return SceneKind::Dialogue;
    }
    let short: Vec<i32> = obs
        .texts
        .iter()
        .filter(|t| {
            let s = t.text.trim();
            !s.is_empty() && s.chars().count() <= 24 && s.split_whitespace().count() <= 3
        })
        .map(|t| t.bbox.center().x)
        .collect();
    let tolerance = (obs.frame_size.w as i32 / 10).max(8);
    let stacked = short
        .iter()
        .map(|&c| short.iter().filter(|&&o| (o - c).abs() <= tolerance).count())
        .max()
        .unwrap_or(0);
    let labelled = obs.elements.iter().filter(|e| e.label.is_some()).count();
    if stacked >= 3 || labelled >= 3 {
        SceneKind::Menu
    } else {
        SceneKind::Play
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{MonoTime, Rect, Size};
    use gamepilot_vision::{FrameChange, TextItem};

    fn obs(texts: &[(&str, i32, i32)]) -> Observation {
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(1280, 720),
            class: FrameChange::Scene,
            texts: texts
                .iter()
                .map(|(s, x, y)| TextItem {
                    text: (*s).into(),
                    bbox: Rect::new(*x, *y, 120, 30),
                    confidence: 0.9,
                })
                .collect(),
            elements: Vec::new(),
        }
    }

    #[test]
    fn a_title_menu_a_dialogue_and_a_hud_are_told_apart() {
        // FR-GND-004: the scene, not the frame-change class
        let menu = obs(&[
            ("Play", 580, 300),
            ("Options", 570, 360),
            ("Shop", 585, 420),
            ("Quit", 585, 480),
        ]);
        assert_eq!(scene_kind(&menu), SceneKind::Menu);
        let dialogue = obs(&[("Spend 100 gold?", 500, 300), ("Yes", 520, 380), ("No", 700, 380)]);
        assert_eq!(scene_kind(&dialogue), SceneKind::Dialogue);
        let play = obs(&[("Coins 3", 20, 20), ("Gold 250", 1100, 20)]);
        assert_eq!(scene_kind(&play), SceneKind::Play);
        assert_eq!(scene_kind(&obs(&[])), SceneKind::Play);
    }
}
