//! The escalation ladder's safe-state rung in the session: begun where the screen is known, one step back per
//! fresh observation, arrival known by the screen itself (`safe_state.rs`).

use super::*;

impl Session {
    /// The safe-state rung begins: nothing to return to fails it at once; already there, the model is
    /// told; otherwise the next tactical ticks only perceive and step back.
    pub(super) fn begin_safe_return(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if let Some(note) = self
            .explore
            .survey
            .abandon("the ladder goes back to the safe screen")
        {
            out.push(Effect::Record(SessionRecord::Note { text: note }));
        }
        let (note, failed) = match self.ladder.safe.begin(self.seen.print.as_ref()) {
            Begin::NoSafeScreen => (
                "safe state: no screen of this session had a confirmed action to return to".to_string(),
                true,
            ),
            Begin::AlreadyThere(p) => (format!("safe state: already on {}", p.describe()), false),
            Begin::Returning(p) => (format!("safe state: going back to {}", p.describe()), false),
        };
        self.safe_note(&note, now, out);
        if failed {
            self.run.deferred.push(Event::RungFailed {
                rung: Rung::SafeState,
                reason: note,
            });
        }
    }

    /// One step back to the safe screen, decided on a fresh observation (a perceive-only tick).
    pub(super) fn step_back(
        &mut self,
        obs: &Observation,
        scene: SceneKind,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let reply = match self.ladder.safe.step(obs, scene) {
            None => return,
            Some(SafeStep::Arrived(p)) => {
                let note = format!(
                    "safe state: back on {}, where an action worked before; plan from here",
                    p.describe()
                );
                self.safe_note(&note, now, out);
                // Arrival verified by the screen itself is the rung's success, whatever the verdict of the
                // last step back.
                return self.feed(
                    Event::RungDone {
                        rung: Rung::SafeState,
                        evidence: note,
                    },
                    now,
                    out,
                );
            }
            Some(SafeStep::GiveUp(why)) => {
                let note = format!("safe state not reached: {why}");
                self.safe_note(&note, now, out);
                return self.feed(
                    Event::RungFailed {
                        rung: Rung::SafeState,
                        reason: note,
                    },
                    now,
                    out,
                );
            }
            Some(SafeStep::Press(action)) => TacticalReply::Act(action),
            Some(SafeStep::Click(mark, _)) => TacticalReply::ClickMark {
                mark,
                button: gamepilot_core::MouseButton::Left,
            },
        };
        if let Some(mut grounded) = self.ground(&reply, obs, false, generation, now) {
            grounded.label = format!("safe state: {}", grounded.label);
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("{} (a step back)", grounded.label),
            }));
            self.act_on(grounded, obs, generation, now, out);
        }
    }

    /// What the safe-state rung did, for the recording and, as a history line, for the model.
    pub(super) fn safe_note(&mut self, note: &str, now: MonoTime, out: &mut Vec<Effect>) {
        out.push(Effect::Record(SessionRecord::Note {
            text: note.to_string(),
        }));
        self.context.record(HistoryEntry::new(
            now,
            "escalation: safe state".to_string(),
            note.to_string(),
        ));
    }
}
