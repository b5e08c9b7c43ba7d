//! The runtime crate's one error type: every way starting or running a cadence's thread can fail, named.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("X11: {0}")]
    X11(#[from] gamepilot_x11::X11Error),
    #[error("executor: {0}")]
    Executor(#[from] gamepilot_executor::ExecutorError),
    #[error("guardian: {0}")]
    Guardian(#[from] gamepilot_guardian::GuardianError),
    #[error("OCR: {0}")]
    Ocr(#[from] gamepilot_ocr::OcrError),
    #[error("model host: {0}")]
    Model(#[from] gamepilot_model::ModelError),
    #[error("recording: {0}")]
    Recording(#[from] gamepilot_recording::RecordingError),
    #[error("sensor: {0}")]
    Sensor(#[from] gamepilot_sensor::SensorError),
    #[error("context: {0}")]
    Context(#[from] gamepilot_session::ContextError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The guardian did not come up: input is never armed without it (FR-SAFE-003).
    #[error("{0}")]
    GuardianStart(String),
    /// A worker could not start (its reader, its thread).
    #[error("{0}")]
    WorkerStart(String),
    /// `run --templates DIR`: a file or name the atlas cannot take.
    #[error("--templates: {0}")]
    Templates(String),
    /// A worker's body panicked; caught so that its releases still ran.
    #[error("panicked: {0}")]
    Panicked(String),
    /// The session cannot start as configured (its sensors, its postconditions, its recording).
    #[error("{0}")]
    Setup(String),
    /// The session core refused its configuration.
    #[error("session: {0}")]
    Session(#[from] gamepilot_session::SessionError),
    /// A worker did not stop when the session ended.
    #[error("{0}")]
    Stuck(String),
    /// An image file that cannot be read as a frame.
    #[error("image {path}: {detail}")]
    Image { path: String, detail: String },
}

impl RuntimeError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> RuntimeError {
        RuntimeError::Io {
            what: what.into(),
            source,
        }
    }
}
