//! `gamepilot run` never answers the practice game's "Spend 100 gold?" dialogue on its own (FR-SAFE-005):
//! a scripted model host clicks Shop and then, at once and over and over, answers with every kind of
//! input that could say yes — Return, y, space, typed text, a held key, a click on Yes. Unattended with
//! no time to answer, each is held and refused. Judged by the game's own state file: while the dialogue
//! is open no key reaches the game and nothing is bought.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{events, mark_with, run_command, show, RunSpec};
use gamepilot_testbed::{
    plan_reply, Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Key presses the game counted so far, all keys together.
fn presses(state: &Value) -> u64 {
    state["key_events"]
        .as_object()
        .map(|m| m.values().map(|c| c["press"].as_u64().unwrap_or(0)).sum())
        .unwrap_or(0)
}

#[test]
fn no_answer_of_the_model_reaches_an_open_spend_dialogue() {
    // FR-SAFE-005: the click on Shop is confirmed by its hover before its release opens the dialogue; the
    // key chosen meanwhile must not land on it
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let clicked_shop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicUsize::new(0));
    let (shop, n) = (clicked_shop.clone(), answers.clone());
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            // A step that names no element: the model's own click on Shop, then its keys at once (the
            // race the fresh-frame rule closes; with that rule off, this test saw Return land on the
            // dialogue 0.44 s after it opened, by the game's clock).
            return plan_reply(req, &[("buy something", "coins")]);
        }
        let prompt = req.prompt_text();
        if !shop.load(Ordering::SeqCst) {
            if let Some(mark) = mark_with(&prompt, "Shop", "") {
                shop.store(true, Ordering::SeqCst);
                return Reply::json(&json!({"action": "click_mark", "mark": mark}));
            }
            return Reply::json(&json!({"action": "wait", "duration_ms": 200}));
        }
        let yes = mark_with(&prompt, "Yes", "");
        let answer = match (n.fetch_add(1, Ordering::SeqCst) % 6, yes) {
            (0, _) => json!({"action": "key", "key": "Return"}),
            (1, _) => json!({"action": "key", "key": "y"}),
            (2, _) => json!({"action": "key", "key": "space"}),
            (3, _) => json!({"action": "type", "text": "y"}),
            (4, _) => json!({"action": "hold_key", "key": "Return", "duration_ms": 200}),
            (_, Some(mark)) => json!({"action": "click_mark", "mark": mark}),
            (_, None) => json!({"action": "key", "key": "Return"}),
        };
        Reply::json(&answer)
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let spec = RunSpec {
        goal: "Buy something in the shop",
        goal_check: "coins >= 99",
        max_actions: 8,
        budget_s: 40,
        grounding: "mark",
    };
    let mut cmd = run_command(&bed.display, arena.window.id, &host.base_url(), &spec, &rec);
    cmd.args(["--wait-for-plan", "--confirm-timeout-s", "0"]);
    let out = cmd.output().unwrap();
    let text = show(&out);
    assert!(
        clicked_shop.load(Ordering::SeqCst),
        "the host clicked Shop:\n{text}"
    );
    assert!(
        answers.load(Ordering::SeqCst) >= 3,
        "the host answered the dialogue several times:\n{text}"
    );
    let states = arena.states().unwrap();
    assert!(
        states.iter().any(|s| s["screen"] == "confirm"),
        "the dialogue opened:\n{text}"
    );
    // No state line written while the dialogue was open is followed by one with more key presses.
    for w in states.windows(2) {
        if w[0]["screen"] == "confirm" {
            assert_eq!(
                presses(&w[1]),
                presses(&w[0]),
                "a key reached the game while the dialogue was open:\n{}\n{}\n{text}",
                w[0],
                w[1]
            );
        }
    }
    let last = states.last().unwrap();
    assert_eq!(last["gold"], states[0]["gold"], "nothing was bought: {last}");
    assert!(
        bed.x11().unwrap().server_held().unwrap().is_empty(),
        "nothing held on the server"
    );
    // The recording says each answer was held for the user (and refused, with no time to answer).
    let held = events(&rec)
        .iter()
        .filter(|e| e["kind"] == "interlock" && e["detail"].as_str().is_some_and(|d| d.starts_with("held: ")))
        .count();
    assert!(held >= 2, "answers were held for confirmation:\n{text}");
}
