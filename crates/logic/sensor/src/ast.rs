//! The syntax tree of a sensor file, as parsed (before names, types and primitives are checked).

use crate::diag::Span;
use crate::value::CmpOp;

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Number {
        value: f64,
        int: Option<i64>,
    },
    Bool(bool),
    Str(String),
    /// `[a, b, ...]`, valid only as a region or hue range argument.
    List(Vec<Expr>),
    Name(String),
    /// `@name`: the previous tick's value.
    Prev(String),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Call {
        name: String,
        name_span: Span,
        args: Vec<Arg>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub kind: ArgKind,
    pub span: Span,
}

/// How a keyword argument binds its value: `hue=[..]`, `digits=6` or `saturation>0.5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KwOp {
    Assign,
    Cmp(CmpOp),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ArgKind {
    Positional(Expr),
    Keyword {
        name: String,
        name_span: Span,
        op: KwOp,
        op_span: Span,
        value: Expr,
    },
}

/// One `name = expression` line. `expr` is `None` when the line did not parse (already reported).
#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    pub name: String,
    pub name_span: Span,
    pub expr: Option<Expr>,
    pub line: u32,
}
