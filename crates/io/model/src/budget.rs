//! The visual token budget (FR-MODEL-002): a per-cadence pixel area, tactical lower than deliberative.
//! The frame is resized (aspect kept, never enlarged) to fit the area before it is encoded and sent;
//! the area spent is recorded with the call.

use crate::ModelError;
use base64::Engine as _;
use gamepilot_context::{Cadence, ImagePart};
use gamepilot_core::{FrameView, Size};
use image::{ImageBuffer, Rgb};

/// Pixel areas per cadence. A recorded, configurable figure; the degrade ladder scales it down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct VisualBudget {
    pub tactical_pixels: u64,
    pub deliberative_pixels: u64,
}

impl Default for VisualBudget {
    /// Tactical 448×252 (≈113 k pixels), deliberative 1024×576 (≈590 k pixels) for a 16:9 window.
    fn default() -> Self {
        VisualBudget {
            tactical_pixels: 448 * 252,
            deliberative_pixels: 1024 * 576,
        }
    }
}

impl VisualBudget {
    /// A budget; the tactical area must be positive and lower than the deliberative one.
    pub fn new(tactical_pixels: u64, deliberative_pixels: u64) -> Result<Self, ModelError> {
        if tactical_pixels == 0 || tactical_pixels >= deliberative_pixels {
            return Err(ModelError::Config(format!(
                "visual budget: tactical ({tactical_pixels} px) must be positive and lower than deliberative ({deliberative_pixels} px)"
            )));
        }
        Ok(VisualBudget {
            tactical_pixels,
            deliberative_pixels,
        })
    }

    pub fn pixels(&self, cadence: Cadence) -> u64 {
        match cadence {
            Cadence::Tactical => self.tactical_pixels,
            Cadence::Deliberative => self.deliberative_pixels,
        }
    }

    /// Both areas scaled by `factor` (0..1], keeping tactical < deliberative and at least 1 pixel.
    pub fn scaled(&self, factor: f64) -> VisualBudget {
        let f = factor.clamp(0.0, 1.0);
        let d = ((self.deliberative_pixels as f64 * f) as u64).max(2);
        let t = ((self.tactical_pixels as f64 * f) as u64).clamp(1, d - 1);
        VisualBudget {
            tactical_pixels: t,
            deliberative_pixels: d,
        }
    }
}

/// The largest size with the source's aspect ratio whose area fits `max_pixels`; never larger than the
/// source, never zero.
pub fn fit(src: Size, max_pixels: u64) -> Size {
    src.fit_within(max_pixels)
}

/// Resizes `frame` to the cadence's budget and encodes it as PNG for the prompt's last block.
pub fn encode_for_budget(frame: &FrameView<'_>, max_pixels: u64) -> Result<ImagePart, ModelError> {
    if frame.width == 0 || frame.height == 0 {
        return Err(ModelError::Image(format!(
            "empty frame {}x{}",
            frame.width, frame.height
        )));
    }
    let mut rgb = Vec::with_capacity(frame.width as usize * frame.height as usize * 3);
    for y in 0..frame.height {
        for x in 0..frame.width {
            rgb.extend_from_slice(&frame.rgb(x, y));
        }
    }
    let img: ImageBuffer<Rgb<u8>, Vec<u8>> = ImageBuffer::from_raw(frame.width, frame.height, rgb)
        .ok_or_else(|| ModelError::Image("frame buffer does not match its size".into()))?;
    let target = fit(frame.size(), max_pixels);
    let img = if target == frame.size() {
        img
    } else {
        image::imageops::resize(&img, target.w, target.h, image::imageops::FilterType::Triangle)
    };
    let mut png = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|e| ModelError::Image(format!("PNG encoding failed: {e}")))?;
    Ok(ImagePart {
        mime: "image/png".into(),
        width: target.w,
        height: target.h,
        data_base64: base64::engine::general_purpose::STANDARD.encode(&png),
    })
}

/// The image for a call, or `None` when the host is not known to take images (a text-only model: the
/// observation's text form stands in for it, and llama.cpp would refuse the image with HTTP 500).
pub fn image_for_host(
    caps: &crate::client::Capabilities,
    frame: &FrameView<'_>,
    cadence: Cadence,
    budget: &VisualBudget,
) -> Result<Option<ImagePart>, ModelError> {
    if caps.vision != Some(true) {
        return Ok(None);
    }
    encode_for_budget(frame, budget.pixels(cadence)).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    #[test]
    fn tactical_budget_is_lower_than_deliberative() {
        // FR-MODEL-002
        let b = VisualBudget::default();
        assert!(b.pixels(Cadence::Tactical) < b.pixels(Cadence::Deliberative));
        assert!(VisualBudget::new(500, 500).is_err());
        assert!(VisualBudget::new(0, 500).is_err());
        let s = b.scaled(0.5);
        assert!(s.tactical_pixels < s.deliberative_pixels && s.tactical_pixels <= b.tactical_pixels / 2 + 1);
        let tiny = b.scaled(0.0);
        assert!(tiny.tactical_pixels >= 1 && tiny.tactical_pixels < tiny.deliberative_pixels);
    }

    #[test]
    fn fit_keeps_aspect_and_area() {
        // FR-MODEL-002: resize to the budget's pixel area
        let s = fit(Size::new(1280, 720), 448 * 252);
        assert_eq!(s, Size::new(448, 252));
        let s = fit(Size::new(1920, 1080), 100_000);
        assert!(s.area() <= 100_000 && s.area() > 95_000, "{s:?}");
        assert!(((s.w as f64 / s.h as f64) - 16.0 / 9.0).abs() < 0.02);
        assert_eq!(fit(Size::new(320, 200), 1_000_000), Size::new(320, 200));
        assert_eq!(fit(Size::new(10_000, 1), 10), Size::new(10, 1));
    }

    #[test]
    fn frame_is_resized_and_encoded_within_budget() {
        // FR-MODEL-002
        let (w, h) = (320u32, 180u32);
        let mut data = vec![0u8; (w * h * 4) as usize];
        for (i, px) in data.chunks_exact_mut(4).enumerate() {
            px[0] = (i % 256) as u8; // B
            px[2] = 200; // R
        }
        let frame = FrameView::new(w, h, w as usize * 4, PixelFormat::Bgrx, &data).unwrap();
        let part = encode_for_budget(&frame, 160 * 90).unwrap();
        assert_eq!((part.width, part.height), (160, 90));
        let png = base64::engine::general_purpose::STANDARD
            .decode(&part.data_base64)
            .unwrap();
        let decoded = image::load_from_memory(&png).unwrap().to_rgb8();
        assert_eq!(decoded.dimensions(), (160, 90));
        assert_eq!(decoded.get_pixel(80, 45).0[0], 200);
        assert!(part.data_url().starts_with("data:image/png;base64,iVBOR"));
        // FR-MODEL-002: the cadence picks the budget; a text-only host gets no image at all
        let b = VisualBudget::new(64 * 36, 160 * 90).unwrap();
        let mut caps = crate::client::Capabilities {
            vision: Some(true),
            ..Default::default()
        };
        let t = image_for_host(&caps, &frame, Cadence::Tactical, &b)
            .unwrap()
            .unwrap();
        let d = image_for_host(&caps, &frame, Cadence::Deliberative, &b)
            .unwrap()
            .unwrap();
        assert_eq!(((t.width, t.height), (d.width, d.height)), ((64, 36), (160, 90)));
        caps.vision = Some(false);
        assert_eq!(
            image_for_host(&caps, &frame, Cadence::Tactical, &b).unwrap(),
            None
        );
        caps.vision = None;
        assert_eq!(
            image_for_host(&caps, &frame, Cadence::Deliberative, &b).unwrap(),
            None
        );
        let empty = FrameView::new(0, 0, 0, PixelFormat::Bgrx, &[]).unwrap();
        assert!(matches!(
            encode_for_budget(&empty, 100),
            Err(ModelError::Image(_))
        ));
    }
}
