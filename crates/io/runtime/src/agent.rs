//! The agent: one session of `gamepilot run` and `gamepilot demo` — the three cadences on their own threads
//! (FR-LOOP-001) around the session core (`gamepilot_session::Session::step`), which makes every
//! decision. The loop here only receives what the threads report, steps the session with it, carries out
//! the typed effects and records both (INV-CTX-002, output only), so `gamepilot replay` re-derives every
//! decision from the recording.
//!
//! Every thread reports on one bounded channel ([`Inbox`]); the loop blocks on it (`recv_timeout`) and,
//! on each wake, also polls the few sources that are not threads (stop signals, the research worker, the
//! GPU-memory ladder, the destructive hold's prompt).
//!
//! reflex thread ── Inbox::Reflex ──▶ loop ◀── Inbox::Tactical / Deliberation / Ended
//!       ▲                             │  Session::step(input, now) → effects
//!       └──── ReflexCommand ──────────┘

use crate::deliberative::{self, DeliberationRequest, DeliberationResult, Postconditions};
use crate::reflex::{self, ReflexSetup};
use crate::session_inputs::host_restart;
use crate::stop_signals::{StopSignal, StopSignals};
use crate::tactical::{self, TacticalReport, TacticalRequest, TacticalSetup};
use crate::worker::{
    join_within, panic_text, spawn_reporting, yield_cpu_to_reflex, Inbox, WorkerOutcome, INBOX,
    REFLEX_COMMANDS, TACTICAL_JOBS,
};
use crate::{destructive, now, say_err, session_records, GuardianHandle, RuntimeError};
use gamepilot_core::{Chord, MonoTime, Worker};
use gamepilot_executor::ExecutorConfig;
use gamepilot_model::{CancelToken, HostClient};
use gamepilot_recording::{Record, Recorder, SessionStart};
use gamepilot_sensor::{Expression, Program};
use gamepilot_session::{
    ConfirmationAnswer, Effect, ExternalStop, Input, ReflexCommand, Session, SessionConfig, SessionRecord,
    SessionStop,
};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// Everything a session needs; every limit comes from the user (INV-SAFE-001).
pub struct AgentConfig {
    /// What the session decides by (the goal, the loop's limits, the grounding paths, the visual
    /// budgets, the model's coordinates, the context size, the progress sensor, `move_to`'s keys); its
    /// postconditions and camera calibration are filled in from the sensors and the reflex's extras.
    pub session: SessionConfig,
    pub display: Option<String>,
    pub window: gamepilot_x11::WindowInfo,
    pub window_label: String,
    pub goal_check: Option<String>,
    pub sensors_src: Option<String>,
    pub client: HostClient,
    /// The deliberative cadence's host: its own when gamepilot started the hosts, else `client`'s.
    pub deliberative_client: HostClient,
    pub model_name: String,
    pub exec: ExecutorConfig,
    pub panic: Chord,
    pub stale_ms: u64,
    pub hz: u32,
    pub dry_run: bool,
    pub record_dir: PathBuf,
    /// No one is at the terminal: destructive actions are asked about on the overlay only (FR-SAFE-005).
    pub unattended: bool,
    /// How long a destructive action is held for the user's answer (overlay, or terminal when attended)
    /// before it is rejected; zero rejects at once (FR-SAFE-005).
    pub confirm_timeout: Duration,
    pub quiet: bool,
    /// The ladder's research rung: its SearxNG endpoint (`None`: unavailable) and the user's bounds.
    pub research: gamepilot_research::ResearchConfig,
    /// Templates, camera calibration and session notes for the reflex.
    pub reflex: reflex::ReflexExtras,
    /// Degrade commands from the GPU-memory watch (FR-MODEL-004), stepped into the session.
    pub degrade: Option<Receiver<gamepilot_model::DegradeCommand>>,
    /// The hosts gamepilot started, reshaped by the degrade ladder's steps (FR-MODEL-004).
    pub hosts: gamepilot_model::HostKeeper,
    /// SIGINT / SIGTERM / SIGHUP as a clean stop; `None`: the process's default dispositions.
    pub stop_signals: Option<StopSignals>,
}

/// What a session did, for the summary and the report: the session's own numbers as it counted them
/// (written to the recording as they are), with what only the runtime knows; the printed figures are
/// views of them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// Why the session ended, typed (`stop_reason` is the same in words).
    pub stop: SessionStop,
    pub stop_reason: String,
    pub seconds: f64,
    pub recording: String,
    /// The stop signal that ended the session (its number), if one did: `run` exits 128 + it.
    pub exit_signal: Option<i32>,
    pub numbers: gamepilot_session::SessionNumbers,
}

impl Summary {
    pub fn actions_per_s(&self) -> f64 {
        self.numbers.actions.actions_executed as f64 / self.seconds.max(0.001)
    }

    /// Tactical call latency, p50 and p95 in ms.
    pub fn tactical_latency_ms(&self) -> (f64, f64) {
        let sorted = sorted(&self.numbers.calls.tactical_latency_ms);
        (pct(&sorted, 0.5), pct(&sorted, 0.95))
    }

    /// New screen → first action: how many, p50 and p95 in ms.
    pub fn first_action_ms(&self) -> (usize, f64, f64) {
        let sorted = sorted(&self.numbers.calls.first_action_ms);
        (sorted.len(), pct(&sorted, 0.5), pct(&sorted, 0.95))
    }

    /// The escalation ladder's climbs, oldest first ("retry at 41 s").
    pub fn ladder(&self) -> Vec<String> {
        self.numbers
            .escalations
            .iter()
            .map(|(r, t)| format!("{} at {t:.0} s", r.as_str()))
            .collect()
    }
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The session's sensors: the user's file plus the goal check; the postconditions a plan may use.
fn compile_sensors(
    cfg: &AgentConfig,
) -> Result<(Program, Option<Expression>, Postconditions, Vec<Expression>), RuntimeError> {
    compile_user_sensors(cfg.sensors_src.as_deref(), cfg.goal_check.as_deref())
}

/// The user's sensor file and goal check compiled (`run` calls it before anything starts, so a flag
/// that cannot work is refused in milliseconds, with no model host loaded): the program, the goal
/// check, and the postconditions a plan may use (the goal check, then each boolean sensor).
pub fn compile_user_sensors(
    sensors_src: Option<&str>,
    goal_check: Option<&str>,
) -> Result<(Program, Option<Expression>, Postconditions, Vec<Expression>), RuntimeError> {
    let src = sensors_src.unwrap_or_default();
    let program = gamepilot_sensor::compile(src).map_err(|e| {
        RuntimeError::Setup(format!(
            "sensor file has errors:\n{}",
            gamepilot_sensor::render_all(e.diagnostics(), "sensors", src)
        ))
    })?;
    let goal = match goal_check {
        Some(g) => Some(program.compile_expression(g).map_err(|e| {
            RuntimeError::Setup(format!(
                "--goal-check is not a valid sensor expression:\n{}",
                gamepilot_sensor::render_all(e.diagnostics(), "--goal-check", g)
            ))
        })?),
        None => None,
    };
    let mut sources: Vec<String> = goal_check.iter().map(|g| g.to_string()).collect();
    for def in program.sensors() {
        if def.ty == gamepilot_sensor::Type::Bool && !sources.contains(&def.name) {
            sources.push(def.name.clone());
        }
    }
    let compiled = sources
        .iter()
        .map(|s| {
            program
                .compile_expression(s)
                .map_err(|e| RuntimeError::Setup(format!("postcondition {s:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((program, goal, Postconditions { sources }, compiled))
}

/// The session's configuration from the agent's: with no `--goal-check`, the agent declares its own
/// checks beside the user's sensors (sensor-expressions.md, "Declaration and lifetime").
fn session_config(cfg: &AgentConfig, post: &Postconditions) -> SessionConfig {
    let declare = cfg
        .goal_check
        .is_none()
        .then(|| gamepilot_session::declare::DeclareConfig {
            sensor_source: cfg.sensors_src.clone().unwrap_or_default(),
            declared_size: gamepilot_core::Size::new(cfg.window.geometry.w, cfg.window.geometry.h),
            goal_check_given: false,
        });
    SessionConfig {
        postconditions: post.sources.clone(),
        camera_calibrated: cfg.reflex.camera.is_some(),
        declare,
        ..cfg.session.clone()
    }
}

/// The loop thread's ends of the channels and the IO it carries out for the session.
struct Wiring<'a> {
    cfg: &'a AgentConfig,
    rec: Recorder,
    to_reflex: SyncSender<ReflexCommand>,
    to_tactical: SyncSender<TacticalRequest>,
    /// The inbox's sender, for the deliberative passes' threads.
    inbox: SyncSender<Inbox>,
    research: gamepilot_research::wiring::ResearchWiring,
    /// The destructive-action hold being put to the user (FR-SAFE-005).
    hold: Option<(u64, destructive::Hold)>,
    post: Postconditions,
    cancel: CancelToken,
    /// The latest marked screenshot, for the deliberative pass's image.
    last_marked: Option<gamepilot_core::Frame>,
}

impl Wiring<'_> {
    /// Step the session with one input, record both, carry the effects out; `Some` when it stopped.
    fn step(&mut self, session: &mut Session, input: Input) -> Result<Option<SessionStop>, RuntimeError> {
        let t = now();
        let seq = self.rec.session_input(t, &input)?;
        let effects = session.step(input, t);
        self.rec.session_effects(t, seq, &effects)?;
        let mut stop = None;
        let mut follow = Vec::new();
        for e in effects {
            match e {
                Effect::Stop(s) => stop = Some(s),
                other => follow.extend(self.carry_out(other, t)?),
            }
        }
        // Inputs the wiring itself produced while carrying out (a research that could not start).
        for i in follow {
            if let Some(s) = self.step(session, i)? {
                stop.get_or_insert(s);
            }
        }
        Ok(stop)
    }

    fn carry_out(&mut self, effect: Effect, t: MonoTime) -> Result<Vec<Input>, RuntimeError> {
        match effect {
            Effect::Reflex(msg) => {
                // A closed reflex channel is reported by the reflex's own end (ReflexStopped); a full one
                // means the reflex stopped reading.
                if let Err(TrySendError::Full(_)) = self.to_reflex.try_send(msg) {
                    return Ok(vec![worker_stuck(Worker::Reflex, REFLEX_COMMANDS)]);
                }
            }
            Effect::StartTactical(job) => return Ok(self.ask_tactical(TacticalRequest::Perceive(job))),
            Effect::CallModel(call) => return Ok(self.ask_tactical(TacticalRequest::Call(call))),
            Effect::PerceiveCrop(crop) => return Ok(self.ask_tactical(TacticalRequest::Crop(crop))),
            Effect::StartDeliberation(job) => {
                let req = DeliberationRequest {
                    // FR-MODEL-002: the deliberative budget, the image as the last content part.
                    image: job.image.as_ref().and_then(|wanted| {
                        self.last_marked.as_ref().and_then(|f| {
                            gamepilot_model::budget::encode_for_budget(&f.view(), wanted.pixels).ok()
                        })
                    }),
                    job,
                };
                let (client, model, post, tx, cancel) = (
                    self.cfg.deliberative_client.clone(),
                    self.cfg.model_name.clone(),
                    self.post.clone(),
                    self.inbox.clone(),
                    self.cancel.clone(),
                );
                std::thread::Builder::new()
                    .name("deliberative".into())
                    .spawn(move || {
                        yield_cpu_to_reflex();
                        // A pass that panics is a failed pass (the session replans on its triggers):
                        // restarting deliberation is safe, it holds no input.
                        let (pass, started) = (req.job.pass, Instant::now());
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            deliberative::deliberate(&client, &model, &post, &req, &cancel)
                        }))
                        .unwrap_or_else(|p| deliberative::DeliberationResult {
                            pass,
                            plan: Err(format!(
                                "the deliberative pass panicked: {}",
                                panic_text(p.as_ref())
                            )),
                            research: None,
                            prompt_json: serde_json::Value::Null,
                            reply_text: String::new(),
                            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                            value: None,
                            first_id: req.job.first_id,
                            calls: Vec::new(),
                        });
                        // The loop holds the inbox until the session ends; a pass finishing after that has
                        // nobody left to tell.
                        let _ = tx.send(Inbox::Deliberation(Box::new(result)));
                    })
                    .map_err(|e| RuntimeError::io("spawning a deliberative pass's thread", e))?;
            }
            Effect::WarmUp(prompt) => {
                let (client, model, tx, cancel) = (
                    self.cfg.client.clone(),
                    self.cfg.model_name.clone(),
                    self.inbox.clone(),
                    self.cancel.clone(),
                );
                std::thread::Builder::new()
                    .name("warm-up".into())
                    .spawn(move || {
                        yield_cpu_to_reflex();
                        let chat = gamepilot_model::ChatRequest::from_prompt(&model, &prompt, 1);
                        // A warm-up that panics is said, never silent; nothing waits for it.
                        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            client.chat(&chat, &cancel)
                        }));
                        let text = match answer {
                            Err(p) => format!("tactical host warm-up panicked: {}", panic_text(p.as_ref())),
                            Ok(Ok(r)) => format!(
                                "tactical host warmed: {} prompt tokens evaluated in {:.0} ms",
                                r.timings
                                    .prompt_evaluated
                                    .or(r.timings.prompt_tokens)
                                    .unwrap_or(0),
                                r.timings.wall_ms
                            ),
                            Ok(Err(e)) => format!("tactical host warm-up failed (nothing waits for it): {e}"),
                        };
                        let _ = tx.send(Inbox::Note(text));
                    })
                    .map_err(|e| RuntimeError::io("spawning the tactical host's warm-up", e))?;
            }
            Effect::StartResearch(job) => {
                self.research.observe_screen(&job.screen);
                let ask = gamepilot_research::wiring::Ask {
                    goal: job.goal,
                    question: job.question,
                    inferences: job.inferences,
                    deep: job.deep,
                };
                match self.research.start(&ask) {
                    Ok(from) => {
                        let what = if ask.deep { "deep research" } else { "research" };
                        self.rec.record(
                            now(),
                            Record::Note {
                                text: format!("{what} started, asking {from}"),
                            },
                        )?;
                    }
                    Err(reason) => {
                        return Ok(vec![Input::Research(gamepilot_session::ResearchFindings {
                            query: String::new(),
                            excerpts: Vec::new(),
                            note: reason,
                            found: false,
                        })]);
                    }
                }
            }
            Effect::AskConfirmation(job) => {
                let opts = destructive::HoldOptions {
                    display: self.cfg.display.clone(),
                    window: self.cfg.window.id,
                    attended: !self.cfg.unattended && std::io::stdin().is_terminal(),
                    timeout: self.cfg.confirm_timeout,
                };
                let found = destructive::DestructiveMatch {
                    pattern: job.pattern,
                    text: job.text,
                };
                self.hold = Some((job.hold, destructive::Hold::start(&opts, &job.label, found)));
            }
            Effect::Record(r) => self.record(t, r)?,
            Effect::Stop(_) => {}
        }
        Ok(Vec::new())
    }

    /// Hand the tactical thread a request; a full queue means it stopped reading, a closed one that it
    /// ended (its own end report names why).
    fn ask_tactical(&mut self, request: TacticalRequest) -> Vec<Input> {
        match self.to_tactical.try_send(request) {
            Ok(()) => Vec::new(),
            Err(TrySendError::Full(_)) => vec![worker_stuck(Worker::Tactical, TACTICAL_JOBS)],
            Err(TrySendError::Disconnected(_)) => vec![Input::Stop {
                reason: ExternalStop::WorkerDied {
                    worker: Worker::Tactical,
                    detail: "its request channel is closed".into(),
                },
            }],
        }
    }

    /// Write one of the session's records.
    fn record(&mut self, t: MonoTime, r: SessionRecord) -> Result<(), RuntimeError> {
        session_records::record_session(&mut self.rec, t, r)
    }

    /// Record what a tactical tick saw and sent (frames, observation, prompt, reply); the session gets
    /// the typed outcome.
    fn record_tactical(&mut self, r: &TacticalReport) -> Result<(), RuntimeError> {
        if let Some(marked) = session_records::record_tactical(&mut self.rec, now(), r)? {
            self.last_marked = Some(marked);
        }
        Ok(())
    }

    /// Record a deliberative pass's prompt and reply.
    fn record_deliberation(&mut self, d: &DeliberationResult) -> Result<(), RuntimeError> {
        session_records::record_deliberation(&mut self.rec, now(), d)
    }
}

/// The stop for a worker whose bounded queue is full: it is not reading.
fn worker_stuck(worker: Worker, bound: usize) -> Input {
    Input::Stop {
        reason: ExternalStop::WorkerDied {
            worker,
            detail: format!("its queue of {bound} is full: it stopped reading"),
        },
    }
}

/// How long the loop waits for a thread's report before it polls the sources that are not threads
/// (signals, research, the GPU-memory ladder, the destructive hold's prompt) and the status line.
const POLL: Duration = Duration::from_millis(50);

/// The session's inputs a thread's report carries; tactical and deliberative results are recorded first.
fn receive(
    w: &mut Wiring<'_>,
    m: Inbox,
    reflex_done: &mut bool,
    inputs: &mut Vec<Input>,
) -> Result<(), RuntimeError> {
    match m {
        Inbox::Reflex(i) => {
            *reflex_done |= matches!(i, Input::ReflexStopped(_));
            inputs.push(i);
        }
        Inbox::Tactical(r) => {
            w.record_tactical(&r)?;
            inputs.push(r.input);
        }
        Inbox::Note(text) => {
            w.rec.record(now(), Record::Note { text })?;
        }
        Inbox::Deliberation(d) => {
            w.record_deliberation(&d)?;
            inputs.push(Input::Plan(gamepilot_session::PlanOutcome {
                reply: d.value,
                first_id: d.first_id,
                pass: d.pass,
                plan: d.plan,
                latency_ms: d.latency_ms,
                research: d.research,
            }));
        }
        // A worker that ended before the session did stops it, named; the reflex's clean end follows its
        // own stop report, which the session has already seen.
        Inbox::Ended(end) => {
            if !(end.worker == Worker::Reflex && end.outcome == WorkerOutcome::Finished) {
                inputs.push(Input::Stop {
                    reason: ExternalStop::WorkerDied {
                        worker: end.worker,
                        detail: end.detail(),
                    },
                });
            }
        }
    }
    Ok(())
}

/// Run one session to a stop condition (FR-LOOP-008).
pub fn run_agent(mut cfg: AgentConfig) -> Result<Summary, RuntimeError> {
    let t0 = Instant::now();
    let mut hosts = std::mem::replace(&mut cfg.hosts, gamepilot_model::HostKeeper::new(Vec::new()));
    let (program, goal_expr, post, post_exprs) = compile_sensors(&cfg)?;
    let session_cfg = session_config(&cfg, &post);
    let start = now();
    let mut session = Session::new(session_cfg.clone(), start)?;
    let mut rec = Recorder::create(
        &cfg.record_dir,
        SessionStart {
            schema_version: gamepilot_recording::format::SCHEMA_VERSION,
            tool: format!("gamepilot {}", env!("CARGO_PKG_VERSION")),
            goal: cfg.session.goal.clone(),
            window: cfg.window_label.clone(),
            started_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            config: serde_json::json!({"session": session_cfg, "start_us": start.0}),
        },
    )
    .map_err(|e| {
        RuntimeError::Setup(format!(
            "creating the recording in {}: {e}",
            cfg.record_dir.display()
        ))
    })?;

    // The guardian first: nothing is armed without it (FR-SAFE-003).
    let guardian = GuardianHandle::spawn(cfg.display.as_deref(), &cfg.panic, cfg.stale_ms)?;
    // Every thread reports here (no thread dies silently: each one's end arrives as `Inbox::Ended`).
    let (inbox_tx, inbox) = mpsc::sync_channel::<Inbox>(INBOX);
    let (to_reflex, reflex_rx) = mpsc::sync_channel(REFLEX_COMMANDS);
    let setup = ReflexSetup {
        display: cfg.display.clone(),
        window: cfg.window.id,
        exec: cfg.exec.clone(),
        dry_run: cfg.dry_run,
        hz: cfg.hz,
        program: Some(program.clone()),
        declared: gamepilot_core::Size::new(cfg.window.geometry.w, cfg.window.geometry.h),
        goal: goal_expr,
        postconditions: post_exprs,
        panic: cfg.panic.clone(),
        extras: cfg.reflex.clone(),
    };
    for text in &cfg.reflex.notes {
        rec.record(now(), Record::Note { text: text.clone() })?;
    }
    let reflex_tx = inbox_tx.clone();
    let reflex_thread = spawn_reporting(Worker::Reflex, inbox_tx.clone(), move || {
        reflex::run(setup, guardian, reflex_rx, reflex_tx)
    })?;
    // The loop composes prompts and records on this thread; the reflex, started above at the normal
    // priority, must not wait behind it (FR-LOOP-002). Threads started from here on inherit the nice.
    yield_cpu_to_reflex();

    let cancel = CancelToken::new();
    let (to_tactical, tactical_rx) = mpsc::sync_channel::<TacticalRequest>(TACTICAL_JOBS);
    let tsetup = TacticalSetup {
        templates: cfg.reflex.templates.clone(),
        display: cfg.display.clone(),
        window: cfg.window.id,
        client: cfg.client.clone(),
        model_name: cfg.model_name.clone(),
        max_tokens: 96,
    };
    let (tcancel, tactical_tx) = (cancel.clone(), inbox_tx.clone());
    let tactical_thread = spawn_reporting(Worker::Tactical, inbox_tx.clone(), move || {
        yield_cpu_to_reflex();
        tactical::run(tsetup, tactical_rx, tactical_tx, tcancel)
    })?;
    let within = Duration::from_millis(cfg.session.loop_cfg.rung_timeout_ms.saturating_sub(2_000));
    if cfg.research.search.is_some() && cfg.research.limits.wall_clock > within {
        say_err!(
            "research: bounded to {:.1} s, the research rung's time less 2 s (asked {:.1} s)",
            within.as_secs_f64(),
            cfg.research.limits.wall_clock.as_secs_f64()
        );
    }
    let research = gamepilot_research::wiring::ResearchWiring::new(cfg.research.clone(), within)
        .with_synthesizer(std::sync::Arc::new(crate::synthesis::HostSynthesizer::new(
            cfg.deliberative_client.clone(),
            &cfg.model_name,
            cancel.clone(),
        )));
    let mut w = Wiring {
        cfg: &cfg,
        rec,
        to_reflex,
        to_tactical,
        inbox: inbox_tx,
        research,
        hold: None,
        post,
        cancel: cancel.clone(),
        last_marked: None,
    };
    let tty = std::io::stderr().is_terminal();
    let mut last_status = Instant::now();
    let mut reflex_done = false;

    let mut stop = w.step(&mut session, Input::Start)?;
    let mut by_signal: Option<StopSignal> = None;
    let mut resumes_seen = 0;
    while stop.is_none() {
        let mut inputs = Vec::new();
        // Block for the next report (NFR-LOOP-001: the threads never wait on this loop), then take
        // whatever else has queued meanwhile. The loop holds a sender, so the inbox never reads as closed.
        match inbox.recv_timeout(POLL) {
            Ok(m) => receive(&mut w, m, &mut reflex_done, &mut inputs)?,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        while let Ok(m) = inbox.try_recv() {
            receive(&mut w, m, &mut reflex_done, &mut inputs)?;
        }
        // FR-SAFE-002: SIGUSR1 is the user's resume after their input paused the session.
        let resumes = cfg.stop_signals.as_ref().map_or(0, StopSignals::resume_requests);
        if resumes != std::mem::replace(&mut resumes_seen, resumes) {
            inputs.push(Input::Resume);
        }
        if let Some(sig) = cfg.stop_signals.as_ref().and_then(StopSignals::received) {
            by_signal = Some(sig);
            inputs.push(Input::Stop {
                reason: ExternalStop::Signal {
                    name: sig.name().into(),
                },
            });
        }
        if let Some(found) = w.research.poll() {
            w.rec.record(
                now(),
                Record::Research {
                    query: found.query.clone(),
                    results: found.log.clone(),
                },
            )?;
            inputs.push(Input::Research(gamepilot_session::ResearchFindings {
                found: found.found(),
                query: found.query,
                excerpts: found.excerpts,
                note: found.note,
            }));
        }
        let mut notices = Vec::new();
        while let Some(c) = cfg.degrade.as_ref().and_then(|r| r.try_recv().ok()) {
            inputs.push(Input::Degrade(c));
            notices.extend(hosts.apply(&c));
        }
        notices.extend(hosts.poll());
        for n in notices {
            say_err!("{}", n.describe());
            inputs.push(Input::HostRestart(host_restart(&n)));
        }
        // FR-SAFE-005: the hold's answer is polled here, never waited for.
        if let Some(out) = w.hold.as_mut().and_then(|(_, h)| h.poll()) {
            if let Some((id, h)) = w.hold.take() {
                inputs.push(Input::Confirmation(ConfirmationAnswer {
                    hold: id,
                    allowed: out.decision.allowed(),
                    reason: h.reason(&out),
                    waited_ms: out.waited.as_millis() as u64,
                }));
            }
        }
        for input in inputs {
            if let Some(s) = w.step(&mut session, input)? {
                stop = Some(s);
                break;
            }
        }
        if !cfg.quiet && w.hold.is_none() && last_status.elapsed() >= Duration::from_millis(500) {
            let line = session
                .numbers()
                .status_line(cfg.dry_run, t0.elapsed().as_secs_f64());
            if tty {
                crate::console::err(&format!("\r\x1b[2K{line}"));
            } else {
                say_err!("{line}");
            }
            last_status = Instant::now();
        }
    }
    let stop = stop.unwrap_or(SessionStop::External {
        detail: "the loop ended without a stop".into(),
    });
    // Stop: release everything, end the cadences, write the summary.
    cancel.cancel();
    // A disconnected command channel is the reflex's stop; a reflex that never returns (a hung call) is
    // left after a bound, and the guardian releases what it holds as the process exits.
    drop(std::mem::replace(&mut w.to_reflex, mpsc::sync_channel(1).0));
    drop(std::mem::replace(&mut w.to_tactical, mpsc::sync_channel(1).0));
    let reflex_joined = join_within(reflex_thread, Duration::from_secs(2)).is_some_and(|r| r.is_ok());
    if !reflex_done {
        // The reflex's own figures (ticks, lateness) arrive as its last report.
        while let Ok(m) = inbox.try_recv() {
            if let Inbox::Reflex(i @ Input::ReflexStopped(_)) = m {
                session.step(i, now());
            }
        }
    }
    // The tactical thread may be inside OCR or a model call: it is cancelled; after a signal it is given
    // a bounded time (the stop must finish within 2 s) and a thread still busy then ends with
    // the process; otherwise it is waited for.
    let wait = if by_signal.is_some() { 1_500 } else { 60_000 };
    let tactical_deadline = Instant::now() + Duration::from_millis(wait);
    while !tactical_thread.is_finished() && Instant::now() < tactical_deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if tactical_thread.is_finished() {
        let _ = tactical_thread.join();
    }
    if tty && !cfg.quiet {
        say_err!();
    }
    let summary = summarise(&session, stop, t0.elapsed().as_secs_f64(), &cfg, by_signal);
    let summary_json = serde_json::to_value(&summary)
        .map_err(|e| RuntimeError::Setup(format!("the session's summary as JSON: {e}")))?;
    w.rec.finish(now(), &summary.stop_reason, summary_json)?;
    if !reflex_joined {
        return Err(RuntimeError::Stuck(
            "the reflex thread did not stop within 2 s; the guardian releases".into(),
        ));
    }
    Ok(summary)
}

/// The session's figures for the summary line, the recording's end and the report.
fn summarise(
    session: &Session,
    stop: SessionStop,
    secs: f64,
    cfg: &AgentConfig,
    by_signal: Option<StopSignal>,
) -> Summary {
    Summary {
        stop_reason: stop.to_string(),
        stop,
        seconds: secs,
        recording: cfg.record_dir.display().to_string(),
        exit_signal: by_signal.map(|s| s.0),
        numbers: session.numbers().clone(),
    }
}
