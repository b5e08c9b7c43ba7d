//! The ADR-0035 executor: validation on submit (FR-ACT-006) and the five-step tick — halt flag →
//! foreground guard → advance sustained actions → reconcile desired vs held into the minimal event set →
//! emit and publish the held set. Pure: time, focus and geometry come in as values; events go out.

use crate::config::{normalize, ExecutorConfig};
use crate::held::{ActionId, Held, HeldInput, HeldRecord};
use crate::motion::{CameraStepper, PointerPath, Timing};
use gamepilot_core::action::{Action, InputEvent, Intention};
use gamepilot_core::{Chord, Keysym, MonoTime, Point, SubgoalId, TransformChain};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::time::Duration;

/// Why an action was refused before any input (FR-ACT-006). Reported back to the model as structured data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RejectReason {
    UnknownKey {
        key: String,
    },
    DeniedChord {
        chord: String,
    },
    Conflict {
        resource: String,
        with: ActionId,
        owner: SubgoalId,
    },
    OutsideWindow {
        x: i32,
        y: i32,
        width: u32,
        height: u32,
    },
    NoWindowGeometry,
    NotForeground,
    Halted,
    Paused,
    ActionRateExceeded {
        limit_per_s: u32,
    },
    HoldTooLong {
        requested_ms: u64,
        max_ms: u64,
    },
    WaitTooLong {
        requested_ms: u64,
        max_ms: u64,
    },
    ZeroDuration,
    CameraTooFast {
        step_per_tick: i32,
        max_step: i32,
    },
    EmptyText,
    TextTooLong {
        len: usize,
        max: usize,
    },
    UnsupportedChar {
        ch: char,
    },
    NothingToDo,
    /// A pointer action grounded in an older transform chain than the current one: the window moved,
    /// resized or changed scale since, so its point would land elsewhere (FR-PERC-002, INV-GND-002).
    StaleGeneration {
        grounded: u64,
        current: u64,
    },
    /// A camera turn in degrees with no camera calibration this session (FR-ACT-004).
    CameraNotCalibrated,
    /// The caller named the action with the id of one still running.
    DuplicateId {
        id: ActionId,
    },
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RejectReason::*;
        match self {
            UnknownKey { key } => write!(f, "unknown key {key:?}"),
            DeniedChord { chord } => write!(f, "{chord} is on the denied list"),
            Conflict { resource, with, owner } => {
                write!(f, "contends for {resource} with action {with} of {owner}")
            }
            OutsideWindow { x, y, width, height } => {
                write!(f, "({x}, {y}) lies outside the {width}x{height} window")
            }
            NoWindowGeometry => write!(f, "the target window's geometry is unknown"),
            NotForeground => write!(f, "the target window is not in the foreground"),
            Halted => write!(f, "the executor is halted"),
            Paused => write!(f, "the executor is paused (user input); the user must resume"),
            ActionRateExceeded { limit_per_s } => write!(f, "action-rate budget of {limit_per_s}/s exceeded"),
            HoldTooLong { requested_ms, max_ms } => {
                write!(f, "hold of {requested_ms} ms exceeds the max hold of {max_ms} ms")
            }
            WaitTooLong { requested_ms, max_ms } => write!(f, "wait of {requested_ms} ms exceeds {max_ms} ms"),
            ZeroDuration => write!(f, "duration must be longer than zero"),
            CameraTooFast { step_per_tick, max_step } => write!(
                f,
                "camera turn needs {step_per_tick} units per tick, more than the {max_step} allowed; use a longer duration"
            ),
            EmptyText => write!(f, "nothing to type"),
            TextTooLong { len, max } => write!(f, "text of {len} characters exceeds {max}"),
            UnsupportedChar { ch } => write!(f, "cannot type {ch:?}"),
            NothingToDo => write!(f, "the action does nothing"),
            StaleGeneration { grounded, current } => write!(
                f,
                "the window moved since the action was grounded (generation {grounded}, now {current}); observe again"
            ),
            CameraNotCalibrated => write!(
                f,
                "a camera turn in degrees needs a camera calibration (run with --calibrate-camera); none this session"
            ),
            DuplicateId { id } => write!(f, "action {id} is still running"),
        }
    }
}

/// A refused action: which one, whose, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub action: &'static str,
    pub owner: SubgoalId,
    pub reason: RejectReason,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}) rejected: {}", self.action, self.owner, self.reason)
    }
}

/// Why active actions were cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// Its subgoal was abandoned (selective cancellation).
    Owner,
    Halted,
    FocusLost,
    UserInput,
    BudgetSpent,
}

/// How an accepted action ended: the executor reports it, the session judges by it, the recording keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionEnd {
    Finished,
    Cancelled {
        reason: CancelReason,
    },
    /// Held longer than the max hold: released and the action ended (FR-SAFE-004).
    ForcedRelease {
        input: String,
        held_ms: u64,
    },
    /// Stopped at execution time (a denied chord formed by composition, a target gone off the window).
    Blocked {
        reason: RejectReason,
    },
}

impl ActionEnd {
    pub fn is_finished(&self) -> bool {
        matches!(self, ActionEnd::Finished)
    }
}

impl fmt::Display for ActionEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionEnd::Finished => f.write_str("finished"),
            ActionEnd::Cancelled { reason } => write!(f, "cancelled ({reason:?})"),
            ActionEnd::ForcedRelease { input, held_ms } => {
                write!(f, "{input} released after {held_ms} ms: the max hold")
            }
            ActionEnd::Blocked { reason } => write!(f, "blocked: {reason}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub id: ActionId,
    pub action: &'static str,
    pub owner: SubgoalId,
    #[serde(flatten)]
    pub kind: ActionEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HaltReason {
    /// The halt flag in shared memory was set (panic key, guardian).
    HaltFlag,
    BudgetSpent,
}

/// The executor's arming state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ExecState {
    Armed,
    /// Real user input was seen (FR-SAFE-002); only `resume` re-arms.
    Paused,
    /// Halted (INV-SAFE-002); only `rearm` re-arms.
    Halted {
        reason: HaltReason,
    },
}

/// What the reflex loop knows at a tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickInput {
    pub now: MonoTime,
    /// The shared-memory halt flag (step 1).
    pub halt: bool,
    /// Whether the target window is focused and active (step 2, INV-ACT-001).
    pub foreground: bool,
    /// The current transform chain (window geometry); `None` when unknown.
    pub chain: Option<TransformChain>,
    /// The pointer position in capture space, when inside the window.
    pub pointer: Option<Point>,
}

/// What a tick produced: the events to emit (in order) and what happened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickOutput {
    pub events: Vec<InputEvent>,
    pub reports: Vec<Report>,
    /// True when the held set changed (publish it).
    pub held_changed: bool,
    /// Non-release events held back by the event-rate budget this tick.
    pub throttled: usize,
}

/// The context an action is validated against (FR-ACT-006).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubmitContext {
    pub now: MonoTime,
    pub foreground: bool,
    pub chain: Option<TransformChain>,
}

/// What an action contends for (FR-ACT-003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Resource {
    HeldInput(HeldInput),
    /// The pointer position (paths and relative camera motion).
    Pointer,
    /// The text stream of a `type` action.
    Text,
    /// The scroll wheel.
    Wheel,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::HeldInput(i) => write!(f, "{i}"),
            Resource::Pointer => f.write_str("the pointer"),
            Resource::Text => f.write_str("the text stream"),
            Resource::Wheel => f.write_str("the scroll wheel"),
        }
    }
}

/// One step of an action, compiled at submit time.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Move {
        to: Point,
        duration: Option<Duration>,
    },
    Press {
        inputs: Vec<HeldInput>,
        hold: Option<Duration>,
    },
    Gap(Duration),
    Camera {
        dx: i32,
        dy: i32,
        duration: Duration,
    },
    Scroll {
        button: u8,
        notches: u32,
    },
    Wait(Duration),
    /// Hold what the steering controller wants among these inputs, until the deadline.
    Steer {
        allowed: Vec<HeldInput>,
        duration: Duration,
    },
}

/// The running state of the current phase.
#[derive(Debug, Clone, PartialEq)]
enum Running {
    Path(PointerPath, Point),
    Hold(Vec<HeldInput>, Option<MonoTime>),
    Until(MonoTime),
    Camera(CameraStepper),
    Scroll {
        button: u8,
        left: u32,
    },
    Steer {
        allowed: Vec<HeldInput>,
        until: MonoTime,
    },
}

#[derive(Debug, Clone)]
struct Active {
    id: ActionId,
    owner: SubgoalId,
    name: &'static str,
    phases: VecDeque<Phase>,
    current: Option<Running>,
    resources: Vec<Resource>,
    /// A steering action's wanted inputs (set by [`Executor::steer`]) and whether it is to end.
    steer: SteerWant,
}

/// What the steering controller last asked of a steering action.
#[derive(Debug, Clone, Default, PartialEq)]
struct SteerWant {
    want: Vec<HeldInput>,
    finish: bool,
}

/// Undo information for non-release events that the event budget may hold back.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Camera(usize, (i32, i32)),
    Scroll(usize),
    Plain,
}

/// The executor. One per target window.
#[derive(Debug)]
pub struct Executor {
    cfg: ExecutorConfig,
    held: HeldRecord,
    actions: Vec<Active>,
    next_id: u64,
    state: ExecState,
    timing: Timing,
    session_start: Option<MonoTime>,
    /// Acceptance times of the last second (action-rate budget): at most `max_actions_per_s` entries,
    /// since a submit that would exceed it is refused, never queued.
    accepted_at: VecDeque<MonoTime>,
    /// Ticks of the last second that emitted, with their event counts (event-rate budget): pruned every
    /// tick, so at most one entry per tick of one second (241 at the 240 Hz top cadence).
    emitted_at: VecDeque<(MonoTime, usize)>,
    last_pointer: Option<Point>,
    camera: Option<CameraScale>,
}

/// How many degrees one relative-movement count turns the view, per axis (both positive), from the
/// session's camera calibration (ADR-0035 "Neutral", FR-ACT-004).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CameraScale {
    pub deg_per_count_x: f64,
    pub deg_per_count_y: f64,
}

impl CameraScale {
    /// The relative counts for a turn of `yaw_deg` (right) and `pitch_deg` (down); `None` when a scale is
    /// not a positive finite number.
    pub fn counts(&self, yaw_deg: f64, pitch_deg: f64) -> Option<(i32, i32)> {
        let ok = |k: f64| k.is_finite() && k > 1e-9;
        if !ok(self.deg_per_count_x)
            || !ok(self.deg_per_count_y)
            || !yaw_deg.is_finite()
            || !pitch_deg.is_finite()
        {
            return None;
        }
        let cx = (yaw_deg / self.deg_per_count_x).round();
        let cy = (pitch_deg / self.deg_per_count_y).round();
        let lim = i32::MAX as f64 / 2.0;
        (cx.abs() < lim && cy.abs() < lim).then_some((cx as i32, cy as i32))
    }
}

const CHORD_TEXT_SHIFTED: &str = "~!@#$%^&*()_+{}|:\"<>?";

impl Executor {
    pub fn new(cfg: ExecutorConfig) -> Executor {
        let timing = Timing::new(ChaCha8Rng::seed_from_u64(cfg.seed));
        Executor {
            cfg,
            held: HeldRecord::default(),
            actions: Vec::new(),
            next_id: 1,
            state: ExecState::Armed,
            timing,
            session_start: None,
            accepted_at: VecDeque::new(),
            emitted_at: VecDeque::new(),
            last_pointer: None,
            camera: None,
        }
    }

    /// The session's camera calibration, used to convert `camera_degrees` into counts. Set by the binary
    /// from a measurement, never from a model (INV-SAFE-001 does not concern it, but the same path does).
    pub fn set_camera_scale(&mut self, scale: Option<CameraScale>) {
        self.camera = scale;
    }

    pub fn camera_scale(&self) -> Option<CameraScale> {
        self.camera
    }

    /// [`Executor::submit`] for an action grounded in transform-chain generation `grounded` (the chain
    /// the observation it was chosen from was captured under). A pointer-positioned action grounded in an
    /// older generation than the context's chain is refused with [`RejectReason::StaleGeneration`];
    /// key, text, camera and wait actions do not depend on the window's geometry and are not affected
    /// (FR-PERC-002).
    pub fn submit_grounded(
        &mut self,
        intention: &Intention,
        grounded: u64,
        ctx: &SubmitContext,
    ) -> Result<ActionId, Rejection> {
        self.admit(None, intention, Some(grounded), ctx)
    }

    /// [`Executor::submit_grounded`] under the caller's id: the session names each action once, from its
    /// proposal to its verdict, and the executor reports it under that name. An id still running is
    /// refused; later executor-assigned ids skip past it.
    pub fn submit_as(
        &mut self,
        id: ActionId,
        intention: &Intention,
        grounded: u64,
        ctx: &SubmitContext,
    ) -> Result<ActionId, Rejection> {
        self.admit(Some(id), intention, Some(grounded), ctx)
    }

    fn admit(
        &mut self,
        id: Option<ActionId>,
        intention: &Intention,
        grounded: Option<u64>,
        ctx: &SubmitContext,
    ) -> Result<ActionId, Rejection> {
        let reject = |reason| Rejection {
            action: intention.action.name(),
            owner: intention.subgoal,
            reason,
        };
        if let (Some(chain), Some(grounded)) = (ctx.chain, grounded) {
            if intention.action.is_pointer_positioned() && grounded < chain.generation {
                return Err(reject(RejectReason::StaleGeneration {
                    grounded,
                    current: chain.generation,
                }));
            }
        }
        if let Some(id) = id {
            if self.is_active(id) {
                return Err(reject(RejectReason::DuplicateId { id }));
            }
        }
        self.submit_under(id, intention, ctx)
    }

    pub fn config(&self) -> &ExecutorConfig {
        &self.cfg
    }

    pub fn state(&self) -> ExecState {
        self.state
    }

    /// The authoritative held record (FR-ACT-007).
    pub fn held(&self) -> &HeldRecord {
        &self.held
    }

    /// Number of actions still running.
    pub fn active(&self) -> usize {
        self.actions.len()
    }

    pub fn is_active(&self, id: ActionId) -> bool {
        self.actions.iter().any(|a| a.id == id)
    }

    /// Validate `intention` against the context and the safety rules and, when acceptable, queue it to start
    /// on the next tick (FR-ACT-006). No input is produced here.
    pub fn submit(&mut self, intention: &Intention, ctx: &SubmitContext) -> Result<ActionId, Rejection> {
        self.submit_under(None, intention, ctx)
    }

    fn submit_under(
        &mut self,
        id: Option<ActionId>,
        intention: &Intention,
        ctx: &SubmitContext,
    ) -> Result<ActionId, Rejection> {
        let name = intention.action.name();
        let owner = intention.subgoal;
        let reject = |reason| Rejection {
            action: name,
            owner,
            reason,
        };
        match self.state {
            ExecState::Armed => {}
            ExecState::Paused => return Err(reject(RejectReason::Paused)),
            ExecState::Halted { .. } => return Err(reject(RejectReason::Halted)),
        }
        if !ctx.foreground {
            return Err(reject(RejectReason::NotForeground));
        }
        while let Some(t) = self.accepted_at.front() {
            if ctx.now.since(*t) >= Duration::from_secs(1) {
                self.accepted_at.pop_front();
            } else {
                break;
            }
        }
        if self.accepted_at.len() >= self.cfg.max_actions_per_s as usize {
            return Err(reject(RejectReason::ActionRateExceeded {
                limit_per_s: self.cfg.max_actions_per_s,
            }));
        }
        let (phases, resources) = self.compile(&intention.action, ctx).map_err(reject)?;
        // Denied chords: the action's own keys, and its keys together with everything held now or wanted by
        // running actions (INV-ACT-003).
        for p in &phases {
            if let Phase::Press { inputs, .. } = p {
                let keys = inputs
                    .iter()
                    .filter_map(|i| if let HeldInput::Key(k) = i { Some(*k) } else { None });
                if let Some(chord) = self.cfg.denied.matching(keys.chain(self.held.keys())) {
                    return Err(reject(RejectReason::DeniedChord {
                        chord: chord.to_string(),
                    }));
                }
            }
        }
        for a in &self.actions {
            if let Some(r) = a.resources.iter().find(|r| resources.contains(r)) {
                return Err(reject(RejectReason::Conflict {
                    resource: r.to_string(),
                    with: a.id,
                    owner: a.owner,
                }));
            }
        }
        let id = id.unwrap_or(ActionId(self.next_id));
        self.next_id = self.next_id.max(id.0 + 1);
        self.accepted_at.push_back(ctx.now);
        self.actions.push(Active {
            id,
            owner,
            name,
            phases: phases.into(),
            current: None,
            resources,
            steer: SteerWant::default(),
        });
        Ok(id)
    }

    fn keys_of(&self, key: &str) -> Result<Vec<HeldInput>, RejectReason> {
        let chord = Chord::parse(key).map_err(|_| RejectReason::UnknownKey { key: key.to_string() })?;
        let mut out: Vec<HeldInput> = Vec::new();
        for k in chord.0 {
            let i = HeldInput::Key(normalize(k));
            if !out.contains(&i) {
                out.push(i);
            }
        }
        Ok(out)
    }

    fn point_in(&self, x: i32, y: i32, ctx: &SubmitContext) -> Result<Point, RejectReason> {
        let chain = ctx.chain.ok_or(RejectReason::NoWindowGeometry)?;
        let p = Point::new(x, y);
        if !chain.capture_bounds().contains(p) {
            return Err(RejectReason::OutsideWindow {
                x,
                y,
                width: chain.capture_size.w,
                height: chain.capture_size.h,
            });
        }
        Ok(p)
    }

    fn hold_limit(&self, ms: Option<u64>) -> Result<Option<Duration>, RejectReason> {
        match ms {
            None => Ok(None),
            Some(0) => Err(RejectReason::ZeroDuration),
            Some(ms) if Duration::from_millis(ms) > self.cfg.max_hold => Err(RejectReason::HoldTooLong {
                requested_ms: ms,
                max_ms: self.cfg.max_hold.as_millis() as u64,
            }),
            Some(ms) => Ok(Some(Duration::from_millis(ms))),
        }
    }

    /// Turn an action into phases and the resources it contends for.
    fn compile(
        &mut self,
        action: &Action,
        ctx: &SubmitContext,
    ) -> Result<(Vec<Phase>, Vec<Resource>), RejectReason> {
        let mut res: Vec<Resource> = Vec::new();
        let mut phases = Vec::new();
        match action {
            Action::Click { x, y, button } | Action::DoubleClick { x, y, button } => {
                let to = self.point_in(*x, *y, ctx)?;
                let b = HeldInput::Button(button.x_button());
                res.extend([Resource::Pointer, Resource::HeldInput(b)]);
                phases.push(Phase::Move { to, duration: None });
                phases.push(Phase::Press {
                    inputs: vec![b],
                    hold: Some(self.timing.click_hold()),
                });
                if matches!(action, Action::DoubleClick { .. }) {
                    phases.push(Phase::Gap(self.timing.double_click_gap()));
                    phases.push(Phase::Press {
                        inputs: vec![b],
                        hold: Some(self.timing.click_hold()),
                    });
                }
            }
            Action::Key { key } => {
                let inputs = self.keys_of(key)?;
                res.extend(inputs.iter().map(|i| Resource::HeldInput(*i)));
                phases.push(Phase::Press {
                    inputs,
                    hold: Some(self.timing.key_hold()),
                });
            }
            Action::Type { text } => {
                if text.is_empty() {
                    return Err(RejectReason::EmptyText);
                }
                let len = text.chars().count();
                if len > self.cfg.max_text_len {
                    return Err(RejectReason::TextTooLong {
                        len,
                        max: self.cfg.max_text_len,
                    });
                }
                res.push(Resource::Text);
                let shift = HeldInput::Key(Keysym(0xffe1));
                for (i, ch) in text.chars().enumerate() {
                    let sym = Keysym::from_char(ch).ok_or(RejectReason::UnsupportedChar { ch })?;
                    let needs_shift = ch.is_ascii_uppercase() || CHORD_TEXT_SHIFTED.contains(ch);
                    let key = HeldInput::Key(normalize(sym));
                    let inputs = if needs_shift { vec![shift, key] } else { vec![key] };
                    for i in &inputs {
                        if !res.contains(&Resource::HeldInput(*i)) {
                            res.push(Resource::HeldInput(*i));
                        }
                    }
                    if i > 0 {
                        phases.push(Phase::Gap(self.timing.type_gap()));
                    }
                    phases.push(Phase::Press {
                        inputs,
                        hold: Some(self.timing.key_hold()),
                    });
                }
            }
            Action::Scroll { x, y, dx, dy } => {
                if let (Some(x), Some(y)) = (x, y) {
                    let to = self.point_in(*x, *y, ctx)?;
                    res.push(Resource::Pointer);
                    phases.push(Phase::Move { to, duration: None });
                }
                if *dx == 0 && *dy == 0 {
                    return Err(RejectReason::NothingToDo);
                }
                res.push(Resource::Wheel);
                if *dy != 0 {
                    phases.push(Phase::Scroll {
                        button: if *dy > 0 { 5 } else { 4 },
                        notches: dy.unsigned_abs(),
                    });
                }
                if *dx != 0 {
                    phases.push(Phase::Scroll {
                        button: if *dx > 0 { 7 } else { 6 },
                        notches: dx.unsigned_abs(),
                    });
                }
            }
            Action::HoldKey { key, duration_ms } => {
                let hold = self.hold_limit(*duration_ms)?;
                let inputs = self.keys_of(key)?;
                res.extend(inputs.iter().map(|i| Resource::HeldInput(*i)));
                phases.push(Phase::Press { inputs, hold });
            }
            Action::HoldButton {
                button,
                duration_ms,
                x,
                y,
            } => {
                let hold = self.hold_limit(*duration_ms)?;
                if let (Some(x), Some(y)) = (x, y) {
                    let to = self.point_in(*x, *y, ctx)?;
                    res.push(Resource::Pointer);
                    phases.push(Phase::Move { to, duration: None });
                }
                let b = HeldInput::Button(button.x_button());
                res.push(Resource::HeldInput(b));
                phases.push(Phase::Press {
                    inputs: vec![b],
                    hold,
                });
            }
            Action::CameraDegrees {
                yaw_deg,
                pitch_deg,
                duration_ms,
            } => {
                let scale = self.camera.ok_or(RejectReason::CameraNotCalibrated)?;
                let (dx, dy) = scale
                    .counts(yaw_deg.0, pitch_deg.0)
                    .ok_or(RejectReason::NothingToDo)?;
                let counts = Action::Camera {
                    dx,
                    dy,
                    duration_ms: *duration_ms,
                };
                return self.compile(&counts, ctx);
            }
            Action::Camera { dx, dy, duration_ms } => {
                if *duration_ms == 0 {
                    return Err(RejectReason::ZeroDuration);
                }
                if *dx == 0 && *dy == 0 {
                    return Err(RejectReason::NothingToDo);
                }
                let duration = Duration::from_millis(*duration_ms);
                let ticks = (duration.as_secs_f64() / self.cfg.tick.as_secs_f64())
                    .floor()
                    .max(1.0);
                let need = (dx.unsigned_abs().max(dy.unsigned_abs()) as f64 / ticks).ceil() as i32;
                if need > self.cfg.camera_max_step {
                    return Err(RejectReason::CameraTooFast {
                        step_per_tick: need,
                        max_step: self.cfg.camera_max_step,
                    });
                }
                res.push(Resource::Pointer);
                phases.push(Phase::Camera {
                    dx: *dx,
                    dy: *dy,
                    duration,
                });
            }
            Action::MovePointer { x, y, duration_ms } => {
                let to = self.point_in(*x, *y, ctx)?;
                if let Some(ms) = duration_ms {
                    if Duration::from_millis(*ms) > self.cfg.max_hold {
                        return Err(RejectReason::HoldTooLong {
                            requested_ms: *ms,
                            max_ms: self.cfg.max_hold.as_millis() as u64,
                        });
                    }
                }
                res.push(Resource::Pointer);
                phases.push(Phase::Move {
                    to,
                    duration: duration_ms.map(Duration::from_millis),
                });
            }
            Action::Steer {
                up,
                down,
                left,
                right,
                duration_ms,
            } => {
                let duration = self.hold_limit(Some(*duration_ms))?.unwrap_or(self.cfg.max_hold);
                let mut allowed = Vec::new();
                for key in [up, down, left, right] {
                    let inputs = self.keys_of(key)?;
                    if inputs.len() != 1 {
                        return Err(RejectReason::NothingToDo);
                    }
                    allowed.extend(inputs);
                }
                allowed.sort();
                allowed.dedup();
                res.extend(allowed.iter().map(|i| Resource::HeldInput(*i)));
                phases.push(Phase::Steer { allowed, duration });
            }
            Action::Wait { duration_ms } => {
                let d = Duration::from_millis(*duration_ms);
                if d > self.cfg.max_wait {
                    return Err(RejectReason::WaitTooLong {
                        requested_ms: *duration_ms,
                        max_ms: self.cfg.max_wait.as_millis() as u64,
                    });
                }
                phases.push(Phase::Wait(d));
            }
        }
        Ok((phases, res))
    }

    /// The steering controller's wish for steering action `id` this tick: hold exactly `want` (inputs
    /// the action was not given are ignored), or end the action (`finish`; its inputs are released on
    /// the next tick and it reports `Completed`). False when `id` is no running steering action.
    pub fn steer(&mut self, id: ActionId, want: &[String], finish: bool) -> bool {
        let want: Vec<HeldInput> = want
            .iter()
            .filter_map(|k| self.keys_of(k).ok())
            .flatten()
            .collect();
        let Some(a) = self.actions.iter_mut().find(|a| a.id == id && a.name == "steer") else {
            return false;
        };
        a.steer = SteerWant { want, finish };
        true
    }

    /// Selective cancellation (ADR-0035 "Ownership"): end every action of `owner`; their inputs are released
    /// on the next tick, other subgoals' inputs are untouched.
    pub fn cancel_owner(&mut self, owner: SubgoalId) -> Vec<Report> {
        let mut out = Vec::new();
        self.actions.retain(|a| {
            if a.owner == owner {
                out.push(Report {
                    id: a.id,
                    action: a.name,
                    owner: a.owner,
                    kind: ActionEnd::Cancelled {
                        reason: CancelReason::Owner,
                    },
                });
                false
            } else {
                true
            }
        });
        out
    }

    /// Cancel one action by id.
    pub fn cancel(&mut self, id: ActionId) -> Option<Report> {
        let i = self.actions.iter().position(|a| a.id == id)?;
        let a = self.actions.remove(i);
        Some(Report {
            id,
            action: a.name,
            owner: a.owner,
            kind: ActionEnd::Cancelled {
                reason: CancelReason::Owner,
            },
        })
    }

    fn cancel_all(&mut self, reason: CancelReason) -> Vec<Report> {
        self.actions
            .drain(..)
            .map(|a| Report {
                id: a.id,
                action: a.name,
                owner: a.owner,
                kind: ActionEnd::Cancelled { reason },
            })
            .collect()
    }

    /// Release events for everything held, in release order, and clear the record.
    fn release_everything(&mut self) -> Vec<InputEvent> {
        let mut held: Vec<HeldInput> = self.held.iter().map(|h| h.input).collect();
        held.sort_by_key(|i| i.release_rank());
        self.held = HeldRecord::default();
        held.into_iter().map(release_event).collect()
    }

    /// Real user input was seen (FR-SAFE-002): cancel everything, release everything, stay paused until
    /// `resume`. The returned events must be emitted at once.
    pub fn pause_for_user(&mut self) -> TickOutput {
        let reports = self.cancel_all(CancelReason::UserInput);
        let events = self.release_everything();
        self.state = ExecState::Paused;
        TickOutput {
            held_changed: !events.is_empty(),
            events,
            reports,
            throttled: 0,
        }
    }

    /// The user's explicit resume after a pause.
    pub fn resume(&mut self) {
        if self.state == ExecState::Paused {
            self.state = ExecState::Armed;
        }
    }

    /// Re-arm after a halt (the caller must clear the halt flag it read).
    pub fn rearm(&mut self) {
        if matches!(
            self.state,
            ExecState::Halted {
                reason: HaltReason::HaltFlag
            }
        ) {
            self.state = ExecState::Armed;
        }
    }

    /// Stop: cancel and release everything (the session's end, a fatal error).
    pub fn stop(&mut self, reason: CancelReason) -> TickOutput {
        let reports = self.cancel_all(reason);
        let events = self.release_everything();
        TickOutput {
            held_changed: !events.is_empty(),
            events,
            reports,
            throttled: 0,
        }
    }

    /// One reflex tick, the five steps of ADR-0035 in order.
    pub fn tick(&mut self, input: &TickInput) -> TickOutput {
        let now = input.now;
        let start = *self.session_start.get_or_insert(now);
        if let Some(p) = input.pointer {
            self.last_pointer = Some(p);
        }
        // 1. Halt flag (and the session's wall-clock budget): release everything and stop.
        let budget_spent = now.since(start) > self.cfg.session_budget;
        if input.halt || budget_spent || matches!(self.state, ExecState::Halted { .. }) {
            let reason = match self.state {
                ExecState::Halted { reason } => reason,
                _ if input.halt => HaltReason::HaltFlag,
                _ => HaltReason::BudgetSpent,
            };
            let cancel = if reason == HaltReason::BudgetSpent {
                CancelReason::BudgetSpent
            } else {
                CancelReason::Halted
            };
            self.state = ExecState::Halted { reason };
            return self.stop(cancel);
        }
        if self.state == ExecState::Paused {
            return self.stop(CancelReason::UserInput);
        }
        // 2. Foreground guard (INV-ACT-001): release everything, cancel, no other event.
        if !input.foreground {
            return self.stop(CancelReason::FocusLost);
        }
        let mut out = TickOutput::default();
        // 3. Advance every sustained action by one tick.
        let mut desired: BTreeMap<HeldInput, (SubgoalId, ActionId)> = BTreeMap::new();
        let mut motion: Vec<(InputEvent, Pending)> = Vec::new();
        let mut finished: Vec<usize> = Vec::new();
        let mut blocked: Vec<(usize, RejectReason)> = Vec::new();
        for (idx, a) in self.actions.iter_mut().enumerate() {
            match advance(
                a,
                now,
                input.chain.as_ref(),
                self.last_pointer,
                &self.cfg,
                &mut self.timing,
            ) {
                Step::Wants(inputs, ev) => {
                    for i in inputs {
                        desired.insert(i, (a.owner, a.id));
                    }
                    if let Some(e) = ev {
                        motion.push((
                            e,
                            match e {
                                InputEvent::MotionRelative { dx, dy } => Pending::Camera(idx, (dx, dy)),
                                InputEvent::Button { .. } => Pending::Scroll(idx),
                                _ => Pending::Plain,
                            },
                        ));
                    }
                }
                Step::Done => finished.push(idx),
                Step::Blocked(r) => blocked.push((idx, r)),
            }
        }
        // Max hold (FR-SAFE-004): an input held too long ends its action.
        let mut forced: Vec<(ActionId, HeldInput, u64)> = Vec::new();
        for h in self.held.iter() {
            let held_for = now.since(h.since);
            if held_for > self.cfg.max_hold && desired.get(&h.input).map(|d| d.1) == Some(h.action) {
                forced.push((h.action, h.input, held_for.as_millis() as u64));
            }
        }
        for (id, input_, ms) in &forced {
            desired.retain(|_, (_, a)| a != id);
            motion.retain(|(_, p)| !matches!(p, Pending::Camera(i, _) | Pending::Scroll(i) if self.actions[*i].id == *id));
            if let Some(a) = self.actions.iter().find(|a| a.id == *id) {
                out.reports.push(Report {
                    id: *id,
                    action: a.name,
                    owner: a.owner,
                    kind: ActionEnd::ForcedRelease {
                        input: input_.to_string(),
                        held_ms: *ms,
                    },
                });
            }
        }
        // Denied chords formed by composing actions (INV-ACT-003): stop the newest contributor.
        loop {
            let keys = desired
                .keys()
                .filter_map(|i| if let HeldInput::Key(k) = i { Some(*k) } else { None });
            let Some(chord) = self.cfg.denied.matching(keys).map(str::to_string) else {
                break;
            };
            let denied_keys = Chord::parse(&chord).map(|c| c.0).unwrap_or_default();
            let newest = desired
                .iter()
                .filter(
                    |(i, _)| matches!(i, HeldInput::Key(k) if denied_keys.iter().any(|d| normalize(*d) == *k)),
                )
                .map(|(_, (_, id))| *id)
                .max();
            let Some(id) = newest else { break };
            desired.retain(|_, (_, a)| *a != id);
            if let Some(idx) = self.actions.iter().position(|a| a.id == id) {
                blocked.push((idx, RejectReason::DeniedChord { chord }));
            }
        }
        let ended: BTreeSet<ActionId> = forced.iter().map(|f| f.0).collect();
        // 4. Reconcile desired against held: the minimal event set.
        let held_before: Vec<HeldInput> = self.held.iter().map(|h| h.input).collect();
        let mut releases: Vec<HeldInput> = self
            .held
            .iter()
            .map(|h| h.input)
            .filter(|i| !desired.contains_key(i))
            .collect();
        releases.sort_by_key(|i| i.release_rank());
        let mut presses: Vec<(HeldInput, SubgoalId, ActionId)> = desired
            .iter()
            .filter(|(i, _)| !self.held.contains(i))
            .map(|(i, (o, a))| (*i, *o, *a))
            .collect();
        presses.sort_by_key(|(i, _, _)| std::cmp::Reverse(i.release_rank()));
        for i in &releases {
            self.held.remove(i);
            out.events.push(release_event(*i));
        }
        // Event-rate budget: releases always pass; the rest waits when the budget is spent.
        while let Some((t, _)) = self.emitted_at.front() {
            if now.since(*t) >= Duration::from_secs(1) {
                self.emitted_at.pop_front();
            } else {
                break;
            }
        }
        let used: usize = self.emitted_at.iter().map(|(_, n)| n).sum();
        let mut allowance = (self.cfg.max_events_per_s as usize).saturating_sub(used);
        for (e, pending) in motion {
            let cost = if matches!(e, InputEvent::Button { .. }) {
                2
            } else {
                1
            };
            if allowance >= cost {
                allowance -= cost;
                out.events.push(e);
                if let InputEvent::Button { button, .. } = e {
                    out.events.push(InputEvent::Button { button, down: false });
                }
            } else {
                out.throttled += 1;
                match pending {
                    Pending::Camera(i, step) => {
                        if let Some(Running::Camera(c)) =
                            self.actions.get_mut(i).and_then(|a| a.current.as_mut())
                        {
                            c.undo(step);
                        }
                    }
                    Pending::Scroll(i) => {
                        if let Some(Running::Scroll { left, .. }) =
                            self.actions.get_mut(i).and_then(|a| a.current.as_mut())
                        {
                            *left += 1;
                        }
                    }
                    Pending::Plain => {}
                }
            }
        }
        // An input that stays held but changed hands (its owner was cancelled and another action wants it)
        // records its new owner; it was physically held all along, so `since` stays.
        for (input_, (owner, action)) in &desired {
            if let Some(h) = self.held.get(input_).copied() {
                if h.action != *action {
                    self.held.insert(Held {
                        owner: *owner,
                        action: *action,
                        ..h
                    });
                }
            }
        }
        for (i, owner, action) in presses {
            if allowance == 0 {
                out.throttled += 1;
                continue;
            }
            allowance -= 1;
            self.held.insert(Held {
                input: i,
                owner,
                action,
                since: now,
            });
            out.events.push(press_event(i));
        }
        let emitted = out.events.len();
        if emitted > 0 {
            self.emitted_at.push_back((now, emitted));
        }
        // Retire finished, blocked and force-released actions.
        let mut remove: BTreeMap<usize, ActionEnd> = BTreeMap::new();
        for i in finished {
            remove.insert(i, ActionEnd::Finished);
        }
        for (i, r) in blocked {
            remove.insert(i, ActionEnd::Blocked { reason: r });
        }
        for (idx, a) in self.actions.iter().enumerate() {
            if ended.contains(&a.id) {
                remove.entry(idx).or_insert(ActionEnd::Finished);
            }
        }
        for (idx, kind) in remove.into_iter().rev() {
            let a = self.actions.remove(idx);
            if ended.contains(&a.id) {
                continue; // already reported as a forced release
            }
            out.reports.push(Report {
                id: a.id,
                action: a.name,
                owner: a.owner,
                kind,
            });
        }
        // 5. Emit and publish: the caller delivers `events` and publishes `held()`.
        out.held_changed = held_before != self.held.iter().map(|h| h.input).collect::<Vec<_>>();
        out
    }
}

fn release_event(i: HeldInput) -> InputEvent {
    match i {
        HeldInput::Key(sym) => InputEvent::Key { sym, down: false },
        HeldInput::Button(button) => InputEvent::Button { button, down: false },
    }
}

fn press_event(i: HeldInput) -> InputEvent {
    match i {
        HeldInput::Key(sym) => InputEvent::Key { sym, down: true },
        HeldInput::Button(button) => InputEvent::Button { button, down: true },
    }
}

/// The outcome of advancing one action by a tick.
enum Step {
    /// Inputs it wants held now and at most one transient event (motion or a scroll notch press).
    Wants(Vec<HeldInput>, Option<InputEvent>),
    Done,
    Blocked(RejectReason),
}

fn advance(
    a: &mut Active,
    now: MonoTime,
    chain: Option<&TransformChain>,
    pointer: Option<Point>,
    cfg: &ExecutorConfig,
    timing: &mut Timing,
) -> Step {
    // At most a few phase transitions per tick (a hold ending and a gap starting).
    for _ in 0..4 {
        if a.current.is_none() {
            let Some(phase) = a.phases.pop_front() else {
                return Step::Done;
            };
            a.current = Some(match phase {
                Phase::Move { to, duration } => {
                    let from = pointer.unwrap_or(to);
                    Running::Path(PointerPath::plan(from, to, now, duration, timing.rng()), to)
                }
                Phase::Press { inputs, hold } => Running::Hold(inputs, hold.map(|d| now.plus(d))),
                Phase::Gap(d) | Phase::Wait(d) => Running::Until(now.plus(d)),
                Phase::Camera { dx, dy, duration } => {
                    Running::Camera(CameraStepper::new(dx, dy, now, duration, cfg.camera_max_step))
                }
                Phase::Scroll { button, notches } => Running::Scroll {
                    button,
                    left: notches,
                },
                Phase::Steer { allowed, duration } => Running::Steer {
                    allowed,
                    until: now.plus(duration),
                },
            });
        }
        let Some(cur) = a.current.as_mut() else {
            return Step::Done;
        };
        match cur {
            Running::Path(path, _to) => {
                let p = path.at(now);
                let Some(chain) = chain else {
                    return Step::Blocked(RejectReason::NoWindowGeometry);
                };
                let sp = match chain.capture_to_screen(p) {
                    Ok(sp) => sp,
                    Err(_) => {
                        return Step::Blocked(RejectReason::OutsideWindow {
                            x: p.x,
                            y: p.y,
                            width: chain.capture_size.w,
                            height: chain.capture_size.h,
                        })
                    }
                };
                if path.done(now) {
                    a.current = None;
                }
                return Step::Wants(Vec::new(), Some(InputEvent::MotionTo(sp)));
            }
            Running::Hold(inputs, until) => {
                if until.is_some_and(|u| now >= u) {
                    a.current = None;
                    continue;
                }
                return Step::Wants(inputs.clone(), None);
            }
            Running::Until(until) => {
                if now >= *until {
                    a.current = None;
                    continue;
                }
                return Step::Wants(Vec::new(), None);
            }
            Running::Camera(c) => {
                if c.finished() {
                    a.current = None;
                    continue;
                }
                let ev = c.step(now).map(|(dx, dy)| InputEvent::MotionRelative { dx, dy });
                return Step::Wants(Vec::new(), ev);
            }
            Running::Steer { allowed, until } => {
                if a.steer.finish || now >= *until {
                    a.current = None;
                    continue;
                }
                let want = a
                    .steer
                    .want
                    .iter()
                    .filter(|i| allowed.contains(i))
                    .copied()
                    .collect();
                return Step::Wants(want, None);
            }
            Running::Scroll { button, left } => {
                if *left == 0 {
                    a.current = None;
                    continue;
                }
                *left -= 1;
                return Step::Wants(
                    Vec::new(),
                    Some(InputEvent::Button {
                        button: *button,
                        down: true,
                    }),
                );
            }
        }
    }
    Step::Wants(Vec::new(), None)
}

#[cfg(test)]
mod tests;
