//! The reflex cadence of `gamepilot run`: one thread at a fixed rate that steps the executor (ADR-0035)
//! through the shared reflex driver (`crate::driver`, the same tick as `act`), evaluates sensors
//! and postconditions, classifies frames, judges frame health, watches for user input and never waits
//! on a model (FR-LOOP-002). It talks to the loop thread only through the typed channels below.

use crate::driver::{CaptureRetry, Driver, DriverEvent, DriverSetup, DriverStop, FrameSeen, RetryVerdict};
use crate::now;
use crate::reflex_core::{value_bool, value_num};
use crate::GuardianHandle;
use crate::RuntimeError;
use gamepilot_core::{Chord, FrameHealth, Interlock, MonoTime, Rect, SubgoalId, Worker};
use gamepilot_executor::{CameraScale, ExecutorConfig, Report};
use gamepilot_sensor::{Atlas, Evaluator, Expression, RecognitionCache};
use gamepilot_session::{ExternalStop, Input, ReflexCommand, ReflexStats};
use gamepilot_vision::{Perceiver, Thumb};

/// Ticks of held input before the test-only reflex panic strikes (half a second at 60 Hz).
const FAULT_HELD_TICKS: u64 = 30;
use gamepilot_x11::tracking::BlackFrameCheck;
use gamepilot_x11::userinput::RawKind;
use gamepilot_x11::WindowCapturer;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `run` adds to the reflex beyond the loop's setup: the template atlas (`--templates`), the
/// camera calibration (`--calibrate-camera`) and lines for the recording.
#[derive(Debug, Clone, Default)]
pub struct ReflexExtras {
    pub templates: Arc<Atlas>,
    pub camera: Option<CameraScale>,
    /// Session notes for the recording (calibration result, a skipped GPU watch).
    pub notes: Vec<String>,
}

pub struct ReflexSetup {
    pub display: Option<String>,
    pub window: u32,
    pub exec: ExecutorConfig,
    pub dry_run: bool,
    pub hz: u32,
    pub program: Option<gamepilot_sensor::Program>,
    pub declared: gamepilot_core::Size,
    pub goal: Option<Expression>,
    /// The postconditions a plan may use; `ReflexCommand::Subgoal` names the active one by its index.
    pub postconditions: Vec<Expression>,
    pub panic: Chord,
    pub extras: ReflexExtras,
}

/// After a confirmation hold ends, the motion and releases that finish the user's answer (the click on the
/// overlay, the Enter typed at the terminal) are not a stop (FR-SAFE-002 still applies to any press).
const HOLD_GRACE: Duration = Duration::from_millis(1500);

/// Whether one real-device event stops the run (FR-SAFE-002). While an action is held for confirmation the
/// executor is already paused and the user is expected to reach for the overlay, so nothing is a stop;
/// just after, only the tail of that answer (motion, button or key release) is forgiven.
fn stops_the_run(kind: RawKind, holding: bool, in_grace: bool) -> bool {
    let tail_of_the_click = in_grace
        && matches!(
            kind,
            RawKind::Motion | RawKind::ButtonRelease | RawKind::KeyRelease
        );
    !holding && !tail_of_the_click
}

/// Width of the reflex thumbnail.
const THUMB_W: u16 = 160;

/// A full-size frame buffer, allocated once, into which only the sensor regions are copied each tick.
#[derive(Default)]
struct SparseFrame {
    size: gamepilot_core::Size,
    data: Vec<u8>,
}

impl SparseFrame {
    fn fill(
        &mut self,
        size: gamepilot_core::Size,
        regions: &[Rect],
        mut read: impl FnMut(Rect) -> Option<gamepilot_core::Frame>,
    ) {
        if self.size != size {
            self.size = size;
            self.data = vec![0; size.w as usize * size.h as usize * 4];
        }
        let bounds = Rect::new(0, 0, size.w, size.h);
        for r in regions {
            let Some(r) = r.clamped_to(&bounds) else { continue };
            let Some(f) = read(r) else { continue };
            let v = f.view();
            for row in 0..r.h.min(v.height) {
                let src = v.row(row);
                let start = ((r.y as usize + row as usize) * size.w as usize + r.x as usize) * 4;
                if let Some(dst) = self.data.get_mut(start..start + src.len()) {
                    dst.copy_from_slice(src);
                }
            }
        }
    }

    fn view(&self) -> Option<gamepilot_core::FrameView<'_>> {
        gamepilot_core::FrameView::new(
            self.size.w,
            self.size.h,
            self.size.w as usize * 4,
            gamepilot_core::PixelFormat::Bgrx,
            &self.data,
        )
    }
}

/// The pixels `template_present(name)` reads: the template's anchor widened by its search radius.
fn template_region(atlas: &Atlas, p: &gamepilot_sensor::program::Primitive) -> Option<Rect> {
    let gamepilot_sensor::program::Primitive::Template { name, .. } = p else {
        return None;
    };
    let t = gamepilot_sensor::TemplateAtlas::template(atlas, name)?;
    let r = t.search_radius as i32;
    let s = t.size();
    Some(Rect::new(
        t.anchor.x - r,
        t.anchor.y - r,
        s.w + 2 * t.search_radius,
        s.h + 2 * t.search_radius,
    ))
}

/// Run the reflex cadence until `Stop`, the window vanishes, a halt, user input or a capture failure.
pub fn run(
    setup: ReflexSetup,
    guardian: GuardianHandle,
    rx: Receiver<ReflexCommand>,
    tx: SyncSender<crate::worker::Inbox>,
) -> Result<(), RuntimeError> {
    // Never blocks the tick: a full queue (the loop is hung) drops the report and counts it.
    let dropped = std::cell::Cell::new(0u64);
    // The session steps about one tick report in six (`ReflexFeed`: at once on a scene change, a goal or
    // subgoal change or focus, with the strongest change and worst lateness since the last one); the
    // rest are folded here, so the loop is woken ten times a second by ticks, not sixty.
    let feed = std::cell::RefCell::new(gamepilot_session::ReflexFeed::new(6));
    let send = |m: Input| {
        let Some(m) = feed.borrow_mut().pass(m) else {
            return;
        };
        if let Err(std::sync::mpsc::TrySendError::Full(_)) = tx.try_send(crate::worker::Inbox::Reflex(m)) {
            dropped.set(dropped.get() + 1);
            if dropped.get() == 1 {
                eprintln!("reflex: the loop is not reading its reports; dropping them (counted)");
            }
        }
    };
    let mut d = Driver::start(
        DriverSetup {
            display: setup.display.clone(),
            window: setup.window,
            exec: setup.exec.clone(),
            dry_run: setup.dry_run,
            hz: setup.hz,
            panic: setup.panic.clone(),
            camera: setup.extras.camera,
            indicator: true,
        },
        guardian,
    )?;
    // The user's templates, then those the agent declares (cut from the frame when declared).
    let mut atlas: Atlas = (*setup.extras.templates).clone();
    let mut goal: Option<Expression> = setup.goal.clone();
    let mut postconditions: Vec<Expression> = setup.postconditions.clone();
    let mut capturer = match WindowCapturer::new(d.x11(), setup.window) {
        Ok(c) => c,
        Err(e) => {
            d.finish();
            return Err(e.into());
        }
    };
    let mut perceiver = Perceiver::new();
    let mut sparse = SparseFrame::default();
    let mut evaluator = setup.program.clone().map(|p| Evaluator::new(p, setup.declared));
    let mut recognition = RecognitionCache::new(64, 8);
    // region_integer is read by tesseract on its own thread; a missing tesseract leaves it undefined.
    let mut ocr_worker = crate::sensor_worker::SensorWorker::spawn(crate::sensor_worker::OcrDigits::new).ok();
    let mut subgoal: Option<(SubgoalId, usize, Expression)> = None;
    let mut steering: Vec<crate::steering::SteerRun> = Vec::new();
    let mut core = crate::reflex_core::ReflexCore::default();
    let mut holding = false;
    let mut grace_until: Option<Instant> = None;
    // FR-PERC-009: frame health (judged by `core`), black-frame diagnosis, occlusion and capture retry.
    let mut retry = CaptureRetry::default();
    let mut black = BlackFrameCheck::default();
    let mut occluded = false;
    let mut last_occlusion = Instant::now() - Duration::from_secs(1);
    let mut ev: Vec<DriverEvent> = Vec::new();
    let forward = |ev: &mut Vec<DriverEvent>| {
        for e in ev.drain(..) {
            match e {
                DriverEvent::Report(r) => send(action_ended(r)),
                DriverEvent::Interlock { kind, detail } => send(Input::Interlock {
                    interlock: kind,
                    detail,
                }),
                DriverEvent::HeldChanged | DriverEvent::Undeliverable(_) | DriverEvent::HeldDivergence(_) => {
                }
            }
        }
    };
    let report_stop = |stop: DriverStop| match stop.interlock() {
        Some((interlock, detail)) => send(Input::Interlock { interlock, detail }),
        None => send(Input::WindowGone),
    };
    // After the helpers above started (they must not inherit it): the tick runs when it is due.
    eprintln!("reflex: {}", crate::worker::raise_reflex_priority());
    let panic_at = crate::worker::fault_tick("reflex-panic");
    let block_at = crate::worker::fault_tick("reflex-block");
    let mut held_ticks = 0u64;
    // A panic in the tick is caught here so that `finish` below still releases everything through our
    // own path (FR-ACT-001) before the thread reports its end.
    let body = std::panic::AssertUnwindSafe(|| loop {
        let tick = core.begin_tick();
        // The faults strike only once input has been held for half a second, so that a test watching
        // the X server sees it held first even on a loaded machine.
        held_ticks = if d.executor().held().is_empty() {
            0
        } else {
            held_ticks + 1
        };
        let strike = |at: Option<u64>| at.is_some_and(|n| tick >= n && held_ticks >= FAULT_HELD_TICKS);
        if strike(panic_at) {
            panic!("injected fault reflex-panic at tick {tick} while holding input (test-only fault hook)");
        }
        if block_at.is_some_and(|n| tick >= n && held_ticks > 0) {
            // A tick that never returns (as in a blocking call that hangs), while holding input.
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        // FR-SAFE-002: real-device input pauses the agent and releases everything at once (not the user's
        // click on the confirmation overlay, FR-SAFE-005; see `stops_the_run`).
        let in_grace = grace_until.is_some_and(|g| Instant::now() < g);
        let stop = d.begin_tick(|k| stops_the_run(k, holding, in_grace), &mut ev)?;
        forward(&mut ev);
        if let Some(stop) = stop {
            let paused_by_user = matches!(stop, DriverStop::UserInput { .. });
            report_stop(stop);
            if !paused_by_user {
                return Ok(());
            }
            // FR-SAFE-002: paused, not stopped. The driver released everything; the reflex keeps ticking
            // (frames, sensors) with the executor paused until the session, on the user's resume, says so.
            holding = true;
        }
        // FR-PERC-002: after a move or resize the capture is re-targeted (the pixmap is named again).
        if d.take_window_changed() {
            if let Ok(c) = WindowCapturer::new(d.x11(), setup.window) {
                std::mem::replace(&mut capturer, c).close(d.x11());
            }
        }
        loop {
            match rx.try_recv() {
                Ok(ReflexCommand::Submit {
                    action,
                    intention,
                    generation,
                }) => match d.submit_as(action, &intention, generation) {
                    Ok(_) => send(Input::ActionAccepted { action }),
                    Err(r) => send(Input::ActionRejected {
                        action,
                        reason: r.reason,
                    }),
                },
                Ok(ReflexCommand::Watch {
                    action,
                    region,
                    settle_ms,
                }) => core.watch(action, region, Duration::from_millis(settle_ms), now()),
                Ok(ReflexCommand::Steer { action, plan }) => {
                    if d.executor().is_active(action) {
                        steering.push(crate::steering::SteerRun::new(action, plan, now()));
                    } else {
                        send(Input::Steered {
                            action,
                            end: gamepilot_session::SteerEnd::TimedOut { left_px: f64::NAN },
                            sightings: 0,
                        });
                    }
                }
                Ok(ReflexCommand::CancelOwner { subgoal: owner }) => {
                    for r in d.cancel_owner(owner) {
                        send(action_ended(r));
                    }
                }
                Ok(ReflexCommand::Subgoal { active }) => {
                    subgoal = active.and_then(|(s, k)| postconditions.get(k).cloned().map(|e| (s, k, e)));
                }
                Ok(ReflexCommand::Sensors {
                    source,
                    goal: goal_source,
                    postconditions: sources,
                    templates,
                }) => {
                    // The session compiled every line before sending it; a failure here is said and the
                    // sensors stay as they were.
                    match crate::declared::compile(&source, goal_source.as_deref(), &sources) {
                        Ok(c) => {
                            let wanted: Vec<_> = templates
                                .into_iter()
                                .filter(|(name, _)| {
                                    gamepilot_sensor::TemplateAtlas::template(&atlas, name).is_none()
                                })
                                .collect();
                            if !wanted.is_empty() {
                                let frame = capturer.capture(d.x11(), now());
                                for note in crate::declared::cut_templates(
                                    &mut atlas,
                                    frame.as_ref().ok(),
                                    &wanted,
                                    d.chain(),
                                    setup.declared,
                                ) {
                                    eprintln!("reflex: {note}");
                                }
                            }
                            evaluator = Some(Evaluator::new(c.program, setup.declared));
                            goal = c.goal;
                            postconditions = c.postconditions;
                            subgoal = subgoal
                                .and_then(|(s, k, _)| postconditions.get(k).cloned().map(|e| (s, k, e)));
                        }
                        Err(e) => eprintln!("reflex: the declared sensors were not taken: {e}"),
                    }
                }
                Ok(ReflexCommand::Pause { paused: on }) => {
                    if on && !holding {
                        d.pause(&mut ev)?;
                        forward(&mut ev);
                    } else if !on && holding {
                        d.resume();
                        grace_until = Some(Instant::now() + HOLD_GRACE);
                    }
                    holding = on;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Ok(()),
            }
        }
        // move_to: track, let the controller choose the keys, pass its wish to the executor.
        if !steering.is_empty() {
            let size = d
                .chain()
                .map(|c| c.client_size)
                .unwrap_or(gamepilot_core::Size::new(1, 1));
            let t = now();
            steering.retain_mut(|run| match run.tick(&mut d, &mut capturer, size, t) {
                Some(end) => {
                    send(Input::Steered {
                        action: run.action,
                        end,
                        sightings: run.sightings,
                    });
                    false
                }
                None => true,
            });
        }
        // The five steps (halt, foreground, advance, reconcile, emit + publish), audit, indicator.
        let stop = d.step(&mut ev)?;
        forward(&mut ev);
        if let Some(stop) = stop {
            report_stop(stop);
            return Ok(());
        }
        // Perception of the reflex tick without a full-resolution read-back (NFR-PERC-002): a server-scaled
        // thumbnail for the frame class, signature and change watches, and only the pixel regions that
        // the declared sensors and postconditions cover, copied into a reused sparse frame.
        let t: MonoTime = now();
        if !retry.should_try(Instant::now()) {
            continue;
        }
        if last_occlusion.elapsed() >= Duration::from_millis(500) {
            occluded = gamepilot_x11::tracking::occluders(d.x11(), setup.window)
                .map(|o| !o.is_empty())
                .unwrap_or(false);
            last_occlusion = Instant::now();
        }
        let thumb = match capturer.capture_thumbnail(d.x11(), THUMB_W, t) {
            Ok(f) => {
                retry.succeeded();
                f
            }
            Err(e) if e.is_window_gone() => {
                send(Input::WindowGone);
                return Ok(());
            }
            Err(e) => {
                // FR-PERC-009: named (unsupported mode or transient), retried with back-off, and past the
                // bound reported as a typed failure the loop stops on.
                let detail = e.to_string();
                let diag = black.check(d.x11(), setup.window, &Err(e), t);
                let problem = diag.as_ref().map(|g| g.problem);
                let seen = FrameSeen {
                    signature: None,
                    black: false,
                    unsupported: diag.as_ref().filter(|g| g.unsupported).map(|g| g.problem),
                    occluded,
                };
                let human = diag
                    .as_ref()
                    .map(|g| format!("{}; fix: {}", g.message, g.fix))
                    .unwrap_or_else(|| detail.clone());
                if let (_, Some(told)) = core.judge(seen, Some(human.clone()), t) {
                    send(told);
                }
                match retry.failed(Instant::now()) {
                    RetryVerdict::Retry { recreate, .. } => {
                        if recreate {
                            if let Ok(c) = WindowCapturer::new(d.x11(), setup.window) {
                                std::mem::replace(&mut capturer, c).close(d.x11());
                            }
                        }
                    }
                    RetryVerdict::GiveUp { failures } => {
                        send(Input::Interlock {
                            interlock: Interlock::CaptureFailed { problem },
                            detail: format!("{human} ({failures} attempts in {:?})", retry.give_up_after),
                        });
                        return Ok(());
                    }
                }
                continue;
            }
        };
        let view = thumb.view();
        let is_black = view.is_all_black();
        let unsupported = if is_black {
            black
                .check(d.x11(), setup.window, &Ok(thumb.clone()), t)
                .filter(|g| g.unsupported)
        } else {
            if core.health() == FrameHealth::Black || matches!(core.health(), FrameHealth::Unsupported { .. })
            {
                black = BlackFrameCheck::default();
            }
            None
        };
        let full_size = d
            .chain()
            .map(|c| c.client_size)
            .unwrap_or(gamepilot_core::Size::new(view.width, view.height));
        let class = perceiver
            .classify_thumb(Thumb::from_view(&view, THUMB_W as u32))
            .class;
        let signature = crate::reflex_core::region_hash(&view, None);
        let (health, told) = core.judge(
            FrameSeen {
                signature: Some(signature),
                black: is_black,
                unsupported: unsupported.as_ref().map(|g| g.problem),
                occluded,
            },
            unsupported
                .as_ref()
                .map(|g| format!("{}; fix: {}", g.message, g.fix)),
            t,
        );
        if let Some(told) = told {
            send(told);
        }
        let mut readings = crate::reflex_core::SensorReadings::default();
        if let (Some(ev), Some(chain)) = (evaluator.as_mut(), d.chain()) {
            let mut regions: Vec<Rect> = (0..ev.program().primitives().len())
                .filter_map(|k| ev.region_of(k))
                .collect();
            regions.extend(
                ev.program()
                    .primitives()
                    .iter()
                    .filter_map(|p| template_region(&atlas, p)),
            );
            for e in goal.iter().chain(subgoal.as_ref().map(|(_, _, e)| e)) {
                regions.extend(
                    e.primitives()
                        .iter()
                        .filter_map(|p| p.region())
                        .map(|r| chain.rescale_rect_from(r, setup.declared)),
                );
                regions.extend(e.primitives().iter().filter_map(|p| template_region(&atlas, p)));
            }
            sparse.fill(full_size, &regions, |r| {
                capturer.capture_region(d.x11(), r, t).ok()
            });
            let Some(sview) = sparse.view() else { continue };
            let mut ectx = gamepilot_sensor::EvalContext {
                frame: sview,
                chain,
                atlas: &atlas,
                recognition: &mut recognition,
            };
            let vals = ev.tick(&mut ectx).to_vec();
            for (def, v) in ev.program().sensors().iter().zip(vals.iter()) {
                readings.sensors.push((def.name.clone(), value_num(v)));
            }
            if let Some(g) = goal.as_ref() {
                readings.goal_met = value_bool(&ev.evaluate(g, &mut ectx));
            }
            if let Some((id, _, expr)) = subgoal.as_ref() {
                readings.subgoal = Some(gamepilot_session::SubgoalCheck {
                    subgoal: *id,
                    met: value_bool(&ev.evaluate(expr, &mut ectx)),
                });
            }
            // region_integer never blocks the tick: requests go to the recognition worker thread and
            // readings come back on later ticks; until then the value is undefined (never stale, never 0).
            if let Some(w) = ocr_worker.as_mut() {
                w.submit(&mut recognition);
                w.collect(&mut recognition);
            }
        }
        for e in core.sample_watches(&view, full_size, t) {
            send(e);
        }
        let facts = crate::reflex_core::TickFacts {
            held: d.executor().held().iter().count() as u32,
            late_us: d.late_us(),
            generation: d.generation(),
            foreground: d.foreground(),
        };
        send(core.report(class, signature, health, readings, facts));
    });
    let result: Result<(), RuntimeError> = std::panic::catch_unwind(body)
        .unwrap_or_else(|p| Err(RuntimeError::Panicked(crate::worker::panic_text(p.as_ref()))));
    // Every exit path releases everything (FR-ACT-001, INV-SAFE-002).
    capturer.close(d.x11());
    let stats = d.finish();
    if let Err(e) = &result {
        send(Input::Stop {
            reason: ExternalStop::WorkerDied {
                worker: Worker::Reflex,
                detail: e.to_string(),
            },
        });
    }
    send(Input::ReflexStopped(ReflexStats {
        ticks: stats.ticks,
        lateness_p50_us: stats.lateness_p50_us,
        lateness_p99_us: stats.lateness_p99_us,
        events: stats.events,
    }));
    result
}

/// An executor report as the session's input: the action's end, under the id the session gave it.
fn action_ended(r: Report) -> Input {
    Input::ActionEnded {
        action: r.id,
        end: r.kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_input_stops_the_run_except_the_click_on_the_confirmation_overlay() {
        // FR-SAFE-002 as before; FR-SAFE-005: the user answering the overlay is not a takeover
        for kind in [
            RawKind::KeyPress,
            RawKind::KeyRelease,
            RawKind::ButtonPress,
            RawKind::ButtonRelease,
            RawKind::Motion,
        ] {
            assert!(stops_the_run(kind, false, false), "{kind:?} stops a normal run");
            assert!(!stops_the_run(kind, true, false), "{kind:?} during a hold");
        }
        assert!(!stops_the_run(RawKind::Motion, false, true));
        assert!(!stops_the_run(RawKind::ButtonRelease, false, true));
        assert!(
            !stops_the_run(RawKind::KeyRelease, false, true),
            "the Enter typed at the terminal"
        );
        assert!(
            stops_the_run(RawKind::ButtonPress, false, true),
            "a new press after the hold stops"
        );
        assert!(stops_the_run(RawKind::KeyPress, false, true));
    }
}
