//! `gamepilot report DIR [--out report.html]`: a self-contained HTML report of a recording — timeline of
//! marked frames, actions and verdicts, the failure-attribution histogram (FR-GND-008), tick-timing and
//! latency plots. Reads recordings, so only this command and `replay` may use `gamepilot_replay` (INV-CTX-002).

use anyhow::Context as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session folder (holding events.jsonl).
    pub dir: PathBuf,
    /// Where to write the report (default: DIR/report.html).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let rec = gamepilot_replay::Recording::open(&args.dir)
        .with_context(|| format!("reading the recording in {}", args.dir.display()))?;
    // The replay verdict is part of the report; a recording without loop events still gets one.
    let replay = gamepilot_replay::replay(&rec).ok();
    let html = gamepilot_replay::render_html(&rec, replay.as_ref());
    let out = args.out.unwrap_or_else(|| args.dir.join("report.html"));
    gamepilot_replay::write_report(&out, &html).context("writing the report")?;
    println!("{}", out.display());
    Ok(0)
}
