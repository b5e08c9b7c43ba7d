//! `gamepilot run` with a goal in words and nothing else — no `--goal-check`, no sensor file: the agent's
//! first deliberative pass declares what it watches (the menu's Play button, cut from the frame into the
//! atlas), the goal's own check over it and the subgoal's postcondition; the session ends when an action of
//! its own made that check true and a second deliberative look agreed. Judged by the practice game's own
//! state file, never by our sensors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{gamepilot, mark_with, show};
use gamepilot_testbed::{Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed};
use serde_json::json;

/// The mark of the element labelled `label` on a listing line of a prompt (any cadence's).
fn listed_mark(prompt: &str, label: &str) -> Option<u64> {
    let quoted = format!("{label:?}");
    prompt
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with('[') && l.contains(&quoted))
        .and_then(|l| l[1..].split(']').next().and_then(|n| n.parse().ok()))
}

#[test]
fn a_goal_in_words_alone_is_reached_by_the_checks_the_agent_declares() {
    // FR-LOOP-004, sensor-expressions.md "Declaration and lifetime": the agent declares its own checks
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let host = ScriptedHost::start(HostConfig::new(), |req: &ReceivedChat| {
        if req
            .schema()
            .is_some_and(|s| s.pointer("/properties/met").is_some())
        {
            // The second look at the goal check that turned true.
            return Reply::json(&json!({"evidence": "the menu is gone and the play field is shown", "met": true}));
        }
        if req.system_text().contains("deliberative planner") {
            let offers_checks = req
                .schema()
                .is_some_and(|s| s.pointer("/properties/checks").is_some());
            let prompt = req.prompt_text();
            // What a small model can fill: the goal and the step's postcondition as "mark N is gone",
            // beside a sensor declared by name.
            return match (offers_checks, listed_mark(&prompt, "Play")) {
                (true, Some(mark)) => Reply::json(&json!({
                    "checks": [{"name": "play_shown", "reads": "present", "mark": mark}],
                    "goal": {"mark": mark, "then": "gone"},
                    "subgoals": [{"description": "click Play", "postcondition": {"mark": mark, "then": "gone"}}]
                })),
                _ => Reply::status(500, "no Play mark in the planner's prompt"),
            };
        }
        match mark_with(&req.prompt_text(), "Play", "") {
            Some(mark) => Reply::json(&json!({"action": "click_mark", "mark": mark})),
            None => Reply::json(&json!({"action": "wait", "duration_ms": 200})),
        }
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let out = gamepilot()
        .args(["run", "--display", &bed.display])
        .args(["--window", &format!("0x{:x}", arena.window.id)])
        .args(["--goal", "Start a game from the menu"])
        .args(["--max-actions", "6", "--session-budget-s", "60", "--unattended"])
        .args(["--tactical-interval-ms", "100", "--grounding", "mark"])
        .args(["--model-endpoint", &host.base_url()])
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    let text = show(&out);
    // The game's own state: it left the menu.
    let state = arena
        .wait_for(std::time::Duration::from_secs(5), |s| s["screen"] == "play")
        .unwrap_or_else(|_| panic!("the game left the menu:\n{text}"));
    assert_eq!(state["held_keys"].as_array().map(Vec::len), Some(0), "{state}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the session ended on its goal:\n{text}"
    );
    let notes = common::notes(&rec);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("declared sensor `play_shown = template_present(\"play_shown\"")),
        "the declaration is recorded:\n{}",
        notes.join("\n")
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("goal met: agent-declared check `not mark")
                && n.contains("confirmed by a second look")),
        "the session names the check that ended it:\n{}",
        notes.join("\n")
    );
    // Replay re-declares the sensors from the recorded replies and re-derives every decision.
    let replay = gamepilot().arg("replay").arg(&rec).output().unwrap();
    assert!(
        replay.status.success(),
        "replay reproduces every effect, the declarations included:\n{}",
        show(&replay)
    );
}

#[test]
fn a_check_already_true_and_a_sensor_that_does_not_compile_go_back_to_the_model_with_why() {
    // FR-LOOP-004: a goal check true when declared is refused and asked for again; a declaration that
    // does not compile reaches the next question with the compiler's diagnostics
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let asked_again = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let seen = asked_again.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        let schema = req.schema();
        if schema
            .as_ref()
            .is_some_and(|s| s.pointer("/properties/met").is_some())
        {
            return Reply::json(&json!({"evidence": "the play field, no menu", "met": true}));
        }
        let prompt = req.prompt_text();
        if req.system_text().contains("deliberative planner") {
            let Some(mark) = listed_mark(&prompt, "Play") else {
                return Reply::status(500, "no Play mark in the planner's prompt");
            };
            if schema
                .as_ref()
                .is_some_and(|s| s.pointer("/properties/subgoals").is_none())
            {
                // The question for the check alone, after the refusal: answered properly.
                seen.lock().unwrap().get_or_insert(prompt.clone());
                return Reply::json(&json!({"goal": {"mark": mark, "then": "gone"}}));
            }
            // The first plan: the user's sensor that is true now as the goal's check, and a sensor over a
            // name that does not exist.
            return Reply::json(&json!({
                "checks": [{"name": "broken", "reads": "expression", "expression": "not no_such_sensor"}],
                "goal": "on_menu",
                "subgoals": [{"description": "click Play", "postcondition": {"mark": mark, "then": "gone"}}]
            }));
        }
        // The tactical cadence waits until the model was asked again, then starts the game.
        match (seen.lock().unwrap().is_some(), mark_with(&prompt, "Play", "")) {
            (true, Some(mark)) => Reply::json(&json!({"action": "click_mark", "mark": mark})),
            _ => Reply::json(&json!({"action": "wait", "duration_ms": 200})),
        }
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    // The user's sensors, no goal check: the agent may name them (the health bar is not drawn on the menu).
    let sensors = dir.path().join("arena.sensors");
    let mut source = std::fs::read_to_string(common::sensors_file()).unwrap();
    source.push_str("on_menu = health < 0.05\n");
    std::fs::write(&sensors, source).unwrap();
    let out = gamepilot()
        .args(["run", "--display", &bed.display])
        .args(["--window", &format!("0x{:x}", arena.window.id)])
        .args(["--goal", "Start a game from the menu"])
        .arg("--sensors")
        .arg(&sensors)
        .args(["--max-actions", "6", "--session-budget-s", "60", "--unattended"])
        .args(["--tactical-interval-ms", "100", "--grounding", "mark"])
        .args(["--model-endpoint", &host.base_url()])
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    let text = show(&out);
    let again = asked_again
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| panic!("the check was asked for again:\n{text}"));
    assert!(
        again.contains("goal check `on_menu` -> refused: it is already true"),
        "the refusal's reason is in what the model reads:\n{again}"
    );
    assert!(
        again.contains("not declared: sensor `broken`") && again.contains("no_such_sensor"),
        "the compile error's diagnostics are in what the model reads:\n{again}"
    );
    // The game's own state: it left the menu, on the check asked for again.
    arena
        .wait_for(std::time::Duration::from_secs(5), |s| s["screen"] == "play")
        .unwrap_or_else(|_| panic!("the game left the menu:\n{text}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "the session ended on its goal:\n{text}"
    );
    let notes = common::notes(&rec);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("goal met: agent-declared check `not mark")),
        "{}",
        notes.join("\n")
    );
    let replay = gamepilot().arg("replay").arg(&rec).output().unwrap();
    assert!(replay.status.success(), "replay:\n{}", show(&replay));
}
