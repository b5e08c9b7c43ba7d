//! What an unlabelled element looks like, in words a text-only model can match against its goal: the
//! element's main colour and its shape ("yellow round", "red square"), read from the frame's pixels
//! without a model (what the model is shown).

use gamepilot_core::{FrameView, Rect};

/// Largest side of the grid of pixels sampled inside a box (bigger boxes are sampled with a stride).
const SAMPLES_PER_SIDE: i32 = 48;
/// A pixel is ink when its colour differs from the box's ground by more than this (sum of |ΔRGB|).
const INK_DISTANCE: i32 = 90;

/// The colour name of one pixel: hue buckets for saturated colours, white / grey / black otherwise.
fn colour_name([r, g, b]: [u8; 3]) -> &'static str {
    let (r, g, b) = (f32::from(r) / 255.0, f32::from(g) / 255.0, f32::from(b) / 255.0);
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let chroma = max - min;
    if max < 0.2 {
        return "black";
    }
    if chroma < 0.18 || chroma / max < 0.25 {
        return if max > 0.8 {
            "white"
        } else if max < 0.3 {
            "black"
        } else {
            "grey"
        };
    }
    let hue = if max == r {
        60.0 * ((g - b) / chroma).rem_euclid(6.0)
    } else if max == g {
        60.0 * ((b - r) / chroma + 2.0)
    } else {
        60.0 * ((r - g) / chroma + 4.0)
    };
    match hue {
        h if !(15.0..345.0).contains(&h) => "red",
        h if h < 40.0 => "orange",
        h if h < 70.0 => "yellow",
        h if h < 165.0 => "green",
        h if h < 200.0 => "cyan",
        h if h < 255.0 => "blue",
        h if h < 290.0 => "purple",
        _ => "pink",
    }
}

fn distance(a: [u8; 3], b: [u8; 3]) -> i32 {
    (0..3).map(|i| (i32::from(a[i]) - i32::from(b[i])).abs()).sum()
}

/// The ground a box sits on: the median colour (per channel) of the ring just outside it, or of its
/// own edge where the ring leaves the frame.
fn ground(view: &FrameView<'_>, b: Rect) -> [u8; 3] {
    let (fw, fh) = (view.width as i32, view.height as i32);
    let (bw, bh) = (b.w as i32, b.h as i32);
    let mut ring: Vec<[u8; 3]> = Vec::new();
    let step = (bw.max(bh) / 24).max(1) as usize;
    let mut take = |x: i32, y: i32| {
        let (x, y) = (x.clamp(0, fw - 1), y.clamp(0, fh - 1));
        ring.push(view.rgb(x as u32, y as u32));
    };
    for x in (b.x - 1..=b.x + bw).step_by(step) {
        take(x, b.y - 2);
        take(x, b.y + bh + 1);
    }
    for y in (b.y..b.y + bh).step_by(step) {
        take(b.x - 2, y);
        take(b.x + bw + 1, y);
    }
    let mut out = [0u8; 3];
    for (c, slot) in out.iter_mut().enumerate() {
        let mut v: Vec<u8> = ring.iter().map(|p| p[c]).collect();
        v.sort_unstable();
        *slot = v.get(v.len() / 2).copied().unwrap_or(0);
    }
    out
}

/// "yellow round", "red square", "white bar": the most common colour of the box's ink and the shape
/// its ink fills. `None` for an empty, degenerate or inkless box.
pub fn describe(view: &FrameView<'_>, bbox: Rect) -> Option<String> {
    let b = bbox.clamped_to(&view.bounds())?;
    let (bw, bh) = (b.w as i32, b.h as i32);
    if bw < 3 || bh < 3 {
        return None;
    }
    let bg = ground(view, b);
    let sx = (bw / SAMPLES_PER_SIDE).max(1);
    let sy = (bh / SAMPLES_PER_SIDE).max(1);
    let mut counts: Vec<(&'static str, u32)> = Vec::new();
    let (mut ink, mut total) = (0u32, 0u32);
    for y in (b.y..b.y + bh).step_by(sy as usize) {
        for x in (b.x..b.x + bw).step_by(sx as usize) {
            total += 1;
            let p = view.rgb(x as u32, y as u32);
            if distance(p, bg) <= INK_DISTANCE {
                continue;
            }
            ink += 1;
            let name = colour_name(p);
            match counts.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => counts.push((name, 1)),
            }
        }
    }
    if total == 0 || ink * 10 < total {
        return None;
    }
    // The most common colour; a saturated colour wins over black/grey shading of similar count.
    let colour = counts
        .iter()
        .max_by_key(|(n, c)| {
            let neutral = matches!(*n, "black" | "grey");
            (if neutral { *c / 2 } else { *c }, std::cmp::Reverse(*n))
        })
        .map(|(n, _)| *n)?;
    let fill = ink as f32 / total as f32;
    let aspect = b.w as f32 / b.h as f32;
    let squareish = (0.75..=1.33).contains(&aspect);
    let shape = if fill >= 0.88 {
        if squareish {
            "square"
        } else {
            "bar"
        }
    } else if (0.62..0.88).contains(&fill) && squareish {
        "round"
    } else {
        "shape"
    };
    Some(format!("{colour} {shape}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    fn canvas(w: u32, h: u32, bg: [u8; 3]) -> Vec<u8> {
        let mut buf = vec![0u8; (w * h * 4) as usize];
        for px in buf.chunks_exact_mut(4) {
            px.copy_from_slice(&[bg[0], bg[1], bg[2], 255]);
        }
        buf
    }

    fn put(buf: &mut [u8], w: u32, x: i32, y: i32, c: [u8; 3]) {
        let i = ((y as u32 * w + x as u32) * 4) as usize;
        buf[i..i + 3].copy_from_slice(&c);
    }

    #[test]
    fn a_coin_a_hazard_and_a_bar_are_told_apart_by_colour_and_shape() {
        // The practice game's coin (yellow disc), hazard (red square) and health bar
        let (w, h) = (200u32, 120u32);
        let grass = [48, 94, 60];
        let mut buf = canvas(w, h, grass);
        for y in 0..120 {
            for x in 0..200 {
                let (dx, dy) = (x as f32 - 30.0, y as f32 - 30.0);
                if dx * dx + dy * dy <= 12.0 * 12.0 {
                    put(&mut buf, w, x, y, [255, 210, 31]);
                }
                if (80..110).contains(&x) && (15..45).contains(&y) {
                    put(&mut buf, w, x, y, [224, 36, 36]);
                }
                if (20..180).contains(&x) && (90..100).contains(&y) {
                    put(&mut buf, w, x, y, [46, 204, 64]);
                }
            }
        }
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        assert_eq!(
            describe(&v, Rect::new(18, 18, 25, 25)).as_deref(),
            Some("yellow round")
        );
        assert_eq!(
            describe(&v, Rect::new(80, 15, 30, 30)).as_deref(),
            Some("red square")
        );
        assert_eq!(
            describe(&v, Rect::new(20, 90, 160, 10)).as_deref(),
            Some("green bar")
        );
        // nothing but ground, and a box outside the frame
        assert_eq!(describe(&v, Rect::new(130, 50, 20, 20)), None);
        assert_eq!(describe(&v, Rect::new(500, 500, 20, 20)), None);
    }

    #[test]
    fn neutral_colours_are_named_by_brightness() {
        assert_eq!(colour_name([250, 250, 250]), "white");
        assert_eq!(colour_name([128, 128, 130]), "grey");
        assert_eq!(colour_name([10, 12, 10]), "black");
        assert_eq!(colour_name([21, 101, 192]), "blue");
        assert_eq!(colour_name([255, 210, 31]), "yellow");
    }
}
