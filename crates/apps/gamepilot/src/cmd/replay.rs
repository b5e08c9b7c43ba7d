//! `gamepilot replay DIR`: replay a recording through the loop logic and diff the decisions (exit 1 on
//! divergence). Reads recordings, so only this command and `report` may use `gamepilot_replay` (INV-CTX-002).

use anyhow::Context as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session folder (holding events.jsonl).
    pub dir: PathBuf,
    /// Print every divergence in full (default: the first five).
    #[arg(long)]
    pub all: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let rec = gamepilot_replay::Recording::open(&args.dir)
        .with_context(|| format!("reading the recording in {}", args.dir.display()))?;
    if rec.truncated && !args.json {
        println!("note: the last line was cut short (the session did not end cleanly); it was left out");
    }
    if rec.corrupt_lines > 0 && !args.json {
        let at: Vec<String> = rec.corrupt.iter().map(|c| c.line.to_string()).collect();
        println!(
            "note: {} corrupt line(s) were skipped (line {}{})",
            rec.corrupt_lines,
            at.join(", "),
            if rec.corrupt_lines > rec.corrupt.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    let out = gamepilot_replay::replay(&rec).context("replaying the recording")?;
    let reuse = out.prompt_reuse();
    let s = out.state.verdict_counts();
    let hist: Vec<(String, u64)> = out
        .state
        .histogram()
        .entries()
        .into_iter()
        .map(|(c, n)| (c.as_str().to_string(), n))
        .collect();
    if args.json {
        let v = serde_json::json!({
            "session_inputs": out.session_inputs,
            "inputs": out.inputs,
            "recorded_decisions": out.recorded_decisions,
            "replayed_decisions": out.decisions.len(),
            "divergences": out.divergences,
            "verdicts": {"confirmed": s.confirmed, "refuted": s.refuted, "inconclusive": s.inconclusive},
            "failures": hist.iter().map(|(k, n)| (k.clone(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
            "stopped": out.state.stopped(),
            "truncated": rec.truncated,
            "corrupt_lines": rec.corrupt_lines,
            "tactical_prompts": {
                "calls": reuse.calls.len(),
                "bytes": reuse.bytes(),
                "new_bytes": reuse.new_bytes(),
            },
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let through = if out.session_inputs > 0 {
            "replayed through the session, every effect and prompt diffed"
        } else {
            "recorded before the session core: its loop events replayed through the loop logic"
        };
        println!(
            "{}: {} session inputs, {} loop inputs, {} recorded decisions, {} replayed ({through})",
            args.dir.display(),
            out.session_inputs,
            out.inputs,
            out.recorded_decisions,
            out.decisions.len()
        );
        println!(
            "verdicts: {} confirmed, {} refuted, {} inconclusive",
            s.confirmed, s.refuted, s.inconclusive
        );
        let h: Vec<String> = hist.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!("failures: {}", h.join(", "));
        if !reuse.calls.is_empty() {
            println!(
                "tactical prompts: {} calls, {} bytes, {} ({:.0} %) new against the call before (what a prefix cache evaluates again)",
                reuse.calls.len(),
                reuse.bytes(),
                reuse.new_bytes(),
                reuse.new_share() * 100.0
            );
        }
        if let Some(r) = out.state.stopped() {
            println!("stopped: {}", serde_json::to_value(r)?.as_str().unwrap_or("?"));
        }
        let shown = if args.all {
            out.divergences.len()
        } else {
            out.divergences.len().min(5)
        };
        for d in &out.divergences[..shown] {
            println!(
                "divergence at input seq {} (t = {:.3} s): {}",
                d.input,
                d.t_us as f64 / 1e6,
                d.event
            );
            println!("  recorded: {}", serde_json::to_string(&d.recorded)?);
            println!("  replayed: {}", serde_json::to_string(&d.replayed)?);
        }
        if out.divergences.len() > shown {
            println!(
                "… {} more divergences (--all shows them)",
                out.divergences.len() - shown
            );
        }
    }
    if out.matches() {
        if !args.json {
            println!("replay: decisions reproduced");
        }
        Ok(0)
    } else {
        if !args.json {
            println!("replay: {} divergences", out.divergences.len());
        }
        Ok(1)
    }
}
