//! The research crate's single error enum: every failure has a name, none panics.

use serde::Serialize;

/// Everything that can go wrong in research. Messages never contain screen text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ResearchError {
    /// The configuration the user wrote is not usable.
    #[error("invalid research configuration: {reason}")]
    InvalidConfig { reason: String },
    /// The research worker panicked on one request; it goes on with the next.
    #[error("the research worker panicked: {detail}")]
    WorkerPanicked { detail: String },
    /// A query was empty after normalisation.
    #[error("research query is empty")]
    EmptyQuery,
    /// The query repeats recognised screen text verbatim (what is never sent).
    #[error(
        "research query rejected: it repeats {matched_chars} or more characters of screen text verbatim"
    )]
    QueryContainsScreenText { matched_chars: usize },
    /// The query carries a word (a name, a handle, a number, any short token) that the screen shows and
    /// that is neither in the user's goal nor a generic word (the word itself is never in the message).
    #[error(
        "research query rejected: it carries a {chars}-character word of the screen text that is neither in the goal nor a generic word"
    )]
    QueryContainsScreenWord { chars: usize },
    /// A URL could not be parsed or uses a scheme other than http/https.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// A fetched URL resolved to a loopback, private or link-local address.
    #[error("blocked address: {host} is a loopback, private or link-local address")]
    BlockedAddress { host: String },
    /// The response's content type is not a text type we read.
    #[error("unsupported content type {content_type:?} at {url}")]
    UnsupportedContentType { url: String, content_type: String },
    /// The response claimed to be text but contains binary data.
    #[error("binary content at {url}")]
    BinaryContent { url: String },
    /// The page held no readable text.
    #[error("no readable text at {url}")]
    NoReadableText { url: String },
    /// The server answered with an error status.
    #[error("HTTP status {status} from {url}")]
    HttpStatus { url: String, status: u16 },
    /// The redirect bound was reached.
    #[error("too many redirects fetching {url} (limit {limit})")]
    TooManyRedirects { url: String, limit: u32 },
    /// Connect, read or overall timeout.
    #[error("timed out fetching {url}")]
    Timeout { url: String },
    /// Any other transport failure (connection refused, DNS, TLS).
    #[error("transport error fetching {url}: {message}")]
    Transport { url: String, message: String },
    /// The search endpoint's reply was not SearxNG-shaped JSON.
    #[error("malformed search response from {url}: {message}")]
    MalformedSearchResponse { url: String, message: String },
    /// The wall-clock limit of the research request was reached.
    #[error("research wall-clock limit reached")]
    DeadlineExceeded,
    /// The runner's queue is full; the request was not accepted.
    #[error("research queue is full")]
    Busy,
    /// The runner's worker thread is gone.
    #[error("research runner has stopped")]
    RunnerStopped,
    /// The synthesizer failed.
    #[error("synthesis failed: {message}")]
    Synthesis { message: String },
}
