//! Suppression of refuted targets for a bounded number of tactical ticks (FR-GND-007).

use gamepilot_core::{ElementId, Point};
use serde::{Deserialize, Serialize};

/// What an action was grounded on: a mark from the enumerated list (FR-GND-001) or a capture-space
/// coordinate (FR-GND-002).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Mark { element: ElementId },
    Point { point: Point },
}

/// One suppressed target and the first tick at which it is allowed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppressed {
    pub target: Target,
    pub until_tick: u64,
}

/// Targets refuted recently. A coordinate target also covers points within `radius_px` (a refuted click
/// two pixels to the left of the last one is the same mistake).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suppressor {
    ttl_ticks: u64,
    radius_px: u32,
    entries: Vec<Suppressed>,
}

impl Suppressor {
    /// `ttl_ticks` is the bound: a target refuted at tick `t` is allowed again at `t + ttl_ticks`.
    pub fn new(ttl_ticks: u64, radius_px: u32) -> Self {
        Suppressor {
            ttl_ticks: ttl_ticks.max(1),
            radius_px,
            entries: Vec::new(),
        }
    }

    /// Suppress `target` from `tick`; returns the tick at which it is allowed again. A target already
    /// suppressed has its bound extended.
    pub fn suppress(&mut self, target: Target, tick: u64) -> u64 {
        let until = tick.saturating_add(self.ttl_ticks);
        if let Some(e) = self.entries.iter_mut().find(|e| e.target == target) {
            e.until_tick = e.until_tick.max(until);
        } else {
            self.entries.push(Suppressed {
                target,
                until_tick: until,
            });
        }
        until
    }

    /// Whether `target` may not be acted on at `tick`.
    pub fn is_suppressed(&self, target: &Target, tick: u64) -> bool {
        self.entries
            .iter()
            .any(|e| tick < e.until_tick && self.covers(&e.target, target))
    }

    /// Drop entries whose bound has passed.
    pub fn expire(&mut self, tick: u64) {
        self.entries.retain(|e| tick < e.until_tick);
    }

    /// The targets suppressed at `tick` (to remove from the candidate list offered to the model).
    pub fn active(&self, tick: u64) -> Vec<Suppressed> {
        self.entries
            .iter()
            .filter(|e| tick < e.until_tick)
            .copied()
            .collect()
    }

    fn covers(&self, suppressed: &Target, asked: &Target) -> bool {
        match (suppressed, asked) {
            (Target::Mark { element: a }, Target::Mark { element: b }) => a == b,
            (Target::Point { point: a }, Target::Point { point: b }) => {
                let dx = (a.x as i64 - b.x as i64).abs();
                let dy = (a.y as i64 - b.y as i64).abs();
                let r = self.radius_px as i64;
                dx * dx + dy * dy <= r * r
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuted_mark_is_suppressed_for_a_bounded_number_of_ticks() {
        // FR-GND-007
        let mut s = Suppressor::new(3, 10);
        let m = Target::Mark {
            element: ElementId(5),
        };
        assert_eq!(s.suppress(m, 10), 13);
        assert!(s.is_suppressed(&m, 10));
        assert!(s.is_suppressed(&m, 12));
        assert!(!s.is_suppressed(&m, 13));
        assert!(!s.is_suppressed(
            &Target::Mark {
                element: ElementId(6)
            },
            11
        ));
        assert_eq!(s.active(11).len(), 1);
        s.expire(13);
        assert!(s.active(13).is_empty());
    }

    #[test]
    fn coordinate_suppression_covers_a_radius() {
        // FR-GND-007, FR-GND-002
        let mut s = Suppressor::new(5, 10);
        s.suppress(
            Target::Point {
                point: Point::new(100, 100),
            },
            0,
        );
        assert!(s.is_suppressed(
            &Target::Point {
                point: Point::new(106, 108)
            },
            1
        ));
        assert!(!s.is_suppressed(
            &Target::Point {
                point: Point::new(111, 100)
            },
            1
        ));
        assert!(!s.is_suppressed(
            &Target::Mark {
                element: ElementId(100)
            },
            1
        ));
    }

    #[test]
    fn resuppression_extends_the_bound() {
        // FR-GND-007
        let mut s = Suppressor::new(4, 0);
        let m = Target::Mark {
            element: ElementId(1),
        };
        s.suppress(m, 0);
        s.suppress(m, 2);
        assert!(s.is_suppressed(&m, 5));
        assert!(!s.is_suppressed(&m, 6));
        assert_eq!(s.active(0).len(), 1);
    }
}
