//! `gamepilot run`: play a window toward a goal with a local model — the three cadences, the executor
//! with every interlock, verification of every action, and a recording.

use super::act::LimitArgs;
use super::common::WindowArgs;
use super::start::{AgentPlan, Hands, SessionChoices, Started, Target, UserChecks};
use anyhow::Context as _;
use gamepilot_core::ModelFamily;
use gamepilot_grounding::GroundingPath;
use gamepilot_model::{
    CancelToken, Capabilities, HostClient, HostTimeouts, LaunchSpec, LocalHost, WeightsSpec,
};
use gamepilot_planner::{LoopConfig, SignalConfig};
use gamepilot_runtime::agent::{self, Summary};
use gamepilot_runtime::{say, say_err};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// An OpenAI-compatible host to use (llama.cpp server, vLLM, SGLang, Ollama, LM Studio).
    #[arg(long, conflicts_with = "model")]
    pub model_endpoint: Option<String>,
    /// A GGUF file for a llama-server that gamepilot starts on loopback (FR-MODEL-001).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The GGUF's SHA-256; verified before loading (FR-MODEL-005).
    #[arg(long, requires = "model")]
    pub model_sha256: Option<String>,
    /// A vision model's multimodal projector (GGUF) for the llama-server gamepilot starts.
    #[arg(long, requires = "mmproj_sha256")]
    pub mmproj: Option<PathBuf>,
    /// The projector's SHA-256; verified before the host starts, like the weights (FR-MODEL-005).
    #[arg(long, requires = "mmproj")]
    pub mmproj_sha256: Option<String>,
    /// The llama-server binary (default: the one scripts/setup-llama.sh built).
    #[arg(long)]
    pub llama_server: Option<PathBuf>,
    /// Model name sent in requests.
    #[arg(long, default_value = "local")]
    pub model_name: String,
    /// Whole-call timeout of one model call, in seconds.
    #[arg(long, default_value_t = 30)]
    pub call_timeout_s: u64,
    /// Whole-call timeout of one call to the deliberative host that gamepilot starts, in seconds.
    /// Longer than a tactical call's: that host runs niced below everything else, serves one request
    /// at a time, and goes on evaluating a prompt whose caller gave up, so a question asked again after
    /// a timeout only waits behind the one abandoned (the demo's step check timed out twice at 30 s).
    #[arg(long, default_value_t = 90)]
    pub deliberative_timeout_s: u64,
    /// CPU threads of a llama-server that gamepilot starts.
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
}

impl ModelArgs {
    /// Connect to the configured host, or start one. The returned host (if any) stops when dropped.
    pub fn connect(&self, cancel: &CancelToken) -> anyhow::Result<(HostClient, Option<LocalHost>)> {
        let timeouts = HostTimeouts {
            connect: Duration::from_secs(2),
            call: Duration::from_secs(self.call_timeout_s),
        };
        if let Some(url) = &self.model_endpoint {
            let client = HostClient::new(url, timeouts)?;
            client
                .health()
                .with_context(|| format!("model host {url} is not healthy"))?;
            return Ok((client, None));
        }
        let (client, host) = self.start_local(timeouts, 10, true, cancel)?;
        Ok((client, Some(host)))
    }

    /// [`ModelArgs::connect`], then one probe, never a guess: the client speaks the host's dialect.
    pub fn connect_probed(
        &self,
        cancel: &CancelToken,
    ) -> anyhow::Result<(HostClient, Option<LocalHost>, Capabilities)> {
        let (client, host) = self.connect(cancel)?;
        let caps = client
            .probe_for(&self.model_name)
            .context("probing the model host")?;
        Ok((client.with_kind(caps.kind), host, caps))
    }

    /// The deliberative cadence's own host when gamepilot starts its hosts: a second
    /// llama-server at nice 19, so a tactical call never waits behind a deliberative prompt batch
    /// (measured: tactical p95 12.1 s on one host with two slots, 5.2 s with two hosts; docs/models.md).
    /// The weights are one mmapped file, held once in the page cache. `None` with --model-endpoint.
    pub fn connect_deliberative(
        &self,
        cancel: &CancelToken,
    ) -> anyhow::Result<Option<(HostClient, LocalHost)>> {
        if self.model_endpoint.is_some() {
            return Ok(None);
        }
        let timeouts = HostTimeouts {
            connect: Duration::from_secs(2),
            call: Duration::from_secs(self.deliberative_timeout_s.max(self.call_timeout_s)),
        };
        Ok(Some(self.start_local(timeouts, 19, false, cancel)?))
    }

    /// A started host; `speculative` for the tactical one only (short formulaic replies, docs/models.md).
    fn start_local(
        &self,
        timeouts: HostTimeouts,
        nice: i32,
        speculative: bool,
        cancel: &CancelToken,
    ) -> anyhow::Result<(HostClient, LocalHost)> {
        let spec = match (&self.model, &self.model_sha256) {
            (Some(path), Some(sha)) => WeightsSpec::new(path, sha),
            (Some(path), None) => {
                anyhow::bail!("--model {} needs --model-sha256 HEX so the weights can be verified before loading (FR-MODEL-005)", path.display())
            }
            (None, _) => gamepilot_model::cache::default_model(),
        };
        let bin = self
            .llama_server
            .clone()
            .unwrap_or_else(gamepilot_model::cache::server_bin);
        // One slot per host, one host per cadence: tactical and deliberative prompts differ from block 1
        // on, and sharing a slot would evict the other's cached prefix (FR-CTX-002). Two threads with a
        // bounded OpenMP spin (set by the launcher) leave the reflex thread its core when idle.
        // The launcher verifies the weights and the projector before it looks for the server binary.
        let mut launch = LaunchSpec::new(bin, spec);
        launch.mmproj = match (&self.mmproj, &self.mmproj_sha256) {
            (Some(p), Some(sha)) => Some(WeightsSpec::new(p, sha)),
            _ => None,
        };
        launch.ctx_size = 4096;
        launch.threads = self.threads;
        launch.nice = nice;
        launch.speculative = speculative;
        launch.cancel = cancel.clone();
        let host = LocalHost::start(launch).context("starting the model host")?;
        let client = host.client(timeouts)?;
        Ok((client, host))
    }
}

/// Whether the marked screenshot is sent.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ImageChoice {
    /// When the host says its model sees images.
    #[default]
    Auto,
    Always,
    Never,
}

/// The vision model (FR-MODEL-002): what it is sent and how it answers coordinates.
#[derive(clap::Args, Debug, Clone)]
pub struct VisionArgs {
    /// Send the marked screenshot: auto (when the host says its model sees images), always, never.
    #[arg(long, value_enum, default_value_t = ImageChoice::Auto)]
    pub image: ImageChoice,
    /// The model's family, for its coordinate convention and image limit (docs/models.md): auto detects
    /// it from the model's name; text, qwen2.5-vl, ui-tars, qwen2-vl, cogagent, gemma3, llama3.2-vision,
    /// minicpm-v, other-vision.
    #[arg(long, default_value = "auto")]
    pub model_family: String,
    /// Pixels of one tactical image (the visual budget), capped by the family's limit.
    #[arg(long, default_value_t = 512 * 288)]
    pub tactical_pixels: u64,
    /// Pixels of one deliberative image, capped by the family's limit.
    #[arg(long, default_value_t = 1024 * 576)]
    pub deliberative_pixels: u64,
}

impl Default for VisionArgs {
    fn default() -> Self {
        VisionArgs {
            image: ImageChoice::Auto,
            model_family: "auto".into(),
            tactical_pixels: 512 * 288,
            deliberative_pixels: 1024 * 576,
        }
    }
}

/// What the session sends a model and how it reads its points, decided once at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisionPlan {
    pub image: bool,
    pub family: ModelFamily,
    pub tactical_pixels: u64,
    pub deliberative_pixels: u64,
}

impl VisionArgs {
    /// Decide from the host's probe and the model's name; says on stderr what was decided and why.
    pub fn plan(&self, caps: &Capabilities, model_name: &str) -> anyhow::Result<VisionPlan> {
        let named = [
            caps.model_id.as_deref(),
            caps.model_path.as_deref(),
            Some(model_name),
        ];
        let detected = named.iter().flatten().find_map(|n| ModelFamily::detect(n));
        let image = match self.image {
            ImageChoice::Always => true,
            ImageChoice::Never => false,
            ImageChoice::Auto => caps.vision == Some(true),
        };
        let family = match self.model_family.as_str() {
            "auto" if !image => ModelFamily::Text,
            "auto" => detected.unwrap_or(ModelFamily::OtherVision),
            name => ModelFamily::from_name(name)
                .with_context(|| format!("--model-family {name:?}: not a known family (docs/models.md)"))?,
        };
        anyhow::ensure!(
            self.tactical_pixels >= 64 * 36 && self.deliberative_pixels >= self.tactical_pixels,
            "--tactical-pixels {} / --deliberative-pixels {}: at least 2304, and deliberative at least tactical",
            self.tactical_pixels,
            self.deliberative_pixels
        );
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
            "model: {} host; sees images: {} ({:?}; {}: {:?}); family {} ({:?} coordinates); image budget {} / {} px",
            caps.kind,
            if image { "yes" } else { "no" },
            self.image,
            caps.vision_source,
            caps.vision,
            family.name(),
            family.convention(),
            plan.tactical_pixels,
            plan.deliberative_pixels
        );
        Ok(plan)
    }
}

/// Which grounding paths a tactical tick may take (FR-GND-004, FR-GND-005).
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GroundingChoice {
    /// Choose per scene class by confirmation rates among mark, coordinate and two-stage.
    #[default]
    Auto,
    Mark,
    Coordinate,
    /// Localise over the downscaled frame, then act on the magnified crop.
    TwoStage,
}

impl GroundingChoice {
    pub fn paths(self) -> Vec<GroundingPath> {
        match self {
            GroundingChoice::Auto => vec![
                GroundingPath::Mark,
                GroundingPath::Coordinate,
                GroundingPath::TwoStage,
            ],
            GroundingChoice::Mark => vec![GroundingPath::Mark],
            GroundingChoice::Coordinate => vec![GroundingPath::Coordinate],
            GroundingChoice::TwoStage => vec![GroundingPath::TwoStage],
        }
    }
}

/// The escalation ladder's research rung and its bounds (FR-SKILL-003/004), set by the user only.
#[derive(clap::Args, Debug, Clone)]
pub struct ResearchArgs {
    /// Base URL of a SearxNG instance (its JSON API); without it research is unavailable and the rung
    /// moves on.
    #[arg(long = "search-endpoint", value_name = "URL")]
    pub search_endpoint: Option<String>,
    /// Most sources one research reads: search-and-fetch reads at most 2 of them, deep research (the
    /// second research rung of a session) all of them.
    #[arg(long = "research-sources", default_value_t = 5)]
    pub sources: usize,
    /// Tokens one research may add to the context, its excerpts and brief together.
    #[arg(long = "research-tokens", default_value_t = 3000)]
    pub tokens: usize,
    /// Seconds one research may take, search, reading and brief included (at most the research rung's
    /// time less 2 s).
    #[arg(long = "research-seconds", default_value_t = 13.0)]
    pub seconds: f64,
    /// Let research read pages on loopback and private addresses (a wiki on the user's own network).
    #[arg(long = "research-private-addresses")]
    pub private_addresses: bool,
}

impl ResearchArgs {
    pub fn config(&self) -> anyhow::Result<gamepilot_research::ResearchConfig> {
        anyhow::ensure!(
            self.seconds.is_finite() && self.seconds > 0.0,
            "--research-seconds must be a positive number of seconds"
        );
        gamepilot_research::ResearchConfig::from_user(
            self.search_endpoint.clone(),
            self.sources,
            self.tokens,
            Duration::from_secs_f64(self.seconds),
            self.private_addresses,
        )
        .context("research bounds (--research-*)")
    }
}

/// No-progress detection settings (FR-LOOP-005; the defaults are justified in docs/stuck-thresholds.md).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StuckArgs {
    /// A JSON object of no-progress thresholds (fields of `SignalConfig`: stasis_ms, acting_window_ms,
    /// progress_stall_ms, cycle_max_period, cycle_repeats, unverified_window, unverified_threshold, ...);
    /// fields left out keep their defaults, unknown fields are an error.
    #[arg(long, value_name = "FILE")]
    pub stuck_config: Option<PathBuf>,
    /// The declared sensor whose increase counts as progress (the stalled-progress signal); without it
    /// that signal is off.
    #[arg(long, value_name = "SENSOR")]
    pub progress_sensor: Option<String>,
}

impl StuckArgs {
    /// The thresholds: the defaults overridden by `--stuck-config`.
    pub fn signals(&self) -> anyhow::Result<SignalConfig> {
        let Some(path) = &self.stuck_config else {
            return Ok(SignalConfig::default());
        };
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        parse_signal_config(&text).with_context(|| format!("{}: not a stuck-threshold file", path.display()))
    }
}

/// Parse a partial `SignalConfig` JSON object, refusing fields it does not have (a typo would otherwise
/// silently keep a default).
pub fn parse_signal_config(text: &str) -> anyhow::Result<SignalConfig> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let serde_json::Value::Object(given) = &v else {
        anyhow::bail!("expected a JSON object of thresholds");
    };
    let known = serde_json::to_value(SignalConfig::default())?;
    for k in given.keys() {
        anyhow::ensure!(
            known.get(k).is_some(),
            "unknown threshold {k:?} (known: {})",
            known
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        );
    }
    Ok(serde_json::from_value(v)?)
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: WindowArgs,
    /// What to achieve, in words (block 2 of the prompt).
    #[arg(long)]
    pub goal: String,
    /// The goal's postcondition as a sensor expression; the run stops when it is true (FR-LOOP-008).
    #[arg(long)]
    pub goal_check: Option<String>,
    /// A sensor file (see docs/sensors.md); boolean sensors become candidate subgoal postconditions.
    #[arg(long)]
    pub sensors: Option<PathBuf>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Log intended actions without delivering input (FR-SAFE-006).
    #[arg(long)]
    pub dry_run: bool,
    /// Recording folder (default: recordings/<unix time>).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Session action budget.
    #[arg(long)]
    pub max_actions: Option<u64>,
    /// Minimum time between tactical ticks, in ms.
    #[arg(long, default_value_t = 500)]
    pub tactical_interval_ms: u64,
    #[command(flatten)]
    pub vision: VisionArgs,
    /// Nobody is at the terminal: destructive actions are asked about on the overlay only, not also at the
    /// terminal.
    #[arg(long)]
    pub unattended: bool,
    /// Seconds a destructive action waits for the user's explicit answer (the overlay's Allow / Reject,
    /// or y/N at the terminal) before it is rejected and the model told why; 0 rejects at once.
    #[arg(long = "confirm-timeout-s", default_value_t = 30)]
    pub confirm_timeout_s: u64,
    #[command(flatten)]
    pub research: ResearchArgs,
    #[command(flatten)]
    pub stuck: StuckArgs,
    /// Grounding paths: auto chooses per scene class from confirmation rates; one name forces that path.
    #[arg(long, value_enum, default_value_t = GroundingChoice::Auto)]
    pub grounding: GroundingChoice,
    /// Direction keys for self-identification and the model's `move_to`: on the first play
    /// field the agent holds each briefly, learns which element is its avatar and which key moves it
    /// where, then steers to marks the model names. Off unless given (e.g. `w,s,a,d`).
    #[arg(long, value_delimiter = ',')]
    pub move_keys: Vec<String>,
    /// Act on nothing until the first plan arrives. By default the goal itself is acted on while a plan
    /// is made (a goal that names its first step, "click Play, then …", is clicked at once); use this
    /// where acting on the goal's words alone is unwelcome.
    #[arg(long)]
    pub wait_for_plan: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// A folder of PNG templates for `template_present("NAME", …)` sensors, each named NAME@X,Y.png
    /// (X, Y: where it appears in the window's capture pixels).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,
    /// How far around its anchor a template is looked for, in pixels.
    #[arg(long, default_value_t = gamepilot_sensor::template::DEFAULT_RADIUS)]
    pub template_radius: u32,
    #[command(flatten)]
    pub camera: super::act::CameraArgs,
    /// Do not start the GPU-memory watch (FR-MODEL-004).
    #[arg(long)]
    pub no_gpu_watch: bool,
}

/// What `run` and `demo` add to the reflex: templates, camera calibration, the GPU watch; with the lines
/// that go into the recording.
pub struct ReflexWiring {
    pub extras: gamepilot_runtime::reflex::ReflexExtras,
    pub degrade: Option<std::sync::mpsc::Receiver<gamepilot_model::DegradeCommand>>,
    /// Keeps the GPU watch thread alive for the session.
    pub gpu: Option<gamepilot_runtime::gpu_watch::GpuWatcher>,
}

#[allow(clippy::too_many_arguments)]
pub fn reflex_wiring(
    display: Option<String>,
    window: &gamepilot_x11::WindowInfo,
    exec: &gamepilot_executor::ExecutorConfig,
    limits: &LimitArgs,
    panic: &gamepilot_core::Chord,
    templates: Option<&std::path::Path>,
    template_radius: u32,
    camera: &super::act::CameraArgs,
    dry_run: bool,
) -> anyhow::Result<ReflexWiring> {
    let mut extras = gamepilot_runtime::reflex::ReflexExtras::default();
    let declared = gamepilot_core::Size::new(window.geometry.w, window.geometry.h);
    if let Some(dir) = templates {
        let (atlas, names) = gamepilot_runtime::templates::load_dir(dir, declared, template_radius)?;
        say!("templates: {} from {}", names.join(", "), dir.display());
        extras
            .notes
            .push(format!("templates: {} from {}", names.join(", "), dir.display()));
        extras.templates = std::sync::Arc::new(atlas);
    }
    let region = camera.region()?;
    if camera.calibrate_camera {
        anyhow::ensure!(
            !dry_run,
            "--calibrate-camera delivers input to measure the camera; it cannot run with --dry-run"
        );
        match gamepilot_runtime::driver::calibrate_before_session(
            display,
            window.id,
            exec.clone(),
            panic.clone(),
            limits.stale_ms,
            limits.hz,
            region,
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
                extras
                    .notes
                    .push(format!("{line}: {}", serde_json::to_string(&c)?));
                extras.camera = Some(c.scale());
            }
            Err(f) => {
                say_err!("warning: {f}; camera turns in degrees will be refused");
                extras.notes.push(format!("camera calibration failed: {f}"));
            }
        }
    }
    Ok(ReflexWiring {
        extras,
        degrade: None,
        gpu: None,
    })
}

impl ReflexWiring {
    /// Nothing added to the reflex: no templates, no calibration, no GPU watch yet.
    pub fn none() -> ReflexWiring {
        ReflexWiring {
            extras: gamepilot_runtime::reflex::ReflexExtras::default(),
            degrade: None,
            gpu: None,
        }
    }

    /// Starts the GPU-memory watch (FR-MODEL-004) for hosts whose context is `host_tokens`: the ladder's
    /// reduced context is half of it and a restore returns to it, never more.
    pub fn watch_gpu(&mut self, host_tokens: u32) {
        let mut w = gamepilot_runtime::gpu_watch::GpuWatcher::start_nvml(
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

pub fn default_record_dir() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from("recordings").join(format!("session-{secs}"))
}

pub fn print_summary(s: &Summary) {
    let n = &s.numbers;
    say!("session stopped: {}", s.stop_reason);
    say!(
        "  {:.1} s, {} actions executed ({:.2} actions/s), {} rejected",
        s.seconds,
        n.actions.actions_executed,
        s.actions_per_s(),
        n.actions.rejected
    );
    say!(
        "  verdicts: {} confirmed, {} refuted, {} inconclusive",
        n.verdicts.confirmed,
        n.verdicts.refuted,
        n.verdicts.inconclusive
    );
    say!(
        "  failure attribution: {}",
        if n.failures.is_empty() {
            "none".to_string()
        } else {
            n.failures
                .iter()
                .map(|(c, k)| format!("{}={k}", c.as_str()))
                .collect::<Vec<_>>()
                .join(" ")
        }
    );
    let (p50, p95) = s.tactical_latency_ms();
    say!(
        "  tactical: {} calls, {} actions grounded without a call, latency p50 {p50:.0} ms p95 {p95:.0} ms, prompt tokens {} of which cached {}",
        n.calls.tactical_calls,
        n.actions.direct_groundings,
        n.calls.prompt_tokens,
        n.calls.cached_prompt_tokens
    );
    let (screens, p50, p95) = s.first_action_ms();
    say!("  new screen -> first action: {screens} screens, p50 {p50:.0} ms p95 {p95:.0} ms");
    say!("  deliberative passes: {}", n.calls.deliberative_passes);
    let ladder = s.ladder();
    let ladder = if ladder.is_empty() {
        "not climbed".to_string()
    } else {
        ladder.join(" -> ")
    };
    say!("  escalation ladder: {ladder}");
    say!(
        "  reflex: {} ticks, lateness p50 {} us p99 {} us, {} input events",
        n.reflex.ticks,
        n.reflex.lateness_p50_us,
        n.reflex.lateness_p99_us,
        n.reflex.events
    );
    say!(
        "  goal postcondition: {}",
        match n.goal_met {
            Some(true) => "met",
            Some(false) => "not met",
            None => "undefined",
        }
    );
    say!("  recording: {}", s.recording);
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    // SIGINT / SIGTERM / SIGHUP from here on stop the session cleanly (exit 128 + signal).
    let stop_signals = gamepilot_runtime::stop_signals::StopSignals::install()?;
    // What the flags alone decide is refused before anything starts.
    let sensors_src = match &args.sensors {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?),
        None => None,
    };
    let plan = AgentPlan {
        checks: UserChecks {
            sensors_src,
            goal_check: args.goal_check.clone(),
        },
        session: SessionChoices {
            goal: args.goal.clone(),
            loop_cfg: LoopConfig {
                session_max_ms: args.limits.session_budget_s * 1000,
                session_max_actions: args.max_actions,
                signals: args.stuck.signals()?,
                ..LoopConfig::default()
            },
            tactical_interval_ms: args.tactical_interval_ms,
            progress_sensor: args.stuck.progress_sensor.clone(),
            grounding_paths: args.grounding.paths(),
            steering: gamepilot_session::SteeringConfig::from_keys(&args.move_keys),
            act_while_planning: !args.wait_for_plan,
        },
        vision: args.vision.clone(),
        hands: Hands::new(
            &args.limits,
            args.dry_run,
            args.unattended,
            Duration::from_secs(args.confirm_timeout_s),
        )?,
        record_dir: args.record.clone().unwrap_or_else(default_record_dir),
        quiet: false,
        research: args.research.config()?,
        gpu_watch: !args.no_gpu_watch,
    }
    .validated()?;
    let (x, win) = args.target.resolve()?;
    // Input reaches only a game in front (FR-SAFE-004): ask the window manager to raise it, never by
    // synthesised input. While another window has the focus the session waits for it.
    if !x.is_foreground(win.id).unwrap_or(true) {
        match x.bring_to_front(win.id, Duration::from_secs(3)) {
            Ok(true) => say!("brought the game's window to the front (asked the window manager)"),
            Ok(false) => say_err!("asked the window manager to raise the game's window; it is not in front yet, and the session waits for it"),
            Err(e) => say_err!("could not ask the window manager to raise the game's window: {e}"),
        }
    }
    drop(x);
    // FR-SAFE-005: no screen text, no destructive-action hold; refuse before anything starts.
    gamepilot_ocr::describe_backend().context("OCR does not work, and the agent does not act unread")?;
    let wiring = reflex_wiring(
        args.target.display.clone(),
        &win,
        &plan.hands.exec,
        &args.limits,
        &plan.hands.panic,
        args.templates.as_deref(),
        args.template_radius,
        &args.camera,
        args.dry_run,
    )?;
    let target = Target {
        display: args.target.display.clone(),
        label: match (&args.target.window, args.target.pid) {
            (Some(w), _) => w.clone(),
            (None, Some(pid)) => format!("pid {pid}"),
            (None, None) => format!("0x{:x}", win.id),
        },
        window: win,
    };
    let (cfg, wiring) = match plan.start(target, &args.model, wiring, stop_signals)? {
        Started::Ready(cfg, wiring) => (cfg, wiring),
        Started::Stopped(code) => return Ok(code),
    };
    let summary = agent::run_agent(*cfg)?;
    drop(wiring);
    print_summary(&summary);
    Ok(match summary.exit_signal {
        Some(sig) => gamepilot_runtime::stop_signals::StopSignal(sig).exit_code(),
        None => summary.stop.exit_code(),
    })
}
