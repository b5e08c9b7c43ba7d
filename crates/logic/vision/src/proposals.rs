//! Element proposals (FR-PERC-005): candidates with a box, a confidence and the source that proposed
//! them — OCR text, visual segmentation (filled and bordered rectangles, grid cells, connected
//! components) and atlas templates — merged, and clamped inside the frame (INV-PERC-001).

use crate::ocr::{union, TextLine, TextWord};
use gamepilot_core::{FrameView, PixelFormat, Rect};
use gamepilot_sensor::Atlas;
use serde::{Deserialize, Serialize};

/// Who proposed an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementSource {
    /// An OCR text line or word group (buttons, menu entries).
    Text,
    /// A filled or bordered rectangle from colour segmentation.
    Rect,
    /// One of several equal rectangles in rows and columns (board cells).
    Grid,
    /// A compact connected component (icons).
    Component,
    /// A template from the session's atlas (elements clicked and confirmed).
    Template,
    /// The platform accessibility tree (FR-PERC-010).
    Accessibility,
}

impl ElementSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ElementSource::Text => "text",
            ElementSource::Rect => "rect",
            ElementSource::Grid => "grid",
            ElementSource::Component => "component",
            ElementSource::Template => "template",
            ElementSource::Accessibility => "accessibility",
        }
    }
}

/// One proposed element before it has an id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub bbox: Rect,
    pub confidence: f32,
    pub source: ElementSource,
    pub label: Option<String>,
}

/// Knobs of the proposer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProposalParams {
    /// Working width of the segmentation (frames wider than this are sampled down).
    pub work_width: u32,
    /// Two neighbouring pixels join one region when no channel differs by more than this.
    pub colour_tolerance: u8,
    /// Smallest side of a proposed box, in frame pixels.
    pub min_side: u32,
    /// Largest box as a fraction of the frame area.
    pub max_area_fraction: f32,
    /// Text lines below this confidence propose nothing.
    pub min_text_confidence: f32,
    /// Most candidates returned (highest confidence first).
    pub max_candidates: usize,
    /// An atlas template proposes an element where it correlates at least this well.
    pub template_threshold: f32,
}

impl Default for ProposalParams {
    fn default() -> Self {
        ProposalParams {
            work_width: 640,
            colour_tolerance: 10,
            min_side: 10,
            max_area_fraction: 0.25,
            min_text_confidence: 0.5,
            max_candidates: 99,
            template_threshold: 0.9,
        }
    }
}

/// Propose elements on `view` from its OCR `texts`, its segmentation and the `atlas`.
pub fn propose(
    view: &FrameView<'_>,
    texts: &[TextLine],
    atlas: &Atlas,
    p: &ProposalParams,
) -> Vec<Candidate> {
    let bounds = view.bounds();
    if bounds.is_empty() {
        return Vec::new();
    }
    let mut cands = segment(view, p);
    // Components that are really glyphs of recognised text go.
    cands.retain(|c| {
        c.source != ElementSource::Component
            || !texts.iter().any(|t| overlap_fraction(&c.bbox, &t.bbox) > 0.3)
    });
    // Shapes inside a recognised text line are its glyphs (a letter's counter, a digit), not targets.
    cands.retain(|c| {
        c.source == ElementSource::Component && texts.is_empty()
            || !texts
                .iter()
                .any(|t| overlap_fraction(&c.bbox, &t.bbox) > 0.8 && c.bbox.area() * 2 < t.bbox.area())
    });
    // A component inside a larger shape is that shape's content (a cell's digit, a button's icon) —
    // except off the centre of a grid cell: a puzzle centres a cell's content, while a sprite on a tiled
    // floor lies anywhere in its tile (the practice game's coins were dropped as the contents of
    // the floor's tiles, so the agent never saw a coin to walk to).
    let shapes: Vec<(Rect, bool)> = cands
        .iter()
        .filter(|c| c.source != ElementSource::Component)
        .map(|c| (c.bbox, c.source == ElementSource::Grid))
        .collect();
    cands.retain(|c| {
        c.source != ElementSource::Component
            || !shapes.iter().any(|(s, grid)| {
                s.area() > c.bbox.area()
                    && overlap_fraction(&c.bbox, s) > 0.8
                    && !(*grid && off_centre(&c.bbox, s))
            })
    });
    // Panels holding three or more shapes are containers; drop them before text labels a shape.
    drop_containers(&mut cands);
    let text_cands = text_candidates(texts, p);
    cands = attach_labels(cands, text_cands);
    for (t, bbox, score) in atlas.locate_all(view, p.template_threshold) {
        cands.push(Candidate {
            bbox,
            confidence: score,
            source: ElementSource::Template,
            label: Some(t),
        });
    }
    drop_containers(&mut cands);
    let mut out = non_max_suppression(cands, 0.6);
    // INV-PERC-001: every box wholly inside the captured region.
    out = out
        .into_iter()
        .filter_map(|mut c| {
            c.bbox = c.bbox.clamped_to(&bounds)?;
            Some(c)
        })
        .collect();
    // Over the cap, grid cells go first: a tiled floor's cells would otherwise crowd out the sprites on
    // it (the practice play field's 91 floor cells outranked its coins); a puzzle's board fits.
    out.sort_by(|a, b| {
        (a.source == ElementSource::Grid)
            .cmp(&(b.source == ElementSource::Grid))
            .then(b.confidence.total_cmp(&a.confidence))
    });
    out.truncate(p.max_candidates);
    out.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    out
}

/// Merge elements from the platform accessibility tree (FR-PERC-010) into the visual `proposals`: the tree's
/// geometry is exact, so a visual candidate that is the same element (IoU ≥ 0.5, lying mostly inside it,
/// or holding it with little margin) gives way to it, passing on its label when the tree has none. Boxes
/// are clamped into `bounds` and dropped when nothing is left (INV-PERC-001). With no accessibility
/// elements the proposals come back unchanged, so ids stay stable either way (FR-PERC-006).
pub fn merge_accessibility(
    proposals: Vec<Candidate>,
    accessibility: &[Candidate],
    bounds: Rect,
) -> Vec<Candidate> {
    if accessibility.is_empty() {
        return proposals;
    }
    let mut tree: Vec<Candidate> = accessibility
        .iter()
        .filter_map(|a| {
            let bbox = a.bbox.clamped_to(&bounds)?;
            Some(Candidate {
                bbox,
                confidence: a.confidence.max(0.9),
                source: ElementSource::Accessibility,
                label: a.label.clone().filter(|l| !l.trim().is_empty()),
            })
        })
        .collect();
    let mut out = Vec::with_capacity(proposals.len() + tree.len());
    for v in proposals {
        let same = tree.iter_mut().find(|a| same_element(&v.bbox, &a.bbox));
        match same {
            Some(a) => {
                if a.label.is_none() {
                    a.label = v.label;
                }
            }
            None => out.push(v),
        }
    }
    // Two tree nodes with one box (a menu and its label child) are one target.
    let mut kept: Vec<Candidate> = Vec::with_capacity(tree.len());
    for a in tree.drain(..) {
        if !kept.iter().any(|k| k.bbox == a.bbox) {
            kept.push(a);
        }
    }
    out.extend(kept);
    out.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    out
}

/// Whether a visual box `v` and an accessibility box `a` are one element.
fn same_element(v: &Rect, a: &Rect) -> bool {
    v.iou(a) >= 0.5
        || overlap_fraction(v, a) >= 0.6
        || (overlap_fraction(a, v) >= 0.8 && v.area() <= a.area().saturating_mul(4))
}

/// Fraction of `a`'s area that lies inside `b`.
/// Whether `inner`'s centre lies more than a fifth of `outer`'s side from `outer`'s centre, either way.
fn off_centre(inner: &Rect, outer: &Rect) -> bool {
    let (i, o) = (inner.center(), outer.center());
    (i.x - o.x).abs() * 5 > outer.w as i32 || (i.y - o.y).abs() * 5 > outer.h as i32
}

pub fn overlap_fraction(a: &Rect, b: &Rect) -> f32 {
    if a.area() == 0 {
        return 0.0;
    }
    a.intersection(b).map(|i| i.area()).unwrap_or(0) as f32 / a.area() as f32
}

/// Text lines split into word groups at gaps over half the line height (menu bars: "Game  Type  Help" are
/// three targets).
fn text_candidates(texts: &[TextLine], p: &ProposalParams) -> Vec<Candidate> {
    let mut out = Vec::new();
    for line in texts.iter().filter(|l| l.confidence >= p.min_text_confidence) {
        // Half the line's height: a word space is about a quarter of it, the gap between menu-bar items
        // ("Game  Type  Help", one detected line) about half; measured on the corpus, element recall 0.868
        // at the full height and 0.937 at half.
        let gap_limit = ((line.bbox.h / 2) as i64).max(4);
        let mut group: Vec<TextWord> = Vec::new();
        let flush = |g: &mut Vec<TextWord>, out: &mut Vec<Candidate>| {
            if let Some(l) = TextLine::from_words(std::mem::take(g)) {
                out.push(Candidate {
                    bbox: pad(&l.bbox, 2),
                    confidence: 0.4 + 0.5 * l.confidence,
                    source: ElementSource::Text,
                    label: Some(l.text),
                });
            }
        };
        for w in &line.words {
            if let Some(last) = group.last() {
                if w.bbox.x as i64 - last.bbox.right() > gap_limit {
                    flush(&mut group, &mut out);
                }
            }
            group.push(w.clone());
        }
        flush(&mut group, &mut out);
    }
    out
}

fn pad(r: &Rect, d: i32) -> Rect {
    Rect::new(r.x - d, r.y - d, r.w + 2 * d as u32, r.h + 2 * d as u32)
}

/// A text candidate that sits inside a small rectangle labels that rectangle (a button) instead of
/// standing alone; other text candidates stay. A rectangle holding lines of text one above another is a
/// panel or an open menu, not a button, and one holding several word groups side by side (split at wide
/// gaps: a menu bar's "Game  Type  Help" in a small window) is a bar of items: their texts stay elements
/// of their own.
fn attach_labels(mut shapes: Vec<Candidate>, texts: Vec<Candidate>) -> Vec<Candidate> {
    let mut hosted: Vec<Vec<Candidate>> = vec![Vec::new(); shapes.len()];
    let mut rest = Vec::new();
    for t in texts {
        let host = shapes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.source != ElementSource::Component)
            .filter(|(_, s)| overlap_fraction(&t.bbox, &s.bbox) >= 0.8 && s.bbox.area() <= t.bbox.area() * 24)
            .min_by_key(|(_, s)| s.bbox.area())
            .map(|(i, _)| i);
        match host {
            Some(i) => hosted[i].push(t),
            None => rest.push(t),
        }
    }
    for (s, texts) in shapes.iter_mut().zip(hosted) {
        let one_line = texts.windows(2).all(|p| {
            let (a, b) = (p[0].bbox, p[1].bbox);
            (a.center().y - b.center().y).abs() * 2 <= a.h.min(b.h) as i32
        });
        if !one_line || texts.len() > 1 {
            rest.extend(texts);
            continue;
        }
        for t in texts {
            let label = t.label.unwrap_or_default();
            s.label = Some(match s.label.take() {
                Some(l) if !l.is_empty() => format!("{l} {label}"),
                _ => label,
            });
            s.confidence = (s.confidence.max(t.confidence) + 0.1).min(1.0);
        }
    }
    shapes.extend(rest);
    shapes
}

/// Panels that merely contain three or more other candidates are containers, not targets.
fn drop_containers(c: &mut Vec<Candidate>) {
    let boxes: Vec<Rect> = c.iter().map(|c| c.bbox).collect();
    c.retain(|me| {
        if matches!(
            me.source,
            ElementSource::Text | ElementSource::Template | ElementSource::Accessibility
        ) {
            return true;
        }
        let inside = boxes
            .iter()
            .filter(|b| **b != me.bbox && me.bbox.contains_rect(b))
            .count();
        inside < 3
    });
}

/// Greedy suppression: keep the most confident of overlapping candidates (IoU ≥ `iou`).
pub fn non_max_suppression(mut c: Vec<Candidate>, iou: f32) -> Vec<Candidate> {
    c.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let mut kept: Vec<Candidate> = Vec::with_capacity(c.len());
    for cand in c {
        if let Some(k) = kept.iter_mut().find(|k| k.bbox.iou(&cand.bbox) >= iou) {
            if k.label.is_none() && cand.label.is_some() {
                k.label = cand.label;
            }
            continue;
        }
        kept.push(cand);
    }
    kept
}

struct Region {
    x0: u32,
    y0: u32,
    x1: u32,
    y1: u32,
    count: u32,
    edges: [u32; 4],
}

fn find(parent: &mut [u32], mut i: u32) -> u32 {
    while parent[i as usize] != i {
        let p = parent[parent[i as usize] as usize];
        parent[i as usize] = p;
        i = p;
    }
    i
}

/// Colour segmentation on a sampled working image: union-find over 4-neighbours with a colour tolerance,
/// then shape tests per region.
fn segment(view: &FrameView<'_>, p: &ProposalParams) -> Vec<Candidate> {
    let f = view.width.div_ceil(p.work_width.max(1)).max(1);
    let (w, h) = (view.width / f, view.height / f);
    if w < 2 || h < 2 {
        return Vec::new();
    }
    let n = (w * h) as usize;
    let mut px = vec![[0u8; 3]; n];
    let bgrx = view.format == PixelFormat::Bgrx;
    for y in 0..h {
        let row = view.row(y * f + f / 2);
        for x in 0..w {
            let i = ((x * f + f / 2) * 4) as usize;
            if let Some(q) = row.get(i..i + 3) {
                px[(y * w + x) as usize] = if bgrx {
                    [q[2], q[1], q[0]]
                } else {
                    [q[0], q[1], q[2]]
                };
            }
        }
    }
    let tol = p.colour_tolerance;
    let close = |a: [u8; 3], b: [u8; 3]| {
        a[0].abs_diff(b[0]) <= tol && a[1].abs_diff(b[1]) <= tol && a[2].abs_diff(b[2]) <= tol
    };
    let mut parent: Vec<u32> = (0..n as u32).collect();
    for y in 0..h {
        for x in 0..w {
            let i = (y * w + x) as usize;
            if x + 1 < w && close(px[i], px[i + 1]) {
                let (a, b) = (find(&mut parent, i as u32), find(&mut parent, i as u32 + 1));
                if a != b {
                    parent[a.max(b) as usize] = a.min(b);
                }
            }
            if y + 1 < h && close(px[i], px[i + w as usize]) {
                let (a, b) = (
                    find(&mut parent, i as u32),
                    find(&mut parent, (i + w as usize) as u32),
                );
                if a != b {
                    parent[a.max(b) as usize] = a.min(b);
                }
            }
        }
    }
    let mut index = vec![u32::MAX; n];
    let mut regions: Vec<Region> = Vec::new();
    let mut label = vec![0u32; n];
    for y in 0..h {
        for x in 0..w {
            let i = (y * w + x) as usize;
            let r = find(&mut parent, i as u32) as usize;
            if index[r] == u32::MAX {
                index[r] = regions.len() as u32;
                regions.push(Region {
                    x0: x,
                    y0: y,
                    x1: x,
                    y1: y,
                    count: 0,
                    edges: [0; 4],
                });
            }
            let k = index[r];
            label[i] = k;
            let g = &mut regions[k as usize];
            g.x0 = g.x0.min(x);
            g.x1 = g.x1.max(x);
            g.y1 = g.y1.max(y);
            g.count += 1;
        }
    }
    // Edge coverage is measured one sample inside the box (when it is large enough), so that
    // anti-aliased rounded corners do not hide a rectangle.
    for y in 0..h {
        for x in 0..w {
            let g = &mut regions[label[(y * w + x) as usize] as usize];
            let d = u32::from(g.x1 - g.x0 >= 8 && g.y1 - g.y0 >= 8);
            if y == g.y0 + d {
                g.edges[0] += 1;
            }
            if y + d == g.y1 {
                g.edges[1] += 1;
            }
            if x == g.x0 + d {
                g.edges[2] += 1;
            }
            if x + d == g.x1 {
                g.edges[3] += 1;
            }
        }
    }
    let frame_area = (w * h) as f32;
    let min_side = p.min_side.div_ceil(f).max(2);
    let mut out = Vec::new();
    for g in &regions {
        let (bw, bh) = (g.x1 - g.x0 + 1, g.y1 - g.y0 + 1);
        if bw < min_side
            || bh < min_side
            || (bw * bh) as f32 > p.max_area_fraction * frame_area
            || g.count < 12
        {
            continue;
        }
        let cov = [
            g.edges[0] as f32 / bw as f32,
            g.edges[1] as f32 / bw as f32,
            g.edges[2] as f32 / bh as f32,
            g.edges[3] as f32 / bh as f32,
        ];
        let edge = cov.iter().cloned().fold(1.0f32, f32::min);
        let fill = g.count as f32 / (bw * bh) as f32;
        let bbox = Rect::new((g.x0 * f) as i32, (g.y0 * f) as i32, bw * f, bh * f);
        let aspect = bw.max(bh) as f32 / bw.min(bh) as f32;
        if edge >= 0.8 && fill >= 0.45 && aspect <= 12.0 {
            out.push(Candidate {
                bbox,
                confidence: 0.45 + 0.3 * edge * fill.min(1.0),
                source: ElementSource::Rect,
                label: None,
            });
        } else if edge >= 0.8 && aspect <= 12.0 && bw >= 2 * min_side && bh >= min_side {
            // An outline: the box it draws is the candidate.
            out.push(Candidate {
                bbox,
                confidence: 0.45,
                source: ElementSource::Rect,
                label: None,
            });
        } else if fill >= 0.25 && aspect <= 4.0 && bw * f <= 160 && bh * f <= 160 {
            out.push(Candidate {
                bbox,
                confidence: 0.3,
                source: ElementSource::Component,
                label: None,
            });
        }
    }
    mark_grids(&mut out);
    merge_components(out, 2 * f as i32, 96)
}

/// Fragments of one object (anti-aliased sprites split into several colour regions) join into one
/// component when their boxes touch and the union stays icon-sized.
fn merge_components(c: Vec<Candidate>, gap: i32, max_side: u32) -> Vec<Candidate> {
    let (mut comps, mut out): (Vec<Candidate>, Vec<Candidate>) =
        c.into_iter().partition(|c| c.source == ElementSource::Component);
    let mut changed = true;
    while changed {
        changed = false;
        'outer: for i in 0..comps.len() {
            for j in i + 1..comps.len() {
                let grown = Rect::new(
                    comps[i].bbox.x - gap,
                    comps[i].bbox.y - gap,
                    comps[i].bbox.w + 2 * gap as u32,
                    comps[i].bbox.h + 2 * gap as u32,
                );
                if grown.intersection(&comps[j].bbox).is_none() {
                    continue;
                }
                let u = union(&comps[i].bbox, &comps[j].bbox);
                if u.w > max_side || u.h > max_side {
                    continue;
                }
                comps[i].bbox = u;
                comps[i].confidence = comps[i].confidence.max(comps[j].confidence);
                comps.swap_remove(j);
                changed = true;
                break 'outer;
            }
        }
    }
    out.extend(comps);
    out
}

/// Six or more rectangles of one size become grid cells.
fn mark_grids(c: &mut [Candidate]) {
    let key = |r: &Rect| ((r.w + 4) / 8, (r.h + 4) / 8);
    let mut counts: std::collections::HashMap<(u32, u32), usize> = std::collections::HashMap::new();
    for k in c
        .iter()
        .filter(|c| c.source == ElementSource::Rect)
        .map(|c| key(&c.bbox))
    {
        *counts.entry(k).or_default() += 1;
    }
    for cand in c.iter_mut().filter(|c| c.source == ElementSource::Rect) {
        if counts.get(&key(&cand.bbox)).copied().unwrap_or(0) >= 6 {
            cand.source = ElementSource::Grid;
            cand.confidence = cand.confidence.max(0.7);
        }
    }
}

/// The union of several boxes (None when empty).
pub fn union_all(r: &[Rect]) -> Option<Rect> {
    let first = *r.first()?;
    Some(r[1..].iter().fold(first, |a, b| union(&a, b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    fn canvas(w: u32, h: u32, bg: [u8; 3]) -> Vec<u8> {
        let mut v = Vec::with_capacity((w * h * 4) as usize);
        for _ in 0..w * h {
            v.extend_from_slice(&[bg[0], bg[1], bg[2], 255]);
        }
        v
    }

    fn fill(buf: &mut [u8], w: u32, r: Rect, c: [u8; 3]) {
        for y in r.y..r.y + r.h as i32 {
            for x in r.x..r.x + r.w as i32 {
                let i = ((y as u32 * w + x as u32) * 4) as usize;
                buf[i..i + 3].copy_from_slice(&c);
            }
        }
    }

    #[test]
    fn buttons_are_proposed_with_their_labels_and_inside_the_frame() {
        // FR-PERC-005, INV-PERC-001
        let (w, h) = (320u32, 200u32);
        let mut buf = canvas(w, h, [20, 20, 40]);
        let button = Rect::new(100, 50, 120, 30);
        fill(&mut buf, w, button, [60, 140, 60]);
        fill(&mut buf, w, Rect::new(130, 60, 60, 10), [250, 250, 250]); // "text"
        let edge_box = Rect::new(300, 180, 20, 20); // touches the frame edge
        fill(&mut buf, w, edge_box, [200, 30, 30]);
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let text = TextLine::from_words(vec![TextWord {
            text: "Play".into(),
            bbox: Rect::new(130, 60, 60, 10),
            confidence: 0.9,
        }])
        .unwrap();
        let c = propose(&v, &[text], &Atlas::new(), &ProposalParams::default());
        let b = c
            .iter()
            .find(|c| c.bbox.iou(&button) > 0.8)
            .expect("button proposed");
        assert_eq!(b.label.as_deref(), Some("Play"));
        assert_eq!(b.source, ElementSource::Rect);
        assert!(c.iter().any(|c| c.bbox.iou(&edge_box) > 0.8));
        for cand in &c {
            assert!(v.bounds().contains_rect(&cand.bbox), "{cand:?} outside the frame");
        }
    }

    #[test]
    fn equal_cells_become_grid_candidates() {
        // FR-PERC-005
        let (w, h) = (300u32, 300u32);
        let mut buf = canvas(w, h, [0, 0, 0]);
        for gy in 0..4 {
            for gx in 0..4 {
                fill(
                    &mut buf,
                    w,
                    Rect::new(20 + gx * 60, 20 + gy * 60, 50, 50),
                    [200, 200, 200],
                );
            }
        }
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let c = propose(&v, &[], &Atlas::new(), &ProposalParams::default());
        assert_eq!(
            c.iter().filter(|c| c.source == ElementSource::Grid).count(),
            16,
            "{c:?}"
        );
    }

    #[test]
    fn menu_words_far_apart_are_separate_targets() {
        let word = |t: &str, x| TextWord {
            text: t.into(),
            bbox: Rect::new(x, 4, 30, 12),
            confidence: 0.9,
        };
        let line = TextLine::from_words(vec![word("Game", 8), word("Type", 70), word("Help", 130)]).unwrap();
        let c = text_candidates(&[line], &ProposalParams::default());
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].label.as_deref(), Some("Type"));
        // FR-PERC-005: a GTK menu bar read as one 22 px line ("Game Type Help", items 12–13 px apart) is three
        // targets; a sentence's word spaces (4 px) keep it one.
        let at = |t: &str, x, w| TextWord {
            text: t.into(),
            bbox: Rect::new(x, 3, w, 22),
            confidence: 0.9,
        };
        let menu =
            TextLine::from_words(vec![at("Game", 5, 40), at("Type", 58, 32), at("Help", 102, 36)]).unwrap();
        assert_eq!(text_candidates(&[menu], &ProposalParams::default()).len(), 3);
        let sentence =
            TextLine::from_words(vec![at("click", 5, 40), at("Play", 49, 36), at("then", 89, 36)]).unwrap();
        let c = text_candidates(&[sentence], &ProposalParams::default());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].label.as_deref(), Some("click Play then"));
    }

    #[test]
    fn a_bar_holding_several_word_groups_leaves_them_targets_of_their_own() {
        // FR-PERC-005: sgt-mines at 9x9 is 240 px wide; its menu bar, one detected rectangle, held
        // "Game", "Type" and "Help" as one label, and "Type" could not be clicked by its mark
        let bar = cand(Rect::new(0, 0, 240, 24), ElementSource::Rect, None);
        let words = vec![
            cand(Rect::new(3, 3, 44, 18), ElementSource::Text, Some("Game")),
            cand(Rect::new(56, 3, 36, 18), ElementSource::Text, Some("Type")),
            cand(Rect::new(100, 3, 40, 18), ElementSource::Text, Some("Help")),
        ];
        let out = attach_labels(vec![bar.clone()], words);
        let labels: Vec<_> = out.iter().filter_map(|c| c.label.as_deref()).collect();
        assert_eq!(labels, ["Game", "Type", "Help"], "{out:?}");
        // A button with one label keeps it.
        let button = cand(Rect::new(10, 10, 80, 30), ElementSource::Rect, None);
        let out = attach_labels(
            vec![button],
            vec![cand(
                Rect::new(20, 16, 50, 18),
                ElementSource::Text,
                Some("New game"),
            )],
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].label.as_deref(), Some("New game"));
    }

    fn cand(r: Rect, source: ElementSource, label: Option<&str>) -> Candidate {
        Candidate {
            bbox: r,
            confidence: 0.6,
            source,
            label: label.map(str::to_string),
        }
    }

    #[test]
    fn accessibility_geometry_replaces_the_visual_box_of_the_same_element() {
        // FR-PERC-010, INV-PERC-001
        let bounds = Rect::new(0, 0, 200, 100);
        let visual = vec![
            // OCR saw "Game" a little off; the tree knows the menu's exact box.
            cand(Rect::new(6, 4, 30, 14), ElementSource::Text, Some("Game")),
            // A board cell the tree does not know stays.
            cand(Rect::new(50, 40, 20, 20), ElementSource::Grid, None),
        ];
        let tree = vec![
            cand(
                Rect::new(0, 0, 55, 25),
                ElementSource::Accessibility,
                Some("Game"),
            ),
            // Unnamed in the tree, named by OCR: keeps the OCR label.
            cand(Rect::new(55, 0, 46, 25), ElementSource::Accessibility, None),
            // Partly outside the frame: clamped.
            cand(
                Rect::new(180, 90, 40, 40),
                ElementSource::Accessibility,
                Some("Edge"),
            ),
            // Wholly outside: dropped.
            cand(
                Rect::new(300, 0, 10, 10),
                ElementSource::Accessibility,
                Some("Gone"),
            ),
        ];
        let mut visual2 = visual.clone();
        visual2.push(cand(Rect::new(60, 5, 30, 14), ElementSource::Text, Some("Type")));
        let m = merge_accessibility(visual2, &tree, bounds);
        let game: Vec<&Candidate> = m.iter().filter(|c| c.label.as_deref() == Some("Game")).collect();
        assert_eq!(game.len(), 1, "{m:?}");
        assert_eq!(game[0].bbox, Rect::new(0, 0, 55, 25));
        assert_eq!(game[0].source, ElementSource::Accessibility);
        let ty = m.iter().find(|c| c.label.as_deref() == Some("Type")).unwrap();
        assert_eq!(ty.bbox, Rect::new(55, 0, 46, 25));
        assert_eq!(ty.source, ElementSource::Accessibility);
        assert!(m.iter().any(|c| c.source == ElementSource::Grid));
        let edge = m.iter().find(|c| c.label.as_deref() == Some("Edge")).unwrap();
        assert_eq!(edge.bbox, Rect::new(180, 90, 20, 10));
        assert!(!m.iter().any(|c| c.label.as_deref() == Some("Gone")));
        for c in &m {
            assert!(bounds.contains_rect(&c.bbox), "{c:?}");
        }
        assert_eq!(m.len(), 4);
        // Without a tree nothing changes.
        assert_eq!(merge_accessibility(visual.clone(), &[], bounds), visual);
    }

    #[test]
    fn a_panel_holding_several_tree_elements_is_not_replaced() {
        // FR-PERC-010: a visual menu-bar strip is not "the same element" as one of its menus.
        let bounds = Rect::new(0, 0, 200, 100);
        let strip = cand(Rect::new(0, 0, 200, 25), ElementSource::Rect, None);
        let tree = vec![
            cand(
                Rect::new(0, 0, 40, 25),
                ElementSource::Accessibility,
                Some("Game"),
            ),
            cand(
                Rect::new(40, 0, 40, 25),
                ElementSource::Accessibility,
                Some("Help"),
            ),
        ];
        let m = merge_accessibility(vec![strip.clone()], &tree, bounds);
        assert!(m.contains(&strip));
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn perceiver_ids_are_stable_with_accessibility_elements() {
        // FR-PERC-006, FR-PERC-010
        use crate::{FrameChange, Perceiver};
        use gamepilot_core::MonoTime;
        let (w, h) = (200u32, 100u32);
        let buf = canvas(w, h, [30, 30, 30]);
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let tree = vec![
            cand(
                Rect::new(0, 0, 55, 25),
                ElementSource::Accessibility,
                Some("Game"),
            ),
            cand(
                Rect::new(55, 0, 46, 25),
                ElementSource::Accessibility,
                Some("Type"),
            ),
        ];
        let mut p = Perceiver::new();
        let o1 = p.observe_with_accessibility(&v, MonoTime(1), FrameChange::Scene, &[], &tree);
        let o2 = p.observe_with_accessibility(&v, MonoTime(2), FrameChange::Unchanged, &[], &tree);
        assert_eq!(o1.elements.len(), 2);
        assert_eq!(o1.elements, o2.elements);
        assert!(o1
            .elements
            .iter()
            .all(|e| e.source == ElementSource::Accessibility));
        assert!(o1.to_text().contains("accessibility"));
    }

    #[test]
    fn overlapping_candidates_merge() {
        let a = Candidate {
            bbox: Rect::new(0, 0, 10, 10),
            confidence: 0.5,
            source: ElementSource::Rect,
            label: None,
        };
        let b = Candidate {
            bbox: Rect::new(1, 1, 10, 10),
            confidence: 0.4,
            source: ElementSource::Text,
            label: Some("x".into()),
        };
        let m = non_max_suppression(vec![a, b], 0.6);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].label.as_deref(), Some("x"));
    }
}
