//! Tri-state sensor values (true / false / a number / undefined) and postcondition verdicts.

use serde::{Serialize, Serializer};
use std::fmt;

/// The static type of a sensor or sub-expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    Bool,
    Number,
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("a boolean"),
            Type::Number => f.write_str("a number"),
        }
    }
}

/// One value at run time. `Undefined` is its own value: it is never zero and never false.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Value {
    #[default]
    Undefined,
    Bool(bool),
    Int(i64),
    Num(f64),
}

impl Value {
    pub fn is_undefined(&self) -> bool {
        matches!(self, Value::Undefined)
    }

    /// The boolean, `None` when undefined or not a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number as f64, `None` when undefined or not a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Num(x) => Some(*x),
            _ => None,
        }
    }

    /// Kleene conjunction: `false and undefined` is false, `true and undefined` is undefined.
    pub fn and(self, other: Value) -> Value {
        match (self.as_bool(), other.as_bool()) {
            (Some(false), _) | (_, Some(false)) => Value::Bool(false),
            (Some(true), Some(true)) => Value::Bool(true),
            _ => Value::Undefined,
        }
    }

    /// Kleene disjunction: `true or undefined` is true, `false or undefined` is undefined.
    pub fn or(self, other: Value) -> Value {
        match (self.as_bool(), other.as_bool()) {
            (Some(true), _) | (_, Some(true)) => Value::Bool(true),
            (Some(false), Some(false)) => Value::Bool(false),
            _ => Value::Undefined,
        }
    }

    /// A numeric comparison; undefined when either side is undefined (or not a number).
    pub fn compare(self, op: CmpOp, other: Value) -> Value {
        let ord = match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(&b)),
            _ => match (self.as_f64(), other.as_f64()) {
                (Some(a), Some(b)) => a.partial_cmp(&b),
                _ => None,
            },
        };
        match ord {
            Some(o) => Value::Bool(op.holds(o)),
            None => Value::Undefined,
        }
    }
}

/// Kleene negation: `not undefined` is undefined.
impl std::ops::Not for Value {
    type Output = Value;
    fn not(self) -> Value {
        match self {
            Value::Bool(b) => Value::Bool(!b),
            _ => Value::Undefined,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Undefined => f.write_str("undefined"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Num(x) => {
                // Four decimals is finer than any pixel fraction of a region we evaluate; trim zeros.
                let s = format!("{x:.4}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                f.write_str(if s == "-0" { "0" } else { s })
            }
        }
    }
}

/// JSON form: `null` for undefined, a boolean, or a number.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Undefined => s.serialize_none(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Num(x) => s.serialize_f64(*x),
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CmpOp {
    pub fn holds(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Lt => o == Less,
            CmpOp::Le => o != Greater,
            CmpOp::Gt => o == Greater,
            CmpOp::Ge => o != Less,
            CmpOp::Eq => o == Equal,
            CmpOp::Ne => o != Equal,
        }
    }

    /// Whether `a op b` holds for floats (used by the pixel filters).
    #[inline]
    pub fn holds_f32(self, a: f32, b: f32) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }
}

pub use gamepilot_core::Verdict;

/// A postcondition's value as its verdict (INV-GND-001): `true` → confirmed, `false` → refuted,
/// anything else (undefined, a number) → inconclusive, never refuted.
pub fn verdict_of(v: Value) -> Verdict {
    match v {
        Value::Bool(true) => Verdict::Confirmed,
        Value::Bool(false) => Verdict::Refuted,
        _ => Verdict::Inconclusive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Value::{Bool, Undefined as U};

    const T: Value = Bool(true);
    const F: Value = Bool(false);

    #[test]
    fn kleene_truth_tables() {
        // FR-PERC-008: undefined propagates with Kleene semantics.
        let all = [T, F, U];
        for a in all {
            for b in all {
                let and = a.and(b);
                let or = a.or(b);
                let want_and = if a == F || b == F {
                    F
                } else if a == T && b == T {
                    T
                } else {
                    U
                };
                let want_or = if a == T || b == T {
                    T
                } else if a == F && b == F {
                    F
                } else {
                    U
                };
                assert_eq!(and, want_and, "{a} and {b}");
                assert_eq!(or, want_or, "{a} or {b}");
                assert_eq!(a.and(b), b.and(a));
                assert_eq!(a.or(b), b.or(a));
            }
        }
        assert_eq!(!T, F);
        assert_eq!(!F, T);
        assert_eq!(!U, U);
    }

    #[test]
    fn comparisons_of_every_operator_and_undefined() {
        let cases = [
            (CmpOp::Lt, [true, false, false]),
            (CmpOp::Le, [true, true, false]),
            (CmpOp::Gt, [false, false, true]),
            (CmpOp::Ge, [false, true, true]),
            (CmpOp::Eq, [false, true, false]),
            (CmpOp::Ne, [true, false, true]),
        ];
        for (op, want) in cases {
            assert_eq!(
                Value::Int(1).compare(op, Value::Int(2)),
                Bool(want[0]),
                "1 {} 2",
                op.as_str()
            );
            assert_eq!(
                Value::Int(2).compare(op, Value::Num(2.0)),
                Bool(want[1]),
                "2 {} 2.0",
                op.as_str()
            );
            assert_eq!(
                Value::Num(0.5).compare(op, Value::Num(0.25)),
                Bool(want[2]),
                "0.5 {} 0.25",
                op.as_str()
            );
            assert_eq!(U.compare(op, Value::Int(1)), U);
            assert_eq!(Value::Int(1).compare(op, U), U);
            assert_eq!(Value::Num(f64::NAN).compare(op, Value::Int(1)), U);
        }
        // Large integers compare exactly, not through f64.
        assert_eq!(
            Value::Int(i64::MAX).compare(CmpOp::Gt, Value::Int(i64::MAX - 1)),
            T
        );
    }

    #[test]
    fn undefined_is_not_zero_nor_false() {
        assert_ne!(U, Value::Int(0));
        assert_ne!(U, F);
        assert_eq!(U.compare(CmpOp::Eq, Value::Int(0)), U);
        assert_eq!(verdict_of(U), Verdict::Inconclusive);
        assert_eq!(verdict_of(T), Verdict::Confirmed);
        assert_eq!(verdict_of(F), Verdict::Refuted);
    }

    #[test]
    fn display_and_json() {
        assert_eq!(U.to_string(), "undefined");
        assert_eq!(Value::Num(0.4375).to_string(), "0.4375");
        assert_eq!(Value::Num(1.0).to_string(), "1");
        assert_eq!(Value::Int(42).to_string(), "42");
        assert_eq!(serde_json::to_string(&U).unwrap(), "null");
        assert_eq!(serde_json::to_string(&T).unwrap(), "true");
        assert_eq!(serde_json::to_string(&Value::Int(7)).unwrap(), "7");
    }
}
