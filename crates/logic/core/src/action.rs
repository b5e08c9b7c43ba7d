//! The action vocabulary (FR-ACT-002) in the JSON shape the model emits and `gamepilot act` reads, and the
//! low-level input events the executor hands to the single input sink (FR-ACT-008).
//!
//! Instantaneous actions (click, double click, key tap, type, scroll) and sustained intentions with a
//! duration (hold key, hold button, camera turn, pointer move, wait). Every intention carries the subgoal
//! that owns it (INV-LOOP-002). Coordinates are window capture-space pixels; they reach the screen only
//! through the transform chain (INV-GND-002).

use crate::ids::SubgoalId;
use crate::keys::Keysym;
use crate::transform::ScreenPoint;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A mouse button by name (`"left"`, `"middle"`, `"right"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseButton {
    #[default]
    Left,
    Middle,
    Right,
}

impl MouseButton {
    /// The X button number (1 left, 2 middle, 3 right).
    pub fn x_button(self) -> u8 {
        match self {
            MouseButton::Left => 1,
            MouseButton::Middle => 2,
            MouseButton::Right => 3,
        }
    }
}

/// An angle in degrees. Equality is bitwise so that actions stay `Eq` (an angle is compared, never
/// computed with, in the vocabulary; the executor converts it).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Degrees(pub f64);

impl PartialEq for Degrees {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Degrees {}

impl fmt::Display for Degrees {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}°", self.0)
    }
}

impl Action {
    /// True for actions that move the pointer to a capture-space point: they are grounded in one
    /// transform-chain generation and become wrong when the window moves (FR-PERC-002).
    pub fn is_pointer_positioned(&self) -> bool {
        match self {
            Action::Click { .. } | Action::DoubleClick { .. } | Action::MovePointer { .. } => true,
            Action::Scroll { x, y, .. } | Action::HoldButton { x, y, .. } => x.is_some() && y.is_some(),
            _ => false,
        }
    }
}

/// One action as the model emits it. `x`/`y` are capture-space pixels of the target window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Move the pointer to (x, y) along a path and click.
    Click {
        x: i32,
        y: i32,
        #[serde(default)]
        button: MouseButton,
    },
    /// Move the pointer to (x, y) along a path and click twice.
    DoubleClick {
        x: i32,
        y: i32,
        #[serde(default)]
        button: MouseButton,
    },
    /// Tap a key or chord (`"Return"`, `"ctrl+s"`).
    Key { key: String },
    /// Type text, one key tap per character.
    Type { text: String },
    /// Scroll by `amount` notches (positive down/right), optionally after moving to (x, y).
    Scroll {
        #[serde(default)]
        x: Option<i32>,
        #[serde(default)]
        y: Option<i32>,
        #[serde(default)]
        dy: i32,
        #[serde(default)]
        dx: i32,
    },
    /// Hold a key or chord; `duration_ms` absent means until cancelled (bounded by the max hold).
    HoldKey {
        key: String,
        #[serde(default)]
        duration_ms: Option<u64>,
    },
    /// Hold a mouse button, optionally after moving to (x, y).
    HoldButton {
        #[serde(default)]
        button: MouseButton,
        #[serde(default)]
        duration_ms: Option<u64>,
        #[serde(default)]
        x: Option<i32>,
        #[serde(default)]
        y: Option<i32>,
    },
    /// Turn the camera by (dx, dy) relative pointer units, spread over `duration_ms` (FR-ACT-004).
    Camera { dx: i32, dy: i32, duration_ms: u64 },
    /// Turn the camera by an angle (positive yaw: right, positive pitch: down), spread over `duration_ms`.
    /// The executor converts it into relative counts with the session's camera calibration and refuses
    /// it when there is none (FR-ACT-004, ADR-0035 "Neutral").
    CameraDegrees {
        yaw_deg: Degrees,
        #[serde(default)]
        pitch_deg: Degrees,
        duration_ms: u64,
    },
    /// Move the pointer to (x, y) along a path with a non-uniform velocity profile (FR-ACT-005).
    MovePointer {
        x: i32,
        y: i32,
        #[serde(default)]
        duration_ms: Option<u64>,
    },
    /// Do nothing for `duration_ms` (holds the next script line back).
    Wait { duration_ms: u64 },
    /// Steer the avatar with four direction keys for at most `duration_ms` (the `move_to` skill):
    /// the executor holds, each tick, whichever of these keys the reflex's steering controller
    /// wants, never any other, and ends the action when the controller says it arrived or gave up.
    Steer {
        up: String,
        down: String,
        left: String,
        right: String,
        duration_ms: u64,
    },
}

impl Action {
    /// The action's name as it appears in JSON (`"hold_key"`).
    pub fn name(&self) -> &'static str {
        match self {
            Action::Click { .. } => "click",
            Action::DoubleClick { .. } => "double_click",
            Action::Key { .. } => "key",
            Action::Type { .. } => "type",
            Action::Scroll { .. } => "scroll",
            Action::HoldKey { .. } => "hold_key",
            Action::HoldButton { .. } => "hold_button",
            Action::Camera { .. } => "camera",
            Action::CameraDegrees { .. } => "camera_degrees",
            Action::MovePointer { .. } => "move_pointer",
            Action::Wait { .. } => "wait",
            Action::Steer { .. } => "steer",
        }
    }

    /// True for intentions with a duration that the executor steps across ticks.
    pub fn is_sustained(&self) -> bool {
        matches!(
            self,
            Action::HoldKey { .. }
                | Action::HoldButton { .. }
                | Action::Camera { .. }
                | Action::CameraDegrees { .. }
                | Action::MovePointer { .. }
                | Action::Wait { .. }
                | Action::Steer { .. }
        )
    }
}

/// An action together with the subgoal that owns it (INV-LOOP-002). In JSON the owner is an optional
/// `"subgoal"` field beside the action's own fields (default 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intention {
    #[serde(flatten)]
    pub action: Action,
    #[serde(default)]
    pub subgoal: SubgoalId,
}

impl Intention {
    pub fn new(action: Action, subgoal: SubgoalId) -> Self {
        Intention { action, subgoal }
    }
}

/// One synthesised input event, as the executor emits it and the input sink delivers it.
/// Absolute pointer positions are `ScreenPoint`s, which only the transform chain can make (INV-GND-002).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputEvent {
    Key {
        sym: Keysym,
        down: bool,
    },
    Button {
        button: u8,
        down: bool,
    },
    /// A relative pointer movement (camera control, FR-ACT-004).
    MotionRelative {
        dx: i32,
        dy: i32,
    },
    /// An absolute pointer movement to a point the transform chain produced.
    MotionTo(ScreenPoint),
}

impl InputEvent {
    /// True for a key or button release (always allowed through every budget).
    pub fn is_release(&self) -> bool {
        matches!(
            self,
            InputEvent::Key { down: false, .. } | InputEvent::Button { down: false, .. }
        )
    }
}

impl fmt::Display for InputEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputEvent::Key { sym, down } => write!(f, "key {} {}", sym, if *down { "down" } else { "up" }),
            InputEvent::Button { button, down } => {
                write!(f, "button {} {}", button, if *down { "down" } else { "up" })
            }
            InputEvent::MotionRelative { dx, dy } => write!(f, "move by ({dx}, {dy})"),
            InputEvent::MotionTo(p) => write!(f, "move to ({}, {})", p.x(), p.y()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_json(s: &str) -> Result<Intention, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn parses_the_issue_examples() {
        // FR-ACT-002
        let cases = [
            (
                r#"{"action":"hold_key","key":"w","duration_ms":1500}"#,
                "hold_key",
            ),
            (r#"{"action":"key","key":"Return"}"#, "key"),
            (r#"{"action":"click","x":120,"y":80}"#, "click"),
            (r#"{"action":"click","x":120,"y":80,"button":"right"}"#, "click"),
            (
                r#"{"action":"hold_button","button":"left","duration_ms":500}"#,
                "hold_button",
            ),
            (
                r#"{"action":"camera","dx":300,"dy":-40,"duration_ms":400}"#,
                "camera",
            ),
            (r#"{"action":"type","text":"hello"}"#, "type"),
            (r#"{"action":"wait","duration_ms":500}"#, "wait"),
            (r#"{"action":"scroll","dy":3}"#, "scroll"),
            (r#"{"action":"double_click","x":1,"y":2}"#, "double_click"),
            (r#"{"action":"move_pointer","x":1,"y":2}"#, "move_pointer"),
            (
                r#"{"action":"camera_degrees","yaw_deg":12.5,"duration_ms":400}"#,
                "camera_degrees",
            ),
        ];
        for (line, name) in cases {
            let i = from_json(line).unwrap();
            assert_eq!(i.action.name(), name);
            assert_eq!(i.subgoal, SubgoalId(0));
        }
        let i = from_json(r#"{"action":"click","x":120,"y":80,"button":"right","subgoal":4}"#).unwrap();
        assert_eq!(
            i.action,
            Action::Click {
                x: 120,
                y: 80,
                button: MouseButton::Right
            }
        );
        assert_eq!(i.subgoal, SubgoalId(4));
    }

    #[test]
    fn round_trips_and_rejects_bad_lines() {
        let i = Intention::new(
            Action::Camera {
                dx: 300,
                dy: -40,
                duration_ms: 400,
            },
            SubgoalId(2),
        );
        let s = serde_json::to_string(&i).unwrap();
        assert!(s.contains(r#""action":"camera""#), "{s}");
        assert_eq!(from_json(&s).unwrap(), i);
        assert!(from_json(r#"{"action":"teleport"}"#).is_err());
        assert!(from_json(r#"{"action":"hold_key"}"#).is_err());
        assert!(from_json("not json").is_err());
    }

    #[test]
    fn sustained_and_instant_are_distinguished() {
        // FR-ACT-002
        assert!(Action::HoldKey {
            key: "w".into(),
            duration_ms: Some(10)
        }
        .is_sustained());
        assert!(!Action::Key { key: "w".into() }.is_sustained());
        assert!(!Action::Click {
            x: 0,
            y: 0,
            button: MouseButton::Left
        }
        .is_sustained());
        assert_eq!(MouseButton::Right.x_button(), 3);
    }
}
