//! `gamepilot bench TOPIC`: prints benchmark figures for platform paths, one module per topic.

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to measure.
    #[command(subcommand)]
    pub topic: Topic,
}

#[derive(clap::Subcommand, Debug)]
pub enum Topic {
    /// Tactical model-call latency p50/p95 and prefix-cache hit ratio (starts llama-server + the default local model).
    Model(super::bench_model::BenchArgs),
    /// Capture cost per frame: Composite+SHM full frame vs plain GetImage.
    Capture(super::capture::BenchArgs),
    /// Executor tick cost, reflex tick lateness, panic and crash-release latency.
    Executor(ExecutorArgs),
    /// Perception: thumbnail/region vs full capture, classification, proposals, region vs full-frame OCR.
    Perception(super::bench_perception::Args),
}

/// `bench executor` (the harness is `gamepilot_bench::bench_executor`).
#[derive(clap::Args, Debug)]
pub struct ExecutorArgs {
    /// X display for the latency parts (default: $DISPLAY; they are skipped without one).
    #[arg(long)]
    pub display: Option<String>,
    /// Ticks for the cost measurement.
    #[arg(long, default_value_t = 20_000)]
    pub ticks: usize,
    /// Seconds of 60 Hz ticking for the lateness measurement.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Repetitions of each latency measurement.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.topic {
        Topic::Model(a) => super::bench_model::bench(a),
        Topic::Capture(a) => super::capture::bench(a),
        Topic::Executor(a) => Ok(gamepilot_bench::bench_executor::bench(
            gamepilot_bench::bench_executor::BenchArgs {
                display: a.display,
                ticks: a.ticks,
                seconds: a.seconds,
                reps: a.reps,
            },
        )?),
        Topic::Perception(a) => super::bench_perception::run(a),
    }
}
