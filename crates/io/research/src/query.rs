//! What is never sent: research queries are built only from the user's goal and the agent's own
//! inferences; recognised screen text has no conversion into a query, and a runtime guard rejects any
//! query that repeats it verbatim — a long run of it, or any single word of it, short tokens included
//! (a handle, a password, a number), unless the user's goal holds that word or it is one of the generic
//! words every question and every game screen uses ([`GENERIC_WORDS`]).
//!
//! [`ScreenText`] deliberately implements no `From`/`Into`/`AsRef<str>`/`Deref`/`Display`, and no query
//! type accepts it, so this does not compile:
//!
//! ```compile_fail
//! use gamepilot_research::{Goal, QueryBuilder, ScreenText};
//! let screen = ScreenText::new("From alice_1987: meet me at the usual place".to_string());
//! let goal = Goal::new("finish the first level");
//! // A ScreenText is not an Inference: there is no path from OCR text into a query.
//! let _q = QueryBuilder::new(&goal).inference(&screen).build(&ScreenText::empty(), 256);
//! ```
//!
//! ```compile_fail
//! use gamepilot_research::{Inference, ScreenText};
//! let screen = ScreenText::new("From alice_1987: meet me at the usual place".to_string());
//! let _i: Inference = screen.into();
//! ```
//!
//! ```compile_fail
//! use gamepilot_research::{Inference, ScreenText};
//! let screen = ScreenText::new("From alice_1987: meet me at the usual place".to_string());
//! let _i = Inference::new(screen.as_ref());
//! ```
//!
//! ```compile_fail
//! use gamepilot_research::{Inference, ScreenText};
//! let screen = ScreenText::new("From alice_1987: meet me at the usual place".to_string());
//! let _i = Inference::new(format!("{screen}"));
//! ```
//!
//! The intended path compiles:
//!
//! ```
//! use gamepilot_research::{Goal, Inference, QueryBuilder, ScreenText};
//! let goal = Goal::new("finish the first level of Untangle");
//! let why = Inference::new("the level seems to end when no lines cross");
//! let screen = ScreenText::new("Untangle  Level 1  Moves: 12".to_string());
//! let q = QueryBuilder::new(&goal).inference(&why).build(&screen, 256).unwrap();
//! assert!(q.as_str().contains("Untangle"));
//! ```

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;

use crate::error::ResearchError;

/// A shared run of more than this many characters between a query and the current screen text
/// (after lower-casing and collapsing whitespace) rejects the query.
pub const SCREEN_TEXT_GUARD_CHARS: usize = 12;

/// The user's goal, as the user wrote it. The user typed it, so it may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal(String);

impl Goal {
    /// The goal text from the user's command line or configuration.
    pub fn new(text: impl Into<String>) -> Self {
        Goal(text.into())
    }

    /// The goal text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One of the agent's own inferences ("the level seems to end when no lines cross").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inference(String);

impl Inference {
    /// An inference the agent wrote (its plan, its notes, its stuck hypothesis).
    pub fn new(text: impl Into<String>) -> Self {
        Inference(text.into())
    }

    /// The inference text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Text recognised on the screen (OCR). It may hold an account name or a private message, so it has
/// no conversion into anything a query is built from; it exists here only to feed the guard.
#[derive(Clone, Default)]
pub struct ScreenText(String);

impl ScreenText {
    /// Wraps recognised screen text.
    pub fn new(text: String) -> Self {
        ScreenText(text)
    }

    /// No screen text (nothing recognised, or no OCR).
    pub fn empty() -> Self {
        ScreenText(String::new())
    }

    /// Joins the text of several regions into one guard input.
    pub fn join(parts: &[ScreenText]) -> Self {
        ScreenText(parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join("\n"))
    }

    /// Characters held (the text itself is never exposed).
    pub fn len_chars(&self) -> usize {
        self.0.chars().count()
    }
}

impl fmt::Debug for ScreenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScreenText(<{} chars redacted>)", self.len_chars())
    }
}

/// A search query that passed the builder and the screen-text guard. It can only be made by
/// [`QueryBuilder::build`] (no public constructor, no `Deserialize`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Query(String);

impl Query {
    /// The text that will be sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Builds a [`Query`] from the goal and the agent's inferences, and nothing else.
#[derive(Debug, Clone)]
pub struct QueryBuilder<'a> {
    goal: &'a Goal,
    include_goal: bool,
    inferences: Vec<&'a Inference>,
}

impl<'a> QueryBuilder<'a> {
    /// Starts a query about `goal`.
    pub fn new(goal: &'a Goal) -> Self {
        QueryBuilder {
            goal,
            include_goal: true,
            inferences: Vec::new(),
        }
    }

    /// Adds one of the agent's inferences.
    pub fn inference(mut self, inference: &'a Inference) -> Self {
        self.inferences.push(inference);
        self
    }

    /// Leaves the goal text out of the query (it still exempts its own words from the guard).
    pub fn without_goal_text(mut self) -> Self {
        self.include_goal = false;
        self
    }

    /// Normalises and bounds the query to `max_chars`, then rejects it with
    /// [`ResearchError::QueryContainsScreenText`] if it shares a run of more than
    /// [`SCREEN_TEXT_GUARD_CHARS`] characters with `current_screen` that is not also in the goal
    /// (the user typed the goal, so its words may be sent even when the screen shows them too).
    pub fn build(self, current_screen: &ScreenText, max_chars: usize) -> Result<Query, ResearchError> {
        let mut parts: Vec<&str> = Vec::new();
        if self.include_goal {
            parts.push(self.goal.as_str());
        }
        parts.extend(self.inferences.iter().map(|i| i.as_str()));
        let joined = normalise_spaces(&parts.join(" "));
        let text = cut_at_word(&joined, max_chars);
        if text.is_empty() {
            return Err(ResearchError::EmptyQuery);
        }
        guard_against_screen_text(&text, self.goal, current_screen)?;
        guard_against_screen_words(&text, self.goal, current_screen)?;
        Ok(Query(text))
    }
}

/// The runtime guard: a query may not repeat a run of more than [`SCREEN_TEXT_GUARD_CHARS`]
/// characters of the current screen text, unless that run is also part of the user's goal.
fn guard_against_screen_text(query: &str, goal: &Goal, screen: &ScreenText) -> Result<(), ResearchError> {
    let w = SCREEN_TEXT_GUARD_CHARS + 1;
    let q: Vec<char> = fold(query).chars().collect();
    let s: Vec<char> = fold(&screen.0).chars().collect();
    if q.len() < w || s.len() < w {
        return Ok(());
    }
    let query_windows: HashSet<&[char]> = q.windows(w).collect();
    // Padded so a goal run that ends (or starts) a word also covers the space next to it.
    let goal_folded: Vec<char> = format!(" {} ", fold(goal.as_str())).chars().collect();
    let goal_windows: HashSet<&[char]> = if goal_folded.len() >= w {
        goal_folded.windows(w).collect()
    } else {
        HashSet::new()
    };
    for win in s.windows(w) {
        if query_windows.contains(win) && !goal_windows.contains(win) {
            return Err(ResearchError::QueryContainsScreenText { matched_chars: w });
        }
    }
    Ok(())
}

/// Words that identify no one: function words of a question and the vocabulary every game screen shows.
/// A query may share these with the screen; any other word it shares with the screen must be in the goal.
pub const GENERIC_WORDS: &[&str] = &[
    "a",
    "about",
    "after",
    "all",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "before",
    "best",
    "but",
    "by",
    "can",
    "do",
    "does",
    "each",
    "end",
    "ends",
    "for",
    "from",
    "get",
    "go",
    "has",
    "have",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "me",
    "more",
    "most",
    "my",
    "new",
    "next",
    "no",
    "not",
    "of",
    "off",
    "on",
    "one",
    "or",
    "out",
    "over",
    "the",
    "then",
    "there",
    "this",
    "to",
    "up",
    "use",
    "was",
    "what",
    "when",
    "where",
    "which",
    "who",
    "why",
    "will",
    "with",
    "you",
    "your",
    // game vocabulary
    "back",
    "boss",
    "button",
    "continue",
    "easy",
    "enemy",
    "exit",
    "game",
    "guide",
    "hard",
    "health",
    "help",
    "hint",
    "inventory",
    "item",
    "key",
    "level",
    "life",
    "lives",
    "load",
    "map",
    "menu",
    "mode",
    "move",
    "moves",
    "normal",
    "options",
    "pause",
    "play",
    "player",
    "points",
    "puzzle",
    "quest",
    "quit",
    "restart",
    "resume",
    "save",
    "score",
    "settings",
    "shop",
    "skip",
    "solution",
    "start",
    "stage",
    "time",
    "tutorial",
    "walkthrough",
    "win",
];

/// The words of a text: lower-cased runs of letters, digits and the characters names and addresses are
/// made of (`_ . @ - '`), trimmed of the punctuation at their ends.
fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '@' | '-' | '\'')))
        .map(|w| {
            w.trim_matches(|c: char| matches!(c, '.' | '-' | '\''))
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
}

/// `word` or its singular/plural twin.
fn with_twin(word: &str) -> [String; 2] {
    match word.strip_suffix('s') {
        Some(stem) if !stem.is_empty() => [word.to_string(), stem.to_string()],
        _ => [word.to_string(), format!("{word}s")],
    }
}

/// The word guard: no word of the query may be a word of the screen unless the goal holds it (or its
/// singular/plural) or it is generic. Catches what the run guard cannot: a short name, a password, a
/// number copied from the screen.
fn guard_against_screen_words(query: &str, goal: &Goal, screen: &ScreenText) -> Result<(), ResearchError> {
    let on_screen: HashSet<String> = words(&screen.0).collect();
    if on_screen.is_empty() {
        return Ok(());
    }
    let in_goal: HashSet<String> = words(goal.as_str()).collect();
    for w in words(query) {
        if !on_screen.contains(&w) {
            continue;
        }
        let twins = with_twin(&w);
        let allowed = twins
            .iter()
            .any(|t| in_goal.contains(t) || GENERIC_WORDS.contains(&t.as_str()));
        if !allowed {
            return Err(ResearchError::QueryContainsScreenWord {
                chars: w.chars().count(),
            });
        }
    }
    Ok(())
}

/// Lower-cases and collapses every run of whitespace to one space.
fn fold(s: &str) -> String {
    normalise_spaces(&s.to_lowercase())
}

/// Collapses whitespace runs (and control characters) to single spaces and trims.
pub(crate) fn normalise_spaces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    out
}

/// At most `max` characters, cut at the last space before the limit when there is one.
fn cut_at_word(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let next_is_space = s.chars().nth(max).is_some_and(|c| c == ' ');
    let cut: String = s.chars().take(max).collect();
    if next_is_space {
        return cut;
    }
    match cut.rfind(' ') {
        Some(i) if i > 0 => cut[..i].to_string(),
        _ => cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::marker::PhantomData;

    /// Probe: the inherent `implements` (true) applies only when `T` satisfies the bound, otherwise
    /// method lookup falls back to the trait's `implements` (false). Lets a test assert the *absence*
    /// of a conversion at run time.
    macro_rules! implements {
        ($t:ty : $($bound:tt)+) => {{
            struct P<T>(PhantomData<T>);
            #[allow(dead_code)]
            trait F { fn implements(&self) -> bool { false } }
            impl<T> F for P<T> {}
            impl<T: $($bound)+> P<T> { #[allow(dead_code)] fn implements(&self) -> bool { true } }
            P::<$t>(PhantomData).implements()
        }};
    }

    fn screen() -> ScreenText {
        ScreenText::new(
            "Untangle   Level 1\nFrom alice_1987: meet me behind the old mill at 9\nMoves: 12".into(),
        )
    }

    #[test]
    fn screen_text_has_no_path_into_a_query() {
        // What is never sent: ScreenText has no conversion into any query input (FR-SKILL-003).
        // Positive controls: the probe does detect implementations.
        assert!(implements!(String: AsRef<str>));
        assert!(implements!(Goal: Clone));
        // The conversions that would let OCR text become a query input do not exist.
        assert!(!implements!(ScreenText: AsRef<str>));
        assert!(!implements!(ScreenText: std::fmt::Display));
        assert!(!implements!(ScreenText: std::ops::Deref<Target = str>));
        assert!(!implements!(ScreenText: Into<String>));
        assert!(!implements!(ScreenText: Into<Inference>));
        assert!(!implements!(ScreenText: Into<Goal>));
        assert!(!implements!(ScreenText: Into<Query>));
        assert!(!implements!(ScreenText: serde::Serialize));
        assert!(!implements!(Query: serde::de::DeserializeOwned));
        // Debug output is redacted so a log line cannot carry it either.
        let dbg = format!("{:?}", screen());
        assert!(!dbg.contains("alice"), "{dbg}");
    }

    // Runtime guard: an inference that copies screen text verbatim is rejected with a named error.
    #[test]
    fn guard_rejects_verbatim_screen_text() {
        // FR-SKILL-003, FR-SKILL-004: runtime guard, an inference that copies screen text is refused by name.
        let goal = Goal::new("finish the first level of Untangle");
        let copied = Inference::new("message says meet me behind the old mill at 9");
        let err = QueryBuilder::new(&goal)
            .inference(&copied)
            .build(&screen(), 256)
            .unwrap_err();
        assert_eq!(
            err,
            ResearchError::QueryContainsScreenText {
                matched_chars: SCREEN_TEXT_GUARD_CHARS + 1
            }
        );
        assert!(!err.to_string().contains("mill"));
        // Case and whitespace changes do not get around it.
        let shouty = Inference::new("FROM   ALICE_1987:  MEET");
        assert!(QueryBuilder::new(&goal)
            .inference(&shouty)
            .build(&screen(), 256)
            .is_err());
    }

    #[test]
    fn guard_allows_own_inferences_and_goal_words() {
        // FR-SKILL-003: the agent's own inferences and the user's goal may be sent.
        // The screen shows "Untangle   Level 1" and the goal names Untangle: short shared words pass,
        // and runs shared with the goal pass because the user typed them.
        let goal = Goal::new("finish Untangle Level 1");
        let own = Inference::new("how do I win when lines must not cross");
        let q = QueryBuilder::new(&goal)
            .inference(&own)
            .build(&screen(), 256)
            .unwrap();
        assert_eq!(
            q.as_str(),
            "finish Untangle Level 1 how do I win when lines must not cross"
        );
        // Exactly SCREEN_TEXT_GUARD_CHARS shared characters pass; one more fails.
        let s = ScreenText::new("abcdefghijklmnopqrstuvwxyz".into());
        let g = Goal::new("q");
        let ok = Inference::new("xx abcdefghijkl yy"); // 12 chars shared
        assert!(QueryBuilder::new(&g).inference(&ok).build(&s, 256).is_ok());
        let bad = Inference::new("xx abcdefghijklm yy"); // 13 chars shared
        assert!(QueryBuilder::new(&g).inference(&bad).build(&s, 256).is_err());
    }

    #[test]
    fn guard_rejects_short_screen_tokens_too() {
        // FR-SKILL-003: a search query never carries screen text, short tokens included
        let screen = ScreenText::new(
            "Whisper from bob: pw hunter2, room 4521, mail bob.smith@example.com\nLevel 3  Moves: 12".into(),
        );
        let goal = Goal::new("finish the levels of Untangle");
        for leaky in [
            "who is bob",
            "what does hunter2 mean",
            "room 4521",
            "contact bob.smith@example.com",
            "BOB level",
        ] {
            let i = Inference::new(leaky);
            let err = QueryBuilder::new(&goal)
                .inference(&i)
                .build(&screen, 256)
                .unwrap_err();
            // Short tokens are the word guard's; a long one (the address) may trip the run guard first.
            assert!(
                matches!(
                    err,
                    ResearchError::QueryContainsScreenWord { .. }
                        | ResearchError::QueryContainsScreenText { .. }
                ),
                "{leaky}: {err:?}"
            );
            if leaky.len() < 24 {
                assert!(
                    matches!(err, ResearchError::QueryContainsScreenWord { .. }),
                    "{leaky}: {err:?}"
                );
            }
            // The message never carries the word.
            let msg = err.to_string();
            for secret in ["bob", "hunter2", "4521"] {
                assert!(!msg.contains(secret), "{msg}");
            }
        }
        // Generic words, goal words (and their plural/singular) and words the screen does not show pass.
        let own = Inference::new("how do the moves of a level work when lines cross");
        assert!(QueryBuilder::new(&goal)
            .inference(&own)
            .build(&screen, 256)
            .is_ok());
        let goal2 = Goal::new("help bob finish level 3");
        let ok = Inference::new("bob level 3 strategy");
        assert!(QueryBuilder::new(&goal2)
            .inference(&ok)
            .build(&screen, 256)
            .is_ok());
        assert_eq!(
            words("Hi, bob.smith@example.com - it's 12:05.").collect::<Vec<_>>(),
            ["hi", "bob.smith@example.com", "it's", "12", "05"]
        );
    }

    #[test]
    fn builder_bounds_and_rejects_empty() {
        let goal = Goal::new("   ");
        assert_eq!(
            QueryBuilder::new(&goal).build(&ScreenText::empty(), 256),
            Err(ResearchError::EmptyQuery)
        );
        let goal = Goal::new("alpha beta gamma delta epsilon");
        let q = QueryBuilder::new(&goal).build(&ScreenText::empty(), 16).unwrap();
        assert_eq!(q.as_str(), "alpha beta gamma");
        let q = QueryBuilder::new(&goal)
            .without_goal_text()
            .inference(&Inference::new("zeta"))
            .build(&ScreenText::empty(), 256)
            .unwrap();
        assert_eq!(q.as_str(), "zeta");
    }
}
