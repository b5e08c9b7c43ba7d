//! IO edge: the session recording writer (write-only for the agent, INV-CTX-002).
//!
//! One folder per session: `events.jsonl` (one JSON object per line, the first a `session_start` carrying
//! the schema version), `frames/NNNNNN.png` written when the frame changed, and `frames/img-<sha256>.<ext>`
//! for each distinct image a prompt carried (referenced from the prompt record, never inlined). The format is documented in
//! `docs/recording-format.md`. This crate only writes; the reader lives in `gamepilot-replay`, which no
//! agent crate may depend on.

pub mod format;
mod writer;

pub use format::{Line, Record, SessionStart, SCHEMA_VERSION};
pub use writer::{externalize_images, image_file_name, is_frame_file_name, Recorder, SYNC_EVERY};

/// Errors of the recording writer.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} already holds a recording (events.jsonl exists); choose a new folder")]
    AlreadyRecorded(std::path::PathBuf),
    #[error("could not encode a record as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("could not write frame {path}: {message}")]
    Png {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("the recording was already finished")]
    Finished,
}
