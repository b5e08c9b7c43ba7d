//! Frame classification without a model (FR-PERC-003, NFR-PERC-001): unchanged, locally changed,
//! continuous motion or scene change, from two thumbnails — tile differences, a global shift estimate
//! from row/column projections, and a colour-histogram distance.

use crate::thumb::{Thumb, HIST_BINS};
use crate::VisionError;
use serde::{Deserialize, Serialize};

/// The class of one transition between consecutive frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameClass {
    Unchanged,
    Local,
    Motion,
    Scene,
}

impl FrameClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FrameClass::Unchanged => "unchanged",
            FrameClass::Local => "local",
            FrameClass::Motion => "motion",
            FrameClass::Scene => "scene",
        }
    }

    pub fn parse(s: &str) -> Option<FrameClass> {
        match s.trim().to_ascii_lowercase().as_str() {
            "unchanged" => Some(FrameClass::Unchanged),
            "local" | "locally_changed" => Some(FrameClass::Local),
            "motion" | "continuous_motion" => Some(FrameClass::Motion),
            "scene" | "scene_change" => Some(FrameClass::Scene),
            _ => None,
        }
    }
}

impl std::fmt::Display for FrameClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Thresholds of the classifier (defaults tuned on the corpus).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassifierParams {
    /// Tiles across and down.
    pub tiles_x: u32,
    pub tiles_y: u32,
    /// A pixel counts as changed when its luma moves by more than this.
    pub pixel_delta: u8,
    /// A tile counts as changed when at least this many of its pixels changed.
    pub tile_min_pixels: u32,
    /// Up to this fraction of changed tiles the change is local.
    pub local_max_fraction: f32,
    /// Histogram distance (0..1) above which a broad change is a scene change.
    pub scene_hist: f32,
    /// Changed-tile fraction from which a change that no global shift explains is a scene change.
    pub scene_fraction: f32,
    /// Largest global shift searched, in thumbnail pixels.
    pub max_shift: i32,
}

impl Default for ClassifierParams {
    fn default() -> Self {
        ClassifierParams {
            tiles_x: 16,
            tiles_y: 9,
            pixel_delta: 10,
            tile_min_pixels: 2,
            local_max_fraction: 0.35,
            scene_hist: 0.30,
            scene_fraction: 0.75,
            max_shift: 12,
        }
    }
}

/// The class with the measurements that produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    pub class: FrameClass,
    /// Fraction of tiles that changed, 0..1.
    pub changed_fraction: f32,
    /// Changed tiles as a bitmask, row-major (`tiles_x * tiles_y` bits; at most 256 tiles).
    pub changed_tiles: Vec<bool>,
    /// Global shift (dx, dy) in thumbnail pixels that best explains the change, when one does.
    pub shift: Option<(i32, i32)>,
    /// Colour-histogram distance 0..1 (half the L1 distance of normalised histograms).
    pub hist_distance: f32,
}

/// Classify the transition `prev` → `cur`. Both thumbnails must have the same size.
pub fn classify(prev: &Thumb, cur: &Thumb, p: &ClassifierParams) -> Result<Classification, VisionError> {
    if prev.width != cur.width || prev.height != cur.height {
        return Err(VisionError::SizeMismatch {
            a: (prev.width, prev.height),
            b: (cur.width, cur.height),
        });
    }
    if cur.is_empty() {
        return Err(VisionError::EmptyFrame);
    }
    let (w, h) = (cur.width, cur.height);
    let (tx, ty) = (p.tiles_x.clamp(1, w), p.tiles_y.clamp(1, h));
    let mut counts = vec![0u32; (tx * ty) as usize];
    let mut abs_sum: u64 = 0;
    for y in 0..h {
        let row = (y * ty / h) * tx;
        let off = (y * w) as usize;
        let (a, b) = (
            &prev.luma[off..off + w as usize],
            &cur.luma[off..off + w as usize],
        );
        for x in 0..w {
            let d = a[x as usize].abs_diff(b[x as usize]);
            abs_sum += d as u64;
            if d > p.pixel_delta {
                counts[(row + x * tx / w) as usize] += 1;
            }
        }
    }
    let changed_tiles: Vec<bool> = counts.iter().map(|&c| c >= p.tile_min_pixels.max(1)).collect();
    let changed = changed_tiles.iter().filter(|&&c| c).count();
    let changed_fraction = changed as f32 / changed_tiles.len() as f32;
    let hist_distance = hist_distance(&prev.hist, &cur.hist);
    if changed == 0 {
        return Ok(Classification {
            class: FrameClass::Unchanged,
            changed_fraction,
            changed_tiles,
            shift: None,
            hist_distance,
        });
    }
    let err0 = abs_sum as f32 / (w * h) as f32;
    let shift = estimate_shift(prev, cur, p.max_shift).and_then(|(dx, dy)| {
        let es = shifted_error(prev, cur, dx, dy);
        (es < 0.5 * err0 && es < 6.0).then_some((dx, dy))
    });
    let scattered = is_scattered(&changed_tiles, tx, ty);
    let class = if changed_fraction <= p.local_max_fraction && !scattered {
        FrameClass::Local
    } else if changed_fraction <= p.local_max_fraction {
        // Small changes in three or more places across the frame: things moving (a scrolling world
        // under a fixed HUD), not one local update.
        FrameClass::Motion
    } else if shift.is_some() {
        FrameClass::Motion
    } else if hist_distance > p.scene_hist || changed_fraction >= p.scene_fraction {
        FrameClass::Scene
    } else {
        FrameClass::Motion
    };
    Ok(Classification {
        class,
        changed_fraction,
        changed_tiles,
        shift,
        hist_distance,
    })
}

/// Three or more separate clusters of changed tiles whose extent spans most of the frame.
fn is_scattered(tiles: &[bool], tx: u32, ty: u32) -> bool {
    let (tx, ty) = (tx as i32, ty as i32);
    let mut seen = vec![false; tiles.len()];
    let mut clusters = 0;
    let (mut x0, mut y0, mut x1, mut y1) = (tx, ty, -1, -1);
    for start in 0..tiles.len() {
        if !tiles[start] || seen[start] {
            continue;
        }
        clusters += 1;
        let mut stack = vec![start];
        seen[start] = true;
        while let Some(i) = stack.pop() {
            let (x, y) = (i as i32 % tx, i as i32 / tx);
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let (nx, ny) = (x + dx, y + dy);
                    if nx < 0 || ny < 0 || nx >= tx || ny >= ty {
                        continue;
                    }
                    let j = (ny * tx + nx) as usize;
                    if tiles[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
    }
    clusters >= 3 && (x1 - x0 + 1) * 10 >= tx * 6 && (y1 - y0 + 1) * 2 >= ty
}

/// Half the L1 distance between normalised histograms, 0..1.
pub fn hist_distance(a: &[u32; HIST_BINS], b: &[u32; HIST_BINS]) -> f32 {
    let (na, nb) = (
        a.iter().sum::<u32>().max(1) as f32,
        b.iter().sum::<u32>().max(1) as f32,
    );
    0.5 * a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f32 / na - y as f32 / nb).abs())
        .sum::<f32>()
}

/// Estimate a global translation from the row and column luma projections; `None` when the best
/// shift is zero in both axes.
fn estimate_shift(prev: &Thumb, cur: &Thumb, max_shift: i32) -> Option<(i32, i32)> {
    let (w, h) = (cur.width as usize, cur.height as usize);
    let mut cols = [vec![0u32; w], vec![0u32; w]];
    let mut rows = [vec![0u32; h], vec![0u32; h]];
    for (k, t) in [prev, cur].into_iter().enumerate() {
        for y in 0..h {
            let r = &t.luma[y * w..(y + 1) * w];
            let mut s = 0u32;
            for (x, &v) in r.iter().enumerate() {
                cols[k][x] += v as u32;
                s += v as u32;
            }
            rows[k][y] = s;
        }
    }
    let dx = best_offset(&cols[0], &cols[1], max_shift);
    let dy = best_offset(&rows[0], &rows[1], max_shift);
    (dx != 0 || dy != 0).then_some((dx, dy))
}

/// The offset d minimising the mean |a[i] - b[i + d]| over the overlap.
fn best_offset(a: &[u32], b: &[u32], max: i32) -> i32 {
    let n = a.len() as i32;
    let max = max.min(n / 3);
    let mut best = (f64::MAX, 0);
    for d in -max..=max {
        let (mut s, mut c) = (0u64, 0u64);
        for i in 0.max(-d)..n.min(n - d) {
            s += a[i as usize].abs_diff(b[(i + d) as usize]) as u64;
            c += 1;
        }
        if c > 0 {
            let e = s as f64 / c as f64;
            // Prefer zero on ties so that static frames never report a shift.
            if e < best.0 - 1e-9 || (e <= best.0 + 1e-9 && d == 0) {
                best = (e, d);
            }
        }
    }
    best.1
}

/// Mean absolute luma difference between prev(x, y) and cur(x + dx, y + dy) over the overlap.
fn shifted_error(prev: &Thumb, cur: &Thumb, dx: i32, dy: i32) -> f32 {
    let (w, h) = (cur.width as i32, cur.height as i32);
    let (mut s, mut c) = (0u64, 0u64);
    for y in 0.max(-dy)..h.min(h - dy) {
        for x in 0.max(-dx)..w.min(w - dx) {
            s += prev
                .at(x as u32, y as u32)
                .abs_diff(cur.at((x + dx) as u32, (y + dy) as u32)) as u64;
            c += 1;
        }
    }
    if c == 0 {
        f32::MAX
    } else {
        s as f32 / c as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thumb::HIST_BINS;

    fn thumb(w: u32, h: u32, f: impl Fn(u32, u32) -> u8) -> Thumb {
        let mut luma = Vec::new();
        let mut hist = [0u32; HIST_BINS];
        for y in 0..h {
            for x in 0..w {
                let v = f(x, y);
                luma.push(v);
                hist[((v >> 6) as usize) * 21] += 1;
            }
        }
        Thumb {
            width: w,
            height: h,
            luma,
            hist,
        }
    }

    fn texture(x: u32, y: u32) -> u8 {
        (((x * 7 + y * 13) ^ (x * y)) % 200) as u8 + 20
    }

    #[test]
    fn identical_frames_are_unchanged() {
        // FR-PERC-003
        let a = thumb(160, 90, texture);
        let c = classify(&a, &a.clone(), &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameClass::Unchanged);
        assert_eq!(c.changed_fraction, 0.0);
    }

    #[test]
    fn a_small_change_is_local() {
        // FR-PERC-003
        let a = thumb(160, 90, texture);
        let b = thumb(160, 90, |x, y| {
            if (100..104).contains(&x) && (10..12).contains(&y) {
                255
            } else {
                texture(x, y)
            }
        });
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameClass::Local);
        assert!(c.changed_tiles.iter().filter(|&&t| t).count() >= 1);
    }

    #[test]
    fn small_changes_scattered_over_the_frame_are_motion() {
        // FR-PERC-003: sprites moving in several places under a fixed HUD.
        let a = thumb(160, 90, texture);
        let moved = |x: u32, y: u32| {
            let spot = |cx: u32, cy: u32| x.abs_diff(cx) < 3 && y.abs_diff(cy) < 3;
            if spot(10, 10) || spot(150, 80) || spot(80, 45) {
                255
            } else {
                texture(x, y)
            }
        };
        let b = thumb(160, 90, moved);
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameClass::Motion, "{c:?}");
    }

    #[test]
    fn a_global_shift_is_motion() {
        // FR-PERC-003
        let a = thumb(160, 90, |x, y| texture(x + 20, y + 20));
        let b = thumb(160, 90, |x, y| texture(x + 25, y + 22));
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameClass::Motion, "{c:?}");
        assert_eq!(c.shift, Some((-5, -2)));
    }

    #[test]
    fn a_new_palette_everywhere_is_a_scene_change() {
        // FR-PERC-003
        let a = thumb(160, 90, |x, y| texture(x, y) / 4);
        let b = thumb(160, 90, |x, y| 255 - texture(y, x) / 4);
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameClass::Scene, "{c:?}");
    }

    #[test]
    fn mismatched_sizes_are_a_named_error() {
        let a = thumb(10, 10, texture);
        let b = thumb(12, 10, texture);
        assert!(matches!(
            classify(&a, &b, &ClassifierParams::default()),
            Err(VisionError::SizeMismatch { .. })
        ));
    }
}
