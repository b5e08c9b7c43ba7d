//! One start-up plan for every command that starts a session (`run`, `demo`), and the model hosts that
//! `eval` and the benches connect to the same way: the binary turns its flags into these plain values
//! (every refusal the flags decide comes then, before anything starts); [`AgentPlan::start`] connects and
//! probes the hosts, plans vision, starts the GPU watch and assembles the agent's configuration.

use crate::agent::AgentConfig;
use crate::stop_signals::StopSignals;
use crate::{say, say_err, RuntimeError};
use gamepilot_core::{Chord, ModelFamily, Rect};
use gamepilot_executor::ExecutorConfig;
use gamepilot_model::{
    CancelToken, Capabilities, HostClient, HostRole, HostTimeouts, LaunchSpec, LocalHost, WeightsSpec,
};
use gamepilot_session::{GroundingPath, LoopConfig};
use std::path::PathBuf;
use std::time::Duration;

/// The model hosts a command talks to: one at `endpoint`, or two llama-servers gamepilot starts on
/// loopback (one per cadence) from verified weights.
#[derive(Debug, Clone)]
pub struct HostPlan {
    /// An OpenAI-compatible host to use; `None`: gamepilot starts its own.
    pub endpoint: Option<String>,
    /// The weights (and projector) a started host loads, verified before loading (FR-MODEL-005).
    pub weights: WeightsSpec,
    pub mmproj: Option<WeightsSpec>,
    pub server_bin: PathBuf,
    /// The model name sent in requests (and probed for).
    pub model_name: String,
    pub call_timeout: Duration,
    /// A call to the deliberative host gamepilot starts: that host runs niced below everything else and
    /// serves one request at a time, so its calls get longer.
    pub deliberative_timeout: Duration,
    /// CPU threads of a llama-server that gamepilot starts.
    pub threads: u32,
}

/// Where a started host's threads stand in the kernel's eyes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostPriority {
    /// Nice 10: below the agent's own threads (the reflex), above everything a session can wait for.
    Tactical,
    /// Nice 19 in the idle scheduling class: what nobody else wants.
    Background,
}

impl HostPlan {
    /// Connect to the configured host, or start one. The returned host (if any) stops when dropped.
    pub fn connect(&self, cancel: &CancelToken) -> Result<(HostClient, Option<LocalHost>), RuntimeError> {
        let timeouts = HostTimeouts {
            connect: Duration::from_secs(2),
            call: self.call_timeout,
        };
        if let Some(url) = &self.endpoint {
            let client = HostClient::new(url, timeouts)?;
            client
                .health()
                .map_err(|e| RuntimeError::Setup(format!("model host {url} is not healthy: {e}")))?;
            return Ok((client, None));
        }
        let (client, host) = self.start_local(timeouts, HostPriority::Tactical, cancel)?;
        Ok((client, Some(host)))
    }

    /// [`HostPlan::connect`], then one probe, never a guess: the client speaks the host's dialect.
    pub fn connect_probed(
        &self,
        cancel: &CancelToken,
    ) -> Result<(HostClient, Option<LocalHost>, Capabilities), RuntimeError> {
        let (client, host) = self.connect(cancel)?;
        let caps = client
            .probe_for(&self.model_name)
            .map_err(|e| RuntimeError::Setup(format!("probing the model host: {e}")))?;
        Ok((client.with_kind(caps.kind), host, caps))
    }

    /// The deliberative cadence's own host when gamepilot starts its hosts: a second llama-server at
    /// nice 19 in the idle scheduling class, so a tactical call never waits behind a deliberative prompt
    /// batch nor shares the cores with one (measured: tactical p95
    /// 12.1 s on one host with two slots, 5.2 s with two hosts; docs/models.md). The weights are one
    /// mmapped file, held once in the page cache. `None` with an endpoint.
    pub fn connect_deliberative(
        &self,
        cancel: &CancelToken,
    ) -> Result<Option<(HostClient, LocalHost)>, RuntimeError> {
        if self.endpoint.is_some() {
            return Ok(None);
        }
        let timeouts = HostTimeouts {
            connect: Duration::from_secs(2),
            call: self.deliberative_timeout.max(self.call_timeout),
        };
        Ok(Some(self.start_local(
            timeouts,
            HostPriority::Background,
            cancel,
        )?))
    }

    /// A started host at `priority`.
    fn start_local(
        &self,
        timeouts: HostTimeouts,
        priority: HostPriority,
        cancel: &CancelToken,
    ) -> Result<(HostClient, LocalHost), RuntimeError> {
        // One slot per host, one host per cadence: tactical and deliberative prompts differ from block 1
        // on, and sharing a slot would evict the other's cached prefix (FR-CTX-002). Two threads with a
        // bounded OpenMP spin (set by the launcher) leave the reflex thread its core when idle.
        // The launcher verifies the weights and the projector before it looks for the server binary.
        let mut launch = LaunchSpec::new(self.server_bin.clone(), self.weights.clone());
        launch.mmproj = self.mmproj.clone();
        launch.ctx_size = 4096;
        launch.threads = self.threads;
        (launch.nice, launch.idle_class, launch.speculative) = match priority {
            // Short formulaic replies: prompt n-gram speculation pays (docs/models.md).
            HostPriority::Tactical => (10, false, true),
            // Only on the CPU time the tactical host, the game, the X server and perception leave: a
            // plan waits, a click should not (a new screen's tactical call at nice 10 beside a pass at
            // nice 19 evaluated ~100 prompt tokens/s on 2 cores, alone ~180).
            HostPriority::Background => (19, true, false),
        };
        launch.cancel = cancel.clone();
        let host = LocalHost::start(launch)
            .map_err(|e| RuntimeError::Setup(format!("starting the model host: {e}")))?;
        let client = host.client(timeouts)?;
        Ok((client, host))
    }
}

/// What the session sends a model and how it reads its points, as the user chose it; `None`: decided
/// from the host's probe and the model's name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VisionChoice {
    pub image: Option<bool>,
    pub family: Option<ModelFamily>,
    /// Pixels of one tactical image (the visual budget), capped by the family's limit.
    pub tactical_pixels: u64,
    /// Pixels of one deliberative image, capped by the family's limit.
    pub deliberative_pixels: u64,
}

/// What the session sends a model and how it reads its points, decided once at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisionPlan {
    pub image: bool,
    pub family: ModelFamily,
    pub tactical_pixels: u64,
    pub deliberative_pixels: u64,
}

impl VisionChoice {
    /// A choice whose budgets make sense: at least 2304 pixels, and the deliberative at least the tactical.
    pub fn new(
        image: Option<bool>,
        family: Option<ModelFamily>,
        tactical_pixels: u64,
        deliberative_pixels: u64,
    ) -> Result<VisionChoice, RuntimeError> {
        if tactical_pixels < 64 * 36 || deliberative_pixels < tactical_pixels {
            return Err(RuntimeError::Setup(format!(
                "--tactical-pixels {tactical_pixels} / --deliberative-pixels {deliberative_pixels}: at least 2304, and deliberative at least tactical"
            )));
        }
        Ok(VisionChoice {
            image,
            family,
            tactical_pixels,
            deliberative_pixels,
        })
    }

    /// Decide from the host's probe and the model's name; says on stderr what was decided and why.
    pub fn plan(&self, caps: &Capabilities, model_name: &str) -> VisionPlan {
        let named = [
            caps.model_id.as_deref(),
            caps.model_path.as_deref(),
            Some(model_name),
        ];
        let detected = named.iter().flatten().find_map(|n| ModelFamily::detect(n));
        let image = self.image.unwrap_or(caps.vision == Some(true));
        let family = match self.family {
            Some(f) => f,
            None if !image => ModelFamily::Text,
            None => detected.unwrap_or(ModelFamily::OtherVision),
        };
        let cap = |p: u64| {
            if image {
                p.min(family.max_image_pixels().max(64 * 36))
            } else {
                p
            }
        };
        let plan = VisionPlan {
            image,
            family,
            tactical_pixels: cap(self.tactical_pixels),
            deliberative_pixels: cap(self.deliberative_pixels),
        };
        say_err!(
            "model: {} host; sees images: {} (chosen: {}; {}: {:?}); family {} ({:?} coordinates); image budget {} / {} px",
            caps.kind,
            if image { "yes" } else { "no" },
            match self.image {
                None => "auto",
                Some(true) => "always",
                Some(false) => "never",
            },
            caps.vision_source,
            caps.vision,
            family.name(),
            family.convention(),
            plan.tactical_pixels,
            plan.deliberative_pixels
        );
        plan
    }
}

/// The checks the user wrote: a sensor file and the goal's check. Both compiled when the plan is made.
#[derive(Debug, Clone, Default)]
pub struct UserChecks {
    pub sensors_src: Option<String>,
    pub goal_check: Option<String>,
}

/// What the session decides by, as the flags chose it; the model's probe adds the vision plan and the
/// context's size.
#[derive(Debug, Clone)]
pub struct SessionChoices {
    pub goal: String,
    pub loop_cfg: LoopConfig,
    pub tactical_interval_ms: u64,
    pub progress_sensor: Option<String>,
    pub grounding_paths: Vec<GroundingPath>,
    pub steering: Option<gamepilot_session::SteeringConfig>,
    /// Act on the goal itself while a plan is made (`run --wait-for-plan` turns it off).
    pub act_while_planning: bool,
}

impl SessionChoices {
    /// The session's configuration once the host is probed (its postconditions come from the sensors
    /// later).
    pub fn session_config(
        &self,
        vision: &VisionPlan,
        context_tokens: u32,
    ) -> gamepilot_session::SessionConfig {
        gamepilot_session::SessionConfig {
            goal: self.goal.clone(),
            loop_cfg: self.loop_cfg,
            progress_sensor: self.progress_sensor.clone(),
            grounding_paths: self.grounding_paths.clone(),
            tactical_interval_ms: self.tactical_interval_ms,
            limits: gamepilot_session::PromptLimits {
                with_image: vision.image,
                visual_pixels: vision.tactical_pixels,
                deliberative_pixels: vision.deliberative_pixels,
                context_tokens,
                ..Default::default()
            },
            coord_convention: vision.family.convention(),
            steering: self.steering.clone(),
            behaviours: gamepilot_session::Behaviours {
                act_while_planning: self.act_while_planning,
                ..Default::default()
            },
            ..gamepilot_session::SessionConfig::default()
        }
    }
}

/// How the session may touch the game and the user: the executor's limits, the panic chord, a dry run,
/// and how a destructive action is asked about.
#[derive(Debug, Clone)]
pub struct Hands {
    pub exec: ExecutorConfig,
    pub panic: Chord,
    pub stale_ms: u64,
    pub hz: u32,
    pub dry_run: bool,
    /// No one is at the terminal: destructive actions are asked about on the overlay only.
    pub unattended: bool,
    pub confirm_timeout: Duration,
}

/// Where the session plays: the display, the game's window and how the recording names it.
pub struct TargetWindow {
    pub display: Option<String>,
    pub window: gamepilot_x11::WindowInfo,
    pub label: String,
}

/// The camera's measurement before the session (`run --calibrate-camera`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CameraPlan {
    pub calibrate: bool,
    pub fov_deg: f64,
    /// Where the view's shift is measured; `None`: all of the capture.
    pub region: Option<Rect>,
}

/// What `run` and `demo` add to the reflex: templates, camera calibration, the GPU watch; with the lines
/// that go into the recording.
pub struct ReflexWiring {
    pub extras: crate::reflex::ReflexExtras,
    pub degrade: Option<std::sync::mpsc::Receiver<gamepilot_model::DegradeCommand>>,
    /// Keeps the GPU watch thread alive for the session.
    pub gpu: Option<crate::gpu_watch::GpuWatcher>,
}

impl ReflexWiring {
    /// Nothing added to the reflex: no templates, no calibration, no GPU watch yet.
    pub fn none() -> ReflexWiring {
        ReflexWiring {
            extras: crate::reflex::ReflexExtras::default(),
            degrade: None,
            gpu: None,
        }
    }

    /// The `--templates DIR` atlas and the camera's calibration for `target`'s window, measured with the
    /// session's own hands (a dry run cannot calibrate: it delivers input).
    pub fn for_window(
        target: &TargetWindow,
        hands: &Hands,
        templates: Option<(&std::path::Path, u32)>,
        camera: CameraPlan,
    ) -> Result<ReflexWiring, RuntimeError> {
        let mut wiring = ReflexWiring::none();
        let extras = &mut wiring.extras;
        let window = &target.window;
        let declared = gamepilot_core::Size::new(window.geometry.w, window.geometry.h);
        if let Some((dir, radius)) = templates {
            let (atlas, names) = crate::templates::load_dir(dir, declared, radius)?;
            say!("templates: {} from {}", names.join(", "), dir.display());
            extras
                .notes
                .push(format!("templates: {} from {}", names.join(", "), dir.display()));
            extras.templates = std::sync::Arc::new(atlas);
        }
        if camera.calibrate {
            if hands.dry_run {
                return Err(RuntimeError::Setup(
                    "--calibrate-camera delivers input to measure the camera; it cannot run with --dry-run"
                        .into(),
                ));
            }
            match crate::driver::calibrate_before_session(
                target.display.clone(),
                window.id,
                hands.exec.clone(),
                hands.panic.clone(),
                hands.stale_ms,
                hands.hz,
                camera.region,
                camera.fov_deg,
            )? {
                Ok(c) => {
                    let line = format!(
                        "camera calibration: {:.3} px/count, {:.4} deg/count (fov {} deg over {} px, {} moves matched)",
                        c.px_per_count_x,
                        c.deg_per_count,
                        c.fov_deg,
                        c.width_px,
                        c.samples.len()
                    );
                    say!("{line}");
                    let json = serde_json::to_string(&c)
                        .map_err(|e| RuntimeError::Setup(format!("camera calibration: {e}")))?;
                    extras.notes.push(format!("{line}: {json}"));
                    extras.camera = Some(c.scale());
                }
                Err(f) => {
                    say_err!("warning: {f}; camera turns in degrees will be refused");
                    extras.notes.push(format!("camera calibration failed: {f}"));
                }
            }
        }
        Ok(wiring)
    }

    /// Starts the GPU-memory watch (FR-MODEL-004) for hosts whose context is `host_tokens`: the ladder's
    /// reduced context is half of it and a restore returns to it, never more.
    pub fn watch_gpu(&mut self, host_tokens: u32) {
        let mut w = crate::gpu_watch::GpuWatcher::start_nvml(
            0,
            gamepilot_model::LadderConfig::for_context(host_tokens),
            Duration::from_secs(1),
        );
        say_err!("{}", w.describe());
        self.extras.notes.push(w.describe());
        self.degrade = Some(w.take_commands());
        self.gpu = Some(w);
    }
}

/// A session to start, validated: everything the flags decide, nothing started yet.
pub struct AgentPlan {
    pub checks: UserChecks,
    pub session: SessionChoices,
    pub vision: VisionChoice,
    pub hands: Hands,
    pub record_dir: PathBuf,
    pub quiet: bool,
    pub research: gamepilot_research::ResearchConfig,
    /// Start the GPU-memory watch (FR-MODEL-004) for the hosts gamepilot starts.
    pub gpu_watch: bool,
}

/// The plan started: the agent's configuration with the reflex's wiring (which keeps the GPU watch
/// alive), or the exit code of a stop signal that came while starting (nothing armed; the hosts started
/// so far stop as they drop).
pub enum Started {
    Ready(Box<AgentConfig>, ReflexWiring),
    Stopped(i32),
}

impl AgentPlan {
    /// Refuses what the flags alone decide before anything starts: no window is touched and no model
    /// host loaded for a goal check or a sensor file that cannot compile.
    pub fn validated(self) -> Result<AgentPlan, RuntimeError> {
        crate::agent::compile_user_sensors(
            self.checks.sensors_src.as_deref(),
            self.checks.goal_check.as_deref(),
        )?;
        Ok(self)
    }

    /// Connect and probe the model hosts, plan vision, and assemble the agent's configuration for
    /// `target`, with the reflex's `wiring` (templates, camera calibration). A stop signal while starting
    /// ends it at once, named.
    pub fn start(
        self,
        target: TargetWindow,
        hosts: &HostPlan,
        mut wiring: ReflexWiring,
        stop_signals: StopSignals,
    ) -> Result<Started, RuntimeError> {
        let stopped = |step: &str| {
            let s = stop_signals.received()?;
            say!(
                "session stopped: Stopped (signal {}) during start-up, {step}",
                s.name()
            );
            Some(s.exit_code())
        };
        if let Some(code) = stopped("after the reflex's set-up") {
            return Ok(Started::Stopped(code));
        }
        let connected = hosts.connect_probed(&stop_signals.token());
        if let Some(code) = stopped("while the model host was starting") {
            return Ok(Started::Stopped(code));
        }
        let (client, host, caps) = connected?;
        let deliberative_host = hosts.connect_deliberative(&stop_signals.token());
        if let Some(code) = stopped("while the deliberative model host was starting") {
            return Ok(Started::Stopped(code));
        }
        let deliberative_host = deliberative_host?;
        let vision = self.vision.plan(&caps, &hosts.model_name);
        let context_tokens = caps
            .n_ctx
            .map(|n| n.min(u64::from(u32::MAX)) as u32)
            .unwrap_or(4096);
        if self.gpu_watch {
            wiring.watch_gpu(context_tokens);
        }
        // The hosts gamepilot started, for the degrade ladder to reshape (none with an endpoint).
        let (deliberative_client, deliberative_host) = match deliberative_host {
            Some((c, h)) => (c.with_kind(caps.kind), Some(h)),
            None => (client.clone(), None),
        };
        let keeper = gamepilot_model::HostKeeper::new(
            [
                (HostRole::Tactical, host),
                (HostRole::Deliberative, deliberative_host),
            ]
            .into_iter()
            .filter_map(|(role, h)| Some((role, h?)))
            .collect(),
        );
        wiring
            .extras
            .notes
            .push(format!("model host probe: {caps:?}; {vision:?}"));
        let cfg = AgentConfig {
            display: target.display,
            window: target.window,
            window_label: target.label,
            session: self.session.session_config(&vision, context_tokens),
            goal_check: self.checks.goal_check,
            sensors_src: self.checks.sensors_src,
            client,
            deliberative_client,
            model_name: hosts.model_name.clone(),
            exec: self.hands.exec,
            panic: self.hands.panic,
            stale_ms: self.hands.stale_ms,
            hz: self.hands.hz,
            dry_run: self.hands.dry_run,
            record_dir: self.record_dir,
            unattended: self.hands.unattended,
            confirm_timeout: self.hands.confirm_timeout,
            quiet: self.quiet,
            research: self.research,
            reflex: std::mem::take(&mut wiring.extras),
            degrade: wiring.degrade.take(),
            hosts: keeper,
            stop_signals: Some(stop_signals),
        };
        Ok(Started::Ready(Box::new(cfg), wiring))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(goal_check: Option<&str>, sensors: Option<&str>) -> AgentPlan {
        AgentPlan {
            checks: UserChecks {
                sensors_src: sensors.map(str::to_string),
                goal_check: goal_check.map(str::to_string),
            },
            session: SessionChoices {
                goal: "collect a coin".into(),
                loop_cfg: LoopConfig::default(),
                tactical_interval_ms: 300,
                progress_sensor: None,
                grounding_paths: vec![GroundingPath::Mark],
                steering: None,
                act_while_planning: true,
            },
            vision: VisionChoice::new(None, None, 512 * 288, 1024 * 576).unwrap(),
            hands: Hands {
                exec: ExecutorConfig::default(),
                panic: Chord::parse("Control_L+Pause").unwrap(),
                stale_ms: 250,
                hz: 60,
                dry_run: true,
                unattended: true,
                confirm_timeout: Duration::ZERO,
            },
            record_dir: PathBuf::from("unused"),
            quiet: true,
            research: gamepilot_research::ResearchConfig::default(),
            gpu_watch: false,
        }
    }

    #[test]
    fn a_goal_check_or_sensor_file_that_does_not_compile_is_refused_by_the_plan_itself() {
        // FR-LOOP-008: the refusal comes from the flags, before any window or host (`start`) is touched.
        let err = plan(Some("coins >="), None).validated().err().unwrap();
        assert!(err.to_string().contains("--goal-check"), "{err}");
        let err = plan(None, Some("sensor coins = ")).validated().err().unwrap();
        assert!(err.to_string().contains("sensor file has errors"), "{err}");
        let sensors = include_str!("../../../../examples/practice-arena.sensors");
        assert!(plan(Some("coins >= 1"), Some(sensors)).validated().is_ok());
        assert!(
            plan(None, None).validated().is_ok(),
            "the agent declares its own checks"
        );
    }

    #[test]
    fn the_session_gets_the_probe_s_vision_plan_and_context_and_the_user_s_choices() {
        let p = plan(None, None);
        let vision = VisionPlan {
            image: true,
            family: ModelFamily::Qwen25Vl,
            tactical_pixels: 1000,
            deliberative_pixels: 2000,
        };
        let cfg = p.session.session_config(&vision, 8192);
        assert_eq!(cfg.goal, "collect a coin");
        assert!(cfg.limits.with_image);
        assert_eq!(
            (cfg.limits.visual_pixels, cfg.limits.deliberative_pixels),
            (1000, 2000)
        );
        assert_eq!(cfg.limits.context_tokens, 8192);
        assert_eq!(cfg.coord_convention, ModelFamily::Qwen25Vl.convention());
        assert_eq!(cfg.grounding_paths, vec![GroundingPath::Mark]);
        assert!(cfg.behaviours.act_while_planning && cfg.behaviours.explore_unsure);
    }

    #[test]
    fn vision_budgets_that_make_no_sense_are_refused_and_auto_follows_the_probe() {
        assert!(VisionChoice::new(None, None, 100, 1000).is_err());
        assert!(VisionChoice::new(None, None, 5000, 4000).is_err());
        let auto = VisionChoice::new(None, None, 512 * 288, 1024 * 576).unwrap();
        let caps = Capabilities {
            vision: Some(false),
            ..Default::default()
        };
        let text = auto.plan(&caps, "qwen2.5-coder");
        assert!(!text.image);
        assert_eq!(text.family, ModelFamily::Text);
        let caps = Capabilities {
            vision: Some(true),
            ..Default::default()
        };
        let seen = auto.plan(&caps, "Qwen2.5-VL-3B-Instruct");
        assert!(seen.image);
        assert_eq!(seen.family, ModelFamily::Qwen25Vl);
        assert!(seen.tactical_pixels <= ModelFamily::Qwen25Vl.max_image_pixels().max(64 * 36));
    }
}
