//! Tracking one box from tick to tick by its pixels: a grey patch cut from the first frame, found
//! again in a small search region of each later frame by the least mean absolute difference (the
//! `move_to` skill's closed loop). Pure: views in, a position and its score out.

use gamepilot_core::{FrameView, Point, Rect};

/// Patch pixels are compared on a grid of this step (a quarter of the work, the same answer for
/// anything larger than a few pixels).
const STEP: usize = 2;

/// A grey patch and its size.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub w: u32,
    pub h: u32,
    grey: Vec<u8>,
}

fn grey(view: &FrameView<'_>, x: u32, y: u32) -> u8 {
    let [r, g, b] = view.rgb(x, y);
    ((u32::from(r) * 3 + u32::from(g) * 6 + u32::from(b)) / 10) as u8
}

impl Patch {
    /// The patch of `view` inside `rect` (view coordinates); `None` when it leaves the view or is tiny.
    pub fn cut(view: &FrameView<'_>, rect: Rect) -> Option<Patch> {
        let r = rect.clamped_to(&view.bounds())?;
        if r != rect || r.w < 4 || r.h < 4 {
            return None;
        }
        let mut grey_px = Vec::with_capacity((r.w * r.h) as usize);
        for y in r.y as u32..r.y as u32 + r.h {
            for x in r.x as u32..r.x as u32 + r.w {
                grey_px.push(grey(view, x, y));
            }
        }
        Some(Patch {
            w: r.w,
            h: r.h,
            grey: grey_px,
        })
    }
}

impl Patch {
    /// Whether the patch has enough texture to be found again unambiguously: a grey range of at
    /// least [`MIN_TEXTURE`] (a plain cell of a grid matches half the field).
    pub fn textured(&self) -> bool {
        let (lo, hi) = self
            .grey
            .iter()
            .fold((u8::MAX, u8::MIN), |(lo, hi), &g| (lo.min(g), hi.max(g)));
        hi.saturating_sub(lo) >= MIN_TEXTURE
    }
}

/// The least grey range of a patch worth tracking.
pub const MIN_TEXTURE: u8 = 48;

/// Where `patch` sits best in `view`: the centre of the best placement (view coordinates) and its mean
/// absolute grey difference (0 = identical, 255 = opposite). `None` when the view is smaller than the
/// patch.
pub fn find(view: &FrameView<'_>, patch: &Patch) -> Option<(Point, f32)> {
    find_within(view, view.bounds(), patch)
}

/// [`find`] over the part of `view` inside `region` only; the point is in view coordinates.
pub fn find_within(view: &FrameView<'_>, region: Rect, patch: &Patch) -> Option<(Point, f32)> {
    let r = region.clamped_to(&view.bounds())?;
    if r.w < patch.w || r.h < patch.h {
        return None;
    }
    let (vw, vh) = (r.w as usize, r.h as usize);
    let mut grey_view = Vec::with_capacity(vw * vh);
    for y in r.y as u32..r.y as u32 + r.h {
        for x in r.x as u32..r.x as u32 + r.w {
            grey_view.push(grey(view, x, y));
        }
    }
    let (pw, ph) = (patch.w as usize, patch.h as usize);
    let mut best: Option<(usize, usize, u32)> = None;
    let samples = pw.div_ceil(STEP) * ph.div_ceil(STEP);
    for oy in 0..=vh - ph {
        for ox in 0..=vw - pw {
            let mut sum = 0u32;
            let limit = best.map(|b| b.2).unwrap_or(u32::MAX);
            'rows: for py in (0..ph).step_by(STEP) {
                let vrow = &grey_view[(oy + py) * vw + ox..(oy + py) * vw + ox + pw];
                let prow = &patch.grey[py * pw..py * pw + pw];
                for px in (0..pw).step_by(STEP) {
                    sum += u32::from(vrow[px].abs_diff(prow[px]));
                }
                if sum > limit {
                    break 'rows;
                }
            }
            // Ties go to the placement nearest the region's centre (a plain patch matches anywhere).
            let centre_dist = |x: usize, y: usize| {
                (x as i64 - ((vw - pw) / 2) as i64).pow(2) + (y as i64 - ((vh - ph) / 2) as i64).pow(2)
            };
            if best.is_none_or(|b| sum < b.2 || (sum == b.2 && centre_dist(ox, oy) < centre_dist(b.0, b.1))) {
                best = Some((ox, oy, sum));
            }
        }
    }
    best.map(|(x, y, sum)| {
        (
            Point::new(r.x + (x + pw / 2) as i32, r.y + (y + ph / 2) as i32),
            sum as f32 / samples as f32,
        )
    })
}

/// The box at the middle of a `size` frame that self-identification also checks after each probe hold,
/// beside the observation's elements (appended last): a follow camera keeps its avatar there even on a
/// frame whose element proposals missed the sprite.
pub fn view_centre_box(size: gamepilot_core::Size) -> Rect {
    const SIDE: u32 = 36;
    Rect::new(
        (size.w / 2) as i32 - (SIDE / 2) as i32,
        (size.h / 2) as i32 - (SIDE / 2) as i32,
        SIDE,
        SIDE,
    )
}

/// A placement scoring worse than this (mean absolute grey difference) is not the same sprite.
pub const SAME_SPRITE_SCORE: f32 = 20.0;

/// How each box of `before` moved by `after` (same frame size): its patch searched for within
/// `radius` pixels of where it was. `None` for a box too large to be a sprite (over 160 px), one
/// that leaves the frame, one too plain to track, or one not found again (gone, covered, changed).
pub fn moves(
    before: &FrameView<'_>,
    boxes: &[Rect],
    after: &FrameView<'_>,
    radius: u32,
) -> Vec<Option<(f64, f64)>> {
    boxes
        .iter()
        .map(|b| {
            if b.w > 160 || b.h > 160 {
                return None;
            }
            let patch = Patch::cut(before, *b)?;
            if !patch.textured() {
                return None;
            }
            let r = radius as i32;
            let region = Rect::new(b.x - r, b.y - r, b.w + 2 * radius, b.h + 2 * radius);
            let (p, score) = find_within(after, region, &patch)?;
            // The patch's own centre in `find`'s convention (integer halves).
            let own = Point::new(b.x + (b.w / 2) as i32, b.y + (b.h / 2) as i32);
            (score <= SAME_SPRITE_SCORE).then(|| (f64::from(p.x - own.x), f64::from(p.y - own.y)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    fn scene(w: u32, h: u32, coin: (i32, i32)) -> Vec<u8> {
        let mut buf = vec![0u8; (w * h * 4) as usize];
        for y in 0..h as i32 {
            for x in 0..w as i32 {
                let i = ((y as u32 * w + x as u32) * 4) as usize;
                let (dx, dy) = (x - coin.0, y - coin.1);
                let c = if dx * dx + dy * dy <= 100 {
                    [255, 210, 31]
                } else if (x / 10 + y / 10) % 2 == 0 {
                    [48, 94, 60]
                } else {
                    [52, 100, 64]
                };
                buf[i..i + 3].copy_from_slice(&c);
                buf[i + 3] = 255;
            }
        }
        buf
    }

    #[test]
    fn a_patch_is_found_where_it_moved_and_a_vanished_one_scores_badly() {
        // The target's box tracked between ticks
        let (w, h) = (120u32, 90u32);
        let a = scene(w, h, (40, 40));
        let va = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &a).unwrap();
        let patch = Patch::cut(&va, Rect::new(29, 29, 22, 22)).unwrap();
        let b = scene(w, h, (63, 52));
        let vb = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &b).unwrap();
        let (p, score) = find(&vb, &patch).unwrap();
        assert!((p.x - 63).abs() <= 1 && (p.y - 52).abs() <= 1, "{p:?}");
        assert!(score < 5.0, "{score}");
        let gone = scene(w, h, (-100, -100));
        let vg = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &gone).unwrap();
        let (_, score) = find(&vg, &patch).unwrap();
        assert!(score > 40.0, "a vanished coin scores badly: {score}");
        assert_eq!(
            Patch::cut(&va, Rect::new(110, 80, 22, 22)),
            None,
            "leaves the view"
        );
        // moves: the coin's box moved (+23, +12); a box of plain ground is found where it was.
        let m = moves(
            &va,
            &[Rect::new(29, 29, 22, 22), Rect::new(0, 0, 300, 300)],
            &vb,
            40,
        );
        assert_eq!(m, vec![Some((23.0, 12.0)), None]);
        let gone = moves(&va, &[Rect::new(29, 29, 22, 22)], &vg, 40);
        assert_eq!(gone, vec![None], "a vanished sprite is not found");
    }
}
