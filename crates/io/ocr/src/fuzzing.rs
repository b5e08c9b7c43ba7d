//! The OCR preprocessing under arbitrary input: one entry point for the fuzz target
//! (`fuzz/fuzz_targets/ocr_prep.rs`) and for the generated-input test in the normal suite. Every path that
//! runs before a model — crop, grey, polarity, contrast stretch, scale, pad, binarise, box mapping, ink
//! bounds, hashing, resampling, the DB post-processing and the lone-glyph finder — must return, never panic.

use crate::ppocr::{db_boxes, resample_into, Rgb};
use crate::prep::{binarize, ink_bounds, prepare, region_hash};
use gamepilot_core::{FrameView, PixelFormat, Rect};

fn at(data: &[u8], i: usize) -> u8 {
    data.get(i).copied().unwrap_or(0)
}

fn i16_at(data: &[u8], i: usize) -> i32 {
    i16::from_le_bytes([at(data, i), at(data, i + 1)]) as i32
}

fn u16_at(data: &[u8], i: usize) -> u32 {
    u16::from_le_bytes([at(data, i), at(data, i + 1)]) as u32
}

/// Decode `data` as a frame shape, a region, preprocessing parameters and pixels, and run every
/// preprocessing path on it.
pub fn exercise(data: &[u8]) {
    let (w, h) = (at(data, 0) as u32 % 80, at(data, 1) as u32 % 80);
    let format = if at(data, 2) & 1 == 0 {
        PixelFormat::Rgba
    } else {
        PixelFormat::Bgrx
    };
    let stride = w as usize * 4 + (at(data, 2) >> 4) as usize;
    let region = Rect::new(i16_at(data, 3), i16_at(data, 5), u16_at(data, 7), u16_at(data, 9));
    let (scale, pad) = (at(data, 11) as u32, at(data, 12) as u32 * 3);
    let invert = match at(data, 13) % 3 {
        0 => None,
        1 => Some(true),
        _ => Some(false),
    };
    let body = data.get(14..).unwrap_or(&[]);
    let need = stride * h as usize;
    let pixels: Vec<u8> = if body.is_empty() {
        vec![at(data, 2); need]
    } else {
        body.iter().copied().cycle().take(need).collect()
    };
    let Some(view) = FrameView::new(w, h, stride, format, &pixels) else {
        return;
    };
    let mut p = prepare(&view, region, scale, pad, invert);
    let _ = p.to_frame(
        i16_at(data, 3) as i64 * 1_000_000,
        i64::MAX,
        i64::MIN,
        u16_at(data, 7) as i64,
    );
    let _ = p.to_frame(i16_at(data, 5) as i64, i16_at(data, 3) as i64, 3, 3);
    binarize(&mut p, at(data, 12) as u32, at(data, 13));
    let _ = region_hash(&view, region);
    let rgb = Rgb::from_view(&view, region);
    let _ = ink_bounds(&rgb.px, rgb.w, rgb.h);
    let _ = ink_bounds(&rgb.px, rgb.w + 1, rgb.h);
    let (ow, oh) = (at(data, 11) as usize % 70, at(data, 12) as usize % 50);
    let stride_out = ow + at(data, 13) as usize % 5;
    let mut out = vec![0f32; 3 * stride_out * oh];
    resample_into(
        &rgb,
        (0, 0, rgb.w, rgb.h),
        ow,
        oh,
        &mut out,
        stride_out,
        stride_out * oh,
    );
    // A sub-rectangle past the image's edge reads black, never out of bounds.
    resample_into(
        &rgb,
        (rgb.w / 2, rgb.h / 2, rgb.w, rgb.h),
        ow,
        oh,
        &mut out,
        stride_out,
        stride_out * oh,
    );
    let prob: Vec<f32> = pixels.iter().map(|&b| b as f32 / 255.0).collect();
    let _ = db_boxes(&prob, w as usize, h as usize, 0.3, 0.5);
    let _ = db_boxes(&prob, w as usize + 1, h as usize, 0.3, 0.5);
    // The lone-glyph finder, with covered boxes anywhere (inside, outside, degenerate) and a lying size.
    let covered = [region, Rect::new(0, 0, 0, 0), Rect::new(-5, -5, 3, 3)];
    let params = crate::glyphs::GlyphParams {
        radius: at(data, 11) as usize % 20,
        ..Default::default()
    };
    let _ = crate::glyphs::lone_glyphs(&rgb.px, rgb.w, rgb.h, &covered, &params);
    let _ = crate::glyphs::lone_glyphs(&rgb.px, rgb.w + 2, rgb.h, &covered, &params);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn generated_inputs_never_panic_the_preprocessing() {
        // No input image of any size or content panics a perception path. Uniform (every byte
        // alike), tiny, empty and oversized regions included; a fixed seed keeps the run reproducible.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        for case in 0..3000 {
            let len = rng.gen_range(0..600);
            let mut data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if case % 3 == 0 && data.len() > 14 {
                let v = data[14];
                data[14..].iter_mut().for_each(|b| *b = v);
            }
            exercise(&data);
        }
        for v in [0u8, 1, 128, 239, 240, 250, 255] {
            // A uniform bright region once divided by a zero contrast span (the region_integer panic).
            exercise(&[40, 30, 0, 0, 0, 0, 0, 40, 0, 30, 0, 4, 4, 0, v]);
            exercise(&[40, 30, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 0, v]);
            exercise(&[1, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, v]);
            exercise(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, v]);
        }
    }
}
