//! Diagnostics: every error located by line and column, rendered with a caret and a one-line fix hint.

use serde::Serialize;
use std::fmt;

/// A location in a sensor file: 1-based line and column (in characters), and a length in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Span {
    pub line: u32,
    pub col: u32,
    pub len: u32,
}

impl Span {
    pub fn new(line: u32, col: u32, len: u32) -> Self {
        Span { line, col, len }
    }

    /// The span covering `self` through `other` (same line; otherwise `self`).
    pub fn to(self, other: Span) -> Span {
        if other.line != self.line || other.col < self.col {
            return self;
        }
        Span {
            line: self.line,
            col: self.col,
            len: (other.col + other.len).saturating_sub(self.col).max(1),
        }
    }
}

/// What went wrong, as a stable code (shown as `E0xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagKind {
    UnexpectedCharacter,
    UnterminatedString,
    BadNumber,
    Syntax,
    UnknownFunction,
    WrongArity,
    BadArgument,
    BadRegion,
    BadHueRange,
    BadThreshold,
    TypeMismatch,
    UnknownName,
    DeclaredLater,
    Cycle,
    DuplicateName,
    BadName,
    ReservedName,
}

impl DiagKind {
    pub fn code(self) -> &'static str {
        match self {
            DiagKind::UnexpectedCharacter => "E001",
            DiagKind::UnterminatedString => "E002",
            DiagKind::BadNumber => "E003",
            DiagKind::Syntax => "E004",
            DiagKind::UnknownFunction => "E005",
            DiagKind::WrongArity => "E006",
            DiagKind::BadArgument => "E007",
            DiagKind::BadRegion => "E008",
            DiagKind::BadHueRange => "E009",
            DiagKind::BadThreshold => "E010",
            DiagKind::TypeMismatch => "E011",
            DiagKind::UnknownName => "E012",
            DiagKind::DeclaredLater => "E013",
            DiagKind::Cycle => "E014",
            DiagKind::DuplicateName => "E015",
            DiagKind::BadName => "E016",
            DiagKind::ReservedName => "E017",
        }
    }
}

/// One error with its location, a message and a one-line hint saying how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub kind: DiagKind,
    pub span: Span,
    pub message: String,
    pub hint: String,
}

impl Diagnostic {
    pub fn new(kind: DiagKind, span: Span, message: impl Into<String>, hint: impl Into<String>) -> Self {
        Diagnostic {
            kind,
            span,
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// Render for people, rustc-style: header, location, the source line and a caret under the span.
    pub fn render(&self, file: &str, source: &str) -> String {
        let line_text = source
            .lines()
            .nth(self.span.line.saturating_sub(1) as usize)
            .unwrap_or("");
        let num = self.span.line.to_string();
        let pad = " ".repeat(num.len());
        // Columns count characters; tabs in the prefix are kept so the caret lines up in a terminal.
        let prefix: String = line_text
            .chars()
            .take(self.span.col.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let carets = "^".repeat(self.span.len.max(1) as usize);
        format!(
            "error[{code}]: {msg}\n{pad}--> {file}:{line}:{col}\n{pad} |\n{num} | {text}\n{pad} | {prefix}{carets}\n{pad} = hint: {hint}\n",
            code = self.kind.code(),
            msg = self.message,
            line = self.span.line,
            col = self.span.col,
            text = line_text,
            hint = self.hint,
        )
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: error[{}]: {} (hint: {})",
            self.span.line,
            self.span.col,
            self.kind.code(),
            self.message,
            self.hint
        )
    }
}

/// Render a list of diagnostics for one file, followed by a count line.
pub fn render_all(diags: &[Diagnostic], file: &str, source: &str) -> String {
    let mut out = String::new();
    for d in diags {
        out.push_str(&d.render(file, source));
        out.push('\n');
    }
    let n = diags.len();
    out.push_str(&format!("{file}: {n} error{}\n", if n == 1 { "" } else { "s" }));
    out
}

/// The closest candidate by edit distance, if it is close enough to be a plausible typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(word, c);
        let limit = (word.chars().count().max(c.chars().count()) / 3).max(1);
        if d <= limit && !matches!(best, Some((bd, _)) if bd <= d) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_puts_the_caret_under_the_span() {
        let src = "a = 1\nhealth = region_frac([0, 0, 1, 1])\n";
        let d = Diagnostic::new(
            DiagKind::UnknownFunction,
            Span::new(2, 10, 11),
            "unknown function `region_frac`",
            "did you mean `region_fraction`?",
        );
        let r = d.render("s.sensors", src);
        assert!(
            r.starts_with("error[E005]: unknown function `region_frac`\n"),
            "{r}"
        );
        assert!(r.contains(" --> s.sensors:2:10\n"), "{r}");
        assert!(r.contains("2 | health = region_frac([0, 0, 1, 1])\n"), "{r}");
        assert!(r.contains("  |          ^^^^^^^^^^^\n"), "{r}");
        assert!(r.contains("  = hint: did you mean `region_fraction`?"), "{r}");
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        let c = ["region_fraction", "region_integer", "template_present"];
        assert_eq!(did_you_mean("region_frac", c), Some("region_fraction"));
        assert_eq!(did_you_mean("region_fractoin", c), Some("region_fraction"));
        assert_eq!(did_you_mean("templat_present", c), Some("template_present"));
        assert_eq!(did_you_mean("zzz", c), None);
    }
}
