//! The note block (FR-CTX-005): facts the agent has worked out, written only through the note skill,
//! with a size cap and de-duplication so that a note every tick cannot fill the context with noise.

use crate::history::{one_line, HistoryEntry};
use crate::ContextError;
use gamepilot_core::MonoTime;
use serde::Serialize;

/// Limits of the note block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NoteCap {
    /// Most notes kept; when full, a new note is refused (compaction makes room by merging).
    pub max_notes: usize,
    /// Longest note, in bytes after whitespace collapsing.
    pub max_note_bytes: usize,
}

impl Default for NoteCap {
    fn default() -> Self {
        NoteCap {
            max_notes: 40,
            max_note_bytes: 240,
        }
    }
}

/// The notes, in the order they were taken. No public mutator: only [`NoteSkill`] and compaction write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NoteBlock {
    notes: Vec<String>,
}

impl NoteBlock {
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn len(&self) -> usize {
        self.notes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }

    pub fn render(&self) -> String {
        let mut out = String::from("Notes (facts you recorded this session):\n");
        if self.notes.is_empty() {
            out.push_str("(none yet)");
        }
        for (i, n) in self.notes.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("- ");
            out.push_str(n);
        }
        out
    }

    fn contains_equivalent(&self, note: &str) -> bool {
        let key = dedup_key(note);
        self.notes.iter().any(|n| dedup_key(n) == key)
    }

    /// Compaction's rewrite: keeps the given notes (merged duplicates removed), in order, within the cap.
    pub(crate) fn replace_all(&mut self, notes: Vec<String>, cap: NoteCap) {
        let mut out = NoteBlock::default();
        for n in notes {
            let n = one_line(&n);
            if n.is_empty() || n.len() > cap.max_note_bytes || out.contains_equivalent(&n) {
                continue;
            }
            if out.notes.len() >= cap.max_notes {
                break;
            }
            out.notes.push(n);
        }
        *self = out;
    }
}

/// The key two notes are compared by: lower case, letters and digits only, single spaces.
fn dedup_key(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the note skill did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum NoteOutcome {
    Recorded {
        index: usize,
    },
    /// An equivalent note exists already; nothing was added.
    Duplicate {
        existing: usize,
    },
}

/// The note-taking skill: the only way a fact enters the note block. Recording is a deliberate act
/// with a place in the action history, never a side effect of generation.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoteSkill;

impl NoteSkill {
    /// Records `text` into `notes` and returns the outcome plus the history line that records the act.
    pub fn write(
        notes: &mut NoteBlock,
        cap: NoteCap,
        text: &str,
        now: MonoTime,
    ) -> Result<(NoteOutcome, HistoryEntry), ContextError> {
        let note = one_line(text);
        if dedup_key(&note).is_empty() {
            return Err(ContextError::NoteRejected("the note is empty".into()));
        }
        if note.len() > cap.max_note_bytes {
            return Err(ContextError::NoteRejected(format!(
                "the note is {} bytes, the cap is {}",
                note.len(),
                cap.max_note_bytes
            )));
        }
        let key = dedup_key(&note);
        if let Some(existing) = notes.notes.iter().position(|n| dedup_key(n) == key) {
            let outcome = NoteOutcome::Duplicate { existing };
            let entry = HistoryEntry::new(now, format!("note: {note}"), "duplicate, not added");
            return Ok((outcome, entry));
        }
        if notes.notes.len() >= cap.max_notes {
            return Err(ContextError::NoteRejected(format!(
                "the note block is full ({} notes); facts merge at the next compaction",
                cap.max_notes
            )));
        }
        notes.notes.push(note.clone());
        let index = notes.notes.len() - 1;
        Ok((
            NoteOutcome::Recorded { index },
            HistoryEntry::new(now, format!("note: {note}"), "recorded"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap() -> NoteCap {
        NoteCap {
            max_notes: 3,
            max_note_bytes: 60,
        }
    }

    #[test]
    fn note_is_recorded_and_logged() {
        // FR-CTX-005
        let mut nb = NoteBlock::default();
        let (o, h) = NoteSkill::write(
            &mut nb,
            cap(),
            "The shop is  behind the fountain.",
            MonoTime::ZERO,
        )
        .unwrap();
        assert_eq!(o, NoteOutcome::Recorded { index: 0 });
        assert_eq!(nb.notes(), &["The shop is behind the fountain.".to_string()]);
        assert_eq!(h.action, "note: The shop is behind the fountain.");
    }

    #[test]
    fn near_duplicate_is_not_added() {
        // FR-CTX-005 de-duplication
        let mut nb = NoteBlock::default();
        NoteSkill::write(
            &mut nb,
            cap(),
            "Escape twice returns to the world",
            MonoTime::ZERO,
        )
        .unwrap();
        let (o, _) = NoteSkill::write(
            &mut nb,
            cap(),
            "  escape TWICE returns to the world!",
            MonoTime::ZERO,
        )
        .unwrap();
        assert_eq!(o, NoteOutcome::Duplicate { existing: 0 });
        assert_eq!(nb.len(), 1);
    }

    #[test]
    fn cap_refuses_long_and_excess_notes() {
        // FR-CTX-005 size cap
        let mut nb = NoteBlock::default();
        let long = "x".repeat(61);
        assert!(matches!(
            NoteSkill::write(&mut nb, cap(), &long, MonoTime::ZERO),
            Err(ContextError::NoteRejected(_))
        ));
        for i in 0..3 {
            NoteSkill::write(&mut nb, cap(), &format!("fact number {i}"), MonoTime::ZERO).unwrap();
        }
        let err = NoteSkill::write(&mut nb, cap(), "one fact too many", MonoTime::ZERO).unwrap_err();
        assert!(err.to_string().contains("full"), "{err}");
        assert!(matches!(
            NoteSkill::write(&mut nb, cap(), " ..! ", MonoTime::ZERO),
            Err(ContextError::NoteRejected(_))
        ));
        assert_eq!(nb.len(), 3);
    }
}
