//! Stable element identifiers (FR-PERC-006): an element keeps its number across consecutive observations
//! of one scene (matched by position, size and appearance); a scene change renumbers from 1 in reading order.

use crate::observation::Element;
use crate::proposals::Candidate;
use gamepilot_core::{ElementId, FrameView, Rect};

#[derive(Debug, Clone)]
struct Tracked {
    id: ElementId,
    bbox: Rect,
    colour: [u8; 3],
    label: Option<String>,
}

/// Assigns ids to candidates, remembering the previous observation's elements.
#[derive(Debug, Clone, Default)]
pub struct IdTracker {
    next: u32,
    prev: Vec<Tracked>,
}

/// Mean colour of a box, sampled on an 8×8 grid.
fn mean_colour(view: &FrameView<'_>, r: &Rect) -> [u8; 3] {
    let mut s = [0u32; 3];
    let mut n = 0;
    for j in 0..8 {
        for i in 0..8 {
            let x = r.x.max(0) as u32 + r.w * (2 * i + 1) / 16;
            let y = r.y.max(0) as u32 + r.h * (2 * j + 1) / 16;
            let c = view.rgb(x, y);
            for k in 0..3 {
                s[k] += c[k] as u32;
            }
            n += 1;
        }
    }
    [(s[0] / n) as u8, (s[1] / n) as u8, (s[2] / n) as u8]
}

/// Reading order: rows of about 16 px, then left to right.
fn reading_key(r: &Rect) -> (i32, i32) {
    (r.center().y / 16, r.x)
}

impl IdTracker {
    pub fn new() -> IdTracker {
        IdTracker {
            next: 1,
            prev: Vec::new(),
        }
    }

    /// Forget everything; the next call numbers from 1.
    pub fn reset(&mut self) {
        self.next = 1;
        self.prev.clear();
    }

    /// Give every candidate an id. With `scene_change` (or on the first call) numbering restarts at 1 in
    /// reading order; otherwise a candidate that matches a previous element keeps its id and new ones
    /// get fresh numbers.
    pub fn assign(
        &mut self,
        view: &FrameView<'_>,
        mut cands: Vec<Candidate>,
        scene_change: bool,
    ) -> Vec<Element> {
        if scene_change || self.next == 0 {
            self.reset();
        }
        cands.sort_by_key(|c| reading_key(&c.bbox));
        let colours: Vec<[u8; 3]> = cands.iter().map(|c| mean_colour(view, &c.bbox)).collect();
        // All (candidate, previous) pairs that plausibly match, best first.
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for (ci, c) in cands.iter().enumerate() {
            for (pi, p) in self.prev.iter().enumerate() {
                if let Some(s) = match_score(c, colours[ci], p) {
                    pairs.push((s, ci, pi));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut ids: Vec<Option<ElementId>> = vec![None; cands.len()];
        let mut used = vec![false; self.prev.len()];
        for (_, ci, pi) in pairs {
            if ids[ci].is_none() && !used[pi] {
                ids[ci] = Some(self.prev[pi].id);
                used[pi] = true;
            }
        }
        let mut out = Vec::with_capacity(cands.len());
        for (ci, c) in cands.into_iter().enumerate() {
            let id = match ids[ci] {
                Some(id) => id,
                None => {
                    let id = ElementId(self.next);
                    self.next += 1;
                    id
                }
            };
            out.push(Element {
                id,
                bbox: c.bbox,
                confidence: c.confidence,
                source: c.source,
                label: c.label,
                looks: None,
                layer: None,
                selected: false,
            });
        }
        self.prev = out
            .iter()
            .zip(colours)
            .map(|(e, colour)| Tracked {
                id: e.id,
                bbox: e.bbox,
                colour,
                label: e.label.clone(),
            })
            .collect();
        out.sort_by_key(|e| e.id);
        out
    }

    /// [`IdTracker::assign`] for a frame whose text was not read: the labelled elements remembered from
    /// the last frame read, that nothing here matched, stay remembered (unless the scene changed), so
    /// they keep their ids when the next frame is read.
    pub fn assign_unread(
        &mut self,
        view: &FrameView<'_>,
        cands: Vec<Candidate>,
        scene_change: bool,
    ) -> Vec<Element> {
        let labelled: Vec<Tracked> = self.prev.iter().filter(|t| t.label.is_some()).cloned().collect();
        let out = self.assign(view, cands, scene_change);
        if !scene_change {
            let kept: Vec<Tracked> = labelled
                .into_iter()
                .filter(|t| !self.prev.iter().any(|p| p.id == t.id))
                .collect();
            self.prev.extend(kept);
        }
        out
    }
}

/// A score in 0..2 when `c` plausibly is the same element as `p`, else `None`.
fn match_score(c: &Candidate, colour: [u8; 3], p: &Tracked) -> Option<f32> {
    if let (Some(a), Some(b)) = (&c.label, &p.label) {
        if a != b {
            return None;
        }
    }
    let iou = c.bbox.iou(&p.bbox);
    let (ca, cb) = (c.bbox.center(), p.bbox.center());
    let dist = (((ca.x - cb.x) as f32).powi(2) + ((ca.y - cb.y) as f32).powi(2)).sqrt();
    let side = c.bbox.w.min(c.bbox.h).max(1) as f32;
    let size_ratio = (c.bbox.area().max(1) as f32 / p.bbox.area().max(1) as f32)
        .max(p.bbox.area().max(1) as f32 / c.bbox.area().max(1) as f32);
    let cdiff = (0..3)
        .map(|k| colour[k].abs_diff(p.colour[k]) as u32)
        .max()
        .unwrap_or(0);
    let positional = iou >= 0.3 || (dist <= (0.5 * side).max(8.0) && size_ratio <= 2.0);
    if !positional || cdiff > 60 {
        return None;
    }
    Some(iou + 1.0 - (cdiff as f32 / 60.0).min(1.0) * 0.5 - (dist / 100.0).min(0.5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proposals::ElementSource;
    use gamepilot_core::PixelFormat;

    fn cand(x: i32, y: i32, label: Option<&str>) -> Candidate {
        Candidate {
            bbox: Rect::new(x, y, 40, 20),
            confidence: 0.8,
            source: ElementSource::Rect,
            label: label.map(String::from),
        }
    }

    #[test]
    fn text_keeps_its_ids_across_a_frame_whose_text_was_not_read() {
        // FR-PERC-006: a probe's frame read without text does not renumber the text of the next frame read
        let buf = vec![128u8; 400 * 300 * 4];
        let v = FrameView::new(400, 300, 1600, PixelFormat::Rgba, &buf).unwrap();
        let mut t = IdTracker::new();
        let read = || vec![cand(10, 10, Some("Coins 0")), cand(200, 200, None)];
        let first = t.assign(&v, read(), true);
        let unread = t.assign_unread(&v, vec![cand(205, 200, None)], false);
        assert_eq!(unread.len(), 1);
        assert_eq!(unread[0].id, first[1].id, "the sprite tracked");
        let again = t.assign(&v, read(), false);
        assert_eq!(
            again.iter().map(|e| e.id).collect::<Vec<_>>(),
            first.iter().map(|e| e.id).collect::<Vec<_>>(),
            "the text read again keeps its id"
        );
        // A scene change renumbers, read or not.
        t.assign_unread(&v, vec![cand(300, 100, None)], true);
        let fresh = t.assign(&v, read(), false);
        assert!(fresh.iter().all(|e| e.id.0 >= 2), "{fresh:?}");
    }

    #[test]
    fn ids_survive_small_moves_and_restart_on_scene_change() {
        // FR-PERC-006
        let buf = vec![128u8; 400 * 300 * 4];
        let v = FrameView::new(400, 300, 1600, PixelFormat::Rgba, &buf).unwrap();
        let mut t = IdTracker::new();
        let a = t.assign(
            &v,
            vec![
                cand(10, 10, Some("Play")),
                cand(10, 60, Some("Shop")),
                cand(200, 200, None),
            ],
            true,
        );
        let ids: Vec<(u32, Option<String>)> = a.iter().map(|e| (e.id.0, e.label.clone())).collect();
        assert_eq!(
            ids,
            vec![(1, Some("Play".into())), (2, Some("Shop".into())), (3, None)]
        );
        // Same scene, the order of proposals shuffled, one moved by 3 px, one new element.
        let b = t.assign(
            &v,
            vec![
                cand(300, 10, None),
                cand(203, 201, None),
                cand(10, 60, Some("Shop")),
                cand(10, 10, Some("Play")),
            ],
            false,
        );
        let find = |x: i32, y: i32| b.iter().find(|e| e.bbox.x == x && e.bbox.y == y).unwrap().id.0;
        assert_eq!(find(10, 10), 1);
        assert_eq!(find(10, 60), 2);
        assert_eq!(find(203, 201), 3);
        assert_eq!(find(300, 10), 4);
        // A different label at the same place is a different element.
        let c = t.assign(&v, vec![cand(10, 10, Some("Quit"))], false);
        assert_eq!(c[0].id.0, 5);
        // Scene change: renumbered from 1.
        let d = t.assign(&v, vec![cand(50, 50, None)], true);
        assert_eq!(d[0].id.0, 1);
    }
}
