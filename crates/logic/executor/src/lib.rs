//! Pure logic: the ADR-0035 executor tick (sustained actions, reconciliation, ownership, conflicts, budgets,
//! denied keys, validation), motion profiles, camera calibration and the bounded reflex lateness histogram.
//!
//! Nothing here reads the clock, touches X11, threads or files: time, focus and geometry come in as values
//! (`TickInput`), input events go out (`TickOutput::events`) to the single input sink (FR-ACT-008).

pub mod calibrate;
pub mod config;
pub mod executor;
pub mod held;
pub mod lateness;
pub mod motion;

pub use config::{DeniedList, ExecutorConfig, ExecutorError};
pub use executor::{
    ActionEnd, CameraScale, CancelReason, ExecState, Executor, HaltReason, RejectReason, Rejection, Report,
    SubmitContext, TickInput, TickOutput,
};
pub use held::{ActionId, Held, HeldInput, HeldRecord};
pub use lateness::{LatenessHistogram, LATENESS_BUCKETS};
