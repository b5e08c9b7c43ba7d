//! `gamepilot bench model`: tactical call latency (p50/p95) against a real model host and the host's
//! prefix-cache hit ratio across consecutive tactical calls (FR-CTX-002, NFR-MODEL-001, FR-MODEL-002).
//! By default it starts llama-server with the default local model from scripts/setup-llama.sh's cache.

use anyhow::Context as _;
use gamepilot_bench::model_bench::{self, BenchScene};
use gamepilot_model::{cache, HostClient, HostTimeouts, LaunchSpec, LocalHost, VisualBudget, WeightsSpec};
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
    /// The latency that matters: replay these session recordings' screens (events.jsonl files or
    /// recording folders; `run` writes them) through today's session against two hosts started as `run`
    /// starts them, and report the time from each new screen to the first action sent, tokens per call,
    /// the cache across scene changes, deliberative pass time and a 60 Hz reflex's lateness meanwhile.
    /// A RECORDING is a recording's folder, its `events.jsonl`, or a gzipped input stream
    /// (`scripts/keep-scenes.py`). With no value: the committed recordings of the practice game and of
    /// sgt-puzzles' Net, and the real-game runs kept in `corpus/scenes`.
    #[arg(long, num_args = 0.., value_name = "RECORDING")]
    pub scenes: Option<Vec<PathBuf>>,
}

/// The committed session recordings `--scenes` replays when given none, before `corpus/scenes`.
const SCENE_RECORDINGS: &[&str] = &[
    "crates/io/replay/tests/fixtures/sessions/practice-arena-real-model.jsonl",
    "crates/io/replay/tests/fixtures/sessions/sgt-net-menus-and-dialogs.jsonl",
];

/// The folder of kept real-game input streams (`NAME.jsonl.gz`).
const SCENE_CORPUS: &str = "corpus/scenes";

/// The scene benchmark's default set: the committed recordings, then the kept streams in name order.
fn default_scenes() -> anyhow::Result<Vec<PathBuf>> {
    let mut kept: Vec<PathBuf> = std::fs::read_dir(SCENE_CORPUS)
        .with_context(|| format!("reading {SCENE_CORPUS} (run from the repository root)"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
        .collect();
    kept.sort();
    Ok(SCENE_RECORDINGS.iter().map(PathBuf::from).chain(kept).collect())
}

/// A recording's folder, its `events.jsonl`, or a gzipped stream of its lines.
fn read_recording(file: &std::path::Path) -> anyhow::Result<gamepilot_replay::Recording> {
    let dir = file.parent().unwrap_or(std::path::Path::new("."));
    let rec = if file.is_dir() {
        gamepilot_replay::Recording::open(file)
    } else {
        let raw = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        if file.extension().is_some_and(|e| e == "gz") {
            let text = std::io::BufReader::new(flate2::read::GzDecoder::new(raw));
            gamepilot_replay::Recording::read(dir, file, text)
        } else {
            gamepilot_replay::Recording::read(dir, file, std::io::BufReader::new(raw))
        }
    };
    rec.with_context(|| format!("reading the recording {}", file.display()))
}

pub fn bench(args: BenchArgs) -> anyhow::Result<i32> {
    if let Some(files) = &args.scenes {
        return scenes(&args, files);
    }
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
        let frames = gamepilot_bench::eval::perceive_sequence(&args.frame, Duration::from_millis(500))
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

/// `bench model --scenes`: new screen -> first action over recorded sessions, with `run`'s two hosts.
fn scenes(args: &BenchArgs, files: &[PathBuf]) -> anyhow::Result<i32> {
    use gamepilot_bench::scene_bench::{replay_scenes, ReflexProbe, SceneFigures, SceneHosts};
    let files: Vec<PathBuf> = if files.is_empty() {
        default_scenes()?
    } else {
        files.to_vec()
    };
    let models = super::run::ModelArgs {
        model_endpoint: args.url.clone(),
        model: args.model.clone(),
        model_sha256: args.sha256.clone(),
        mmproj: args.mmproj.clone(),
        mmproj_sha256: args.mmproj_sha256.clone(),
        llama_server: args.server.clone(),
        model_name: "local".into(),
        call_timeout_s: 60,
        deliberative_timeout_s: 90,
        threads: args.threads,
    };
    let cancel = gamepilot_model::CancelToken::new();
    let started = Instant::now();
    let hosts = models.plan()?;
    let (tactical, _tactical_host, caps) = hosts.connect_probed(&cancel)?;
    let deliberative = hosts.connect_deliberative(&cancel)?;
    let deliberative_client = match &deliberative {
        Some((c, _)) => c.clone().with_kind(caps.kind),
        None => tactical.clone(),
    };
    println!(
        "hosts: tactical and {} deliberative, up in {:.1} s",
        if deliberative.is_some() {
            "a second"
        } else {
            "the same"
        },
        started.elapsed().as_secs_f64()
    );
    let hosts = SceneHosts {
        tactical: &tactical,
        deliberative: &deliberative_client,
        model_name: &models.model_name,
    };
    let probe = ReflexProbe::start()?;
    let mut all = SceneFigures::default();
    for file in &files {
        let rec = read_recording(file)?;
        let Some((cfg, start, inputs)) = gamepilot_replay::session_inputs(&rec)? else {
            anyhow::bail!(
                "{}: recorded before the session core recorded its inputs; nothing to replay",
                file.display()
            );
        };
        let began = Instant::now();
        let f = replay_scenes(cfg, start, inputs, &hosts)?;
        println!(
            "{}: {} new screens acted on ({} without a model call, {} left unanswered), {} tactical calls, {} passes, {:.1} s",
            file.display(),
            f.new_screen_ms.len(),
            f.without_call,
            f.unanswered,
            f.tactical_ms.len(),
            f.deliberative_ms.len(),
            began.elapsed().as_secs_f64()
        );
        let each: Vec<String> = f
            .new_screen_ms
            .iter()
            .zip(&f.screen_evaluated)
            .map(|(ms, tokens)| match tokens {
                0 => format!("{ms:.0} ms"),
                n => format!("{ms:.0} ms ({n} tokens evaluated)"),
            })
            .collect();
        println!("  new screen -> first action: {}", each.join(", "));
        all.merge(f);
    }
    let scheduling = probe.scheduling;
    let late = sorted(probe.stop());
    let screens = sorted(all.new_screen_ms.clone());
    let tactical_ms = sorted(all.tactical_ms.clone());
    let evaluated = sorted(all.evaluated.clone());
    let passes = sorted(all.deliberative_ms.clone());
    println!(
        "new screen -> first action: p50 {:.0} ms, p95 {:.0} ms over {} screens ({} without a model call)",
        percentile(&screens, 0.5),
        percentile(&screens, 0.95),
        screens.len(),
        all.without_call
    );
    println!(
        "tactical calls: {} , wall p50 {:.0} ms p95 {:.0} ms, prompt tokens evaluated p50 {:.0}; cache {:.3} overall, {:.3} on a new screen's calls",
        tactical_ms.len(),
        percentile(&tactical_ms, 0.5),
        percentile(&tactical_ms, 0.95),
        percentile(&evaluated, 0.5),
        all.cache_ratio(),
        all.scene_cache_ratio()
    );
    let p50 = |v: &[f64]| percentile(&sorted(v.to_vec()), 0.5);
    println!(
        "deliberative passes: {}, p50 {:.0} ms p95 {:.0} ms; per pass p50 {:.0} of {:.0} prompt tokens evaluated in {:.0} ms, {:.0} generated in {:.0} ms; {} retried after a reply broke the schema",
        passes.len(),
        percentile(&passes, 0.5),
        percentile(&passes, 0.95),
        p50(&all.deliberative_evaluated),
        p50(&all.deliberative_prompt),
        p50(&all.deliberative_prompt_ms),
        p50(&all.deliberative_generated),
        p50(&all.deliberative_predicted_ms),
        all.deliberative_retried
    );
    println!(
        "reflex lateness meanwhile (60 Hz, {}): p50 {:.0} us, p99 {:.0} us over {} ticks",
        scheduling,
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.len()
    );
    println!(
        "{}",
        serde_json::json!({
            "bench": "model-scenes", "screens": screens.len(), "without_call": all.without_call,
            "new_screen_p50_ms": percentile(&screens, 0.5), "new_screen_p95_ms": percentile(&screens, 0.95),
            "tactical_calls": tactical_ms.len(), "tactical_p50_ms": percentile(&tactical_ms, 0.5),
            "evaluated_p50": percentile(&evaluated, 0.5), "cache_ratio": all.cache_ratio(),
            "scene_cache_ratio": all.scene_cache_ratio(), "deliberative_passes": passes.len(),
            "deliberative_p50_ms": percentile(&passes, 0.5), "reflex_late_p99_us": percentile(&late, 0.99),
            "deliberative_evaluated_p50": p50(&all.deliberative_evaluated),
            "deliberative_generated_p50": p50(&all.deliberative_generated),
            "deliberative_retried": all.deliberative_retried,
        })
    );
    Ok(0)
}
