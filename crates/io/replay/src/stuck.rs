//! Calibration of the no-progress thresholds (FR-LOOP-005) on recorded sessions: recomputes each
//! signal's raw quantity through the planner's own detectors, labels every moment progressing or stuck
//! from the ground truth in the recording, and scores candidate thresholds (false positives, detection
//! delay). The method and the figures it gave are in docs/stuck-thresholds.md.
//!
//! Labelling rule: a *progress event* is a subgoal postcondition becoming true (`subgoal_completed`), the
//! goal postcondition becoming true, an increase of the declared progress sensor, or (with
//! [`LabelRule::confirmed_is_progress`]) a `confirmed` verdict. A moment `t` is *progressing* when a
//! progress event falls in `[t, t + horizon]`, *stuck* when none does, and *unknown* when none does but the
//! session ended before `t + horizon`. A *stuck stretch* starts at a progress event (or at the session's
//! start) that the next one follows more than `horizon` later; its detection delay is the time from its
//! start to the first firing inside it. A firing at a progressing moment is a false positive.

use crate::reader::Recording;
use crate::ReplayError;
use gamepilot_core::MonoTime;
use gamepilot_grounding::Verdict;
use gamepilot_planner::{Command, Detectors, Event, FrameChange, SignalConfig, StuckSignal};
use gamepilot_recording::Record;
use serde::Serialize;
use std::collections::BTreeMap;

/// The default look-ahead of the labelling rule.
pub const DEFAULT_HORIZON_MS: u64 = 15_000;

/// How moments are labelled (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LabelRule {
    pub horizon_ms: u64,
    /// A confirmed verdict counts as a progress event.
    pub confirmed_is_progress: bool,
}

impl Default for LabelRule {
    fn default() -> Self {
        LabelRule {
            horizon_ms: DEFAULT_HORIZON_MS,
            confirmed_is_progress: true,
        }
    }
}

/// What the detectors are fed, in recorded order (the inputs `LoopState` hands to its `Detectors`).
#[derive(Debug, Clone, PartialEq)]
pub enum DetectorInput {
    Tick {
        t_us: u64,
        changed: bool,
        held: u32,
        progress: Option<f64>,
    },
    /// An executed action on the screen of the last observation.
    Action {
        t_us: u64,
        signature: u64,
        key: String,
    },
    Verdict {
        t_us: u64,
        verdict: Verdict,
    },
}

impl DetectorInput {
    pub fn t_us(&self) -> u64 {
        match self {
            DetectorInput::Tick { t_us, .. }
            | DetectorInput::Action { t_us, .. }
            | DetectorInput::Verdict { t_us, .. } => *t_us,
        }
    }
}

/// Why a moment counts as progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressKind {
    Subgoal,
    Goal,
    Sensor,
    Confirmed,
}

/// One session reduced to the detectors' inputs and its progress events.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub name: String,
    pub start_us: u64,
    pub end_us: u64,
    pub inputs: Vec<DetectorInput>,
    pub progress: Vec<(u64, ProgressKind)>,
}

/// Reduce a recording to a [`Timeline`]: loop events in order, actions that were executed (an `execute`
/// decision), the loop's verdicts and subgoal completions (its decisions), cut at the first `stop`.
pub fn timeline(rec: &Recording) -> Result<Timeline, ReplayError> {
    let mut decisions: BTreeMap<u64, Vec<Command>> = BTreeMap::new();
    for l in &rec.lines {
        if let Record::Decision { input, command } = &l.record {
            let c: Command = serde_json::from_value(command.clone()).map_err(|e| ReplayError::BadEvent {
                seq: l.seq,
                message: format!("decision: {e}"),
            })?;
            decisions.entry(*input).or_default().push(c);
        }
    }
    let name = rec
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tl = Timeline {
        name,
        start_us: 0,
        end_us: 0,
        inputs: Vec::new(),
        progress: Vec::new(),
    };
    let mut started = None;
    let mut signature = 0;
    let mut goal_was_met = false;
    let mut sensor = Detectors::new(SignalConfig::default().never_firing());
    for l in &rec.lines {
        let Record::LoopEvent { event } = &l.record else {
            continue;
        };
        let t = l.t_us;
        let ev: Event = serde_json::from_value(event.clone()).map_err(|e| ReplayError::BadEvent {
            seq: l.seq,
            message: e.to_string(),
        })?;
        tl.start_us = *started.get_or_insert(t);
        tl.end_us = t;
        let cmds = decisions.remove(&l.seq).unwrap_or_default();
        match ev {
            Event::ReflexTick {
                change,
                held,
                progress,
                goal_met,
                ..
            } => {
                if goal_met == Some(true) && !goal_was_met {
                    tl.progress.push((t, ProgressKind::Goal));
                }
                goal_was_met = goal_met == Some(true);
                if sensor.on_tick(MonoTime(t), true, 0, progress).1 {
                    tl.progress.push((t, ProgressKind::Sensor));
                }
                tl.inputs.push(DetectorInput::Tick {
                    t_us: t,
                    changed: change != FrameChange::Unchanged,
                    held,
                    progress,
                });
            }
            Event::Observation { signature: s, .. } => signature = s,
            Event::ActionProposed { key, .. }
                if cmds.iter().any(|c| matches!(c, Command::Execute { .. })) =>
            {
                tl.inputs.push(DetectorInput::Action {
                    t_us: t,
                    signature,
                    key,
                });
            }
            _ => {}
        }
        let mut stop = false;
        for c in cmds {
            match c {
                Command::Verdict { verdict, .. } => {
                    if verdict == Verdict::Confirmed {
                        tl.progress.push((t, ProgressKind::Confirmed));
                    }
                    tl.inputs.push(DetectorInput::Verdict { t_us: t, verdict });
                }
                Command::SubgoalCompleted { .. } => tl.progress.push((t, ProgressKind::Subgoal)),
                Command::Stop { .. } => stop = true,
                _ => {}
            }
        }
        if stop {
            break;
        }
    }
    Ok(tl)
}

/// A moment's label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Progressing,
    Stuck,
    Unknown,
}

/// The rule a signal is judged by: the stalled-progress signal exists to catch actions that work but do
/// not advance the goal, so for it only goal-level progress counts (never a confirmed verdict); the other
/// three catch actions without effect, for which a confirmed verdict is progress.
pub fn rule_for(signal: StuckSignal, rule: &LabelRule) -> LabelRule {
    match signal {
        StuckSignal::ProgressStalled => LabelRule {
            confirmed_is_progress: false,
            ..*rule
        },
        _ => *rule,
    }
}

/// The progress events of `tl` that count under `rule`, in time order.
fn events(tl: &Timeline, rule: &LabelRule) -> Vec<u64> {
    let mut e: Vec<u64> = tl
        .progress
        .iter()
        .filter(|(_, k)| rule.confirmed_is_progress || *k != ProgressKind::Confirmed)
        .map(|(t, _)| *t)
        .collect();
    e.sort_unstable();
    e
}

fn label_at(events: &[u64], end_us: u64, rule: &LabelRule, t: u64) -> Label {
    let h = rule.horizon_ms * 1000;
    let i = events.partition_point(|e| *e < t);
    match events.get(i) {
        Some(e) if *e <= t + h => Label::Progressing,
        _ if t + h > end_us => Label::Unknown,
        _ => Label::Stuck,
    }
}

/// Label a moment of `tl`.
pub fn label(tl: &Timeline, rule: &LabelRule, t_us: u64) -> Label {
    label_at(&events(tl, rule), tl.end_us, rule, t_us)
}

/// The stuck stretches of `tl`: `(start, end)` in µs, the end being where the moments stop being stuck.
pub fn stretches(tl: &Timeline, rule: &LabelRule) -> Vec<(u64, u64)> {
    let h = rule.horizon_ms * 1000;
    let ev = events(tl, rule);
    let mut bounds = vec![tl.start_us];
    bounds.extend(ev.iter().copied().filter(|e| *e > tl.start_us));
    let mut out = Vec::new();
    for (k, s) in bounds.iter().enumerate() {
        // the stretch runs until `horizon` before the next event; after the last one, until the moments
        // become unknown (`horizon` before the end)
        let next = bounds.get(k + 1).copied().unwrap_or(tl.end_us);
        if next > s + h {
            out.push((*s, next - h));
        }
    }
    out
}

/// Summary statistics of a sample (nearest-rank percentiles).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Dist {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Dist {
    pub fn of(mut v: Vec<f64>) -> Dist {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return Dist::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Dist {
            n: v.len(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// The four calibrated signals (the refutation streak is FR-GND-007's counter, not calibrated here).
pub const SIGNALS: [StuckSignal; 4] = [
    StuckSignal::PerceptualStasis,
    StuckSignal::ProgressStalled,
    StuckSignal::RepeatingCycle,
    StuckSignal::UnverifiedRate,
];

/// The unit of a signal's raw quantity.
pub fn unit(signal: StuckSignal) -> &'static str {
    match signal {
        StuckSignal::PerceptualStasis | StuckSignal::ProgressStalled => "ms",
        StuckSignal::RepeatingCycle => "repeats",
        StuckSignal::UnverifiedRate => "fraction",
        StuckSignal::RefutationStreak => "refutations",
    }
}

/// Raw levels of every signal at every moment it is defined, labelled: `(signal, label, value)`.
/// Stasis and progress are sampled on reflex ticks, cycles on actions, the unverified rate on verdicts.
/// Each signal is labelled by [`rule_for`] it.
pub fn levels(tl: &Timeline, base: SignalConfig, rule: &LabelRule) -> Vec<(StuckSignal, Label, f64)> {
    let (loose, strict) = (*rule, rule_for(StuckSignal::ProgressStalled, rule));
    let (ev, ev_strict) = (events(tl, &loose), events(tl, &strict));
    let mut d = Detectors::new(base.never_firing());
    let mut out = Vec::new();
    for input in &tl.inputs {
        let t = input.t_us();
        let lab = label_at(&ev, tl.end_us, &loose, t);
        feed(&mut d, input);
        let l = d.levels(MonoTime(t));
        match input {
            DetectorInput::Tick { .. } => {
                if let Some(v) = l.stasis_ms {
                    out.push((StuckSignal::PerceptualStasis, lab, v as f64));
                }
                if let Some(v) = l.progress_stall_ms {
                    let lab = label_at(&ev_strict, tl.end_us, &strict, t);
                    out.push((StuckSignal::ProgressStalled, lab, v as f64));
                }
            }
            DetectorInput::Action { .. } => {
                out.push((StuckSignal::RepeatingCycle, lab, l.cycle_repeats as f64))
            }
            DetectorInput::Verdict { .. } => {
                if let Some(v) = l.unverified_fraction {
                    out.push((StuckSignal::UnverifiedRate, lab, v));
                }
            }
        }
    }
    out
}

/// The value of `cfg` at which `signal` fires, in the unit of its raw quantity.
pub fn threshold(signal: StuckSignal, cfg: &SignalConfig) -> f64 {
    match signal {
        StuckSignal::PerceptualStasis => cfg.stasis_ms as f64,
        StuckSignal::ProgressStalled => cfg.progress_stall_ms as f64,
        StuckSignal::RepeatingCycle => cfg.cycle_repeats as f64,
        StuckSignal::UnverifiedRate => cfg.unverified_threshold,
        StuckSignal::RefutationStreak => f64::from(cfg.refuted_streak),
    }
}

/// The safety margin of the criterion: a threshold must be at least this many times the largest raw value
/// its signal reached in any progressing moment of the corpus.
pub const MARGIN: f64 = 1.5;

fn feed(d: &mut Detectors, input: &DetectorInput) -> Vec<StuckSignal> {
    match input {
        DetectorInput::Tick {
            t_us,
            changed,
            held,
            progress,
        } => d.on_tick(MonoTime(*t_us), *changed, *held, *progress).0,
        DetectorInput::Action { t_us, signature, key } => d
            .on_action(MonoTime(*t_us), *signature, key)
            .into_iter()
            .collect(),
        DetectorInput::Verdict { verdict, .. } => d.on_verdict(*verdict),
    }
}

/// When `signal` fires over `tl` with thresholds `cfg` (each detector restarting its own window after
/// firing, as in the loop; the ladder's restart of all detectors is not modelled).
pub fn firings(tl: &Timeline, cfg: SignalConfig, signal: StuckSignal) -> Vec<u64> {
    let mut d = Detectors::new(cfg);
    tl.inputs
        .iter()
        .filter(|i| feed(&mut d, i).contains(&signal))
        .map(DetectorInput::t_us)
        .collect()
}

/// How one candidate threshold did over the corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// The threshold, in words (e.g. "stasis_ms=4000").
    pub name: String,
    pub config: SignalConfig,
    pub firings: usize,
    /// Firings at progressing moments.
    pub false_positives: usize,
    /// Firings at stuck moments.
    pub true_positives: usize,
    pub stretches: usize,
    /// Stuck stretches with at least one firing.
    pub detected: usize,
    /// Detection delay over the detected stretches, ms.
    pub delay_ms: Dist,
    /// The firing value, in the raw quantity's unit.
    pub threshold: f64,
    /// The largest raw value (with this candidate's windows) in a progressing moment.
    pub progressing_max: f64,
}

impl Score {
    /// False positives per firing (0 when it never fired).
    pub fn fp_rate(&self) -> f64 {
        if self.firings == 0 {
            0.0
        } else {
            self.false_positives as f64 / self.firings as f64
        }
    }

    /// The candidate is the configuration calibrated around (see [`candidates`]).
    pub fn is_current(&self) -> bool {
        self.name == "current" || self.name.ends_with(" (current)")
    }

    /// The threshold keeps [`MARGIN`] above everything seen while progressing.
    pub fn margin_ok(&self) -> bool {
        self.threshold >= MARGIN * self.progressing_max
    }
}

/// Score `cfg` for `signal` over the corpus.
pub fn score(
    corpus: &[Timeline],
    cfg: SignalConfig,
    signal: StuckSignal,
    rule: &LabelRule,
    name: String,
) -> Score {
    let rule = &rule_for(signal, rule);
    let mut s = Score {
        name,
        config: cfg,
        firings: 0,
        false_positives: 0,
        true_positives: 0,
        stretches: 0,
        detected: 0,
        delay_ms: Dist::default(),
        threshold: threshold(signal, &cfg),
        progressing_max: 0.0,
    };
    let mut delays = Vec::new();
    for tl in corpus {
        for (sig, lab, v) in levels(tl, cfg, rule) {
            if sig == signal && lab == Label::Progressing {
                s.progressing_max = s.progressing_max.max(v);
            }
        }
        let ev = events(tl, rule);
        let fired = firings(tl, cfg, signal);
        s.firings += fired.len();
        for t in &fired {
            match label_at(&ev, tl.end_us, rule, *t) {
                Label::Progressing => s.false_positives += 1,
                Label::Stuck => s.true_positives += 1,
                Label::Unknown => {}
            }
        }
        for (start, end) in stretches(tl, rule) {
            s.stretches += 1;
            if let Some(t) = fired.iter().find(|t| **t > start && **t < end) {
                s.detected += 1;
                delays.push((t - start) as f64 / 1000.0);
            }
        }
    }
    s.delay_ms = Dist::of(delays);
    s
}

/// The candidate thresholds tried for `signal`, each a variation of `base` (which is always among them,
/// named with a trailing " (current)").
pub fn candidates(signal: StuckSignal, base: SignalConfig) -> Vec<(String, SignalConfig)> {
    let mut out: Vec<(String, SignalConfig)> = match signal {
        StuckSignal::PerceptualStasis => [1000u64, 3000, 5000]
            .into_iter()
            .flat_map(|w| {
                [1000u64, 2000, 3000, 4000, 5000, 6000, 8000]
                    .into_iter()
                    .map(move |v| (w, v))
            })
            .map(|(w, v)| {
                (
                    format!("stasis_ms={v} acting_window_ms={w}"),
                    SignalConfig {
                        stasis_ms: v,
                        acting_window_ms: w,
                        ..base
                    },
                )
            })
            .collect(),
        StuckSignal::ProgressStalled => [
            10_000, 15_000, 20_000, 25_000, 30_000, 35_000, 40_000, 45_000, 60_000,
        ]
        .into_iter()
        .map(|v| {
            (
                format!("progress_stall_ms={v}"),
                SignalConfig {
                    progress_stall_ms: v,
                    ..base
                },
            )
        })
        .collect(),
        StuckSignal::RepeatingCycle => [2, 3, 4, 5, 6]
            .into_iter()
            .map(|v| {
                (
                    format!("cycle_repeats={v}"),
                    SignalConfig {
                        cycle_repeats: v,
                        ..base
                    },
                )
            })
            .collect(),
        StuckSignal::UnverifiedRate => [4usize, 8, 12]
            .into_iter()
            .flat_map(|w| [0.5, 0.75, 1.0].into_iter().map(move |f| (w, f)))
            .map(|(w, f)| {
                (
                    format!("unverified_window={w} threshold={f}"),
                    SignalConfig {
                        unverified_window: w,
                        unverified_threshold: f,
                        ..base
                    },
                )
            })
            .collect(),
        StuckSignal::RefutationStreak => Vec::new(),
    };
    match out.iter_mut().find(|(_, c)| *c == base) {
        Some((n, _)) => n.push_str(" (current)"),
        None => out.push(("current".into(), base)),
    }
    out
}

/// The selection criterion of docs/stuck-thresholds.md. A candidate is *safe* when it has no false
/// positive and keeps [`MARGIN`] above every raw value seen in a progressing moment. Among the safe
/// candidates that detect at least one stuck stretch: the most stretches detected, then the shortest median
/// delay (then the current value, then the first listed). When no safe candidate detects anything the
/// corpus has no evidence for a change: the current value if it is safe, else the safe candidate with the
/// lowest threshold.
pub fn choose(scores: &[Score]) -> Option<&Score> {
    let safe: Vec<&Score> = scores
        .iter()
        .filter(|s| s.false_positives == 0 && s.margin_ok())
        .collect();
    let best = safe.iter().copied().filter(|s| s.detected > 0).min_by(|a, b| {
        b.detected
            .cmp(&a.detected)
            .then(a.delay_ms.p50.total_cmp(&b.delay_ms.p50))
            .then(b.is_current().cmp(&a.is_current()))
    });
    best.or_else(|| safe.iter().copied().find(|s| s.is_current()))
        .or_else(|| {
            safe.iter()
                .copied()
                .min_by(|a, b| a.threshold.total_cmp(&b.threshold))
        })
}

/// The calibration of one signal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalCalibration {
    pub signal: StuckSignal,
    pub unit: &'static str,
    pub progressing: Dist,
    pub stuck: Dist,
    pub scores: Vec<Score>,
    /// The name of the candidate [`choose`] picks, if any qualifies.
    pub chosen: Option<String>,
}

/// A session's share of the corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionFigures {
    pub name: String,
    pub seconds: f64,
    pub actions: usize,
    pub verdicts: usize,
    pub progress_events: usize,
    pub stretches: usize,
    /// Seconds of moments labelled progressing / stuck (reflex-tick sampled).
    pub progressing_s: f64,
    pub stuck_s: f64,
}

/// The whole calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    pub rule: LabelRule,
    pub base: SignalConfig,
    pub sessions: Vec<SessionFigures>,
    pub signals: Vec<SignalCalibration>,
}

/// Calibrate over `corpus` around the thresholds `base`.
pub fn calibrate(corpus: &[Timeline], base: SignalConfig, rule: &LabelRule) -> Calibration {
    let mut samples: Vec<(StuckSignal, Label, f64)> = Vec::new();
    let mut sessions = Vec::new();
    for tl in corpus {
        let ev = events(tl, rule);
        let (mut prog, mut stuck) = (0u64, 0u64);
        let ticks: Vec<u64> = tl
            .inputs
            .iter()
            .filter(|i| matches!(i, DetectorInput::Tick { .. }))
            .map(DetectorInput::t_us)
            .collect();
        for w in ticks.windows(2) {
            match label_at(&ev, tl.end_us, rule, w[0]) {
                Label::Progressing => prog += w[1] - w[0],
                Label::Stuck => stuck += w[1] - w[0],
                Label::Unknown => {}
            }
        }
        sessions.push(SessionFigures {
            name: tl.name.clone(),
            seconds: (tl.end_us - tl.start_us) as f64 / 1e6,
            actions: tl
                .inputs
                .iter()
                .filter(|i| matches!(i, DetectorInput::Action { .. }))
                .count(),
            verdicts: tl
                .inputs
                .iter()
                .filter(|i| matches!(i, DetectorInput::Verdict { .. }))
                .count(),
            progress_events: ev.len(),
            stretches: stretches(tl, rule).len(),
            progressing_s: prog as f64 / 1e6,
            stuck_s: stuck as f64 / 1e6,
        });
        samples.extend(levels(tl, base, rule));
    }
    let signals = SIGNALS
        .iter()
        .map(|&signal| {
            let of = |want: Label| {
                Dist::of(
                    samples
                        .iter()
                        .filter(|(s, l, _)| *s == signal && *l == want)
                        .map(|(_, _, v)| *v)
                        .collect(),
                )
            };
            let scores: Vec<Score> = candidates(signal, base)
                .into_iter()
                .map(|(name, cfg)| score(corpus, cfg, signal, rule, name))
                .collect();
            let chosen = choose(&scores).map(|s| s.name.clone());
            SignalCalibration {
                signal,
                unit: unit(signal),
                progressing: of(Label::Progressing),
                stuck: of(Label::Stuck),
                scores,
                chosen,
            }
        })
        .collect();
    Calibration {
        rule: *rule,
        base,
        sessions,
        signals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(t_ms: u64, changed: bool, held: u32) -> DetectorInput {
        DetectorInput::Tick {
            t_us: t_ms * 1000,
            changed,
            held,
            progress: None,
        }
    }

    fn tl(inputs: Vec<DetectorInput>, progress: Vec<u64>, end_ms: u64) -> Timeline {
        Timeline {
            name: "t".into(),
            start_us: 0,
            end_us: end_ms * 1000,
            inputs,
            progress: progress
                .into_iter()
                .map(|t| (t * 1000, ProgressKind::Subgoal))
                .collect(),
        }
    }

    #[test]
    fn labels_and_stretches_follow_the_rule() {
        // FR-LOOP-005 (labelling rule of the calibration)
        let rule = LabelRule {
            horizon_ms: 10_000,
            confirmed_is_progress: false,
        };
        // progress at 5 s and 40 s, session ends at 60 s
        let t = tl(Vec::new(), vec![5_000, 40_000], 60_000);
        assert_eq!(label(&t, &rule, 0), Label::Progressing);
        assert_eq!(label(&t, &rule, 6_000 * 1000), Label::Stuck);
        assert_eq!(label(&t, &rule, 30_000 * 1000), Label::Progressing);
        assert_eq!(label(&t, &rule, 45_000 * 1000), Label::Stuck);
        assert_eq!(label(&t, &rule, 55_000 * 1000), Label::Unknown);
        assert_eq!(
            stretches(&t, &rule),
            vec![(5_000_000, 30_000_000), (40_000_000, 50_000_000)]
        );
    }

    #[test]
    fn stasis_scores_count_false_positives_and_delay() {
        // FR-LOOP-005 (false positives while progressing, detection delay in stuck stretches)
        let rule = LabelRule {
            horizon_ms: 10_000,
            confirmed_is_progress: false,
        };
        // A key held for 60 s on a screen that changes once, at 12 s; progress at 12 s and 40 s.
        let mut inputs: Vec<DetectorInput> = (0..600).map(|k| tick(k * 100, k == 120, 1)).collect();
        inputs.push(tick(60_000, false, 0));
        let t = tl(inputs, vec![12_000, 40_000], 60_000);
        // stuck stretches: before the first event (0-2 s), 12-30 s, 40-50 s
        assert_eq!(
            stretches(&t, &rule),
            vec![(0, 2_000_000), (12_000_000, 30_000_000), (40_000_000, 50_000_000)]
        );
        let cfg = SignalConfig {
            stasis_ms: 4_000,
            ..SignalConfig::default()
        };
        // fires every 4 s of stasis: 4, 8, (change at 12) 16.1, 20.1, ... 56.1
        let fired = firings(&t, cfg, StuckSignal::PerceptualStasis);
        assert_eq!(fired.len(), 13);
        assert_eq!(&fired[..3], &[4_000_000, 8_000_000, 16_100_000]);
        let s = score(
            std::slice::from_ref(&t),
            cfg,
            StuckSignal::PerceptualStasis,
            &rule,
            "4 s".into(),
        );
        // progressing at 4, 8 (event at 12 s ahead) and 32.1, 36.1 (event at 40 s ahead)
        assert_eq!(s.false_positives, 4);
        // stuck at 16.1 .. 28.1 and 40.1 .. 48.1; 52.1 and 56.1 are unknown (the session ends first)
        assert_eq!(s.true_positives, 7);
        assert_eq!((s.stretches, s.detected), (3, 2));
        assert_eq!((s.delay_ms.p50, s.delay_ms.max), (100.0, 4_100.0));
        // a lazier threshold: one firing, at 12.1 + 30 s, inside the last stretch
        let lazy = score(
            std::slice::from_ref(&t),
            SignalConfig {
                stasis_ms: 30_000,
                ..cfg
            },
            StuckSignal::PerceptualStasis,
            &rule,
            "30 s".into(),
        );
        assert_eq!((lazy.firings, lazy.false_positives, lazy.detected), (1, 0, 1));
        assert_eq!(lazy.delay_ms.max, 2_100.0);
        // while progressing (30-40 s) the screen had been frozen for up to 27.9 s: 30 s is within the
        // margin of that, so neither candidate qualifies
        assert_eq!(lazy.progressing_max, 27_900.0);
        assert!(!lazy.margin_ok());
        let mut scores = vec![s, lazy];
        assert_eq!(choose(&scores), None);
        // a threshold beyond the margin that detects nothing is the fallback
        let calm = score(
            std::slice::from_ref(&t),
            SignalConfig {
                stasis_ms: 45_000,
                ..cfg
            },
            StuckSignal::PerceptualStasis,
            &rule,
            "45 s".into(),
        );
        assert!(calm.margin_ok() && calm.detected == 0 && calm.false_positives == 0);
        scores.push(calm);
        assert_eq!(choose(&scores).map(|s| s.name.as_str()), Some("45 s"));
        // and one that detects something within the margin wins over it
        let mut good = scores[2].clone();
        good.name = "good".into();
        good.detected = 1;
        scores.push(good);
        assert_eq!(choose(&scores).map(|s| s.name.as_str()), Some("good"));
    }

    #[test]
    fn dist_percentiles() {
        let d = Dist::of((1..=100).map(f64::from).collect());
        assert_eq!((d.n, d.p50, d.p90, d.p99, d.max), (100, 50.0, 90.0, 99.0, 100.0));
        assert_eq!(Dist::of(Vec::new()).n, 0);
    }
}
