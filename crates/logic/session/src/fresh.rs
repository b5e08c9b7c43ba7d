//! Whether the screen an action was chosen on is still the screen the game shows (FR-SAFE-005): a key,
//! click or typed text that could answer a dialogue is only sent when it was chosen on a frame captured
//! after every earlier input of ours had ended (and the game had a moment to draw its answer) and after
//! the last scene change the reflex saw. A click is verified by its first visible change (a button's
//! hover), which comes before its release opens a dialogue; without this, the next action was chosen on
//! the screen before the dialogue and answered it unseen.

use gamepilot_core::{ActionId, MonoTime};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long after our last input ends the game is given to draw what it did before a frame counts as
/// showing it.
pub const SETTLE_AFTER_INPUT: Duration = Duration::from_millis(150);
/// An input whose end never arrives (a report lost with a dying reflex) stops holding the next tick back
/// after this long.
pub const INPUT_END_BOUND: Duration = Duration::from_secs(20);
/// Stale choices put back in a row before one is let through to the dialogue check on its own frame
/// (a screen that never stops changing must not stop the agent).
pub const MAX_STALE_IN_A_ROW: u32 = 3;
/// A tick waits for the reflex's first frame at most this long (a reflex that never reports must not
/// stop the agent; the session hears of a dead reflex thread on its own). Checked when the session steps
/// an input: the wiring's other inputs (the first plan, a host's warm-up) wake it meanwhile.
pub const FIRST_FRAME_BOUND: Duration = Duration::from_secs(2);

/// Our inputs in flight and the latest moments the screen could have changed under a choice.
#[derive(Debug, Clone, Default)]
pub struct Freshness {
    /// Actions handed to the executor whose input has not ended, with when they were handed over.
    running: BTreeMap<ActionId, MonoTime>,
    /// When the latest of our inputs ended.
    input_ended: Option<MonoTime>,
    /// When the reflex last reported a scene change.
    scene_changed: Option<MonoTime>,
    /// Choices put back as stale since the last one sent.
    stale_in_a_row: u32,
    /// Whether the reflex has reported a frame: its first report compares its frame with none, so a
    /// frame captured before it could show a screen the reflex never saw change.
    reflex_reported: bool,
    /// When a tick first waited for the reflex's first frame.
    waiting_since: Option<MonoTime>,
}

/// What to do with a choice that could answer a dialogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Chosen on a current frame: go on (the dialogue check reads that frame).
    Current,
    /// Chosen on a frame older than a change: not sent; checked again on a fresh frame. Says why.
    Stale(String),
}

impl Freshness {
    /// An action's input was handed to the executor.
    pub fn submitted(&mut self, action: ActionId, now: MonoTime) {
        self.running.insert(action, now);
    }

    /// An action's input ended (finished, cancelled or rejected by the executor).
    pub fn ended(&mut self, action: ActionId, now: MonoTime) {
        if self.running.remove(&action).is_some() {
            self.input_ended = Some(now);
        }
    }

    /// The executor refused an action: no input of it was sent.
    pub fn refused(&mut self, action: ActionId) {
        self.running.remove(&action);
    }

    /// The reflex reported a frame; `scene` when it saw a scene change (its first report always does:
    /// there is no frame before it).
    pub fn reflex_reported(&mut self, scene: bool, now: MonoTime) {
        self.reflex_reported = true;
        if scene {
            self.scene_changed = Some(now);
        }
    }

    /// Whether a frame captured now would show the effect of every input of ours and be one the reflex
    /// judges changes against: the reflex has reported its first frame (or [`FIRST_FRAME_BOUND`] passed
    /// waiting for it), none of our inputs is running (inputs past [`INPUT_END_BOUND`] are forgotten) and
    /// the last ended at least [`SETTLE_AFTER_INPUT`] ago. Without the first condition the session's first
    /// screen, captured before the reflex's first frame, read as older than a scene change (that first
    /// frame) and its first choice was made twice.
    pub fn ready_for_frame(&mut self, now: MonoTime) -> bool {
        let reflex =
            self.reflex_reported || now.since(*self.waiting_since.get_or_insert(now)) >= FIRST_FRAME_BOUND;
        self.running.retain(|_, at| now.since(*at) < INPUT_END_BOUND);
        reflex
            && self.running.is_empty()
            && self
                .input_ended
                .is_none_or(|t| now.since(t) >= SETTLE_AFTER_INPUT)
    }

    /// Judge a choice that could answer a dialogue, made on a frame captured at `seen`.
    pub fn judge(&mut self, seen: MonoTime) -> Judgement {
        let drawn = self.input_ended.map(|t| t.plus(SETTLE_AFTER_INPUT));
        let why = if !self.running.is_empty() {
            Some("an earlier input of ours was still being sent".to_string())
        } else if let Some(drawn) = drawn.filter(|d| seen < *d) {
            Some(format!(
                "its frame was captured {} ms before the game had drawn the effect of the previous input",
                drawn.since(seen).as_millis()
            ))
        } else {
            self.scene_changed.filter(|t| seen < *t).map(|t| {
                format!(
                    "the screen changed {} ms after its frame was captured",
                    t.since(seen).as_millis()
                )
            })
        };
        match why {
            Some(why) if self.stale_in_a_row < MAX_STALE_IN_A_ROW => {
                self.stale_in_a_row += 1;
                Judgement::Stale(why)
            }
            _ => {
                self.stale_in_a_row = 0;
                Judgement::Current
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> MonoTime {
        MonoTime(n * 1000)
    }

    #[test]
    fn a_frame_counts_only_after_our_input_ended_and_the_game_drew() {
        // FR-SAFE-005: the click on Shop was confirmed by its hover before its release opened the dialogue
        let mut f = Freshness::default();
        f.reflex_reported(true, ms(0));
        assert!(f.ready_for_frame(ms(0)));
        f.submitted(ActionId(1), ms(100));
        assert!(!f.ready_for_frame(ms(200)), "the click is still being sent");
        f.ended(ActionId(1), ms(400));
        assert!(
            !f.ready_for_frame(ms(450)),
            "the game has not drawn its answer yet"
        );
        assert!(f.ready_for_frame(ms(400 + 150)));
        // An end that never comes stops holding the agent back after its bound.
        f.submitted(ActionId(2), ms(1000));
        assert!(!f.ready_for_frame(ms(5000)));
        assert!(f.ready_for_frame(ms(1000 + 20_000)));
    }

    #[test]
    fn a_choice_made_on_an_older_frame_is_stale() {
        // FR-SAFE-005: a key chosen on the menu's frame must not land on the dialogue that followed
        let mut f = Freshness::default();
        f.submitted(ActionId(1), ms(100));
        assert!(matches!(f.judge(ms(150)), Judgement::Stale(w) if w.contains("still being sent")));
        f.ended(ActionId(1), ms(400));
        assert!(matches!(f.judge(ms(300)), Judgement::Stale(w) if w.contains("before the game had drawn")));
        assert_eq!(f.judge(ms(600)), Judgement::Current);
        f.reflex_reported(true, ms(800));
        assert!(matches!(f.judge(ms(700)), Judgement::Stale(w) if w.contains("100 ms after")));
        assert_eq!(f.judge(ms(850)), Judgement::Current);
    }

    #[test]
    fn the_first_frame_is_captured_after_the_reflex_first_reported() {
        // FR-SAFE-005: the reflex's first report is a scene change by construction (no frame before it);
        // a frame captured before it would be judged stale and the first choice made twice
        let mut f = Freshness::default();
        assert!(!f.ready_for_frame(ms(10)), "the reflex has not seen a frame yet");
        f.reflex_reported(true, ms(360));
        assert!(f.ready_for_frame(ms(361)));
        assert_eq!(
            f.judge(ms(362)),
            Judgement::Current,
            "captured after that first frame"
        );
        // A reflex that never reports does not stop the agent.
        let mut silent = Freshness::default();
        assert!(!silent.ready_for_frame(ms(100)));
        assert!(!silent.ready_for_frame(ms(2_000)));
        assert!(silent.ready_for_frame(ms(2_100)));
    }

    #[test]
    fn a_screen_that_never_settles_does_not_stop_the_agent() {
        let mut f = Freshness::default();
        f.reflex_reported(true, ms(1000));
        for _ in 0..MAX_STALE_IN_A_ROW {
            assert!(matches!(f.judge(ms(900)), Judgement::Stale(_)));
        }
        assert_eq!(
            f.judge(ms(900)),
            Judgement::Current,
            "let through to the dialogue check"
        );
        assert!(
            matches!(f.judge(ms(900)), Judgement::Stale(_)),
            "the count starts again"
        );
    }
}
