//! The parser: tokens → declarations, one per line; a syntax error skips the rest of its line only.
//!
//! Grammar (lowest precedence first):
//! `decl := NAME "=" expr`, `expr := and ("or" and)*`, `and := not ("and" not)*`,
//! `not := "not" not | cmp`, `cmp := atom (CMP atom)?`,
//! `atom := NUMBER | "true" | "false" | STRING | "[" list "]" | NAME | "@" NAME | NAME "(" args ")" | "(" expr ")"`,
//! `arg := NAME ("=" | CMP) atom | expr`.

use crate::ast::{Arg, ArgKind, Decl, Expr, ExprKind, KwOp};
use crate::diag::{DiagKind, Diagnostic, Span};
use crate::lexer::{Tok, Token};

/// Maximum nesting of parentheses and `not`; deeper input is refused rather than risking the stack.
pub const MAX_DEPTH: u32 = 64;

struct Parser<'t> {
    toks: &'t [Token],
    pos: usize,
    depth: u32,
}

type PResult<T> = Result<T, Diagnostic>;

/// Parse every line; syntax errors go to `diags` unless the line already had a lexical error.
pub fn parse(toks: &[Token], diags: &mut Vec<Diagnostic>, bad_lines: &[u32]) -> Vec<Decl> {
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
    };
    let mut decls = Vec::new();
    loop {
        match p.peek() {
            Tok::Eof => break,
            Tok::Newline => {
                p.pos += 1;
                continue;
            }
            _ => {}
        }
        let line = p.span().line;
        let lexically_bad = bad_lines.contains(&line);
        match p.decl() {
            Ok(d) => decls.push(d),
            Err((partial, diag)) => {
                if !lexically_bad {
                    diags.push(diag);
                }
                if let Some((name, name_span)) = partial {
                    decls.push(Decl {
                        name,
                        name_span,
                        expr: None,
                        line,
                    });
                }
                p.skip_line();
            }
        }
    }
    decls
}

/// Parse a single expression filling the whole (one-line) input; errors go to `diags`.
pub fn parse_expression(toks: &[Token], diags: &mut Vec<Diagnostic>, bad_lines: &[u32]) -> Option<Expr> {
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
    };
    let quiet = !bad_lines.is_empty();
    if matches!(p.peek(), Tok::Newline | Tok::Eof) {
        if !quiet {
            diags.push(p.err("expected an expression", "write e.g. `coins > @coins`"));
        }
        return None;
    }
    let e = p.expr().and_then(|e| {
        if matches!(p.peek(), Tok::Newline | Tok::Eof) {
            Ok(e)
        } else {
            Err(p.err(
                format!("unexpected {} after the expression", p.peek().describe()),
                "an expression has no `name =`; join conditions with `and` / `or`",
            ))
        }
    });
    match e {
        Ok(e) if !quiet => Some(e),
        Ok(_) => None,
        Err(d) => {
            if !quiet {
                diags.push(d);
            }
            None
        }
    }
}

impl<'t> Parser<'t> {
    fn peek(&self) -> &Tok {
        self.toks.get(self.pos).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        self.toks.get(self.pos + n).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }

    fn span(&self) -> Span {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map(|t| t.span)
            .unwrap_or_default()
    }

    fn prev_span(&self) -> Span {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map(|t| t.span)
            .unwrap_or_default()
    }

    fn bump(&mut self) -> Token {
        let t = self.toks.get(self.pos).cloned().unwrap_or(Token {
            tok: Tok::Eof,
            span: self.span(),
        });
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn skip_line(&mut self) {
        while !matches!(self.peek(), Tok::Newline | Tok::Eof) {
            self.pos += 1;
        }
    }

    fn err(&self, msg: impl Into<String>, hint: impl Into<String>) -> Diagnostic {
        Diagnostic::new(DiagKind::Syntax, self.span(), msg, hint)
    }

    fn expect(&mut self, want: Tok, what: &str, hint: &str) -> PResult<Span> {
        if *self.peek() == want {
            Ok(self.bump().span)
        } else {
            Err(self.err(format!("expected {what}, found {}", self.peek().describe()), hint))
        }
    }

    #[allow(clippy::type_complexity)]
    fn decl(&mut self) -> Result<Decl, (Option<(String, Span)>, Diagnostic)> {
        self.depth = 0;
        let start = self.span();
        let (name, name_span) = match self.peek().clone() {
            Tok::Ident(n) => {
                self.bump();
                (n, start)
            }
            other => {
                return Err((
                    None,
                    self.err(
                        format!(
                            "expected a sensor name at the start of the line, found {}",
                            other.describe()
                        ),
                        "each line declares one sensor: `name = expression`",
                    ),
                ))
            }
        };
        let named = Some((name.clone(), name_span));
        if *self.peek() != Tok::Assign {
            let d = self.err(
                format!(
                    "expected `=` after the sensor name `{name}`, found {}",
                    self.peek().describe()
                ),
                "write `name = expression`",
            );
            return Err((named, d));
        }
        self.bump();
        if matches!(self.peek(), Tok::Newline | Tok::Eof) {
            let d = self.err(
                "expected an expression after `=`",
                "write an expression, e.g. `coins > @coins`",
            );
            return Err((named, d));
        }
        let expr = match self.expr() {
            Ok(e) => e,
            Err(d) => return Err((named, d)),
        };
        if !matches!(self.peek(), Tok::Newline | Tok::Eof) {
            let hint = match self.peek() {
                Tok::Cmp(_) => "comparisons do not chain; write `a < b and b < c`",
                Tok::Ident(_) => "join conditions with `and` / `or`; one declaration per line",
                _ => "one declaration per line: `name = expression`",
            };
            let d = self.err(
                format!("unexpected {} after the expression", self.peek().describe()),
                hint,
            );
            return Err((named, d));
        }
        Ok(Decl {
            name,
            name_span,
            expr: Some(expr),
            line: start.line,
        })
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(
                format!("expression nested more than {MAX_DEPTH} levels deep"),
                "split it into several sensors that refer to each other",
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let mut lhs = self.and()?;
        while *self.peek() == Tok::Or {
            self.bump();
            let rhs = self.and()?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Or(Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn and(&mut self) -> PResult<Expr> {
        let mut lhs = self.not()?;
        while *self.peek() == Tok::And {
            self.bump();
            let rhs = self.not()?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::And(Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    fn not(&mut self) -> PResult<Expr> {
        if *self.peek() == Tok::Not {
            let start = self.bump().span;
            self.enter()?;
            let inner = self.not()?;
            self.depth -= 1;
            let span = start.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(inner)),
                span,
            });
        }
        self.cmp()
    }

    fn cmp(&mut self) -> PResult<Expr> {
        let lhs = self.atom()?;
        if let Tok::Cmp(op) = *self.peek() {
            self.bump();
            let rhs = self.atom()?;
            let span = lhs.span.to(rhs.span);
            return Ok(Expr {
                kind: ExprKind::Cmp(op, Box::new(lhs), Box::new(rhs)),
                span,
            });
        }
        Ok(lhs)
    }

    fn atom(&mut self) -> PResult<Expr> {
        let t = self.bump();
        let span = t.span;
        let kind = match t.tok {
            Tok::Number { value, int } => ExprKind::Number { value, int },
            Tok::True => ExprKind::Bool(true),
            Tok::False => ExprKind::Bool(false),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::At => {
                let n = self.bump();
                match n.tok {
                    Tok::Ident(name) => {
                        return Ok(Expr {
                            kind: ExprKind::Prev(name),
                            span: span.to(n.span),
                        })
                    }
                    other => {
                        return Err(Diagnostic::new(
                            DiagKind::Syntax,
                            n.span,
                            format!("expected a sensor name after `@`, found {}", other.describe()),
                            "`@name` is the previous tick's value of the sensor `name`",
                        ))
                    }
                }
            }
            Tok::LParen => {
                let inner = self.expr()?;
                let close = self.expect(Tok::RParen, "`)`", "close the parenthesis on the same line")?;
                return Ok(Expr {
                    kind: inner.kind,
                    span: span.to(close),
                });
            }
            Tok::LBracket => {
                self.enter()?;
                let mut items = Vec::new();
                if *self.peek() != Tok::RBracket {
                    loop {
                        items.push(self.atom()?);
                        if *self.peek() == Tok::Comma {
                            self.bump();
                            continue;
                        }
                        break;
                    }
                }
                let close =
                    self.expect(Tok::RBracket, "`]` or `,`", "a region is `[x, y, width, height]`")?;
                self.depth -= 1;
                return Ok(Expr {
                    kind: ExprKind::List(items),
                    span: span.to(close),
                });
            }
            Tok::Ident(name) => {
                if *self.peek() == Tok::LParen {
                    self.bump();
                    let args = self.args()?;
                    let close = self.prev_span();
                    return Ok(Expr {
                        kind: ExprKind::Call {
                            name,
                            name_span: span,
                            args,
                        },
                        span: span.to(close),
                    });
                }
                ExprKind::Name(name)
            }
            other => {
                self.pos -= usize::from(self.pos > 0 && !matches!(other, Tok::Eof));
                let hint = match other {
                    Tok::Newline | Tok::Eof => "the expression is incomplete; finish it on this line",
                    Tok::Assign => "`=` declares; compare with `==`",
                    _ => "expected a number, `true`/`false`, a sensor name, `@name`, a primitive call or `(`",
                };
                return Err(self.err(format!("expected a value, found {}", other.describe()), hint));
            }
        };
        Ok(Expr { kind, span })
    }

    /// Arguments after `(` up to and including `)`.
    fn args(&mut self) -> PResult<Vec<Arg>> {
        let mut args = Vec::new();
        if *self.peek() == Tok::RParen {
            self.bump();
            return Ok(args);
        }
        loop {
            let start = self.span();
            let is_kw =
                matches!(self.peek(), Tok::Ident(_)) && matches!(self.peek_at(1), Tok::Assign | Tok::Cmp(_));
            if is_kw {
                let n = self.bump();
                let name = match n.tok {
                    Tok::Ident(s) => s,
                    _ => String::new(),
                };
                let o = self.bump();
                let op = match o.tok {
                    Tok::Cmp(c) => KwOp::Cmp(c),
                    _ => KwOp::Assign,
                };
                let value = self.atom()?;
                let span = start.to(value.span);
                args.push(Arg {
                    kind: ArgKind::Keyword {
                        name,
                        name_span: n.span,
                        op,
                        op_span: o.span,
                        value,
                    },
                    span,
                });
            } else {
                let e = self.expr()?;
                let span = e.span;
                args.push(Arg {
                    kind: ArgKind::Positional(e),
                    span,
                });
            }
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RParen => {
                    self.bump();
                    return Ok(args);
                }
                other => {
                    return Err(self.err(
                        format!(
                            "expected `,` or `)` in the argument list, found {}",
                            other.describe()
                        ),
                        "separate arguments with `,` and close the call with `)` on the same line",
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;
    use crate::value::CmpOp;

    fn parse_src(src: &str) -> (Vec<Decl>, Vec<Diagnostic>) {
        let mut d = Vec::new();
        let mut bad = Vec::new();
        let t = lex(src, &mut d, &mut bad);
        let decls = parse(&t, &mut d, &bad);
        (decls, d)
    }

    #[test]
    fn precedence_not_binds_tighter_than_and_looser_than_compare() {
        let (d, e) = parse_src("b = a and not x > 3 or c");
        assert!(e.is_empty(), "{e:?}");
        let ExprKind::Or(l, _) = &d[0].expr.as_ref().unwrap().kind else {
            panic!()
        };
        let ExprKind::And(_, r) = &l.kind else { panic!() };
        let ExprKind::Not(inner) = &r.kind else { panic!() };
        assert!(matches!(inner.kind, ExprKind::Cmp(CmpOp::Gt, _, _)));
    }

    #[test]
    fn keyword_arguments_and_lists() {
        let (d, e) =
            parse_src("h = region_fraction([1, 2, 3, 4], hue=[350, 10], saturation>0.5, value<=0.9)");
        assert!(e.is_empty(), "{e:?}");
        let ExprKind::Call { name, args, .. } = &d[0].expr.as_ref().unwrap().kind else {
            panic!()
        };
        assert_eq!(name, "region_fraction");
        assert_eq!(args.len(), 4);
        assert!(matches!(
            args[2].kind,
            ArgKind::Keyword {
                op: KwOp::Cmp(CmpOp::Gt),
                ..
            }
        ));
    }

    #[test]
    fn each_bad_line_reports_once_and_parsing_continues() {
        let (d, e) = parse_src("a = (1 > 2\nb = 1 < 2 < 3\nc = \nok = true\n= 3\nd e");
        assert_eq!(e.len(), 5, "{e:#?}");
        assert_eq!(
            e.iter().map(|d| d.span.line).collect::<Vec<_>>(),
            vec![1, 2, 3, 5, 6]
        );
        assert!(e[1].hint.contains("do not chain"));
        let names: Vec<_> = d.iter().map(|d| (d.name.as_str(), d.expr.is_some())).collect();
        assert_eq!(
            names,
            vec![
                ("a", false),
                ("b", false),
                ("c", false),
                ("ok", true),
                ("d", false)
            ]
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let src = format!("a = {}true{}", "(".repeat(10_000), ")".repeat(10_000));
        let (_, e) = parse_src(&src);
        assert_eq!(e.len(), 1);
        assert!(e[0].message.contains("nested"));
        let src = format!("a = {}true", "not ".repeat(10_000));
        let (_, e) = parse_src(&src);
        assert_eq!(e.len(), 1);
    }
}
