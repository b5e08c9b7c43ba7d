//! The single transform chain capture space ↔ window client ↔ screen (INV-GND-002).
//!
//! Capture space is the pixel grid of the image perception produced (possibly scaled from the window's
//! client area). Window space is the client area in physical pixels. Screen space is the root window.
//! `ScreenPoint` can only be made here, and the input sink accepts only `ScreenPoint`, so every
//! coordinate that reaches input synthesis has passed through this chain.

use crate::geometry::{Point, Rect, Size};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransformError {
    #[error("point ({x}, {y}) lies outside the {w}x{h} capture area")]
    OutsideCapture { x: i32, y: i32, w: u32, h: u32 },
    #[error("the window has zero size; no transform exists")]
    Degenerate,
}

/// A point on the root window. Constructed only by [`TransformChain`] (field is private).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScreenPoint {
    x: i32,
    y: i32,
}

impl ScreenPoint {
    pub fn x(&self) -> i32 {
        self.x
    }
    pub fn y(&self) -> i32 {
        self.y
    }
}

/// The geometry that maps capture space to the screen. Rebuilt by window tracking whenever the window
/// moves, resizes, changes scale or monitor (FR-PERC-002); `generation` counts rebuilds so an action
/// grounded against an older chain can be detected and refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransformChain {
    /// Top-left of the window's client area on the root window.
    pub client_origin: Point,
    /// Client area size in physical pixels.
    pub client_size: Size,
    /// Size of the capture-space image.
    pub capture_size: Size,
    /// Device scale factor reported by the platform (Xft.dpi / 96); informational for logical sizes.
    pub scale_factor: f32,
    pub generation: u64,
}

impl TransformChain {
    /// Identity capture (capture size == client size).
    pub fn new(client_origin: Point, client_size: Size) -> Self {
        TransformChain {
            client_origin,
            client_size,
            capture_size: client_size,
            scale_factor: 1.0,
            generation: 0,
        }
    }

    pub fn with_capture_size(mut self, capture_size: Size) -> Self {
        self.capture_size = capture_size;
        self
    }

    pub fn capture_bounds(&self) -> Rect {
        Rect::new(0, 0, self.capture_size.w, self.capture_size.h)
    }

    /// Capture-space point → window client point (physical pixels).
    pub fn capture_to_window(&self, p: Point) -> Result<Point, TransformError> {
        let c = self.capture_size;
        if c.w == 0 || c.h == 0 || self.client_size.w == 0 || self.client_size.h == 0 {
            return Err(TransformError::Degenerate);
        }
        if !self.capture_bounds().contains(p) {
            return Err(TransformError::OutsideCapture {
                x: p.x,
                y: p.y,
                w: c.w,
                h: c.h,
            });
        }
        let sx = self.client_size.w as f64 / c.w as f64;
        let sy = self.client_size.h as f64 / c.h as f64;
        // Map pixel centres so that capture pixel (x, y) lands inside the client pixels it covers.
        let wx = ((p.x as f64 + 0.5) * sx).floor() as i32;
        let wy = ((p.y as f64 + 0.5) * sy).floor() as i32;
        Ok(Point::new(
            wx.min(self.client_size.w as i32 - 1),
            wy.min(self.client_size.h as i32 - 1),
        ))
    }

    /// Capture-space point → screen point: the only way to obtain a [`ScreenPoint`].
    pub fn capture_to_screen(&self, p: Point) -> Result<ScreenPoint, TransformError> {
        let w = self.capture_to_window(p)?;
        Ok(ScreenPoint {
            x: self.client_origin.x + w.x,
            y: self.client_origin.y + w.y,
        })
    }

    /// Screen point → capture space, `None` when outside the window.
    pub fn screen_to_capture(&self, x: i32, y: i32) -> Option<Point> {
        let wx = x - self.client_origin.x;
        let wy = y - self.client_origin.y;
        if wx < 0 || wy < 0 || wx >= self.client_size.w as i32 || wy >= self.client_size.h as i32 {
            return None;
        }
        let cx = (wx as f64 * self.capture_size.w as f64 / self.client_size.w as f64).floor() as i32;
        let cy = (wy as f64 * self.capture_size.h as f64 / self.client_size.h as f64).floor() as i32;
        Some(Point::new(cx, cy))
    }

    /// Rescale a capture-space rectangle declared against `old` capture size into this chain's capture size.
    pub fn rescale_rect_from(&self, r: Rect, old_capture: Size) -> Rect {
        if old_capture.w == 0 || old_capture.h == 0 {
            return r;
        }
        let sx = self.capture_size.w as f64 / old_capture.w as f64;
        let sy = self.capture_size.h as f64 / old_capture.h as f64;
        Rect::new(
            (r.x as f64 * sx).round() as i32,
            (r.y as f64 * sy).round() as i32,
            (r.w as f64 * sx).round() as u32,
            (r.h as f64 * sy).round() as u32,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_chain_offsets_by_client_origin() {
        // INV-GND-002
        let t = TransformChain::new(Point::new(100, 50), Size::new(640, 480));
        let s = t.capture_to_screen(Point::new(10, 20)).unwrap();
        assert_eq!((s.x(), s.y()), (110, 70));
        assert_eq!(t.screen_to_capture(110, 70), Some(Point::new(10, 20)));
        assert_eq!(t.screen_to_capture(99, 70), None);
    }

    #[test]
    fn scaled_capture_maps_to_covered_pixels_and_rejects_outside() {
        let t = TransformChain::new(Point::new(0, 0), Size::new(1280, 720))
            .with_capture_size(Size::new(640, 360));
        let s = t.capture_to_screen(Point::new(639, 359)).unwrap();
        assert_eq!((s.x(), s.y()), (1279, 719));
        assert!(matches!(
            t.capture_to_screen(Point::new(640, 0)),
            Err(TransformError::OutsideCapture { .. })
        ));
        assert_eq!(
            t.rescale_rect_from(Rect::new(10, 10, 100, 20), Size::new(1280, 720)),
            Rect::new(5, 5, 50, 10)
        );
    }

    #[test]
    fn zero_sized_window_has_no_transform() {
        let t = TransformChain::new(Point::new(0, 0), Size::new(0, 0));
        assert_eq!(
            t.capture_to_screen(Point::new(0, 0)),
            Err(TransformError::Degenerate)
        );
    }
}
