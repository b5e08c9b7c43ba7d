//! Integration tests of `gamepilot act` against the practice game under Xvfb: sustained holds with camera
//! turns, denied chords, dry run and the foreground guard, asserted on the game's own state and the X
//! server's key state (XQueryKeymap).

// Test helpers outside #[test] functions may unwrap too: this whole file is test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::{Keysym, MonoTime, Rect};
use gamepilot_executor::calibrate::{Axis, Calibrator};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::WindowCapturer;
use serde_json::Value;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn play(seed: u64) -> ArenaOptions {
    ArenaOptions {
        seed,
        extra_args: vec!["--start-screen".into(), "play".into()],
        ..Default::default()
    }
}

fn script(bed: &TestBed, name: &str, lines: &[&str]) -> std::path::PathBuf {
    let p = bed.dir.path().join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    p
}

fn act_cmd(bed: &TestBed, window: u32, script: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gamepilot"));
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

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn events<'a>(v: &'a [Value], kind: &str) -> Vec<&'a Value> {
    v.iter().filter(|l| l["event"] == kind).collect()
}

fn count(state: &Value, key: &str, what: &str) -> u64 {
    state["key_events"][key][what].as_u64().unwrap_or(0)
}

fn server_holds_nothing(bed: &TestBed) -> bool {
    bed.x11().unwrap().server_held().unwrap().is_empty()
}

#[test]
fn hold_w_while_turning_moves_and_turns_with_one_press_and_one_release() {
    // FR-ACT-002, FR-ACT-003, FR-ACT-004, ADR-0035 step 4 (event rate proportional to change)
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let before = arena.state().unwrap();
    let s = script(
        &bed,
        "hold.jsonl",
        &[
            r#"{"action":"hold_key","key":"w","duration_ms":1500}"#,
            r#"{"action":"camera","dx":300,"dy":-40,"duration_ms":400}"#,
        ],
    );
    let out = act_cmd(&bed, arena.window.id, &s, &[]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = lines(&out);
    assert_eq!(events(&v, "accepted").len(), 2);
    let state = arena
        .wait_for(Duration::from_secs(3), |s| count(s, "w", "release") >= 1)
        .unwrap();
    assert_eq!(
        count(&state, "w", "press"),
        1,
        "one press, not a stream: {}",
        state["key_events"]
    );
    assert_eq!(count(&state, "w", "release"), 1);
    let yaw = state["camera"]["yaw_deg"].as_f64().unwrap();
    assert!(yaw.abs() > 20.0, "the camera turned: yaw {yaw}");
    assert!(
        state["camera_motion_events"].as_u64().unwrap() >= 10,
        "many small relative steps"
    );
    let (x0, y0) = (
        before["player"]["x"].as_f64().unwrap(),
        before["player"]["y"].as_f64().unwrap(),
    );
    let (x1, y1) = (
        state["player"]["x"].as_f64().unwrap(),
        state["player"]["y"].as_f64().unwrap(),
    );
    let moved = ((x1 - x0).powi(2) + (y1 - y0).powi(2)).sqrt();
    assert!(moved > 100.0, "the player moved {moved} px");
    assert_eq!(state["held_keys"].as_array().unwrap().len(), 0);
    assert!(
        server_holds_nothing(&bed),
        "INV-SAFE-002: nothing held after the script"
    );
}

#[test]
fn denied_chord_is_rejected_reported_and_never_seen() {
    // INV-ACT-003, FR-ACT-006
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let s = script(
        &bed,
        "denied.jsonl",
        &[
            r#"{"action":"key","key":"alt+F4"}"#,
            r#"{"action":"hold_key","key":"d","duration_ms":200}"#,
        ],
    );
    let out = act_cmd(&bed, arena.window.id, &s, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = lines(&out);
    let rejected = events(&v, "rejected");
    assert_eq!(rejected.len(), 1, "{v:?}");
    assert_eq!(rejected[0]["line"], 1);
    assert_eq!(rejected[0]["reason"]["kind"], "denied_chord");
    assert_eq!(
        events(&v, "accepted").len(),
        1,
        "the rest of the script still runs"
    );
    let state = arena
        .wait_for(Duration::from_secs(3), |s| count(s, "d", "release") >= 1)
        .unwrap();
    let keys = state["key_events"].as_object().unwrap();
    assert!(
        !keys.keys().any(|k| k.contains("F4") || k.contains("Alt")),
        "the game saw {keys:?}"
    );
    // The game is still alive and its window still there.
    let x = bed.x11().unwrap();
    assert!(x.window_info(arena.window.id).is_ok());
}

#[test]
fn dry_run_runs_the_pipeline_and_delivers_nothing() {
    // FR-SAFE-006
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let s = script(
        &bed,
        "dry.jsonl",
        &[
            r#"{"action":"hold_key","key":"w","duration_ms":400}"#,
            r#"{"action":"click","x":600,"y":300}"#,
            r#"{"action":"key","key":"alt+F4"}"#,
        ],
    );
    let out = act_cmd(&bed, arena.window.id, &s, &["--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = lines(&out);
    assert_eq!(events(&v, "accepted").len(), 2);
    assert_eq!(events(&v, "rejected").len(), 1, "validation is the same");
    assert!(
        events(&v, "held").iter().any(|h| h["keys"][0] == "w"),
        "the held set is logged"
    );
    let done = events(&v, "done")[0];
    assert_eq!(done["dry_run"], true);
    assert_eq!(done["delivered"], 0);
    assert!(done["would_deliver"].as_u64().unwrap() >= 4);
    std::thread::sleep(Duration::from_millis(200));
    let state = arena.request_dump().unwrap();
    assert!(
        state["key_events"].as_object().unwrap().is_empty(),
        "{}",
        state["key_events"]
    );
    assert!(
        state["button_events"].as_object().unwrap().is_empty(),
        "{}",
        state["button_events"]
    );
    assert_eq!(state["camera_motion_events"], 0);
}

#[test]
fn focus_loss_releases_everything_and_sends_nothing_more() {
    // INV-ACT-001, FR-ACT-001
    let mut bed = TestBed::start().unwrap();
    let other = Arena::launch(&mut bed, &play(8)).unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let s = script(
        &bed,
        "focus.jsonl",
        &[
            r#"{"action":"hold_key","key":"w","duration_ms":5000}"#,
            r#"{"action":"camera","dx":600,"dy":0,"duration_ms":4000}"#,
        ],
    );
    let child = act_cmd(&bed, arena.window.id, &s, &[])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    arena
        .wait_for(Duration::from_secs(5), |s| {
            s["held_keys"].as_array().is_some_and(|a| !a.is_empty())
        })
        .unwrap();
    let other_before = other.state().unwrap();
    let x = bed.x11().unwrap();
    x.activate(other.window.id).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = lines(&out);
    let cancelled: Vec<_> = events(&v, "report")
        .into_iter()
        .filter(|r| r["report"]["reason"] == "focus_lost")
        .collect();
    assert_eq!(cancelled.len(), 2, "both actions cancelled on focus loss: {v:?}");
    assert!(server_holds_nothing(&bed), "released within a tick");
    let w = XTestInput::new(&x)
        .unwrap()
        .locate(Keysym('w' as u32))
        .unwrap()
        .keycode;
    assert!(!x.server_held().unwrap().keycodes.contains(&w));
    let other_after = other.request_dump().unwrap();
    let presses: u64 = other_after["key_events"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["press"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        presses, 0,
        "no press reached the newly focused window: {}",
        other_after["key_events"]
    );
    assert_eq!(
        other_after["camera_motion_events"], other_before["camera_motion_events"],
        "no camera motion reached the other window"
    );
    assert_eq!(other_after["held_keys"].as_array().unwrap().len(), 0);
}

#[test]
fn camera_calibration_is_measured_from_the_games_frames() {
    // ADR-0035 (camera calibration from frames, no model), FR-ACT-004
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let x = bed.x11().unwrap();
    let mut cap = WindowCapturer::new(&x, arena.window.id).unwrap();
    // The game's compass strip along the top of its window scrolls with the view.
    let region = Rect::new(0, 0, arena.window.geometry.w, 40);
    let mut cal = Calibrator::new(Axis::X, vec![30, -20, 45], region, 80);
    let mut total = 0;
    while let Some((dx, dy)) = cal.next_move() {
        std::thread::sleep(Duration::from_millis(150));
        let before = cap.capture(&x, MonoTime::ZERO).unwrap();
        let line = format!(r#"{{"action":"camera","dx":{dx},"dy":{dy},"duration_ms":300}}"#);
        let s = script(&bed, "cal.jsonl", &[&line]);
        let out = act_cmd(&bed, arena.window.id, &s, &[]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        total += dx;
        std::thread::sleep(Duration::from_millis(250));
        let after = cap.capture(&x, MonoTime::ZERO).unwrap();
        assert!(
            cal.observe(&before.view(), &after.view()).is_some(),
            "move {dx} not measurable"
        );
    }
    let px_per_count = cal.result().unwrap();
    // Ground truth from the game: its yaw moved by `total` counts; the strip scrolls opposite to the turn.
    let yaw = arena.state().unwrap()["camera"]["yaw_deg"].as_f64().unwrap();
    assert!(yaw > 0.0 && total > 0);
    let truth = -(yaw * 4.0) / total as f64; // 4 compass px per degree in the practice game
    assert!(
        (px_per_count as f64 - truth).abs() < 0.1,
        "calibrated {px_per_count} px/count, game says {truth} ({:?})",
        cal.samples()
    );
}

#[test]
fn bench_executor_reports_every_figure() {
    // NFR-ACT-001, NFR-SAFE-001, FR-SAFE-003: the benchmark runs end to end on a display
    let bed = TestBed::start().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args([
            "bench",
            "executor",
            "--display",
            &bed.display,
            "--ticks",
            "2000",
            "--seconds",
            "1",
            "--reps",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for what in [
        "tick cost",
        "tick lateness",
        "panic latency",
        "crash release latency",
        "hung-core release",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} line in {text}"));
        assert!(line.contains("p50"), "{line}");
    }
}

#[test]
fn held_record_is_audited_against_the_server() {
    // INV-ACT-002: what the server holds that the record does not own is logged and released
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let s = script(
        &bed,
        "audit.jsonl",
        &[r#"{"action":"hold_key","key":"w","duration_ms":2500}"#],
    );
    let child = act_cmd(&bed, arena.window.id, &s, &[])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    arena
        .wait_for(Duration::from_secs(5), |s| {
            s["held_keys"].as_array().is_some_and(|a| !a.is_empty())
        })
        .unwrap();
    // Another synthetic source holds k behind the executor's back (not a real device, so no pause).
    let x = bed.x11().unwrap();
    let input = XTestInput::new(&x).unwrap();
    let k = input.locate(Keysym('k' as u32)).unwrap().keycode;
    input.key(&x, k, true).unwrap();
    input.sync(&x).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = lines(&out);
    let div = events(&v, "divergence");
    assert!(!div.is_empty(), "{v:?}");
    assert!(div[0]["server_only_keycodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.as_u64() == Some(k as u64)));
    assert!(
        !x.server_held().unwrap().keycodes.contains(&k),
        "the unowned key was released"
    );
    assert!(server_holds_nothing(&bed));
}

#[test]
fn indicator_is_shown_outside_the_target_while_armed() {
    // FR-SAFE-007
    use x11rb::protocol::xproto::ConnectionExt as _;
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(7)).unwrap();
    let s = script(
        &bed,
        "ind.jsonl",
        &[r#"{"action":"hold_key","key":"w","duration_ms":1500}"#],
    );
    let child = act_cmd(&bed, arena.window.id, &s, &[])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    arena
        .wait_for(Duration::from_secs(5), |s| {
            s["held_keys"].as_array().is_some_and(|a| !a.is_empty())
        })
        .unwrap();
    let x = bed.x11().unwrap();
    let find = || -> Option<(u32, Rect)> {
        let tree = x.conn.query_tree(x.root).unwrap().reply().unwrap();
        tree.children.iter().find_map(|w| {
            (x.window_title(*w) == "gamepilot indicator").then(|| {
                let g = x.conn.get_geometry(*w).unwrap().reply().unwrap();
                let attrs = x.conn.get_window_attributes(*w).unwrap().reply().unwrap();
                assert!(attrs.override_redirect, "always on top, unmanaged");
                (
                    *w,
                    Rect::new(g.x as i32, g.y as i32, g.width as u32, g.height as u32),
                )
            })
        })
    };
    let (_, at) = find().expect("an indicator window while armed");
    let target = x.client_rect(arena.window.id).unwrap();
    assert!(
        at.intersection(&target).is_none(),
        "indicator {at:?} overlaps the target {target:?}"
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    std::thread::sleep(Duration::from_millis(100));
    assert!(find().is_none(), "the indicator goes away when input is disarmed");
}

#[test]
fn click_travels_a_path_and_activates_a_hover_sensitive_button() {
    // FR-ACT-005 (hover before press, no zero-length press), INV-GND-002 (capture space → screen via the chain)
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    assert_eq!(arena.state().unwrap()["screen"], "menu");
    // The menu's Play button is centred at (640, 330) of the 1280x720 window.
    let s = script(&bed, "click.jsonl", &[r#"{"action":"click","x":640,"y":330}"#]);
    let out = act_cmd(&bed, arena.window.id, &s, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let state = arena
        .wait_for(Duration::from_secs(3), |s| s["screen"] == "play")
        .unwrap();
    assert_eq!(state["clicks"]["Play"], 1, "{}", state["clicks"]);
    assert_eq!(
        state["dropped_clicks"], 0,
        "the click was not debounced or dropped for lack of hover"
    );
}

#[test]
fn focus_on_the_root_window_is_not_the_games() {
    // INV-ACT-001: with the focus on the root, keys reach whatever is under the pointer, not the game
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto::{ConnectionExt as _, InputFocus};
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play(9)).unwrap();
    let x = bed.x11().unwrap();
    assert!(
        x.is_foreground(arena.window.id).unwrap(),
        "the game starts in front"
    );
    // The window manager would hand the focus back at once: the server is grabbed while the guard reads.
    x.conn.grab_server().unwrap();
    x.conn
        .set_input_focus(InputFocus::POINTER_ROOT, x.root, x11rb::CURRENT_TIME)
        .unwrap();
    assert_eq!(x.input_focus().unwrap(), x.root);
    let on_root = x.is_foreground(arena.window.id).unwrap();
    x.conn
        .set_input_focus(InputFocus::POINTER_ROOT, x11rb::NONE, x11rb::CURRENT_TIME)
        .unwrap();
    let on_none = x.is_foreground(arena.window.id).unwrap();
    x.conn.ungrab_server().unwrap();
    x.conn.flush().unwrap();
    assert!(!on_root, "root focus is the desktop's");
    assert!(!on_none, "no focus is nobody's");
}
