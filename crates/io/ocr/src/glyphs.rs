//! Lone-glyph candidates (FR-PERC-004): the DB text detector is trained on text lines and does not fire
//! on a glyph that stands alone — a compass letter, a counter's single "0" beside its label — so boxes of
//! glyph-like ink that no detected text box covers are proposed here, to be recognised together in one
//! strip. Pure: pixels in, rectangles out.

use gamepilot_core::Rect;
use gamepilot_vision::ocr::union;

/// Bounds of what counts as a lone glyph (in image pixels) and how many are proposed per image.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GlyphParams {
    /// Luminance difference from the local mean that makes a pixel ink.
    pub contrast: i32,
    /// Radius of the local-mean window (the window must be wider than a glyph's stroke pattern).
    pub radius: usize,
    pub min_h: u32,
    pub max_h: u32,
    /// Ink pixels over the box's area: below it a stray outline, above it a filled shape (a coin, a bar).
    pub min_fill: f32,
    pub max_fill: f32,
    /// Glyphs of one word (compass "NE") are joined when their gap is at most this fraction of the height.
    pub join_gap: f32,
    /// Most glyphs per word candidate, and most candidates per image.
    pub max_parts: usize,
    pub max_candidates: usize,
}

impl Default for GlyphParams {
    fn default() -> Self {
        GlyphParams {
            contrast: 32,
            radius: 8,
            min_h: 9,
            max_h: 64,
            min_fill: 0.18,
            max_fill: 0.75,
            join_gap: 0.45,
            max_parts: 3,
            max_candidates: 16,
        }
    }
}

/// One connected piece of ink: its box, pixel count and mean contrast.
#[derive(Debug, Clone, Copy)]
struct Blob {
    bbox: Rect,
    contrast: f32,
}

/// Candidate boxes of lone glyphs or short glyph groups in an RGB image (`w × h`, 3 bytes a pixel) that
/// overlap none of `covered` (the detector's text boxes, in the same coordinates), strongest first.
pub(crate) fn lone_glyphs(rgb: &[u8], w: usize, h: usize, covered: &[Rect], p: &GlyphParams) -> Vec<Rect> {
    if w < 4 || h < 4 || rgb.len() < w * h * 3 {
        return Vec::new();
    }
    let luma: Vec<u8> = rgb
        .chunks_exact(3)
        .take(w * h)
        .map(|c| ((c[0] as u32 * 77 + c[1] as u32 * 150 + c[2] as u32 * 29) >> 8) as u8)
        .collect();
    let mean = crate::prep::local_mean(&luma, w, h, p.radius);
    let mut blobs = Vec::new();
    // Light text on dark ground and dark on light are separate masks: one glyph is one polarity.
    for sign in [1i32, -1] {
        let mask: Vec<bool> = luma
            .iter()
            .zip(&mean)
            .map(|(&l, &m)| sign * (l as i32 - m as i32) > p.contrast)
            .collect();
        blobs.extend(components(&mask, &luma, &mean, w, h, p));
    }
    let free = |r: &Rect| !covered.iter().any(|c| c.intersection(r).is_some());
    let mut blobs: Vec<Blob> = blobs.into_iter().filter(|b| free(&b.bbox)).collect();
    blobs.sort_by_key(|b| (b.bbox.y, b.bbox.x));
    let mut words = join_words(&blobs, p);
    words.sort_by(|a, b| b.contrast.total_cmp(&a.contrast));
    words.truncate(p.max_candidates);
    words.into_iter().map(|b| b.bbox).collect()
}

/// 8-connected components of `mask` whose size and fill look like one glyph.
fn components(mask: &[bool], luma: &[u8], mean: &[u8], w: usize, h: usize, p: &GlyphParams) -> Vec<Blob> {
    let mut out = Vec::new();
    crate::prep::components8(mask, w, h, |pixels, (x0, y0, x1, y1)| {
        let (n, mut contrast, mut ink) = (pixels.len(), 0u64, 0u64);
        for &i in pixels {
            ink += luma[i] as u64;
            contrast += (luma[i] as i32 - mean[i] as i32).unsigned_abs() as u64;
        }
        let (bw, bh) = ((x1 - x0 + 1) as u32, (y1 - y0 + 1) as u32);
        let fill = n as f32 / (bw * bh) as f32;
        let glyph_like = (p.min_h..=p.max_h).contains(&bh)
            && bw >= 2
            && bw as f32 <= 1.5 * bh as f32
            && (p.min_fill..=p.max_fill).contains(&fill);
        // Ink must differ from the ground just outside its box: the dark halo the local mean draws around
        // a bright shape is as dark as the ground beyond it, and is no glyph.
        let ink_mean = (ink / n.max(1) as u64) as i32;
        let stands_out = ground_around(luma, w, h, (x0, y0, x1, y1))
            .is_some_and(|g| (ink_mean - g as i32).abs() > p.contrast);
        if glyph_like && stands_out {
            out.push(Blob {
                bbox: Rect::new(x0 as i32, y0 as i32, bw, bh),
                contrast: contrast as f32 / n.max(1) as f32,
            });
        }
        true
    });
    out
}

/// Median luminance of the one-pixel ring just outside the box (the sides inside the image).
fn ground_around(
    luma: &[u8],
    w: usize,
    h: usize,
    (x0, y0, x1, y1): (usize, usize, usize, usize),
) -> Option<u8> {
    let mut ring = Vec::new();
    let (left, right) = (x0.checked_sub(1), (x1 + 1 < w).then_some(x1 + 1));
    let (top, bottom) = (y0.checked_sub(1), (y1 + 1 < h).then_some(y1 + 1));
    let xs = left.unwrap_or(x0)..=right.unwrap_or(x1);
    for y in [top, bottom].into_iter().flatten() {
        ring.extend(xs.clone().filter_map(|x| luma.get(y * w + x).copied()));
    }
    for x in [left, right].into_iter().flatten() {
        ring.extend((y0..=y1).filter_map(|y| luma.get(y * w + x).copied()));
    }
    if ring.is_empty() {
        return None;
    }
    ring.sort_unstable();
    ring.get(ring.len() / 2).copied()
}

/// Glyphs side by side on one baseline, of about one height and close together, joined into one word box
/// (at most `max_parts` glyphs; a longer run is a text line the detector should have seen).
fn join_words(blobs: &[Blob], p: &GlyphParams) -> Vec<Blob> {
    let mut used = vec![false; blobs.len()];
    let mut out = Vec::new();
    for i in 0..blobs.len() {
        if used[i] {
            continue;
        }
        used[i] = true;
        let mut word = vec![blobs[i]];
        while let Some(last) = word.last().copied() {
            let next = (0..blobs.len()).find(|&j| {
                let b = &blobs[j];
                let (lh, bh) = (last.bbox.h as f32, b.bbox.h as f32);
                let gap = b.bbox.x as i64 - last.bbox.right();
                let v_overlap =
                    (last.bbox.bottom().min(b.bbox.bottom()) - last.bbox.y.max(b.bbox.y) as i64) as f32;
                !used[j]
                    && gap >= 0
                    && (gap as f32) <= p.join_gap * lh.max(bh)
                    && v_overlap >= 0.7 * lh.min(bh)
                    && bh / lh > 0.7
                    && bh / lh < 1.4
            });
            match next {
                Some(j) => {
                    used[j] = true;
                    word.push(blobs[j]);
                }
                None => break,
            }
        }
        if word.len() > p.max_parts {
            continue;
        }
        let bbox = word
            .iter()
            .skip(1)
            .fold(word[0].bbox, |acc, b| union(&acc, &b.bbox));
        let contrast = word.iter().map(|b| b.contrast).sum::<f32>() / word.len() as f32;
        out.push(Blob { bbox, contrast });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dark image with light rectangles drawn as `(x, y, w, h, hollow)`.
    fn image(w: usize, h: usize, shapes: &[(usize, usize, usize, usize, bool)]) -> Vec<u8> {
        let mut px = vec![20u8; w * h * 3];
        for &(sx, sy, sw, sh, hollow) in shapes {
            for y in sy..sy + sh {
                for x in sx..sx + sw {
                    let edge = x < sx + 2 || x + 2 >= sx + sw || y < sy + 2 || y + 2 >= sy + sh;
                    if !hollow || edge {
                        px[(y * w + x) * 3..(y * w + x) * 3 + 3].copy_from_slice(&[220, 220, 220]);
                    }
                }
            }
        }
        px
    }

    #[test]
    fn a_ring_is_a_glyph_a_filled_disc_and_a_covered_glyph_are_not() {
        // FR-PERC-004: a lone "0" (a hollow box) is proposed; a filled block (a coin, a bar) is not, nor a
        // glyph inside a detected text box.
        let (w, h) = (200, 60);
        let px = image(
            w,
            h,
            &[
                (20, 20, 10, 16, true),
                (60, 20, 12, 16, false),
                (120, 20, 10, 16, true),
            ],
        );
        let covered = [Rect::new(115, 15, 30, 30)];
        let got = lone_glyphs(&px, w, h, &covered, &GlyphParams::default());
        assert_eq!(got, vec![Rect::new(20, 20, 10, 16)]);
    }

    #[test]
    fn close_glyphs_are_one_word_and_far_ones_two() {
        let (w, h) = (300, 60);
        let px = image(
            w,
            h,
            &[
                (20, 20, 10, 16, true),
                (33, 20, 10, 16, true),
                (150, 20, 10, 16, true),
            ],
        );
        let mut got = lone_glyphs(&px, w, h, &[], &GlyphParams::default());
        got.sort_by_key(|r| r.x);
        assert_eq!(got, vec![Rect::new(20, 20, 23, 16), Rect::new(150, 20, 10, 16)]);
    }

    #[test]
    fn degenerate_images_give_nothing() {
        let p = GlyphParams::default();
        assert!(lone_glyphs(&[], 0, 0, &[], &p).is_empty());
        assert!(lone_glyphs(&[0; 9], 1, 3, &[], &p).is_empty());
        assert!(lone_glyphs(&[0; 10], 100, 100, &[], &p).is_empty());
        let flat = vec![128u8; 64 * 64 * 3];
        assert!(lone_glyphs(&flat, 64, 64, &[], &p).is_empty());
    }
}
