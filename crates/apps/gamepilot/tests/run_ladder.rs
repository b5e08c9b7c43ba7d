//! `gamepilot run` walks the whole escalation ladder (FR-LOOP-006) on the practice game under Xvfb, against
//! a scripted model host and a loopback search server this test starts: the agent opens Options (a confirmed
//! action on the menu, which becomes the safe screen), then nothing it does on the Options screen works.
//! Each rung must show its own effect: the same intention re-grounded, the refused action named to the
//! model, a new plan, a search for the planner's question, Escape back to the menu (the game's own state
//! says so), then on a second climb deep research with the model's brief, and the named stop.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{events, mark_with, run_command, RunSpec};
use gamepilot_testbed::{Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

const QUESTION: &str = "how does a player win this arcade game";

/// `%XX` and `+` decoded.
fn unescape(q: &str) -> String {
    let b = q.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&q[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A SearxNG-shaped search server on loopback: every search lists three guide pages on itself, which agree
/// on how the game is won. Returns its base URL and the queries it received.
fn search_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let queries = Arc::new(Mutex::new(Vec::new()));
    let seen = queries.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let mut buf = [0u8; 8192];
            let got = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..got]).to_string();
            let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (ctype, body) = if path.starts_with("/guide") {
                (
                    "text/html",
                    "<html><body><p>To win the arcade game, collect a coin from the play field.</p>\
                     <p>Coins appear on the play field after Play is chosen in the menu.</p></body></html>"
                        .to_string(),
                )
            } else {
                if let Some(q) = path.split(['?', '&']).find_map(|p| p.strip_prefix("q=")) {
                    seen.lock().unwrap().push(unescape(q));
                }
                let results: Vec<String> = (0..3)
                    .map(|i| {
                        format!(
                            "{{\"url\":\"http://{addr}/guide{i}\",\"title\":\"Guide\",\"content\":\"win\"}}"
                        )
                    })
                    .collect();
                (
                    "application/json",
                    format!("{{\"results\":[{}]}}", results.join(",")),
                )
            };
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                body.len(),
                body
            );
        }
    });
    (format!("http://{addr}"), queries)
}

/// The planner: the first plan, and on a replan a different plan that asks a research question.
fn plan(req: &ReceivedChat) -> Reply {
    if req.prompt_text().contains("Deliberation trigger: Replan") {
        let mut reply = gamepilot_testbed::plan_value(
            req,
            &[
                ("return to the main screen and choose Play", "in_play"),
                ("pick up one coin", "coins >= 1"),
            ],
        );
        reply["research"] = json!(QUESTION);
        return Reply::json(&reply);
    }
    gamepilot_testbed::plan_reply(
        req,
        &[("get into the game", "in_play"), ("collect a coin", "coins >= 1")],
    )
}

/// Deep research's brief: one finding citing the first offered source.
fn brief(req: &ReceivedChat) -> Reply {
    let source = req
        .schema()
        .and_then(|s| s.pointer("/properties/points/items/properties/sources/items/enum/0"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Reply::json(&json!({"points": [{"text": "Choose Play, then collect a coin.", "sources": [source]}]}))
}

#[test]
fn run_walks_the_whole_ladder_and_each_rung_does_its_own_thing() {
    // FR-LOOP-006 (the ladder, in order), FR-SKILL-003 (the planner's question, user bounds),
    // FR-SKILL-004 (deep research on the second research rung, brief by the deliberative model),
    // FR-SKILL-005 (research results only as untrusted excerpts)
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let (search, queries) = search_server();
    let opened = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU32::new(0));
    let (opened_h, calls_h) = (opened.clone(), calls.clone());
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        let system = req.system_text();
        if system.contains("deliberative planner") {
            return plan(req);
        }
        if system.contains("research briefs") {
            return brief(req);
        }
        let prompt = req.prompt_text();
        if !opened_h.load(Ordering::SeqCst) {
            if let Some(mark) = mark_with(&prompt, "Options", "") {
                opened_h.store(true, Ordering::SeqCst);
                return Reply::json(&json!({"action": "click_mark", "mark": mark}));
            }
        }
        // Nothing works from here on: keys the game ignores, never the same one twice in a row.
        let n = calls_h.fetch_add(1, Ordering::SeqCst) as usize;
        let key = ["j", "k", "l", "m", "n", "o", "u", "v"][n % 8];
        Reply::json(&json!({"action": "key", "key": key}))
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let stuck = dir.path().join("stuck.json");
    std::fs::write(&stuck, r#"{"refuted_streak": 2}"#).unwrap();
    let spec = RunSpec {
        goal: "Click Play, then collect a coin.",
        goal_check: "coins >= 1",
        max_actions: 60,
        budget_s: 150,
        grounding: "mark",
    };
    // The ladder is walked on the scripted plan's menu steps: nothing is done before the plan arrives.
    let out = run_command(&bed.display, arena.window.id, &host.base_url(), &spec, &rec)
        .arg("--wait-for-plan")
        .arg("--stuck-config")
        .arg(&stuck)
        .args(["--search-endpoint", &search, "--research-private-addresses"])
        .args([
            "--research-sources",
            "3",
            "--research-tokens",
            "1500",
            "--research-seconds",
            "8",
        ])
        .output()
        .unwrap();
    let text = common::show(&out);
    // The named stop, with the ladder's history in the summary.
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains("session stopped: NoProgress"), "{text}");
    let ladder_line = text
        .lines()
        .find(|l| l.contains("escalation ladder:"))
        .unwrap_or_else(|| panic!("{text}"));
    let climbed: Vec<&str> = ladder_line
        .split("escalation ladder:")
        .nth(1)
        .unwrap()
        .split(" -> ")
        .map(|r| r.split(" at ").next().unwrap().trim())
        .collect();
    let order = [
        "retry",
        "alternative_action",
        "replan",
        "research",
        "safe_state",
        "stop_and_notify",
    ];
    let first_climb: Vec<&str> = climbed.iter().take(5).copied().collect();
    assert_eq!(first_climb, order[..5], "{ladder_line}");
    assert_eq!(climbed.last(), Some(&"stop_and_notify"), "{ladder_line}");
    for w in climbed.windows(2) {
        let (a, b) = (
            order.iter().position(|r| *r == w[0]).unwrap(),
            order.iter().position(|r| *r == w[1]).unwrap(),
        );
        assert!(
            b == a + 1 || b == 0,
            "a rung is only ever the next one, or the first after progress: {ladder_line}"
        );
    }
    eprintln!("{ladder_line}");
    let ev = events(&rec);
    let notes = common::notes(&rec);
    let noted = |prefix: &str| notes.iter().any(|n| n.starts_with(prefix));
    // Retry: the same intention grounded again on a fresh observation, no model call.
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("retry: ") && n.ends_with("grounded again on a fresh observation")),
        "{notes:#?}"
    );
    // Alternative action: the refused action is named in the model's next prompt.
    let tactical: Vec<String> = host
        .chat_requests()
        .into_iter()
        .filter(|r| r.system_text().contains("tactical controller"))
        .map(|r| r.prompt_text())
        .collect();
    assert!(
        tactical
            .iter()
            .any(|p| p.contains("did not help and is refused now")),
        "the refused action reaches the model"
    );
    // Replan: a new plan adopted from a replan pass.
    let replans = host
        .chat_requests()
        .into_iter()
        .filter(|r| r.prompt_text().contains("Deliberation trigger: Replan"))
        .count();
    assert!(replans >= 1, "{text}");
    assert!(
        ev.iter().any(|e| e
            .to_string()
            .contains("return to the main screen and choose Play")),
        "the replan's plan was adopted"
    );
    // Research: the planner's question, sent to the loopback search engine; the second research is deep,
    // and its brief was asked of the deliberative model.
    let asked = queries.lock().unwrap().clone();
    eprintln!("searches: {asked:?}");
    eprintln!("notes: {notes:#?}");
    assert_eq!(
        asked.first().map(String::as_str),
        Some(QUESTION),
        "{asked:?}\n{text}"
    );
    assert!(
        asked.len() >= 2,
        "a second research rung searched again: {asked:?}"
    );
    let research: Vec<&Value> = ev.iter().filter(|e| e["kind"] == "research").collect();
    assert_eq!(
        research[0]["results"]["kind"], "search_and_fetch",
        "{}",
        research[0]
    );
    assert!(research[0]["results"]["sources"]
        .as_array()
        .is_some_and(|s| s.len() <= 2));
    assert!(
        research.iter().any(|r| r["results"]["kind"] == "deep"
            && r["results"]["sources"].as_array().is_some_and(|s| s.len() == 3)),
        "deep research read the user's 3 sources: {research:?}"
    );
    assert!(
        host.chat_requests()
            .iter()
            .any(|r| r.system_text().contains("research briefs")),
        "the deliberative model wrote the brief"
    );
    assert!(
        tactical
            .iter()
            .any(|p| p.contains("<untrusted source=") && p.contains("collect a coin from the play field")),
        "the findings reach the model only inside an untrusted block"
    );
    // Safe state: Escape back to the menu, where the Options click was confirmed; the game agrees.
    assert!(noted("safe state: going back to the menu"), "{notes:#?}");
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("safe state: ") && n.contains("\"Escape\"")),
        "{notes:#?}"
    );
    assert!(noted("safe state: back on the menu"), "{notes:#?}");
    // The game's own screen agrees with what the agent last said of the safe state (its last return may
    // have reached the menu or given up: a return with no progress since the one before stops the ladder).
    let last_safe = notes
        .iter()
        .rev()
        .find(|n| n.starts_with("safe state: back on") || n.starts_with("safe state not reached"))
        .unwrap_or_else(|| panic!("{notes:#?}"));
    let state = arena.state().unwrap();
    if last_safe.starts_with("safe state: back on the menu") {
        assert_eq!(state["screen"], "menu", "{last_safe}\n{state}");
    } else {
        assert_ne!(state["screen"], "menu", "{last_safe}\n{state}");
    }
    let x = bed.x11().unwrap();
    assert!(x.server_held().unwrap().is_empty(), "nothing held on the server");
}
