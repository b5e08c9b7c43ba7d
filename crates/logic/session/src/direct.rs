//! Grounding without guessing: when the current subgoal names an element ("click 'New Game'", "press
//! Play") and exactly one element on screen carries that label, the session clicks its mark without a
//! model call; the action is validated, executed and verified like any other. With no such element, or
//! several, the model chooses.

use gamepilot_core::ElementId;
use gamepilot_vision::Observation;

/// Verbs that make a subgoal a click on the element it names.
const VERBS: &[&str] = &[
    "click", "press", "select", "choose", "open", "tap", "pick", "hit", "activate", "push",
];

/// Words around a name that are not part of it ("click the 'Play' button").
const FILLER: &[&str] = &[
    "the", "a", "an", "on", "button", "menu", "item", "option", "tab", "entry", "link",
];

/// A label or name as compared: lower case, punctuation as spaces, single spaces ("New-Game!" → "new
/// game"). Safe-state screen prints use it too.
pub(crate) fn normalise(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words that end a name ("click Play then walk", "press Start to begin").
const NAME_ENDS: &[&str] = &["then", "and", "to", "so", "until", "from", "in", "with"];

/// Whether `word` is one of [`VERBS`], as written or with "-ing" ("clicking", "choosing").
fn is_verb(word: &str) -> bool {
    let w = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
    VERBS.contains(&w.as_str())
        || w.strip_suffix("ing").is_some_and(|stem| {
            VERBS.contains(&stem)
                || VERBS.contains(&format!("{stem}e").as_str())
                || stem.len() > 2
                    && stem.as_bytes()[stem.len() - 1] == stem.as_bytes()[stem.len() - 2]
                    && VERBS.contains(&&stem[..stem.len() - 1])
        })
}

/// The element a subgoal names, normalised; `None` when the subgoal is not a click on a named element
/// ("collect a coin", "win the game"). The first verb of [`VERBS`] starts the name, wherever it stands
/// ("click Play", "Start the game from the menu (click Play)", "begin by clicking Play"); the name runs
/// to the end of its clause. A quoted name is taken as it is; otherwise the words after the verb, less
/// articles and words like "button".
pub fn named_element(subgoal: &str) -> Option<String> {
    let text = subgoal.trim();
    let verb_end = text
        .split_inclusive(char::is_whitespace)
        .scan(0usize, |at, word| {
            let start = *at;
            *at += word.len();
            Some((start, word))
        })
        .find(|(_, word)| is_verb(word))
        .map(|(start, word)| start + word.trim_end().len())?;
    // Only the verb's clause: "click Play, then collect a coin" names Play.
    let rest = &text[verb_end..];
    let clause = rest.split([',', ';', '.', '(', ')']).next().unwrap_or(rest);
    let quoted = clause
        .split(['\'', '"', '‘', '’', '“', '”'])
        .nth(1)
        .map(normalise)
        .filter(|q| !q.is_empty());
    let name = quoted.unwrap_or_else(|| {
        let all = normalise(clause);
        let words: Vec<&str> = all.split(' ').take_while(|w| !NAME_ENDS.contains(w)).collect();
        let start = words
            .iter()
            .position(|w| !FILLER.contains(w))
            .unwrap_or(words.len());
        let end = words
            .iter()
            .rposition(|w| !FILLER.contains(w))
            .map_or(start, |e| e + 1);
        words[start..end.max(start)].join(" ")
    });
    (!name.is_empty() && name.split(' ').count() <= 4).then_some(name)
}

/// The one element labelled `name` (normalised) and not excluded; `None` when none or several are.
pub fn direct_target(obs: &Observation, name: &str, excluded: &[ElementId]) -> Option<ElementId> {
    let mut hits = obs
        .elements
        .iter()
        .filter(|e| !excluded.contains(&e.id))
        .filter(|e| e.label.as_deref().is_some_and(|l| normalise(l) == name));
    let first = hits.next()?;
    // With one of the game's popups or dialogs open, a click on the main window closes or ignores it:
    // what to do there is the model's choice.
    let layered = obs.elements.iter().any(|e| e.layer.is_some());
    if layered && first.layer.is_none() {
        return None;
    }
    hits.next().is_none().then_some(first.id)
}

/// What the current step lets the session click without a model call: the element it names
/// ([`named_element`]), or else, when the session grounds by the step's words, the element whose whole
/// label the step's words contain ("Switch to the 16x16 board with 40 mines using the Type menu": first
/// "Type", then, in the menu it opens, "16x16, 40 mines"). Labels already clicked for the step are not
/// clicked again: what a click did not finish is the model's choice.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DirectAim {
    #[serde(rename = "direct", skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The step's words, normalised; `None` unless the session grounds by words.
    #[serde(rename = "direct_words", skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
    /// Labels (normalised) already clicked for this step.
    #[serde(rename = "direct_clicked", skip_serializing_if = "Vec::is_empty")]
    pub clicked: Vec<String>,
}

impl DirectAim {
    /// Whether the aim can pick anything at all.
    pub fn is_some(&self) -> bool {
        self.name.is_some() || self.words.is_some()
    }

    /// The element to click and its normalised label: the named one when exactly one carries that
    /// label, else the one the step's words name (`worded_target`).
    pub fn target(&self, obs: &Observation, excluded: &[ElementId]) -> Option<(ElementId, String)> {
        if let Some(name) = self
            .name
            .as_deref()
            .filter(|n| !self.clicked.iter().any(|c| c == n))
        {
            if let Some(id) = direct_target(obs, name, excluded) {
                return Some((id, name.to_string()));
            }
        }
        let words = self.words.as_deref()?;
        worded_target(obs, words, excluded, &self.clicked)
    }

    /// Nothing on screen is labelled as the step says and the step closes what is open
    /// ([`dismisses_open_layer`]): Escape is the step's action.
    pub fn dismisses(&self, obs: &Observation, excluded: &[ElementId]) -> bool {
        self.words
            .as_deref()
            .is_some_and(|w| dismisses_open_layer(w, obs))
            && self.target(obs, excluded).is_none()
    }
}

/// Words a menu uses for what a person names in other words: "Start a game" is "Play" on a menu with no
/// "Start" (the practice game's model clicked its title instead). What else the label says must still be
/// in the step's words, and the label with most words wins ("Start Game" over "Play").
const SAME_MEANING: &[&[&str]] = &[
    &["start", "begin", "play"],
    &["quit", "exit"],
    &["options", "settings", "preferences"],
];

/// Words a label made of them alone is never clicked for: they name no particular thing.
const VAGUE: &[&str] = &[
    "the", "a", "an", "to", "of", "and", "or", "in", "on", "it", "is", "by", "for",
];

/// The element whose whole label is among `words` (the step's, normalised) — at least one word of it
/// with a letter and not vague, never a bare number (a score) — and not `excluded` or already
/// `clicked`. With one of the game's popups or dialogs open, only its elements. The label with the
/// most words wins; two different labels as specific, or one label shown twice, is a real choice:
/// `None`, and the model chooses.
pub fn worded_target(
    obs: &Observation,
    words: &str,
    excluded: &[ElementId],
    clicked: &[String],
) -> Option<(ElementId, String)> {
    let step: std::collections::HashSet<&str> = words.split(' ').collect();
    let said = |w: &str| {
        step.contains(w)
            || SAME_MEANING
                .iter()
                .any(|group| group.contains(&w) && group.iter().any(|g| step.contains(g)))
    };
    let layered = obs.elements.iter().any(|e| e.layer.is_some());
    let mut best: Option<(usize, ElementId, String)> = None;
    let mut tied = false;
    for e in &obs.elements {
        if excluded.contains(&e.id) || (layered && e.layer.is_none()) {
            continue;
        }
        let Some(label) = e.label.as_deref().map(normalise).filter(|l| !l.is_empty()) else {
            continue;
        };
        let parts: Vec<&str> = label.split(' ').collect();
        let named = parts.iter().all(|w| said(w))
            && parts
                .iter()
                .any(|w| w.chars().any(char::is_alphabetic) && w.len() > 1 && !VAGUE.contains(w));
        if !named || clicked.contains(&label) {
            continue;
        }
        match &best {
            Some((n, _, _)) if parts.len() < *n => {}
            Some((n, _, _)) if parts.len() == *n => tied = true,
            _ => {
                tied = false;
                best = Some((parts.len(), e.id, label));
            }
        }
    }
    if tied {
        return None;
    }
    best.map(|(_, id, label)| (id, label))
}

/// Words that make a step a matter of keys or of the cursor, never a click ("move the menu cursor down to
/// Graphics" is three presses of Down, not a click on Graphics).
const NOT_A_CLICK: &[&str] = &[
    "cursor",
    "highlight",
    "highlighted",
    "key",
    "keys",
    "keyboard",
    "arrow",
    "arrows",
    "scroll",
    "hover",
    "drag",
    "hold",
    "holding",
    "down",
    "up",
    "left",
    "right",
];

/// A step's words, normalised, for [`worded_target`]; `None` when the step speaks of keys or the cursor
/// (see [`NOT_A_CLICK`]): what it names is where the cursor goes, not what to click.
pub fn clickable_words(step: &str) -> Option<String> {
    let words = normalise(step);
    (!words.split(' ').any(|w| NOT_A_CLICK.contains(&w))).then_some(words)
}

/// Words of a step that asks to put away what is open ("then close it", "cancel it").
const DISMISS: &[&str] = &["close", "cancel", "dismiss"];

/// A step that asks to close, cancel or dismiss what is open, while one of the game's dialogs or menus is
/// open: Escape dismisses it in every toolkit we play, when nothing on screen is labelled as the step says
/// (sgt-mines' About box is taller than the game's window, and capture, clipped to that window, never
/// shows its Close button). `words` are the step's normalised words ([`clickable_words`]).
pub fn dismisses_open_layer(words: &str, obs: &Observation) -> bool {
    words.split(' ').any(|w| DISMISS.contains(&w)) && obs.elements.iter().any(|e| e.layer.is_some())
}

/// A step whose end is something open: a dialog, a box, a window or a screen shown ("Open the About
/// box", "show the options").
pub fn asks_to_open(step: &str) -> bool {
    normalise(step)
        .split(' ')
        .any(|w| matches!(w, "open" | "opens" | "show" | "display" | "view"))
}

/// The menu a step names by its name ("from the Type menu" → `Type`): the word before "menu", when it
/// is written as a name (capitalised). "From the menu" names no menu of the game's own.
pub fn named_menu(step: &str) -> Option<String> {
    let words: Vec<&str> = step
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).find_map(|w| {
        (w[1].eq_ignore_ascii_case("menu") && w[0].starts_with(|c: char| c.is_uppercase()))
            .then(|| w[0].to_string())
    })
}

/// A step's words as the key of what was clicked for it without a model call (case and spacing aside).
pub fn step_key(description: &str) -> String {
    description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{MonoTime, Rect, Size};
    use gamepilot_vision::{Element, ElementSource, FrameChange};

    #[test]
    fn a_menu_is_named_by_its_name_before_the_word_menu() {
        assert_eq!(
            named_menu("Choose the 3x3 puzzle from the Type menu").as_deref(),
            Some("Type")
        );
        assert_eq!(
            named_menu("Open the About box from the Help menu, then close it").as_deref(),
            Some("Help")
        );
        assert_eq!(named_menu("Start a game from the menu"), None, "no name");
        assert_eq!(named_menu("Start a new game"), None);
    }

    #[test]
    fn a_subgoal_names_the_element_it_clicks_and_nothing_else() {
        // Plans that name what to do are grounded without guessing
        assert_eq!(named_element("click 'New Game'").as_deref(), Some("new game"));
        assert_eq!(
            named_element("Press the \"Start Game\" button").as_deref(),
            Some("start game")
        );
        assert_eq!(
            named_element("click Play, then collect a coin").as_deref(),
            Some("play")
        );
        assert_eq!(named_element("select the Easy option").as_deref(), Some("easy"));
        assert_eq!(named_element("Open Options").as_deref(), Some("options"));
        assert_eq!(named_element("collect a coin"), None);
        assert_eq!(named_element("start the game"), None);
        assert_eq!(
            named_element("Start the game from the menu (click Play)").as_deref(),
            Some("play"),
            "the plan's own words in parentheses"
        );
        assert_eq!(
            named_element("Begin by clicking 'New Game' in the menu").as_deref(),
            Some("new game")
        );
        assert_eq!(named_element("press Start to begin").as_deref(), Some("start"));
        assert_eq!(named_element("Choose Easy then play").as_deref(), Some("easy"));
        assert_eq!(named_element("walk around and collect a coin"), None);
        assert_eq!(named_element("Start the game from the menu"), None);
        assert_eq!(named_element("click"), None);
        assert_eq!(named_element("click the button"), None);
        assert_eq!(
            named_element("click on whatever looks like it would start a new round"),
            None
        );
    }

    fn labelled(labels: &[&str]) -> Observation {
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(640, 480),
            class: FrameChange::Scene,
            texts: Vec::new(),
            elements: labels
                .iter()
                .enumerate()
                .map(|(i, l)| Element {
                    id: ElementId(i as u32 + 1),
                    bbox: Rect::new(10, 10 + 40 * i as i32, 100, 30),
                    confidence: 0.9,
                    source: ElementSource::Text,
                    label: Some(l.to_string()),
                    looks: None,
                    layer: None,
                    selected: false,
                })
                .collect(),
        }
    }

    #[test]
    fn only_one_visible_element_with_that_label_is_grounded_directly() {
        // The model is asked when there is a real choice
        let menu = labelled(&["Arcade Game", "New Game!", "Options"]);
        assert_eq!(direct_target(&menu, "new game", &[]), Some(ElementId(2)));
        assert_eq!(
            direct_target(&menu, "game", &[]),
            None,
            "a word of a label is not the label"
        );
        assert_eq!(
            direct_target(&menu, "new game", &[ElementId(2)]),
            None,
            "a suppressed mark is not offered"
        );
        let twice = labelled(&["Play", "play"]);
        assert_eq!(
            direct_target(&twice, "play", &[]),
            None,
            "two candidates: the model chooses"
        );
    }

    #[test]
    fn nothing_behind_an_open_popup_is_clicked_without_the_model() {
        // sgt-mines: the step "open the Type menu" was planned again once the menu opened, and its direct
        // click on Type closed the menu it had opened
        let mut open = labelled(&["Game", "Type", "16x16, 40 mines"]);
        open.elements[2].layer = Some(gamepilot_core::WindowLayer::Popup);
        assert_eq!(direct_target(&open, "type", &[]), None);
        assert_eq!(
            direct_target(&open, &normalise("16x16, 40 mines"), &[]),
            Some(ElementId(3))
        );
        assert_eq!(step_key("Open  the Type menu"), step_key("open the type MENU"));
    }

    #[test]
    fn a_menus_word_for_what_the_step_names_in_other_words_is_grounded() {
        let obs = labelled(&["PRACTICE ARENA", "Play", "Options", "Quit"]);
        let play = worded_target(&obs, &normalise("Start a game from the menu"), &[], &[]);
        assert_eq!(play.map(|(_, l)| l).as_deref(), Some("play"));
        let settings = worded_target(&obs, &normalise("open the settings"), &[], &[]);
        assert_eq!(settings.map(|(_, l)| l).as_deref(), Some("options"));
        // "Start Game" says more of the step than "Play": the label with most words wins.
        let both = labelled(&["Start Game", "Play"]);
        let start = worded_target(&both, &normalise("start the game"), &[], &[]);
        assert_eq!(start.map(|(_, l)| l).as_deref(), Some("start game"));
    }

    #[test]
    fn a_step_about_keys_or_the_cursor_is_not_grounded_by_its_words() {
        assert_eq!(clickable_words("Move the menu cursor down to Graphics."), None);
        assert_eq!(
            clickable_words("Press the Down arrow until Options is highlighted"),
            None
        );
        assert_eq!(
            clickable_words("Start a new game").as_deref(),
            Some("start a new game")
        );
    }

    #[test]
    fn the_steps_words_ground_the_element_whose_whole_label_they_contain() {
        // sgt-mines: "Switch to the 16x16 board with 40 mines using the Type menu" opens Type, then picks
        // the popup's "16x16, 40 mines"; a bare number, a vague word or a label with other words is not
        // named, and two labels as specific are the model's choice
        let words = normalise("Switch to the 16x16 board with 40 mines using the Type menu");
        let bar = labelled(&["Game", "Type", "Help", "40", "[0:00] Marked: 0 10"]);
        assert_eq!(
            worded_target(&bar, &words, &[], &[]),
            Some((ElementId(2), "type".to_string()))
        );
        assert_eq!(
            worded_target(&bar, &words, &[], &["type".to_string()]),
            None,
            "a label clicked for the step is not clicked again"
        );
        let mut open = labelled(&["Game", "Type", "9x9, 10 mines", "16x16, 40 mines", "Custom..."]);
        for e in &mut open.elements[2..] {
            e.layer = Some(gamepilot_core::WindowLayer::Popup);
        }
        assert_eq!(
            worded_target(&open, &words, &[], &[]),
            Some((ElementId(4), "16x16 40 mines".to_string()))
        );
        let menu = labelled(&["New Game", "Options", "Quit"]);
        let start = normalise("Start a new game");
        assert_eq!(
            worded_target(&menu, &start, &[], &[]),
            Some((ElementId(1), "new game".to_string()))
        );
        assert_eq!(
            worded_target(&labelled(&["Game", "New"]), &start, &[], &[]),
            None,
            "two one-word labels: a real choice"
        );
        assert_eq!(worded_target(&labelled(&["A", "40"]), &words, &[], &[]), None);
        let aim = DirectAim {
            name: named_element("Choose the 9x9 board from the Type menu"),
            words: Some(normalise("Choose the 9x9 board from the Type menu")),
            clicked: Vec::new(),
        };
        assert_eq!(aim.name.as_deref(), Some("9x9 board"));
        assert_eq!(
            aim.target(&labelled(&["Game", "Type"]), &[]),
            Some((ElementId(2), "type".to_string())),
            "no element is named exactly: the words choose"
        );
    }
}
