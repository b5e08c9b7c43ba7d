//! Pure logic: frame classification, element proposals, stable ids, Set-of-Marks rendering, elements found again from the session's template atlas, the Ocr trait.
//!
//! Nothing here touches X11, threads, files or the clock: frames come in as `FrameView`s, time as
//! `MonoTime`, fonts as bytes, and OCR through the [`Ocr`] trait that the `ocr` crate implements.
// Pixel loops index several buffers by the same coordinate; ranges say that most plainly.
#![allow(clippy::needless_range_loop)]

pub mod classify;
pub mod grid;
pub mod ids;
pub mod looks;
pub mod marks;
pub mod observation;
pub mod ocr;
pub mod proposals;
pub mod selection;
pub mod thumb;
pub mod track;

pub use classify::{classify, Classification, ClassifierParams, FrameChange};
pub use ids::IdTracker;
pub use marks::MarkRenderer;
pub use observation::{Element, ElementSource, Observation, Perceiver, TextItem};
pub use ocr::{Ocr, TextLine, TextWord};
pub use proposals::{merge_accessibility, propose, Candidate, ProposalParams};
pub use thumb::Thumb;

/// The vision crate's one error enum.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VisionError {
    #[error("the font could not be parsed: {0}")]
    Font(String),
    #[error("the frame is empty (0x0)")]
    EmptyFrame,
    #[error("thumbnails differ in size ({a:?} vs {b:?}); classify needs equal sizes")]
    SizeMismatch { a: (u32, u32), b: (u32, u32) },
    #[error("OCR failed: {0}")]
    Ocr(String),
}
