//! Pixel kernels: the HSV filter behind `region_fraction` and the content hash that keys recognition.

use crate::program::FractionSpec;
use crate::value::CmpOp;
use gamepilot_core::{FrameView, PixelFormat, Rect};

/// A `FractionSpec` with thresholds pre-scaled for the per-pixel loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PixelFilter {
    hue: Option<(f32, f32)>,
    /// Saturation bounds: `chroma (>|>=) lo * max` and `chroma (<|<=) hi * max`.
    sat_lo: f32,
    sat_lo_strict: bool,
    sat_hi: f32,
    sat_hi_strict: bool,
    /// Value bounds as an inclusive range of the brightest channel (exact: that channel is an integer).
    val_lo: u8,
    val_hi: u8,
    /// No pixel can pass (an empty value range).
    never: bool,
}

impl PixelFilter {
    pub fn new(spec: &FractionSpec) -> Self {
        let (mut sat_lo, mut sat_lo_strict, mut sat_hi, mut sat_hi_strict) = (0.0f32, false, 1.0f32, false);
        for b in &spec.saturation {
            match b.op {
                CmpOp::Gt | CmpOp::Ge => (sat_lo, sat_lo_strict) = (b.threshold, b.op == CmpOp::Gt),
                _ => (sat_hi, sat_hi_strict) = (b.threshold, b.op == CmpOp::Lt),
            }
        }
        let (mut lo, mut hi) = (0i32, 255i32);
        for b in &spec.value {
            let t = b.threshold as f64 * 255.0;
            match b.op {
                CmpOp::Gt => lo = lo.max(t.floor() as i32 + 1),
                CmpOp::Ge => lo = lo.max(t.ceil() as i32),
                CmpOp::Lt => hi = hi.min(t.ceil() as i32 - 1),
                _ => hi = hi.min(t.floor() as i32),
            }
        }
        PixelFilter {
            hue: spec.hue,
            sat_lo,
            sat_lo_strict,
            sat_hi,
            sat_hi_strict,
            val_lo: lo.clamp(0, 255) as u8,
            val_hi: hi.clamp(0, 255) as u8,
            never: lo > hi || lo > 255 || hi < 0,
        }
    }

    /// Whether one pixel passes the filter.
    #[inline(always)]
    pub fn matches(&self, r: u8, g: u8, b: u8) -> bool {
        let max = r.max(g).max(b);
        let min = r.min(g).min(b);
        if self.never || max < self.val_lo || max > self.val_hi {
            return false;
        }
        // saturation = chroma / max (0 for black); compare without dividing.
        let maxf = max as f32;
        let chroma = (max - min) as f32;
        let lo = self.sat_lo * maxf;
        let hi = self.sat_hi * maxf;
        let lo_ok = if self.sat_lo_strict {
            chroma > lo
        } else {
            chroma >= lo
        };
        let hi_ok = if self.sat_hi_strict {
            chroma < hi
        } else {
            chroma <= hi
        };
        if !(lo_ok && hi_ok) {
            return false;
        }
        match self.hue {
            None => true,
            // Greys have no hue and never match a hue range.
            Some(_) if max == min => false,
            Some((lo, hi)) => {
                let h = hue_degrees(r, g, b, max, chroma);
                if lo <= hi {
                    h >= lo && h <= hi
                } else {
                    h >= lo || h <= hi
                }
            }
        }
    }
}

/// HSV hue in degrees 0..360 of a pixel with non-zero chroma.
#[inline(always)]
pub fn hue_degrees(r: u8, g: u8, b: u8, max: u8, chroma: f32) -> f32 {
    let (r, g, b) = (r as f32, g as f32, b as f32);
    let h = if max as f32 == r {
        60.0 * ((g - b) / chroma)
    } else if max as f32 == g {
        60.0 * ((b - r) / chroma + 2.0)
    } else {
        60.0 * ((r - g) / chroma + 4.0)
    };
    if h < 0.0 {
        h + 360.0
    } else {
        h
    }
}

/// Channel offsets of red and blue in one 4-byte pixel.
#[inline]
fn rb(format: PixelFormat) -> (usize, usize) {
    match format {
        PixelFormat::Bgrx => (2, 0),
        PixelFormat::Rgba => (0, 2),
    }
}

/// The fraction (0..1) of pixels of `rect` passing `filter`; `None` when `rect` has no pixel inside the frame.
pub fn region_fraction(view: &FrameView<'_>, rect: Rect, filter: &PixelFilter) -> Option<f64> {
    let r = rect.clamped_to(&view.bounds())?;
    let (ri, bi) = rb(view.format);
    let (x0, x1) = (r.x as usize * 4, (r.x as usize + r.w as usize) * 4);
    let mut hits = 0u64;
    // HUD regions are mostly runs of one colour: reuse the verdict of the previous identical pixel.
    let mut last = u32::MAX;
    let mut last_hit = 0u64;
    for y in r.y as u32..r.y as u32 + r.h {
        let row = view.row(y);
        let px = row.get(x0..x1)?;
        for p in px.chunks_exact(4) {
            let key = u32::from_le_bytes([p[0], p[1], p[2], 0]);
            if key != last {
                last = key;
                last_hit = u64::from(filter.matches(p[ri], p[1], p[bi]));
            }
            hits += last_hit;
        }
    }
    Some(hits as f64 / r.area() as f64)
}

const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// A 64-bit hash of the colour content of `rect` (format, size and RGB; padding bytes ignored).
/// `None` when `rect` is not wholly inside the frame.
pub fn region_hash(view: &FrameView<'_>, rect: Rect) -> Option<u64> {
    if rect.is_empty() || !view.bounds().contains_rect(&rect) {
        return None;
    }
    let mut h: u64 = K ^ ((rect.w as u64) << 32 | rect.h as u64) ^ (view.format as u64).wrapping_mul(K);
    let (x0, x1) = (rect.x as usize * 4, (rect.x as usize + rect.w as usize) * 4);
    // Mask the 4th byte (X padding or alpha) of both pixels in each 8-byte word.
    const MASK: u64 = 0x00FF_FFFF_00FF_FFFF;
    for y in rect.y as u32..rect.y as u32 + rect.h {
        let row = view.row(y).get(x0..x1)?;
        let mut words = row.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) & MASK;
            h = (h ^ v).wrapping_mul(K).rotate_left(29);
        }
        let rest = words.remainder();
        if rest.len() == 4 {
            let v = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as u64 & 0x00FF_FFFF;
            h = (h ^ v ^ 0xA5A5_0000_0000_0000).wrapping_mul(K).rotate_left(29);
        }
        h = h.wrapping_add(y as u64);
    }
    // Final avalanche (splitmix64).
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    Some(h ^ (h >> 31))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Bound;

    fn spec(hue: Option<(f32, f32)>, sat: &[(CmpOp, f32)], val: &[(CmpOp, f32)]) -> PixelFilter {
        let b = |v: &[(CmpOp, f32)]| v.iter().map(|&(op, threshold)| Bound { op, threshold }).collect();
        PixelFilter::new(&FractionSpec {
            region: Rect::default(),
            hue,
            saturation: b(sat),
            value: b(val),
        })
    }

    #[test]
    fn hue_of_primaries_and_wrapping_ranges() {
        // FR-PERC-008: hue ranges in degrees; lo > hi wraps through red.
        let h = |r: u8, g: u8, b: u8| {
            let max = r.max(g).max(b);
            let min = r.min(g).min(b);
            hue_degrees(r, g, b, max, (max - min) as f32)
        };
        assert_eq!(h(255, 0, 0), 0.0);
        assert_eq!(h(0, 255, 0), 120.0);
        assert_eq!(h(0, 0, 255), 240.0);
        assert_eq!(h(255, 255, 0), 60.0);
        assert!((h(255, 0, 40) - 350.6).abs() < 0.1);
        let red = spec(Some((350.0, 10.0)), &[], &[]);
        assert!(red.matches(255, 0, 0));
        assert!(red.matches(255, 0, 40));
        assert!(red.matches(255, 40, 0));
        assert!(!red.matches(0, 255, 0));
        assert!(!red.matches(128, 128, 128), "greys have no hue");
        let green = spec(Some((90.0, 150.0)), &[], &[]);
        assert!(green.matches(30, 200, 40));
        assert!(!green.matches(200, 30, 40));
    }

    #[test]
    fn saturation_and_value_bounds() {
        let f = spec(None, &[(CmpOp::Gt, 0.5)], &[(CmpOp::Ge, 0.5), (CmpOp::Lt, 0.9)]);
        assert!(f.matches(200, 20, 20)); // s = 0.9, v = 0.78
        assert!(!f.matches(200, 150, 150)); // s = 0.25
        assert!(!f.matches(250, 20, 20)); // v = 0.98
        assert!(!f.matches(100, 0, 0)); // v = 0.39
        let dark = spec(None, &[(CmpOp::Le, 0.0)], &[]);
        assert!(dark.matches(0, 0, 0), "black has saturation 0");
        let everything = spec(None, &[], &[]);
        assert!(everything.matches(1, 2, 3));
    }

    #[test]
    fn fraction_over_a_region_in_both_formats_and_outside() {
        // 4x2 frame: left half red, right half grey.
        let mut rgba = Vec::new();
        let mut bgrx = Vec::new();
        for _y in 0..2 {
            for x in 0..4 {
                let (r, g, b) = if x < 2 { (220u8, 10u8, 10u8) } else { (90, 90, 90) };
                rgba.extend_from_slice(&[r, g, b, 255]);
                bgrx.extend_from_slice(&[b, g, r, 7]);
            }
        }
        let red = spec(Some((350.0, 10.0)), &[(CmpOp::Gt, 0.5)], &[]);
        for (fmt, data) in [(PixelFormat::Rgba, &rgba), (PixelFormat::Bgrx, &bgrx)] {
            let v = FrameView::new(4, 2, 16, fmt, data).unwrap();
            assert_eq!(region_fraction(&v, Rect::new(0, 0, 4, 2), &red), Some(0.5));
            assert_eq!(region_fraction(&v, Rect::new(1, 1, 2, 1), &red), Some(0.5));
            assert_eq!(region_fraction(&v, Rect::new(0, 0, 2, 2), &red), Some(1.0));
            assert_eq!(
                region_fraction(&v, Rect::new(3, 0, 5, 5), &red),
                Some(0.0),
                "clamped to the frame"
            );
            assert_eq!(region_fraction(&v, Rect::new(10, 10, 2, 2), &red), None);
        }
        // Same colours, different byte order: hashes ignore padding, but the format is part of the key.
        let a = FrameView::new(4, 2, 16, PixelFormat::Rgba, &rgba).unwrap();
        let mut rgba2 = rgba.clone();
        rgba2[3] = 0; // alpha changes only
        let b = FrameView::new(4, 2, 16, PixelFormat::Rgba, &rgba2).unwrap();
        assert_eq!(
            region_hash(&a, Rect::new(0, 0, 3, 2)),
            region_hash(&b, Rect::new(0, 0, 3, 2))
        );
        let mut rgba3 = rgba.clone();
        rgba3[4] = 0; // pixel (1,0) red changes
        let c = FrameView::new(4, 2, 16, PixelFormat::Rgba, &rgba3).unwrap();
        assert_ne!(
            region_hash(&a, Rect::new(0, 0, 3, 2)),
            region_hash(&c, Rect::new(0, 0, 3, 2))
        );
        assert_eq!(
            region_hash(&a, Rect::new(2, 0, 2, 2)),
            region_hash(&c, Rect::new(2, 0, 2, 2))
        );
        assert_eq!(region_hash(&a, Rect::new(3, 0, 2, 2)), None);
    }
}
