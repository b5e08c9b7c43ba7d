//! No-progress detection (FR-LOOP-005): perceptual stasis while acting, a stalled progress sensor, a
//! repeating cycle of (screen signature, action), and an elevated rate of unverified actions — plus a streak
//! of refutations (the no-progress counter FR-GND-007 increments). Thresholds are configuration.

use gamepilot_core::MonoTime;
use gamepilot_grounding::Verdict;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// One no-progress signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StuckSignal {
    /// The frame did not change for a while although the agent was acting.
    PerceptualStasis,
    /// The declared progress sensor has not increased for a while.
    ProgressStalled,
    /// The same (screen, action) sequence keeps repeating.
    RepeatingCycle,
    /// Too many recent verdicts were inconclusive.
    UnverifiedRate,
    /// Several refutations in a row (FR-GND-007's no-progress counter).
    RefutationStreak,
}

/// Thresholds of the detectors. The defaults were chosen by measurement on the recorded sessions in
/// corpus/sessions (docs/stuck-thresholds.md; `crates/io/replay/tests/stuck_calibration.rs` keeps them honest).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SignalConfig {
    /// Stasis: unchanged frames while acting for this long.
    pub stasis_ms: u64,
    /// An action counts as "acting" for this long after it was executed (held input always counts).
    pub acting_window_ms: u64,
    /// Progress: no increase of the progress sensor for this long.
    pub progress_stall_ms: u64,
    /// The smallest increase that counts as progress.
    pub progress_min_increase: f64,
    /// Cycle: the longest period looked for.
    pub cycle_max_period: usize,
    /// Cycle: how many repetitions of the period make a cycle.
    pub cycle_repeats: usize,
    /// Unverified rate: how many recent verdicts are considered.
    pub unverified_window: usize,
    /// Unverified rate: the fraction of inconclusive verdicts in the window that fires.
    pub unverified_threshold: f64,
    /// Refutation streak: this many refutations in a row fire (0 disables).
    pub refuted_streak: u32,
}

impl Default for SignalConfig {
    fn default() -> Self {
        SignalConfig {
            stasis_ms: 5000,
            acting_window_ms: 1000,
            progress_stall_ms: 35_000,
            progress_min_increase: 1e-9,
            cycle_max_period: 4,
            cycle_repeats: 2,
            unverified_window: 8,
            unverified_threshold: 0.5,
            refuted_streak: 3,
        }
    }
}

/// The detectors' state. Each detector restarts its window after firing, so a signal fires again only
/// on fresh evidence (this is what lets the escalation ladder advance one rung per failure).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detectors {
    cfg: SignalConfig,
    last_action_at: Option<MonoTime>,
    stasis_since: Option<MonoTime>,
    progress_best: Option<f64>,
    progress_since: Option<MonoTime>,
    history: VecDeque<(u64, String)>,
    verdicts: VecDeque<bool>,
    refuted_run: u32,
    /// Whether the last tick counted as acting (held input or a recent action).
    #[serde(default)]
    acting: bool,
}

/// The raw quantity behind each detector at one moment, before any threshold (what the calibration of
/// docs/stuck-thresholds.md measures). A detector that fired has restarted its window, so for the raw
/// figures run [`Detectors`] with thresholds that never fire ([`SignalConfig::never_firing`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SignalLevels {
    /// How long the frame has been unchanged while acting; `None` when the last tick was not acting.
    pub stasis_ms: Option<u64>,
    /// How long since the progress sensor last increased; `None` until it has been read once.
    pub progress_stall_ms: Option<u64>,
    /// The most repetitions of any period (1..=`cycle_max_period`) at the tail of the (screen, action)
    /// history; 0 before the first action.
    pub cycle_repeats: usize,
    /// The inconclusive fraction of the last `unverified_window` verdicts; `None` until the window is full.
    pub unverified_fraction: Option<f64>,
}

impl SignalConfig {
    /// The configuration whose detectors (stasis, progress, cycle, unverified) never fire within any
    /// session, with the windows of `self`: for measuring raw levels.
    pub fn never_firing(self) -> SignalConfig {
        SignalConfig {
            stasis_ms: u64::MAX / 4,
            progress_stall_ms: u64::MAX / 4,
            cycle_repeats: 1 << 16,
            unverified_threshold: f64::INFINITY,
            refuted_streak: 0,
            ..self
        }
    }
}

impl Detectors {
    pub fn new(cfg: SignalConfig) -> Self {
        Detectors {
            cfg,
            last_action_at: None,
            stasis_since: None,
            progress_best: None,
            progress_since: None,
            history: VecDeque::new(),
            verdicts: VecDeque::new(),
            refuted_run: 0,
            acting: false,
        }
    }

    /// The raw level of each detector at `now` (FR-LOOP-005 calibration).
    pub fn levels(&self, now: MonoTime) -> SignalLevels {
        let ms = |t: MonoTime| now.since(t).as_millis() as u64;
        let n = self.history.len();
        let cycle_repeats = (1..=self.cfg.cycle_max_period.max(1))
            .filter(|p| *p <= n)
            .map(|p| {
                let matching = (p..n)
                    .rev()
                    .take_while(|i| self.history[*i] == self.history[*i - p])
                    .count();
                (p + matching) / p
            })
            .max()
            .unwrap_or(0);
        let window = self.cfg.unverified_window.max(1);
        SignalLevels {
            stasis_ms: self.acting.then(|| self.stasis_since.map(ms).unwrap_or(0)),
            progress_stall_ms: self.progress_since.map(ms),
            cycle_repeats,
            unverified_fraction: (self.verdicts.len() == window)
                .then(|| self.verdicts.iter().filter(|b| **b).count() as f64 / window as f64),
        }
    }

    pub fn config(&self) -> &SignalConfig {
        &self.cfg
    }

    /// One reflex tick: whether the frame changed, how many inputs are held, the progress sensor's value.
    /// Returns the signals that fire and whether the progress sensor advanced.
    pub fn on_tick(
        &mut self,
        now: MonoTime,
        frame_changed: bool,
        held: u32,
        progress: Option<f64>,
    ) -> (Vec<StuckSignal>, bool) {
        let mut fired = Vec::new();
        // Perceptual stasis while acting.
        let recently_acted = self
            .last_action_at
            .is_some_and(|t| now.since(t) <= Duration::from_millis(self.cfg.acting_window_ms));
        let acting = held > 0 || recently_acted;
        self.acting = acting;
        if frame_changed || !acting {
            self.stasis_since = None;
        } else {
            let since = *self.stasis_since.get_or_insert(now);
            if now.since(since) >= Duration::from_millis(self.cfg.stasis_ms) {
                fired.push(StuckSignal::PerceptualStasis);
                self.stasis_since = Some(now);
            }
        }
        // Stalled progress sensor (undefined readings are ignored: they are neither progress nor regress).
        let mut advanced = false;
        if let Some(v) = progress.filter(|v| v.is_finite()) {
            match self.progress_best {
                None => {
                    self.progress_best = Some(v);
                    self.progress_since = Some(now);
                }
                Some(best) if v >= best + self.cfg.progress_min_increase => {
                    self.progress_best = Some(v);
                    self.progress_since = Some(now);
                    advanced = true;
                }
                Some(best) if v < best => self.progress_best = Some(v),
                Some(_) => {}
            }
        }
        if let Some(since) = self.progress_since {
            if now.since(since) >= Duration::from_millis(self.cfg.progress_stall_ms) {
                fired.push(StuckSignal::ProgressStalled);
                self.progress_since = Some(now);
            }
        }
        (fired, advanced)
    }

    /// An action was executed on the screen with `signature`; `key` identifies the action. Returns
    /// `RepeatingCycle` when the tail of the history repeats a period `cycle_repeats` times.
    /// Move every window on by `by` (a pause the user took): no detector counts it.
    pub fn shift_clocks(&mut self, by: Duration) {
        for t in [
            &mut self.last_action_at,
            &mut self.stasis_since,
            &mut self.progress_since,
        ] {
            if let Some(t) = t.as_mut() {
                *t = t.plus(by);
            }
        }
    }

    pub fn on_action(&mut self, now: MonoTime, signature: u64, key: &str) -> Option<StuckSignal> {
        self.last_action_at = Some(now);
        let max_p = self.cfg.cycle_max_period.max(1);
        let reps = self.cfg.cycle_repeats.max(2);
        self.history.push_back((signature, key.to_string()));
        while self.history.len() > max_p.saturating_mul(reps) {
            self.history.pop_front();
        }
        let n = self.history.len();
        for p in 1..=max_p {
            if n < p * reps {
                break;
            }
            let tail_start = n - p * reps;
            let periodic = (tail_start + p..n).all(|i| self.history[i] == self.history[i - p]);
            if periodic {
                self.history.clear();
                return Some(StuckSignal::RepeatingCycle);
            }
        }
        None
    }

    /// A verdict arrived. Returns `UnverifiedRate` and/or `RefutationStreak` when they fire.
    pub fn on_verdict(&mut self, verdict: Verdict) -> Vec<StuckSignal> {
        let mut fired = Vec::new();
        let window = self.cfg.unverified_window.max(1);
        self.verdicts.push_back(verdict == Verdict::Inconclusive);
        while self.verdicts.len() > window {
            self.verdicts.pop_front();
        }
        if self.verdicts.len() == window {
            let unverified = self.verdicts.iter().filter(|b| **b).count() as f64 / window as f64;
            if unverified >= self.cfg.unverified_threshold {
                fired.push(StuckSignal::UnverifiedRate);
                self.verdicts.clear();
            }
        }
        match verdict {
            Verdict::Refuted => {
                self.refuted_run += 1;
                if self.cfg.refuted_streak > 0 && self.refuted_run >= self.cfg.refuted_streak {
                    fired.push(StuckSignal::RefutationStreak);
                    self.refuted_run = 0;
                }
            }
            Verdict::Confirmed => self.refuted_run = 0,
            Verdict::Inconclusive => {}
        }
        fired
    }

    /// The no-progress counter: refutations since the last confirmation (FR-GND-007).
    pub fn refuted_run(&self) -> u32 {
        self.refuted_run
    }

    /// After an escalation rung: every detector needs fresh evidence before it fires again.
    pub fn restart(&mut self, now: MonoTime) {
        self.stasis_since = None;
        if self.progress_since.is_some() {
            self.progress_since = Some(now);
        }
        self.history.clear();
        self.verdicts.clear();
        self.refuted_run = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> MonoTime {
        MonoTime::from_millis(v)
    }

    #[test]
    fn stasis_fires_only_while_acting_and_unchanged() {
        // FR-LOOP-005 (perceptual stasis while acting)
        let mut d = Detectors::new(SignalConfig {
            stasis_ms: 1000,
            ..Default::default()
        });
        // not acting: no stasis however long the screen is still
        for t in (0..3000).step_by(100) {
            assert!(d.on_tick(ms(t), false, 0, None).0.is_empty());
        }
        // holding a key with a frozen screen
        let mut fired_at = None;
        for t in (3000..5000).step_by(100) {
            if d.on_tick(ms(t), false, 1, None)
                .0
                .contains(&StuckSignal::PerceptualStasis)
            {
                fired_at.get_or_insert(t);
            }
        }
        assert_eq!(fired_at, Some(4000));
        // a changing frame resets it
        let mut d = Detectors::new(SignalConfig {
            stasis_ms: 1000,
            ..Default::default()
        });
        for t in (0..3000).step_by(100) {
            assert!(d.on_tick(ms(t), t % 500 == 0, 1, None).0.is_empty());
        }
        // a recent discrete action also counts as acting
        let mut d = Detectors::new(SignalConfig {
            stasis_ms: 500,
            acting_window_ms: 2000,
            ..Default::default()
        });
        d.on_action(ms(0), 1, "click 3");
        let fired: Vec<_> = (0..10)
            .flat_map(|i| d.on_tick(ms(i * 100), false, 0, None).0)
            .collect();
        assert_eq!(fired, vec![StuckSignal::PerceptualStasis]);
    }

    #[test]
    fn stalled_progress_sensor_fires_and_undefined_is_ignored() {
        // FR-LOOP-005 (stalled progress sensor)
        let mut d = Detectors::new(SignalConfig {
            progress_stall_ms: 1000,
            ..Default::default()
        });
        assert!(d.on_tick(ms(0), true, 0, None).0.is_empty()); // not armed until a value is read
        assert!(d.on_tick(ms(5000), true, 0, Some(1.0)).0.is_empty());
        let (s, adv) = d.on_tick(ms(5500), true, 0, Some(2.0));
        assert!(s.is_empty() && adv);
        assert!(d.on_tick(ms(6000), true, 0, None).0.is_empty());
        assert!(d.on_tick(ms(6400), true, 0, Some(2.0)).0.is_empty());
        assert_eq!(
            d.on_tick(ms(6500), true, 0, None).0,
            vec![StuckSignal::ProgressStalled]
        );
        // restarts: fires again only after another full window
        assert!(d.on_tick(ms(7000), true, 0, Some(2.0)).0.is_empty());
        assert_eq!(
            d.on_tick(ms(7500), true, 0, Some(2.0)).0,
            vec![StuckSignal::ProgressStalled]
        );
    }

    #[test]
    fn repeating_cycle_of_screen_and_action() {
        // FR-LOOP-005 (repeating cycle)
        let mut d = Detectors::new(SignalConfig {
            cycle_max_period: 3,
            cycle_repeats: 3,
            ..Default::default()
        });
        // A→B→A→B→A→B on alternating screens: period 2, three repeats
        let seq = [(1, "left"), (2, "right"), (1, "left"), (2, "right"), (1, "left")];
        for (s, k) in seq {
            assert_eq!(d.on_action(ms(0), s, k), None);
        }
        assert_eq!(d.on_action(ms(0), 2, "right"), Some(StuckSignal::RepeatingCycle));
        // the same action on changing screens is not a cycle
        let mut d = Detectors::new(SignalConfig {
            cycle_repeats: 3,
            ..Default::default()
        });
        for s in 0..20 {
            assert_eq!(d.on_action(ms(0), s, "right"), None);
        }
        // the same action on the same screen three times is
        assert_eq!(d.on_action(ms(0), 99, "click 4"), None);
        assert_eq!(d.on_action(ms(0), 99, "click 4"), None);
        assert_eq!(
            d.on_action(ms(0), 99, "click 4"),
            Some(StuckSignal::RepeatingCycle)
        );
        // the default (docs/stuck-thresholds.md): the same action on the same screen twice
        let mut d = Detectors::new(SignalConfig::default());
        assert_eq!(d.on_action(ms(0), 7, "click 2"), None);
        assert_eq!(
            d.on_action(ms(0), 7, "click 2"),
            Some(StuckSignal::RepeatingCycle)
        );
    }

    #[test]
    fn elevated_unverified_rate() {
        // FR-LOOP-005 (elevated unverified rate), INV-GND-001
        let mut d = Detectors::new(SignalConfig {
            unverified_window: 4,
            unverified_threshold: 0.5,
            ..Default::default()
        });
        assert!(d.on_verdict(Verdict::Inconclusive).is_empty());
        assert!(d.on_verdict(Verdict::Confirmed).is_empty());
        assert!(d.on_verdict(Verdict::Confirmed).is_empty());
        assert!(d.on_verdict(Verdict::Confirmed).is_empty()); // 1/4
        assert!(d.on_verdict(Verdict::Inconclusive).is_empty()); // 1/4 (window slides)
        assert_eq!(
            d.on_verdict(Verdict::Inconclusive),
            vec![StuckSignal::UnverifiedRate]
        ); // 2/4
        assert!(d.on_verdict(Verdict::Inconclusive).is_empty()); // window restarted
    }

    #[test]
    fn levels_report_raw_quantities_without_firing() {
        // FR-LOOP-005 (calibration: the raw quantity behind each signal)
        let mut d = Detectors::new(SignalConfig::default().never_firing());
        assert_eq!(d.levels(ms(0)).cycle_repeats, 0);
        assert_eq!(d.levels(ms(0)).stasis_ms, None);
        // acting (a key held) on a frozen screen for 9 s: stasis grows past the default 4 s, no firing
        for t in (0..=9000).step_by(100) {
            assert!(d.on_tick(ms(t), false, 1, Some(3.0)).0.is_empty());
        }
        let l = d.levels(ms(9000));
        assert_eq!(l.stasis_ms, Some(9000));
        assert_eq!(l.progress_stall_ms, Some(9000));
        d.on_tick(ms(9100), true, 1, Some(4.0)); // changed frame, progress
        let l = d.levels(ms(9100));
        assert_eq!((l.stasis_ms, l.progress_stall_ms), (Some(0), Some(0)));
        d.on_tick(ms(12000), false, 0, None); // not acting
        assert_eq!(d.levels(ms(12000)).stasis_ms, None);
        // A B A B A: period 2 repeated 2.5 times -> 2; then a run of one action: period 1
        for (sig, k) in [(1, "a"), (2, "b"), (1, "a"), (2, "b"), (1, "a")] {
            assert_eq!(d.on_action(ms(0), sig, k), None);
        }
        assert_eq!(d.levels(ms(0)).cycle_repeats, 2);
        for _ in 0..5 {
            d.on_action(ms(0), 9, "c");
        }
        assert_eq!(d.levels(ms(0)).cycle_repeats, 5);
        // unverified fraction over a full window only
        for v in [Verdict::Inconclusive, Verdict::Confirmed, Verdict::Confirmed] {
            assert!(d.on_verdict(v).is_empty());
        }
        assert_eq!(d.levels(ms(0)).unverified_fraction, None);
        for _ in 0..5 {
            d.on_verdict(Verdict::Inconclusive);
        }
        assert_eq!(d.levels(ms(0)).unverified_fraction, Some(6.0 / 8.0));
    }

    #[test]
    fn refutation_streak_counts_no_progress() {
        // FR-GND-007 (increment the no-progress counters)
        let mut d = Detectors::new(SignalConfig {
            refuted_streak: 2,
            unverified_window: 100,
            ..Default::default()
        });
        assert!(d.on_verdict(Verdict::Refuted).is_empty());
        assert_eq!(d.refuted_run(), 1);
        assert!(d.on_verdict(Verdict::Confirmed).is_empty());
        assert_eq!(d.refuted_run(), 0);
        d.on_verdict(Verdict::Refuted);
        assert!(d.on_verdict(Verdict::Inconclusive).is_empty());
        assert_eq!(
            d.on_verdict(Verdict::Refuted),
            vec![StuckSignal::RefutationStreak]
        );
    }
}
