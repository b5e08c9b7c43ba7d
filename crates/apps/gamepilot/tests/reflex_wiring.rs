//! The reflex driver of `run` under Xvfb, against the practice game: window tracking and stale-action
//! dropping (FR-PERC-002), camera calibration and turns in degrees (FR-ACT-004/005), the indicator in
//! `run` (FR-SAFE-007), `template_present` from `run --templates` (FR-PERC-008), frame health in `run`'s
//! status line (FR-PERC-009) and `run` halting when its guardian dies (FR-SAFE-003). `run` talks to a
//! scripted OpenAI-compatible host in this file that always answers `wait`, so no model is needed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use common::gamepilot;

use gamepilot_core::Rect;
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use serde_json::Value;
use std::io::{BufRead as _, Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{ConfigureWindowAux, ConnectionExt as _};

fn script(bed: &TestBed, name: &str, lines: &[&str]) -> std::path::PathBuf {
    let p = bed.dir.path().join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    p
}

fn act(bed: &TestBed, window: u32, script: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = gamepilot();
    c.args([
        "act",
        "--display",
        &bed.display,
        "--window",
        &format!("0x{window:x}"),
        "--actions",
    ])
    .arg(script)
    .args(extra)
    .stdin(Stdio::null());
    c
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A scripted OpenAI-compatible host: healthy, no `/props`, every chat answered with a `wait`.
fn fake_host() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                let Ok(n) = s.read(&mut chunk) else { break None };
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(i + 4);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let Ok(n) = s.read(&mut chunk) else { break };
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let first = head.lines().next().unwrap_or_default().to_string();
            let (status, body) = if first.starts_with("GET /health") {
                ("200 OK", "{\"status\":\"ok\"}".to_string())
            } else if first.starts_with("POST /v1/chat/completions") {
                // A plan request (its schema asks for subgoals) gets one subgoal on the first allowed
                // postcondition; every tactical request a wait.
                let req: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                let post = req
                    .pointer("/response_format/json_schema/schema/properties/subgoals/items/properties/postcondition/enum/0")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let content = match post {
                    Some(p) => {
                        serde_json::json!({"subgoals": [{"description": "wait and watch", "postcondition": p}]})
                        .to_string()
                    }
                    None => r#"{"action":"wait","duration_ms":300}"#.to_string(),
                };
                (
                    "200 OK",
                    serde_json::json!({
                        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
                    })
                    .to_string(),
                )
            } else {
                ("404 Not Found", "{}".to_string())
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn run_cmd(bed: &TestBed, arena: &Arena, host: &str, rec: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = gamepilot();
    c.args([
        "run",
        "--display",
        &bed.display,
        "--window",
        &format!("0x{:x}", arena.window.id),
    ])
    .args(["--goal", "Click Play.", "--model-endpoint", host, "--unattended"])
    .args(["--tactical-interval-ms", "300", "--no-gpu-watch"])
    .arg("--record")
    .arg(rec)
    .args(extra)
    .stdin(Stdio::null());
    c
}

fn sensors(bed: &TestBed, text: &str) -> std::path::PathBuf {
    let p = bed.dir.path().join("test.sensors");
    std::fs::write(&p, text).unwrap();
    p
}

/// Windows on the root titled `title`, with their screen rectangles.
fn windows_titled(bed: &TestBed, title: &str) -> Vec<Rect> {
    let x = bed.x11().unwrap();
    let tree = x.conn.query_tree(x.root).unwrap().reply().unwrap();
    tree.children
        .iter()
        .filter(|w| x.window_title(**w) == title)
        .filter(|w| {
            x.conn
                .get_window_attributes(**w)
                .unwrap()
                .reply()
                .unwrap()
                .map_state
                == x11rb::protocol::xproto::MapState::VIEWABLE
        })
        .map(|w| {
            let g = x.conn.get_geometry(*w).unwrap().reply().unwrap();
            Rect::new(g.x as i32, g.y as i32, g.width as u32, g.height as u32)
        })
        .collect()
}

fn children_of(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rsplit_once(')').map(|r| r.1.to_string()) else {
            continue;
        };
        let ppid: u32 = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if ppid == pid {
            let cmd = std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default();
            out.push((p, cmd.replace('\0', " ")));
        }
    }
    out
}

fn wait_exit(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn a_window_move_bumps_the_generation_and_a_click_grounded_before_it_is_dropped() {
    // FR-PERC-002, INV-GND-002: move/resize rebuilds the chain (generation++); a pointer action grounded
    // in the old generation is dropped with a typed reason and nothing is clicked; keys are unaffected.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    assert_eq!(arena.state().unwrap()["screen"], "menu");
    let s = script(
        &bed,
        "stale.jsonl",
        &[
            r#"{"action":"wait","duration_ms":2500}"#,
            // Grounded before the move: the Play button's centre in the generation-0 frame.
            r#"{"action":"click","x":640,"y":330,"generation":0}"#,
            r#"{"action":"key","key":"x","generation":0}"#,
            r#"{"action":"wait","duration_ms":600}"#,
        ],
    );
    let mut child = act(&bed, arena.window.id, &s, &[])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&first).unwrap()["event"], "armed");
    std::thread::sleep(Duration::from_millis(400));
    // Move, then resize the game window with plain X11 requests (the window manager applies them).
    let x = bed.x11().unwrap();
    let before = x.client_rect(arena.window.id).unwrap();
    x.conn
        .configure_window(
            arena.window.id,
            &ConfigureWindowAux::new().x(before.x + 37).y(before.y + 21),
        )
        .unwrap();
    x.conn.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    x.conn
        .configure_window(
            arena.window.id,
            &ConfigureWindowAux::new().width(1200).height(680),
        )
        .unwrap();
    x.conn.flush().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    let v = json_lines(&rest);
    let changes: Vec<&Value> = v
        .iter()
        .filter(|e| e["event"] == "interlock" && e["interlock"] == "window_changed")
        .collect();
    // The practice game fixes its size hints, so the window manager refuses the resize; the move counts.
    assert!(!changes.is_empty(), "the move is seen: {rest}");
    let gens: Vec<u64> = changes
        .iter()
        .map(|e| e["generation"].as_u64().unwrap())
        .collect();
    assert!(
        gens.windows(2).all(|w| w[1] > w[0]) && gens[0] >= 1,
        "generation++ per change: {gens:?}"
    );
    let after = x.client_rect(arena.window.id).unwrap();
    assert_ne!(
        (after.x, after.y, after.w),
        (before.x, before.y, before.w),
        "the window really moved"
    );
    // The click is rejected as stale, typed; the key (no point) is accepted.
    let click = v.iter().find(|e| e["line"] == 2).unwrap();
    assert_eq!(click["event"], "rejected", "{click}");
    assert_eq!(click["reason"]["kind"], "stale_generation", "{click}");
    assert_eq!(click["reason"]["grounded"], 0);
    assert_eq!(click["reason"]["current"].as_u64(), gens.last().copied());
    let key = v.iter().find(|e| e["line"] == 3).unwrap();
    assert_eq!(key["event"], "accepted", "{key}");
    // Nothing was clicked: the game's own state.
    let state = arena.state().unwrap();
    assert_eq!(state["screen"], "menu", "{state}");
    assert!(
        state["clicks"].as_object().is_none_or(|c| c.is_empty()),
        "{}",
        state["clicks"]
    );
    assert!(x.server_held().unwrap().is_empty());
}

#[test]
fn act_calibrates_the_camera_then_turns_by_degrees() {
    // FR-ACT-004, FR-ACT-005, ADR-0035 "Neutral": small relative moves, the frame's shift measured,
    // degrees per count from the field of view; a camera_degrees turn converted with it. The practice
    // game's compass strip (top 40 px) scrolls 4 px per degree, so a 1280 px view "sees" 320 degrees.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    // Without a calibration a turn in degrees is refused with a typed reason.
    let s = script(
        &bed,
        "deg.jsonl",
        &[r#"{"action":"camera_degrees","yaw_deg":20,"duration_ms":400}"#],
    );
    let out = act(&bed, arena.window.id, &s, &[]).output().unwrap();
    let v = json_lines(&String::from_utf8_lossy(&out.stdout));
    let r = v.iter().find(|e| e["line"] == 1).unwrap();
    assert_eq!(r["reason"]["kind"], "camera_not_calibrated", "{r}");
    let yaw0 = arena.state().unwrap()["camera"]["yaw_deg"].as_f64().unwrap();
    assert!(yaw0.abs() < 1e-6, "nothing turned yet: {yaw0}");

    let out = act(
        &bed,
        arena.window.id,
        &s,
        &[
            "--calibrate-camera",
            "--calibrate-region",
            "0,0,1280,40",
            "--fov-deg",
            "320",
        ],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let v = json_lines(&text);
    let cal = v
        .iter()
        .find(|e| e["event"] == "camera_calibration")
        .expect(&text);
    let deg_per_count = cal["deg_per_count"].as_f64().unwrap();
    assert_eq!(cal["samples"].as_array().unwrap().len(), 3, "{cal}");
    let accepted = v.iter().find(|e| e["line"] == 1).unwrap();
    assert_eq!(accepted["event"], "accepted", "{accepted}");
    std::thread::sleep(Duration::from_millis(300));
    // Ground truth from the game: the calibration turned 30 - 20 + 45 = 55 counts, then 20 degrees.
    let yaw = arena.state().unwrap()["camera"]["yaw_deg"].as_f64().unwrap();
    let after_cal = v.iter().filter(|e| e["event"] == "camera_calibration").count();
    assert_eq!(after_cal, 1);
    let true_deg_per_count = (yaw - 20.0) / 55.0;
    assert!(
        (deg_per_count - true_deg_per_count).abs() / true_deg_per_count.abs() < 0.1,
        "measured {deg_per_count} deg/count, game {true_deg_per_count} (yaw {yaw})"
    );
    let turned = yaw - 55.0 * deg_per_count;
    assert!(
        (turned - 20.0).abs() < 2.5,
        "a 20 degree turn became {turned} degrees (yaw {yaw})"
    );
    eprintln!("figures: calibrated {deg_per_count:.4} deg/count, game {true_deg_per_count:.4}; 20 deg turn → {turned:.2} deg");
    assert!(bed.x11().unwrap().server_held().unwrap().is_empty());
}

#[test]
fn run_shows_the_indicator_outside_the_game_and_names_frame_health() {
    // FR-SAFE-007 (indicator while armed in run, never over the game), FR-PERC-009 (frame state in the
    // status line), FR-PERC-002 (the indicator follows a moved window)
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let host = fake_host();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let sens = sensors(
        &bed,
        "coins = region_fraction([0, 0, 64, 64], value>0.5)\nnever = coins > 2\n",
    );
    let mut child = run_cmd(&bed, &arena, &host, &rec, &["--session-budget-s", "8"])
        .arg("--sensors")
        .arg(&sens)
        .args(["--goal-check", "never"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut seen = Vec::new();
    while Instant::now() < deadline && seen.is_empty() {
        seen = windows_titled(&bed, "gamepilot indicator");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(seen.len(), 1, "one indicator while run is armed");
    let x = bed.x11().unwrap();
    let game = x.client_rect(arena.window.id).unwrap();
    assert!(
        seen[0].intersection(&game).is_none(),
        "{:?} overlaps the game {game:?}",
        seen[0]
    );
    let status = wait_exit(&mut child, Duration::from_secs(30)).expect("run ends on its budget");
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(matches!(status.code(), Some(0) | Some(4)), "{out}\n{err}");
    assert!(
        err.contains("| frame ok |"),
        "frame health in the status line: {err}"
    );
    assert!(
        windows_titled(&bed, "gamepilot indicator").is_empty(),
        "gone when disarmed"
    );
    assert!(x.server_held().unwrap().is_empty());
}

#[test]
fn run_reads_template_present_from_a_templates_folder() {
    // FR-PERC-008, the template atlas: template_present evaluates in run's reflex; the goal is a
    // template over the practice game's own frame, so the session ends GoalMet before any action
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    arena.request_dump().unwrap();
    let frame = image::open(&arena.frame_file).unwrap().to_rgba8();
    // The Play button of the menu (360x84 at (460, 288) in 1280x720), cut from the game's own frame.
    let tdir = bed.dir.path().join("templates");
    std::fs::create_dir_all(&tdir).unwrap();
    image::imageops::crop_imm(&frame, 470, 298, 120, 60)
        .to_image()
        .save(tdir.join("play@470,298.png"))
        .unwrap();
    let host = fake_host();
    let dir = tempfile::tempdir().unwrap();
    let sens = sensors(&bed, "play_seen = template_present(\"play\", 0.9)\n");
    let out = run_cmd(
        &bed,
        &arena,
        &host,
        &dir.path().join("s1"),
        &["--session-budget-s", "20"],
    )
    .arg("--sensors")
    .arg(&sens)
    .args(["--goal-check", "play_seen"])
    .arg("--templates")
    .arg(&tdir)
    .output()
    .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "goal met through the template: {text}"
    );
    assert!(text.contains("session stopped: GoalMet"), "{text}");
    assert!(text.contains("templates: play"), "{text}");
    // Met before any action: the game is still on its menu.
    assert!(arena.state().unwrap()["screen"] == "menu", "{text}");
    // Without the folder the same sensor is undefined: the run cannot meet its goal (whatever it
    // does meanwhile: "Click Play" names a visible element, which the session clicks itself).
    let out = run_cmd(
        &bed,
        &arena,
        &host,
        &dir.path().join("s2"),
        &["--session-budget-s", "4"],
    )
    .arg("--sensors")
    .arg(&sens)
    .args(["--goal-check", "play_seen"])
    .output()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // An unreadable folder is a clear error naming it.
    let out = run_cmd(&bed, &arena, &host, &dir.path().join("s3"), &[])
        .arg("--sensors")
        .arg(&sens)
        .args(["--templates", "/nonexistent/templates"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("/nonexistent/templates"), "{err}");
}

#[test]
fn run_halts_when_its_guardian_dies() {
    // FR-SAFE-003: run checks the guardian every tick, as act does; input never stays armed without it
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let host = fake_host();
    let dir = tempfile::tempdir().unwrap();
    let sens = sensors(
        &bed,
        "never = region_fraction([0, 0, 8, 8], value>0.99)\nnone = never > 2\n",
    );
    let mut child = run_cmd(
        &bed,
        &arena,
        &host,
        &dir.path().join("s"),
        &["--session-budget-s", "30"],
    )
    .arg("--sensors")
    .arg(&sens)
    .args(["--goal-check", "none"])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let guardian = loop {
        if let Some((pid, _)) = children_of(child.id())
            .into_iter()
            .find(|(_, c)| c.contains(" guardian "))
        {
            if !windows_titled(&bed, "gamepilot indicator").is_empty() {
                break pid;
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "no guardian child: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // SAFETY: killing the guardian process this test's child started.
    unsafe {
        libc::kill(guardian as i32, libc::SIGKILL);
    }
    let status = wait_exit(&mut child, Duration::from_secs(15)).expect("run stops without its guardian");
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(status.code(), Some(4), "{out}");
    assert!(
        out.contains("guardian_gone"),
        "the stop names the guardian: {out}"
    );
}
