//! The escalation ladder's safe-state rung (FR-LOOP-006): a screen on which an action of this session was
//! confirmed is remembered by what it shows; when the rung is reached the session goes back to the latest
//! such screen the way a person would — Escape, then a visible Back / Cancel / Close element, then Escape
//! again — and knows it has arrived when the screen it sees shows what the remembered one showed.

use crate::direct::normalise;
use crate::scene::SceneKind;
use gamepilot_core::{Action, ElementId};
use gamepilot_vision::Observation;
use std::collections::BTreeSet;

/// Texts and drawn elements a screen must show to be remembered: one with fewer is not recognisable by
/// what it shows, so it is never a target.
const MIN_TOKENS: usize = 2;

/// An unlabelled element is known by its look and where it is, on a grid of this many cells a side (a
/// menu of icons has no text, but its icons stay put).
const GRID: i64 = 8;

/// Share of the texts of the two screens (Jaccard) at which they count as the same screen. OCR reads the
/// same screen slightly differently from frame to frame; a different menu shares few of its texts.
pub const SAME_SCREEN: f64 = 0.6;

/// Navigation steps tried before the rung gives up.
pub const MAX_STEPS: u32 = 3;

/// Labels of the elements that lead back, as people write them.
const BACK_LABELS: &[&str] = &[
    "back",
    "cancel",
    "close",
    "return",
    "resume",
    "main menu",
    "menu",
    "exit menu",
    "done",
];

/// Whether an element so labelled leads back (Back, Cancel, Close …).
pub fn leads_back(label: &str) -> bool {
    BACK_LABELS.contains(&normalise(label).as_str())
}

/// Step `taken` (from 0) of the way back a person takes from `obs`: Escape, then a visible element that
/// leads back, then Escape again ([`Step::Press`] or [`Step::Click`]).
pub fn way_back(obs: &Observation, taken: u32) -> Step {
    let back = obs
        .elements
        .iter()
        .find(|e| e.label.as_deref().is_some_and(leads_back));
    match (taken, back) {
        (1, Some(e)) => Step::Click(e.id, e.label.clone().unwrap_or_default()),
        _ => Step::Press(Action::Key { key: "Escape".into() }),
    }
}

/// What a screen shows, for recognising it again: its kind and its texts, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenPrint {
    pub kind: SceneKind,
    /// The game's popups and dialogs open over it: a screen with a menu open is another screen, however
    /// few items the menu adds.
    open: BTreeSet<gamepilot_core::WindowLayer>,
    texts: BTreeSet<String>,
}

impl ScreenPrint {
    /// The print of `obs`; `None` when it shows too little text to be recognised again.
    pub fn of(obs: &Observation, kind: SceneKind) -> Option<ScreenPrint> {
        let (w, h) = (
            i64::from(obs.frame_size.w.max(1)),
            i64::from(obs.frame_size.h.max(1)),
        );
        let drawn = obs.elements.iter().filter(|e| e.label.is_none()).filter_map(|e| {
            let c = e.bbox.center();
            let looks = e.looks.as_deref()?;
            Some(format!(
                "{looks} @{},{}",
                i64::from(c.x) * GRID / w,
                i64::from(c.y) * GRID / h
            ))
        });
        let texts: BTreeSet<String> = obs
            .texts
            .iter()
            .map(|t| normalise(&t.text))
            .filter(|t| t.chars().count() >= 2)
            .chain(drawn)
            .collect();
        let open = obs.elements.iter().filter_map(|e| e.layer).collect();
        (texts.len() >= MIN_TOKENS).then_some(ScreenPrint { kind, open, texts })
    }

    /// Shared texts over all texts of the two screens (0 for screens of different kinds, or with
    /// different popups or dialogs open).
    pub fn similarity(&self, other: &ScreenPrint) -> f64 {
        if self.kind != other.kind || self.open != other.open {
            return 0.0;
        }
        let shared = self.texts.intersection(&other.texts).count();
        let all = self.texts.union(&other.texts).count();
        if all == 0 {
            0.0
        } else {
            shared as f64 / all as f64
        }
    }

    pub fn same_screen(&self, other: &ScreenPrint) -> bool {
        self.similarity(other) >= SAME_SCREEN
    }

    /// What this screen shows that `before` did not, a few of its texts (for "'Game' opens a menu
    /// showing 'new', 'restart', …"); empty when it shows nothing new.
    pub fn shown_beyond(&self, before: &ScreenPrint) -> String {
        listed(self.texts.difference(&before.texts))
    }

    /// What kind of screen it is, as a person names it ("a menu", "a dialog", "a menu screen").
    pub fn what(&self) -> &'static str {
        use gamepilot_core::WindowLayer;
        match (
            self.open.contains(&WindowLayer::Dialog),
            self.open.contains(&WindowLayer::Popup),
            self.kind,
        ) {
            (true, _, _) => "a dialog",
            (_, true, _) => "a menu",
            (_, _, SceneKind::Menu) => "a menu screen",
            (_, _, SceneKind::Dialogue) => "a dialogue",
            (_, _, SceneKind::Play) => "another view",
        }
    }

    /// A few of its texts, for the note the model and the user read.
    pub fn describe(&self) -> String {
        format!("the {} showing {}", self.kind.as_str(), listed(self.texts.iter()))
    }
}

/// A few of a print's tokens for a note, words before drawn elements (which read "blue square @1,6").
fn listed<'a>(tokens: impl Iterator<Item = &'a String>) -> String {
    let (mut words, drawn): (Vec<&String>, Vec<&String>) = tokens.partition(|t| !t.contains(" @"));
    let all = words.len() + drawn.len();
    words.extend(drawn);
    let shown: Vec<String> = words.iter().take(4).map(|t| format!("'{t}'")).collect();
    let more = if all > 4 { ", …" } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// What the rung does when it is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Begin {
    /// No action of this session was confirmed on a recognisable screen.
    NoSafeScreen,
    /// The current screen is the remembered one.
    AlreadyThere(ScreenPrint),
    /// On the way back to this screen; the next observation decides the first step.
    Returning(ScreenPrint),
}

/// One step back, decided on a fresh observation.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The observation shows the remembered screen.
    Arrived(ScreenPrint),
    /// Press a key (Escape).
    Press(Action),
    /// Click the element that leads back (its label).
    Click(ElementId, String),
    /// Every step was tried and the screen is not the remembered one.
    GiveUp(String),
}

/// The remembered screen and the way back to it.
#[derive(Debug, Clone, Default)]
pub struct SafeState {
    latest: Option<ScreenPrint>,
    returning: Option<(ScreenPrint, u32)>,
}

impl SafeState {
    /// An action was confirmed on the screen `print` was taken of.
    pub fn confirmed_on(&mut self, print: ScreenPrint) {
        self.latest = Some(print);
    }

    /// On the way back: the next tactical tick only perceives.
    pub fn returning(&self) -> bool {
        self.returning.is_some()
    }

    /// The rung is reached while `current` is on screen.
    pub fn begin(&mut self, current: Option<&ScreenPrint>) -> Begin {
        let Some(target) = self.latest.clone() else {
            return Begin::NoSafeScreen;
        };
        if current.is_some_and(|c| c.same_screen(&target)) {
            self.returning = None;
            return Begin::AlreadyThere(target);
        }
        self.returning = Some((target.clone(), 0));
        Begin::Returning(target)
    }

    /// The next step on the way back, given what the screen shows now.
    pub fn step(&mut self, obs: &Observation, kind: SceneKind) -> Option<Step> {
        let (target, taken) = self.returning.clone()?;
        if ScreenPrint::of(obs, kind).is_some_and(|p| p.same_screen(&target)) {
            self.returning = None;
            return Some(Step::Arrived(target));
        }
        if taken >= MAX_STEPS {
            self.returning = None;
            return Some(Step::GiveUp(format!(
                "{MAX_STEPS} steps back (Escape, a Back element, Escape) did not reach {}",
                target.describe()
            )));
        }
        self.returning = Some((target, taken + 1));
        Some(way_back(obs, taken))
    }

    /// The rung ended another way (progress, a stop): no more steps back.
    pub fn abandon(&mut self) {
        self.returning = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{MonoTime, Rect, Size};
    use gamepilot_vision::{Element, FrameChange, TextItem};

    fn screen(texts: &[&str], back: Option<&str>) -> Observation {
        let texts: Vec<TextItem> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| TextItem {
                text: t.to_string(),
                bbox: Rect::new(10, 10 + 30 * i as i32, 80, 20),
                confidence: 0.9,
            })
            .collect();
        let elements = back
            .map(|l| {
                vec![Element {
                    id: ElementId(7),
                    bbox: Rect::new(200, 200, 60, 20),
                    confidence: 0.9,
                    source: gamepilot_vision::ElementSource::Text,
                    label: Some(l.to_string()),
                    looks: None,
                    layer: None,
                    selected: false,
                }]
            })
            .unwrap_or_default();
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(320, 240),
            class: FrameChange::Scene,
            texts,
            elements,
        }
    }

    #[test]
    fn a_screen_is_known_again_by_what_it_shows_despite_ocr_noise() {
        // FR-LOOP-006 (safe state: a screen seen and confirmed before)
        let menu = ScreenPrint::of(&screen(&["Play", "Options", "Quit!"], None), SceneKind::Menu).unwrap();
        let again = ScreenPrint::of(
            &screen(&["play", "Options", "Quit", "v1.2"], None),
            SceneKind::Menu,
        )
        .unwrap();
        assert!(menu.same_screen(&again), "{}", menu.similarity(&again));
        let options =
            ScreenPrint::of(&screen(&["Volume", "Options", "Back"], None), SceneKind::Menu).unwrap();
        assert!(!menu.same_screen(&options));
        let as_play = ScreenPrint::of(&screen(&["Play", "Options", "Quit"], None), SceneKind::Play).unwrap();
        assert!(
            !menu.same_screen(&as_play),
            "another kind of screen is another screen"
        );
        assert_eq!(
            ScreenPrint::of(&screen(&["Score 3"], None), SceneKind::Play),
            None
        );
        assert_eq!(menu.describe(), "the menu showing 'options', 'play', 'quit'");
        // A menu of icons, no text: known by its icons' looks and places.
        let mut icons = screen(&[], None);
        for (i, looks) in ["red round", "blue square", "green star"].iter().enumerate() {
            icons.elements.push(Element {
                id: ElementId(i as u32 + 1),
                bbox: Rect::new(40 + 100 * i as i32, 100, 40, 40),
                confidence: 0.9,
                source: gamepilot_vision::ElementSource::Component,
                label: None,
                looks: Some(looks.to_string()),
                layer: None,
                selected: false,
            });
        }
        let icon_menu = ScreenPrint::of(&icons, SceneKind::Menu).expect("icons make a screen recognisable");
        assert!(icon_menu.same_screen(&ScreenPrint::of(&icons, SceneKind::Menu).unwrap()));
        icons.elements.truncate(1);
        assert_eq!(ScreenPrint::of(&icons, SceneKind::Menu), None);
    }

    #[test]
    fn the_way_back_is_escape_then_a_back_element_then_escape_then_give_up() {
        // FR-LOOP-006: navigate back, verified by the remembered screen's presence
        let kind = SceneKind::Menu;
        let menu = screen(&["Play", "Options", "Quit"], None);
        let mut s = SafeState::default();
        assert_eq!(s.begin(None), Begin::NoSafeScreen);
        s.confirmed_on(ScreenPrint::of(&menu, kind).unwrap());
        let here = ScreenPrint::of(&menu, kind);
        assert!(matches!(s.begin(here.as_ref()), Begin::AlreadyThere(_)));
        assert!(!s.returning());

        let lost = screen(&["Volume", "Music", "Back"], Some("Back"));
        let lost_print = ScreenPrint::of(&lost, kind);
        assert!(matches!(s.begin(lost_print.as_ref()), Begin::Returning(_)));
        assert!(s.returning());
        let escape = Step::Press(Action::Key { key: "Escape".into() });
        assert_eq!(s.step(&lost, kind), Some(escape.clone()));
        assert_eq!(
            s.step(&lost, kind),
            Some(Step::Click(ElementId(7), "Back".into()))
        );
        assert_eq!(s.step(&lost, kind), Some(escape));
        assert!(
            matches!(s.step(&lost, kind), Some(Step::GiveUp(why)) if why.contains("did not reach the menu"))
        );
        assert!(!s.returning());
        assert_eq!(s.step(&lost, kind), None);

        // Arrival ends the way back at once.
        s.begin(lost_print.as_ref());
        s.step(&lost, kind);
        assert!(matches!(s.step(&menu, kind), Some(Step::Arrived(_))));
        assert!(!s.returning());
    }
}
