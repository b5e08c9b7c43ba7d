//! `gamepilot bench TOPIC`: prints benchmark figures for platform paths, one module per topic.

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to measure.
    #[command(subcommand)]
    pub topic: Topic,
}

#[derive(clap::Subcommand, Debug)]
pub enum Topic {
    /// Tactical model-call latency p50/p95 and prefix-cache hit ratio (starts llama-server + SmolLM2).
    Model(super::bench_model::BenchArgs),
    /// Capture cost per frame: Composite+SHM full frame vs plain GetImage.
    Capture(super::capture::BenchArgs),
    /// Executor tick cost, reflex tick lateness, panic and crash-release latency.
    Executor(super::bench_executor::BenchArgs),
    /// Perception: thumbnail/region vs full capture, classification, proposals, region vs full-frame OCR.
    Perception(super::bench_perception::Args),
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    match args.topic {
        Topic::Model(a) => super::bench_model::bench(a),
        Topic::Capture(a) => super::capture::bench(a),
        Topic::Executor(a) => super::bench_executor::bench(a),
        Topic::Perception(a) => super::bench_perception::run(a),
    }
}
