//! The escalation ladder (FR-LOOP-006): retry → alternative action → replan → research → return to a safe
//! state → stop and notify, advancing one rung only when the previous rung failed.

use gamepilot_core::MonoTime;
use serde::{Deserialize, Serialize};

/// One rung of the ladder, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rung {
    Retry,
    AlternativeAction,
    Replan,
    Research,
    SafeState,
    StopAndNotify,
}

impl Rung {
    pub const ALL: [Rung; 6] = [
        Rung::Retry,
        Rung::AlternativeAction,
        Rung::Replan,
        Rung::Research,
        Rung::SafeState,
        Rung::StopAndNotify,
    ];

    /// The rung after this one; the last rung has none.
    pub fn next(self) -> Option<Rung> {
        let i = Rung::ALL.iter().position(|r| *r == self)?;
        Rung::ALL.get(i + 1).copied()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Rung::Retry => "retry",
            Rung::AlternativeAction => "alternative_action",
            Rung::Replan => "replan",
            Rung::Research => "research",
            Rung::SafeState => "safe_state",
            Rung::StopAndNotify => "stop_and_notify",
        }
    }
}

/// The ladder's position: idle, or on a rung since some time and awaiting its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ladder {
    current: Option<(Rung, MonoTime)>,
}

impl Ladder {
    pub fn current(&self) -> Option<Rung> {
        self.current.map(|(r, _)| r)
    }

    pub fn since(&self) -> Option<MonoTime> {
        self.current.map(|(_, t)| t)
    }

    /// Move the current rung's start on by `by` (a pause the user took).
    pub fn shift_clock(&mut self, by: std::time::Duration) {
        if let Some((_, t)) = self.current.as_mut() {
            *t = t.plus(by);
        }
    }

    /// No progress was detected, or the current rung failed: climb one rung (from idle: the first).
    /// Returns the new rung; on the last rung it stays there.
    pub fn climb(&mut self, now: MonoTime) -> Rung {
        let next = match self.current {
            None => Rung::Retry,
            Some((r, _)) => r.next().unwrap_or(Rung::StopAndNotify),
        };
        self.current = Some((next, now));
        next
    }

    /// The current rung produced something (research found sources): it starts over on the same rung,
    /// timed from `now`. Idle stays idle.
    pub fn restart(&mut self, now: MonoTime) {
        if let Some((r, _)) = self.current {
            self.current = Some((r, now));
        }
    }

    /// Progress was made: the current rung worked and the ladder returns to idle. Returns that rung.
    pub fn succeeded(&mut self) -> Option<Rung> {
        self.current.take().map(|(r, _)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn climbs_in_order_and_resets_on_success() {
        // FR-LOOP-006
        let mut l = Ladder::default();
        let t = MonoTime::ZERO;
        let climbed: Vec<Rung> = (0..7).map(|_| l.climb(t)).collect();
        assert_eq!(
            climbed,
            vec![
                Rung::Retry,
                Rung::AlternativeAction,
                Rung::Replan,
                Rung::Research,
                Rung::SafeState,
                Rung::StopAndNotify,
                Rung::StopAndNotify
            ]
        );
        assert_eq!(l.succeeded(), Some(Rung::StopAndNotify));
        assert_eq!(l.current(), None);
        assert_eq!(l.climb(MonoTime::from_millis(5)), Rung::Retry);
        assert_eq!(l.since(), Some(MonoTime::from_millis(5)));
        assert_eq!(Rung::SafeState.next(), Some(Rung::StopAndNotify));
        assert_eq!(Rung::StopAndNotify.next(), None);
    }

    #[test]
    fn restart_keeps_the_rung_and_resets_its_time() {
        // FR-LOOP-006
        let mut l = Ladder::default();
        l.restart(MonoTime::from_millis(3));
        assert_eq!(l.current(), None);
        for _ in 0..4 {
            l.climb(MonoTime::from_millis(1));
        }
        l.restart(MonoTime::from_millis(9));
        assert_eq!(l.current(), Some(Rung::Research));
        assert_eq!(l.since(), Some(MonoTime::from_millis(9)));
    }
}
