//! Set-of-Marks rendering (FR-PERC-007): a numbered, legible label and an outline for every element,
//! colours chosen for contrast against what lies under them, labels placed so they do not hide small
//! targets or each other. The font arrives as bytes (the binary reads the file).

use crate::observation::Element;
use crate::VisionError;
use ab_glyph::{Font, FontVec, PxScale};
use gamepilot_core::{FrameView, Rect};
use image::{Rgba, RgbaImage};

/// Saturated colours to pick from; each mark takes the one that stands out most from its surroundings.
const PALETTE: [[u8; 3]; 8] = [
    [255, 32, 32],
    [255, 220, 0],
    [0, 230, 255],
    [255, 0, 220],
    [40, 255, 40],
    [255, 128, 0],
    [40, 80, 255],
    [255, 255, 255],
];

/// Renders marks with one font.
pub struct MarkRenderer {
    font: FontVec,
}

/// Where each label went (for tests and for the model's text form).
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedMark {
    pub id: u32,
    pub label_box: Rect,
    pub colour: [u8; 3],
}

fn luminance(c: [u8; 3]) -> f32 {
    let lin = |v: u8| {
        let v = v as f32 / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
}

/// WCAG contrast ratio 1..21.
pub fn contrast(a: [u8; 3], b: [u8; 3]) -> f32 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

impl MarkRenderer {
    /// A renderer from TrueType/OpenType bytes (e.g. DejaVuSans-Bold.ttf).
    pub fn from_font_bytes(bytes: Vec<u8>) -> Result<MarkRenderer, VisionError> {
        let font = FontVec::try_from_vec(bytes).map_err(|e| VisionError::Font(e.to_string()))?;
        Ok(MarkRenderer { font })
    }

    /// Label height in pixels for a frame of this size: legible at 1280×720 and on small windows.
    pub fn label_scale(width: u32, height: u32) -> f32 {
        (width.max(height) as f32 / 48.0).clamp(14.0, 26.0)
    }

    /// Draw marks for `elements` over a copy of `view`.
    pub fn render(&self, view: &FrameView<'_>, elements: &[Element]) -> (RgbaImage, Vec<PlacedMark>) {
        let mut img = RgbaImage::from_raw(view.width, view.height, view.to_rgba())
            .unwrap_or_else(|| RgbaImage::new(view.width, view.height));
        let scale = Self::label_scale(view.width, view.height);
        let bounds = view.bounds();
        let mut placed: Vec<PlacedMark> = Vec::new();
        // Small targets first: they get the best label spots.
        let mut order: Vec<&Element> = elements.iter().collect();
        order.sort_by_key(|e| e.bbox.area());
        let boxes: Vec<Rect> = elements.iter().map(|e| e.bbox).collect();
        let mut outlines = Vec::new();
        for e in order {
            let text = e.id.0.to_string();
            let (tw, th) = self.text_size(&text, scale);
            let (lw, lh) = (tw + 6, th + 4);
            let label = best_spot(&e.bbox, lw, lh, &bounds, &boxes, &placed);
            let bg = mean_rgb(view, &ring(&e.bbox, 3).clamped_to(&bounds).unwrap_or(e.bbox));
            let under = mean_rgb(view, &label);
            let colour = *PALETTE
                .iter()
                .max_by(|a, b| {
                    let sa = contrast(**a, bg).min(contrast(**a, under) * 1.5) + hue_distance(**a, bg);
                    let sb = contrast(**b, bg).min(contrast(**b, under) * 1.5) + hue_distance(**b, bg);
                    sa.total_cmp(&sb)
                })
                .unwrap_or(&PALETTE[0]);
            outlines.push((e.bbox, colour));
            placed.push(PlacedMark {
                id: e.id.0,
                label_box: label,
                colour,
            });
        }
        // Outlines first, labels on top so no outline crosses a number.
        for (b, colour) in &outlines {
            let thick = if b.w.min(b.h) >= 16 { 2 } else { 1 };
            draw_outline(&mut img, b, *colour, thick);
        }
        for m in &placed {
            let text_colour = if contrast([0, 0, 0], m.colour) >= contrast([255, 255, 255], m.colour) {
                [0, 0, 0]
            } else {
                [255, 255, 255]
            };
            fill_rect(&mut img, &m.label_box, m.colour);
            draw_outline(&mut img, &m.label_box, text_colour, 1);
            let (tw, th) = self.text_size(&m.id.to_string(), scale);
            let x = m.label_box.x + (m.label_box.w as i32 - tw as i32) / 2;
            let y = m.label_box.y + (m.label_box.h as i32 - th as i32) / 2;
            self.draw_text(&mut img, x, y, scale, &m.id.to_string(), text_colour);
        }
        (img, placed)
    }

    fn text_size(&self, text: &str, scale: f32) -> (u32, u32) {
        use ab_glyph::ScaleFont;
        let sf = self.font.as_scaled(PxScale::from(scale));
        let w: f32 = text.chars().map(|c| sf.h_advance(sf.glyph_id(c))).sum();
        // Digits reach from the baseline to about the cap height.
        let h = sf.ascent() * 0.75;
        (w.ceil() as u32, h.ceil().max(1.0) as u32)
    }

    fn draw_text(&self, img: &mut RgbaImage, x: i32, y: i32, scale: f32, text: &str, colour: [u8; 3]) {
        use ab_glyph::ScaleFont;
        let sf = self.font.as_scaled(PxScale::from(scale));
        let cap = sf.ascent() * 0.75;
        let mut pen = x as f32;
        for c in text.chars() {
            let id = sf.glyph_id(c);
            let g = id.with_scale_and_position(PxScale::from(scale), ab_glyph::point(pen, y as f32 + cap));
            pen += sf.h_advance(id);
            if let Some(o) = self.font.outline_glyph(g) {
                let bb = o.px_bounds();
                o.draw(|gx, gy, cov| {
                    let px = bb.min.x as i32 + gx as i32;
                    let py = bb.min.y as i32 + gy as i32;
                    if px >= 0 && py >= 0 && (px as u32) < img.width() && (py as u32) < img.height() {
                        let p = img.get_pixel_mut(px as u32, py as u32);
                        for k in 0..3 {
                            p.0[k] = (p.0[k] as f32 * (1.0 - cov) + colour[k] as f32 * cov).round() as u8;
                        }
                    }
                });
            }
        }
    }
}

/// Rough hue separation bonus 0..1 so that a red mark is not drawn on a red button of equal brightness.
fn hue_distance(a: [u8; 3], b: [u8; 3]) -> f32 {
    let d: u32 = (0..3).map(|k| a[k].abs_diff(b[k]) as u32).sum();
    d as f32 / 765.0
}

fn ring(r: &Rect, d: i32) -> Rect {
    Rect::new(r.x - d, r.y - d, r.w + 2 * d as u32, r.h + 2 * d as u32)
}

fn mean_rgb(view: &FrameView<'_>, r: &Rect) -> [u8; 3] {
    let mut s = [0u64; 3];
    let mut n = 0u64;
    let step = (r.w.max(r.h) / 24).max(1) as usize;
    for y in (r.y.max(0) as u32..(r.bottom().max(0) as u32).min(view.height)).step_by(step) {
        for x in (r.x.max(0) as u32..(r.right().max(0) as u32).min(view.width)).step_by(step) {
            let c = view.rgb(x, y);
            for k in 0..3 {
                s[k] += c[k] as u64;
            }
            n += 1;
        }
    }
    if n == 0 {
        return [0, 0, 0];
    }
    [(s[0] / n) as u8, (s[1] / n) as u8, (s[2] / n) as u8]
}

/// Choose a label box: outside the element (above, left, below, right) before inside its corner,
/// inside the frame, penalising overlap with other labels (heavily) and with other elements.
fn best_spot(b: &Rect, lw: u32, lh: u32, bounds: &Rect, boxes: &[Rect], placed: &[PlacedMark]) -> Rect {
    let (lw_i, lh_i) = (lw as i32, lh as i32);
    let cands = [
        (b.x, b.y - lh_i, 0.0),
        (b.x - lw_i, b.y, 0.0),
        (b.right() as i32 - lw_i, b.y - lh_i, 0.1),
        (b.x, b.bottom() as i32, 0.2),
        (b.right() as i32, b.y, 0.2),
        (b.x - lw_i, b.y - lh_i, 0.3),
        (b.x, b.y, 0.6),
        (b.right() as i32 - lw_i, b.bottom() as i32 - lh_i, 0.7),
    ];
    // A target that can hold its label without losing much of itself carries it in its top-left
    // corner: unambiguous in dense grids, where an outside label sits between two cells. Boxes less than
    // two labels tall (text lines) keep their label outside so that it hides none of their text.
    let roomy = b.w >= lw + 4 && b.h >= 2 * lh && (lw * lh) as u64 * 10 <= b.area() * 3;
    if roomy {
        let inside = Rect::new(b.x + 1, b.y + 1, lw, lh);
        let clear = placed.iter().all(|p| inside.intersection(&p.label_box).is_none());
        if clear && bounds.contains_rect(&inside) {
            return inside;
        }
    }
    let small = b.w < lw * 3 || b.h < lh * 2;
    let mut best: Option<(f32, Rect)> = None;
    for (x, y, base) in cands {
        let x = x.clamp(bounds.x, (bounds.right() as i32 - lw_i).max(bounds.x));
        let y = y.clamp(bounds.y, (bounds.bottom() as i32 - lh_i).max(bounds.y));
        let r = Rect::new(x, y, lw, lh);
        let area = r.area().max(1) as f32;
        let mut cost = base;
        for p in placed {
            cost += 10.0 * r.intersection(&p.label_box).map(|i| i.area()).unwrap_or(0) as f32 / area;
        }
        for o in boxes {
            let inter = r.intersection(o).map(|i| i.area()).unwrap_or(0) as f32 / area;
            if o == b {
                cost += if small { 3.0 * inter } else { 0.5 * inter };
            } else {
                cost += 1.5 * inter;
            }
        }
        if best.map(|(c, _)| cost < c).unwrap_or(true) {
            best = Some((cost, r));
        }
    }
    best.map(|(_, r)| r).unwrap_or(Rect::new(b.x, b.y, lw, lh))
}

fn fill_rect(img: &mut RgbaImage, r: &Rect, c: [u8; 3]) {
    for y in r.y.max(0)..(r.bottom() as i32).min(img.height() as i32) {
        for x in r.x.max(0)..(r.right() as i32).min(img.width() as i32) {
            img.put_pixel(x as u32, y as u32, Rgba([c[0], c[1], c[2], 255]));
        }
    }
}

fn draw_outline(img: &mut RgbaImage, r: &Rect, c: [u8; 3], thick: u32) {
    let t = thick as i32;
    let (x0, y0, x1, y1) = (r.x, r.y, r.right() as i32, r.bottom() as i32);
    fill_rect(img, &Rect::new(x0, y0, r.w, thick), c);
    fill_rect(img, &Rect::new(x0, (y1 - t).max(y0), r.w, thick), c);
    fill_rect(img, &Rect::new(x0, y0, thick, r.h), c);
    fill_rect(img, &Rect::new((x1 - t).max(x0), y0, thick, r.h), c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposals::ElementSource;
    use gamepilot_core::{ElementId, PixelFormat};

    const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";

    #[test]
    fn contrast_is_symmetric_and_maximal_for_black_on_white() {
        assert!((contrast([0, 0, 0], [255, 255, 255]) - 21.0).abs() < 0.01);
        assert_eq!(
            contrast([10, 20, 30], [200, 100, 0]),
            contrast([200, 100, 0], [10, 20, 30])
        );
    }

    #[test]
    fn marks_are_drawn_with_contrast_and_labels_do_not_overlap() {
        // FR-PERC-007
        let bytes = std::fs::read(FONT).expect("fonts-dejavu-core installed");
        let r = MarkRenderer::from_font_bytes(bytes).unwrap();
        assert!(MarkRenderer::from_font_bytes(vec![1, 2, 3]).is_err());
        let (w, h) = (400u32, 300u32);
        let buf = vec![255u8; (w * h * 4) as usize];
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let els: Vec<Element> = (0..12)
            .map(|i| Element {
                id: ElementId(i + 1),
                bbox: Rect::new(20 + (i as i32 % 6) * 40, 40 + (i as i32 / 6) * 40, 30, 30),
                confidence: 0.8,
                source: ElementSource::Grid,
                label: None,
                looks: None,
                layer: None,
                selected: false,
            })
            .collect();
        let (img, placed) = r.render(&v, &els);
        assert_eq!(placed.len(), 12);
        for (i, a) in placed.iter().enumerate() {
            assert!(
                contrast(a.colour, [255, 255, 255]) > 1.5,
                "mark colour too close to the white background"
            );
            assert!(v.bounds().contains_rect(&a.label_box));
            for b in &placed[i + 1..] {
                assert!(
                    a.label_box.intersection(&b.label_box).is_none(),
                    "{a:?} overlaps {b:?}"
                );
            }
        }
        // The label carries dark or light digit pixels differing from its fill.
        let m = &placed[0];
        let fill = Rgba([m.colour[0], m.colour[1], m.colour[2], 255]);
        let inner = Rect::new(
            m.label_box.x + 1,
            m.label_box.y + 1,
            m.label_box.w - 2,
            m.label_box.h - 2,
        );
        let differing = (inner.y..inner.bottom() as i32)
            .flat_map(|y| (inner.x..inner.right() as i32).map(move |x| (x, y)))
            .filter(|&(x, y)| *img.get_pixel(x as u32, y as u32) != fill)
            .count();
        assert!(differing > 5, "no digit drawn in the label");
    }
}
