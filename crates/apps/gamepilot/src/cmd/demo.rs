//! `gamepilot demo`: the practice game on a private virtual display, played by the agent with the small
//! local model that gamepilot starts itself; a summary and an HTML report at the end.

use super::act::LimitArgs;
use super::run::{default_record_dir, print_summary, ModelArgs};
use anyhow::Context as _;
use gamepilot_planner::LoopConfig;
use gamepilot_runtime::agent;
use gamepilot_runtime::say;
use gamepilot_runtime::startup::{
    AgentPlan, ReflexWiring, SessionChoices, Started, TargetWindow, UserChecks,
};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use std::path::PathBuf;

const SENSORS: &str = include_str!("../../../../../examples/practice-arena.sensors");

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
    // The same start-up plan as `run`: what the flags decide is refused before anything starts.
    let record_dir = args.record.clone().unwrap_or_else(default_record_dir);
    let plan = AgentPlan {
        checks: UserChecks {
            goal_check: (!args.agent_checks).then(|| args.goal_check.clone()),
            sensors_src: (!args.agent_checks).then(|| SENSORS.to_string()),
        },
        session: SessionChoices {
            goal: args.goal.clone(),
            loop_cfg: LoopConfig {
                session_max_ms: args.seconds * 1000,
                session_max_actions: Some(args.max_actions),
                signals: args.stuck.signals()?,
                ..LoopConfig::default()
            },
            tactical_interval_ms: 300,
            progress_sensor: match (&args.stuck.progress_sensor, args.agent_checks) {
                (Some(p), _) => Some(p.clone()),
                (None, false) => Some("coins".into()),
                (None, true) => None,
            },
            grounding_paths: args.grounding.paths(),
            steering: gamepilot_session::SteeringConfig::from_keys(&args.move_keys),
            act_while_planning: true,
        },
        // `run`'s defaults: a host that sees images gets them, in its family's coordinates.
        vision: super::run::VisionArgs::default().choice()?,
        // Nobody can click an overlay on the demo's private display: destructive actions are rejected.
        hands: args.limits.hands(args.dry_run, true, std::time::Duration::ZERO)?,
        record_dir: record_dir.clone(),
        quiet: args.quiet,
        research: gamepilot_research::ResearchConfig::default(),
        gpu_watch: true,
    }
    .validated()?;
    let hosts = args.model.plan()?;
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
    // FR-SAFE-005: no screen text, no destructive-action hold; refuse before the agent starts.
    gamepilot_ocr::describe_backend().context("OCR does not work, and the agent does not act unread")?;
    say!("demo: starting the model host");
    // Ctrl+C from here on is a clean stop of the session.
    let stop_signals = gamepilot_runtime::stop_signals::StopSignals::install()?;
    let target = TargetWindow {
        display: Some(bed.display.clone()),
        window: arena.window.clone(),
        label: "Practice Arena".into(),
    };
    // The indicator (FR-SAFE-007) comes with the reflex driver; no templates or calibration here.
    let wiring = ReflexWiring::none();
    let (cfg, wiring) = match plan.start(target, &hosts, wiring, stop_signals)? {
        Started::Ready(cfg, wiring) => (cfg, wiring),
        Started::Stopped(code) => return Ok(code),
    };
    if args.agent_checks {
        say!("demo: goal {:?}, its checks declared by the agent", args.goal);
    } else {
        say!("demo: goal {:?}, done when `{}`", args.goal, args.goal_check);
    }
    let summary = agent::run_agent(*cfg)?;
    drop(wiring);
    let state = arena.state().ok();
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
