//! What the reflex reports and the user answers, in the session: a reflex tick (sensors, goal check,
//! progress), the game in front or behind, the user's pause and resume, a held destructive action answered or
//! gone stale, an action the executor refused.

use super::*;

impl Session {
    pub(super) fn on_reflex(&mut self, r: ReflexReport, now: MonoTime, out: &mut Vec<Effect>) {
        self.numbers.held_inputs = r.held;
        if !r.sensors.is_empty() {
            self.numbers.sensors = r.sensors.clone();
        }
        out.push(Effect::Record(SessionRecord::ReflexTiming {
            tick: r.tick,
            late_us: r.late_us,
            ticks_since: r.ticks_since,
            held: r.held,
        }));
        if r.health != self.seen.health {
            out.push(Effect::Record(SessionRecord::Interlock {
                interlock: Safeguard::FrameHealth,
                detail: format!("{} -> {}", self.seen.health, r.health),
            }));
            self.seen.health = r.health;
        }
        if r.generation != self.seen.generation {
            self.seen.generation = r.generation;
            self.drop_stale_held(now, out);
        }
        self.actions
            .frame_seen(r.health.unreadable(), r.change == FrameChange::Scene);
        self.seen
            .freshness
            .reflex_reported(r.change == FrameChange::Scene, now);
        // A new screen with no action of ours pending: the clock to the first action starts (a screen an
        // action of ours is changing is that action's effect, not a new decision).
        if r.change == FrameChange::Scene {
            self.tactical.screen_appeared(now, !self.actions.is_idle());
        }
        self.on_front(r.foreground, now, out);
        if self.gates.waiting().is_some() {
            // Paused, or the game behind another window: nothing is judged, timed or started.
            return;
        }
        self.goal.last_met = r.goal_met;
        let goal_met = self.judge_agent_goal(r.goal_met, now, out);
        let progress = self
            .cfg
            .progress_sensor
            .as_ref()
            .or(self.goal.declared_progress.as_ref())
            .and_then(|p| r.sensors.iter().find(|(n, _)| n == p).and_then(|(_, v)| *v));
        if let Some(p) = progress {
            if self.ladder.last_progress.is_some_and(|last| p > last) {
                self.ladder.confirmed_since_progress = 0;
            }
            self.ladder.last_progress = Some(p);
        }
        self.feed(
            Event::ReflexTick {
                tick: r.tick,
                change: r.change,
                signature: r.signature,
                held: r.held,
                progress,
                goal_met,
                subgoal: r.subgoal,
            },
            now,
            out,
        );
    }

    /// The game went behind another window, or came back in front. Behind, the reflex withholds every
    /// input (FR-SAFE-004), so asking the model, judging actions or climbing the ladder would only blame
    /// the agent for what the foreground guard did: the session waits and says so.
    pub(super) fn on_front(&mut self, foreground: bool, now: MonoTime, out: &mut Vec<Effect>) {
        match self.gates.front(foreground, now) {
            Some(parts::FrontChange::WentBehind) => {
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: Safeguard::NotInFront,
                    detail: "the game is not in front: waiting for it (no model calls, verdicts or ladder)"
                        .into(),
                }));
            }
            Some(parts::FrontChange::BackAfter(waited)) => {
                self.shift_clocks(waited);
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: Safeguard::InFront,
                    detail: format!("the game is in front again after {:.1} s", waited.as_secs_f64()),
                }));
            }
            None => {}
        }
    }

    /// The user's resume after a pause: the loop's clocks move on by the pause (no budget spent, no
    /// stuck signal), the reflex resumes, and ticks start again.
    pub(super) fn on_resume(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(paused) = self.gates.resume(now) else {
            return;
        };
        self.shift_clocks(paused);
        out.push(Effect::Record(SessionRecord::Interlock {
            interlock: Safeguard::UserResume,
            detail: format!("resumed by the user after {:.1} s", paused.as_secs_f64()),
        }));
        out.push(Effect::Reflex(ReflexCommand::Pause { paused: false }));
    }

    /// A wait (the user's pause, the game behind another window) spent no budget and no stuck window.
    pub(super) fn shift_clocks(&mut self, paused: std::time::Duration) {
        self.state.resume_after_pause(paused);
        self.tactical.shift(paused);
    }

    /// A held destructive action grounded in an older transform chain is dropped (FR-PERC-002).
    pub(super) fn drop_stale_held(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        let stale = self.gates.held.as_ref().is_some_and(|h| {
            is_pointer(&h.grounded.intention.action) && h.grounded.generation < self.seen.generation
        });
        if !stale {
            return;
        }
        if let Some(h) = self.gates.held.take() {
            let reason = RejectReason::StaleGeneration {
                grounded: h.grounded.generation,
                current: self.seen.generation,
            }
            .to_string();
            self.numbers.actions.rejected += 1;
            out.push(Effect::Reflex(ReflexCommand::Pause { paused: false }));
            out.push(Effect::Record(SessionRecord::Interlock {
                interlock: Safeguard::DestructiveAction,
                detail: format!("{}: dropped while held: {reason}", h.grounded.label),
            }));
            self.context.record(HistoryEntry::new(
                now,
                h.grounded.label,
                format!("not executed: {reason}"),
            ));
        }
    }

    pub(super) fn on_rejected(
        &mut self,
        action: ActionId,
        rejection: RejectReason,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        if self.avatar.probe_running == Some(action) {
            self.avatar.probe_running = None;
            self.avatar.selfid.probe_lost();
        }
        let reason = rejection.to_string();
        if let Some(a) = self.actions.get(action) {
            // FR-ACT-006: the reason reaches the model's history; recorded as rejected, not executed.
            self.context.record(HistoryEntry::new(
                now,
                a.label.clone(),
                format!("rejected by the executor: {reason}"),
            ));
            out.push(Effect::Record(SessionRecord::Rejected {
                action,
                reason: reason.clone(),
            }));
            self.numbers.actions.rejected += 1;
        }
        self.feed(Event::ActionFailed { action, reason }, now, out);
        self.actions.settle(action);
    }

    pub(super) fn on_confirmation(&mut self, a: ConfirmationAnswer, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(h) = self.gates.held.take_if(|h| h.hold == a.hold) else {
            return;
        };
        out.push(Effect::Reflex(ReflexCommand::Pause { paused: false }));
        out.push(Effect::Record(SessionRecord::Interlock {
            interlock: Safeguard::DestructiveAction,
            detail: format!(
                "{} after {} ms: {} (matched {:?}: {:?})",
                h.grounded.label, a.waited_ms, a.reason, h.found.pattern, h.found.text
            ),
        }));
        if a.allowed {
            // Re-checked by the loop logic against the state as it is after the wait.
            self.propose(h.grounded, now, out);
        } else {
            self.numbers.actions.rejected += 1;
            self.context
                .record(HistoryEntry::new(now, h.grounded.label, a.reason));
        }
    }
}
