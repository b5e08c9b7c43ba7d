//! `gamepilot guardian`: the guardian process, started by the core before input is armed (FR-SAFE-001/003).
//! Not for direct use: it reads the core's shared page, releases everything when the core dies or hangs, and
//! owns the panic chord.
//!
//! It runs in a session of its own (the core's spawn calls `setsid` before exec, and start-up here does it
//! again where it was not), ignores SIGINT/SIGHUP/SIGTSTP/SIGTTIN/SIGTTOU, and on SIGTERM releases
//! everything and sets the halt flag before it exits. Exit status: 0 when the core died, 143 after SIGTERM.

use anyhow::Context as _;
use gamepilot_core::Chord;
use gamepilot_guardian::{enter_guardian_process, Guardian, GuardianOptions, GuardianSignals, SharedState};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Inherited descriptor of the shared page (memfd).
    #[arg(long, conflicts_with = "shm")]
    pub shm_fd: Option<i32>,
    /// Path of the shared page (alternative to --shm-fd).
    #[arg(long)]
    pub shm: Option<PathBuf>,
    /// The core's process id.
    #[arg(long)]
    pub core_pid: u32,
    /// X display (default: $DISPLAY).
    #[arg(long)]
    pub display: Option<String>,
    /// The panic chord (from the user's configuration only).
    #[arg(long, default_value = "ctrl+Pause")]
    pub panic_key: String,
    /// Heartbeat age after which the core counts as hung, in ms.
    #[arg(long, default_value_t = 250)]
    pub stale_ms: u64,
    /// Treat EOF on stdin as the core's death (the core holds the pipe's other end).
    #[arg(long)]
    pub stdin_pipe: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    // Signals first: from here on a Ctrl+C or Ctrl+Z meant for the core cannot stop the guardian.
    let signals = GuardianSignals::install().context("installing the guardian's signal dispositions")?;
    enter_guardian_process().context("moving the guardian into its own session")?;
    let shm = match (args.shm_fd, &args.shm) {
        (Some(fd), _) => SharedState::open_fd(fd)?,
        (None, Some(p)) => SharedState::open_path(p)?,
        (None, None) => {
            anyhow::bail!("the guardian needs --shm-fd or --shm (it is started by `gamepilot act`/`run`)")
        }
    };
    let panic = Chord::parse(&args.panic_key).with_context(|| format!("panic key {:?}", args.panic_key))?;
    let opts = GuardianOptions {
        display: args.display.clone(),
        core_pid: args.core_pid,
        panic,
        stale_after: Duration::from_millis(args.stale_ms),
        death_pipe: args.stdin_pipe.then_some(0),
    };
    let mut g = Guardian::start(opts, shm)
        .context("starting the guardian")?
        .with_signals(signals);
    Ok(g.run()?.code())
}
