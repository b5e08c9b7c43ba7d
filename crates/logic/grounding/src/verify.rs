//! Verification after every action (FR-GND-006): the expected change, the evidence gathered on later ticks,
//! and the three-valued verdict (INV-GND-001: an outcome that cannot be determined is inconclusive).

use crate::GroundingError;
use gamepilot_core::{ElementId, MonoTime};
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use gamepilot_core::{ActionId, Verdict};

/// Which way a sensor is expected to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeDirection {
    Increase,
    Decrease,
    /// Any change of at least the minimum delta, either way.
    Change,
}

/// What an action is expected to change (decisions.md, Verification). Postcondition values are computed
/// by the caller from its compiled sensor program; only the source text is kept here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExpectedChange {
    /// A sensor-language expression expected to become true.
    Postcondition { source: String },
    /// A numeric sensor expected to move by at least `min_delta` in `direction`.
    SensorDelta {
        sensor: String,
        direction: ChangeDirection,
        min_delta: f64,
    },
    /// The marked element the action targeted is expected to change in appearance or vanish.
    ElementChanged { element: ElementId },
}

impl ExpectedChange {
    pub fn kind(&self) -> &'static str {
        match self {
            ExpectedChange::Postcondition { .. } => "postcondition",
            ExpectedChange::SensorDelta { .. } => "sensor_delta",
            ExpectedChange::ElementChanged { .. } => "element_changed",
        }
    }
}

/// One sample of evidence for an expected change. `None` values are undefined (tri-state).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    Postcondition { value: Option<bool> },
    SensorDelta { before: Option<f64>, after: Option<f64> },
    ElementChanged { changed: Option<bool> },
}

impl Evidence {
    pub fn kind(&self) -> &'static str {
        match self {
            Evidence::Postcondition { .. } => "postcondition",
            Evidence::SensorDelta { .. } => "sensor_delta",
            Evidence::ElementChanged { .. } => "element_changed",
        }
    }
}

/// Whether one evidence sample shows the expected change: `Some(true)` it does, `Some(false)` it does
/// not, `None` it cannot be told (an undefined value anywhere, INV-GND-001).
pub fn evaluate(expected: &ExpectedChange, evidence: &Evidence) -> Result<Option<bool>, GroundingError> {
    match (expected, evidence) {
        (ExpectedChange::Postcondition { .. }, Evidence::Postcondition { value }) => Ok(*value),
        (ExpectedChange::ElementChanged { .. }, Evidence::ElementChanged { changed }) => Ok(*changed),
        (
            ExpectedChange::SensorDelta {
                direction, min_delta, ..
            },
            Evidence::SensorDelta { before, after },
        ) => {
            let (Some(b), Some(a)) = (before, after) else {
                return Ok(None);
            };
            if !b.is_finite() || !a.is_finite() {
                return Ok(None);
            }
            let min = if min_delta.is_finite() && *min_delta > 0.0 {
                *min_delta
            } else {
                f64::EPSILON
            };
            let d = a - b;
            Ok(Some(match direction {
                ChangeDirection::Increase => d >= min,
                ChangeDirection::Decrease => -d >= min,
                ChangeDirection::Change => d.abs() >= min,
            }))
        }
        _ => Err(GroundingError::EvidenceMismatch {
            expected: expected.kind(),
            got: evidence.kind(),
        }),
    }
}

/// The verdict one final evidence sample yields: true → confirmed, false → refuted, undefined →
/// inconclusive (never either of the others, INV-GND-001).
pub fn verdict_for(expected: &ExpectedChange, evidence: &Evidence) -> Result<Verdict, GroundingError> {
    Ok(match evaluate(expected, evidence)? {
        Some(true) => Verdict::Confirmed,
        Some(false) => Verdict::Refuted,
        None => Verdict::Inconclusive,
    })
}

/// One action awaiting its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCheck {
    pub action: ActionId,
    pub expected: ExpectedChange,
    pub issued_at: MonoTime,
    /// When the settle window closes and the latest sample decides.
    pub deadline: MonoTime,
    /// The latest sample's evaluation; `None` until a sample arrives.
    pub latest: Option<Option<bool>>,
}

/// Actions awaiting verification. Confirmation is immediate on the first sample showing the change;
/// refutation waits for the settle window to close (a change may take a few frames to appear); a window
/// that closes on an undefined sample, or with no sample at all, is inconclusive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verifier {
    pending: Vec<PendingCheck>,
}

impl Verifier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Start verifying `action`: its expected change is judged within `settle` of `now`.
    pub fn expect(
        &mut self,
        action: ActionId,
        expected: ExpectedChange,
        now: MonoTime,
        settle: Duration,
    ) -> Result<(), GroundingError> {
        if self.pending.iter().any(|p| p.action == action) {
            return Err(GroundingError::DuplicateAction(action.0));
        }
        self.pending.push(PendingCheck {
            action,
            expected,
            issued_at: now,
            deadline: now.plus(settle),
            latest: None,
        });
        Ok(())
    }

    /// Take one evidence sample. Returns the verdict when this sample decides it (confirmed at once, or
    /// the settle window has closed).
    pub fn observe(
        &mut self,
        action: ActionId,
        evidence: &Evidence,
        now: MonoTime,
    ) -> Result<Option<Verdict>, GroundingError> {
        let idx = self
            .pending
            .iter()
            .position(|p| p.action == action)
            .ok_or(GroundingError::UnknownAction(action.0))?;
        let sample = evaluate(&self.pending[idx].expected, evidence)?;
        self.pending[idx].latest = Some(sample);
        let verdict = match sample {
            Some(true) => Some(Verdict::Confirmed),
            _ if now >= self.pending[idx].deadline => Some(Self::closing_verdict(sample)),
            _ => None,
        };
        if verdict.is_some() {
            self.pending.remove(idx);
        }
        Ok(verdict)
    }

    /// Close every check whose settle window has passed (strictly: a sample taken at the deadline itself
    /// still counts through [`Verifier::observe`]), in issue order.
    pub fn expire(&mut self, now: MonoTime) -> Vec<(ActionId, Verdict)> {
        let mut out = Vec::new();
        self.pending.retain(|p| {
            if now > p.deadline {
                out.push((p.action, Self::closing_verdict(p.latest.flatten())));
                false
            } else {
                true
            }
        });
        out
    }

    /// Stop verifying an action (it was never executed); true if it was pending.
    pub fn cancel(&mut self, action: ActionId) -> bool {
        let before = self.pending.len();
        self.pending.retain(|p| p.action != action);
        before != self.pending.len()
    }

    pub fn pending(&self) -> &[PendingCheck] {
        &self.pending
    }

    fn closing_verdict(latest: Option<bool>) -> Verdict {
        match latest {
            Some(true) => Verdict::Confirmed,
            Some(false) => Verdict::Refuted,
            None => Verdict::Inconclusive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post() -> ExpectedChange {
        ExpectedChange::Postcondition {
            source: "door_open".into(),
        }
    }

    #[test]
    fn undefined_postcondition_is_inconclusive_never_refuted() {
        // INV-GND-001, FR-GND-006
        let v = verdict_for(&post(), &Evidence::Postcondition { value: None }).unwrap();
        assert_eq!(v, Verdict::Inconclusive);
        assert_eq!(
            verdict_for(&post(), &Evidence::Postcondition { value: Some(false) }).unwrap(),
            Verdict::Refuted
        );
        assert_eq!(
            verdict_for(&post(), &Evidence::Postcondition { value: Some(true) }).unwrap(),
            Verdict::Confirmed
        );
    }

    #[test]
    fn sensor_delta_directions_and_undefined() {
        // FR-GND-006
        let inc = ExpectedChange::SensorDelta {
            sensor: "gold".into(),
            direction: ChangeDirection::Increase,
            min_delta: 1.0,
        };
        let ev = |b, a| Evidence::SensorDelta { before: b, after: a };
        assert_eq!(
            verdict_for(&inc, &ev(Some(5.0), Some(6.0))).unwrap(),
            Verdict::Confirmed
        );
        assert_eq!(
            verdict_for(&inc, &ev(Some(5.0), Some(5.5))).unwrap(),
            Verdict::Refuted
        );
        assert_eq!(
            verdict_for(&inc, &ev(Some(5.0), None)).unwrap(),
            Verdict::Inconclusive
        ); // INV-GND-001
        assert_eq!(
            verdict_for(&inc, &ev(None, Some(9.0))).unwrap(),
            Verdict::Inconclusive
        );
        assert_eq!(
            verdict_for(&inc, &ev(Some(f64::NAN), Some(9.0))).unwrap(),
            Verdict::Inconclusive
        );
        let dec = ExpectedChange::SensorDelta {
            sensor: "hp".into(),
            direction: ChangeDirection::Decrease,
            min_delta: 0.0,
        };
        assert_eq!(
            verdict_for(&dec, &ev(Some(0.5), Some(0.4))).unwrap(),
            Verdict::Confirmed
        );
        assert_eq!(
            verdict_for(&dec, &ev(Some(0.5), Some(0.5))).unwrap(),
            Verdict::Refuted
        );
        let chg = ExpectedChange::SensorDelta {
            sensor: "x".into(),
            direction: ChangeDirection::Change,
            min_delta: 2.0,
        };
        assert_eq!(
            verdict_for(&chg, &ev(Some(5.0), Some(3.0))).unwrap(),
            Verdict::Confirmed
        );
        assert_eq!(
            verdict_for(&chg, &ev(Some(5.0), Some(4.0))).unwrap(),
            Verdict::Refuted
        );
    }

    #[test]
    fn element_changed_tristate() {
        // FR-GND-006, INV-GND-001
        let e = ExpectedChange::ElementChanged {
            element: ElementId(4),
        };
        assert_eq!(
            verdict_for(&e, &Evidence::ElementChanged { changed: Some(true) }).unwrap(),
            Verdict::Confirmed
        );
        assert_eq!(
            verdict_for(&e, &Evidence::ElementChanged { changed: Some(false) }).unwrap(),
            Verdict::Refuted
        );
        assert_eq!(
            verdict_for(&e, &Evidence::ElementChanged { changed: None }).unwrap(),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn mismatched_evidence_is_a_named_error() {
        let err = verdict_for(&post(), &Evidence::ElementChanged { changed: Some(true) }).unwrap_err();
        assert_eq!(
            err,
            GroundingError::EvidenceMismatch {
                expected: "postcondition",
                got: "element_changed"
            }
        );
    }

    #[test]
    fn verifier_confirms_at_once_and_refutes_only_at_deadline() {
        // FR-GND-006
        let mut v = Verifier::new();
        let t0 = MonoTime::from_millis(1000);
        v.expect(ActionId(1), post(), t0, Duration::from_millis(500))
            .unwrap();
        v.expect(ActionId(2), post(), t0, Duration::from_millis(500))
            .unwrap();
        assert!(v
            .expect(ActionId(2), post(), t0, Duration::from_millis(500))
            .is_err());
        let f = Evidence::Postcondition { value: Some(false) };
        let t = Evidence::Postcondition { value: Some(true) };
        assert_eq!(
            v.observe(ActionId(1), &f, MonoTime::from_millis(1100)).unwrap(),
            None
        );
        assert_eq!(
            v.observe(ActionId(2), &t, MonoTime::from_millis(1100)).unwrap(),
            Some(Verdict::Confirmed)
        );
        assert_eq!(v.pending().len(), 1);
        assert_eq!(
            v.observe(ActionId(1), &f, MonoTime::from_millis(1500)).unwrap(),
            Some(Verdict::Refuted)
        );
        assert!(v.pending().is_empty());
        assert_eq!(
            v.observe(ActionId(1), &f, MonoTime::from_millis(1600)),
            Err(GroundingError::UnknownAction(1))
        );
    }

    #[test]
    fn verifier_window_closing_on_undefined_or_silence_is_inconclusive() {
        // INV-GND-001
        let mut v = Verifier::new();
        let t0 = MonoTime::from_millis(0);
        v.expect(ActionId(1), post(), t0, Duration::from_millis(100))
            .unwrap();
        v.expect(ActionId(2), post(), t0, Duration::from_millis(100))
            .unwrap();
        v.expect(ActionId(3), post(), t0, Duration::from_millis(100))
            .unwrap();
        v.observe(
            ActionId(1),
            &Evidence::Postcondition { value: Some(false) },
            MonoTime::from_millis(20),
        )
        .unwrap();
        v.observe(
            ActionId(1),
            &Evidence::Postcondition { value: None },
            MonoTime::from_millis(40),
        )
        .unwrap();
        v.observe(
            ActionId(3),
            &Evidence::Postcondition { value: Some(false) },
            MonoTime::from_millis(40),
        )
        .unwrap();
        assert!(v.expire(MonoTime::from_millis(100)).is_empty());
        let out = v.expire(MonoTime::from_millis(101));
        assert_eq!(
            out,
            vec![
                (ActionId(1), Verdict::Inconclusive),
                (ActionId(2), Verdict::Inconclusive),
                (ActionId(3), Verdict::Refuted)
            ]
        );
        assert!(!v.cancel(ActionId(9)));
    }
}
