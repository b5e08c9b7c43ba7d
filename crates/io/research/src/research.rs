//! The two research skills, run synchronously within their bounds: search-and-fetch (FR-SKILL-003)
//! and deep research with synthesis (FR-SKILL-004). [`crate::ResearchRunner`] runs them off-thread.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{ResearchConfig, SearchBackend};
use crate::error::ResearchError;
use crate::extract::{estimate_tokens, select_passages};
use crate::http::{Fetcher, SearxngClient};
use crate::log::{ResearchLog, ResearchLogEntry};
use crate::query::Query;
use crate::synth::{Brief, ExtractiveSynthesizer, SynthesisInput, Synthesizer};
use crate::time::now_rfc3339;
use crate::untrusted::UntrustedExcerpt;

/// Which skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResearchKind {
    /// A specific question: one or two sources, seconds.
    SearchAndFetch,
    /// A structural question: several sources, cross-checked, synthesised into a brief.
    Deep,
}

impl ResearchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResearchKind::SearchAndFetch => "search_and_fetch",
            ResearchKind::Deep => "deep",
        }
    }
}

/// A research request: a skill and a guarded query. It has no field for any limit (INV-SAFE-001).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearchRequest {
    /// Which skill.
    pub kind: ResearchKind,
    /// What to look up.
    pub query: Query,
}

impl ResearchRequest {
    /// Search and fetch (FR-SKILL-003).
    pub fn search_and_fetch(query: Query) -> Self {
        ResearchRequest {
            kind: ResearchKind::SearchAndFetch,
            query,
        }
    }

    /// Deep research (FR-SKILL-004).
    pub fn deep(query: Query) -> Self {
        ResearchRequest {
            kind: ResearchKind::Deep,
            query,
        }
    }
}

/// A source that was tried and not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceFailure {
    /// The URL tried.
    pub url: String,
    /// Why it was not used.
    pub error: ResearchError,
}

/// What a completed request found. Everything in it is untrusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResearchResult {
    /// Which skill ran.
    pub kind: ResearchKind,
    /// The query sent.
    pub query: Query,
    /// One excerpt per source used.
    pub excerpts: Vec<UntrustedExcerpt>,
    /// The synthesised brief (deep research only).
    pub brief: Option<Brief>,
    /// Sources tried and not used.
    pub failures: Vec<SourceFailure>,
    /// Sources whose reading stopped at the byte limit.
    pub truncated_sources: Vec<String>,
    /// The wall-clock limit cut the request short.
    pub deadline_hit: bool,
}

impl ResearchResult {
    /// The context text: the brief (if any) then each excerpt, all as `<untrusted>` blocks.
    pub fn render(&self) -> String {
        let mut blocks: Vec<String> = Vec::new();
        if let Some(b) = &self.brief {
            blocks.push(b.render());
        }
        blocks.extend(self.excerpts.iter().map(UntrustedExcerpt::render));
        blocks.join("\n")
    }

    /// Estimated tokens of [`ResearchResult::render`]; never above the configured `max_tokens`.
    pub fn tokens(&self) -> usize {
        estimate_tokens(&self.render())
    }

    /// Source URLs used.
    pub fn sources(&self) -> Vec<String> {
        self.excerpts.iter().map(|e| e.source_url.clone()).collect()
    }
}

/// Why research could not run. The escalation ladder moves on; nothing is made up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum UnavailableReason {
    /// The user configured no search backend.
    NoSearchBackend,
    /// The search endpoint failed.
    SearchFailed { error: ResearchError },
}

/// The result of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ResearchOutcome {
    /// At least one source was read.
    Completed(ResearchResult),
    /// "Research unavailable".
    Unavailable(UnavailableReason),
    /// The search ran but no source could be used.
    NothingFound {
        failures: Vec<SourceFailure>,
        deadline_hit: bool,
    },
}

impl ResearchOutcome {
    /// A short name for logs.
    pub fn name(&self) -> &'static str {
        match self {
            ResearchOutcome::Completed(_) => "completed",
            ResearchOutcome::Unavailable(_) => "unavailable",
            ResearchOutcome::NothingFound { .. } => "nothing_found",
        }
    }
}

/// Runs research requests within the configured bounds, synchronously. Holds no state between
/// requests and writes nothing to disk (INV-CTX-001).
#[derive(Clone)]
pub struct Researcher {
    config: ResearchConfig,
    search: Option<SearxngClient>,
    fetcher: Fetcher,
    synthesizer: Arc<dyn Synthesizer>,
}

impl std::fmt::Debug for Researcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Researcher")
            .field("config", &self.config)
            .field("synthesizer", &self.synthesizer.name())
            .finish()
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Fits an excerpt's rendered block into `max_tokens` by cutting its text; `None` if even the
/// delimiters do not fit.
fn fit_excerpt(ex: UntrustedExcerpt, max_tokens: usize) -> Option<UntrustedExcerpt> {
    if ex.text.trim().is_empty() {
        return None;
    }
    if estimate_tokens(&ex.render()) <= max_tokens {
        return Some(ex);
    }
    let chars: Vec<char> = ex.text.chars().collect();
    let with_head = |n: usize| {
        let mut text: String = chars[..n].iter().collect();
        text.push('…');
        UntrustedExcerpt { text, ..ex.clone() }
    };
    // Largest head that fits (escaping makes the rendered size non-linear, so search).
    let (mut lo, mut hi) = (0usize, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if estimate_tokens(&with_head(mid).render()) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == 0 || chars[..lo].iter().all(|c| c.is_whitespace()) {
        None
    } else {
        Some(with_head(lo))
    }
}

impl Researcher {
    /// A researcher for `config` with `synthesizer` for deep research. A config without a search
    /// backend is valid: every request then ends as `Unavailable(NoSearchBackend)`.
    pub fn new(config: ResearchConfig, synthesizer: Arc<dyn Synthesizer>) -> Result<Self, ResearchError> {
        config.validate()?;
        let search = match &config.search {
            Some(SearchBackend::Searxng { base_url }) => Some(SearxngClient::new(base_url, &config)?),
            None => None,
        };
        Ok(Researcher {
            fetcher: Fetcher::new(&config),
            search,
            config,
            synthesizer,
        })
    }

    /// The configuration in force (read-only: there is no setter).
    pub fn config(&self) -> &ResearchConfig {
        &self.config
    }

    /// Runs one request to completion within its bounds, appending to `log`.
    pub fn run(&self, id: u64, request: &ResearchRequest, log: &mut ResearchLog) -> ResearchOutcome {
        let start = Instant::now();
        let limits = &self.config.limits;
        let deadline = start + limits.wall_clock;
        let query = &request.query;
        log.push(ResearchLogEntry::Request {
            id,
            kind: request.kind.as_str().into(),
            query: query.as_str().into(),
            at: now_rfc3339(),
        });
        let finish = |log: &mut ResearchLog, outcome: ResearchOutcome| {
            let (sources, tokens, deadline_hit) = match &outcome {
                ResearchOutcome::Completed(r) => (r.sources(), r.tokens(), r.deadline_hit),
                ResearchOutcome::NothingFound { deadline_hit, .. } => (Vec::new(), 0, *deadline_hit),
                ResearchOutcome::Unavailable(_) => (Vec::new(), 0, false),
            };
            log.push(ResearchLogEntry::Finished {
                id,
                outcome: outcome.name().into(),
                sources,
                tokens,
                elapsed_ms: ms(start.elapsed()),
                deadline_hit,
            });
            outcome
        };

        let Some(search) = &self.search else {
            log.push(ResearchLogEntry::Unavailable {
                id,
                reason: "no search backend configured".into(),
            });
            return finish(
                log,
                ResearchOutcome::Unavailable(UnavailableReason::NoSearchBackend),
            );
        };

        let t0 = Instant::now();
        let hits = search.search(query, deadline);
        log.push(ResearchLogEntry::Search {
            id,
            endpoint: search.endpoint().into(),
            query: query.as_str().into(),
            results: hits.as_ref().map(Vec::len).unwrap_or(0),
            elapsed_ms: ms(t0.elapsed()),
            error: hits.as_ref().err().map(ToString::to_string),
        });
        let hits = match hits {
            Ok(h) => h,
            Err(error) => {
                return finish(
                    log,
                    ResearchOutcome::Unavailable(UnavailableReason::SearchFailed { error }),
                )
            }
        };

        let (max_sources, excerpt_budget) = match request.kind {
            ResearchKind::SearchAndFetch => (limits.quick_max_sources, limits.max_tokens),
            ResearchKind::Deep => (limits.deep_max_sources, limits.max_tokens * 3 / 4),
        };
        let brief_budget = limits.max_tokens - excerpt_budget;
        // Each block's share, less one token for the separator between blocks.
        let share = (excerpt_budget / max_sources).saturating_sub(1).max(1);

        let mut excerpts: Vec<UntrustedExcerpt> = Vec::new();
        let mut failures: Vec<SourceFailure> = Vec::new();
        let mut truncated_sources: Vec<String> = Vec::new();
        let mut deadline_hit = false;
        for hit in hits.iter().take(limits.max_fetch_attempts) {
            if excerpts.len() >= max_sources {
                break;
            }
            if Instant::now() >= deadline {
                deadline_hit = true;
                break;
            }
            let t0 = Instant::now();
            let fetched = self.fetcher.fetch(&hit.url, deadline);
            let elapsed_ms = ms(t0.elapsed());
            match fetched {
                Ok(page) => {
                    let text = select_passages(&page.page, query.as_str(), share);
                    let excerpt = fit_excerpt(
                        UntrustedExcerpt {
                            source_url: page.final_url.clone(),
                            retrieved_at: page.retrieved_at.clone(),
                            text,
                        },
                        share,
                    );
                    let duplicate = excerpts.iter().any(|e| e.source_url == page.final_url);
                    log.push(ResearchLogEntry::Fetch {
                        id,
                        url: hit.url.clone(),
                        final_url: Some(page.final_url.clone()),
                        content_type: Some(page.content_type.clone()),
                        bytes: page.bytes_read,
                        truncated: page.truncated,
                        excerpt_tokens: excerpt
                            .as_ref()
                            .map(|e| estimate_tokens(&e.render()))
                            .unwrap_or(0),
                        elapsed_ms,
                        error: None,
                    });
                    if page.truncated {
                        truncated_sources.push(page.final_url.clone());
                    }
                    match excerpt {
                        Some(e) if !duplicate => excerpts.push(e),
                        Some(_) => {}
                        None => failures.push(SourceFailure {
                            url: hit.url.clone(),
                            error: ResearchError::NoReadableText { url: page.final_url },
                        }),
                    }
                }
                Err(error) => {
                    if error == ResearchError::DeadlineExceeded
                        || (matches!(error, ResearchError::Timeout { .. }) && Instant::now() >= deadline)
                    {
                        deadline_hit = true;
                    }
                    log.push(ResearchLogEntry::Fetch {
                        id,
                        url: hit.url.clone(),
                        final_url: None,
                        content_type: None,
                        bytes: 0,
                        truncated: false,
                        excerpt_tokens: 0,
                        elapsed_ms,
                        error: Some(error.to_string()),
                    });
                    failures.push(SourceFailure {
                        url: hit.url.clone(),
                        error,
                    });
                }
            }
        }

        if excerpts.is_empty() {
            return finish(
                log,
                ResearchOutcome::NothingFound {
                    failures,
                    deadline_hit,
                },
            );
        }

        let brief = if request.kind == ResearchKind::Deep {
            let (brief, hit) = self.synthesize(id, query, &excerpts, brief_budget, deadline, log);
            deadline_hit |= hit;
            brief
        } else {
            None
        };

        finish(
            log,
            ResearchOutcome::Completed(ResearchResult {
                kind: request.kind,
                query: query.clone(),
                excerpts,
                brief,
                failures,
                truncated_sources,
                deadline_hit,
            }),
        )
    }

    /// Runs the synthesizer on its own thread and waits no longer than the time left; a synthesizer
    /// that fails or overruns is replaced by the extractive one. The brief is then bounded again.
    /// Returns the brief and whether the deadline was hit.
    fn synthesize(
        &self,
        id: u64,
        query: &Query,
        excerpts: &[UntrustedExcerpt],
        budget: usize,
        deadline: Instant,
        log: &mut ResearchLog,
    ) -> (Option<Brief>, bool) {
        let t0 = Instant::now();
        let time_left = deadline.saturating_duration_since(t0);
        let input = SynthesisInput {
            question: query.as_str().to_string(),
            excerpts: excerpts.to_vec(),
            max_tokens: budget,
            time_left,
        };
        let mut deadline_hit = false;
        let mut error: Option<String> = None;
        let result = if time_left.is_zero() {
            deadline_hit = true;
            None
        } else {
            let (tx, rx) = mpsc::channel();
            let synth = Arc::clone(&self.synthesizer);
            let inp = input.clone();
            let spawned = std::thread::Builder::new()
                .name("research-synthesis".into())
                .spawn(move || {
                    let _ = tx.send(synth.synthesize(&inp));
                });
            match spawned {
                Err(e) => {
                    error = Some(format!("could not start synthesis thread: {e}"));
                    None
                }
                Ok(_) => match rx.recv_timeout(time_left) {
                    Ok(Ok(b)) => Some(b),
                    Ok(Err(e)) => {
                        error = Some(e.to_string());
                        None
                    }
                    Err(_) => {
                        deadline_hit = true;
                        error = Some(ResearchError::DeadlineExceeded.to_string());
                        None
                    }
                },
            }
        };
        let fell_back = result.is_none();
        let mut brief = match result {
            Some(b) => b,
            None => match ExtractiveSynthesizer.synthesize(&input) {
                Ok(b) => b,
                Err(_) => return (None, deadline_hit),
            },
        };
        brief.question = query.as_str().to_string();
        brief.generated_at = now_rfc3339();
        let known: Vec<String> = excerpts.iter().map(|e| e.source_url.clone()).collect();
        brief.enforce(&known, budget);
        log.push(ResearchLogEntry::Synthesis {
            id,
            synthesizer: brief.synthesizer.clone(),
            sources: brief.sources().len(),
            brief_tokens: brief.tokens(),
            elapsed_ms: ms(t0.elapsed()),
            fell_back,
            error,
        });
        if brief.points.is_empty() {
            (None, deadline_hit)
        } else {
            (Some(brief), deadline_hit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_excerpt_bounds_rendered_tokens() {
        // FR-SKILL-004: the token budget holds for the rendered block, escaping included.
        let ex = UntrustedExcerpt {
            source_url: "https://example.org/a".into(),
            retrieved_at: "2026-09-12T14:02:05Z".into(),
            text: "<<<<>>>> &&&& ".repeat(100),
        };
        let fitted = fit_excerpt(ex.clone(), 60).unwrap();
        assert!(estimate_tokens(&fitted.render()) <= 60);
        assert!(fit_excerpt(ex, 5).is_none());
    }
}
