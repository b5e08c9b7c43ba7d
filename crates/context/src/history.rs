//! Action history and past observations, both as text only (FR-CTX-003): no image is ever retained.

use gamepilot_core::MonoTime;
use serde::Serialize;

/// One line of the recent action history: what was done and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    pub at: MonoTime,
    /// The action as text, typically its JSON (`{"action":"key","key":"Return"}`) or a skill call.
    pub action: String,
    /// The verification verdict or outcome as text (`confirmed`, `refuted: no change`, `inconclusive`).
    pub outcome: String,
}

impl HistoryEntry {
    pub fn new(at: MonoTime, action: impl Into<String>, outcome: impl Into<String>) -> Self {
        HistoryEntry {
            at,
            action: one_line(&action.into()),
            outcome: one_line(&outcome.into()),
        }
    }

    /// `t+12.345s {"action":..} -> confirmed`, time relative to the session start.
    pub fn render(&self, session_start: MonoTime) -> String {
        let ms = self.at.as_millis().saturating_sub(session_start.as_millis());
        format!(
            "t+{}.{:03}s {} -> {}",
            ms / 1000,
            ms % 1000,
            self.action,
            self.outcome
        )
    }
}

/// An observation in its text form (marks, OCR text, sensor values), kept after its tick as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObservationText {
    pub at: MonoTime,
    pub text: String,
}

impl ObservationText {
    pub fn new(at: MonoTime, text: impl Into<String>) -> Self {
        ObservationText {
            at,
            text: text.into(),
        }
    }
}

/// Collapses a string to one line (history lines must not be able to forge block structure).
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_renders_relative_time_on_one_line() {
        // FR-CTX-003: history as text
        let e = HistoryEntry::new(
            MonoTime::from_millis(13_250),
            "{\"action\":\"key\",\n\"key\":\"Return\"}",
            "confirmed",
        );
        assert_eq!(
            e.render(MonoTime::from_millis(1_000)),
            "t+12.250s {\"action\":\"key\", \"key\":\"Return\"} -> confirmed"
        );
    }
}
