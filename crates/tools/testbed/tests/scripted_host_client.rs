//! gamepilot's own model client (`gamepilot_model::HostClient`) against the scripted host: the host's
//! replies parse, its timings and cache figures arrive, and its errors map to the client's named errors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code (helpers outside #[test] fns)

use gamepilot_model::{CancelToken, HostClient, HostTimeouts, ModelError};
use gamepilot_testbed::{HostConfig, ImitatedHost, Reply, ScriptedHost};
use serde_json::{json, Value};
use std::time::Duration;

fn request(messages: Vec<Value>) -> gamepilot_model::ChatRequest {
    gamepilot_model::ChatRequest {
        model: "scripted-model".into(),
        messages,
        max_tokens: 32,
        temperature: 0.0,
        schema: None,
        image_pixels: None,
    }
}

fn client(host: &ScriptedHost) -> HostClient {
    HostClient::new(&format!("{}/v1", host.base_url()), HostTimeouts::default()).unwrap()
}

#[test]
fn health_probe_and_chat_parse_with_timings_and_cache() {
    let host = ScriptedHost::start(HostConfig::new().vision(true).n_ctx(4096), |r| {
        Reply::content(format!("answer {}", r.index))
    })
    .unwrap();
    let c = client(&host);
    c.health().unwrap();
    let caps = c.probe().unwrap();
    assert_eq!(caps.vision, Some(true));
    assert_eq!(caps.n_ctx, Some(4096));
    assert!(caps.model_path.is_some());

    let system = json!({"role": "system", "content": "x".repeat(800)});
    let first = c
        .chat(
            &request(vec![
                system.clone(),
                json!({"role": "user", "content": "observation one"}),
            ]),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(first.content, "answer 0");
    assert_eq!(first.finish_reason.as_deref(), Some("stop"));
    assert_eq!(first.timings.prompt_tokens, Some((800 + 15) / 4));
    assert_eq!(first.timings.cached_tokens, Some(0));
    assert_eq!(first.timings.prompt_evaluated, Some((800 + 15) / 4));
    assert_eq!(first.timings.completion_tokens, Some(2));
    assert!(first.timings.prompt_ms.unwrap() > 0.0);
    assert!(first.timings.predicted_ms.unwrap() > 0.0);

    let second = c
        .chat(
            &request(vec![
                system,
                json!({"role": "user", "content": "observation number two"}),
            ]),
            &CancelToken::new(),
        )
        .unwrap();
    // the system prompt and "observation " are the common prefix
    assert_eq!(second.timings.cached_tokens, Some((800 + 12) / 4));
    assert_eq!(second.timings.prompt_tokens, Some((800 + 22) / 4));
    assert_eq!(second.timings.prompt_evaluated, Some(2));
    assert!(second.timings.cache_ratio().unwrap() > 0.99);

    let seen = host.chat_requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].user_text(), "observation number two");
    assert_eq!(seen[1].body["stream"], false);
    let paths: Vec<String> = host.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/health",
            // the probe: /v1/models, then llama.cpp's /props answers as llama.cpp
            "/v1/models",
            "/props",
            "/v1/chat/completions",
            "/v1/chat/completions"
        ]
    );
}

#[test]
fn a_schema_break_is_retried_once_with_the_violation_fed_back() {
    let host = ScriptedHost::sequence(vec![
        Reply::content("{\"mark\":5}"),
        Reply::content("{\"mark\":7}"),
    ])
    .unwrap();
    let schema = json!({"type":"object","properties":{"mark":{"type":"integer","enum":[3,7]}},"required":["mark"],"additionalProperties":false});
    let r = client(&host)
        .chat_structured(
            &request(vec![json!({"role": "user", "content": "go"})]),
            &schema,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!((r.attempts, r.value), (2, json!({"mark": 7})));
    let seen = host.chat_requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].schema(), Some(&schema));
    assert_eq!(seen[1].messages()[1]["role"], "assistant");
    assert!(
        seen[1].user_text().contains("5 is not one of [3, 7]"),
        "{}",
        seen[1].user_text()
    );
}

#[test]
fn overflow_status_and_timeout_are_named_errors() {
    let host = ScriptedHost::start(HostConfig::new().n_ctx(64), |r| {
        if r.user_text() == "slow" {
            Reply::delay(Duration::from_secs(3), Reply::content("late"))
        } else if r.user_text() == "broken" {
            Reply::status(
                500,
                "{\"error\":{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}}",
            )
        } else {
            Reply::content("ok")
        }
    })
    .unwrap();
    let c = client(&host);
    let long = request(vec![json!({"role": "user", "content": "w".repeat(1000)})]);
    match c.chat(&long, &CancelToken::new()).unwrap_err() {
        ModelError::Http { status, body, .. } => {
            assert_eq!(status, 400);
            assert!(body.contains("exceed_context_size_error"), "{body}");
            assert!(body.contains("exceeds the available context size"), "{body}");
        }
        other => panic!("{other}"),
    }
    match c
        .chat(
            &request(vec![json!({"role": "user", "content": "broken"})]),
            &CancelToken::new(),
        )
        .unwrap_err()
    {
        ModelError::Http { status, body, .. } => assert_eq!((status, body.contains("boom")), (500, true)),
        other => panic!("{other}"),
    }

    let impatient = HostClient::new(
        &host.base_url(),
        HostTimeouts {
            connect: Duration::from_secs(1),
            call: Duration::from_millis(300),
        },
    )
    .unwrap();
    let err = impatient
        .chat(
            &request(vec![json!({"role": "user", "content": "slow"})]),
            &CancelToken::new(),
        )
        .unwrap_err();
    assert!(matches!(err, ModelError::Timeout { .. }), "{err}");
    assert_eq!(
        c.chat(
            &request(vec![json!({"role": "user", "content": "fast"})]),
            &CancelToken::new()
        )
        .unwrap()
        .content,
        "ok"
    );
}

#[test]
fn an_image_part_reaches_the_policy_decodable() {
    let host = ScriptedHost::start(HostConfig::new().vision(true), |r| match r.images() {
        Ok(images) if images.len() == 1 && images[0].bytes == [0u8, 0, 0] => Reply::content("saw it"),
        other => Reply::status(400, format!("{other:?}")),
    })
    .unwrap();
    let req = request(vec![json!({"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]})]);
    assert_eq!(
        client(&host).chat(&req, &CancelToken::new()).unwrap().content,
        "saw it"
    );
}

#[test]
fn a_host_without_props_probes_as_its_own_kind() {
    // FR-MODEL-001: no /props is not "unknown": Ollama is told by /api/version and described
    // by /api/show
    let host = ScriptedHost::start(HostConfig::new().kind(ImitatedHost::Ollama), |_| {
        Reply::content("o")
    })
    .unwrap();
    let c = client(&host);
    let caps = c.probe().unwrap();
    assert_eq!(
        (caps.kind, caps.vision, caps.n_ctx),
        (gamepilot_model::HostKind::Ollama, Some(false), Some(8192))
    );
    // the client's health check asks llama.cpp's /health, which Ollama does not have
    assert!(matches!(c.health(), Err(ModelError::Http { status: 404, .. })));
    let r = c
        .chat(
            &request(vec![json!({"role": "user", "content": "hi"})]),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(r.content, "o");
    assert_eq!(r.timings.prompt_tokens, Some(0));
    assert_eq!(r.timings.cached_tokens, None);
}
