//! End to end under Xvfb: the real llama-server with the default local model (started by gamepilot) drives the practice
//! game through `gamepilot run`; the run stops on its goal or budget with every executed action verified,
//! nothing held on the server afterwards, and a recording that `gamepilot replay` reproduces. Asserts
//! validity and mechanics, not the small model's wit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;
use common::{events, gamepilot};

use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use std::path::PathBuf;
use std::process::Command;

fn sensors_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../examples/practice-arena.sensors")
}

fn require_model() {
    if let Err(msg) = gamepilot_model::cache::require_installed() {
        panic!("the real model host is required for this test: {msg} (run scripts/setup-llama.sh)");
    }
}

#[test]
fn run_drives_the_practice_game_with_the_real_model_and_replays() {
    // FR-LOOP-001, FR-LOOP-008, FR-GND-006, INV-GND-001, FR-MODEL-001, INV-SAFE-002
    require_model();
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let out = gamepilot()
        .args([
            "run",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{:x}", arena.window.id),
        ])
        .args([
            "--goal",
            "Click Play, then collect a coin.",
            "--goal-check",
            "coins >= 1",
        ])
        .arg("--sensors")
        .arg(sensors_file())
        .args([
            "--max-actions",
            "4",
            "--session-budget-s",
            "75",
            "--unattended",
            "--tactical-interval-ms",
            "200",
        ])
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "run ends on its goal (0) or a budget (4):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("session stopped:"), "{stdout}");
    // Nothing is left held on the server (INV-SAFE-002).
    let x = bed.x11().unwrap();
    assert!(
        x.server_held().unwrap().is_empty(),
        "input left held after the run"
    );
    let state = arena.state().unwrap();
    assert_eq!(
        state["held_keys"].as_array().map(|a| a.len()),
        Some(0),
        "the game sees nothing held: {state}"
    );

    let ev = events(&rec);
    let kinds: Vec<&str> = ev.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"session_start"));
    assert_eq!(kinds.last(), Some(&"session_end"));
    assert!(
        kinds.contains(&"prompt") && kinds.contains(&"reply"),
        "the model was called: {kinds:?}"
    );
    // Every executed action has exactly one verdict — but the last, whose verification the stop may cut
    // short — and each verdict is one of the three (INV-GND-001).
    let actions: Vec<u64> = ev
        .iter()
        .filter(|e| e["kind"] == "action")
        .filter_map(|e| e["action"].as_u64())
        .collect();
    for (i, a) in actions.iter().enumerate() {
        let verdicts: Vec<&serde_json::Value> = ev
            .iter()
            .filter(|e| e["kind"] == "verdict" && e["action"].as_u64() == Some(*a))
            .collect();
        if i + 1 < actions.len() {
            assert_eq!(verdicts.len(), 1, "action {a} has exactly one verdict");
        } else {
            assert!(verdicts.len() <= 1, "the last action {a} has one verdict at most");
        }
        for v in verdicts {
            assert!(
                matches!(
                    v["verdict"].as_str(),
                    Some("confirmed" | "refuted" | "inconclusive")
                ),
                "{v}"
            );
        }
    }
    // Each action is owned by one subgoal (INV-LOOP-002).
    assert!(ev
        .iter()
        .filter(|e| e["kind"] == "action")
        .all(|e| e["subgoal"].as_u64().is_some_and(|s| s > 0)));
    // The recording replays through the logic crates with the same decisions.
    let replay = gamepilot().arg("replay").arg(&rec).output().unwrap();
    assert!(
        replay.status.success(),
        "replay reproduces the decisions:\n{}\n{}",
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    );
    gamepilot_testbed::keep_session(&rec, "practice-arena-real-model").unwrap();
}

#[test]
fn dry_run_delivers_nothing_to_the_game() {
    // FR-SAFE-006: same pipeline, validation and logs; an input sink that delivers nothing.
    require_model();
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let before = arena.state().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("dry");
    let out = gamepilot()
        .args([
            "run",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{:x}", arena.window.id),
        ])
        .args(["--goal", "Click Play.", "--goal-check", "coins >= 1", "--dry-run"])
        .arg("--sensors")
        .arg(sensors_file())
        .args(["--max-actions", "2", "--session-budget-s", "45", "--unattended"])
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = arena.state().unwrap();
    assert_eq!(
        before["key_events"], after["key_events"],
        "no key reached the game in a dry run"
    );
    assert_eq!(
        before["button_events"], after["button_events"],
        "no button reached the game in a dry run"
    );
    assert_eq!(before["screen"], after["screen"]);
}

#[test]
fn demo_runs_end_to_end_and_writes_a_report() {
    // The README's main job, shortened: its own Xvfb, the practice game, the small model, a report.
    require_model();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("demo");
    let out = gamepilot()
        .args(["demo", "--seconds", "40", "--max-actions", "3", "--quiet"])
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo exits 0:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "session stopped:",
        "verdicts:",
        "tactical:",
        "reflex:",
        "game's own state:",
    ] {
        assert!(stdout.contains(needle), "summary has {needle:?}:\n{stdout}");
    }
    let html = std::fs::read_to_string(rec.join("report.html")).expect("report written");
    assert!(html.contains("<html") && html.len() > 1000);
}

#[test]
fn run_grounds_in_two_stages_with_the_real_model() {
    // FR-GND-005, INV-GND-002, FR-GND-006, INV-SAFE-002: `--grounding two-stage` makes every tactical tick a
    // cheap localising call over the downscaled frame, then the acting call on the crop around its point;
    // clicks land inside the recorded crop and are verified like any other action.
    require_model();
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let out = gamepilot()
        .args([
            "run",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{:x}", arena.window.id),
            "--goal",
            "Click Play.",
            "--goal-check",
            "coins >= 1",
            "--grounding",
            "two-stage",
        ])
        .arg("--sensors")
        .arg(sensors_file())
        .args([
            "--max-actions",
            "2",
            "--session-budget-s",
            "120",
            "--unattended",
            "--tactical-interval-ms",
            "200",
        ])
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "run ends on its goal (0) or a budget (4):\n{stdout}\n{stderr}"
    );
    let x = bed.x11().unwrap();
    assert!(
        x.server_held().unwrap().is_empty(),
        "input left held after the run"
    );

    let ev = events(&rec);
    let localise: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["kind"] == "prompt" && e["cadence"] == "tactical_localise")
        .collect();
    assert!(
        !localise.is_empty(),
        "the cheap localising pass was made:\n{stdout}\n{stderr}"
    );
    // The acting call of each two-stage tick was composed on the region around the localised point; its
    // reading (recorded with its prompt) names that region.
    let crops: Vec<[i64; 4]> = ev
        .iter()
        .filter(|e| e["kind"] == "prompt" && e["messages"]["reading"]["reading"] == "act_in_crop")
        .map(|p| {
            let c = p["messages"]["reading"]["crop"]["region"]
                .as_array()
                .expect("crop recorded");
            let c: Vec<i64> = c.iter().map(|v| v.as_i64().unwrap()).collect();
            assert!(
                c[0] >= 0 && c[1] >= 0 && c[0] + c[2] <= 1280 && c[1] + c[3] <= 720,
                "{c:?}"
            );
            [c[0], c[1], c[2], c[3]]
        })
        .collect();
    assert!(
        !crops.is_empty(),
        "an acting call was made on a region:\n{stdout}\n{stderr}"
    );
    assert!(
        ev.iter()
            .any(|e| e["kind"] == "reply" && e["cadence"] == "tactical_localise"),
        "its reply is recorded"
    );
    for a in ev.iter().filter(|e| e["kind"] == "action") {
        if a["target"].is_null() {
            continue;
        }
        assert_eq!(
            a["path"], "two_stage",
            "a grounded action took the forced path: {a}"
        );
        if let (Some(px), Some(py)) = (a["payload"]["x"].as_i64(), a["payload"]["y"].as_i64()) {
            assert!(
                crops
                    .iter()
                    .any(|c| px >= c[0] && py >= c[1] && px < c[0] + c[2] && py < c[1] + c[3]),
                "click ({px}, {py}) lies in a crop the cheap pass chose: {crops:?}"
            );
        }
    }
    let replay = gamepilot().arg("replay").arg(&rec).output().unwrap();
    assert!(
        replay.status.success(),
        "replay reproduces the decisions:\n{}\n{}",
        String::from_utf8_lossy(&replay.stdout),
        String::from_utf8_lossy(&replay.stderr)
    );
}

#[test]
fn run_marks_a_gtk_games_accessibility_elements() {
    // FR-PERC-010, FR-SAFE-006: in `run`, the tactical tick merges the target's accessibility tree (sgt-puzzles'
    // Net on a private session bus); its elements reach the recorded observations with their labels. A dry
    // run, so nothing reaches the game.
    require_model();
    let mut bed = TestBed::start().unwrap();
    let bus = gamepilot_testbed::SessionBus::start(&bed.display).unwrap();
    let mut net = Command::new("/usr/games/sgt-net");
    bus.apply(&mut net);
    let pid = bed.spawn("sgt-net", net).unwrap();
    let x = bed.x11().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let win = loop {
        if let Ok(w) = x.find_window(&gamepilot_x11::WindowSelector::Pid(pid)) {
            if w.mapped {
                break w.id;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sgt-net window did not appear"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let mut cmd = gamepilot();
    cmd.args([
        "run",
        "--display",
        &bed.display,
        "--window",
        &format!("0x{win:x}"),
        "--goal",
        "Open the Game menu.",
        "--goal-check",
        "region_fraction([0, 0, 8, 8], value>0.99) > 2",
        "--dry-run",
        "--max-actions",
        "1",
        // Generous: on a loaded machine the first plan alone can take most of a minute, and the
        // observation is recorded when its tactical tick's model call returns.
        "--session-budget-s",
        "150",
        "--unattended",
        "--tactical-interval-ms",
        "200",
    ])
    .arg("--record")
    .arg(&rec);
    bus.apply(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "run ends on a budget:\n{stdout}\n{stderr}"
    );
    let ev = events(&rec);
    let observations: Vec<&serde_json::Value> = ev.iter().filter(|e| e["kind"] == "observation").collect();
    assert!(
        !observations.is_empty(),
        "a tactical tick observed:\n{stdout}\n{stderr}"
    );
    let tree: Vec<&serde_json::Value> = observations
        .iter()
        .flat_map(|o| o["marks"].as_array().into_iter().flatten())
        .filter(|m| m["source"] == "accessibility")
        .collect();
    let labels: Vec<&str> = tree.iter().filter_map(|m| m["label"].as_str()).collect();
    assert!(
        labels.iter().any(|l| l.contains("Game")),
        "the menu bar's items come from the tree: {labels:?}\n{stderr}"
    );
    assert!(x.server_held().unwrap().is_empty(), "a dry run holds nothing");
}
