//! The Observation handed to the tactical loop (frame size, class, texts, elements with stable ids) and
//! the `Perceiver` that builds one per frame with monotonic timestamps (INV-PERC-002).

use crate::classify::{classify, Classification, ClassifierParams, FrameChange};
use crate::ids::IdTracker;
use crate::ocr::TextLine;
use crate::proposals::{merge_accessibility, propose, Candidate, ProposalParams};
use crate::thumb::{Thumb, THUMB_WIDTH};
use gamepilot_core::{ElementId, FrameView, LayerRegion, MonoTime, Rect, Size, WindowLayer};
use gamepilot_sensor::Atlas;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use crate::proposals::ElementSource;

/// One recognised text line as the observation reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextItem {
    pub text: String,
    pub bbox: Rect,
    pub confidence: f32,
}

/// One candidate interactive element with its stable id (the number of its mark).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Element {
    pub id: ElementId,
    pub bbox: Rect,
    pub confidence: f32,
    pub source: ElementSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What an unlabelled element looks like ("yellow round"), from its pixels ([`crate::looks`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looks: Option<String>,
    /// The game's popup or dialog the element lies in; `None` on the main window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<WindowLayer>,
    /// Drawn as the chosen item of its list (another colour, brightness or size than its siblings):
    /// where a key-driven menu's cursor is ([`crate::selection`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub selected: bool,
}

/// What perception saw in one frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Capture time of the frame on the session's monotonic clock (non-decreasing, INV-PERC-002).
    pub at: MonoTime,
    pub frame_size: Size,
    pub class: FrameChange,
    pub texts: Vec<TextItem>,
    pub elements: Vec<Element>,
}

impl Observation {
    /// The element with this id (the only elements an action may name, FR-GND-003).
    pub fn element(&self, id: ElementId) -> Option<&Element> {
        self.elements.iter().find(|e| e.id == id)
    }

    /// The smallest labelled element whose box holds `at`: what a click there lands on, by its label.
    pub fn labelled_at(&self, at: gamepilot_core::Point) -> Option<&Element> {
        self.elements
            .iter()
            .filter(|e| e.label.is_some() && e.bbox.contains(at))
            .min_by_key(|e| u64::from(e.bbox.w) * u64::from(e.bbox.h))
    }

    /// Say which elements lie in one of the game's popups or dialogs (`layers` bottom to top, as capture
    /// composed them): the topmost layer holding an element's centre is its layer.
    pub fn place_layers(&mut self, layers: &[LayerRegion]) {
        for e in &mut self.elements {
            let c = e.bbox.center();
            let Some(l) = layers.iter().rev().find(|l| l.rect.contains(c)) else {
                e.layer = None;
                continue;
            };
            e.layer = Some(l.layer);
            // What lies past the popup's edge is another window's pixels, not this element's.
            e.bbox = e.bbox.intersection(&l.rect).unwrap_or(e.bbox);
        }
    }

    /// The same observation in another coordinate space of `frame_size` (a downscaled whole frame, or
    /// capture space for a crop's observation): every box goes through `map`; an element or text whose
    /// box maps to nothing is dropped, so every box stays inside the new frame (INV-PERC-001).
    pub fn remapped(&self, frame_size: Size, map: impl Fn(Rect) -> Option<Rect>) -> Observation {
        let bounds = Rect::new(0, 0, frame_size.w, frame_size.h);
        let inside = |r: Rect| map(r).and_then(|m| m.clamped_to(&bounds));
        Observation {
            at: self.at,
            frame_size,
            class: self.class,
            texts: self
                .texts
                .iter()
                .filter_map(|t| {
                    Some(TextItem {
                        bbox: inside(t.bbox)?,
                        ..t.clone()
                    })
                })
                .collect(),
            elements: self
                .elements
                .iter()
                .filter_map(|e| {
                    Some(Element {
                        bbox: inside(e.bbox)?,
                        ..e.clone()
                    })
                })
                .collect(),
        }
    }

    /// The text form that stands in for the image for a text-only model: one line per element (id,
    /// source, label or looks, box centre), then the recognised text that no labelled element already
    /// carries, each once (every digit is a token to a small model's tokenizer, so the
    /// 20 elements of the practice play field cost 482 tokens with full boxes and duplicated text lines).
    pub fn to_text(&self) -> String {
        self.to_text_in(&[])
    }

    /// [`Observation::to_text`] with the elements of `first` listed first, in that order, and the rest
    /// after them in their own order (a small model reads the top of a list).
    pub fn to_text_in(&self, first: &[ElementId]) -> String {
        self.to_text_listing(first, usize::MAX)
    }

    /// [`Observation::to_text_in`] listing at most `max_elements` elements; a last line counts the rest
    /// (their marks stay valid). Each element says its role as a reader would: a box carrying text is a
    /// `button`, a grid element a `cell` with its row and column (counted from the top left).
    pub fn to_text_listing(&self, first: &[ElementId], max_elements: usize) -> String {
        let place = |c: gamepilot_core::Point| format!("{},{}", c.x, c.y);
        let mut s = format!(
            "frame {}x{} ({})\n",
            self.frame_size.w, self.frame_size.h, self.class
        );
        let ordered = first
            .iter()
            .filter_map(|id| self.element(*id))
            .chain(self.elements.iter().filter(|e| !first.contains(&e.id)));
        let cells = crate::grid::grid_cells(&self.elements);
        for e in ordered.take(max_elements) {
            let b = e.bbox;
            s.push_str(&format!("[{}] {}", e.id, role(e)));
            if let Some(c) = cells.iter().find(|c| c.id == e.id) {
                s.push_str(&format!(" row {} column {}", c.row, c.column));
            }
            match (&e.label, &e.looks) {
                (Some(l), _) => s.push_str(&format!(" {l:?}")),
                (None, Some(looks)) => s.push_str(&format!(" {looks}")),
                (None, None) => {}
            }
            if let Some(layer) = e.layer {
                s.push_str(&format!(" in {}", layer.as_str()));
            }
            if e.selected {
                s.push_str(" selected");
            }
            s.push_str(&format!(" at {}\n", place(b.center())));
        }
        if self.elements.len() > max_elements {
            s.push_str(&format!(
                "({} more elements not listed)\n",
                self.elements.len() - max_elements
            ));
        }
        let carried = |t: &TextItem| {
            let c = t.bbox.center();
            self.elements
                .iter()
                .any(|e| e.label.as_deref().is_some_and(|l| l.contains(t.text.trim())) && e.bbox.contains(c))
        };
        for t in self.texts.iter().filter(|t| !carried(t)) {
            s.push_str(&format!("text {:?} at {}", t.text, place(t.bbox.center())));
            if t.confidence < 0.8 {
                s.push_str(&format!(" (unsure {:.2})", t.confidence));
            }
            s.push('\n');
        }
        s
    }
}

/// How an element's kind reads to the model: a box with text on it is a button, a grid element a cell.
fn role(e: &Element) -> &'static str {
    match (e.source, &e.label) {
        (ElementSource::Rect, Some(_)) => "button",
        (ElementSource::Grid, _) => "cell",
        (source, _) => source.as_str(),
    }
}

/// Per-session perception state: the previous thumbnail, the id tracker, the atlas and the last time.
#[derive(Debug, Clone)]
pub struct Perceiver {
    prev: Option<Thumb>,
    prev_size: Option<Size>,
    ids: IdTracker,
    last_at: MonoTime,
    /// The session's template atlas (FR-PERC-008): the one `template_present` reads; each of its
    /// templates found on a frame is proposed as an element.
    pub atlas: Arc<Atlas>,
    pub classifier: ClassifierParams,
    pub proposals: ProposalParams,
}

impl Default for Perceiver {
    fn default() -> Self {
        Perceiver::new()
    }
}

impl Perceiver {
    pub fn new() -> Perceiver {
        Perceiver {
            prev: None,
            prev_size: None,
            ids: IdTracker::new(),
            last_at: MonoTime::ZERO,
            atlas: Arc::new(Atlas::new()),
            classifier: ClassifierParams::default(),
            proposals: ProposalParams::default(),
        }
    }

    /// Classify a frame against the previous one (the reflex path: works on a thumbnail view, which may
    /// be the capture thumbnail). The first frame, or one of another size, is a scene change.
    pub fn classify_thumb(&mut self, thumb: Thumb) -> Classification {
        let result = match &self.prev {
            Some(p) => classify(p, &thumb, &self.classifier).ok(),
            None => None,
        };
        let c = result.unwrap_or_else(|| Classification {
            class: FrameChange::Scene,
            changed_fraction: 1.0,
            changed_tiles: Vec::new(),
            shift: None,
            hist_distance: 1.0,
        });
        self.prev = Some(thumb);
        c
    }

    /// Classify a view (thumbnail built here).
    pub fn classify_view(&mut self, view: &FrameView<'_>) -> Classification {
        self.classify_thumb(Thumb::from_view(view, THUMB_WIDTH))
    }

    /// Build the observation of a full frame: `class` from [`Perceiver::classify_thumb`], `texts` from OCR.
    /// Ids are kept unless the class is a scene change or the frame size changed.
    pub fn observe(
        &mut self,
        view: &FrameView<'_>,
        now: MonoTime,
        class: FrameChange,
        texts: &[TextLine],
    ) -> Observation {
        self.observe_with_accessibility(view, now, class, texts, &[])
    }

    /// [`Perceiver::observe`] with elements from the platform accessibility tree (capture-space boxes,
    /// source `Accessibility`), whose geometry wins over the visual proposals' (FR-PERC-010).
    pub fn observe_with_accessibility(
        &mut self,
        view: &FrameView<'_>,
        now: MonoTime,
        class: FrameChange,
        texts: &[TextLine],
        accessibility: &[Candidate],
    ) -> Observation {
        self.observe_frame(view, now, class, Some(texts), accessibility)
    }

    /// [`Perceiver::observe_with_accessibility`] of a frame whose text was not read (a self-identification
    /// probe's frame, measured for how its boxes moved): no text elements, and the text elements of the
    /// last frame read are remembered, so they keep their ids when the next frame is read (FR-PERC-006).
    pub fn observe_unread(
        &mut self,
        view: &FrameView<'_>,
        now: MonoTime,
        class: FrameChange,
        accessibility: &[Candidate],
    ) -> Observation {
        self.observe_frame(view, now, class, None, accessibility)
    }

    /// The observation of a frame; `texts` is `None` when its text was not read.
    fn observe_frame(
        &mut self,
        view: &FrameView<'_>,
        now: MonoTime,
        class: FrameChange,
        read: Option<&[TextLine]>,
        accessibility: &[Candidate],
    ) -> Observation {
        let texts = read.unwrap_or_default();
        let at = now.max(self.last_at);
        self.last_at = at;
        let size = view.size();
        let scene = class == FrameChange::Scene || self.prev_size != Some(size);
        self.prev_size = Some(size);
        let cands = merge_accessibility(
            propose(view, texts, self.atlas.as_ref(), &self.proposals),
            accessibility,
            view.bounds(),
        );
        let mut elements = match read {
            Some(_) => self.ids.assign(view, cands, scene),
            None => self.ids.assign_unread(view, cands, scene),
        };
        for e in elements.iter_mut().filter(|e| e.label.is_none()) {
            e.looks = crate::looks::describe(view, e.bbox);
        }
        crate::selection::mark_selected(view, &mut elements);
        let bounds = view.bounds();
        let texts = texts
            .iter()
            .filter_map(|t| {
                Some(TextItem {
                    text: t.text.clone(),
                    bbox: t.bbox.clamped_to(&bounds)?,
                    confidence: t.confidence,
                })
            })
            .collect();
        Observation {
            at,
            frame_size: size,
            class,
            texts,
            elements,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    #[test]
    fn timestamps_never_go_backwards_and_ids_persist_within_a_scene() {
        // INV-PERC-002, FR-PERC-006, INV-PERC-001
        let (w, h) = (200u32, 100u32);
        let mut buf = vec![0u8; (w * h * 4) as usize];
        for y in 20..50 {
            for x in 30..110 {
                let i = ((y * w + x) * 4) as usize;
                buf[i..i + 4].copy_from_slice(&[200, 60, 60, 255]);
            }
        }
        let v = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &buf).unwrap();
        let mut p = Perceiver::new();
        let c1 = p.classify_view(&v);
        assert_eq!(c1.class, FrameChange::Scene);
        let o1 = p.observe(&v, MonoTime(5_000), c1.class, &[]);
        let c2 = p.classify_view(&v);
        assert_eq!(c2.class, FrameChange::Unchanged);
        let o2 = p.observe(&v, MonoTime(4_000), c2.class, &[]);
        assert_eq!(o2.at, MonoTime(5_000));
        assert!(!o1.elements.is_empty());
        assert_eq!(o1.elements, o2.elements);
        for e in &o2.elements {
            assert!(v.bounds().contains_rect(&e.bbox));
        }
        let json = serde_json::to_value(&o2).unwrap();
        assert_eq!(json["elements"][0]["bbox"], serde_json::json!([30, 20, 80, 30]));
        assert_eq!(json["class"], "unchanged");
        assert!(o2.to_text().contains("[1] rect"));
    }

    #[test]
    fn remapping_keeps_every_box_inside_the_new_frame() {
        // INV-PERC-001, FR-GND-005: an observation re-expressed for a downscaled frame
        let o = Observation {
            at: MonoTime(1),
            frame_size: Size::new(100, 100),
            class: FrameChange::Local,
            texts: vec![TextItem {
                text: "Play".into(),
                bbox: Rect::new(10, 10, 20, 10),
                confidence: 0.9,
            }],
            elements: vec![
                Element {
                    id: ElementId(1),
                    bbox: Rect::new(50, 50, 60, 60),
                    confidence: 0.8,
                    source: ElementSource::Rect,
                    label: None,
                    looks: None,
                    layer: None,
                    selected: false,
                },
                Element {
                    id: ElementId(2),
                    bbox: Rect::new(90, 90, 5, 5),
                    confidence: 0.8,
                    source: ElementSource::Rect,
                    label: None,
                    looks: None,
                    layer: None,
                    selected: false,
                },
            ],
        };
        let half = o.remapped(Size::new(50, 50), |r| {
            Some(Rect::new(r.x / 2, r.y / 2, r.w / 2, r.h / 2))
        });
        assert_eq!(half.texts[0].bbox, Rect::new(5, 5, 10, 5));
        assert_eq!(half.elements[0].bbox, Rect::new(25, 25, 25, 25));
        let dropped = o.remapped(Size::new(50, 50), |r| {
            (r.x < 80).then_some(Rect::new(r.x / 2, r.y / 2, r.w / 2, r.h / 2))
        });
        assert_eq!(dropped.elements.len(), 1);
        assert_eq!(dropped.elements[0].id, ElementId(1));
        assert!(dropped
            .elements
            .iter()
            .all(|e| Rect::new(0, 0, 50, 50).contains_rect(&e.bbox)));
    }
}
