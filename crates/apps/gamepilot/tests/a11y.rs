//! `gamepilot observe --window` with the accessibility tree (FR-PERC-010): a GTK game (sgt-puzzles' Net) on a
//! private session bus gets elements of source "accessibility" with their labels; the practice arena, which
//! exposes no tree, gets a clean skip on stderr and an observation all the same; `--no-a11y` turns it off.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use gamepilot_testbed::{Arena, ArenaOptions, SessionBus, TestBed};
use gamepilot_x11::WindowSelector;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

fn observe(
    bed: &TestBed,
    bus: &SessionBus,
    window: u32,
    out: &std::path::Path,
    extra: &[&str],
) -> (Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gamepilot"));
    cmd.args(["observe", "--display", &bed.display, "--window"])
        .arg(format!("0x{window:x}"))
        .arg("--out")
        .arg(out)
        .args(["--a11y-timeout-ms", "2000"])
        .args(extra);
    bus.apply(&mut cmd);
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "observe failed: {stderr}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("observation.json")).unwrap()).unwrap();
    (json, stderr)
}

fn accessibility_elements(obs: &Value) -> Vec<&Value> {
    obs["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "accessibility")
        .collect()
}

#[test]
fn observe_window_adds_tree_elements_where_the_target_exposes_a_tree_and_skips_cleanly_elsewhere() {
    // FR-PERC-010, INV-PERC-001
    let mut bed = TestBed::start().unwrap();
    let bus = SessionBus::start(&bed.display).unwrap();
    let mut net = Command::new("/usr/games/sgt-net");
    bus.apply(&mut net);
    let pid = bed.spawn("sgt-net", net).unwrap();
    let x = bed.x11().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let win = loop {
        if let Ok(w) = x.find_window(&WindowSelector::Pid(pid)) {
            if w.mapped {
                break w.id;
            }
        }
        assert!(Instant::now() < deadline, "sgt-net window did not appear");
        std::thread::sleep(Duration::from_millis(50));
    };
    let dir = tempfile::tempdir().unwrap();
    // The game registers on the accessibility bus shortly after mapping: observe until its tree shows.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (obs, stderr) = loop {
        let (obs, stderr) = observe(&bed, &bus, win, &dir.path().join("net"), &["--no-ocr"]);
        if !accessibility_elements(&obs).is_empty() {
            break (obs, stderr);
        }
        assert!(Instant::now() < deadline, "no accessibility elements: {stderr}");
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(stderr.contains("accessibility:"), "{stderr}");
    let (fw, fh) = (
        obs["frame_size"]["w"].as_i64().unwrap(),
        obs["frame_size"]["h"].as_i64().unwrap(),
    );
    let tree = accessibility_elements(&obs);
    let labels: Vec<&str> = tree.iter().filter_map(|e| e["label"].as_str()).collect();
    for name in ["Game", "Type", "Help"] {
        assert!(labels.contains(&name), "{name} missing from {labels:?}");
    }
    for e in obs["elements"].as_array().unwrap() {
        let b: Vec<i64> = e["bbox"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert!(
            b[0] >= 0 && b[1] >= 0 && b[0] + b[2] <= fw && b[1] + b[3] <= fh,
            "{e} outside {fw}x{fh}"
        );
    }
    // The tree's "Game" menu replaced, not duplicated, whatever the visual proposer saw there.
    assert_eq!(labels.iter().filter(|l| **l == "Game").count(), 1, "{labels:?}");
    // --no-a11y: no tree elements, no probe.
    let (plain, stderr) = observe(
        &bed,
        &bus,
        win,
        &dir.path().join("plain"),
        &["--no-ocr", "--no-a11y"],
    );
    assert!(accessibility_elements(&plain).is_empty());
    assert!(!stderr.contains("accessibility:"), "{stderr}");

    // The practice arena exposes no tree: a named skip on stderr, and the observation still comes.
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let (obs, stderr) = observe(
        &bed,
        &bus,
        arena.window.id,
        &dir.path().join("arena"),
        &["--no-ocr"],
    );
    assert!(accessibility_elements(&obs).is_empty(), "{obs}");
    assert!(
        stderr.contains("accessibility: skipped (target-not-accessible)"),
        "{stderr}"
    );
    assert!(!obs["elements"].as_array().unwrap().is_empty());
}
