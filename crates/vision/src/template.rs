//! The session's atlas: templates of elements the agent clicked and confirmed, found again by
//! normalised cross-correlation on a coarse luma grid, then refined at full resolution.

use crate::VisionError;
use gamepilot_core::{FrameView, Rect};

/// A named patch of luma cut from a frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub luma: Vec<u8>,
}

/// Templates of this session (never persisted: CON-006).
#[derive(Debug, Clone, Default)]
pub struct Atlas {
    templates: Vec<Template>,
    /// Minimum normalised correlation for a match.
    pub threshold: f32,
}

fn luma_of(view: &FrameView<'_>, x: u32, y: u32) -> u8 {
    let [r, g, b] = view.rgb(x, y);
    ((r as u32 * 77 + g as u32 * 150 + b as u32 * 29) >> 8) as u8
}

impl Template {
    /// Cut `region` of `view` as a template.
    pub fn from_view(name: &str, view: &FrameView<'_>, region: Rect) -> Result<Template, VisionError> {
        if !view.bounds().contains_rect(&region) {
            return Err(VisionError::RegionOutside {
                region,
                width: view.width,
                height: view.height,
            });
        }
        if region.is_empty() {
            return Err(VisionError::EmptyTemplate(name.to_string()));
        }
        let mut luma = Vec::with_capacity(region.area() as usize);
        for y in 0..region.h {
            for x in 0..region.w {
                luma.push(luma_of(view, region.x as u32 + x, region.y as u32 + y));
            }
        }
        Ok(Template {
            name: name.to_string(),
            width: region.w,
            height: region.h,
            luma,
        })
    }

    fn at(&self, x: u32, y: u32) -> u8 {
        self.luma.get((y * self.width + x) as usize).copied().unwrap_or(0)
    }
}

impl Atlas {
    pub fn new(threshold: f32) -> Atlas {
        Atlas {
            templates: Vec::new(),
            threshold,
        }
    }

    /// Add or replace the template of that name.
    pub fn insert(&mut self, t: Template) {
        self.templates.retain(|o| o.name != t.name);
        self.templates.push(t);
    }

    pub fn get(&self, name: &str) -> Option<&Template> {
        self.templates.iter().find(|t| t.name == name)
    }

    pub fn len(&self) -> usize {
        self.templates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// Every template found in `view` at or above the atlas threshold: (name, box, score).
    pub fn find_all(&self, view: &FrameView<'_>) -> Vec<(String, Rect, f32)> {
        let thr = if self.threshold > 0.0 { self.threshold } else { 0.9 };
        self.templates
            .iter()
            .filter_map(|t| {
                find(view, t)
                    .filter(|(_, s)| *s >= thr)
                    .map(|(r, s)| (t.name.clone(), r, s))
            })
            .collect()
    }

    /// `template_present(name, threshold)`: `None` when the atlas has no such template.
    pub fn present(&self, view: &FrameView<'_>, name: &str, threshold: f32) -> Option<bool> {
        let t = self.get(name)?;
        Some(find(view, t).map(|(_, s)| s >= threshold).unwrap_or(false))
    }
}

/// Best match of `t` in `view`: box and normalised correlation (−1..1). Coarse search on a grid of
/// step `s` (so the template spans about 12 samples), then a full-resolution refinement.
pub fn find(view: &FrameView<'_>, t: &Template) -> Option<(Rect, f32)> {
    if t.width == 0 || t.height == 0 || t.width > view.width || t.height > view.height {
        return None;
    }
    let s = (t.width.min(t.height) / 12).max(1);
    let score = |ox: u32, oy: u32, step: u32| -> f32 {
        let (mut sa, mut sb, mut saa, mut sbb, mut sab, mut n) = (0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
        let mut y = 0;
        while y < t.height {
            let mut x = 0;
            while x < t.width {
                let a = t.at(x, y) as f64;
                let b = luma_of(view, ox + x, oy + y) as f64;
                sa += a;
                sb += b;
                saa += a * a;
                sbb += b * b;
                sab += a * b;
                n += 1.0;
                x += step;
            }
            y += step;
        }
        let va = saa - sa * sa / n;
        let vb = sbb - sb * sb / n;
        if va <= 1e-9 || vb <= 1e-9 {
            // Flat patches: equal when the means agree.
            return if (sa / n - sb / n).abs() < 4.0 { 1.0 } else { 0.0 };
        }
        ((sab - sa * sb / n) / (va * vb).sqrt()) as f32
    };
    let mut best = (f32::MIN, 0u32, 0u32);
    let mut oy = 0;
    while oy + t.height <= view.height {
        let mut ox = 0;
        while ox + t.width <= view.width {
            let sc = score(ox, oy, s);
            if sc > best.0 {
                best = (sc, ox, oy);
            }
            ox += s;
        }
        oy += s;
    }
    let (cx, cy) = (best.1, best.2);
    let mut best = (score(cx, cy, 1), cx, cy);
    for oy in cy.saturating_sub(s)..=(cy + s).min(view.height - t.height) {
        for ox in cx.saturating_sub(s)..=(cx + s).min(view.width - t.width) {
            let sc = score(ox, oy, 1);
            if sc > best.0 {
                best = (sc, ox, oy);
            }
        }
    }
    Some((Rect::new(best.1 as i32, best.2 as i32, t.width, t.height), best.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    fn frame(w: u32, h: u32, f: impl Fn(u32, u32) -> u8) -> Vec<u8> {
        let mut v = Vec::new();
        for y in 0..h {
            for x in 0..w {
                let l = f(x, y);
                v.extend_from_slice(&[l, l, l, 255]);
            }
        }
        v
    }

    #[test]
    fn a_template_is_found_where_it_moved() {
        let pattern = |x: u32, y: u32| {
            let (dx, dy) = (x as i32 - 16, y as i32 - 12);
            if dx * dx + dy * dy < 64 {
                230
            } else if y > 18 {
                120
            } else {
                60 + x as u8
            }
        };
        let a = frame(200, 120, |x, y| {
            if (40..72).contains(&x) && (30..54).contains(&y) {
                pattern(x - 40, y - 30)
            } else {
                10
            }
        });
        let va = FrameView::new(200, 120, 800, PixelFormat::Rgba, &a).unwrap();
        let t = Template::from_view("gem", &va, Rect::new(40, 30, 32, 24)).unwrap();
        let b = frame(200, 120, |x, y| {
            if (101..133).contains(&x) && (61..85).contains(&y) {
                pattern(x - 101, y - 61)
            } else {
                10
            }
        });
        let vb = FrameView::new(200, 120, 800, PixelFormat::Rgba, &b).unwrap();
        let (r, s) = find(&vb, &t).unwrap();
        assert_eq!(r, Rect::new(101, 61, 32, 24));
        assert!(s > 0.99);
        let mut atlas = Atlas::new(0.9);
        atlas.insert(t);
        assert_eq!(atlas.present(&vb, "gem", 0.9), Some(true));
        assert_eq!(atlas.present(&vb, "nope", 0.9), None);
        assert!(Template::from_view("x", &va, Rect::new(190, 0, 20, 5)).is_err());
    }
}
