//! `gamepilot replay` and `gamepilot report` on the committed recorded-session fixtures (FR-LOOP-005,
//! FR-LOOP-006, FR-GND-007, FR-GND-008; INV-CTX-002: recordings are output, read only by these commands).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../io/replay/tests/fixtures")
        .join(name)
}

fn gamepilot(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("frames")).unwrap();
    std::fs::copy(from.join("events.jsonl"), to.join("events.jsonl")).unwrap();
    if let Ok(rd) = std::fs::read_dir(from.join("frames")) {
        for e in rd.flatten() {
            std::fs::copy(e.path(), to.join("frames").join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn replay_reproduces_every_fixture_and_exits_zero() {
    // FR-LOOP-005, FR-LOOP-006, FR-GND-007 (Replay)
    for name in [
        "paths",
        "suppressed",
        "stasis",
        "progress",
        "cycle",
        "unverified",
        "ladder",
        "deliberation",
    ] {
        let dir = fixture(name);
        let (code, out, err) = gamepilot(&["replay", dir.to_str().unwrap()]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert!(out.contains("decisions reproduced"), "{name}: {out}");
    }
    let (code, out, _) = gamepilot(&["replay", "--json", fixture("ladder").to_str().unwrap()]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stopped"], "no_progress");
    assert_eq!(v["divergences"].as_array().unwrap().len(), 0);
}

#[test]
fn replay_says_how_much_of_each_tactical_prompt_a_prefix_cache_evaluates_again() {
    // FR-CTX-002, measured on a committed real run (sgt-puzzles' Net) with no model
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("sessions/sgt-net-menus-and-dialogs.jsonl"),
        tmp.path().join("events.jsonl"),
    )
    .unwrap();
    let (code, out, err) = gamepilot(&["replay", tmp.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("tactical prompts: 13 calls,"), "{out}");
    let (code, out, _) = gamepilot(&["replay", "--json", tmp.path().to_str().unwrap()]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (bytes, new) = (
        v["tactical_prompts"]["bytes"].as_u64().unwrap(),
        v["tactical_prompts"]["new_bytes"].as_u64().unwrap(),
    );
    assert!(new > 0 && new * 10 < bytes * 3, "{new} of {bytes} bytes new");
}

#[test]
fn replay_exits_one_on_divergence_and_names_bad_input() {
    // Replay method: a decision the logic would not make is reported
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_dir(&fixture("suppressed"), &dir);
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        text.replacen("\"until_tick\":4", "\"until_tick\":9", 1),
    )
    .unwrap();
    let (code, out, _) = gamepilot(&["replay", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 divergences"), "{out}");
    assert!(
        out.contains("\"until_tick\":9") && out.contains("\"until_tick\":4"),
        "{out}"
    );
    // not a recording: a named error, exit 1, no panic
    let (code, _, err) = gamepilot(&["replay", tmp.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("events.jsonl"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn report_writes_self_contained_html() {
    // FR-GND-008 (the histogram the user can see)
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_dir(&fixture("suppressed"), &dir);
    let out_file = tmp.path().join("r.html");
    let (code, out, err) = gamepilot(&[
        "report",
        dir.to_str().unwrap(),
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let html = std::fs::read_to_string(&out_file).unwrap();
    assert!(html.contains("data:image/png;base64,"));
    assert!(html.contains("Failure attribution"));
    assert!(html.contains("decisions reproduced"));
    // default location
    let (code, _, _) = gamepilot(&["report", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(dir.join("report.html").is_file());
}

#[test]
fn report_never_writes_through_a_link_in_the_recording() {
    // FR-LOOP-005: a recording is untrusted; its report.html may point at a file of the user's
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    copy_dir(&fixture("suppressed"), &dir);
    let victim = tmp.path().join("bashrc");
    std::fs::write(&victim, "export PATH=keep\n").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("report.html")).unwrap();
    let (code, out, err) = gamepilot(&["report", dir.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("symlink"), "named: {err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "export PATH=keep\n");
    // A hard link is replaced by the new report, the file it shared bytes with left as it was.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    std::fs::hard_link(&victim, dir.join("report.html")).unwrap();
    let (code, out, err) = gamepilot(&["report", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "export PATH=keep\n");
    assert!(std::fs::read_to_string(dir.join("report.html"))
        .unwrap()
        .contains("<html"));
}
