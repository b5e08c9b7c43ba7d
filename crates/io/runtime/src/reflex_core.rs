//! The reflex tick's own decisions about what it saw, apart from the X server: the change watches an
//! executed action asked for (sampled on the thumbnail, FR-GND-006's evidence), the frame's health and
//! when its change is reported (FR-PERC-009), and the tick's report to the session. The reflex thread
//! feeds it thumbnails and sensor values; unit tests feed it frames made in memory.

use crate::driver::{FrameSeen, HealthJudge};
use gamepilot_core::{ActionId, FrameHealth, FrameView, Interlock, MonoTime, Rect, Size};
use gamepilot_sensor::Value;
use gamepilot_session::{Input, ReflexReport, SubgoalCheck};
use std::time::Duration;

/// Evidence samples of one watch arrive this often while it is open.
const WATCH_SAMPLE: Duration = Duration::from_millis(100);
/// A watch is dropped this long after its settle window closed.
const WATCH_LINGER: Duration = Duration::from_millis(250);

/// One executed action's change watch: the region (capture space) or the whole frame.
struct Watch {
    action: ActionId,
    region: Option<Rect>,
    /// The region's hash on the first tick after the watch began (0: not yet taken).
    before: u64,
    until: MonoTime,
    last_sample: MonoTime,
}

/// What a tick's sensors and postconditions read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SensorReadings {
    pub sensors: Vec<(String, Option<f64>)>,
    pub goal_met: Option<bool>,
    pub subgoal: Option<SubgoalCheck>,
}

/// What the tick knows from the executor and the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickFacts {
    pub held: u32,
    pub late_us: u64,
    pub generation: u64,
    pub foreground: bool,
}

/// The reflex's state between ticks.
#[derive(Default)]
pub struct ReflexCore {
    watches: Vec<Watch>,
    judge: HealthJudge,
    tick: u64,
}

/// A sensor value as the report's number (booleans as 0 and 1; undefined stays undefined).
pub fn value_num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Num(n) => Some(*n),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Undefined => None,
    }
}

/// A postcondition's value as met or not (anything but a boolean is undefined).
pub fn value_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

/// A hash of the pixels of `r` (or the whole view when `None`), sampled on a coarse grid.
pub fn region_hash(view: &FrameView<'_>, r: Option<Rect>) -> u64 {
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

impl ReflexCore {
    /// The ticks begun so far (the current one's number).
    pub fn begin_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The frame's health as last judged.
    pub fn health(&self) -> FrameHealth {
        self.judge.state()
    }

    /// Pixels unchanged for this long read as frozen.
    pub fn frozen_after(&self) -> Duration {
        self.judge.frozen_after
    }

    /// Watch for change after an action, for `settle` from `now`.
    pub fn watch(&mut self, action: ActionId, region: Option<Rect>, settle: Duration, now: MonoTime) {
        self.watches.push(Watch {
            action,
            region,
            before: 0,
            until: now.plus(settle),
            last_sample: now,
        });
    }

    /// Judge what this tick saw; `Some` interlock when the frame's health changed (`why` words an
    /// unsupported mode's diagnosis and fix).
    pub fn judge(
        &mut self,
        seen: FrameSeen,
        why: Option<String>,
        now: MonoTime,
    ) -> (FrameHealth, Option<Input>) {
        let (health, changed) = self.judge.judge(seen, now);
        if !changed {
            return (health, None);
        }
        let detail = match (why, health) {
            (Some(why), _) => why,
            (None, FrameHealth::Black) => "the frame is black".into(),
            (None, FrameHealth::Occluded) => "another window covers part of the game window".into(),
            (None, FrameHealth::Frozen) => format!("no pixel changed for {:?}", self.judge.frozen_after),
            (None, s) => format!("frame {s}"),
        };
        (
            health,
            Some(Input::Interlock {
                interlock: Interlock::FrameHealth { health },
                detail,
            }),
        )
    }

    /// Sample every open watch on this tick's thumbnail `view` of a `full` capture: its first tick takes
    /// the region's "before", later ones report whether it changed, every 100 ms and at the window's end.
    pub fn sample_watches(&mut self, view: &FrameView<'_>, full: Size, now: MonoTime) -> Vec<Input> {
        let to_thumb = |r: Rect| -> Rect {
            let sx = view.width as f64 / full.w.max(1) as f64;
            let sy = view.height as f64 / full.h.max(1) as f64;
            Rect::new(
                (r.x as f64 * sx) as i32,
                (r.y as f64 * sy) as i32,
                ((r.w as f64 * sx).ceil() as u32).max(1),
                ((r.h as f64 * sy).ceil() as u32).max(1),
            )
        };
        let mut out = Vec::new();
        for w in self.watches.iter_mut() {
            // The region is hashed only on the ticks that sample it.
            if w.before == 0 {
                w.before = region_hash(view, w.region.map(to_thumb)) | 1;
                continue;
            }
            if now.since(w.last_sample) >= WATCH_SAMPLE || now >= w.until {
                let hash = region_hash(view, w.region.map(to_thumb)) | 1;
                out.push(Input::Evidence {
                    action: w.action,
                    changed: Some(hash != w.before),
                });
                w.last_sample = now;
            }
        }
        self.watches.retain(|w| now < w.until.plus(WATCH_LINGER));
        out
    }

    /// The tick's report to the session.
    pub fn report(
        &self,
        change: gamepilot_core::FrameChange,
        signature: u64,
        health: FrameHealth,
        readings: SensorReadings,
        facts: TickFacts,
    ) -> Input {
        Input::Reflex(ReflexReport {
            tick: self.tick,
            change,
            signature,
            held: facts.held,
            goal_met: readings.goal_met,
            subgoal: readings.subgoal,
            sensors: readings.sensors,
            late_us: facts.late_us,
            ticks_since: 1,
            generation: facts.generation,
            health,
            foreground: facts.foreground,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{Frame, FrameChange, FrameProblem};

    /// A 160x90 thumbnail of flat grey with a lighter 20x20 square at (x, 30).
    fn thumb(square_x: u32) -> Frame {
        let mut px = vec![60u8; 160 * 90 * 4];
        for y in 30..50 {
            for x in square_x..square_x + 20 {
                let i = (y * 160 + x) as usize * 4;
                px[i..i + 3].copy_from_slice(&[200, 200, 200]);
            }
        }
        Frame::from_rgba(160, 90, px, MonoTime::ZERO).unwrap()
    }

    fn ms(v: u64) -> MonoTime {
        MonoTime(v * 1000)
    }

    fn evidence(inputs: &[Input]) -> Vec<(ActionId, Option<bool>)> {
        inputs
            .iter()
            .filter_map(|i| match i {
                Input::Evidence { action, changed } => Some((*action, *changed)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_watch_reports_whether_its_region_changed_and_ends_after_its_window() {
        // FR-GND-006: evidence for the verdict, sampled on the reflex's thumbnail, never a full frame
        let mut core = ReflexCore::default();
        let full = Size::new(1280, 720);
        // Action 1 watches where the square is (capture space, 8x the thumbnail); action 2 elsewhere.
        core.watch(
            ActionId(1),
            Some(Rect::new(80, 240, 160, 160)),
            Duration::from_millis(400),
            ms(0),
        );
        core.watch(
            ActionId(2),
            Some(Rect::new(960, 480, 160, 160)),
            Duration::from_millis(400),
            ms(0),
        );
        let before = thumb(10);
        assert!(
            core.sample_watches(&before.view(), full, ms(16)).is_empty(),
            "the first tick takes 'before'"
        );
        let moved = thumb(100);
        let ev = evidence(&core.sample_watches(&moved.view(), full, ms(120)));
        assert_eq!(ev, [(ActionId(1), Some(true)), (ActionId(2), Some(false))]);
        assert!(
            evidence(&core.sample_watches(&moved.view(), full, ms(150))).is_empty(),
            "100 ms apart"
        );
        let ev = evidence(&core.sample_watches(&moved.view(), full, ms(400)));
        assert_eq!(ev.len(), 2, "at the window's end");
        core.sample_watches(&moved.view(), full, ms(700));
        assert!(core.watches.is_empty(), "dropped after its linger");
        assert!(core.sample_watches(&moved.view(), full, ms(800)).is_empty());
    }

    #[test]
    fn the_frames_health_is_reported_on_change_only_and_in_words() {
        // FR-PERC-009: black, frozen, occluded, unsupported — each named once, when it begins
        let mut core = ReflexCore::default();
        let seen = |signature: u64, black: bool| FrameSeen {
            signature: Some(signature),
            black,
            unsupported: None,
            occluded: false,
        };
        let (h, told) = core.judge(seen(1, false), None, ms(0));
        assert_eq!((h, told), (FrameHealth::Ok, None));
        let (h, told) = core.judge(seen(2, true), None, ms(16));
        assert_eq!(h, FrameHealth::Black);
        assert!(
            matches!(told, Some(Input::Interlock { interlock: Interlock::FrameHealth { health: FrameHealth::Black }, ref detail }) if detail == "the frame is black")
        );
        assert_eq!(core.judge(seen(2, true), None, ms(32)).1, None, "told once");
        let gl = FrameSeen {
            unsupported: Some(FrameProblem::BlackGlPixmap),
            ..seen(2, true)
        };
        let (h, told) = core.judge(
            gl,
            Some("GL draws to the screen; fix: a compositor".into()),
            ms(48),
        );
        assert_eq!(
            h,
            FrameHealth::Unsupported {
                problem: FrameProblem::BlackGlPixmap
            }
        );
        assert!(matches!(told, Some(Input::Interlock { ref detail, .. }) if detail.contains("fix")));
        let frozen_at = ms(48).plus(core.frozen_after()).plus(Duration::from_secs(1));
        core.judge(seen(3, false), None, ms(60));
        let (h, told) = core.judge(seen(3, false), None, frozen_at);
        assert_eq!(h, FrameHealth::Frozen);
        assert!(
            matches!(told, Some(Input::Interlock { ref detail, .. }) if detail.starts_with("no pixel changed"))
        );
    }

    #[test]
    fn the_tick_report_carries_the_ticks_readings_and_facts() {
        // FR-LOOP-002: the reflex reports every tick; the session's feed decides what it steps
        let mut core = ReflexCore::default();
        core.begin_tick();
        let n = core.begin_tick();
        let readings = SensorReadings {
            sensors: vec![
                ("coins".into(), value_num(&Value::Int(3))),
                ("menu".into(), value_num(&Value::Undefined)),
            ],
            goal_met: value_bool(&Value::Bool(false)),
            subgoal: None,
        };
        let facts = TickFacts {
            held: 1,
            late_us: 250,
            generation: 2,
            foreground: true,
        };
        let Input::Reflex(r) = core.report(FrameChange::Local, 77, FrameHealth::Ok, readings, facts) else {
            panic!("a reflex report")
        };
        assert_eq!((r.tick, n), (2, 2));
        assert_eq!(
            r.sensors,
            [("coins".to_string(), Some(3.0)), ("menu".to_string(), None)]
        );
        assert_eq!(
            (r.goal_met, r.held, r.late_us, r.generation, r.ticks_since),
            (Some(false), 1, 250, 2, 1)
        );
        assert_eq!(value_bool(&Value::Int(1)), None, "a number is no postcondition");
    }
}
