//! The tactical model host's health as the session sees it from its calls' outcomes: a prompt refused as
//! larger than the host's context (FR-CTX-004: shrink it once, then stop, named), a host that stopped
//! answering (stop, named, rather than idle to the budget), and a host the GPU-memory ladder is
//! restarting (no call starts meanwhile, FR-MODEL-004).

use crate::effect::SessionStop;
use crate::input::{FailureKind, TacticalFailure};
use gamepilot_core::MonoTime;

/// After a compaction the host may still refuse once (its own count differs from the estimate); the
/// second refusal in a row stops the session.
const OVERFLOW_STOP_STREAK: u32 = 2;
/// The host is taken as gone (killed, crashed) after this many unreachable/transport failures in a row
/// spanning at least `HOST_GONE_AFTER_MS`.
const HOST_GONE_STREAK: u32 = 4;
const HOST_GONE_AFTER_MS: u64 = 5_000;

/// What the session does about a failed call.
#[derive(Debug, Clone, PartialEq)]
pub enum HostVerdict {
    /// Ask again on the next tick.
    GoOn,
    /// The host refused the prompt as too large: compact and send less.
    Shrink,
    /// The session cannot go on with this host.
    Stop(SessionStop),
}

#[derive(Debug, Clone, Default)]
pub struct HostHealth {
    overflows: u32,
    /// Unreachable calls in a row, since when.
    unreachable: (u32, MonoTime),
    /// The degrade ladder is restarting the tactical host.
    pub restarting: bool,
}

impl HostHealth {
    /// A call answered: the streaks end.
    pub fn answered(&mut self) {
        self.overflows = 0;
        self.unreachable.0 = 0;
    }

    /// A call failed with `f` at `now`.
    pub fn failed(&mut self, f: &TacticalFailure, now: MonoTime) -> HostVerdict {
        if f.kind != FailureKind::Host {
            self.unreachable.0 = 0;
        }
        match f.kind {
            FailureKind::ContextOverflow => {
                self.overflows += 1;
                if self.overflows >= OVERFLOW_STOP_STREAK {
                    return HostVerdict::Stop(SessionStop::PromptTooLarge {
                        detail: format!(
                            "the host refused {} prompts in a row as larger than its context, even after compaction: {}",
                            self.overflows, f.message
                        ),
                    });
                }
                HostVerdict::Shrink
            }
            FailureKind::Host => {
                if self.unreachable.0 == 0 {
                    self.unreachable.1 = now;
                }
                self.unreachable.0 += 1;
                let (n, since) = self.unreachable;
                let span_ms = now.0.saturating_sub(since.0) / 1000;
                if n >= HOST_GONE_STREAK && span_ms >= HOST_GONE_AFTER_MS {
                    return HostVerdict::Stop(SessionStop::ModelHostGone {
                        detail: format!(
                            "{n} tactical calls in a row over {:.1} s could not reach the model host: {}",
                            span_ms as f64 / 1000.0,
                            f.message
                        ),
                    });
                }
                HostVerdict::GoOn
            }
            // A broken schema is counted by the caller; a slow or cancelled call, or a frame not
            // perceived: the next tick asks again.
            FailureKind::SchemaBroken
            | FailureKind::Timeout
            | FailureKind::Cancelled
            | FailureKind::Perception
            | FailureKind::NotAsked => HostVerdict::GoOn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: FailureKind) -> TacticalFailure {
        TacticalFailure {
            kind,
            message: "m".into(),
            latency_ms: 0.0,
        }
    }

    fn s(v: u64) -> MonoTime {
        MonoTime(v * 1_000_000)
    }

    #[test]
    fn a_refused_prompt_shrinks_once_then_stops_and_an_answer_forgives() {
        // FR-CTX-004
        let mut h = HostHealth::default();
        assert_eq!(
            h.failed(&failure(FailureKind::ContextOverflow), s(0)),
            HostVerdict::Shrink
        );
        h.answered();
        assert_eq!(
            h.failed(&failure(FailureKind::ContextOverflow), s(1)),
            HostVerdict::Shrink
        );
        assert!(matches!(
            h.failed(&failure(FailureKind::ContextOverflow), s(2)),
            HostVerdict::Stop(SessionStop::PromptTooLarge { .. })
        ));
    }

    #[test]
    fn a_host_that_stops_answering_stops_the_session_after_a_streak_spanning_five_seconds() {
        // FR-LOOP-008: a named stop instead of idling to the budget
        let mut h = HostHealth::default();
        for t in 0..4 {
            assert_eq!(
                h.failed(&failure(FailureKind::Host), s(t)),
                HostVerdict::GoOn,
                "{t} s"
            );
        }
        assert!(matches!(
            h.failed(&failure(FailureKind::Host), s(6)),
            HostVerdict::Stop(SessionStop::ModelHostGone { .. })
        ));
        let mut h = HostHealth::default();
        for t in 0..3 {
            h.failed(&failure(FailureKind::Host), s(t));
        }
        assert_eq!(
            h.failed(&failure(FailureKind::Timeout), s(4)),
            HostVerdict::GoOn,
            "another failure breaks the streak"
        );
        assert_eq!(h.failed(&failure(FailureKind::Host), s(9)), HostVerdict::GoOn);
    }
}
