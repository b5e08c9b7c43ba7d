//! `gamepilot eval`: decision accuracy on the labelled decision points of `corpus/decisions.json`
//! — per scene kind, schema validity, latency and prefix cache — printed as a table and
//! written as JSON; `--min-accuracy` makes it a gate (exit 1 under the floor).

use super::run::ModelArgs;
use anyhow::Context as _;
use gamepilot_bench::eval::{evaluate, evaluate_declarations, EvalSetup};
use gamepilot_session::eval::{DecisionCorpus, DeclarationCorpus, EvalSummary, PointResult};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The decision corpus (its frames are in `frames/` beside it).
    #[arg(long, default_value = "corpus/decisions.json")]
    pub corpus: PathBuf,
    /// Score every K-th point only (a fixed subset: CI uses one).
    #[arg(long, default_value_t = 1)]
    pub every: usize,
    /// At most this many points.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Write the per-point results and the summary here as JSON.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Exit 1 when the overall accuracy is below this.
    #[arg(long)]
    pub min_accuracy: Option<f64>,
    /// Tokens one reply may take.
    #[arg(long, default_value_t = 96)]
    pub max_tokens: u32,
    /// Write each point's prompt (its messages as text) into this directory.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Score the declaration points of this corpus instead (a goal, the frame the agent declares its
    /// check on, a frame with the goal done): right when the declared check reads false, then true.
    #[arg(long)]
    pub declarations: Option<PathBuf>,
    /// Score goal-directed points as `run` decides them: where the session grounds the subgoal without
    /// a model call (it names the element, or the subgoal closes what is open), its choice is scored.
    #[arg(long)]
    pub as_run: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if let Some(path) = args.declarations.clone() {
        return run_declarations(args, &path);
    }
    let text = std::fs::read_to_string(&args.corpus)
        .with_context(|| format!("reading the decision corpus {}", args.corpus.display()))?;
    let corpus: DecisionCorpus = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a decision corpus", args.corpus.display()))?;
    let points = corpus.subset(args.every, args.limit);
    anyhow::ensure!(!points.is_empty(), "no decision points selected");
    let what = format!(
        "{} of {} decision points (corpus v{})",
        points.len(),
        corpus.points.len(),
        corpus.version
    );
    let results = with_host(&args, &args.corpus, &what, |setup| {
        Ok(evaluate(setup, &points, print_result)?)
    })?;
    report(&args, &results)
}

/// `--declarations`: each point's goal check as the agent declares it, read before and after the goal.
fn run_declarations(args: Args, path: &std::path::Path) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the declaration corpus {}", path.display()))?;
    let corpus: DeclarationCorpus = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a declaration corpus", path.display()))?;
    let points: Vec<_> = corpus
        .points
        .iter()
        .step_by(args.every.max(1))
        .take(args.limit.unwrap_or(usize::MAX))
        .cloned()
        .collect();
    anyhow::ensure!(!points.is_empty(), "no declaration points selected");
    let what = format!(
        "{} of {} declaration points (corpus v{})",
        points.len(),
        corpus.points.len(),
        corpus.version
    );
    let results = with_host(&args, path, &what, |setup| {
        Ok(evaluate_declarations(setup, &points, print_result)?)
    })?;
    report(&args, &results)
}

/// Start or reach the model host in the dialect `run` speaks (a llama.cpp host gets the compact
/// grammar), say what is scored, and score it with the corpus's `frames/` beside `corpus`.
fn with_host(
    args: &Args,
    corpus: &std::path::Path,
    what: &str,
    score: impl FnOnce(&EvalSetup<'_>) -> anyhow::Result<Vec<PointResult>>,
) -> anyhow::Result<Vec<PointResult>> {
    let frames = corpus
        .parent()
        .map(|p| p.join("frames"))
        .unwrap_or_else(|| PathBuf::from("frames"));
    let (client, _host, _caps) = args.model.plan()?.connect_probed(&Default::default())?;
    println!("eval: {what}, host {}", client.base_url());
    let setup = EvalSetup {
        client: &client,
        model_name: &args.model.model_name,
        frames: &frames,
        max_tokens: args.max_tokens,
        prompts: args.prompts.as_deref(),
        as_run: args.as_run,
    };
    score(&setup)
}

fn print_result(r: &PointResult) {
    println!(
        "  {:<28} {:<9} {:<7} {:>6.0} ms  {}",
        r.id,
        r.kind,
        if r.correct {
            "right"
        } else if r.valid {
            "wrong"
        } else {
            "invalid"
        },
        r.latency_ms,
        r.reply.chars().take(70).collect::<String>()
    );
}

/// The table, the JSON file and the gate.
fn report(args: &Args, results: &[PointResult]) -> anyhow::Result<i32> {
    let summary = EvalSummary::of(results);
    print!("{}", summary.table());
    if let Some(out) = &args.out {
        let json = serde_json::json!({ "summary": summary, "results": results });
        std::fs::write(out, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    match args.min_accuracy {
        Some(floor) if summary.overall.accuracy() < floor => {
            println!(
                "accuracy {:.3} is under the floor {floor:.3}",
                summary.overall.accuracy()
            );
            Ok(1)
        }
        _ => Ok(0),
    }
}
