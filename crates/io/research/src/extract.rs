//! Readable-text extraction from HTML (a real HTML5 parser, `scraper`/html5ever — no regexes),
//! passage selection within a budget, and the token estimate used for every budget.

use std::collections::HashSet;

use scraper::{Html, Node};

use crate::query::normalise_spaces;

/// Elements whose content a reader never sees, or that are page furniture rather than content.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "embed", "canvas", "head",
    "nav", "footer", "aside", "form", "button", "select", "textarea", "input", "menu",
];

/// Elements that start a new paragraph.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "table",
    "tr",
    "td",
    "th",
    "br",
    "hr",
    "figure",
    "figcaption",
    "details",
    "summary",
    "body",
    "html",
];

/// The readable content of one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedPage {
    /// The `<title>`, if any.
    pub title: Option<String>,
    /// Paragraphs of visible text, whitespace-collapsed, in document order.
    pub paragraphs: Vec<String>,
}

impl ExtractedPage {
    /// All paragraphs separated by blank lines.
    pub fn text(&self) -> String {
        self.paragraphs.join("\n\n")
    }
}

/// Estimated tokens of `text`: one per four characters, rounded up. Every budget uses this.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Extracts the visible, readable text of an HTML document: scripts, styles, navigation, forms and
/// hidden elements (`hidden`, `aria-hidden="true"`, inline `display:none`/`visibility:hidden`) are
/// dropped; when the page has an `<article>` or `<main>`, only that is read.
pub fn extract_readable_text(html: &str) -> ExtractedPage {
    let doc = Html::parse_document(html);
    let title = doc
        .root_element()
        .descendants()
        .find(|n| matches!(n.value(), Node::Element(e) if e.name() == "title"))
        .map(|n| {
            let mut s = String::new();
            for d in n.descendants() {
                if let Node::Text(t) = d.value() {
                    s.push_str(t);
                }
            }
            normalise_spaces(&s)
        })
        .filter(|t| !t.is_empty());

    let content_root = ["article", "main"].iter().find_map(|want| {
        doc.root_element().descendants().find(|n| match n.value() {
            Node::Element(e) => e.name() == *want && !is_hidden(e),
            _ => false,
        })
    });
    let root = content_root.unwrap_or_else(|| doc.tree.root());

    enum Step<N> {
        Enter(N),
        Leave(bool),
    }
    let mut paragraphs = Vec::new();
    let mut current = String::new();
    let mut stack = vec![Step::Enter(root)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Leave(block) => {
                if block {
                    flush(&mut current, &mut paragraphs);
                }
            }
            Step::Enter(node) => match node.value() {
                Node::Text(t) => {
                    current.push_str(t);
                }
                Node::Element(e) => {
                    let name = e.name();
                    if SKIPPED.contains(&name) || is_hidden(e) {
                        continue;
                    }
                    let block = BLOCKS.contains(&name);
                    if block {
                        flush(&mut current, &mut paragraphs);
                    } else {
                        current.push(' ');
                    }
                    stack.push(Step::Leave(block));
                    let children: Vec<_> = node.children().collect();
                    for c in children.into_iter().rev() {
                        stack.push(Step::Enter(c));
                    }
                }
                Node::Document | Node::Fragment => {
                    let children: Vec<_> = node.children().collect();
                    for c in children.into_iter().rev() {
                        stack.push(Step::Enter(c));
                    }
                }
                _ => {}
            },
        }
    }
    flush(&mut current, &mut paragraphs);
    ExtractedPage { title, paragraphs }
}

/// Plain text split into paragraphs at blank lines, whitespace collapsed.
pub(crate) fn plain_text_paragraphs(text: &str) -> ExtractedPage {
    let paragraphs = text
        .split("\n\n")
        .map(normalise_spaces)
        .filter(|p| !p.is_empty())
        .collect();
    ExtractedPage {
        title: None,
        paragraphs,
    }
}

fn flush(current: &mut String, out: &mut Vec<String>) {
    let p = normalise_spaces(current);
    if !p.is_empty() {
        out.push(p);
    }
    current.clear();
}

fn is_hidden(e: &scraper::node::Element) -> bool {
    if e.attr("hidden").is_some() {
        return true;
    }
    if e.attr("aria-hidden")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return true;
    }
    if let Some(style) = e.attr("style") {
        let s: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        if s.contains("display:none") || s.contains("visibility:hidden") {
            return true;
        }
    }
    false
}

/// Words that say nothing about relevance.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "her", "was", "one", "our", "out",
    "his", "has", "how", "its", "may", "who", "did", "yes", "get", "got", "this", "that", "with", "have",
    "from", "they", "will", "would", "there", "their", "what", "when", "where", "which", "while", "your",
    "into", "than", "then", "them", "these", "those", "does", "about", "some", "seems", "should", "could",
    "just", "also", "only", "very", "each", "much",
];

/// Lower-cased content words of `text` (three or more letters, not a stopword).
pub(crate) fn content_terms(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| w.to_lowercase())
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect()
}

/// Chooses the paragraphs most relevant to `query` that fit in `max_tokens`, returned in document
/// order and joined by blank lines. Relevance is the number of distinct query terms a paragraph holds;
/// ties keep document order; paragraphs matching nothing are left out unless nothing matches, in
/// which case the page is read from the top. A paragraph larger than
/// the whole budget is cut to fit (marked with `…`). Deterministic.
pub fn select_passages(page: &ExtractedPage, query: &str, max_tokens: usize) -> String {
    let terms = content_terms(query);
    let mut ranked: Vec<(usize, usize)> = page
        .paragraphs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let pt = content_terms(p);
            (i, terms.intersection(&pt).count())
        })
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // When anything matches, paragraphs that match nothing are filler.
    if ranked.first().is_some_and(|r| r.1 > 0) {
        ranked.retain(|r| r.1 > 0);
    }
    let sep_tokens = 1;
    let mut used = 0usize;
    let mut chosen: Vec<(usize, String)> = Vec::new();
    for (i, _) in ranked {
        let p = &page.paragraphs[i];
        let t = estimate_tokens(p) + sep_tokens;
        if used + t <= max_tokens {
            used += t;
            chosen.push((i, p.clone()));
        } else if chosen.is_empty() && max_tokens > 2 {
            // The best paragraph alone is over budget: keep its head.
            let keep_chars = (max_tokens - 2) * 4;
            let mut head: String = p.chars().take(keep_chars).collect();
            head.push('…');
            used = estimate_tokens(&head) + sep_tokens;
            chosen.push((i, head));
        }
        if used >= max_tokens {
            break;
        }
    }
    chosen.sort_by_key(|(i, _)| *i);
    chosen
        .into_iter()
        .map(|(_, p)| p)
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html><html><head><title> Untangle guide </title>
        <style>body { color: red }</style><script>alert("x <p>not text</p>")</script></head>
        <body><nav>Home | Wiki | Login</nav>
        <div class="content"><h1>How to win</h1>
        <p>Drag the <b>points</b> so that no two lines cross.</p>
        <p hidden>hidden text</p><p style="display: none">also hidden</p>
        <div aria-hidden="true">aria hidden</div>
        <p>Each level adds more points &amp; lines.</p></div>
        <footer>Copyright</footer></body></html>"#;

    #[test]
    fn extracts_visible_text_only() {
        // FR-SKILL-003: readable text, no furniture, no scripts.
        let p = extract_readable_text(PAGE);
        assert_eq!(p.title.as_deref(), Some("Untangle guide"));
        assert_eq!(
            p.paragraphs,
            vec![
                "How to win",
                "Drag the points so that no two lines cross.",
                "Each level adds more points & lines."
            ]
        );
    }

    #[test]
    fn prefers_article() {
        let p = extract_readable_text(
            "<body><div>menu stuff</div><article><p>the real content</p></article></body>",
        );
        assert_eq!(p.paragraphs, vec!["the real content"]);
    }

    #[test]
    fn tolerates_broken_html() {
        let p = extract_readable_text("<p>one<p>two</div></span><b>three");
        assert_eq!(p.paragraphs, vec!["one", "two three"]);
        assert!(extract_readable_text("").paragraphs.is_empty());
    }

    #[test]
    fn selects_relevant_passages_within_budget() {
        let page = ExtractedPage {
            title: None,
            paragraphs: vec![
                "Welcome to our fan site about many games.".into(),
                "To finish a level in Untangle, move points until no lines cross.".into(),
                "Our forum rules are below.".into(),
                "Untangle levels grow harder as points increase.".into(),
            ],
        };
        let s = select_passages(&page, "finish level untangle lines cross", 40);
        assert_eq!(
            s,
            "To finish a level in Untangle, move points until no lines cross.\n\n\
             Untangle levels grow harder as points increase."
        );
        assert!(estimate_tokens(&s) <= 40);
        let tiny = select_passages(&page, "untangle lines cross", 5);
        assert!(estimate_tokens(&tiny) <= 5, "{tiny}");
        assert!(tiny.ends_with('…'));
    }

    #[test]
    fn token_estimate() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
