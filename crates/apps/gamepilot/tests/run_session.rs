//! `gamepilot run` through the session core under Xvfb, against the testbed's scripted OpenAI-compatible
//! host: an executor rejection reaches the model's next prompt with its reason, a click on a mark is
//! executed and verified on the real practice game, a host that keeps refusing the prompt size stops the
//! session with a named reason, and `gamepilot replay` reproduces every effect.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{events, gamepilot, run_command, show, RunSpec};
use gamepilot_testbed::{Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The marks of the current observation in a tactical prompt: `[N] kind ["label"] at X,Y` (box centre).
fn marks(prompt: &str) -> Vec<(u64, [i64; 2])> {
    let obs = gamepilot_context::tail::current_listing(prompt).join("\n");
    let mut out = Vec::new();
    for line in obs.lines() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((id, rest)) = rest.split_once(']') else {
            continue;
        };
        let Some((_, at)) = rest.rsplit_once(" at ") else {
            continue;
        };
        let v: Vec<i64> = at.split(',').filter_map(|n| n.trim().parse().ok()).collect();
        if let (Ok(id), [x, y]) = (id.parse(), v.as_slice()) {
            out.push((id, [*x, *y]));
        }
    }
    out
}

fn plan_reply(req: &ReceivedChat) -> Reply {
    gamepilot_testbed::plan_reply(
        req,
        &[("start the game", "in_play"), ("collect a coin", "coins >= 1")],
    )
}

fn run_args(bed: &TestBed, arena: &Arena, host: &ScriptedHost, rec: &Path) -> Command {
    let spec = RunSpec {
        goal: "Click Play, then collect a coin.",
        goal_check: "coins >= 1",
        max_actions: 6,
        budget_s: 90,
        grounding: "mark",
    };
    // These scenarios follow the scripted plan's steps on the menu: nothing is done before it arrives
    // (acting on the goal meanwhile has its own test).
    let mut cmd = run_command(&bed.display, arena.window.id, &host.base_url(), &spec, rec);
    cmd.arg("--wait-for-plan");
    cmd
}

fn replays(rec: &Path) -> String {
    let out = gamepilot().arg("replay").arg(rec).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "replay reproduces every effect:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_denied_chord_reaches_the_next_prompt_then_a_marked_click_is_executed_verified_and_replayed() {
    // FR-ACT-006, FR-GND-001, FR-GND-006, INV-GND-001, INV-SAFE-002, INV-CTX-002
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let g = arena.window.geometry;
    let play = practice_arena::game::menu_button("Play", g.w as i32, g.h as i32).unwrap();
    let tactical = Arc::new(AtomicU32::new(0));
    let calls = tactical.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return plan_reply(req);
        }
        let n = calls.fetch_add(1, Ordering::SeqCst);
        if n == 0 {
            return Reply::json(&json!({"action": "key", "key": "alt+F4"}));
        }
        let prompt = req.prompt_text();
        let on_play = marks(&prompt)
            .into_iter()
            .find(|(_, [cx, cy])| play.contains(*cx as i32, *cy as i32));
        match on_play {
            Some((mark, _)) => Reply::json(&json!({"action": "click_mark", "mark": mark})),
            None => Reply::json(&json!({"action": "wait", "duration_ms": 300})),
        }
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let out = run_args(&bed, &arena, &host, &rec).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "run ends on its goal or a budget:\n{}",
        show(&out)
    );
    // The second tactical prompt carries the executor's reason for refusing the first action.
    let chats: Vec<ReceivedChat> = host
        .chat_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains("deliberative planner"))
        .collect();
    assert!(chats.len() >= 2, "two tactical calls at least: {}", show(&out));
    let second = chats[1].prompt_text();
    assert!(
        second.contains("rejected by the executor") && second.contains("denied"),
        "the denial's reason is in the model's history:\n{second}"
    );
    // FR-CTX-002: through `run`, a tactical prompt extends the one sent before it (the tactical tail).
    assert!(
        chats.windows(2).any(|w| {
            let (a, b) = (w[0].user_text(), w[1].user_text());
            b.len() > a.len() && b.starts_with(&a) && b.contains("\nSince then (oldest first):")
        }),
        "some tactical prompt extends the previous one:\n{}",
        chats
            .iter()
            .map(|c| c.user_text())
            .collect::<Vec<_>>()
            .join("\n=====\n")
    );
    // The click on the Play mark left the menu: the game's own state says so.
    let state = arena
        .wait_for(std::time::Duration::from_secs(5), |s| s["screen"] == "play")
        .unwrap_or_else(|_| panic!("the game left the menu:\n{}", show(&out)));
    assert_eq!(state["held_keys"].as_array().map(|a| a.len()), Some(0), "{state}");
    let x = bed.x11().unwrap();
    assert!(x.server_held().unwrap().is_empty(), "nothing held on the server");
    // The recording: the chord rejected (never an action), the click executed and confirmed.
    let ev = events(&rec);
    assert!(
        ev.iter()
            .any(|e| e["kind"] == "rejected" && e["reason"].as_str().unwrap_or("").contains("denied")),
        "the rejection is recorded as rejected"
    );
    let clicks: Vec<u64> = ev
        .iter()
        .filter(|e| e["kind"] == "action" && e["payload"]["action"] == "click")
        .filter_map(|e| e["action"].as_u64())
        .collect();
    assert!(!clicks.is_empty(), "the click was executed");
    assert!(
        ev.iter().any(|e| e["kind"] == "verdict"
            && e["verdict"] == "confirmed"
            && e["action"].as_u64() == Some(clicks[0])),
        "the click was verified as confirmed"
    );
    assert!(!ev
        .iter()
        .any(|e| e["kind"] == "action" && e["payload"]["key"] == "alt+F4"));
    assert!(ev.iter().any(|e| e["kind"] == "session_input"));
    let summary = replays(&rec);
    assert!(summary.contains("session inputs"), "{summary}");
}

#[test]
fn a_host_that_keeps_refusing_the_prompt_size_stops_the_run_with_a_named_reason() {
    // FR-CTX-004: compaction first, then a named stop — never an idle loop until the budget
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    // The host takes the plan, then refuses every tactical prompt as larger than its context.
    let host = ScriptedHost::start(HostConfig::new(), |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return plan_reply(req);
        }
        Reply::context_exceeded(req.prompt_tokens.max(9000), 8192)
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let started = std::time::Instant::now();
    let out = run_args(&bed, &arena, &host, &rec).output().unwrap();
    let text = show(&out);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.contains("PromptTooLarge"),
        "the stop names the reason:\n{text}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(80),
        "stopped long before its 90 s budget"
    );
    let ev = events(&rec);
    assert!(
        ev.iter().any(|e| e["kind"] == "compaction"),
        "the prompt was compacted before giving up"
    );
    assert_eq!(ev.last().map(|e| e["kind"].clone()), Some(json!("session_end")));
    replays(&rec);
}

#[test]
fn run_calibrates_the_camera_and_the_model_turns_it_in_degrees() {
    // FR-ACT-004, FR-ACT-005: `run --calibrate-camera` measures px→degrees from the frame before the
    // session; the model's camera tool then takes degrees, and the executor converts them.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    let turns = Arc::new(AtomicU32::new(0));
    let sent = turns.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return plan_reply(req);
        }
        if sent.fetch_add(1, Ordering::SeqCst) == 0 {
            return Reply::json(&json!({"action": "camera_degrees", "yaw_deg": 20, "duration_ms": 300}));
        }
        Reply::json(&json!({"action": "wait", "duration_ms": 300}))
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let out = run_args(&bed, &arena, &host, &rec)
        .args([
            "--calibrate-camera",
            "--calibrate-region",
            "0,0,1280,40",
            "--fov-deg",
            "320",
        ])
        .output()
        .unwrap();
    let text = show(&out);
    assert!(matches!(out.status.code(), Some(0) | Some(4)), "{text}");
    assert!(text.contains("camera calibration:"), "{text}");
    let first = host
        .chat_requests()
        .into_iter()
        .find(|r| !r.system_text().contains("deliberative planner"))
        .expect("a tactical call");
    let schema = serde_json::to_string(&first.schema().cloned().unwrap_or_default()).unwrap();
    assert!(
        schema.contains("\"camera_degrees\""),
        "offered in degrees: {schema}"
    );
    assert!(
        !schema.contains("\"const\":\"camera\""),
        "not in counts: {schema}"
    );
    // Ground truth from the game: the calibration's moves cancel to 55 counts; the turn adds 20 degrees.
    let ev = events(&rec);
    let note = ev
        .iter()
        .filter_map(|e| e["text"].as_str().or(e["note"].as_str()))
        .find(|t| t.starts_with("camera calibration:"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("the calibration is recorded: {text}"));
    let deg_per_count: f64 = note
        .split(", ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(
        ev.iter()
            .any(|e| e["kind"] == "action" && e["payload"]["action"] == "camera_degrees"),
        "the turn is recorded in degrees"
    );
    let yaw = arena.state().unwrap()["camera"]["yaw_deg"].as_f64().unwrap();
    let turned = yaw - 55.0 * deg_per_count;
    assert!(
        (turned - 20.0).abs() < 3.0,
        "a 20 degree turn became {turned} (yaw {yaw})"
    );
    eprintln!("figures: run turned {turned:.2} deg for 20 (deg/count {deg_per_count:.4})");
    assert!(bed.x11().unwrap().server_held().unwrap().is_empty());
    replays(&rec);
}

#[test]
fn run_refuses_a_degenerate_plan_with_its_reason_and_adopts_the_plan_asked_again() {
    // FR-LOOP-004: the first plan repeats one subgoal; `run` refuses it, the model is
    // asked again once with the reason in its prompt, and the second, sound plan is adopted.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let plans = Arc::new(AtomicU32::new(0));
    let asked = plans.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            if asked.fetch_add(1, Ordering::SeqCst) == 0 {
                return gamepilot_testbed::plan_reply(
                    req,
                    &[("start the game", "in_play"), ("start the game", "in_play")],
                );
            }
            return plan_reply(req);
        }
        Reply::json(&json!({"action": "wait", "duration_ms": 300}))
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let spec = RunSpec {
        goal: "Click Play, then collect a coin.",
        goal_check: "coins >= 1",
        max_actions: 3,
        budget_s: 12,
        grounding: "mark",
    };
    let out = run_command(&bed.display, arena.window.id, &host.base_url(), &spec, &rec)
        .output()
        .unwrap();
    let text = show(&out);
    assert!(matches!(out.status.code(), Some(0) | Some(4)), "{text}");
    let deliberative: Vec<ReceivedChat> = host
        .chat_requests()
        .into_iter()
        .filter(|r| r.system_text().contains("deliberative planner"))
        .collect();
    assert!(deliberative.len() >= 2, "asked again: {text}");
    let second = deliberative[1].prompt_text();
    assert!(
        second.contains("plan refused") && second.contains("both end at \"in_play\""),
        "the reason reaches the model:\n{second}"
    );
    let ev = events(&rec);
    assert!(
        ev.iter().any(|e| e["kind"] == "failure"
            && e["cause"] == "plan"
            && e["evidence"].as_str().unwrap_or("").contains("refused")),
        "the refusal is recorded as a plan failure"
    );
    let adopted = ev
        .iter()
        .filter(|e| e["kind"] == "decision")
        .any(|e| e.to_string().contains("plan_adopted"));
    assert!(adopted, "the second plan is adopted");
    replays(&rec);
}

/// A host whose planner plans `subgoals` and whose tactical cadence always waits; its tactical calls are
/// counted.
fn waiting_host(subgoals: &'static [(&'static str, &'static str)]) -> (ScriptedHost, Arc<AtomicU32>) {
    let tactical = Arc::new(AtomicU32::new(0));
    let calls = tactical.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return gamepilot_testbed::plan_reply(req, subgoals);
        }
        calls.fetch_add(1, Ordering::SeqCst);
        Reply::json(&json!({"action": "wait", "duration_ms": 200}))
    })
    .unwrap();
    (host, tactical)
}

/// `run` on the practice game in the background, its output piped.
fn spawn_run(
    bed: &TestBed,
    arena: &Arena,
    host: &ScriptedHost,
    rec: &Path,
    max_actions: u32,
    budget_s: u32,
) -> std::process::Child {
    let spec = RunSpec {
        goal: "Click Play, then collect a coin.",
        goal_check: "coins >= 1",
        max_actions,
        budget_s,
        grounding: "mark",
    };
    run_command(&bed.display, arena.window.id, &host.base_url(), &spec, rec)
        .arg("--wait-for-plan")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_game_behind_another_window_is_raised_at_start_then_waited_for_without_model_calls() {
    // FR-SAFE-004 (input only to the game in front), FR-LOOP-008 (the budget waits with the session):
    // `run` asks the window manager to raise the game; when another window takes the focus the session
    // asks the model nothing, judges nothing and climbs no rung until the game is in front again.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let other = Arena::launch(
        &mut bed,
        &ArenaOptions {
            seed: 8,
            width: 640,
            height: 480,
            ..ArenaOptions::default()
        },
    )
    .unwrap();
    let x = bed.x11().unwrap();
    assert!(
        !x.is_foreground(arena.window.id).unwrap(),
        "the other window starts in front"
    );
    let (host, tactical) = waiting_host(&[("start the game", "in_play"), ("collect a coin", "coins >= 1")]);
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let child = spawn_run(&bed, &arena, &host, &rec, 400, 120);
    let count = || tactical.load(Ordering::SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count() < 2 {
        if std::time::Instant::now() >= deadline {
            unsafe {
                libc::kill(child.id() as i32, libc::SIGINT);
            }
            let out = child.wait_with_output().unwrap();
            panic!("no tactical calls:\n{}", show(&out));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(x.is_foreground(arena.window.id).unwrap(), "run raised the game");
    x.activate(other.window.id).unwrap();
    // A call already in flight may still come; after it, none.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let behind = count();
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert_eq!(
        count(),
        behind,
        "no model call while the game is behind another window"
    );
    x.activate(arena.window.id).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while count() == behind {
        assert!(
            std::time::Instant::now() < deadline,
            "the session resumes when the game is in front"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Resumed: a Ctrl+C ends the run cleanly (the budget is generous, so a loaded machine's slow start
    // never ends the session first).
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let text = show(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(text.contains("brought the game's window to the front"), "{text}");
    let ev = events(&rec);
    let at = |name: &str| {
        ev.iter()
            .position(|e| e["kind"] == "interlock" && e["interlock"] == name)
            .unwrap_or_else(|| panic!("no {name} interlock"))
    };
    let (from, to) = (at("not_in_front"), at("in_front"));
    assert!(from < to);
    // An action already on its way when the focus went is refused by the executor and ends inconclusive;
    // nothing is confirmed or refuted, and no rung is climbed.
    let waited = &ev[from..to];
    assert!(
        !waited
            .iter()
            .any(|e| (e["kind"] == "verdict" && e["verdict"] != "inconclusive")
                || (e["kind"] == "interlock" && e["interlock"] == "escalate")),
        "nothing judged or climbed while waiting: {waited:#?}"
    );
    let resumed = ev[to]["detail"].as_str().unwrap_or("").to_string();
    assert!(
        resumed.starts_with("the game is in front again after"),
        "{resumed}"
    );
}

#[test]
fn a_subgoal_naming_a_visible_element_is_clicked_through_run_without_a_model_call() {
    // Grounding without guessing, FR-GND-006: the plan names 'Options'; the one element
    // so labelled is clicked with no tactical model call, executed and verified; the game's own state
    // shows the options screen.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let (host, tactical) = waiting_host(&[("click 'Options'", "in_play"), ("collect a coin", "coins >= 1")]);
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let child = spawn_run(&bed, &arena, &host, &rec, 4, 15);
    let state = arena
        .wait_for(std::time::Duration::from_secs(60), |s| s["screen"] == "options")
        .expect("the game shows its options screen");
    assert_eq!(
        tactical.load(Ordering::SeqCst),
        0,
        "no tactical model call before the click: {state}"
    );
    let out = child.wait_with_output().unwrap();
    let text = show(&out);
    assert!(matches!(out.status.code(), Some(0) | Some(4)), "{text}");
    // At least the click on Options (a later plan may name it again where only the screen's title bears
    // the name; the action budget refuses that one).
    let direct: u32 = text
        .split(" actions grounded without a call")
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(direct >= 1, "{text}");
    let ev = events(&rec);
    let note = ev
        .iter()
        .position(|e| {
            e["kind"] == "note"
                && e["text"].as_str().is_some_and(|t| {
                    t.starts_with("grounded without a model call: the subgoal names 'options'")
                })
        })
        .expect("the direct grounding is recorded");
    let click = ev
        .iter()
        .position(|e| e["kind"] == "action" && e["payload"]["action"] == "click")
        .expect("the click was executed");
    assert!(note < click);
    let id = ev[click]["action"].as_u64();
    assert!(
        ev.iter()
            .any(|e| e["kind"] == "verdict" && e["action"].as_u64() == id && e["verdict"] == "confirmed"),
        "verified like any action"
    );
    replays(&rec);
}
