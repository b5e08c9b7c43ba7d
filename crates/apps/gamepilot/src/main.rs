//! The gamepilot binary: parses the command line and dispatches to one subcommand module each.
//!
//! `main` is `exit(run(parse()))`; every subcommand returns an exit code or an error printed with `{:#}`.

mod cmd;

use clap::{Parser, Subcommand};
use gamepilot_runtime::say_err;

/// gamepilot — a local agent that plays a game through its window.
#[derive(Parser)]
#[command(name = "gamepilot", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check the machine: display, X extensions, capture, tesseract, model host; say how to fix each failure.
    Doctor(cmd::doctor::Args),
    /// List windows: id, title, class, pid, geometry.
    Windows(cmd::windows::Args),
    /// Capture one window to a PNG.
    Capture(cmd::capture::Args),
    /// Observe a window or an image: OCR text, elements, marks (observation.json + marks.png).
    Observe(cmd::observe::Args),
    /// Classify consecutive frames: unchanged / local / motion / scene.
    Classify(cmd::classify::Args),
    /// Check or evaluate sensor expression files.
    Sensor(cmd::sensor::Args),
    /// Run a JSON-lines action script through the executor with every interlock.
    Act(cmd::act::Args),
    /// Play a window toward a goal with a local model.
    Run(Box<cmd::run::Args>),
    /// The demo: practice game on a virtual display, played by the agent with the small model.
    Demo(cmd::demo::Args),
    /// Replay a recording through the logic crates and diff the decisions.
    Replay(cmd::replay::Args),
    /// Write a self-contained HTML report of a recording.
    Report(cmd::report::Args),
    /// Measure the no-progress signals on recorded sessions (threshold calibration, FR-LOOP-005).
    CalibrateStuck(cmd::calibrate_stuck::Args),
    /// Score the model's decisions on the labelled decision points (accuracy per scene kind).
    Eval(cmd::eval::Args),
    /// Print benchmark figures for the platform paths (capture, executor, interlocks, model).
    Bench(cmd::bench::Args),
    /// The guardian process (started by the core; not for direct use).
    #[command(hide = true)]
    Guardian(cmd::guardian::Args),
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Doctor(a) => cmd::doctor::run(a),
        Command::Windows(a) => cmd::windows::run(a),
        Command::Capture(a) => cmd::capture::run(a),
        Command::Observe(a) => cmd::observe::run(a),
        Command::Classify(a) => cmd::classify::run(a),
        Command::Sensor(a) => cmd::sensor::run(a),
        Command::Act(a) => cmd::act::run(a),
        Command::Run(a) => cmd::run::run(*a),
        Command::Eval(a) => cmd::eval::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Replay(a) => cmd::replay::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::CalibrateStuck(a) => cmd::calibrate_stuck::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Guardian(a) => cmd::guardian::run(a),
    }
}

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            say_err!("gamepilot: error: {e:#}");
            1
        }
    };
    // `_exit` after flushing: a worker thread that a signal's stop did not wait for (the tactical thread
    // inside OCR) must not race the C libraries' exit-time destructors (onnxruntime's).
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit(2) ends the process at once; everything gamepilot writes was flushed or fsynced above
    // (the recording is finished and synced before `run` returns).
    unsafe { libc::_exit(code) }
}
