//! `gamepilot run --move-keys` on the practice game's play field under Xvfb: the
//! session identifies its avatar from its own probe holds, writes the avatar note, and a `move_to` on a
//! coin's mark (the scripted host's only decision) is steered by the reflex until the game's own state
//! counts the coin; nothing is held on the server afterwards. A goal check true for one reflex tick only
//! (`coins > @coins`) still ends the run.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{run_command, RunSpec};
use gamepilot_testbed::{
    plan_reply, Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed,
};
use serde_json::{json, Value};

/// The `[N] component yellow … at X,Y` lines of the current observation: (mark, x, y).
fn yellow_marks(prompt: &str) -> Vec<(u64, i64, i64)> {
    let obs = gamepilot_context::tail::current_listing(prompt).join("\n");
    obs.lines()
        .filter(|l| l.contains("] component yellow "))
        .filter_map(|l| {
            let (id, rest) = l.strip_prefix('[')?.split_once(']')?;
            let (_, at) = rest.rsplit_once(" at ")?;
            let (x, y) = at.split_once(',')?;
            Some((id.parse().ok()?, x.trim().parse().ok()?, y.trim().parse().ok()?))
        })
        .collect()
}

fn offers_move_to(req: &ReceivedChat) -> bool {
    req.schema()
        .and_then(|s| s.get("anyOf"))
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|v| v.pointer("/properties/action/const") == Some(&json!("move_to")))
        })
}

fn events(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .expect("events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// A host that plans "collect a coin" and, as the model, picks the yellow sprite nearest the player
/// (at the window centre `cx`, `cy`) for a `move_to`.
fn coin_seeking_host(cx: i64, cy: i64) -> ScriptedHost {
    ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return plan_reply(req, &[("collect a coin", "coins >= 1")]);
        }
        // The model picks where: the yellow sprite nearest the player, neither the player's own heading
        // arrow (within 50 px) nor the compass strip at the top; the hands do the how.
        let nearest = yellow_marks(&req.prompt_text())
            .into_iter()
            .filter(|(_, x, y)| *y > 80 && (x - cx).pow(2) + (y - cy).pow(2) > 50 * 50)
            .min_by_key(|(_, x, y)| (x - cx).pow(2) + (y - cy).pow(2));
        match nearest {
            Some((mark, _, _)) if offers_move_to(req) => {
                Reply::json(&json!({"action": "move_to", "mark": mark}))
            }
            // No coin in sight (or the segmentation of this view missed them): look elsewhere.
            _ if offers_move_to(req) => {
                Reply::json(&json!({"action": "hold_key", "key": "d", "duration_ms": 400}))
            }
            _ => Reply::json(&json!({"action": "wait", "duration_ms": 200})),
        }
    })
    .unwrap()
}

/// The practice game in play, a coin-seeking scripted host, and `gamepilot run` to collect a coin with
/// `goal_check`: the test bed and game (kept alive for the game's state), the recording and what ran.
struct CoinRun {
    bed: TestBed,
    arena: Arena,
    /// The window's centre, where the player sprite is drawn.
    centre: (i64, i64),
    host: ScriptedHost,
    _dir: tempfile::TempDir,
    rec: std::path::PathBuf,
    out: std::process::Output,
    show: String,
}

fn collect_a_coin(goal_check: &'static str) -> CoinRun {
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    let (cx, cy) = (
        i64::from(arena.window.geometry.w) / 2,
        i64::from(arena.window.geometry.h) / 2,
    );
    let host = coin_seeking_host(cx, cy);
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let spec = RunSpec {
        goal: "Collect a coin.",
        goal_check,
        max_actions: 20,
        budget_s: 90,
        grounding: "mark",
    };
    let out = run_command(&bed.display, arena.window.id, &host.base_url(), &spec, &rec)
        .args(["--move-keys", "w,s,a,d"])
        .output()
        .unwrap();
    let show = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    CoinRun {
        bed,
        arena,
        centre: (cx, cy),
        host,
        _dir: dir,
        rec,
        out,
        show,
    }
}

#[test]
fn move_to_a_coins_mark_collects_it_and_the_avatar_note_names_the_player_sprite() {
    // Self-identification and move_to, FR-ACT-002, FR-GND-006, INV-SAFE-002
    // Bound whole: the test bed, the game and the recording's folder live to the end of the test.
    let run = collect_a_coin("coins >= 1");
    let CoinRun {
        bed,
        arena,
        centre: (cx, cy),
        host,
        rec,
        out,
        show,
        ..
    } = &run;
    let (cx, cy) = (*cx, *cy);
    let ev = events(rec);
    if let Ok(keep) = std::env::var("GAMEPILOT_KEEP_EVENTS") {
        let _ = std::fs::copy(rec.join("events.jsonl"), keep);
    }
    let digest: Vec<String> = ev
        .iter()
        .filter(|e| {
            ["note", "action", "verdict", "rejected", "history"].contains(&e["kind"].as_str().unwrap_or(""))
        })
        .map(|e| e.to_string().chars().take(300).collect())
        .collect();
    let show = format!("{show}\nevents:\n{}", digest.join("\n"));
    // The game's own state: a coin was collected, nothing is held.
    let state = arena.request_dump().unwrap();
    assert!(
        state["coins"].as_u64().unwrap_or(0) >= 1,
        "coins: {state}\n{show}"
    );
    assert_eq!(out.status.code(), Some(0), "the run reached its goal:\n{show}");
    assert_eq!(state["held_keys"].as_array().map(Vec::len), Some(0), "{state}");
    assert!(
        bed.x11().unwrap().server_held().unwrap().is_empty(),
        "nothing held on the server"
    );
    // Self-identification: four probe holds, then the note naming the element at the player's place.
    let holds: Vec<&str> = ev
        .iter()
        .filter(|e| e["kind"] == "action" && e["payload"]["action"] == "hold_key")
        .filter_map(|e| e["payload"]["key"].as_str())
        .take(4)
        .collect();
    assert_eq!(
        holds,
        ["w", "s", "a", "d"],
        "the first holds are the probes, one per key:\n{show}"
    );
    let note = ev
        .iter()
        .filter_map(|e| e["text"].as_str())
        .find(|t| t.starts_with("self-identification: "))
        .unwrap_or_else(|| panic!("the avatar note is recorded:\n{show}"))
        .to_string();
    assert!(note.contains("(the view follows me)"), "{note}");
    assert!(note.contains("w=up s=down a=left d=right"), "{note}");
    let at = note
        .split_once(" at (")
        .and_then(|(_, r)| r.split_once(')'))
        .and_then(|(xy, _)| xy.split_once(','))
        .map(|(x, y)| (x.parse::<i64>().unwrap(), y.parse::<i64>().unwrap()))
        .unwrap_or_else(|| panic!("a position in {note}"));
    assert!(
        (at.0 - cx).abs() <= 20 && (at.1 - cy).abs() <= 20,
        "the note names the player sprite drawn at the window centre ({cx},{cy}): {note}"
    );
    // The note is in the model's context: a later tactical prompt carries it.
    assert!(
        host.chat_requests()
            .iter()
            .any(|r| r.prompt_text().contains("I am the ") && offers_move_to(r)),
        "the model reads the avatar note"
    );
    // A steer was executed and confirmed by the avatar reaching the coin.
    let steers: Vec<u64> = ev
        .iter()
        .filter(|e| e["kind"] == "action" && e["payload"]["action"] == "steer")
        .filter_map(|e| e["action"].as_u64())
        .collect();
    assert!(!steers.is_empty(), "a steer action was executed:\n{show}");
    assert!(
        ev.iter().any(|e| e["kind"] == "verdict"
            && e["action"].as_u64().is_some_and(|a| steers.contains(&a))
            && e["verdict"] == "confirmed"),
        "a move_to was confirmed:\n{show}"
    );
}

#[test]
fn a_goal_check_true_for_one_tick_ends_the_run() {
    // FR-LOOP-004, sensor-expressions.md `@name`: `coins > @coins` is true only on the one reflex tick the
    // counter rises; every tick's check reaches the session (a transition is reported at once, not on
    // the next periodic report), so the run ends on its goal
    let run = collect_a_coin("coins > @coins");
    let CoinRun { arena, out, show, .. } = &run;
    let state = arena.request_dump().unwrap();
    let coins = state["coins"].as_u64().unwrap_or(0);
    assert!(coins >= 1, "coins: {state}\n{show}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the one-tick rise ended the run:\n{show}"
    );
    assert!(show.contains("session stopped: GoalMet"), "{show}");
    eprintln!("figures: one-tick goal check met with {coins} coin(s) collected");
}
