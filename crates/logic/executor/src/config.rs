//! Executor limits (FR-SAFE-004) and the denied key list (INV-ACT-003). They come only from the user's
//! configuration and command line (INV-SAFE-001): nothing in the action vocabulary can reach them.

use gamepilot_core::{Chord, KeyError, Keysym};
use std::time::Duration;

/// The executor crate's one error enum: a configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorError {
    #[error("bad denied chord {chord:?}: {source}")]
    BadDenied { chord: String, source: KeyError },
    #[error("invalid executor limit {name}: {why}")]
    BadLimit { name: &'static str, why: String },
}

/// The default denied chords of decisions.md ("Safety and limits").
pub const DEFAULT_DENIED: &[&str] = &[
    "alt+F4",
    "ctrl+alt+Delete",
    "ctrl+alt+BackSpace",
    "ctrl+alt+F1",
    "ctrl+alt+F2",
    "ctrl+alt+F3",
    "ctrl+alt+F4",
    "ctrl+alt+F5",
    "ctrl+alt+F6",
    "ctrl+alt+F7",
    "ctrl+alt+F8",
    "ctrl+alt+F9",
    "ctrl+alt+F10",
    "ctrl+alt+F11",
    "ctrl+alt+F12",
    "Super_L",
    "Meta_L",
    "alt+Tab",
    "ctrl+q",
    "ctrl+w",
    // Desktop shortcuts: they act on the desktop, not the game (menus, run dialogues, terminals, window
    // menus and moves, workspaces, the screen lock). Super in any chord is denied by Super_L above.
    "alt+F1",
    "alt+F2",
    "alt+F3",
    "alt+F7",
    "alt+F8",
    "alt+F10",
    "alt+space",
    "alt+Escape",
    "ctrl+Escape",
    "ctrl+alt+t",
    "ctrl+alt+l",
    "ctrl+alt+d",
    "ctrl+alt+Tab",
    "ctrl+alt+Left",
    "ctrl+alt+Right",
    "ctrl+alt+Up",
    "ctrl+alt+Down",
];

/// Map a keysym to the form used for comparisons: right-hand modifiers become left-hand ones and
/// letters become lower case (both sides of a keyboard and both cases are the same key).
pub fn normalize(k: Keysym) -> Keysym {
    match k.0 {
        0xffe2 => Keysym(0xffe1), // Shift_R
        0xffe4 => Keysym(0xffe3), // Control_R
        0xffe8 => Keysym(0xffe7), // Meta_R
        0xffea => Keysym(0xffe9), // Alt_R
        0xffec => Keysym(0xffeb), // Super_R
        c @ 0x41..=0x5a => Keysym(c + 0x20),
        c => Keysym(c),
    }
}

/// Chords that are never synthesised. A chord is denied when every one of its keys would be held at once
/// (so `Super_L` alone denies Super in any chord, and `alt+F4` also denies `ctrl+alt+F4`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedList {
    chords: Vec<(String, Vec<Keysym>)>,
}

impl DeniedList {
    pub fn empty() -> DeniedList {
        DeniedList { chords: Vec::new() }
    }

    /// The defaults of decisions.md.
    pub fn defaults() -> DeniedList {
        let mut d = DeniedList::empty();
        for c in DEFAULT_DENIED {
            // The defaults are known-good names; a failure here would be a bug caught by the unit test.
            if let Ok(ch) = Chord::parse(c) {
                d.add(&ch);
            }
        }
        d
    }

    /// Parse user-given chord strings (`"alt+F4"`).
    pub fn from_strings<S: AsRef<str>>(list: &[S]) -> Result<DeniedList, ExecutorError> {
        let mut d = DeniedList::empty();
        for s in list {
            let s = s.as_ref();
            let ch = Chord::parse(s).map_err(|source| ExecutorError::BadDenied {
                chord: s.to_string(),
                source,
            })?;
            d.add(&ch);
        }
        Ok(d)
    }

    pub fn add(&mut self, chord: &Chord) {
        let mut keys: Vec<Keysym> = chord.0.iter().map(|k| normalize(*k)).collect();
        keys.sort();
        keys.dedup();
        if !self.chords.iter().any(|(_, k)| *k == keys) {
            self.chords.push((chord.to_string(), keys));
        }
    }

    pub fn len(&self) -> usize {
        self.chords.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chords.is_empty()
    }

    /// The first denied chord all of whose keys are in `keys`, by its display name.
    pub fn matching<I: IntoIterator<Item = Keysym>>(&self, keys: I) -> Option<&str> {
        let mut set: Vec<Keysym> = keys.into_iter().map(normalize).collect();
        set.sort();
        set.dedup();
        self.chords
            .iter()
            .find(|(_, chord)| chord.iter().all(|k| set.binary_search(k).is_ok()))
            .map(|(name, _)| name.as_str())
    }
}

/// Every limit the executor enforces. Built by the binary from the user's configuration and command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutorConfig {
    /// The reflex tick period (used to bound per-tick camera steps).
    pub tick: Duration,
    /// Maximum time any key or button stays held before a forced release (FR-SAFE-004).
    pub max_hold: Duration,
    /// Discrete actions accepted per second (action-rate budget).
    pub max_actions_per_s: u32,
    /// Input events emitted per second (event-rate budget); releases are never held back.
    pub max_events_per_s: u32,
    /// Wall-clock budget of the session; when spent, the executor halts.
    pub session_budget: Duration,
    /// Largest relative camera step per tick and axis (FR-ACT-004: small steps, never one jump).
    pub camera_max_step: i32,
    /// Longest `wait` accepted.
    pub max_wait: Duration,
    /// Longest text a `type` action may carry.
    pub max_text_len: usize,
    pub denied: DeniedList,
    /// Seed for hold durations, gaps and pointer paths (FR-ACT-005), so runs are reproducible.
    pub seed: u64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            tick: Duration::from_micros(16_667),
            max_hold: Duration::from_secs(10),
            max_actions_per_s: 20,
            max_events_per_s: 200,
            session_budget: Duration::from_secs(60 * 60),
            camera_max_step: 80,
            max_wait: Duration::from_secs(600),
            max_text_len: 500,
            denied: DeniedList::defaults(),
            seed: 0x6761_6d65,
        }
    }
}

impl ExecutorConfig {
    /// Reject limits that make no sense (zero tick, zero budgets).
    pub fn check(&self) -> Result<(), ExecutorError> {
        let bad = |name, why: &str| {
            Err(ExecutorError::BadLimit {
                name,
                why: why.to_string(),
            })
        };
        if self.tick.is_zero() {
            return bad("tick", "must be longer than zero");
        }
        if self.max_hold.is_zero() {
            return bad("max_hold", "must be longer than zero");
        }
        if self.max_actions_per_s == 0 {
            return bad("max_actions_per_s", "must be at least 1");
        }
        if self.max_events_per_s < 4 {
            return bad("max_events_per_s", "must be at least 4 (one click is 4 events)");
        }
        if self.camera_max_step < 1 {
            return bad("camera_max_step", "must be at least 1");
        }
        Ok(())
    }

    /// Deny `chord` in addition to the configured list (the panic chord is always denied to the agent).
    pub fn deny(&mut self, chord: &Chord) {
        self.denied.add(chord);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: &str) -> Vec<Keysym> {
        Chord::parse(s).unwrap().0
    }

    #[test]
    fn defaults_parse_and_match_supersets() {
        // INV-ACT-003
        let d = DeniedList::defaults();
        assert_eq!(d.len(), DEFAULT_DENIED.len());
        assert_eq!(d.matching(keys("alt+F4")), Some("Alt_L+F4"));
        assert!(d.matching(keys("Alt_R+F4")).is_some(), "right alt is alt");
        assert!(d.matching(keys("ctrl+Q")).is_some(), "case does not matter");
        assert!(d.matching(keys("ctrl+alt+F4")).is_some());
        assert!(d.matching(keys("Super_R+e")).is_some(), "super in any chord");
        assert!(d.matching(keys("w")).is_none());
        assert!(d.matching(keys("ctrl+s")).is_none());
        assert!(d.matching(keys("F4")).is_none());
        // Desktop shortcuts: run dialogue, window menu, start menu, a terminal, super combinations.
        for chord in [
            "alt+F2",
            "alt+space",
            "ctrl+Escape",
            "ctrl+alt+t",
            "Super_L+d",
            "ctrl+alt+Right",
        ] {
            assert!(d.matching(keys(chord)).is_some(), "{chord} is denied");
        }
        assert!(d.matching(keys("space")).is_none(), "a plain space is the game's");
        assert!(
            d.matching(keys("Escape")).is_none(),
            "a plain Escape is the game's"
        );
    }

    #[test]
    fn user_lists_parse_or_fail_by_name() {
        // INV-SAFE-001: the list is the user's
        let d = DeniedList::from_strings(&["ctrl+x"]).unwrap();
        assert!(d.matching(keys("ctrl+x")).is_some());
        assert!(d.matching(keys("alt+F4")).is_none());
        let e = DeniedList::from_strings(&["ctrl+nokey"]).unwrap_err();
        assert!(matches!(e, ExecutorError::BadDenied { .. }));
    }

    #[test]
    fn config_check_rejects_nonsense() {
        // FR-SAFE-004
        assert!(ExecutorConfig::default().check().is_ok());
        let c = ExecutorConfig {
            max_actions_per_s: 0,
            ..Default::default()
        };
        assert!(c.check().is_err());
        let c = ExecutorConfig {
            tick: Duration::ZERO,
            ..Default::default()
        };
        assert!(c.check().is_err());
    }
}
