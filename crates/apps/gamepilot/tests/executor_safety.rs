//! Integration tests of the release guarantees under Xvfb/Xephyr: core killed (kill -9), core stopped
//! (stale heartbeat → guardian release), panic chord from a second device while the core is stopped, and
//! real user input (the nested Xephyr's own devices) pausing the agent.

// Test helpers outside #[test] functions may unwrap too: this whole file is test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::outer_keys;
use gamepilot_core::Keysym;
use gamepilot_guardian::{send_signal, Signal};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::X11;
use serde_json::Value;
use std::io::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn play() -> ArenaOptions {
    ArenaOptions {
        extra_args: vec!["--start-screen".into(), "play".into()],
        ..Default::default()
    }
}

const HOLD: &[&str] = &[
    r#"{"action":"hold_key","key":"w","duration_ms":8000}"#,
    r#"{"action":"hold_button","button":"left","duration_ms":8000}"#,
];

/// Start `gamepilot act` holding w and the left button; return once the server holds both.
fn start_holding(bed: &TestBed, arena: &Arena) -> (Child, std::path::PathBuf, u8) {
    let p = bed.dir.path().join("hold.jsonl");
    let mut f = std::fs::File::create(&p).unwrap();
    for l in HOLD {
        writeln!(f, "{l}").unwrap();
    }
    let err = bed.dir.path().join("act.stderr");
    let child = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args([
            "act",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{:x}", arena.window.id),
            "--actions",
        ])
        .arg(&p)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let x = bed.x11().unwrap();
    let w = XTestInput::new(&x)
        .unwrap()
        .locate(Keysym('w' as u32))
        .unwrap()
        .keycode;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let h = x.server_held().unwrap();
        if h.keycodes.contains(&w) && h.buttons.contains(&1) {
            break;
        }
        assert!(Instant::now() < deadline, "act never held w + button 1");
        std::thread::sleep(Duration::from_millis(10));
    }
    arena
        .wait_for(Duration::from_secs(3), |s| {
            s["held_keys"].as_array().is_some_and(|a| !a.is_empty())
                && s["buttons_held"].as_array().is_some_and(|a| !a.is_empty())
        })
        .unwrap();
    (child, err, w)
}

fn agent_holds(x: &X11, w: u8) -> bool {
    let h = x.server_held().unwrap();
    h.keycodes.contains(&w) || h.buttons.contains(&1)
}

fn game_released(arena: &Arena) -> Value {
    arena
        .wait_for(Duration::from_secs(3), |s| {
            s["held_keys"].as_array().is_some_and(|a| a.is_empty())
                && s["buttons_held"].as_array().is_some_and(|a| a.is_empty())
        })
        .unwrap()
}

fn reap(mut child: Child) {
    send_signal(child.id(), Signal::Kill);
    let _ = child.wait();
}

#[test]
fn kill_9_of_the_core_leaves_nothing_held_100ms_later() {
    // INV-SAFE-002, FR-SAFE-003
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play()).unwrap();
    let (mut child, _err, w) = start_holding(&bed, &arena);
    let x = bed.x11().unwrap();
    send_signal(child.id(), Signal::Kill);
    std::thread::sleep(Duration::from_millis(100));
    assert!(!agent_holds(&x, w), "still held 100 ms after kill -9");
    let _ = child.wait();
    game_released(&arena);
}

#[test]
fn stopped_core_is_released_by_the_guardian_through_the_stale_heartbeat() {
    // FR-SAFE-003, decisions.md "hung core": the core's connection stays open, so this is the guardian's own
    // release, not the server's.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play()).unwrap();
    let (child, err, w) = start_holding(&bed, &arena);
    let x = bed.x11().unwrap();
    send_signal(child.id(), Signal::Stop);
    let t0 = Instant::now();
    while agent_holds(&x, w) {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "not released by the guardian"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "released before the heartbeat went stale?"
    );
    assert!(
        x.server_held().unwrap().is_empty(),
        "XQueryKeymap shows nothing held"
    );
    game_released(&arena);
    let log = log_once_it_says(&err, "guardian: StaleHeartbeat");
    assert!(log.contains("guardian: StaleHeartbeat"), "{log}");
    // The core wakes up disarmed: it reads the halt flag and stops (exit 2).
    send_signal(child.id(), Signal::Cont);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains(r#""event":"halted""#));
    assert!(x.server_held().unwrap().is_empty());
}

/// The child's log once it contains `needle` (at most 2 s): the guardian writes its line after it
/// released, so under load the line can trail the release the test saw on the server.
fn log_once_it_says(path: &std::path::Path, needle: &str) -> String {
    let t0 = Instant::now();
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        if log.contains(needle) || t0.elapsed() > Duration::from_secs(2) {
            return log;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn panic_chord_from_a_second_device_releases_a_stopped_core() {
    // FR-SAFE-001, NFR-SAFE-001
    let mut bed = TestBed::start_nested().unwrap();
    let arena = Arena::launch(&mut bed, &play()).unwrap();
    let (child, err, w) = start_holding(&bed, &arena);
    let x = bed.x11().unwrap();
    send_signal(child.id(), Signal::Stop);
    let t0 = Instant::now();
    outer_keys(&bed, &["Control_L", "Pause"], true);
    while agent_holds(&x, w) {
        assert!(t0.elapsed() < Duration::from_secs(2), "panic did not release");
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = t0.elapsed();
    outer_keys(&bed, &["Control_L", "Pause"], false);
    let log = log_once_it_says(&err, "guardian: Panic");
    assert!(
        log.contains("guardian: Panic"),
        "released by the panic chord, not the heartbeat ({took:?}): {log}"
    );
    assert!(
        took < Duration::from_millis(250),
        "before any heartbeat backstop: {took:?}"
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        x.server_held().unwrap().is_empty(),
        "nothing held once the user lets go"
    );
    game_released(&arena);
    reap(child);
}

#[test]
fn user_input_from_the_nested_device_pauses_and_releases() {
    // FR-SAFE-002
    let mut bed = TestBed::start_nested().unwrap();
    let arena = Arena::launch(&mut bed, &play()).unwrap();
    let (child, _err, _w) = start_holding(&bed, &arena);
    outer_keys(&bed, &["x"], true);
    outer_keys(&bed, &["x"], false);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "paused by user input");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let paused: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "paused")
        .expect("a paused event");
    assert_eq!(paused["reason"], "user_input");
    assert_eq!(
        paused["input"], "KeyPress",
        "paused by the key the user pressed: {paused}"
    );
    assert!(!paused["device"].as_str().unwrap().contains("XTEST"), "{paused}");
    let x = bed.x11().unwrap();
    assert!(x.server_held().unwrap().is_empty());
    game_released(&arena);
}

#[test]
fn guardian_death_disarms_the_core() {
    // FR-SAFE-003: input never stays armed without its guardian
    use std::io::BufRead as _;
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &play()).unwrap();
    let (mut child, _err, w) = start_holding(&bed, &arena);
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let armed: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(armed["event"], "armed");
    let guardian = armed["guardian_pid"].as_u64().unwrap() as u32;
    send_signal(guardian, Signal::Kill);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let rest: Vec<Value> = stdout
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    assert!(rest.iter().any(|v| v["event"] == "guardian_gone"), "{rest:?}");
    let x = bed.x11().unwrap();
    assert!(!agent_holds(&x, w));
    game_released(&arena);
}
