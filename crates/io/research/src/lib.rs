//! IO edge: search and fetch backends for research skills; results are untrusted context.
//!
//! Two skills (FR-SKILL-003, FR-SKILL-004): *search and fetch* (one or two sources, seconds) and
//! *deep research* (several sources, cross-checked, synthesised into a brief by a [`Synthesizer`]).
//! Both are bounded by a maximum number of sources, a token budget and a wall-clock limit taken from
//! [`ResearchConfig`], which only the user sets: no request type carries a limit, so nothing a model
//! writes (and nothing a page says) can raise one (INV-SAFE-001).
//!
//! Everything retrieved is an [`UntrustedExcerpt`] rendered as a delimited `<untrusted …>` block whose
//! content cannot close the block (FR-SKILL-005). Queries are built only from the user's [`Goal`] and the
//! agent's own [`Inference`]s by a [`QueryBuilder`]; OCR'd [`ScreenText`] has no path into a query and a
//! runtime guard rejects any query that repeats screen text verbatim. Research runs on its own thread
//! ([`ResearchRunner`]) and reports over a channel, so it never blocks a cadence. Nothing is written to
//! disk: results live only in memory for the session (INV-CTX-001); [`ResearchLogEntry`] records are
//! handed to the caller for the session recording.

mod compact;
mod config;
mod error;
mod extract;
mod http;
mod log;
mod query;
mod research;
mod runner;
mod synth;
mod time;
mod untrusted;
pub mod wiring;

pub use compact::{compact_excerpts, conclusions_from_notes, Compacted, Conclusion};
pub use config::{ResearchConfig, ResearchLimits, SearchBackend};
pub use error::ResearchError;
pub use extract::{estimate_tokens, extract_readable_text, select_passages, ExtractedPage};
pub use http::{FetchedPage, Fetcher, SearchHit, SearxngClient};
pub use log::{ResearchLog, ResearchLogEntry};
pub use query::{Goal, Inference, Query, QueryBuilder, ScreenText, SCREEN_TEXT_GUARD_CHARS};
pub use research::{
    ResearchKind, ResearchOutcome, ResearchRequest, ResearchResult, Researcher, SourceFailure,
    UnavailableReason,
};
pub use runner::{RequestId, ResearchEvent, ResearchRunner};
pub use synth::{Brief, BriefPoint, ExtractiveSynthesizer, SynthesisInput, Synthesizer, EXTRACTIVE_NAME};
pub use time::rfc3339_utc;
pub use untrusted::{escape_untrusted_text, UntrustedExcerpt, UNTRUSTED_FRAMING};
