//! `gamepilot bench model`: tactical call latency (p50/p95) against a real model host and the host's
//! prefix-cache hit ratio across consecutive tactical calls (FR-CTX-002, NFR-MODEL-001, FR-MODEL-002).
//! By default it starts llama-server with the default local model from scripts/setup-llama.sh's cache.

use anyhow::Context as _;
use gamepilot_model::{cache, HostClient, HostTimeouts, LaunchSpec, LocalHost, VisualBudget, WeightsSpec};
use gamepilot_runtime::model_bench::{self, BenchScene};
use gamepilot_session::eval::{percentile, sorted};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Tactical calls to make.
    #[arg(long, default_value_t = 20)]
    pub calls: usize,
    /// Use this running OpenAI-compatible host instead of starting llama-server.
    #[arg(long)]
    pub url: Option<String>,
    /// llama-server binary (default: the setup-llama.sh cache).
    #[arg(long)]
    pub server: Option<PathBuf>,
    /// GGUF model (default: the default local model, Qwen2.5-Coder-0.5B-Instruct, from the cache); needs --sha256 when given.
    #[arg(long, requires = "sha256")]
    pub model: Option<PathBuf>,
    /// Expected SHA-256 of --model.
    #[arg(long)]
    pub sha256: Option<String>,
    /// A vision model's multimodal projector for the started host; verified like the weights.
    #[arg(long, requires = "mmproj_sha256")]
    pub mmproj: Option<PathBuf>,
    /// Expected SHA-256 of --mmproj.
    #[arg(long, requires = "mmproj")]
    pub mmproj_sha256: Option<String>,
    /// Context size of the started host.
    #[arg(long, default_value_t = 4096)]
    pub ctx: u32,
    /// CPU threads of the started host (`run` and `demo` start theirs with 2).
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
    /// The frames the calls observe, in turn, perceived in order as the tactical thread perceives
    /// consecutive frames (PP-OCR, elements, tracked ids), walked there and back; the goal and plan are the demo's. Default:
    /// the practice game's play field from the corpus as the avatar walks.
    #[arg(long, num_args = 1.., default_values = ["corpus/frames/arena-play-0.png", "corpus/frames/arena-play-move-a.png", "corpus/frames/arena-play-move-b.png", "corpus/frames/arena-play-still.png"])]
    pub frame: Vec<PathBuf>,
    /// Instead of --frame, a three-mark synthetic observation (the one the first tactical-latency
    /// figures were measured on).
    #[arg(long)]
    pub synthetic: bool,
    /// Maximum reply tokens per call.
    #[arg(long, default_value_t = 40)]
    pub max_tokens: u32,
}

pub fn bench(args: BenchArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(
        args.calls >= 2,
        "--calls must be at least 2 (the cache ratio needs a second call)"
    );
    let mut _host = None;
    let (url, model_name) = match &args.url {
        Some(u) => (u.clone(), "default".to_string()),
        None => {
            let (bin, model) = match (&args.server, &args.model, &args.sha256) {
                (s, Some(m), Some(d)) => (
                    s.clone().unwrap_or_else(cache::server_bin),
                    WeightsSpec::new(m.clone(), d),
                ),
                (s, _, _) => {
                    let (bin, model) = cache::require_installed().map_err(anyhow::Error::msg)?;
                    (s.clone().unwrap_or(bin), model)
                }
            };
            let mut spec = LaunchSpec::new(bin, model);
            if let (Some(p), Some(d)) = (&args.mmproj, &args.mmproj_sha256) {
                spec.mmproj = Some(WeightsSpec::new(p.clone(), d));
            }
            spec.ctx_size = args.ctx;
            spec.threads = args.threads;
            let started = Instant::now();
            let h = LocalHost::start(spec).context("starting llama-server")?;
            println!(
                "host: llama-server pid {:?} on {} (weights verified + loaded in {:.0} ms)",
                h.pid(),
                h.base_url(),
                started.elapsed().as_secs_f64() * 1e3
            );
            let url = h.base_url();
            let name = h
                .verified()
                .first()
                .map(|v| v.path.display().to_string())
                .unwrap_or_default();
            _host = Some(h);
            (url, name)
        }
    };
    let client = HostClient::new(
        &url,
        HostTimeouts {
            connect: Duration::from_secs(2),
            call: Duration::from_secs(120),
        },
    )?;
    let caps = client.probe()?;
    let client = client.with_kind(caps.kind);
    println!("capabilities: vision {:?}, n_ctx {:?}", caps.vision, caps.n_ctx);
    let budget = VisualBudget::default();
    println!(
        "visual budget: tactical {} px, deliberative {} px{}",
        budget.tactical_pixels,
        budget.deliberative_pixels,
        if caps.vision == Some(true) {
            ""
        } else {
            " (text-only host: observation text stands in for the image)"
        }
    );

    let scene = if args.synthetic {
        BenchScene::Synthetic
    } else {
        let frames = gamepilot_runtime::eval::perceive_sequence(&args.frame, Duration::from_millis(500))
            .context("reading --frame")?;
        for (p, (obs, _)) in args.frame.iter().zip(&frames) {
            println!("observation: {} ({} elements)", p.display(), obs.elements.len());
        }
        BenchScene::Frames(frames)
    };
    let f = model_bench::measure(
        &client,
        &model_name,
        &scene,
        args.calls,
        args.max_tokens,
        args.ctx,
    )?;
    let (first_wall, retries, last_reply, ratio) = (f.first_ms, f.retries, &f.last_reply, f.cache_ratio());
    let (cached_sum, prompt_sum) = (f.cached_tokens, f.prompt_tokens);
    let (wall, prompt_ms, predicted_ms) = (f.wall_ms, f.prompt_ms, f.predicted_ms);
    let (evaluated, completion) = (f.evaluated, f.completion);
    let wall = sorted(wall);
    let prompt_ms = sorted(prompt_ms);
    let predicted_ms = sorted(predicted_ms);
    let evaluated = sorted(evaluated);
    let completion = sorted(completion);
    println!(
        "tactical calls: {} (first, cold: {:.1} ms; {} schema retries)",
        args.calls, first_wall, retries
    );
    println!(
        "  wall latency (warm calls): p50 {:.1} ms  p95 {:.1} ms",
        percentile(&wall, 0.5),
        percentile(&wall, 0.95)
    );
    println!(
        "  host prompt eval: p50 {:.1} ms; generation: p50 {:.1} ms",
        percentile(&prompt_ms, 0.5),
        percentile(&predicted_ms, 0.5)
    );
    println!(
        "  tokens per call: p50 {:.0} prompt tokens evaluated, {:.0} generated; last reply {last_reply}",
        percentile(&evaluated, 0.5),
        percentile(&completion, 0.5)
    );
    println!(
        "  prefix-cache hit ratio: {:.3} ({} of {} prompt tokens reused; {} new baselines)",
        ratio, cached_sum, prompt_sum, f.baselines
    );
    println!(
        "{}",
        serde_json::json!({
            "bench": "model", "calls": args.calls, "cold_ms": first_wall,
            "p50_ms": percentile(&wall, 0.5), "p95_ms": percentile(&wall, 0.95),
            "prompt_eval_p50_ms": percentile(&prompt_ms, 0.5), "gen_p50_ms": percentile(&predicted_ms, 0.5),
            "cache_hit_ratio": ratio, "schema_retries": retries,
        })
    );
    Ok(0)
}
