//! Sensors the agent declares for itself (sensor-expressions.md, "Declaration and lifetime"): a
//! deliberative reply's declarations, resolved against the current observation's marks into
//! sensor-language lines and compiled after the user's sensors (at most [`MAX_DECLARED`] a session);
//! postconditions and the goal check are expressions over both (FR-LOOP-004).
//!
//! A small text model cannot do pixel arithmetic, so a declaration names a mark and what to read there —
//! the number it shows (`region_integer` over its box), how much of its box has a colour
//! (`region_fraction`), whether it is still there (`template_present`, its template cut from the frame
//! by the reflex) — or writes a whole expression over sensors already declared.

use gamepilot_core::{ElementId, Rect, Size};
use gamepilot_sensor::{Expression, Program, Type, Value};
use gamepilot_vision::Element;
use serde::{Deserialize, Serialize};

/// At most this many sensors an agent declares in one session.
pub const MAX_DECLARED: usize = 32;
/// At most this many declarations one reply may carry.
pub const MAX_PER_REPLY: usize = 4;
/// How far (pixels) a declared template is searched for around where it was cut.
pub const TEMPLATE_RADIUS_PX: u32 = 8;
/// The match score (normalised cross-correlation) above which a declared template is present.
pub const TEMPLATE_THRESHOLD: f32 = 0.8;

/// What the wiring tells the session so that its agent may declare sensors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclareConfig {
    /// The user's sensor source (their `--sensors` file, possibly empty): the agent's lines follow it.
    pub sensor_source: String,
    /// The capture size the user's regions are declared against; the agent's boxes are written in it.
    pub declared_size: Size,
    /// The user gave `--goal-check`: it stays authoritative and the agent declares no goal check.
    pub goal_check_given: bool,
}

/// What a declaration reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reads {
    /// The number mark N shows (a counter: "Lines 0").
    Number,
    /// The fraction of mark N's box that has a colour (its own, or the one named).
    Colour,
    /// Whether mark N's element is still there (its pixels, cut from the frame now).
    Present,
    /// A whole expression over sensors already declared (`not play_shown`, `lines > @lines`).
    Expression,
}

/// One declaration as a deliberative reply writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensorRequest {
    pub name: String,
    pub reads: Reads,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colour: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

/// A sensor the agent declared: its source line, the mark and box it was resolved from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredSensor {
    pub name: String,
    /// The expression after `name =`, in the sensor language.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<ElementId>,
    /// The mark's box in the declared capture space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbox: Option<Rect>,
    /// The label the mark carried, for the prompt's listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The deliberative pass that declared it.
    pub pass: u64,
}

impl DeclaredSensor {
    /// The declaration as a line of a sensor file.
    pub fn line(&self) -> String {
        format!("{} = {}", self.name, self.source)
    }
}

/// The session's sensors: the user's and the agent's, compiled together.
#[derive(Debug, Clone)]
pub struct Declarations {
    cfg: DeclareConfig,
    declared: Vec<DeclaredSensor>,
    program: Program,
}

/// The hue ranges and bounds of the colours a declaration may name.
fn colour_filter(name: &str) -> Option<&'static str> {
    Some(match name.trim().to_lowercase().as_str() {
        "red" => "hue=[345, 15], saturation>0.4, value>0.3",
        "orange" => "hue=[15, 45], saturation>0.4, value>0.3",
        "yellow" | "gold" => "hue=[45, 70], saturation>0.4, value>0.3",
        "green" => "hue=[70, 170], saturation>0.3, value>0.25",
        "cyan" => "hue=[170, 200], saturation>0.3, value>0.3",
        "blue" => "hue=[200, 260], saturation>0.3, value>0.25",
        "purple" | "violet" => "hue=[260, 300], saturation>0.3, value>0.25",
        "magenta" | "pink" => "hue=[300, 345], saturation>0.3, value>0.3",
        "white" => "saturation<0.15, value>0.85",
        "black" => "value<0.15",
        "grey" | "gray" => "saturation<0.15, value>0.2, value<0.85",
        _ => return None,
    })
}

/// The first colour word of an element's looks ("yellow round" → "yellow").
fn looks_colour(e: &Element) -> Option<String> {
    e.looks
        .as_deref()?
        .split_whitespace()
        .find(|w| colour_filter(w).is_some())
        .map(str::to_string)
}

/// The part of a text element's box that holds its number — the first run of digits, the one
/// [`number_in`] reads (the box split by character count: "Lines 12" keeps the last two of eight columns,
/// one column of margin beside a space or the box's edge, half a column beside another character: the
/// demo's "8/8 coins left" read undefined over "8/8", and 8 over its first digit); the whole box otherwise.
fn digits_box(bbox: Rect, label: Option<&str>) -> Rect {
    let Some(label) = label else { return bbox };
    let chars: Vec<char> = label.chars().collect();
    let Some(first) = chars.iter().position(char::is_ascii_digit) else {
        return bbox;
    };
    let last = chars[first..]
        .iter()
        .position(|c| !c.is_ascii_digit())
        .map_or(chars.len() - 1, |end| first + end - 1);
    let margin = |neighbour: Option<&char>| match neighbour {
        None => 1.0,
        Some(c) if c.is_whitespace() => 1.0,
        Some(_) => 0.5,
    };
    let before = first.checked_sub(1).and_then(|i| chars.get(i));
    let n = chars.len().max(1) as f64;
    let col = bbox.w as f64 / n;
    let x0 = (first as f64 - margin(before)).max(0.0) * col;
    let x1 = (last as f64 + 1.0 + margin(chars.get(last + 1))).min(n) * col;
    let w = (x1 - x0).round().max(1.0) as u32;
    Rect::new(bbox.x + x0.round() as i32, bbox.y, w.min(bbox.w), bbox.h)
}

/// The number a label shows ("Lines 12" → 12; the first run of digits); `None` without digits.
pub fn number_in(label: &str) -> Option<u64> {
    let digits: String = label
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `r`, declared in a capture of size `from`, in a capture of size `to`.
fn rescale(r: Rect, from: Size, to: Size) -> Rect {
    if from == to || from.w == 0 || from.h == 0 {
        return r;
    }
    let sx = to.w as f64 / from.w as f64;
    let sy = to.h as f64 / from.h as f64;
    Rect::new(
        (r.x as f64 * sx).round() as i32,
        (r.y as f64 * sy).round() as i32,
        ((r.w as f64 * sx).round() as u32).max(1),
        ((r.h as f64 * sy).round() as u32).max(1),
    )
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 32
}

fn region(r: Rect) -> String {
    format!("[{}, {}, {}, {}]", r.x, r.y, r.w, r.h)
}

impl Declarations {
    /// The user's sensors, compiled; the agent has declared nothing yet.
    pub fn new(cfg: DeclareConfig) -> Result<Declarations, String> {
        let program = gamepilot_sensor::compile(&cfg.sensor_source)
            .map_err(|e| gamepilot_sensor::render_all(e.diagnostics(), "sensors", &cfg.sensor_source))?;
        Ok(Declarations {
            cfg,
            declared: Vec::new(),
            program,
        })
    }

    pub fn config(&self) -> &DeclareConfig {
        &self.cfg
    }

    /// The agent's sensors, in declaration order.
    pub fn declared(&self) -> &[DeclaredSensor] {
        &self.declared
    }

    /// The compiled program: the user's sensors, then the agent's.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The whole sensor source the reflex compiles: the user's file, then one line per declared sensor.
    pub fn source(&self) -> String {
        let mut s = self.cfg.sensor_source.trim_end().to_string();
        for d in &self.declared {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(&d.line());
        }
        s
    }

    /// Resolve one declaration against the elements of the frame it was made on (of size `frame`) and
    /// compile it with everything declared before; `Err` says why in words the model reads on the next
    /// pass (the compiler's diagnostics included).
    pub fn declare(
        &mut self,
        req: &SensorRequest,
        elements: &[Element],
        frame: Size,
        pass: u64,
    ) -> Result<DeclaredSensor, String> {
        let name = req.name.trim().to_string();
        if !valid_name(&name) {
            return Err(format!(
                "sensor name {name:?} is not a name: lower-case letters, digits and _, starting with a letter"
            ));
        }
        if self.program.index_of(&name).is_some() {
            return Err(format!("sensor `{name}` is already declared"));
        }
        if self.declared.len() >= MAX_DECLARED {
            return Err(format!(
                "at most {MAX_DECLARED} sensors a session: `{name}` not declared"
            ));
        }
        let element = match req.reads {
            Reads::Expression => None,
            _ => {
                let Some(mark) = req.mark else {
                    return Err(format!("sensor `{name}` reads a mark: say which (`mark`)"));
                };
                let e = elements
                    .iter()
                    .find(|e| u64::from(e.id.0) == mark)
                    .ok_or_else(|| format!("sensor `{name}`: there is no mark [{mark}] on the screen now"))?;
                Some(e)
            }
        };
        let bbox = element.map(|e| rescale(e.bbox, frame, self.cfg.declared_size));
        let source = match (req.reads, element, bbox) {
            (Reads::Number, Some(e), Some(b)) => {
                if !e
                    .label
                    .as_deref()
                    .unwrap_or("")
                    .chars()
                    .any(|c| c.is_ascii_digit())
                {
                    return Err(format!(
                        "sensor `{name}`: mark [{}] shows no number to read",
                        e.id.0
                    ));
                }
                format!("region_integer({})", region(digits_box(b, e.label.as_deref())))
            }
            (Reads::Colour, Some(e), Some(b)) => {
                let colour = req
                    .colour
                    .clone()
                    .filter(|c| !c.trim().is_empty())
                    .or_else(|| looks_colour(e))
                    .ok_or_else(|| format!("sensor `{name}`: name the colour to measure (`colour`)"))?;
                let filter = colour_filter(&colour).ok_or_else(|| {
                    format!("sensor `{name}`: {colour:?} is not a colour I measure (red, orange, yellow, green, cyan, blue, purple, magenta, white, black, grey)")
                })?;
                format!("region_fraction({}, {filter})", region(b))
            }
            (Reads::Present, Some(_), Some(_)) => format!("template_present({name:?}, {TEMPLATE_THRESHOLD})"),
            (Reads::Expression, _, _) => req
                .expression
                .clone()
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .ok_or_else(|| format!("sensor `{name}` reads an expression: write it (`expression`)"))?,
            _ => return Err(format!("sensor `{name}`: nothing to read")),
        };
        let d = DeclaredSensor {
            name: name.clone(),
            source,
            mark: element.map(|e| e.id),
            bbox,
            label: element.and_then(|e| e.label.clone()),
            pass,
        };
        let mut next = self.declared.clone();
        next.push(d.clone());
        let candidate = Declarations {
            cfg: self.cfg.clone(),
            declared: next,
            program: Program::default(),
        };
        let src = candidate.source();
        let program = gamepilot_sensor::compile(&src).map_err(|e| {
            format!(
                "sensor `{name}` does not compile:\n{}",
                gamepilot_sensor::render_all(e.diagnostics(), "declared", &src)
            )
        })?;
        self.declared = candidate.declared;
        self.program = program;
        Ok(d)
    }

    /// An expression over the session's sensors, compiled; `Err` carries the compiler's diagnostics.
    pub fn compile(&self, expr: &str) -> Result<Expression, String> {
        self.program
            .compile_expression(expr)
            .map_err(|e| gamepilot_sensor::render_all(e.diagnostics(), "postcondition", expr))
    }

    /// An expression's value from the sensors' latest reported values (`now`, and `before` for `@name`),
    /// when it can be told without pixels: `None` when it is not boolean, reads a primitive itself, or a
    /// sensor it reads has not been reported.
    pub fn value(
        &self,
        expr: &Expression,
        now: &[(String, Option<f64>)],
        before: &[(String, Option<f64>)],
    ) -> Option<bool> {
        if expr.ty != Type::Bool {
            return None;
        }
        let values = |reported: &[(String, Option<f64>)]| -> Vec<Value> {
            self.program
                .sensors()
                .iter()
                .map(|def| {
                    let v = reported
                        .iter()
                        .find(|(n, _)| *n == def.name)
                        .and_then(|(_, v)| *v);
                    match (v, def.ty) {
                        (None, _) => Value::Undefined,
                        (Some(v), Type::Bool) => Value::Bool(v != 0.0),
                        (Some(v), Type::Number) if v.fract() == 0.0 && v.abs() < 9e15 => Value::Int(v as i64),
                        (Some(v), Type::Number) => Value::Num(v),
                    }
                })
                .collect()
        };
        match gamepilot_sensor::evaluate_values(expr, &values(now), &values(before))? {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The boolean sensors' names, the user's first: what a goal or postcondition may name.
    pub fn bool_names(&self) -> Vec<String> {
        self.program
            .sensors()
            .iter()
            .filter(|d| d.ty == Type::Bool)
            .map(|d| d.name.clone())
            .collect()
    }

    /// The templates of `present` declarations, each with the box to cut it from (declared space).
    pub fn templates(&self) -> Vec<(String, Rect)> {
        self.declared
            .iter()
            .filter(|d| d.source.starts_with("template_present("))
            .filter_map(|d| d.bbox.map(|b| (d.name.clone(), b)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_vision::ElementSource;

    fn element(id: u32, bbox: Rect, label: Option<&str>, looks: Option<&str>) -> Element {
        Element {
            id: ElementId(id),
            bbox,
            confidence: 0.9,
            source: ElementSource::Text,
            label: label.map(str::to_string),
            looks: looks.map(str::to_string),
            layer: None,
            selected: false,
        }
    }

    fn decls(user: &str) -> Declarations {
        Declarations::new(DeclareConfig {
            sensor_source: user.into(),
            declared_size: Size::new(640, 480),
            goal_check_given: false,
        })
        .unwrap()
    }

    fn req(name: &str, reads: Reads, mark: Option<u64>, expression: Option<&str>) -> SensorRequest {
        SensorRequest {
            name: name.into(),
            reads,
            mark,
            colour: None,
            expression: expression.map(str::to_string),
        }
    }

    #[test]
    fn a_mark_becomes_a_region_of_the_sensor_language() {
        // sensor-expressions.md "Declaration and lifetime": the agent declares, the compiler checks
        let mut d = decls("");
        let els = [
            element(3, Rect::new(10, 10, 80, 20), Some("Lines 12"), None),
            element(5, Rect::new(200, 100, 60, 30), Some("Play"), None),
            element(8, Rect::new(300, 300, 20, 20), None, Some("yellow round")),
        ];
        let size = Size::new(640, 480);
        let lines = d
            .declare(&req("lines", Reads::Number, Some(3), None), &els, size, 1)
            .unwrap();
        let left = d
            .declare(
                &req("left", Reads::Number, Some(9), None),
                &[element(
                    9,
                    Rect::new(123, 667, 130, 35),
                    Some("8/8 coins left"),
                    None,
                )],
                size,
                1,
            )
            .unwrap();
        assert_eq!(
            left.source, "region_integer([123, 667, 14, 35])",
            "the first number's columns, half a column beside the slash"
        );
        assert_eq!(
            lines.source, "region_integer([60, 10, 30, 20])",
            "the digits' columns, with margin"
        );
        let play = d
            .declare(&req("play_shown", Reads::Present, Some(5), None), &els, size, 1)
            .unwrap();
        assert_eq!(play.source, "template_present(\"play_shown\", 0.8)");
        let coin = d
            .declare(&req("coin", Reads::Colour, Some(8), None), &els, size, 1)
            .unwrap();
        assert!(
            coin.source
                .starts_with("region_fraction([300, 300, 20, 20], hue=[45, 70]"),
            "{}",
            coin.source
        );
        let started = d
            .declare(
                &req("started", Reads::Expression, None, Some("not play_shown")),
                &els,
                size,
                1,
            )
            .unwrap();
        assert_eq!(started.line(), "started = not play_shown");
        assert_eq!(d.program().len(), 5);
        assert_eq!(
            d.templates(),
            vec![("play_shown".to_string(), Rect::new(200, 100, 60, 30))]
        );
        assert!(d.source().ends_with("started = not play_shown"));
    }

    #[test]
    fn a_declaration_that_does_not_compile_says_why_and_changes_nothing() {
        let mut d = decls("health = region_fraction([0, 0, 10, 10], value>0.5)");
        let size = Size::new(640, 480);
        let err = d
            .declare(
                &req("bad", Reads::Expression, None, Some("lives > ")),
                &[],
                size,
                2,
            )
            .unwrap_err();
        assert!(err.contains("does not compile") && err.contains("bad"), "{err}");
        let err = d
            .declare(
                &req("health", Reads::Expression, None, Some("1 > 0")),
                &[],
                size,
                2,
            )
            .unwrap_err();
        assert!(err.contains("already declared"), "{err}");
        let err = d
            .declare(&req("x", Reads::Number, Some(9), None), &[], size, 2)
            .unwrap_err();
        assert!(err.contains("no mark [9]"), "{err}");
        assert!(d.declared().is_empty());
        assert_eq!(d.program().len(), 1);
    }

    #[test]
    fn a_box_is_written_in_the_declared_capture_space() {
        let mut d = decls("");
        let els = [element(2, Rect::new(100, 100, 40, 20), Some("OK"), None)];
        let s = d
            .declare(
                &req("ok", Reads::Present, Some(2), None),
                &els,
                Size::new(1280, 960),
                1,
            )
            .unwrap();
        assert_eq!(s.bbox, Some(Rect::new(50, 50, 20, 10)));
    }

    #[test]
    fn a_postcondition_over_reported_values_is_told_without_pixels() {
        // FR-LOOP-004: an already-true postcondition is refused; the session judges it from the values
        let mut d = decls("");
        let els = [element(3, Rect::new(10, 10, 80, 20), Some("Lines 0"), None)];
        d.declare(
            &req("lines", Reads::Number, Some(3), None),
            &els,
            Size::new(640, 480),
            1,
        )
        .unwrap();
        let rose = d.compile("lines > @lines").unwrap();
        let some = d.compile("lines >= 1").unwrap();
        let now = [("lines".to_string(), Some(2.0))];
        let before = [("lines".to_string(), Some(1.0))];
        assert_eq!(d.value(&rose, &now, &before), Some(true));
        assert_eq!(d.value(&some, &before, &before), Some(true));
        assert_eq!(
            d.value(&some, &[("lines".into(), None)], &before),
            None,
            "undefined"
        );
        let pixels = d
            .compile("region_fraction([0, 0, 4, 4], value>0.5) > 0.5")
            .unwrap();
        assert_eq!(
            d.value(&pixels, &now, &before),
            None,
            "reads pixels: the reflex tells"
        );
        assert!(d.compile("lines >").is_err());
    }
}
