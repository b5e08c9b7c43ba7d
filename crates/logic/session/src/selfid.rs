//! The session's self-identification: on the first observation that shows something that
//! could move (at least three small unlabelled elements, no dialogue) it holds each configured direction
//! key briefly, one at a time, with a perceive-only tactical tick (no model call) after each hold, and
//! hands the frames around every hold to `gamepilot_grounding::identify`. A failed attempt (a menu, a
//! paused game) is retried on a different view, at most [`MAX_ATTEMPTS`] times. Pure state:
//! observations in, "hold this key next" or the result out.

use crate::scene::SceneKind;
use gamepilot_grounding::{identify, AvatarModel, ProbeSample, SeenElement, SelfIdError};
use gamepilot_vision::Observation;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The user's steering set-up (`run --move-keys`, on by default in `demo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteeringConfig {
    /// The direction keys to probe (which does what is learned, not assumed).
    pub probe_keys: Vec<String>,
    /// How long each probe holds its key.
    pub probe_ms: u64,
    /// The longest one `move_to` may steer.
    pub max_steer_ms: u64,
}

impl SteeringConfig {
    /// The set-up for these probe keys (`--move-keys w,s,a,d`); `None` when no key is named.
    pub fn from_keys(keys: &[String]) -> Option<SteeringConfig> {
        let keys: Vec<String> = keys
            .iter()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect();
        (!keys.is_empty()).then(|| SteeringConfig {
            probe_keys: keys,
            ..SteeringConfig::default()
        })
    }
}

impl Default for SteeringConfig {
    fn default() -> Self {
        SteeringConfig {
            probe_keys: ["w", "s", "a", "d"].map(String::from).to_vec(),
            probe_ms: 300,
            max_steer_ms: 8_000,
        }
    }
}

/// The elements of an observation as self-identification sees them.
pub fn seen(obs: &Observation) -> Vec<SeenElement> {
    obs.elements
        .iter()
        .map(|e| SeenElement {
            bbox: e.bbox,
            looks: e.looks.clone(),
            labelled: e.label.is_some(),
        })
        .collect()
}

/// [`seen`] and, last, the view's centre box the tactical thread also measures
/// (`gamepilot_vision::track::view_centre_box`): the moves of a probe follow this order.
fn probed(obs: &Observation) -> Vec<SeenElement> {
    let mut v = seen(obs);
    v.push(SeenElement {
        bbox: gamepilot_vision::track::view_centre_box(obs.frame_size),
        looks: None,
        labelled: false,
    });
    v
}

/// A probe's holds as one history line, its action and its outcome: "held w, s, a, d for 300 ms each",
/// "done: all confirmed" (or each key's verdict when they differ). Short: the line is in every prompt
/// that follows, and the first of them waits on the tokens it costs.
pub fn probe_told(holds: &[(String, gamepilot_grounding::Verdict)], probe_ms: u64) -> (String, String) {
    let keys: Vec<&str> = holds.iter().map(|(k, _)| k.as_str()).collect();
    let action = format!("held {} for {probe_ms} ms each", keys.join(", "));
    let outcome = match holds.first() {
        Some((_, first)) if holds.iter().all(|(_, v)| v == first) => format!("done: all {}", first.as_str()),
        _ => {
            let each: Vec<String> = holds.iter().map(|(k, v)| format!("{k} {}", v.as_str())).collect();
            format!("done: {}", each.join(", "))
        }
    };
    (action, outcome)
}

/// Attempts before self-identification gives up for the session.
pub const MAX_ATTEMPTS: u32 = 3;

/// Small unlabelled elements (at most this side) are what might move.
const SMALL_PX: u32 = 64;

/// Whether an observation shows something that could move: three or more small unlabelled elements.
fn could_move(obs: &Observation) -> bool {
    obs.elements
        .iter()
        .filter(|e| e.label.is_none() && e.bbox.w <= SMALL_PX && e.bbox.h <= SMALL_PX)
        .count()
        >= 3
}

/// Where `move_to` may go on this observation: unlabelled sprite-sized elements (96 px or less) that are
/// neither the avatar's own parts (within one and a half of its size from its centre) nor HUD sprites
/// self-identification saw stay while the world moved.
pub fn move_targets(obs: &Observation, avatar: &AvatarModel) -> Vec<gamepilot_core::ElementId> {
    let (ax, ay) = (avatar.bbox.center().x, avatar.bbox.center().y);
    let own = 1.5 * f64::from(avatar.bbox.w.max(avatar.bbox.h));
    obs.elements
        .iter()
        .filter(|e| e.label.is_none() && e.bbox.w <= 96 && e.bbox.h <= 96)
        .filter(|e| {
            let c = e.bbox.center();
            f64::from(c.x - ax).hypot(f64::from(c.y - ay)) > own
        })
        .filter(|e| {
            let c = e.bbox.center();
            !avatar
                .hud
                .iter()
                .any(|h| (h.center().x - c.x).abs() <= 4 && (h.center().y - c.y).abs() <= 4)
        })
        .map(|e| e.id)
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Not identified; `failed` names the views earlier attempts failed on.
    Idle,
    Probing {
        keys: VecDeque<String>,
        before: Vec<SeenElement>,
        holding: Option<String>,
        samples: Vec<ProbeSample>,
    },
    Known(AvatarModel),
    Failed(String),
}

/// What the session does after an observation.
#[derive(Debug, Clone, PartialEq)]
pub enum SelfIdStep {
    /// Nothing to do for self-identification.
    Nothing,
    /// Hold this key for the probe time (a session action), then perceive again.
    Hold(String),
    /// Identification ended.
    Done(Result<AvatarModel, SelfIdError>),
}

/// Self-identification's state for one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfId {
    cfg: Option<SteeringConfig>,
    state: State,
    /// The signatures of the views earlier attempts failed on (never probed again).
    failed_on: Vec<u64>,
    /// The signature of the view the running attempt began on.
    began_on: u64,
}

impl SelfId {
    pub fn new(cfg: Option<SteeringConfig>) -> SelfId {
        SelfId {
            cfg,
            state: State::Idle,
            failed_on: Vec::new(),
            began_on: 0,
        }
    }

    pub fn enabled(&self) -> bool {
        self.cfg.is_some()
    }

    pub fn config(&self) -> Option<&SteeringConfig> {
        self.cfg.as_ref()
    }

    /// Probing: the next tactical tick only perceives.
    /// Whether this observation starts a probe (so a model call on it would be set aside unread).
    pub fn would_start_probing(&self, obs: &Observation, scene: SceneKind, signature: u64) -> bool {
        matches!(self.state, State::Idle)
            && self
                .cfg
                .as_ref()
                .is_some_and(|cfg| self.worth_probing(cfg, obs, scene, signature))
    }

    fn worth_probing(
        &self,
        cfg: &SteeringConfig,
        obs: &Observation,
        scene: SceneKind,
        signature: u64,
    ) -> bool {
        scene != SceneKind::Dialogue
            && could_move(obs)
            && !self.failed_on.contains(&signature)
            && (self.failed_on.len() as u32) < MAX_ATTEMPTS
            && !cfg.probe_keys.is_empty()
    }

    pub fn probing(&self) -> bool {
        matches!(self.state, State::Probing { .. })
    }

    pub fn avatar(&self) -> Option<&AvatarModel> {
        match &self.state {
            State::Known(m) => Some(m),
            _ => None,
        }
    }

    pub fn failure(&self) -> Option<&str> {
        match &self.state {
            State::Failed(r) => Some(r),
            _ => None,
        }
    }

    /// A probe hold was cancelled, blocked or refused (a replan cancels its subgoal's actions): its frame
    /// is no evidence; the same key is held again after the next observation.
    pub fn probe_lost(&mut self) {
        if let State::Probing { keys, holding, .. } = &mut self.state {
            if let Some(k) = holding.take() {
                keys.push_front(k);
            }
        }
    }

    /// The camera turned: which key moves the avatar where may have changed with the view's heading, so
    /// what was learned is dropped and the next view that could move is probed again (earlier failed
    /// views are not held against the new heading).
    pub fn camera_turned(&mut self) {
        if matches!(self.state, State::Known(_) | State::Failed(_)) {
            self.state = State::Idle;
            self.failed_on.clear();
        }
    }

    /// One observation (after a probe hold, or any other), with its view signature and, after a probe
    /// hold, how each element of the observation before it moved (see `TacticalOutcome::moves`).
    pub fn on_observation(
        &mut self,
        obs: &Observation,
        scene: SceneKind,
        signature: u64,
        moves: &[Option<(f64, f64)>],
    ) -> SelfIdStep {
        let Some(cfg) = self.cfg.clone() else {
            return SelfIdStep::Nothing;
        };
        let now_seen = probed(obs);
        let frame = (obs.frame_size.w, obs.frame_size.h);
        let worth_probing = self.worth_probing(&cfg, obs, scene, signature);
        match &mut self.state {
            State::Idle if worth_probing => {
                self.began_on = signature;
                let mut keys: VecDeque<String> = cfg.probe_keys.iter().cloned().collect();
                let first = keys.pop_front().unwrap_or_default();
                self.state = State::Probing {
                    keys,
                    before: now_seen,
                    holding: Some(first.clone()),
                    samples: Vec::new(),
                };
                SelfIdStep::Hold(first)
            }
            State::Probing {
                keys,
                before,
                holding,
                samples,
            } => {
                if let Some(key) = holding.take() {
                    let before = std::mem::take(before);
                    let mut moves = moves.to_vec();
                    moves.resize(before.len(), None);
                    samples.push(ProbeSample {
                        key,
                        held_ms: cfg.probe_ms,
                        before,
                        moves,
                        frame,
                    });
                }
                *before = now_seen;
                if let Some(next) = keys.pop_front() {
                    *holding = Some(next.clone());
                    return SelfIdStep::Hold(next);
                }
                let result = identify(samples);
                self.state = match &result {
                    Ok(m) => State::Known(m.clone()),
                    Err(e) => {
                        self.failed_on.push(self.began_on);
                        if self.failed_on.len() as u32 >= MAX_ATTEMPTS {
                            State::Failed(e.to_string())
                        } else {
                            State::Idle
                        }
                    }
                };
                SelfIdStep::Done(result)
            }
            _ => SelfIdStep::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relevance::{model_order, Focus};
    use gamepilot_core::{ElementId, MonoTime, Rect, Size};
    use gamepilot_vision::{Element, ElementSource, FrameChange};

    /// The moves the tactical thread measures after a hold that shifted the world by `shift` (the avatar,
    /// first, stays; the other three move).
    fn shift_moves(shift: (i32, i32)) -> Vec<Option<(f64, f64)>> {
        let w = Some((f64::from(-shift.0), f64::from(-shift.1)));
        vec![Some((0.0, 0.0)), w, w, w, Some((0.0, 0.0))]
    }

    /// The play field: the avatar, two coins and a hazard (the world moves by `shift`).
    fn obs(shift: (i32, i32)) -> Observation {
        let el = |id: u32, x: i32, y: i32, w: u32, looks: &str| Element {
            id: ElementId(id),
            bbox: Rect::new(x, y, w, w),
            confidence: 0.3,
            source: ElementSource::Component,
            label: None,
            looks: Some(looks.into()),
            layer: None,
            selected: false,
        };
        Observation {
            at: MonoTime::ZERO,
            frame_size: Size::new(1280, 720),
            class: FrameChange::Scene,
            texts: Vec::new(),
            elements: vec![
                el(14, 626, 346, 30, "white square"),
                el(15, 102 - shift.0, 400 - shift.1, 22, "yellow round"),
                el(16, 584 - shift.0, 528 - shift.1, 22, "yellow round"),
                el(17, 194 - shift.0, 546 - shift.1, 34, "red square"),
            ],
        }
    }

    #[test]
    fn four_probe_holds_on_the_play_field_name_the_avatar_and_its_keys() {
        // Self-identification through the session's own sequence of holds and perceive-only ticks
        let mut s = SelfId::new(Some(SteeringConfig::default()));
        assert_eq!(
            s.on_observation(&obs((0, 0)), SceneKind::Dialogue, 1, &shift_moves((0, 0))),
            SelfIdStep::Nothing
        );
        assert_eq!(
            s.on_observation(&obs((0, 0)), SceneKind::Play, 1, &shift_moves((0, 0))),
            SelfIdStep::Hold("w".into())
        );
        assert!(s.probing());
        assert_eq!(
            s.on_observation(&obs((0, -60)), SceneKind::Play, 1, &shift_moves((0, -60))),
            SelfIdStep::Hold("s".into())
        );
        assert_eq!(
            s.on_observation(&obs((0, 0)), SceneKind::Play, 1, &shift_moves((0, 60))),
            SelfIdStep::Hold("a".into())
        );
        assert_eq!(
            s.on_observation(&obs((-60, 0)), SceneKind::Play, 1, &shift_moves((-60, 0))),
            SelfIdStep::Hold("d".into())
        );
        let SelfIdStep::Done(Ok(m)) =
            s.on_observation(&obs((0, 0)), SceneKind::Play, 1, &shift_moves((60, 0)))
        else {
            panic!("identified")
        };
        // The view's centre box stayed with the player's sprite: the avatar is where the sprite is.
        let c = m.bbox.center();
        assert!((c.x - 641).abs() <= 4 && (c.y - 361).abs() <= 4, "{:?}", m.bbox);
        assert_eq!((m.keys.up.as_str(), m.keys.right.as_str()), ("w", "d"));
        assert!(s.avatar().is_some() && !s.probing());
        // A lost probe (cancelled by a replan) is no sample and its key is held again.
        let mut lost = SelfId::new(Some(SteeringConfig::default()));
        assert_eq!(
            lost.on_observation(&obs((0, 0)), SceneKind::Play, 1, &[]),
            SelfIdStep::Hold("w".into())
        );
        lost.probe_lost();
        assert_eq!(
            lost.on_observation(&obs((0, -20)), SceneKind::Play, 1, &shift_moves((0, -20))),
            SelfIdStep::Hold("w".into())
        );
        assert_eq!(
            s.on_observation(&obs((0, 0)), SceneKind::Play, 1, &shift_moves((0, 0))),
            SelfIdStep::Nothing
        );
        // A camera turn drops the key map: the next view is probed again.
        s.camera_turned();
        assert!(s.avatar().is_none());
        assert_eq!(
            s.on_observation(&obs((0, 0)), SceneKind::Play, 1, &[]),
            SelfIdStep::Hold("w".into())
        );
    }

    #[test]
    fn the_model_reads_goal_words_first_then_places_nearest_the_avatar() {
        // The order of the list a small model reads
        let mut o = obs((0, 0));
        o.elements.push(Element {
            id: ElementId(30),
            bbox: Rect::new(20, 60, 250, 72),
            confidence: 1.0,
            source: ElementSource::Rect,
            label: Some("0 Coins".into()),
            looks: None,
            layer: None,
            selected: false,
        });
        o.elements.push(Element {
            id: ElementId(31),
            bbox: Rect::new(600, 80, 120, 50),
            confidence: 1.0,
            source: ElementSource::Rect,
            label: Some("Play".into()),
            looks: None,
            layer: None,
            selected: false,
        });
        assert_eq!(
            model_order(&o, &Focus::new("Click Play to start", ""), None),
            [ElementId(31)]
        );
        let mut s = SelfId::new(Some(SteeringConfig::default()));
        s.on_observation(&o, SceneKind::Play, 1, &[]);
        for (shift, m) in [
            ((0, -60), (0, 60)),
            ((0, 0), (0, -60)),
            ((-60, 0), (-60, 0)),
            ((0, 0), (60, 0)),
        ] {
            let mut moves = shift_moves(m);
            moves.insert(4, None);
            moves.insert(5, None);
            let mut next = obs(shift);
            next.elements.extend(o.elements[4..].iter().cloned());
            s.on_observation(&next, SceneKind::Play, 1, &moves);
        }
        let avatar = s.avatar().expect("identified").clone();
        // Coins (15, 16) and the hazard (17) are places; the avatar's own sprite (14) and panels are not.
        let mut targets = move_targets(&o, &avatar);
        targets.sort();
        assert_eq!(targets, [ElementId(15), ElementId(16), ElementId(17)]);
        assert_eq!(
            model_order(&o, &Focus::new("collect a coin", ""), Some(&avatar)),
            [ElementId(16), ElementId(17), ElementId(15), ElementId(30)],
            "the places, nearest first; then the Coins panel, which shares a stem with the goal"
        );
    }

    #[test]
    fn a_probe_is_told_in_one_short_line() {
        use gamepilot_grounding::Verdict;
        let all: Vec<(String, Verdict)> = ["w", "s", "a", "d"]
            .map(|k| (k.to_string(), Verdict::Confirmed))
            .to_vec();
        assert_eq!(
            probe_told(&all, 300),
            (
                "held w, s, a, d for 300 ms each".into(),
                "done: all confirmed".into()
            )
        );
        let mut mixed = all.clone();
        mixed[1].1 = Verdict::Refuted;
        assert_eq!(
            probe_told(&mixed, 300).1,
            "done: w confirmed, s refuted, a confirmed, d confirmed"
        );
    }

    #[test]
    fn a_disabled_session_never_probes_and_a_still_world_is_a_named_failure() {
        let mut off = SelfId::new(None);
        assert_eq!(
            off.on_observation(&obs((0, 0)), SceneKind::Play, 1, &shift_moves((0, 0))),
            SelfIdStep::Nothing
        );
        let mut s = SelfId::new(Some(SteeringConfig {
            probe_keys: vec!["w".into()],
            ..SteeringConfig::default()
        }));
        // Each failed view is not probed again; another view is, until MAX_ATTEMPTS failed.
        for attempt in 0..MAX_ATTEMPTS as u64 {
            assert_eq!(
                s.on_observation(&obs((0, 0)), SceneKind::Play, 10 + attempt, &[]),
                SelfIdStep::Hold("w".into())
            );
            assert!(matches!(
                s.on_observation(&obs((0, 0)), SceneKind::Play, 10 + attempt, &[]),
                SelfIdStep::Done(Err(SelfIdError::NothingMoved(_)))
            ));
            assert_eq!(
                s.on_observation(&obs((0, 0)), SceneKind::Play, 10 + attempt, &[]),
                SelfIdStep::Nothing,
                "the failed view is not probed again"
            );
        }
        assert!(s.failure().is_some());
        assert_eq!(
            s.on_observation(&obs((0, 0)), SceneKind::Play, 99, &shift_moves((0, 0))),
            SelfIdStep::Nothing
        );
        // A view with nothing small and unlabelled (a menu) is not probed.
        let mut fresh = SelfId::new(Some(SteeringConfig::default()));
        let mut menu = obs((0, 0));
        menu.elements.truncate(2);
        assert_eq!(
            fresh.on_observation(&menu, SceneKind::Play, 5, &[]),
            SelfIdStep::Nothing
        );
    }
}
