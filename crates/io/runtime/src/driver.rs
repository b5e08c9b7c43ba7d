//! The one reflex driver of `gamepilot act` and `gamepilot run`: the ADR-0035 tick with every
//! interlock around the pure executor, written once. Each tick is `begin_tick` (guardian alive, halt flag,
//! target sample, window tracking, user input) → submits against `context()` → `step` (executor tick →
//! the single XTest sink → publish the held set → audit against the server → indicator). What happened
//! comes back as typed [`DriverEvent`]s and a typed [`DriverStop`]; `act` prints them as JSON lines,
//! the reflex thread of `run` turns them into `FromReflex` messages. No string is compared anywhere.
//!
//! Also here, because both commands need them: camera calibration through the executor (FR-ACT-004),
//! and the frame-health and capture-retry state machines the reflex of `run` applies (FR-PERC-009).

use crate::interlocks::{HeldDivergence, TargetSample};
use crate::now;
use crate::RuntimeError;
use crate::{GuardianHandle, Ticker};
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::{
    Chord, FrameHealth, FrameProblem, HaltCause, Interlock, MonoTime, Rect, TransformChain,
};
use gamepilot_executor::calibrate::{Axis, Calibrator, CameraCalibration};
use gamepilot_executor::{
    ActionEnd, ActionId, CameraScale, CancelReason, ExecState, Executor, ExecutorConfig, HaltReason,
    RejectReason, Rejection, Report, SubmitContext as ExecContext, TickInput,
};
use gamepilot_x11::indicator::Indicator;
use gamepilot_x11::input::{DryRunSink, InputSink, XTestSink};
use gamepilot_x11::tracking::{WindowChange, WindowTracker};
use gamepilot_x11::userinput::{RawInputWatch, RawKind, Watch};
use gamepilot_x11::{WindowCapturer, X11};
use serde::Serialize;
use std::fmt;
use std::time::{Duration, Instant};

/// What halted input: the budget, else the cause the guardian wrote beside the halt flag.
fn halt_cause(reason: HaltReason, flag: Option<HaltCause>) -> HaltCause {
    match (reason, flag) {
        (HaltReason::BudgetSpent, _) => HaltCause::BudgetSpent,
        (_, Some(cause)) => cause,
        (HaltReason::HaltFlag, None) => HaltCause::Unknown,
    }
}

/// What one tick of the driver produced, in order.
#[derive(Debug, Clone)]
pub enum DriverEvent {
    /// What happened to an accepted action.
    Report(Report),
    /// The held set changed.
    HeldChanged,
    /// A key with no keycode on this keyboard was skipped.
    Undeliverable(String),
    /// The held record diverged from the server (already resolved by releasing).
    HeldDivergence(HeldDivergence),
    Interlock {
        kind: Interlock,
        detail: String,
    },
}

/// Why the driver cannot go on. Every stop has already released everything the executor held.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverStop {
    /// Real-device input (FR-SAFE-002); resuming is the user's act.
    UserInput {
        device: String,
        sourceid: u16,
        input: RawKind,
    },
    Halted {
        reason: HaltReason,
        cause: HaltCause,
    },
    /// The guardian exited or stopped beating: why, in words.
    GuardianGone(String),
    WindowGone,
}

impl DriverStop {
    /// The interlock this stop is, for the loop and the recording.
    pub fn interlock(&self) -> Option<(Interlock, String)> {
        match self {
            DriverStop::UserInput { device, .. } => {
                Some((Interlock::UserInput, format!("paused by {device}")))
            }
            DriverStop::Halted { reason, cause } => {
                Some((Interlock::Halt { cause: *cause }, format!("{reason:?} {cause:?}")))
            }
            DriverStop::GuardianGone(why) => Some((Interlock::GuardianGone, why.clone())),
            DriverStop::WindowGone => None,
        }
    }
}

/// What the driver needs; every limit comes from the user (INV-SAFE-001).
#[derive(Debug, Clone)]
pub struct DriverSetup {
    pub display: Option<String>,
    pub window: u32,
    pub exec: ExecutorConfig,
    pub dry_run: bool,
    pub hz: u32,
    pub panic: Chord,
    /// Camera calibration measured before the session (converts `camera_degrees`).
    pub camera: Option<CameraScale>,
    /// Show the FR-SAFE-007 indicator.
    pub indicator: bool,
}

/// Figures of a finished driver.
#[derive(Debug, Clone, Copy, Default)]
pub struct DriverStats {
    pub lateness_p50_us: u64,
    pub lateness_p99_us: u64,
    pub ticks: u64,
    /// Events the sink delivered (or, dry run, would have).
    pub events: u64,
    pub delivers: bool,
    /// Whether the last release path emitted anything.
    pub released_on_stop: bool,
}

/// The reflex driver. One per session; `finish` releases everything and lets the guardian go.
pub struct Driver {
    x: X11,
    window: u32,
    sink: Box<dyn InputSink>,
    watch: RawInputWatch,
    ex: Executor,
    guardian: Option<GuardianHandle>,
    tracker: Option<WindowTracker>,
    indicator: Option<Indicator>,
    panic: Chord,
    dry_run: bool,
    hz: u32,
    /// Armed on the first tick, not at start: whatever the caller sets up between `start` and its loop
    /// (a capturer, the OCR worker) must not age the guardian's heartbeat past its bound.
    armed: bool,
    ticker: Ticker,
    last_audit: Instant,
    last_raise: Instant,
    sample: TargetSample,
    halt: Option<HaltCause>,
    generation: u64,
    changed: bool,
    focus_lost_reported: bool,
}

impl Driver {
    /// Connect the sink, the user-input watch and window tracking, show the indicator and arm.
    pub fn start(setup: DriverSetup, guardian: GuardianHandle) -> Result<Driver, RuntimeError> {
        let d = setup.display.as_deref();
        let x = X11::connect(d)?;
        let sink: Box<dyn InputSink> = if setup.dry_run {
            Box::new(DryRunSink::default())
        } else {
            Box::new(XTestSink::connect(d)?)
        };
        let mut watch = RawInputWatch::connect(d, Watch::All)
            .map_err(|e| RuntimeError::WorkerStart(format!("starting the user-input watch: {e}")))?;
        let _ = watch.poll()?; // discard anything queued before arming
                               // Window tracking on its own connection (FR-PERC-002); without it the chain is still measured
                               // every tick, only its generation stays 0.
        let tracker = WindowTracker::open(d, setup.window).ok();
        let mut ex = Executor::new(setup.exec);
        ex.set_camera_scale(setup.camera);
        let indicator = if setup.indicator {
            let target = x.client_rect(setup.window).unwrap_or_default();
            Indicator::show(d, target, &indicator_text(setup.dry_run, "ARMED", &setup.panic))
                .ok()
                .flatten()
        } else {
            None
        };
        crate::interlocks::publish(&guardian.shm, ex.held());
        Ok(Driver {
            x,
            window: setup.window,
            sink,
            watch,
            ex,
            guardian: Some(guardian),
            tracker,
            indicator,
            panic: setup.panic,
            dry_run: setup.dry_run,
            hz: setup.hz.clamp(1, 1000),
            armed: false,
            ticker: Ticker::new(setup.hz.clamp(1, 1000)),
            last_audit: Instant::now(),
            last_raise: Instant::now(),
            sample: TargetSample {
                foreground: false,
                chain: None,
                pointer: None,
            },
            halt: None,
            generation: 0,
            changed: false,
            focus_lost_reported: false,
        })
    }

    pub fn x11(&self) -> &X11 {
        &self.x
    }

    pub fn executor(&self) -> &Executor {
        &self.ex
    }

    pub fn guardian_pid(&self) -> u32 {
        self.guardian.as_ref().map(|g| g.pid()).unwrap_or(0)
    }

    /// The current transform chain (generation included).
    pub fn chain(&self) -> Option<TransformChain> {
        self.sample.chain
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The target (or its dialog) has the input focus as of the last sample (FR-SAFE-004).
    pub fn foreground(&self) -> bool {
        self.sample.foreground
    }

    /// The last tick's lateness.
    pub fn late_us(&self) -> u64 {
        self.ticker.lateness.last().unwrap_or(0)
    }

    /// True once after the window moved or resized: capture must be re-targeted.
    pub fn take_window_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The arming state in the words of the indicator and the status line.
    pub fn state_label(&self) -> &'static str {
        match self.ex.state() {
            ExecState::Armed if self.sample.foreground => "ARMED",
            ExecState::Armed => "NOT FOREGROUND",
            ExecState::Paused => "PAUSED",
            ExecState::Halted { .. } => "HALTED",
        }
    }

    /// The validation context of this tick (FR-ACT-006).
    pub fn context(&self) -> ExecContext {
        ExecContext {
            now: now(),
            foreground: self.sample.foreground && self.halt.is_none(),
            chain: self.sample.chain,
        }
    }

    /// Steps 1–2 and the interlocks before submits: wait for the tick, check the guardian, read the halt
    /// flag, sample the target, follow its geometry, watch for user input. `stops` says whether a
    /// real-device event of that kind stops the session (run forgives the user's answer to a
    /// confirmation overlay).
    pub fn begin_tick(
        &mut self,
        stops: impl Fn(RawKind) -> bool,
        out: &mut Vec<DriverEvent>,
    ) -> Result<Option<DriverStop>, RuntimeError> {
        if !self.armed {
            self.ticker = Ticker::new(self.hz);
            if let Some(g) = self.guardian.as_ref() {
                crate::interlocks::publish(&g.shm, self.ex.held());
                g.shm.set_armed(true);
            }
            self.armed = true;
        }
        self.ticker.wait();
        if let Some(g) = self.guardian.as_mut() {
            if let Some(why) = g.gone() {
                return Ok(Some(DriverStop::GuardianGone(why)));
            }
            self.halt = g.shm.halt();
        }
        let Some(mut sample) = crate::interlocks::sample_target(&self.x, self.window) else {
            return Ok(Some(DriverStop::WindowGone));
        };
        // Window tracking (FR-PERC-002): events first, the measured chain as a backstop.
        if let Some(tr) = self.tracker.as_mut() {
            let mut changes = match tr.poll() {
                Ok(c) => c,
                Err(e) if e.is_window_gone() => return Ok(Some(DriverStop::WindowGone)),
                Err(_) => Vec::new(),
            };
            if let Some(measured) = sample.chain {
                let known = tr.chain();
                if changes.is_empty()
                    && (measured.client_origin != known.client_origin
                        || measured.client_size != known.client_size)
                {
                    changes = tr.refresh().unwrap_or_default();
                }
            }
            let chain = tr.chain();
            if sample.chain.is_some() {
                sample.chain = Some(chain);
            }
            if !changes.is_empty() {
                self.generation = chain.generation;
                self.changed = true;
                if let Some(ind) = self.indicator.as_mut() {
                    let r = gamepilot_core::Rect::new(
                        chain.client_origin.x,
                        chain.client_origin.y,
                        chain.client_size.w,
                        chain.client_size.h,
                    );
                    let _ = ind.follow(r);
                }
                out.push(DriverEvent::Interlock {
                    kind: Interlock::WindowChanged {
                        generation: chain.generation,
                    },
                    detail: describe_changes(&changes, &chain),
                });
            }
        }
        self.sample = sample;
        // FR-SAFE-002: real-device input pauses the agent and releases everything at once.
        let user = self
            .watch
            .poll()?
            .into_iter()
            .find(|e| !e.synthetic && stops(e.kind));
        if let Some(ev) = user {
            self.pause(out)?;
            let device = self.watch.device_name(ev.sourceid).unwrap_or("?").to_string();
            return Ok(Some(DriverStop::UserInput {
                device,
                sourceid: ev.sourceid,
                input: ev.kind,
            }));
        }
        Ok(None)
    }

    /// Validate and queue an intention grounded in chain generation `grounded` (FR-ACT-006,
    /// FR-PERC-002). `None`: not grounded in an observation (a script line), never stale.
    pub fn submit(&mut self, intention: &Intention, grounded: Option<u64>) -> Result<ActionId, Rejection> {
        let ctx = self.context();
        match grounded {
            Some(g) => self.ex.submit_grounded(intention, g, &ctx),
            None => self.ex.submit(intention, &ctx),
        }
    }

    /// Submit under the session's own id, grounded in transform-chain generation `grounded`.
    pub fn submit_as(
        &mut self,
        id: ActionId,
        intention: &Intention,
        grounded: u64,
    ) -> Result<ActionId, Rejection> {
        let ctx = self.context();
        self.ex.submit_as(id, intention, grounded, &ctx)
    }

    /// The steering controller's wish for steering action `id` (see [`Executor::steer`]).
    pub fn steer(&mut self, id: ActionId, want: &[String], finish: bool) -> bool {
        self.ex.steer(id, want, finish)
    }

    /// Selective cancellation (ADR-0035 Ownership).
    pub fn cancel_owner(&mut self, owner: gamepilot_core::SubgoalId) -> Vec<Report> {
        self.ex.cancel_owner(owner)
    }

    /// Pause (user input, or an action held for the user's confirmation): cancel and release everything
    /// at once.
    pub fn pause(&mut self, out: &mut Vec<DriverEvent>) -> Result<(), RuntimeError> {
        let o = self.ex.pause_for_user();
        self.deliver(&o.events, out)?;
        self.publish();
        out.extend(o.reports.into_iter().map(DriverEvent::Report));
        if o.held_changed {
            out.push(DriverEvent::HeldChanged);
        }
        Ok(())
    }

    pub fn resume(&mut self) {
        self.ex.resume();
    }

    fn publish(&self) {
        if let Some(g) = self.guardian.as_ref() {
            crate::interlocks::publish(&g.shm, self.ex.held());
        }
    }

    fn deliver(
        &mut self,
        events: &[gamepilot_core::InputEvent],
        out: &mut Vec<DriverEvent>,
    ) -> Result<(), RuntimeError> {
        let skipped = self.sink.deliver(events)?;
        out.extend(skipped.into_iter().map(DriverEvent::Undeliverable));
        Ok(())
    }

    fn audit(&mut self, out: &mut Vec<DriverEvent>) -> Result<(), RuntimeError> {
        if let Some(d) = crate::interlocks::audit(self.sink.as_mut(), self.ex.held())? {
            out.push(DriverEvent::Interlock {
                kind: Interlock::HeldDivergence,
                detail: format!("{d:?}"),
            });
            out.push(DriverEvent::HeldDivergence(d));
        }
        self.last_audit = Instant::now();
        Ok(())
    }

    /// Steps 3–5 and the checks after: advance, reconcile, emit through the sink, publish the held set,
    /// audit against the server (on every release and once a second), keep the indicator up.
    pub fn step(&mut self, out: &mut Vec<DriverEvent>) -> Result<Option<DriverStop>, RuntimeError> {
        let o = self.ex.tick(&TickInput {
            now: now(),
            halt: self.halt.is_some(),
            foreground: self.sample.foreground,
            chain: self.sample.chain,
            pointer: self.sample.pointer,
        });
        self.deliver(&o.events, out)?;
        self.publish();
        for r in o.reports {
            match &r.kind {
                ActionEnd::ForcedRelease { input, held_ms } => out.push(DriverEvent::Interlock {
                    kind: Interlock::MaxHold,
                    detail: format!("{input} released after {held_ms} ms"),
                }),
                ActionEnd::Blocked {
                    reason: RejectReason::DeniedChord { chord },
                } => out.push(DriverEvent::Interlock {
                    kind: Interlock::DeniedKey,
                    detail: format!("{chord} would have formed; action {} stopped", r.id.0),
                }),
                _ => {}
            }
            out.push(DriverEvent::Report(r));
        }
        if o.held_changed {
            out.push(DriverEvent::HeldChanged);
        }
        if let ExecState::Halted { reason } = self.ex.state() {
            self.audit(out)?;
            return Ok(Some(DriverStop::Halted {
                reason,
                cause: halt_cause(reason, self.halt),
            }));
        }
        let lost = !self.sample.foreground && self.ex.active() > 0;
        if lost && !self.focus_lost_reported {
            out.push(DriverEvent::Interlock {
                kind: Interlock::FocusLost,
                detail: "target not foreground: everything released, nothing delivered".into(),
            });
        }
        self.focus_lost_reported = lost;
        if o.events.iter().any(|e| e.is_release()) || self.last_audit.elapsed() >= Duration::from_secs(1) {
            self.audit(out)?;
        }
        if self.last_raise.elapsed() >= Duration::from_secs(1) {
            let text = indicator_text(self.dry_run, self.state_label(), &self.panic);
            if let Some(ind) = self.indicator.as_mut() {
                let _ = ind.set_text(&text);
                let _ = ind.raise_and_draw();
            }
            self.last_raise = Instant::now();
        }
        Ok(None)
    }

    /// One whole tick with no submits.
    pub fn idle_tick(&mut self, out: &mut Vec<DriverEvent>) -> Result<Option<DriverStop>, RuntimeError> {
        if let Some(s) = self.begin_tick(|_| true, out)? {
            return Ok(Some(s));
        }
        self.step(out)
    }

    /// Keep ticking (heartbeat, interlocks) for `d`.
    fn idle_for(
        &mut self,
        d: Duration,
        out: &mut Vec<DriverEvent>,
    ) -> Result<Option<DriverStop>, RuntimeError> {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if let Some(s) = self.idle_tick(out)? {
                return Ok(Some(s));
            }
        }
        Ok(None)
    }

    /// Camera calibration before the session (FR-ACT-004/005, ADR-0035 "Neutral"): small relative moves
    /// through the executor (so every interlock applies), the frame shift measured in `region` (capture
    /// space; default the whole client area), fitted to pixels per count, turned into degrees per count
    /// with the horizontal field of view. On success the executor converts `camera_degrees` from now on.
    pub fn calibrate_camera(
        &mut self,
        region: Option<Rect>,
        fov_deg: f64,
        out: &mut Vec<DriverEvent>,
    ) -> Result<Result<CameraCalibrationResult, CalibrationFailure>, RuntimeError> {
        if self.dry_run {
            return Ok(Err(CalibrationFailure::Unmeasurable(
                "a dry run delivers no input, so nothing can be measured".into(),
            )));
        }
        let mut cap = WindowCapturer::new(&self.x, self.window)?;
        if let Some(s) = self.idle_for(Duration::from_millis(100), out)? {
            cap.close(&self.x);
            return Ok(Err(CalibrationFailure::Stopped(s)));
        }
        let size = self
            .sample
            .chain
            .map(|c| c.capture_size)
            .unwrap_or(gamepilot_core::Size::new(0, 0));
        let region = region.unwrap_or(Rect::new(0, 0, size.w, size.h));
        let mut cal = Calibrator::new(Axis::X, CALIBRATION_MOVES.to_vec(), region, 80);
        let result = (|| -> Result<Result<CameraCalibrationResult, CalibrationFailure>, RuntimeError> {
            while let Some((dx, dy)) = cal.next_move() {
                if let Some(s) = self.idle_for(Duration::from_millis(150), out)? {
                    return Ok(Err(CalibrationFailure::Stopped(s)));
                }
                let before = cap.capture(&self.x, now())?;
                let turn = Intention::new(
                    Action::Camera {
                        dx,
                        dy,
                        duration_ms: 300,
                    },
                    gamepilot_core::SubgoalId(0),
                );
                let id = match self.submit(&turn, None) {
                    Ok(id) => id,
                    Err(r) => return Ok(Err(CalibrationFailure::Rejected(r))),
                };
                while self.ex.is_active(id) {
                    if let Some(s) = self.idle_tick(out)? {
                        return Ok(Err(CalibrationFailure::Stopped(s)));
                    }
                }
                if let Some(s) = self.idle_for(Duration::from_millis(250), out)? {
                    return Ok(Err(CalibrationFailure::Stopped(s)));
                }
                let after = cap.capture(&self.x, now())?;
                let _ = cal.observe(&before.view(), &after.view());
            }
            let samples: Vec<(i32, f32)> = cal.samples().iter().map(|s| (s.counts, s.shift_px)).collect();
            let Some(c) = CameraCalibration::from_samples(cal.samples(), &[]) else {
                return Ok(Err(CalibrationFailure::Unmeasurable(format!(
                    "the view did not shift measurably in {region:?} ({} of {} moves matched); a menu or a view that does not turn cannot be calibrated",
                    samples.len(),
                    CALIBRATION_MOVES.len()
                ))));
            };
            Ok(Ok(CameraCalibrationResult::new(c, fov_deg, size.w, samples)))
        })();
        cap.close(&self.x);
        let result = result?;
        if let Ok(r) = &result {
            self.ex.set_camera_scale(Some(r.scale()));
        }
        Ok(result)
    }

    /// Every exit path releases everything (FR-ACT-001, INV-SAFE-002), checks the server, disarms and lets
    /// the guardian go.
    pub fn finish(mut self) -> DriverStats {
        let o = self.ex.stop(CancelReason::Halted);
        let released = !o.events.is_empty();
        let _ = self.sink.deliver(&o.events);
        // A round trip on the sink's connection: the server has processed every release before we go on,
        // and anything the record does not own is released too (INV-ACT-002 on the release path).
        let _ = crate::interlocks::audit(self.sink.as_mut(), self.ex.held());
        self.publish();
        drop(self.indicator.take());
        if let Some(g) = self.guardian.take() {
            g.finish();
        }
        let late = &self.ticker.lateness;
        DriverStats {
            lateness_p50_us: late.quantile(0.5),
            lateness_p99_us: late.quantile(0.99),
            ticks: late.len(),
            events: self.sink.count(),
            delivers: self.sink.delivers(),
            released_on_stop: released,
        }
    }
}

/// `run --calibrate-camera`: a driver of its own (with its own guardian, every interlock) that measures the
/// camera before the session starts and goes away again. `Ok(None)` when the measurement failed (said on
/// stderr; camera turns in degrees are then refused with a typed reason).
#[allow(clippy::too_many_arguments)]
pub fn calibrate_before_session(
    display: Option<String>,
    window: u32,
    exec: ExecutorConfig,
    panic: Chord,
    stale_ms: u64,
    hz: u32,
    region: Option<Rect>,
    fov_deg: f64,
) -> Result<Result<CameraCalibrationResult, CalibrationFailure>, RuntimeError> {
    let guardian = GuardianHandle::spawn(display.as_deref(), &panic, stale_ms)?;
    let mut d = Driver::start(
        DriverSetup {
            display,
            window,
            exec,
            dry_run: false,
            hz,
            panic,
            camera: None,
            indicator: true,
        },
        guardian,
    )?;
    let mut out = Vec::new();
    let r = d.calibrate_camera(region, fov_deg, &mut out);
    d.finish();
    r
}

/// The relative moves of a calibration run, in counts (small, both directions; FR-ACT-004).
pub const CALIBRATION_MOVES: [i32; 3] = [30, -20, 45];

/// A measured camera calibration, as printed and recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CameraCalibrationResult {
    /// Capture pixels the view moves per count (negative: content moves against the turn).
    pub px_per_count_x: f32,
    pub px_per_count_y: f32,
    /// Degrees of turn per count, from the field of view.
    pub deg_per_count: f64,
    pub fov_deg: f64,
    pub width_px: u32,
    /// (counts, measured shift in px) per matched move.
    pub samples: Vec<(i32, f32)>,
}

impl CameraCalibrationResult {
    pub fn new(c: CameraCalibration, fov_deg: f64, width_px: u32, samples: Vec<(i32, f32)>) -> Self {
        CameraCalibrationResult {
            px_per_count_x: c.px_per_count_x,
            px_per_count_y: c.px_per_count_y,
            deg_per_count: c.degrees_per_count(fov_deg as f32, width_px) as f64,
            fov_deg,
            width_px,
            samples,
        }
    }

    /// The executor's conversion (square pixels: the same degrees per pixel on both axes).
    pub fn scale(&self) -> CameraScale {
        let per_px = self.fov_deg / self.width_px.max(1) as f64;
        let y = (self.px_per_count_y.abs() as f64 * per_px).max(1e-6);
        CameraScale {
            deg_per_count_x: self.deg_per_count,
            deg_per_count_y: y,
        }
    }
}

/// Why a calibration gave no result.
#[derive(Debug, Clone, PartialEq)]
pub enum CalibrationFailure {
    /// The view did not shift measurably (or a dry run).
    Unmeasurable(String),
    /// The executor refused the move.
    Rejected(Rejection),
    /// An interlock stopped the driver meanwhile.
    Stopped(DriverStop),
}

impl fmt::Display for CalibrationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CalibrationFailure::Unmeasurable(s) => write!(f, "camera calibration impossible: {s}"),
            CalibrationFailure::Rejected(r) => write!(f, "camera calibration move refused: {r}"),
            CalibrationFailure::Stopped(s) => write!(f, "camera calibration stopped: {s:?}"),
        }
    }
}

fn indicator_text(dry_run: bool, state: &str, panic: &Chord) -> String {
    // FR-SAFE-007: the words say whether the agent has hands right now.
    let state = if dry_run && state == "ARMED" {
        "DRY RUN"
    } else {
        state
    };
    format!("gamepilot: {state} (panic {panic})")
}

fn describe_changes(changes: &[WindowChange], chain: &TransformChain) -> String {
    let what: Vec<String> = changes.iter().map(|c| format!("{c:?}").to_lowercase()).collect();
    format!(
        "{} → generation {}: client {}x{} at ({}, {}), scale {}",
        what.join("+"),
        chain.generation,
        chain.client_size.w,
        chain.client_size.h,
        chain.client_origin.x,
        chain.client_origin.y,
        chain.scale_factor
    )
}

/// Capture retry with back-off (FR-PERC-009: a capture error is retried, never a silently dead thread).
/// Pure: time is an argument.
#[derive(Debug, Clone)]
pub struct CaptureRetry {
    failing_since: Option<Instant>,
    failures: u32,
    next_try: Option<Instant>,
    /// Failing continuously for longer than this gives up with a typed report.
    pub give_up_after: Duration,
    pub max_backoff: Duration,
}

/// What to do after a failed capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryVerdict {
    /// Try again at `after` (from now); `recreate` asks to re-target the capturer first.
    Retry { after: Duration, recreate: bool },
    /// The failure has persisted past the bound.
    GiveUp { failures: u32 },
}

impl Default for CaptureRetry {
    fn default() -> Self {
        CaptureRetry {
            failing_since: None,
            failures: 0,
            next_try: None,
            give_up_after: Duration::from_secs(5),
            max_backoff: Duration::from_millis(500),
        }
    }
}

impl CaptureRetry {
    /// Whether a capture should be attempted at `now` (false while backing off).
    pub fn should_try(&self, now: Instant) -> bool {
        self.next_try.is_none_or(|t| now >= t)
    }

    #[cfg(test)]
    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn succeeded(&mut self) {
        self.failing_since = None;
        self.failures = 0;
        self.next_try = None;
    }

    pub fn failed(&mut self, now: Instant) -> RetryVerdict {
        let since = *self.failing_since.get_or_insert(now);
        self.failures += 1;
        if now.saturating_duration_since(since) >= self.give_up_after {
            return RetryVerdict::GiveUp {
                failures: self.failures,
            };
        }
        let after = (Duration::from_millis(16) * 2u32.saturating_pow(self.failures.min(10) - 1))
            .min(self.max_backoff);
        self.next_try = Some(now + after);
        RetryVerdict::Retry {
            after,
            recreate: self.failures.is_multiple_of(4),
        }
    }
}

/// Frame-health judgement from what each tick sees (FR-PERC-009). Pure: time is an argument.
#[derive(Debug, Clone)]
pub struct HealthJudge {
    same: Option<(u64, MonoTime)>,
    /// Pixels unchanged for this long read as frozen.
    pub frozen_after: Duration,
    last: FrameHealth,
}

/// What one tick saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameSeen {
    /// `None`: the capture failed this tick.
    pub signature: Option<u64>,
    pub black: bool,
    /// A diagnosed unsupported mode (from `gamepilot_x11::tracking::FrameHealth`).
    pub unsupported: Option<FrameProblem>,
    pub occluded: bool,
}

impl Default for HealthJudge {
    fn default() -> Self {
        HealthJudge {
            same: None,
            frozen_after: Duration::from_secs(30),
            last: FrameHealth::Ok,
        }
    }
}

impl HealthJudge {
    pub fn state(&self) -> FrameHealth {
        self.last
    }

    /// Judge one tick; returns the state and whether it changed since the previous tick.
    pub fn judge(&mut self, seen: FrameSeen, now: MonoTime) -> (FrameHealth, bool) {
        let frozen = match seen.signature {
            Some(sig) => match self.same {
                Some((s, since)) if s == sig => now.since(since) >= self.frozen_after,
                _ => {
                    self.same = Some((sig, now));
                    false
                }
            },
            None => false,
        };
        let state = if let Some(problem) = seen.unsupported {
            FrameHealth::Unsupported { problem }
        } else if seen.signature.is_none() {
            FrameHealth::CaptureError
        } else if seen.black {
            FrameHealth::Black
        } else if seen.occluded {
            FrameHealth::Occluded
        } else if frozen {
            FrameHealth::Frozen
        } else {
            FrameHealth::Ok
        };
        let changed = state != self.last;
        self.last = state;
        (state, changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(sig: Option<u64>) -> FrameSeen {
        FrameSeen {
            signature: sig,
            black: false,
            unsupported: None,
            occluded: false,
        }
    }

    #[test]
    fn frame_health_names_black_frozen_occluded_and_unsupported() {
        // FR-PERC-009: each state is typed and reported on change only
        let mut j = HealthJudge {
            frozen_after: Duration::from_secs(2),
            ..HealthJudge::default()
        };
        let t = MonoTime::from_millis;
        assert_eq!(j.judge(seen(Some(1)), t(0)), (FrameHealth::Ok, false));
        assert_eq!(j.judge(seen(Some(1)), t(1000)), (FrameHealth::Ok, false));
        assert_eq!(j.judge(seen(Some(1)), t(2100)), (FrameHealth::Frozen, true));
        assert_eq!(j.judge(seen(Some(1)), t(2200)), (FrameHealth::Frozen, false));
        assert_eq!(j.judge(seen(Some(2)), t(2300)), (FrameHealth::Ok, true));
        let black = FrameSeen {
            black: true,
            ..seen(Some(0))
        };
        assert_eq!(j.judge(black, t(2400)), (FrameHealth::Black, true));
        let occluded = FrameSeen {
            occluded: true,
            ..seen(Some(3))
        };
        assert_eq!(j.judge(occluded, t(2500)), (FrameHealth::Occluded, true));
        assert_eq!(j.judge(seen(None), t(2600)), (FrameHealth::CaptureError, true));
        let gl = FrameSeen {
            unsupported: Some(FrameProblem::BlackGlPixmap),
            ..black
        };
        assert_eq!(
            j.judge(gl, t(2700)).0,
            FrameHealth::Unsupported {
                problem: FrameProblem::BlackGlPixmap
            }
        );
        assert_eq!(j.state().name(), "unsupported");
    }

    #[test]
    fn capture_errors_back_off_then_give_up_past_the_bound() {
        // FR-PERC-009: retried with back-off, never silent; a persistent error ends with a typed report
        let mut r = CaptureRetry::default();
        let t0 = Instant::now();
        assert!(r.should_try(t0));
        let mut afters = Vec::new();
        let mut now = t0;
        loop {
            match r.failed(now) {
                RetryVerdict::Retry { after, .. } => {
                    assert!(!r.should_try(now), "backing off");
                    afters.push(after);
                    now += after;
                    assert!(r.should_try(now));
                }
                RetryVerdict::GiveUp { failures } => {
                    assert!(failures > 5);
                    break;
                }
            }
        }
        assert!(now.duration_since(t0) >= r.give_up_after);
        assert!(afters.windows(2).all(|w| w[0] <= w[1]), "{afters:?}");
        assert_eq!(*afters.last().unwrap_or(&Duration::ZERO), r.max_backoff);
        assert_eq!(afters[0], Duration::from_millis(16));
        // A success resets everything.
        r.succeeded();
        assert_eq!(r.failures(), 0);
        assert!(matches!(r.failed(now), RetryVerdict::Retry { .. }));
    }

    #[test]
    fn a_halt_names_the_guardians_cause_or_the_budget() {
        // INV-SAFE-002: what halted input is typed, never a string
        assert_eq!(
            halt_cause(HaltReason::HaltFlag, Some(HaltCause::StaleHeartbeat)),
            HaltCause::StaleHeartbeat
        );
        assert_eq!(
            halt_cause(HaltReason::BudgetSpent, Some(HaltCause::Panic)),
            HaltCause::BudgetSpent
        );
        assert_eq!(halt_cause(HaltReason::HaltFlag, None), HaltCause::Unknown);
    }

    #[test]
    fn calibration_result_converts_to_the_executors_scale() {
        // FR-ACT-004: px/count from frames → degrees/count with the field of view
        let c = CameraCalibration {
            px_per_count_x: -2.0,
            px_per_count_y: -2.0,
        };
        let r = CameraCalibrationResult::new(c, 90.0, 1280, vec![(30, -60.0)]);
        assert!((r.deg_per_count - 2.0 * 90.0 / 1280.0).abs() < 1e-6);
        let s = r.scale();
        assert!((s.deg_per_count_x - r.deg_per_count).abs() < 1e-9);
        assert!((s.deg_per_count_y - s.deg_per_count_x).abs() < 1e-6);
        assert_eq!(s.counts(r.deg_per_count * 10.0, 0.0), Some((10, 0)));
    }
}
