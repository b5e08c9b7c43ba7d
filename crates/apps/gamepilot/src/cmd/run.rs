//! `gamepilot run`: play a window toward a goal with a local model — the three cadences, the executor
//! with every interlock, verification of every action, and a recording.

use super::act::LimitArgs;
use super::common::WindowArgs;
use anyhow::Context as _;
use gamepilot_core::ModelFamily;
use gamepilot_grounding::GroundingPath;
use gamepilot_model::WeightsSpec;
use gamepilot_planner::{LoopConfig, SignalConfig};
use gamepilot_runtime::agent::{self, Summary};
use gamepilot_runtime::startup::{
    AgentPlan, HostPlan, ReflexWiring, SessionChoices, Started, TargetWindow, UserChecks, VisionChoice,
};
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
    /// The hosts these flags name; weights without their digest are refused here, before anything starts.
    pub fn plan(&self) -> anyhow::Result<HostPlan> {
        let weights = match (&self.model, &self.model_sha256) {
            (Some(path), Some(sha)) => WeightsSpec::new(path, sha),
            (Some(path), None) => {
                anyhow::bail!("--model {} needs --model-sha256 HEX so the weights can be verified before loading (FR-MODEL-005)", path.display())
            }
            (None, _) => gamepilot_model::cache::default_model(),
        };
        Ok(HostPlan {
            endpoint: self.model_endpoint.clone(),
            weights,
            mmproj: match (&self.mmproj, &self.mmproj_sha256) {
                (Some(p), Some(sha)) => Some(WeightsSpec::new(p, sha)),
                _ => None,
            },
            server_bin: self
                .llama_server
                .clone()
                .unwrap_or_else(gamepilot_model::cache::server_bin),
            model_name: self.model_name.clone(),
            call_timeout: Duration::from_secs(self.call_timeout_s),
            deliberative_timeout: Duration::from_secs(self.deliberative_timeout_s),
            threads: self.threads,
        })
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

impl VisionArgs {
    /// The user's choice, its budgets and family name checked (the probe decides what is left on auto).
    pub fn choice(&self) -> anyhow::Result<VisionChoice> {
        let family =
            match self.model_family.as_str() {
                "auto" => None,
                name => Some(ModelFamily::from_name(name).with_context(|| {
                    format!("--model-family {name:?}: not a known family (docs/models.md)")
                })?),
            };
        let image = match self.image {
            ImageChoice::Always => Some(true),
            ImageChoice::Never => Some(false),
            ImageChoice::Auto => None,
        };
        Ok(VisionChoice::new(
            image,
            family,
            self.tactical_pixels,
            self.deliberative_pixels,
        )?)
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
        vision: args.vision.choice()?,
        hands: args.limits.hands(
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
    let hosts = args.model.plan()?;
    let camera = args.camera.plan()?;
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
    let target = TargetWindow {
        display: args.target.display.clone(),
        label: match (&args.target.window, args.target.pid) {
            (Some(w), _) => w.clone(),
            (None, Some(pid)) => format!("pid {pid}"),
            (None, None) => format!("0x{:x}", win.id),
        },
        window: win,
    };
    let templates = args.templates.as_deref().map(|d| (d, args.template_radius));
    let wiring = ReflexWiring::for_window(&target, &plan.hands, templates, camera)?;
    let (cfg, wiring) = match plan.start(target, &hosts, wiring, stop_signals)? {
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
