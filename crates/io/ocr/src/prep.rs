//! Preparing a region for tesseract: crop, grey, polarity (dark text on a light ground), scale, pad;
//! and the fast pixel hash that keys the region cache.

use gamepilot_core::{FrameView, Rect};

/// A greyscale image ready for tesseract, with the mapping back to frame coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub width: u32,
    pub height: u32,
    pub gray: Vec<u8>,
    /// Integer upscale factor applied.
    pub scale: u32,
    /// Padding added on every side, in prepared pixels.
    pub pad: u32,
    /// Region origin in the frame.
    pub origin: (i32, i32),
    /// Region size in the frame (boxes are clamped into it).
    pub region: Rect,
    pub inverted: bool,
}

impl Prepared {
    /// Prepared-image box → frame box, clamped inside the region.
    pub fn to_frame(&self, left: i64, top: i64, w: i64, h: i64) -> Option<Rect> {
        // Engine output is untrusted: keep the arithmetic far from i64's edges.
        let lim = |v: i64| v.clamp(-(1 << 40), 1 << 40);
        let (left, top, w, h) = (lim(left), lim(top), lim(w), lim(h));
        let s = self.scale.max(1) as i64;
        let p = self.pad as i64;
        let x0 = (left - p).div_euclid(s) + self.origin.0 as i64;
        let y0 = (top - p).div_euclid(s) + self.origin.1 as i64;
        let x1 = (left + w - p + s - 1).div_euclid(s) + self.origin.0 as i64;
        let y1 = (top + h - p + s - 1).div_euclid(s) + self.origin.1 as i64;
        let c = |v: i64| v.clamp(i32::MIN as i64 / 2, i32::MAX as i64 / 2);
        let (x0, y0, x1, y1) = (c(x0), c(y0), c(x1), c(y1));
        let r = Rect::new(
            x0 as i32,
            y0 as i32,
            (x1 - x0).max(0) as u32,
            (y1 - y0).max(0) as u32,
        );
        r.clamped_to(&self.region)
    }
}

/// Crop `region` of `view`, convert to grey, invert when the ground is dark, upscale by `scale`
/// (nearest, which keeps pixel-font edges crisp) and pad with the ground colour.
pub fn prepare(
    view: &FrameView<'_>,
    region: Rect,
    scale: u32,
    pad: u32,
    force_invert: Option<bool>,
) -> Prepared {
    let region = region.clamped_to(&view.bounds()).unwrap_or(Rect::new(0, 0, 0, 0));
    let (rw, rh) = (region.w, region.h);
    let mut g = Vec::with_capacity((rw * rh) as usize);
    for y in 0..rh {
        for x in 0..rw {
            let [r, gg, b] = view.rgb(region.x as u32 + x, region.y as u32 + y);
            // Max-channel grey keeps saturated text (yellow, red, cyan) bright against dark grounds.
            let l = (r as u32 * 77 + gg as u32 * 150 + b as u32 * 29) >> 8;
            let m = r.max(gg).max(b) as u32;
            g.push(((l + m) / 2) as u8);
        }
    }
    let ground = border_median(&g, rw, rh);
    let inverted = force_invert.unwrap_or(ground < 128);
    if inverted {
        g.iter_mut().for_each(|v| *v = 255 - *v);
    }
    // Contrast stretch between the ground and the darkest ink.
    let ground_v = if inverted { 255 - ground } else { ground };
    let ink = g.iter().copied().min().unwrap_or(0);
    // u32: a bright uniform region (ink near 255) must not wrap `ink + 16` and divide by a zero span.
    if ground_v as u32 > ink as u32 + 16 {
        let span = (ground_v - ink) as u32;
        g.iter_mut().for_each(|v| {
            let c = (*v).clamp(ink, ground_v) - ink;
            *v = (c as u32 * 255 / span) as u8;
        });
    }
    // Bounded so that no region or factor can overflow the prepared image's size.
    let s = scale.clamp(1, 16);
    let pad = pad.min(256);
    let (w, h) = (rw * s + 2 * pad, rh * s + 2 * pad);
    let mut out = vec![255u8; (w * h) as usize];
    for y in 0..rh * s {
        let src = &g[((y / s) * rw) as usize..((y / s + 1) * rw) as usize];
        let dst = &mut out[((y + pad) * w + pad) as usize..((y + pad) * w + pad + rw * s) as usize];
        for (x, d) in dst.iter_mut().enumerate() {
            *d = src[x / s as usize];
        }
    }
    Prepared {
        width: w,
        height: h,
        gray: out,
        scale: s,
        pad,
        origin: (region.x, region.y),
        region,
        inverted,
    }
}

/// Adaptive binarisation: a pixel is ink when it is clearly darker than the mean of its
/// `(2r+1)²` neighbourhood. Dim text on a dimmed overlay survives, which one global threshold loses.
pub fn binarize(p: &mut Prepared, r: u32, min_diff: u8) {
    let (w, h) = (p.width as usize, p.height as usize);
    if w == 0 || h == 0 {
        return;
    }
    let mean = local_mean(&p.gray, w, h, r as usize);
    let out: Vec<u8> = p
        .gray
        .iter()
        .zip(&mean)
        .map(|(&g, &m)| {
            if g as u32 + min_diff as u32 <= m as u32 {
                0
            } else {
                255
            }
        })
        .collect();
    p.gray = out;
}

/// Mean of each pixel's `(2r+1)²` neighbourhood (clamped at the edges), from a 64-bit integral image (no
/// overflow at any size).
pub(crate) fn local_mean(g: &[u8], w: usize, h: usize, r: usize) -> Vec<u8> {
    if g.len() < w * h {
        return vec![0; g.len()];
    }
    let mut integral = vec![0u64; (w + 1) * (h + 1)];
    for y in 0..h {
        let mut row = 0u64;
        for x in 0..w {
            row += g[y * w + x] as u64;
            integral[(y + 1) * (w + 1) + x + 1] = integral[y * (w + 1) + x + 1] + row;
        }
    }
    let mut out = vec![0u8; w * h];
    for y in 0..h {
        let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(h));
        for x in 0..w {
            let (x0, x1) = (x.saturating_sub(r), (x + r + 1).min(w));
            let sum = integral[y1 * (w + 1) + x1] + integral[y0 * (w + 1) + x0]
                - integral[y0 * (w + 1) + x1]
                - integral[y1 * (w + 1) + x0];
            out[y * w + x] = (sum / ((y1 - y0) * (x1 - x0)).max(1) as u64) as u8;
        }
    }
    out
}

/// Calls `visit` with the pixel indexes and the inclusive box `(x0, y0, x1, y1)` of each 8-connected
/// component of `mask` (`w × h`, row-major) in scan order, until it answers `false`.
pub(crate) fn components8(
    mask: &[bool],
    w: usize,
    h: usize,
    mut visit: impl FnMut(&[usize], (usize, usize, usize, usize)) -> bool,
) {
    if mask.len() < w * h {
        return;
    }
    let mut seen = vec![false; w * h];
    let (mut stack, mut pixels) = (Vec::new(), Vec::new());
    for start in 0..w * h {
        if !mask[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        pixels.clear();
        let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0, 0);
        while let Some(i) = stack.pop() {
            pixels.push(i);
            let (x, y) = (i % w, i / w);
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            for ny in y.saturating_sub(1)..(y + 2).min(h) {
                for nx in x.saturating_sub(1)..(x + 2).min(w) {
                    let j = ny * w + nx;
                    if mask[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        if !visit(&pixels, (x0, y0, x1, y1)) {
            return;
        }
    }
}

fn border_median(g: &[u8], w: u32, h: u32) -> u8 {
    if w == 0 || h == 0 {
        return 255;
    }
    let mut hist = [0u32; 256];
    let mut n = 0;
    for x in 0..w {
        hist[g[x as usize] as usize] += 1;
        hist[g[((h - 1) * w + x) as usize] as usize] += 1;
        n += 2;
    }
    for y in 0..h {
        hist[g[(y * w) as usize] as usize] += 1;
        hist[g[(y * w + w - 1) as usize] as usize] += 1;
        n += 2;
    }
    let mut acc = 0;
    for (v, c) in hist.iter().enumerate() {
        acc += c;
        if acc * 2 >= n {
            return v as u8;
        }
    }
    255
}

/// The box of the pixels that stand out from the region's ground (its border median) by more than a
/// fixed contrast, in the RGB image's coordinates; `None` for an empty, tiny or uniform region.
pub fn ink_bounds(rgb: &[u8], w: usize, h: usize) -> Option<Rect> {
    if w < 2 || h < 2 || rgb.len() < w * h * 3 {
        return None;
    }
    let g: Vec<u8> = rgb
        .chunks_exact(3)
        .take(w * h)
        .map(|p| {
            let l = (p[0] as u32 * 77 + p[1] as u32 * 150 + p[2] as u32 * 29) >> 8;
            let m = p[0].max(p[1]).max(p[2]) as u32;
            ((l + m) / 2) as u8
        })
        .collect();
    let ground = border_median(&g, w as u32, h as u32) as i32;
    let (mut x0, mut y0, mut x1, mut y1, mut n) = (usize::MAX, usize::MAX, 0usize, 0usize, 0usize);
    for y in 0..h {
        for x in 0..w {
            if (g[y * w + x] as i32 - ground).abs() > 60 {
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x);
                y1 = y1.max(y);
                n += 1;
            }
        }
    }
    if n < 3 || y1 - y0 + 1 < 3 {
        return None;
    }
    Some(Rect::new(
        x0 as i32,
        y0 as i32,
        (x1 - x0 + 1) as u32,
        (y1 - y0 + 1) as u32,
    ))
}

/// A fast 64-bit hash of the region's pixels (and its size); the cache key.
pub fn region_hash(view: &FrameView<'_>, region: Rect) -> u64 {
    let r = match region.clamped_to(&view.bounds()) {
        Some(r) => r,
        None => return 0,
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ ((r.w as u64) << 32 | r.h as u64);
    for y in r.y as u32..r.bottom() as u32 {
        let row = view.row(y);
        let bytes = row.get(r.x as usize * 4..r.right() as usize * 4).unwrap_or(&[]);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            // Ignore the X byte of BGRX pixels, which servers may leave undefined.
            let v = u64::from_le_bytes(a) & 0x00ff_ffff_00ff_ffff;
            h = (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    #[test]
    fn dark_grounds_are_inverted_and_boxes_map_back() {
        // FR-PERC-004: bright text on a dark ground becomes dark text on a light ground.
        let (w, h) = (40u32, 20u32);
        let mut buf = vec![0u8; (w * h * 4) as usize];
        for px in buf.chunks_exact_mut(4) {
            px.copy_from_slice(&[10, 10, 30, 255]);
        }
        let i = ((10 * w + 20) * 4) as usize;
        buf[i..i + 4].copy_from_slice(&[250, 250, 250, 255]);
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let p = prepare(&v, Rect::new(10, 5, 20, 10), 3, 4, None);
        assert!(p.inverted);
        assert_eq!((p.width, p.height), (20 * 3 + 8, 10 * 3 + 8));
        // The bright pixel (20, 10) → region (10, 5) → prepared (30+4, 15+4), now dark.
        assert!(p.gray[(19 * p.width + 34) as usize] < 30);
        assert!(p.gray[0] > 200);
        assert_eq!(p.to_frame(34, 19, 3, 3), Some(Rect::new(20, 10, 1, 1)));
        assert_eq!(p.to_frame(0, 0, 500, 500), Some(Rect::new(10, 5, 20, 10)));
    }

    #[test]
    fn the_hash_sees_pixel_changes_and_ignores_padding_bytes() {
        let mut buf = vec![7u8; 16 * 16 * 4];
        let v = FrameView::new(16, 16, 64, PixelFormat::Bgrx, &buf).unwrap();
        let r = Rect::new(2, 2, 8, 8);
        let a = region_hash(&v, r);
        buf[(3 * 16 + 3) * 4 + 3] = 99; // X byte
        let v = FrameView::new(16, 16, 64, PixelFormat::Bgrx, &buf).unwrap();
        assert_eq!(region_hash(&v, r), a);
        buf[(3 * 16 + 3) * 4] = 99;
        let v = FrameView::new(16, 16, 64, PixelFormat::Bgrx, &buf).unwrap();
        assert_ne!(region_hash(&v, r), a);
    }
}
