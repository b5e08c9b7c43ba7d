//! The session's state grouped by concern: the run's own counters and stop, the tactical tick's
//! bookkeeping, what was last seen, the escalation ladder's evidence, exploration, the goal's checks and
//! looks, the deliberation in flight, the gates that hold actions back, and the avatar's
//! self-identification. `Session` (the parent module) holds one of each.

use super::{AgentGoal, GroundedAction, HeldAction, TacticalInFlight};
use crate::effect::SessionStop;
use crate::safe_state::{SafeState, ScreenPrint};
use crate::scene::SceneKind;
use gamepilot_context::TacticalReply;
use gamepilot_core::{ElementId, FrameHealth, MonoTime};
use gamepilot_grounding::{ActionId, FailureHistogram};
use gamepilot_planner::{Event, Trigger};

/// The run as a whole: when it began, the ids it hands out, the host's budgets it started with, and why
/// it stopped.
pub(super) struct Run {
    /// When the session began (for the ladder's history).
    pub(super) began: MonoTime,
    pub(super) stop: Option<SessionStop>,
    pub(super) stopped_by: Option<String>,
    /// Loop events decided while applying commands, fed once the step's commands are applied.
    pub(super) deferred: Vec<Event>,
    pub(super) next_action: u64,
    pub(super) next_subgoal: u32,
    pub(super) next_hold: u64,
    pub(super) tactical_tick: u64,
    /// Second looks at the agent's goal check asked so far.
    pub(super) goal_looks: u64,
    /// Passes asking for the next step's check, so far.
    pub(super) step_checks: u64,
    /// The host's context as the session started (a degrade restore never goes past it).
    pub(super) host_context_tokens: u32,
    /// The visual budget the user configured (degrade steps scale it, FR-MODEL-004).
    pub(super) base_visual_pixels: u64,
}

impl Run {
    pub(super) fn new(began: MonoTime, host_context_tokens: u32, base_visual_pixels: u64) -> Run {
        Run {
            began,
            stop: None,
            stopped_by: None,
            deferred: Vec::new(),
            next_action: 1,
            next_subgoal: 1,
            next_hold: 1,
            tactical_tick: 0,
            goal_looks: 0,
            step_checks: 0,
            host_context_tokens,
            base_visual_pixels,
        }
    }
}

/// The tactical cadence's bookkeeping between ticks.
pub(super) struct Tactical {
    pub(super) in_flight: Option<TacticalInFlight>,
    pub(super) last_start: Option<MonoTime>,
    /// The model's last reply that was grounded into an action.
    pub(super) last_reply: Option<TacticalReply>,
    /// The ladder's retry rung: the last reply, grounded again on a fresh observation (FR-LOOP-006).
    pub(super) retry: Option<TacticalReply>,
    /// A choice made on a frame older than a change, checked again (no model call) on the next one.
    pub(super) recheck: Option<GroundedAction>,
    /// The sensors' values when the previous tactical call started ("was" in the model's observation).
    pub(super) sensors_at_last_call: Vec<(String, Option<f64>)>,
    /// Marks suppressed after their clicks were refuted.
    pub(super) excluded: Vec<ElementId>,
    /// Subgoals and the element names already clicked for them without a model call.
    /// Keyed by the step's words, not its id: a plan made again after the step's own click opened a menu
    /// names the same step, and clicking its element again would close that menu.
    pub(super) direct_done: Vec<(String, String)>,
    /// When the screen the agent has not acted on yet appeared (the session's start, a scene change).
    pub(super) new_screen_at: Option<MonoTime>,
    /// A click of this session was executed on an item of one of the game's menus: a goal that names a
    /// menu ("from the Type menu") may be done.
    pub(super) chosen_in_menu: bool,
}

impl Tactical {
    pub(super) fn new(start: MonoTime) -> Tactical {
        Tactical {
            in_flight: None,
            last_start: None,
            last_reply: None,
            retry: None,
            recheck: None,
            sensors_at_last_call: Vec::new(),
            excluded: Vec::new(),
            direct_done: Vec::new(),
            new_screen_at: Some(start),
            chosen_in_menu: false,
        }
    }

    /// The least interval between two ticks' starts has passed.
    pub(super) fn due(&self, now: MonoTime, interval_ms: u64) -> bool {
        self.last_start
            .is_none_or(|t| now.since(t).as_millis() as u64 >= interval_ms)
    }

    /// A wait of `paused` spent none of the interval.
    pub(super) fn shift(&mut self, paused: std::time::Duration) {
        if let Some(t) = self.last_start.as_mut() {
            *t = t.plus(paused);
        }
    }

    /// A new screen appeared: the clock to the first action starts, unless an action of ours is being
    /// verified (the screen is its effect, not a new decision) or the clock already runs.
    pub(super) fn screen_appeared(&mut self, now: MonoTime, acting: bool) {
        if !acting && self.new_screen_at.is_none() {
            self.new_screen_at = Some(now);
        }
    }

    /// The executor took an action: the ms since the screen it answers appeared, once per screen.
    pub(super) fn first_action(&mut self, now: MonoTime) -> Option<f64> {
        self.new_screen_at
            .take()
            .map(|since| now.since(since).as_secs_f64() * 1000.0)
    }

    /// The labels clicked without a model call for the step with this key.
    pub(super) fn clicked_for(&self, key: &str) -> Vec<String> {
        self.direct_done
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, label)| label.clone())
            .collect()
    }

    /// Every label clicked without a model call, for any step.
    pub(super) fn clicked_at_all(&self) -> Vec<String> {
        self.direct_done.iter().map(|(_, label)| label.clone()).collect()
    }

    /// `label` was clicked (or pressed) for the step with this key without a model call; false when it
    /// already was (once per step and label).
    pub(super) fn clicked(&mut self, key: String, label: String) -> bool {
        if self.direct_done.iter().any(|(k, l)| *k == key && *l == label) {
            return false;
        }
        self.direct_done.push((key, label));
        true
    }
}

/// What the latest perceived frame showed.
pub(super) struct Seen {
    /// Its print, to recognise a screen seen before.
    pub(super) print: Option<ScreenPrint>,
    /// Its text as the model reads it.
    pub(super) observation: String,
    /// Its size (the deliberative pass's picture is that frame).
    pub(super) frame_size: Option<gamepilot_core::Size>,
    pub(super) scene: Option<SceneKind>,
    /// Its elements: a declaration names one by its mark.
    pub(super) elements: Vec<gamepilot_vision::Element>,
    /// The window's transform generation (a window move or resize makes a new one).
    pub(super) generation: u64,
    pub(super) health: FrameHealth,
    /// When the frame of the tactical tick being acted on was captured.
    pub(super) at: Option<MonoTime>,
    /// Our inputs in flight and the screen's latest changes: a choice that could answer a dialogue is
    /// sent only when made on a frame that shows them (FR-SAFE-005).
    pub(super) freshness: crate::fresh::Freshness,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen {
            print: None,
            observation: String::from("(nothing observed yet)"),
            frame_size: None,
            scene: None,
            elements: Vec::new(),
            generation: 0,
            health: FrameHealth::Ok,
            at: None,
            freshness: crate::fresh::Freshness::default(),
        }
    }
}

/// The escalation ladder's state beside the loop logic's: the safe screen, research, and the evidence
/// failures are attributed by.
#[derive(Default)]
pub(super) struct Ladder {
    /// The safe-state rung's remembered screen and the way back to it (FR-LOOP-006).
    pub(super) safe: SafeState,
    /// The latest research question a deliberative reply wrote, asked when the ladder reaches research.
    pub(super) research_question: Option<String>,
    /// Research rungs reached so far; the second and later are deep research (FR-SKILL-004).
    pub(super) research_rungs: u32,
    /// Failures the session attributes itself (action choice, perception), beside the loop logic's.
    pub(super) extra_failures: FailureHistogram,
    /// Verdicts confirmed since the last progress-sensor increase (action choice evidence).
    pub(super) confirmed_since_progress: u32,
    pub(super) last_progress: Option<f64>,
}

/// Exploration without a model call: the like of a click that changed nothing, and the survey for a
/// model that is unsure.
#[derive(Default)]
pub(super) struct Exploration {
    /// After a click that changed nothing, the elements like it still to try (within the subgoal).
    pub(super) siblings: crate::explore::Explorer,
    pub(super) survey: crate::survey::Survey,
}

/// The goal's own checks when the agent declares them, its steps, and the looks that confirm them.
pub(super) struct GoalChecks {
    /// The user's sensors and the agent's own, when the agent declares its checks.
    pub(super) declarations: Option<crate::declare::Declarations>,
    /// The goal's check the agent declared, once accepted.
    pub(super) agent_goal: Option<AgentGoal>,
    /// The pass of the second look at the agent's goal check in flight.
    pub(super) look: Option<u64>,
    /// The agent's goal check read true at this time: its second look waits for a frame perceived after.
    pub(super) look_wanted: Option<MonoTime>,
    /// The pass asking for the next step's check, in flight.
    pub(super) step_check: Option<u64>,
    /// Times the current declaring pass was asked again after a reply that could not be adopted.
    pub(super) declare_attempts: u32,
    /// The goal read as steps; the agent's goal check is for `step`, the goal met with the last.
    pub(super) steps: Vec<String>,
    pub(super) step: usize,
    /// With no progress sensor given, the first counter the agent declared to rise serves as one.
    pub(super) declared_progress: Option<String>,
    /// The goal check's last reading.
    pub(super) last_met: Option<bool>,
}

impl GoalChecks {
    pub(super) fn new(declarations: Option<crate::declare::Declarations>, goal: &str) -> GoalChecks {
        GoalChecks {
            declarations,
            agent_goal: None,
            look: None,
            look_wanted: None,
            step_check: None,
            declare_attempts: 0,
            steps: crate::goal_steps::goal_steps(goal),
            step: 0,
            declared_progress: None,
            last_met: None,
        }
    }
}

/// The deliberative pass in flight and the ones waiting.
#[derive(Default)]
pub(super) struct Deliberation {
    /// The pass and trigger of the deliberation last started, and whether its plan was already refused
    /// once as degenerate and asked again (asked again once, then the pass fails).
    pub(super) running: Option<(u64, Trigger, bool)>,
    /// A planner's pass to ask again once the host is free of looks and step checks.
    pub(super) deferred_pass: Option<(u64, Trigger)>,
    /// Since when the start pass's job waits for the first screen (see `release_start_pass`).
    pub(super) start_pass_waiting: Option<MonoTime>,
}

/// What holds actions back: a destructive action waiting for the user, the user's own input, the game
/// not in front.
#[derive(Default)]
pub(super) struct Gates {
    pub(super) held: Option<HeldAction>,
    /// Since when the user's input has the session paused (FR-SAFE-002); `None` when not paused.
    user_paused: Option<MonoTime>,
    /// Since when the game has not been in front (another window has the focus).
    behind: Option<MonoTime>,
}

/// The game's place in front changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FrontChange {
    /// It went behind another window: the session waits from now.
    WentBehind,
    /// It is in front again after this long.
    BackAfter(std::time::Duration),
}

impl Gates {
    /// Why nothing is executed, judged or started now (the user's pause first); `None` when the way is
    /// open.
    pub(super) fn waiting(&self) -> Option<&'static str> {
        match (self.user_paused, self.behind) {
            (Some(_), _) => Some("the user paused the session"),
            (None, Some(_)) => Some("the game is not in front"),
            (None, None) => None,
        }
    }

    pub(super) fn user_paused(&self) -> bool {
        self.user_paused.is_some()
    }

    pub(super) fn behind(&self) -> bool {
        self.behind.is_some()
    }

    /// The user's input paused the session at `now` (a second pause keeps the first's time).
    pub(super) fn pause(&mut self, now: MonoTime) {
        self.user_paused.get_or_insert(now);
    }

    /// The user resumed at `now`: how long the pause lasted, `None` when there was none.
    pub(super) fn resume(&mut self, now: MonoTime) -> Option<std::time::Duration> {
        self.user_paused.take().map(|since| now.since(since))
    }

    /// The reflex saw the game in front (`foreground`) or not at `now`: what changed, if anything.
    pub(super) fn front(&mut self, foreground: bool, now: MonoTime) -> Option<FrontChange> {
        match (foreground, self.behind) {
            (false, None) => {
                self.behind = Some(now);
                Some(FrontChange::WentBehind)
            }
            (true, Some(since)) => {
                self.behind = None;
                Some(FrontChange::BackAfter(now.since(since)))
            }
            _ => None,
        }
    }
}

/// Self-identification and its probe holds.
pub(super) struct Avatar {
    /// Self-identification and the avatar it found.
    pub(super) selfid: crate::selfid::SelfId,
    /// The probe hold in progress: the next perceive-only tick waits for its end (its verdict can
    /// come while the key is still held).
    pub(super) probe_running: Option<ActionId>,
    /// The current probe's held keys and their verdicts, told to the model in one history line at its
    /// end ([`crate::selfid::probe_told`]).
    pub(super) probe_holds: Vec<(String, gamepilot_grounding::Verdict)>,
}

impl Avatar {
    pub(super) fn new(steering: Option<crate::selfid::SteeringConfig>) -> Avatar {
        Avatar {
            selfid: crate::selfid::SelfId::new(steering),
            probe_running: None,
            probe_holds: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> MonoTime {
        MonoTime(ms * 1000)
    }

    #[test]
    fn the_gates_say_why_nothing_runs_and_how_long_each_wait_lasted() {
        // FR-SAFE-002 (the user's pause), FR-SAFE-004 (the game not in front)
        let mut g = Gates::default();
        assert_eq!(g.waiting(), None);
        assert_eq!(g.front(true, at(0)), None, "in front already");
        assert_eq!(g.front(false, at(100)), Some(FrontChange::WentBehind));
        assert_eq!(g.front(false, at(150)), None, "still behind: said once");
        assert_eq!(g.waiting(), Some("the game is not in front"));
        g.pause(at(200));
        g.pause(at(300));
        assert_eq!(
            g.waiting(),
            Some("the user paused the session"),
            "the pause first"
        );
        assert_eq!(
            g.front(true, at(400)),
            Some(FrontChange::BackAfter(std::time::Duration::from_millis(300)))
        );
        assert!(g.user_paused() && !g.behind());
        assert_eq!(
            g.resume(at(1200)),
            Some(std::time::Duration::from_millis(1000)),
            "from the first pause"
        );
        assert_eq!(g.resume(at(1300)), None);
        assert_eq!(g.waiting(), None);
    }

    #[test]
    fn the_tactical_bookkeeping_times_the_first_action_and_clicks_a_label_once_per_step() {
        // The latency a player feels: from a new screen to the first action taken on it.
        let mut t = Tactical::new(at(0));
        assert_eq!(
            t.first_action(at(900)),
            Some(900.0),
            "the session's start is a new screen"
        );
        assert_eq!(t.first_action(at(1000)), None, "once per screen");
        t.screen_appeared(at(2000), true);
        assert_eq!(
            t.first_action(at(2500)),
            None,
            "a screen our action is changing is its effect"
        );
        t.screen_appeared(at(3000), false);
        t.screen_appeared(at(3200), false);
        assert_eq!(
            t.first_action(at(4000)),
            Some(1000.0),
            "timed from the first of them"
        );
        // The least interval between starts, and a wait that spent none of it.
        assert!(t.due(at(0), 300));
        t.last_start = Some(at(5000));
        assert!(!t.due(at(5200), 300) && t.due(at(5300), 300));
        t.shift(std::time::Duration::from_millis(1000));
        assert!(!t.due(at(6200), 300) && t.due(at(6300), 300));
        // A label is clicked without a model call once per step (its key), not once per session.
        assert!(t.clicked("type menu".into(), "type".into()));
        assert!(!t.clicked("type menu".into(), "type".into()));
        assert!(t.clicked("new game".into(), "type".into()));
        assert!(t.clicked("new game".into(), "new".into()));
        assert_eq!(
            t.clicked_for("new game"),
            vec!["type".to_string(), "new".to_string()]
        );
        assert_eq!(t.clicked_for("other"), Vec::<String>::new());
        assert_eq!(t.clicked_at_all().len(), 3);
    }
}
