//! `gamepilot observe`: Observe (filled in by issue 4).

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Arguments (the surface is defined by issue 4).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    super::common::not_yet("observe", 4)
}
