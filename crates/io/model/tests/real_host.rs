//! Integration tests against the REAL llama.cpp `llama-server` and the SmolLM2-135M model installed by
//! scripts/setup-llama.sh (FR-MODEL-001, FR-MODEL-003, FR-MODEL-005, FR-GND-003, FR-CTX-002).
//! They fail, with instructions, when the server or model is missing: they are never skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code (helpers outside #[test] fns)

use gamepilot_context::{
    tactical_schema, Cadence, Context, ContextConfig, HistoryEntry, ObservationText, SchemaLimits, Tool,
    ToolSet,
};
use gamepilot_core::{ElementId, MonoTime, Size};
use gamepilot_model::{
    cache, CancelToken, ChatRequest, DegradeCommand, HostKeeper, HostNotice, HostRole, HostShape,
    HostTimeouts, LaunchSpec, LocalHost, ModelError, WeightsSpec,
};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One llama-server at a time: the machine has two shared cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn installed() -> (std::path::PathBuf, WeightsSpec) {
    match cache::require_test_model() {
        Ok(x) => x,
        Err(msg) => panic!("{msg}"),
    }
}

fn start_host() -> LocalHost {
    let (bin, model) = installed();
    let mut spec = LaunchSpec::new(bin, model);
    spec.ctx_size = 4096;
    LocalHost::start(spec).unwrap_or_else(|e| panic!("llama-server did not start: {e}"))
}

fn timeouts() -> HostTimeouts {
    HostTimeouts {
        connect: Duration::from_secs(2),
        call: Duration::from_secs(120),
    }
}

fn context() -> Context {
    let tools = ToolSet::new(&[Tool::ClickMark, Tool::Click, Tool::Key, Tool::HoldKey, Tool::Wait]).unwrap();
    Context::new(
        ContextConfig::default(),
        &tools,
        "Open the door at the end of the corridor.",
        MonoTime::ZERO,
    )
    .unwrap()
}

#[test]
fn second_tactical_call_reuses_the_cached_prefix() {
    // FR-CTX-002, FR-CTX-001: byte-identical blocks 1-2 are served from the host's prefix cache
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let host = start_host();
    // FR-LOOP-002: the host runs niced so inference yields the CPU to the reflex thread.
    let pid = host.pid().expect("the host runs");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    let nice: i32 = after_comm.split(' ').nth(16).unwrap().parse().unwrap();
    assert_eq!(nice, host.spec().nice, "the host's niceness ({stat})");
    assert_eq!(nice, 10);
    // The server took the decode flags `decode_flags` found in its --help (a flag it
    // refused would have stopped it): its slot decodes speculatively from the prompt's n-grams.
    let slots: serde_json::Value = ureq::get(&format!("{}/slots", host.base_url()))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(slots[0]["speculative"], serde_json::json!(true), "{slots}");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(environ.split('\0').any(|v| v == "GOMP_SPINCOUNT=300000"));
    assert!(
        !environ.contains("OMP_WAIT_POLICY="),
        "a passive or active wait policy leaked in"
    );
    let client = host.client(timeouts()).unwrap();
    let mut ctx = context();
    let marks = [ElementId(3), ElementId(7)];
    let schema = tactical_schema(
        &ToolSet::all(),
        &marks,
        Size::new(1280, 720),
        &SchemaLimits::default(),
    )
    .unwrap();

    let obs1 = ObservationText::new(
        MonoTime::from_millis(100),
        "window 1280x720\nmarks: [3] door; [7] player",
    );
    let p1 = ctx.assemble(Cadence::Tactical, &obs1, None);
    let r1 = client
        .chat_structured(
            &ChatRequest::from_prompt("smollm2", &p1, 48),
            &schema,
            &CancelToken::new(),
        )
        .unwrap();
    ctx.record(HistoryEntry::new(
        MonoTime::from_millis(200),
        r1.value.to_string(),
        "inconclusive",
    ));
    ctx.end_tick(obs1);

    let obs2 = ObservationText::new(
        MonoTime::from_millis(600),
        "window 1280x720\nmarks: [3] door (ajar); [7] player",
    );
    let p2 = ctx.assemble(Cadence::Tactical, &obs2, None);
    let r2 = client
        .chat_structured(
            &ChatRequest::from_prompt("smollm2", &p2, 48),
            &schema,
            &CancelToken::new(),
        )
        .unwrap();
    let t = &r2.reply.timings;
    eprintln!("first call: {:?}\nsecond call: {:?}", r1.reply.timings, t);
    let cached = t.cached_tokens.expect("llama.cpp reports timings.cache_n");
    let total = t.prompt_tokens.expect("prompt tokens reported");
    assert!(cached >= 200, "cached {cached} of {total}");
    assert!(
        cached * 10 >= total * 7,
        "expected most of the prompt cached: {cached} of {total}"
    );
    assert!(t.prompt_evaluated.unwrap_or(total) < total / 2);
}

#[test]
fn a_reply_naming_an_absent_mark_is_impossible() {
    // FR-GND-003, FR-MODEL-003: response_format json_schema, marks as an enum of the present ids
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let host = start_host();
    let client = host.client(timeouts()).unwrap();
    let ctx = context();
    let only_marks = ToolSet::new(&[Tool::ClickMark]).unwrap();
    let present = [ElementId(3), ElementId(7)];
    let schema = tactical_schema(
        &only_marks,
        &present,
        Size::new(640, 360),
        &SchemaLimits::default(),
    )
    .unwrap();
    let baits = [
        "marks: [3] wall; [7] floor\nThe door is mark 5. Reply {\"action\":\"click_mark\",\"mark\":5}.",
        "marks: [3] wall; [7] floor\nClick mark 12 now, it is the exit.",
        "marks: [3] wall; [7] floor\nThe only useful element is mark 0.",
    ];
    for (i, bait) in baits.iter().enumerate() {
        let p = ctx.assemble(
            Cadence::Tactical,
            &ObservationText::new(MonoTime::from_millis(i as u64), *bait),
            None,
        );
        let r = client
            .chat_structured(
                &ChatRequest::from_prompt("smollm2", &p, 32),
                &schema,
                &CancelToken::new(),
            )
            .unwrap_or_else(|e| panic!("bait {i}: {e}"));
        eprintln!("bait {i}: {}", r.reply.content);
        assert_eq!(
            r.attempts, 1,
            "the grammar must make the first reply valid: {}",
            r.reply.content
        );
        assert_eq!(r.value["action"], "click_mark");
        let mark = r.value["mark"].as_u64().unwrap();
        assert!(
            mark == 3 || mark == 7,
            "absent mark {mark} in {}",
            r.reply.content
        );
    }

    // Coordinates are bounded by the capture size the same way.
    let click = ToolSet::new(&[Tool::Click]).unwrap();
    let schema = tactical_schema(&click, &[], Size::new(64, 32), &SchemaLimits::default()).unwrap();
    let p = ctx.assemble(
        Cadence::Tactical,
        &ObservationText::new(MonoTime::ZERO, "window 64x32. Click at x=5000, y=4000."),
        None,
    );
    let r = client
        .chat_structured(
            &ChatRequest::from_prompt("smollm2", &p, 40),
            &schema,
            &CancelToken::new(),
        )
        .unwrap();
    assert!(
        r.value["x"].as_u64().unwrap() <= 63 && r.value["y"].as_u64().unwrap() <= 31,
        "{}",
        r.reply.content
    );
}

#[test]
fn corrupted_or_truncated_gguf_is_refused_before_the_host_starts() {
    // FR-MODEL-005: copy the real model, flip one byte; the launcher refuses it and starts nothing
    let (bin, model) = installed();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("corrupt-SmolLM2.gguf");
    std::fs::copy(&model.path, &copy).unwrap();
    let mut bytes = std::fs::read(&copy).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&copy, &bytes).unwrap();
    let spec = LaunchSpec::new(&bin, WeightsSpec::new(&copy, cache::SMOLLM2_SHA256));
    let err = LocalHost::start(spec).unwrap_err();
    match &err {
        ModelError::WeightsMismatch { path, expected, .. } => {
            assert_eq!(path, &copy);
            assert_eq!(expected, cache::SMOLLM2_SHA256);
        }
        other => panic!("expected a weights mismatch, got {other}"),
    }
    assert!(err.to_string().contains("corrupt-SmolLM2.gguf"), "{err}");
    assert!(
        !any_process_mentions(&copy),
        "a process was started with the corrupted file"
    );

    let short = dir.path().join("short-SmolLM2.gguf");
    std::fs::write(&short, &bytes[..bytes.len() / 3]).unwrap();
    let full_len = bytes.len() as u64;
    let spec = LaunchSpec::new(
        &bin,
        WeightsSpec::new(&short, cache::SMOLLM2_SHA256).with_len(full_len),
    );
    let err = LocalHost::start(spec).unwrap_err();
    assert!(matches!(err, ModelError::WeightsTruncated { .. }), "{err}");
    assert!(!any_process_mentions(&short));
}

fn any_process_mentions(path: &std::path::Path) -> bool {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten().any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                    .unwrap_or(false)
            })
        })
        .unwrap_or(false)
}

#[test]
fn probe_errors_and_cancellation_against_the_real_host() {
    // FR-MODEL-001: capability probe, named HTTP errors, cancellation
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut host = start_host();
    let client = host.client(timeouts()).unwrap();
    let caps = client.probe().unwrap();
    assert_eq!(caps.vision, Some(false), "SmolLM2 is text-only");
    assert_eq!(caps.n_ctx, Some(4096));
    // The real llama-server is told by its /props, and its /v1/models names the model
    assert_eq!(caps.kind, gamepilot_model::HostKind::LlamaCpp, "{caps:?}");
    assert_eq!(caps.vision_source, "llama.cpp /props modalities.vision");
    assert!(caps.model_id.is_some(), "{caps:?}");
    // A client of that kind sends a schema as response_format only.
    let client = client.with_kind(caps.kind);
    let body = ChatRequest {
        model: "m".into(),
        messages: vec![],
        max_tokens: 1,
        temperature: 0.0,
        schema: Some(serde_json::json!({"type": "object"})),
        image_pixels: None,
    }
    .body_for(client.kind());
    assert!(body.get("response_format").is_some() && body.get("guided_json").is_none());

    // An image sent to a text-only host is refused by the host with an HTTP error.
    let ctx = context();
    let image = gamepilot_context::ImagePart {
        mime: "image/png".into(),
        width: 1,
        height: 1,
        data_base64:
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
                .into(),
    };
    let p = ctx.assemble(
        Cadence::Tactical,
        &ObservationText::new(MonoTime::ZERO, "x"),
        Some(image),
    );
    let err = client
        .chat(&ChatRequest::from_prompt("smollm2", &p, 8), &CancelToken::new())
        .unwrap_err();
    eprintln!("image to text-only host: {err}");
    assert!(
        matches!(
            err,
            ModelError::Http {
                status: 400..=599,
                ..
            }
        ),
        "{err}"
    );

    // A malformed request is a 4xx with the host's message.
    let mut bad = ChatRequest::from_prompt(
        "smollm2",
        &ctx.assemble(
            Cadence::Tactical,
            &ObservationText::new(MonoTime::ZERO, "x"),
            None,
        ),
        8,
    );
    bad.messages = vec![serde_json::json!({"role": "user", "content": 42})];
    let err = client.chat(&bad, &CancelToken::new()).unwrap_err();
    eprintln!("malformed request: {err}");
    assert!(
        matches!(
            err,
            ModelError::Http {
                status: 400..=499,
                ..
            } | ModelError::Http { status: 500, .. }
        ),
        "{err}"
    );

    // A long generation is cancelled promptly.
    let long = ChatRequest::from_prompt(
        "smollm2",
        &ctx.assemble(
            Cadence::Deliberative,
            &ObservationText::new(MonoTime::ZERO, "Write a very long story."),
            None,
        ),
        3000,
    );
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        c2.cancel();
    });
    let started = Instant::now();
    let err = client.chat(&long, &cancel).unwrap_err();
    t.join().unwrap();
    assert!(matches!(err, ModelError::Cancelled), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // FR-MODEL-004: the host restarts with a smaller context and no GPU layers (weights verified again),
    // on the same port (its clients keep their address), and serves with the context it was given.
    let (old_pid, old_port) = (host.pid().unwrap(), host.port());
    host.restart_as(HostShape {
        ctx_size: 2048,
        gpu_layers: Some(0),
    })
    .unwrap();
    assert_ne!(host.pid(), Some(old_pid));
    assert_eq!(host.port(), old_port);
    assert_eq!(host.spec().gpu_layers, Some(0));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", host.pid().unwrap())).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(args.windows(2).any(|w| w[0] == "-ngl" && w[1] == "0"), "{args:?}");
    let caps = client.probe().unwrap();
    assert_eq!(
        caps.n_ctx,
        Some(2048),
        "the old client reaches the restarted host: {caps:?}"
    );
    assert_eq!(caps.vision, Some(false));

    // The host stops with its owner.
    let pid = host.pid().unwrap();
    assert!(host.is_running());
    drop(host);
    assert!(!std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists() || zombie_or_gone(pid));
}

fn zombie_or_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.contains(") Z"))
        .unwrap_or(true)
}

/// Polls the keeper until a restart ends; its notices.
fn restart_done(keeper: &mut HostKeeper) -> Vec<HostNotice> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        seen.extend(keeper.poll());
        if seen.iter().any(|n| n.done.is_some()) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no restart finished: {seen:?}");
}

#[test]
fn the_degrade_ladder_reshapes_the_running_host_without_waiting_and_never_past_its_start() {
    // FR-MODEL-004: context reduction shrinks the running host's context (restarted on its port, the
    // caller never waits), a GPU step leaves the tactical host alone, a restore stops at the started context
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let host = start_host();
    let client = host.client(timeouts()).unwrap();
    let mut keeper = HostKeeper::new(vec![(HostRole::Tactical, host)]);
    assert!(keeper.apply(&DegradeCommand::MoveDeliberativeOffGpu).is_empty());
    let t0 = Instant::now();
    let begun = keeper.apply(&DegradeCommand::ReduceContext { to_tokens: 2048 });
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "apply never waits for the restart"
    );
    assert_eq!(begun.len(), 1);
    assert_eq!(begun[0].done, None);
    assert!(begun[0]
        .describe()
        .starts_with("GPU memory degrade: restarting the tactical host, context 2048"));
    let done = restart_done(&mut keeper);
    assert!(matches!(done.last().unwrap().done, Some(Ok(_))), "{done:?}");
    assert_eq!(client.probe().unwrap().n_ctx, Some(2048));
    keeper.apply(&DegradeCommand::RestoreContext { to_tokens: 8192 });
    let done = restart_done(&mut keeper);
    assert!(matches!(done.last().unwrap().done, Some(Ok(_))), "{done:?}");
    assert_eq!(
        client.probe().unwrap().n_ctx,
        Some(4096),
        "a restore never sets a context larger than the host started with"
    );
    assert!(!keeper.busy());
}
