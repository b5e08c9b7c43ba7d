//! IO edge to the model: an OpenAI-compatible chat-completions client (timeouts, cancellation, named
//! errors, schema-constrained replies retried once), a capability probe that tells the host's kind
//! (llama.cpp, Ollama, vLLM, LM Studio; [`host_kind_table`]) so that each kind gets the schema in the
//! fields it reads, a `llama-server` launcher that verifies weights before loading them, the visual
//! token budget, and the graphics-memory watch with its degrade ladder (FR-MODEL-001..005, FR-GND-003).
//!
//! Nothing here persists anything between sessions (INV-CTX-001): the launched host's log is kept in
//! memory and dies with it.

pub mod budget;
pub mod cache;
pub mod cancel;
pub mod client;
pub mod gbnf;
pub mod gpu;
pub mod host_kind;
pub mod keeper;
pub mod ladder;
pub mod launcher;
pub mod weights;
pub mod wire;

pub use budget::VisualBudget;
pub use cancel::CancelToken;
pub use client::{Capabilities, HostClient, HostTimeouts, StructuredReply, PROBE_STEP_TIMEOUT};
pub use gpu::{GpuMemory, MemorySource, Nvml};
pub use host_kind::{host_kind_table, host_kind_table_text, HostKind, HostKindRow};
pub use keeper::{HostKeeper, HostNotice};
pub use ladder::{host_change, DegradeCommand, DegradeLadder, DegradeLevel, HostRole, LadderConfig};
pub use launcher::{Backoff, HostShape, LaunchSpec, LocalHost};
pub use weights::{VerifiedWeights, WeightsSpec};
pub use wire::{structured_output_fields, CallTimings, ChatReply, ChatRequest};

use std::path::PathBuf;

/// Every failure of the model edge, each naming what failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model host {url} is unreachable: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("model host {url} did not answer within {timeout_ms} ms")]
    Timeout { url: String, timeout_ms: u64 },
    #[error("model host {url} answered HTTP {status}: {body}")]
    Http { url: String, status: u16, body: String },
    #[error("model host {url}: transport error: {detail}")]
    Transport { url: String, detail: String },
    #[error("model host {url} sent a reply that is not a chat completion: {detail}")]
    Protocol { url: String, detail: String },
    #[error(
        "the model's reply broke the schema after {attempts} attempts: {violation}; last reply: {reply}"
    )]
    SchemaBroken {
        attempts: u32,
        violation: String,
        reply: String,
    },
    #[error("the call was cancelled")]
    Cancelled,
    #[error("weights file {path} does not exist")]
    WeightsMissing { path: PathBuf },
    #[error("weights file {path} is truncated: {actual_len} bytes, expected {expected_len}")]
    WeightsTruncated {
        path: PathBuf,
        expected_len: u64,
        actual_len: u64,
    },
    #[error("weights file {path} failed SHA-256 verification: expected {expected}, got {actual} ({len} bytes); refusing to load it")]
    WeightsMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
        len: u64,
    },
    #[error("weights file {path} is not a GGUF file (bad magic)")]
    NotGguf { path: PathBuf },
    #[error(
        "no SHA-256 is configured or recorded for weights file {path}; refusing to load unverified weights"
    )]
    NoDigest { path: PathBuf },
    #[error("invalid SHA-256 digest {digest:?} for {path}: expected 64 hex digits")]
    BadDigest { path: PathBuf, digest: String },
    #[error("cannot read weights file {path}: {detail}")]
    WeightsIo { path: PathBuf, detail: String },
    #[error("model host binary {path} cannot be started: {detail}")]
    Launch { path: PathBuf, detail: String },
    #[error("model host exited before it was ready ({status}); last log lines:\n{log}")]
    HostExited { status: String, log: String },
    #[error("model host did not become healthy within {timeout_ms} ms; last log lines:\n{log}")]
    HealthTimeout { timeout_ms: u64, log: String },
    #[error("stopped while the model host was starting")]
    StartCancelled,
    #[error(
        "port {port} answered /health, but not from the model host gamepilot started; last log lines:\n{log}"
    )]
    PortTaken { port: u16, log: String },
    #[error("model host {url} sent a reply larger than {limit} bytes; refusing to read more")]
    ReplyTooLarge { url: String, limit: u64 },
    #[error("no GPU: {0}")]
    NoGpu(String),
    #[error("GPU query failed: {0}")]
    Gpu(String),
    #[error("image cannot be prepared: {0}")]
    Image(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Context(#[from] gamepilot_context::ContextError),
}
