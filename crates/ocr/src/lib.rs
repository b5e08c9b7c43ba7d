//! IO edge: tesseract-backed OCR (FR-PERC-004) with its worker thread and region cache.
//!
//! [`TesseractOcr`] implements the vision crate's `Ocr` trait over Debian's libtesseract: words and lines
//! with boxes and confidence 0..1, low-confidence garbage filtered, game fonts on dark and bright
//! backgrounds handled by scaling and polarity inversion. [`OcrWorker`] runs it off the reflex thread and
//! caches results by the region's pixel hash, so only changed regions are recognised again.
//! [`TesseractOcr::read_integer`] backs the sensor language's `region_integer`.
// Pixel loops index several buffers by the same coordinate; ranges say that most plainly.
#![allow(clippy::needless_range_loop)]

mod engine;
mod prep;
mod worker;

pub use engine::{parse_integer, read_integer, TesseractOcr};
pub use prep::{binarize, prepare, region_hash, Prepared};
pub use worker::{OcrWorker, WorkerStats};

/// The ocr crate's one error enum.
#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    #[error("tesseract could not start with language {lang:?}: {reason} (apt-get install tesseract-ocr-eng; TESSDATA_PREFIX)")]
    Init { lang: String, reason: String },
    #[error("tesseract failed: {0}")]
    Engine(String),
    #[error("the region {region:?} lies outside the {width}x{height} frame")]
    RegionOutside {
        region: gamepilot_core::Rect,
        width: u32,
        height: u32,
    },
    #[error("the OCR worker thread has stopped")]
    WorkerGone,
}

impl From<OcrError> for gamepilot_vision::VisionError {
    fn from(e: OcrError) -> Self {
        gamepilot_vision::VisionError::Ocr(e.to_string())
    }
}
