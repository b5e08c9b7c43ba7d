//! Template presence: the session atlas (name → confirmed template pixels) and a bounded NCC search.

use crate::SensorError;
use gamepilot_core::{FrameView, PixelFormat, Point, Rect, Size};
use std::collections::HashMap;

/// At most this many template samples are compared per candidate position (larger templates are sampled
/// on a grid), which bounds the cost of one `template_present` per tick.
pub const MAX_SAMPLES: u32 = 1024;
/// Default search radius in pixels around the template's anchor.
pub const DEFAULT_RADIUS: u32 = 4;

/// A confirmed element's pixels, where it was, and how far around that to look.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    width: u32,
    height: u32,
    /// Sampled luma (row-major over the sample grid).
    samples: Vec<u8>,
    step: u32,
    mean: f64,
    /// Sum of squared deviations of the samples.
    ss: f64,
    /// Top-left where the template was confirmed, in capture space.
    pub anchor: Point,
    /// Capture size the template was taken at; matching at another size is undefined.
    pub capture_size: Size,
    pub search_radius: u32,
}

#[inline(always)]
fn luma(p: &[u8], format: PixelFormat) -> u8 {
    let (r, g, b) = match format {
        PixelFormat::Bgrx => (p[2], p[1], p[0]),
        PixelFormat::Rgba => (p[0], p[1], p[2]),
    };
    ((r as u32 * 77 + g as u32 * 150 + b as u32 * 29) >> 8) as u8
}

impl Template {
    /// Cut a template out of a frame at `rect` (which must lie inside it).
    pub fn from_frame(view: &FrameView<'_>, rect: Rect, search_radius: u32) -> Result<Template, SensorError> {
        if rect.is_empty() || !view.bounds().contains_rect(&rect) {
            return Err(SensorError::BadTemplate(format!(
                "region [{}, {}, {}, {}] is empty or not inside the {}x{} frame",
                rect.x, rect.y, rect.w, rect.h, view.width, view.height
            )));
        }
        let mut luma_px = Vec::with_capacity(rect.area() as usize);
        for y in rect.y as u32..rect.y as u32 + rect.h {
            let row = view.row(y);
            for x in rect.x as u32..rect.x as u32 + rect.w {
                let i = x as usize * 4;
                luma_px.push(row.get(i..i + 4).map(|p| luma(p, view.format)).unwrap_or(0));
            }
        }
        Template::from_luma(
            rect.w,
            rect.h,
            &luma_px,
            Point::new(rect.x, rect.y),
            view.size(),
            search_radius,
        )
    }

    /// A template from row-major luma pixels.
    pub fn from_luma(
        width: u32,
        height: u32,
        luma_px: &[u8],
        anchor: Point,
        capture_size: Size,
        search_radius: u32,
    ) -> Result<Template, SensorError> {
        if width == 0 || height == 0 || luma_px.len() != width as usize * height as usize {
            return Err(SensorError::BadTemplate(format!(
                "{width}x{height} template with {} pixels",
                luma_px.len()
            )));
        }
        let area = width as f64 * height as f64;
        let step = ((area / MAX_SAMPLES as f64).sqrt().ceil() as u32).max(1);
        let mut samples = Vec::new();
        for y in (0..height).step_by(step as usize) {
            for x in (0..width).step_by(step as usize) {
                samples.push(luma_px[(y * width + x) as usize]);
            }
        }
        let n = samples.len() as f64;
        let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / n;
        let ss = samples.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
        Ok(Template {
            width,
            height,
            samples,
            step,
            mean,
            ss,
            anchor,
            capture_size,
            search_radius,
        })
    }

    pub fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }

    /// Normalised cross-correlation (0..1, negative correlation counts as 0) with the frame at (x, y),
    /// reading luma from `window` (a luma copy of the frame region starting at `origin`, `stride` wide).
    fn score(&self, window: &[u8], stride: usize, ox: usize, oy: usize) -> f32 {
        let (mut sf, mut sff, mut stf) = (0u64, 0u64, 0u64);
        let step = self.step as usize;
        let cols = (self.width as usize).div_ceil(step);
        for (k, &t) in self.samples.iter().enumerate() {
            let (sy, sx) = (k / cols * step, k % cols * step);
            let f = window.get((oy + sy) * stride + ox + sx).copied().unwrap_or(0) as u64;
            sf += f;
            sff += f * f;
            stf += f * t as u64;
        }
        let n = self.samples.len() as f64;
        let (sf, sff, stf) = (sf as f64, sff as f64, stf as f64);
        let var_f = sff - sf * sf / n;
        const FLAT: f64 = 1e-6;
        if self.ss < FLAT || var_f < FLAT {
            // A flat template (or a flat patch): compare brightness instead of shape.
            if self.ss < FLAT && var_f < FLAT {
                return (1.0 - ((sf / n) - self.mean).abs() / 255.0) as f32;
            }
            return 0.0;
        }
        let cov = stf - sf * self.mean;
        ((cov / (self.ss * var_f).sqrt()).max(0.0)) as f32
    }

    /// The best match within the search radius of the anchor: (top-left, score). `None` when the template
    /// cannot be placed inside the frame at all or the frame has another size than the template's.
    /// `scratch` is reused between calls to avoid allocating per tick.
    pub fn best_match(
        &self,
        view: &FrameView<'_>,
        threshold: f32,
        scratch: &mut Vec<u8>,
    ) -> Option<(Point, f32)> {
        if view.size() != self.capture_size || self.width > view.width || self.height > view.height {
            return None;
        }
        let r = self.search_radius as i64;
        let max_x = (view.width - self.width) as i64;
        let max_y = (view.height - self.height) as i64;
        let x0 = (self.anchor.x as i64 - r).clamp(0, max_x);
        let x1 = (self.anchor.x as i64 + r).clamp(0, max_x);
        let y0 = (self.anchor.y as i64 - r).clamp(0, max_y);
        let y1 = (self.anchor.y as i64 + r).clamp(0, max_y);
        // Luma of the whole search window, once.
        let ww = (x1 - x0) as usize + self.width as usize;
        let wh = (y1 - y0) as usize + self.height as usize;
        scratch.clear();
        scratch.reserve(ww * wh);
        for y in y0 as usize..y0 as usize + wh {
            let row = view.row(y as u32);
            let px = row.get(x0 as usize * 4..(x0 as usize + ww) * 4).unwrap_or(&[]);
            scratch.extend(px.chunks_exact(4).map(|p| luma(p, view.format)));
        }
        if scratch.len() != ww * wh {
            return None;
        }
        // The anchor itself first: a present, unmoved element is found in one comparison.
        let (ax, ay) = (self.anchor.x as i64, self.anchor.y as i64);
        let mut best = (Point::new(x0 as i32, y0 as i32), -1.0f32);
        if (x0..=x1).contains(&ax) && (y0..=y1).contains(&ay) {
            let s = self.score(scratch, ww, (ax - x0) as usize, (ay - y0) as usize);
            best = (Point::new(ax as i32, ay as i32), s);
            if s >= threshold {
                return Some(best);
            }
        }
        for y in y0..=y1 {
            for x in x0..=x1 {
                let s = self.score(scratch, ww, (x - x0) as usize, (y - y0) as usize);
                if s > best.1 {
                    best = (Point::new(x as i32, y as i32), s);
                    if s >= threshold {
                        return Some(best);
                    }
                }
            }
        }
        Some(best)
    }

    /// The best match anywhere in `view` (any size): its box and score. A coarse pass on a grid of about
    /// a twelfth of the template's smaller side, then a one-pixel refinement around the best coarse
    /// position; the anchor is not consulted. This is how an element of the atlas is proposed again on
    /// a new screen.
    pub fn locate(&self, view: &FrameView<'_>, scratch: &mut Vec<u8>) -> Option<(Rect, f32)> {
        if self.width > view.width || self.height > view.height {
            return None;
        }
        scratch.clear();
        scratch.reserve(view.width as usize * view.height as usize);
        for y in 0..view.height {
            let row = view.row(y);
            let px = row.get(..view.width as usize * 4).unwrap_or(&[]);
            scratch.extend(px.chunks_exact(4).map(|p| luma(p, view.format)));
        }
        let stride = view.width as usize;
        if scratch.len() != stride * view.height as usize {
            return None;
        }
        let (max_x, max_y) = (view.width - self.width, view.height - self.height);
        let grid = (self.width.min(self.height) / 12).max(1);
        let mut best = (0u32, 0u32, -1.0f32);
        for y in (0..=max_y).step_by(grid as usize) {
            for x in (0..=max_x).step_by(grid as usize) {
                let s = self.score(scratch, stride, x as usize, y as usize);
                if s > best.2 {
                    best = (x, y, s);
                }
            }
        }
        let (cx, cy) = (best.0, best.1);
        for y in cy.saturating_sub(grid)..=(cy + grid).min(max_y) {
            for x in cx.saturating_sub(grid)..=(cx + grid).min(max_x) {
                let s = self.score(scratch, stride, x as usize, y as usize);
                if s > best.2 {
                    best = (x, y, s);
                }
            }
        }
        Some((
            Rect::new(best.0 as i32, best.1 as i32, self.width, self.height),
            best.2,
        ))
    }

    /// Whether the template is present at or above `threshold`; `None` (undefined) when it cannot be matched.
    pub fn present(&self, view: &FrameView<'_>, threshold: f32, scratch: &mut Vec<u8>) -> Option<bool> {
        self.best_match(view, threshold, scratch)
            .map(|(_, s)| s >= threshold)
    }
}

/// Where `template_present` finds templates by name. The session's atlas implements it.
pub trait TemplateAtlas {
    fn template(&self, name: &str) -> Option<&Template>;
}

/// A simple in-memory atlas.
#[derive(Debug, Clone, Default)]
pub struct Atlas {
    map: HashMap<String, Template>,
}

impl Atlas {
    pub fn new() -> Self {
        Atlas::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, t: Template) -> Option<Template> {
        self.map.insert(name.into(), t)
    }

    pub fn remove(&mut self, name: &str) -> Option<Template> {
        self.map.remove(name)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every template found anywhere in `view` at or above `threshold`: (name, box, score), by name.
    pub fn locate_all(&self, view: &FrameView<'_>, threshold: f32) -> Vec<(String, Rect, f32)> {
        let mut scratch = Vec::new();
        let mut found: Vec<(String, Rect, f32)> = self
            .map
            .iter()
            .filter_map(|(name, t)| {
                t.locate(view, &mut scratch)
                    .filter(|(_, s)| *s >= threshold)
                    .map(|(r, s)| (name.clone(), r, s))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }
}

impl TemplateAtlas for Atlas {
    fn template(&self, name: &str) -> Option<&Template> {
        self.map.get(name)
    }
}

/// An atlas with nothing in it: every `template_present` is undefined.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTemplates;

impl TemplateAtlas for NoTemplates {
    fn template(&self, _name: &str) -> Option<&Template> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64x48 RGBA frame of a soft gradient with a textured 12x10 "panel" drawn at (x, y).
    fn frame_with_panel(at: Option<(u32, u32)>) -> Vec<u8> {
        let (w, h) = (64u32, 48u32);
        let mut d = vec![0u8; (w * h * 4) as usize];
        for y in 0..h {
            for x in 0..w {
                let i = ((y * w + x) * 4) as usize;
                let v = (x * 2 + y) as u8;
                d[i..i + 4].copy_from_slice(&[v, v / 2, 40, 255]);
            }
        }
        if let Some((px, py)) = at {
            for y in 0..10 {
                for x in 0..12 {
                    let i = (((py + y) * w + px + x) * 4) as usize;
                    let on = (x / 3 + y / 2) % 2 == 0;
                    let c = if on {
                        [250, 240, 30, 255]
                    } else {
                        [20, 20, 120, 255]
                    };
                    d[i..i + 4].copy_from_slice(&c);
                }
            }
        }
        d
    }

    #[test]
    fn present_at_anchor_moved_within_radius_absent_and_other_size() {
        let src = frame_with_panel(Some((20, 15)));
        let v = FrameView::new(64, 48, 256, PixelFormat::Rgba, &src).unwrap();
        let t = Template::from_frame(&v, Rect::new(20, 15, 12, 10), 4).unwrap();
        let mut scratch = Vec::new();
        assert_eq!(t.present(&v, 0.9, &mut scratch), Some(true));
        let (p, s) = t.best_match(&v, 0.9, &mut scratch).unwrap();
        assert_eq!(p, Point::new(20, 15));
        assert!(s > 0.999);

        let moved = frame_with_panel(Some((23, 13)));
        let v2 = FrameView::new(64, 48, 256, PixelFormat::Rgba, &moved).unwrap();
        let (p, _) = t.best_match(&v2, 0.9, &mut scratch).unwrap();
        assert_eq!(p, Point::new(23, 13));

        let far = frame_with_panel(Some((45, 30)));
        let v3 = FrameView::new(64, 48, 256, PixelFormat::Rgba, &far).unwrap();
        assert_eq!(
            t.present(&v3, 0.9, &mut scratch),
            Some(false),
            "outside the search radius"
        );

        let none = frame_with_panel(None);
        let v4 = FrameView::new(64, 48, 256, PixelFormat::Rgba, &none).unwrap();
        assert_eq!(t.present(&v4, 0.9, &mut scratch), Some(false));

        let small = vec![0u8; 32 * 24 * 4];
        let v5 = FrameView::new(32, 24, 128, PixelFormat::Rgba, &small).unwrap();
        assert_eq!(
            t.present(&v5, 0.9, &mut scratch),
            None,
            "another capture size is undefined"
        );
    }

    #[test]
    fn an_atlas_template_is_located_anywhere_it_moved() {
        // FR-PERC-008's atlas: a confirmed element is found again on a new screen, wherever it moved
        let pattern = |x: u32, y: u32| {
            let (dx, dy) = (x as i32 - 16, y as i32 - 12);
            if dx * dx + dy * dy < 64 {
                230u8
            } else if y > 18 {
                120
            } else {
                60 + x as u8
            }
        };
        let frame = |ox: u32, oy: u32| {
            let mut v = Vec::new();
            for y in 0..120u32 {
                for x in 0..200u32 {
                    let l = if (ox..ox + 32).contains(&x) && (oy..oy + 24).contains(&y) {
                        pattern(x - ox, y - oy)
                    } else {
                        10
                    };
                    v.extend_from_slice(&[l, l, l, 255]);
                }
            }
            v
        };
        let (a, b) = (frame(40, 30), frame(101, 61));
        let va = FrameView::new(200, 120, 800, PixelFormat::Rgba, &a).unwrap();
        let vb = FrameView::new(200, 120, 800, PixelFormat::Rgba, &b).unwrap();
        let t = Template::from_frame(&va, Rect::new(40, 30, 32, 24), DEFAULT_RADIUS).unwrap();
        let (r, s) = t.locate(&vb, &mut Vec::new()).unwrap();
        assert_eq!(r, Rect::new(101, 61, 32, 24));
        assert!(s > 0.99, "{s}");
        let mut atlas = Atlas::new();
        atlas.insert("gem", t);
        let found = atlas.locate_all(&vb, 0.9);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].0.as_str(), found[0].1),
            ("gem", Rect::new(101, 61, 32, 24))
        );
        let blank = vec![10u8; 200 * 120 * 4];
        let vblank = FrameView::new(200, 120, 800, PixelFormat::Rgba, &blank).unwrap();
        assert!(atlas.locate_all(&vblank, 0.9).is_empty(), "absent: not proposed");
    }

    #[test]
    fn big_templates_are_sampled_and_bad_ones_refused() {
        let src = frame_with_panel(Some((20, 15)));
        let v = FrameView::new(64, 48, 256, PixelFormat::Rgba, &src).unwrap();
        let t = Template::from_frame(&v, Rect::new(0, 0, 64, 48), 2).unwrap();
        assert!(t.samples.len() as u32 <= MAX_SAMPLES);
        assert_eq!(t.present(&v, 0.95, &mut Vec::new()), Some(true));
        assert!(Template::from_frame(&v, Rect::new(60, 40, 10, 10), 2).is_err());
        assert!(Template::from_luma(2, 2, &[1, 2, 3], Point::new(0, 0), Size::new(4, 4), 1).is_err());
    }
}
