//! Committed session-level recordings of real runs replay through `Session` itself: the practice game
//! played by the real default model, and a real Debian game (sgt-puzzles' Net: its popup menus and
//! dialogs) played by a scripted model. Every recorded input is stepped at its recorded time and every
//! effect diffed — tactical prompts and schemas byte for byte, since the session composes them. A change
//! of behaviour shows here as a divergence; when it is intended, re-derive the recorded effects from the
//! same inputs with `GAMEPILOT_BLESS=1 cargo test -p gamepilot-replay --test session_recordings` and
//! review the diff. New recordings come from the end-to-end tests, run with `GAMEPILOT_KEEP_SESSION=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use gamepilot_replay::{replay, Recording};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions")
}

/// The recording's lines with each `session_effects` replaced by what the session returns now.
fn blessed(text: &str, replayed: &std::collections::BTreeMap<u64, serde_json::Value>) -> String {
    let mut out = String::new();
    // Only the effects are re-derived: every other line stays byte for byte as the run recorded it.
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        match v["input"].as_u64().and_then(|i| replayed.get(&i)) {
            Some(effects) if v["kind"] == "session_effects" => {
                v["effects"] = effects.clone();
                out.push_str(&serde_json::to_string(&v).expect("serialisable"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn replay_file(path: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let rec = Recording::parse(path.parent().unwrap(), path, &text).unwrap();
    let out = replay(&rec).unwrap();
    if std::env::var("GAMEPILOT_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(path, blessed(&text, &out.replayed)).unwrap();
        return (out.session_inputs, 0);
    }
    assert!(
        out.matches(),
        "{} diverges from the session's decisions at {} inputs; the first:\n{}",
        path.display(),
        out.divergences.len(),
        out.divergences
            .first()
            .map(|d| serde_json::to_string_pretty(d).unwrap_or_default())
            .unwrap_or_default()
    );
    let calls = out
        .replayed
        .values()
        .flat_map(|v| v.as_array().cloned().unwrap_or_default())
        .filter(|e| e["effect"] == "call_model")
        .count();
    (out.session_inputs, calls)
}

#[test]
fn committed_real_run_recordings_replay_through_the_session_prompts_included() {
    // INV-CTX-002 (recordings are written, replayed only by `replay`), FR-CTX-001 (the prompt is a
    // function of the session's inputs): the tactical prompts re-derived and diffed byte for byte
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("practice-arena")) && names.iter().any(|n| n.starts_with("sgt-")),
        "a practice-game and a real-game recording are committed: {names:?}"
    );
    for f in &files {
        let (inputs, calls) = replay_file(f);
        assert!(inputs >= 20, "{}: {inputs} inputs", f.display());
        if std::env::var("GAMEPILOT_BLESS").is_err() {
            assert!(calls >= 2, "{}: {calls} tactical calls re-derived", f.display());
        }
    }
}

#[test]
fn a_changed_prompt_in_a_committed_recording_is_a_divergence() {
    // The diff can fail: one recorded prompt altered by a byte is found
    let path = std::fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("a committed recording");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut changed = false;
    let altered: Vec<String> = text
        .lines()
        .map(|l| {
            if !changed && l.contains("\"call_model\"") && l.contains("Current observation") {
                changed = true;
                l.replacen("Current observation", "Current observatioN", 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(changed, "the recording holds a tactical prompt");
    let rec = Recording::parse(path.parent().unwrap(), &path, &altered.join("\n")).unwrap();
    let out = replay(&rec).unwrap();
    assert_eq!(out.divergences.len(), 1, "exactly the altered input diverges");
}

#[test]
fn most_of_each_tactical_prompt_is_the_one_before_it() {
    // FR-CTX-002: the prompts a session composes share their prefix with the call before, so a host's
    // prefix cache evaluates only what is new. Measured on the committed real runs, no model: a layout
    // change that breaks the prefix on every call shows here.
    for (name, calls, at_most) in [
        ("sgt-net-menus-and-dialogs.jsonl", 13, 0.30),
        ("practice-arena-real-model.jsonl", 5, 0.45),
    ] {
        let path = fixtures().join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let rec = Recording::parse(path.parent().unwrap(), &path, &text).unwrap();
        let reuse = replay(&rec).unwrap().prompt_reuse();
        assert_eq!(reuse.calls.len(), calls, "{name}");
        let first = reuse.calls[0];
        assert_eq!(first.1, first.2, "{name}: the first call's prompt is all new");
        assert!(
            reuse.new_share() < at_most,
            "{name}: {:.0} % of the prompt bytes new against the call before",
            reuse.new_share() * 100.0
        );
        assert!(
            reuse.calls.iter().skip(1).all(|c| c.2 < c.1),
            "{name}: every later call reuses a prefix"
        );
    }
}
