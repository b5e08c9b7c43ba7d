//! Pure logic: the agent's only memory. Prompt assembly in eight blocks (image last), the note block and
//! its skill, untrusted research blocks, compaction, and the per-tick JSON Schema of the tactical reply.
//!
//! Nothing here touches the clock, files, sockets or threads: time comes in as [`MonoTime`], and the
//! crate returns values (a [`Prompt`], a [`CompactionEvent`], a schema). Nothing is persisted: a
//! [`Context`] lives and dies with its session (INV-CTX-001), and this crate cannot read recordings
//! (INV-CTX-002; enforced by `xtask lint`).
//!
//! [`MonoTime`]: gamepilot_core::MonoTime

pub mod assemble;
pub mod compaction;
pub mod history;
pub mod notes;
pub mod plan;
pub mod prompt;
pub mod research;
pub mod schema;
pub mod tail;
pub mod validate;

pub use schema::TacticalReply;

pub use assemble::{Context, ContextConfig};
pub use compaction::{CompactionEvent, CompactionInput};
pub use history::{HistoryEntry, ObservationText};
pub use notes::{NoteBlock, NoteCap, NoteOutcome, NoteSkill};
pub use plan::{PlanBlock, PlanStep, StepStatus};
pub use prompt::{Block, Cadence, ImagePart, Message, Part, Prompt, Role};
pub use research::{neutralise_untrusted, ResearchExcerpt};
pub use schema::{
    localise_schema, parse_localise, tactical_schema, tactical_schema_in, tactical_schema_with_targets,
    SchemaLimits, Tool, ToolSet,
};
pub use tail::TacticalTail;
pub use validate::validate;

/// Everything that can go wrong in context logic; every variant names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    #[error("the session goal is empty")]
    EmptyGoal,
    #[error("note rejected: {0}")]
    NoteRejected(String),
    #[error("research excerpt rejected: {0}")]
    ResearchRejected(String),
    #[error("capture size {w}x{h} cannot bound coordinates (both sides must be at least 1 pixel)")]
    EmptyCapture { w: u32, h: u32 },
    #[error("the tool set is empty: a tactical reply needs at least one tool")]
    NoTools,
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("reply breaks the schema at {path}: {reason}")]
    SchemaViolation { path: String, reason: String },
}
