//! The tactical reply's JSON Schema, rebuilt every tick from the tool schemas, the marks present now
//! and the capture size (FR-MODEL-003, FR-GND-003): `mark` is an enum of the present ids and
//! coordinates are bounded by the capture, so an absent mark or an off-window click cannot be
//! expressed. The shapes are those of `gamepilot_core::action::Action` plus `click_mark` and `note`.

use crate::ContextError;
use gamepilot_core::action::{Action, MouseButton};
use gamepilot_core::{CoordSpace, ElementId, Point, Size};
use serde_json::{json, Map, Value};

/// One tool the model may call in a tactical reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    ClickMark,
    Click,
    DoubleClick,
    MovePointer,
    Key,
    Type,
    Scroll,
    HoldKey,
    HoldButton,
    Camera,
    /// The camera turned by an angle; offered instead of `Camera` once the session has measured the camera
    /// (`run --calibrate-camera`, FR-ACT-004).
    CameraDegrees,
    Wait,
    Note,
    /// Walk the avatar to a marked element: the reflex steers with the direction keys self-identification
    /// learned; offered only once the session knows its avatar.
    MoveTo,
    /// The model cannot tell which element gets the goal done: the session explores the screen itself
    /// (tries the likely elements, notes what each does, comes back).
    Unsure,
}

impl Tool {
    pub const ALL: [Tool; 15] = [
        Tool::ClickMark,
        Tool::Click,
        Tool::DoubleClick,
        Tool::MovePointer,
        Tool::Key,
        Tool::Type,
        Tool::Scroll,
        Tool::HoldKey,
        Tool::HoldButton,
        Tool::Camera,
        Tool::CameraDegrees,
        Tool::Wait,
        Tool::Note,
        Tool::MoveTo,
        Tool::Unsure,
    ];

    /// The `action` value in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Tool::ClickMark => "click_mark",
            Tool::Click => "click",
            Tool::DoubleClick => "double_click",
            Tool::MovePointer => "move_pointer",
            Tool::Key => "key",
            Tool::Type => "type",
            Tool::Scroll => "scroll",
            Tool::HoldKey => "hold_key",
            Tool::HoldButton => "hold_button",
            Tool::Camera => "camera",
            Tool::CameraDegrees => "camera_degrees",
            Tool::Wait => "wait",
            Tool::Note => "note",
            Tool::MoveTo => "move_to",
            Tool::Unsure => "unsure",
        }
    }

    /// The tool's shape and meaning, as block 1 states it (no per-tick values: it must stay invariant).
    pub fn describe(self) -> &'static str {
        match self {
            Tool::ClickMark => {
                "{\"action\":\"click_mark\",\"mark\":N} click the centre of the element marked N (only marks listed in the observation exist)"
            }
            Tool::Click => "{\"action\":\"click\",\"x\":X,\"y\":Y,\"button\":\"left|middle|right\"} click at window pixel (X, Y)",
            Tool::DoubleClick => "{\"action\":\"double_click\",\"x\":X,\"y\":Y} double-click at window pixel (X, Y)",
            Tool::MovePointer => "{\"action\":\"move_pointer\",\"x\":X,\"y\":Y} move the pointer to window pixel (X, Y)",
            Tool::Key => "{\"action\":\"key\",\"key\":\"Return\"} tap a key or chord such as \"ctrl+s\"",
            Tool::Type => "{\"action\":\"type\",\"text\":\"...\"} type text",
            Tool::Scroll => "{\"action\":\"scroll\",\"dy\":N} scroll N notches (positive is down)",
            Tool::HoldKey => "{\"action\":\"hold_key\",\"key\":\"w\",\"duration_ms\":1500} hold a key for a while",
            Tool::HoldButton => "{\"action\":\"hold_button\",\"button\":\"left\",\"duration_ms\":500} hold a mouse button",
            Tool::Camera => "{\"action\":\"camera\",\"dx\":DX,\"dy\":DY,\"duration_ms\":400} turn the camera by a relative amount",
            Tool::CameraDegrees => {
                "{\"action\":\"camera_degrees\",\"yaw_deg\":30,\"pitch_deg\":0,\"duration_ms\":400} turn the camera by an angle in degrees (positive yaw: right, positive pitch: down)"
            }
            Tool::Wait => "{\"action\":\"wait\",\"duration_ms\":500} do nothing for a while",
            Tool::Note => "{\"action\":\"note\",\"text\":\"...\"} record a fact you worked out into your notes",
            Tool::MoveTo => "{\"action\":\"move_to\",\"mark\":N} walk your avatar to the element marked N (the agent steers it there with the direction keys)",
            Tool::Unsure => "{\"action\":\"unsure\"} you cannot tell which element gets the goal done: the agent tries the likely ones itself, notes what each does and comes back",
        }
    }
}

/// An ordered, duplicate-free set of tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSet {
    tools: Vec<Tool>,
}

impl ToolSet {
    pub fn new(tools: &[Tool]) -> Result<Self, ContextError> {
        let mut v: Vec<Tool> = Vec::new();
        for t in tools {
            if !v.contains(t) {
                v.push(*t);
            }
        }
        if v.is_empty() {
            return Err(ContextError::NoTools);
        }
        Ok(ToolSet { tools: v })
    }

    /// Every tool.
    pub fn all() -> Self {
        ToolSet {
            tools: Tool::ALL.to_vec(),
        }
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Block 1's description of the tools, one line each, in set order.
    pub fn describe(&self) -> String {
        self.tools
            .iter()
            .map(|t| format!("- {}", t.describe()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Bounds on values the schema admits. From the user's configuration (INV-SAFE-001: never a model's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Longest hold, wait or pointer move (decisions.md: max hold 10 s).
    pub max_duration_ms: u64,
    pub max_text_chars: u32,
    pub max_key_chars: u32,
    pub max_camera_delta: i32,
    /// The largest camera turn in degrees one action may ask for (yaw; pitch is at most half of it).
    pub max_camera_degrees: i32,
    pub max_scroll: i32,
    pub max_note_chars: u32,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_duration_ms: 10_000,
            max_text_chars: 200,
            max_key_chars: 32,
            max_camera_delta: 2000,
            max_camera_degrees: 180,
            max_scroll: 20,
            max_note_chars: 240,
        }
    }
}

/// The tactical reply schema for this tick: one object, `anyOf` one variant per tool, each closed
/// (`additionalProperties: false`). `click_mark` is present only when marks are (an empty enum would be
/// an unsatisfiable branch). Marks are de-duplicated and sorted so the schema is deterministic.
pub fn tactical_schema(
    tools: &ToolSet,
    marks: &[ElementId],
    capture: Size,
    limits: &SchemaLimits,
) -> Result<Value, ContextError> {
    tactical_schema_in(tools, marks, &CoordSpace::capture(capture), limits)
}

/// [`tactical_schema`] with coordinates in the model's convention: pixels of the sent image,
/// 0–1000, or fractions 0–1 (numbers), bounded by that space.
pub fn tactical_schema_in(
    tools: &ToolSet,
    marks: &[ElementId],
    space: &CoordSpace,
    limits: &SchemaLimits,
) -> Result<Value, ContextError> {
    tactical_schema_with_targets(tools, marks, marks, space, limits)
}

/// [`tactical_schema_in`] where `move_to` may name only `targets` (places in the world: not the HUD,
/// not the avatar itself); no `move_to` branch when there is none.
pub fn tactical_schema_with_targets(
    tools: &ToolSet,
    marks: &[ElementId],
    targets: &[ElementId],
    space: &CoordSpace,
    limits: &SchemaLimits,
) -> Result<Value, ContextError> {
    let capture = space.capture;
    if capture.w == 0 || capture.h == 0 || space.image.w == 0 || space.image.h == 0 {
        return Err(ContextError::EmptyCapture {
            w: capture.w.min(space.image.w),
            h: capture.h.min(space.image.h),
        });
    }
    let mut ids: Vec<u32> = marks.iter().map(|m| m.0).collect();
    ids.sort_unstable();
    ids.dedup();

    let (max_x, max_y, integer) = space.range();
    let coord = |max: f64| {
        if integer {
            json!({"type": "integer", "minimum": 0, "maximum": max as i64})
        } else {
            json!({"type": "number", "minimum": 0, "maximum": max})
        }
    };
    let x = coord(max_x);
    let y = coord(max_y);
    let button = json!({"type": "string", "enum": ["left", "middle", "right"]});
    let duration = json!({"type": "integer", "minimum": 1, "maximum": limits.max_duration_ms});
    let key = json!({"type": "string", "minLength": 1, "maxLength": limits.max_key_chars});
    let delta =
        json!({"type": "integer", "minimum": -limits.max_camera_delta, "maximum": limits.max_camera_delta});
    let yaw = json!({"type": "number", "minimum": -limits.max_camera_degrees, "maximum": limits.max_camera_degrees});
    let pitch = json!({"type": "number", "minimum": -limits.max_camera_degrees / 2, "maximum": limits.max_camera_degrees / 2});
    let scroll = json!({"type": "integer", "minimum": -limits.max_scroll, "maximum": limits.max_scroll});

    let mut variants = Vec::new();
    for tool in tools.tools() {
        let (props, required): (Vec<(&str, Value)>, Vec<&str>) = match tool {
            Tool::ClickMark => {
                if ids.is_empty() {
                    continue;
                }
                (
                    vec![("mark", json!({"type": "integer", "enum": ids}))],
                    vec!["mark"],
                )
            }
            Tool::MoveTo => {
                let mut to: Vec<u32> = targets.iter().map(|m| m.0).filter(|m| ids.contains(m)).collect();
                to.sort_unstable();
                to.dedup();
                if to.is_empty() {
                    continue;
                }
                (
                    vec![("mark", json!({"type": "integer", "enum": to}))],
                    vec!["mark"],
                )
            }
            Tool::Click => (
                vec![("x", x.clone()), ("y", y.clone()), ("button", button.clone())],
                vec!["x", "y"],
            ),
            Tool::DoubleClick => (
                vec![("x", x.clone()), ("y", y.clone()), ("button", button.clone())],
                vec!["x", "y"],
            ),
            Tool::MovePointer => (
                vec![
                    ("x", x.clone()),
                    ("y", y.clone()),
                    ("duration_ms", duration.clone()),
                ],
                vec!["x", "y"],
            ),
            Tool::Key => (vec![("key", key.clone())], vec!["key"]),
            Tool::Type => (
                vec![(
                    "text",
                    json!({"type": "string", "minLength": 1, "maxLength": limits.max_text_chars}),
                )],
                vec!["text"],
            ),
            Tool::Scroll => (vec![("dy", scroll.clone()), ("dx", scroll.clone())], vec!["dy"]),
            Tool::HoldKey => (
                vec![("key", key.clone()), ("duration_ms", duration.clone())],
                vec!["key", "duration_ms"],
            ),
            Tool::HoldButton => (
                vec![("button", button.clone()), ("duration_ms", duration.clone())],
                vec!["button", "duration_ms"],
            ),
            Tool::Camera => (
                vec![
                    ("dx", delta.clone()),
                    ("dy", delta.clone()),
                    ("duration_ms", duration.clone()),
                ],
                vec!["dx", "dy", "duration_ms"],
            ),
            Tool::CameraDegrees => (
                vec![
                    ("yaw_deg", yaw.clone()),
                    ("pitch_deg", pitch.clone()),
                    ("duration_ms", duration.clone()),
                ],
                vec!["yaw_deg", "duration_ms"],
            ),
            Tool::Wait => (vec![("duration_ms", duration.clone())], vec!["duration_ms"]),
            Tool::Unsure => (Vec::new(), Vec::new()),
            Tool::Note => (
                vec![(
                    "text",
                    json!({"type": "string", "minLength": 1, "maxLength": limits.max_note_chars}),
                )],
                vec!["text"],
            ),
        };
        let mut properties = Map::new();
        properties.insert("action".into(), json!({"type": "string", "const": tool.name()}));
        for (k, v) in props {
            properties.insert(k.into(), v);
        }
        let mut req = vec!["action"];
        req.extend(required);
        variants.push(json!({
            "type": "object",
            "properties": Value::Object(properties),
            "required": req,
            "additionalProperties": false,
        }));
    }
    if variants.is_empty() {
        return Err(ContextError::NoTools);
    }
    Ok(json!({ "anyOf": variants }))
}

/// The schema of a two-stage grounding's cheap pass (FR-GND-005): one point `{x, y}` inside the
/// downscaled whole frame the pass saw, naming where the next action's target is.
pub fn localise_schema(image: Size) -> Result<Value, ContextError> {
    if image.w == 0 || image.h == 0 {
        return Err(ContextError::EmptyCapture {
            w: image.w,
            h: image.h,
        });
    }
    Ok(json!({
        "type": "object",
        "properties": {
            "x": {"type": "integer", "minimum": 0, "maximum": image.w - 1},
            "y": {"type": "integer", "minimum": 0, "maximum": image.h - 1},
        },
        "required": ["x", "y"],
        "additionalProperties": false,
    }))
}

/// Validates a cheap pass's reply against its [`localise_schema`] and returns the point.
pub fn parse_localise(value: &Value, schema: &Value) -> Result<Point, ContextError> {
    crate::validate(schema, value)?;
    let coord = |k: &str| {
        value
            .get(k)
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| ContextError::SchemaViolation {
                path: format!("$.{k}"),
                reason: "not an integer".into(),
            })
    };
    Ok(Point::new(coord("x")?, coord("y")?))
}

/// A tactical reply, parsed after it validated against this tick's schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TacticalReply {
    /// An executor action in the core vocabulary.
    Act(Action),
    /// Click the element with this mark (resolved to coordinates by grounding).
    ClickMark { mark: ElementId, button: MouseButton },
    /// The note skill.
    Note { text: String },
    /// Walk the avatar to the element with this mark (steered by the reflex).
    MoveTo { mark: ElementId },
    /// The model cannot tell what to do here: the session explores.
    Unsure,
}

impl TacticalReply {
    /// Validates `value` against `schema`, then converts it. Every failure is a named error.
    pub fn parse(value: &Value, schema: &Value) -> Result<TacticalReply, ContextError> {
        crate::validate(schema, value)?;
        TacticalReply::convert(value)
    }

    /// [`TacticalReply::parse`] for a reply in `space`'s convention: validated as the model
    /// answered, then its points mapped into capture pixels (INV-GND-002: the transform chain takes them on).
    pub fn parse_in(
        value: &Value,
        schema: &Value,
        space: &CoordSpace,
    ) -> Result<TacticalReply, ContextError> {
        crate::validate(schema, value)?;
        if space.convention == gamepilot_core::CoordConvention::CapturePixels {
            return TacticalReply::convert(value);
        }
        let mut v = value.clone();
        if let (Some(x), Some(y)) = (
            v.get("x").and_then(Value::as_f64),
            v.get("y").and_then(Value::as_f64),
        ) {
            let p = space.to_capture(x, y);
            v["x"] = json!(p.x);
            v["y"] = json!(p.y);
        }
        TacticalReply::convert(&v)
    }

    fn convert(value: &Value) -> Result<TacticalReply, ContextError> {
        let action = value.get("action").and_then(Value::as_str).unwrap_or("");
        let bad = |reason: String| ContextError::SchemaViolation {
            path: "$".into(),
            reason,
        };
        match action {
            "click_mark" => {
                let mark = value
                    .get("mark")
                    .and_then(Value::as_u64)
                    .and_then(|m| u32::try_from(m).ok())
                    .ok_or_else(|| bad("mark is not a u32".into()))?;
                let button = match value.get("button") {
                    Some(b) => serde_json::from_value(b.clone()).map_err(|e| bad(e.to_string()))?,
                    None => MouseButton::Left,
                };
                Ok(TacticalReply::ClickMark {
                    mark: ElementId(mark),
                    button,
                })
            }
            "move_to" => {
                let mark = value
                    .get("mark")
                    .and_then(Value::as_u64)
                    .and_then(|m| u32::try_from(m).ok())
                    .ok_or_else(|| bad("mark is not a u32".into()))?;
                Ok(TacticalReply::MoveTo {
                    mark: ElementId(mark),
                })
            }
            "unsure" => Ok(TacticalReply::Unsure),
            "note" => Ok(TacticalReply::Note {
                text: value
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            }),
            _ => serde_json::from_value::<Action>(value.clone())
                .map(TacticalReply::Act)
                .map_err(|e| bad(format!("not an executor action: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    /// Stable, sorted-key rendering so snapshots do not depend on serde_json's map order feature.
    pub(crate) fn canonical(v: &Value) -> String {
        fn sort(v: &Value) -> Value {
            match v {
                Value::Object(m) => {
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    let mut out = Map::new();
                    for k in keys {
                        out.insert(k.clone(), sort(&m[k]));
                    }
                    Value::Object(out)
                }
                Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
                other => other.clone(),
            }
        }
        serde_json::to_string_pretty(&sort(v)).unwrap_or_default()
    }

    fn marks(ids: &[u32]) -> Vec<ElementId> {
        ids.iter().map(|i| ElementId(*i)).collect()
    }

    #[test]
    fn localise_schema_bounds_the_point_to_the_cheap_image() {
        // FR-GND-005: the cheap pass can only answer a point inside the image it saw
        let s = localise_schema(Size::new(320, 180)).unwrap();
        assert_eq!(
            parse_localise(&json!({"x": 319, "y": 0}), &s).unwrap(),
            Point::new(319, 0)
        );
        assert!(parse_localise(&json!({"x": 320, "y": 0}), &s).is_err());
        assert!(parse_localise(&json!({"x": 3}), &s).is_err());
        assert!(parse_localise(&json!({"x": 3, "y": 4, "mark": 1}), &s).is_err());
        assert!(matches!(
            localise_schema(Size::new(0, 10)),
            Err(ContextError::EmptyCapture { .. })
        ));
    }

    #[test]
    fn tactical_schema_snapshot() {
        // FR-MODEL-003, FR-GND-003: snapshot of the per-tick schema
        let tools = ToolSet::new(&[
            Tool::ClickMark,
            Tool::Click,
            Tool::Key,
            Tool::HoldKey,
            Tool::Camera,
            Tool::Wait,
        ])
        .unwrap();
        let s = tactical_schema(
            &tools,
            &marks(&[7, 3, 7, 12]),
            Size::new(1280, 720),
            &SchemaLimits::default(),
        )
        .unwrap();
        expect![[r#"
            {
              "anyOf": [
                {
                  "additionalProperties": false,
                  "properties": {
                    "action": {
                      "const": "click_mark",
                      "type": "string"
                    },
                    "mark": {
                      "enum": [
                        3,
                        7,
                        12
                      ],
                      "type": "integer"
                    }
                  },
                  "required": [
                    "action",
                    "mark"
                  ],
                  "type": "object"
                },
                {
                  "additionalProperties": false,
                  "properties": {
                    "action": {
                      "const": "click",
                      "type": "string"
                    },
                    "button": {
                      "enum": [
                        "left",
                        "middle",
                        "right"
                      ],
                      "type": "string"
                    },
                    "x": {
                      "maximum": 1279,
                      "minimum": 0,
                      "type": "integer"
                    },
                    "y": {
                      "maximum": 719,
                      "minimum": 0,
                      "type": "integer"
                    }
                  },
                  "required": [
                    "action",
                    "x",
                    "y"
                  ],
                  "type": "object"
                },
                {
                  "additionalProperties": false,
                  "properties": {
                    "action": {
                      "const": "key",
                      "type": "string"
                    },
                    "key": {
                      "maxLength": 32,
                      "minLength": 1,
                      "type": "string"
                    }
                  },
                  "required": [
                    "action",
                    "key"
                  ],
                  "type": "object"
                },
                {
                  "additionalProperties": false,
                  "properties": {
                    "action": {
                      "const": "hold_key",
                      "type": "string"
                    },
                    "duration_ms": {
                      "maximum": 10000,
                      "minimum": 1,
                      "type": "integer"
                    },
                    "key": {
                      "maxLength": 32,
                      "minLength": 1,
                      "type": "string"
                    }
                  },
                  "required": [
                    "action",
                    "key",
                    "duration_ms"
                  ],
                  "type": "object"
                },
                {
                  "additionalProperties": false,
                  "properties": {
                    "action": {
                      "const": "camera",
                      "type": "string"
                    },
                    "duration_ms": {
                      "maximum": 10000,
                      "minimum": 1,
                      "type": "integer"
                    },
                    "dx": {
                      "maximum": 2000,
                      "minimum": -2000,
                      "type": "integer"
                    },
                    "dy": {
                      "maximum": 2000,
                      "minimum": -2000,
                      "type": "integer"
                    }
                  },
                  "required": [
                    "action",
                    "dx",
                    "dy",
                    "duration_ms"
                  ],
                  "type": "object"
                },
                {
                  "additionalProperties": false,
                  "properties": {
                    "action": {
                      "const": "wait",
                      "type": "string"
                    },
                    "duration_ms": {
                      "maximum": 10000,
                      "minimum": 1,
                      "type": "integer"
                    }
                  },
                  "required": [
                    "action",
                    "duration_ms"
                  ],
                  "type": "object"
                }
              ]
            }"#]]
        .assert_eq(&canonical(&s));
    }

    #[test]
    fn absent_mark_and_off_window_click_are_unrepresentable() {
        // FR-GND-003
        let s = tactical_schema(
            &ToolSet::all(),
            &marks(&[3, 7]),
            Size::new(640, 360),
            &SchemaLimits::default(),
        )
        .unwrap();
        assert!(crate::validate(&s, &json!({"action":"click_mark","mark":7})).is_ok());
        assert!(crate::validate(&s, &json!({"action":"click_mark","mark":5})).is_err());
        assert!(crate::validate(&s, &json!({"action":"click","x":639,"y":359})).is_ok());
        assert!(crate::validate(&s, &json!({"action":"click","x":640,"y":10})).is_err());
        assert!(crate::validate(&s, &json!({"action":"click","x":-1,"y":10})).is_err());
        assert!(crate::validate(&s, &json!({"action":"click","x":5,"y":5,"evil":1})).is_err());
        assert!(crate::validate(&s, &json!({"action":"hold_key","key":"w","duration_ms":60000})).is_err());
    }

    #[test]
    fn no_marks_means_no_click_mark_branch() {
        // FR-GND-003: with no marks present, click_mark cannot be expressed at all
        let s = tactical_schema(
            &ToolSet::all(),
            &[],
            Size::new(100, 100),
            &SchemaLimits::default(),
        )
        .unwrap();
        assert!(!canonical(&s).contains("click_mark"));
        assert!(crate::validate(&s, &json!({"action":"click_mark","mark":0})).is_err());
        let only_marks = ToolSet::new(&[Tool::ClickMark]).unwrap();
        assert_eq!(
            tactical_schema(&only_marks, &[], Size::new(100, 100), &SchemaLimits::default()),
            Err(ContextError::NoTools)
        );
    }

    #[test]
    fn empty_capture_is_a_named_error() {
        let e =
            tactical_schema(&ToolSet::all(), &[], Size::new(0, 720), &SchemaLimits::default()).unwrap_err();
        assert_eq!(e, ContextError::EmptyCapture { w: 0, h: 720 });
    }

    #[test]
    fn every_valid_variant_parses_into_the_core_vocabulary() {
        // FR-MODEL-003: the schema's shapes are the executor's (gamepilot_core::action)
        let s = tactical_schema(
            &ToolSet::all(),
            &marks(&[4]),
            Size::new(800, 600),
            &SchemaLimits::default(),
        )
        .unwrap();
        let samples = [
            json!({"action":"click","x":10,"y":20,"button":"right"}),
            json!({"action":"double_click","x":10,"y":20}),
            json!({"action":"move_pointer","x":10,"y":20,"duration_ms":300}),
            json!({"action":"key","key":"Return"}),
            json!({"action":"type","text":"hello"}),
            json!({"action":"scroll","dy":3}),
            json!({"action":"hold_key","key":"w","duration_ms":1500}),
            json!({"action":"hold_button","button":"left","duration_ms":500}),
            json!({"action":"camera","dx":-200,"dy":15,"duration_ms":400}),
            json!({"action":"wait","duration_ms":250}),
        ];
        for v in samples {
            match TacticalReply::parse(&v, &s) {
                Ok(TacticalReply::Act(a)) => assert_eq!(a.name(), v["action"].as_str().unwrap()),
                other => panic!("{v} -> {other:?}"),
            }
        }
        assert_eq!(
            TacticalReply::parse(&json!({"action":"click_mark","mark":4}), &s).unwrap(),
            TacticalReply::ClickMark {
                mark: ElementId(4),
                button: MouseButton::Left
            }
        );
        assert_eq!(
            TacticalReply::parse(&json!({"action":"note","text":"doors open with E"}), &s).unwrap(),
            TacticalReply::Note {
                text: "doors open with E".into()
            }
        );
        assert!(matches!(
            TacticalReply::parse(&json!({"action":"click_mark","mark":9}), &s),
            Err(ContextError::SchemaViolation { .. })
        ));
    }

    #[test]
    fn a_reply_in_the_models_convention_lands_on_the_same_capture_point() {
        // INV-GND-002: image pixels, 0–1000 and fractions bound the schema and map back
        use gamepilot_core::CoordConvention as C;
        let tools = ToolSet::new(&[Tool::Click, Tool::Wait]).unwrap();
        let (image, capture) = (Size::new(512, 288), Size::new(1280, 720));
        for (conv, reply, too_far) in [
            (
                C::ImagePixels,
                json!({"action":"click","x":256,"y":132}),
                json!({"action":"click","x":512,"y":0}),
            ),
            (
                C::Normalized1000,
                json!({"action":"click","x":500,"y":460}),
                json!({"action":"click","x":1001,"y":0}),
            ),
            (
                C::Fraction,
                json!({"action":"click","x":0.5,"y":0.46}),
                json!({"action":"click","x":1.5,"y":0}),
            ),
        ] {
            let space = CoordSpace::new(conv, image, capture);
            let s = tactical_schema_in(&tools, &[], &space, &SchemaLimits::default()).unwrap();
            match TacticalReply::parse_in(&reply, &s, &space).unwrap() {
                TacticalReply::Act(Action::Click { x, y, .. }) => {
                    assert!(
                        (x - 640).abs() <= 2 && (y - 331).abs() <= 2,
                        "{conv:?}: ({x}, {y})"
                    )
                }
                other => panic!("{other:?}"),
            }
            assert!(TacticalReply::parse_in(&too_far, &s, &space).is_err(), "{conv:?}");
        }
        // Fractions are numbers; the others integers.
        let space = CoordSpace::new(C::Fraction, image, capture);
        let s = tactical_schema_in(&tools, &[], &space, &SchemaLimits::default()).unwrap();
        assert!(canonical(&s).contains("\"type\": \"number\""));
    }
}
