//! Camera calibration (ADR-0035 "Neutral"): learn how far a relative movement turns the view, measured from
//! frames taken before and after known movements. No model: the view's shift is found by matching the
//! brightness profiles of the two frames.

use gamepilot_core::{FrameView, Rect};

/// The measured shift of the view between two frames, in capture pixels (positive: content moved
/// right/down), with a confidence in 0..1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    pub dx: f32,
    pub dy: f32,
    /// Confidence of `dx` and of `dy`.
    pub confidence_x: f32,
    pub confidence_y: f32,
}

fn luma(px: [u8; 3]) -> f32 {
    0.299 * px[0] as f32 + 0.587 * px[1] as f32 + 0.114 * px[2] as f32
}

/// Column (horizontal) or row (vertical) brightness profile over the middle band of the frame.
fn profile(f: &FrameView<'_>, horizontal: bool) -> Vec<f32> {
    let (w, h) = (f.width, f.height);
    if horizontal {
        let (y0, y1) = (h / 4, (h * 3 / 4).max(h / 4 + 1).min(h));
        (0..w)
            .map(|x| (y0..y1).map(|y| luma(f.rgb(x, y))).sum::<f32>() / (y1 - y0).max(1) as f32)
            .collect()
    } else {
        let (x0, x1) = (w / 4, (w * 3 / 4).max(w / 4 + 1).min(w));
        (0..h)
            .map(|y| (x0..x1).map(|x| luma(f.rgb(x, y))).sum::<f32>() / (x1 - x0).max(1) as f32)
            .collect()
    }
}

/// The shift `s` that best explains `after[i] = before[i - s]`, with sub-pixel refinement; and a
/// confidence from how much better it is than the average shift.
fn best_shift(before: &[f32], after: &[f32], max_shift: i32) -> Option<(f32, f32)> {
    let n = before.len().min(after.len()) as i32;
    if n < 8 {
        return None;
    }
    let max_shift = max_shift.min(n / 2);
    // Mean absolute difference over the overlap, each side's mean removed (lighting and the other axis's
    // content shift the profile by a constant).
    let cost = |s: i32| -> f32 {
        let lo = s.max(0);
        let hi = (n + s).min(n);
        if hi - lo < 4 {
            return f32::MAX;
        }
        let count = (hi - lo) as f32;
        let ma = (lo..hi).map(|i| after[i as usize]).sum::<f32>() / count;
        let mb = (lo..hi).map(|i| before[(i - s) as usize]).sum::<f32>() / count;
        (lo..hi)
            .map(|i| ((after[i as usize] - ma) - (before[(i - s) as usize] - mb)).abs())
            .sum::<f32>()
            / count
    };
    let costs: Vec<(i32, f32)> = (-max_shift..=max_shift).map(|s| (s, cost(s))).collect();
    let &(best, c0) = costs.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let mean = costs.iter().map(|c| c.1).sum::<f32>() / costs.len() as f32;
    let confidence = if mean > 0.0 {
        (1.0 - c0 / mean).clamp(0.0, 1.0)
    } else {
        0.0
    };
    // Parabola through the neighbours for a sub-pixel estimate.
    let at = |s: i32| costs.iter().find(|c| c.0 == s).map(|c| c.1);
    let refined = match (at(best - 1), at(best + 1)) {
        (Some(l), Some(r)) => {
            let denom = l - 2.0 * c0 + r;
            if denom.abs() > f32::EPSILON {
                best as f32 + 0.5 * (l - r) / denom
            } else {
                best as f32
            }
        }
        _ => best as f32,
    };
    Some((refined, confidence))
}

/// Measure how far the view shifted between `before` and `after` (at most `max_shift` pixels per axis).
pub fn measure_shift(before: &FrameView<'_>, after: &FrameView<'_>, max_shift: u32) -> Option<Shift> {
    if before.width != after.width || before.height != after.height {
        return None;
    }
    let (dx, cx) = best_shift(&profile(before, true), &profile(after, true), max_shift as i32)?;
    let (dy, cy) = best_shift(&profile(before, false), &profile(after, false), max_shift as i32)?;
    Some(Shift {
        dx,
        dy,
        confidence_x: cx,
        confidence_y: cy,
    })
}

/// The part of a view inside `r` (clamped to the view), as a view of its own.
pub fn crop<'a>(f: &FrameView<'a>, r: Rect) -> Option<FrameView<'a>> {
    let r = r.clamped_to(&f.bounds())?;
    let start = r.y as usize * f.stride + r.x as usize * 4;
    FrameView::new(r.w, r.h, f.stride, f.format, f.data.get(start..)?)
}

/// `measure_shift` inside a region (e.g. a compass strip or the horizon) of both frames.
pub fn measure_shift_in(
    before: &FrameView<'_>,
    after: &FrameView<'_>,
    region: Rect,
    max_shift: u32,
) -> Option<Shift> {
    measure_shift(&crop(before, region)?, &crop(after, region)?, max_shift)
}

/// The axis a calibration run moves along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    X,
    Y,
}

/// A calibration run: a list of relative moves along one axis. For each move the caller delivers the
/// movement (as a `camera` action) and hands over the frames from before and after it; the fit of shift
/// against counts gives pixels per count.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibrator {
    axis: Axis,
    moves: Vec<i32>,
    next: usize,
    region: Rect,
    max_shift: u32,
    samples: Vec<Sample>,
}

impl Calibrator {
    pub fn new(axis: Axis, moves: Vec<i32>, region: Rect, max_shift: u32) -> Calibrator {
        Calibrator {
            axis,
            moves,
            next: 0,
            region,
            max_shift,
            samples: Vec::new(),
        }
    }

    /// The next relative movement to deliver, as (dx, dy) counts.
    pub fn next_move(&self) -> Option<(i32, i32)> {
        let c = *self.moves.get(self.next)?;
        Some(match self.axis {
            Axis::X => (c, 0),
            Axis::Y => (0, c),
        })
    }

    /// Record the frames around the current move; returns its sample (or `None` when the frames could not
    /// be matched confidently, in which case the move is skipped).
    pub fn observe(&mut self, before: &FrameView<'_>, after: &FrameView<'_>) -> Option<Sample> {
        let counts = *self.moves.get(self.next)?;
        self.next += 1;
        let s = measure_shift_in(before, after, self.region, self.max_shift)?;
        let (shift_px, conf) = match self.axis {
            Axis::X => (s.dx, s.confidence_x),
            Axis::Y => (s.dy, s.confidence_y),
        };
        if conf < 0.2 {
            return None;
        }
        let sample = Sample { counts, shift_px };
        self.samples.push(sample);
        Some(sample)
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// Pixels per count along the run's axis, once at least one sample exists.
    pub fn result(&self) -> Option<f32> {
        fit(&self.samples)
    }
}

/// One calibration sample: a relative movement of `counts` along an axis and the view shift it caused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub counts: i32,
    pub shift_px: f32,
}

/// How many capture pixels the view moves per relative-movement unit, per axis. The sign is the game's:
/// turning right usually moves the scene left, giving a negative value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CameraCalibration {
    pub px_per_count_x: f32,
    pub px_per_count_y: f32,
}

/// Least-squares slope through the origin; `None` without usable samples.
pub fn fit(samples: &[Sample]) -> Option<f32> {
    let (num, den) = samples
        .iter()
        .filter(|s| s.counts != 0)
        .fold((0.0f64, 0.0f64), |(n, d), s| {
            (
                n + s.counts as f64 * s.shift_px as f64,
                d + (s.counts as f64).powi(2),
            )
        });
    (den > 0.0).then(|| (num / den) as f32)
}

impl CameraCalibration {
    pub fn from_samples(x: &[Sample], y: &[Sample]) -> Option<CameraCalibration> {
        let px_per_count_x = fit(x)?;
        let px_per_count_y = fit(y).unwrap_or(px_per_count_x);
        (px_per_count_x.abs() > 1e-4).then_some(CameraCalibration {
            px_per_count_x,
            px_per_count_y,
        })
    }

    /// The relative movement that brings content `dx_px, dy_px` away from the view centre to the centre.
    pub fn counts_to_center(&self, dx_px: f32, dy_px: f32) -> (i32, i32) {
        let cx = if self.px_per_count_x.abs() > 1e-6 {
            -dx_px / self.px_per_count_x
        } else {
            0.0
        };
        let cy = if self.px_per_count_y.abs() > 1e-6 {
            -dy_px / self.px_per_count_y
        } else {
            0.0
        };
        (cx.round() as i32, cy.round() as i32)
    }

    /// Degrees per count, given the view's horizontal field of view and width in pixels.
    pub fn degrees_per_count(&self, fov_deg: f32, width_px: u32) -> f32 {
        self.px_per_count_x.abs() * fov_deg / width_px.max(1) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{Frame, MonoTime};

    /// A panorama strip seen through a window at horizontal offset `off` and vertical offset `voff`.
    fn view(off: i32, voff: i32) -> Frame {
        let (w, h) = (160u32, 90u32);
        let mut data = Vec::with_capacity((w * h * 4) as usize);
        for y in 0..h as i32 {
            for x in 0..w as i32 {
                let wx = (x + off) as f32;
                let wy = (y + voff) as f32;
                let v = 128.0
                    + 60.0 * (wx * 0.11).sin()
                    + 40.0 * (wx * 0.037).cos()
                    + 30.0 * (wy * 0.13).sin()
                    + 25.0 * (wy * 0.047).cos();
                let v = v.clamp(0.0, 255.0) as u8;
                data.extend_from_slice(&[v, v / 2, 255 - v, 255]);
            }
        }
        Frame::from_rgba(w, h, data, MonoTime::ZERO).unwrap()
    }

    #[test]
    fn measures_a_known_shift() {
        // ADR-0035 camera calibration, measured from frames
        let a = view(0, 0);
        let b = view(12, -5); // camera turned right and up: content moves left and down
        let s = measure_shift(&a.view(), &b.view(), 40).unwrap();
        assert!((s.dx + 12.0).abs() < 0.6, "dx {}", s.dx);
        assert!((s.dy - 5.0).abs() < 0.6, "dy {}", s.dy);
        assert!(s.confidence_x > 0.5 && s.confidence_y > 0.5, "{s:?}");
        let none = measure_shift(&a.view(), &a.view(), 40).unwrap();
        assert!(none.dx.abs() < 0.5 && none.dy.abs() < 0.5);
    }

    #[test]
    fn fits_pixels_per_count_and_inverts() {
        let xs = [
            Sample {
                counts: 100,
                shift_px: -50.0,
            },
            Sample {
                counts: -40,
                shift_px: 20.5,
            },
        ];
        let c = CameraCalibration::from_samples(&xs, &[]).unwrap();
        assert!((c.px_per_count_x + 0.5).abs() < 0.02);
        assert!((c.counts_to_center(100.0, 0.0).0 - 200).abs() <= 2);
        assert!(CameraCalibration::from_samples(&[], &[]).is_none());
        assert!((c.degrees_per_count(90.0, 180) - 0.25).abs() < 0.01);
    }

    #[test]
    fn calibrator_runs_its_moves_and_fits() {
        // ADR-0035: 1 count moves the view 1 px here (content moves opposite to the turn)
        let mut c = Calibrator::new(Axis::X, vec![10, -6, 15], Rect::new(0, 0, 160, 90), 30);
        let mut yaw = 0;
        while let Some((dx, dy)) = c.next_move() {
            assert_eq!(dy, 0);
            let (a, b) = (view(yaw, 0), view(yaw + dx, 0));
            yaw += dx;
            assert!(c.observe(&a.view(), &b.view()).is_some());
        }
        assert_eq!(c.samples().len(), 3);
        let k = c.result().unwrap();
        assert!((k + 1.0).abs() < 0.05, "px per count {k}");
        let small = view(0, 0);
        let region = crop(&small.view(), Rect::new(150, 80, 50, 50)).unwrap();
        assert_eq!((region.width, region.height), (10, 10));
    }

    #[test]
    fn mismatched_frames_give_none() {
        let a = view(0, 0);
        let small = Frame::from_rgba(4, 4, vec![0; 64], MonoTime::ZERO).unwrap();
        assert!(measure_shift(&a.view(), &small.view(), 10).is_none());
    }
}
