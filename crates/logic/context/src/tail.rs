//! The tactical prompt's append-only tail (FR-CTX-001, FR-CTX-002): between two
//! baselines each tactical prompt is the previous one with lines appended, so the host's prefix cache
//! serves everything but the new lines.
//!
//! A baseline is the ordinary layout: history in block 6, the full current observation in block 7. On
//! later ticks the blocks to its left stay as they were rendered, and block 7 grows a "Since then"
//! section: the actions recorded since (with their outcomes) and, per tick, only the listing lines that
//! changed from what the model was last told. A new baseline is drawn when anything to the left changed
//! (the cache breaks there anyway), the scene's frame line changed, or the tail outgrew its bound.

use serde::{Deserialize, Serialize};

/// Position changes of at most this many pixels on each axis are perception jitter, not news.
pub const JITTER_PX: i64 = 3;

/// What one tactical prompt was made of, kept so that the next one can extend it. Recorded with the
/// tick's outcome (it is the state of the host's cache, not a memory of the agent's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TacticalTail {
    /// Blocks 2–6 of the user message as the baseline rendered them.
    pub(crate) left: Vec<String>,
    /// History entries block 6 covers (those after it are told in the tail).
    pub(crate) history_in_left: usize,
    /// History entries told so far, in block 6 or the tail.
    pub(crate) history_told: usize,
    /// Block 7 as last sent.
    pub(crate) body: String,
    /// The frame size at the baseline (`1280x720`).
    pub(crate) frame_size: String,
    /// What the model was last told, line by line, keyed as [`line_key`] keys them.
    pub(crate) believed: Vec<(String, String)>,
    /// Bytes the tail added to the baseline's block 7.
    pub(crate) tail_bytes: usize,
}

impl TacticalTail {
    /// True when this tail's prompt began a new baseline.
    pub fn is_baseline(&self) -> bool {
        self.tail_bytes == 0
    }

    /// Bytes appended to the baseline so far.
    pub fn tail_bytes(&self) -> usize {
        self.tail_bytes
    }
}

/// The key a listing line is compared under: a mark's `[N]`, a screen text's quoted text, or the
/// kind of a summary line; any other line is its own key.
pub(crate) fn line_key(line: &str) -> String {
    if line.starts_with('[') {
        if let Some(end) = line.find(']') {
            return line[..=end].to_string();
        }
    }
    if let Some(rest) = line.strip_prefix("text ") {
        if let Some(at) = rest.rfind(" at ") {
            return format!("text {}", &rest[..at]);
        }
    }
    if line.starts_with('(') && line.contains("more elements not listed") {
        return "(more".into();
    }
    if line.starts_with("frame health:") {
        return "frame health".into();
    }
    if is_frame_line(line) {
        return "frame".into();
    }
    line.to_string()
}

/// The listing lines of an observation text, keyed.
pub(crate) fn keyed_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| (line_key(l), l.to_string()))
        .collect()
}

pub(crate) fn is_frame_line(line: &str) -> bool {
    line.starts_with("frame ") && !line.starts_with("frame health")
}

/// The frame size its frame line (`frame 1280x720 (motion)`) states, empty when it has none.
pub(crate) fn frame_size(text: &str) -> String {
    let line = text.lines().find(|l| is_frame_line(l)).unwrap_or("");
    line.split_whitespace().nth(1).unwrap_or("").to_string()
}

/// True when the frame classifier called this frame a scene change: most of what the model was told
/// no longer holds, so the news would be the whole listing.
pub(crate) fn is_scene_change(text: &str) -> bool {
    text.lines()
        .any(|l| is_frame_line(l) && l.trim_end().ends_with("(scene)"))
}

/// Splits `… at X,Y` into the text before ` at ` and the point.
fn split_place(line: &str) -> Option<(&str, i64, i64)> {
    let at = line.rfind(" at ")?;
    let place = line[at + 4..].split_whitespace().next()?;
    let (x, y) = place.split_once(',')?;
    Some((&line[..at], x.parse().ok()?, y.parse().ok()?))
}

/// One tick's news: for each line that differs from what the model believes, the shortest true
/// statement of it (`[14] now at 660,363`, the whole new line, or `[21] no longer listed`). Updates
/// `believed` to what the model will know after reading it.
pub(crate) fn changes(believed: &mut Vec<(String, String)>, now: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    // How many elements went unlisted is a hint that flickers with every tracked id: never news.
    let now: Vec<&(String, String)> = now.iter().filter(|(k, _)| k != "(more").collect();
    for (key, line) in now.iter().copied() {
        match believed.iter_mut().find(|(k, _)| k == key) {
            // What the model believes stays, a few pixels of position aside.
            Some((_, old)) if same_but_jitter(old, line) => {}
            Some((_, old)) => match (split_place(old), split_place(line)) {
                (Some((a, _, _)), Some((b, bx, by))) if a == b => {
                    out.push(format!("{key} now at {bx},{by}"));
                    *old = line.clone();
                }
                _ => {
                    out.push(line.clone());
                    *old = line.clone();
                }
            },
            None => {
                out.push(line.clone());
                believed.push((key.clone(), line.clone()));
            }
        }
    }
    believed.retain(|(key, _)| {
        let kept = now.iter().any(|(k, _)| k == key);
        if !kept {
            if key == "(more" {
                return true;
            }
            out.push(if key.starts_with('[') {
                format!("{key} no longer listed")
            } else {
                format!("{key} gone")
            });
        }
        kept
    });
    out
}

/// An earlier observation told against the current one, for a prompt that shows both: `None` when the
/// listing was the same (jitter aside), else the earlier lines that differ from or are missing in the
/// current one, then one line naming what the current one lists and the earlier did not. The prompt
/// carries the current listing whole, so this is what a reader needs to know the earlier one, at a
/// fraction of its tokens.
pub(crate) fn earlier_against(earlier: &str, current: &str) -> Option<Vec<String>> {
    // One sensors line a frame: its values are what differs, not the line.
    let listed = |text: &str| -> Vec<(String, String)> {
        keyed_lines(text)
            .into_iter()
            .filter(|(k, _)| k != "(more")
            .map(|(k, l)| match l.starts_with("Sensors:") {
                true => ("Sensors:".to_string(), l),
                false => (k, l),
            })
            .collect()
    };
    let (then, now) = (listed(earlier), listed(current));
    let mut out: Vec<String> = then
        .iter()
        .filter(|(key, line)| match now.iter().find(|(k, _)| k == key) {
            None => true,
            Some((_, current)) => !same_but_jitter(line, current),
        })
        .map(|(_, line)| line.clone())
        .collect();
    let new: Vec<&str> = now
        .iter()
        .filter(|(key, _)| !then.iter().any(|(k, _)| k == key))
        .map(|(key, _)| key.as_str())
        .collect();
    if !new.is_empty() {
        out.push(format!("not listed then: {}", new.join(", ")));
    }
    (!out.is_empty()).then_some(out)
}

/// Two lines of one key that say the same, a few pixels of position aside.
fn same_but_jitter(a: &str, b: &str) -> bool {
    a == b
        || match (split_place(a), split_place(b)) {
            (Some((a, ax, ay)), Some((b, bx, by))) => {
                a == b && (ax - bx).abs() <= JITTER_PX && (ay - by).abs() <= JITTER_PX
            }
            _ => false,
        }
}

/// The listing as it stands after a prompt's tail: the last `Current observation` block's lines with
/// every `seen:` item applied in order — what a reader of the prompt knows of the current frame. The
/// inverse of what [`changes`] appends (jitter aside), for readers of prompts such as scripted hosts.
pub fn current_listing(prompt: &str) -> Vec<String> {
    let block = prompt.rsplit("Current observation").next().unwrap_or(prompt);
    let (listing, tail) = block
        .split_once("\nSince then (oldest first):")
        .unwrap_or((block, ""));
    let mut lines: Vec<(String, String)> = keyed_lines(listing.split_once('\n').map_or("", |(_, l)| l));
    for item in tail
        .lines()
        .filter_map(|l| l.strip_prefix("- seen: "))
        .flat_map(|l| l.split("; "))
    {
        let key = line_key(item);
        if let Some(gone) = item
            .strip_suffix(" no longer listed")
            .or_else(|| item.strip_suffix(" gone"))
        {
            lines.retain(|(k, _)| k != gone);
        } else if let Some(place) = item.strip_prefix(&format!("{key} now at ")) {
            if let Some((_, line)) = lines.iter_mut().find(|(k, _)| *k == key) {
                if let Some(at) = line.rfind(" at ") {
                    line.replace_range(at + 4.., place);
                }
            }
        } else if let Some((_, line)) = lines.iter_mut().find(|(k, _)| *k == key) {
            *line = item.to_string();
        } else {
            lines.push((key, item.to_string()));
        }
    }
    lines.into_iter().map(|(_, l)| l).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(s: &str) -> Vec<(String, String)> {
        keyed_lines(s)
    }

    #[test]
    fn keys_marks_texts_and_summary_lines() {
        assert_eq!(line_key("[14] component white square at 641,363"), "[14]");
        assert_eq!(line_key("text \"Score 10\" at 40,12"), "text \"Score 10\"");
        assert_eq!(line_key("(4 more elements not listed)"), "(more");
        assert_eq!(line_key("frame health: frozen — x"), "frame health");
        assert!(is_frame_line("frame 1280x720 (scene)"));
        assert_eq!(line_key("frame 1280x720 (motion)"), "frame");
        assert_eq!(frame_size("frame 1280x720 (motion)\n[1] x at 1,1"), "1280x720");
        assert!(is_scene_change("frame 1280x720 (scene)\n"));
        assert!(!is_scene_change("frame 1280x720 (motion)\n"));
        assert!(!is_frame_line("frame health: frozen"));
    }

    #[test]
    fn jitter_is_not_news_and_a_move_is_said_in_few_words() {
        // FR-CTX-002: only what changed is appended
        let mut believed =
            keyed("frame 10x10 (scene)\n[1] button \"Play\" at 100,100\n[2] component red shape at 50,50\n");
        let now =
            keyed("frame 10x10 (scene)\n[1] button \"Play\" at 102,99\n[2] component red shape at 80,50\n");
        assert_eq!(changes(&mut believed, &now), vec!["[2] now at 80,50".to_string()]);
        // What the model believes moved with it: the same frame again is no news.
        assert!(changes(&mut believed, &now).is_empty());
    }

    #[test]
    fn new_changed_and_vanished_lines_are_told() {
        let mut believed = keyed("[1] button \"Play\" at 100,100\n[2] component red shape at 50,50\n(3 more elements not listed)\n");
        let now = keyed("[1] button \"Pause\" at 100,100\n[5] component yellow round at 9,9\n");
        assert_eq!(
            changes(&mut believed, &now),
            vec![
                "[1] button \"Pause\" at 100,100".to_string(),
                "[5] component yellow round at 9,9".to_string(),
                "[2] no longer listed".to_string(),
            ]
        );
        // The unlisted count stays as first told: it is no news either way.
        let (more, rest): (Vec<_>, Vec<_>) = believed.iter().cloned().partition(|(k, _)| k == "(more");
        assert_eq!(rest, now);
        assert_eq!(more.len(), 1);
    }

    #[test]
    fn an_earlier_observation_is_told_by_what_differs_from_the_current() {
        // FR-CTX-003: earlier observations stay text, at the cost of what changed only
        let current = "frame 10x10 (local)\n[1] button \"Play\" at 100,100\n[5] text \"Quit\" at 9,9\n(3 more elements not listed)\nSensors: lives = 3\n";
        assert_eq!(
            earlier_against(
                "frame 10x10 (local)\n[1] button \"Play\" at 101,98\n[5] text \"Quit\" at 9,9\n(4 more elements not listed)\nSensors: lives = 3\n",
                current
            ),
            None
        );
        assert_eq!(
            earlier_against(
                "frame 10x10 (scene)\n[1] button \"Play\" at 100,100\n[2] component red shape at 50,50\nSensors: lives = 4\n",
                current
            ),
            Some(vec![
                "frame 10x10 (scene)".to_string(),
                "[2] component red shape at 50,50".to_string(),
                "Sensors: lives = 4".to_string(),
                "not listed then: [5]".to_string(),
            ])
        );
    }
}
