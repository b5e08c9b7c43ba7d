//! The compiled form: primitives (deduplicated) and a flat postfix code per sensor, evaluated in constant time.

use crate::value::{CmpOp, Type};
use gamepilot_core::Rect;
use std::ops::Range;

/// A bound on saturation or value: the pixel's channel `op` `threshold` (0..1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    pub op: CmpOp,
    pub threshold: f32,
}

/// `region_fraction(region, hue=[lo, hi], saturation op S, value op V)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FractionSpec {
    pub region: Rect,
    /// Hue range in degrees, inclusive; `lo > hi` wraps through 360/0 (red).
    pub hue: Option<(f32, f32)>,
    pub saturation: Vec<Bound>,
    pub value: Vec<Bound>,
}

/// One of the three primitives, and no more.
#[derive(Debug, Clone, PartialEq)]
pub enum Primitive {
    Fraction(FractionSpec),
    Integer { region: Rect, digits: Option<u32> },
    Template { name: String, threshold: f32 },
}

impl Primitive {
    /// The capture-space region the primitive reads, if it has one (templates carry their own anchor).
    pub fn region(&self) -> Option<Rect> {
        match self {
            Primitive::Fraction(f) => Some(f.region),
            Primitive::Integer { region, .. } => Some(*region),
            Primitive::Template { .. } => None,
        }
    }
}

/// One instruction of the flat postfix code.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Bool(bool),
    Int(i64),
    Num(f64),
    /// Push this tick's value of primitive k.
    Prim(u32),
    /// Push this tick's value of an earlier sensor.
    Cur(u32),
    /// Push the previous tick's value of a sensor (`@name`).
    Prev(u32),
    Not,
    And,
    Or,
    Cmp(CmpOp),
}

/// A declared sensor in the compiled program.
#[derive(Debug, Clone, PartialEq)]
pub struct SensorDef {
    pub name: String,
    pub ty: Type,
    /// Line of the declaration in its file.
    pub line: u32,
    /// The expression's source text (for display).
    pub source: String,
    pub(crate) code: Range<usize>,
}

/// A checked, compiled sensor file. Build with [`Program::compile`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Program {
    pub(crate) sensors: Vec<SensorDef>,
    pub(crate) code: Vec<Op>,
    pub(crate) prims: Vec<Primitive>,
    pub(crate) max_stack: usize,
}

impl Program {
    pub fn sensors(&self) -> &[SensorDef] {
        &self.sensors
    }

    pub fn primitives(&self) -> &[Primitive] {
        &self.prims
    }

    /// The whole flat code (all sensors, in declaration order).
    pub fn code(&self) -> &[Op] {
        &self.code
    }

    /// The code of sensor `i`.
    pub fn sensor_code(&self, i: usize) -> &[Op] {
        self.sensors
            .get(i)
            .and_then(|s| self.code.get(s.code.clone()))
            .unwrap_or(&[])
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.sensors.iter().position(|s| s.name == name)
    }

    pub fn len(&self) -> usize {
        self.sensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sensors.is_empty()
    }

    /// The deepest the evaluation stack gets.
    pub fn max_stack(&self) -> usize {
        self.max_stack
    }
}

/// A standalone compiled expression over a program's sensors (a subgoal postcondition or stuck signal).
#[derive(Debug, Clone, PartialEq)]
pub struct Expression {
    pub(crate) code: Vec<Op>,
    pub(crate) prims: Vec<Primitive>,
    pub(crate) filters: Vec<Option<crate::pixels::PixelFilter>>,
    pub(crate) max_stack: usize,
    pub(crate) sensor_count: usize,
    pub ty: Type,
    pub source: String,
}

impl Expression {
    pub fn primitives(&self) -> &[Primitive] {
        &self.prims
    }

    pub fn code(&self) -> &[Op] {
        &self.code
    }
}
