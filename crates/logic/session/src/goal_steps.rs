//! A goal in words read as the steps a person reads in it ("start the game from the menu, then collect
//! a coin"), and the counters a screen shows: the agent declares a check for one step at a time, on the
//! screen where that step can be seen (a coin counter exists only once the game has started), and the
//! goal is met when the last step's check is. A check declared on the first screen for a goal of two
//! steps covered only the first (the demo's "title gone" ended a session with no coin collected).

use crate::relevance::{same_stem, words};
use gamepilot_vision::Element;

/// At most this many steps a goal is read as; the rest of a longer goal is its last step.
pub const MAX_GOAL_STEPS: usize = 4;

/// What joins two steps of a goal, longest first (matched in lower case, outside brackets).
const JOINS: &[&str] = &[
    ", and then ",
    "; and then ",
    " and then ",
    ", then ",
    "; then ",
    ". then ",
    " then ",
    "; ",
];

/// The steps of `goal`, in order: split where the words say one thing comes after another ("then", a
/// semicolon, a new sentence), never inside brackets; a goal of one step is itself.
pub fn goal_steps(goal: &str) -> Vec<String> {
    let lower = goal.to_lowercase();
    // Byte offsets line up: the joins are ASCII (never inside another character's bytes), and a goal
    // whose lower case has another length is left whole rather than split at a wrong place.
    if lower.len() != goal.len() {
        return vec![goal.trim().to_string()];
    }
    let mut steps = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut i = 0;
    let bytes = lower.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = (depth - 1).max(0),
            _ => {}
        }
        if depth == 0 {
            if let Some(join) = JOINS.iter().find(|j| bytes[i..].starts_with(j.as_bytes())) {
                steps.push(&goal[start..i]);
                i += join.len();
                start = i;
                continue;
            }
            // A sentence ends: ". " followed by a capital letter in the original text.
            if bytes[i..].starts_with(b". ")
                && goal
                    .get(i + 2..)
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(char::is_uppercase)
            {
                steps.push(&goal[start..i]);
                i += 2;
                start = i;
                continue;
            }
        }
        i += 1;
    }
    steps.push(&goal[start..]);
    let mut steps: Vec<String> = steps
        .into_iter()
        .map(|s| s.trim().trim_end_matches(['.', ',', ';']).trim().to_string())
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .collect();
    if steps.len() > MAX_GOAL_STEPS {
        let tail = steps.split_off(MAX_GOAL_STEPS - 1).join(", then ");
        steps.push(tail);
    }
    if steps.is_empty() {
        steps.push(goal.trim().to_string());
    }
    steps
}

/// A number the screen shows, with what it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    /// The mark whose label holds the number (the one a check that rises or falls names).
    pub mark: u64,
    /// What it counts: the words of its own label, or of the label just left of it on its row.
    pub name: String,
    pub value: u64,
    /// The mark of that label left of it, when the name is another element's.
    pub label_mark: Option<u64>,
}

impl Counter {
    /// A count of what is left ("8/8 coins left", "Mines remaining"): it falls as the goal is done.
    pub fn counts_down(&self) -> bool {
        words(&self.name)
            .iter()
            .any(|w| matches!(w.as_str(), "left" | "remaining" | "remain"))
    }
}

/// The numbers `elements` show whose names share a word's stem with `focus` (the step's words: a coin
/// counter for "collect a coin"), in reading order. Only these are offered: offered every number, the
/// small model made "seed 1 rises" the check of "start the game".
pub fn relevant_counters(elements: &[Element], focus: &str) -> Vec<Counter> {
    let focus_words = words(focus);
    counters(elements, focus)
        .into_iter()
        .filter(|c| {
            words(&c.name)
                .iter()
                .any(|w| focus_words.iter().any(|f| same_stem(w, f)))
        })
        .collect()
}

/// The numbers `elements` show, each with the words that name it ("Coins" left of "0"), those whose
/// words share a stem with `focus` first, then in reading order.
pub fn counters(elements: &[Element], focus: &str) -> Vec<Counter> {
    let mut found: Vec<(bool, i32, i32, Counter)> = Vec::new();
    for e in elements {
        let Some(label) = e.label.as_deref() else { continue };
        let Some(value) = crate::declare::number_in(label) else {
            continue;
        };
        let own: String = label
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .collect::<Vec<_>>()
            .join(" ");
        let (name, label_mark) = if own.is_empty() {
            match label_left_of(e, elements) {
                Some((n, mark)) => (n, Some(mark)),
                None => continue,
            }
        } else {
            (own, None)
        };
        let focus_words = words(focus);
        let relevant = words(&name)
            .iter()
            .any(|w| focus_words.iter().any(|f| same_stem(w, f)));
        found.push((
            !relevant,
            e.bbox.y,
            e.bbox.x,
            Counter {
                mark: u64::from(e.id.0),
                name,
                value,
                label_mark,
            },
        ));
    }
    found.sort_by_key(|(not_relevant, y, x, _)| (*not_relevant, *y, *x));
    found.into_iter().map(|(.., c)| c).collect()
}

/// The words of the label nearest left of `e` on its row (its vertical centre within the other's
/// height, at most three of `e`'s heights away): a HUD's "Coins" beside its "0".
fn label_left_of(e: &Element, elements: &[Element]) -> Option<(String, u64)> {
    let cy = e.bbox.y + e.bbox.h as i32 / 2;
    elements
        .iter()
        .filter(|o| o.id != e.id)
        .filter_map(|o| {
            let label = o.label.as_deref()?;
            if !label.chars().any(char::is_alphabetic) || label.chars().any(|c| c.is_ascii_digit()) {
                return None;
            }
            let right = o.bbox.x + o.bbox.w as i32;
            let gap = e.bbox.x - right;
            let on_row = cy >= o.bbox.y && cy <= o.bbox.y + o.bbox.h as i32;
            (on_row && (0..=3 * e.bbox.h as i32).contains(&gap))
                .then(|| (gap, label.trim().to_string(), u64::from(o.id.0)))
        })
        .min_by_key(|(gap, ..)| *gap)
        .map(|(_, l, mark)| (l, mark))
}

/// The line a declaring prompt shows the counters on ("Numbers on screen …"), or `None` with none.
pub fn counters_line(counters: &[Counter], max: usize) -> Option<String> {
    if counters.is_empty() {
        return None;
    }
    let listed: Vec<String> = counters
        .iter()
        .take(max)
        .map(|c| format!("[{}] {} = {}", c.mark, c.name, c.value))
        .collect();
    Some(format!(
        "Numbers on screen (a check {{\"mark\": N, \"then\": \"rises\"}} names one of these; a count of what is left \"falls\"): {}",
        listed.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{ElementId, Rect};
    use gamepilot_vision::ElementSource;

    fn text(id: u32, label: &str, x: i32, y: i32, w: u32, h: u32) -> Element {
        Element {
            id: ElementId(id),
            bbox: Rect::new(x, y, w, h),
            confidence: 0.9,
            source: ElementSource::Text,
            label: Some(label.into()),
            looks: None,
            layer: None,
            selected: false,
        }
    }

    #[test]
    fn a_goal_of_two_steps_is_read_as_two_and_brackets_stay_whole() {
        // FR-LOOP-004: each step gets its own check, declared where it can be seen
        assert_eq!(
            goal_steps("Start the game from the menu (click Play), then walk around and collect a coin."),
            vec![
                "Start the game from the menu (click Play)",
                "walk around and collect a coin"
            ]
        );
        assert_eq!(
            goal_steps("Start a game from the menu"),
            vec!["Start a game from the menu"]
        );
        assert_eq!(
            goal_steps("Open the options. Turn the music off; and then go back to the menu"),
            vec!["Open the options", "Turn the music off", "go back to the menu"]
        );
        assert_eq!(
            goal_steps("Choose a board (say 9x9, then Start) then play"),
            vec!["Choose a board (say 9x9, then Start)", "play"]
        );
        assert_eq!(goal_steps("a then b then c then d then e").len(), MAX_GOAL_STEPS);
        assert_eq!(goal_steps("a then b then c then d then e")[3], "d, then e");
        assert_eq!(goal_steps("  then  "), vec!["then"]);
        assert_eq!(
            goal_steps("Spiel starten, dann Münze"),
            vec!["Spiel starten, dann Münze"]
        );
    }

    #[test]
    fn a_hud_number_is_named_by_the_label_left_of_it_and_the_goals_words_lead() {
        let hud = [
            text(9, "Coins", 34, 78, 61, 38),
            text(7, "0", 128, 77, 24, 33),
            text(12, "Gold", 34, 157, 49, 37),
            text(13, "250", 125, 150, 71, 48),
            text(29, "8/8 coins left", 123, 667, 129, 35),
            text(3, "N", 631, 5, 18, 19),
        ];
        let found = counters(&hud, "walk around and collect a coin");
        let listed: Vec<(u64, &str, u64)> =
            found.iter().map(|c| (c.mark, c.name.as_str(), c.value)).collect();
        assert_eq!(
            listed,
            vec![(7, "Coins", 0), (29, "coins left", 8), (13, "Gold", 250)]
        );
        assert_eq!(found[0].label_mark, Some(9), "named by the Coins label");
        assert_eq!(found[1].label_mark, None, "named by its own words");
        let relevant: Vec<u64> = relevant_counters(&hud, "collect a coin")
            .iter()
            .map(|c| c.mark)
            .collect();
        assert_eq!(relevant, vec![7, 29]);
        assert!(relevant_counters(&hud, "Start the game from the menu (click Play)").is_empty());
        let line = counters_line(&found, 2).unwrap();
        assert!(line.ends_with("[7] Coins = 0; [29] coins left = 8"), "{line}");
        assert_eq!(counters_line(&[], 3), None);
        // A number with no words near it counts nothing we can name.
        assert!(counters(&[text(1, "42", 500, 500, 20, 20)], "").is_empty());
    }
}
