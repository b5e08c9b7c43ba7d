//! Frame classification without a model (FR-PERC-003, NFR-PERC-001): unchanged, locally changed,
//! continuous motion or scene change, from two thumbnails — tile differences, a global shift estimate
//! from row/column projections, and a colour-histogram distance.

use crate::thumb::{Thumb, HIST_BINS};
use crate::VisionError;
use serde::{Deserialize, Serialize};

pub use gamepilot_core::FrameChange;

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
    pub class: FrameChange,
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
            class: FrameChange::Unchanged,
            changed_fraction,
            changed_tiles,
            shift: None,
            hist_distance,
        });
    }
    let err0 = abs_sum as f32 / (w * h) as f32;
    // A view that shifts as a whole (a first-person turn, a side-scroll, a shake): the best global shift
    // from the projections or a coarse block search, accepted when it explains the frame as a whole or
    // most of the changed tiles one by one (a fixed HUD and new content at the entering edge aside).
    let shift = global_shift(prev, cur, p.max_shift).and_then(|(dx, dy)| {
        let es = shifted_error(prev, cur, dx, dy);
        let whole = es < 0.5 * err0 && es < 6.0;
        (whole || tiles_explained(prev, cur, dx, dy, &changed_tiles, tx, ty, err0)).then_some((dx, dy))
    });
    let scattered = is_scattered(&changed_tiles, tx, ty);
    let class = if changed_fraction <= p.local_max_fraction && !scattered {
        FrameChange::Local
    } else if changed_fraction <= p.local_max_fraction {
        // Small changes in three or more places across the frame: things moving (a scrolling world
        // under a fixed HUD), not one local update.
        FrameChange::Motion
    } else if shift.is_some() {
        FrameChange::Motion
    } else if hist_distance > p.scene_hist || changed_fraction >= p.scene_fraction {
        FrameChange::Scene
    } else {
        FrameChange::Motion
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

/// The better of two global-shift estimates (row/column projections, and a coarse-to-fine block search
/// that a fixed HUD or a band of new content does not mislead); `None` when the best shift is zero.
fn global_shift(prev: &Thumb, cur: &Thumb, max_shift: i32) -> Option<(i32, i32)> {
    let a = estimate_shift(prev, cur, max_shift);
    let b = block_search(prev, cur, max_shift);
    match (a, b) {
        (Some(a), Some(b)) if a != b => {
            let (ea, eb) = (
                sampled_error(prev, cur, a.0, a.1, 2),
                sampled_error(prev, cur, b.0, b.1, 2),
            );
            Some(if ea <= eb { a } else { b })
        }
        (Some(a), _) => Some(a),
        (None, b) => b,
    }
}

/// Coarse-to-fine search: the best shift on a 4×-reduced thumbnail within ±`max_shift`, refined by ±2
/// thumbnail pixels on every other row. `None` when the best is no shift.
fn block_search(prev: &Thumb, cur: &Thumb, max_shift: i32) -> Option<(i32, i32)> {
    let (w, h) = (cur.width as usize, cur.height as usize);
    let (cw, ch) = (w / 4, h / 4);
    if cw < 8 || ch < 4 {
        return None;
    }
    let reduce = |t: &Thumb| -> Vec<u16> {
        let mut out = vec![0u16; cw * ch];
        for y in 0..ch * 4 {
            let row = &t.luma[y * w..y * w + cw * 4];
            for (x, &v) in row.iter().enumerate() {
                out[(y / 4) * cw + x / 4] += v as u16;
            }
        }
        out
    };
    let (ra, rb) = (reduce(prev), reduce(cur));
    let m = (max_shift / 4).max(1).min(cw as i32 / 3).min(ch as i32 / 3);
    let mut best = (f32::MAX, 0i32, 0i32);
    for dy in -m..=m {
        for dx in -m..=m {
            let (mut s, mut c) = (0u32, 0u32);
            for y in 0.max(-dy)..(ch as i32).min(ch as i32 - dy) {
                let (ia, ib) = (y as i64 * cw as i64, (y + dy) as i64 * cw as i64 + dx as i64);
                for x in 0.max(-dx) as i64..(cw as i32).min(cw as i32 - dx) as i64 {
                    s += ra[(ia + x) as usize].abs_diff(rb[(ib + x) as usize]) as u32;
                    c += 1;
                }
            }
            if c > 0 {
                let e = s as f32 / c as f32;
                if e < best.0 - 1e-6 || (e <= best.0 + 1e-6 && dx == 0 && dy == 0) {
                    best = (e, dx, dy);
                }
            }
        }
    }
    let (cx, cy) = (best.1 * 4, best.2 * 4);
    let mut fine = (f32::MAX, 0, 0);
    for dy in cy - 2..=cy + 2 {
        for dx in cx - 2..=cx + 2 {
            if dx.abs() > max_shift || dy.abs() > max_shift {
                continue;
            }
            let e = sampled_error(prev, cur, dx, dy, 2);
            if e < fine.0 - 1e-6 || (e <= fine.0 + 1e-6 && dx == 0 && dy == 0) {
                fine = (e, dx, dy);
            }
        }
    }
    (fine.1 != 0 || fine.2 != 0).then_some((fine.1, fine.2))
}

/// Mean |prev(x, y) - cur(x + dx, y + dy)| over the overlap, on every `step`-th row.
fn sampled_error(prev: &Thumb, cur: &Thumb, dx: i32, dy: i32, step: usize) -> f32 {
    let (w, h) = (cur.width as i32, cur.height as i32);
    let (x0, x1) = (0.max(-dx), w.min(w - dx));
    if x1 <= x0 {
        return f32::MAX;
    }
    let (mut s, mut c) = (0u64, 0u64);
    for y in (0.max(-dy)..h.min(h - dy)).step_by(step.max(1)) {
        let a = &prev.luma[(y * w + x0) as usize..(y * w + x1) as usize];
        let o = ((y + dy) * w + x0 + dx) as usize;
        let b = &cur.luma[o..o + (x1 - x0) as usize];
        s += a.iter().zip(b).map(|(&p, &q)| p.abs_diff(q) as u64).sum::<u64>();
        c += (x1 - x0) as u64;
    }
    if c == 0 {
        f32::MAX
    } else {
        s as f32 / c as f32
    }
}

/// Whether the shift explains most changed tiles: inside each, the shifted error is at most half the
/// unshifted one and small in itself. Tiles the shift moves out of the frame are not counted.
#[allow(clippy::too_many_arguments)]
fn tiles_explained(
    prev: &Thumb,
    cur: &Thumb,
    dx: i32,
    dy: i32,
    changed: &[bool],
    tx: u32,
    ty: u32,
    err0: f32,
) -> bool {
    let (w, h) = (cur.width as i32, cur.height as i32);
    let n = (tx * ty) as usize;
    // Per tile, the error at the global shift and at one pixel either side of it horizontally: a turn's
    // floor and edges move a little faster or slower than its centre.
    let mut e_shift = vec![[(0u32, 0u32); 3]; n];
    let mut e_zero = vec![0u32; n];
    for y in 0..h {
        let row = (y as u32 * ty / h as u32) * tx;
        let in_y = y + dy >= 0 && y + dy < h;
        for x in 0..w {
            let t = (row + x as u32 * tx / w as u32) as usize;
            let p = prev.luma[(y * w + x) as usize];
            e_zero[t] += p.abs_diff(cur.luma[(y * w + x) as usize]) as u32;
            if !in_y {
                continue;
            }
            for (k, ddx) in [dx - 1, dx, dx + 1].into_iter().enumerate() {
                if x + ddx >= 0 && x + ddx < w {
                    let q = cur.luma[((y + dy) * w + x + ddx) as usize];
                    e_shift[t][k].0 += p.abs_diff(q) as u32;
                    e_shift[t][k].1 += 1;
                }
            }
        }
    }
    let px_per_tile = (w * h) as f32 / n as f32;
    let (mut counted, mut explained) = (0u32, 0u32);
    for t in 0..n {
        let c = e_shift[t].iter().map(|e| e.1).min().unwrap_or(0);
        if !changed[t] || (c as f32) < 0.6 * px_per_tile {
            continue;
        }
        counted += 1;
        let es = e_shift[t]
            .iter()
            .map(|&(s, c)| s as f32 / c.max(1) as f32)
            .fold(f32::MAX, f32::min);
        let e0 = e_zero[t] as f32 / px_per_tile;
        if es <= 0.5 * e0 && es < 10.0 {
            explained += 1;
        }
    }
    counted >= 4 && explained * 10 >= counted * 7 && err0 >= 1.0
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
        assert_eq!(c.class, FrameChange::Unchanged);
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
        assert_eq!(c.class, FrameChange::Local);
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
        assert_eq!(c.class, FrameChange::Motion, "{c:?}");
    }

    #[test]
    fn a_global_shift_is_motion() {
        // FR-PERC-003
        let a = thumb(160, 90, |x, y| texture(x + 20, y + 20));
        let b = thumb(160, 90, |x, y| texture(x + 25, y + 22));
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameChange::Motion, "{c:?}");
        assert_eq!(c.shift, Some((-5, -2)));
    }

    /// A value-noise landscape: smooth enough that a shifted copy is recognisably the same view.
    fn world(x: i32, y: i32) -> u8 {
        let hash = |a: i32, b: i32| {
            (((a.wrapping_mul(73_856_093)) ^ (b.wrapping_mul(19_349_663))) as u32 % 180) as f32
        };
        let (cx, cy) = (x.div_euclid(6), y.div_euclid(6));
        let (fx, fy) = (x.rem_euclid(6) as f32 / 6.0, y.rem_euclid(6) as f32 / 6.0);
        let top = hash(cx, cy) * (1.0 - fx) + hash(cx + 1, cy) * fx;
        let bot = hash(cx, cy + 1) * (1.0 - fx) + hash(cx + 1, cy + 1) * fx;
        (top * (1.0 - fy) + bot * fy) as u8 + 40
    }

    #[test]
    fn a_camera_turn_under_a_fixed_hud_is_motion() {
        // FR-PERC-003: a first-person turn shifts the whole view by several pixels; the HUD
        // band at the bottom stays; new content enters at one edge; the floor moves a little faster.
        let view = |yaw: i32| {
            thumb(160, 90, move |x, y| {
                let (x, y) = (x as i32, y as i32);
                if y >= 80 {
                    return if (x / 8) % 2 == 0 { 30 } else { 200 };
                }
                let parallax = if y > 55 { yaw / 4 } else { 0 };
                world(x + yaw + parallax, y)
            })
        };
        for (a, b) in [(0, 7), (0, -9), (20, 24), (5, 16)] {
            let c = classify(&view(a), &view(b), &ClassifierParams::default()).unwrap();
            assert_eq!(c.class, FrameChange::Motion, "yaw {a} -> {b}: {c:?}");
            assert!(c.shift.is_some_and(|(dx, _)| dx.abs() >= 3), "{c:?}");
        }
        // A shake: a small shift in both axes.
        let a = thumb(160, 90, |x, y| world(x as i32, y as i32));
        let b = thumb(160, 90, |x, y| world(x as i32 + 3, y as i32 - 2));
        assert_eq!(
            classify(&a, &b, &ClassifierParams::default()).unwrap().class,
            FrameChange::Motion
        );
    }

    #[test]
    fn a_different_view_of_the_same_world_is_still_a_scene_change() {
        // FR-PERC-003: no shift explains an unrelated view, whatever its palette.
        let a = thumb(160, 90, |x, y| world(x as i32, y as i32));
        let b = thumb(160, 90, |x, y| world(x as i32 + 400, y as i32 + 300));
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameChange::Scene, "{c:?}");
    }

    #[test]
    fn a_new_palette_everywhere_is_a_scene_change() {
        // FR-PERC-003
        let a = thumb(160, 90, |x, y| texture(x, y) / 4);
        let b = thumb(160, 90, |x, y| 255 - texture(y, x) / 4);
        let c = classify(&a, &b, &ClassifierParams::default()).unwrap();
        assert_eq!(c.class, FrameChange::Scene, "{c:?}");
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
