//! The reflex side of `move_to`: each tick, read the small region where the moving
//! box (the target under a follow camera, else the avatar) should be, find its patch there, hand the
//! position to `gamepilot_grounding::SteerController`, and pass its key wish to the executor. IO only:
//! every decision is the controller's.

use crate::driver::Driver;
use gamepilot_core::{MonoTime, Point, Rect, Size};
use gamepilot_executor::ActionId;
use gamepilot_session::{SteerController, SteerEnd, SteerPlan};
use gamepilot_vision::track::{self, Patch};
use gamepilot_x11::capture::WindowCapturer;
use gamepilot_x11::X11;

/// How far around its predicted box tracking looks, in pixels.
const SEARCH_PX: i32 = 28;
/// A placement scoring worse than this (mean absolute grey difference) is no sighting.
const MAX_SCORE: f32 = 22.0;

/// One running `move_to`.
pub struct SteerRun {
    /// The steering action, as the session and the executor both name it.
    pub action: ActionId,
    controller: SteerController,
    patch: Option<Patch>,
    /// Ticks on which tracking found the moving box.
    pub sightings: u32,
}

impl SteerRun {
    pub fn new(action: ActionId, plan: SteerPlan, now: MonoTime) -> SteerRun {
        SteerRun {
            action,
            controller: SteerController::new(plan, now),
            patch: None,
            sightings: 0,
        }
    }

    /// The moving box's centre in capture space, when this tick's region shows it.
    fn track(
        &mut self,
        x11: &X11,
        capturer: &mut WindowCapturer,
        size: Size,
        now: MonoTime,
    ) -> Option<Point> {
        let predicted = self.controller.predicted_moving_box();
        let bounds = Rect::new(0, 0, size.w, size.h);
        if self.patch.is_none() {
            let b = predicted.clamped_to(&bounds)?;
            let f = capturer.capture_region(x11, b, now).ok()?;
            self.patch = Patch::cut(&f.view(), Rect::new(0, 0, b.w, b.h));
            return None;
        }
        let patch = self.patch.as_ref()?;
        let region = Rect::new(
            predicted.x - SEARCH_PX,
            predicted.y - SEARCH_PX,
            predicted.w + 2 * SEARCH_PX as u32,
            predicted.h + 2 * SEARCH_PX as u32,
        )
        .clamped_to(&bounds)?;
        let f = capturer.capture_region(x11, region, now).ok()?;
        let (p, score) = track::find(&f.view(), patch)?;
        (score <= MAX_SCORE).then(|| Point::new(region.x + p.x, region.y + p.y))
    }

    /// One reflex tick: track, ask the controller, tell the executor. `Some(end)` when the run is over
    /// (the executor's action is told to finish); `None` while it goes on. An action the executor no
    /// longer runs (cancelled, its bound passed) ends the run as timed out.
    pub fn tick(
        &mut self,
        d: &mut Driver,
        capturer: &mut WindowCapturer,
        size: Size,
        now: MonoTime,
    ) -> Option<SteerEnd> {
        let seen = self.track(d.x11(), capturer, size, now);
        if seen.is_some() {
            self.sightings += 1;
        }
        let step = self.controller.tick(now, seen);
        let running = d.steer(self.action, &step.want, step.end.is_some());
        match (step.end, running) {
            (Some(end), _) => Some(end),
            (None, true) => None,
            (None, false) => Some(SteerEnd::TimedOut { left_px: f64::NAN }),
        }
    }
}
