//! Destructive-action detection (FR-SAFE-005): detect the confirmation dialogue, not the action. Text on
//! screen near the target matching buy/sell/trade/spend/delete/confirm purchase/are you sure/account/
//! password, or a currency amount beside a button, holds the action for the user's explicit confirmation.

use gamepilot_core::{Point, Rect};
use gamepilot_vision::TextItem;

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

/// Why an action looks destructive: the matched pattern and the text it matched in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestructiveMatch {
    pub pattern: String,
    pub text: String,
}

fn currency_amount(text: &str) -> bool {
    let lower = text.to_lowercase();
    let has_digit = lower.chars().any(|c| c.is_ascii_digit());
    has_digit && CURRENCY.iter().any(|c| lower.contains(c))
}

/// Check the texts within `radius` px of the target (or anywhere when the target is unknown: a dialogue
/// usually covers the screen centre) for confirmation-dialogue patterns.
pub fn check(
    texts: &[TextItem],
    target: Option<Point>,
    frame: Rect,
    radius: i32,
) -> Option<DestructiveMatch> {
    let near = |b: &Rect| match target {
        None => true,
        Some(p) => {
            let cx = p.x.clamp(b.x, b.x + b.w as i32);
            let cy = p.y.clamp(b.y, b.y + b.h as i32);
            let (dx, dy) = (cx - p.x, cy - p.y);
            dx * dx + dy * dy <= radius * radius
        }
    };
    let _ = frame;
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
        let m = check(
            &texts,
            Some(Point::new(540, 395)),
            Rect::new(0, 0, 1280, 720),
            160,
        )
        .unwrap();
        assert_eq!(m.pattern, "spend");
        assert!(m.text.contains("100 gold"));
    }

    #[test]
    fn ordinary_screens_and_far_text_do_not_match() {
        let texts = vec![
            text("Play", 500, 300),
            text("Options", 500, 360),
            text("Coins 12", 20, 20),
        ];
        assert_eq!(
            check(
                &texts,
                Some(Point::new(540, 310)),
                Rect::new(0, 0, 1280, 720),
                160
            ),
            None
        );
        let far = vec![text("Delete save", 1000, 650)];
        assert_eq!(
            check(&far, Some(Point::new(100, 100)), Rect::new(0, 0, 1280, 720), 160),
            None
        );
    }

    #[test]
    fn a_currency_question_counts_without_a_keyword() {
        let texts = vec![text("Pay 250 gems?", 400, 300)];
        assert!(check(&texts, None, Rect::new(0, 0, 1280, 720), 160).is_some());
    }

    /// Click at a capture-space point the way a person does (hover, then a held press) through the one
    /// input component and the transform chain.
    fn click(x: &gamepilot_x11::X11, win: u32, p: Point) {
        let input = gamepilot_x11::input::XTestInput::new(x).unwrap();
        let chain = x.transform_for(win).unwrap();
        input.motion_to(x, chain.capture_to_screen(p).unwrap()).unwrap();
        input.sync(x).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        input.button(x, 1, true).unwrap();
        input.sync(x).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(80));
        input.button(x, 1, false).unwrap();
        input.sync(x).unwrap();
    }

    fn observe_texts(x: &gamepilot_x11::X11, win: u32) -> (Vec<TextItem>, Rect) {
        use gamepilot_vision::Ocr as _;
        let mut cap = gamepilot_x11::WindowCapturer::new(x, win).unwrap();
        let frame = cap.capture(x, gamepilot_core::MonoTime::ZERO).unwrap();
        let view = frame.view();
        let mut ocr = gamepilot_ocr::TesseractOcr::new().unwrap();
        let lines = ocr.recognize(&view, view.bounds()).unwrap();
        let mut p = gamepilot_vision::Perceiver::new();
        let obs = p.observe(
            &view,
            gamepilot_core::MonoTime::ZERO,
            gamepilot_vision::FrameClass::Scene,
            &lines,
        );
        (obs.texts, view.bounds())
    }

    #[test]
    fn the_practice_games_spend_dialogue_holds_a_click_on_yes() {
        // FR-SAFE-005 on real pixels: the practice game's "Spend 100 gold?" dialogue read by tesseract.
        let mut bed = gamepilot_testbed::TestBed::start().unwrap();
        let arena =
            gamepilot_testbed::Arena::launch(&mut bed, &gamepilot_testbed::ArenaOptions::default()).unwrap();
        let x = bed.x11().unwrap();
        let win = arena.window.id;
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (menu_texts, bounds) = observe_texts(&x, win);
        assert_eq!(
            check(&menu_texts, Some(Point::new(640, 330)), bounds, 220),
            None,
            "menu: {menu_texts:?}"
        );
        click(&x, win, Point::new(640, 550)); // the menu's Shop button
        arena
            .wait_for(std::time::Duration::from_secs(5), |s| s["screen"] == "confirm")
            .expect("shop dialogue opens");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (texts, bounds) = observe_texts(&x, win);
        let m = check(&texts, Some(Point::new(520, 436)), bounds, 220)
            .unwrap_or_else(|| panic!("dialogue not detected in {texts:?}"));
        assert!(m.pattern == "spend" || m.pattern == "currency amount", "{m:?}");
        assert_eq!(arena.state().unwrap()["gold"], 250, "nothing was spent");
    }
}
