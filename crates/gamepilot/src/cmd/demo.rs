//! `gamepilot demo`: the practice game on a private virtual display, played by the agent with the small
//! local model that gamepilot starts itself; a summary and an HTML report at the end.

use super::act::LimitArgs;
use super::run::{default_record_dir, print_summary, ModelArgs};
use anyhow::Context as _;
use gamepilot_planner::LoopConfig;
use gamepilot_runtime::agent::{self, AgentConfig};
use gamepilot_runtime::say;
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use std::path::PathBuf;

const SENSORS: &str = include_str!("../../../../examples/practice-arena.sensors");

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Goal given to the model.
    #[arg(
        long,
        default_value = "Start the game from the menu (click Play), then walk around and collect a coin."
    )]
    pub goal: String,
    /// The goal's postcondition (a sensor expression over examples/practice-arena.sensors).
    #[arg(long, default_value = "coins >= 1")]
    pub goal_check: String,
    /// The goal in words alone: no sensor file and no goal check; the agent declares what it watches
    /// (its sensors, postconditions and the goal's check). The game's own state still judges the demo.
    #[arg(long, conflicts_with = "goal_check")]
    pub agent_checks: bool,
    /// Session wall-clock budget in seconds.
    #[arg(long, default_value_t = 120)]
    pub seconds: u64,
    /// Session action budget.
    #[arg(long, default_value_t = 30)]
    pub max_actions: u64,
    /// Seed of the practice game.
    #[arg(long, default_value_t = 7)]
    pub game_seed: u64,
    /// Recording folder (default: recordings/<unix time>).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Where to write the HTML report (default: <recording>/report.html).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Log intended actions without delivering input.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// No-progress thresholds and progress sensor (default progress sensor here: `coins`).
    #[command(flatten)]
    pub stuck: super::run::StuckArgs,
    /// Grounding paths: auto chooses per scene class from confirmation rates; one name forces that path.
    #[arg(long, value_enum, default_value_t = super::run::GroundingChoice::Auto)]
    pub grounding: super::run::GroundingChoice,
    /// Print no status line while running.
    #[arg(long)]
    pub quiet: bool,
    /// Direction keys for self-identification and `move_to`; an empty value turns it off.
    #[arg(long, value_delimiter = ',', default_value = "w,s,a,d")]
    pub move_keys: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    say!(
        "demo: starting a private X server (Xvfb + openbox) and the practice game (seed {})",
        args.game_seed
    );
    let mut bed = TestBed::start().context("starting the virtual display (run scripts/install-deps.sh)")?;
    let arena = Arena::launch(
        &mut bed,
        &ArenaOptions {
            seed: args.game_seed,
            ..ArenaOptions::default()
        },
    )
    .context("launching the practice game (build it with `cargo build --workspace --bins`)")?;
    say!("demo: game window 0x{:x} on {}", arena.window.id, bed.display);
    say!("demo: starting the model host");
    // Ctrl+C from here on is a clean stop of the session.
    let stop_signals = gamepilot_runtime::stop_signals::StopSignals::install()?;
    let (client, host) = args.model.connect(&stop_signals.token())?;
    let caps = client.probe().context("probing the model host")?;
    let client = client.with_kind(caps.kind);
    let deliberative_host = args.model.connect_deliberative(&stop_signals.token())?;
    let deliberative_client = deliberative_host
        .as_ref()
        .map_or_else(|| client.clone(), |(c, _)| c.clone().with_kind(caps.kind));
    // The same vision plan as `run` with its defaults: a host that sees images gets them, in its family's
    // coordinates.
    let vision = super::run::VisionArgs::default().plan(&caps, &args.model.model_name)?;
    let limits = args.limits.clone();
    let (exec, panic) = limits.config()?;
    let record_dir = args.record.clone().unwrap_or_else(default_record_dir);
    let cfg = AgentConfig {
        display: Some(bed.display.clone()),
        window: arena.window.clone(),
        window_label: "Practice Arena".into(),
        session: super::run::session_config(super::run::SessionChoices {
            goal: args.goal.clone(),
            loop_cfg: LoopConfig {
                session_max_ms: args.seconds * 1000,
                session_max_actions: Some(args.max_actions),
                signals: args.stuck.signals()?,
                ..LoopConfig::default()
            },
            vision: &vision,
            tactical_interval_ms: 300,
            context_tokens: caps
                .n_ctx
                .map(|n| n.min(u64::from(u32::MAX)) as u32)
                .unwrap_or(4096),
            progress_sensor: match (&args.stuck.progress_sensor, args.agent_checks) {
                (Some(p), _) => Some(p.clone()),
                (None, false) => Some("coins".into()),
                (None, true) => None,
            },
            grounding_paths: args.grounding.paths(),
            steering: gamepilot_session::SteeringConfig::from_keys(&args.move_keys),
            act_while_planning: true,
        }),
        goal_check: (!args.agent_checks).then(|| args.goal_check.clone()),
        sensors_src: (!args.agent_checks).then(|| SENSORS.to_string()),
        client,
        deliberative_client,
        model_name: args.model.model_name.clone(),
        exec,
        panic,
        stale_ms: limits.stale_ms,
        hz: limits.hz,
        dry_run: args.dry_run,
        record_dir: record_dir.clone(),
        unattended: true,
        // Nobody can click an overlay on the demo's private display: destructive actions are rejected.
        confirm_timeout: std::time::Duration::ZERO,
        quiet: args.quiet,
        research: gamepilot_research::ResearchConfig::default(),
        // The indicator (FR-SAFE-007) comes with the reflex driver; no templates or calibration here.
        reflex: gamepilot_runtime::reflex::ReflexExtras::default(),
        degrade: None,
        hosts: gamepilot_model::HostKeeper::new(Vec::new()),
        stop_signals: Some(stop_signals),
    };
    if args.agent_checks {
        say!("demo: goal {:?}, its checks declared by the agent", args.goal);
    } else {
        say!("demo: goal {:?}, done when `{}`", args.goal, args.goal_check);
    }
    let summary = agent::run_agent(cfg)?;
    let state = arena.state().ok();
    drop(host);
    drop(deliberative_host);
    print_summary(&summary);
    if let Some(s) = state {
        say!(
            "  game's own state: screen {} coins {} gold {} player ({:.0}, {:.0}) held {}",
            s["screen"],
            s["coins"],
            s["gold"],
            s["player"]["x"].as_f64().unwrap_or(0.0),
            s["player"]["y"].as_f64().unwrap_or(0.0),
            s["held_keys"]
        );
    }
    let report = args
        .report
        .clone()
        .unwrap_or_else(|| record_dir.join("report.html"));
    gamepilot_runtime::console::out("  report: ");
    if let Err(e) = super::report::run(super::report::Args {
        dir: record_dir,
        out: Some(report),
    }) {
        say!("not written ({e:#})");
    }
    Ok(0)
}
