//! Per scene class and per grounding path confirmation rates, and the choice of path they drive (FR-GND-004).

use crate::verify::Verdict;
use crate::GroundingError;
use serde::{Deserialize, Serialize};

/// How a target is grounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroundingPath {
    /// By mark from the enumerated candidate list (FR-GND-001).
    Mark,
    /// By coordinate over the whole frame (FR-GND-002).
    Coordinate,
    /// Cheap whole-frame pass, then an expensive pass over the crop (FR-GND-005).
    TwoStage,
}

impl GroundingPath {
    pub fn as_str(self) -> &'static str {
        match self {
            GroundingPath::Mark => "mark",
            GroundingPath::Coordinate => "coordinate",
            GroundingPath::TwoStage => "two_stage",
        }
    }
}

/// Verdict counts of grounded actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PathCounts {
    pub confirmed: u64,
    pub refuted: u64,
    pub inconclusive: u64,
}

impl PathCounts {
    pub fn total(&self) -> u64 {
        self.confirmed + self.refuted + self.inconclusive
    }

    /// Laplace-smoothed rate at which grounded actions were later confirmed: (c + 1) / (n + 2).
    pub fn confirmation_rate(&self) -> f64 {
        (self.confirmed as f64 + 1.0) / (self.total() as f64 + 2.0)
    }
}

/// One row of the statistics table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRow {
    pub scene: String,
    pub path: GroundingPath,
    pub counts: PathCounts,
}

/// Confirmation statistics per (scene class, path). Each offered path is tried `min_trials` times in a
/// scene before the rates decide (so a path that failed once early is not abandoned forever).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathStats {
    min_trials: u64,
    rows: Vec<PathRow>,
}

impl PathStats {
    pub fn new(min_trials: u64) -> Self {
        PathStats {
            min_trials,
            rows: Vec::new(),
        }
    }

    /// Count a verdict for an action grounded by `path` in `scene`.
    pub fn record(&mut self, scene: &str, path: GroundingPath, verdict: Verdict) {
        let idx = match self.rows.iter().position(|r| r.scene == scene && r.path == path) {
            Some(i) => i,
            None => {
                self.rows.push(PathRow {
                    scene: scene.to_string(),
                    path,
                    counts: PathCounts::default(),
                });
                self.rows.len() - 1
            }
        };
        let c = &mut self.rows[idx].counts;
        match verdict {
            Verdict::Confirmed => c.confirmed += 1,
            Verdict::Refuted => c.refuted += 1,
            Verdict::Inconclusive => c.inconclusive += 1,
        }
    }

    pub fn counts(&self, scene: &str, path: GroundingPath) -> PathCounts {
        self.rows
            .iter()
            .find(|r| r.scene == scene && r.path == path)
            .map(|r| r.counts)
            .unwrap_or_default()
    }

    pub fn rows(&self) -> &[PathRow] {
        &self.rows
    }

    /// Choose among `offered` for `scene`: a path with fewer than `min_trials` verdicts here first (the
    /// least tried, then offer order), otherwise the highest smoothed confirmation rate (offer order
    /// breaks ties). Deterministic.
    pub fn choose(&self, scene: &str, offered: &[GroundingPath]) -> Result<GroundingPath, GroundingError> {
        let first = *offered.first().ok_or(GroundingError::NoPathOffered)?;
        let mut under: Option<(GroundingPath, u64)> = None;
        for p in offered {
            let n = self.counts(scene, *p).total();
            if n < self.min_trials && !matches!(under, Some((_, m)) if n >= m) {
                under = Some((*p, n));
            }
        }
        if let Some((p, _)) = under {
            return Ok(p);
        }
        let mut best = (first, self.counts(scene, first).confirmation_rate());
        for p in &offered[1..] {
            let r = self.counts(scene, *p).confirmation_rate();
            if r > best.1 {
                best = (*p, r);
            }
        }
        Ok(best.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GroundingPath::*;

    #[test]
    fn explores_then_exploits_per_scene() {
        // FR-GND-004
        let mut s = PathStats::new(2);
        let offered = [Mark, Coordinate, TwoStage];
        assert_eq!(s.choose("menu", &offered).unwrap(), Mark);
        s.record("menu", Mark, Verdict::Refuted);
        assert_eq!(s.choose("menu", &offered).unwrap(), Coordinate);
        s.record("menu", Coordinate, Verdict::Confirmed);
        s.record("menu", TwoStage, Verdict::Refuted);
        s.record("menu", Mark, Verdict::Refuted);
        s.record("menu", Coordinate, Verdict::Confirmed);
        s.record("menu", TwoStage, Verdict::Confirmed);
        // menu: mark 0/2, coordinate 2/2, two-stage 1/2
        assert_eq!(s.choose("menu", &offered).unwrap(), Coordinate);
        // another scene class has its own statistics
        assert_eq!(s.choose("world", &offered).unwrap(), Mark);
        assert_eq!(s.choose("menu", &[Mark, TwoStage]).unwrap(), TwoStage);
        assert!((s.counts("menu", Coordinate).confirmation_rate() - 0.75).abs() < 1e-9);
    }

    #[test]
    fn inconclusive_lowers_the_rate_and_empty_offer_is_an_error() {
        // FR-GND-004, INV-GND-001
        let mut s = PathStats::new(0);
        s.record("x", Mark, Verdict::Inconclusive);
        s.record("x", Mark, Verdict::Inconclusive);
        assert!(s.counts("x", Mark).confirmation_rate() < s.counts("x", Coordinate).confirmation_rate());
        assert_eq!(s.choose("x", &[Mark, Coordinate]).unwrap(), Coordinate);
        assert_eq!(s.choose("x", &[]), Err(GroundingError::NoPathOffered));
    }
}
