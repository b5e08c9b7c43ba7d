//! The session core: `Session::step(Input, now) -> Vec<Effect>`. It owns every decision of a running
//! session that is not the loop logic's own (`gamepilot_planner::LoopState`, which it wraps and feeds):
//! the action from proposal to verdict (one id), grounding a reply to a capture-space action with its
//! expected change, the destructive-action hold, the context (plan block, history, notes, research,
//! compaction, bounded observation text), when tactical ticks start, and the status numbers.

mod acting;
mod declaring;
mod exploring;
mod goal_look;
mod interlocks;
mod loop_commands;
mod model_text;
mod parts;
mod planning;
mod safe_return;
mod tick;
mod tools;

use crate::ledger::{ActionLedger, GroundedAction};
use crate::reflex_feed::observation_signature;
use acting::is_pointer;
pub(crate) use model_text::action_label;
pub use model_text::{bound_text, observation_for_model, sensors_line};
pub use tools::{session_tools, tools_for, tools_for_path, TOOLS};

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
use crate::safe_state::{Begin, ScreenPrint, Step as SafeStep};
use crate::scene::{scene_kind, SceneKind};
use crate::SessionError;
use gamepilot_context::{
    Cadence, CompactionInput, Context, ContextConfig, HistoryEntry, ObservationText, PlanBlock as CtxPlan,
    PlanStep, ResearchExcerpt, SchemaLimits, StepStatus, TacticalReply, Tool, ToolSet,
};
use gamepilot_core::action::Action;
use gamepilot_core::{ElementId, FrameHealth, Interlock, MonoTime, Point, Rect, Safeguard, SubgoalId};
use gamepilot_executor::RejectReason;
use gamepilot_grounding::{
    ActionId, ChangeDirection, Evidence, ExpectedChange, FailureCause, FailureFacts, GroundingPath, Target,
};
use gamepilot_planner::{
    Command, Event, FrameChange, LoopConfig, LoopState, Refusal, Rung, StopReason, SubgoalStatus, Trigger,
    VerdictCounts,
};
use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};

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

/// A session's configuration; every limit is the user's (INV-SAFE-001). Recorded in the header so a
/// replay rebuilds the same session. Its groups are flattened: the header's keys are those of one struct.
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
    /// What a prompt may carry: images, observation, research, the context's size.
    #[serde(flatten)]
    pub limits: PromptLimits,
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
    /// The agent declares its own sensors, postconditions and goal check (no `--goal-check` was given):
    /// what it needs to compile them against (sensor-expressions.md, "Declaration and lifetime").
    #[serde(default)]
    pub declare: Option<crate::declare::DeclareConfig>,
    /// What the session does of its own accord (each off in recordings made before it).
    #[serde(flatten)]
    pub behaviours: Behaviours,
}

/// What a prompt may carry: the images' budgets, the observation's and research's cuts, the context's
/// size (FR-MODEL-002, FR-CTX-004).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptLimits {
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
}

impl Default for PromptLimits {
    fn default() -> Self {
        PromptLimits {
            with_image: false,
            visual_pixels: 512 * 288,
            deliberative_pixels: 0,
            context_tokens: 4096,
            observation_max_bytes: 3000,
            observation_max_elements: default_observation_max_elements(),
            research_max_excerpts: 3,
            research_excerpt_max_bytes: 600,
            image_tokens: 256,
        }
    }
}

/// What the session does of its own accord. Each is on by default and off when a recording made before
/// it lacks the field, so that recording replays as made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Behaviours {
    /// While a deliberative pass plans and no subgoal is active, act on the goal itself (a goal that
    /// names its first step is grounded at once), and compose the start pass from the first screen.
    #[serde(default)]
    pub act_while_planning: bool,
    /// A choice that could answer a dialogue is sent only when made on a frame captured after our
    /// previous input ended (and the game drew it) and after the last scene change; the next tactical
    /// frame waits for that (`fresh.rs`, FR-SAFE-005).
    #[serde(default)]
    pub fresh_frames: bool,
    /// A step's words ground an element whose whole label they contain without a model call
    /// (`direct::worded_target`), beside the element a step names.
    #[serde(default)]
    pub direct_by_words: bool,
    /// After a click that changed nothing, the nearest untried element like it is clicked without a
    /// model call (`explore.rs`).
    #[serde(default)]
    pub explore_siblings: bool,
    /// The model may answer `unsure`, and the session then explores the screen itself (`survey.rs`).
    #[serde(default)]
    pub explore_unsure: bool,
}

impl Default for Behaviours {
    fn default() -> Self {
        Behaviours {
            act_while_planning: true,
            fresh_frames: true,
            direct_by_words: true,
            explore_siblings: true,
            explore_unsure: true,
        }
    }
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
            limits: PromptLimits::default(),
            camera_calibrated: false,
            coord_convention: gamepilot_core::CoordConvention::CapturePixels,
            steering: None,
            declare: None,
            behaviours: Behaviours::default(),
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

/// What the status line and the summary show. Its groups are flattened: the summary's keys are those of
/// one struct.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionNumbers {
    pub subgoal: Option<SubgoalId>,
    pub deliberating: bool,
    pub held_inputs: u32,
    pub sensors: Vec<(String, Option<f64>)>,
    /// The loop logic's verdicts (FR-VER-001).
    #[serde(flatten)]
    pub verdicts: VerdictCounts,
    #[serde(flatten)]
    pub actions: ActionCounts,
    #[serde(flatten)]
    pub calls: ModelCallCounts,
    pub rung: Option<Rung>,
    #[serde(flatten)]
    pub frame: FrameNumbers,
    pub goal_met: Option<bool>,
    #[serde(flatten)]
    pub waiting: Waits,
    /// Each climb of the escalation ladder (FR-LOOP-006): the rung and the seconds since the session began.
    pub escalations: Vec<(Rung, f64)>,
    pub reflex: ReflexStats,
    pub failures: Vec<(FailureCause, u64)>,
}

/// How many actions were refused, executed, and grounded by the session itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ActionCounts {
    pub rejected: u64,
    pub actions_executed: u64,
    /// Actions grounded with no model call because the subgoal named the one element so labelled.
    pub direct_groundings: u64,
}

/// The model calls made and what they cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelCallCounts {
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
}

/// The last frame's health, transform-chain generation and scene.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct FrameNumbers {
    pub health: FrameHealth,
    pub generation: u64,
    pub scene: Option<SceneKind>,
}

/// What the session waits on, if anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Waits {
    pub holding_for_confirmation: bool,
    /// The user took the keyboard or mouse and has not resumed (FR-SAFE-002).
    pub paused_by_user: bool,
    /// The game is not in front: the session waits for it (no model calls, verdicts or ladder).
    pub waiting_for_front: bool,
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
            if self.waiting.paused_by_user {
                "PAUSED by your input: resume with SIGUSR1"
            } else if self.waiting.waiting_for_front {
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
            self.frame.health,
            self.verdicts.confirmed,
            self.verdicts.refuted,
            self.verdicts.inconclusive,
            self.rung,
            self.calls.tactical_calls,
        )
    }
}

/// One running session's decisions.
pub struct Session {
    cfg: SessionConfig,
    state: LoopState,
    context: Context,
    /// The actions proposed and not yet judged.
    actions: ActionLedger,
    run: parts::Run,
    tactical: parts::Tactical,
    seen: parts::Seen,
    ladder: parts::Ladder,
    explore: parts::Exploration,
    goal: parts::GoalChecks,
    deliberation: parts::Deliberation,
    gates: parts::Gates,
    avatar: parts::Avatar,
    /// The tactical host's health from its calls' outcomes (and whether the degrade ladder is restarting
    /// it: no tactical call starts meanwhile).
    host: HostHealth,
    numbers: SessionNumbers,
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
            context_tokens: cfg.limits.context_tokens,
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
                    && cfg.behaviours.act_while_planning,
                ..cfg.loop_cfg
            }),
            context,
            actions: ActionLedger::default(),
            run: parts::Run::new(start, cfg.limits.context_tokens, cfg.limits.visual_pixels),
            tactical: parts::Tactical::new(start),
            seen: parts::Seen::default(),
            ladder: parts::Ladder::default(),
            explore: parts::Exploration::default(),
            goal: parts::GoalChecks::new(declarations, &cfg.goal),
            deliberation: parts::Deliberation::default(),
            gates: parts::Gates::default(),
            avatar: parts::Avatar::new(cfg.steering.clone()),
            host: HostHealth::default(),
            numbers: SessionNumbers::default(),
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
        self.run.stop.as_ref()
    }

    /// The numbers of the status line and the summary.
    pub fn numbers(&self) -> SessionNumbers {
        let v = self.state.verdict_counts();
        let mut n = self.numbers.clone();
        n.subgoal = self.state.active_subgoal();
        n.deliberating = self.state.deliberating().is_some();
        n.verdicts = v;
        n.actions.actions_executed = self.state.actions_executed();
        n.rung = self.state.rung();
        n.frame.health = self.seen.health;
        n.frame.generation = self.seen.generation;
        n.frame.scene = self.seen.scene;
        n.goal_met = self.goal.last_met;
        n.waiting.holding_for_confirmation = self.gates.held.is_some();
        n.waiting.paused_by_user = self.gates.user_paused();
        n.waiting.waiting_for_front = self.gates.behind();
        let mut hist = *self.state.histogram();
        for (c, k) in self.ladder.extra_failures.entries() {
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
        if self.run.stop.is_some() {
            if let Input::ReflexStopped(stats) = input {
                self.numbers.reflex = stats;
            }
            return out;
        }
        match input {
            Input::Start => {
                let goal = self.cfg.goal.clone();
                self.feed(Event::Start { goal }, now, &mut out);
                if self.cfg.behaviours.act_while_planning {
                    // Blocks 1-6 as they stand are what the first tactical call begins with, unless
                    // self-identification notes the avatar first: its note changes block 3 before the
                    // play field's first call (106 of the demo's 764 warmed tokens were thrown away), so
                    // then only the invariant blocks 1 and 2 are warmed.
                    let (prompt, _) = self
                        .context
                        .assemble_tactical(&ObservationText::new(now, self.seen.observation.clone()), None);
                    let prompt = if self.avatar.selfid.enabled() {
                        prompt.invariant()
                    } else {
                        prompt
                    };
                    out.push(Effect::WarmUp(prompt));
                }
            }
            Input::Reflex(r) => self.on_reflex(r, now, &mut out),
            Input::ActionAccepted { action } => {
                if let Some(ms) = self.tactical.first_action(now) {
                    self.numbers.calls.first_action_ms.push(ms);
                }
                // Recorded as executed only once the executor took it (a refused one is `rejected`).
                if let Some(a) = self.actions.executed(action) {
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
                self.seen.freshness.refused(action);
                self.on_rejected(action, reason, now, &mut out)
            }
            Input::ActionEnded { action, end } => {
                self.seen.freshness.ended(action, now);
                if self.avatar.probe_running == Some(action) {
                    self.avatar.probe_running = None;
                    if !end.is_finished() {
                        self.avatar.selfid.probe_lost();
                    }
                }
                if !end.is_finished() && self.actions.is_open(action) {
                    let reason = end.to_string();
                    self.feed(Event::ActionFailed { action, reason }, now, &mut out);
                }
            }
            Input::Evidence { action, changed } => {
                if let Some((evidence, facts)) = self.actions.evidence(action, changed) {
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
                if let Some(a) = self.actions.get(action) {
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
                    self.gates.pause(now);
                    out.push(Effect::Reflex(ReflexCommand::Pause { paused: true }));
                } else if interlock.stops_session() {
                    self.run
                        .stopped_by
                        .get_or_insert_with(|| format!("{}: {detail}", interlock.name()));
                    self.feed(Event::UserStop, now, &mut out);
                }
            }
            Input::Resume => self.on_resume(now, &mut out),
            Input::WindowGone => self.feed(Event::WindowClosed, now, &mut out),
            Input::ReflexStopped(stats) => {
                self.numbers.reflex = stats;
                self.run
                    .stopped_by
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
                    self.cfg.limits.visual_pixels =
                        ((self.run.base_visual_pixels as f64) * f.min(1.0)) as u64;
                }
                // A restore never sets a context larger than the host's own (FR-MODEL-004).
                if let Some(tokens) = d.context_tokens().map(|t| t.min(self.run.host_context_tokens)) {
                    if self.context.set_context_tokens(tokens).is_ok() {
                        self.cfg.limits.context_tokens = tokens;
                    }
                }
                out.push(Effect::Record(SessionRecord::Note {
                    text: format!(
                        "GPU memory degrade ({}): visual pixels {}, context {} tokens",
                        d.name(),
                        self.cfg.limits.visual_pixels,
                        self.cfg.limits.context_tokens
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
        while self.run.stop.is_none() && !self.run.deferred.is_empty() {
            let event = self.run.deferred.remove(0);
            self.feed(event, now, &mut out);
        }
        if self.run.stop.is_none() {
            if self
                .deliberation
                .start_pass_waiting
                .is_some_and(|since| now.since(since).as_millis() as u64 >= START_PASS_WAIT_MS)
            {
                self.release_start_pass(now, &mut out);
            }
            // A plan held back while a look or a step's check wanted the host goes out as soon as none
            // does, whichever input ended the wait (a look found not due left sgt-fifteen's plan
            // waiting for good).
            self.release_deferred_pass(now, &mut out);
            if self.state.active_subgoal().is_none() && self.deliberation.running.is_some() {
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
}
