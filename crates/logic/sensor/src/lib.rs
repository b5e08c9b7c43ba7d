//! Pure logic: the sensor expression language (lexer, parser, checker, compiled program, tri-state evaluator).
//!
//! A sensor file is one declaration per line, `name = expression`, with three primitives over regions
//! of the current frame (`region_fraction`, `region_integer`, `template_present`), comparisons,
//! Kleene `and`/`or`/`not`, `@name` for the previous tick's value and references to earlier sensors
//! (FR-PERC-008). [`compile`] checks a file and reports every error with a caret and a fix hint;
//! [`Evaluator`] runs the compiled flat program every reflex tick without blocking, and
//! [`Program::compile_expression`] turns a subgoal's postcondition into the same form (FR-LOOP-004).
//!
//! Architecture invariant: nothing here touches threads, files, the clock or X11. Digit recognition is
//! a cache plus a request queue; the worker that reads requests lives in the binary.

pub mod ast;
pub mod check;
pub mod diag;
pub mod eval;
#[doc(hidden)]
pub mod fuzzing;
pub mod lexer;
pub mod parser;
pub mod pixels;
pub mod program;
pub mod recognition;
pub mod template;
pub mod value;

pub use diag::{render_all, DiagKind, Diagnostic, Span};
pub use eval::{evaluate_values, EvalContext, Evaluator};
pub use program::{Bound, Expression, FractionSpec, Op, Primitive, Program, SensorDef};
pub use recognition::{DigitReader, Lookup, RecognitionCache, RecognitionKey, RecognitionRequest};
pub use template::{Atlas, NoTemplates, Template, TemplateAtlas};
pub use value::{verdict_of, CmpOp, Type, Value, Verdict};

/// Errors of the sensor crate.
#[derive(Debug, thiserror::Error)]
pub enum SensorError {
    /// The source had errors; each is located and has a hint.
    #[error("{} error{} in sensor source (first: {})", .0.len(), if .0.len() == 1 { "" } else { "s" }, .0.first().map(|d| d.to_string()).unwrap_or_default())]
    Invalid(Vec<Diagnostic>),
    #[error("bad template: {0}")]
    BadTemplate(String),
}

impl SensorError {
    /// The diagnostics, when the error is about source text.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            SensorError::Invalid(d) => d,
            _ => &[],
        }
    }
}

/// Check a sensor file: every error, in source order (empty when the file is valid).
pub fn check(src: &str) -> Vec<Diagnostic> {
    match compile(src) {
        Ok(_) => Vec::new(),
        Err(e) => e.diagnostics().to_vec(),
    }
}

/// Check and compile a sensor file.
pub fn compile(src: &str) -> Result<Program, SensorError> {
    let mut diags = Vec::new();
    let mut bad_lines = Vec::new();
    let toks = lexer::lex(src, &mut diags, &mut bad_lines);
    let decls = parser::parse(&toks, &mut diags, &bad_lines);
    let prog = check::check_decls(&decls, src, &mut diags);
    sort(&mut diags);
    match prog {
        Some(p) if diags.is_empty() => Ok(p),
        _ => Err(SensorError::Invalid(diags)),
    }
}

fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by_key(|d| (d.span.line, d.span.col));
}

impl Program {
    /// Compile one expression (no `name =`) over this program's sensors: a subgoal postcondition or a
    /// stuck signal. Every sensor is visible by current value and by `@name`; primitives are allowed.
    pub fn compile_expression(&self, src: &str) -> Result<Expression, SensorError> {
        let mut diags = Vec::new();
        let mut bad_lines = Vec::new();
        let line = src.lines().next().unwrap_or("");
        if src.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
            diags.push(Diagnostic::new(
                DiagKind::Syntax,
                Span::new(2, 1, 1),
                "an expression is one line",
                "join the conditions with `and` / `or` on one line",
            ));
            return Err(SensorError::Invalid(diags));
        }
        let toks = lexer::lex(line, &mut diags, &mut bad_lines);
        let expr = parser::parse_expression(&toks, &mut diags, &bad_lines);
        let out = expr.and_then(|e| check::check_expression(&e, self, line, &mut diags));
        sort(&mut diags);
        match out {
            Some(x) if diags.is_empty() => Ok(x),
            _ => Err(SensorError::Invalid(diags)),
        }
    }
}

#[cfg(test)]
mod tests;
