//! One start-up plan for every command that starts a session (`run`, `demo`): the flags become a
//! validated [`AgentPlan`] before anything starts — every refusal the flags decide — and
//! [`AgentPlan::start`] then connects and probes the model hosts, plans vision and assembles the agent's
//! configuration the same way for each. `eval` and the benches share the model's connection and probe
//! ([`super::run::ModelArgs::connect_probed`]).

use super::act::LimitArgs;
use super::run::{ModelArgs, ReflexWiring, VisionArgs, VisionPlan};
use gamepilot_core::Chord;
use gamepilot_executor::ExecutorConfig;
use gamepilot_grounding::GroundingPath;
use gamepilot_model::HostRole;
use gamepilot_planner::LoopConfig;
use gamepilot_runtime::agent::AgentConfig;
use gamepilot_runtime::say;
use gamepilot_runtime::stop_signals::StopSignals;
use std::path::PathBuf;
use std::time::Duration;

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

impl Hands {
    /// From the executor's flags; a bad panic key or denied key is refused here.
    pub fn new(
        limits: &LimitArgs,
        dry_run: bool,
        unattended: bool,
        confirm_timeout: Duration,
    ) -> anyhow::Result<Hands> {
        let (exec, panic) = limits.config()?;
        Ok(Hands {
            exec,
            panic,
            stale_ms: limits.stale_ms,
            hz: limits.hz,
            dry_run,
            unattended,
            confirm_timeout,
        })
    }
}

/// Where the session plays: the display, the game's window and how the recording names it.
pub struct Target {
    pub display: Option<String>,
    pub window: gamepilot_x11::WindowInfo,
    pub label: String,
}

/// A session to start, validated: everything the flags decide, nothing started yet.
pub struct AgentPlan {
    pub checks: UserChecks,
    pub session: SessionChoices,
    pub vision: VisionArgs,
    pub hands: Hands,
    pub record_dir: PathBuf,
    pub quiet: bool,
    pub research: gamepilot_research::ResearchConfig,
    /// Start the GPU-memory watch (FR-MODEL-004) for the hosts gamepilot starts.
    pub gpu_watch: bool,
}

/// The plan started: the agent's configuration, or the exit code of a stop signal that came while
/// starting (nothing armed; the hosts started so far stop as they drop).
pub enum Started {
    Ready(Box<AgentConfig>, ReflexWiring),
    Stopped(i32),
}

impl AgentPlan {
    /// Refuses what the flags alone decide before anything starts: no window is touched and no model
    /// host loaded for a goal check or a sensor file that cannot compile (a test says so).
    pub fn validated(self) -> anyhow::Result<AgentPlan> {
        gamepilot_runtime::agent::compile_user_sensors(
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
        target: Target,
        model: &ModelArgs,
        mut wiring: ReflexWiring,
        stop_signals: StopSignals,
    ) -> anyhow::Result<Started> {
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
        let connected = model.connect_probed(&stop_signals.token());
        if let Some(code) = stopped("while the model host was starting") {
            return Ok(Started::Stopped(code));
        }
        let (client, host, caps) = connected?;
        let deliberative_host = model.connect_deliberative(&stop_signals.token());
        if let Some(code) = stopped("while the deliberative model host was starting") {
            return Ok(Started::Stopped(code));
        }
        let deliberative_host = deliberative_host?;
        let vision = self.vision.plan(&caps, &model.model_name)?;
        let context_tokens = caps
            .n_ctx
            .map(|n| n.min(u64::from(u32::MAX)) as u32)
            .unwrap_or(4096);
        if self.gpu_watch {
            wiring.watch_gpu(context_tokens);
        }
        // The hosts gamepilot started, for the degrade ladder to reshape (none with --model-endpoint).
        let (deliberative_client, deliberative_host) = match deliberative_host {
            Some((c, h)) => (c.with_kind(caps.kind), Some(h)),
            None => (client.clone(), None),
        };
        let hosts = gamepilot_model::HostKeeper::new(
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
            model_name: model.model_name.clone(),
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
            hosts,
            stop_signals: Some(stop_signals),
        };
        Ok(Started::Ready(Box::new(cfg), wiring))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_limits() -> LimitArgs {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            limits: LimitArgs,
        }
        <Flags as clap::Parser>::parse_from(["gamepilot"]).limits
    }

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
            vision: VisionArgs::default(),
            hands: Hands::new(&default_limits(), true, true, Duration::ZERO).unwrap(),
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
        assert!(format!("{err:#}").contains("--goal-check"), "{err:#}");
        let err = plan(None, Some("sensor coins = ")).validated().err().unwrap();
        assert!(format!("{err:#}").contains("sensor file has errors"), "{err:#}");
        assert!(plan(
            Some("coins >= 1"),
            Some(include_str!("../../../../../examples/practice-arena.sensors"))
        )
        .validated()
        .is_ok());
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
            family: gamepilot_core::ModelFamily::Qwen25Vl,
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
        assert_eq!(
            cfg.coord_convention,
            gamepilot_core::ModelFamily::Qwen25Vl.convention()
        );
        assert_eq!(cfg.grounding_paths, vec![GroundingPath::Mark]);
        assert!(cfg.behaviours.act_while_planning && cfg.behaviours.explore_unsure);
    }
}
