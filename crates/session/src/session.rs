//! The session core: `Session::step(Input, now) -> Vec<Effect>`. It owns every decision of a running
//! session that is not the loop logic's own (`gamepilot_planner::LoopState`, which it wraps and feeds):
//! the action from proposal to verdict (one id), grounding a reply to a capture-space action with its
//! expected change, the destructive-action hold, the context (plan block, history, notes, research,
//! compaction, bounded observation text), when tactical ticks start, and the status numbers.

use crate::destructive::{self, DestructiveMatch, DESTRUCTIVE_RADIUS_PX};
use crate::effect::{
    ConfirmationJob, DeliberationJob, Effect, ReflexCommand, ResearchJob, SessionRecord, SessionStop,
    TacticalJob,
};
use crate::host_health::{HostHealth, HostVerdict};
use crate::input::{
    ConfirmationAnswer, FailureKind, Input, ModelReply, PlanOutcome, ReflexReport, ReflexStats,
    ResearchFindings, TacticalFailure, TacticalOutcome,
};
use crate::safe_state::{Begin, SafeState, ScreenPrint, Step as SafeStep};
use crate::scene::{scene_kind, SceneKind};
use crate::SessionError;
use gamepilot_context::{
    Cadence, CompactionInput, Context, ContextConfig, HistoryEntry, ObservationText, PlanBlock as CtxPlan,
    PlanStep, ResearchExcerpt, SchemaLimits, StepStatus, TacticalReply, Tool, ToolSet,
};
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::{ElementId, FrameHealth, Interlock, MonoTime, Point, Rect, Safeguard, SubgoalId};
use gamepilot_executor::RejectReason;
use gamepilot_grounding::{
    ActionId, ChangeDirection, Evidence, ExpectedChange, FailureCause, FailureFacts, FailureHistogram,
    GroundingPath, Target,
};
use gamepilot_planner::{
    Command, Event, FrameChange, LoopConfig, LoopState, Refusal, Rung, StopReason, SubgoalStatus, Trigger,
};
use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The budget of the goal-as-plan fallback's one subgoal: past it, the loop replans as for any other.
const GOAL_PLAN_TIME_MS: u64 = 60_000;
const GOAL_PLAN_ACTIONS: u32 = 10;
/// How a self-identification probe's holds are labelled (in the recording, and in one history line).
const PROBE_LABEL: &str = "self-identification probe:";
/// The label an exploration click starts with (the session's own choice, after a click that did nothing).
const EXPLORE_LABEL: &str = "exploring:";
/// The label prefix of a survey's clicks and steps back (an unsure model's exploration, `survey.rs`).
const SURVEY_LABEL: &str = "exploring (unsure):";
/// The longest the start pass waits for the first screen's perception.
const START_PASS_WAIT_MS: u64 = 3_000;

fn default_observation_max_elements() -> usize {
    16
}

/// The tools a session may offer the tactical model.
pub const TOOLS: [Tool; 7] = [
    Tool::ClickMark,
    Tool::Click,
    Tool::Key,
    Tool::HoldKey,
    Tool::Camera,
    Tool::Wait,
    Tool::Note,
];

/// A session's configuration; every limit is the user's (INV-SAFE-001). Recorded in the header so a
/// replay rebuilds the same session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionConfig {
    pub goal: String,
    #[serde(rename = "loop")]
    pub loop_cfg: LoopConfig,
    /// The postconditions a plan may use (compiled by the wiring in this order).
    pub postconditions: Vec<String>,
    /// The sensor whose increase is progress (FR-LOOP-005).
    pub progress_sensor: Option<String>,
    /// Grounding paths a tactical tick may take (FR-GND-004); one entry forces it.
    pub grounding_paths: Vec<GroundingPath>,
    /// Least time between the starts of two tactical ticks.
    pub tactical_interval_ms: u64,
    /// Send the marked screenshot.
    pub with_image: bool,
    /// Pixels per tactical image (FR-MODEL-002).
    pub visual_pixels: u64,
    /// Pixels of the deliberative pass's image (FR-MODEL-002); none is sent at 0.
    #[serde(default)]
    pub deliberative_pixels: u64,
    /// The host's context size in tokens (FR-CTX-004 compacts before a prompt reaches it).
    pub context_tokens: u32,
    /// The observation text a prompt carries is cut to this many bytes.
    pub observation_max_bytes: usize,
    /// A tactical prompt lists at most this many elements, those the focus points at first
    /// (a small model reads a short list, and every listed element costs prompt tokens).
    #[serde(default = "default_observation_max_elements")]
    pub observation_max_elements: usize,
    /// At most this many excerpts of one research enter the context, each cut to this many bytes.
    pub research_max_excerpts: usize,
    pub research_excerpt_max_bytes: usize,
    /// Tokens an image is counted as in prompt estimates.
    pub image_tokens: u32,
    /// The camera was measured before the session (`run --calibrate-camera`): the model's camera tool
    /// takes degrees (`camera_degrees`) instead of relative counts (FR-ACT-004).
    #[serde(default)]
    pub camera_calibrated: bool,
    /// The coordinate convention of the model's family when it sees images.
    #[serde(default)]
    pub coord_convention: gamepilot_core::CoordConvention,
    /// Self-identification and `move_to`: the direction keys to probe. `None`: the
    /// session never probes and the model has no `move_to`.
    #[serde(default)]
    pub steering: Option<crate::selfid::SteeringConfig>,
    /// While a deliberative pass plans and no subgoal is active, act on the goal itself (a goal that
    /// names its first step is grounded at once), and compose the start pass from the first screen.
    /// Recordings made before this lack the field and replay as made (waiting for the first plan).
    #[serde(default)]
    pub act_while_planning: bool,
    /// The agent declares its own sensors, postconditions and goal check (no `--goal-check` was given):
    /// what it needs to compile them against (sensor-expressions.md, "Declaration and lifetime").
    #[serde(default)]
    pub declare: Option<crate::declare::DeclareConfig>,
    /// A choice that could answer a dialogue is sent only when made on a frame captured after our
    /// previous input ended (and the game drew it) and after the last scene change; the next tactical
    /// frame waits for that (`fresh.rs`, FR-SAFE-005). Recordings made before this lack the field and
    /// replay as made.
    #[serde(default)]
    pub fresh_frames: bool,
    /// A step's words ground an element whose whole label they contain without a model call
    /// (`direct::worded_target`), beside the element a step names. Recordings made before this lack the
    /// field and replay as made.
    #[serde(default)]
    pub direct_by_words: bool,
    /// After a click that changed nothing, the nearest untried element like it is clicked without a
    /// model call (`explore.rs`). Recordings made before this lack the field and replay as made.
    #[serde(default)]
    pub explore_siblings: bool,
    /// The model may answer `unsure`, and the session then explores the screen itself (`survey.rs`).
    /// Recordings made before this lack the field and replay as made.
    #[serde(default)]
    pub explore_unsure: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            goal: String::new(),
            loop_cfg: LoopConfig::default(),
            postconditions: Vec::new(),
            progress_sensor: None,
            grounding_paths: vec![GroundingPath::Mark, GroundingPath::Coordinate],
            tactical_interval_ms: 300,
            with_image: false,
            visual_pixels: 512 * 288,
            deliberative_pixels: 0,
            context_tokens: 4096,
            observation_max_bytes: 3000,
            observation_max_elements: default_observation_max_elements(),
            research_max_excerpts: 3,
            research_excerpt_max_bytes: 600,
            image_tokens: 256,
            camera_calibrated: false,
            coord_convention: gamepilot_core::CoordConvention::CapturePixels,
            steering: None,
            act_while_planning: true,
            declare: None,
            fresh_frames: true,
            direct_by_words: true,
            explore_siblings: true,
            explore_unsure: true,
        }
    }
}

/// One action from proposal to verdict, by its loop action id.
#[derive(Debug, Clone, PartialEq)]
struct GroundedAction {
    intention: Intention,
    target: Option<Target>,
    path: Option<GroundingPath>,
    expected: ExpectedChange,
    region: Option<Rect>,
    label: String,
    generation: u64,
    /// Handed to the executor (after the loop logic allowed it).
    executed: bool,
    /// The frame's health was unreadable while the action was being verified.
    unreadable_evidence: bool,
    /// A scene change was seen while the action was being verified.
    scene_changed: bool,
    /// A `move_to`: the reflex steers it and its end is the evidence.
    steer: Option<gamepilot_grounding::SteerPlan>,
    /// The verification window, when not the loop's default (a steering run lasts up to its bound).
    settle_ms: Option<u64>,
    /// What the screen showed when the action was chosen: confirmed, it becomes the safe state's target.
    screen: Option<ScreenPrint>,
    /// A click on an element inside one of the game's menus (a popup).
    in_menu: bool,
}

impl GroundedAction {
    /// A grounded action not yet executed, verified against `expected` over `region`.
    fn new(
        action: Action,
        target: Option<Target>,
        path: Option<GroundingPath>,
        (expected, region): (ExpectedChange, Option<Rect>),
        label: String,
        generation: u64,
    ) -> GroundedAction {
        GroundedAction {
            intention: Intention::new(action, SubgoalId(0)),
            target,
            path,
            expected,
            region,
            label,
            generation,
            executed: false,
            unreadable_evidence: false,
            scene_changed: false,
            steer: None,
            settle_ms: None,
            screen: None,
            in_menu: false,
        }
    }
}

/// An action held for the user's confirmation (FR-SAFE-005).
#[derive(Debug, Clone, PartialEq)]
struct HeldAction {
    hold: u64,
    grounded: GroundedAction,
    found: DestructiveMatch,
}

/// What the status line and the summary show.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionNumbers {
    pub subgoal: Option<SubgoalId>,
    pub deliberating: bool,
    pub held_inputs: u32,
    pub sensors: Vec<(String, Option<f64>)>,
    pub confirmed: u64,
    pub refuted: u64,
    pub inconclusive: u64,
    pub rejected: u64,
    pub actions_executed: u64,
    pub tactical_calls: u64,
    pub tactical_failures: u64,
    pub schema_violations: u64,
    pub tactical_latency_ms: Vec<f64>,
    /// From each new screen (the session's start, a scene change) to the first action the executor took
    /// after it, in ms: the latency a player feels.
    pub first_action_ms: Vec<f64>,
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub deliberative_passes: u64,
    pub compactions: u64,
    pub rung: Option<Rung>,
    pub health: FrameHealth,
    pub generation: u64,
    pub scene: Option<SceneKind>,
    pub goal_met: Option<bool>,
    pub holding_for_confirmation: bool,
    /// The user took the keyboard or mouse and has not resumed (FR-SAFE-002).
    pub paused_by_user: bool,
    /// The game is not in front: the session waits for it (no model calls, verdicts or ladder).
    pub waiting_for_front: bool,
    /// Each climb of the escalation ladder (FR-LOOP-006): the rung and the seconds since the session began.
    pub escalations: Vec<(Rung, f64)>,
    /// Actions grounded with no model call because the subgoal named the one element so labelled.
    pub direct_groundings: u64,
    pub reflex: ReflexStats,
    pub failures: Vec<(FailureCause, u64)>,
}

impl SessionNumbers {
    /// The terminal status line: armed state, elapsed time, subgoal, held inputs, sensors, frame health,
    /// verdicts, the ladder's rung and the tactical calls.
    pub fn status_line(&self, dry_run: bool, elapsed_s: f64) -> String {
        let sensors = if self.sensors.is_empty() {
            "no sensors".to_string()
        } else {
            self.sensors
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.map(|v| format!("{v}")).unwrap_or_else(|| "undef".into())
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!(
            "[{}] {:.0}s | subgoal {} | deliberating {} | held {} | {} | frame {} | verdicts {}/{}/{} | rung {:?} | tactical {} calls",
            if self.paused_by_user {
                "PAUSED by your input: resume with SIGUSR1"
            } else if self.waiting_for_front {
                "WAITING: the game is not in front"
            } else if dry_run {
                "DRY RUN"
            } else {
                "ARMED"
            },
            elapsed_s,
            self.subgoal.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            self.deliberating,
            self.held_inputs,
            sensors,
            self.health,
            self.confirmed,
            self.refuted,
            self.inconclusive,
            self.rung,
            self.tactical_calls,
        )
    }
}

/// One running session's decisions.
pub struct Session {
    cfg: SessionConfig,
    state: LoopState,
    context: Context,
    actions: BTreeMap<ActionId, GroundedAction>,
    /// After a click that changed nothing, the elements like it still to try (within the subgoal).
    explore: crate::explore::Explorer,
    survey: crate::survey::Survey,
    next_action: u64,
    next_subgoal: u32,
    next_hold: u64,
    tactical_in_flight: Option<TacticalInFlight>,
    last_tactical_start: Option<MonoTime>,
    tactical_tick: u64,
    held: Option<HeldAction>,
    /// When the session began (for the ladder's history).
    began: MonoTime,
    /// Since when the user's input has the session paused (FR-SAFE-002); `None` when not paused.
    user_paused: Option<MonoTime>,
    /// Since when the game has not been in front (another window has the focus).
    behind: Option<MonoTime>,
    /// The model's last reply that was grounded into an action, and, on the retry rung, that reply waiting
    /// to be grounded once more on the next fresh observation (FR-LOOP-006).
    last_reply: Option<TacticalReply>,
    /// When the screen the agent has not acted on yet appeared (the session's start, a scene change).
    new_screen_at: Option<MonoTime>,
    /// The sensors' values when the previous tactical call started ("was" in the model's observation).
    sensors_at_last_call: Vec<(String, Option<f64>)>,
    /// Subgoals and the element names already clicked for them without a model call.
    /// Keyed by the step's words, not its id: a plan made again after the step's own click opened a menu
    /// names the same step, and clicking its element again would close that menu.
    direct_done: Vec<(String, String)>,
    /// The latest research question a deliberative reply wrote, asked when the ladder reaches research.
    research_question: Option<String>,
    /// Research rungs reached so far; the second and later are deep research (FR-SKILL-004).
    research_rungs: u32,
    /// The safe-state rung's remembered screen and the way back to it (FR-LOOP-006).
    safe: SafeState,
    /// What the latest observation showed, to recognise a screen seen before.
    last_print: Option<ScreenPrint>,
    /// Loop events decided while applying commands, fed once the step's commands are applied.
    deferred: Vec<Event>,
    /// The host's context as the session started (a degrade restore never goes past it).
    host_context_tokens: u32,
    /// The ladder's retry rung: the last reply, grounded again on a fresh observation.
    retry: Option<TacticalReply>,
    last_observation: String,
    /// The size of the latest perceived frame (the deliberative pass's picture is that frame).
    last_frame_size: Option<gamepilot_core::Size>,
    last_scene: Option<SceneKind>,
    excluded: Vec<ElementId>,
    generation: u64,
    health: FrameHealth,
    last_goal_met: Option<bool>,
    /// The pass and trigger of the deliberation last started, and whether its plan was already refused
    /// once as degenerate and asked again (asked again once, then the pass fails).
    deliberation: Option<(u64, Trigger, bool)>,
    /// The current probe's holds and their verdicts, told to the model in one history line at its end.
    probe_holds: Vec<String>,
    /// Since when the start pass's job waits for the first screen (see `release_start_pass`).
    start_pass_waiting: Option<MonoTime>,
    stop: Option<SessionStop>,
    stopped_by: Option<String>,
    /// The tactical host's health from its calls' outcomes (and whether the degrade ladder is restarting
    /// it: no tactical call starts meanwhile).
    host: HostHealth,
    /// Failures the session attributes itself (action choice, perception), beside the loop logic's.
    extra_failures: FailureHistogram,
    /// Verdicts confirmed since the last progress-sensor increase (action choice evidence).
    confirmed_since_progress: u32,
    last_progress: Option<f64>,
    /// The visual budget the user configured (degrade steps scale it, FR-MODEL-004).
    base_visual_pixels: u64,
    numbers: SessionNumbers,
    /// Self-identification and the avatar it found.
    selfid: crate::selfid::SelfId,
    /// The probe hold in progress: the next perceive-only tick waits for its end (its verdict can
    /// come while the key is still held).
    probe_running: Option<ActionId>,
    /// Our inputs in flight and the screen's latest changes: a choice that could answer a dialogue is
    /// sent only when made on a frame that shows them (FR-SAFE-005).
    freshness: crate::fresh::Freshness,
    /// When the frame of the tactical tick being acted on was captured.
    seen_at: Option<MonoTime>,
    /// A choice made on a frame older than a change, checked again (no model call) on the next one.
    recheck: Option<GroundedAction>,
    /// The user's sensors and the agent's own, when the agent declares its checks.
    declarations: Option<crate::declare::Declarations>,
    /// The goal's check the agent declared, once accepted.
    agent_goal: Option<AgentGoal>,
    /// The elements of the latest perceived frame: a declaration names one by its mark.
    last_elements: Vec<gamepilot_vision::Element>,
    /// The pass of the second look at the agent's goal check in flight.
    goal_look: Option<u64>,
    /// Second looks asked so far.
    goal_looks: u64,
    /// A click of this session was executed on an item of one of the game's menus: a goal that names a
    /// menu ("from the Type menu") may be done.
    chosen_in_menu: bool,
    /// Times the current declaring pass was asked again after a reply that could not be adopted.
    declare_attempts: u32,
    /// The goal read as steps; the agent's goal check is for `goal_step`, the goal met with the last.
    goal_steps: Vec<String>,
    goal_step: usize,
    /// The agent's goal check read true at this time: its second look waits for a frame perceived after.
    goal_look_wanted: Option<MonoTime>,
    /// The pass asking for the next step's check, in flight; and how many were asked.
    step_check: Option<u64>,
    step_checks: u64,
    /// A planner's pass to ask again once the host is free of looks and step checks.
    deferred_pass: Option<(u64, Trigger)>,
    /// With no progress sensor given, the first counter the agent declared to rise serves as one.
    declared_progress: Option<String>,
}

/// The goal's own check as the agent declared it (sensor-expressions.md, "Declaration and lifetime").
#[derive(Debug, Clone)]
struct AgentGoal {
    source: String,
    /// The pass that declared it.
    pass: u64,
    /// Actions executed when it was declared: only an action of this session after that can meet it.
    actions_before: u64,
    /// Seen false on a reflex report after its declaration (a check already true is refused).
    seen_false: bool,
    /// A second deliberative look agreed that the goal is met (its words).
    confirmed: Option<String>,
    /// Actions executed when a second look was last asked (asked again only after another action).
    looked_at: Option<u64>,
}

/// A declaring pass whose plan cannot be adopted is asked again this many times.
pub(crate) const DECLARE_ATTEMPTS: u32 = 2;

/// Pass numbers of the second looks at an agent's goal check: far above the planner's own passes.
const GOAL_LOOK_PASS: u64 = 1 << 40;
/// Pass numbers of the questions for the next goal step's check.
const STEP_CHECK_PASS: u64 = 1 << 41;
/// A session asks for the next step's check at most this many times before it stops, named.
const STEP_CHECK_ATTEMPTS: u64 = 6;
/// At most this many marks a check that something is gone may name.
const GONE_CANDIDATES: usize = 6;
/// At most this many on-screen numbers a declaring prompt lists.
const COUNTERS_LISTED: usize = 6;

/// What the deliberative planner is told it may do when it declares its own checks (after its role, in
/// the invariant system text).
const DECLARE_SKILL: &str = "Checks: nothing tells you yet when the goal or a step is done, so you say what to watch. \
For \"goal\" and for each subgoal's \"postcondition\", name a mark N on the screen and what becomes of it once that is done: \
{\"mark\": N, \"then\": \"gone\"} where N is an element that goes away (a menu's Start button once the game has started, \
a dialog's own button once it is answered), or {\"mark\": N, \"then\": \"rises\"} where N shows a number that goes up \
(a score, a lines counter), or \"falls\" where it goes down (coins left, time left). Choose N by its label in the observation; it must not be done already. \
In \"checks\" you may also declare sensors by a new lower-case name: \"present\", \"number\" or \"colour\" with a mark, \
or an \"expression\" over sensors (not play_shown, lines > @lines); later passes may name them.";

#[derive(Debug, Clone)]
struct TacticalInFlight {
    tick: u64,
    generation: u64,
    /// What the subgoal lets the session click when the tick started, and the marks it excluded.
    direct: Option<(crate::direct::DirectAim, Vec<ElementId>)>,
    /// What the session planned for the tick when it started.
    job: TacticalJob,
    /// Once its frame is perceived: what the model is being asked about.
    asking: Option<Asking>,
}

/// A tactical tick between its perception and its reply.
#[derive(Debug, Clone)]
struct Asking {
    perception: crate::tactical::Perception,
    /// The observation as the model reads it (already bounded by the tick's limit).
    observation_text: String,
    /// The prompt of the call in flight, for the next one to extend once its reply is in.
    tail: Option<gamepilot_context::TacticalTail>,
    /// A two-stage tick's region, in capture space, once perceived (its marks resolve the reply).
    crop: Option<Observation>,
    /// A two-stage tick's localising call: what it cost (added to the acting call's figures).
    localised: Option<ModelReply>,
}

/// A refuted scene change within the settle window and a confirmed-without-progress streak this long
/// name their causes (FR-GND-008).
const ACTION_CHOICE_STREAK: u32 = 6;

/// The observation text the model reads: the frame's health first when it is not ok (FR-PERC-009), then
/// the observation, cut to `max` bytes.
pub fn observation_for_model(text: &str, health: FrameHealth, max: usize) -> String {
    let text = bound_text(text, max);
    if health == FrameHealth::Ok {
        text
    } else {
        format!(
            "frame health: {} — the picture may not show the game's state\n{text}",
            health
        )
    }
}

/// The sensors' line of the model's observation (sensor-expressions.md: the observation's text includes
/// them): each sensor's value now, `undefined` when it has none, and what it was at the previous call when
/// it changed since (`lines = 3 (was 2)`). `None` without sensors.
pub fn sensors_line(now: &[(String, Option<f64>)], before: &[(String, Option<f64>)]) -> Option<String> {
    if now.is_empty() {
        return None;
    }
    let show = |v: Option<f64>| v.map_or_else(|| "undefined".to_string(), |v| format!("{v}"));
    let parts: Vec<String> = now
        .iter()
        .map(|(name, v)| match before.iter().find(|(n, _)| n == name) {
            Some((_, was)) if was != v => format!("{name} = {} (was {})", show(*v), show(*was)),
            _ => format!("{name} = {}", show(*v)),
        })
        .collect();
    Some(format!("Sensors: {}", parts.join(", ")))
}

/// Cut `text` to at most `max` bytes on a character boundary, saying how much was left out.
pub fn bound_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max.saturating_sub(64).min(text.len());
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let line_end = text[..cut].rfind('\n').filter(|&i| i > cut / 2).unwrap_or(cut);
    format!(
        "{}\n(… {} more bytes of observation left out)",
        &text[..line_end],
        text.len() - line_end
    )
}

/// The tools of one tactical tick for a grounding path: by mark drops coordinate clicks, by coordinate
/// drops mark clicks (FR-GND-001, FR-GND-002, FR-GND-004).
pub fn tools_for_path(path: Option<GroundingPath>, camera_calibrated: bool) -> Vec<Tool> {
    let drop = match path {
        Some(GroundingPath::Mark) => Some(Tool::Click),
        Some(GroundingPath::Coordinate) => Some(Tool::ClickMark),
        _ => None,
    };
    session_tools(camera_calibrated)
        .into_iter()
        .filter(|t| Some(*t) != drop)
        .collect()
}

/// The session's tools: [`TOOLS`], with the camera turned in degrees once the camera is calibrated
/// (FR-ACT-004: the model reasons in angles; the executor converts them with the measured scale).
pub fn session_tools(camera_calibrated: bool) -> Vec<Tool> {
    TOOLS
        .into_iter()
        .map(|t| match t {
            Tool::Camera if camera_calibrated => Tool::CameraDegrees,
            t => t,
        })
        .collect()
}

/// The tools a session of `cfg` describes to the model: [`session_tools`], and `unsure` where the
/// session explores for an unsure model.
pub fn tools_for(cfg: &SessionConfig) -> Vec<Tool> {
    let mut tools = session_tools(cfg.camera_calibrated);
    if cfg.explore_unsure {
        tools.push(Tool::Unsure);
    }
    tools
}

/// How an action the session takes is named in the history the model reads (and in the loop's cycle
/// keys): the action as the executor runs it, in JSON, and for a click what it landed on by its label —
/// the clicked mark, or else the smallest labelled element under the point. "click at 77,14 ->
/// confirmed" does not tell a model that the Type menu is open now; `on "Type"` does (measured with
/// `gamepilot eval --corpus corpus/goals.json`, docs/eval.md).
pub(crate) fn action_label(action: &Action, mark: Option<ElementId>, on: &Observation) -> String {
    let json = serde_json::to_string(action).unwrap_or_default();
    let (Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. }) = action else {
        return json;
    };
    let label = mark
        .and_then(|m| on.element(m))
        .or_else(|| on.labelled_at(Point::new(*x, *y)))
        .and_then(|e| e.label.as_deref())
        .map(|l| l.replace('"', "'"));
    match label {
        Some(l) => format!("{json} on \"{}\"", l.chars().take(40).collect::<String>()),
        None => json,
    }
}

/// The expected change of an action and the pixels to watch for it (FR-GND-006).
fn expectation(action: &Action, mark: Option<(ElementId, Rect)>) -> (ExpectedChange, Option<Rect>) {
    let view_change = ExpectedChange::SensorDelta {
        sensor: "view_change".into(),
        direction: ChangeDirection::Increase,
        min_delta: 0.5,
    };
    match (mark, action) {
        (Some((id, bbox)), _) => (ExpectedChange::ElementChanged { element: id }, Some(bbox)),
        (None, Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. }) => {
            (view_change, Some(Rect::new(x - 40, y - 40, 80, 80)))
        }
        _ => (view_change, None),
    }
}

/// The one item of the observation drawn as chosen, when `action` is a key that moves a list's cursor.
fn cursor_item(action: &Action, obs: &Observation) -> Option<(ElementId, Rect)> {
    const NAVIGATION: [&str; 6] = ["Up", "Down", "Left", "Right", "Tab", "shift+Tab"];
    let Action::Key { key } = action else {
        return None;
    };
    if !NAVIGATION.iter().any(|k| k.eq_ignore_ascii_case(key)) {
        return None;
    }
    let mut chosen = obs.elements.iter().filter(|e| e.selected);
    let first = chosen.next()?;
    // One item, perhaps read as several words: their boxes together.
    let mut bbox = first.bbox;
    for e in chosen {
        if (e.bbox.center().y - first.bbox.center().y).abs() * 2 > first.bbox.h as i32 {
            return None;
        }
        bbox = bbox.union(&e.bbox);
    }
    Some((first.id, bbox))
}

fn evidence_for(expected: &ExpectedChange, changed: Option<bool>) -> Evidence {
    match expected {
        ExpectedChange::ElementChanged { .. } => Evidence::ElementChanged { changed },
        ExpectedChange::SensorDelta { .. } => Evidence::SensorDelta {
            before: Some(0.0),
            after: changed.map(|c| if c { 1.0 } else { 0.0 }),
        },
        ExpectedChange::Postcondition { .. } => Evidence::Postcondition { value: changed },
    }
}

fn is_pointer(action: &Action) -> bool {
    matches!(
        action,
        Action::Click { .. } | Action::DoubleClick { .. } | Action::MovePointer { .. }
    )
}

impl Session {
    /// A session for `cfg`, starting at `start`.
    pub fn new(cfg: SessionConfig, start: MonoTime) -> Result<Session, SessionError> {
        if cfg.postconditions.is_empty() && cfg.declare.is_none() {
            return Err(SessionError::NoPostcondition);
        }
        let declarations = match &cfg.declare {
            Some(d) => Some(crate::declare::Declarations::new(d.clone()).map_err(SessionError::Sensors)?),
            None => None,
        };
        let mut tools = tools_for(&cfg);
        if cfg.steering.is_some() {
            // Described in block 1 from the start (the prefix stays byte-identical) and first: a small
            // model answers the first tool it reads where the schema allows it. Offered in a tick's
            // schema only once the avatar is known, for places in the world only.
            tools.insert(0, Tool::MoveTo);
        }
        let tools = ToolSet::new(&tools)?;
        let context_cfg = ContextConfig {
            context_tokens: cfg.context_tokens,
            deliberative_skills: if cfg.declare.is_some() {
                DECLARE_SKILL.to_string()
            } else {
                String::new()
            },
            ..ContextConfig::default()
        };
        let context = Context::new(context_cfg, &tools, &cfg.goal, start)?;
        Ok(Session {
            // The start pass sees the first screen only when the session acts while it plans (it
            // perceives that screen meanwhile); otherwise the first frame asks for a pass of its own.
            state: LoopState::new(LoopConfig {
                start_pass_sees_first_screen: cfg.loop_cfg.start_pass_sees_first_screen
                    && cfg.act_while_planning,
                ..cfg.loop_cfg
            }),
            context,
            actions: BTreeMap::new(),
            explore: crate::explore::Explorer::default(),
            survey: crate::survey::Survey::default(),
            next_action: 1,
            next_subgoal: 1,
            next_hold: 1,
            tactical_in_flight: None,
            last_tactical_start: None,
            tactical_tick: 0,
            held: None,
            began: start,
            user_paused: None,
            behind: None,
            last_reply: None,
            research_question: None,
            direct_done: Vec::new(),
            sensors_at_last_call: Vec::new(),
            new_screen_at: Some(start),
            research_rungs: 0,
            safe: SafeState::default(),
            last_print: None,
            deferred: Vec::new(),
            host_context_tokens: cfg.context_tokens,
            retry: None,
            last_observation: String::from("(nothing observed yet)"),
            last_frame_size: None,
            last_scene: None,
            excluded: Vec::new(),
            generation: 0,
            health: FrameHealth::Ok,
            last_goal_met: None,
            deliberation: None,
            start_pass_waiting: None,
            probe_holds: Vec::new(),
            stop: None,
            stopped_by: None,
            host: HostHealth::default(),
            extra_failures: FailureHistogram::new(),
            confirmed_since_progress: 0,
            last_progress: None,
            base_visual_pixels: cfg.visual_pixels,
            numbers: SessionNumbers::default(),
            selfid: crate::selfid::SelfId::new(cfg.steering.clone()),
            probe_running: None,
            freshness: crate::fresh::Freshness::default(),
            seen_at: None,
            recheck: None,
            declarations,
            agent_goal: None,
            last_elements: Vec::new(),
            goal_look: None,
            goal_looks: 0,
            chosen_in_menu: false,
            declare_attempts: 0,
            goal_steps: crate::goal_steps::goal_steps(&cfg.goal),
            goal_step: 0,
            goal_look_wanted: None,
            step_check: None,
            step_checks: 0,
            deferred_pass: None,
            declared_progress: None,
            cfg,
        })
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// The loop logic inside (read-only).
    pub fn loop_state(&self) -> &LoopState {
        &self.state
    }

    /// The context as it is now (read-only; only `step` changes it).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Why the session stopped, once it has.
    pub fn stopped(&self) -> Option<&SessionStop> {
        self.stop.as_ref()
    }

    /// The numbers of the status line and the summary.
    pub fn numbers(&self) -> SessionNumbers {
        let v = self.state.verdict_counts();
        let mut n = self.numbers.clone();
        n.subgoal = self.state.active_subgoal();
        n.deliberating = self.state.deliberating().is_some();
        n.confirmed = v.confirmed;
        n.refuted = v.refuted;
        n.inconclusive = v.inconclusive;
        n.actions_executed = self.state.actions_executed();
        n.rung = self.state.rung();
        n.health = self.health;
        n.generation = self.generation;
        n.scene = self.last_scene;
        n.goal_met = self.last_goal_met;
        n.holding_for_confirmation = self.held.is_some();
        n.paused_by_user = self.user_paused.is_some();
        n.waiting_for_front = self.behind.is_some();
        let mut hist = *self.state.histogram();
        for (c, k) in self.extra_failures.entries() {
            for _ in 0..k {
                hist.record(c);
            }
        }
        n.failures = hist.entries().into_iter().filter(|(_, k)| *k > 0).collect();
        n
    }

    /// Feed one input; the effects are for the wiring to carry out, in order.
    pub fn step(&mut self, input: Input, now: MonoTime) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.stop.is_some() {
            if let Input::ReflexStopped(stats) = input {
                self.numbers.reflex = stats;
            }
            return out;
        }
        match input {
            Input::Start => {
                let goal = self.cfg.goal.clone();
                self.feed(Event::Start { goal }, now, &mut out);
                if self.cfg.act_while_planning {
                    // Blocks 1-4 are what every tactical prompt of the session begins with.
                    let (prompt, _) = self
                        .context
                        .assemble_tactical(&ObservationText::new(now, self.last_observation.clone()), None);
                    out.push(Effect::WarmUp(prompt));
                }
            }
            Input::Reflex(r) => self.on_reflex(r, now, &mut out),
            Input::ActionAccepted { action } => {
                if let Some(since) = self.new_screen_at.take() {
                    self.numbers
                        .first_action_ms
                        .push(now.since(since).as_secs_f64() * 1000.0);
                }
                // Recorded as executed only once the executor took it (a refused one is `rejected`).
                if let Some(a) = self.actions.get(&action).filter(|a| a.executed) {
                    out.push(Effect::Record(SessionRecord::Action {
                        action,
                        subgoal: a.intention.subgoal,
                        payload: a.intention.action.clone(),
                        target: a.target,
                        path: a.path,
                    }));
                }
            }
            Input::ActionRejected { action, reason } => {
                self.freshness.refused(action);
                self.on_rejected(action, reason, now, &mut out)
            }
            Input::ActionEnded { action, end } => {
                self.freshness.ended(action, now);
                if self.probe_running == Some(action) {
                    self.probe_running = None;
                    if !end.is_finished() {
                        self.selfid.probe_lost();
                    }
                }
                if !end.is_finished() && self.actions.contains_key(&action) {
                    let reason = end.to_string();
                    self.feed(Event::ActionFailed { action, reason }, now, &mut out);
                }
            }
            Input::Evidence { action, changed } => {
                if let Some(a) = self.actions.get(&action) {
                    let evidence = evidence_for(&a.expected, changed);
                    let facts = FailureFacts {
                        target_region_changed: changed,
                        evidence_undefined: changed.is_none() || a.unreadable_evidence,
                        unprompted_scene_change: a.scene_changed && changed == Some(false),
                        ..FailureFacts::default()
                    };
                    self.feed(
                        Event::Evidence {
                            action,
                            evidence,
                            facts,
                        },
                        now,
                        &mut out,
                    );
                }
            }
            Input::Steered {
                action,
                end,
                sightings,
            } => {
                if let Some(a) = self.actions.get(&action) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("{} ended: {end:?}, tracked on {sightings} ticks", a.label),
                    }));
                    self.feed(
                        Event::Evidence {
                            action,
                            evidence: Evidence::Postcondition {
                                value: Some(end.reached()),
                            },
                            facts: FailureFacts {
                                target_region_changed: Some(end.reached()),
                                ..FailureFacts::default()
                            },
                        },
                        now,
                        &mut out,
                    );
                }
            }
            Input::Interlock { interlock, detail } => {
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: interlock.kind(),
                    detail: detail.clone(),
                }));
                if matches!(interlock, Interlock::CaptureFailed { .. }) {
                    self.finish(SessionStop::CaptureFailed { detail }, &mut out);
                } else if interlock == Interlock::UserInput {
                    // FR-SAFE-002: the reflex released everything and waits; so does the session, until
                    // the user's explicit resume.
                    self.user_paused.get_or_insert(now);
                    out.push(Effect::Reflex(ReflexCommand::Pause { paused: true }));
                } else if interlock.stops_session() {
                    self.stopped_by
                        .get_or_insert_with(|| format!("{}: {detail}", interlock.name()));
                    self.feed(Event::UserStop, now, &mut out);
                }
            }
            Input::Resume => self.on_resume(now, &mut out),
            Input::WindowGone => self.feed(Event::WindowClosed, now, &mut out),
            Input::ReflexStopped(stats) => {
                self.numbers.reflex = stats;
                self.stopped_by
                    .get_or_insert_with(|| "the reflex thread ended".to_string());
                self.feed(Event::UserStop, now, &mut out);
            }
            Input::Perceived(p) => self.on_perceived(*p, now, &mut out),
            Input::Replied { tick, answer } => self.on_replied(tick, answer, now, &mut out),
            Input::CropPerceived(c) => self.on_crop_perceived(*c, now, &mut out),
            Input::Plan(p) => self.on_plan(p, now, &mut out),
            Input::Research(r) => self.on_research(r, now, &mut out),
            Input::Confirmation(a) => self.on_confirmation(a, now, &mut out),
            Input::Degrade(d) => {
                if let Some(f) = d.visual_factor().filter(|f| f.is_finite() && *f > 0.0) {
                    self.cfg.visual_pixels = ((self.base_visual_pixels as f64) * f.min(1.0)) as u64;
                }
                // A restore never sets a context larger than the host's own (FR-MODEL-004).
                if let Some(tokens) = d.context_tokens().map(|t| t.min(self.host_context_tokens)) {
                    if self.context.set_context_tokens(tokens).is_ok() {
                        self.cfg.context_tokens = tokens;
                    }
                }
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!(
                        "GPU memory degrade ({}): visual pixels {}, context {} tokens",
                        d.name(),
                        self.cfg.visual_pixels,
                        self.cfg.context_tokens
                    ),
                }));
            }
            Input::HostRestart(h) => {
                out.push(Effect::Record(SessionRecord::Note {
                    text: h.detail.clone(),
                }));
                if h.host == "tactical" {
                    self.host.restarting = h.restarting;
                    if let Some(why) = h.failed {
                        self.finish(
                            SessionStop::ModelHostGone {
                                detail: format!(
                                    "the tactical host did not come back from a GPU-memory restart: {why}"
                                ),
                            },
                            &mut out,
                        );
                    }
                }
            }
            Input::Stop { reason } => self.finish(
                SessionStop::External {
                    detail: reason.to_string(),
                },
                &mut out,
            ),
        }
        while self.stop.is_none() && !self.deferred.is_empty() {
            let event = self.deferred.remove(0);
            self.feed(event, now, &mut out);
        }
        if self.stop.is_none() {
            if self
                .start_pass_waiting
                .is_some_and(|since| now.since(since).as_millis() as u64 >= START_PASS_WAIT_MS)
            {
                self.release_start_pass(now, &mut out);
            }
            // A plan held back while a look or a step's check wanted the host goes out as soon as none
            // does, whichever input ended the wait (a look found not due left sgt-fifteen's plan
            // waiting for good).
            self.release_deferred_pass(now, &mut out);
            if self.state.active_subgoal().is_none() && self.deliberation.is_some() {
                self.act_on_goal_meanwhile(now, &mut out);
            }
            self.maybe_start_tactical(now, &mut out);
        }
        out
    }

    /// Feed the loop logic and carry out its commands.
    fn feed(&mut self, event: Event, now: MonoTime, out: &mut Vec<Effect>) {
        let commands = self.state.step(event.clone(), now);
        out.push(Effect::Record(SessionRecord::LoopStep {
            event,
            commands: commands.clone(),
        }));
        self.apply(commands, now, out);
    }

    fn apply(&mut self, commands: Vec<Command>, now: MonoTime, out: &mut Vec<Effect>) {
        for c in commands {
            match c {
                Command::StartDeliberation { pass, trigger } => {
                    self.numbers.deliberative_passes += 1;
                    self.deliberation = Some((pass, trigger, false));
                    // A second look or a step's check waiting for the deliberative host goes first: the
                    // host serves one request at a time, and a plan asked meanwhile held the demo's look
                    // back until its time was spent (the look's answer may make the plan moot).
                    if trigger != Trigger::Start && self.host_wanted() {
                        self.deferred_pass = Some((pass, trigger));
                        continue;
                    }
                    // The start pass plans from the first screen: with the goal acted on meanwhile, its
                    // job is composed once that screen is perceived (a tactical tick away).
                    if trigger == Trigger::Start
                        && (self.act_on_goal_meanwhile(now, out) || self.needs_first_screen())
                    {
                        self.start_pass_waiting = Some(now);
                    } else {
                        out.push(Effect::StartDeliberation(
                            self.deliberation_job(pass, trigger, now),
                        ));
                    }
                }
                // A step back that worked resets the ladder but not the way back: only arrival, giving
                // up, a new rung or a subgoal reached ends it.
                Command::SubgoalCompleted { .. } => {
                    self.safe.abandon();
                    // A survey outlives a replan (each screen its tries open is a scene change, and a
                    // scene change replans); a step reached ends it.
                    self.survey.reset();
                    self.refresh_plan_block();
                }
                Command::PlanAdopted { .. } | Command::SubgoalAbandoned { .. } => self.refresh_plan_block(),
                Command::SubgoalStarted { subgoal } => {
                    self.explore.reset();
                    self.refresh_plan_block();
                    let handle = self
                        .state
                        .plan()
                        .and_then(|p| p.subgoals.iter().find(|s| s.spec.id == subgoal))
                        .map(|s| s.spec.postcondition.handle as usize)
                        .filter(|h| *h < self.cfg.postconditions.len());
                    out.push(Effect::Reflex(ReflexCommand::Subgoal {
                        active: handle.map(|h| (subgoal, h)),
                    }));
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("subgoal {subgoal} started"),
                    }));
                }
                Command::CancelSubgoal { subgoal } => {
                    out.push(Effect::Reflex(ReflexCommand::CancelOwner { subgoal }));
                }
                Command::Execute { action, subgoal } => {
                    if let Some(a) = self.actions.get_mut(&action) {
                        a.intention.subgoal = subgoal;
                        a.executed = true;
                        self.chosen_in_menu |= a.in_menu;
                        // The key map was learned under the old heading.
                        if matches!(
                            a.intention.action,
                            Action::Camera { .. } | Action::CameraDegrees { .. }
                        ) {
                            self.selfid.camera_turned();
                        }
                        self.freshness.submitted(action, now);
                        out.push(Effect::Reflex(ReflexCommand::Submit {
                            action,
                            intention: a.intention.clone(),
                            generation: a.generation,
                        }));
                        match &a.steer {
                            Some(plan) => out.push(Effect::Reflex(ReflexCommand::Steer {
                                action,
                                plan: plan.clone(),
                            })),
                            None => out.push(Effect::Reflex(ReflexCommand::Watch {
                                action,
                                region: a.region,
                                settle_ms: self.cfg.loop_cfg.settle_ms,
                            })),
                        }
                    }
                }
                Command::Reject { action, reason } => {
                    if self.probe_running == Some(action) {
                        self.probe_running = None;
                        self.selfid.probe_lost();
                    }
                    self.numbers.rejected += 1;
                    if let Some(a) = self.actions.remove(&action) {
                        let why = match reason {
                            Refusal::NeedAlternative => {
                                "not executed: this action did not help; choose a different one".to_string()
                            }
                            other => format!("not executed: {other:?}"),
                        };
                        out.push(Effect::Record(SessionRecord::Rejected {
                            action,
                            reason: why.clone(),
                        }));
                        self.context.record(HistoryEntry::new(now, a.label, why));
                    }
                }
                Command::Verdict { action, verdict } => {
                    out.push(Effect::Record(SessionRecord::Verdict {
                        action,
                        verdict,
                        cause: None,
                    }));
                    if let Some(a) = self.actions.remove(&action) {
                        self.explored(&a, verdict, now, out);
                        if verdict == gamepilot_grounding::Verdict::Confirmed {
                            if let Some(p) = a.screen {
                                self.safe.confirmed_on(p);
                            }
                        }
                        // A probe's holds are told in one line when the probe ends (see `probe_told`).
                        match a.label.strip_prefix(PROBE_LABEL) {
                            Some(hold) => {
                                self.probe_holds
                                    .push(format!("{}: {}", hold.trim(), verdict.as_str()))
                            }
                            None => self
                                .context
                                .record(HistoryEntry::new(now, a.label, verdict.as_str())),
                        }
                    }
                    if verdict == gamepilot_grounding::Verdict::Confirmed {
                        self.confirmed_since_progress += 1;
                    }
                }
                Command::Failure { action, cause } => {
                    out.push(Effect::Record(SessionRecord::Failure {
                        action,
                        cause,
                        evidence: String::from("attributed by the loop logic"),
                    }));
                }
                Command::Exclude { targets } => {
                    self.excluded = targets
                        .iter()
                        .filter_map(|t| match t {
                            Target::Mark { element } => Some(*element),
                            Target::Point { .. } => None,
                        })
                        .collect();
                }
                Command::Escalate { rung } => {
                    self.numbers
                        .escalations
                        .push((rung, now.since(self.began).as_secs_f64()));
                    out.push(Effect::Record(SessionRecord::Interlock {
                        interlock: Safeguard::Escalate,
                        detail: rung.as_str().into(),
                    }));
                    self.safe.abandon();
                    match rung {
                        // FR-LOOP-006: the same intention once more, grounded on a fresh observation (new
                        // marks, new coordinates) without a model call.
                        Rung::Retry => self.retry = self.last_reply.clone(),
                        // FR-LOOP-006: the model is told, before it proposes again, what is refused now.
                        Rung::AlternativeAction => {
                            if let Some(key) = self.state.refused_action() {
                                self.context.record(HistoryEntry::new(
                                    now,
                                    "escalation: alternative action".to_string(),
                                    format!(
                                        "`{key}` did not help and is refused now: choose a different action"
                                    ),
                                ));
                            }
                        }
                        // FR-LOOP-006, FR-SKILL-003/004: the question the planner wrote (the session's own
                        // from the goal and subgoal when it wrote none); the second research rung of a
                        // session is deep research.
                        Rung::Research => {
                            self.research_rungs += 1;
                            let mut inferences = Vec::new();
                            if let Some(d) = self.state.status().subgoal_description {
                                inferences.push(format!("how to {d}"));
                            }
                            out.push(Effect::StartResearch(ResearchJob {
                                goal: self.cfg.goal.clone(),
                                question: self.research_question.take(),
                                inferences,
                                screen: self.last_observation.clone(),
                                deep: self.research_rungs >= 2,
                            }));
                        }
                        // FR-LOOP-006: release what the subgoal holds, then go back to the latest screen an
                        // action of this session was confirmed on.
                        Rung::SafeState => {
                            if let Some(subgoal) = self.state.active_subgoal() {
                                out.push(Effect::Reflex(ReflexCommand::CancelOwner { subgoal }));
                            }
                            self.begin_safe_return(now, out);
                        }
                        // The replan rung's pass is the loop logic's own `StartDeliberation`; the last
                        // rung's stop arrives as its `Stop`.
                        Rung::Replan | Rung::StopAndNotify => {}
                    }
                }
                // FR-GND-008: actions that worked, many in a row, with no progress are the wrong actions,
                // not wrongly grounded ones.
                Command::Stuck { signal } if self.confirmed_since_progress >= ACTION_CHOICE_STREAK => {
                    self.extra_failures.record(FailureCause::ActionChoice);
                    out.push(Effect::Record(SessionRecord::Failure {
                        action: None,
                        cause: FailureCause::ActionChoice,
                        evidence: format!(
                            "{} confirmed actions and no progress ({signal:?})",
                            self.confirmed_since_progress
                        ),
                    }));
                    self.confirmed_since_progress = 0;
                }
                Command::Stop { reason } => {
                    let by = if reason == StopReason::UserStop {
                        self.stopped_by.clone()
                    } else {
                        None
                    };
                    self.finish(SessionStop::Loop { reason, by }, out);
                }
                // Each of these is recorded with the step that produced it (`SessionRecord::LoopStep`) and
                // acts no further here: a kept or refused plan leaves the plan block as it is (a refusal's
                // reason reaches the model through the re-asked pass), the grounding path is read where
                // the tick starts, suppression is the loop logic's own (its `Exclude` is what the tick
                // uses), a stuck signal without a streak of confirmed actions is the ladder's to answer, a
                // reset ladder has nothing to undo here, and evidence the verifier could not use was
                // already ignored by it.
                Command::PlanKept { .. }
                | Command::PlanRejected { .. }
                | Command::UsePath { .. }
                | Command::Suppress { .. }
                | Command::Stuck { .. }
                | Command::LadderReset { .. }
                | Command::BadEvidence { .. } => {}
            }
        }
    }

    /// The context's plan block from the loop logic's plan: every subgoal with its status (FR-CTX-001).
    fn refresh_plan_block(&mut self) {
        let Some(plan) = self.state.plan() else {
            self.context.set_plan(CtxPlan::default());
            return;
        };
        let active = self.state.active_subgoal();
        let steps = plan
            .subgoals
            .iter()
            .map(|s| {
                let status = match s.status {
                    SubgoalStatus::Done => StepStatus::Done,
                    SubgoalStatus::Abandoned => StepStatus::Abandoned,
                    _ if Some(s.spec.id) == active => StepStatus::Active,
                    _ => StepStatus::Pending,
                };
                PlanStep::new(
                    format!(
                        "{} (done when: {})",
                        s.spec.description, s.spec.postcondition.source
                    ),
                    status,
                )
            })
            .collect();
        // The model reads the active subgoal in words (its id alone said nothing).
        let subgoal = active.and_then(|a| {
            plan.subgoals
                .iter()
                .find(|s| s.spec.id == a)
                .map(|s| s.spec.description.clone())
        });
        self.context.set_plan(CtxPlan { steps, subgoal });
    }

    fn finish(&mut self, stop: SessionStop, out: &mut Vec<Effect>) {
        if self.stop.is_some() {
            return;
        }
        if let Some(h) = self.held.take() {
            self.numbers.rejected += 1;
            out.push(Effect::Record(SessionRecord::Interlock {
                interlock: Safeguard::DestructiveAction,
                detail: format!(
                    "{}: still held when the session stopped; not executed",
                    h.grounded.label
                ),
            }));
        }
        self.stop = Some(stop.clone());
        out.push(Effect::Stop(stop));
    }

    /// The user's resume after a pause: the loop's clocks move on by the pause (no budget spent, no
    /// stuck signal), the reflex resumes, and ticks start again.
    fn on_resume(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(since) = self.user_paused.take() else {
            return;
        };
        let paused = now.since(since);
        self.shift_clocks(paused);
        out.push(Effect::Record(SessionRecord::Interlock {
            interlock: Safeguard::UserResume,
            detail: format!("resumed by the user after {:.1} s", paused.as_secs_f64()),
        }));
        out.push(Effect::Reflex(ReflexCommand::Pause { paused: false }));
    }

    /// A wait (the user's pause, the game behind another window) spent no budget and no stuck window.
    fn shift_clocks(&mut self, paused: std::time::Duration) {
        self.state.resume_after_pause(paused);
        if let Some(t) = self.last_tactical_start.as_mut() {
            *t = t.plus(paused);
        }
    }

    /// The game went behind another window, or came back in front. Behind, the reflex withholds every
    /// input (FR-SAFE-004), so asking the model, judging actions or climbing the ladder would only blame
    /// the agent for what the foreground guard did: the session waits and says so.
    fn on_front(&mut self, foreground: bool, now: MonoTime, out: &mut Vec<Effect>) {
        match (foreground, self.behind) {
            (false, None) => {
                self.behind = Some(now);
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: Safeguard::NotInFront,
                    detail: "the game is not in front: waiting for it (no model calls, verdicts or ladder)"
                        .into(),
                }));
            }
            (true, Some(since)) => {
                self.behind = None;
                let waited = now.since(since);
                self.shift_clocks(waited);
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: Safeguard::InFront,
                    detail: format!("the game is in front again after {:.1} s", waited.as_secs_f64()),
                }));
            }
            _ => {}
        }
    }

    fn on_reflex(&mut self, r: ReflexReport, now: MonoTime, out: &mut Vec<Effect>) {
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
        if r.health != self.health {
            out.push(Effect::Record(SessionRecord::Interlock {
                interlock: Safeguard::FrameHealth,
                detail: format!("{} -> {}", self.health, r.health),
            }));
            self.health = r.health;
        }
        if r.generation != self.generation {
            self.generation = r.generation;
            self.drop_stale_held(now, out);
        }
        for a in self.actions.values_mut().filter(|a| a.executed) {
            a.unreadable_evidence |= r.health.unreadable();
            a.scene_changed |= r.change == FrameChange::Scene;
        }
        // A new screen with no action of ours pending: the clock to the first action starts (a screen an
        // action of ours is changing is that action's effect, not a new decision).
        if r.change == FrameChange::Scene {
            self.freshness.scene_changed(now);
        }
        if r.change == FrameChange::Scene && self.actions.is_empty() && self.new_screen_at.is_none() {
            self.new_screen_at = Some(now);
        }
        self.on_front(r.foreground, now, out);
        if self.user_paused.is_some() || self.behind.is_some() {
            // Paused, or the game behind another window: nothing is judged, timed or started.
            return;
        }
        self.last_goal_met = r.goal_met;
        let goal_met = self.judge_agent_goal(r.goal_met, now, out);
        let progress = self
            .cfg
            .progress_sensor
            .as_ref()
            .or(self.declared_progress.as_ref())
            .and_then(|p| r.sensors.iter().find(|(n, _)| n == p).and_then(|(_, v)| *v));
        if let Some(p) = progress {
            if self.last_progress.is_some_and(|last| p > last) {
                self.confirmed_since_progress = 0;
            }
            self.last_progress = Some(p);
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

    /// The goal's value the loop logic may stop on. A user's check is taken as it reads; an agent's only
    /// once it was seen false after its declaration (one already true is refused and a new one asked
    /// for) and an action of this session came after that; with no check accepted yet, none.
    fn judge_agent_goal(
        &mut self,
        reads: Option<bool>,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> Option<bool> {
        if self.declarations.is_none() {
            return reads;
        }
        let g = self.agent_goal.as_mut()?;
        // A second look agreed the goal was done on a frame after the check read true: the next report
        // ends it, whatever the check reads (sgt-pegs' "Type gone" read false again once the menu that
        // chose the Octagon board had closed, and the run went on clicking pegs until its time was spent;
        // on a board that changed size the template reads undefined).
        if let Some(why) = g.confirmed.clone() {
            if self.goal_step + 1 < self.goal_steps.len() {
                self.next_goal_step(&why, now, out);
                return Some(false);
            }
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "goal met: agent-declared check `{}` (pass {}) turned true after an action of this session, confirmed by a second look ({why})",
                    g.source, g.pass
                ),
            }));
            return Some(true);
        }
        match reads {
            Some(false) => {
                g.seen_false = true;
                Some(false)
            }
            Some(true) if !g.seen_false => {
                let (source, pass) = (g.source.clone(), g.pass);
                self.agent_goal = None;
                out.push(Effect::Record(SessionRecord::Failure {
                    action: None,
                    cause: FailureCause::Plan,
                    evidence: format!(
                        "goal check `{source}` of pass {pass} refused: already true when declared"
                    ),
                }));
                self.context.record(HistoryEntry::new(
                    now,
                    format!("goal check `{source}`"),
                    "refused: it is already true; declare one that is false now and true once the goal is done",
                ));
                self.hand_sensors(false, out);
                // Asked again at once, on this screen: the plan may go on meanwhile.
                self.ask_step_check(now, out);
                None
            }
            Some(true) if self.state.actions_executed() > g.actions_before => {
                let actions = self.state.actions_executed();
                if self.goal_look.is_none() && self.goal_look_wanted.is_none() && g.looked_at != Some(actions)
                {
                    g.looked_at = Some(actions);
                    // The look reads a frame perceived after this reading, not the one the action was
                    // chosen on (the demo's look was shown the menu its click had just left).
                    self.goal_look_wanted = Some(now);
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!(
                            "the goal check `{}` reads true: a second look is asked on the next frame",
                            g.source
                        ),
                    }));
                }
                Some(false)
            }
            // True, but not by anything this session did since the check was declared.
            Some(true) => Some(false),
            None => None,
        }
    }

    /// The step of the goal the agent's check is for, as the model reads it ("the goal", or "step 2 of
    /// 2 of the goal, \"collect a coin\"").
    fn step_words(&self) -> String {
        match self.goal_steps.get(self.goal_step) {
            Some(step) if self.goal_steps.len() > 1 => format!(
                "step {} of {} of the goal, {step:?}",
                self.goal_step + 1,
                self.goal_steps.len()
            ),
            _ => "the goal".into(),
        }
    }

    /// A plan must carry the goal's check: none accepted yet for the goal's first step. A later step's
    /// check is asked for by its own question; a plan may still give it, but is not refused without it
    /// (a planner refused for it meanwhile spent the deliberative host's time twice).
    fn plan_owes_goal_check(&self) -> bool {
        self.agent_goal.is_none() && self.goal_step == 0 && self.step_check.is_none()
    }

    /// What the goal acted on meanwhile says: the current step's words when the agent checks the goal step
    /// by step (once the game has started, "click Play" is not the step), the goal's otherwise.
    fn goal_plan_words(&self) -> &str {
        match self.declarations {
            Some(_) => self.step_focus(),
            None => self.cfg.goal.as_str(),
        }
    }

    /// The words of the step whose check is wanted (the whole goal when it is one step).
    fn step_focus(&self) -> &str {
        self.goal_steps
            .get(self.goal_step)
            .map_or(self.cfg.goal.as_str(), String::as_str)
    }

    /// A frame perceived at `seen` (after the goal check read true) releases the second look it waits for
    /// — unless that frame shows the goal unfinished: an element the goal's words name and no action of
    /// this session clicked yet ("Start Game" after "New Game" opened a game's setup menu; the board size
    /// in the menu "Type" opened), whose aim is returned to be clicked first, or one of the game's menus
    /// still open (a menu is a way to a goal, never its end). A small model's check that a clicked item
    /// is gone reads true on both; its second look agreed every time we measured.
    fn release_goal_look(
        &mut self,
        seen: MonoTime,
        obs: &Observation,
        out: &mut Vec<Effect>,
        now: MonoTime,
    ) -> Option<crate::direct::DirectAim> {
        let since = self.goal_look_wanted?;
        if seen < since || self.goal_look.is_some() {
            return None;
        }
        self.goal_look_wanted = None;
        let source = self.agent_goal.as_ref().map(|g| g.source.clone())?;
        let aim = crate::direct::DirectAim {
            name: None,
            words: crate::direct::clickable_words(self.step_focus()),
            clicked: self.direct_done.iter().map(|(_, label)| label.clone()).collect(),
        };
        if let Some((mark, label)) = aim.target(obs, &self.excluded) {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true, but the screen still offers '{label}' (mark {mark}), which the goal's words name: not done yet, clicked first"
                ),
            }));
            return Some(aim);
        }
        if obs
            .elements
            .iter()
            .any(|e| e.layer == Some(gamepilot_core::WindowLayer::Popup))
        {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true with one of the game's menus open: not done yet (asked again after the next action)"
                ),
            }));
            return None;
        }
        // A dialog open is a way to the goal too (sgt-fifteen's Custom dialog, still to fill, was judged
        // "met" by the look), unless opening it is what the step asks ("Open the About box").
        if obs
            .elements
            .iter()
            .any(|e| e.layer == Some(gamepilot_core::WindowLayer::Dialog))
            && !crate::direct::asks_to_open(self.step_focus())
        {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true with one of the game's dialogs open: not done yet (asked again after the next action)"
                ),
            }));
            return None;
        }
        // A goal that names a menu ("from the Type menu") is a choice in it: a check that reads true
        // before any click landed in one of the game's menus read something else (sgt-fifteen's "Type"
        // label redrawn under the pointer read as gone, and the look agreed, with no board chosen).
        if let Some(menu) = crate::direct::named_menu(self.step_focus()).filter(|_| !self.chosen_in_menu) {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the goal check `{source}` reads true, but the goal names the {menu} menu and nothing was chosen in one of the game's menus yet: not done"
                ),
            }));
            return None;
        }
        self.start_goal_look(&source, now, out);
        None
    }

    /// Ask one more deliberative look at the current observation (and picture, where the host sees
    /// images) whether the goal (or its current step) is done, now that the agent's own check reads true.
    fn start_goal_look(&mut self, source: &str, now: MonoTime, out: &mut Vec<Effect>) {
        self.goal_looks += 1;
        let pass = GOAL_LOOK_PASS + self.goal_looks;
        self.goal_look = Some(pass);
        let step = self.step_words();
        let question = format!(
            "Question: the check `{source}` you declared for {step} now reads true. Look at the current observation: is {step} done? Say what on the screen shows it, then met true or false."
        );
        let (prompt, image) = self.deliberative_prompt(&question, now);
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("the goal check `{source}` reads true: a second look asked (pass {pass})"),
        }));
        out.push(Effect::StartDeliberation(DeliberationJob {
            pass,
            trigger: Trigger::SubgoalCompleted,
            prompt,
            schema: crate::plan::goal_look_schema(),
            image,
            // A look plans nothing: no subgoal id is spent on it.
            first_id: self.next_subgoal,
        }));
    }

    /// The second look's answer: agreed, the goal check may end the session on its next true reading;
    /// not agreed (or no answer), the session goes on and asks again after its next action.
    fn on_goal_look(&mut self, p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        self.goal_look = None;
        self.judge_look(p, now, out);
        self.release_deferred_pass(now, out);
    }

    fn judge_look(&mut self, p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        let answer = p.reply.as_ref().and_then(crate::plan::goal_look_answer);
        let Some(g) = self.agent_goal.as_mut() else {
            return;
        };
        match answer {
            Some((true, why)) => {
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("second look at the goal check `{}`: met ({why})", g.source),
                }));
                g.confirmed = Some(why);
            }
            Some((false, why)) => {
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("second look at the goal check `{}`: not met ({why})", g.source),
                }));
                self.context.record(HistoryEntry::new(
                    now,
                    format!("goal check `{}`", g.source),
                    format!("reads true, but a second look says the goal is not met: {why}"),
                ));
            }
            None => out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "second look at the goal check `{}` gave no answer ({}); asked again after the next action",
                    g.source,
                    p.plan.err().unwrap_or_default()
                ),
            })),
        }
    }

    /// A held destructive action grounded in an older transform chain is dropped (FR-PERC-002).
    fn drop_stale_held(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        let stale = self.held.as_ref().is_some_and(|h| {
            is_pointer(&h.grounded.intention.action) && h.grounded.generation < self.generation
        });
        if !stale {
            return;
        }
        if let Some(h) = self.held.take() {
            let reason = RejectReason::StaleGeneration {
                grounded: h.grounded.generation,
                current: self.generation,
            }
            .to_string();
            self.numbers.rejected += 1;
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

    fn on_rejected(
        &mut self,
        action: ActionId,
        rejection: RejectReason,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        if self.probe_running == Some(action) {
            self.probe_running = None;
            self.selfid.probe_lost();
        }
        let reason = rejection.to_string();
        if let Some(a) = self.actions.get(&action) {
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
            self.numbers.rejected += 1;
        }
        self.feed(Event::ActionFailed { action, reason }, now, out);
        self.actions.remove(&action);
    }

    /// Start a tactical tick when none is running, nothing awaits verification or the user, a subgoal is
    /// active and the interval has passed.
    fn maybe_start_tactical(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        let due = self
            .last_tactical_start
            .is_none_or(|t| now.since(t).as_millis() as u64 >= self.cfg.tactical_interval_ms);
        if self.tactical_in_flight.is_some()
            // While a second look judges whether the goal is done, or the next step's check is being
            // declared, nothing is acted on: the goal may be met; a step's check must be false when
            // declared (a coin collected meanwhile made the demo's `coins > 0` already true); and the
            // deliberative host, niced below the tactical one, answered neither within its 30 s while the
            // tactical host's calls took the 2 cores.
            || self.goal_look.is_some()
            || self.step_check.is_some()
            || self.held.is_some()
            || self.user_paused.is_some()
            || self.behind.is_some()
            || self.host.restarting
            || !self.actions.is_empty()
            || (self.cfg.fresh_frames && !self.freshness.ready_for_frame(now))
            || self.probe_running.is_some()
            || (self.state.active_subgoal().is_none()
                && !self.needs_first_screen()
                && self.goal_look_wanted.is_none())
            || !due
        {
            return;
        }
        self.tactical_tick += 1;
        self.last_tactical_start = Some(now);
        // FR-CTX-004: compact before the prompt reaches the host's context.
        let estimate = self.estimate_prompt_tokens(now);
        if self.context.needs_compaction(estimate) {
            self.compact(estimate, now, out);
        }
        let scene = self.last_scene.unwrap_or(SceneKind::Play).as_str().to_string();
        let commands = self.state.step(
            Event::GroundingRequest {
                request: self.tactical_tick,
                scene: scene.clone(),
                offered: self.cfg.grounding_paths.clone(),
            },
            now,
        );
        let path = commands.iter().find_map(|c| match c {
            Command::UsePath { path, .. } => *path,
            _ => None,
        });
        out.push(Effect::Record(SessionRecord::LoopStep {
            event: Event::GroundingRequest {
                request: self.tactical_tick,
                scene,
                offered: self.cfg.grounding_paths.clone(),
            },
            commands: commands.clone(),
        }));
        self.apply(commands, now, out);
        let mut tools = tools_for_path(path, self.cfg.camera_calibrated);
        if self.selfid.avatar().is_some() {
            // With the avatar known, a place in the world is reached by steering, not by a
            // click at a pixel (the demo's model clicked the HUD's column instead of walking to a coin);
            // marks stay clickable, for the buttons a play view carries.
            tools.retain(|t| *t != Tool::Click);
            tools.push(Tool::MoveTo);
        }
        if self.cfg.explore_unsure && tools.contains(&Tool::ClickMark) {
            tools.push(Tool::Unsure);
        }
        let perceive_only = self.selfid.probing()
            || self.retry.is_some()
            || self.explore.wanted()
            || self.survey.wanted()
            || self.recheck.is_some()
            || self.safe.returning()
            || self.goal_look_wanted.is_some()
            || self.state.active_subgoal().is_none();
        // A subgoal that names an element is clicked without a model call when exactly one
        // element carries that label — once per subgoal and name, so a click that did not finish the
        // subgoal leaves the next choice to the model.
        let direct = match (
            self.state.active_subgoal(),
            self.state.status().subgoal_description,
        ) {
            // A path the user forced is every action's path; otherwise a named element is a mark.
            (Some(_), Some(d))
                if !perceive_only
                    && tools.contains(&Tool::ClickMark)
                    && (self.cfg.grounding_paths.len() > 1 || path == Some(GroundingPath::Mark)) =>
            {
                let key = crate::direct::step_key(&d);
                let clicked: Vec<String> = self
                    .direct_done
                    .iter()
                    .filter(|(k, _)| *k == key)
                    .map(|(_, label)| label.clone())
                    .collect();
                crate::direct::DirectAim {
                    name: crate::direct::named_element(&d).filter(|name| !clicked.contains(name)),
                    words: self
                        .cfg
                        .direct_by_words
                        .then(|| crate::direct::clickable_words(&d))
                        .flatten(),
                    clicked: if self.cfg.direct_by_words {
                        clicked
                    } else {
                        Vec::new()
                    },
                }
            }
            _ => crate::direct::DirectAim::default(),
        };
        let job = TacticalJob {
            tick: self.tactical_tick,
            excluded_marks: self.excluded.clone(),
            tools,
            path,
            two_stage: path == Some(GroundingPath::TwoStage) && !perceive_only,
            with_image: self.cfg.with_image,
            visual_pixels: self.cfg.visual_pixels,
            coords: if self.cfg.with_image {
                self.cfg.coord_convention
            } else {
                gamepilot_core::CoordConvention::CapturePixels
            },
            observation_max_bytes: self.cfg.observation_max_bytes,
            observation_max_elements: self.cfg.observation_max_elements,
            generation: self.generation,
            health: self.health,
            perceive_only,
            keep_frame: self.selfid.enabled() && self.selfid.avatar().is_none(),
            focus: crate::relevance::Focus::new(
                self.cfg.goal.clone(),
                self.context.plan().subgoal.as_deref().unwrap_or(""),
            ),
            avatar: self.selfid.avatar().cloned(),
            direct: direct.name.clone(),
            direct_words: direct.words.clone(),
            direct_clicked: direct.clicked.clone(),
            sensors: sensors_line(&self.numbers.sensors, &self.sensors_at_last_call),
        };
        self.tactical_in_flight = Some(TacticalInFlight {
            tick: self.tactical_tick,
            generation: self.generation,
            direct: direct.is_some().then(|| (direct, self.excluded.clone())),
            job: job.clone(),
            asking: None,
        });
        out.push(Effect::StartTactical(Box::new(job)));
        self.sensors_at_last_call = self.numbers.sensors.clone();
    }

    /// A tactical prompt's size estimate: the context over the last observation, plus an image.
    fn estimate_prompt_tokens(&self, now: MonoTime) -> u32 {
        let obs = ObservationText::new(now, self.last_observation.clone());
        let p = self.context.assemble(Cadence::Tactical, &obs, None);
        let image = if self.cfg.with_image {
            self.cfg.image_tokens
        } else {
            0
        };
        p.estimate_tokens(self.context.config().bytes_per_token, 0) + image
    }

    fn compact(&mut self, tokens_before: u32, now: MonoTime, out: &mut Vec<Effect>) {
        let event = self
            .context
            .compact(CompactionInput::default(), tokens_before, now);
        self.numbers.compactions += 1;
        out.push(Effect::Record(SessionRecord::Compaction(event)));
    }

    /// The tactical tick in flight when it is `tick`; otherwise a note that a late report was ignored.
    fn tick_in_flight(
        &mut self,
        tick: u64,
        what: &str,
        out: &mut Vec<Effect>,
    ) -> Option<&mut TacticalInFlight> {
        if self.tactical_in_flight.as_ref().is_some_and(|f| f.tick == tick) {
            return self.tactical_in_flight.as_mut();
        }
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("{what} for tick {tick} ignored: not the tick in flight"),
        }));
        None
    }

    /// A tick's frame is perceived: decide what the model reads (element order, `move_to` places, the
    /// observation text) and whether it is asked at all; compose the call.
    fn on_perceived(&mut self, p: crate::tactical::Perception, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(flight) = self.tick_in_flight(p.tick, "a perception", out) else {
            return;
        };
        let job = flight.job.clone();
        let obs = &p.observation;
        // What the model reads: goal words first, then (avatar known) places nearest it.
        let order = crate::relevance::model_order(obs, &job.focus, job.avatar.as_ref());
        let mut listing = obs.to_text_listing(&order, job.observation_max_elements);
        if let Some(line) = &job.sensors {
            listing = format!("{listing}{line}\n");
        }
        let observation_text = observation_for_model(&listing, job.health, job.observation_max_bytes);
        if self.start_pass_waiting.is_some() {
            if self.declarations.is_some() {
                self.last_elements = obs.elements.clone();
            }
            self.last_observation = bound_text(&observation_text, self.cfg.observation_max_bytes);
            if obs.frame_size.area() > 0 {
                self.last_frame_size = Some(obs.frame_size);
            }
            self.release_start_pass(now, out);
        }
        // The subgoal names the one element labelled so: the session clicks it without a model call.
        let aim = crate::direct::DirectAim {
            name: job.direct.clone(),
            words: job.direct_words.clone(),
            clicked: job.direct_clicked.clone(),
        };
        let direct = aim.target(obs, &job.excluded_marks).map(|(mark, _)| mark);
        // The subgoal asks to close what is open and nothing is labelled so: Escape, no model call.
        let dismiss = direct.is_none() && aim.dismisses(obs, &job.excluded_marks);
        // A play field that starts the self-identification probe is not shown to the model: its answer
        // would be set aside for the probe's holds (a cold prompt of seconds spent for nothing).
        let probe_first = !job.perceive_only
            && direct.is_none()
            && !dismiss
            && self
                .selfid
                .would_start_probing(obs, scene_kind(obs), observation_signature(obs));
        if job.perceive_only || direct.is_some() || dismiss || probe_first {
            let message = match direct {
                Some(mark) => format!("the subgoal names mark {mark}'s label: no model call"),
                None if dismiss => "the subgoal closes what is open: Escape, no model call".into(),
                None if probe_first => "the avatar is identified first (probe holds): no model call".into(),
                None => "perceive-only tick".into(),
            };
            let failure = TacticalFailure {
                kind: FailureKind::NotAsked,
                message,
                latency_ms: 0.0,
            };
            return self.end_tick(p, observation_text, None, None, Err(failure), now, out);
        }
        let tools = match ToolSet::new(&job.tools) {
            Ok(t) => t,
            Err(e) => {
                let failure = TacticalFailure {
                    kind: FailureKind::Host,
                    message: e.to_string(),
                    latency_ms: 0.0,
                };
                return self.end_tick(p, observation_text, None, None, Err(failure), now, out);
            }
        };
        let visual = job.with_image.then_some(job.visual_pixels);
        let composed = if job.two_stage {
            crate::tactical::compose_localise(&self.context, p.tick, &p, visual).map(|c| (c, None))
        } else {
            let present: Vec<ElementId> = obs
                .elements
                .iter()
                .map(|e| e.id)
                .filter(|id| !job.excluded_marks.contains(id))
                .collect();
            let move_targets: Vec<ElementId> = job
                .avatar
                .as_ref()
                .map(|a| crate::selfid::move_targets(obs, a))
                .unwrap_or_default();
            let (max_elements, health, max_bytes) = (
                job.observation_max_elements,
                job.health,
                job.observation_max_bytes,
            );
            crate::tactical::compose_act(
                &self.context,
                p.tick,
                &p,
                &observation_text,
                |scaled, space| {
                    observation_for_model(
                        &format!(
                            "{}\n{}",
                            space.describe(),
                            scaled.to_text_listing(&order, max_elements)
                        ),
                        health,
                        max_bytes,
                    )
                },
                &crate::tactical::ActPlan {
                    tools: &tools,
                    present: &present,
                    move_targets: &move_targets,
                    visual_pixels: visual,
                    coords: job.coords,
                    limits: &SchemaLimits::default(),
                },
            )
        };
        match composed {
            Ok((c, model_text)) => {
                let tail = (!job.two_stage).then_some(c.tail);
                if let Some(flight) = self.tactical_in_flight.as_mut() {
                    flight.asking = Some(Asking {
                        perception: p,
                        observation_text: model_text.unwrap_or(observation_text),
                        tail,
                        crop: None,
                        localised: None,
                    });
                }
                out.push(Effect::CallModel(Box::new(c.call)));
            }
            Err(failure) => self.end_tick(p, observation_text, None, None, Err(failure), now, out),
        }
    }

    /// A model call of the tick in flight answered (or failed): a localising point asks for the region
    /// around it; an action, or a failure, ends the tick.
    fn on_replied(
        &mut self,
        tick: u64,
        answer: Result<crate::tactical::ModelAnswer, TacticalFailure>,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some(flight) = self.tick_in_flight(tick, "a model reply", out) else {
            return;
        };
        let visual_pixels = flight.job.visual_pixels;
        let excluded_marks = flight.job.excluded_marks.clone();
        let Some(mut asking) = flight.asking.take() else {
            // The frame could not be perceived (capture or OCR failed): the tick ends with nothing seen.
            let failure = match answer {
                Err(f) => f,
                Ok(_) => TacticalFailure {
                    kind: FailureKind::Perception,
                    message: "a reply came for a tick whose frame was never perceived".into(),
                    latency_ms: 0.0,
                },
            };
            let nothing = crate::tactical::Perception {
                tick,
                started: now,
                observation: Observation {
                    at: now,
                    frame_size: gamepilot_core::Size::new(0, 0),
                    class: FrameChange::Unchanged,
                    texts: Vec::new(),
                    elements: Vec::new(),
                },
                moves: Vec::new(),
            };
            let text = format!("({})", failure.message);
            return self.end_tick(nothing, text, None, None, Err(failure), now, out);
        };
        let localised_ms = asking.localised.as_ref().map_or(0.0, |l| l.latency_ms);
        let reply = match answer {
            Ok(crate::tactical::ModelAnswer::Localised { point, figures }) => {
                let observation = &asking.perception.observation;
                let excluded = excluded_marks
                    .iter()
                    .filter_map(|id| observation.element(*id).map(|e| e.bbox))
                    .collect();
                out.push(Effect::PerceiveCrop(crate::effect::PerceiveCrop {
                    tick,
                    point,
                    cheap: crate::tactical::cheap_size(observation.frame_size),
                    pixels: visual_pixels,
                    excluded,
                }));
                asking.localised = Some(figures);
                if let Some(flight) = self.tactical_in_flight.as_mut() {
                    flight.asking = Some(asking);
                }
                return;
            }
            Ok(crate::tactical::ModelAnswer::Act(mut reply)) => {
                if let Some(l) = &asking.localised {
                    reply.latency_ms += l.latency_ms;
                    reply.tokens_in += l.tokens_in;
                    reply.tokens_out += l.tokens_out;
                    reply.cached_tokens += l.cached_tokens;
                }
                Ok(reply)
            }
            Err(mut f) => {
                // The localising call of a two-stage tick is the only one asked with no tail kept.
                if asking.tail.is_none() && asking.localised.is_none() {
                    f.message = format!("localise pass: {}", f.message);
                }
                f.latency_ms += localised_ms;
                Err(f)
            }
        };
        let Asking {
            perception,
            observation_text,
            tail,
            crop,
            ..
        } = asking;
        self.end_tick(perception, observation_text, crop, tail, reply, now, out)
    }

    /// A two-stage tick's region is perceived: compose the acting call on it.
    fn on_crop_perceived(
        &mut self,
        c: crate::tactical::CropPerception,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some(flight) = self.tick_in_flight(c.tick, "a crop perception", out) else {
            return;
        };
        let job = flight.job.clone();
        let Some(mut asking) = flight.asking.take() else {
            return;
        };
        let composed = ToolSet::new(&job.tools)
            .map_err(|e| TacticalFailure {
                kind: FailureKind::Host,
                message: e.to_string(),
                latency_ms: 0.0,
            })
            .and_then(|tools| {
                crate::tactical::compose_crop_act(
                    &self.context,
                    asking.perception.started,
                    &c,
                    &tools,
                    job.with_image.then_some(job.visual_pixels),
                    &SchemaLimits::default(),
                )
            });
        asking.crop = Some(c.in_capture);
        match composed {
            Ok(composed) => {
                asking.tail = Some(composed.tail);
                if let Some(flight) = self.tactical_in_flight.as_mut() {
                    flight.asking = Some(asking);
                }
                out.push(Effect::CallModel(Box::new(composed.call)));
            }
            Err(f) => {
                let Asking {
                    perception,
                    observation_text,
                    crop,
                    ..
                } = asking;
                self.end_tick(perception, observation_text, crop, None, Err(f), now, out)
            }
        }
    }

    /// The tick's outcome, once its perception and any model call are in.
    #[allow(clippy::too_many_arguments)]
    fn end_tick(
        &mut self,
        p: crate::tactical::Perception,
        observation_text: String,
        crop: Option<Observation>,
        tail: Option<gamepilot_context::TacticalTail>,
        reply: Result<ModelReply, TacticalFailure>,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let outcome = TacticalOutcome {
            tick: p.tick,
            started: p.started,
            observation: p.observation,
            observation_text,
            crop,
            reply,
            moves: p.moves,
            tail,
        };
        self.on_tactical(outcome, now, out)
    }

    fn on_tactical(&mut self, mut t: TacticalOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        let (generation, direct) = match self.tactical_in_flight.take() {
            Some(f) if f.tick == t.tick => (f.generation, f.direct),
            other => {
                self.tactical_in_flight = other;
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!(
                        "tactical result for tick {} ignored: not the tick in flight",
                        t.tick
                    ),
                }));
                return;
            }
        };
        self.seen_at = Some(t.started);
        // Only a session whose agent declares its checks names marks of a past frame.
        if self.declarations.is_some() {
            self.last_elements = t.observation.elements.clone();
        }
        let scene = scene_kind(&t.observation);
        self.last_scene = Some(scene);
        self.last_print = ScreenPrint::of(&t.observation, scene);
        let text = bound_text(&t.observation_text, self.cfg.observation_max_bytes);
        self.last_observation = text.clone();
        if t.observation.frame_size.area() > 0 {
            self.last_frame_size = Some(t.observation.frame_size);
        }
        if let Some(tail) = t.tail.take() {
            self.context.commit_tactical(tail);
        }
        self.context.end_tick(ObservationText::new(t.started, text));
        let unfinished = self.release_goal_look(t.started, &t.observation, out, now);
        let signature = observation_signature(&t.observation);
        // The suppression list is what this observation's tick says; an absent Exclude means none
        // (FR-GND-007: suppression expires after its bound).
        self.excluded.clear();
        self.feed(
            Event::Observation {
                scene: scene.as_str().into(),
                signature,
            },
            now,
            out,
        );
        // Self-identification: on the first play field, and after each probe hold.
        let perceived_only = matches!(&t.reply, Err(f) if f.kind == FailureKind::NotAsked);
        match self
            .selfid
            .on_observation(&t.observation, scene, signature, &t.moves)
        {
            crate::selfid::SelfIdStep::Hold(key) => {
                if let Ok(r) = &t.reply {
                    self.record_call(r);
                    self.context.record(HistoryEntry::new(
                        now,
                        r.text.clone(),
                        "set aside: the agent first identifies its avatar (probe holds of its direction keys)",
                    ));
                }
                self.propose_probe(key, generation, now, out);
                return;
            }
            crate::selfid::SelfIdStep::Done(result) => {
                let text = match &result {
                    Ok(m) => {
                        // The smallest sprite-sized unlabelled element under the avatar's centre is its mark.
                        let c = m.bbox.center();
                        let sprite = t
                            .observation
                            .elements
                            .iter()
                            .filter(|e| {
                                e.label.is_none() && e.bbox.contains(c) && e.bbox.w <= 96 && e.bbox.h <= 96
                            })
                            .min_by_key(|e| e.bbox.w * e.bbox.h)
                            .map(|e| (e.id.0, e.looks.as_deref()));
                        m.note(sprite)
                    }
                    Err(e) if self.selfid.failure().is_some() => {
                        format!("Self-identification found no avatar: {e}; move_to is not offered.")
                    }
                    Err(e) => format!(
                        "Self-identification found no avatar on this view: {e}; another view will be tried."
                    ),
                };
                if !self.probe_holds.is_empty() {
                    let holds = std::mem::take(&mut self.probe_holds).join(", ");
                    self.context
                        .record(HistoryEntry::new(now, format!("{PROBE_LABEL} {holds}"), "done"));
                }
                if let Err(e) = self.context.note(&text, now) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("avatar note refused: {e}"),
                    }));
                }
                let evidence = result.as_ref().map(|m| m.evidence.as_str()).unwrap_or("");
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("self-identification: {text} Evidence: {evidence}"),
                }));
            }
            crate::selfid::SelfIdStep::Nothing => {}
        }
        // On the way back to the safe screen, a reply to a call started before the rung is set aside: the
        // step back is decided on this observation.
        if self.safe.returning() {
            if !perceived_only {
                out.push(Effect::Record(SessionRecord::Note {
                    text: "a model reply set aside: the session is going back to the safe screen".into(),
                }));
            }
            return self.step_back(&t.observation, scene, generation, now, out);
        }
        if let Some(aim) = unfinished.filter(|_| self.actions.is_empty()) {
            // The step whose check read true was completed by it: the click needs a subgoal to belong to.
            if self.adopt_goal_as_subgoal(true, now, out) {
                // The marks the aim was found among: a refuted mark stays excluded.
                let excluded = self.excluded.clone();
                return self.ground_direct(&aim, &excluded, &t.observation, generation, now, out);
            }
        }
        if perceived_only {
            if self.survey.wanted() {
                return self.survey_step(&t.observation, scene, generation, now, out);
            }
            if let Some((aim, excluded)) = direct {
                if aim.dismisses(&t.observation, &excluded) {
                    return self.dismiss_with_escape(&t.observation, generation, now, out);
                }
                return self.ground_direct(&aim, &excluded, &t.observation, generation, now, out);
            }
            if self.explore.wanted() && self.explore_next(&t.observation, generation, now, out) {
                return;
            }
            if let Some(again) = self.recheck.take() {
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("{} checked again on a frame taken after the change", again.label),
                }));
                // Its own transform chain: a pointer action grounded before the window moved is stale.
                let grounded_in = again.generation;
                self.act_on(again, &t.observation, grounded_in, now, out);
                return;
            }
            if let Some(again) = self.retry.take() {
                if let Some(grounded) = self.ground(&again, &t.observation, false, generation, now) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("retry: {} grounded again on a fresh observation", grounded.label),
                    }));
                    self.act_on(grounded, &t.observation, generation, now, out);
                }
            }
            return;
        }
        let reply = match t.reply {
            Ok(r) => r,
            Err(f) => {
                self.numbers.tactical_failures += 1;
                self.context.record(HistoryEntry::new(
                    now,
                    "(model call)",
                    format!("failed: {}", f.message),
                ));
                if f.kind == FailureKind::SchemaBroken {
                    self.numbers.schema_violations += 1;
                }
                match self.host.failed(&f, now) {
                    HostVerdict::GoOn => {}
                    HostVerdict::Shrink => {
                        let tokens = self.estimate_prompt_tokens(now).max(self.cfg.context_tokens);
                        self.compact(tokens, now, out);
                        // The host's count is higher than our estimate: shrink what we send.
                        self.cfg.observation_max_bytes = (self.cfg.observation_max_bytes / 2).max(400);
                    }
                    HostVerdict::Stop(stop) => self.finish(stop, out),
                }
                return;
            }
        };
        self.host.answered();
        self.record_call(&reply);
        if self.context.needs_compaction(reply.tokens_in as u32) {
            self.compact(reply.tokens_in as u32, now, out);
        }
        if reply.reply == TacticalReply::Unsure {
            return self.on_unsure(&t.observation, scene, now, out);
        }
        let marks = t.crop.as_ref().unwrap_or(&t.observation);
        let two_stage = t.crop.is_some();
        let Some(grounded) = self.ground(&reply.reply, marks, two_stage, generation, now) else {
            return;
        };
        self.last_reply = Some(reply.reply.clone());
        self.act_on(grounded, &t.observation, generation, now, out);
    }

    /// What follows grounding, for a model's reply and a retry alike: a stale pointer action is dropped, a
    /// paused session acts on nothing, a destructive dialogue holds the action for the user, and otherwise
    /// it is proposed.
    fn act_on(
        &mut self,
        mut grounded: GroundedAction,
        observation: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        // A step back to the safe screen is not evidence that the screen it left is a safe one.
        if !self.safe.returning() {
            grounded.screen = ScreenPrint::of(observation, scene_kind(observation));
        }
        if let Action::Click { x, y, .. } = grounded.intention.action {
            grounded.in_menu = observation.elements.iter().any(|e| {
                e.layer == Some(gamepilot_core::WindowLayer::Popup) && e.bbox.contains(Point::new(x, y))
            });
        }
        // FR-PERC-002: a pointer action grounded before the window moved is stale.
        if is_pointer(&grounded.intention.action) && generation < self.generation {
            let reason = RejectReason::StaleGeneration {
                grounded: generation,
                current: self.generation,
            }
            .to_string();
            self.numbers.rejected += 1;
            self.context.record(HistoryEntry::new(
                now,
                grounded.label,
                format!("not executed: {reason}"),
            ));
            return;
        }
        // FR-SAFE-002: a reply that comes back while the user has the game is not acted on.
        if self.user_paused.is_some() || self.behind.is_some() {
            let why = match self.user_paused {
                Some(_) => "not executed: the user paused the session",
                None => "not executed: the game is not in front",
            };
            self.context.record(HistoryEntry::new(now, grounded.label, why));
            return;
        }
        if let Some(near) = destructive::answer_scope(&grounded.intention.action) {
            // FR-SAFE-005: the dialogue check reads the frame the choice was made on; a choice made before
            // the screen changed is made again on what the screen shows now.
            if let Some(seen) = self.seen_at.filter(|_| self.cfg.fresh_frames) {
                if let crate::fresh::Judgement::Stale(why) = self.freshness.judge(seen) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!(
                            "{} not sent yet, chosen on an old frame ({why}): checked again on a fresh one",
                            grounded.label
                        ),
                    }));
                    self.recheck = Some(grounded);
                    return;
                }
            }
            if let Some(found) = destructive::check(&observation.texts, near, DESTRUCTIVE_RADIUS_PX) {
                let hold = self.next_hold;
                self.next_hold += 1;
                out.push(Effect::Record(SessionRecord::Interlock {
                    interlock: Safeguard::DestructiveAction,
                    detail: format!(
                        "held: {} near {:?} ({})",
                        grounded.label, found.text, found.pattern
                    ),
                }));
                out.push(Effect::Reflex(ReflexCommand::Pause { paused: true }));
                out.push(Effect::AskConfirmation(ConfirmationJob {
                    hold,
                    label: grounded.label.clone(),
                    pattern: found.pattern.clone(),
                    text: found.text.clone(),
                }));
                self.held = Some(HeldAction {
                    hold,
                    grounded,
                    found,
                });
                return;
            }
        }
        self.propose(grounded, now, out);
    }

    /// The subgoal named an element and the tactical thread found exactly one labelled so: click its mark
    /// with no model call, labelled as the session's own grounding.
    fn ground_direct(
        &mut self,
        aim: &crate::direct::DirectAim,
        excluded: &[ElementId],
        obs: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let Some((mark, name)) = aim.target(obs, excluded) else {
            return;
        };
        let step = self
            .state
            .status()
            .subgoal_description
            .unwrap_or_else(|| self.step_focus().to_string());
        self.direct_done
            .push((crate::direct::step_key(&step), name.clone()));
        let reply = TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        };
        if let Some(grounded) = self.ground(&reply, obs, false, generation, now) {
            self.numbers.direct_groundings += 1;
            out.push(Effect::Record(SessionRecord::Note {
                text: if aim.name.as_deref() == Some(name.as_str()) {
                    format!("grounded without a model call: the subgoal names '{name}', the one element so labelled is mark {mark}")
                } else {
                    format!("grounded without a model call: the subgoal's words hold the whole label '{name}' of mark {mark}")
                },
            }));
            self.act_on(grounded, obs, generation, now, out);
        }
    }

    /// Exploration's next try on `obs`: the nearest untried element like the one whose click changed
    /// nothing, clicked without a model call (a retry of the same click waits behind it). False when
    /// there is none to try: the model is asked as usual.
    fn explore_next(
        &mut self,
        obs: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> bool {
        let Some((mark, label)) = self.explore.next(obs, &self.excluded) else {
            return false;
        };
        let reply = TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        };
        let Some(mut grounded) = self.ground(&reply, obs, false, generation, now) else {
            return false;
        };
        grounded.label = format!("{EXPLORE_LABEL} {label} (mark {}), {}", mark.0, grounded.label);
        self.retry = None;
        self.numbers.direct_groundings += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!(
                "exploring without a model call (try {} of at most {}): the last click changed nothing, {label} (mark {}) is the nearest untried element like it",
                self.explore.tries(),
                crate::explore::MAX_TRIES,
                mark.0
            ),
        }));
        self.act_on(grounded, obs, generation, now, out);
        true
    }

    /// The model answered `unsure`: a survey starts from this screen, or the way back starts from the
    /// screen a survey's try opened, or nothing is explored and the model is asked again as usual.
    fn on_unsure(&mut self, obs: &Observation, scene: SceneKind, now: MonoTime, out: &mut Vec<Effect>) {
        let focus = self.survey_focus();
        let (outcome, note) = match self.survey.unsure(obs, ScreenPrint::of(obs, scene), &focus) {
            crate::survey::Unsure::Began(home) => (
                "exploring: the agent tries the likely elements itself".to_string(),
                format!("the model is unsure: exploring from {home}"),
            ),
            crate::survey::Unsure::GoBack(what) => (
                "exploring: going back to try the next element".to_string(),
                format!("the model is unsure here too ({what}): going back"),
            ),
            crate::survey::Unsure::Refused(why) => (
                format!("nothing explored: {why}"),
                format!("the model is unsure; nothing explored: {why}"),
            ),
        };
        self.context.record(HistoryEntry::new(now, "unsure", outcome));
        out.push(Effect::Record(SessionRecord::Note { text: note }));
    }

    /// What a survey's tries are ordered toward: the goal and the plan's current step.
    fn survey_focus(&self) -> crate::relevance::Focus {
        crate::relevance::Focus::new(
            self.cfg.goal.clone(),
            self.context.plan().subgoal.as_deref().unwrap_or(""),
        )
    }

    /// The survey's move on a fresh observation: a try or a step back, clicked or pressed without a model
    /// call and verified like any action; what a try opened, noted (the context is the only memory); or
    /// the survey's end. A try the destructive check holds for the user ends the survey there.
    fn survey_step(
        &mut self,
        obs: &Observation,
        scene: SceneKind,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let focus = self.survey_focus();
        let here = ScreenPrint::of(obs, scene);
        let Some(step) = self.survey.next(obs, here.as_ref(), &focus, &self.excluded) else {
            return;
        };
        let left = |mark| TacticalReply::ClickMark {
            mark,
            button: gamepilot_core::MouseButton::Left,
        };
        let (reply, what) = match step {
            crate::survey::Move::Look(found) => {
                if let Err(e) = self.context.note(&found, now) {
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("exploration note refused: {e}"),
                    }));
                }
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!("exploring: {found}; the model looks at it"),
                }));
                return;
            }
            crate::survey::Move::Done(why) => {
                self.context
                    .record(HistoryEntry::new(now, "exploring", why.clone()));
                out.push(Effect::Record(SessionRecord::Note { text: why }));
                return;
            }
            crate::survey::Move::Try { mark, label, n } => (
                left(mark),
                format!(
                    "'{label}' (mark {}, try {n} of at most {})",
                    mark.0,
                    crate::survey::MAX_TRIES
                ),
            ),
            crate::survey::Move::Back(SafeStep::Click(mark, label)) => {
                (left(mark), format!("back by '{label}'"))
            }
            crate::survey::Move::Back(SafeStep::Press(action)) => {
                (TacticalReply::Act(action), "back by Escape".to_string())
            }
            crate::survey::Move::Back(_) => return,
        };
        let Some(mut grounded) = self.ground(&reply, obs, false, generation, now) else {
            return;
        };
        grounded.label = format!("{SURVEY_LABEL} {what}, {}", grounded.label);
        self.numbers.direct_groundings += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("{} (without a model call)", grounded.label),
        }));
        self.act_on(grounded, obs, generation, now, out);
        if self.held.is_some() {
            if let Some(note) = self.survey.abandon("a destructive action is held for the user") {
                out.push(Effect::Record(SessionRecord::Note { text: note }));
            }
        }
    }

    /// What a click's verdict teaches exploration: one that changed nothing makes its like worth trying;
    /// an exploration click that changed something is noted (the context is the only memory).
    fn explored(
        &mut self,
        a: &GroundedAction,
        verdict: gamepilot_grounding::Verdict,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        if a.label.starts_with(SURVEY_LABEL) {
            // A survey's own click: the survey judges it on the next perception, not the sibling search.
            self.survey
                .verdict(verdict == gamepilot_grounding::Verdict::Refuted);
            return;
        }
        let Action::Click { x, y, .. } = a.intention.action else {
            return;
        };
        match verdict {
            gamepilot_grounding::Verdict::Refuted if self.cfg.explore_siblings => {
                self.explore.refuted(gamepilot_core::Point { x, y })
            }
            gamepilot_grounding::Verdict::Confirmed => {
                self.explore.confirmed();
                if a.label.starts_with(EXPLORE_LABEL) {
                    let tried = self.explore.tried();
                    let before = tried[..tried.len().saturating_sub(1)].join(", ");
                    let what = tried.last().cloned().unwrap_or_default();
                    let text = if before.is_empty() {
                        format!("clicking {what} changed the screen where the click before it did not")
                    } else {
                        format!("clicking {what} changed the screen; {before} did not")
                    };
                    if let Err(e) = self.context.note(&text, now) {
                        out.push(Effect::Record(SessionRecord::Note {
                            text: format!("exploration note refused: {e}"),
                        }));
                    }
                    out.push(Effect::Record(SessionRecord::Note {
                        text: format!("exploration: {text}"),
                    }));
                }
            }
            _ => {}
        }
    }

    /// The subgoal asks to close the dialog or menu that is open and nothing on screen is labelled so:
    /// tap Escape without a model call, once per subgoal, verified like any action.
    fn dismiss_with_escape(
        &mut self,
        obs: &Observation,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let step = self
            .state
            .status()
            .subgoal_description
            .unwrap_or_else(|| self.step_focus().to_string());
        let key = crate::direct::step_key(&step);
        if self.direct_done.iter().any(|(k, l)| *k == key && l == "escape") {
            return;
        }
        self.direct_done.push((key, "escape".into()));
        let reply = TacticalReply::Act(Action::Key { key: "Escape".into() });
        if let Some(grounded) = self.ground(&reply, obs, false, generation, now) {
            self.numbers.direct_groundings += 1;
            out.push(Effect::Record(SessionRecord::Note {
                text: "grounded without a model call: the subgoal closes what is open and nothing on screen is labelled so: Escape".into(),
            }));
            self.act_on(grounded, obs, generation, now, out);
        }
    }

    /// A probe hold of self-identification: a session action like any other (budgets, rate, denied keys,
    /// verification by view change), labelled as the session's own.
    fn propose_probe(&mut self, key: String, generation: u64, now: MonoTime, out: &mut Vec<Effect>) {
        let probe_ms = self.selfid.config().map(|c| c.probe_ms).unwrap_or(300);
        let action = Action::HoldKey {
            key: key.clone(),
            duration_ms: Some(probe_ms),
        };
        let expected = expectation(&action, None);
        let label = format!("{PROBE_LABEL} hold {key} {probe_ms} ms");
        let grounded = GroundedAction::new(action, None, None, expected, label, generation);
        self.probe_running = Some(ActionId(self.next_action));
        self.propose(grounded, now, out);
    }

    /// `move_to`: the reflex steers the avatar to the marked element with the keys
    /// self-identification learned; the evidence is the avatar's box reaching the target's.
    fn ground_move_to(
        &mut self,
        mark: ElementId,
        marks: &Observation,
        generation: u64,
        now: MonoTime,
    ) -> Option<GroundedAction> {
        let label = format!("move_to {mark}");
        let refuse = |ctx: &mut Context, why: &str| {
            ctx.record(HistoryEntry::new(now, label.clone(), why.to_string()));
            None
        };
        let (Some(model), Some(max_ms)) = (
            self.selfid.avatar().cloned(),
            self.selfid.config().map(|c| c.max_steer_ms),
        ) else {
            return refuse(&mut self.context, "not executed: the avatar is not identified");
        };
        let Some(el) = marks.element(mark) else {
            return refuse(&mut self.context, "mark not present");
        };
        let avatar = model.locate(&crate::selfid::seen(marks)).unwrap_or(model.bbox);
        if avatar.contains(el.bbox.center()) || el.bbox.contains(avatar.center()) {
            return refuse(&mut self.context, "not executed: that mark is the avatar itself");
        }
        let plan = gamepilot_grounding::SteerPlan::new(&model, avatar, el.bbox, max_ms);
        let action = Action::Steer {
            up: plan.keys.up.clone(),
            down: plan.keys.down.clone(),
            left: plan.keys.left.clone(),
            right: plan.keys.right.clone(),
            duration_ms: plan.bound_ms,
        };
        let expected = ExpectedChange::Postcondition {
            source: format!("the avatar reaches mark {mark}"),
        };
        Some(GroundedAction {
            settle_ms: Some(plan.bound_ms + 1_000),
            steer: Some(plan),
            ..GroundedAction::new(
                action,
                Some(Target::Mark { element: mark }),
                Some(GroundingPath::Mark),
                (expected, None),
                label,
                generation,
            )
        })
    }

    fn record_call(&mut self, reply: &ModelReply) {
        self.numbers.tactical_calls += 1;
        self.numbers.tactical_latency_ms.push(reply.latency_ms);
        self.numbers.prompt_tokens += reply.tokens_in;
        self.numbers.cached_prompt_tokens += reply.cached_tokens;
    }

    /// Grounding: a mark becomes its box centre in capture space (FR-GND-001); coordinates stay as given
    /// (FR-GND-002); a note goes to the note block. `None`: nothing to execute.
    fn ground(
        &mut self,
        reply: &TacticalReply,
        marks: &Observation,
        two_stage: bool,
        generation: u64,
        now: MonoTime,
    ) -> Option<GroundedAction> {
        let (action, mark, path, target) = match reply {
            // Exploration answers it before grounding (`on_unsure`); grounded, it executes nothing.
            TacticalReply::Unsure => return None,
            TacticalReply::Note { text } => {
                let outcome = match self.context.note(text, now) {
                    Ok(o) => format!("{o:?}"),
                    Err(e) => format!("refused: {e}"),
                };
                self.context
                    .record(HistoryEntry::new(now, format!("note: {text}"), outcome));
                return None;
            }
            TacticalReply::ClickMark { mark, button } => {
                let Some(el) = marks.element(*mark) else {
                    self.context.record(HistoryEntry::new(
                        now,
                        format!("click_mark {mark}"),
                        "mark not present",
                    ));
                    return None;
                };
                let c = el.bbox.center();
                (
                    Action::Click {
                        x: c.x,
                        y: c.y,
                        button: *button,
                    },
                    Some((*mark, el.bbox)),
                    Some(if two_stage {
                        GroundingPath::TwoStage
                    } else {
                        GroundingPath::Mark
                    }),
                    Some(Target::Mark { element: *mark }),
                )
            }
            TacticalReply::MoveTo { mark } => return self.ground_move_to(*mark, marks, generation, now),
            TacticalReply::Act(a) => {
                let target = match a {
                    Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. } => Some(Target::Point {
                        point: Point::new(*x, *y),
                    }),
                    _ => None,
                };
                let path = target.map(|_| {
                    if two_stage {
                        GroundingPath::TwoStage
                    } else {
                        GroundingPath::Coordinate
                    }
                });
                // A key that moves a list's cursor is expected to move it off the item drawn as chosen:
                // that item's pixels change (FR-GND-006), where a whole-view change would also take a
                // blinking caret or an animation for the cursor's move.
                (a.clone(), cursor_item(a, marks), path, target)
            }
        };
        let label = action_label(&action, mark.map(|(id, _)| id), marks);
        let expected = expectation(&action, mark);
        Some(GroundedAction::new(
            action, target, path, expected, label, generation,
        ))
    }

    /// Propose a grounded action to the loop logic, which executes or rejects it.
    fn propose(&mut self, grounded: GroundedAction, now: MonoTime, out: &mut Vec<Effect>) {
        // An action chosen on what a survey's try opened (the model's, or the session's own grounding of
        // a named element) ends the survey: it found the way on.
        // Waiting is no choice: the model may wait for what a try opened to finish drawing.
        let chose = !grounded.label.starts_with(SURVEY_LABEL)
            && !matches!(grounded.intention.action, Action::Wait { .. });
        if chose {
            if let Some(note) = self.survey.chosen() {
                out.push(Effect::Record(SessionRecord::Note { text: note }));
            }
        }
        let id = ActionId(self.next_action);
        self.next_action += 1;
        let event = Event::ActionProposed {
            action: id,
            key: grounded.label.clone(),
            target: grounded.target,
            path: grounded.path,
            expected: grounded.expected.clone(),
            settle_ms: Some(grounded.settle_ms.unwrap_or(self.cfg.loop_cfg.settle_ms)),
        };
        self.actions.insert(id, grounded);
        self.feed(event, now, out);
    }

    fn on_confirmation(&mut self, a: ConfirmationAnswer, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(h) = self.held.take_if(|h| h.hold == a.hold) else {
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
            self.numbers.rejected += 1;
            self.context
                .record(HistoryEntry::new(now, h.grounded.label, a.reason));
        }
    }

    /// A deliberative pass's job: the context as of now and fresh subgoal ids.
    fn deliberation_job(&mut self, pass: u64, trigger: Trigger, now: MonoTime) -> DeliberationJob {
        let first_id = self.next_subgoal;
        self.next_subgoal += 3;
        let ask = format!("Deliberation trigger: {trigger:?}{}", self.declaring_lines());
        let (prompt, image) = self.deliberative_prompt(&ask, now);
        DeliberationJob {
            pass,
            trigger,
            prompt,
            schema: match self.declaring_schema() {
                Some(schema) => schema,
                None => crate::plan::plan_schema(&crate::plan::Postconditions {
                    sources: self.cfg.postconditions.clone(),
                }),
            },
            image,
            first_id,
        }
    }

    /// A declaring session's plan schema as of now: the sensors it may name, whether the goal's check
    /// is still wanted, the marks of the latest frame and those that show a number.
    fn declaring_schema(&self) -> Option<serde_json::Value> {
        let d = self.declarations.as_ref()?;
        let named = d
            .bool_names()
            .into_iter()
            .chain(self.cfg.postconditions.iter().cloned())
            .fold(Vec::new(), |mut names, n| {
                if !names.contains(&n) {
                    names.push(n);
                }
                names
            });
        let (falling, rising): (Vec<_>, Vec<_>) =
            crate::goal_steps::relevant_counters(&self.last_elements, self.step_focus())
                .into_iter()
                .partition(crate::goal_steps::Counter::counts_down);
        let numbers = crate::plan::Numbers {
            rising: rising.iter().map(|c| c.mark).collect(),
            falling: falling.iter().map(|c| c.mark).collect(),
        };
        // A step whose words name a number the screen shows ("collect a coin" beside "Coins 0") is
        // checked by that number rising: the marks that could be gone are not offered then (offered both,
        // the small model declared the compass's "SW" gone).
        let marks: Vec<u64> = if numbers.is_empty() {
            self.gone_candidates().iter().map(|(id, _)| *id).collect()
        } else {
            Vec::new()
        };
        Some(crate::plan::declare_schema(
            &named,
            self.plan_owes_goal_check(),
            &marks,
            &numbers,
        ))
    }

    /// The marks a check that something is `gone` may name: the labelled elements a small model reads
    /// first — an open popup's or dialog's, the selected item, those the step's words name — at most
    /// [`GONE_CANDIDATES`]. Offered every mark, the model named one by the number in its instructions'
    /// example, or the first listed, whatever its label.
    fn gone_candidates(&self) -> Vec<(u64, String)> {
        let obs = gamepilot_vision::Observation {
            at: MonoTime::ZERO,
            frame_size: self.last_frame_size.unwrap_or_default(),
            class: FrameChange::Unchanged,
            texts: Vec::new(),
            elements: self.last_elements.clone(),
        };
        let focus = crate::relevance::Focus::new(self.cfg.goal.clone(), self.step_focus().to_string());
        let mut order = crate::relevance::model_order(&obs, &focus, None);
        for e in &self.last_elements {
            if !order.contains(&e.id) {
                order.push(e.id);
            }
        }
        // A HUD counter and its name stay while the game runs: what it shows rises, it is not gone
        // (offered "Coins" first for "collect a coin", the model declared it gone).
        let counted: Vec<u64> = crate::goal_steps::counters(&self.last_elements, "")
            .iter()
            .flat_map(|c| std::iter::once(c.mark).chain(c.label_mark))
            .collect();
        order
            .into_iter()
            .filter_map(|id| {
                let label = obs.element(id)?.label.clone()?;
                let id = u64::from(id.0);
                (!counted.contains(&id)).then_some((id, label))
            })
            .take(GONE_CANDIDATES)
            .collect()
    }

    /// The step of the goal whose check is asked for, when the goal has several (its check declared on
    /// the screen where that step shows), and the numbers the screen shows, most relevant first.
    fn declaring_lines(&self) -> String {
        if self.declarations.is_none() {
            return String::new();
        }
        let mut lines = String::new();
        if self.goal_steps.len() > 1 {
            // The planner reads which steps are done (it re-proposed a finished one), and while the
            // current step has no check, that "goal" is that step's alone.
            let listed: Vec<String> = self
                .goal_steps
                .iter()
                .enumerate()
                .map(|(k, step)| {
                    let done = if k < self.goal_step { " (done)" } else { "" };
                    format!("{}. {step}{done}", k + 1)
                })
                .collect();
            lines.push_str(&format!("\nThe goal's steps: {}.", listed.join(" ")));
            if self.agent_goal.is_none() {
                lines.push_str(&format!(
                    " \"goal\" is the check of step {} only: what becomes of a mark on the screen now once {:?} is done.",
                    self.goal_step + 1,
                    self.step_focus()
                ));
            }
        }
        let found = crate::goal_steps::relevant_counters(&self.last_elements, self.step_focus());
        if let Some(line) = crate::goal_steps::counters_line(&found, COUNTERS_LISTED) {
            lines.push('\n');
            lines.push_str(&line);
        }
        let gone: Vec<String> = self
            .gone_candidates()
            .iter()
            .map(|(id, label)| format!("[{id}] {label:?}"))
            .collect();
        if !gone.is_empty() && found.is_empty() {
            lines.push_str(&format!(
                "\nMarks a check {{\"mark\": N, \"then\": \"gone\"}} may name: {}",
                gone.join("; ")
            ));
        }
        lines
    }

    /// The agent's check for a step before the last was confirmed: that step is done, and the next
    /// one's check is asked for on the screen as it is now.
    fn next_goal_step(&mut self, why: &str, now: MonoTime, out: &mut Vec<Effect>) {
        let Some(g) = self.agent_goal.take() else {
            return;
        };
        let done = self.step_words();
        self.goal_step += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!(
                "{done} done: agent-declared check `{}` (pass {}) turned true after an action of this session, confirmed by a second look ({why})",
                g.source, g.pass
            ),
        }));
        self.context.record(HistoryEntry::new(
            now,
            format!("goal check `{}`", g.source),
            format!("{done} is done; the next step needs its own check"),
        ));
        self.hand_sensors(false, out);
        self.ask_step_check(now, out);
    }

    /// Ask a deliberative pass for the current step's check alone (no plan) — the next step's, or
    /// again after one was refused — bounded: past [`STEP_CHECK_ATTEMPTS`] the session stops, named.
    fn ask_step_check(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if self.step_check.is_some() || self.agent_goal.is_some() {
            return;
        }
        if self.step_checks >= STEP_CHECK_ATTEMPTS {
            self.finish(
                SessionStop::NoGoalCheck {
                    detail: format!(
                        "{STEP_CHECK_ATTEMPTS} questions for the check of {} got none that could be used; give one with --goal-check",
                        self.step_words()
                    ),
                },
                out,
            );
            return;
        }
        self.step_checks += 1;
        let pass = STEP_CHECK_PASS + self.step_checks;
        self.step_check = Some(pass);
        let ask = format!(
            "Question: {} needs its check.{}",
            self.step_words(),
            self.declaring_lines()
        );
        let (prompt, image) = self.deliberative_prompt(&ask, now);
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("the check of {} is asked for (pass {pass})", self.step_words()),
        }));
        let schema = self
            .declaring_schema()
            .map(|s| crate::plan::without_subgoals(&s))
            .unwrap_or_default();
        out.push(Effect::StartDeliberation(DeliberationJob {
            pass,
            trigger: Trigger::SubgoalCompleted,
            prompt,
            schema,
            image,
            // A question for a check plans nothing: no subgoal id is spent on it.
            first_id: self.next_subgoal,
        }));
    }

    /// The answer to a question for a step's check: its declarations taken like a plan's; with no
    /// usable goal check, asked again (bounded).
    fn on_step_check(&mut self, p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        self.step_check = None;
        match p.reply.as_ref() {
            Some(reply) => {
                let (changed, said) = self.declare_checks_and_goal(reply, p.pass, out);
                // With the step's check known, the step is acted on while the planner still plans.
                if self.agent_goal.is_some() && self.state.active_subgoal().is_none() {
                    self.act_on_goal_meanwhile(now, out);
                }
                if changed {
                    self.hand_sensors(true, out);
                }
                if !said.is_empty() {
                    self.context.record(HistoryEntry::new(
                        now,
                        format!("pass {} checks", p.pass),
                        said.join("; "),
                    ));
                }
            }
            None => out.push(Effect::Record(SessionRecord::Note {
                text: format!(
                    "the question for the check of {} got no answer ({})",
                    self.step_words(),
                    p.plan.err().unwrap_or_default()
                ),
            })),
        }
        self.ask_step_check(now, out);
        self.release_deferred_pass(now, out);
    }

    /// A deliberative prompt of the context as of now: the latest observation, then `ask`; with the
    /// latest marked frame at the deliberative budget as the last content part (FR-MODEL-002).
    fn deliberative_prompt(
        &mut self,
        ask: &str,
        now: MonoTime,
    ) -> (gamepilot_context::Prompt, Option<crate::tactical::ImageWanted>) {
        let image = self
            .last_frame_size
            .filter(|_| self.cfg.with_image && self.cfg.deliberative_pixels > 0)
            .map(|size| crate::tactical::ImageWanted {
                picture: crate::tactical::Picture::Frame,
                pixels: self.cfg.deliberative_pixels,
                size: size.fit_within(self.cfg.deliberative_pixels),
            });
        let part = image.map(|i| gamepilot_context::ImagePart {
            mime: "image/png".into(),
            width: i.size.w,
            height: i.size.h,
            data_base64: String::new(),
        });
        let prompt = self.context.assemble(
            Cadence::Deliberative,
            &ObservationText::new(now, format!("{}\n{ask}", self.last_observation)),
            part,
        );
        (prompt, image)
    }

    /// A postcondition's value on the latest reflex tick: a boolean sensor by its name, the goal check
    /// (the one postcondition that is no sensor's name) by the goal's value.
    fn postcondition_value(&self, source: &str) -> Option<bool> {
        if let Some(d) = &self.declarations {
            let expr = d.compile(source).ok()?;
            return d.value(&expr, &self.numbers.sensors, &self.numbers.sensors);
        }
        match self.numbers.sensors.iter().find(|(n, _)| n == source) {
            Some((_, v)) => v.map(|v| v != 0.0),
            None => self.last_goal_met,
        }
    }

    fn on_plan(&mut self, mut p: PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) {
        if self.goal_look == Some(p.pass) {
            return self.on_goal_look(p, now, out);
        }
        if self.step_check == Some(p.pass) {
            return self.on_step_check(p, now, out);
        }
        if self.declarations.is_some() {
            if let Some(reply) = p.reply.take() {
                p.plan = self.declare_from(&reply, p.pass, p.first_id, now, out);
            }
            // A reply that could not be adopted, or none (the host failed): asked again, bounded.
            if self.state.active_subgoal().is_none() && self.declaration_refused(&p, now, out) {
                return;
            }
        }
        if let Some(q) = p.research.clone() {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("pass {} wrote a research question: {q:?}", p.pass),
            }));
            self.research_question = Some(q);
        }
        // A degenerate plan (subgoals alike, a postcondition already true) is refused with its
        // reason, which the model reads when it is asked again, once; a second degenerate answer (or the
        // first, when only one postcondition is offered) is repaired — repeats and reached subgoals
        // dropped — or, with nothing sound left, fails the pass.
        let senseless = p
            .plan
            .as_ref()
            .ok()
            .and_then(|spec| crate::plan::plan_sense(spec, |s| self.postcondition_value(s)).err());
        if let Some(reason) = senseless {
            out.push(Effect::Record(SessionRecord::Failure {
                action: None,
                cause: FailureCause::Plan,
                evidence: format!("plan of pass {} refused: {reason}", p.pass),
            }));
            self.context
                .record(HistoryEntry::new(now, "plan refused".to_string(), reason.clone()));
            // Asking again helps only when distinct states can be named: with one postcondition offered,
            // every plan of several subgoals repeats it, and a second call would only cost time.
            let can_differ = self.cfg.postconditions.len() > 1;
            match self.deliberation {
                Some((pass, trigger, false)) if pass == p.pass && can_differ => {
                    self.deliberation = Some((pass, trigger, true));
                    out.push(Effect::StartDeliberation(
                        self.deliberation_job(pass, trigger, now),
                    ));
                }
                _ => {
                    // Asked again and no better (or no better answer possible): adopt its sound part (a model that repeats one subgoal
                    // still names a step worth taking); a plan with nothing sound left fails the pass.
                    let repaired = p
                        .plan
                        .as_ref()
                        .ok()
                        .and_then(|spec| crate::plan::repair_plan(spec, |s| self.postcondition_value(s)));
                    match repaired {
                        Some(plan) => {
                            out.push(Effect::Record(SessionRecord::Note {
                                text: format!(
                                    "plan of pass {} repaired: {} sound subgoal(s) kept ({reason})",
                                    p.pass,
                                    plan.subgoals.len()
                                ),
                            }));
                            self.feed(
                                Event::DeliberationDone {
                                    pass: p.pass,
                                    plan: Some(plan),
                                },
                                now,
                                out,
                            );
                        }
                        None => match self.deliberation {
                            // Nothing sound is left, but a look or the next step's check is coming: the
                            // pass stays open and is asked again once they are answered, so the step
                            // can be acted on meanwhile (ended now, the demo stood idle until a timer).
                            Some((pass, trigger, _))
                                if pass == p.pass
                                    && self.host_wanted()
                                    && self.state.active_subgoal().is_none() =>
                            {
                                self.deferred_pass = Some((pass, trigger));
                            }
                            _ => self.fail_pass(p.pass, reason, now, out),
                        },
                    }
                }
            }
            return;
        }
        match p.plan {
            Ok(plan) => self.feed(
                Event::DeliberationDone {
                    pass: p.pass,
                    plan: Some(plan),
                },
                now,
                out,
            ),
            Err(reason) => self.fail_pass(p.pass, reason, now, out),
        }
    }

    /// The agent declares its checks and no frame has been perceived yet: its first pass needs the
    /// screen's marks, so the first tactical tick only perceives.
    fn needs_first_screen(&self) -> bool {
        self.declarations.is_some() && self.last_frame_size.is_none()
    }

    /// A deliberative reply of a session whose agent declares its checks: its sensors declared (each
    /// compiled with what came before; one that does not compile is said to the next pass with its
    /// diagnostics), its goal check accepted when none is yet, its postconditions compiled and added to
    /// those the reflex evaluates; then the plan, or why it cannot be adopted. A typed check over a mark
    /// declares the sensor it reads (`mark5_shown`, `mark5_number`) on the way.
    fn declare_from(
        &mut self,
        reply: &serde_json::Value,
        pass: u64,
        first_id: u32,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) -> Result<gamepilot_planner::PlanSpec, String> {
        if self.declarations.is_none() {
            return Err("this session takes no declarations".into());
        }
        let goal_given = self
            .declarations
            .as_ref()
            .is_some_and(|d| d.config().goal_check_given);
        let (mut changed, mut said) = self.declare_checks_and_goal(reply, pass, out);
        let mut refused = None;
        let mut sources = Vec::new();
        for choice in crate::plan::postcondition_choices(reply) {
            let source = match choice {
                Some(c) => self.check_source(&c, pass, &mut changed, out),
                None => Err("a subgoal has no postcondition".to_string()),
            };
            match source {
                Ok(src) => {
                    if !self.cfg.postconditions.contains(&src) {
                        changed = true;
                        self.cfg.postconditions.push(src.clone());
                    }
                    sources.push(src);
                }
                Err(why) => match &self.agent_goal {
                    // The step is still worth taking: it ends where the goal does.
                    Some(g) => {
                        said.push(format!(
                            "postcondition refused ({why}); the goal's check `{}` stands in",
                            g.source
                        ));
                        sources.push(g.source.clone());
                    }
                    None => {
                        refused.get_or_insert(format!("postcondition refused: {why}"));
                    }
                },
            }
        }
        if !said.is_empty() {
            self.context.record(HistoryEntry::new(
                now,
                format!("pass {pass} checks"),
                said.join("; "),
            ));
        }
        if changed {
            self.hand_sensors(true, out);
        }
        if let Some(why) = refused {
            return Err(why);
        }
        if self.plan_owes_goal_check() && !goal_given {
            return Err("no goal check: in \"goal\" name a mark that is gone (or whose number rises or falls) once the goal is done, or write an expression that is false now and true then".into());
        }
        crate::plan::plan_from_reply(
            &crate::plan::with_postconditions(reply, &sources),
            &crate::plan::Postconditions {
                sources: self.cfg.postconditions.clone(),
            },
            first_id,
        )
    }

    /// A declaring reply's sensors (`checks`) and, while none is accepted, the goal's (or the current
    /// step's) check: whether the sensors changed, and what was said of each, for the next pass.
    fn declare_checks_and_goal(
        &mut self,
        reply: &serde_json::Value,
        pass: u64,
        out: &mut Vec<Effect>,
    ) -> (bool, Vec<String>) {
        let (checks, goal) = crate::plan::declarations_from_reply(reply);
        let mut changed = false;
        let mut said = Vec::new();
        for req in checks.iter().take(crate::declare::MAX_PER_REPLY) {
            match self.declare_sensor(req, pass, out) {
                Ok(line) => {
                    changed = true;
                    said.push(format!("declared `{line}`"));
                }
                Err(why) => said.push(format!("not declared: {why}")),
            }
        }
        let goal_given = self
            .declarations
            .as_ref()
            .is_some_and(|d| d.config().goal_check_given);
        if let (None, Some(choice)) = (&self.agent_goal, goal) {
            if goal_given {
                said.push("the user's goal check stands: no goal check declared".into());
            } else {
                match self.check_source(&choice, pass, &mut changed, out) {
                    Ok(g) => {
                        changed = true;
                        out.push(Effect::Record(SessionRecord::Note {
                            text: match self.goal_steps.len() {
                                0 | 1 => format!("pass {pass} declared the goal's check `{g}`"),
                                _ => format!("pass {pass} declared the check of {} `{g}`", self.step_words()),
                            },
                        }));
                        said.push(format!("goal check `{g}` declared"));
                        // The goal's check leads the postconditions a failed plan falls back on.
                        if !self.cfg.postconditions.contains(&g) {
                            self.cfg.postconditions.push(g.clone());
                        }
                        self.agent_goal = Some(AgentGoal {
                            source: g,
                            pass,
                            actions_before: self.state.actions_executed(),
                            seen_false: false,
                            confirmed: None,
                            looked_at: None,
                        });
                    }
                    Err(why) => said.push(format!("goal check refused: {why}")),
                }
            }
        }
        (changed, said)
    }

    /// A second look or a question for a step's check is waiting for the deliberative host.
    fn host_wanted(&self) -> bool {
        self.goal_look.is_some() || self.goal_look_wanted.is_some() || self.step_check.is_some()
    }

    /// The planner's pass held back while the host was wanted is asked again once it no longer is.
    fn release_deferred_pass(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if self.host_wanted() {
            return;
        }
        let Some((pass, trigger)) = self.deferred_pass.take() else {
            return;
        };
        if self.deliberation.is_some_and(|(p, ..)| p == pass) {
            out.push(Effect::StartDeliberation(
                self.deliberation_job(pass, trigger, now),
            ));
        }
    }

    /// Hand the reflex the declared sensors, the agent's goal check as it stands (none while a new one
    /// is wanted) and the postconditions; with `templates`, the templates it is to cut from its frame.
    fn hand_sensors(&self, templates: bool, out: &mut Vec<Effect>) {
        if let Some(decl) = &self.declarations {
            out.push(Effect::Reflex(ReflexCommand::Sensors {
                source: decl.source(),
                goal: self.agent_goal.as_ref().map(|g| g.source.clone()),
                postconditions: self.cfg.postconditions.clone(),
                templates: if templates { decl.templates() } else { Vec::new() },
            }));
        }
    }

    /// A declaring pass's plan that cannot be adopted is asked again within the same pass, its reason
    /// in the history the model reads, at most [`DECLARE_ATTEMPTS`] times; with no goal check by then
    /// the session stops, named (it could never tell the goal was met). True when handled here.
    fn declaration_refused(&mut self, p: &PlanOutcome, now: MonoTime, out: &mut Vec<Effect>) -> bool {
        let Err(why) = &p.plan else {
            self.declare_attempts = 0;
            return false;
        };
        let Some((pass, trigger, _)) = self.deliberation.filter(|(pass, ..)| *pass == p.pass) else {
            return false;
        };
        out.push(Effect::Record(SessionRecord::Failure {
            action: None,
            cause: FailureCause::Plan,
            evidence: format!("plan of pass {pass} refused: {why}"),
        }));
        self.context
            .record(HistoryEntry::new(now, "plan refused".to_string(), why.clone()));
        if self.declare_attempts < DECLARE_ATTEMPTS && self.host_wanted() {
            // A second look or a step's check waiting for the host goes first (a planner asked again
            // meanwhile held the demo's look back until its time was spent): the pass is asked again
            // once they are answered, and the goal is acted on meanwhile.
            self.declare_attempts += 1;
            self.deferred_pass = Some((pass, trigger));
            self.act_on_goal_meanwhile(now, out);
            return true;
        }
        if self.declare_attempts < DECLARE_ATTEMPTS {
            self.declare_attempts += 1;
            // Asking again takes the host seconds: the goal itself is acted on meanwhile (the demo stood
            // idle for 50 s while a planner that re-proposed a finished step was asked again).
            self.act_on_goal_meanwhile(now, out);
            out.push(Effect::StartDeliberation(
                self.deliberation_job(pass, trigger, now),
            ));
            return true;
        }
        let goal_given = self
            .declarations
            .as_ref()
            .is_some_and(|d| d.config().goal_check_given);
        if self.plan_owes_goal_check() && !goal_given {
            self.finish(
                SessionStop::NoGoalCheck {
                    detail: format!(
                        "{} replies declared no usable check of the goal (the last: {why}); give one with --goal-check",
                        DECLARE_ATTEMPTS + 1
                    ),
                },
                out,
            );
            return true;
        }
        self.declare_attempts = 0;
        false
    }

    /// Declare one sensor against the latest frame's marks; its sensor-file line, or why not.
    fn declare_sensor(
        &mut self,
        req: &crate::declare::SensorRequest,
        pass: u64,
        out: &mut Vec<Effect>,
    ) -> Result<String, String> {
        let decl = self
            .declarations
            .as_mut()
            .ok_or("this session takes no declarations")?;
        let frame = self.last_frame_size.unwrap_or(decl.config().declared_size);
        let d = decl.declare(req, &self.last_elements, frame, pass)?;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!(
                "pass {pass} declared sensor `{}`{}",
                d.line(),
                d.mark
                    .map(|m| format!(" from mark [{}] {:?}", m.0, d.label.clone().unwrap_or_default()))
                    .unwrap_or_default()
            ),
        }));
        Ok(d.line())
    }

    /// A goal or postcondition as an expression over the session's sensors, compiled and boolean; a
    /// typed choice declares the sensor it reads first (once).
    fn check_source(
        &mut self,
        choice: &crate::plan::CheckChoice,
        pass: u64,
        changed: &mut bool,
        out: &mut Vec<Effect>,
    ) -> Result<String, String> {
        use crate::declare::{Reads, SensorRequest};
        use crate::plan::{Becomes, CheckChoice};
        let source = match choice {
            CheckChoice::Expression(s) => s.clone(),
            CheckChoice::Typed { mark, becomes } => {
                let (name, reads) = match becomes {
                    Becomes::Gone => (format!("mark{mark}_shown"), Reads::Present),
                    Becomes::Rises | Becomes::Falls => (format!("mark{mark}_number"), Reads::Number),
                };
                let known = self
                    .declarations
                    .as_ref()
                    .is_some_and(|d| d.program().index_of(&name).is_some());
                if !known {
                    let req = SensorRequest {
                        name: name.clone(),
                        reads,
                        mark: Some(*mark),
                        colour: None,
                        expression: None,
                    };
                    self.declare_sensor(&req, pass, out)?;
                    *changed = true;
                }
                match becomes {
                    Becomes::Gone => format!("not {name}"),
                    Becomes::Rises => {
                        if self.cfg.progress_sensor.is_none() && self.declared_progress.is_none() {
                            // A counter the agent watches rise is progress (FR-LOOP-005), said once.
                            self.declared_progress = Some(name.clone());
                            out.push(Effect::Record(SessionRecord::Note {
                                text: format!(
                                    "declared counter `{name}` serves as the progress signal (no --progress-sensor)"
                                ),
                            }));
                        }
                        format!("{name} > {}", self.number_shown(*mark, "rise")?)
                    }
                    Becomes::Falls => format!("{name} < {}", self.number_shown(*mark, "fall")?),
                }
            }
        };
        let decl = self
            .declarations
            .as_ref()
            .ok_or("this session takes no declarations")?;
        match decl.compile(&source) {
            Ok(expr) if expr.ty == gamepilot_sensor::Type::Bool => Ok(source),
            Ok(_) => Err(format!("`{source}` is a number, not true or false")),
            Err(why) => Err(format!("`{source}` does not compile:\n{why}")),
        }
    }

    /// The number mark `mark` of the latest screen shows, or why a check cannot `verb` by it.
    fn number_shown(&self, mark: u64, verb: &str) -> Result<u64, String> {
        self.last_elements
            .iter()
            .find(|e| u64::from(e.id.0) == mark)
            .and_then(|e| crate::declare::number_in(e.label.as_deref()?))
            .ok_or_else(|| format!("mark [{mark}] shows no number to {verb}"))
    }

    /// While a pass plans and no subgoal is active, the goal itself is the subgoal (the tactical
    /// cadence never waits for a plan; a goal that names its first step — "click Play, then …" — is
    /// grounded without a model call). True when a subgoal is active afterwards.
    fn act_on_goal_meanwhile(&mut self, now: MonoTime, out: &mut Vec<Effect>) -> bool {
        self.adopt_goal_as_subgoal(false, now, out)
    }

    /// [`Self::act_on_goal_meanwhile`]; `unfinished` when the goal's check reads true on a screen that
    /// still offers what the goal names: the check's own postcondition is then taken though it reads
    /// true (no other is false), so the session's click on it belongs to a subgoal.
    fn adopt_goal_as_subgoal(&mut self, unfinished: bool, now: MonoTime, out: &mut Vec<Effect>) -> bool {
        if !self.cfg.act_while_planning {
            return false;
        }
        if self.state.active_subgoal().is_some() {
            return true;
        }
        let Some((pass, _, _)) = self.deliberation else {
            return false;
        };
        let id = gamepilot_core::SubgoalId(self.next_subgoal);
        let budget = gamepilot_planner::Budget {
            max_time_ms: Some(GOAL_PLAN_TIME_MS),
            max_actions: Some(GOAL_PLAN_ACTIONS),
        };
        let Some(plan) = crate::plan::goal_plan(
            self.goal_plan_words(),
            &self.cfg.postconditions,
            id,
            budget,
            |s| {
                if unfinished {
                    None
                } else {
                    self.postcondition_value(s)
                }
            },
        ) else {
            return false;
        };
        self.feed(Event::Provisional { plan }, now, out);
        let adopted = self.state.active_subgoal() == Some(id);
        if adopted {
            self.next_subgoal += 1;
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("acting on the goal itself while pass {pass} plans"),
            }));
        }
        adopted
    }

    /// The start pass's job, held until the first screen was perceived (or, perception failing, for
    /// at most [`START_PASS_WAIT_MS`]).
    fn release_start_pass(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if self.start_pass_waiting.take().is_none() {
            return;
        }
        if let Some((pass, trigger, _)) = self.deliberation {
            out.push(Effect::StartDeliberation(
                self.deliberation_job(pass, trigger, now),
            ));
        }
    }

    /// A pass that left nothing to act on. With a subgoal still active the loop handles the failure;
    /// with none, the goal itself becomes the plan (after the demo's first subgoal was done, a
    /// planner that only re-planned it, or timed out, left the tactical cadence idle until the session
    /// stopped for no progress).
    fn fail_pass(&mut self, pass: u64, reason: String, now: MonoTime, out: &mut Vec<Effect>) {
        let fallback = if self.state.active_subgoal().is_none() {
            let id = gamepilot_core::SubgoalId(self.next_subgoal);
            let budget = gamepilot_planner::Budget {
                max_time_ms: Some(GOAL_PLAN_TIME_MS),
                max_actions: Some(GOAL_PLAN_ACTIONS),
            };
            crate::plan::goal_plan(
                self.goal_plan_words(),
                &self.cfg.postconditions,
                id,
                budget,
                |s| self.postcondition_value(s),
            )
        } else {
            None
        };
        let Some(plan) = fallback else {
            self.feed(Event::DeliberationFailed { pass, reason }, now, out);
            return;
        };
        self.next_subgoal += 1;
        out.push(Effect::Record(SessionRecord::Note {
            text: format!("plan of pass {pass} failed ({reason}); acting on the goal itself meanwhile"),
        }));
        self.feed(
            Event::DeliberationDone {
                pass,
                plan: Some(plan),
            },
            now,
            out,
        );
    }

    /// The safe-state rung begins: nothing to return to fails it at once; already there, the model is
    /// told; otherwise the next tactical ticks only perceive and step back.
    fn begin_safe_return(&mut self, now: MonoTime, out: &mut Vec<Effect>) {
        if let Some(note) = self.survey.abandon("the ladder goes back to the safe screen") {
            out.push(Effect::Record(SessionRecord::Note { text: note }));
        }
        let (note, failed) = match self.safe.begin(self.last_print.as_ref()) {
            Begin::NoSafeScreen => (
                "safe state: no screen of this session had a confirmed action to return to".to_string(),
                true,
            ),
            Begin::AlreadyThere(p) => (format!("safe state: already on {}", p.describe()), false),
            Begin::Returning(p) => (format!("safe state: going back to {}", p.describe()), false),
        };
        self.safe_note(&note, now, out);
        if failed {
            self.deferred.push(Event::RungFailed {
                rung: Rung::SafeState,
                reason: note,
            });
        }
    }

    /// One step back to the safe screen, decided on a fresh observation (a perceive-only tick).
    fn step_back(
        &mut self,
        obs: &Observation,
        scene: SceneKind,
        generation: u64,
        now: MonoTime,
        out: &mut Vec<Effect>,
    ) {
        let reply = match self.safe.step(obs, scene) {
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
    fn safe_note(&mut self, note: &str, now: MonoTime, out: &mut Vec<Effect>) {
        out.push(Effect::Record(SessionRecord::Note {
            text: note.to_string(),
        }));
        self.context.record(HistoryEntry::new(
            now,
            "escalation: safe state".to_string(),
            note.to_string(),
        ));
    }

    fn on_research(&mut self, r: ResearchFindings, now: MonoTime, out: &mut Vec<Effect>) {
        for (source, retrieved, text) in r.excerpts.iter().take(self.cfg.research_max_excerpts) {
            let text = bound_text(text, self.cfg.research_excerpt_max_bytes);
            if let Ok(e) = ResearchExcerpt::new(source, retrieved, &text) {
                self.context.add_research(e);
            }
        }
        let summary = if r.found {
            out.push(Effect::Record(SessionRecord::Note {
                text: format!("note: {}", r.note),
            }));
            if let Err(e) = self.context.note(&r.note, now) {
                self.context
                    .record(HistoryEntry::new(now, format!("note: {}", r.note), e.to_string()));
            }
            r.note.clone()
        } else {
            format!("research on {:?} found nothing usable", r.query)
        };
        self.feed(
            Event::ResearchDone {
                found: r.found,
                summary,
            },
            now,
            out,
        );
    }
}

/// A perceptual signature of an observation's layout (element count and boxes).
pub fn observation_signature(obs: &Observation) -> u64 {
    obs.elements.iter().fold(obs.elements.len() as u64, |h, e| {
        h.wrapping_mul(31)
            .wrapping_add(((e.bbox.x as u64) << 16) ^ e.bbox.y as u64)
    })
}

/// The wiring's feed of reflex ticks: every tick's figures go in, a report comes out every `every`-th
/// tick and at once on a scene change or a goal change, carrying the strongest change since the previous
/// report (so a change on an unreported tick never reads as stasis, FR-LOOP-005) and the worst lateness.
#[derive(Debug, Clone)]
pub struct ReflexFeed {
    every: u64,
    strongest: FrameChange,
    worst_late_us: u64,
    ticks: u64,
    last_goal_met: Option<bool>,
    /// The subgoal check last reported: a change (a postcondition true for a single tick) is reported at
    /// once, so no transition is lost between reports.
    last_subgoal: Option<gamepilot_planner::SubgoalCheck>,
    last_foreground: bool,
}

fn rank(c: FrameChange) -> u8 {
    match c {
        FrameChange::Unchanged => 0,
        FrameChange::Local => 1,
        FrameChange::Motion => 2,
        FrameChange::Scene => 3,
    }
}

impl ReflexFeed {
    pub fn new(every: u64) -> ReflexFeed {
        ReflexFeed {
            every: every.max(1),
            strongest: FrameChange::Unchanged,
            worst_late_us: 0,
            ticks: 0,
            last_goal_met: None,
            last_subgoal: None,
            last_foreground: true,
        }
    }

    /// One input from the reflex: its ticks through [`ReflexFeed::tick`], everything else at once.
    pub fn pass(&mut self, input: Input) -> Option<Input> {
        match input {
            Input::Reflex(report) => self.tick(report).map(Input::Reflex),
            other => Some(other),
        }
    }

    /// One reflex tick; `Some` when it is to be reported. `report.change` and `report.late_us` are this
    /// tick's; the returned report has the aggregates.
    pub fn tick(&mut self, mut report: ReflexReport) -> Option<ReflexReport> {
        if rank(report.change) > rank(self.strongest) {
            self.strongest = report.change;
        }
        self.worst_late_us = self.worst_late_us.max(report.late_us);
        self.ticks += 1;
        let due = report.tick.is_multiple_of(self.every)
            || report.change == FrameChange::Scene
            || report.goal_met != self.last_goal_met
            || report.subgoal != self.last_subgoal
            || report.foreground != self.last_foreground;
        if !due {
            return None;
        }
        self.last_goal_met = report.goal_met;
        self.last_subgoal = report.subgoal;
        self.last_foreground = report.foreground;
        report.change = std::mem::replace(&mut self.strongest, FrameChange::Unchanged);
        report.late_us = std::mem::take(&mut self.worst_late_us);
        report.ticks_since = std::mem::take(&mut self.ticks);
        Some(report)
    }
}
