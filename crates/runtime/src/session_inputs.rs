//! The threads' typed messages as the session's typed inputs (issue 12): a reflex report, an executor
//! rejection, a frame state, a GPU degrade command each become the `gamepilot_session::Input` the loop
//! steps, so the binary's loop only forwards them.

use crate::reflex::{self, FromReflex};
use gamepilot_session::{Input, ReflexFeed};

/// One reflex message as session inputs: ticks through the feed (~10 Hz), the rest at once.
pub fn reflex_input(m: FromReflex, feed: &mut ReflexFeed) -> Vec<Input> {
    use gamepilot_session::{ActionEnd, InterlockKind, ReflexReport, ReflexStats};
    match m {
        FromReflex::Tick {
            tick,
            change,
            signature,
            held,
            goal_met,
            subgoal,
            sensors,
            late_us,
            health,
            generation,
            foreground,
        } => feed
            .tick(ReflexReport {
                tick,
                change: frame_change(change),
                signature,
                held,
                goal_met,
                subgoal: subgoal.map(|(subgoal, met)| gamepilot_planner::SubgoalCheck { subgoal, met }),
                sensors,
                late_us,
                ticks_since: 1,
                generation,
                health: frame_health(&health),
                foreground,
            })
            .map(Input::Reflex)
            .into_iter()
            .collect(),
        FromReflex::Submitted { tag, result: Err(r) } => vec![Input::ActionRejected {
            action: tag,
            rejection: rejection_of(&r.reason),
        }],
        FromReflex::Submitted { tag, result: Ok(()) } => vec![Input::ActionAccepted { action: tag }],
        FromReflex::Finished { tag, end } => {
            let end = match &end {
                e if e.is_finished() => ActionEnd::Finished,
                reflex::ActionEnd::Finished => ActionEnd::Finished,
                reflex::ActionEnd::Cancelled { .. } | reflex::ActionEnd::ForcedRelease { .. } => {
                    ActionEnd::Cancelled {
                        reason: format!("{end:?}"),
                    }
                }
                reflex::ActionEnd::Blocked { reason } => ActionEnd::Blocked {
                    reason: reason.to_string(),
                },
            };
            vec![Input::ActionEnded { action: tag, end }]
        }
        FromReflex::Evidence { tag, changed } => vec![Input::Evidence { action: tag, changed }],
        FromReflex::Steered { tag, end, sightings } => vec![Input::Steered {
            action: tag,
            end,
            sightings,
        }],
        FromReflex::Interlock { interlock, detail } => {
            let kind = match interlock {
                reflex::InterlockKind::UserInput => InterlockKind::UserInput,
                reflex::InterlockKind::Halt(_) => InterlockKind::Halt,
                reflex::InterlockKind::GuardianGone => InterlockKind::GuardianGone,
                reflex::InterlockKind::FocusLost => InterlockKind::FocusLost,
                reflex::InterlockKind::DeniedKey => InterlockKind::DeniedKey,
                reflex::InterlockKind::MaxHold => InterlockKind::MaxHold,
                reflex::InterlockKind::FrameHealth(_) => InterlockKind::FrameHealth,
                reflex::InterlockKind::WindowChanged { .. } => InterlockKind::WindowChanged,
                reflex::InterlockKind::HeldDivergence => InterlockKind::HeldDivergence,
            };
            // The reflex's and the session's ideas of a stopping interlock agree.
            debug_assert_eq!(kind.stops_session(), interlock.stops_session());
            vec![Input::Interlock { kind, detail }]
        }
        FromReflex::CaptureFailed { problem, detail } => vec![Input::Interlock {
            kind: InterlockKind::CaptureFailed,
            detail: match problem {
                Some(p) => format!("{p:?}: {detail}"),
                None => detail,
            },
        }],
        FromReflex::WindowGone => vec![Input::WindowGone],
        FromReflex::Failed { detail } => vec![Input::Stop {
            reason: gamepilot_session::ExternalStop::WorkerDied {
                worker: "reflex".into(),
                detail,
            },
        }],
        FromReflex::Stopped {
            lateness_p50_us,
            lateness_p99_us,
            ticks,
            events,
        } => vec![Input::ReflexStopped(ReflexStats {
            ticks,
            lateness_p50_us,
            lateness_p99_us,
            events,
        })],
    }
}

/// The session's frame health for the reflex's frame state (FR-PERC-009).
fn frame_health(s: &reflex::FrameState) -> gamepilot_session::FrameHealth {
    use gamepilot_session::FrameHealth;
    match s {
        reflex::FrameState::Ok => FrameHealth::Ok,
        reflex::FrameState::Black => FrameHealth::Black,
        reflex::FrameState::Frozen => FrameHealth::Frozen,
        reflex::FrameState::Occluded => FrameHealth::Occluded,
        reflex::FrameState::CaptureError | reflex::FrameState::Unsupported { .. } => {
            FrameHealth::CaptureError
        }
    }
}

/// The session's rejection for the executor's typed reason (FR-ACT-006).
fn rejection_of(r: &gamepilot_executor::RejectReason) -> gamepilot_session::Rejection {
    use gamepilot_executor::RejectReason as E;
    use gamepilot_session::Rejection;
    let detail = r.to_string();
    match r {
        E::DeniedChord { chord } => Rejection::DeniedKey { chord: chord.clone() },
        E::ActionRateExceeded { .. } => Rejection::RateLimited { detail },
        E::HoldTooLong { .. } | E::WaitTooLong { .. } => Rejection::MaxHold { detail },
        E::StaleGeneration { grounded, current } => Rejection::StaleGeneration {
            grounded: *grounded,
            current: *current,
        },
        E::NotForeground | E::Halted | E::Paused => Rejection::Interlocked { detail },
        _ => Rejection::Invalid { detail },
    }
}

/// A GPU-memory degrade command as the session's degrade step (FR-MODEL-004).
pub fn degrade_step(c: &gamepilot_model::DegradeCommand) -> gamepilot_session::DegradeStep {
    use gamepilot_model::DegradeCommand as D;
    let (visual_factor, context_tokens) = match c {
        D::ReduceVisualBudget { factor } => (Some(*factor), None),
        D::RestoreVisualBudget => (Some(1.0), None),
        D::ReduceContext { to_tokens } | D::RestoreContext { to_tokens } => (None, Some(*to_tokens)),
        D::MoveDeliberativeOffGpu | D::RestoreDeliberativeGpu => (None, None),
    };
    gamepilot_session::DegradeStep {
        level: format!("{c:?}"),
        visual_factor,
        context_tokens,
    }
}

/// A host restart of the degrade ladder as the session's input.
pub fn host_restart(n: &gamepilot_model::HostNotice) -> gamepilot_session::HostRestart {
    gamepilot_session::HostRestart {
        host: n.role.as_str().to_string(),
        restarting: n.done.is_none(),
        failed: n.done.as_ref().and_then(|d| d.as_ref().err().cloned()),
        detail: n.describe(),
    }
}

fn frame_change(c: gamepilot_vision::FrameClass) -> gamepilot_planner::FrameChange {
    use gamepilot_planner::FrameChange;
    match c {
        gamepilot_vision::FrameClass::Unchanged => FrameChange::Unchanged,
        gamepilot_vision::FrameClass::Local => FrameChange::Local,
        gamepilot_vision::FrameClass::Motion => FrameChange::Motion,
        gamepilot_vision::FrameClass::Scene => FrameChange::Scene,
    }
}
