//! The agent finds itself and steers. Self-identification correlates the agent's own
//! direction-key holds with element motion between the frames before and after each hold, and names the
//! avatar and what each key does; the steering controller turns "go to that box" into the direction keys
//! to hold now, tick by tick, from the tracked offset between avatar and target. Pure: boxes, key names
//! and times in, key wishes and verdicts out.

use gamepilot_core::{MonoTime, Point, Rect};
use serde::{Deserialize, Serialize};

/// One element as self-identification sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenElement {
    pub bbox: Rect,
    /// What it looks like ("yellow round"); elements match across frames only with the same colour.
    pub looks: Option<String>,
    /// A labelled element (text, a panel) is HUD, never the avatar.
    pub labelled: bool,
}

/// One probe hold: the elements seen before it and, for each, how its pixels moved by the frame after
/// it (`None`: not found again near where it was: gone, covered, or changed beyond recognition).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSample {
    pub key: String,
    pub held_ms: u64,
    pub before: Vec<SeenElement>,
    pub moves: Vec<Option<(f64, f64)>>,
    /// The frame's size (the avatar of a follow camera sits near its centre).
    pub frame: (u32, u32),
}

/// The four direction keys, by the way each moves the avatar on screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionKeys {
    pub up: String,
    pub down: String,
    pub left: String,
    pub right: String,
}

/// What self-identification learned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvatarModel {
    /// The avatar's box when identified (capture space).
    pub bbox: Rect,
    pub looks: Option<String>,
    /// The view follows the avatar: the world moves on screen, the avatar stays.
    pub follow_camera: bool,
    pub keys: DirectionKeys,
    /// Screen pixels per second the avatar moves relative to the world while one key is held.
    pub speed_px_s: f64,
    /// Under a follow camera: the unlabelled boxes that stayed in every probe although the view moved
    /// (HUD sprites: a compass, a gauge), never a place to walk to.
    #[serde(default)]
    pub hud: Vec<Rect>,
    /// The evidence, in words (for the note and the record).
    pub evidence: String,
}

/// The colour word of a looks ("yellow" of "yellow round"): the shape word flips as a box takes in a
/// shadow or not, the colour does not.
fn colour(looks: &Option<String>) -> Option<&str> {
    looks.as_deref().and_then(|l| l.split_whitespace().next())
}

fn center(r: &Rect) -> (f64, f64) {
    let c = r.center();
    (f64::from(c.x), f64::from(c.y))
}

/// The lower median (of two values, the smaller).
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

/// Each element of the sample that was found again (small enough to be a sprite), with its move.
fn displacements(s: &ProbeSample) -> Vec<(&SeenElement, f64, f64)> {
    s.before
        .iter()
        .zip(&s.moves)
        .filter(|(e, _)| e.bbox.w <= 160 && e.bbox.h <= 160)
        .filter_map(|(e, m)| m.map(|(dx, dy)| (e, dx, dy)))
        .collect()
}

/// What one probe shows: the avatar's box and its push (screen px the avatar moved relative to the
/// world), and whether the view moved instead of the avatar.
#[derive(Debug, Clone, PartialEq)]
struct ProbeReading {
    key: String,
    avatar: SeenElement,
    push: (f64, f64),
    follow: bool,
    moved: usize,
    /// Unlabelled boxes that stayed while the view moved.
    stayed: Vec<Rect>,
}

/// Least motion (px) that counts as motion.
const MIN_MOTION_PX: f64 = 4.0;

fn read_probe(s: &ProbeSample) -> Option<ProbeReading> {
    let d = displacements(s);
    if d.len() < 2 {
        return None;
    }
    let unlabelled: Vec<_> = d.iter().filter(|(e, _, _)| !e.labelled).collect();
    // The world's shift: the largest group of moving elements that moved alike. Three or more moving
    // together, or two far apart, is the view moving (a follow camera); HUD and the avatar stay.
    let moving: Vec<(f64, f64)> = unlabelled
        .iter()
        .map(|(_, x, y)| (*x, *y))
        .filter(|(x, y)| x.hypot(*y) >= MIN_MOTION_PX)
        .collect();
    let group = |&(x, y): &(f64, f64)| -> Vec<(f64, f64)> {
        moving
            .iter()
            .copied()
            .filter(|(a, b)| (a - x).hypot(b - y) < MIN_MOTION_PX)
            .collect()
    };
    let largest = moving.iter().map(group).max_by_key(Vec::len).unwrap_or_default();
    let (cx, cy) = (f64::from(s.frame.0) / 2.0, f64::from(s.frame.1) / 2.0);
    // Sprites moving alike far apart (more than 200 px) are the view moving, not one avatar's parts.
    let spread = {
        let members: Vec<(f64, f64)> = unlabelled
            .iter()
            .filter(|(_, x, y)| largest.iter().any(|(a, b)| (a - x).hypot(b - y) < 0.01))
            .map(|(e, _, _)| center(&e.bbox))
            .collect();
        members
            .iter()
            .flat_map(|a| members.iter().map(move |b| (a.0 - b.0).hypot(a.1 - b.1)))
            .fold(0.0, f64::max)
    };
    if largest.len() >= 3 || (largest.len() == 2 && spread > 200.0) {
        let n = largest.len() as f64;
        let mx = largest.iter().map(|p| p.0).sum::<f64>() / n;
        let my = largest.iter().map(|p| p.1).sum::<f64>() / n;
        // The avatar is the unlabelled element that stayed, nearest the centre.
        let (avatar, _, _) = unlabelled
            .iter()
            .filter(|(_, x, y)| x.hypot(*y) < MIN_MOTION_PX)
            .min_by(|a, b| {
                let dist = |e: &SeenElement| {
                    let (x, y) = center(&e.bbox);
                    (x - cx).hypot(y - cy)
                };
                dist(a.0).total_cmp(&dist(b.0))
            })?;
        let stayed = unlabelled
            .iter()
            .filter(|(_, x, y)| x.hypot(*y) < MIN_MOTION_PX)
            .map(|(e, _, _)| e.bbox)
            .collect();
        return Some(ProbeReading {
            key: s.key.clone(),
            avatar: (*avatar).clone(),
            push: (-mx, -my),
            follow: true,
            moved: largest.len(),
            stayed,
        });
    }
    // The world stayed: the avatar is the element that moved most.
    let (avatar, dx, dy) = unlabelled
        .iter()
        .max_by(|a, b| a.1.hypot(a.2).total_cmp(&b.1.hypot(b.2)))?;
    if dx.hypot(*dy) < MIN_MOTION_PX {
        return None;
    }
    Some(ProbeReading {
        key: s.key.clone(),
        avatar: (*avatar).clone(),
        push: (*dx, *dy),
        follow: false,
        moved: 1,
        stayed: Vec::new(),
    })
}

/// Why self-identification found no avatar.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelfIdError {
    #[error("no probe moved anything: {0}")]
    NothingMoved(String),
    #[error("the probes disagree on the avatar: {0}")]
    Inconsistent(String),
    #[error("no key moves the avatar {0}")]
    MissingDirection(&'static str),
}

/// The avatar and its keys from the probes, or why not: the element most probes name as the avatar (two
/// at least; boxes within half their size count as one), and a key for each of the four screen directions.
pub fn identify(samples: &[ProbeSample]) -> Result<AvatarModel, SelfIdError> {
    let readings: Vec<(ProbeReading, u64)> = samples
        .iter()
        .filter_map(|s| read_probe(s).map(|r| (r, s.held_ms.max(1))))
        .collect();
    if readings.is_empty() {
        return Err(SelfIdError::NothingMoved(format!(
            "{} probe holds",
            samples.len()
        )));
    }
    // The avatar is what most probes name (a probe whose frame missed the avatar names a neighbour).
    let near = |a: &ProbeReading, b: &ProbeReading| {
        let (ax, ay) = center(&a.avatar.bbox);
        let (bx, by) = center(&b.avatar.bbox);
        let tolerance = f64::from(a.avatar.bbox.w.max(a.avatar.bbox.h)) / 2.0 + 4.0;
        a.follow == b.follow && (ax - bx).hypot(ay - by) <= tolerance * if a.follow { 1.0 } else { 8.0 }
    };
    // The most named wins (ties: nearest the frame's centre); two probes at least must agree.
    let votes = |r: &ProbeReading| readings.iter().filter(|(o, _)| near(r, o)).count();
    let off_centre = |r: &ProbeReading| {
        let (x, y) = center(&r.avatar.bbox);
        let frame = samples.first().map(|s| s.frame).unwrap_or((0, 0));
        (x - f64::from(frame.0) / 2.0).hypot(y - f64::from(frame.1) / 2.0)
    };
    let Some((first, _)) = readings.iter().max_by(|(a, _), (b, _)| {
        votes(a)
            .cmp(&votes(b))
            .then(off_centre(b).total_cmp(&off_centre(a)))
    }) else {
        return Err(SelfIdError::NothingMoved(format!(
            "{} probe holds",
            samples.len()
        )));
    };
    if votes(first) < 2 && readings.len() > 1 {
        let named: Vec<String> = readings
            .iter()
            .map(|(r, _)| {
                let (x, y) = center(&r.avatar.bbox);
                format!("{} names ({x:.0},{y:.0})", r.key)
            })
            .collect();
        return Err(SelfIdError::Inconsistent(named.join(", ")));
    }
    let pick = |want: (f64, f64), name: &'static str| -> Result<String, SelfIdError> {
        readings
            .iter()
            .filter(|(r, _)| {
                let len = r.push.0.hypot(r.push.1);
                len >= MIN_MOTION_PX && (r.push.0 * want.0 + r.push.1 * want.1) / len > 0.8
            })
            .max_by(|a, b| {
                let pa = a.0.push.0 * want.0 + a.0.push.1 * want.1;
                let pb = b.0.push.0 * want.0 + b.0.push.1 * want.1;
                pa.total_cmp(&pb)
            })
            .map(|(r, _)| r.key.clone())
            .ok_or(SelfIdError::MissingDirection(name))
    };
    let keys = DirectionKeys {
        up: pick((0.0, -1.0), "up")?,
        down: pick((0.0, 1.0), "down")?,
        left: pick((-1.0, 0.0), "left")?,
        right: pick((1.0, 0.0), "right")?,
    };
    let speed_px_s = median(
        readings
            .iter()
            .map(|(r, ms)| r.push.0.hypot(r.push.1) * 1000.0 / *ms as f64)
            .collect(),
    );
    let moves = |r: &ProbeReading| format!("{} ({:+.0},{:+.0})", r.key, r.push.0, r.push.1);
    let evidence = format!(
        "{} of {} probe holds moved {}; {}",
        readings.len(),
        samples.len(),
        if first.follow {
            format!(
                "the view (up to {} elements together) while this element stayed",
                readings.iter().map(|(r, _)| r.moved).max().unwrap_or(0)
            )
        } else {
            "this element alone".to_string()
        },
        readings
            .iter()
            .map(|(r, _)| moves(r))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // HUD: what stayed in every follow-camera probe (by centre, within 4 px).
    let follows: Vec<&ProbeReading> = readings.iter().map(|(r, _)| r).filter(|r| r.follow).collect();
    let hud = match follows.split_first() {
        Some((head, rest)) => head
            .stayed
            .iter()
            .filter(|b| {
                let (x, y) = center(b);
                rest.iter().all(|r| {
                    r.stayed.iter().any(|o| {
                        let (ox, oy) = center(o);
                        (ox - x).hypot(oy - y) <= 4.0
                    })
                })
            })
            .copied()
            .collect(),
        None => Vec::new(),
    };
    Ok(AvatarModel {
        bbox: first.avatar.bbox,
        looks: first.avatar.looks.clone(),
        follow_camera: first.follow,
        keys,
        speed_px_s,
        evidence,
        hud,
    })
}

impl AvatarModel {
    /// The note the model reads (short: the note block has a per-note cap; the record adds
    /// [`AvatarModel::evidence`]); `sprite` is the mark and looks of the element drawn where the avatar
    /// is, when the observation has one.
    pub fn note(&self, sprite: Option<(u32, Option<&str>)>) -> String {
        let c = self.bbox.center();
        let mark = sprite.map(|(m, _)| m);
        let looks = sprite.and_then(|(_, l)| l).or(self.looks.as_deref());
        format!(
            "I am the {} element{} at ({},{}){}; keys {}=up {}=down {}=left {}=right, {:.0} px/s.",
            looks.unwrap_or("unlabelled"),
            mark.map(|m| format!(" [{m}]")).unwrap_or_default(),
            c.x,
            c.y,
            if self.follow_camera {
                " (the view follows me)"
            } else {
                ""
            },
            self.keys.up,
            self.keys.down,
            self.keys.left,
            self.keys.right,
            self.speed_px_s,
        )
    }

    /// The element of `seen` that is the avatar now: the same looks and size nearest its last box
    /// (a follow camera keeps it where it was).
    pub fn locate(&self, seen: &[SeenElement]) -> Option<Rect> {
        let (x0, y0) = center(&self.bbox);
        let limit = if self.follow_camera { 24.0 } else { 400.0 };
        seen.iter()
            .filter(|e| !e.labelled && colour(&e.looks) == colour(&self.looks))
            .filter(|e| {
                let close =
                    |a: u32, b: u32| (f64::from(a) - f64::from(b)).abs() <= 0.3 * f64::from(a.max(b)) + 2.0;
                close(e.bbox.w, self.bbox.w) && close(e.bbox.h, self.bbox.h)
            })
            .map(|e| {
                let (x, y) = center(&e.bbox);
                (e.bbox, (x - x0).hypot(y - y0))
            })
            .filter(|(_, d)| *d <= limit)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(b, _)| b)
    }
}

/// One `move_to` as the reflex runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteerPlan {
    /// Target and avatar boxes in capture space when the plan was made.
    pub target: Rect,
    pub avatar: Rect,
    pub follow_camera: bool,
    pub keys: DirectionKeys,
    pub speed_px_s: f64,
    /// Centres this close count as arrived.
    pub reach_px: f64,
    pub bound_ms: u64,
}

impl SteerPlan {
    /// A plan from the model's avatar and a target box; the bound allows twice the straight-line time
    /// plus 1.5 s, at most `max_ms`.
    pub fn new(model: &AvatarModel, avatar: Rect, target: Rect, max_ms: u64) -> SteerPlan {
        let (ax, ay) = center(&avatar);
        let (tx, ty) = center(&target);
        let dist = (tx - ax).hypot(ty - ay);
        let speed = model.speed_px_s.max(1.0);
        let bound_ms = ((2.0 * dist / speed) * 1000.0 + 1500.0).min(max_ms as f64) as u64;
        let side = |r: &Rect| f64::from(r.w.min(r.h));
        SteerPlan {
            target,
            avatar,
            follow_camera: model.follow_camera,
            keys: model.keys.clone(),
            speed_px_s: speed,
            reach_px: ((side(&avatar) + side(&target)) / 2.0 * 0.8).max(8.0),
            bound_ms: bound_ms.max(500),
        }
    }
}

/// How a steering run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum SteerEnd {
    /// The avatar's box reached the target's.
    Reached { after_ms: u64, tracked: bool },
    /// The time bound passed first; `left_px` is how far the target still was.
    TimedOut { left_px: f64 },
    /// Tracking saw the target keep its distance while the keys were held (it moves with the view:
    /// HUD, or the avatar's own part), so steering stopped early.
    Unreachable { left_px: f64 },
}

impl SteerEnd {
    pub fn reached(&self) -> bool {
        matches!(self, SteerEnd::Reached { .. })
    }
}

/// This tick's wish.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerStep {
    /// The direction keys to hold now (the others released).
    pub want: Vec<String>,
    pub end: Option<SteerEnd>,
}

/// The closed-loop controller: dead reckoning from the keys it holds, corrected by tracking.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerController {
    plan: SteerPlan,
    started: MonoTime,
    last: MonoTime,
    /// Target centre minus avatar centre, screen px.
    offset: (f64, f64),
    holding: (f64, f64),
    tracked_once: bool,
    ended: Option<SteerEnd>,
    /// The tracked distance when keys were first held, and when.
    progress_from: Option<(MonoTime, f64)>,
}

impl SteerController {
    pub fn new(plan: SteerPlan, now: MonoTime) -> SteerController {
        let (ax, ay) = center(&plan.avatar);
        let (tx, ty) = center(&plan.target);
        SteerController {
            plan,
            started: now,
            last: now,
            offset: (tx - ax, ty - ay),
            holding: (0.0, 0.0),
            tracked_once: false,
            ended: None,
            progress_from: None,
        }
    }

    pub fn plan(&self) -> &SteerPlan {
        &self.plan
    }

    /// Where tracking should look now: the box that moves on screen (the target under a follow camera,
    /// else the avatar), at its predicted place, capture space.
    pub fn predicted_moving_box(&self) -> Rect {
        let (ax, ay) = center(&self.plan.avatar);
        let (tx, ty) = center(&self.plan.target);
        let (b, cx, cy) = if self.plan.follow_camera {
            (self.plan.target, ax + self.offset.0, ay + self.offset.1)
        } else {
            (self.plan.avatar, tx - self.offset.0, ty - self.offset.1)
        };
        Rect::new(
            (cx - f64::from(b.w) / 2.0).round() as i32,
            (cy - f64::from(b.h) / 2.0).round() as i32,
            b.w,
            b.h,
        )
    }

    /// One tick: integrate the motion of the keys held since the last tick, take the tracked centre of
    /// the moving box when tracking found it (`None`: lost or not looked for), and say what to hold.
    pub fn tick(&mut self, now: MonoTime, tracked: Option<Point>) -> SteerStep {
        if let Some(end) = &self.ended {
            return SteerStep {
                want: Vec::new(),
                end: Some(end.clone()),
            };
        }
        let dt = now.since(self.last).as_secs_f64();
        self.last = now;
        let (hx, hy) = self.holding;
        let len = hx.hypot(hy);
        if len > 0.0 {
            let step = self.plan.speed_px_s * dt / len;
            self.offset.0 -= hx * step;
            self.offset.1 -= hy * step;
        }
        if let Some(p) = tracked {
            let (ax, ay) = center(&self.plan.avatar);
            let (tx, ty) = center(&self.plan.target);
            let (px, py) = (f64::from(p.x), f64::from(p.y));
            self.offset = if self.plan.follow_camera {
                (px - ax, py - ay)
            } else {
                (tx - px, ty - py)
            };
            self.tracked_once = true;
        }
        let elapsed = now.since(self.started).as_millis() as u64;
        let left = self.offset.0.hypot(self.offset.1);
        // Arrived: within reach, or the target vanished from tracking (collected) while predicted
        // within twice the reach.
        let vanished = tracked.is_none() && self.tracked_once && left <= 2.0 * self.plan.reach_px;
        if left <= self.plan.reach_px || vanished {
            return self.end(SteerEnd::Reached {
                after_ms: elapsed,
                tracked: tracked.is_some(),
            });
        }
        if elapsed >= self.plan.bound_ms {
            return self.end(SteerEnd::TimedOut { left_px: left });
        }
        // Seen, after 600 ms of holding keys, no nearer by a tenth (and 10 px): it is not in the world.
        if tracked.is_some() && self.holding != (0.0, 0.0) {
            match self.progress_from {
                None => self.progress_from = Some((now, left)),
                Some((t0, d0)) if now.since(t0).as_millis() >= 600 && d0 - left < (0.1 * d0).max(10.0) => {
                    return self.end(SteerEnd::Unreachable { left_px: left });
                }
                Some(_) => {}
            }
        }
        let dead = self.plan.reach_px / 2.0;
        let mut want = Vec::new();
        let (mut hx, mut hy) = (0.0, 0.0);
        if self.offset.0 > dead {
            want.push(self.plan.keys.right.clone());
            hx = 1.0;
        } else if self.offset.0 < -dead {
            want.push(self.plan.keys.left.clone());
            hx = -1.0;
        }
        if self.offset.1 > dead {
            want.push(self.plan.keys.down.clone());
            hy = 1.0;
        } else if self.offset.1 < -dead {
            want.push(self.plan.keys.up.clone());
            hy = -1.0;
        }
        self.holding = (hx, hy);
        SteerStep { want, end: None }
    }

    fn end(&mut self, end: SteerEnd) -> SteerStep {
        self.holding = (0.0, 0.0);
        self.ended = Some(end.clone());
        SteerStep {
            want: Vec::new(),
            end: Some(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn el(x: i32, y: i32, w: u32, looks: &str) -> SeenElement {
        SeenElement {
            bbox: Rect::new(x, y, w, w),
            looks: Some(looks.into()),
            labelled: false,
        }
    }

    fn hud() -> SeenElement {
        SeenElement {
            bbox: Rect::new(16, 60, 250, 72),
            looks: None,
            labelled: true,
        }
    }

    /// The practice game: the view follows the player (white, centre); coins and a hazard move
    /// opposite to the key's direction by 60 px per 300 ms hold; HUD and the player's arrow stay.
    fn follow_probe(key: &str, push: (i32, i32)) -> ProbeSample {
        let world = [
            (100, 400, "yellow round"),
            (440, 560, "yellow round"),
            (190, 534, "red square"),
        ];
        let frame = |_shift: (i32, i32)| -> Vec<SeenElement> {
            // The heading arrow, compass ticks and a slider stay too: static outnumbers moving.
            let mut v = vec![
                hud(),
                el(626, 346, 30, "white square"),
                el(628, 318, 20, "yellow shape"),
                el(994, 6, 10, "yellow shape"),
                el(632, 46, 16, "yellow shape"),
                el(1224, 160, 32, "black bar"),
            ];
            v.extend(world.iter().map(|&(x, y, l)| el(x, y, 22, l)));
            v
        };
        let before = frame((0, 0));
        // The HUD and the player's sprites stay; the world's sprites move against the push.
        let moves = before
            .iter()
            .enumerate()
            .map(|(i, _)| {
                Some(if i < 6 {
                    (0.0, 0.0)
                } else {
                    (f64::from(-push.0), f64::from(-push.1))
                })
            })
            .collect();
        ProbeSample {
            key: key.into(),
            held_ms: 300,
            before,
            moves,
            frame: (1280, 720),
        }
    }

    #[test]
    fn the_element_that_stays_while_the_view_moves_is_the_avatar_of_a_follow_camera() {
        // Own key presses correlated with element motion
        let samples = [
            follow_probe("w", (0, -60)),
            follow_probe("s", (0, 60)),
            follow_probe("a", (-60, 0)),
            follow_probe("d", (60, 0)),
        ];
        let m = identify(&samples).unwrap();
        assert_eq!(m.bbox, Rect::new(626, 346, 30, 30));
        assert!(m.follow_camera);
        assert_eq!(
            m.keys,
            DirectionKeys {
                up: "w".into(),
                down: "s".into(),
                left: "a".into(),
                right: "d".into()
            }
        );
        assert!((m.speed_px_s - 200.0).abs() < 1.0, "{}", m.speed_px_s);
        assert!(m.evidence.contains("4 of 4 probe holds"), "{}", m.evidence);
        // The heading arrow, compass ticks and slider stayed in every probe: HUD (and the avatar).
        assert_eq!(m.hud.len(), 5, "{:?}", m.hud);
        let note = m.note(Some((14, None)));
        assert!(note.contains("white square element [14] at (641,361)"), "{note}");
    }

    #[test]
    fn a_probe_whose_frame_missed_the_avatar_is_outvoted() {
        let mut blind = follow_probe("a", (-60, 0));
        blind.moves[1] = None; // the player's sprite was not found again in this probe's frame
        let m = identify(&[
            follow_probe("w", (0, -60)),
            follow_probe("s", (0, 60)),
            blind,
            follow_probe("d", (60, 0)),
        ])
        .unwrap();
        assert_eq!(
            m.bbox,
            Rect::new(626, 346, 30, 30),
            "three of four probes name the player"
        );
        assert_eq!(m.keys.left, "a", "the blind probe's world motion still counts");
    }

    #[test]
    fn the_element_that_moves_while_the_world_stays_is_the_avatar_of_a_fixed_camera() {
        let probe = |key: &str, d: (i32, i32)| ProbeSample {
            key: key.into(),
            held_ms: 250,
            before: vec![
                hud(),
                el(300, 300, 20, "green round"),
                el(50, 50, 20, "red square"),
            ],
            moves: vec![
                Some((0.0, 0.0)),
                Some((f64::from(d.0), f64::from(d.1))),
                Some((0.0, 0.0)),
            ],
            frame: (640, 480),
        };
        let m = identify(&[
            probe("Up", (0, -25)),
            probe("Down", (0, 25)),
            probe("Left", (-25, 0)),
            probe("Right", (25, 0)),
        ])
        .unwrap();
        assert!(!m.follow_camera);
        assert_eq!(m.keys.left, "Left");
        assert!((m.speed_px_s - 100.0).abs() < 1.0);
    }

    #[test]
    fn probes_that_move_nothing_or_miss_a_direction_are_named_failures() {
        let still = ProbeSample {
            key: "w".into(),
            held_ms: 300,
            before: vec![hud(), el(10, 10, 20, "grey round"), el(90, 90, 20, "grey round")],
            moves: vec![Some((0.0, 0.0)); 3],
            frame: (200, 200),
        };
        assert!(matches!(identify(&[still]), Err(SelfIdError::NothingMoved(_))));
        assert_eq!(
            identify(&[follow_probe("w", (0, -60)), follow_probe("s", (0, 60))]),
            Err(SelfIdError::MissingDirection("left"))
        );
    }

    fn plan() -> SteerPlan {
        let model = identify(&[
            follow_probe("w", (0, -60)),
            follow_probe("s", (0, 60)),
            follow_probe("a", (-60, 0)),
            follow_probe("d", (60, 0)),
        ])
        .unwrap();
        SteerPlan::new(&model, model.bbox, Rect::new(440, 560, 22, 22), 10_000)
    }

    #[test]
    fn the_controller_holds_the_keys_toward_the_target_and_arrives_by_dead_reckoning() {
        // The model picks where, the hands do the how
        let p = plan();
        assert_eq!(p.reach_px, 20.8);
        let mut c = SteerController::new(p, MonoTime::ZERO);
        let first = c.tick(MonoTime::ZERO, None);
        assert_eq!(first.want, ["a", "s"], "target is down-left");
        let mut t = MonoTime::ZERO;
        let mut end = None;
        let mut seen = Vec::new();
        for _ in 0..600 {
            t = t.plus(Duration::from_micros(16_667));
            let s = c.tick(t, None);
            seen.push(s.want.clone());
            if s.end.is_some() {
                end = s.end;
                break;
            }
        }
        assert!(matches!(end, Some(SteerEnd::Reached { .. })), "{end:?}");
        assert!(seen.iter().any(|w| w == &["a".to_string()]) || seen.iter().any(|w| w == &["s".to_string()]));
        let ms = t.as_millis();
        // 200 px left and 197 px down at 200 px/s, diagonal first: about 1.4 s.
        assert!((1100..1700).contains(&ms), "arrived after {ms} ms");
        assert_eq!(
            c.tick(t.plus(Duration::from_millis(16)), None).want,
            Vec::<String>::new()
        );
    }

    #[test]
    fn tracking_corrects_the_prediction_and_a_vanished_target_near_the_end_is_reached() {
        let p = plan();
        let mut c = SteerController::new(p.clone(), MonoTime::ZERO);
        c.tick(MonoTime::ZERO, None);
        // Tracking says the target is already just right of the avatar: steer right only.
        let a = p.avatar.center();
        let s = c.tick(MonoTime::from_millis(16), Some(Point::new(a.x + 35, a.y)));
        assert_eq!(s.want, ["d"]);
        // Then it vanishes (collected) while predicted within twice the reach.
        let s = c.tick(MonoTime::from_millis(100), None);
        assert!(
            matches!(s.end, Some(SteerEnd::Reached { tracked: false, .. })),
            "{s:?}"
        );
    }

    #[test]
    fn a_target_that_keeps_its_distance_while_tracked_is_unreachable() {
        // a HUD sprite: tracking finds it at the same offset however long the keys are held
        let p = plan();
        let a = p.avatar.center();
        let fixed = Point::new(a.x - 200, a.y + 150);
        let mut c = SteerController::new(p, MonoTime::ZERO);
        let mut end = None;
        for i in 0..120 {
            if let Some(e) = c.tick(MonoTime::from_millis(i * 16), Some(fixed)).end {
                end = Some((i * 16, e));
                break;
            }
        }
        let (at, e) = end.unwrap();
        assert!(
            matches!(e, SteerEnd::Unreachable { left_px } if left_px > 200.0),
            "{e:?}"
        );
        assert!((600..700).contains(&at), "stopped after {at} ms");
    }

    #[test]
    fn the_bound_ends_a_run_that_cannot_arrive() {
        let mut p = plan();
        p.speed_px_s = 1.0; // the avatar barely moves in the controller's estimate
        p.bound_ms = 500;
        let mut c = SteerController::new(p, MonoTime::ZERO);
        let mut end = None;
        for i in 0..60 {
            if let Some(e) = c.tick(MonoTime::from_millis(i * 16), None).end {
                end = Some(e);
                break;
            }
        }
        assert!(
            matches!(end, Some(SteerEnd::TimedOut { left_px }) if left_px > 200.0),
            "{end:?}"
        );
    }
}
