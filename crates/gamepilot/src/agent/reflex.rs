//! The reflex cadence of `gamepilot run`: one thread at a fixed rate that steps the executor (ADR-0035),
//! evaluates sensors and postconditions, classifies frames, watches for user input and never waits on a
//! model (FR-LOOP-002). It talks to the loop thread only through channels.

use crate::cmd::act::{GuardianHandle, Ticker};
use crate::cmd::common::now;
use gamepilot_core::action::Intention;
use gamepilot_core::{MonoTime, Rect, SubgoalId};
use gamepilot_executor::{
    CancelReason, Context as ExecContext, ExecState, Executor, ExecutorConfig, HeldRecord, Report, TickInput,
};
use gamepilot_sensor::{Evaluator, Expression, NoTemplates, RecognitionCache, Value};
use gamepilot_vision::{FrameClass, Perceiver, Thumb};
use gamepilot_x11::input::{DryRunSink, InputSink, XTestSink};
use gamepilot_x11::userinput::{RawInputWatch, RawKind, Watch};
use gamepilot_x11::{WindowCapturer, X11};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// Requests from the loop thread.
#[derive(Debug)]
pub enum ToReflex {
    /// Submit an intention; `tag` is the loop's action id.
    Submit {
        tag: u64,
        intention: Intention,
    },
    /// Watch for change after an action: the region (capture space) or the whole frame.
    Watch {
        tag: u64,
        region: Option<Rect>,
        settle: Duration,
    },
    /// Release what a subgoal owns (selective cancellation, ADR-0035 Ownership).
    CancelOwner(SubgoalId),
    /// The active subgoal and its compiled postcondition.
    Subgoal(Option<(SubgoalId, Expression)>),
    /// An action is held for the user's confirmation (FR-SAFE-005): `true` pauses the executor (everything
    /// released, nothing delivered) and tolerates the user's input meant for the overlay; `false` resumes.
    Hold(bool),
    Stop,
}

/// What the reflex thread reports.
#[derive(Debug, Clone)]
pub enum FromReflex {
    Tick {
        tick: u64,
        change: FrameClass,
        signature: u64,
        held: u32,
        goal_met: Option<bool>,
        subgoal: Option<(SubgoalId, Option<bool>)>,
        sensors: Vec<(String, Option<f64>)>,
        late_us: u64,
    },
    Submitted {
        tag: u64,
        result: Result<(), String>,
    },
    Finished {
        tag: u64,
        report: String,
    },
    /// A change-watch sample: did the watched pixels change since the action was issued?
    Evidence {
        tag: u64,
        changed: Option<bool>,
    },
    Interlock {
        interlock: String,
        detail: String,
    },
    WindowGone,
    Stopped {
        lateness_p50_us: u64,
        lateness_p99_us: u64,
        ticks: u64,
        events: u64,
    },
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

struct WatchState {
    tag: u64,
    region: Option<Rect>,
    before: u64,
    until: Instant,
    last_sample: Instant,
}

/// A hash of the pixels of `r` (or the whole thumbnail when `None`), sampled on a coarse grid.
fn region_hash(view: &gamepilot_core::FrameView<'_>, r: Option<Rect>) -> u64 {
    let r = r
        .and_then(|r| r.clamped_to(&view.bounds()))
        .unwrap_or(view.bounds());
    let mut h: u64 = 0xcbf29ce484222325;
    let step = ((r.w.max(r.h) / 48).max(1)) as usize;
    for y in (r.y as u32..r.y as u32 + r.h).step_by(step) {
        for x in (r.x as u32..r.x as u32 + r.w).step_by(step) {
            for b in view.rgb(x, y) {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
    }
    h
}

fn value_num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Num(n) => Some(*n),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Undefined => None,
    }
}

fn value_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

fn publish(g: &GuardianHandle, held: &HeldRecord) {
    crate::interlocks::publish(&g.shm, held);
}

/// Run the reflex cadence until `Stop`, the window vanishes, a halt, or user input.
pub fn run(
    setup: ReflexSetup,
    guardian: GuardianHandle,
    rx: Receiver<ToReflex>,
    tx: Sender<FromReflex>,
) -> anyhow::Result<()> {
    let x = X11::connect(setup.display.as_deref())?;
    let mut sink: Box<dyn InputSink> = if setup.dry_run {
        Box::new(DryRunSink::default())
    } else {
        Box::new(XTestSink::connect(setup.display.as_deref())?)
    };
    let mut watch = RawInputWatch::connect(setup.display.as_deref(), Watch::All)?;
    let _ = watch.poll()?;
    let mut capturer = WindowCapturer::new(&x, setup.window)?;
    let mut perceiver = Perceiver::new();
    let mut sparse = SparseFrame::default();
    let mut evaluator = setup.program.clone().map(|p| Evaluator::new(p, setup.declared));
    let mut recognition = RecognitionCache::new(64, 8);
    // region_integer is read by tesseract on its own thread; a missing tesseract leaves it undefined.
    let mut ocr_worker = crate::sensor_worker::SensorWorker::spawn(crate::sensor_worker::OcrDigits::new).ok();
    let mut ex = Executor::new(setup.exec.clone());
    let mut subgoal: Option<(SubgoalId, Expression)> = None;
    let mut watches: Vec<WatchState> = Vec::new();
    let mut tags: Vec<(gamepilot_executor::ActionId, u64)> = Vec::new();
    let mut ticker = Ticker::new(setup.hz);
    let mut tick: u64 = 0;
    let mut last_audit = Instant::now();
    let mut holding = false;
    let mut grace_until: Option<Instant> = None;
    publish(&guardian, ex.held());
    guardian.shm.set_armed(true);
    let send = |m: FromReflex| {
        let _ = tx.send(m);
    };
    let result: anyhow::Result<()> = (|| loop {
        ticker.wait();
        tick += 1;
        let t: MonoTime = now();
        let halt = guardian.shm.halt();
        let Some(crate::interlocks::TargetSample {
            foreground,
            chain,
            pointer,
        }) = crate::interlocks::sample_target(&x, setup.window)
        else {
            send(FromReflex::WindowGone);
            return Ok(());
        };
        // FR-SAFE-002: real-device input pauses the agent and releases everything at once (not the user's
        // click on the confirmation overlay, FR-SAFE-005; see `stops_the_run`).
        let in_grace = grace_until.is_some_and(|g| Instant::now() < g);
        let user = watch
            .poll()?
            .into_iter()
            .find(|e| !e.synthetic && stops_the_run(e.kind, holding, in_grace));
        if let Some(ev) = user {
            let out = ex.pause_for_user();
            sink.deliver(&out.events)?;
            publish(&guardian, ex.held());
            let device = watch.device_name(ev.sourceid).unwrap_or("?").to_string();
            send(FromReflex::Interlock {
                interlock: "user_input".into(),
                detail: format!("paused by {device}"),
            });
            return Ok(());
        }
        let ctx = ExecContext {
            now: t,
            foreground: foreground && halt.is_none(),
            chain,
        };
        loop {
            match rx.try_recv() {
                Ok(ToReflex::Submit { tag, intention }) => match ex.submit(&intention, &ctx) {
                    Ok(id) => {
                        tags.push((id, tag));
                        send(FromReflex::Submitted { tag, result: Ok(()) });
                    }
                    Err(r) => send(FromReflex::Submitted {
                        tag,
                        result: Err(r.to_string()),
                    }),
                },
                Ok(ToReflex::Watch { tag, region, settle }) => {
                    watches.push(WatchState {
                        tag,
                        region,
                        before: 0,
                        until: Instant::now() + settle,
                        last_sample: Instant::now(),
                    });
                }
                Ok(ToReflex::CancelOwner(owner)) => {
                    for r in ex.cancel_owner(owner) {
                        report_finished(&mut tags, &r, &send);
                    }
                }
                Ok(ToReflex::Subgoal(s)) => subgoal = s,
                Ok(ToReflex::Hold(on)) => {
                    if on && !holding {
                        let out = ex.pause_for_user();
                        sink.deliver(&out.events)?;
                        publish(&guardian, ex.held());
                        for r in &out.reports {
                            report_finished(&mut tags, r, &send);
                        }
                    } else if !on && holding {
                        ex.resume();
                        grace_until = Some(Instant::now() + HOLD_GRACE);
                    }
                    holding = on;
                }
                Ok(ToReflex::Stop) => return Ok(()),
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Ok(()),
            }
        }
        // The five steps (halt, foreground, advance, reconcile, emit + publish).
        let out = ex.tick(&TickInput {
            now: t,
            halt: halt.is_some(),
            foreground,
            chain,
            pointer,
        });
        sink.deliver(&out.events)?;
        publish(&guardian, ex.held());
        for r in &out.reports {
            report_finished(&mut tags, r, &send);
        }
        if let ExecState::Halted { reason } = ex.state() {
            send(FromReflex::Interlock {
                interlock: "halt".into(),
                detail: format!("{reason:?} {halt:?}"),
            });
            return Ok(());
        }
        if !foreground && ex.active() > 0 {
            send(FromReflex::Interlock {
                interlock: "focus_lost".into(),
                detail: "target not foreground".into(),
            });
        }
        if out.events.iter().any(|e| e.is_release()) || last_audit.elapsed() >= Duration::from_secs(1) {
            if let Some(d) = crate::interlocks::audit(sink.as_mut(), ex.held())? {
                send(FromReflex::Interlock {
                    interlock: "held_divergence".into(),
                    detail: format!("{d:?}"),
                });
            }
            last_audit = Instant::now();
        }
        // Perception of the reflex tick without a full-resolution read-back (NFR-PERC-002): a server-scaled
        // thumbnail for the frame class, signature and change watches, and only the pixel regions that
        // the declared sensors and postconditions cover, copied into a reused sparse frame.
        let thumb = match capturer.capture_thumbnail(&x, THUMB_W, t) {
            Ok(f) => f,
            Err(e) if e.is_window_gone() => {
                send(FromReflex::WindowGone);
                return Ok(());
            }
            Err(_) => continue,
        };
        let view = thumb.view();
        let full_size = chain
            .map(|c| c.client_size)
            .unwrap_or(gamepilot_core::Size::new(view.width, view.height));
        let class = perceiver
            .classify_thumb(Thumb::from_view(&view, THUMB_W as u32))
            .class;
        let signature = region_hash(&view, None);
        let mut sensors = Vec::new();
        let mut goal_met = None;
        let mut sub = None;
        if let (Some(ev), Some(chain)) = (evaluator.as_mut(), chain) {
            let mut regions: Vec<Rect> = (0..ev.program().primitives().len())
                .filter_map(|k| ev.region_of(k))
                .collect();
            for e in setup.goal.iter().chain(subgoal.as_ref().map(|(_, e)| e)) {
                regions.extend(
                    e.primitives()
                        .iter()
                        .filter_map(|p| p.region())
                        .map(|r| chain.rescale_rect_from(r, setup.declared)),
                );
            }
            sparse.fill(full_size, &regions, |r| capturer.capture_region(&x, r, t).ok());
            let Some(sview) = sparse.view() else { continue };
            let mut ectx = gamepilot_sensor::EvalContext {
                frame: sview,
                chain,
                atlas: &NoTemplates,
                recognition: &mut recognition,
            };
            let vals = ev.tick(&mut ectx).to_vec();
            for (def, v) in ev.program().sensors().iter().zip(vals.iter()) {
                sensors.push((def.name.clone(), value_num(v)));
            }
            if let Some(g) = setup.goal.as_ref() {
                goal_met = value_bool(&ev.evaluate(g, &mut ectx));
            }
            if let Some((id, expr)) = subgoal.as_ref() {
                sub = Some((*id, value_bool(&ev.evaluate(expr, &mut ectx))));
            }
            // region_integer never blocks the tick: requests go to the recognition worker thread and
            // readings come back on later ticks; until then the value is undefined (never stale, never 0).
            if let Some(w) = ocr_worker.as_mut() {
                w.submit(&mut recognition);
                w.collect(&mut recognition);
            }
        }
        let to_thumb = |r: Rect| -> Rect {
            let sx = view.width as f64 / full_size.w.max(1) as f64;
            let sy = view.height as f64 / full_size.h.max(1) as f64;
            Rect::new(
                (r.x as f64 * sx) as i32,
                (r.y as f64 * sy) as i32,
                ((r.w as f64 * sx).ceil() as u32).max(1),
                ((r.h as f64 * sy).ceil() as u32).max(1),
            )
        };
        for w in watches.iter_mut() {
            if w.before == 0 {
                w.before = region_hash(&view, w.region.map(to_thumb)) | 1;
                continue;
            }
            if w.last_sample.elapsed() >= Duration::from_millis(100) || Instant::now() >= w.until {
                let changed = (region_hash(&view, w.region.map(to_thumb)) | 1) != w.before;
                send(FromReflex::Evidence {
                    tag: w.tag,
                    changed: Some(changed),
                });
                w.last_sample = Instant::now();
            }
        }
        watches.retain(|w| Instant::now() < w.until + Duration::from_millis(250));
        send(FromReflex::Tick {
            tick,
            change: class,
            signature,
            held: ex.held().iter().count() as u32,
            goal_met,
            subgoal: sub,
            sensors,
            late_us: ticker.lateness_us.last().copied().unwrap_or(0),
        });
    })();
    // Every exit path releases everything (FR-ACT-001, INV-SAFE-002).
    let out = ex.stop(CancelReason::Halted);
    let _ = sink.deliver(&out.events);
    publish(&guardian, ex.held());
    let _ = crate::interlocks::audit(sink.as_mut(), ex.held());
    capturer.close(&x);
    guardian.finish();
    let mut late = ticker.lateness_us.clone();
    late.sort_unstable();
    let pct = |p: f64| {
        late.get(((late.len().saturating_sub(1)) as f64 * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    send(FromReflex::Stopped {
        lateness_p50_us: pct(0.5),
        lateness_p99_us: pct(0.99),
        ticks: late.len() as u64,
        events: sink.count(),
    });
    result
}

fn report_finished(
    tags: &mut Vec<(gamepilot_executor::ActionId, u64)>,
    r: &Report,
    send: &impl Fn(FromReflex),
) {
    if let Some(i) = tags.iter().position(|(id, _)| *id == r.id) {
        let (_, tag) = tags.remove(i);
        send(FromReflex::Finished {
            tag,
            report: serde_json::to_string(&r.kind).unwrap_or_default(),
        });
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
