//! IO edge: OCR (FR-PERC-004) with its worker thread and region cache.
//!
//! [`PpOcr`] is the primary engine: PaddleOCR's PP-OCRv4 DB detector and SVTR recogniser (ONNX files from
//! the `rapidocr-onnxruntime` wheel) on ONNX Runtime loaded at run time from the `onnxruntime` wheel's
//! `libonnxruntime.so`, every file verified by SHA-256 before load ([`models`]). [`TesseractOcr`] (Debian's
//! libtesseract) stays as the alternative engine, chosen with `GAMEPILOT_OCR=tesseract`, and as the
//! baseline the perception bench compares against. [`default_engine`] builds the configured one;
//! [`OcrEngine`] is what callers hold. [`OcrWorker`] runs an engine off the reflex thread and caches results
//! by the region's pixel hash, so only changed regions are recognised again.
// Pixel loops index several buffers by the same coordinate; ranges say that most plainly.
#![allow(clippy::needless_range_loop)]

mod engine;
pub mod fuzzing;
mod glyphs;
pub mod models;
mod ppocr;
mod prep;
mod worker;

pub use engine::{parse_integer, TesseractOcr};
pub use ppocr::{PpOcr, TextBox};
pub use prep::{binarize, ink_bounds, prepare, region_hash, Prepared};
pub use worker::{OcrWorker, WorkerStats};

use gamepilot_core::{FrameView, Rect};
use gamepilot_vision::{Ocr, TextLine, VisionError};

/// The ocr crate's one error enum.
#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    #[error("tesseract could not start with language {lang:?}: {reason} (apt-get install tesseract-ocr-eng; TESSDATA_PREFIX)")]
    Init { lang: String, reason: String },
    #[error("tesseract failed: {0}")]
    Engine(String),
    #[error("OCR model file {path}: {reason}")]
    Model {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("PP-OCR: {0}")]
    Runtime(String),
    #[error("unknown OCR backend {0:?} (GAMEPILOT_OCR=ppocr or tesseract)")]
    Backend(String),
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

/// The OCR engine callers hold: PP-OCR (the default) or tesseract.
pub enum OcrEngine {
    PpOcr(Box<PpOcr>),
    Tesseract(TesseractOcr),
}

/// Which backend `GAMEPILOT_OCR` selects (`ppocr` when unset).
pub fn configured_backend() -> Result<&'static str, OcrError> {
    match std::env::var("GAMEPILOT_OCR").ok().as_deref() {
        None | Some("") | Some("ppocr") => Ok("ppocr"),
        Some("tesseract") => Ok("tesseract"),
        Some(other) => Err(OcrError::Backend(other.to_string())),
    }
}

/// The configured engine: PP-OCR from the verified cache unless `GAMEPILOT_OCR=tesseract`.
/// A missing or altered model file is an error naming `scripts/setup-ocr.sh`, never a silent fallback.
pub fn default_engine() -> Result<OcrEngine, OcrError> {
    match configured_backend()? {
        "tesseract" => Ok(OcrEngine::Tesseract(TesseractOcr::new()?)),
        _ => Ok(OcrEngine::PpOcr(Box::new(PpOcr::new()?))),
    }
}

/// What `doctor` prints: the configured backend, loaded for real, with its files' pinned hashes.
pub fn describe_backend() -> Result<String, OcrError> {
    match configured_backend()? {
        "tesseract" => {
            TesseractOcr::new()?;
            Ok("tesseract (GAMEPILOT_OCR=tesseract)".into())
        }
        _ => {
            let files = models::verified_files()?;
            PpOcr::from_files(&files)?;
            Ok(format!(
                "ppocr: {}; det.onnx sha256 {}, rec.onnx sha256 {}, libonnxruntime.so sha256 {} (verified, in {})",
                models::MODEL_SOURCE,
                models::DET_SHA256,
                models::REC_SHA256,
                models::LIB_SHA256,
                files.dir.display()
            ))
        }
    }
}

impl OcrEngine {
    /// `ppocr` or `tesseract`.
    pub fn backend(&self) -> &'static str {
        match self {
            OcrEngine::PpOcr(_) => "ppocr",
            OcrEngine::Tesseract(_) => "tesseract",
        }
    }

    /// Text lines of `region` (boxes in frame coordinates, wholly inside the region).
    pub fn lines(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, OcrError> {
        match self {
            OcrEngine::PpOcr(e) => e.lines(view, region),
            OcrEngine::Tesseract(e) => e.lines(view, region),
        }
    }

    /// Lines of a crop of a game screen (FR-GND-005).
    pub fn screen_lines(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, OcrError> {
        match self {
            OcrEngine::PpOcr(e) => e.screen_lines(view, region),
            OcrEngine::Tesseract(e) => e.screen_lines(view, region),
        }
    }

    /// `region_integer`: `Ok(None)` (undefined) when nothing confident was read.
    pub fn read_integer(
        &mut self,
        view: &FrameView<'_>,
        region: Rect,
        digits: u32,
    ) -> Result<Option<i64>, OcrError> {
        match self {
            OcrEngine::PpOcr(e) => e.read_integer(view, region, digits),
            OcrEngine::Tesseract(e) => e.read_integer(view, region, digits),
        }
    }
}

impl Ocr for OcrEngine {
    fn recognize(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, VisionError> {
        Ok(self.lines(view, region)?)
    }
}

thread_local! {
    static ENGINE: std::cell::RefCell<Option<OcrEngine>> = const { std::cell::RefCell::new(None) };
}

/// `region_integer` for callers without an engine of their own: a per-thread default engine, blocking.
/// Prefer [`OcrWorker::integer`] on the reflex thread (never blocks).
pub fn read_integer(view: &FrameView<'_>, region: Rect, digits: u32) -> Option<i64> {
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = default_engine().ok();
        }
        slot.as_mut()
            .and_then(|e| e.read_integer(view, region, digits).ok().flatten())
    })
}
