//! `gamepilot bench model --scenes`: the latency that matters — from a new screen to the first action
//! sent — measured by replaying recorded sessions' screens (the practice game, real Debian games) through
//! today's `Session` against real model hosts. The screens come in the order the run saw them; the session
//! decides on each as `run` would (direct grounding, probe, model call), its tactical and deliberative
//! calls go to the hosts, and its actions are taken as accepted and confirmed (the recorded world moves on
//! regardless: an open-loop replay of perception, a closed loop of decisions).

use crate::BenchError;
use gamepilot_core::{FrameChange, MonoTime};
use gamepilot_executor::ActionEnd;
use gamepilot_model::{CancelToken, HostClient};
use gamepilot_session::plan::Postconditions;
use gamepilot_session::{
    Effect, Input, ModelAnswer, PlanOutcome, ReflexCommand, Session, SessionConfig, SteerEnd,
};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The hosts a scene replay talks to: one per cadence, as `run` starts them.
pub struct SceneHosts<'a> {
    pub tactical: &'a HostClient,
    pub deliberative: &'a HostClient,
    pub model_name: &'a str,
}

/// The figures of one or more replays; times in milliseconds.
#[derive(Debug, Default, Clone)]
pub struct SceneFigures {
    /// Per new screen the session acted on: the recorded perception, then today's composition and model
    /// calls until the first action was sent.
    pub new_screen_ms: Vec<f64>,
    /// Of those, the screens acted on without a model call (direct grounding, the probe).
    pub without_call: u32,
    /// Per new screen acted on, the prompt tokens its calls had evaluated (0: no call), in order.
    pub screen_evaluated: Vec<u64>,
    /// New screens the session sent no action for before the next screen came.
    pub unanswered: u32,
    /// Per tactical call: wall latency, prompt tokens evaluated (not from the cache), and on a new screen.
    pub tactical_ms: Vec<f64>,
    pub evaluated: Vec<f64>,
    pub cached_tokens: u64,
    pub prompt_tokens: u64,
    /// Prompt tokens of the calls made on a new screen, and of those, the ones the cache served.
    pub scene_prompt_tokens: u64,
    pub scene_cached_tokens: u64,
    pub deliberative_ms: Vec<f64>,
    /// Per deliberative pass, summed over its calls (a schema retry is a second call): prompt tokens
    /// evaluated, tokens generated, and the host's time for each.
    pub deliberative_evaluated: Vec<f64>,
    pub deliberative_prompt: Vec<f64>,
    pub deliberative_generated: Vec<f64>,
    pub deliberative_prompt_ms: Vec<f64>,
    pub deliberative_predicted_ms: Vec<f64>,
    /// Passes that took a second call because the first reply broke the schema.
    pub deliberative_retried: u32,
}

impl SceneFigures {
    pub fn cache_ratio(&self) -> f64 {
        ratio(self.cached_tokens, self.prompt_tokens)
    }

    /// The prefix cache's share on a new screen's calls (what stays byte-identical across a scene change).
    pub fn scene_cache_ratio(&self) -> f64 {
        ratio(self.scene_cached_tokens, self.scene_prompt_tokens)
    }

    pub fn merge(&mut self, other: SceneFigures) {
        self.new_screen_ms.extend(other.new_screen_ms);
        self.without_call += other.without_call;
        self.screen_evaluated.extend(other.screen_evaluated);
        self.unanswered += other.unanswered;
        self.tactical_ms.extend(other.tactical_ms);
        self.evaluated.extend(other.evaluated);
        self.cached_tokens += other.cached_tokens;
        self.prompt_tokens += other.prompt_tokens;
        self.scene_prompt_tokens += other.scene_prompt_tokens;
        self.scene_cached_tokens += other.scene_cached_tokens;
        self.deliberative_ms.extend(other.deliberative_ms);
        self.deliberative_evaluated.extend(other.deliberative_evaluated);
        self.deliberative_prompt.extend(other.deliberative_prompt);
        self.deliberative_generated.extend(other.deliberative_generated);
        self.deliberative_prompt_ms.extend(other.deliberative_prompt_ms);
        self.deliberative_predicted_ms
            .extend(other.deliberative_predicted_ms);
        self.deliberative_retried += other.deliberative_retried;
    }

    /// One deliberative pass's calls, summed.
    fn pass(&mut self, took: Duration, calls: &[gamepilot_model::CallTimings]) {
        self.deliberative_ms.push(took.as_secs_f64() * 1000.0);
        let sum = |f: &dyn Fn(&gamepilot_model::CallTimings) -> Option<f64>| {
            calls.iter().filter_map(f).sum::<f64>()
        };
        self.deliberative_evaluated
            .push(sum(&|c| c.prompt_evaluated.map(|n| n as f64)));
        self.deliberative_prompt
            .push(sum(&|c| c.prompt_tokens.map(|n| n as f64)));
        self.deliberative_generated
            .push(sum(&|c| c.completion_tokens.map(|n| n as f64)));
        self.deliberative_prompt_ms.push(sum(&|c| c.prompt_ms));
        self.deliberative_predicted_ms.push(sum(&|c| c.predicted_ms));
        if calls.len() > 1 {
            self.deliberative_retried += 1;
        }
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        f64::NAN
    } else {
        part as f64 / whole as f64
    }
}

/// A new screen being decided on: when its perception was recorded to take, when today's decision
/// began, and whether a model call was made for it.
struct Pending {
    perceived_ms: f64,
    began: Instant,
    called: bool,
    /// Prompt tokens its calls had evaluated so far.
    evaluated: u64,
    /// Deliberative passes timed meanwhile: in `run` they go on beside the tactical cadence, not before it.
    beside: Duration,
}

/// The replay: the session, the time the hosts have taken so far (added to the recorded clock, so the
/// session sees its calls take what they took), and the figures.
struct Replay<'a> {
    session: Session,
    hosts: &'a SceneHosts<'a>,
    post: Postconditions,
    cancel: CancelToken,
    /// The session's clock: the recorded gaps between inputs (each at most [`MAX_GAP`]) plus the time
    /// today's hosts took.
    clock_us: u64,
    last_recorded_us: u64,
    awaiting_perception: Option<u64>,
    screen: Option<Pending>,
    figures: SceneFigures,
}

/// Replay one recorded session's inputs (the recorded configuration, today's decisions) against the hosts.
pub fn replay_scenes(
    mut cfg: SessionConfig,
    start: MonoTime,
    recorded: Vec<(u64, Input)>,
    hosts: &SceneHosts<'_>,
) -> Result<SceneFigures, BenchError> {
    // Today's behaviour, whatever the recording's version chose.
    let defaults = SessionConfig::default();
    cfg.behaviours.act_while_planning = defaults.behaviours.act_while_planning;
    cfg.behaviours.fresh_frames = defaults.behaviours.fresh_frames;
    cfg.loop_cfg.start_pass_sees_first_screen = defaults.loop_cfg.start_pass_sees_first_screen;
    let post = Postconditions {
        sources: cfg.postconditions.clone(),
    };
    let session = Session::new(cfg, start)?;
    let mut r = Replay {
        session,
        hosts,
        post,
        cancel: CancelToken::new(),
        clock_us: start.0,
        last_recorded_us: start.0,
        awaiting_perception: None,
        screen: None,
        figures: SceneFigures::default(),
    };
    for (now_us, input) in recorded {
        if r.session.stopped().is_some() {
            break;
        }
        let gap = now_us.saturating_sub(r.last_recorded_us);
        r.last_recorded_us = now_us;
        r.clock_us += gap.min(MAX_GAP.as_micros() as u64);
        let now = MonoTime(r.clock_us);
        match input {
            Input::Perceived(mut p) => {
                // Only a tick the session started now is given the recorded screen.
                let Some(tick) = r.awaiting_perception.take() else {
                    continue;
                };
                if p.observation.class == FrameChange::Scene {
                    if r.screen.take().is_some() {
                        r.figures.unanswered += 1;
                    }
                    r.screen = Some(Pending {
                        perceived_ms: now_us.saturating_sub(p.started.0) as f64 / 1000.0,
                        began: Instant::now(),
                        called: false,
                        evaluated: 0,
                        beside: Duration::ZERO,
                    });
                }
                p.tick = tick;
                r.step(Input::Perceived(p), now);
            }
            // The session's own calls and actions are answered by the hosts and the bench below.
            Input::Replied { .. }
            | Input::CropPerceived(_)
            | Input::Plan(_)
            | Input::ActionAccepted { .. }
            | Input::ActionRejected { .. }
            | Input::ActionEnded { .. }
            | Input::Evidence { .. }
            | Input::Steered { .. }
            | Input::Research(_)
            | Input::Confirmation(_)
            | Input::Degrade(_)
            | Input::HostRestart(_) => {}
            other => r.step(other, now),
        }
    }
    if r.screen.is_some() {
        r.figures.unanswered += 1;
    }
    Ok(r.figures)
}

impl Replay<'_> {
    /// Step one input and answer what the session asks, depth first (a reply may start an action, whose
    /// acceptance may start the next tick).
    fn step(&mut self, input: Input, now: MonoTime) {
        let mut queue = VecDeque::from([input]);
        let mut now = now;
        while let Some(input) = queue.pop_front() {
            let effects = self.session.step(input, now);
            for effect in effects {
                match effect {
                    Effect::StartTactical(job) => self.awaiting_perception = Some(job.tick),
                    Effect::CallModel(call) => {
                        let on_screen = self.screen.as_mut().map(|s| s.called = true).is_some();
                        let began = Instant::now();
                        let report = gamepilot_runtime::tactical::carry_call(
                            self.hosts.tactical,
                            self.hosts.model_name,
                            96,
                            *call,
                            None,
                            &self.cancel,
                        );
                        let took = began.elapsed();
                        self.clock_us += took.as_micros() as u64;
                        now = MonoTime(self.clock_us);
                        if let Input::Replied {
                            answer: Ok(ModelAnswer::Act(r) | ModelAnswer::Localised { figures: r, .. }),
                            ..
                        } = &report.input
                        {
                            self.figures.tactical_ms.push(took.as_secs_f64() * 1000.0);
                            self.figures
                                .evaluated
                                .push(r.tokens_in.saturating_sub(r.cached_tokens) as f64);
                            self.figures.prompt_tokens += r.tokens_in;
                            self.figures.cached_tokens += r.cached_tokens;
                            if let Some(s) = self.screen.as_mut() {
                                s.evaluated += r.tokens_in.saturating_sub(r.cached_tokens);
                            }
                            if on_screen {
                                self.figures.scene_prompt_tokens += r.tokens_in;
                                self.figures.scene_cached_tokens += r.cached_tokens;
                            }
                        }
                        queue.push_back(report.input);
                    }
                    Effect::StartDeliberation(job) => {
                        let began = Instant::now();
                        let request =
                            gamepilot_runtime::deliberative::DeliberationRequest { job, image: None };
                        // The deliberative host runs beside the tactical one in `run`; here it is timed on
                        // its own, and the session is told after the time it took.
                        let d = gamepilot_runtime::deliberative::deliberate(
                            self.hosts.deliberative,
                            self.hosts.model_name,
                            &self.post,
                            &request,
                            &self.cancel,
                        );
                        let took = began.elapsed();
                        self.figures.pass(took, &d.calls);
                        if let Some(s) = self.screen.as_mut() {
                            s.beside += took;
                        }
                        self.clock_us += took.as_micros() as u64;
                        now = MonoTime(self.clock_us);
                        queue.push_back(Input::Plan(PlanOutcome {
                            reply: d.value,
                            first_id: d.first_id,
                            pass: d.pass,
                            plan: d.plan,
                            latency_ms: d.latency_ms,
                            research: d.research,
                        }));
                    }
                    Effect::WarmUp(prompt) => {
                        // As `run` does: the tactical host evaluates the session's invariant blocks
                        // while the first plan is being made, beside the cadences, never waited on.
                        let began = Instant::now();
                        let chat =
                            gamepilot_model::ChatRequest::from_prompt(self.hosts.model_name, &prompt, 1);
                        let _ = self.hosts.tactical.chat(&chat, &self.cancel);
                        let took = began.elapsed();
                        if let Some(s) = self.screen.as_mut() {
                            s.beside += took;
                        }
                        self.clock_us += took.as_micros() as u64;
                        now = MonoTime(self.clock_us);
                    }
                    Effect::Reflex(ReflexCommand::Submit { action, .. }) => {
                        self.first_action();
                        queue.push_back(Input::ActionAccepted { action });
                        queue.push_back(Input::Evidence {
                            action,
                            changed: Some(true),
                        });
                        queue.push_back(Input::ActionEnded {
                            action,
                            end: ActionEnd::Finished,
                        });
                    }
                    Effect::Reflex(ReflexCommand::Steer { action, .. }) => {
                        self.first_action();
                        queue.push_back(Input::ActionAccepted { action });
                        queue.push_back(Input::Steered {
                            action,
                            end: SteerEnd::Reached {
                                after_ms: 500,
                                tracked: true,
                            },
                            sightings: 10,
                        });
                    }
                    _ => {}
                }
            }
        }
    }

    /// The first action since the new screen: its latency is the recorded perception plus today's
    /// composition and calls.
    fn first_action(&mut self) {
        if let Some(s) = self.screen.take() {
            self.figures
                .new_screen_ms
                .push(s.perceived_ms + s.began.elapsed().saturating_sub(s.beside).as_secs_f64() * 1000.0);
            self.figures.screen_evaluated.push(s.evaluated);
            if !s.called {
                self.figures.without_call += 1;
            }
        }
    }
}

/// At most this long between two recorded inputs is replayed as recorded; longer gaps (a run waiting on
/// a slow host) are the recording's, not today's.
pub const MAX_GAP: Duration = Duration::from_secs(2);

/// A 60 Hz ticker scheduled as the reflex is (real-time where allowed) that measures how late each tick
/// woke while the replay keeps the hosts busy; [`ReflexProbe::stop`] returns the lateness samples (µs).
pub struct ReflexProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<f64>>,
    pub scheduling: gamepilot_runtime::worker::ReflexScheduling,
}

impl ReflexProbe {
    pub fn start() -> Result<ReflexProbe, BenchError> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("reflex-probe".into())
            .spawn(move || {
                let _ = tx.send(gamepilot_runtime::worker::raise_reflex_priority());
                let mut ticker = gamepilot_runtime::guardian_handle::Ticker::new(60);
                let mut late = Vec::new();
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    ticker.wait();
                    late.push(ticker.lateness.last().unwrap_or(0) as f64);
                }
                late
            })
            .map_err(|e| BenchError::io("spawning the reflex probe", e))?;
        let scheduling = rx
            .recv()
            .unwrap_or(gamepilot_runtime::worker::ReflexScheduling::Normal);
        Ok(ReflexProbe {
            stop,
            thread,
            scheduling,
        })
    }

    pub fn stop(self) -> Vec<f64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}
