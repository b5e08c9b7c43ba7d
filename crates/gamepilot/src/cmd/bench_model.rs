//! `gamepilot bench model`: tactical call latency (p50/p95) against a real model host and the host's
//! prefix-cache hit ratio across consecutive tactical calls (FR-CTX-002, NFR-MODEL-001, FR-MODEL-002).
//! By default it starts llama-server with the default local model from scripts/setup-llama.sh's cache.

use anyhow::Context as _;
use gamepilot_context::{
    tactical_schema, Cadence, Context, ContextConfig, HistoryEntry, ObservationText, Plan, PlanStep,
    SchemaLimits, StepStatus, ToolSet,
};
use gamepilot_core::{ElementId, MonoTime, Size};
use gamepilot_model::{
    cache, CancelToken, ChatRequest, HostClient, HostTimeouts, LaunchSpec, LocalHost, VisualBudget,
    WeightsSpec,
};
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
    /// A vision model's multimodal projector for the started host (issue 15); verified like the weights.
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
    /// The frame whose observation every call carries, perceived once as the tactical thread does
    /// (PP-OCR, elements, marks); the goal and plan are the demo's. Default: the practice game's play
    /// field from the corpus.
    #[arg(long, default_value = "corpus/frames/arena-play-0.png")]
    pub frame: PathBuf,
    /// Instead of --frame, a three-mark synthetic observation (the figure issue 16 started from).
    #[arg(long)]
    pub synthetic: bool,
    /// Maximum reply tokens per call.
    #[arg(long, default_value_t = 40)]
    pub max_tokens: u32,
}

const DEMO_GOAL: &str = "Start the game from the menu (click Play), then walk around and collect a coin.";
const DEMO_SUBGOAL: &str = "Collect a coin";

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

    let real = if args.synthetic {
        None
    } else {
        let (obs, size) = gamepilot_runtime::eval::perceive_image(&args.frame)
            .with_context(|| format!("reading --frame {}", args.frame.display()))?;
        // Listed as `run` lists it for the demo's goal and subgoal.
        let focus = gamepilot_session::relevance::Focus::new(DEMO_GOAL, DEMO_SUBGOAL);
        let text = gamepilot_runtime::eval::text_for_model(&obs, &focus, &Default::default());
        println!(
            "observation: {} ({} elements, {} bytes of text)",
            args.frame.display(),
            obs.elements.len(),
            text.len()
        );
        let marks: Vec<ElementId> = obs.elements.iter().map(|e| e.id).collect();
        Some((text, marks, size))
    };
    let (tools, goal, plan) = if real.is_some() {
        (
            ToolSet::new(&gamepilot_session::tools_for_path(
                Some(gamepilot_grounding::GroundingPath::Mark),
                false,
            ))?,
            DEMO_GOAL,
            Plan {
                steps: vec![
                    PlanStep::new(DEMO_SUBGOAL, StepStatus::Active),
                    PlanStep::new("Keep collecting coins", StepStatus::Pending),
                ],
                subgoal: Some(DEMO_SUBGOAL.into()),
            },
        )
    } else {
        (
            ToolSet::all(),
            "Reach the exit door at the right end of the level.",
            Plan {
                steps: vec![
                    PlanStep::new("Walk right along the corridor", StepStatus::Active),
                    PlanStep::new("Open the exit door", StepStatus::Pending),
                ],
                subgoal: Some("Walk right along the corridor".into()),
            },
        )
    };
    let mut ctx = Context::new(
        ContextConfig {
            context_tokens: args.ctx,
            ..ContextConfig::default()
        },
        &tools,
        goal,
        MonoTime::ZERO,
    )?;
    ctx.set_plan(plan);
    let cancel = CancelToken::new();

    let (mut wall, mut prompt_ms, mut predicted_ms) = (Vec::new(), Vec::new(), Vec::new());
    let (mut evaluated, mut completion) = (Vec::new(), Vec::new());
    let mut last_reply = String::new();
    let (mut cached_sum, mut prompt_sum, mut retries) = (0u64, 0u64, 0u32);
    let mut first_wall = 0.0;
    for i in 0..args.calls {
        let now = MonoTime::from_millis(500 * (i as u64 + 1));
        let (obs, marks, capture) = match &real {
            Some((text, marks, size)) => (ObservationText::new(now, text.clone()), marks.clone(), *size),
            None => {
                let marks: Vec<ElementId> = [3u32, 7, 11 + (i as u32 % 3)]
                    .into_iter()
                    .map(ElementId)
                    .collect();
                let obs = ObservationText::new(
                    now,
                    format!(
                        "window 1280x720\nmarks: [3] door (1180,300 60x140); [7] player ({},520 32x48); [{}] coin\nsensors: hp=100 coins={}",
                        200 + i * 10,
                        marks[2].0,
                        i / 2
                    ),
                );
                (obs, marks, Size::new(1280, 720))
            }
        };
        let schema = tactical_schema(&tools, &marks, capture, &SchemaLimits::default())?;
        let prompt = ctx.assemble(Cadence::Tactical, &obs, None);
        let req = ChatRequest::from_prompt(&model_name, &prompt, args.max_tokens);
        let t = Instant::now();
        let r = client
            .chat_structured(&req, &schema, &cancel)
            .with_context(|| format!("tactical call {i}"))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        retries += r.attempts - 1;
        let timings = &r.reply.timings;
        if i == 0 {
            first_wall = ms;
        } else {
            wall.push(ms);
            cached_sum += timings.cached_tokens.unwrap_or(0);
            prompt_sum += timings.prompt_tokens.unwrap_or(0);
        }
        if let Some(p) = timings.prompt_ms {
            prompt_ms.push(p);
        }
        if let Some(p) = timings.predicted_ms {
            predicted_ms.push(p);
        }
        if let Some(n) = timings.prompt_evaluated {
            evaluated.push(n as f64);
        }
        if let Some(n) = timings.completion_tokens {
            completion.push(n as f64);
        }
        last_reply = r.value.to_string();
        ctx.record(HistoryEntry::new(
            now.plus(Duration::from_millis(100)),
            r.value.to_string(),
            "inconclusive",
        ));
        ctx.end_tick(obs);
    }
    let wall = sorted(wall);
    let prompt_ms = sorted(prompt_ms);
    let predicted_ms = sorted(predicted_ms);
    let evaluated = sorted(evaluated);
    let completion = sorted(completion);
    let ratio = if prompt_sum > 0 {
        cached_sum as f64 / prompt_sum as f64
    } else {
        f64::NAN
    };
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
        "  prefix-cache hit ratio: {:.3} ({} of {} prompt tokens reused)",
        ratio, cached_sum, prompt_sum
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
