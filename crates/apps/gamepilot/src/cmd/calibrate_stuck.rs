//! `gamepilot calibrate-stuck DIR...`: measures the no-progress signals (FR-LOOP-005) on recorded
//! sessions — each signal's raw quantity in progressing vs stuck moments, and false positives and
//! detection delay of candidate thresholds (method: docs/stuck-thresholds.md). Reads recordings, so it is
//! one of the commands allowed to use `gamepilot_replay` (INV-CTX-002).

use super::run::StuckArgs;
use anyhow::Context as _;
use gamepilot_replay::stuck::{self, Calibration, Dist, LabelRule};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Session folders (holding events.jsonl), or folders of session folders.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Look-ahead of the labelling rule: a moment is progressing when progress follows within this long.
    #[arg(long, default_value_t = stuck::DEFAULT_HORIZON_MS / 1000)]
    pub horizon_s: u64,
    /// Do not count confirmed verdicts as progress (only postconditions and the progress sensor).
    #[arg(long)]
    pub strict: bool,
    /// Print the calibration as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// The thresholds to calibrate around (default: the shipped defaults).
    #[command(flatten)]
    pub stuck: StuckArgs,
}

/// The session folders under `dirs`: a folder with an `events.jsonl` is one; otherwise its sub-folders
/// that have one, sorted by name.
pub fn session_dirs(dirs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for d in dirs {
        if d.join("events.jsonl").is_file() {
            out.push(d.clone());
            continue;
        }
        let mut subs: Vec<PathBuf> = std::fs::read_dir(d)
            .with_context(|| format!("{}: not a recording and not a folder of recordings", d.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("events.jsonl").is_file())
            .collect();
        anyhow::ensure!(
            !subs.is_empty(),
            "{}: holds no recording (no events.jsonl)",
            d.display()
        );
        subs.sort();
        out.extend(subs);
    }
    Ok(out)
}

/// Read and calibrate the sessions in `dirs`.
pub fn calibrate(
    dirs: &[PathBuf],
    base: gamepilot_planner::SignalConfig,
    rule: &LabelRule,
) -> anyhow::Result<Calibration> {
    let mut corpus = Vec::new();
    for d in session_dirs(dirs)? {
        let rec = gamepilot_replay::Recording::open(&d)
            .with_context(|| format!("reading the recording in {}", d.display()))?;
        corpus.push(stuck::timeline(&rec).with_context(|| format!("{}", d.display()))?);
    }
    Ok(stuck::calibrate(&corpus, base, rule))
}

fn dist(d: &Dist) -> String {
    if d.n == 0 {
        return format!("{:>6} {:>9} {:>9} {:>9} {:>9}", 0, "-", "-", "-", "-");
    }
    format!(
        "{:>6} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
        d.n, d.p50, d.p90, d.p99, d.max
    )
}

fn print(c: &Calibration) {
    println!(
        "labelling: progress = subgoal/goal postcondition became true, progress sensor increased{}; a moment is progressing when progress follows within {} s",
        if c.rule.confirmed_is_progress { ", or a confirmed verdict" } else { "" },
        c.rule.horizon_ms / 1000
    );
    println!(
        "\n{:<28} {:>7} {:>7} {:>8} {:>9} {:>8} {:>9} {:>8}",
        "session", "s", "actions", "verdicts", "progress", "stretch", "prog s", "stuck s"
    );
    for s in &c.sessions {
        println!(
            "{:<28} {:>7.1} {:>7} {:>8} {:>9} {:>8} {:>9.1} {:>8.1}",
            s.name,
            s.seconds,
            s.actions,
            s.verdicts,
            s.progress_events,
            s.stretches,
            s.progressing_s,
            s.stuck_s
        );
    }
    println!(
        "\nsafe = no false positive and the threshold at least {}x the largest value seen while progressing",
        stuck::MARGIN
    );
    for sig in &c.signals {
        println!("\n== {:?} (raw quantity in {})", sig.signal, sig.unit);
        println!(
            "{:<12} {:>6} {:>9} {:>9} {:>9} {:>9}",
            "moments", "n", "p50", "p90", "p99", "max"
        );
        println!("{:<12} {}", "progressing", dist(&sig.progressing));
        println!("{:<12} {}", "stuck", dist(&sig.stuck));
        println!(
            "{:<44} {:>7} {:>4} {:>4} {:>9} {:>9} {:>9} {:>6}",
            "candidate", "firings", "FP", "TP", "detected", "delay p50", "delay max", "margin"
        );
        for s in &sig.scores {
            let mark = if sig.chosen.as_deref() == Some(s.name.as_str()) {
                " <- chosen"
            } else {
                ""
            };
            let (p50, max) = if s.detected == 0 {
                ("-".to_string(), "-".to_string())
            } else {
                (
                    format!("{:.1} s", s.delay_ms.p50 / 1000.0),
                    format!("{:.1} s", s.delay_ms.max / 1000.0),
                )
            };
            println!(
                "{:<44} {:>7} {:>4} {:>4} {:>9} {:>9} {:>9} {:>6}{mark}",
                s.name,
                s.firings,
                s.false_positives,
                s.true_positives,
                format!("{}/{}", s.detected, s.stretches),
                p50,
                max,
                if s.margin_ok() { "ok" } else { "no" }
            );
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let rule = LabelRule {
        horizon_ms: args.horizon_s * 1000,
        confirmed_is_progress: !args.strict,
    };
    let c = calibrate(&args.dirs, args.stuck.signals()?, &rule)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print(&c);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::run::parse_signal_config;

    #[test]
    fn threshold_files_are_partial_and_typos_are_errors() {
        // FR-LOOP-005 (thresholds configurable)
        let c = parse_signal_config(r#"{"stasis_ms": 7000, "cycle_repeats": 4}"#).unwrap();
        assert_eq!((c.stasis_ms, c.cycle_repeats), (7000, 4));
        let d = gamepilot_planner::SignalConfig::default();
        assert_eq!(c.progress_stall_ms, d.progress_stall_ms);
        assert!(parse_signal_config(r#"{"stasis": 7000}"#).is_err());
        assert!(parse_signal_config("[1]").is_err());
        assert!(parse_signal_config(r#"{"stasis_ms": "x"}"#).is_err());
    }

    #[test]
    fn calibrates_the_committed_corpus() {
        // FR-LOOP-005 (calibration over recorded sessions; the corpus README lists them)
        let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../corpus/sessions");
        let dirs = session_dirs(std::slice::from_ref(&corpus)).unwrap();
        assert!(dirs.len() >= 4);
        let c = calibrate(&[corpus], Default::default(), &LabelRule::default()).unwrap();
        assert_eq!(c.sessions.len(), dirs.len());
        assert_eq!(c.signals.len(), 4);
        assert!(session_dirs(&[PathBuf::from("/nonexistent")]).is_err());
    }
}
