//! `gamepilot eval` against scripted hosts: a host that answers every decision point right
//! (a click at the labelled box's centre) scores 1.0 in every scene kind; a deliberately wrong one (it
//! always waits) scores 0 and fails the `--min-accuracy` gate. Real PP-OCR perception of the corpus
//! frames, the real tactical prompt and schema; only the model is scripted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use gamepilot_testbed::{HostConfig, ReceivedChat, Reply, ScriptedHost};
use serde_json::{json, Value};
use std::path::PathBuf;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../corpus")
}

/// `gamepilot eval` on the corpus file `corpus_file` against `host` with `extra` arguments, its results
/// written to `out_file`: the process's output.
fn run_eval(
    host: &ScriptedHost,
    corpus_file: &str,
    out_file: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args(["eval", "--model-endpoint", &host.base_url()])
        .arg("--corpus")
        .arg(corpus().join(corpus_file))
        .arg("--out")
        .arg(out_file)
        .args(extra)
        .output()
        .unwrap()
}

/// Run `gamepilot eval` on every 7th point against `host`; its exit code and its JSON result.
fn eval(host: &ScriptedHost, extra: &[&str]) -> (i32, Value) {
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let out = run_eval(
        host,
        "decisions.json",
        out_file.path(),
        &[&["--every", "7"], extra].concat(),
    );
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    let result: Value = serde_json::from_str(&std::fs::read_to_string(out_file.path()).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON result ({e}):\n{text}"));
    (out.status.code().unwrap_or(-1), result)
}

#[test]
fn a_scripted_correct_host_scores_one_and_a_wrong_one_scores_zero_and_fails_the_gate() {
    // Answer key: (goal, frame size) -> the labelled box's centre.
    let decisions: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("decisions.json")).unwrap()).unwrap();
    let mut key: Vec<(String, String, (i64, i64))> = Vec::new();
    for p in decisions["points"].as_array().unwrap() {
        let (w, h) =
            image::image_dimensions(corpus().join("frames").join(p["frame"].as_str().unwrap())).unwrap();
        let a: Vec<i64> = p["accept"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        key.push((
            p["goal"].as_str().unwrap().to_string(),
            format!("frame {w}x{h}"),
            (a[0] + a[2] / 2, a[1] + a[3] / 2),
        ));
    }
    let right = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        let prompt = req.prompt_text();
        match key
            .iter()
            .find(|(goal, size, _)| prompt.contains(goal.as_str()) && prompt.contains(size.as_str()))
        {
            Some((_, _, (x, y))) => Reply::json(&json!({"action": "click", "x": x, "y": y})),
            None => Reply::json(&json!({"action": "wait", "duration_ms": 100})),
        }
    })
    .unwrap();
    let (code, result) = eval(&right, &["--min-accuracy", "0.99"]);
    let summary = &result["summary"];
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["overall"]["points"], 28, "every 7th of 190 points");
    assert_eq!(
        summary["overall"]["correct"], summary["overall"]["points"],
        "{summary}"
    );
    assert_eq!(summary["schema_valid"], 1.0);
    let kinds = summary["per_kind"].as_object().unwrap();
    assert!(kinds.len() >= 3, "several scene kinds: {kinds:?}");
    for (kind, t) in kinds {
        assert_eq!(t["correct"], t["points"], "{kind}: {t}");
    }
    let wrong = ScriptedHost::start(HostConfig::new(), |_: &ReceivedChat| {
        Reply::json(&json!({"action": "wait", "duration_ms": 100}))
    })
    .unwrap();
    let (code, result) = eval(&wrong, &["--min-accuracy", "0.2"]);
    assert_eq!(code, 1, "under the floor: {}", result["summary"]);
    assert_eq!(result["summary"]["overall"]["correct"], 0);
    assert_eq!(result["summary"]["schema_valid"], 1.0, "valid, just wrong");
}

/// `gamepilot eval` on the goal-directed points of `corpus/goals.json` (real-game frames, each with the
/// plan and the actions tried before it) against a host that always waits; the prompts it was sent.
fn goals(extra: &[&str]) -> (Value, Vec<String>) {
    let prompts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = prompts.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        seen.lock().unwrap().push(req.prompt_text());
        Reply::json(&json!({"action": "wait", "duration_ms": 100}))
    })
    .unwrap();
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let out = run_eval(&host, "goals.json", out_file.path(), extra);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{text}");
    let result = serde_json::from_str(&std::fs::read_to_string(out_file.path()).unwrap()).unwrap();
    let sent = prompts.lock().unwrap().clone();
    (result, sent)
}

#[test]
fn goal_directed_points_carry_their_history_and_as_run_the_session_decides_what_its_subgoal_names() {
    let (result, prompts) = goals(&[]);
    let points = result["summary"]["overall"]["points"].as_u64().unwrap();
    assert!(points >= 12, "{}", result["summary"]);
    assert_eq!(prompts.len() as u64, points, "every point asked of the model");
    assert_eq!(
        result["summary"]["overall"]["correct"], 0,
        "waiting is never right"
    );
    // The menu's item, once "Type" was clicked: the history names what the click landed on and the
    // open menu's items are listed in it.
    let nine = prompts
        .iter()
        .find(|p| p.contains("Goal: Choose the 9x9 board from the Type menu") && p.contains("in popup"))
        .expect("the net/9x9 point's prompt");
    assert!(nine.contains(r#"on "Type" -> confirmed"#), "{nine}");
    assert!(nine.contains("[>] Choose the 9x9 board"), "{nine}");

    let (result, prompts) = goals(&["--as-run"]);
    let summary = &result["summary"];
    let by_session = summary["by_session"].as_u64().unwrap();
    assert!(by_session >= 1, "{summary}");
    assert_eq!(
        prompts.len() as u64 + by_session,
        points,
        "the model is asked only where the session does not decide"
    );
    assert_eq!(
        summary["overall"]["correct"].as_u64().unwrap(),
        by_session,
        "each of the session's choices is right, no model answer is: {summary}"
    );
    for r in result["results"].as_array().unwrap() {
        let kind = r["kind"].as_str().unwrap();
        if kind == "goal/menu_bar" || kind == "goal/dialog" {
            assert_eq!(r["by_session"], true, "{r}");
        }
    }
}
