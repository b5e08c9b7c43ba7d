//! Foundation integration tests under Xvfb: the practice game's window is found, captured non-black and
//! equal to the game's own frame, and a key held through XTest moves the player in the game's own state.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use gamepilot_core::{Keysym, MonoTime};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::WindowCapturer;
use std::time::Duration;

fn start() -> (TestBed, Arena) {
    let mut bed = TestBed::start().expect("start Xvfb test bed");
    let opts = ArenaOptions {
        extra_args: vec!["--start-screen".into(), "play".into()],
        ..ArenaOptions::default()
    };
    let arena = Arena::launch(&mut bed, &opts).expect("launch practice arena");
    (bed, arena)
}

#[test]
fn capture_is_non_black_and_matches_the_games_own_frame() {
    // FR-PERC-001: one window by id, not the desktop.
    let (bed, arena) = start();
    let x = bed.x11().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    arena.request_dump().expect("game dumps its frame");
    let mut cap = WindowCapturer::new(&x, arena.window.id).unwrap();
    let frame = cap.capture(&x, MonoTime::ZERO).unwrap();
    assert!(!frame.view().is_all_black(), "captured frame is all black");
    let own = image::open(&arena.frame_file).expect("game frame png").to_rgba8();
    assert_eq!(
        (own.width(), own.height()),
        (frame.width, frame.height),
        "capture size equals the game's frame"
    );
    let v = frame.view();
    let mut differing = 0u64;
    for y in 0..frame.height {
        for xx in 0..frame.width {
            let p = own.get_pixel(xx, y).0;
            let c = v.rgb(xx, y);
            if (0..3).any(|i| (p[i] as i32 - c[i] as i32).abs() > 2) {
                differing += 1;
            }
        }
    }
    let total = frame.width as u64 * frame.height as u64;
    assert!(
        differing * 1000 < total,
        "{differing} of {total} pixels differ between capture and the game's own frame"
    );
}

#[test]
fn key_held_through_xtest_for_one_second_moves_the_player() {
    let (bed, arena) = start();
    let x = bed.x11().unwrap();
    let before = arena
        .wait_for(Duration::from_secs(5), |s| s["screen"] == "play")
        .expect("play screen");
    let input = XTestInput::new(&x).unwrap();
    let w = input.locate(Keysym::from_name("w").unwrap()).unwrap();
    input.key(&x, w.keycode, true).unwrap();
    input.sync(&x).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let held = arena.state().unwrap();
    input.key(&x, w.keycode, false).unwrap();
    input.sync(&x).unwrap();
    let after = arena
        .wait_for(Duration::from_secs(3), |s| {
            s["held_keys"].as_array().is_some_and(|a| a.is_empty())
        })
        .expect("game sees the release");
    assert!(
        held["held_keys"].as_array().unwrap().iter().any(|k| k == "w"),
        "game saw w held: {held}"
    );
    let dist = |a: &serde_json::Value, b: &serde_json::Value| {
        let dx = a["player"]["x"].as_f64().unwrap() - b["player"]["x"].as_f64().unwrap();
        let dy = a["player"]["y"].as_f64().unwrap() - b["player"]["y"].as_f64().unwrap();
        (dx * dx + dy * dy).sqrt()
    };
    let moved = dist(&before, &after);
    // 200 px/s for ~1 s; allow scheduling slack on a loaded 2-core machine.
    assert!(moved > 120.0 && moved < 320.0, "player moved {moved} px in ~1 s");
    assert_eq!(after["key_events"]["w"]["press"], 1, "one press of w: {after}");
    assert_eq!(
        after["key_events"]["w"]["release"], 1,
        "one release of w: {after}"
    );
    // And nothing is left held on the server.
    assert!(x.server_held().unwrap().is_empty());
    // Stationary after release.
    std::thread::sleep(Duration::from_millis(300));
    let later = arena.state().unwrap();
    assert!(dist(&after, &later) < 1.0, "player keeps moving after release");
}
