//! Which item of a list is drawn as the chosen one: in a column or a row of text items, the single item
//! whose colours (text or background) stand apart from its siblings', or the one a cursor glyph points
//! at. A key-driven menu shows its cursor this way; the observation marks that item `selected`, so a
//! text model can count the presses to the item it wants and verification can see the cursor move.

use crate::observation::Element;
use gamepilot_core::{FrameView, Rect};

/// The least colour distance (mean absolute difference per channel, both colours summed) that sets an
/// item apart from its siblings.
const APART: f32 = 28.0;
/// The runner-up must stand at most this fraction as far apart: one item differs, not several.
const RUNNER_UP: f32 = 0.6;
/// The least background distance that sets an item of a row apart (a highlighted tab or cell, not a
/// textured panel's shading).
const ROW_APART: f32 = 50.0;
/// An item of a list is a few words; longer lines are prose (a tooltip, a hint), never a list's item.
const MAX_ITEM_WORDS: usize = 4;
/// Glyphs that games draw beside the chosen item.
const CURSORS: [char; 6] = ['>', '»', '▶', '►', '→', '*'];

/// Mark at most one element `selected` in every list of text items in `elements`.
pub fn mark_selected(view: &FrameView<'_>, elements: &mut [Element]) {
    let units = text_units(view, elements);
    for list in lists(&units) {
        if let Some(chosen) = chosen_in(view, &units, &list, elements) {
            for &i in &units[chosen].members {
                elements[i].selected = true;
            }
        }
    }
}

/// The lists [`mark_selected`] finds and how far each item stands apart, one line a list: what a person
/// reads to see why an item was, or was not, marked.
pub fn explain(view: &FrameView<'_>, elements: &[Element]) -> String {
    let units = text_units(view, elements);
    let mut out = String::new();
    for (list, kind) in lists(&units) {
        let label = |u: &Unit| {
            u.members
                .iter()
                .filter_map(|&i| elements[i].label.as_deref())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let inks: Vec<String> = list
            .iter()
            .map(|&u| match ink(view, units[u].bbox) {
                Some(k) => format!(
                    "{:?} text {:?} on {:?}",
                    label(&units[u]),
                    k.text.map(|c| c as u8),
                    k.background.map(|c| c as u8)
                ),
                None => format!("{:?} (no ink)", label(&units[u])),
            })
            .collect();
        out.push_str(&format!("{kind:?}: {}\n", inks.join("; ")));
    }
    out
}

/// One item of a list: the labelled elements of one line of text (OCR may split "New Game" in two).
#[derive(Debug, Clone)]
struct Unit {
    members: Vec<usize>,
    bbox: Rect,
}

fn text_units(view: &FrameView<'_>, elements: &[Element]) -> Vec<Unit> {
    let mut order: Vec<usize> = (0..elements.len())
        .filter(|&i| elements[i].label.as_deref().is_some_and(|l| !l.trim().is_empty()))
        .collect();
    order.sort_by_key(|&i| (elements[i].bbox.center().y, elements[i].bbox.x));
    let mut units: Vec<Unit> = Vec::new();
    for i in order {
        let b = elements[i].bbox;
        let joined = units.iter_mut().find(|u| {
            let h = u.bbox.h.min(b.h) as i32;
            let same_line = (u.bbox.center().y - b.center().y).abs() * 2 <= h;
            let gap = (b.x as i64 - u.bbox.right()).max(u.bbox.x as i64 - b.right());
            // A tooltip's words beside an item are not part of it: one item is drawn on one background.
            let one_background = || match (ink(view, u.bbox), ink(view, b)) {
                // Generous: a textured panel's colour shifts from word to word, a tooltip's does not.
                (Some(x), Some(y)) => colour_distance(x.background, y.background) < 2.0 * APART,
                _ => false,
            };
            same_line
                && similar_height(u.bbox, b, 1.35)
                // Words of one item sit a space apart (a wide one in a large font).
                && gap * 4 <= u.bbox.h.max(b.h) as i64 * 3
                && one_background()
        });
        match joined {
            Some(u) => {
                u.members.push(i);
                u.bbox = u.bbox.union(&b);
            }
            None => units.push(Unit {
                members: vec![i],
                bbox: b,
            }),
        }
    }
    let words = |u: &Unit| -> usize {
        u.members
            .iter()
            .filter_map(|&i| elements[i].label.as_deref())
            .map(|l| l.split_whitespace().count())
            .sum()
    };
    let (items, prose): (Vec<Unit>, Vec<Unit>) = units.into_iter().partition(|u| words(u) <= MAX_ITEM_WORDS);
    // A tooltip's panel over the screen: words on the same background as prose close by are part of
    // that panel, never a list's item.
    let panels: Vec<(Rect, [f32; 3])> = prose
        .iter()
        .filter_map(|p| Some((p.bbox, ink(view, p.bbox)?.background)))
        .collect();
    items
        .into_iter()
        .filter(|u| {
            let Some(own) = ink(view, u.bbox) else { return true };
            !panels.iter().any(|(r, bg)| {
                let near = Rect::new(r.x - r.h as i32, r.y - r.h as i32, r.w + 2 * r.h, 3 * r.h);
                near.intersection(&u.bbox).is_some() && colour_distance(own.background, *bg) < APART
            })
        })
        .collect()
}

/// True when the taller box is at most `ratio` times the shorter one's height.
fn similar_height(a: Rect, b: Rect, ratio: f32) -> bool {
    let (lo, hi) = (a.h.min(b.h).max(1) as f32, a.h.max(b.h) as f32);
    hi <= lo * ratio
}

/// Which way a list runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Column,
    Row,
}

/// Columns (left edges or centres aligned, rows close) and rows (centres on one line, similar heights)
/// of at least three units, each in reading order.
fn lists(units: &[Unit]) -> Vec<(Vec<usize>, ListKind)> {
    let mut out = Vec::new();
    let mut by_y: Vec<usize> = (0..units.len()).collect();
    by_y.sort_by_key(|&i| units[i].bbox.y);
    let mut columns: Vec<Vec<usize>> = Vec::new();
    for &i in &by_y {
        let b = units[i].bbox;
        let fits = columns.iter_mut().find(|c| {
            let Some(&last) = c.last() else { return false };
            let l = units[last].bbox;
            // A highlight bar spans its item's text: one box across the other counts as aligned.
            let spans = |o: Rect, i: Rect| o.x <= i.x && i.right() <= o.right();
            let aligned = (l.x - b.x).abs() <= 6
                || (l.center().x - b.center().x).abs() <= 12
                || spans(l, b)
                || spans(b, l);
            let gap = b.y as i64 - l.bottom();
            aligned
                && similar_height(l, b, 1.35)
                && gap >= -(l.h as i64) / 2
                && gap <= 2 * l.h.max(b.h) as i64
        });
        match fits {
            Some(c) => c.push(i),
            None => columns.push(vec![i]),
        }
    }
    out.extend(
        columns
            .into_iter()
            .filter(|c| c.len() >= 3)
            .map(|c| (c, ListKind::Column)),
    );
    let mut by_x: Vec<usize> = (0..units.len()).collect();
    by_x.sort_by_key(|&i| units[i].bbox.x);
    let mut rows: Vec<Vec<usize>> = Vec::new();
    for &i in &by_x {
        let b = units[i].bbox;
        let fits = rows.iter_mut().find(|r| {
            let Some(&last) = r.last() else { return false };
            let l = units[last].bbox;
            let h = l.h.min(b.h) as i32;
            let similar = (l.h as f32 / b.h.max(1) as f32 - 1.0).abs() <= 0.35;
            let gap = b.x as i64 - l.right();
            (l.center().y - b.center().y).abs() * 3 <= h && similar && gap > 0 && gap <= 8 * h as i64
        });
        match fits {
            Some(r) => r.push(i),
            None => rows.push(vec![i]),
        }
    }
    out.extend(
        rows.into_iter()
            .filter(|r| r.len() >= 3)
            .map(|r| (r, ListKind::Row)),
    );
    out
}

/// The colours an item is drawn with: its background (the most common colour of its box) and its text
/// (the mean of the pixels far from the background).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ink {
    background: [f32; 3],
    text: [f32; 3],
}

pub(crate) fn ink(view: &FrameView<'_>, r: Rect) -> Option<Ink> {
    let r = r.clamped_to(&view.bounds())?;
    let mut bins = vec![0u32; 4096];
    let key = |p: [u8; 3]| (p[0] as usize >> 4) << 8 | (p[1] as usize >> 4) << 4 | p[2] as usize >> 4;
    let pixels = || {
        (r.y..r.y + r.h as i32)
            .flat_map(move |y| (r.x..r.x + r.w as i32).map(move |x| view.rgb(x as u32, y as u32)))
    };
    for p in pixels() {
        bins[key(p)] += 1;
    }
    let mode = (0..bins.len()).max_by_key(|&k| bins[k])?;
    let mean = |keep: &dyn Fn([u8; 3]) -> bool| {
        let (mut sum, mut n) = ([0f32; 3], 0u32);
        for p in pixels().filter(|p| keep(*p)) {
            for c in 0..3 {
                sum[c] += p[c] as f32;
            }
            n += 1;
        }
        (n > 0).then(|| (sum.map(|s| s / n as f32), n))
    };
    let (background, _) = mean(&|p| key(p) == mode)?;
    let far = |p: [u8; 3]| (0..3).map(|c| (p[c] as f32 - background[c]).abs()).sum::<f32>() > 120.0;
    let text = match mean(&far) {
        Some((t, n)) if n as u64 * 50 >= r.area() => t,
        _ => background,
    };
    Some(Ink { background, text })
}

fn colour_distance(x: [f32; 3], y: [f32; 3]) -> f32 {
    (0..3).map(|c| (x[c] - y[c]).abs()).sum::<f32>() / 3.0
}

fn distance(a: &Ink, b: &Ink) -> f32 {
    colour_distance(a.background, b.background) + colour_distance(a.text, b.text)
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The one unit of `list` drawn as chosen, if exactly one is.
fn chosen_in(
    view: &FrameView<'_>,
    units: &[Unit],
    (list, kind): &(Vec<usize>, ListKind),
    elements: &[Element],
) -> Option<usize> {
    let cursor = |u: &Unit| {
        u.members.iter().any(|&i| {
            elements[i]
                .label
                .as_deref()
                .and_then(|l| l.trim_start().chars().next())
                .is_some_and(|c| CURSORS.contains(&c))
        })
    };
    let pointed: Vec<usize> = list.iter().copied().filter(|&u| cursor(&units[u])).collect();
    if pointed.len() == 1 {
        return pointed.first().copied();
    }
    let inks: Vec<Ink> = list
        .iter()
        .map(|&u| ink(view, units[u].bbox))
        .collect::<Option<Vec<_>>>()?;
    // How far each item is drawn from the list's typical item (the median colour, channel by channel):
    // one item apart stands out, two or more apart (an item fading out as the next fades in) do not.
    let typical = |pick: fn(&Ink) -> [f32; 3]| -> [f32; 3] {
        std::array::from_fn(|c| median(inks.iter().map(|k| pick(k)[c]).collect()))
    };
    let typical = Ink {
        background: typical(|k| k.background),
        text: typical(|k| k.text),
    };
    let apart: Vec<f32> = inks
        .iter()
        .map(|k| match kind {
            // A row's items (tabs, a menu bar) are told apart by a highlighted background alone: text
            // colours along a row vary with what each item is.
            ListKind::Row => colour_distance(k.background, typical.background) * APART / ROW_APART,
            ListKind::Column => distance(k, &typical),
        })
        .collect();
    // A heading drawn in its own colour tops many a menu. The first item of a column is the heading,
    // not the choice, when another item stands apart too, or when it is drawn with less contrast than
    // the typical item (a choice is emphasised, a heading merely coloured).
    let contrast = |k: &Ink| colour_distance(k.text, k.background);
    let mut candidates: Vec<usize> = (0..apart.len()).collect();
    // A title stands further from the list below it than the list's items from one another.
    let gaps: Vec<f32> = list
        .windows(2)
        .map(|p| (units[p[1]].bbox.y as i64 - units[p[0]].bbox.bottom()) as f32)
        .collect();
    let set_off = gaps.len() >= 2 && gaps[0] > 1.5 * median(gaps[1..].to_vec()).max(0.0) + 2.0;
    let heading = *kind == ListKind::Column
        && apart[0] >= APART
        && (apart.iter().skip(1).any(|a| *a >= APART)
            || contrast(&inks[0]) < 0.8 * contrast(&typical)
            || set_off);
    if heading {
        candidates.retain(|&i| i != 0);
    }
    // An item drawn fainter on the same background is disabled (a greyed-out menu item), not chosen;
    // it still stands apart, so beside it another item must stand out further.
    let dimmed = |i: usize| {
        colour_distance(inks[i].background, typical.background) < APART / 2.0
            && contrast(&inks[i]) < 0.8 * contrast(&typical)
    };
    let top = candidates
        .iter()
        .copied()
        .filter(|&i| !dimmed(i))
        .max_by(|&a, &b| apart[a].total_cmp(&apart[b]))
        .filter(|&i| apart[i] >= APART)?;
    let runner_up = candidates
        .iter()
        .filter(|&&i| i != top)
        .map(|&i| apart[i])
        .fold(0.0, f32::max);
    (runner_up <= apart[top] * RUNNER_UP).then(|| list[top])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposals::ElementSource;
    use gamepilot_core::{ElementId, PixelFormat};

    fn label(id: u32, text: &str, bbox: Rect) -> Element {
        Element {
            id: ElementId(id),
            bbox,
            confidence: 0.9,
            source: ElementSource::Text,
            label: Some(text.into()),
            looks: None,
            layer: None,
            selected: false,
        }
    }

    /// A dark panel with light text bars; the item at `chosen` drawn in white on blue.
    fn menu(chosen: Option<usize>) -> (Vec<u8>, Vec<Element>) {
        let (w, h) = (200u32, 200u32);
        let mut buf = vec![0u8; (w * h * 4) as usize];
        let mut put = |x: u32, y: u32, c: [u8; 3]| {
            let i = ((y * w + x) * 4) as usize;
            buf[i..i + 3].copy_from_slice(&c);
            buf[i + 3] = 255;
        };
        for y in 0..h {
            for x in 0..w {
                put(x, y, [40, 40, 40]);
            }
        }
        let mut elements = Vec::new();
        for k in 0..5usize {
            let top = 20 + 30 * k as u32;
            let (bg, fg) = if chosen == Some(k) {
                ([30, 60, 200], [255, 255, 255])
            } else {
                ([40, 40, 40], [200, 200, 200])
            };
            for y in top..top + 20 {
                for x in 20..120 {
                    let stroke = (6..14).contains(&(y - top)) && (x / 4) % 2 == 0;
                    put(x, y, if stroke { fg } else { bg });
                }
            }
            elements.push(label(
                k as u32 + 1,
                &format!("Item {k}"),
                Rect::new(20, top as i32, 100, 20),
            ));
        }
        (buf, elements)
    }

    #[test]
    fn the_one_item_drawn_apart_is_selected_and_none_when_all_look_alike() {
        // FR-PERC-006: the observation marks a key-driven menu's cursor
        for chosen in [Some(0), Some(2), Some(4), None] {
            let (buf, mut elements) = menu(chosen);
            let view = FrameView::new(200, 200, 800, PixelFormat::Rgba, &buf).unwrap();
            mark_selected(&view, &mut elements);
            let marked: Vec<usize> = (0..5).filter(|&k| elements[k].selected).collect();
            assert_eq!(
                marked,
                chosen.into_iter().collect::<Vec<_>>(),
                "chosen {chosen:?}"
            );
        }
    }

    #[test]
    fn a_cursor_glyph_marks_its_item() {
        let (buf, mut elements) = menu(None);
        elements[3].label = Some("> Item 3".into());
        let view = FrameView::new(200, 200, 800, PixelFormat::Rgba, &buf).unwrap();
        mark_selected(&view, &mut elements);
        assert!(elements[3].selected);
        assert_eq!(elements.iter().filter(|e| e.selected).count(), 1);
    }

    #[test]
    fn words_of_one_line_are_one_item() {
        let buf = vec![40u8; 400 * 400 * 4];
        let view = FrameView::new(400, 400, 1600, PixelFormat::Rgba, &buf).unwrap();
        let units = text_units(
            &view,
            &[
                label(1, "New", Rect::new(118, 256, 32, 24)),
                label(2, "Game", Rect::new(158, 256, 42, 24)),
                label(3, "Controls", Rect::new(125, 292, 67, 21)),
            ],
        );
        assert_eq!(units.len(), 2);
        assert_eq!(units[0].members, vec![0, 1]);
    }
}

#[cfg(test)]
mod corpus {
    use super::*;
    use crate::proposals::ElementSource;
    use gamepilot_core::{ElementId, PixelFormat};

    fn frame(name: &str) -> (u32, u32, Vec<u8>) {
        let path = format!("{}/../../../corpus/frames/{name}", env!("CARGO_MANIFEST_DIR"));
        let img = image::open(&path).unwrap().to_rgba8();
        (img.width(), img.height(), img.into_raw())
    }

    fn items(boxes: &[(&str, [i32; 4])]) -> Vec<Element> {
        boxes
            .iter()
            .enumerate()
            .map(|(k, (l, b))| Element {
                id: ElementId(k as u32 + 1),
                bbox: Rect::new(b[0], b[1], b[2] as u32, b[3] as u32),
                confidence: 0.9,
                source: ElementSource::Text,
                label: Some((*l).into()),
                looks: None,
                layer: None,
                selected: false,
            })
            .collect()
    }

    fn marked(name: &str, boxes: &[(&str, [i32; 4])]) -> Vec<String> {
        let (w, h, buf) = frame(name);
        let view = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let mut elements = items(boxes);
        mark_selected(&view, &mut elements);
        elements
            .iter()
            .filter(|e| e.selected)
            .filter_map(|e| e.label.clone())
            .collect()
    }

    /// LTris' key-driven main menu (SDL): the chosen item is drawn larger and white; before the first
    /// key none is chosen (its yellow heading is not a choice).
    #[test]
    fn ltris_menu_cursor() {
        // FR-PERC-006
        let menu = [
            ("Menu", [139, 223, 40, 23]),
            ("New", [118, 256, 32, 24]),
            ("Game", [158, 256, 42, 24]),
            ("Controls", [125, 292, 67, 21]),
            ("Graphics", [125, 309, 68, 22]),
            ("Audio", [137, 325, 44, 22]),
            ("Advanced Options", [93, 360, 131, 22]),
            ("Quit", [144, 394, 33, 21]),
        ];
        assert_eq!(marked("ltris-menu-0.png", &menu), Vec::<String>::new());
        assert_eq!(marked("ltris-menu-new-game.png", &menu), ["New", "Game"]);
        assert_eq!(marked("ltris-menu-controls.png", &menu), ["Controls"]);
    }

    /// LTris a moment after the second Down: its tooltip for the chosen item covers the end of the line
    /// above, whose words OCR joins with the tooltip's; the tooltip is not an item, Controls is chosen.
    #[test]
    fn ltris_menu_cursor_beside_a_tooltip() {
        // FR-PERC-006
        let menu = [
            ("Menu", [139, 223, 40, 23]),
            ("Controls", [120, 290, 81, 23]),
            ("Graphics", [125, 309, 68, 22]),
            ("Audio", [137, 325, 44, 22]),
            ("Advanced Options", [93, 360, 131, 22]),
            ("Quit", [144, 394, 33, 21]),
            ("Set player controls and horizontal", [197, 241, 210, 20]),
            ("New Game", [127, 258, 65, 22]),
            ("speed.", [197, 253, 42, 19]),
        ];
        assert_eq!(marked("ltris-menu-controls-tooltip.png", &menu), ["Controls"]);
    }

    /// sgt-puzzles' Net (GTK 3): its Type menu open, the pointer over "9x9", which GTK highlights; the
    /// boxes are those `gamepilot observe` proposes (the highlight bar carries the label).
    #[test]
    fn gtk_popup_menu_highlight() {
        // FR-PERC-006
        let popup = [
            ("5x5", [84, 28, 23, 20]),
            ("7x7", [82, 53, 26, 20]),
            ("9x9", [55, 75, 162, 25]),
            ("11x11", [84, 103, 41, 21]),
            ("13x11", [82, 127, 44, 22]),
            ("5x5 wrapping", [82, 151, 92, 25]),
            ("7x7 wrapping", [81, 176, 93, 26]),
            ("9x9 wrapping", [82, 202, 91, 23]),
            ("11x11 wrapping", [82, 226, 107, 25]),
            ("13x11 wrapping", [83, 252, 107, 23]),
            ("Custom...", [82, 278, 67, 21]),
        ];
        assert_eq!(marked("net-type-popup-hover.png", &popup), ["9x9"]);
    }
}
