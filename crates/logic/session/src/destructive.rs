//! Destructive-action detection (FR-SAFE-005): detect the confirmation dialogue, not the action. Text on
//! screen near the target matching buy/sell/trade/spend/delete/confirm purchase/are you sure/account/
//! password, or a currency amount beside a button, holds the action for the user's explicit confirmation.
//! The hold itself (overlay, terminal) is the wiring's; this is the pure check.

use gamepilot_core::{Action, Point};
use gamepilot_vision::TextItem;
use serde::{Deserialize, Serialize};

const PATTERNS: &[&str] = &[
    "buy",
    "sell",
    "trade",
    "spend",
    "delete",
    "confirm purchase",
    "are you sure",
    "account",
    "password",
    "purchase",
];
const CURRENCY: &[&str] = &["gold", "coins", "gems", "credits", "$", "€", "£"];

/// Texts within this many pixels of a click target are read for the patterns.
pub const DESTRUCTIVE_RADIUS_PX: i32 = 220;

/// Why an action looks destructive: the matched pattern and the text it matched in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestructiveMatch {
    pub pattern: String,
    pub text: String,
}

fn currency_amount(text: &str) -> bool {
    let lower = text.to_lowercase();
    let has_digit = lower.chars().any(|c| c.is_ascii_digit());
    has_digit && CURRENCY.iter().any(|c| lower.contains(c))
}

/// Where an action could answer a confirmation dialogue: `Some(Some(point))` when it presses a button at a
/// point (texts near it are read), `Some(None)` when it presses a key or a button wherever the pointer is
/// (Return, `y`, space or a held button confirm a dialogue anywhere on screen, so every text is read), and
/// `None` when it presses nothing (pointer motion, camera turns, waiting) and so cannot answer one.
pub fn answer_scope(action: &Action) -> Option<Option<Point>> {
    match action {
        Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. } => Some(Some(Point::new(*x, *y))),
        Action::HoldButton {
            x: Some(x),
            y: Some(y),
            ..
        }
        | Action::Scroll {
            x: Some(x),
            y: Some(y),
            ..
        } => Some(Some(Point::new(*x, *y))),
        Action::Key { .. }
        | Action::Type { .. }
        | Action::HoldKey { .. }
        | Action::HoldButton { .. }
        | Action::Scroll { .. }
        | Action::Steer { .. } => Some(None),
        Action::MovePointer { .. }
        | Action::Camera { .. }
        | Action::CameraDegrees { .. }
        | Action::Wait { .. } => None,
    }
}

/// Check the texts within `radius` px of the target (or anywhere when the target is unknown: a dialogue
/// usually covers the screen centre) for confirmation-dialogue patterns.
pub fn check(texts: &[TextItem], target: Option<Point>, radius: i32) -> Option<DestructiveMatch> {
    let near = |b: &gamepilot_core::Rect| match target {
        None => true,
        Some(p) => {
            let cx = p.x.clamp(b.x, b.x + b.w as i32);
            let cy = p.y.clamp(b.y, b.y + b.h as i32);
            let (dx, dy) = (cx - p.x, cy - p.y);
            dx * dx + dy * dy <= radius * radius
        }
    };
    for t in texts.iter().filter(|t| near(&t.bbox)) {
        let lower = t.text.to_lowercase();
        for p in PATTERNS {
            let hit = lower
                .split(|c: char| !c.is_alphanumeric() && c != ' ')
                .any(|w| w.contains(p));
            if hit {
                return Some(DestructiveMatch {
                    pattern: (*p).to_string(),
                    text: t.text.clone(),
                });
            }
        }
        if currency_amount(&t.text) && lower.contains('?') {
            return Some(DestructiveMatch {
                pattern: "currency amount".into(),
                text: t.text.clone(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::Rect;

    fn text(s: &str, x: i32, y: i32) -> TextItem {
        TextItem {
            text: s.into(),
            bbox: Rect::new(x, y, 200, 30),
            confidence: 0.9,
        }
    }

    #[test]
    fn spend_dialogue_is_detected_near_its_yes_button() {
        // FR-SAFE-005
        let texts = vec![
            text("Spend 100 gold?", 500, 300),
            text("Yes", 520, 380),
            text("No", 700, 380),
        ];
        let m = check(&texts, Some(Point::new(540, 395)), 160).unwrap();
        assert_eq!(m.pattern, "spend");
        assert!(m.text.contains("100 gold"));
    }

    #[test]
    fn ordinary_screens_and_far_text_do_not_match() {
        // FR-SAFE-005
        let texts = vec![
            text("Play", 500, 300),
            text("Options", 500, 360),
            text("Coins 12", 20, 20),
        ];
        assert_eq!(check(&texts, Some(Point::new(540, 310)), 160), None);
        let far = vec![text("Delete save", 1000, 650)];
        assert_eq!(check(&far, Some(Point::new(100, 100)), 160), None);
    }

    #[test]
    fn every_action_that_presses_a_key_or_button_can_answer_a_dialogue() {
        // FR-SAFE-005: Return, y, typed text, a held key or button confirm wherever the pointer is
        let texts = vec![text("Spend 100 gold?", 500, 300), text("Yes", 520, 380)];
        let pressing = [
            Action::Key { key: "Return".into() },
            Action::Type { text: "y".into() },
            Action::HoldKey {
                key: "space".into(),
                duration_ms: Some(100),
            },
            Action::HoldButton {
                button: Default::default(),
                duration_ms: Some(100),
                x: None,
                y: None,
            },
        ];
        for action in &pressing {
            let scope = answer_scope(action).unwrap_or_else(|| panic!("{action:?} is never checked"));
            assert_eq!(scope, None, "{action:?} reads the whole screen");
            assert!(
                check(&texts, scope, DESTRUCTIVE_RADIUS_PX).is_some(),
                "{action:?}"
            );
        }
        let at = Action::HoldButton {
            button: Default::default(),
            duration_ms: Some(100),
            x: Some(540),
            y: Some(395),
        };
        assert_eq!(answer_scope(&at), Some(Some(Point::new(540, 395))));
        for quiet in [
            Action::MovePointer {
                x: 1,
                y: 1,
                duration_ms: None,
            },
            Action::Wait { duration_ms: 100 },
            Action::Camera {
                dx: 5,
                dy: 0,
                duration_ms: 100,
            },
        ] {
            assert_eq!(answer_scope(&quiet), None, "{quiet:?} presses nothing");
        }
    }

    #[test]
    fn a_currency_question_counts_without_a_keyword() {
        // FR-SAFE-005
        let texts = vec![text("Pay 250 gems?", 400, 300)];
        assert!(check(&texts, None, 160).is_some());
    }
}
