//! The `Ocr` trait the perception pipeline calls, and the text types it returns (FR-PERC-004).
//! The tesseract implementation lives in the `ocr` crate; unit tests use doubles.

use crate::VisionError;
use gamepilot_core::{FrameView, Rect};
use serde::{Deserialize, Serialize};

/// One recognised word, its box in frame coordinates and its confidence 0..1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextWord {
    pub text: String,
    pub bbox: Rect,
    pub confidence: f32,
}

/// One line of text: its words, the joined text, the union box and the mean word confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextLine {
    pub text: String,
    pub bbox: Rect,
    pub confidence: f32,
    pub words: Vec<TextWord>,
}

impl TextLine {
    /// Build a line from words (in reading order); `None` when there are none.
    pub fn from_words(words: Vec<TextWord>) -> Option<TextLine> {
        let first = words.first()?;
        let mut bbox = first.bbox;
        for w in &words[1..] {
            bbox = union(&bbox, &w.bbox);
        }
        let confidence = words.iter().map(|w| w.confidence).sum::<f32>() / words.len() as f32;
        let text = words
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        Some(TextLine {
            text,
            bbox,
            confidence,
            words,
        })
    }
}

/// The smallest rectangle holding both.
pub fn union(a: &Rect, b: &Rect) -> Rect {
    let x0 = a.x.min(b.x);
    let y0 = a.y.min(b.y);
    let x1 = a.right().max(b.right());
    let y1 = a.bottom().max(b.bottom());
    Rect::new(
        x0,
        y0,
        (x1 - x0 as i64).max(0) as u32,
        (y1 - y0 as i64).max(0) as u32,
    )
}

/// Text recognition over a region of a frame. Boxes come back in the frame's coordinates, wholly inside
/// `region`; words below the implementation's confidence floor are already filtered out.
pub trait Ocr {
    fn recognize(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, VisionError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_joins_words_and_boxes() {
        // FR-PERC-004
        let w = |t: &str, x, c| TextWord {
            text: t.into(),
            bbox: Rect::new(x, 10, 20, 12),
            confidence: c,
        };
        let l = TextLine::from_words(vec![w("Coins", 0, 0.9), w("12", 30, 0.7)]).unwrap();
        assert_eq!(l.text, "Coins 12");
        assert_eq!(l.bbox, Rect::new(0, 10, 50, 12));
        assert!((l.confidence - 0.8).abs() < 1e-6);
        assert!(TextLine::from_words(vec![]).is_none());
    }
}
