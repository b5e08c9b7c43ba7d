//! The coordinates a model answers in (FR-GND-001, INV-GND-002): each vision-model family was
//! trained on one convention — absolute pixels of the image it was sent (Qwen2.5-VL), 0–1000 normalised
//! (UI-TARS, Qwen2-VL, CogAgent) or, for families without a trained convention, fractions 0–1 of the image —
//! and a text-only model reads the observation's capture pixels. A [`CoordSpace`] maps a reply's point back
//! into capture space (then the transform chain takes it to the screen) and says how the observation's
//! boxes are written for the model, so the text and the picture agree.

use crate::{Point, Size};
use serde::{Deserialize, Serialize};

/// How a model's x and y are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CoordConvention {
    /// Pixels of the window capture (the observation's own numbers; text-only models).
    #[default]
    CapturePixels,
    /// Pixels of the image sent with the call.
    ImagePixels,
    /// 0–1000 along each axis of the image.
    Normalized1000,
    /// Fractions 0–1 along each axis of the image.
    Fraction,
}

/// The model families gamepilot knows the coordinate convention of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelFamily {
    /// A text-only model: no image, the observation's capture pixels.
    Text,
    #[serde(rename = "qwen2.5-vl")]
    Qwen25Vl,
    UiTars,
    Qwen2Vl,
    Cogagent,
    Gemma3,
    #[serde(rename = "llama3.2-vision")]
    Llama32Vision,
    MinicpmV,
    /// A vision model of no known family.
    OtherVision,
}

impl ModelFamily {
    pub const ALL: [ModelFamily; 9] = [
        ModelFamily::Text,
        ModelFamily::Qwen25Vl,
        ModelFamily::UiTars,
        ModelFamily::Qwen2Vl,
        ModelFamily::Cogagent,
        ModelFamily::Gemma3,
        ModelFamily::Llama32Vision,
        ModelFamily::MinicpmV,
        ModelFamily::OtherVision,
    ];

    /// The name on the command line (`--model-family`).
    pub fn name(self) -> &'static str {
        match self {
            ModelFamily::Text => "text",
            ModelFamily::Qwen25Vl => "qwen2.5-vl",
            ModelFamily::UiTars => "ui-tars",
            ModelFamily::Qwen2Vl => "qwen2-vl",
            ModelFamily::Cogagent => "cogagent",
            ModelFamily::Gemma3 => "gemma3",
            ModelFamily::Llama32Vision => "llama3.2-vision",
            ModelFamily::MinicpmV => "minicpm-v",
            ModelFamily::OtherVision => "other-vision",
        }
    }

    pub fn from_name(name: &str) -> Option<ModelFamily> {
        ModelFamily::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The family a model's name (a file name, a host's model id) says, if any. UI-TARS is checked before
    /// Qwen2-VL (UI-TARS models are Qwen2-VL fine-tunes and often say both).
    pub fn detect(model_name: &str) -> Option<ModelFamily> {
        let n: String = model_name
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
            .collect();
        let has = |s: &str| n.contains(s);
        if has("uitars") {
            Some(ModelFamily::UiTars)
        } else if has("qwen2.5vl") || has("qwen25vl") {
            Some(ModelFamily::Qwen25Vl)
        } else if has("qwen2vl") {
            Some(ModelFamily::Qwen2Vl)
        } else if has("cogagent") {
            Some(ModelFamily::Cogagent)
        } else if has("gemma3") || has("gemma.3") {
            Some(ModelFamily::Gemma3)
        } else if has("llama3.2") && has("vision") || has("llama3.2v") {
            Some(ModelFamily::Llama32Vision)
        } else if has("minicpmv") || has("minicpmo") {
            Some(ModelFamily::MinicpmV)
        } else {
            None
        }
    }

    /// The convention the family was trained on (or, without one, the neutral fractions).
    pub fn convention(self) -> CoordConvention {
        match self {
            ModelFamily::Text => CoordConvention::CapturePixels,
            ModelFamily::Qwen25Vl => CoordConvention::ImagePixels,
            ModelFamily::UiTars | ModelFamily::Qwen2Vl | ModelFamily::Cogagent => {
                CoordConvention::Normalized1000
            }
            ModelFamily::Gemma3
            | ModelFamily::Llama32Vision
            | ModelFamily::MinicpmV
            | ModelFamily::OtherVision => CoordConvention::Fraction,
        }
    }

    /// The most pixels one image of this family is worth sending (its encoder's limit): the visual budget
    /// is capped by it (FR-MODEL-002).
    pub fn max_image_pixels(self) -> u64 {
        match self {
            ModelFamily::Text => 0,
            // Qwen2-VL/2.5-VL/UI-TARS: dynamic resolution, default max_pixels 12,845,056 (28×28 patches).
            ModelFamily::Qwen25Vl | ModelFamily::UiTars | ModelFamily::Qwen2Vl => 12_845_056,
            ModelFamily::Cogagent => 1120 * 1120,
            // Gemma 3's SigLIP encoder sees 896×896 (larger images are cropped into more tiles).
            ModelFamily::Gemma3 => 896 * 896,
            ModelFamily::Llama32Vision => 1120 * 1120,
            ModelFamily::MinicpmV => 1344 * 1344,
            ModelFamily::OtherVision => 1024 * 1024,
        }
    }
}

/// One call's coordinate space: the convention, the size of the image the model saw and the capture's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordSpace {
    pub convention: CoordConvention,
    pub image: Size,
    pub capture: Size,
}

impl CoordSpace {
    /// The capture's own pixels (no image, or a text-only model).
    pub fn capture(capture: Size) -> CoordSpace {
        CoordSpace {
            convention: CoordConvention::CapturePixels,
            image: capture,
            capture,
        }
    }

    pub fn new(convention: CoordConvention, image: Size, capture: Size) -> CoordSpace {
        CoordSpace {
            convention,
            image,
            capture,
        }
    }

    /// The largest x and y a model may answer (inclusive) and whether they are integers.
    pub fn range(&self) -> (f64, f64, bool) {
        match self.convention {
            CoordConvention::CapturePixels => (
                self.capture.w.saturating_sub(1) as f64,
                self.capture.h.saturating_sub(1) as f64,
                true,
            ),
            CoordConvention::ImagePixels => (
                self.image.w.saturating_sub(1) as f64,
                self.image.h.saturating_sub(1) as f64,
                true,
            ),
            CoordConvention::Normalized1000 => (1000.0, 1000.0, true),
            CoordConvention::Fraction => (1.0, 1.0, false),
        }
    }

    /// The extent one axis is measured against (x = extent.0 is the image's right edge).
    fn extent(&self) -> (f64, f64) {
        match self.convention {
            CoordConvention::CapturePixels => (self.capture.w as f64, self.capture.h as f64),
            CoordConvention::ImagePixels => (self.image.w.max(1) as f64, self.image.h.max(1) as f64),
            CoordConvention::Normalized1000 => (1000.0, 1000.0),
            CoordConvention::Fraction => (1.0, 1.0),
        }
    }

    /// A model's point in capture pixels, clamped into the capture.
    pub fn to_capture(&self, x: f64, y: f64) -> Point {
        let (ew, eh) = self.extent();
        let (cw, ch) = (self.capture.w as f64, self.capture.h as f64);
        let (px, py) = match self.convention {
            CoordConvention::CapturePixels => (x, y),
            // Pixel centres: pixel i of the image covers [i, i+1) of its extent.
            CoordConvention::ImagePixels => ((x + 0.5) * cw / ew, (y + 0.5) * ch / eh),
            _ => (x * cw / ew, y * ch / eh),
        };
        let clamp = |v: f64, max: f64| v.floor().clamp(0.0, (max - 1.0).max(0.0)) as i32;
        Point::new(clamp(px, cw), clamp(py, ch))
    }

    /// A capture point in this space (the inverse of [`CoordSpace::to_capture`], for tests and prompts).
    pub fn from_capture(&self, p: Point) -> (f64, f64) {
        let (ew, eh) = self.extent();
        let (cw, ch) = (self.capture.w.max(1) as f64, self.capture.h.max(1) as f64);
        let (x, y) = (p.x as f64 + 0.5, p.y as f64 + 0.5);
        match self.convention {
            CoordConvention::CapturePixels => (p.x as f64, p.y as f64),
            CoordConvention::ImagePixels => ((x * ew / cw).floor(), (y * eh / ch).floor()),
            CoordConvention::Normalized1000 => ((x * ew / cw).round(), (y * eh / ch).round()),
            CoordConvention::Fraction => (x / cw, y / ch),
        }
    }

    /// The size the observation's boxes are written in for the model, so that its numbers are the reply's
    /// (fractions are written in thousandths).
    pub fn text_size(&self) -> Size {
        match self.convention {
            CoordConvention::CapturePixels => self.capture,
            CoordConvention::ImagePixels => self.image,
            CoordConvention::Normalized1000 | CoordConvention::Fraction => Size::new(1000, 1000),
        }
    }

    /// One line for the observation saying how to answer.
    pub fn describe(&self) -> String {
        match self.convention {
            CoordConvention::CapturePixels => format!(
                "Coordinates: window pixels, x 0–{} and y 0–{}, origin top-left.",
                self.capture.w.saturating_sub(1),
                self.capture.h.saturating_sub(1)
            ),
            CoordConvention::ImagePixels => format!(
                "Coordinates: pixels of the attached {}×{} image, origin top-left; boxes below are in them too.",
                self.image.w, self.image.h
            ),
            CoordConvention::Normalized1000 => {
                "Coordinates: 0–1000 along each axis of the image (0,0 top-left, 1000,1000 bottom-right); boxes below are in them too.".into()
            }
            CoordConvention::Fraction => {
                "Coordinates: fractions 0–1 along each axis of the image (0,0 top-left, 1,1 bottom-right); boxes below are in thousandths.".into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // INV-GND-002: every convention maps a point there and back within one capture pixel
    #[test]
    fn each_convention_round_trips_a_capture_point() {
        let capture = Size::new(1280, 720);
        let image = Size::new(512, 288);
        for conv in [
            CoordConvention::CapturePixels,
            CoordConvention::ImagePixels,
            CoordConvention::Normalized1000,
            CoordConvention::Fraction,
        ] {
            let s = CoordSpace::new(conv, image, capture);
            for p in [
                Point::new(640, 330),
                Point::new(0, 0),
                Point::new(1279, 719),
                Point::new(17, 701),
            ] {
                let (x, y) = s.from_capture(p);
                let back = s.to_capture(x, y);
                let tol = match conv {
                    CoordConvention::ImagePixels => 3, // one image pixel is 2.5 capture pixels
                    _ => 1,
                };
                assert!(
                    (back.x - p.x).abs() <= tol && (back.y - p.y).abs() <= tol,
                    "{conv:?}: {p:?} → ({x}, {y}) → {back:?}"
                );
            }
        }
        // Out of range answers are clamped into the capture.
        let s = CoordSpace::new(CoordConvention::Normalized1000, image, capture);
        assert_eq!(s.to_capture(1000.0, 1000.0), Point::new(1279, 719));
        assert_eq!(s.to_capture(500.0, 500.0), Point::new(640, 360));
        let s = CoordSpace::new(CoordConvention::ImagePixels, image, capture);
        assert_eq!(s.to_capture(255.0, 143.0), Point::new(638, 358));
        assert_eq!(s.range(), (511.0, 287.0, true));
        assert_eq!(
            CoordSpace::new(CoordConvention::Fraction, image, capture).range(),
            (1.0, 1.0, false)
        );
    }

    // The family from a model's name, and its convention
    #[test]
    fn families_are_detected_from_model_names() {
        for (name, fam) in [
            ("Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", ModelFamily::Qwen25Vl),
            ("qwen2.5vl:7b", ModelFamily::Qwen25Vl),
            ("UI-TARS-1.5-7B.gguf", ModelFamily::UiTars),
            ("bytedance/ui-tars-7b-sft (qwen2-vl)", ModelFamily::UiTars),
            ("Qwen2-VL-2B-Instruct", ModelFamily::Qwen2Vl),
            ("THUDM/cogagent-9b", ModelFamily::Cogagent),
            ("gemma-3-4b-it-Q4_K_M.gguf", ModelFamily::Gemma3),
            ("gemma3:12b", ModelFamily::Gemma3),
            ("Llama-3.2-11B-Vision-Instruct", ModelFamily::Llama32Vision),
            ("llama3.2-vision:11b", ModelFamily::Llama32Vision),
            ("MiniCPM-V-2_6-gguf", ModelFamily::MinicpmV),
        ] {
            assert_eq!(ModelFamily::detect(name), Some(fam), "{name}");
        }
        assert_eq!(ModelFamily::detect("SmolLM2-135M-Instruct"), None);
        assert_eq!(ModelFamily::detect("llama-3.2-3b-instruct"), None);
        assert_eq!(ModelFamily::Qwen25Vl.convention(), CoordConvention::ImagePixels);
        assert_eq!(ModelFamily::UiTars.convention(), CoordConvention::Normalized1000);
        assert_eq!(ModelFamily::Gemma3.convention(), CoordConvention::Fraction);
        for f in ModelFamily::ALL {
            assert_eq!(ModelFamily::from_name(f.name()), Some(f));
        }
    }
}
