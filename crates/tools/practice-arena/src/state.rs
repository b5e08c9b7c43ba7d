//! The game's true internal state as one JSON object per line (what tests assert the game received).

use crate::game::{Game, PressCount};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Xy<T> {
    pub x: T,
    pub y: T,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Camera {
    pub yaw_deg: f64,
    pub pitch_deg: f64,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Counts {
    pub press: u64,
    pub release: u64,
}

impl From<PressCount> for Counts {
    fn from(p: PressCount) -> Counts {
        Counts {
            press: p.press,
            release: p.release,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Options {
    pub sound: bool,
    pub grid: bool,
    pub invert_pitch: bool,
}

/// One state line. Every field is present in every line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StateLine {
    pub t_ms: u64,
    pub seed: u64,
    pub screen: &'static str,
    /// Keysym names the game believes are down, sorted.
    pub held_keys: Vec<String>,
    /// Real press/release transitions per key (autorepeat excluded).
    pub key_events: BTreeMap<String, Counts>,
    /// Autorepeat presses seen (not counted as presses).
    pub repeats: u64,
    pub buttons_held: Vec<String>,
    /// Raw mouse button transitions ("left", "right", "wheel_up", ...).
    pub button_events: BTreeMap<String, Counts>,
    /// Activations of on-screen buttons, by label ("Play", "Yes", ...).
    pub clicks: BTreeMap<String, u64>,
    /// Clicks on a button that were dropped: no hover first, or a press shorter than the debounce.
    pub dropped_clicks: u64,
    /// The on-screen button under the pointer, by label.
    pub hovered: Option<String>,
    pub player: Xy<f64>,
    pub heading_deg: f64,
    pub camera: Camera,
    pub camera_motion_events: u64,
    pub ignored_jumps: u64,
    pub self_warps: u64,
    pub coins: u64,
    pub gold: u64,
    pub health: f64,
    pub deaths: u64,
    pub purchases: u64,
    pub zone: u32,
    pub zone_coins_left: usize,
    pub scene_changes: u64,
    pub pointer: Xy<i32>,
    pub focused: bool,
    pub options: Options,
    /// Redraw counter: increases only when the picture changes.
    pub frame: u64,
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl StateLine {
    pub fn of(g: &Game, t_ms: u64, frame: u64) -> StateLine {
        let hovered = g
            .hovered()
            .and_then(|id| g.buttons().into_iter().find(|b| b.id == id))
            .map(|b| b.label);
        StateLine {
            t_ms,
            seed: g.seed,
            screen: g.screen.name(),
            held_keys: g.held_keys.iter().cloned().collect(),
            key_events: g
                .key_events
                .iter()
                .map(|(k, v)| (k.clone(), Counts::from(*v)))
                .collect(),
            repeats: g.repeats,
            buttons_held: g.buttons_held.iter().cloned().collect(),
            button_events: g
                .button_events
                .iter()
                .map(|(k, v)| (k.clone(), Counts::from(*v)))
                .collect(),
            clicks: g.clicks.clone(),
            dropped_clicks: g.dropped_clicks,
            hovered,
            player: Xy {
                x: round2(g.player.0),
                y: round2(g.player.1),
            },
            heading_deg: round2(g.heading_deg()),
            camera: Camera {
                yaw_deg: round2(g.yaw_deg),
                pitch_deg: round2(g.pitch_deg),
            },
            camera_motion_events: g.camera_motion_events,
            ignored_jumps: g.ignored_jumps,
            self_warps: g.self_warps,
            coins: g.coins,
            gold: g.gold,
            health: round2(g.health),
            deaths: g.deaths,
            purchases: g.purchases,
            zone: g.zone,
            zone_coins_left: g.coins_left_in_zone(),
            scene_changes: g.scene_changes,
            pointer: Xy {
                x: g.pointer.0,
                y: g.pointer.1,
            },
            focused: g.focused,
            options: Options {
                sound: g.toggles.sound,
                grid: g.toggles.grid,
                invert_pitch: g.toggles.invert_pitch,
            },
            frame,
        }
    }

    /// Equal apart from the time stamp.
    pub fn same_state(&self, other: &StateLine) -> bool {
        let mut a = self.clone();
        a.t_ms = other.t_ms;
        a == *other
    }
}

/// Appends state lines to a file, at most one per `min_interval_ms` unless forced.
pub struct StateWriter {
    path: PathBuf,
    last: Option<StateLine>,
    last_t: Option<u64>,
    min_interval_ms: u64,
}

impl StateWriter {
    pub fn new(path: &Path) -> Result<StateWriter, crate::ArenaError> {
        // Start fresh for this run; the file appears with the first line (so "exists" means "has a line").
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(crate::ArenaError::Io {
                    path: path.display().to_string(),
                    source: e,
                })
            }
        }
        Ok(StateWriter {
            path: path.to_path_buf(),
            last: None,
            last_t: None,
            min_interval_ms: 17,
        })
    }

    /// Write `line` if the state changed and the throttle allows it, or always when `force`.
    /// Returns whether a line was written.
    pub fn offer(&mut self, line: StateLine, force: bool) -> Result<bool, crate::ArenaError> {
        let changed = self.last.as_ref().map(|l| !l.same_state(&line)).unwrap_or(true);
        let due = self
            .last_t
            .map(|t| line.t_ms >= t + self.min_interval_ms)
            .unwrap_or(true);
        if !(force || (changed && due)) {
            return Ok(false);
        }
        let mut text = serde_json::to_string(&line).map_err(|e| crate::ArenaError::Other(e.to_string()))?;
        text.push('\n');
        let io = |e| crate::ArenaError::Io {
            path: self.path.display().to_string(),
            source: e,
        };
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        self.last_t = Some(line.t_ms);
        self.last = Some(line);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::{Event, Screen};

    #[test]
    fn every_field_is_present() {
        let g = Game::new(5, 1280, 720, Screen::Menu);
        let v = serde_json::to_value(StateLine::of(&g, 12, 1)).expect("json");
        for k in [
            "t_ms",
            "screen",
            "held_keys",
            "key_events",
            "buttons_held",
            "clicks",
            "player",
            "heading_deg",
            "camera",
            "camera_motion_events",
            "ignored_jumps",
            "coins",
            "gold",
            "health",
            "zone",
            "scene_changes",
            "pointer",
            "focused",
            "frame",
            "dropped_clicks",
            "repeats",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["screen"], "menu");
        assert_eq!(v["gold"], 250);
    }

    #[test]
    fn writer_throttles_and_skips_unchanged() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "stale\n").expect("stale file");
        let mut w = StateWriter::new(&path).expect("writer");
        assert!(!path.exists(), "no file before the first line");
        let mut g = Game::new(5, 1280, 720, Screen::Play);
        assert!(w.offer(StateLine::of(&g, 0, 1), true).expect("w"));
        assert!(
            !w.offer(StateLine::of(&g, 100, 1), false).expect("w"),
            "unchanged state is not rewritten"
        );
        g.handle(Event::Focus(true), 100.0);
        assert!(!w.offer(StateLine::of(&g, 5, 1), false).expect("w"), "throttled");
        assert!(w.offer(StateLine::of(&g, 120, 1), false).expect("w"));
        assert!(w.offer(StateLine::of(&g, 121, 1), true).expect("w"), "forced");
        let n = std::fs::read_to_string(&path).expect("read").lines().count();
        assert_eq!(n, 3);
    }
}
