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

    /// `click_mark mark=12 -> confirmed`: the action in [`brief_action`]'s words, for the tactical
    /// tail, where every token is evaluated anew on each call.
    pub fn brief(&self) -> String {
        format!("{} -> {}", brief_action(&self.action), self.outcome)
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

/// A tool call's JSON (`{"action":"hold_key","key":"d","duration_ms":300}`) in fewer tokens:
/// `hold_key duration_ms=300 key=d` — the tool's name, then each other field as `name=value` (a
/// string bare when it is one word without quotes or `=`, else quoted as JSON). Anything else (a
/// skill call written as text, JSON without an `action` name) is returned unchanged; words after the
/// JSON (what a click landed on: `on "Type"`) follow it.
pub fn brief_action(action: &str) -> String {
    let mut stream = serde_json::Deserializer::from_str(action).into_iter::<serde_json::Value>();
    let Some(Ok(serde_json::Value::Object(fields))) = stream.next() else {
        return action.to_string();
    };
    let after = action.get(stream.byte_offset()..).unwrap_or("").trim();
    let Some(serde_json::Value::String(name)) = fields.get("action") else {
        return action.to_string();
    };
    let mut out = name.clone();
    for (key, value) in fields.iter().filter(|(k, _)| k.as_str() != "action") {
        let text = match value {
            serde_json::Value::String(s)
                if !s.is_empty()
                    && !s
                        .chars()
                        .any(|c| c.is_whitespace() || matches!(c, '"' | '=' | '\\')) =>
            {
                s.clone()
            }
            other => other.to_string(),
        };
        out.push_str(&format!(" {key}={text}"));
    }
    if !after.is_empty() {
        out.push(' ');
        out.push_str(after);
    }
    one_line(&out)
}

/// Collapses a string to one line (history lines must not be able to forge block structure).
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_is_told_briefly_and_anything_else_unchanged() {
        // FR-CTX-002: the tail's action lines cost fewer tokens than the JSON
        let e = HistoryEntry::new(
            MonoTime::from_millis(0),
            r#"{"action":"hold_key","key":"d","duration_ms":300}"#,
            "confirmed",
        );
        assert_eq!(e.brief(), "hold_key duration_ms=300 key=d -> confirmed");
        assert_eq!(
            brief_action(r#"{"action":"note","text":"the shop is north"}"#),
            r#"note text="the shop is north""#
        );
        assert_eq!(
            brief_action(r#"{"action":"click","x":77,"y":14,"button":"left"} on "Type""#),
            r#"click button=left x=77 y=14 on "Type""#
        );
        assert_eq!(
            brief_action(r#"{"action":"key","key":"a=b"}"#),
            r#"key key="a=b""#
        );
        assert_eq!(
            brief_action("research(\"how to jump\")"),
            "research(\"how to jump\")"
        );
        assert_eq!(brief_action(r#"{"mark":3}"#), r#"{"mark":3}"#);
    }

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
