//! What the model reads, as the session writes it: the observation text and its bounds, the sensors line, and
//! how an action is named in the history.

use super::*;

/// The observation text the model reads: the frame's health first when it is not ok (FR-PERC-009), then
/// the observation, cut to `max` bytes.
pub fn observation_for_model(text: &str, health: FrameHealth, max: usize) -> String {
    let text = bound_text(text, max);
    if health == FrameHealth::Ok {
        text
    } else {
        format!(
            "frame health: {} — the picture may not show the game's state\n{text}",
            health
        )
    }
}

/// The sensors' line of the model's observation (sensor-expressions.md: the observation's text includes
/// them): each sensor's value now, `undefined` when it has none, and what it was at the previous call when
/// it changed since (`lines = 3 (was 2)`). `None` without sensors.
pub fn sensors_line(now: &[(String, Option<f64>)], before: &[(String, Option<f64>)]) -> Option<String> {
    if now.is_empty() {
        return None;
    }
    let show = |v: Option<f64>| v.map_or_else(|| "undefined".to_string(), |v| format!("{v}"));
    let parts: Vec<String> = now
        .iter()
        .map(|(name, v)| match before.iter().find(|(n, _)| n == name) {
            Some((_, was)) if was != v => format!("{name} = {} (was {})", show(*v), show(*was)),
            _ => format!("{name} = {}", show(*v)),
        })
        .collect();
    Some(format!("Sensors: {}", parts.join(", ")))
}

/// Cut `text` to at most `max` bytes on a character boundary, saying how much was left out.
pub fn bound_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max.saturating_sub(64).min(text.len());
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let line_end = text[..cut].rfind('\n').filter(|&i| i > cut / 2).unwrap_or(cut);
    format!(
        "{}\n(… {} more bytes of observation left out)",
        &text[..line_end],
        text.len() - line_end
    )
}

/// How an action the session takes is named in the history the model reads (and in the loop's cycle
/// keys): the action as the executor runs it, in JSON, and for a click what it landed on by its label —
/// the clicked mark, or else the smallest labelled element under the point. "click at 77,14 ->
/// confirmed" does not tell a model that the Type menu is open now; `on "Type"` does (measured with
/// `gamepilot eval --corpus corpus/goals.json`, docs/eval.md).
pub(crate) fn action_label(action: &Action, mark: Option<ElementId>, on: &Observation) -> String {
    let json = serde_json::to_string(action).unwrap_or_default();
    let (Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. }) = action else {
        return json;
    };
    let label = mark
        .and_then(|m| on.element(m))
        .or_else(|| on.labelled_at(Point::new(*x, *y)))
        .and_then(|e| e.label.as_deref())
        .map(|l| l.replace('"', "'"));
    match label {
        Some(l) => format!("{json} on \"{}\"", l.chars().take(40).collect::<String>()),
        None => json,
    }
}
