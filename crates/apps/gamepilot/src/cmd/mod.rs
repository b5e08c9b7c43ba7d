//! One module per subcommand; each exposes `Args` and `run(Args) -> anyhow::Result<i32>`.

pub mod act;
pub mod bench;
pub mod bench_model;
pub mod bench_perception;
pub mod calibrate_stuck;
pub mod capture;
pub mod classify;
pub mod common;
pub mod demo;
pub mod doctor;
pub mod eval;
pub mod guardian;
pub mod observe;
pub mod replay;
pub mod report;
pub mod run;
pub mod sensor;
pub mod windows;
