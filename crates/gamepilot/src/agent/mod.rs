//! `gamepilot run` wiring: the three cadences on their own threads (FR-LOOP-001) around the loop logic
//! (`gamepilot_planner::step`), with the recording written as it goes (INV-CTX-002, output only).
//!
//! reflex thread ── ticks, evidence, interlocks ──▶ loop thread (this module) ◀── tactical results
//!       ▲                                               │   ▲
//!       └──── submit / watch / cancel / subgoal ────────┘   └── deliberation results (own threads)

pub mod deliberative;
pub mod destructive;
pub mod refine;
pub mod reflex;
pub mod research;
pub mod tactical;

use crate::cmd::act::GuardianHandle;
use crate::cmd::common::now;
use anyhow::Context as _;
use deliberative::{DeliberationRequest, DeliberationResult, Postconditions};
use gamepilot_context::{
    Context, ContextConfig, HistoryEntry, Plan as CtxPlan, PlanStep, SchemaLimits, StepStatus, TacticalReply,
    Tool, ToolSet,
};
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::{Chord, ElementId, MonoTime, Point, Rect, SubgoalId};
use gamepilot_executor::ExecutorConfig;
use gamepilot_grounding::{
    ActionId, ChangeDirection, Evidence, ExpectedChange, FailureFacts, GroundingPath, Target, Verdict,
};
use gamepilot_model::{CancelToken, HostClient};
use gamepilot_planner::{Command, Event, FrameChange, LoopConfig, LoopState, Rung, StopReason, SubgoalCheck};
use gamepilot_recording::{Record, Recorder, SessionStart};
use gamepilot_sensor::{Expression, Program};
use reflex::{FromReflex, ReflexSetup, ToReflex};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tactical::{TacticalRequest, TacticalResult, TacticalSetup};

/// Everything a session needs; every limit comes from the user (INV-SAFE-001).
pub struct AgentConfig {
    pub display: Option<String>,
    pub window: gamepilot_x11::WindowInfo,
    pub window_label: String,
    pub goal: String,
    pub goal_check: Option<String>,
    pub sensors_src: Option<String>,
    pub client: HostClient,
    pub model_name: String,
    pub vision: bool,
    pub exec: ExecutorConfig,
    pub panic: Chord,
    pub stale_ms: u64,
    pub hz: u32,
    pub dry_run: bool,
    pub record_dir: PathBuf,
    pub loop_cfg: LoopConfig,
    pub tactical_interval_ms: u64,
    pub tactical_pixels: u64,
    /// No one is at the terminal: destructive actions are asked about on the overlay only (FR-SAFE-005).
    pub unattended: bool,
    /// How long a destructive action is held for the user's answer (overlay, or terminal when attended)
    /// before it is rejected; zero rejects at once (FR-SAFE-005).
    pub confirm_timeout: Duration,
    pub quiet: bool,
    /// SearxNG base URL for the ladder's research rung; `None`: research unavailable.
    pub research_endpoint: Option<String>,
    /// The sensor whose increase is progress (FR-LOOP-005's stalled-progress signal); `None`: that signal
    /// stays off.
    pub progress_sensor: Option<String>,
    /// The grounding paths a tactical tick may take; the confirmation rates per scene class choose among
    /// them (FR-GND-004). One entry forces that path.
    pub grounding_paths: Vec<GroundingPath>,
    /// Templates, camera calibration and session notes for the reflex (issue 12, reflex half).
    pub reflex: reflex::ReflexExtras,
    /// Degrade commands from the GPU-memory watch (FR-MODEL-004); recorded here, applied by the loop later.
    pub degrade: Option<mpsc::Receiver<gamepilot_model::DegradeCommand>>,
}

/// What a session did, for the summary and the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub stop_reason: String,
    pub seconds: f64,
    pub actions_executed: u64,
    pub actions_per_s: f64,
    pub confirmed: u64,
    pub refuted: u64,
    pub inconclusive: u64,
    pub rejected: u64,
    pub failures: Vec<(String, u64)>,
    pub tactical_calls: u64,
    pub tactical_latency_ms_p50: f64,
    pub tactical_latency_ms_p95: f64,
    pub cached_prompt_tokens: u64,
    pub prompt_tokens: u64,
    pub deliberative_passes: u64,
    pub reflex_ticks: u64,
    pub reflex_lateness_us_p50: u64,
    pub reflex_lateness_us_p99: u64,
    pub input_events: u64,
    pub goal_met: Option<bool>,
    pub recording: String,
}

/// An action the loop has proposed, by loop action id.
struct Pending {
    intention: Intention,
    target: Option<Target>,
    path: Option<GroundingPath>,
    expected: ExpectedChange,
    region: Option<Rect>,
    label: String,
}

/// An action held for the user's explicit confirmation (FR-SAFE-005), with what proposing it needs.
struct HeldAction {
    hold: destructive::Hold,
    action: Action,
    mark: Option<(ElementId, Rect)>,
    path: Option<GroundingPath>,
    target: Option<Target>,
    /// The reflex has been told to pause the executor.
    reflex_paused: bool,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Lower the calling thread's scheduling priority (nice 5): the tactical and deliberative threads run OCR,
/// segmentation and model I/O that may wait; the reflex thread must not wait behind them (FR-LOOP-002).
/// Best effort: a failure leaves the thread at the normal priority.
fn yield_cpu_to_reflex() {
    // SAFETY: plain syscalls on the calling thread's own id; no memory is shared with the kernel.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 5);
    }
}

/// The stronger of two frame classes: unchanged < local < motion < scene.
fn stronger_change(
    a: gamepilot_vision::FrameClass,
    b: gamepilot_vision::FrameClass,
) -> gamepilot_vision::FrameClass {
    use gamepilot_vision::FrameClass::*;
    let rank = |c| match c {
        Unchanged => 0,
        Local => 1,
        Motion => 2,
        Scene => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

fn change_of(c: gamepilot_vision::FrameClass) -> FrameChange {
    match c {
        gamepilot_vision::FrameClass::Unchanged => FrameChange::Unchanged,
        gamepilot_vision::FrameClass::Local => FrameChange::Local,
        gamepilot_vision::FrameClass::Motion => FrameChange::Motion,
        gamepilot_vision::FrameClass::Scene => FrameChange::Scene,
    }
}

/// The expected change of an action and the pixels to watch for it (FR-GND-006).
fn expectation(action: &Action, mark: Option<(ElementId, Rect)>) -> (ExpectedChange, Option<Rect>) {
    match (mark, action) {
        (Some((id, bbox)), _) => (ExpectedChange::ElementChanged { element: id }, Some(bbox)),
        (None, Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. }) => (
            ExpectedChange::SensorDelta {
                sensor: "view_change".into(),
                direction: ChangeDirection::Increase,
                min_delta: 0.5,
            },
            Some(Rect::new(x - 40, y - 40, 80, 80)),
        ),
        _ => (
            ExpectedChange::SensorDelta {
                sensor: "view_change".into(),
                direction: ChangeDirection::Increase,
                min_delta: 0.5,
            },
            None,
        ),
    }
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

/// The session's sensors: the user's file plus the goal check; the postconditions a plan may use.
fn compile_sensors(
    cfg: &AgentConfig,
) -> anyhow::Result<(Program, Option<Expression>, Postconditions, Vec<Expression>)> {
    let src = cfg.sensors_src.clone().unwrap_or_default();
    let program = gamepilot_sensor::compile(&src).map_err(|e| {
        anyhow::anyhow!(
            "sensor file has errors:\n{}",
            gamepilot_sensor::render_all(e.diagnostics(), "sensors", &src)
        )
    })?;
    let goal = match cfg.goal_check.as_deref() {
        Some(g) => Some(program.compile_expression(g).map_err(|e| {
            anyhow::anyhow!(
                "--goal-check is not a valid sensor expression:\n{}",
                gamepilot_sensor::render_all(e.diagnostics(), "--goal-check", g)
            )
        })?),
        None => None,
    };
    let mut sources: Vec<String> = cfg.goal_check.iter().cloned().collect();
    for def in program.sensors() {
        if def.ty == gamepilot_sensor::Type::Bool && !sources.contains(&def.name) {
            sources.push(def.name.clone());
        }
    }
    anyhow::ensure!(
        !sources.is_empty(),
        "no machine-checkable postcondition: pass --goal-check EXPR or a --sensors file with a boolean sensor (FR-LOOP-004)"
    );
    let compiled = sources
        .iter()
        .map(|s| {
            program
                .compile_expression(s)
                .map_err(|e| anyhow::anyhow!("postcondition {s:?}: {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((program, goal, Postconditions { sources }, compiled))
}

/// The tools `run` offers the tactical model.
const TOOLS: [Tool; 7] = [
    Tool::ClickMark,
    Tool::Click,
    Tool::Key,
    Tool::HoldKey,
    Tool::Camera,
    Tool::Wait,
    Tool::Note,
];

fn tools() -> anyhow::Result<ToolSet> {
    Ok(ToolSet::new(&TOOLS)?)
}

/// The tools of one tactical tick for a grounding path: by mark drops coordinate clicks, by coordinate
/// drops mark clicks; no choice yet offers both (FR-GND-001, FR-GND-002, FR-GND-004).
fn tools_for_path(path: Option<GroundingPath>) -> Option<ToolSet> {
    let drop = match path {
        Some(GroundingPath::Mark) => Tool::Click,
        Some(GroundingPath::Coordinate) => Tool::ClickMark,
        _ => return None,
    };
    let kept: Vec<Tool> = TOOLS.into_iter().filter(|t| *t != drop).collect();
    ToolSet::new(&kept).ok()
}

/// Run one session to a stop condition (FR-LOOP-008).
pub fn run_agent(cfg: AgentConfig) -> anyhow::Result<Summary> {
    let t0 = Instant::now();
    let (program, goal_expr, post, post_exprs) = compile_sensors(&cfg)?;
    let tools = tools()?;
    let mut context = Context::new(ContextConfig::default(), &tools, &cfg.goal, now())?;
    let mut rec = Recorder::create(
        &cfg.record_dir,
        SessionStart {
            schema_version: gamepilot_recording::format::SCHEMA_VERSION,
            tool: format!("gamepilot {}", env!("CARGO_PKG_VERSION")),
            goal: cfg.goal.clone(),
            window: cfg.window_label.clone(),
            started_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            config: serde_json::to_value(cfg.loop_cfg)?,
        },
    )
    .with_context(|| format!("creating the recording in {}", cfg.record_dir.display()))?;

    // The guardian first: nothing is armed without it (FR-SAFE-003).
    let guardian = GuardianHandle::spawn(cfg.display.as_deref(), &cfg.panic, cfg.stale_ms)?;
    let (to_reflex, reflex_rx) = mpsc::channel();
    let (reflex_tx, from_reflex) = mpsc::channel();
    let setup = ReflexSetup {
        display: cfg.display.clone(),
        window: cfg.window.id,
        exec: cfg.exec.clone(),
        dry_run: cfg.dry_run,
        hz: cfg.hz,
        program: Some(program.clone()),
        declared: gamepilot_core::Size::new(cfg.window.geometry.w, cfg.window.geometry.h),
        goal: goal_expr,
        panic: cfg.panic.clone(),
        extras: cfg.reflex.clone(),
    };
    for text in &cfg.reflex.notes {
        rec.record(now(), Record::Note { text: text.clone() })?;
    }
    let reflex_thread = std::thread::Builder::new()
        .name("reflex".into())
        .spawn(move || reflex::run(setup, guardian, reflex_rx, reflex_tx))?;

    let cancel = CancelToken::new();
    let (to_tactical, tactical_rx) = mpsc::channel::<TacticalRequest>();
    let (tactical_tx, from_tactical) = mpsc::channel::<TacticalResult>();
    let tsetup = TacticalSetup {
        display: cfg.display.clone(),
        window: cfg.window.id,
        client: cfg.client.clone(),
        model_name: cfg.model_name.clone(),
        tools: tools.clone(),
        limits: SchemaLimits::default(),
        max_tokens: 96,
    };
    let tcancel = cancel.clone();
    let tactical_thread = std::thread::Builder::new()
        .name("tactical".into())
        .spawn(move || {
            yield_cpu_to_reflex();
            tactical::run(tsetup, tactical_rx, tactical_tx, tcancel)
        })?;
    let (delib_tx, from_delib) = mpsc::channel::<DeliberationResult>();

    let mut state = LoopState::new(cfg.loop_cfg);
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut next_action: u64 = 1;
    let mut next_subgoal: u32 = 1;
    let mut tactical_in_flight = false;
    let mut last_tactical = Instant::now() - Duration::from_secs(3600);
    let mut tactical_tick: u64 = 0;
    let mut latencies: Vec<f64> = Vec::new();
    let (mut cached_tokens, mut prompt_tokens, mut passes) = (0u64, 0u64, 0u64);
    let mut rejected: u64 = 0;
    let mut held: Option<HeldAction> = None;
    let mut last_observation = String::from("(nothing observed yet)");
    let mut last_scene = String::from("scene");
    let mut excluded: Vec<ElementId> = Vec::new();
    let mut subgoal_descriptions: HashMap<SubgoalId, String> = HashMap::new();
    let mut last_goal_met: Option<bool> = None;
    // The strongest frame change since the loop logic was last fed: the reflex ticks at 60 Hz but feeds
    // at ~10 Hz, and a change on an unfed tick must not read as stasis (FR-LOOP-005).
    let mut unfed_change = gamepilot_vision::FrameClass::Unchanged;
    let mut stop: Option<String> = None;
    // The interlock behind a user stop (user input, the panic chord, the guardian's halt), for the summary.
    let mut stopped_by: Option<String> = None;
    let mut reflex_stats = (0u64, 0u64, 0u64, 0u64);
    let mut sensor_line = String::new();
    let mut held_now = 0u32;
    let (mut reflex_generation, mut frame_health) = (0u64, reflex::FrameState::Ok);
    let mut last_status = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut research = research::ResearchWiring::new(
        cfg.research_endpoint.clone(),
        Duration::from_millis(cfg.loop_cfg.rung_timeout_ms.saturating_sub(2_000)),
    );

    // Feed one event to the loop logic, record it and its decisions, and carry the decisions out.
    macro_rules! feed {
        ($event:expr) => {{
            let ev: Event = $event;
            let t = now();
            let seq = rec.loop_event(t, &ev)?;
            let cmds = state.step(ev, t);
            rec.decisions(t, seq, &cmds)?;
            cmds
        }};
    }

    let mut queue: Vec<Command> = feed!(Event::Start {
        goal: cfg.goal.clone()
    });
    loop {
        // Carry out decisions.
        while !queue.is_empty() {
            let cmds: Vec<Command> = std::mem::take(&mut queue);
            for c in cmds {
                match c {
                    Command::StartDeliberation { pass, trigger } => {
                        passes += 1;
                        let req = DeliberationRequest {
                            pass,
                            trigger: format!("{trigger:?}"),
                            context: context.clone(),
                            observation: last_observation.clone(),
                            now: now(),
                            first_id: next_subgoal,
                        };
                        next_subgoal += 3;
                        let (client, model, post, tx, cancel) = (
                            cfg.client.clone(),
                            cfg.model_name.clone(),
                            post.clone(),
                            delib_tx.clone(),
                            cancel.clone(),
                        );
                        std::thread::Builder::new()
                            .name("deliberative".into())
                            .spawn(move || {
                                yield_cpu_to_reflex();
                                let _ =
                                    tx.send(deliberative::deliberate(&client, &model, &post, &req, &cancel));
                            })?;
                    }
                    Command::PlanAdopted { .. } => {
                        if let Some(plan) = state.plan() {
                            let active = state.active_subgoal();
                            let steps = plan
                                .subgoals
                                .iter()
                                .map(|s| {
                                    let d = subgoal_descriptions.get(&s.spec.id).cloned().unwrap_or_default();
                                    let status = if Some(s.spec.id) == active {
                                        StepStatus::Active
                                    } else {
                                        StepStatus::Pending
                                    };
                                    PlanStep::new(
                                        format!("{d} (done when: {})", s.spec.postcondition.source),
                                        status,
                                    )
                                })
                                .collect();
                            context.set_plan(CtxPlan {
                                steps,
                                subgoal: active.map(|a| a.to_string()),
                            });
                        }
                    }
                    Command::SubgoalStarted { subgoal } => {
                        let expr = state
                            .plan()
                            .and_then(|p| p.subgoals.iter().find(|s| s.spec.id == subgoal))
                            .and_then(|s| post_exprs.get(s.spec.postcondition.handle as usize).cloned());
                        let _ = to_reflex.send(ToReflex::Subgoal(expr.map(|e| (subgoal, e))));
                        rec.record(
                            now(),
                            Record::Note {
                                text: format!("subgoal {subgoal} started"),
                            },
                        )?;
                    }
                    Command::CancelSubgoal { subgoal } => {
                        let _ = to_reflex.send(ToReflex::CancelOwner(subgoal));
                    }
                    Command::Execute { action, subgoal } => {
                        if let Some(p) = pending.get_mut(&action.0) {
                            p.intention.subgoal = subgoal;
                            rec.record(
                                now(),
                                Record::Action {
                                    action,
                                    subgoal: subgoal.0,
                                    payload: serde_json::to_value(&p.intention.action)?,
                                    target: p.target,
                                    path: p.path,
                                },
                            )?;
                            let _ = to_reflex.send(ToReflex::Submit {
                                tag: action.0,
                                intention: p.intention.clone(),
                                generation: reflex_generation,
                            });
                            let _ = to_reflex.send(ToReflex::Watch {
                                tag: action.0,
                                region: p.region,
                                settle: Duration::from_millis(cfg.loop_cfg.settle_ms),
                            });
                        }
                    }
                    Command::Reject { action, reason } => {
                        rejected += 1;
                        if let Some(p) = pending.remove(&action.0) {
                            context.record(HistoryEntry::new(
                                now(),
                                p.label,
                                format!("not executed: {reason:?}"),
                            ));
                        }
                    }
                    Command::Verdict { action, verdict } => {
                        let cause = None;
                        rec.record(
                            now(),
                            Record::Verdict {
                                action,
                                verdict,
                                cause,
                            },
                        )?;
                        if let Some(p) = pending.remove(&action.0) {
                            context.record(HistoryEntry::new(now(), p.label, verdict.as_str()));
                        }
                    }
                    Command::Failure { action, cause } => {
                        rec.record(
                            now(),
                            Record::Note {
                                text: format!("failure of {action:?} attributed to {cause:?}"),
                            },
                        )?;
                    }
                    Command::Exclude { targets } => {
                        excluded = targets
                            .iter()
                            .filter_map(|t| match t {
                                Target::Mark { element } => Some(*element),
                                Target::Point { .. } => None,
                            })
                            .collect();
                    }
                    Command::Escalate { rung } => {
                        rec.record(
                            now(),
                            Record::Interlock {
                                interlock: "escalate".into(),
                                detail: format!("{rung:?}"),
                            },
                        )?;
                        match rung {
                            Rung::Research => {
                                // Look it up on the research thread (the result comes back as an event); with
                                // no backend the rung reports that and the ladder moves on (it never fakes an
                                // answer).
                                let st = state.status();
                                let mut inferences: Vec<String> = Vec::new();
                                if let Some(d) = st.subgoal_description {
                                    inferences.push(format!("how to {d}"));
                                }
                                research.observe_screen(&last_observation);
                                if let Err(reason) = research.start(&cfg.goal, &inferences) {
                                    queue.extend(feed!(Event::RungFailed { rung, reason }));
                                }
                            }
                            Rung::SafeState => {
                                // Return to a safe state: release everything the plan holds.
                                if let Some(s) = state.active_subgoal() {
                                    let _ = to_reflex.send(ToReflex::CancelOwner(s));
                                }
                            }
                            _ => {}
                        }
                    }
                    Command::Stop { reason } => {
                        stop = Some(format!("{reason:?}"));
                    }
                    _ => {}
                }
            }
        }
        if stop.is_some() {
            break;
        }
        // Reflex reports.
        let mut fed_tick = false;
        while let Ok(m) = from_reflex.try_recv() {
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
                } => {
                    (reflex_generation, frame_health) = (generation, health);
                    held_now = held;
                    if !sensors.is_empty() {
                        sensor_line = sensors
                            .iter()
                            .map(|(n, v)| {
                                format!(
                                    "{n}={}",
                                    v.map(|v| format!("{v}")).unwrap_or_else(|| "undef".into())
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(" ");
                    }
                    let _ = late_us;
                    unfed_change = stronger_change(unfed_change, change);
                    // Feed the loop logic at ~10 Hz, and at once on a scene change or a goal change.
                    if tick % 6 == 0
                        || change == gamepilot_vision::FrameClass::Scene
                        || goal_met != last_goal_met
                    {
                        last_goal_met = goal_met;
                        fed_tick = true;
                        let ev = Event::ReflexTick {
                            tick,
                            change: change_of(std::mem::replace(
                                &mut unfed_change,
                                gamepilot_vision::FrameClass::Unchanged,
                            )),
                            signature,
                            held,
                            progress: cfg
                                .progress_sensor
                                .as_ref()
                                .and_then(|p| sensors.iter().find(|(n, _)| n == p).and_then(|(_, v)| *v)),
                            goal_met,
                            subgoal: subgoal.map(|(s, met)| SubgoalCheck { subgoal: s, met }),
                        };
                        queue.extend(feed!(ev));
                    }
                }
                FromReflex::Submitted {
                    tag,
                    result: Err(reason),
                } => {
                    queue.extend(feed!(Event::ActionFailed {
                        action: ActionId(tag),
                        reason: reason.to_string()
                    }));
                }
                FromReflex::Finished { tag, end } => {
                    // An accepted action that the executor stopped (blocked at execution time, cancelled by
                    // an interlock) failed in execution (FR-GND-008); a finished one awaits its evidence.
                    if pending.contains_key(&tag) && !end.is_finished() {
                        queue.extend(feed!(Event::ActionFailed {
                            action: ActionId(tag),
                            reason: end.to_string()
                        }));
                    }
                }
                FromReflex::Submitted { .. } => {}
                FromReflex::Evidence { tag, changed } => {
                    if let Some(p) = pending.get(&tag) {
                        let evidence = evidence_for(&p.expected, changed);
                        let facts = FailureFacts {
                            target_region_changed: changed,
                            evidence_undefined: changed.is_none(),
                            ..FailureFacts::default()
                        };
                        queue.extend(feed!(Event::Evidence {
                            action: ActionId(tag),
                            evidence,
                            facts
                        }));
                    }
                }
                FromReflex::Interlock { interlock, detail } => {
                    rec.record(
                        now(),
                        Record::Interlock {
                            interlock: interlock.name().into(),
                            detail: detail.clone(),
                        },
                    )?;
                    if interlock.stops_session() {
                        stopped_by.get_or_insert_with(|| format!("{}: {detail}", interlock.name()));
                        queue.extend(feed!(Event::UserStop));
                    }
                }
                FromReflex::CaptureFailed { problem, detail } => {
                    let detail = format!("{problem:?}: {detail}");
                    rec.record(
                        now(),
                        Record::Interlock {
                            interlock: "capture_failed".into(),
                            detail: detail.clone(),
                        },
                    )?;
                    stopped_by.get_or_insert_with(|| format!("capture_failed: {detail}"));
                    queue.extend(feed!(Event::UserStop));
                }
                FromReflex::WindowGone => queue.extend(feed!(Event::WindowClosed)),
                FromReflex::Stopped {
                    lateness_p50_us,
                    lateness_p99_us,
                    ticks,
                    events,
                } => {
                    reflex_stats = (lateness_p50_us, lateness_p99_us, ticks, events);
                    if stop.is_none() {
                        queue.extend(feed!(Event::UserStop));
                    }
                }
            }
        }
        let _ = fed_tick;
        while let Some(c) = cfg.degrade.as_ref().and_then(|r| r.try_recv().ok()) {
            rec.record(
                now(),
                Record::Note {
                    text: format!("gpu degrade: {}", serde_json::to_string(&c)?),
                },
            )?;
        }
        // A research result: untrusted excerpts and a note into the context, then the loop logic replans.
        if let Some(found) = research.poll() {
            let t = now();
            rec.record(
                t,
                Record::Research {
                    query: found.query.clone(),
                    results: found.log.clone(),
                },
            )?;
            for (source, retrieved, text) in &found.excerpts {
                if let Ok(e) = gamepilot_context::ResearchExcerpt::new(source, retrieved, text) {
                    context.add_research(e);
                }
            }
            let summary = if found.found() {
                rec.record(
                    t,
                    Record::Note {
                        text: format!("note: {}", found.note),
                    },
                )?;
                if let Err(e) = context.note(&found.note, t) {
                    context.record(HistoryEntry::new(
                        t,
                        format!("note: {}", found.note),
                        e.to_string(),
                    ));
                }
                found.note.clone()
            } else {
                format!("research on {:?} found nothing usable", found.query)
            };
            queue.extend(feed!(Event::ResearchDone {
                found: found.found(),
                summary
            }));
        }
        // Deliberation results (their threads never block this loop, NFR-LOOP-001).
        while let Ok(d) = from_delib.try_recv() {
            rec.record(
                now(),
                Record::Prompt {
                    cadence: "deliberative".into(),
                    call: d.pass,
                    prefix_bytes: 0,
                    messages: d.prompt_json.clone(),
                },
            )?;
            rec.record(
                now(),
                Record::Reply {
                    cadence: "deliberative".into(),
                    call: d.pass,
                    latency_ms: d.latency_ms,
                    tokens_in: 0,
                    tokens_out: 0,
                    text: d.reply_text.clone(),
                },
            )?;
            match d.plan {
                Ok(plan) => {
                    for s in &plan.subgoals {
                        subgoal_descriptions.insert(s.id, s.description.clone());
                    }
                    queue.extend(feed!(Event::DeliberationDone {
                        pass: d.pass,
                        plan: Some(plan)
                    }));
                }
                Err(reason) => queue.extend(feed!(Event::DeliberationFailed { pass: d.pass, reason })),
            }
        }
        // Tactical results.
        while let Ok(r) = from_tactical.try_recv() {
            tactical_in_flight = false;
            last_scene = r.observation.class.as_str().to_string();
            handle_tactical(
                &cfg,
                r,
                &mut rec,
                &mut context,
                &mut state,
                &mut pending,
                &mut next_action,
                &mut queue,
                &mut latencies,
                &mut cached_tokens,
                &mut prompt_tokens,
                &mut last_observation,
                &mut rejected,
                &mut held,
            )?;
        }
        // FR-SAFE-005: an action held for the user's confirmation. The reflex keeps ticking with the executor
        // paused (nothing reaches the game); the answer is polled here, never waited for.
        if let Some(h) = held.as_mut().filter(|h| !h.reflex_paused) {
            let _ = to_reflex.send(ToReflex::Hold(true));
            h.reflex_paused = true;
        }
        if let Some(out) = held.as_mut().and_then(|h| h.hold.poll()) {
            let _ = to_reflex.send(ToReflex::Hold(false));
            if let Some(h) = held.take() {
                release_held(
                    cfg.loop_cfg.settle_ms,
                    h,
                    out,
                    &mut rec,
                    &mut context,
                    &mut state,
                    &mut pending,
                    &mut next_action,
                    &mut queue,
                    &mut rejected,
                )?;
            }
        }
        // Start a tactical tick when the previous one is done and verified and a subgoal is active.
        if !tactical_in_flight
            && held.is_none()
            && queue.is_empty()
            && pending.is_empty()
            && state.active_subgoal().is_some()
            && last_tactical.elapsed() >= Duration::from_millis(cfg.tactical_interval_ms)
        {
            tactical_tick += 1;
            tactical_in_flight = true;
            last_tactical = Instant::now();
            // FR-GND-004: the loop logic picks the grounding path from confirmation rates per scene class;
            // the chosen path narrows this tick's tools (by mark, or by coordinate) or makes the tick
            // ground in two stages (FR-GND-005).
            let cmds = feed!(Event::GroundingRequest {
                request: tactical_tick,
                scene: last_scene.clone(),
                offered: cfg.grounding_paths.clone(),
            });
            let path = cmds.iter().find_map(|c| match c {
                Command::UsePath { path, .. } => *path,
                _ => None,
            });
            queue.extend(cmds);
            let tick_tools = tools_for_path(path);
            let _ = to_tactical.send(TacticalRequest {
                tick: tactical_tick,
                context: context.clone(),
                excluded_marks: excluded.clone(),
                with_image: cfg.vision,
                visual_pixels: cfg.tactical_pixels,
                tools: tick_tools,
                two_stage: path == Some(GroundingPath::TwoStage),
            });
        }
        if !cfg.quiet && held.is_none() && last_status.elapsed() >= Duration::from_millis(500) {
            let v = state.verdict_counts();
            let line = format!(
                "[{}] {:.0}s | frame {frame_health} | subgoal {} | deliberating {} | held {} | {} | verdicts {}/{}/{} | rung {:?} | tactical {} calls",
                if cfg.dry_run { "DRY RUN" } else { "ARMED" },
                t0.elapsed().as_secs_f64(),
                state.active_subgoal().map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                state.deliberating().is_some(),
                held_now,
                if sensor_line.is_empty() { "no sensors".to_string() } else { sensor_line.clone() },
                v.confirmed,
                v.refuted,
                v.inconclusive,
                state.rung(),
                latencies.len(),
            );
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
            last_status = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Stop: release everything, end the cadences, write the summary.
    if let Some(h) = held.take() {
        rejected += 1;
        rec.record(
            now(),
            Record::Interlock {
                interlock: "destructive_action".into(),
                detail: format!(
                    "{}: still held when the session stopped; not executed",
                    h.hold.label
                ),
            },
        )?;
    }
    cancel.cancel();
    let _ = to_reflex.send(ToReflex::Stop);
    drop(to_tactical);
    match reflex_thread.join() {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("the reflex thread panicked"),
    }
    while let Ok(m) = from_reflex.try_recv() {
        if let FromReflex::Stopped {
            lateness_p50_us,
            lateness_p99_us,
            ticks,
            events,
        } = m
        {
            reflex_stats = (lateness_p50_us, lateness_p99_us, ticks, events);
        }
    }
    let _ = tactical_thread.join();
    if tty && !cfg.quiet {
        eprintln!();
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let v = state.verdict_counts();
    let secs = t0.elapsed().as_secs_f64();
    let summary = Summary {
        stop_reason: {
            let reason = stop.unwrap_or_else(|| format!("{:?}", StopReason::UserStop));
            match stopped_by {
                Some(by) if reason == format!("{:?}", StopReason::UserStop) => format!("{reason} ({by})"),
                _ => reason,
            }
        },
        seconds: secs,
        actions_executed: state.actions_executed(),
        actions_per_s: state.actions_executed() as f64 / secs.max(0.001),
        confirmed: v.confirmed,
        refuted: v.refuted,
        inconclusive: v.inconclusive,
        rejected,
        failures: state
            .histogram()
            .entries()
            .into_iter()
            .map(|(c, n)| (format!("{c:?}"), n))
            .collect(),
        tactical_calls: latencies.len() as u64,
        tactical_latency_ms_p50: pct(&latencies, 0.5),
        tactical_latency_ms_p95: pct(&latencies, 0.95),
        cached_prompt_tokens: cached_tokens,
        prompt_tokens,
        deliberative_passes: passes,
        reflex_ticks: reflex_stats.2,
        reflex_lateness_us_p50: reflex_stats.0,
        reflex_lateness_us_p99: reflex_stats.1,
        input_events: reflex_stats.3,
        goal_met: last_goal_met,
        recording: cfg.record_dir.display().to_string(),
    };
    rec.finish(now(), &summary.stop_reason, serde_json::to_value(&summary)?)?;
    Ok(summary)
}

/// One tactical result: record it, ground the reply, check it for destructive patterns, propose it.
#[allow(clippy::too_many_arguments)]
fn handle_tactical(
    cfg: &AgentConfig,
    r: TacticalResult,
    rec: &mut Recorder,
    context: &mut Context,
    state: &mut LoopState,
    pending: &mut HashMap<u64, Pending>,
    next_action: &mut u64,
    queue: &mut Vec<Command>,
    latencies: &mut Vec<f64>,
    cached: &mut u64,
    prompt_tokens: &mut u64,
    last_observation: &mut String,
    rejected: &mut u64,
    held: &mut Option<HeldAction>,
) -> anyhow::Result<()> {
    let t = now();
    let view = r.frame.view();
    let frame_no = rec.frame(t, &view, false, r.observation.class.as_str())?;
    if let Some(m) = r.marked.as_ref() {
        if let Some(mf) = gamepilot_core::Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), t) {
            rec.frame(t, &mf.view(), true, r.observation.class.as_str())?;
        }
    }
    let signature = r
        .observation
        .elements
        .iter()
        .fold(r.observation.elements.len() as u64, |h, e| {
            h.wrapping_mul(31)
                .wrapping_add(((e.bbox.x as u64) << 16) ^ e.bbox.y as u64)
        });
    rec.record(
        t,
        Record::Observation {
            frame: frame_no,
            scene: r.observation.class.as_str().into(),
            signature,
            marks: serde_json::to_value(&r.observation.elements)?,
            text: serde_json::to_value(&r.observation.texts)?,
            sensors: serde_json::Value::Null,
        },
    )?;
    rec.record(
        t,
        Record::Prompt {
            cadence: "tactical".into(),
            call: r.tick,
            prefix_bytes: r.prefix_bytes,
            messages: serde_json::json!({"request": r.prompt_json, "schema": r.schema}),
        },
    )?;
    if let Some(rf) = r.refinement.as_ref() {
        record_refinement(rec, t, r.tick, rf)?;
    }
    *last_observation = r.observation_text.clone();
    context.end_tick(gamepilot_context::ObservationText::new(
        r.started,
        r.observation_text.clone(),
    ));
    let scene = r.observation.class.as_str().to_string();
    let ev = Event::Observation {
        scene: scene.clone(),
        signature,
    };
    let seq = rec.loop_event(t, &ev)?;
    let cmds = state.step(ev, t);
    rec.decisions(t, seq, &cmds)?;
    queue.extend(cmds);
    let (reply, text) = match r.reply {
        Ok(x) => x,
        Err(e) => {
            rec.record(
                t,
                Record::Reply {
                    cadence: "tactical".into(),
                    call: r.tick,
                    latency_ms: r.latency_ms,
                    tokens_in: 0,
                    tokens_out: 0,
                    text: format!("error: {e}"),
                },
            )?;
            context.record(HistoryEntry::new(t, "(model call)", format!("failed: {e}")));
            return Ok(());
        }
    };
    latencies.push(r.latency_ms);
    *cached += r.cached_tokens;
    *prompt_tokens += r.tokens_in;
    rec.record(
        t,
        Record::Reply {
            cadence: "tactical".into(),
            call: r.tick,
            latency_ms: r.latency_ms,
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            text: text.clone(),
        },
    )?;
    // Grounding: a mark becomes its box centre in capture space (FR-GND-001); coordinates stay as given
    // (FR-GND-002). The transform chain maps either to the screen inside the executor (INV-GND-002).
    let (action, mark, path, target) = match reply {
        TacticalReply::Note { text } => {
            let outcome = match context.note(&text, t) {
                Ok(o) => format!("{o:?}"),
                Err(e) => format!("refused: {e}"),
            };
            context.record(HistoryEntry::new(t, format!("note: {text}"), outcome));
            return Ok(());
        }
        TacticalReply::ClickMark { mark, button } => {
            // A two-stage tick's marks are the crop's, already in capture space (FR-GND-005).
            let marks_of = r
                .refinement
                .as_ref()
                .map(|rf| &rf.crop_view.in_capture)
                .unwrap_or(&r.observation);
            let Some(el) = marks_of.element(mark) else {
                context.record(HistoryEntry::new(
                    t,
                    format!("click_mark {mark}"),
                    "mark not present",
                ));
                return Ok(());
            };
            let c = el.bbox.center();
            (
                Action::Click {
                    x: c.x,
                    y: c.y,
                    button,
                },
                Some((mark, el.bbox)),
                Some(if r.refinement.is_some() {
                    GroundingPath::TwoStage
                } else {
                    GroundingPath::Mark
                }),
                Some(Target::Mark { element: mark }),
            )
        }
        TacticalReply::Act(a) => {
            let target = match &a {
                Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. } => Some(Target::Point {
                    point: Point::new(*x, *y),
                }),
                _ => None,
            };
            let path = target.map(|_| {
                if r.refinement.is_some() {
                    GroundingPath::TwoStage
                } else {
                    GroundingPath::Coordinate
                }
            });
            (a, None, path, target)
        }
    };
    let label = serde_json::to_string(&action).unwrap_or_default();
    // FR-SAFE-005: a confirmation dialogue around the target holds the action for the user.
    let point = match &action {
        Action::Click { x, y, .. } | Action::DoubleClick { x, y, .. } => Some(Point::new(*x, *y)),
        _ => None,
    };
    if point.is_some() {
        if let Some(m) = destructive::check(&r.observation.texts, point, r.frame.view().bounds(), 220) {
            rec.record(
                t,
                Record::Interlock {
                    interlock: "destructive_action".into(),
                    detail: format!("held: {label} near {:?} ({})", m.text, m.pattern),
                },
            )?;
            let opts = destructive::HoldOptions {
                display: cfg.display.clone(),
                window: cfg.window.id,
                attended: !cfg.unattended && std::io::stdin().is_terminal(),
                timeout: cfg.confirm_timeout,
            };
            *held = Some(HeldAction {
                hold: destructive::Hold::start(&opts, &label, m),
                action,
                mark,
                path,
                target,
                reflex_paused: false,
            });
            return Ok(());
        }
    }
    let _ = rejected;
    propose(
        cfg.loop_cfg.settle_ms,
        rec,
        state,
        pending,
        next_action,
        queue,
        t,
        (action, mark, path, target, label),
    )
}

/// The end of a hold (FR-SAFE-005): an allowed action is proposed; a rejected one is reported to the model
/// with the reason.
#[allow(clippy::too_many_arguments)]
fn release_held(
    settle_ms: u64,
    h: HeldAction,
    out: destructive::Outcome,
    rec: &mut Recorder,
    context: &mut Context,
    state: &mut LoopState,
    pending: &mut HashMap<u64, Pending>,
    next_action: &mut u64,
    queue: &mut Vec<Command>,
    rejected: &mut u64,
) -> anyhow::Result<()> {
    let t = now();
    let reason = h.hold.reason(&out);
    rec.record(
        t,
        Record::Interlock {
            interlock: "destructive_action".into(),
            detail: format!("{} after {} ms: {reason}", h.hold.label, out.waited.as_millis()),
        },
    )?;
    let label = h.hold.label.clone();
    if out.decision.allowed() {
        return propose(
            settle_ms,
            rec,
            state,
            pending,
            next_action,
            queue,
            t,
            (h.action, h.mark, h.path, h.target, label),
        );
    }
    *rejected += 1;
    context.record(HistoryEntry::new(t, label, reason));
    Ok(())
}

/// A grounded action, its mark, grounding path, target and label.
type Grounded = (
    Action,
    Option<(ElementId, Rect)>,
    Option<GroundingPath>,
    Option<Target>,
    String,
);

/// Propose a grounded action to the loop logic (which executes or rejects it).
#[allow(clippy::too_many_arguments)]
fn propose(
    settle_ms: u64,
    rec: &mut Recorder,
    state: &mut LoopState,
    pending: &mut HashMap<u64, Pending>,
    next_action: &mut u64,
    queue: &mut Vec<Command>,
    t: MonoTime,
    (action, mark, path, target, label): Grounded,
) -> anyhow::Result<()> {
    let (expected, region) = expectation(&action, mark);
    let id = *next_action;
    *next_action += 1;
    pending.insert(
        id,
        Pending {
            intention: Intention::new(action, SubgoalId(0)),
            target,
            path,
            expected: expected.clone(),
            region,
            label,
        },
    );
    let ev = Event::ActionProposed {
        action: ActionId(id),
        key: pending.get(&id).map(|p| p.label.clone()).unwrap_or_default(),
        target,
        path,
        expected,
        settle_ms: Some(settle_ms),
    };
    let seq = rec.loop_event(t, &ev)?;
    let cmds = state.step(ev, t);
    rec.decisions(t, seq, &cmds)?;
    queue.extend(cmds);
    let _: Option<Verdict> = None;
    let _ = MonoTime::ZERO;
    Ok(())
}

/// Record a two-stage tick's cheap pass and crop (FR-GND-005): the localising prompt and reply under the
/// cadence `tactical_localise`, and the marked crop as a marked frame.
fn record_refinement(
    rec: &mut Recorder,
    t: MonoTime,
    tick: u64,
    rf: &tactical::Refinement,
) -> anyhow::Result<()> {
    if let Some(m) = rf.marked_crop.as_ref() {
        if let Some(mf) = gamepilot_core::Frame::from_rgba(m.width(), m.height(), m.as_raw().clone(), t) {
            rec.frame(t, &mf.view(), true, "crop")?;
        }
    }
    rec.record(
        t,
        Record::Prompt {
            cadence: "tactical_localise".into(),
            call: tick,
            prefix_bytes: 0,
            messages: serde_json::json!({
                "request": rf.localise_prompt_json,
                "schema": rf.localise_schema,
                "cheap_size": rf.cheap_size,
                "crop": rf.crop,
                "expensive_size": rf.expensive_size,
                "crop_marks": rf.crop_view.in_capture.elements,
            }),
        },
    )?;
    let timings = rf.localise_timings.as_ref();
    rec.record(
        t,
        Record::Reply {
            cadence: "tactical_localise".into(),
            call: tick,
            latency_ms: timings.map(|t| t.wall_ms).unwrap_or(0.0),
            tokens_in: timings.and_then(|t| t.prompt_tokens).unwrap_or(0),
            tokens_out: timings.and_then(|t| t.completion_tokens).unwrap_or(0),
            text: format!(
                "{} -> point [{}, {}] of {}x{}, crop {:?}",
                rf.localise_reply,
                rf.cheap_point.x,
                rf.cheap_point.y,
                rf.cheap_size.w,
                rf.cheap_size.h,
                rf.crop
            ),
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_vision::FrameClass::*;

    #[test]
    fn a_change_on_an_unfed_tick_is_not_lost() {
        // FR-LOOP-005: the loop logic is fed every 6th reflex tick; the strongest class in between is what
        // it sees, so a moving screen never reads as stasis.
        let ticks = [Unchanged, Local, Unchanged, Motion, Local, Unchanged];
        let fed = ticks.iter().fold(Unchanged, |acc, c| stronger_change(acc, *c));
        assert_eq!(fed, Motion);
        assert_eq!(stronger_change(Scene, Local), Scene);
        assert_eq!(stronger_change(Unchanged, Unchanged), Unchanged);
        assert!(matches!(change_of(fed), FrameChange::Motion));
    }
}
