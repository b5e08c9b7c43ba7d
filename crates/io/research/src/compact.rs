//! Compaction of research excerpts (FR-CTX-004): each excerpt is reduced to the conclusions actually
//! used, keeping its source and retrieval time; excerpts nothing was concluded from are dropped.

use crate::extract::{content_terms, estimate_tokens};
use crate::untrusted::UntrustedExcerpt;

/// A conclusion the agent drew from a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conclusion {
    /// The excerpt's source URL.
    pub source_url: String,
    /// What was concluded.
    pub text: String,
}

/// The result of compaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// One excerpt per source still used, its text now the conclusions (still untrusted).
    pub kept: Vec<UntrustedExcerpt>,
    /// Sources dropped because nothing was concluded from them.
    pub dropped_sources: Vec<String>,
    /// Conclusions that cite no excerpt present (ignored: provenance cannot be invented).
    pub unmatched: usize,
    /// Estimated tokens of the rendered excerpts before.
    pub tokens_before: usize,
    /// Estimated tokens of the rendered excerpts after.
    pub tokens_after: usize,
}

/// Reduces `excerpts` to the `used` conclusions, keeping each one's source and retrieval time.
pub fn compact_excerpts(excerpts: &[UntrustedExcerpt], used: &[Conclusion]) -> Compacted {
    let tokens = |xs: &[UntrustedExcerpt]| xs.iter().map(|e| estimate_tokens(&e.render())).sum();
    let mut kept = Vec::new();
    let mut dropped_sources = Vec::new();
    for ex in excerpts {
        let mut texts: Vec<&str> = Vec::new();
        for c in used.iter().filter(|c| c.source_url == ex.source_url) {
            let t = c.text.trim();
            if !t.is_empty() && !texts.contains(&t) {
                texts.push(t);
            }
        }
        if texts.is_empty() {
            if !dropped_sources.contains(&ex.source_url) {
                dropped_sources.push(ex.source_url.clone());
            }
            continue;
        }
        kept.push(UntrustedExcerpt {
            source_url: ex.source_url.clone(),
            retrieved_at: ex.retrieved_at.clone(),
            text: texts
                .iter()
                .map(|t| format!("- {t}"))
                .collect::<Vec<_>>()
                .join("\n"),
        });
    }
    let unmatched = used
        .iter()
        .filter(|c| !excerpts.iter().any(|e| e.source_url == c.source_url))
        .count();
    Compacted {
        tokens_before: tokens(excerpts),
        tokens_after: tokens(&kept),
        kept,
        dropped_sources,
        unmatched,
    }
}

/// A model-free way to find the conclusions used: the sentences of each excerpt that share at least
/// two content words with some note the agent wrote. Deterministic.
pub fn conclusions_from_notes(excerpts: &[UntrustedExcerpt], notes: &[&str]) -> Vec<Conclusion> {
    let note_terms: Vec<_> = notes.iter().map(|n| content_terms(n)).collect();
    let mut out = Vec::new();
    for ex in excerpts {
        for sentence in ex
            .text
            .split(['.', '!', '?', '\n'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let st = content_terms(sentence);
            if note_terms.iter().any(|nt| nt.intersection(&st).count() >= 2) {
                out.push(Conclusion {
                    source_url: ex.source_url.clone(),
                    text: sentence.to_string(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(url: &str, text: &str) -> UntrustedExcerpt {
        UntrustedExcerpt {
            source_url: url.into(),
            retrieved_at: "2026-09-12T14:02:05Z".into(),
            text: text.into(),
        }
    }

    #[test]
    fn keeps_conclusions_with_sources_and_drops_the_rest() {
        // FR-CTX-004: excerpts reduced to the conclusions used, keeping the source.
        let excerpts = vec![
            ex("http://a/guide", "Long page. The shop is behind the fountain. Lots of other text about nothing in particular, repeated at length."),
            ex("http://b/forum", "Unrelated chatter about a different game entirely."),
        ];
        let notes = ["the shop is behind the fountain"];
        let used = conclusions_from_notes(&excerpts, &notes);
        assert_eq!(
            used,
            vec![Conclusion {
                source_url: "http://a/guide".into(),
                text: "The shop is behind the fountain".into()
            }]
        );
        let mut all = used.clone();
        all.push(Conclusion {
            source_url: "http://invented/".into(),
            text: "x".into(),
        });
        let c = compact_excerpts(&excerpts, &all);
        assert_eq!(c.kept.len(), 1);
        assert_eq!(c.kept[0].source_url, "http://a/guide");
        assert_eq!(c.kept[0].retrieved_at, "2026-09-12T14:02:05Z");
        assert_eq!(c.kept[0].text, "- The shop is behind the fountain");
        assert_eq!(c.dropped_sources, vec!["http://b/forum"]);
        assert_eq!(c.unmatched, 1);
        assert!(c.tokens_after < c.tokens_before);
        // Still rendered as untrusted.
        assert!(c.kept[0]
            .render()
            .starts_with("<untrusted source=\"http://a/guide\""));
    }
}
