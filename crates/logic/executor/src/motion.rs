//! Motion: camera turns as per-tick small relative steps (FR-ACT-004), pointer paths with a non-uniform
//! (minimum-jerk) velocity profile along a slightly curved path, and varied hold/gap durations
//! (FR-ACT-005). All randomness comes from a seeded generator so runs are reproducible.

use gamepilot_core::{MonoTime, Point};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// The minimum-jerk position profile: 0 at 0, 1 at 1, zero velocity and acceleration at both ends, so the
/// speed rises and falls (slow–fast–slow).
pub fn min_jerk(t: f64) -> f64 {
    let t = t.clamp(0.0, 1.0);
    t * t * t * (10.0 - 15.0 * t + 6.0 * t * t)
}

fn progress(now: MonoTime, start: MonoTime, duration: Duration) -> f64 {
    if duration.is_zero() {
        return 1.0;
    }
    (now.since(start).as_secs_f64() / duration.as_secs_f64()).clamp(0.0, 1.0)
}

/// A pointer path from one capture-space point to another: a quadratic Bézier whose control point is
/// pushed sideways, travelled with the minimum-jerk profile.
#[derive(Debug, Clone, PartialEq)]
pub struct PointerPath {
    from: (f64, f64),
    ctrl: (f64, f64),
    to: (f64, f64),
    start: MonoTime,
    duration: Duration,
}

impl PointerPath {
    /// Plan a path. Without an explicit duration it follows distance (Fitts-like, 120–600 ms) with ±15 %
    /// variation; the sideways bow is 4–15 % of the distance, to a random side.
    pub fn plan(
        from: Point,
        to: Point,
        start: MonoTime,
        duration: Option<Duration>,
        rng: &mut ChaCha8Rng,
    ) -> Self {
        let (fx, fy) = (from.x as f64, from.y as f64);
        let (tx, ty) = (to.x as f64, to.y as f64);
        let dist = ((tx - fx).powi(2) + (ty - fy).powi(2)).sqrt();
        let duration = duration.unwrap_or_else(|| {
            let base = (120.0 + dist * 0.6).clamp(120.0, 600.0);
            let jitter: f64 = rng.gen_range(0.85..1.15);
            Duration::from_micros((base * jitter * 1000.0) as u64)
        });
        let bow: f64 = rng.gen_range(0.04..0.15) * if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
        let (mx, my) = ((fx + tx) / 2.0, (fy + ty) / 2.0);
        // Perpendicular to the straight line.
        let (nx, ny) = if dist > 0.0 {
            (-(ty - fy) / dist, (tx - fx) / dist)
        } else {
            (0.0, 0.0)
        };
        let ctrl = (mx + nx * bow * dist, my + ny * bow * dist);
        PointerPath {
            from: (fx, fy),
            ctrl,
            to: (tx, ty),
            start,
            duration,
        }
    }

    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The point on the path at `now` (the target itself once the duration has passed).
    pub fn at(&self, now: MonoTime) -> Point {
        let s = min_jerk(progress(now, self.start, self.duration));
        if s >= 1.0 {
            return Point::new(self.to.0.round() as i32, self.to.1.round() as i32);
        }
        let u = 1.0 - s;
        let x = u * u * self.from.0 + 2.0 * u * s * self.ctrl.0 + s * s * self.to.0;
        let y = u * u * self.from.1 + 2.0 * u * s * self.ctrl.1 + s * s * self.to.1;
        Point::new(x.round() as i32, y.round() as i32)
    }

    pub fn done(&self, now: MonoTime) -> bool {
        progress(now, self.start, self.duration) >= 1.0
    }
}

/// A camera turn of (dx, dy) relative units spread over a duration: each tick emits the difference between
/// where the turn should be by now and what was already emitted, capped at `max_step` per axis, so the
/// total is exact and no tick carries a large jump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CameraStepper {
    total: (i32, i32),
    emitted: (i32, i32),
    start: MonoTime,
    duration: Duration,
    max_step: i32,
}

impl CameraStepper {
    pub fn new(dx: i32, dy: i32, start: MonoTime, duration: Duration, max_step: i32) -> Self {
        CameraStepper {
            total: (dx, dy),
            emitted: (0, 0),
            start,
            duration,
            max_step: max_step.max(1),
        }
    }

    /// The relative step due at `now` (already counted as emitted), or `None` when nothing is due.
    pub fn step(&mut self, now: MonoTime) -> Option<(i32, i32)> {
        let p = progress(now, self.start, self.duration);
        let want = |total: i32| (total as f64 * p).round() as i32;
        let dx = (want(self.total.0) - self.emitted.0).clamp(-self.max_step, self.max_step);
        let dy = (want(self.total.1) - self.emitted.1).clamp(-self.max_step, self.max_step);
        if dx == 0 && dy == 0 {
            return None;
        }
        self.emitted.0 += dx;
        self.emitted.1 += dy;
        Some((dx, dy))
    }

    /// Take back a step that was not delivered (event budget), so it is emitted later.
    pub fn undo(&mut self, step: (i32, i32)) {
        self.emitted.0 -= step.0;
        self.emitted.1 -= step.1;
    }

    pub fn finished(&self) -> bool {
        self.emitted == self.total
    }

    pub fn emitted(&self) -> (i32, i32) {
        self.emitted
    }
}

/// Varied human-scale durations (FR-ACT-005): key holds, button holds and gaps.
#[derive(Debug, Clone)]
pub struct Timing {
    rng: ChaCha8Rng,
}

impl Timing {
    pub fn new(rng: ChaCha8Rng) -> Self {
        Timing { rng }
    }

    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.rng.gen_range(lo..=hi))
    }

    /// How long a tapped key stays down.
    pub fn key_hold(&mut self) -> Duration {
        self.ms(40, 110)
    }

    /// How long a clicked button stays down.
    pub fn click_hold(&mut self) -> Duration {
        self.ms(50, 120)
    }

    /// The gap between typed characters.
    pub fn type_gap(&mut self) -> Duration {
        self.ms(30, 110)
    }

    /// The gap between the two clicks of a double click.
    pub fn double_click_gap(&mut self) -> Duration {
        self.ms(60, 120)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(42)
    }

    #[test]
    fn camera_steps_are_small_and_sum_exactly() {
        // FR-ACT-004
        let mut c = CameraStepper::new(300, -40, MonoTime::ZERO, Duration::from_millis(400), 80);
        let mut sum = (0, 0);
        let mut steps = 0;
        for tick in 0..=30u64 {
            if let Some((dx, dy)) = c.step(MonoTime(tick * 16_667)) {
                assert!(dx.abs() <= 20 && dy.abs() <= 5, "step ({dx},{dy}) too large");
                sum.0 += dx;
                sum.1 += dy;
                steps += 1;
            }
        }
        assert_eq!(sum, (300, -40));
        assert!(c.finished());
        assert!(steps >= 20, "only {steps} steps: the turn must be spread");
    }

    #[test]
    fn camera_step_is_capped_and_undo_catches_up() {
        // FR-ACT-004: a late tick never carries one big jump
        let mut c = CameraStepper::new(1000, 0, MonoTime::ZERO, Duration::from_millis(100), 50);
        assert_eq!(c.step(MonoTime::from_millis(200)), Some((50, 0)));
        c.undo((50, 0));
        assert_eq!(c.emitted(), (0, 0));
        let mut n = 0;
        while c.step(MonoTime::from_millis(200)).is_some() {
            n += 1;
        }
        assert_eq!(n, 20);
        assert!(c.finished());
    }

    #[test]
    fn pointer_path_velocity_is_not_uniform() {
        // FR-ACT-005
        let p = PointerPath::plan(
            Point::new(0, 0),
            Point::new(400, 0),
            MonoTime::ZERO,
            Some(Duration::from_millis(400)),
            &mut rng(),
        );
        assert_eq!(p.at(MonoTime::ZERO), Point::new(0, 0));
        assert_eq!(p.at(MonoTime::from_millis(400)), Point::new(400, 0));
        assert!(p.done(MonoTime::from_millis(400)));
        let x = |ms| p.at(MonoTime::from_millis(ms)).x;
        let early = x(40) - x(0);
        let middle = x(220) - x(180);
        assert!(
            middle > early * 3,
            "speed should peak mid-path: early {early}, middle {middle}"
        );
        // The path bows away from the straight line somewhere.
        assert!((0..=400)
            .step_by(20)
            .any(|ms| p.at(MonoTime::from_millis(ms)).y != 0));
    }

    #[test]
    fn timings_vary_but_repeat_with_the_seed() {
        // FR-ACT-005
        let mut a = Timing::new(rng());
        let mut b = Timing::new(rng());
        let xs: Vec<_> = (0..20).map(|_| a.key_hold()).collect();
        let ys: Vec<_> = (0..20).map(|_| b.key_hold()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|d| *d != xs[0]));
        assert!(xs
            .iter()
            .all(|d| *d >= Duration::from_millis(40) && *d <= Duration::from_millis(110)));
    }
}
