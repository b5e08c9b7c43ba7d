//! Frames: pixels of one window's client area in capture space, owned (`Frame`) or borrowed (`FrameView`).

use crate::geometry::{Rect, Size};
use crate::time::MonoTime;

/// Byte layout of one pixel. X11 delivers `Bgrx` (32 bits per pixel, little-endian ZPixmap); images
/// loaded from files are `Rgba`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelFormat {
    Bgrx,
    Rgba,
}

/// A borrowed view of 4-byte pixels. Cheap to copy; never allocates.
#[derive(Debug, Clone, Copy)]
pub struct FrameView<'a> {
    pub width: u32,
    pub height: u32,
    /// Bytes per row (at least `4 * width`).
    pub stride: usize,
    pub format: PixelFormat,
    pub data: &'a [u8],
}

impl<'a> FrameView<'a> {
    /// A view over tightly or loosely packed rows; `None` if `data` is too short for the shape.
    pub fn new(width: u32, height: u32, stride: usize, format: PixelFormat, data: &'a [u8]) -> Option<Self> {
        if stride < width as usize * 4 {
            return None;
        }
        let needed = if height == 0 {
            0
        } else {
            stride * (height as usize - 1) + width as usize * 4
        };
        if data.len() < needed {
            return None;
        }
        Some(FrameView {
            width,
            height,
            stride,
            format,
            data,
        })
    }

    pub fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }

    pub fn bounds(&self) -> Rect {
        Rect::new(0, 0, self.width, self.height)
    }

    /// `[r, g, b]` of the pixel at (x, y); black outside the frame (never panics).
    #[inline]
    pub fn rgb(&self, x: u32, y: u32) -> [u8; 3] {
        if x >= self.width || y >= self.height {
            return [0, 0, 0];
        }
        let i = y as usize * self.stride + x as usize * 4;
        match self.data.get(i..i + 4) {
            Some(p) => match self.format {
                PixelFormat::Bgrx => [p[2], p[1], p[0]],
                PixelFormat::Rgba => [p[0], p[1], p[2]],
            },
            None => [0, 0, 0],
        }
    }

    /// One row's bytes (4 per pixel), empty outside the frame.
    #[inline]
    pub fn row(&self, y: u32) -> &'a [u8] {
        if y >= self.height {
            return &[];
        }
        let start = y as usize * self.stride;
        self.data
            .get(start..start + self.width as usize * 4)
            .unwrap_or(&[])
    }

    /// Copy into an owned RGBA buffer (tightly packed).
    pub fn to_rgba(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.width as usize * self.height as usize * 4);
        for y in 0..self.height {
            for px in self.row(y).chunks_exact(4) {
                match self.format {
                    PixelFormat::Bgrx => out.extend_from_slice(&[px[2], px[1], px[0], 255]),
                    PixelFormat::Rgba => out.extend_from_slice(&[px[0], px[1], px[2], 255]),
                }
            }
        }
        out
    }

    /// True when every pixel is black (the classic "captured nothing" symptom, FR-PERC-009).
    pub fn is_all_black(&self) -> bool {
        (0..self.height).all(|y| {
            self.row(y)
                .chunks_exact(4)
                .all(|p| p[0] == 0 && p[1] == 0 && p[2] == 0)
        })
    }
}

/// An owned frame with its capture time.
#[derive(Debug, Clone)]
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub stride: usize,
    pub format: PixelFormat,
    pub data: Vec<u8>,
    pub captured_at: MonoTime,
}

impl Frame {
    /// An owned RGBA frame from tightly packed bytes; `None` if the length does not match.
    pub fn from_rgba(width: u32, height: u32, data: Vec<u8>, captured_at: MonoTime) -> Option<Self> {
        if data.len() != width as usize * height as usize * 4 {
            return None;
        }
        Some(Frame {
            width,
            height,
            stride: width as usize * 4,
            format: PixelFormat::Rgba,
            data,
            captured_at,
        })
    }

    pub fn view(&self) -> FrameView<'_> {
        FrameView {
            width: self.width,
            height: self.height,
            stride: self.stride,
            format: self.format,
            data: &self.data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bgrx_and_rgba_read_the_same_colour() {
        let bgrx = [10u8, 20, 30, 0];
        let rgba = [30u8, 20, 10, 255];
        let a = FrameView::new(1, 1, 4, PixelFormat::Bgrx, &bgrx).unwrap();
        let b = FrameView::new(1, 1, 4, PixelFormat::Rgba, &rgba).unwrap();
        assert_eq!(a.rgb(0, 0), [30, 20, 10]);
        assert_eq!(a.rgb(0, 0), b.rgb(0, 0));
        assert_eq!(a.rgb(5, 5), [0, 0, 0]);
        assert_eq!(a.to_rgba(), rgba.to_vec());
    }

    #[test]
    fn short_buffers_are_refused_and_black_is_detected() {
        assert!(FrameView::new(2, 2, 8, PixelFormat::Rgba, &[0; 15]).is_none());
        let z = [0u8; 16];
        assert!(FrameView::new(2, 2, 8, PixelFormat::Bgrx, &z)
            .unwrap()
            .is_all_black());
    }
}

/// Which of the game's own windows shows a part of the frame beside its main window: a popup (a menu,
/// a list, a tooltip: override-redirect) or a dialog (a top-level window of the same client, usually
/// transient for the game). Capture composes them over the main window; the observation says which
/// elements lie in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowLayer {
    Popup,
    Dialog,
}

impl WindowLayer {
    pub fn as_str(self) -> &'static str {
        match self {
            WindowLayer::Popup => "popup",
            WindowLayer::Dialog => "dialog",
        }
    }
}

/// One of the game's popups or dialogs as the frame shows it: its layer and its box in capture space
/// (clipped to the main window's area).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LayerRegion {
    pub layer: WindowLayer,
    pub rect: crate::Rect,
}
