//! The loop's decision core: one event enum in, commands out (`step(&mut LoopState, Event, now)`).
//!
//! It owns the one active plan (INV-LOOP-001), which only a deliberative pass's result revises
//! (FR-LOOP-003); gates every proposed action (suppression FR-GND-007, ownership INV-LOOP-002); verifies
//! every action (FR-GND-006); attributes failures (FR-GND-008); chooses grounding paths (FR-GND-004);
//! detects no progress (FR-LOOP-005) and climbs the escalation ladder (FR-LOOP-006); requests deliberative
//! passes (FR-LOOP-007) without ever waiting for one (NFR-LOOP-001); and stops (FR-LOOP-008).

use crate::ladder::{Ladder, Rung};
use crate::plan::{BudgetKind, Plan, PlanId, PlanSpec, SubgoalStatus};
use crate::signals::{Detectors, SignalConfig, StuckSignal};
use gamepilot_core::{MonoTime, SubgoalId};
use gamepilot_grounding::{
    attribute, ActionId, Evidence, ExpectedChange, FailureCause, FailureFacts, FailureHistogram,
    GroundingPath, PathStats, Suppressor, Target, Verdict, Verifier,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Configuration of the loop logic. Every value comes from the user's configuration (INV-SAFE-001).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopConfig {
    pub signals: SignalConfig,
    /// A refuted target stays suppressed for this many tactical ticks (FR-GND-007).
    pub suppress_ticks: u64,
    /// A refuted coordinate also suppresses points this close to it.
    pub suppress_radius_px: u32,
    /// Verdicts per path and scene before the rates choose (FR-GND-004).
    pub path_min_trials: u64,
    /// Default settle window of a verification.
    pub settle_ms: u64,
    /// Timer trigger: a deliberative pass at least this often (FR-LOOP-007).
    pub deliberation_interval_ms: u64,
    /// Scene-change triggers closer together than this are one trigger.
    pub scene_debounce_ms: u64,
    /// A rung that shows no progress within this long has failed (FR-LOOP-006).
    pub rung_timeout_ms: u64,
    /// Session wall-clock budget (FR-LOOP-008).
    pub session_max_ms: u64,
    /// Session action budget; `None` is unbounded (FR-LOOP-008).
    pub session_max_actions: Option<u64>,
    /// The start pass is composed from the first screen (the session waits for its observation), so
    /// the first frame, always classified a new scene, asks for no second pass. Recordings made before
    /// this lack the field and replay as they were made (a second pass on the first frame).
    #[serde(default)]
    pub start_pass_sees_first_screen: bool,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            signals: SignalConfig::default(),
            suppress_ticks: 5,
            suppress_radius_px: 24,
            path_min_trials: 3,
            settle_ms: 1500,
            deliberation_interval_ms: 60_000,
            scene_debounce_ms: 1000,
            rung_timeout_ms: 15_000,
            session_max_ms: 60 * 60 * 1000,
            session_max_actions: None,
            start_pass_sees_first_screen: true,
        }
    }
}

pub use gamepilot_core::FrameChange;

/// The active subgoal's postcondition value on one reflex tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubgoalCheck {
    pub subgoal: SubgoalId,
    pub met: Option<bool>,
}

/// Why a deliberative pass was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Start,
    SceneChange,
    SubgoalCompleted,
    SubgoalBudget,
    Stuck,
    Timer,
    /// The ladder's replan rung: the pass must produce a different plan.
    Replan,
    /// Research returned something (a note and untrusted excerpts are in the context): the pass replans
    /// with the new knowledge (FR-LOOP-006's research rung, FR-LOOP-007).
    Research,
}

/// Why the loop logic refused a proposed action before the executor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    Stopped,
    NoActiveSubgoal,
    /// The target was refuted recently (FR-GND-007).
    Suppressed,
    /// The ladder is on the alternative-action rung and this is the action that failed.
    NeedAlternative,
    /// The active subgoal's action budget is spent.
    SubgoalBudget,
    DuplicateActionId,
}

/// Why the session stopped (FR-LOOP-008, and the ladder's last rung).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    GoalMet,
    TimeBudget,
    ActionBudget,
    WindowClosed,
    UserStop,
    NoProgress,
}

/// Everything the loop logic reacts to. Recorded verbatim so a replay can feed it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The session begins with this goal.
    Start {
        goal: String,
    },
    /// One reflex tick's summary (frame change, held inputs, sensors, postconditions).
    ReflexTick {
        tick: u64,
        change: FrameChange,
        signature: u64,
        held: u32,
        #[serde(default)]
        progress: Option<f64>,
        #[serde(default)]
        goal_met: Option<bool>,
        #[serde(default)]
        subgoal: Option<SubgoalCheck>,
    },
    /// A tactical tick observed the screen (scene class and perceptual signature).
    Observation {
        scene: String,
        signature: u64,
    },
    /// The tactical cadence asks which grounding path to use.
    GroundingRequest {
        request: u64,
        scene: String,
        offered: Vec<GroundingPath>,
    },
    /// The tactical cadence proposes one validated action.
    ActionProposed {
        action: ActionId,
        key: String,
        #[serde(default)]
        target: Option<Target>,
        #[serde(default)]
        path: Option<GroundingPath>,
        expected: ExpectedChange,
        #[serde(default)]
        settle_ms: Option<u64>,
    },
    /// The executor could not deliver an action.
    ActionFailed {
        action: ActionId,
        reason: String,
    },
    /// One sample of evidence for a pending verification.
    Evidence {
        action: ActionId,
        evidence: Evidence,
        #[serde(default)]
        facts: FailureFacts,
    },
    /// A deliberative pass finished: a new plan, or `None` to keep the current one.
    DeliberationDone {
        pass: u64,
        plan: Option<PlanSpec>,
    },
    /// While a pass is in flight and no subgoal is active (at the start, or once a plan is done), act on
    /// this plan meanwhile (the goal itself); the pass's own plan replaces it when it arrives. Ignored
    /// while a subgoal is active.
    Provisional {
        plan: PlanSpec,
    },
    /// A deliberative pass failed (model error, timeout).
    DeliberationFailed {
        pass: u64,
        reason: String,
    },
    /// The wiring reports that carrying out a rung failed (e.g. research found nothing).
    RungFailed {
        rung: Rung,
        reason: String,
    },
    /// The wiring carried out a rung and verified its effect (the safe state reached): the ladder returns
    /// to idle as after progress.
    RungDone {
        rung: Rung,
        evidence: String,
    },
    /// Research (the ladder's research rung) ended. `found`: at least one source was read and its note is
    /// in the context, so a deliberative pass replans with it; otherwise the research rung failed.
    /// `summary` is the note written (or why nothing was found), kept for the recording.
    ResearchDone {
        found: bool,
        summary: String,
    },
    WindowClosed,
    UserStop,
}

/// Everything the loop logic decides. Recorded; a replay diffs them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    StartDeliberation {
        pass: u64,
        trigger: Trigger,
    },
    PlanAdopted {
        plan: PlanId,
        subgoals: Vec<SubgoalId>,
    },
    PlanKept {
        pass: u64,
    },
    PlanRejected {
        pass: u64,
        reason: String,
    },
    /// Release the inputs a subgoal owns (it is no longer in the plan).
    CancelSubgoal {
        subgoal: SubgoalId,
    },
    SubgoalStarted {
        subgoal: SubgoalId,
    },
    SubgoalCompleted {
        subgoal: SubgoalId,
    },
    SubgoalAbandoned {
        subgoal: SubgoalId,
        budget: BudgetKind,
    },
    /// Targets to leave out of the candidate list this tactical tick.
    Exclude {
        targets: Vec<Target>,
    },
    UsePath {
        request: u64,
        path: Option<GroundingPath>,
    },
    Execute {
        action: ActionId,
        subgoal: SubgoalId,
    },
    Reject {
        action: ActionId,
        reason: Refusal,
    },
    Verdict {
        action: ActionId,
        verdict: Verdict,
    },
    Failure {
        action: Option<ActionId>,
        cause: FailureCause,
    },
    Suppress {
        target: Target,
        until_tick: u64,
    },
    Stuck {
        signal: StuckSignal,
    },
    Escalate {
        rung: Rung,
    },
    /// The rung that made progress; the ladder is idle again.
    LadderReset {
        rung: Rung,
    },
    Stop {
        reason: StopReason,
    },
    /// Evidence that cannot verify the action's expected change (a wiring error); it was ignored.
    BadEvidence {
        action: ActionId,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct InFlight {
    subgoal: SubgoalId,
    key: String,
    target: Option<Target>,
    path: Option<GroundingPath>,
    scene: String,
    /// The facts of the latest evidence sample: a verdict the settle window closes is attributed on
    /// them (FR-GND-008), not on nothing.
    #[serde(default)]
    facts: FailureFacts,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Pass {
    pass: u64,
    trigger: Trigger,
    started: MonoTime,
}

/// How many recent stuck signals the status keeps.
const STUCK_LOG_LEN: usize = 8;

/// What the terminal status view shows of the loop logic (plan and subgoal, verdict counts, stuck signals,
/// the ladder's rung).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopStatus {
    pub plan: Option<PlanId>,
    pub subgoals: usize,
    pub subgoal: Option<SubgoalId>,
    pub subgoal_description: Option<String>,
    pub subgoal_actions: u32,
    pub deliberating: Option<u64>,
    pub rung: Option<Rung>,
    pub verdicts: VerdictCounts,
    pub failures: FailureHistogram,
    /// Refutations since the last confirmation (FR-GND-007's no-progress counter).
    pub refuted_run: u32,
    /// The most recent stuck signals with when they fired.
    pub recent_stuck: Vec<(MonoTime, StuckSignal)>,
    pub suppressed: usize,
    pub pending_verifications: usize,
    pub actions_executed: u64,
    pub stopped: Option<StopReason>,
}

/// Verdict counts for the status view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VerdictCounts {
    pub confirmed: u64,
    pub refuted: u64,
    pub inconclusive: u64,
}

/// The loop logic's whole state. Deterministic: the same events at the same times give the same commands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopState {
    cfg: LoopConfig,
    started: Option<MonoTime>,
    goal: String,
    plan: Option<Plan>,
    next_plan: u64,
    /// The plan is the goal itself, acted on while a pass plans ([`Event::Provisional`]).
    provisional: bool,
    passes: Passes,
    tactical_tick: u64,
    scene: String,
    signature: u64,
    judging: Judging,
    stuck: Stuck,
    in_flight: BTreeMap<ActionId, InFlight>,
    actions_executed: u64,
    stopped: Option<StopReason>,
}

/// The deliberative passes: the one running, the trigger waiting for it, when the last ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Passes {
    deliberating: Option<Pass>,
    pending_trigger: Option<Trigger>,
    next_pass: u64,
    last_pass_end: MonoTime,
    last_scene_trigger: Option<MonoTime>,
    /// A reflex tick has been seen (the first frame is not a change of scene when the start pass sees it).
    seen_frame: bool,
}

/// How actions are judged: verification, suppression of refuted targets, the grounding paths' record,
/// failure causes and verdicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Judging {
    verifier: Verifier,
    suppressor: Suppressor,
    paths: PathStats,
    histogram: FailureHistogram,
    verdicts: VerdictCounts,
}

/// No progress and what it leads to: the detectors, the escalation ladder and what its rungs remember.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Stuck {
    detectors: Detectors,
    ladder: Ladder,
    /// The safe-state rung has worked since the last progress toward the goal (a subgoal completed, the
    /// progress sensor rose): climbing to it again would only go back to the same screen, so it fails.
    safe_state_spent: bool,
    avoid_key: Option<String>,
    last_key: Option<String>,
    #[serde(default)]
    stuck_log: Vec<(MonoTime, StuckSignal)>,
}

impl LoopState {
    pub fn new(cfg: LoopConfig) -> Self {
        LoopState {
            cfg,
            started: None,
            goal: String::new(),
            plan: None,
            next_plan: 1,
            provisional: false,
            passes: Passes {
                deliberating: None,
                pending_trigger: None,
                next_pass: 1,
                last_pass_end: MonoTime::ZERO,
                last_scene_trigger: None,
                seen_frame: false,
            },
            tactical_tick: 0,
            scene: String::new(),
            signature: 0,
            judging: Judging {
                verifier: Verifier::new(),
                suppressor: Suppressor::new(cfg.suppress_ticks, cfg.suppress_radius_px),
                paths: PathStats::new(cfg.path_min_trials),
                histogram: FailureHistogram::new(),
                verdicts: VerdictCounts::default(),
            },
            stuck: Stuck {
                detectors: Detectors::new(cfg.signals),
                ladder: Ladder::default(),
                safe_state_spent: false,
                avoid_key: None,
                last_key: None,
                stuck_log: Vec::new(),
            },
            in_flight: BTreeMap::new(),
            actions_executed: 0,
            stopped: None,
        }
    }

    pub fn config(&self) -> &LoopConfig {
        &self.cfg
    }
    pub fn goal(&self) -> &str {
        &self.goal
    }
    /// The one active plan (INV-LOOP-001).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }
    pub fn active_subgoal(&self) -> Option<SubgoalId> {
        self.plan.as_ref().and_then(|p| p.active()).map(|s| s.spec.id)
    }
    pub fn deliberating(&self) -> Option<u64> {
        self.passes.deliberating.map(|p| p.pass)
    }
    pub fn histogram(&self) -> &FailureHistogram {
        &self.judging.histogram
    }
    pub fn path_stats(&self) -> &PathStats {
        &self.judging.paths
    }
    pub fn verdict_counts(&self) -> VerdictCounts {
        self.judging.verdicts
    }
    pub fn rung(&self) -> Option<Rung> {
        self.stuck.ladder.current()
    }
    /// On the alternative-action rung: the action (its key) that did not help and is refused meanwhile.
    pub fn refused_action(&self) -> Option<&str> {
        (self.stuck.ladder.current() == Some(Rung::AlternativeAction))
            .then_some(self.stuck.avoid_key.as_deref())
            .flatten()
    }
    pub fn stopped(&self) -> Option<StopReason> {
        self.stopped
    }
    pub fn tactical_tick(&self) -> u64 {
        self.tactical_tick
    }
    pub fn actions_executed(&self) -> u64 {
        self.actions_executed
    }
    /// A snapshot for the terminal status view.
    pub fn status(&self) -> LoopStatus {
        let active = self.plan.as_ref().and_then(|p| p.active());
        LoopStatus {
            plan: self.plan.as_ref().map(|p| p.id),
            subgoals: self.plan.as_ref().map(|p| p.subgoals.len()).unwrap_or(0),
            subgoal: active.map(|s| s.spec.id),
            subgoal_description: active.map(|s| s.spec.description.clone()),
            subgoal_actions: active.map(|s| s.actions).unwrap_or(0),
            deliberating: self.passes.deliberating.map(|p| p.pass),
            rung: self.stuck.ladder.current(),
            verdicts: self.judging.verdicts,
            failures: self.judging.histogram,
            refuted_run: self.stuck.detectors.refuted_run(),
            recent_stuck: self.stuck.stuck_log.clone(),
            suppressed: self.judging.suppressor.active(self.tactical_tick).len(),
            pending_verifications: self.judging.verifier.pending().len(),
            actions_executed: self.actions_executed,
            stopped: self.stopped,
        }
    }

    pub fn is_suppressed(&self, target: &Target) -> bool {
        self.judging.suppressor.is_suppressed(target, self.tactical_tick)
    }

    /// Feed one event; returns the decisions, in order.
    /// The user paused the session for `paused` and resumed it (FR-SAFE-002): every clock of the loop —
    /// the session's wall-clock budget, the subgoals' time budgets, the no-progress detectors' windows, the
    /// ladder's rung, the deliberation timer — moves on by the pause, so time the user held the game is
    /// neither spent nor taken for the agent's lack of progress.
    pub fn resume_after_pause(&mut self, paused: Duration) {
        let shift = |t: &mut MonoTime| *t = t.plus(paused);
        self.passes.last_pass_end = self.passes.last_pass_end.plus(paused);
        let subgoal_starts = self
            .plan
            .iter_mut()
            .flat_map(|p| p.subgoals.iter_mut())
            .map(|s| &mut s.started_at);
        for t in [&mut self.started, &mut self.passes.last_scene_trigger]
            .into_iter()
            .chain(subgoal_starts)
        {
            t.as_mut().into_iter().for_each(shift);
        }
        if let Some(p) = self.passes.deliberating.as_mut() {
            shift(&mut p.started);
        }
        self.stuck.detectors.shift_clocks(paused);
        self.stuck.ladder.shift_clock(paused);
    }

    pub fn step(&mut self, event: Event, now: MonoTime) -> Vec<Command> {
        let mut out = Vec::new();
        if self.stopped.is_some() {
            if let Event::ActionProposed { action, .. } = event {
                out.push(Command::Reject {
                    action,
                    reason: Refusal::Stopped,
                });
            }
            return out;
        }
        let started = *self.started.get_or_insert(now);
        if let Event::Start { .. } = event {
        } else {
            self.housekeeping(now, started, &mut out);
            if self.stopped.is_some() {
                if let Event::ActionProposed { action, .. } = event {
                    out.push(Command::Reject {
                        action,
                        reason: Refusal::Stopped,
                    });
                }
                return out;
            }
        }
        match event {
            Event::Start { goal } => {
                self.goal = goal;
                self.passes.last_pass_end = now;
                self.request_pass(Trigger::Start, now, &mut out);
            }
            Event::ReflexTick {
                change,
                held,
                progress,
                goal_met,
                subgoal,
                ..
            } => self.on_reflex(now, change, held, progress, goal_met, subgoal, &mut out),
            Event::Observation { scene, signature } => {
                self.tactical_tick += 1;
                self.scene = scene;
                self.signature = signature;
                self.judging.suppressor.expire(self.tactical_tick);
                let targets: Vec<Target> = self
                    .judging
                    .suppressor
                    .active(self.tactical_tick)
                    .into_iter()
                    .map(|s| s.target)
                    .collect();
                if !targets.is_empty() {
                    out.push(Command::Exclude { targets });
                }
            }
            Event::GroundingRequest {
                request,
                scene,
                offered,
            } => {
                let path = self.judging.paths.choose(&scene, &offered).ok();
                out.push(Command::UsePath { request, path });
            }
            Event::ActionProposed {
                action,
                key,
                target,
                path,
                expected,
                settle_ms,
            } => self.on_proposed(now, action, key, target, path, expected, settle_ms, &mut out),
            Event::ActionFailed { action, .. } => {
                if self.judging.verifier.cancel(action) {
                    self.in_flight.remove(&action);
                    out.push(Command::Verdict {
                        action,
                        verdict: Verdict::Inconclusive,
                    });
                    self.judging.verdicts.inconclusive += 1;
                    self.judging.histogram.record(FailureCause::Execution);
                    out.push(Command::Failure {
                        action: Some(action),
                        cause: FailureCause::Execution,
                    });
                    let fired = self.stuck.detectors.on_verdict(Verdict::Inconclusive);
                    self.on_signals(now, fired, &mut out);
                }
            }
            Event::Evidence {
                action,
                evidence,
                facts,
            } => {
                match self.judging.verifier.observe(action, &evidence, now) {
                    Ok(Some(v)) => self.on_verdict(now, action, v, facts, &mut out),
                    Ok(None) => {
                        if let Some(f) = self.in_flight.get_mut(&action) {
                            f.facts = facts;
                        }
                    }
                    // Late evidence for an action already judged is normal; evidence of the wrong kind
                    // is a wiring error, reported and otherwise ignored (the check ends inconclusive if
                    // no usable sample follows, INV-GND-001).
                    Err(gamepilot_grounding::GroundingError::UnknownAction(_)) => {}
                    Err(e) => out.push(Command::BadEvidence {
                        action,
                        reason: e.to_string(),
                    }),
                }
            }
            Event::DeliberationDone { pass, plan } => self.on_pass_done(now, pass, plan, &mut out),
            Event::Provisional { plan } => {
                if self.active_subgoal().is_none()
                    && self.passes.deliberating.is_some()
                    && plan.validate().is_ok()
                {
                    self.adopt(now, plan, &mut out);
                    self.provisional = true;
                }
            }
            Event::DeliberationFailed { pass, .. } => {
                if let Some(p) = self.passes.deliberating.filter(|p| p.pass == pass) {
                    self.passes.deliberating = None;
                    self.passes.last_pass_end = now;
                    if self.stuck.ladder.current() == Some(Rung::Replan) || self.rung_pass(p.trigger) {
                        self.rung_failed(now, &mut out);
                    }
                    self.start_pending(now, &mut out);
                }
            }
            Event::RungFailed { rung, .. } => {
                if self.stuck.ladder.current() == Some(rung) {
                    self.rung_failed(now, &mut out);
                }
            }
            Event::RungDone { rung, .. } => {
                if self.stuck.ladder.current() == Some(rung) {
                    self.stuck.detectors.restart(now);
                    if rung == Rung::SafeState && self.stuck.safe_state_spent {
                        // Back on the safe screen a second time with no progress since the first: another
                        // cycle would repeat the last one until a budget ends it. The game is left on the
                        // safe screen and the ladder stops and notifies.
                        self.rung_failed(now, &mut out);
                    } else {
                        self.rung_succeeded(&mut out);
                    }
                }
            }
            Event::ResearchDone { found, .. } => self.on_research_done(now, found, &mut out),
            Event::WindowClosed => self.stop(StopReason::WindowClosed, &mut out),
            Event::UserStop => self.stop(StopReason::UserStop, &mut out),
        }
        out
    }

    /// Checks every event makes: closing verification windows, budgets, the timer trigger, rung timeout.
    fn housekeeping(&mut self, now: MonoTime, started: MonoTime, out: &mut Vec<Command>) {
        for (action, verdict) in self.judging.verifier.expire(now) {
            let mut facts = self.in_flight.get(&action).map(|f| f.facts).unwrap_or_default();
            facts.evidence_undefined |= verdict == Verdict::Inconclusive;
            self.on_verdict(now, action, verdict, facts, out);
            if self.stopped.is_some() {
                return;
            }
        }
        if now.since(started) >= Duration::from_millis(self.cfg.session_max_ms) {
            self.stop(StopReason::TimeBudget, out);
            return;
        }
        self.check_subgoal_budget(now, false, out);
        if self.passes.deliberating.is_none()
            && self.started.is_some()
            && now.since(self.passes.last_pass_end)
                >= Duration::from_millis(self.cfg.deliberation_interval_ms)
        {
            self.request_pass(Trigger::Timer, now, out);
        }
        if let Some(since) = self.stuck.ladder.since() {
            if now.since(since) >= Duration::from_millis(self.cfg.rung_timeout_ms) {
                self.rung_failed(now, out);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_reflex(
        &mut self,
        now: MonoTime,
        change: FrameChange,
        held: u32,
        progress: Option<f64>,
        goal_met: Option<bool>,
        subgoal: Option<SubgoalCheck>,
        out: &mut Vec<Command>,
    ) {
        if goal_met == Some(true) {
            self.stop(StopReason::GoalMet, out);
            return;
        }
        let first_frame = !std::mem::replace(&mut self.passes.seen_frame, true);
        if change == FrameChange::Scene && !(first_frame && self.cfg.start_pass_sees_first_screen) {
            let debounced = self
                .passes
                .last_scene_trigger
                .is_some_and(|t| now.since(t) < Duration::from_millis(self.cfg.scene_debounce_ms));
            if !debounced {
                self.passes.last_scene_trigger = Some(now);
                self.request_pass(Trigger::SceneChange, now, out);
            }
        }
        if let Some(check) = subgoal {
            if check.met == Some(true) && self.active_subgoal() == Some(check.subgoal) {
                self.complete_subgoal(now, out);
            }
        }
        let (fired, advanced) =
            self.stuck
                .detectors
                .on_tick(now, change != FrameChange::Unchanged, held, progress);
        if advanced {
            self.stuck.safe_state_spent = false;
            self.progress_made(out);
        }
        self.on_signals(now, fired, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_proposed(
        &mut self,
        now: MonoTime,
        action: ActionId,
        key: String,
        target: Option<Target>,
        path: Option<GroundingPath>,
        expected: ExpectedChange,
        settle_ms: Option<u64>,
        out: &mut Vec<Command>,
    ) {
        let reject = |reason| Command::Reject { action, reason };
        if self.in_flight.contains_key(&action) {
            out.push(reject(Refusal::DuplicateActionId));
            return;
        }
        if let Some(max) = self.cfg.session_max_actions {
            if self.actions_executed >= max {
                self.stop(StopReason::ActionBudget, out);
                out.push(reject(Refusal::Stopped));
                return;
            }
        }
        if self.check_subgoal_budget(now, true, out) {
            out.push(reject(Refusal::SubgoalBudget));
            return;
        }
        let Some(subgoal) = self.active_subgoal() else {
            out.push(reject(Refusal::NoActiveSubgoal));
            return;
        };
        if target.is_some_and(|t| self.judging.suppressor.is_suppressed(&t, self.tactical_tick)) {
            out.push(reject(Refusal::Suppressed));
            return;
        }
        if self.stuck.ladder.current() == Some(Rung::AlternativeAction)
            && self.stuck.avoid_key.as_deref() == Some(&key)
        {
            out.push(reject(Refusal::NeedAlternative));
            return;
        }
        let settle = Duration::from_millis(settle_ms.unwrap_or(self.cfg.settle_ms));
        if self
            .judging
            .verifier
            .expect(action, expected, now, settle)
            .is_err()
        {
            out.push(reject(Refusal::DuplicateActionId));
            return;
        }
        out.push(Command::Execute { action, subgoal });
        self.actions_executed += 1;
        if let Some(s) = self.plan.as_mut().and_then(|p| p.active_mut()) {
            s.actions += 1;
        }
        let cycle = self.stuck.detectors.on_action(now, self.signature, &key);
        self.stuck.last_key = Some(key.clone());
        self.in_flight.insert(
            action,
            InFlight {
                subgoal,
                key,
                target,
                path,
                scene: self.scene.clone(),
                facts: FailureFacts::default(),
            },
        );
        if let Some(sig) = cycle {
            self.on_signals(now, vec![sig], out);
        }
    }

    fn on_verdict(
        &mut self,
        now: MonoTime,
        action: ActionId,
        verdict: Verdict,
        facts: FailureFacts,
        out: &mut Vec<Command>,
    ) {
        let rec = self.in_flight.remove(&action);
        out.push(Command::Verdict { action, verdict });
        match verdict {
            Verdict::Confirmed => self.judging.verdicts.confirmed += 1,
            Verdict::Refuted => self.judging.verdicts.refuted += 1,
            Verdict::Inconclusive => self.judging.verdicts.inconclusive += 1,
        }
        if let Some(rec) = &rec {
            if let Some(path) = rec.path {
                self.judging.paths.record(&rec.scene, path, verdict);
            }
        }
        match verdict {
            Verdict::Refuted => {
                let cause = attribute(&facts);
                self.judging.histogram.record(cause);
                out.push(Command::Failure {
                    action: Some(action),
                    cause,
                });
                if let Some(target) = rec.as_ref().and_then(|r| r.target) {
                    let until_tick = self.judging.suppressor.suppress(target, self.tactical_tick);
                    out.push(Command::Suppress { target, until_tick });
                }
            }
            Verdict::Confirmed => self.progress_made(out),
            Verdict::Inconclusive => {}
        }
        let fired = self.stuck.detectors.on_verdict(verdict);
        self.on_signals(now, fired, out);
    }

    fn on_signals(&mut self, now: MonoTime, fired: Vec<StuckSignal>, out: &mut Vec<Command>) {
        if fired.is_empty() || self.stopped.is_some() {
            return;
        }
        for signal in &fired {
            out.push(Command::Stuck { signal: *signal });
            if self.stuck.stuck_log.len() == STUCK_LOG_LEN {
                self.stuck.stuck_log.remove(0);
            }
            self.stuck.stuck_log.push((now, *signal));
        }
        // One escalation per batch of signals: several detectors agreeing is one failure, not several.
        self.climb(now, true, out);
    }

    /// The current rung failed (or no progress was detected): climb one rung and carry it out.
    fn rung_failed(&mut self, now: MonoTime, out: &mut Vec<Command>) {
        self.climb(now, false, out);
    }

    fn climb(&mut self, now: MonoTime, from_stuck: bool, out: &mut Vec<Command>) {
        let rung = self.stuck.ladder.climb(now);
        out.push(Command::Escalate { rung });
        self.stuck.detectors.restart(now);
        match rung {
            Rung::AlternativeAction => self.stuck.avoid_key = self.stuck.last_key.clone(),
            Rung::Replan => self.request_pass(Trigger::Replan, now, out),
            Rung::StopAndNotify => {
                self.stop(StopReason::NoProgress, out);
                return;
            }
            Rung::Retry | Rung::Research | Rung::SafeState => {}
        }
        if from_stuck && rung != Rung::Replan {
            self.request_pass(Trigger::Stuck, now, out); // FR-LOOP-007
        }
    }

    /// True when a pass with this trigger carries out the rung the ladder is on (replan, or the replan
    /// that follows research): such a pass that keeps the plan, or fails, fails the rung.
    fn rung_pass(&self, trigger: Trigger) -> bool {
        matches!(
            (trigger, self.stuck.ladder.current()),
            (Trigger::Replan, Some(Rung::Replan)) | (Trigger::Research, Some(Rung::Research))
        )
    }

    /// Research ended (FR-LOOP-006's research rung). Something found is new knowledge: a deliberative pass
    /// replans with it (FR-LOOP-007) and, when the ladder is on the research rung, that rung has produced
    /// something, so it gets a full rung period for the new plan to show progress. Nothing found fails the
    /// research rung like `RungFailed`.
    fn on_research_done(&mut self, now: MonoTime, found: bool, out: &mut Vec<Command>) {
        let on_rung = self.stuck.ladder.current() == Some(Rung::Research);
        if !found {
            if on_rung {
                self.rung_failed(now, out);
            }
            return;
        }
        if on_rung {
            self.stuck.ladder.restart(now);
            self.stuck.detectors.restart(now);
        }
        self.request_pass(Trigger::Research, now, out);
    }

    fn progress_made(&mut self, out: &mut Vec<Command>) {
        // A second return to the safe screen with no progress since the first ends on arrival (`RungDone`,
        // which then stops) or on giving up, not on a step that changed the screen (play to pause).
        if self.stuck.safe_state_spent && self.stuck.ladder.current() == Some(Rung::SafeState) {
            return;
        }
        self.rung_succeeded(out);
    }

    /// The current rung worked: the ladder returns to idle.
    fn rung_succeeded(&mut self, out: &mut Vec<Command>) {
        if let Some(rung) = self.stuck.ladder.succeeded() {
            self.stuck.avoid_key = None;
            if rung == Rung::SafeState {
                self.stuck.safe_state_spent = true;
            }
            out.push(Command::LadderReset { rung });
        }
    }

    fn complete_subgoal(&mut self, now: MonoTime, out: &mut Vec<Command>) {
        let Some(plan) = self.plan.as_mut() else { return };
        let Some(s) = plan.active_mut() else { return };
        s.status = SubgoalStatus::Done;
        let id = s.spec.id;
        self.stuck.safe_state_spent = false;
        out.push(Command::SubgoalCompleted { subgoal: id });
        if let Some(next) = plan.activate_next(now) {
            out.push(Command::SubgoalStarted { subgoal: next });
        }
        self.progress_made(out);
        self.request_pass(Trigger::SubgoalCompleted, now, out);
    }

    /// Abandon the active subgoal if its budget is spent; true when it was.
    fn check_subgoal_budget(&mut self, now: MonoTime, pending_action: bool, out: &mut Vec<Command>) -> bool {
        let Some(plan) = self.plan.as_mut() else {
            return false;
        };
        let Some(s) = plan.active_mut() else { return false };
        let Some(budget) = s.exhausted(now, pending_action) else {
            return false;
        };
        s.status = SubgoalStatus::Abandoned;
        let id = s.spec.id;
        out.push(Command::SubgoalAbandoned { subgoal: id, budget });
        out.push(Command::CancelSubgoal { subgoal: id });
        self.judging.histogram.record(FailureCause::Plan);
        out.push(Command::Failure {
            action: None,
            cause: FailureCause::Plan,
        });
        if let Some(next) = plan.activate_next(now) {
            out.push(Command::SubgoalStarted { subgoal: next });
        }
        self.request_pass(Trigger::SubgoalBudget, now, out);
        true
    }

    /// Request a deliberative pass. At most one runs; requests during a pass are coalesced into one
    /// follow-up pass (a replan request takes precedence, then research). The request never waits
    /// (NFR-LOOP-001).
    fn request_pass(&mut self, trigger: Trigger, now: MonoTime, out: &mut Vec<Command>) {
        if self.passes.deliberating.is_some() {
            // A replan request takes precedence over any other; research over all but a replan.
            let wins = match self.passes.pending_trigger {
                None => true,
                Some(Trigger::Replan) => false,
                Some(_) => matches!(trigger, Trigger::Replan | Trigger::Research),
            };
            if wins {
                self.passes.pending_trigger = Some(trigger);
            }
            return;
        }
        let pass = self.passes.next_pass;
        self.passes.next_pass += 1;
        self.passes.deliberating = Some(Pass {
            pass,
            trigger,
            started: now,
        });
        out.push(Command::StartDeliberation { pass, trigger });
    }

    fn start_pending(&mut self, now: MonoTime, out: &mut Vec<Command>) {
        if let Some(t) = self.passes.pending_trigger.take() {
            self.request_pass(t, now, out);
        }
    }

    /// The deliberative revision API (FR-LOOP-003): only the result of the pass now in flight may
    /// replace the plan, and the replacement is the only plan (INV-LOOP-001).
    fn on_pass_done(&mut self, now: MonoTime, pass: u64, spec: Option<PlanSpec>, out: &mut Vec<Command>) {
        let Some(current) = self.passes.deliberating.filter(|p| p.pass == pass) else {
            out.push(Command::PlanRejected {
                pass,
                reason: "no deliberative pass with this id is in flight".into(),
            });
            return;
        };
        self.passes.deliberating = None;
        self.passes.last_pass_end = now;
        let rung_pass = self.rung_pass(current.trigger);
        match spec {
            None => {
                out.push(Command::PlanKept { pass });
                if rung_pass {
                    self.rung_failed(now, out);
                }
            }
            Some(spec) => match spec.validate() {
                Err(e) => {
                    out.push(Command::PlanRejected {
                        pass,
                        reason: e.to_string(),
                    });
                    if rung_pass {
                        self.rung_failed(now, out);
                    }
                }
                Ok(()) => self.adopt(now, spec, out),
            },
        }
        if self.stopped.is_none() {
            self.start_pending(now, out);
        }
    }

    fn adopt(&mut self, now: MonoTime, spec: PlanSpec, out: &mut Vec<Command>) {
        let id = PlanId(self.next_plan);
        self.next_plan += 1;
        let mut plan = Plan::from_spec(id, spec);
        // What was done toward the goal itself while the plan was made is not cancelled: its actions end
        // and are judged as they would have (a probe hold cut short is evidence lost, not a failure).
        let replaced_provisional = std::mem::take(&mut self.provisional);
        if let Some(old) = self.plan.as_ref().filter(|_| !replaced_provisional) {
            for s in &old.subgoals {
                if !plan.contains(s.spec.id) && s.status == SubgoalStatus::Active {
                    out.push(Command::CancelSubgoal { subgoal: s.spec.id });
                }
            }
        }
        out.push(Command::PlanAdopted {
            plan: id,
            subgoals: plan.subgoals.iter().map(|s| s.spec.id).collect(),
        });
        if let Some(first) = plan.activate_next(now) {
            out.push(Command::SubgoalStarted { subgoal: first });
        }
        self.plan = Some(plan);
    }

    fn stop(&mut self, reason: StopReason, out: &mut Vec<Command>) {
        if self.stopped.is_none() {
            self.stopped = Some(reason);
            out.push(Command::Stop { reason });
        }
    }
}

/// `step(&mut state, event, now)`: the free-function form of [`LoopState::step`].
pub fn step(state: &mut LoopState, event: Event, now: MonoTime) -> Vec<Command> {
    state.step(event, now)
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
