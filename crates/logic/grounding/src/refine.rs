//! Two-stage refinement (FR-GND-005) as pure geometry: from a cheap whole-frame pass's answer choose a
//! crop of the capture, and map the expensive pass's answer inside the crop back to capture space.
//! The result is a capture-space point; only the transform chain turns it into a screen point (INV-GND-002).

use crate::GroundingError;
use gamepilot_core::{Point, Rect, Size};
use serde::{Deserialize, Serialize};

/// Crop sizing for the expensive pass.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RefineConfig {
    /// Crop side as a fraction of the capture side (0..1].
    pub crop_fraction: f32,
    /// Crop side never smaller than this many capture pixels (clamped to the capture).
    pub min_crop_px: u32,
    /// Extra capture pixels kept around a box answer.
    pub box_margin_px: u32,
}

impl Default for RefineConfig {
    fn default() -> Self {
        RefineConfig {
            crop_fraction: 0.33,
            min_crop_px: 192,
            box_margin_px: 32,
        }
    }
}

/// The region of the capture sent to the expensive pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crop {
    /// The crop in capture space, inside the capture bounds.
    pub region: Rect,
    /// The cheap pass's answer mapped to capture space.
    pub cheap_point: Point,
}

fn check_size(s: Size) -> Result<(), GroundingError> {
    if s.w == 0 || s.h == 0 {
        return Err(GroundingError::DegenerateImage { w: s.w, h: s.h });
    }
    Ok(())
}

fn check_inside(p: Point, s: Size) -> Result<(), GroundingError> {
    if p.x < 0 || p.y < 0 || p.x as i64 >= s.w as i64 || p.y as i64 >= s.h as i64 {
        return Err(GroundingError::PointOutsideImage {
            x: p.x,
            y: p.y,
            w: s.w,
            h: s.h,
        });
    }
    Ok(())
}

/// Map pixel `v` of an axis of length `from` onto an axis of length `to` (pixel centres), clamped.
fn scale_axis(v: i32, from: u32, to: u32) -> i32 {
    let x = ((v as f64 + 0.5) * to as f64 / from as f64).floor() as i64;
    x.clamp(0, to as i64 - 1) as i32
}

/// Place a `w`×`h` window centred at `c` inside `bounds` (whose size is at least w×h).
fn centred(c: Point, w: u32, h: u32, capture: Size) -> Rect {
    let x = (c.x as i64 - w as i64 / 2).clamp(0, capture.w as i64 - w as i64);
    let y = (c.y as i64 - h as i64 / 2).clamp(0, capture.h as i64 - h as i64);
    Rect::new(x as i32, y as i32, w, h)
}

fn side(capture_side: u32, cfg: &RefineConfig) -> u32 {
    let frac = if cfg.crop_fraction.is_finite() {
        cfg.crop_fraction.clamp(0.01, 1.0)
    } else {
        1.0
    };
    let s = ((capture_side as f64) * frac as f64).round() as u32;
    s.max(cfg.min_crop_px).clamp(1, capture_side)
}

/// Choose the crop around a cheap pass's point answer. `cheap_image` is the size of the (downscaled) whole
/// frame the cheap pass saw; `capture` the capture size.
pub fn plan_crop(
    cheap_point: Point,
    cheap_image: Size,
    capture: Size,
    cfg: &RefineConfig,
) -> Result<Crop, GroundingError> {
    check_size(cheap_image)?;
    check_size(capture)?;
    check_inside(cheap_point, cheap_image)?;
    let c = Point::new(
        scale_axis(cheap_point.x, cheap_image.w, capture.w),
        scale_axis(cheap_point.y, cheap_image.h, capture.h),
    );
    let region = centred(c, side(capture.w, cfg), side(capture.h, cfg), capture);
    Ok(Crop {
        region,
        cheap_point: c,
    })
}

/// Choose the crop around a cheap pass's box answer: the box plus a margin, at least the configured size.
pub fn plan_crop_box(
    cheap_box: Rect,
    cheap_image: Size,
    capture: Size,
    cfg: &RefineConfig,
) -> Result<Crop, GroundingError> {
    check_size(cheap_image)?;
    check_size(capture)?;
    let clipped = cheap_box
        .clamped_to(&Rect::new(0, 0, cheap_image.w, cheap_image.h))
        .ok_or(GroundingError::PointOutsideImage {
            x: cheap_box.x,
            y: cheap_box.y,
            w: cheap_image.w,
            h: cheap_image.h,
        })?;
    let sx = capture.w as f64 / cheap_image.w as f64;
    let sy = capture.h as f64 / cheap_image.h as f64;
    let bw = (clipped.w as f64 * sx).ceil() as u32 + 2 * cfg.box_margin_px;
    let bh = (clipped.h as f64 * sy).ceil() as u32 + 2 * cfg.box_margin_px;
    let c = Point::new(
        scale_axis(clipped.center().x, cheap_image.w, capture.w),
        scale_axis(clipped.center().y, cheap_image.h, capture.h),
    );
    let w = bw.max(side(capture.w, cfg)).min(capture.w);
    let h = bh.max(side(capture.h, cfg)).min(capture.h);
    Ok(Crop {
        region: centred(c, w, h, capture),
        cheap_point: c,
    })
}

impl Crop {
    /// Map the expensive pass's answer `p`, given in the image it saw (the crop resized to
    /// `expensive_image`), back to capture space.
    pub fn to_capture(&self, p: Point, expensive_image: Size) -> Result<Point, GroundingError> {
        check_size(expensive_image)?;
        check_inside(p, expensive_image)?;
        Ok(Point::new(
            self.region.x + scale_axis(p.x, expensive_image.w, self.region.w),
            self.region.y + scale_axis(p.y, expensive_image.h, self.region.h),
        ))
    }
}

impl Crop {
    /// Map a box the expensive pass saw (in the crop resized to `expensive_image`) back to capture
    /// space, clipped to the crop; `None` when nothing of it lies inside the expensive image.
    pub fn rect_to_capture(&self, r: Rect, expensive_image: Size) -> Option<Rect> {
        if expensive_image.w == 0 || expensive_image.h == 0 {
            return None;
        }
        let clipped = r.clamped_to(&Rect::new(0, 0, expensive_image.w, expensive_image.h))?;
        let sx = self.region.w as f64 / expensive_image.w as f64;
        let sy = self.region.h as f64 / expensive_image.h as f64;
        let x0 = (clipped.x as f64 * sx).floor() as i32;
        let y0 = (clipped.y as f64 * sy).floor() as i32;
        let x1 = ((clipped.x as f64 + clipped.w as f64) * sx).ceil() as i32;
        let y1 = ((clipped.y as f64 + clipped.h as f64) * sy).ceil() as i32;
        let w = (x1 - x0).max(1) as u32;
        let h = (y1 - y0).max(1) as u32;
        Rect::new(self.region.x + x0, self.region.y + y0, w, h).clamped_to(&self.region)
    }

    /// The size the expensive pass sees: the crop magnified by the largest factor in `[1, max_factor]`
    /// that keeps its area within `pixel_budget` (the crop itself when the budget is smaller).
    pub fn expensive_size(&self, pixel_budget: u64, max_factor: f64) -> Size {
        let area = self.region.w as f64 * self.region.h as f64;
        let by_budget = if area > 0.0 {
            (pixel_budget as f64 / area).sqrt()
        } else {
            1.0
        };
        let f = by_budget.min(max_factor).max(1.0);
        Size::new(
            ((self.region.w as f64 * f).floor() as u32).max(1),
            ((self.region.h as f64 * f).floor() as u32).max(1),
        )
    }
}

/// A whole-frame box expressed in a downscaled image of the frame (the cheap pass's view).
pub fn scale_rect(r: Rect, from: Size, to: Size) -> Option<Rect> {
    if from.w == 0 || from.h == 0 || to.w == 0 || to.h == 0 {
        return None;
    }
    let sx = to.w as f64 / from.w as f64;
    let sy = to.h as f64 / from.h as f64;
    let x0 = (r.x as f64 * sx).floor() as i32;
    let y0 = (r.y as f64 * sy).floor() as i32;
    let x1 = ((r.x as f64 + r.w as f64) * sx).ceil() as i32;
    let y1 = ((r.y as f64 + r.h as f64) * sy).ceil() as i32;
    Rect::new(x0, y0, (x1 - x0).max(1) as u32, (y1 - y0).max(1) as u32)
        .clamped_to(&Rect::new(0, 0, to.w, to.h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crop_is_centred_on_the_cheap_answer_and_clamped() {
        // FR-GND-005
        let cfg = RefineConfig {
            crop_fraction: 0.25,
            min_crop_px: 100,
            box_margin_px: 0,
        };
        let cap = Size::new(1280, 720);
        let cheap = Size::new(320, 180);
        let c = plan_crop(Point::new(160, 90), cheap, cap, &cfg).unwrap();
        assert_eq!(c.cheap_point, Point::new(642, 362));
        assert_eq!(c.region, Rect::new(642 - 160, 362 - 90, 320, 180));
        // near the corner it stays inside the capture
        let c = plan_crop(Point::new(0, 179), cheap, cap, &cfg).unwrap();
        assert_eq!(c.region, Rect::new(0, 720 - 180, 320, 180));
        assert!(Rect::new(0, 0, 1280, 720).contains_rect(&c.region));
    }

    #[test]
    fn expensive_answer_maps_back_to_capture_space() {
        // FR-GND-005, INV-GND-002 (capture space only; the chain does the rest)
        let cfg = RefineConfig {
            crop_fraction: 0.25,
            min_crop_px: 100,
            box_margin_px: 0,
        };
        let c = plan_crop(
            Point::new(160, 90),
            Size::new(320, 180),
            Size::new(1280, 720),
            &cfg,
        )
        .unwrap();
        // expensive pass saw the 320x180 crop upscaled to 640x360
        let p = c.to_capture(Point::new(320, 180), Size::new(640, 360)).unwrap();
        assert_eq!(p, Point::new(c.region.x + 160, c.region.y + 90));
        let corner = c.to_capture(Point::new(639, 359), Size::new(640, 360)).unwrap();
        assert_eq!(corner, Point::new(c.region.x + 319, c.region.y + 179));
        assert!(c.region.contains(corner));
        assert!(matches!(
            c.to_capture(Point::new(640, 10), Size::new(640, 360)),
            Err(GroundingError::PointOutsideImage { .. })
        ));
    }

    #[test]
    fn bad_input_is_a_named_error() {
        let cfg = RefineConfig::default();
        assert!(matches!(
            plan_crop(Point::new(0, 0), Size::new(0, 5), Size::new(10, 10), &cfg),
            Err(GroundingError::DegenerateImage { .. })
        ));
        assert!(matches!(
            plan_crop(Point::new(-1, 0), Size::new(5, 5), Size::new(10, 10), &cfg),
            Err(GroundingError::PointOutsideImage { .. })
        ));
        assert!(plan_crop_box(
            Rect::new(50, 50, 4, 4),
            Size::new(10, 10),
            Size::new(10, 10),
            &cfg
        )
        .is_err());
    }

    #[test]
    fn box_answer_keeps_the_whole_box() {
        // FR-GND-005
        let cfg = RefineConfig {
            crop_fraction: 0.1,
            min_crop_px: 10,
            box_margin_px: 8,
        };
        let c = plan_crop_box(
            Rect::new(100, 50, 40, 20),
            Size::new(320, 180),
            Size::new(1280, 720),
            &cfg,
        )
        .unwrap();
        let b = Rect::new(400, 200, 160, 80);
        assert!(c.region.contains_rect(&b), "{:?} must contain {:?}", c.region, b);
        // small capture: crop is the whole capture
        let c = plan_crop(
            Point::new(3, 3),
            Size::new(8, 8),
            Size::new(64, 64),
            &RefineConfig::default(),
        )
        .unwrap();
        assert_eq!(c.region, Rect::new(0, 0, 64, 64));
    }

    #[test]
    fn expensive_boxes_map_back_inside_the_crop() {
        // FR-GND-005, INV-PERC-001: a box from the magnified crop lands in capture space inside the crop
        let c = plan_crop(
            Point::new(160, 90),
            Size::new(320, 180),
            Size::new(1280, 720),
            &RefineConfig {
                crop_fraction: 0.25,
                min_crop_px: 100,
                box_margin_px: 0,
            },
        )
        .unwrap();
        let big = Size::new(640, 360);
        let r = c.rect_to_capture(Rect::new(100, 50, 40, 20), big).unwrap();
        assert_eq!(r, Rect::new(c.region.x + 50, c.region.y + 25, 20, 10));
        let edge = c.rect_to_capture(Rect::new(600, 340, 100, 100), big).unwrap();
        assert!(c.region.contains_rect(&edge));
        assert!(c.rect_to_capture(Rect::new(700, 10, 5, 5), big).is_none());
    }

    #[test]
    fn magnification_respects_the_pixel_budget_and_the_cap() {
        // FR-GND-005: the expensive pass gets more pixels per target, within the visual budget
        let c = Crop {
            region: Rect::new(0, 0, 400, 200),
            cheap_point: Point::new(0, 0),
        };
        assert_eq!(c.expensive_size(1_000_000, 2.0), Size::new(800, 400));
        assert_eq!(c.expensive_size(320_000, 4.0), Size::new(800, 400));
        assert_eq!(c.expensive_size(1_000, 2.0), Size::new(400, 200));
    }

    #[test]
    fn whole_frame_boxes_scale_into_the_cheap_image() {
        // FR-GND-005: the cheap pass sees the frame's boxes in its own coordinates
        let r = scale_rect(
            Rect::new(460, 288, 360, 84),
            Size::new(1280, 720),
            Size::new(320, 180),
        )
        .unwrap();
        assert_eq!(r, Rect::new(115, 72, 90, 21));
        assert!(scale_rect(Rect::new(0, 0, 5, 5), Size::new(0, 1), Size::new(1, 1)).is_none());
    }
}
