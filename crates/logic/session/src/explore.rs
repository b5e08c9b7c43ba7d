//! Exploration: after a click that changed nothing, the session tries the nearest untried element like
//! the one clicked (another tile of the same board, another item of the same list) without a model call,
//! a bounded number of times a subgoal, as a person tries the next tile when the first did not move — and
//! once one like it failed too, the nearest drawn control of another kind (the arrows around a board
//! whose tiles do not move).

use gamepilot_core::{ElementId, Point};
use gamepilot_vision::{Element, Observation};

/// At most this many elements are tried by exploration within one subgoal: each refuted try also
/// climbs the ladder, and with 8, sgt-sixteen's exploration of tiles (its arrows move the rows, not its
/// tiles) spent the run's no-progress allowance before the model could choose an arrow.
pub const MAX_TRIES: u32 = 3;

/// How far (as a fraction of the clicked element's width or height) a sibling's size may differ.
const SIZE_TOLERANCE: f64 = 0.3;

/// What exploration knows within a subgoal: the points whose clicks changed nothing, and what it tried.
#[derive(Debug, Clone, Default)]
pub struct Explorer {
    /// Points of clicks that changed nothing, in capture space, oldest first.
    refuted: Vec<Point>,
    /// Labels of the elements exploration clicked (for the note that tells what worked).
    tried: Vec<String>,
    tries: u32,
    /// A click changed nothing since the last perception: the next one may explore.
    wanted: bool,
}

impl Explorer {
    /// A new subgoal: nothing is known about its screen yet.
    pub fn reset(&mut self) {
        *self = Explorer::default();
    }

    /// A click at `at` changed nothing: its siblings are worth trying, within the bound.
    pub fn refuted(&mut self, at: Point) {
        self.refuted.push(at);
        self.wanted = self.tries < MAX_TRIES;
    }

    /// A click changed something: exploration has done its work (or was not needed).
    pub fn confirmed(&mut self) {
        self.wanted = false;
    }

    /// The next perception should try a sibling rather than ask the model.
    pub fn wanted(&self) -> bool {
        self.wanted
    }

    /// Exploration has tried anything this subgoal.
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// The labels exploration tried that changed nothing, oldest first.
    pub fn tried(&self) -> &[String] {
        &self.tried
    }

    /// The element to try next on `obs`: the nearest element like the one the last refuted click hit
    /// (the same kind of source and window layer, its size within 30 %), containing no refuted point and
    /// not excluded — after a first try, the nearest small drawn control of another kind first — with its
    /// label and which it is ("like it", "of another kind"). `None` (and exploration ends until the next
    /// refuted click) when there is none.
    pub fn next(
        &mut self,
        obs: &Observation,
        excluded: &[ElementId],
    ) -> Option<(ElementId, String, &'static str)> {
        self.wanted = false;
        let at = *self.refuted.last()?;
        let clicked = obs.elements.iter().find(|e| e.bbox.contains(at))?;
        let untried = |e: &&Element| {
            e.id != clicked.id
                && !excluded.contains(&e.id)
                && !self.refuted.iter().any(|p| e.bbox.contains(*p))
        };
        let near = |e: &&Element| distance2(e.bbox.center(), at);
        let like = obs
            .elements
            .iter()
            .filter(|e| alike(clicked, e))
            .filter(untried)
            .min_by_key(near);
        let other_kind = obs
            .elements
            .iter()
            .filter(|e| drawn_control(e, obs) && e.layer == clicked.layer && !alike(clicked, e))
            .filter(untried)
            .min_by_key(near);
        // The first try is one like the dead click; after that failed too, that kind is likely dead
        // (sgt-sixteen's tiles: its arrows move them) and the other kind goes first.
        let pick = if self.tries == 0 {
            like.or(other_kind)
        } else {
            other_kind.or(like)
        };
        let kind = if pick.is_some() && pick.map(|e| e.id) == like.map(|e| e.id) {
            "like it"
        } else {
            "of another kind"
        };
        let (id, label) = pick.map(|e| (e.id, describe(e)))?;
        self.tries += 1;
        self.tried.push(label.clone());
        Some((id, label, kind))
    }
}

/// Two elements of one kind: the same source and window layer, each side within [`SIZE_TOLERANCE`].
fn alike(a: &Element, b: &Element) -> bool {
    let near = |x: u32, y: u32| (f64::from(x) - f64::from(y)).abs() <= SIZE_TOLERANCE * f64::from(x.max(1));
    a.source == b.source && a.layer == b.layer && near(a.bbox.w, b.bbox.w) && near(a.bbox.h, b.bbox.h)
}

/// A small drawn element with no text: a control drawn by the game (an arrow, a knob, a dot), not a
/// text, not a panel (at most a sixteenth of the frame).
fn drawn_control(e: &Element, obs: &Observation) -> bool {
    e.label.is_none()
        && e.looks.is_some()
        && u64::from(e.bbox.w) * u64::from(e.bbox.h) * 16 <= obs.frame_size.area()
}

fn distance2(a: Point, b: Point) -> i64 {
    let (dx, dy) = (i64::from(a.x - b.x), i64::from(a.y - b.y));
    dx * dx + dy * dy
}

/// An element as a note names it: its label, or where it is.
fn describe(e: &Element) -> String {
    match e.label.as_deref().map(str::trim).filter(|l| !l.is_empty()) {
        Some(l) => format!("'{l}'"),
        None => format!(
            "the {}element at {},{}",
            e.looks.as_deref().map(|l| format!("{l} ")).unwrap_or_default(),
            e.bbox.center().x,
            e.bbox.center().y
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{FrameChange, MonoTime, Rect, Size};
    use gamepilot_vision::ElementSource;

    fn tile(id: u32, label: &str, col: i32, row: i32) -> Element {
        Element {
            id: ElementId(id),
            bbox: Rect::new(10 + col * 40, 50 + row * 40, 38, 38),
            confidence: 0.9,
            source: ElementSource::Text,
            label: Some(label.into()),
            looks: None,
            layer: None,
            selected: false,
        }
    }

    /// A 4x4 sliding puzzle's board with its gap at the bottom right, and a wide status line.
    fn board() -> Observation {
        let mut elements: Vec<Element> = (0..15)
            .map(|i| tile(i + 1, &(i + 1).to_string(), (i % 4) as i32, (i / 4) as i32))
            .collect();
        elements.push(Element {
            bbox: Rect::new(10, 220, 160, 20),
            ..tile(30, "Moves: 0", 0, 0)
        });
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(200, 260),
            class: FrameChange::Unchanged,
            texts: Vec::new(),
            elements,
        }
    }

    #[test]
    fn a_refuted_tile_is_followed_by_the_nearest_untried_tile_never_the_status_line() {
        let mut x = Explorer::default();
        assert!(!x.wanted());
        // The model clicked tile 1 (top left): it did not move.
        x.refuted(Point::new(29, 69));
        assert!(x.wanted());
        let (first, label, _) = x.next(&board(), &[]).expect("a sibling");
        assert!(!x.wanted(), "one try a refuted click");
        assert!(
            first == ElementId(2) || first == ElementId(5),
            "a neighbour of tile 1: {first:?}"
        );
        assert!(label == "'2'" || label == "'5'");
        // That one changed nothing either: the next is another tile, never one tried.
        let c = board().element(first).unwrap().bbox.center();
        x.refuted(c);
        let (second, _, _) = x.next(&board(), &[]).expect("a third tile");
        assert!(![ElementId(1), first, ElementId(30)].contains(&second));
        assert_eq!(x.tries(), 2);
        assert_eq!(x.tried().len(), 2);
    }

    #[test]
    fn exploration_skips_excluded_marks_is_bounded_and_ends_on_a_change_or_a_new_subgoal() {
        let mut x = Explorer::default();
        x.refuted(Point::new(29, 69));
        let excluded: Vec<ElementId> = (2..=15).map(ElementId).filter(|id| id.0 != 9).collect();
        assert_eq!(x.next(&board(), &excluded).map(|t| t.0), Some(ElementId(9)));
        x.refuted(Point::new(29, 149));
        assert_eq!(x.next(&board(), &excluded), None, "nothing alike is left");
        x.confirmed();
        assert!(!x.wanted());
        let mut bounded = Explorer::default();
        for _ in 0..MAX_TRIES {
            bounded.refuted(Point::new(29, 69));
            assert!(bounded.next(&board(), &[]).is_some());
        }
        bounded.refuted(Point::new(29, 69));
        assert!(!bounded.wanted(), "at most {MAX_TRIES} tries a subgoal");
        bounded.reset();
        bounded.refuted(Point::new(29, 69));
        assert!(bounded.wanted());
    }

    #[test]
    fn once_a_like_one_failed_too_the_nearest_drawn_control_of_another_kind_goes_first() {
        // sgt-sixteen: its tiles do not move, the round arrows around the board do
        let mut obs = board();
        let arrow = |id: u32, x: i32, y: i32| Element {
            id: ElementId(id),
            bbox: Rect::new(x, y, 12, 12),
            confidence: 0.9,
            source: ElementSource::Component,
            label: None,
            looks: Some("grey round".into()),
            layer: None,
            selected: false,
        };
        obs.elements.push(arrow(40, 0, 60));
        obs.elements.push(arrow(41, 175, 180));
        let mut x = Explorer::default();
        x.refuted(Point::new(29, 69));
        let (first, _, kind) = x.next(&obs, &[]).unwrap();
        assert_eq!(kind, "like it");
        assert!(
            first == ElementId(2) || first == ElementId(5),
            "a tile first: {first:?}"
        );
        x.refuted(obs.element(first).unwrap().bbox.center());
        let (second, label, kind) = x.next(&obs, &[]).unwrap();
        assert_eq!(second, ElementId(40), "the arrow beside the first tile");
        assert_eq!(kind, "of another kind");
        assert_eq!(label, "the grey round element at 6,66");
        // A dead status line has nothing like it: the arrow nearest it at once.
        let mut x = Explorer::default();
        x.refuted(Point::new(90, 230));
        assert_eq!(x.next(&obs, &[]).map(|t| t.0), Some(ElementId(41)));
    }

    #[test]
    fn a_click_outside_every_element_has_nothing_to_explore() {
        let mut x = Explorer::default();
        x.refuted(Point::new(195, 5));
        assert_eq!(x.next(&board(), &[]), None);
    }
}
