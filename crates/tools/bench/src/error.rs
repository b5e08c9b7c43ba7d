//! The bench crate's one error type: every way a benchmark or an evaluation can fail, named.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    /// A thread, a host call or a perception the benchmark runs through the runtime.
    #[error(transparent)]
    Runtime(#[from] gamepilot_runtime::RuntimeError),
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
    #[error("session: {0}")]
    Session(#[from] gamepilot_session::SessionError),
    #[error("context: {0}")]
    Context(#[from] gamepilot_session::ContextError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A helper the benchmark needs could not start (a process, a thread).
    #[error("{0}")]
    WorkerStart(String),
    /// `gamepilot eval`: the session for a decision point's goal could not be built.
    #[error("eval: {0}")]
    Eval(String),
}

impl BenchError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            what: what.into(),
            source,
        }
    }
}
