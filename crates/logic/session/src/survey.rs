//! Exploration for a model that is unsure: when the model answers `unsure`, the session surveys the
//! screen as a person would — it clicks the most relevant untried element, sees what changed, notes it
//! ("'Options' opens a menu showing 'sound', …"), lets the model look at what opened, and when the model
//! is unsure there too, goes back (Escape, a Back element, Escape) to the screen it started from and tries
//! the next. Bounded: a few elements a survey, two surveys a subgoal; never an element that quits, buys or
//! deletes, and never past a destructive hold (the session abandons the survey there).

use crate::direct::normalise;
use crate::relevance::{model_order, pointed_at, Focus};
use crate::safe_state::{leads_back, way_back, ScreenPrint, Step, MAX_STEPS};
use gamepilot_core::ElementId;
use gamepilot_vision::{Element, Observation};

/// Elements tried in one survey.
pub const MAX_TRIES: usize = 4;

/// Surveys within one subgoal: a second one may start from the screen the first left the model on.
pub const MAX_SURVEYS: u32 = 2;

/// Words of labels a survey never clicks: they end the game or the session, or spend or destroy
/// (FR-SAFE-005's patterns are checked again on the dialogue such a click would open).
const NEVER_TRIED: &[&str] = &[
    "quit",
    "exit",
    "log out",
    "logout",
    "buy",
    "sell",
    "delete",
    "purchase",
    "spend",
    "trade",
    "uninstall",
];

/// What the session does with a model's `unsure`.
#[derive(Debug, Clone, PartialEq)]
pub enum Unsure {
    /// A survey starts from this screen; the next perception tries the first element.
    Began(String),
    /// The model was unsure on the screen a try opened: the way back starts. The text is what that try
    /// was found to do, for the note block.
    GoBack(String),
    /// Nothing is explored; why (the model is asked again as usual).
    Refused(String),
}

/// The survey's next move, decided on a fresh perception.
#[derive(Debug, Clone, PartialEq)]
pub enum Move {
    /// Click this element, the try numbered `n` (from 1) of this survey.
    Try {
        mark: ElementId,
        label: String,
        n: usize,
    },
    /// A step back to the screen the survey started from ([`Step::Press`] or [`Step::Click`]).
    Back(Step),
    /// The last try opened another screen: note what it shows and let the model look at it.
    Look(String),
    /// The survey is over; the note says why.
    Done(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// The model was unsure with a menu or dialog open that names nothing the goal does: it is closed
    /// first (`taken` steps so far), and the survey starts from the screen beneath.
    Closing { taken: u32 },
    /// On the starting screen: try the next element.
    Choose,
    /// A try was sent; the next perception tells what it did (`refuted`: its verdict said nothing changed).
    Judge { refuted: bool },
    /// A try opened another screen and the model is looking at it.
    Looking,
    /// On the way back, `taken` steps so far.
    Returning { taken: u32 },
}

#[derive(Debug, Clone)]
struct Active {
    /// The screen the survey started from (`None` while an open menu is closed first).
    home: Option<ScreenPrint>,
    /// Normalised labels of the elements tried, in order.
    tried: Vec<String>,
    /// What each try did, as the notes say it.
    learned: Vec<String>,
    phase: Phase,
}

/// The survey of the current subgoal.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    active: Option<Active>,
    surveys: u32,
}

impl Survey {
    /// A new subgoal: nothing is being explored.
    pub fn reset(&mut self) {
        *self = Survey::default();
    }

    /// The next perception is the survey's, not the model's.
    pub fn wanted(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.phase != Phase::Looking)
    }

    /// A survey is under way (the model may be looking at what a try opened).
    #[cfg(test)]
    pub fn active(&self) -> bool {
        self.active.is_some()
    }

    /// The model answered `unsure` on `obs`, whose print is `here`, working toward `focus`.
    pub fn unsure(&mut self, obs: &Observation, here: Option<ScreenPrint>, focus: &Focus) -> Unsure {
        if let Some(a) = self.active.as_mut() {
            if a.phase == Phase::Looking {
                a.phase = Phase::Returning { taken: 0 };
                let what = a.learned.last().cloned().unwrap_or_default();
                return Unsure::GoBack(what);
            }
            return Unsure::Refused("a survey is already under way".into());
        }
        if self.surveys >= MAX_SURVEYS {
            return Unsure::Refused(format!(
                "this step was explored {MAX_SURVEYS} times already; choose among what was found"
            ));
        }
        // An open menu whose items the goal names nothing of is a wrong turn: a person closes it and
        // looks at the screen beneath (its items start games, print, solve).
        let open = obs.elements.iter().any(|e| e.layer.is_some());
        let named_on_top = pointed_at(obs, focus)
            .iter()
            .any(|id| obs.element(*id).is_some_and(|e| e.layer.is_some()));
        let (home, phase, began) = match here {
            _ if open && !named_on_top => (
                None,
                Phase::Closing { taken: 0 },
                "the open menu or dialog, which names nothing of the goal: it is closed first".to_string(),
            ),
            Some(home) => {
                let began = home.describe();
                (Some(home), Phase::Choose, began)
            }
            None => return Unsure::Refused("the screen shows too little text to come back to it".into()),
        };
        self.surveys += 1;
        self.active = Some(Active {
            home,
            tried: Vec::new(),
            learned: Vec::new(),
            phase,
        });
        Unsure::Began(began)
    }

    /// A try's click got its verdict (`refuted`: nothing changed where it was expected to).
    pub fn verdict(&mut self, refuted: bool) {
        if let Some(a) = self.active.as_mut() {
            if matches!(a.phase, Phase::Judge { .. }) {
                a.phase = Phase::Judge { refuted };
            }
        }
    }

    /// An action was chosen (by the model, or by the session's grounding of a named element) while the
    /// survey had the model look: the survey has done its work. The note says where; `None` when no
    /// survey was looking.
    pub fn chosen(&mut self) -> Option<String> {
        let a = self.active.take_if(|a| a.phase == Phase::Looking)?;
        Some(format!(
            "exploring ended with a choice made where {}",
            a.learned.last().map(String::as_str).unwrap_or("a try opened")
        ))
    }

    /// The survey ends another way (a destructive hold, the safe-state rung): why, for the note.
    pub fn abandon(&mut self, why: &str) -> Option<String> {
        self.active.take().map(|_| format!("exploring abandoned: {why}"))
    }

    /// The survey's move on a fresh perception `obs` (whose print is `here`), `None` when it has none.
    pub fn next(
        &mut self,
        obs: &Observation,
        here: Option<&ScreenPrint>,
        focus: &Focus,
        excluded: &[ElementId],
    ) -> Option<Move> {
        let a = self.active.as_mut()?;
        let at_home = here.is_some_and(|h| a.home.as_ref().is_some_and(|home| h.same_screen(home)));
        match a.phase.clone() {
            Phase::Looking => return None,
            Phase::Closing { taken } => {
                if obs.elements.iter().any(|e| e.layer.is_some()) {
                    if taken >= MAX_STEPS {
                        self.active = None;
                        return Some(Move::Done(format!(
                            "exploring stopped: {MAX_STEPS} steps did not close the open menu or dialog"
                        )));
                    }
                    a.phase = Phase::Closing { taken: taken + 1 };
                    return Some(Move::Back(way_back(obs, taken)));
                }
                let Some(home) = here.cloned() else {
                    self.active = None;
                    return Some(Move::Done(
                        "exploring stopped: the screen beneath shows too little text to come back to it"
                            .into(),
                    ));
                };
                a.home = Some(home);
                a.phase = Phase::Choose;
            }
            Phase::Judge { refuted } => {
                let label = a.tried.last().cloned().unwrap_or_default();
                match here.filter(|_| !refuted && !at_home) {
                    Some(h) => {
                        let shown = a
                            .home
                            .as_ref()
                            .map(|home| h.shown_beyond(home))
                            .unwrap_or_default();
                        let what = if shown.is_empty() {
                            format!("'{label}' opens {}", h.describe())
                        } else {
                            format!("'{label}' opens {} showing {shown}", h.what())
                        };
                        a.learned.push(what.clone());
                        a.phase = Phase::Looking;
                        return Some(Move::Look(what));
                    }
                    None if !at_home => {
                        // It changed something the print does not tell apart from a new screen: go back.
                        a.learned.push(format!("'{label}' changed the screen"));
                        a.phase = Phase::Returning { taken: 0 };
                        return self.next(obs, here, focus, excluded);
                    }
                    None => {
                        a.learned.push(format!("'{label}' changed nothing"));
                        a.phase = Phase::Choose;
                    }
                }
            }
            Phase::Returning { taken } => {
                if !at_home {
                    if taken >= MAX_STEPS {
                        let why = format!(
                            "{MAX_STEPS} steps back did not reach {} again",
                            a.home
                                .as_ref()
                                .map_or_else(|| "the screen it started from".into(), ScreenPrint::describe)
                        );
                        self.active = None;
                        return Some(Move::Done(format!("exploring stopped: {why}")));
                    }
                    a.phase = Phase::Returning { taken: taken + 1 };
                    return Some(Move::Back(way_back(obs, taken)));
                }
                a.phase = Phase::Choose;
            }
            Phase::Choose => {}
        }
        // On the starting screen: the next element, or the end.
        if a.tried.len() >= MAX_TRIES {
            return Some(self.finish(format!("{MAX_TRIES} elements tried")));
        }
        match candidates(obs, focus, excluded, &a.tried).first() {
            Some(e) => {
                let label = e.label.clone().unwrap_or_default();
                a.tried.push(normalise(&label));
                a.phase = Phase::Judge { refuted: false };
                Some(Move::Try {
                    mark: e.id,
                    label,
                    n: a.tried.len(),
                })
            }
            None => Some(self.finish("nothing left to try".into())),
        }
    }

    fn finish(&mut self, why: String) -> Move {
        let learned = self
            .active
            .take()
            .map(|a| a.learned.join("; "))
            .unwrap_or_default();
        Move::Done(if learned.is_empty() {
            format!("exploring ended ({why})")
        } else {
            format!("exploring ended ({why}): {learned}")
        })
    }
}

/// The elements a survey may try on `obs`, most relevant first: labelled, on the top layer (an open
/// menu's or dialog's own elements when one is open), not excluded, not tried, not leading back, and
/// nothing that quits, buys or deletes. Those the focus points at lead, then reading order.
fn candidates<'a>(
    obs: &'a Observation,
    focus: &Focus,
    excluded: &[ElementId],
    tried: &[String],
) -> Vec<&'a Element> {
    let top = obs
        .elements
        .iter()
        .filter_map(|e| e.layer)
        .min_by_key(|l| match l {
            gamepilot_core::WindowLayer::Dialog => 0,
            gamepilot_core::WindowLayer::Popup => 1,
        });
    let worth = |e: &&Element| {
        let Some(label) = e
            .label
            .as_deref()
            .map(normalise)
            .filter(|l| l.chars().count() >= 2)
        else {
            return false;
        };
        e.layer == top
            && !excluded.contains(&e.id)
            && !tried.contains(&label)
            && !leads_back(&label)
            && !label.split_whitespace().any(|w| NEVER_TRIED.contains(&w))
            && !NEVER_TRIED.contains(&label.as_str())
    };
    let relevant = model_order(obs, focus, None);
    let mut out: Vec<&Element> = relevant
        .iter()
        .filter_map(|id| obs.element(*id))
        .filter(worth)
        .collect();
    let mut rest: Vec<&Element> = obs
        .elements
        .iter()
        .filter(worth)
        .filter(|e| !relevant.contains(&e.id))
        .collect();
    // Reading order: rows of about a line's height, then left to right.
    rest.sort_by_key(|e| (e.bbox.y / 12, e.bbox.x));
    out.extend(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::SceneKind;
    use gamepilot_core::{Action, MonoTime, Rect, Size, WindowLayer};
    use gamepilot_vision::{ElementSource, FrameChange, TextItem};

    fn element(id: u32, label: &str, x: i32, y: i32, layer: Option<WindowLayer>) -> Element {
        Element {
            id: ElementId(id),
            bbox: Rect::new(x, y, 40, 16),
            confidence: 0.9,
            source: ElementSource::Text,
            label: Some(label.to_string()),
            looks: None,
            layer,
            selected: false,
        }
    }

    /// A game's window with the menu bar "Game Type Help" and a status line, and the popup `open`.
    fn window(open: &[&str]) -> Observation {
        let mut elements = vec![
            element(1, "Game", 4, 4, None),
            element(2, "Type", 50, 4, None),
            element(3, "Help", 96, 4, None),
            element(4, "Quit", 140, 4, None),
            element(5, "Moves: 0", 4, 300, None),
        ];
        for (i, label) in open.iter().enumerate() {
            elements.push(element(
                10 + i as u32,
                label,
                10,
                24 + 20 * i as i32,
                Some(WindowLayer::Popup),
            ));
        }
        let texts = elements
            .iter()
            .map(|e| TextItem {
                text: e.label.clone().unwrap_or_default(),
                bbox: e.bbox,
                confidence: 0.9,
            })
            .collect();
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(320, 320),
            class: FrameChange::Scene,
            texts,
            elements,
        }
    }

    fn print(obs: &Observation) -> Option<ScreenPrint> {
        ScreenPrint::of(obs, SceneKind::Play)
    }

    fn step(s: &mut Survey, obs: &Observation, focus: &Focus) -> Option<Move> {
        s.next(obs, print(obs).as_ref(), focus, &[])
    }

    #[test]
    fn an_unsure_model_gets_a_survey_that_tries_looks_goes_back_and_tries_the_next() {
        // FR-LOOP-002 (the session explores like a person), FR-CTX-004 (what it found is noted)
        let focus = Focus::new("Read about the game's version", "");
        let home = window(&[]);
        let mut s = Survey::default();
        assert!(!s.wanted());
        assert!(matches!(s.unsure(&home, print(&home), &focus), Unsure::Began(b) if b.contains("'game'")));
        assert!(s.wanted());
        // "Game" shares a word with the goal: tried first; "Quit" never.
        assert_eq!(
            step(&mut s, &home, &focus),
            Some(Move::Try {
                mark: ElementId(1),
                label: "Game".into(),
                n: 1
            })
        );
        let game_menu = window(&["New", "Restart", "Undo"]);
        s.verdict(false);
        match step(&mut s, &game_menu, &focus) {
            Some(Move::Look(what)) => {
                assert!(
                    what.starts_with("'game' opens a menu showing 'new', 'restart'"),
                    "{what}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(!s.wanted(), "the model looks at what opened");
        assert_eq!(step(&mut s, &game_menu, &focus), None);
        // Unsure there too: back, by Escape, verified by the starting screen.
        assert!(
            matches!(s.unsure(&game_menu, print(&game_menu), &focus), Unsure::GoBack(w) if w.contains("'new'"))
        );
        assert_eq!(
            step(&mut s, &game_menu, &focus),
            Some(Move::Back(Step::Press(Action::Key { key: "Escape".into() })))
        );
        // Back home: the next element in reading order.
        assert_eq!(
            step(&mut s, &home, &focus),
            Some(Move::Try {
                mark: ElementId(2),
                label: "Type".into(),
                n: 2
            })
        );
        // It changed nothing: the next at once.
        s.verdict(true);
        assert_eq!(
            step(&mut s, &home, &focus),
            Some(Move::Try {
                mark: ElementId(3),
                label: "Help".into(),
                n: 3
            })
        );
        // Help opens a menu with About: the model chooses there, and the survey has done its work.
        let help = window(&["About"]);
        s.verdict(false);
        assert!(matches!(step(&mut s, &help, &focus), Some(Move::Look(_))));
        assert!(s.chosen().is_some_and(|n| n.contains("'help' opens")));
        assert!(!s.active());
    }

    #[test]
    fn a_survey_is_bounded_comes_back_or_stops_and_never_tries_what_quits() {
        // FR-SAFE-005 (never a destructive element), FR-LOOP-002 (bounded)
        let focus = Focus::default();
        let home = window(&[]);
        let mut s = Survey::default();
        assert!(
            matches!(s.unsure(&home, None, &focus), Unsure::Refused(_)),
            "no screen to come back to"
        );
        s.unsure(&home, print(&home), &focus);
        let mut tried = Vec::new();
        while let Some(Move::Try { label, .. }) = step(&mut s, &home, &focus) {
            tried.push(label);
            s.verdict(true);
        }
        assert_eq!(tried, ["Game", "Type", "Help", "Moves: 0"]);
        assert!(!s.active());
        // The way back gives up after its steps.
        s.unsure(&home, print(&home), &focus);
        assert!(matches!(step(&mut s, &home, &focus), Some(Move::Try { .. })));
        let lost = window(&["Volume", "Music", "Speed", "Colours"]);
        assert!(matches!(step(&mut s, &lost, &focus), Some(Move::Look(_))));
        assert!(matches!(s.unsure(&lost, print(&lost), &focus), Unsure::GoBack(_)));
        for _ in 0..MAX_STEPS {
            assert!(matches!(step(&mut s, &lost, &focus), Some(Move::Back(..))));
        }
        assert!(matches!(step(&mut s, &lost, &focus), Some(Move::Done(w)) if w.contains("did not reach")));
        assert!(
            matches!(s.unsure(&home, print(&home), &focus), Unsure::Refused(w) if w.contains("explored 2 times")),
            "two surveys a subgoal"
        );
        s.reset();
        assert!(matches!(s.unsure(&home, print(&home), &focus), Unsure::Began(_)));
        assert_eq!(
            s.abandon("a destructive action is held for the user"),
            Some("exploring abandoned: a destructive action is held for the user".into())
        );
    }

    #[test]
    fn an_open_menu_is_surveyed_on_its_own_items_when_the_goal_names_one_and_closed_first_otherwise() {
        let focus = Focus::new("Choose the medium size", "");
        let open = window(&["Small", "Medium", "Large", "Quit game"]);
        let mut s = Survey::default();
        s.unsure(&open, print(&open), &focus);
        let mut tried = Vec::new();
        while let Some(Move::Try { label, .. }) = step(&mut s, &open, &focus) {
            tried.push(label);
            s.verdict(true);
        }
        assert_eq!(tried, ["Medium", "Small", "Large"], "named first, never Quit");
        // A menu that names nothing of the goal: Escape, then the screen beneath is surveyed.
        let focus = Focus::new("Read the version", "");
        let game = window(&["New", "Restart", "Print"]);
        let mut s = Survey::default();
        assert!(
            matches!(s.unsure(&game, print(&game), &focus), Unsure::Began(b) if b.contains("closed first"))
        );
        assert_eq!(
            step(&mut s, &game, &focus),
            Some(Move::Back(Step::Press(Action::Key { key: "Escape".into() })))
        );
        let home = window(&[]);
        assert!(matches!(step(&mut s, &home, &focus), Some(Move::Try { label, .. }) if label == "Game"));
    }
}
