//! Benchmarks and decision scoring, kept out of the crates a session runs: `gamepilot eval` ([`eval`]:
//! decision points scored against a real model host, as the model alone or as `run` decides),
//! `bench model` ([`model_bench`]: one tactical call's latency; [`scene_bench`]: a new screen to the first
//! action over recorded screens, with the reflex's lateness beside it) and `bench executor`
//! ([`bench_executor`]: the reflex tick's input path under Xvfb).

pub mod bench_executor;
mod error;
pub mod eval;
pub mod model_bench;
pub mod scene_bench;

pub use error::BenchError;
