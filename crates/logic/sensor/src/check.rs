//! The checker and compiler: names, declaration order, cycles, types and primitive arguments, all errors
//! collected; a file without errors compiles to a [`Program`].

use crate::ast::{Arg, ArgKind, Decl, Expr, ExprKind, KwOp};
use crate::diag::{did_you_mean, DiagKind, Diagnostic, Span};
use crate::program::{Bound, Expression, FractionSpec, Op, Primitive, Program, SensorDef};
use crate::value::{CmpOp, Type};
use gamepilot_core::Rect;
use std::collections::HashMap;

/// The three primitives; the language has no others.
pub const PRIMITIVES: [&str; 3] = ["region_fraction", "region_integer", "template_present"];

/// Largest coordinate or size accepted in a region.
pub const MAX_COORD: i64 = 100_000;
/// Most digits `digits=` may ask for (an i64 holds 18 decimal digits safely).
pub const MAX_DIGITS: i64 = 18;

const FRACTION_USAGE: &str = "region_fraction([x, y, w, h], hue=[lo, hi], saturation>S, value>V)";
const INTEGER_USAGE: &str = "region_integer([x, y, w, h]) or region_integer([x, y, w, h], digits=N)";
const TEMPLATE_USAGE: &str = "template_present(\"name\", threshold) with threshold in 0..1";
const REGION_HINT: &str =
    "a region is `[x, y, width, height]` in capture-space pixels: four whole numbers, x and y at least 0, width and height at least 1";

/// One name the checker can resolve.
struct NameInfo {
    name: String,
    line: u32,
    /// Type from the declaration's shape (known for forward `@` references).
    shape: Option<Type>,
    /// Type after checking (for current-value references to earlier sensors); `None` = broken, stay quiet.
    checked: Option<Type>,
    /// Defined only through references that lead back to itself (`a = @a`): it can never have a value.
    alias_cycle: bool,
}

struct Checker<'d> {
    names: Vec<NameInfo>,
    first: HashMap<String, usize>,
    /// Current-value references of each declaration (by first-occurrence index).
    deps: Vec<Vec<usize>>,
    /// The declaration being checked; current-value references must point below it.
    cur: usize,
    /// Member sets of cycles already reported (each cycle is reported once).
    cycles: Vec<Vec<usize>>,
    diags: &'d mut Vec<Diagnostic>,
}

/// Check declarations; returns the program when there were no errors (errors go to `diags`).
pub fn check_decls(decls: &[Decl], src: &str, diags: &mut Vec<Diagnostic>) -> Option<Program> {
    let errors_before = diags.len();
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, d) in decls.iter().enumerate() {
        check_name(d, diags);
        match first.get(&d.name) {
            Some(&j) => diags.push(Diagnostic::new(
                DiagKind::DuplicateName,
                d.name_span,
                format!("`{}` is already declared on line {}", d.name, decls[j].line),
                "rename one of them; sensor names are unique within a session",
            )),
            None => {
                first.insert(d.name.clone(), i);
            }
        }
    }
    let deps: Vec<Vec<usize>> = decls
        .iter()
        .map(|d| {
            let mut v = Vec::new();
            if let Some(e) = &d.expr {
                collect_refs(e, &first, &mut v);
            }
            v
        })
        .collect();
    let shapes: Vec<Option<Type>> = (0..decls.len())
        .map(|i| shape(i, decls, &first, &mut vec![false; decls.len()]))
        .collect();
    let names = decls
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(i, (d, s))| NameInfo {
            name: d.name.clone(),
            line: d.line,
            shape: *s,
            checked: None,
            alias_cycle: alias_cycle(i, decls, &first),
        })
        .collect();
    let mut ck = Checker {
        names,
        first,
        deps,
        cur: 0,
        cycles: Vec::new(),
        diags,
    };
    for (i, d) in decls.iter().enumerate() {
        ck.cur = i;
        let ty = d.expr.as_ref().and_then(|e| ck.expr(e));
        ck.names[i].checked = ty;
    }
    if ck.diags.len() > errors_before {
        return None;
    }
    // No errors: every declaration parsed and typed.
    let mut prog = Program::default();
    for (i, d) in decls.iter().enumerate() {
        let Some(e) = &d.expr else { return None };
        let start = prog.code.len();
        let mut em = Emitter {
            first: &ck.first,
            code: &mut prog.code,
            prims: &mut prog.prims,
            depth: 0,
            max: 0,
        };
        em.emit(e);
        prog.max_stack = prog.max_stack.max(em.max);
        prog.sensors.push(SensorDef {
            name: d.name.clone(),
            ty: ck.names[i].checked.unwrap_or(Type::Bool),
            line: d.line,
            source: span_text(src, e.span),
            code: start..prog.code.len(),
        });
    }
    Some(prog)
}

/// Check a standalone expression against a compiled program's sensors (all of them visible).
pub fn check_expression(
    expr: &Expr,
    program: &Program,
    src: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Expression> {
    let names: Vec<NameInfo> = program
        .sensors
        .iter()
        .map(|s| NameInfo {
            name: s.name.clone(),
            line: s.line,
            shape: Some(s.ty),
            checked: Some(s.ty),
            alias_cycle: false,
        })
        .collect();
    let first = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    let n = names.len();
    let before = diags.len();
    let mut ck = Checker {
        names,
        first,
        deps: vec![Vec::new(); n],
        cur: n,
        cycles: Vec::new(),
        diags,
    };
    let ty = ck.expr(expr);
    if ck.diags.len() > before {
        return None;
    }
    let ty = ty?;
    let mut code = Vec::new();
    let mut prims = Vec::new();
    let mut em = Emitter {
        first: &ck.first,
        code: &mut code,
        prims: &mut prims,
        depth: 0,
        max: 0,
    };
    em.emit(expr);
    let max_stack = em.max;
    let filters = prims
        .iter()
        .map(|p| match p {
            Primitive::Fraction(f) => Some(crate::pixels::PixelFilter::new(f)),
            _ => None,
        })
        .collect();
    Some(Expression {
        code,
        prims,
        filters,
        max_stack,
        sensor_count: n,
        ty,
        source: span_text(src, expr.span),
    })
}

fn span_text(src: &str, span: Span) -> String {
    src.lines()
        .nth(span.line.saturating_sub(1) as usize)
        .map(|l| {
            l.chars()
                .skip(span.col.saturating_sub(1) as usize)
                .take(span.len as usize)
                .collect()
        })
        .unwrap_or_default()
}

fn check_name(d: &Decl, diags: &mut Vec<Diagnostic>) {
    let n = &d.name;
    let valid = n.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        let lower = n.to_ascii_lowercase();
        let hint = if lower.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
            format!("rename it to `{lower}`: names are lowercase letters, digits and underscores")
        } else {
            "names start with a lowercase letter, then lowercase letters, digits and underscores".to_string()
        };
        diags.push(Diagnostic::new(
            DiagKind::BadName,
            d.name_span,
            format!("sensor name `{n}` is not lowercase `[a-z][a-z0-9_]*`"),
            hint,
        ));
    } else if PRIMITIVES.contains(&n.as_str()) {
        diags.push(Diagnostic::new(
            DiagKind::ReservedName,
            d.name_span,
            format!("`{n}` is a primitive and cannot name a sensor"),
            "choose another name, e.g. one that says what the region shows",
        ));
    }
}

fn collect_refs(e: &Expr, first: &HashMap<String, usize>, out: &mut Vec<usize>) {
    match &e.kind {
        ExprKind::Name(n) => {
            if let Some(&j) = first.get(n) {
                out.push(j);
            }
        }
        ExprKind::Not(a) => collect_refs(a, first, out),
        ExprKind::And(a, b) | ExprKind::Or(a, b) | ExprKind::Cmp(_, a, b) => {
            collect_refs(a, first, out);
            collect_refs(b, first, out);
        }
        _ => {}
    }
}

/// Whether declaration `i` is only a chain of bare references (`a = @b`, `b = a`, ...) back to itself.
fn alias_cycle(i: usize, decls: &[Decl], first: &HashMap<String, usize>) -> bool {
    let mut seen = vec![false; decls.len()];
    let mut k = i;
    loop {
        if std::mem::replace(&mut seen[k], true) {
            return k == i;
        }
        match decls[k].expr.as_ref().map(|e| &e.kind) {
            Some(ExprKind::Name(n) | ExprKind::Prev(n)) => match first.get(n) {
                Some(&j) => k = j,
                None => return false,
            },
            _ => return false,
        }
    }
}

/// The type a declaration would have, judged by the shape of its expression.
fn shape(i: usize, decls: &[Decl], first: &HashMap<String, usize>, visiting: &mut [bool]) -> Option<Type> {
    if visiting[i] {
        return None;
    }
    visiting[i] = true;
    let e = decls[i].expr.as_ref()?;
    match &e.kind {
        ExprKind::Number { .. } => Some(Type::Number),
        ExprKind::Bool(_) | ExprKind::Not(_) | ExprKind::And(..) | ExprKind::Or(..) | ExprKind::Cmp(..) => {
            Some(Type::Bool)
        }
        ExprKind::Call { name, .. } => match name.as_str() {
            "region_fraction" | "region_integer" => Some(Type::Number),
            "template_present" => Some(Type::Bool),
            _ => None,
        },
        ExprKind::Name(n) | ExprKind::Prev(n) => {
            let j = *first.get(n)?;
            shape(j, decls, first, visiting)
        }
        ExprKind::Str(_) | ExprKind::List(_) => None,
    }
}

impl Checker<'_> {
    fn push(&mut self, kind: DiagKind, span: Span, msg: impl Into<String>, hint: impl Into<String>) {
        self.diags.push(Diagnostic::new(kind, span, msg, hint));
    }

    /// Whether declaration `from` reaches `to` through current-value references.
    fn reaches(&self, from: usize, to: usize) -> Option<Vec<usize>> {
        let mut stack = vec![(from, vec![from])];
        let mut seen = vec![false; self.deps.len()];
        while let Some((n, path)) = stack.pop() {
            if n == to {
                return Some(path);
            }
            if std::mem::replace(&mut seen[n], true) {
                continue;
            }
            for &m in &self.deps[n] {
                let mut p = path.clone();
                p.push(m);
                stack.push((m, p));
            }
        }
        None
    }

    /// The type of `e`, or `None` after reporting (or when an earlier error makes it unknown).
    fn expr(&mut self, e: &Expr) -> Option<Type> {
        match &e.kind {
            ExprKind::Number { .. } => Some(Type::Number),
            ExprKind::Bool(_) => Some(Type::Bool),
            ExprKind::Str(_) => {
                self.push(
                    DiagKind::TypeMismatch,
                    e.span,
                    "a string is only valid as a template name",
                    format!("use it inside {TEMPLATE_USAGE}"),
                );
                None
            }
            ExprKind::List(_) => {
                self.push(
                    DiagKind::TypeMismatch,
                    e.span,
                    "a list is only valid as a region or a hue range argument",
                    format!("use it inside a primitive, e.g. {FRACTION_USAGE}"),
                );
                None
            }
            ExprKind::Name(n) => self.name_ref(n, e.span),
            ExprKind::Prev(n) => match self.first.get(n) {
                Some(&j) if self.names[j].alias_cycle => {
                    self.push(
                        DiagKind::Cycle,
                        e.span,
                        format!("`@{n}` never has a value: `{n}` is defined only through references back to itself"),
                        format!("define `{n}` from a primitive, a literal or a comparison"),
                    );
                    None
                }
                Some(&j) => self.names[j].shape,
                None => {
                    self.unknown_name(n, e.span);
                    None
                }
            },
            ExprKind::Not(a) => {
                let t = self.expr(a)?;
                if t != Type::Bool {
                    self.push(
                        DiagKind::TypeMismatch,
                        a.span,
                        format!("`not` needs a boolean, but this is {t}"),
                        "turn the number into a condition first, e.g. `not (x > 0)`",
                    );
                    return None;
                }
                Some(Type::Bool)
            }
            ExprKind::And(a, b) | ExprKind::Or(a, b) => {
                let word = if matches!(e.kind, ExprKind::And(..)) {
                    "and"
                } else {
                    "or"
                };
                let ta = self.expr(a);
                let tb = self.expr(b);
                let mut ok = ta.is_some() && tb.is_some();
                for (t, side) in [(ta, a), (tb, b)] {
                    if t == Some(Type::Number) {
                        self.push(
                            DiagKind::TypeMismatch,
                            side.span,
                            format!("`{word}` needs booleans on both sides, but this is a number"),
                            "turn the number into a condition with a comparison, e.g. `health > 0.5`",
                        );
                        ok = false;
                    }
                }
                ok.then_some(Type::Bool)
            }
            ExprKind::Cmp(op, a, b) => {
                let ta = self.expr(a);
                let tb = self.expr(b);
                let mut ok = ta.is_some() && tb.is_some();
                for (t, side) in [(ta, a), (tb, b)] {
                    if t == Some(Type::Bool) {
                        self.push(
                            DiagKind::TypeMismatch,
                            side.span,
                            format!("`{}` compares numbers, but this is a boolean", op.as_str()),
                            "use the boolean directly (`x`, `not x`); to detect a change write `x and not @x`",
                        );
                        ok = false;
                    }
                }
                ok.then_some(Type::Bool)
            }
            ExprKind::Call {
                name,
                name_span,
                args,
            } => {
                if !PRIMITIVES.contains(&name.as_str()) {
                    let hint = if self.first.contains_key(name) {
                        format!("`{name}` is a sensor, not a function; refer to it without parentheses")
                    } else if let Some(s) = did_you_mean(name, PRIMITIVES) {
                        format!("did you mean `{s}`?")
                    } else {
                        "the primitives are region_fraction, region_integer and template_present; there are no user functions"
                            .to_string()
                    };
                    self.push(
                        DiagKind::UnknownFunction,
                        *name_span,
                        format!("unknown function `{name}`"),
                        hint,
                    );
                    return None;
                }
                let p = primitive(name, *name_span, e.span, args, self.diags)?;
                Some(match p {
                    Primitive::Fraction(_) | Primitive::Integer { .. } => Type::Number,
                    Primitive::Template { .. } => Type::Bool,
                })
            }
        }
    }

    fn unknown_name(&mut self, n: &str, span: Span) {
        let hint = if PRIMITIVES.contains(&n) {
            format!(
                "`{n}` is a primitive: call it with its arguments, e.g. {}",
                usage(n)
            )
        } else if let Some(s) = did_you_mean(n, self.names.iter().map(|x| x.name.as_str())) {
            format!("did you mean `{s}`?")
        } else {
            format!("declare `{n} = ...` on an earlier line")
        };
        self.push(DiagKind::UnknownName, span, format!("unknown sensor `{n}`"), hint);
    }

    fn name_ref(&mut self, n: &str, span: Span) -> Option<Type> {
        let Some(&j) = self.first.get(n) else {
            self.unknown_name(n, span);
            return None;
        };
        if j == self.cur {
            self.push(
                DiagKind::Cycle,
                span,
                format!("`{n}` refers to its own current value"),
                format!("use `@{n}` for the previous tick's value"),
            );
            return None;
        }
        if j > self.cur {
            let here = self.names[self.cur].name.clone();
            let line = self.names[j].line;
            if let Some(path) = self.reaches(j, self.cur) {
                let mut members = path.clone();
                members.sort_unstable();
                members.dedup();
                if self.cycles.contains(&members) {
                    return None;
                }
                self.cycles.push(members);
                let mut chain = vec![here.clone()];
                chain.extend(path.iter().map(|&k| self.names[k].name.clone()));
                self.push(
                    DiagKind::Cycle,
                    span,
                    format!("cycle: {}", chain.join(" → ")),
                    format!("break the cycle by using the previous tick's value `@{n}`"),
                );
            } else {
                self.push(
                    DiagKind::DeclaredLater,
                    span,
                    format!("`{n}` is declared later, on line {line}"),
                    format!("move this declaration below line {line} (declaration order is evaluation order), or use `@{n}`"),
                );
            }
            return None;
        }
        self.names[j].checked
    }
}

fn usage(name: &str) -> &'static str {
    match name {
        "region_fraction" => FRACTION_USAGE,
        "region_integer" => INTEGER_USAGE,
        _ => TEMPLATE_USAGE,
    }
}

/// Validate a primitive call; every problem is reported. `None` when anything was wrong.
pub(crate) fn primitive(
    name: &str,
    name_span: Span,
    call_span: Span,
    args: &[Arg],
    diags: &mut Vec<Diagnostic>,
) -> Option<Primitive> {
    let before = diags.len();
    let positional: Vec<&Expr> = args
        .iter()
        .filter_map(|a| match &a.kind {
            ArgKind::Positional(e) => Some(e),
            _ => None,
        })
        .collect();
    let want = if name == "template_present" { 2 } else { 1 };
    if positional.len() != want {
        let what = if want == 1 {
            "1 positional argument (the region)"
        } else {
            "2 arguments (name and threshold)"
        };
        let span = positional.get(want).map(|e| e.span).unwrap_or(call_span);
        diags.push(Diagnostic::new(
            DiagKind::WrongArity,
            if positional.len() > want { span } else { name_span },
            format!("`{name}` takes {what}, but {} were given", positional.len()),
            format!("write {}", usage(name)),
        ));
    }
    let region = positional.first().and_then(|e| {
        if name == "template_present" {
            None
        } else {
            region(e, diags)
        }
    });
    let mut spec = FractionSpec::default();
    let mut digits = None;
    let mut hue_seen = false;
    for a in args {
        let ArgKind::Keyword {
            name: kw,
            name_span: kw_span,
            op,
            op_span,
            value,
        } = &a.kind
        else {
            continue;
        };
        let allowed: &[&str] = match name {
            "region_fraction" => &["hue", "saturation", "value"],
            "region_integer" => &["digits"],
            _ => &[],
        };
        if !allowed.contains(&kw.as_str()) {
            let hint = match did_you_mean(kw, allowed.iter().copied()) {
                Some(s) => format!("did you mean `{s}`? {} accepts {}", name, list_or_none(allowed)),
                None => format!("{name} accepts {}; write {}", list_or_none(allowed), usage(name)),
            };
            diags.push(Diagnostic::new(
                DiagKind::BadArgument,
                *kw_span,
                format!("`{name}` has no argument `{kw}`"),
                hint,
            ));
            continue;
        }
        match kw.as_str() {
            "hue" => {
                if *op != KwOp::Assign {
                    diags.push(Diagnostic::new(
                        DiagKind::BadArgument,
                        *op_span,
                        "hue is a range, given with `=`",
                        "write `hue=[lo, hi]` in degrees, e.g. `hue=[90, 150]` for green",
                    ));
                    continue;
                }
                if std::mem::replace(&mut hue_seen, true) {
                    diags.push(Diagnostic::new(
                        DiagKind::BadHueRange,
                        a.span,
                        "hue is given twice",
                        "give one range; a range with lo > hi wraps through red, e.g. `hue=[350, 10]`",
                    ));
                    continue;
                }
                spec.hue = hue_range(value, diags);
            }
            "saturation" | "value" => {
                let bound = bound(kw, *op, *op_span, value, diags);
                let list = if kw == "saturation" {
                    &mut spec.saturation
                } else {
                    &mut spec.value
                };
                if let Some(b) = bound {
                    let lower = matches!(b.op, CmpOp::Gt | CmpOp::Ge);
                    if list
                        .iter()
                        .any(|x| matches!(x.op, CmpOp::Gt | CmpOp::Ge) == lower)
                    {
                        diags.push(Diagnostic::new(
                            DiagKind::BadArgument,
                            a.span,
                            format!(
                                "{kw} already has a{} bound",
                                if lower { " lower" } else { "n upper" }
                            ),
                            format!("give at most one lower and one upper bound, e.g. `{kw}>0.2, {kw}<0.8`"),
                        ));
                    } else {
                        list.push(b);
                    }
                }
            }
            _ => {
                // digits
                if *op != KwOp::Assign {
                    diags.push(Diagnostic::new(
                        DiagKind::BadArgument,
                        *op_span,
                        "digits is given with `=`",
                        "write `digits=N` with N the most digits the number can have",
                    ));
                    continue;
                }
                match value.kind {
                    ExprKind::Number { int: Some(n), .. } if (1..=MAX_DIGITS).contains(&n) => {
                        if digits.replace(n as u32).is_some() {
                            diags.push(Diagnostic::new(
                                DiagKind::BadArgument,
                                a.span,
                                "digits is given twice",
                                "give `digits=N` once",
                            ));
                        }
                    }
                    _ => diags.push(Diagnostic::new(
                        DiagKind::BadArgument,
                        value.span,
                        format!("digits must be a whole number from 1 to {MAX_DIGITS}"),
                        "write e.g. `digits=6` for a counter of at most six digits",
                    )),
                }
            }
        }
    }
    let template = if name == "template_present" {
        let tname = match positional.first().map(|e| &e.kind) {
            Some(ExprKind::Str(s)) if !s.trim().is_empty() => Some(s.clone()),
            Some(_) => {
                diags.push(Diagnostic::new(
                    DiagKind::BadArgument,
                    positional[0].span,
                    "the first argument of template_present is the template's name, a non-empty string",
                    "write e.g. `template_present(\"pause_panel\", 0.9)`",
                ));
                None
            }
            None => None,
        };
        let threshold = positional.get(1).and_then(|e| match e.kind {
            ExprKind::Number { value, .. } if (0.0..=1.0).contains(&value) => Some(value as f32),
            _ => {
                diags.push(Diagnostic::new(
                    DiagKind::BadThreshold,
                    e.span,
                    "the match threshold must be a number from 0 to 1",
                    "write e.g. `0.9` (a normalised correlation score)",
                ));
                None
            }
        });
        tname.zip(threshold)
    } else {
        None
    };
    if diags.len() > before {
        return None;
    }
    match name {
        "region_fraction" => {
            spec.region = region?;
            Some(Primitive::Fraction(spec))
        }
        "region_integer" => Some(Primitive::Integer {
            region: region?,
            digits,
        }),
        _ => template.map(|(name, threshold)| Primitive::Template { name, threshold }),
    }
}

fn list_or_none(allowed: &[&str]) -> String {
    if allowed.is_empty() {
        "no keyword arguments".to_string()
    } else {
        allowed
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn region(e: &Expr, diags: &mut Vec<Diagnostic>) -> Option<Rect> {
    let bad = |diags: &mut Vec<Diagnostic>, span: Span, msg: &str| {
        diags.push(Diagnostic::new(
            DiagKind::BadRegion,
            span,
            msg.to_string(),
            REGION_HINT,
        ));
        None
    };
    let ExprKind::List(items) = &e.kind else {
        return bad(diags, e.span, "expected a region `[x, y, width, height]`");
    };
    if items.len() != 4 {
        return bad(
            diags,
            e.span,
            &format!("a region has 4 numbers, this list has {}", items.len()),
        );
    }
    let mut v = [0i64; 4];
    let mut ok = true;
    for (k, it) in items.iter().enumerate() {
        let what = ["x", "y", "width", "height"][k];
        let min = if k < 2 { 0 } else { 1 };
        match it.kind {
            ExprKind::Number { int: Some(n), .. } if (min..=MAX_COORD).contains(&n) => v[k] = n,
            ExprKind::Number { int: Some(n), .. } => {
                ok = false;
                let msg = if n < min {
                    format!("region {what} must be at least {min}, got {n}")
                } else {
                    format!("region {what} {n} is larger than {MAX_COORD}")
                };
                bad(diags, it.span, &msg);
            }
            _ => {
                ok = false;
                bad(
                    diags,
                    it.span,
                    &format!("region {what} must be a whole number of pixels"),
                );
            }
        }
    }
    ok.then(|| Rect::new(v[0] as i32, v[1] as i32, v[2] as u32, v[3] as u32))
}

fn hue_range(e: &Expr, diags: &mut Vec<Diagnostic>) -> Option<(f32, f32)> {
    const HINT: &str = "hue is `[lo, hi]` in degrees 0..360; lo > hi wraps through red, e.g. `hue=[350, 10]`";
    let ExprKind::List(items) = &e.kind else {
        diags.push(Diagnostic::new(
            DiagKind::BadHueRange,
            e.span,
            "hue must be a range `[lo, hi]`",
            HINT,
        ));
        return None;
    };
    if items.len() != 2 {
        diags.push(Diagnostic::new(
            DiagKind::BadHueRange,
            e.span,
            format!("a hue range has 2 numbers, this list has {}", items.len()),
            HINT,
        ));
        return None;
    }
    let mut v = [0f32; 2];
    let mut ok = true;
    for (k, it) in items.iter().enumerate() {
        match it.kind {
            ExprKind::Number { value, .. } if (0.0..=360.0).contains(&value) => v[k] = value as f32,
            _ => {
                ok = false;
                diags.push(Diagnostic::new(
                    DiagKind::BadHueRange,
                    it.span,
                    "hue bounds are degrees from 0 to 360",
                    HINT,
                ));
            }
        }
    }
    ok.then_some((v[0], v[1]))
}

fn bound(kw: &str, op: KwOp, op_span: Span, value: &Expr, diags: &mut Vec<Diagnostic>) -> Option<Bound> {
    let op = match op {
        KwOp::Cmp(c @ (CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge)) => c,
        _ => {
            diags.push(Diagnostic::new(
                DiagKind::BadArgument,
                op_span,
                format!("{kw} is compared with `>`, `>=`, `<` or `<=`"),
                format!("write e.g. `{kw}>0.5`"),
            ));
            return None;
        }
    };
    match value.kind {
        ExprKind::Number { value: t, .. } if (0.0..=1.0).contains(&t) => Some(Bound {
            op,
            threshold: t as f32,
        }),
        _ => {
            diags.push(Diagnostic::new(
                DiagKind::BadThreshold,
                value.span,
                format!("{kw} is a fraction from 0 to 1"),
                format!("write e.g. `{kw}>0.5` (HSV {kw}, 0 = none, 1 = full)"),
            ));
            None
        }
    }
}

struct Emitter<'a> {
    first: &'a HashMap<String, usize>,
    code: &'a mut Vec<Op>,
    prims: &'a mut Vec<Primitive>,
    depth: usize,
    max: usize,
}

impl Emitter<'_> {
    fn push(&mut self, op: Op, delta: isize) {
        self.code.push(op);
        self.depth = (self.depth as isize + delta).max(0) as usize;
        self.max = self.max.max(self.depth);
    }

    fn emit(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Number { int: Some(i), .. } => self.push(Op::Int(*i), 1),
            ExprKind::Number { value, .. } => self.push(Op::Num(*value), 1),
            ExprKind::Bool(b) => self.push(Op::Bool(*b), 1),
            ExprKind::Name(n) => {
                let j = self.first.get(n).copied().unwrap_or(0);
                self.push(Op::Cur(j as u32), 1)
            }
            ExprKind::Prev(n) => {
                let j = self.first.get(n).copied().unwrap_or(0);
                self.push(Op::Prev(j as u32), 1)
            }
            ExprKind::Not(a) => {
                self.emit(a);
                self.push(Op::Not, 0);
            }
            ExprKind::And(a, b) => {
                self.emit(a);
                self.emit(b);
                self.push(Op::And, -1);
            }
            ExprKind::Or(a, b) => {
                self.emit(a);
                self.emit(b);
                self.push(Op::Or, -1);
            }
            ExprKind::Cmp(op, a, b) => {
                self.emit(a);
                self.emit(b);
                self.push(Op::Cmp(*op), -1);
            }
            ExprKind::Call {
                name,
                name_span,
                args,
            } => {
                let mut scratch = Vec::new();
                let k = match primitive(name, *name_span, e.span, args, &mut scratch) {
                    Some(p) => match self.prims.iter().position(|q| *q == p) {
                        Some(k) => k,
                        None => {
                            self.prims.push(p);
                            self.prims.len() - 1
                        }
                    },
                    None => 0,
                };
                self.push(Op::Prim(k as u32), 1);
            }
            // Rejected by the checker; never emitted for a program without errors.
            ExprKind::Str(_) | ExprKind::List(_) => self.push(Op::Bool(false), 1),
        }
    }
}
