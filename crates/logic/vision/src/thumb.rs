//! Thumbnails: a small luma image plus a coarse colour histogram, the input of frame classification.

use gamepilot_core::FrameView;

/// Number of bins of the colour histogram (4 levels per channel).
pub const HIST_BINS: usize = 64;

/// A downscaled luma image of a frame with its colour histogram. Built once per frame from the
/// capture thumbnail (cheap) or from a full frame (strided sampling, for files and tests).
#[derive(Debug, Clone, PartialEq)]
pub struct Thumb {
    pub width: u32,
    pub height: u32,
    /// Row-major luma, `width * height` bytes.
    pub luma: Vec<u8>,
    /// Counts of pixels per RGB bin (2 bits per channel).
    pub hist: [u32; HIST_BINS],
}

/// Default thumbnail width used for classification.
pub const THUMB_WIDTH: u32 = 160;

impl Thumb {
    /// Downscale `view` to at most `max_w` pixels wide (keeping the aspect ratio), averaging every
    /// source pixel of each output pixel's block. Returns an empty thumb for an empty view.
    pub fn from_view(view: &FrameView<'_>, max_w: u32) -> Thumb {
        let (sw, sh) = (view.width, view.height);
        if sw == 0 || sh == 0 || max_w == 0 {
            return Thumb {
                width: 0,
                height: 0,
                luma: Vec::new(),
                hist: [0; HIST_BINS],
            };
        }
        let w = sw.min(max_w);
        let h = ((sh as u64 * w as u64 + sw as u64 / 2) / sw as u64).max(1) as u32;
        let mut luma = Vec::with_capacity(w as usize * h as usize);
        let mut hist = [0u32; HIST_BINS];
        let bgrx = matches!(view.format, gamepilot_core::PixelFormat::Bgrx);
        let (ri, bi) = if bgrx { (2, 0) } else { (0, 2) };
        for ty in 0..h {
            let y0 = (ty as u64 * sh as u64 / h as u64) as u32;
            let y1 = (((ty + 1) as u64 * sh as u64 / h as u64) as u32).max(y0 + 1);
            for tx in 0..w {
                let x0 = (tx as u64 * sw as u64 / w as u64) as u32;
                let x1 = (((tx + 1) as u64 * sw as u64 / w as u64) as u32).max(x0 + 1);
                let (mut r, mut g, mut b, mut n) = (0u32, 0u32, 0u32, 0u32);
                // Every pixel of the block (a 1-px grid line moving by a few pixels must show).
                for y in y0..y1 {
                    let row = view.row(y);
                    for x in x0..x1 {
                        let i = x as usize * 4;
                        if let Some(p) = row.get(i..i + 4) {
                            r += p[ri] as u32;
                            g += p[1] as u32;
                            b += p[bi] as u32;
                            n += 1;
                        }
                    }
                }
                let n = n.max(1);
                let (r, g, b) = (r / n, g / n, b / n);
                luma.push(((r * 77 + g * 150 + b * 29) >> 8) as u8);
                hist[((r >> 6) * 16 + (g >> 6) * 4 + (b >> 6)) as usize] += 1;
            }
        }
        Thumb {
            width: w,
            height: h,
            luma,
            hist,
        }
    }

    /// Luma at (x, y); 0 outside.
    #[inline]
    pub fn at(&self, x: u32, y: u32) -> u8 {
        if x >= self.width || y >= self.height {
            return 0;
        }
        self.luma
            .get(y as usize * self.width as usize + x as usize)
            .copied()
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.width == 0 || self.height == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    #[test]
    fn downscales_keeping_aspect_and_colour() {
        let (w, h) = (320u32, 180u32);
        let mut data = vec![0u8; (w * h * 4) as usize];
        for (i, px) in data.chunks_exact_mut(4).enumerate() {
            let x = i as u32 % w;
            if x >= 160 {
                px.copy_from_slice(&[255, 255, 255, 255]);
            }
        }
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &data).unwrap();
        let t = Thumb::from_view(&v, 160);
        assert_eq!((t.width, t.height), (160, 90));
        assert_eq!(t.at(10, 10), 0);
        assert_eq!(t.at(150, 10), 255);
        assert_eq!(t.hist.iter().sum::<u32>(), 160 * 90);
        assert_eq!(t.hist[0], 80 * 90);
        assert_eq!(t.hist[63], 80 * 90);
    }

    #[test]
    fn empty_view_gives_empty_thumb() {
        let v = FrameView::new(0, 0, 0, PixelFormat::Rgba, &[]).unwrap();
        assert!(Thumb::from_view(&v, 160).is_empty());
    }
}
