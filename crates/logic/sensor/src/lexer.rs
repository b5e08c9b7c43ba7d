//! The lexer: sensor source text → tokens with line/column spans; lexical errors are collected, not fatal.

use crate::diag::{DiagKind, Diagnostic, Span};
use crate::value::CmpOp;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    /// A numeric literal; `int` when written without a decimal point.
    Number {
        value: f64,
        int: Option<i64>,
    },
    Str(String),
    At,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Assign,
    Cmp(CmpOp),
    And,
    Or,
    Not,
    True,
    False,
    Newline,
    Eof,
}

impl Tok {
    /// How the token is named in "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Number { .. } => "a number".into(),
            Tok::Str(_) => "a string".into(),
            Tok::At => "`@`".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Assign => "`=`".into(),
            Tok::Cmp(op) => format!("`{}`", op.as_str()),
            Tok::And => "`and`".into(),
            Tok::Or => "`or`".into(),
            Tok::Not => "`not`".into(),
            Tok::True => "`true`".into(),
            Tok::False => "`false`".into(),
            Tok::Newline => "the end of the line".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Tokenise `src`. Every line ends with a `Newline` token and the stream ends with `Eof`.
/// Lexical errors go to `diags`; the offending characters are skipped so lexing continues.
/// `bad_lines` lists the lines that had a lexical error (the parser stays quiet about them).
pub fn lex(src: &str, diags: &mut Vec<Diagnostic>, bad_lines: &mut Vec<u32>) -> Vec<Token> {
    let mut out = Vec::new();
    let mut line_no = 0u32;
    for raw_line in src.split('\n') {
        line_no += 1;
        let line = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        let before = diags.len();
        lex_line(line, line_no, &mut out, diags);
        if diags.len() > before {
            bad_lines.push(line_no);
        }
        let end_col = line.chars().count() as u32 + 1;
        out.push(Token {
            tok: Tok::Newline,
            span: Span::new(line_no, end_col, 1),
        });
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(line_no.max(1), 1, 1),
    });
    out
}

fn lex_line(line: &str, ln: u32, out: &mut Vec<Token>, diags: &mut Vec<Diagnostic>) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0usize;
    let sp = |start: usize, end: usize| Span::new(ln, start as u32 + 1, (end - start).max(1) as u32);
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        match c {
            ' ' | '\t' => i += 1,
            '#' => break,
            '(' | ')' | '[' | ']' | ',' | '@' => {
                let tok = match c {
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '[' => Tok::LBracket,
                    ']' => Tok::RBracket,
                    ',' => Tok::Comma,
                    _ => Tok::At,
                };
                i += 1;
                out.push(Token {
                    tok,
                    span: sp(start, i),
                });
            }
            '=' | '<' | '>' | '!' => {
                let next_eq = chars.get(i + 1) == Some(&'=');
                let tok = match (c, next_eq) {
                    ('=', true) => Some(Tok::Cmp(CmpOp::Eq)),
                    ('=', false) => Some(Tok::Assign),
                    ('<', true) => Some(Tok::Cmp(CmpOp::Le)),
                    ('<', false) => Some(Tok::Cmp(CmpOp::Lt)),
                    ('>', true) => Some(Tok::Cmp(CmpOp::Ge)),
                    ('>', false) => Some(Tok::Cmp(CmpOp::Gt)),
                    ('!', true) => Some(Tok::Cmp(CmpOp::Ne)),
                    _ => None,
                };
                i += if next_eq { 2 } else { 1 };
                match tok {
                    Some(tok) => out.push(Token {
                        tok,
                        span: sp(start, i),
                    }),
                    None => diags.push(Diagnostic::new(
                        DiagKind::UnexpectedCharacter,
                        sp(start, i),
                        "unexpected character `!`",
                        "negate a boolean with `not`; `!=` means not equal",
                    )),
                }
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                let mut closed = false;
                while i < chars.len() {
                    if chars[i] == '"' {
                        closed = true;
                        i += 1;
                        break;
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                if closed {
                    out.push(Token {
                        tok: Tok::Str(s),
                        span: sp(start, i),
                    });
                } else {
                    diags.push(Diagnostic::new(
                        DiagKind::UnterminatedString,
                        sp(start, i),
                        "unterminated string",
                        "close the string with `\"` on the same line",
                    ));
                }
            }
            '-' if chars.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == '.') => {
                i += 1;
                lex_number(&chars, start, &mut i, true, ln, out, diags);
            }
            '0'..='9' | '.' => lex_number(&chars, start, &mut i, false, ln, out, diags),
            c if c.is_ascii_alphabetic() || c == '_' => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let tok = match word.as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "true" => Tok::True,
                    "false" => Tok::False,
                    _ => Tok::Ident(word),
                };
                out.push(Token {
                    tok,
                    span: sp(start, i),
                });
            }
            '+' | '-' | '*' | '/' | '%' => {
                i += 1;
                diags.push(Diagnostic::new(
                    DiagKind::UnexpectedCharacter,
                    sp(start, i),
                    format!("unexpected character `{c}`: the sensor language has no arithmetic"),
                    "compare values instead (e.g. `coins > @coins`), or declare a region that measures what you need",
                ));
            }
            '&' | '|' => {
                while i < chars.len() && chars[i] == c {
                    i += 1;
                }
                let word = if c == '&' { "and" } else { "or" };
                diags.push(Diagnostic::new(
                    DiagKind::UnexpectedCharacter,
                    sp(start, i),
                    format!("unexpected `{}`", chars[start..i].iter().collect::<String>()),
                    format!("write `{word}`"),
                ));
            }
            _ => {
                i += 1;
                diags.push(Diagnostic::new(
                    DiagKind::UnexpectedCharacter,
                    sp(start, i),
                    format!("unexpected character `{}`", c.escape_default()),
                    "sensor lines are `name = expression`; `#` starts a comment",
                ));
            }
        }
    }
}

fn lex_number(
    chars: &[char],
    start: usize,
    i: &mut usize,
    negative: bool,
    ln: u32,
    out: &mut Vec<Token>,
    diags: &mut Vec<Diagnostic>,
) {
    let digits_start = *i;
    while *i < chars.len() && (chars[*i].is_ascii_alphanumeric() || chars[*i] == '.' || chars[*i] == '_') {
        *i += 1;
    }
    let text: String = chars[digits_start..*i].iter().collect();
    let span = Span::new(ln, start as u32 + 1, (*i - start).max(1) as u32);
    let dots = text.matches('.').count();
    let well_formed = !text.is_empty()
        && dots <= 1
        && text.chars().all(|c| c.is_ascii_digit() || c == '.')
        && text.chars().any(|c| c.is_ascii_digit());
    let parsed = if !well_formed {
        None
    } else if dots == 0 {
        text.parse::<i64>().ok().map(|v| {
            let v = if negative { -v } else { v };
            (v as f64, Some(v))
        })
    } else {
        text.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|v| (if negative { -v } else { v }, None))
    };
    match parsed {
        Some((value, int)) => out.push(Token {
            tok: Tok::Number { value, int },
            span,
        }),
        None => diags.push(Diagnostic::new(
            DiagKind::BadNumber,
            span,
            format!("malformed number `{}{text}`", if negative { "-" } else { "" }),
            "write a decimal number such as `42` or `0.5` (integers fit in 64 bits)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> (Vec<Tok>, Vec<Diagnostic>) {
        let mut d = Vec::new();
        let mut bad = Vec::new();
        let t = lex(src, &mut d, &mut bad);
        (t.into_iter().map(|t| t.tok).collect(), d)
    }

    #[test]
    fn lexes_a_declaration_with_spans() {
        let mut d = Vec::new();
        let mut bad = Vec::new();
        let t = lex("ok = @hp >= 0.5 # c", &mut d, &mut bad);
        assert!(d.is_empty());
        assert_eq!(t[0].tok, Tok::Ident("ok".into()));
        assert_eq!(t[0].span, Span::new(1, 1, 2));
        assert_eq!(t[2].tok, Tok::At);
        assert_eq!(t[4].tok, Tok::Cmp(CmpOp::Ge));
        assert_eq!(t[4].span, Span::new(1, 10, 2));
        assert_eq!(
            t[5].tok,
            Tok::Number {
                value: 0.5,
                int: None
            }
        );
        assert_eq!(t[6].tok, Tok::Newline);
    }

    #[test]
    fn lexical_errors_are_all_reported() {
        let (_, d) = toks("a = \"open\nb = 1 + 2\nc = 1.2.3\nd = x ! y\ne = $");
        let kinds: Vec<_> = d.iter().map(|d| d.kind).collect();
        assert_eq!(
            kinds,
            vec![
                DiagKind::UnterminatedString,
                DiagKind::UnexpectedCharacter,
                DiagKind::BadNumber,
                DiagKind::UnexpectedCharacter,
                DiagKind::UnexpectedCharacter
            ]
        );
        assert_eq!(d[1].span, Span::new(2, 7, 1));
    }

    #[test]
    fn negative_and_huge_numbers() {
        let (t, d) = toks("x = -3 -0.5");
        assert!(d.is_empty());
        assert_eq!(
            t[2],
            Tok::Number {
                value: -3.0,
                int: Some(-3)
            }
        );
        assert_eq!(
            t[3],
            Tok::Number {
                value: -0.5,
                int: None
            }
        );
        let (_, d) = toks("x = 99999999999999999999");
        assert_eq!(d[0].kind, DiagKind::BadNumber);
    }
}
